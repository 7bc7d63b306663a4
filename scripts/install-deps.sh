#!/usr/bin/env bash
# install-deps.sh - installs the Debian 12 packages heapprofd needs to build,
# run and test (systemd: systemd-analyze for the ctest systemd.unit; runtimes
# for test_runtimes.py).
# Safe to run again: apt skips what is already there.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config clang bpftool \
    libbpf-dev libelf-dev libdw-dev libmicrohttpd-dev zlib1g-dev \
    golang-go python3 curl gdb binutils libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 \
    ca-certificates \
    systemd \
    libiberty-dev xz-utils golang-github-google-pprof-dev \
    libclang-rt-14-dev llvm >/dev/null # libFuzzer and ASan for clang; llvm-symbolizer
# The runtimes of tests/integration/test_runtimes.py: OpenJDK 17, musl,
# a stripped static busybox, unshare (util-linux).
apt-get install -y -qq --no-install-recommends \
    openjdk-17-jdk-headless musl-tools busybox-static util-linux >/dev/null
# node: Debian's nodejs where none is installed (a newer one from elsewhere
# does as well: the test uses whichever `node` is on PATH).
command -v node >/dev/null || command -v nodejs >/dev/null ||
    apt-get install -y -qq --no-install-recommends nodejs >/dev/null
