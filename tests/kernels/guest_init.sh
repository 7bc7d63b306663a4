#!/bin/sh
# guest_init.sh - /init of the qemu boot test's initramfs (boot_test.sh):
# on the kernel under test, runs heapprofd on each sampler against the
# exact workload at --sample-interval 1 and checks the totals per leaf
# function, checks the index's JSON, and that a fork child of a profiled
# process is followed. busybox sh: the guest has nothing else.
#
# Every check prints "HPK-CHECK PASS|FAIL <name>: <detail>" and the last
# line is "HPK-RESULT PASS" or "HPK-RESULT FAIL"; the host parses these.
# The guest powers itself off at the end, whatever happened.
export PATH=/bin
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t bpf bpf /sys/fs/bpf
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
ip link set lo up
HP=/opt/heapprof
URL=http://127.0.0.1:6060
failed=0
echo "HPK-KERNEL $(uname -r)"

# Prints a step with the guest's uptime, so that a slow or stuck step shows.
step() { echo "HPK-STEP $(cut -d' ' -f1 /proc/uptime) $*"; }

check() { # check NAME OK DETAIL
    if [ "$2" = 1 ]; then echo "HPK-CHECK PASS $1: $3"; else echo "HPK-CHECK FAIL $1: $3"; failed=1; fi
}

