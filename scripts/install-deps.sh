#!/usr/bin/env bash
# install-deps.sh - installs the Debian 12 packages heapprofd needs to build,
# run and test (systemd: systemd-analyze for the ctest systemd.unit; chromium
# and prometheus for the tests of the web page and /metrics with real
# clients; node, OpenJDK, musl and busybox-static for test_runtimes.py), and
# the npm packages of web/package-lock.json (pinned, with integrity hashes)
# into web/node_modules: playwright-core and pprof-format
# for those tests. The daemon's build needs no npm: the viewer it serves is
# vendored in third_party/.
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
    libclang-rt-14-dev llvm \
    chromium prometheus >/dev/null # libFuzzer and ASan for clang; llvm-symbolizer
# Node.js and npm: Debian's, unless a node is installed already (the image
# may carry a newer one whose package conflicts with Debian's npm).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
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
