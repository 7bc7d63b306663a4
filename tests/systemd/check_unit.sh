#!/bin/sh
# check_unit.sh BUILD_DIR UNIT_SOURCE - the ctest systemd.unit.
#
# Installs the build into a temporary prefix (cmake --install --prefix), then
# checks the installed unit:
#  - `systemd-analyze verify` accepts it, with its ExecStart= binary in place;
#  - ExecStart= names the installed binary and the config /etc/heapprofd/heapprofd.conf,
#    and the unit is otherwise the source one;
#  - CapabilityBoundingSet= is exactly the documented set (docs/operations.md),
#    and no AmbientCapabilities= adds to it;
#  - `systemd-analyze security` rates its exposure at most 2.5;
#  - the example config is installed, and it and docs/configuration.md name
#    every option `heapprofd --help` lists.
# Needs systemd-analyze (Debian: systemd; scripts/install-deps.sh installs it).
# Does not need root, and starts nothing.
set -u

build=$1
source_unit=$2
source_dir=$(cd "$(dirname "$source_unit")/.." && pwd)
failures=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

command -v systemd-analyze >/dev/null 2>&1 || {
    echo "FAIL: systemd-analyze is not installed (Debian: apt-get install systemd)"
    exit 1
}

tmp=$(mktemp -d /tmp/heapprofd-unit.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

if ! cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
    cat "$tmp/install.log"
    echo "FAIL: cmake --install $build --prefix $prefix failed"
    exit 1
fi

unit=$prefix/lib/systemd/system/heapprofd.service
binary=$prefix/sbin/heapprofd
example=$prefix/etc/heapprofd/heapprofd.conf.example
[ -f "$unit" ] || { echo "FAIL: no unit at $unit"; exit 1; }
[ -x "$binary" ] || fail "no executable at $binary"
[ -f "$example" ] || fail "no example config at $example"

# ExecStart= names the installed binary; nothing else differs from the source.
want_exec="ExecStart=$binary --config /etc/heapprofd/heapprofd.conf"
got_exec=$(grep '^ExecStart=' "$unit")
[ "$got_exec" = "$want_exec" ] || fail "installed unit has '$got_exec', expected '$want_exec'"
grep -v '^ExecStart=' "$source_unit" >"$tmp/source.rest"
grep -v '^ExecStart=' "$unit" >"$tmp/installed.rest"
cmp -s "$tmp/source.rest" "$tmp/installed.rest" ||
    fail "the installed unit differs from $source_unit beyond ExecStart=: $(diff "$tmp/source.rest" "$tmp/installed.rest" | head -5)"
grep -q '^ExecStart=/usr/local/sbin/heapprofd --config /etc/heapprofd/heapprofd.conf$' "$source_unit" ||
    fail "the source unit's ExecStart= is not /usr/local/sbin/heapprofd (the default install prefix)"

# systemd-analyze verify: no complaint about our unit at all. It also runs
# `man heapprofd(8)` for Documentation=: the page installed in the prefix.
if ! MANPATH="$prefix/share/man" systemd-analyze verify "$unit" >"$tmp/verify.log" 2>&1; then
    fail "systemd-analyze verify failed: $(cat "$tmp/verify.log")"
elif grep -q 'heapprofd' "$tmp/verify.log"; then
    fail "systemd-analyze verify complained: $(cat "$tmp/verify.log")"
fi

# The capabilities: exactly these (see the unit's comments and docs/operations.md).
expected="CAP_BPF CAP_CHECKPOINT_RESTORE CAP_DAC_READ_SEARCH CAP_PERFMON CAP_SYS_PTRACE"
got=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit" | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ' | sed 's/ $//')
[ "$got" = "$expected" ] || fail "CapabilityBoundingSet= is '$got', expected exactly '$expected'"
if grep -q '^CapabilityBoundingSet=~' "$unit"; then
    fail "CapabilityBoundingSet= must be an allow list, not a deny list (~)"
fi
ambient=$(sed -n 's/^AmbientCapabilities=//p' "$unit" | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ' | sed 's/ $//')
[ -z "$ambient" ] || [ "$ambient" = "$expected" ] ||
    fail "AmbientCapabilities= is '$ambient', expected none or '$expected'"
grep -q '^Type=notify$' "$unit" || fail "Type= is not notify"
grep -q '^ExecReload=/bin/kill -HUP \$MAINPID$' "$unit" || fail "ExecReload= does not send SIGHUP"
grep -q '^Restart=on-failure$' "$unit" || fail "Restart= is not on-failure"

# The exposure score: at most 2.5 (2.2 when this test was written).
if ! systemd-analyze security --offline=yes --threshold=25 "$unit" >"$tmp/security.log" 2>&1; then
    fail "systemd-analyze security rates the unit above 2.5: $(grep -i 'overall' "$tmp/security.log")"
fi
echo "$(grep -i 'overall exposure' "$tmp/security.log")"

# Every option of --help is in the example config and in docs/configuration.md.
"$binary" --help >"$tmp/help.txt" 2>&1 || fail "heapprofd --help failed: $(cat "$tmp/help.txt")"
options=$(grep -o -- '--[a-z][a-z-]*' "$tmp/help.txt" | sed 's/^--//' | sort -u)
[ -n "$options" ] || fail "no options found in heapprofd --help"
for name in $options; do
    case $name in help | config) continue ;; esac
    grep -Eq "^#? ?$name = " "$example" ||
        fail "option $name is not in the example config (as '# $name = ...')"
    grep -q -- "--$name" "$source_dir/docs/configuration.md" ||
        fail "option --$name is not in docs/configuration.md"
done

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "systemd.unit: all checks passed"
