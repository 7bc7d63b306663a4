#!/usr/bin/env bash
# kernel_image.sh - prints the path of a Debian kernel image (vmlinuz) for
# the qemu boot test, fetched from the apt archive the host already uses.
#
#   kernel_image.sh SERIES CACHE_DIR      e.g. kernel_image.sh 6.1 build/kernels
#
# The package is picked at run time from what apt offers: Debian renames
# its ABI (linux-image-6.1.0-NN-amd64-unsigned) with each point release,
# so a name written here would soon be gone from the archive. The .deb is
# downloaded with `apt-get download` and unpacked with dpkg-deb, never
# installed; both are kept in CACHE_DIR, so a second run fetches nothing.
set -euo pipefail
series="$1" cache="$2"
mkdir -p "$cache"
# linux-image-6.1.0-57-amd64-unsigned, linux-image-6.12.118+deb12-amd64-unsigned:
# the unsigned generic flavour (not cloud, rt or the -dbg images).
pattern="^linux-image-${series//./\\.}[.-][-+.a-z0-9]*-amd64-unsigned\$"
pkg="$(apt-cache search --names-only "$pattern" 2>/dev/null | awk '{print $1}' |
       grep -v -e '-cloud-' -e '-rt-' | sort -V | tail -n 1 || true)"
if [[ -z "$pkg" ]]; then
    # Offline, or apt's lists are stale: a kernel fetched before still serves.
    found="$(ls -d "$cache"/linux-image-"$series"[.-]*/boot 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -n "$found" ]]; then
        ls "$found"/vmlinuz-* | head -n 1
        exit 0
    fi
    echo "kernel_image.sh: apt offers no package matching $pattern (run apt-get update?)" >&2
    exit 1
fi
root="$cache/$pkg"
if ! ls "$root"/boot/vmlinuz-* >/dev/null 2>&1; then
    ( cd "$cache" && apt-get download -q "$pkg" >&2 )
    deb="$(ls "$cache"/"${pkg}"_*.deb | head -n 1)"
    tmp="$root.tmp"
    rm -rf "$tmp" && mkdir -p "$tmp"
    # Only the image is needed: the modules (the initramfs loads none) stay packed.
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
    rm -rf "$root" && mv "$tmp" "$root"
    rm -f "$deb"
fi
ls "$root"/boot/vmlinuz-* | head -n 1
