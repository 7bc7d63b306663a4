#!/usr/bin/env bash
# test.sh - installs what is missing, builds everything, and runs every test,
# in three build trees:
#   build       the normal build: unit tests (plain and under ASan/UBSan),
#               integration tests against the real kernel, the benchmark's
#               smoke run;
#   build-asan  all but the workloads and benchmark under ASan+UBSan
#               (HEAPPROF_SANITIZE=ON): the unit tests, and the integration
#               tests with the daemon itself sanitized, leaks checked at exit;
#   build-fuzz  clang with libFuzzer (HEAPPROF_FUZZ=ON): a bounded smoke run
#               of each fuzz target over its seed corpus (ctest -R fuzz).
# Every tree's tests run even if an earlier tree's failed; the exit status
# says whether all passed. About 6 minutes on 2 cores from a fresh tree
# (measured 5 min 54 s, apt and three builds included).
# Needs root: the tests load BPF.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs="$(nproc)"
failed=()

# The sanitizers' settings for build-asan; ctest hands them to the tests, and
# the integration tests to the daemon. Leaks are reported when the daemon
# exits on SIGTERM; a report on its stderr fails the test (heapprof_harness.py).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

echo "=== build: normal build, all tests"
cmake -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEAPPROF_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure --timeout 300) || failed+=(build)

echo "=== build-asan: daemon and tests under ASan+UBSan, unit and integration tests"
cmake -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEAPPROF_WERROR=ON \
    -DHEAPPROF_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ctest --output-on-failure --timeout 300 -R '^(unit|integration)\.') ||
    failed+=(build-asan)

echo "=== build-fuzz: libFuzzer smoke runs"
CC=clang cmake -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEAPPROF_WERROR=ON \
    -DHEAPPROF_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$jobs" --target heapprof_fuzz
(cd build-fuzz && ctest --output-on-failure -R '^fuzz\.') || failed+=(build-fuzz)

if ((${#failed[@]})); then
    echo "FAILED in: ${failed[*]}"
    exit 1
fi
echo "all tests passed in build, build-asan and build-fuzz"
