#!/usr/bin/env bash
# install-deps.sh - installs the Debian 12 packages heapprofd needs to build,
# run and test (libdebuginfod-dev: the client that fetches debug files;
# debuginfod: the server test_debuginfod.py runs, which Debian installs
# with no service, and dwz, which shrinks its debug files as Debian's
# -dbgsym packages are; systemd: systemd-analyze for the ctest
# systemd.unit; chromium and prometheus for the tests of the web page and
# /metrics with real clients; passwd and util-linux: useradd and setpriv for test_access.py's
# users; the man page, the .deb and its tests: help2man, dpkg-dev with file
# for CPack's dpkg-shlibdeps, lintian, man-db, python3-yaml and
# python3-kubernetes for the DaemonSet's checks, run by Debian's
# /usr/bin/python3; node, OpenJDK, musl and busybox-static for
# test_runtimes.py; qemu-system-x86 for tests/kernels/, which boots
# Debian's 6.1 and 6.12 kernels, fetched there with apt-get download), and
# the npm packages of web/package-lock.json (pinned, with integrity hashes)
# into web/node_modules: playwright-core and pprof-format for those tests.
# The daemon's build needs no npm: the viewer it serves is vendored in
# third_party/.
# Safe to run again: apt skips what is already there.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Waits for dpkg's lock rather than failing: another session's apt, or the
# package test's dpkg -i (tests/package), may hold it for a while.
apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 \
    build-essential cmake pkg-config clang bpftool \
    libbpf-dev libelf-dev libdw-dev libdebuginfod-dev libmicrohttpd-dev zlib1g-dev \
    debuginfod dwz \
    golang-go python3 curl gdb binutils libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 \
    ca-certificates linux-perf \
    systemd \
    passwd util-linux \
    libiberty-dev xz-utils golang-github-google-pprof-dev \
    redis-server redis-tools \
    bpftrace strace stress-ng libpython3.11-testsuite \
    libclang-rt-14-dev llvm \
    chromium prometheus \
    help2man dpkg-dev file lintian man-db python3-yaml python3-kubernetes \
    qemu-system-x86 \
    >/dev/null # libclang-rt-14-dev, llvm: libFuzzer and ASan for clang; llvm-symbolizer
# Node.js and npm: Debian's, unless a node is installed already (the image
# may carry a newer one whose package conflicts with Debian's npm).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 \
        nodejs npm >/dev/null
fi
# The test tools from npm, again only when the lock file changed.
web="$(dirname "$0")/../web"
if [[ ! -f "$web/node_modules/.package-lock.json" ||
      "$web/package-lock.json" -nt "$web/node_modules/.package-lock.json" ]]; then
    npm ci --prefix "$web" --no-audit --no-fund --ignore-scripts --loglevel=error
fi
# The runtimes of tests/integration/test_runtimes.py: OpenJDK 17, musl,
# a stripped static busybox, unshare (util-linux).
apt-get install -y -qq --no-install-recommends \
    openjdk-17-jdk-headless musl-tools busybox-static util-linux >/dev/null
# The container test (tests/integration/test_container.py): podman with
# runc (crun 1.8 refuses these VMs' hybrid cgroup hierarchy), netavark and
# iptables for the pods' bridge network and published ports, catatonit for
# kube play's pause image, debootstrap for the Debian 12 base image.
apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 \
    podman runc netavark iptables catatonit debootstrap >/dev/null