# Waits (at most $2 tenths of a second) until the file $1 has a line matching $3.
wait_line() {
    i=0
    while [ $i -lt "$2" ]; do
        grep -q "$3" "$1" 2>/dev/null && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

# Prefixes each line with the guest's uptime: where a slow start spends it.
stamp() {
    while IFS= read -r line; do echo "$(cut -d' ' -f1 /proc/uptime) $line"; done
}

start_daemon() { # start_daemon SAMPLER
    rm -f /tmp/dlog; mkfifo /tmp/dlog
    : >/tmp/daemon.log # emptied here: the last daemon's lines must not count
    stamp </tmp/dlog >>/tmp/daemon.log &
    HEAPPROFD_DEBUG_BPF=1 $HP/heapprofd --sample-interval 1 --sampler "$1" --pin-dir none \
        --history-interval 0 --open-loopback >/tmp/dlog 2>&1 &
    daemon=$!
    if ! wait_line /tmp/daemon.log 600 'listening on'; then
        echo "heapprofd did not start; its log:"; tail -n 60 /tmp/daemon.log
        kill $daemon 2>/dev/null
        return 1
    fi
    grep -m1 'heapprofd: probes attach' /tmp/daemon.log | sed 's/^/HPK-LOG /'
    return 0
}

# Reaps child $1 if it exits within 20 s; else kills it and fails check $2.
reap() { # reap PID CHECK
    i=0
    while [ $i -lt 200 ] && ! grep -q '^State:.*Z' /proc/$1/status 2>/dev/null; do
        [ -d /proc/$1 ] || break
        sleep 0.1; i=$((i + 1))
    done
    if [ $i -ge 200 ]; then
        check "$2" 0 "process $1 still running 20 s later"
        kill -9 $1 2>/dev/null
    fi
    wait $1 2>/dev/null
}

# Stops the daemon, then shows its log lines with the uptime of each.
stop_daemon() { # stop_daemon SAMPLER
    kill $daemon 2>/dev/null
    reap $daemon "stop.$1"
    grep 'heapprofd:' /tmp/daemon.log | sed 's/^/HPK-DAEMON /'
}

# Sums a folded profile's values by leaf (the last frame of each line).
sum_by_leaf() {
    awk '{ v = $NF; sub(/ [0-9-]+$/, ""); n = split($0, f, ";"); s[f[n]] += v }
         END { for (k in s) print k, s[k] }'
}

# The exact workload's expected totals: leaf alloc_objects alloc_space
# inuse_objects inuse_space (as tests/integration/test_exact.py tables them).
EXPECTED='alloc_small 1000 100000 1000 100000
alloc_big 10 1000000 10 1000000
alloc_freed 500 32000 0 0
alloc_calloc 200 40000 200 40000
alloc_realloc 200 31000 100 30000
alloc_realloc_null 50 6400 50 6400
alloc_posix_memalign 20 5120 20 5120
alloc_aligned 30 15360 30 15360
alloc_reallocarray 40 5120 40 5120'

exact_totals() { # exact_totals SAMPLER
    rm -f /tmp/in /tmp/out; mkfifo /tmp/in
    $HP/exact </tmp/in >/tmp/out 2>&1 &
    w=$!
    exec 3>/tmp/in
    wait_line /tmp/out 100 '^ready' || { check "exact.$1" 0 "workload not ready"; exec 3>&-; return; }
    pid=$(awk '/^ready/ {print $2; exit}' /tmp/out)
    timeout 60 wget -q -O /dev/null "$URL/debug/pprof/heap?pid=$pid" || { check "exact.$1" 0 "attach to $pid failed"; tail -n 30 /tmp/daemon.log; exec 3>&-; return; }
    echo go >&3
    wait_line /tmp/out 600 '^done' || { check "exact.$1" 0 "workload not done"; exec 3>&-; return; }
    : >/tmp/got
    for idx in alloc_objects alloc_space inuse_objects inuse_space; do
        timeout 60 wget -q -O /tmp/folded "$URL/debug/pprof/heap?pid=$pid&format=folded&sample_index=$idx"
        sum_by_leaf </tmp/folded | sed "s/\$/ $idx/" >>/tmp/got
    done
    exec 3>&-
    reap $w "exit.exact.$1"
    bad=""
    echo "$EXPECTED" | while read fn a b c d; do
        got=""
        for idx in alloc_objects alloc_space inuse_objects inuse_space; do
            v=$(awk -v f="$fn" -v i="$idx" '$1 == f && $3 == i {print $2}' /tmp/got)
            got="$got ${v:-0}"
        done
        [ "$got" = " $a $b $c $d" ] || echo "$fn: want $a $b $c $d, got$got"
    done >/tmp/bad
    if [ -s /tmp/bad ]; then
        check "exact.$1" 0 "totals differ: $(tr '\n' ';' </tmp/bad)"
        grep -v '^$' /tmp/got | sed 's/^/HPK-GOT /'
    else
        check "exact.$1" 1 "9 functions x 4 totals exact"
    fi
}

# A fork child of a profiled process is attached by the daemon itself (it
# shows in the index's JSON before anyone asks for it) and its profile has
# the child's own allocations.
fork_child() { # fork_child SAMPLER
    rm -f /tmp/fin /tmp/fout; mkfifo /tmp/fin
    $HP/forker </tmp/fin >/tmp/fout 2>&1 &
    w=$!
    exec 4>/tmp/fin
    wait_line /tmp/fout 100 '^ready' || { check "fork.$1" 0 "forker not ready"; exec 4>&-; return; }
    pid=$(awk '/^ready/ {print $2; exit}' /tmp/fout)
    timeout 60 wget -q -O /dev/null "$URL/debug/pprof/heap?pid=$pid"
    echo fork >&4
    wait_line /tmp/fout 100 '^child' || { check "fork.$1" 0 "no child"; exec 4>&-; return; }
    child=$(awk '/^child/ {print $2; exit}' /tmp/fout)
    listed=0
    i=0
    while [ $i -lt 100 ]; do
        timeout 60 wget -q -O /tmp/index.json "$URL/debug/pprof/?format=json"
        grep -q "\"pid\": $child," /tmp/index.json && { listed=1; break; }
        sleep 0.1; i=$((i + 1))
    done
    check "json.$1" "$listed" "child $child in /debug/pprof/?format=json ($(wc -c </tmp/index.json) bytes)"
    sleep 0.5
    timeout 60 wget -q -O /tmp/child.folded "$URL/debug/pprof/heap?pid=$child&format=folded&sample_index=alloc_objects"
    n=$(sum_by_leaf </tmp/child.folded | awk '$1 == "child_allocates" {print $2}')
    [ "${n:-0}" -gt 0 ] && ok=1 || ok=0
    check "fork.$1" $ok "child's own allocations in its profile: ${n:-0} from child_allocates"
    echo stop >&4
    exec 4>&-
    reap $w "exit.forker.$1"
}

t0=$(cut -d' ' -f1 /proc/uptime)
for s in uprobe inprocess; do
    step "start.$s"
    if start_daemon $s; then
        step "exact.$s"
        exact_totals $s
        step "fork.$s"
        fork_child $s
        step "stop.$s"
        timeout 60 wget -q -O /tmp/metrics "$URL/metrics" && grep -e '^heapprofd_kernel_' -e '^heapprofd_frees_through_ring' -e '^heapprofd_return_addresses' /tmp/metrics | sed 's/^/HPK-METRIC /'
        stop_daemon $s
    else
        check "start.$s" 0 "heapprofd did not start"
    fi
done
t1=$(cut -d' ' -f1 /proc/uptime)
echo "HPK-TIME checks took $(awk -v a=$t0 -v b=$t1 'BEGIN {print b - a}') s of guest time"
if [ $failed = 0 ]; then echo "HPK-RESULT PASS"; else echo "HPK-RESULT FAIL"; fi
poweroff -f
