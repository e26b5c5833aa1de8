#!/usr/bin/env bash
# The constant-time stage (issue 18; docs/SECURITY.md, "What is proven"): builds aesxfer_ct_tests with
# -DAESXFER_CT_CHECK=ON in build-ct and runs it under valgrind's memcheck with the secrets marked
# undefined. Passes when memcheck reports zero errors for every implementation valgrind can run and
# reports each deliberately leaky canary (ctest -R '^CtCheck\.'). About 4 s under valgrind, 20-30 s
# with the build on a 2-core machine. Needs valgrind (scripts/setup-debian.sh installs it). Extra
# arguments go to cmake (e.g. -DCMAKE_CXX_COMPILER_LAUNCHER=ccache).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build-ct -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAESXFER_WERROR=ON \
  -DAESXFER_CT_CHECK=ON -DAESXFER_BUILD_BENCH=OFF "$@"
cmake --build build-ct -j "$jobs" --target aesxfer_ct_tests
ctest --test-dir build-ct --output-on-failure --no-tests=error -R '^CtCheck\.'
