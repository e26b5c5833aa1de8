#!/usr/bin/env bash
# The fuzzing campaign (issue 28): runs each target until CAMPAIGN_EXECS executions (default ten
# million) or CAMPAIGN_SECONDS (default 1800) have passed, whichever comes first, from its committed
# corpus; then minimises what it had and what it found (-merge=1) and writes the result back to
# tests/fuzz/corpus/fuzz_<target> (commit it). Prints one line per target: executions, seconds,
# rate, coverage (edges), corpus size before and after. A crash stops the campaign with the
# reproducer in build-fuzz/ (make it a regression input and a unit test).
#   scripts/fuzz-campaign.sh                        # every target, one after the other
#   scripts/fuzz-campaign.sh messages parsers       # some
#   CAMPAIGN_SECONDS=60 scripts/fuzz-campaign.sh    # a short trial
# Build with scripts/fuzz.sh first (FUZZ_SECONDS=1 scripts/fuzz.sh builds and checks every target).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/fuzz-targets.sh
execs=${CAMPAIGN_EXECS:-10000000}
secs=${CAMPAIGN_SECONDS:-1800}
targets=("$@")
# shellcheck disable=SC2206
[ ${#targets[@]} -gt 0 ] || targets=($FUZZ_ALL_TARGETS)
printf '%-13s %10s %7s %9s %6s %s\n' target executions seconds "execs/s" edges "corpus before -> after"
for t in "${targets[@]}"; do
  bin=build-fuzz/tests/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz-campaign.sh: $bin not built (run scripts/fuzz.sh)" >&2; exit 1; }
  max_len=$(fuzz_max_len "$t")
  corpus=tests/fuzz/corpus/fuzz_$t
  work=build-fuzz/campaign-$t
  log=build-fuzz/campaign-$t.log
  rm -rf "$work" "$work.min"
  mkdir -p "$work" "$work.min"
  before=$(find "$corpus" -type f | wc -l)
  t0=$(date +%s)
  if ! "$bin" -runs="$execs" -max_total_time="$secs" -max_len="$max_len" -print_final_stats=1 \
      -artifact_prefix=build-fuzz/ "$work" "$corpus" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz_$t: FAILED (log $log; reproducer build-fuzz/crash-* or leak-*)" >&2
    exit 1
  fi
  took=$(( $(date +%s) - t0 ))
  n=$(fuzz_execs "$log")
  edges=$(fuzz_edges "$log")
  # The smallest set of inputs that reaches every edge the old corpus and the new inputs reach.
  "$bin" -merge=1 -max_len="$max_len" "$work.min" "$corpus" "$work" >"$log.merge" 2>&1
  rm -rf "$corpus"
  mv "$work.min" "$corpus"
  after=$(find "$corpus" -type f | wc -l)
  printf '%-13s %10s %7s %9s %6s %s -> %s\n' "fuzz_$t" "$n" "$took" "$(( n / (took > 0 ? took : 1) ))" \
    "$edges" "$before" "$after"
done
