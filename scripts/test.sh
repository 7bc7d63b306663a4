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
# Every tree is configured, built and tested even if an earlier one failed at
# any of those steps; the exit status says whether all passed, and the last
# line names each tree and step that failed. A failed configure prints its
# whole output. ctest runs with --no-tests=error: a tree whose tests vanished
# (a filter that matches nothing, a CMakeLists that adds none) fails.
# About 6-8 minutes on 2 cores from a fresh tree (apt and three builds included).
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

# run_tree TREE TARGET TESTS CMAKE-ARGS...: configures TREE with CMAKE-ARGS,
# builds TARGET ("" for all) and runs the ctest tests matching the regex
# TESTS ("" for all). A failed step is added to `failed` and ends this tree
# only; its output stays in the log.
run_tree() {
    local tree=$1 target=$2 tests=$3 out
    shift 3
    if ! out=$(cmake -B "$tree" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEAPPROF_WERROR=ON "$@" 2>&1)
    then
        printf '%s\n' "$out"
        echo "=== $tree: configure FAILED"
        failed+=("$tree(configure)")
        return
    fi
    if ! cmake --build "$tree" -j"$jobs" ${target:+--target "$target"}; then
        echo "=== $tree: build FAILED"
        failed+=("$tree(build)")
        return
    fi
    if ! (cd "$tree" && ctest --output-on-failure --no-tests=error --timeout 300 \
        ${tests:+-R "$tests"}); then
        failed+=("$tree(tests)")
    fi
}

echo "=== build: normal build, all tests"
run_tree build "" ""

echo "=== build-asan: daemon and tests under ASan+UBSan, unit and integration tests"
run_tree build-asan "" '^(unit|integration)\.' -DHEAPPROF_SANITIZE=ON

echo "=== build-fuzz: libFuzzer smoke runs"
CC=clang run_tree build-fuzz heapprof_fuzz '^fuzz\.' -DHEAPPROF_FUZZ=ON

if ((${#failed[@]})); then
    echo "FAILED in: ${failed[*]}"
    exit 1
fi
echo "all tests passed in build, build-asan and build-fuzz"
