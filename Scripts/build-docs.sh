#!/usr/bin/env bash
# Builds Hoard's documentation with the toolchain's DocC and fails on any warning (an unresolved link,
# a missing symbol, a malformed article).
#
#   bash Scripts/build-docs.sh [output folder]   # default: .build-docs/Hoard.doccarchive
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi
output="${1:-.build-docs/Hoard.doccarchive}"
mkdir -p "$(dirname "$output")"
graphs=$(mktemp -d)
trap 'rm -rf "$graphs"' EXIT
swift build --target Hoard -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs"
docc=$(command -v docc || xcrun --find docc)
"$docc" convert Sources/Hoard/Hoard.docc \
    --additional-symbol-graph-dir "$graphs" \
    --output-path "$output" \
    --fallback-display-name Hoard \
    --fallback-bundle-identifier org.hoard.Hoard \
    --warnings-as-errors
echo "build-docs: $output"
