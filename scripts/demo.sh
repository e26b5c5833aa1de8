#!/usr/bin/env bash
# Sets up and builds aesxfer, starts a server on a free loopback port, sends a 1 GiB file to its
# /dev/null with aes128-cbc and prints the MB/s beside the CPU it ran on, then stops the server
# (by its PID). Installs only what the build and the demo need.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "==== setup"
AESXFER_SETUP_MINIMAL=1 scripts/setup-debian.sh
echo "==== build (build/aesxfer)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAESXFER_BUILD_TESTS=OFF \
  -DAESXFER_BUILD_BENCH=OFF >/dev/null
cmake --build build -j "$(nproc)" --target aesxfer | tail -n 1
work=$(mktemp -d)
export AESXFER_HOME="$work/home"
trap 'kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; rm -rf "$work"' EXIT
echo "==== server: aesxfer serve on 127.0.0.1"
build/aesxfer serve --listen 127.0.0.1 -P 0 --root "$work" --port-file "$work/port" -q &
srv=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
echo "==== transfer: 1 GiB of random data to localhost:/dev/null with aes128-cbc + hmac-sha256"
head -c 1G /dev/urandom > "$work/bigfile" 2>/dev/null || dd if=/dev/urandom of="$work/bigfile" bs=1M count=1024 status=none
build/aesxfer send "$work/bigfile" "localhost:/dev/null" -P "$port" -c aes128-cbc
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "(on ${cpu:-an unknown CPU}, $(nproc) cores, client and server sharing them)"
echo
echo "Next: build/aesxfer --help, or put it on your PATH: sudo install -m 755 build/aesxfer /usr/local/bin/"
echo "(or build a Debian package: cd build && cpack -G DEB && sudo apt install ./aesxfer_*.deb)"
