#!/bin/sh
# Runs one deliberately leaky test of aesxfer_ct_tests under memcheck and passes only if memcheck
# reports the expected kind of error inside the leaky function (valgrind exits 99) while the test
# itself passes: the constant-time check must catch what it is there to catch.
# Usage: expect_memcheck_error.sh VALGRIND CT_TEST_BINARY GTEST_NAME FUNCTION MESSAGE
set -u
valgrind=$1 bin=$2 test=$3 func=$4 msg=$5
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$valgrind" --tool=memcheck --leak-check=no --error-exitcode=99 "$bin" --gtest_filter="$test" >"$log" 2>&1
rc=$?
cat "$log"
if [ "$rc" -ne 99 ]; then
  echo "FAIL: valgrind exited with $rc, expected 99 (memcheck errors): the leak in $func went unnoticed"
  exit 1
fi
grep -q "$msg" "$log" || { echo "FAIL: memcheck did not report \"$msg\""; exit 1; }
grep -A8 "$msg" "$log" | grep -q "$func" || { echo "FAIL: the report does not point at $func"; exit 1; }
grep -q "\[  PASSED  \] 1 test" "$log" || { echo "FAIL: $test itself did not pass"; exit 1; }
echo "OK: memcheck reported \"$msg\" in $func, as it must"
