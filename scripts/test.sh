#!/usr/bin/env bash
# test.sh - installs what is missing, builds everything, and runs every test,
# in three build trees:
#   build       the normal build: unit tests, every integration test against
#               the real kernel (each probe layout and sampler variant), the
#               package's tests, the benchmark's smoke run;
#   build-asan  all but the workloads and benchmark under ASan+UBSan
#               (HEAPPROF_SANITIZE=ON): every unit test, and the integration
#               tests chosen in tests/integration/CMakeLists.txt
#               (HEAPPROF_SANITIZED_TESTS) with the daemon itself sanitized,
#               leaks checked at exit;
#   build-fuzz  clang with libFuzzer (HEAPPROF_FUZZ=ON): a bounded smoke run
#               of each fuzz target over its seed corpus (ctest -R fuzz).
# Every tree is configured, built and tested even if an earlier one failed at
# any of those steps; the exit status says whether all passed, and the last
# line names each tree and step that failed. A failed configure prints its
# whole output. ctest runs with --no-tests=error: a tree whose tests vanished
# (a filter that matches nothing, a CMakeLists that adds none) fails.
# Tests run in parallel (ctest -j, twice the cores: most of their time is
# spent waiting on processes and the kernel), except those marked RUN_SERIAL.
# At the end it prints the ten slowest tests of all trees.
# Time from a fresh clone on 2 shared cores, dependencies installed:
# TIME_MEASURED (three builds and all tests).
# Needs root: the tests load BPF.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs="$(nproc)"
failed=()
start=$SECONDS

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
    # The JUnit file gives each test's time to slowest_tests below.
    rm -f "$tree/ctest-junit.xml"
    if ! (cd "$tree" && ctest --output-on-failure --no-tests=error --timeout 300 \
        -j"$((2 * jobs))" --output-junit ctest-junit.xml ${tests:+-R "$tests"}); then
        failed+=("$tree(tests)")
    fi
}

echo "=== build: normal build, all tests"
# build-asan runs the unit tests sanitized: no _asan copies here.
run_tree build "" "" -DHEAPPROF_UNIT_ASAN=OFF

echo "=== build-asan: daemon and tests under ASan+UBSan, unit and some integration tests"
run_tree build-asan "" '^(unit|integration)\.' -DHEAPPROF_SANITIZE=ON

echo "=== build-fuzz: libFuzzer smoke runs"
CC=clang run_tree build-fuzz heapprof_fuzz '^fuzz\.' -DHEAPPROF_FUZZ=ON

# slowest_tests N TREE...: the N slowest tests of the trees' JUnit files.
slowest_tests() {
    local n=$1
    shift
    python3 - "$n" "$@" <<'PY'
import sys
import xml.etree.ElementTree as ET
n, trees = int(sys.argv[1]), sys.argv[2:]
times = []
for tree in trees:
    try:
        root = ET.parse(f"{tree}/ctest-junit.xml").getroot()
    except (OSError, ET.ParseError):
        continue
    for case in root.iter("testcase"):
        times.append((float(case.get("time", 0)), tree, case.get("name")))
for seconds, tree, name in sorted(times, reverse=True)[:n]:
    print(f"  {seconds:7.1f} s  {tree}: {name}")
PY
}

echo "=== the ten slowest tests"
slowest_tests 10 build build-asan build-fuzz || true
elapsed=$((SECONDS - start))
echo "=== total: $((elapsed / 60))m$((elapsed % 60))s"
if ((${#failed[@]})); then
    echo "FAILED in: ${failed[*]}"
    exit 1
fi
echo "all tests passed in build, build-asan and build-fuzz"
