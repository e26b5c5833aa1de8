#!/usr/bin/env bash
# What the committed fuzz corpora reach (issue 28): builds the libFuzzer targets with clang's
# source-based coverage (-fprofile-instr-generate -fcoverage-mapping) in build-cov/, replays every
# input of tests/fuzz/corpus/fuzz_<target> once (-runs=0: no fuzzing, so the figures are the
# corpus's own and the same on every run), merges the profiles and prints line and branch
# coverage per folder of the product (crypto/, proto/, files/, client/, net/), then per file for
# the parsers of outside input, then the totals. The test and fuzz harness files are not counted.
#   scripts/fuzz-coverage.sh                 # every target
#   FUZZ_TARGETS="parsers" scripts/fuzz-coverage.sh
#   COVERAGE_SHOW=proto/messages.cpp scripts/fuzz-coverage.sh   # also the file's unreached lines
# Needs clang, llvm-profdata and llvm-cov (Debian: clang, llvm) and python3 for the table.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/fuzz-targets.sh
targets=${FUZZ_TARGETS:-$FUZZ_ALL_TARGETS}
jobs=$(nproc)
cov_flags="-fprofile-instr-generate -fcoverage-mapping"
cmake -S . -B build-cov -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DAESXFER_FUZZ=ON -DAESXFER_SANITIZE= -DAESXFER_WERROR=OFF -DAESXFER_BUILD_TESTS=OFF \
  -DAESXFER_BUILD_BENCH=OFF "-DCMAKE_CXX_FLAGS=$cov_flags" \
  "-DCMAKE_EXE_LINKER_FLAGS=-fprofile-instr-generate" >/dev/null
# shellcheck disable=SC2046,SC2086
cmake --build build-cov -j "$jobs" --target $(printf 'fuzz_%s ' $targets)
rm -rf build-cov/profiles
mkdir -p build-cov/profiles
objects=()
for t in $targets; do
  bin=build-cov/tests/fuzz/fuzz_$t
  corpus=tests/fuzz/corpus/fuzz_$t
  n=$(find "$corpus" -type f | wc -l)
  # One profile per target: the replay is one process.
  if ! LLVM_PROFILE_FILE="build-cov/profiles/$t.profraw" "$bin" -runs=0 -max_len="$(fuzz_max_len "$t")" \
      "$corpus" >"build-cov/replay_$t.log" 2>&1; then
    tail -n 40 "build-cov/replay_$t.log"
    echo "fuzz-coverage.sh: replaying $corpus with fuzz_$t failed" >&2
    exit 1
  fi
  echo "fuzz_$t: replayed $n inputs"
  objects+=(-object "$bin")
done
llvm-profdata merge -sparse build-cov/profiles/*.profraw -o build-cov/corpora.profdata
# The product's sources only: the harness (tests/) and system headers are left out.
ignore='(^|/)(tests|usr)/|/build-cov/'
llvm-cov export -summary-only -format=text -instr-profile=build-cov/corpora.profdata \
  -ignore-filename-regex="$ignore" "${objects[@]}" >build-cov/summary.json
python3 - "$PWD" build-cov/summary.json <<'EOF'
import json, sys
root, path = sys.argv[1].rstrip('/') + '/', sys.argv[2]
files = json.load(open(path))['data'][0]['files']
# The parsers of outside input: all of proto/ (the wire) and the parsers of what users write.
parsers = ['client/config.cpp', 'client/remote.cpp', 'files/keystore.cpp']
folders, rows = {}, {}
for f in files:
    name = f['filename'][len(root):] if f['filename'].startswith(root) else f['filename']
    s = f['summary']
    row = (s['lines']['count'], s['lines']['covered'], s['branches']['count'], s['branches']['covered'])
    rows[name] = row
    top = name.split('/')[0] + '/' if '/' in name else name
    acc = folders.setdefault(top, [0, 0, 0, 0])
    for i in range(4):
        acc[i] += row[i]
def pct(a, b):
    return '%6.1f %%' % (100.0 * b / a) if a else '     - '
def line(label, r):
    print('%-26s %6d %6d %s  %6d %6d %s' % (label, r[0], r[1], pct(r[0], r[1]), r[2], r[3], pct(r[2], r[3])))
print('%-26s %6s %6s %8s  %6s %6s %8s' % ('folder', 'lines', 'hit', 'lines', 'branch', 'hit', 'branches'))
for k in sorted(folders):
    line(k, folders[k])
print()
print('%-26s %6s %6s %8s  %6s %6s %8s' % ('parser', 'lines', 'hit', 'lines', 'branch', 'hit', 'branches'))
for p in sorted(n for n in rows if n.startswith('proto/')) + parsers:
    if p in rows:
        line(p, rows[p])
total = [sum(r[i] for r in folders.values()) for i in range(4)]
print()
line('all reached code', total)
EOF
if [ -n "${COVERAGE_SHOW:-}" ]; then
  # The first binary goes first without -object: llvm-cov show takes its first positional
  # argument for the binary, and a source file there was read as one ("not a valid object file").
  llvm-cov show -instr-profile=build-cov/corpora.profdata -show-line-counts -region-coverage-lt=100 \
    "${objects[1]}" "${objects[@]:2}" "$COVERAGE_SHOW" | grep -E '^ +[0-9]+\| +0\|' || true
fi
