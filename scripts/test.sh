#!/usr/bin/env bash
# test.sh - installs what is missing, builds everything, and runs every test,
# in four build trees:
#   build       the normal build: unit tests, every integration test against
#               the real kernel (each probe layout and sampler variant), the
#               package's tests, the benchmark's smoke run;
#   build-asan  all but the workloads and benchmark under ASan+UBSan
#               (HEAPPROF_SANITIZE=ON): every unit test, and the integration
#               tests chosen in tests/integration/CMakeLists.txt
#               (HEAPPROF_SANITIZED_TESTS) with the daemon itself sanitized,
#               leaks checked at exit;
#   build-fuzz  clang with libFuzzer (HEAPPROF_FUZZ=ON): a bounded smoke run
#               of each fuzz target over its seed corpus (ctest -R fuzz);
#   build-tsan  the daemon and the unit tests under ThreadSanitizer
#               (HEAPPROF_TSAN=ON): every unit test, and the integration
#               tests chosen in tests/integration/CMakeLists.txt
#               (HEAPPROF_TSAN_TESTS), which fail on a race or a lock-order
#               inversion the daemon reports.
# Every tree is configured, built and tested even if an earlier one failed at
# any of those steps; the exit status says whether all passed, and the last
# line names each tree and step that failed. A failed configure prints its
# whole output. ctest runs with --no-tests=error: a tree whose tests vanished
# (a filter that matches nothing, a CMakeLists that adds none) fails.
# The normal tree is built first; while its tests run (two per core: most of
# their time is spent waiting on processes and the kernel), build-asan,
# build-fuzz and build-tsan are built and tested in the background, their
# output printed once they are done. Then Debian's kernels boot under qemu
# (label kernel), one per core, once the other trees are done, and the tests
# labelled serial (RUN_SERIAL: they time something) run alone. At the end: the ten slowest
# tests of all trees, and the total time.
# Time from a fresh clone on 2 cores shared with other work, dependencies
# installed (npm ci and three builds included): 7m53s (1-minute load 2-12,
# median 7); 8m46s at load 3-26 (median 15) with integration.inprocess
# beside the others. The same tests run one by one took 16 minutes for the
# normal tree alone. The slowest, from the 7m53s run: inprocess 87 s, access
# 65 s (72 s under ASan), runtimes 52 s, diagnostics 51 s (57 s under ASan).
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
# build-tsan's: a second stack for each lock-order inversion. A report makes
# a unit test exit non-zero (TSan's exitcode) and fails an integration test
# (the harness reads the daemon's stderr).
export TSAN_OPTIONS="second_deadlock_stack=1"

# build_tree TREE TARGET CMAKE-ARGS...: configures TREE with CMAKE-ARGS and
# builds TARGET ("" for all). A failed step is added to `failed` (and to
# $failed_file, for a caller in a subshell) and returns 1; its output stays
# in the log.
build_tree() {
    local tree=$1 target=$2 out
    shift 2
    rm -f "$tree"/ctest-junit-*.xml
    if ! out=$(cmake -B "$tree" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEAPPROF_WERROR=ON \
        -DHEAPPROF_TEST_HOOKS=ON "$@" 2>&1)
    then
        printf '%s\n' "$out"
        echo "=== $tree: configure FAILED"
        note_failed "$tree(configure)"
        return 1
    fi
    if ! cmake --build "$tree" -j"$jobs" ${target:+--target "$target"}; then
        echo "=== $tree: build FAILED"
        note_failed "$tree(build)"
        return 1
    fi
}

# test_tree TREE NAME CTEST-ARGS...: runs ctest in TREE with CTEST-ARGS
# (which select the tests), NAME naming this run's JUnit file, which gives
# each test's time to slowest_tests below.
test_tree() {
    local tree=$1 name=$2
    shift 2
    rm -f "$tree/ctest-junit-$name.xml"
    if ! (cd "$tree" && ctest --output-on-failure --no-tests=error --timeout 300 \
        --output-junit "ctest-junit-$name.xml" "$@"); then
        note_failed "$tree(tests $name)"
    fi
}

