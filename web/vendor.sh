#!/usr/bin/env bash
# vendor.sh - the viewer's files in third_party/, taken from the npm packages
# pinned in web/package-lock.json (exact versions, sha512 integrity checked
# by npm ci). The daemon embeds third_party/ at build time, so building and
# running need no network; this script is how the copies are made and checked.
#   bash web/vendor.sh           npm ci, then copy the files into third_party/
#   bash web/vendor.sh --check   fail unless third_party/ holds exactly those
#                                files (run by ctest web.vendored)
# With --check, an installed web/node_modules is used as it is (install-deps.sh
# runs npm ci there); without it, npm ci runs first.
set -euo pipefail
cd "$(dirname "$0")"
# package file in node_modules -> vendored copy, relative to the repository top.
files=(
    "d3/dist/d3.min.js ../third_party/d3/d3.min.js"
    "d3/LICENSE ../third_party/d3/LICENSE"
    "d3-flame-graph/dist/d3-flamegraph.umd.min.js ../third_party/d3-flame-graph/d3-flamegraph.min.js"
    "d3-flame-graph/LICENSE ../third_party/d3-flame-graph/LICENSE"
)
if [[ "${1:-}" == --check ]]; then
    [[ -d node_modules ]] || { echo "vendor.sh: web/node_modules is missing: run npm ci --prefix web (scripts/install-deps.sh does)" >&2; exit 1; }
    bad=0
    for f in "${files[@]}"; do
        read -r from to <<<"$f"
        if ! cmp -s "node_modules/$from" "$to"; then
            echo "vendor.sh: $to differs from $from of the pinned npm package" >&2
            bad=1
        fi
    done
    ((bad == 0)) && echo "third_party/ matches the npm packages pinned in web/package-lock.json"
    exit $bad
fi
npm ci --no-audit --no-fund --ignore-scripts
for f in "${files[@]}"; do
    read -r from to <<<"$f"
    mkdir -p "$(dirname "$to")"
    cp "node_modules/$from" "$to"
done
echo "copied ${#files[@]} files into third_party/"
