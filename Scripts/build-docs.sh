#!/usr/bin/env bash
# Builds Hoard's documentation with the toolchain's DocC and fails on any warning (an unresolved link,
# a missing symbol, a malformed article).
#
#   bash Scripts/build-docs.sh [output folder]   # default: .build-docs/ (Hoard.doccarchive, HoardRedis.doccarchive)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi
output="${1:-.build-docs}"
mkdir -p "$output"
docc=$(command -v docc || xcrun --find docc)
# One archive per library product, each from its own module's symbol graphs only.
for module in Hoard HoardRedis; do
    graphs=$(mktemp -d)
    swift build --target "$module" -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs"
    mkdir "$graphs/$module-only"
    cp "$graphs/$module".symbols.json "$graphs/$module"@*.symbols.json "$graphs/$module-only/" 2>/dev/null || true
    "$docc" convert "Sources/$module/$module.docc" \
        --additional-symbol-graph-dir "$graphs/$module-only" \
        --output-path "$output/$module.doccarchive" \
        --fallback-display-name "$module" \
        --fallback-bundle-identifier "org.hoard.$module" \
        --warnings-as-errors
    rm -rf "$graphs"
done
echo "build-docs: $output"
