#!/usr/bin/env bash
# Compare the ciphers on this machine, end to end and raw, and keep the results:
#
#   scripts/compare-ciphers.sh [path/to/aesxfer] [HOST]        (default build/aesxfer, local server)
#
# Runs, on an already built binary:
#   aesxfer bench [HOST] --json --plot   every cipher sent to HOST:/dev/null (no HOST: a local
#                                        server child on 127.0.0.1), with and without AES-NI
#   aesxfer speed --json --plot          the raw primitives over block sizes 16 B .. 1 MiB
# and writes into results/<date>-<hostname>/:
#   bench.json  bench.csv  bench.svg     (CSV columns: cipher,mac,impl,no_aesni,mb_per_s_median,
#   speed.json  speed.csv  speed.svg      mb_per_s_min,mb_per_s_max,client_cpu_pct,server_cpu_pct,verdict;
#   env.txt                               speed.csv: cipher,op,lanes,impl,block_size,mb_per_s)
#
# Environment: SIZE (bytes per transfer, default 1G), REPEAT (default 3), CIPHERS (comma list,
# default all), PORT (remote HOST's port, default 7227), SPEED_SECONDS (per speed cell, default
# 0.5), NO_AESNI_TOO (1 = also without AES-NI, default 1).
# Takes a few minutes with the defaults: the portable (--no-aesni) AES rows move 1 GiB at tens of
# MB/s; SIZE=256M makes it about four times quicker.
# CSV from JSON needs python3; without it bench runs a second time with --csv.
set -euo pipefail

BIN=${1:-build/aesxfer}
HOST=${2:-}
SIZE=${SIZE:-1G}
REPEAT=${REPEAT:-3}
CIPHERS=${CIPHERS:-}
PORT=${PORT:-7227}
SPEED_SECONDS=${SPEED_SECONDS:-0.5}
NO_AESNI_TOO=${NO_AESNI_TOO:-1}

[ -x "$BIN" ] || { echo "aesxfer binary not found or not executable: $BIN (build it, or pass its path as \$1)" >&2; exit 1; }

OUT="results/$(date -u +%Y-%m-%d)-$(hostname -s 2>/dev/null || hostname)"
mkdir -p "$OUT"

bench_args=(bench --size "$SIZE" --repeat "$REPEAT")
[ -n "$HOST" ] && bench_args+=("$HOST" -P "$PORT")
[ -n "$CIPHERS" ] && bench_args+=(-c "$CIPHERS")
[ "$NO_AESNI_TOO" = 1 ] && bench_args+=(--no-aesni-too)
speed_args=(speed --seconds "$SPEED_SECONDS")
[ -n "$CIPHERS" ] && speed_args+=(-c "$CIPHERS")

{
  echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:    $(hostname)"
  echo "kernel:  $(uname -srm)"
  echo "cpu:     $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')"
  echo "cpus:    $(nproc)"
  echo "load:    $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
  echo "binary:  $BIN ($("$BIN" --version))"
  echo "bench:   aesxfer ${bench_args[*]}"
  echo "speed:   aesxfer ${speed_args[*]}"
} > "$OUT/env.txt"

echo "== aesxfer ${bench_args[*]}" >&2
"$BIN" "${bench_args[@]}" --json --plot "$OUT/bench.svg" > "$OUT/bench.json"

echo "== aesxfer ${speed_args[*]}" >&2
"$BIN" "${speed_args[@]}" --json --plot "$OUT/speed.svg" > "$OUT/speed.json"

if command -v python3 >/dev/null; then
  python3 - "$OUT" <<'EOF'
import csv, json, sys
out = sys.argv[1]
bench = json.load(open(f"{out}/bench.json"))
cols = ["cipher", "mac", "impl", "no_aesni", "mb_per_s_median", "mb_per_s_min", "mb_per_s_max",
        "client_cpu_pct", "server_cpu_pct", "verdict"]
def cell(c, v):  # as `aesxfer bench --csv` writes them
    if v is None: return "n/a"
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, (int, float)): return f"{v:.1f}" if c.endswith("cpu_pct") else f"{v:.2f}"
    return v
with open(f"{out}/bench.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(cols)
    for r in bench["rows"]:
        w.writerow([cell(c, r[c]) for c in cols])
speed = json.load(open(f"{out}/speed.json"))
with open(f"{out}/speed.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["cipher", "op", "lanes", "impl", "block_size", "mb_per_s"])
    for r in speed["results"]:
        w.writerow([r["cipher"], r["op"], r.get("lanes", ""), r["impl"], r["block_size"], r["mb_per_s"]])
EOF
else
  echo "== python3 not found: running bench again for the CSV" >&2
  "$BIN" "${bench_args[@]}" --csv -q > "$OUT/bench.csv"
fi

echo "wrote:" >&2
ls -l "$OUT" >&2
column -s, -t < "$OUT/bench.csv" 2>/dev/null || cat "$OUT/bench.csv"
