#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (-fsanitize=fuzzer,address,undefined) in
# build-fuzz/, replays every input of each target's committed corpus (tests/fuzz/corpus/fuzz_<target>,
# the campaign's minimised corpus: scripts/fuzz-campaign.sh), then fuzzes each for FUZZ_SECONDS
# seconds (default 60) from there (the corpus is never modified: new inputs go to build-fuzz/corpus-*).
# Warnings are not errors here (clang does not know some GCC pragmas; the gcc builds use -Werror).
# Prints the executions per target; exits non-zero on the first crash, leak or sanitizer report
# (the reproducer is saved as build-fuzz/crash-* and the log is shown).
#   FUZZ_SECONDS=600 scripts/fuzz.sh            # longer run
#   FUZZ_TARGETS="record" scripts/fuzz.sh        # one target
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/fuzz-targets.sh
secs=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-$FUZZ_ALL_TARGETS}
jobs=$(nproc)
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DAESXFER_FUZZ=ON -DAESXFER_SANITIZE=address,undefined -DAESXFER_WERROR=OFF \
  -DAESXFER_BUILD_TESTS=OFF -DAESXFER_BUILD_BENCH=OFF >/dev/null
# shellcheck disable=SC2086
cmake --build build-fuzz -j "$jobs" --target $(printf 'fuzz_%s ' $targets)
for t in $targets; do
  work=build-fuzz/corpus-$t
  log=build-fuzz/fuzz_$t.log
  mkdir -p "$work"
  max_len=$(fuzz_max_len "$t")
  # Every committed input once (-runs=0 executes the corpus it is given, then stops).
  n=$(find "tests/fuzz/corpus/fuzz_$t" -type f | wc -l)
  if ! build-fuzz/tests/fuzz/fuzz_$t -runs=0 -max_len="$max_len" "tests/fuzz/corpus/fuzz_$t" \
      >"build-fuzz/replay_$t.log" 2>&1; then
    tail -n 60 "build-fuzz/replay_$t.log"
    echo "fuzz_$t: replaying the committed corpus FAILED (log build-fuzz/replay_$t.log)" >&2
    exit 1
  fi
  echo "fuzz_$t: replayed the $n inputs of tests/fuzz/corpus/fuzz_$t"
  if ! build-fuzz/tests/fuzz/fuzz_$t -max_total_time="$secs" -max_len="$max_len" -print_final_stats=1 \
      -artifact_prefix=build-fuzz/ "$work" tests/fuzz/corpus/fuzz_$t >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz_$t: FAILED (log $log)" >&2
    exit 1
  fi
  execs=$(fuzz_execs "$log")
  cov=$(fuzz_edges "$log")
  echo "fuzz_$t: ${execs:-?} executions in ${secs} s, coverage ${cov:-?} edges, no crash"
done
