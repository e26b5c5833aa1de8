# The libFuzzer targets (tests/fuzz/fuzz_NAME.cpp) and what their scripts share; sourced by
# scripts/fuzz.sh (CI) and scripts/fuzz-campaign.sh. A new target is one more name here.
# shellcheck shell=bash
# shellcheck disable=SC2034  # read by the scripts that source this file
FUZZ_ALL_TARGETS="handshake record batch messages parsers differential client"
# The longest input a target is given: a record, a batch or a script of records; else a message.
fuzz_max_len() { case $1 in record | batch | differential | client) echo 65536 ;; *) echo 8192 ;; esac; }
# From a libFuzzer log: its executions, and its last coverage figure (edges).
fuzz_execs() { awk '/stat::number_of_executed_units/ {print $2}' "$1"; }
fuzz_edges() { grep -o 'cov: [0-9]*' "$1" | tail -n 1 | awk '{print $2}'; }
