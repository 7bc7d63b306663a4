#!/usr/bin/env bash
# test.sh - installs what is missing, builds everything, and runs every test
# (unit tests plain and under ASan/UBSan, integration tests against the real
# kernel, the benchmark's smoke run). Needs root: the tests load BPF.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEAPPROF_WERROR=ON >/dev/null
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure --timeout 300