failed_file=$(mktemp)
trap 'rm -f "$failed_file"' EXIT
note_failed() {
    failed+=("$1")
    echo "$1" >>"$failed_file"
}

# The normal tree's tests that may run beside others (all but those labelled
# serial, which time something) take most of the time, mostly waiting on
# processes and the kernel: build-asan, build-fuzz and build-tsan are built
# and tested meanwhile, in the background, their output kept for after.
# Then the serial tests run alone. Tests run two per core.
echo "=== build: normal build"
# build-asan runs the unit tests sanitized: no _asan copies here.
build_ok=0
build_tree build "" -DHEAPPROF_UNIT_ASAN=OFF && build_ok=1

others_log=$(mktemp)
(
    echo "=== build-asan: daemon and tests under ASan+UBSan, unit and some integration tests"
    build_tree build-asan "" -DHEAPPROF_SANITIZE=ON &&
        test_tree build-asan all -j"$jobs" -R '^(unit|integration)\.'
    echo "=== build-fuzz: libFuzzer smoke runs"
    CC=clang build_tree build-fuzz heapprof_fuzz -DHEAPPROF_FUZZ=ON &&
        test_tree build-fuzz all -j"$jobs" -R '^fuzz\.'
) >"$others_log" 2>&1 &
others=$!
# build-tsan beside them rather than after: most of its time (383 s alone
# from a fresh tree at load 10-20, 115 s of it CPU) is its tests waiting on
# processes and the kernel.
tsan_log=$(mktemp)
(
    echo "=== build-tsan: daemon and tests under ThreadSanitizer, unit and some integration tests"
    build_tree build-tsan "" -DHEAPPROF_TSAN=ON &&
        test_tree build-tsan all -j"$jobs" -R '^(unit|integration)\.'
) >"$tsan_log" 2>&1 &
tsan=$!

if ((build_ok)); then
    echo "=== build: all tests but the serial ones and the kernel boots" \
        "(build-asan, build-fuzz, build-tsan meanwhile)"
    test_tree build parallel -j"$((2 * jobs))" -LE 'serial|kernel'
fi
wait "$others" || true
wait "$tsan" || true
cat "$others_log" "$tsan_log"
rm -f "$others_log" "$tsan_log"
if ((build_ok)); then
    # The kernels under qemu (tests/kernels) after every other tree's tests:
    # each guest keeps a core busy for minutes (TCG, the verifier's loads).
    # Beside the other tests they starved those tests' daemons past the
    # harness's wait to listen, and a TSan daemon past a 6 s bound (both
    # seen in CI runs).
    echo "=== build: Debian's kernels booted under qemu, one core each"
    test_tree build kernels -j"$jobs" -L kernel
    echo "=== build: the serial tests, alone"
    # -FS: the .deb that package.install needs was made in the run above.
    test_tree build serial -L serial -FS heapprofd_deb
fi
mapfile -t failed <"$failed_file"

# slowest_tests N TREE...: the N slowest tests of the trees' JUnit files.
slowest_tests() {
    local n=$1
    shift
    python3 - "$n" "$@" <<'PY'
import glob
import sys
import xml.etree.ElementTree as ET
n, trees = int(sys.argv[1]), sys.argv[2:]
times = []
for tree in trees:
    for path in glob.glob(f"{tree}/ctest-junit-*.xml"):
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError:
            continue
        for case in root.iter("testcase"):
            times.append((float(case.get("time", 0)), tree, case.get("name")))
for seconds, tree, name in sorted(times, reverse=True)[:n]:
    print(f"  {seconds:7.1f} s  {tree}: {name}")
PY
}

echo "=== the ten slowest tests"
slowest_tests 10 build build-asan build-fuzz build-tsan || true
elapsed=$((SECONDS - start))
echo "=== total: $((elapsed / 60))m$((elapsed % 60))s"
if ((${#failed[@]})); then
    echo "FAILED in: ${failed[*]}"
    exit 1
fi
echo "all tests passed in build, build-asan, build-fuzz and build-tsan"
