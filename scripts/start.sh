#!/usr/bin/env bash
# start.sh - the quick start: installs what is missing, builds, and runs
# heapprofd in the foreground on 127.0.0.1:6060 (extra arguments are passed on).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target heapprofd
exec ./build/heapprofd "$@"
