#!/usr/bin/env bash
# boot_test.sh - boots a Debian kernel under qemu (TCG: these machines have
# no KVM) with an initramfs holding this build's heapprofd, its shared
# libraries, busybox and two workloads, and passes when every check of
# guest_init.sh passed on it. The host kernel's runs are the integration
# tests'; this is how the kernels Debian 12 users have (6.1, 6.12) are tried.
#
#   boot_test.sh SERIES BUILD_DIR         e.g. boot_test.sh 6.1 build
#
# Exit 77 (ctest's skip) when qemu or the kernel cannot be had, except under
# CI=true, where that fails. The guest has its own time limit: a hang fails.
set -euo pipefail
series="$1" build="$(cd "$2" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
cache="$build/kernels"
unavailable() {
    echo "boot_test.sh: $*" >&2
    [[ "${CI:-}" == true ]] && exit 1
    exit 77
}
qemu="$(command -v qemu-system-x86_64 || true)"
[[ -n "$qemu" ]] || unavailable "qemu-system-x86_64 not found (scripts/install-deps.sh installs qemu-system-x86)"
[[ -x /bin/busybox ]] || unavailable "/bin/busybox not found (busybox-static)"
vmlinuz="$("$here/kernel_image.sh" "$series" "$cache")" || unavailable "no Debian $series kernel image"

# The initramfs: busybox, the daemon and workloads with the libraries ldd names.
work="$(mktemp -d "$cache/initramfs-$series.XXXXXX")"
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$root"/{bin,proc,sys,run,tmp,dev,opt/heapprof}
cp /bin/busybox "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
cp "$here/guest_init.sh" "$root/init"
bins=("$build/heapprofd" "$build/tests/workloads/exact" "$build/tests/workloads/forker")
for b in "${bins[@]}"; do
    [[ -x "$b" ]] || { echo "boot_test.sh: $b is not built" >&2; exit 1; }
    cp "$b" "$root/opt/heapprof/"
done
ldd "${bins[@]}" | awk '/=> \// {print $3} /^\t\/lib/ {print $1}' | sort -u |
while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
mkdir -p "$root/lib64" && cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
( cd "$root" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1 ) >"$work/initramfs.gz"

# -smp 1 and 1 GiB: the test runs beside others on a 2-core machine; the
# daemon's BPF maps at their default sizes need a few hundred MiB.
# The limit bounds a hung guest, not the expected time: each daemon start
# is a BPF load the verifier does under TCG, ~40 s on a quiet machine and
# 147 s in a CI run beside the other tests and the sanitized trees' builds.
limit="${HPK_GUEST_TIMEOUT:-900}"
start=$(date +%s)
set +e
timeout "$limit" "$qemu" -nodefaults -no-reboot -nographic -machine q35 -cpu max -smp 1 -m 1024 \
    -kernel "$vmlinuz" -initrd "$work/initramfs.gz" -serial stdio -display none \
    -append "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init" </dev/null >"$work/console.log" 2>&1
rc=$?
set -e
took=$(( $(date +%s) - start ))
grep -v -e "^wget: " -e "index.json: No such" "$work/console.log" | head -c 200000
echo "boot_test.sh: $(basename "$vmlinuz") booted and checked in ${took} s of wall time (qemu exit $rc)"
if [[ $rc == 124 ]]; then
    echo "boot_test.sh: FAIL: the guest did not finish within ${limit} s" >&2
    exit 1
fi
if grep -q '^HPK-CHECK FAIL' "$work/console.log" || ! grep -q '^HPK-RESULT PASS' "$work/console.log"; then
    echo "boot_test.sh: FAIL on $(basename "$vmlinuz")" >&2
    exit 1
fi
echo "boot_test.sh: PASS on $(basename "$vmlinuz")"
