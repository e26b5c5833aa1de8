#!/usr/bin/env bash
# Installs what aesxfer needs to build, test and benchmark on Debian 12. Idempotent.
set -euo pipefail
# openssh-client and openssh-server: `aesxfer bench --vs-scp` and its tests (tests/e2e/bench_test.cpp)
# run scp against a throwaway sshd on 127.0.0.1; the tests fail without them.
# python3-cryptography: tests/protocol_vectors.py, the second derivation of PROTOCOL.md section 6.
# btrfs-progs: a loop-mounted btrfs image in tests/e2e/server_modes_test.cpp (directories of one link).
pkgs=(build-essential cmake ninja-build pkg-config git btrfs-progs
      libboost-dev libsodium-dev libcli11-dev libgtest-dev libxxhash-dev xxhash
      libssl-dev openssl iproute2 clang libclang-rt-14-dev valgrind
      dpkg-dev lintian systemd openssh-client openssh-server iperf3 librsvg2-bin python3 python3-cryptography nlohmann-json3-dev
      clang-format universal-ctags)
# AESXFER_SETUP_MINIMAL=1 (scripts/demo.sh): only what building the binary needs.
if [ "${AESXFER_SETUP_MINIMAL:-}" = 1 ]; then
  pkgs=(build-essential cmake ninja-build pkg-config libboost-dev libsodium-dev libcli11-dev libxxhash-dev
        nlohmann-json3-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==== setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  log=$(mktemp)
  # apt's own chatter goes to a log that is shown only when something fails.
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "setup-debian.sh: apt-get failed (above)" >&2
    exit 1
  fi
  rm -f "$log"
else
  echo "==== setup: every Debian package needed is installed"
fi
