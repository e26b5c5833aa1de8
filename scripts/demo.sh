#!/usr/bin/env bash
# Sets up and builds aesxfer, starts a server on a free loopback port, sends a 1 GiB file to its
# /dev/null with aes128-cbc and prints the MB/s, then stops the server (by its PID).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-debian.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target aesxfer
work=$(mktemp -d)
export AESXFER_HOME="$work/home"
trap 'kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; rm -rf "$work"' EXIT
build/aesxfer serve --listen 127.0.0.1 -p 0 --root "$work" --port-file "$work/port" -q &
srv=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
head -c 1G /dev/urandom > "$work/bigfile" 2>/dev/null || dd if=/dev/urandom of="$work/bigfile" bs=1M count=1024 status=none
build/aesxfer send "$work/bigfile" "localhost:/dev/null" -P "$port" -c aes128-cbc
