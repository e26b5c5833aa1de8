#!/usr/bin/env bash
# Installs what aesxfer needs to build, test and benchmark on Debian 12. Idempotent.
set -euo pipefail
# openssh-client and openssh-server: `aesxfer bench --vs-scp` and its tests (tests/bench_test.cpp)
# run scp against a throwaway sshd on 127.0.0.1; the tests fail without them.
pkgs=(build-essential cmake ninja-build pkg-config git
      libboost-dev libsodium-dev libcli11-dev libgtest-dev libxxhash-dev xxhash
      libssl-dev openssl iproute2 clang libclang-rt-14-dev valgrind
      dpkg-dev lintian systemd openssh-client openssh-server)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
