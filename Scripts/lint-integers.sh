#!/usr/bin/env bash
# Fails on integer conversions in Sources/ that trap on a 32-bit Int (watchOS on arm64_32) or on a
# signed dev_t (Apple platforms), where a checked, clamping or bit-pattern conversion is meant:
#   Int(UInt32.max), Int(UInt64.max), Int(UInt.max)     use Int(clamping:)
#   Int(<a load or value> as UInt32 / UInt64)           use Int(exactly:) and treat nil as damage
#   Int(tag), Int(<...>.st_…), UInt64(<...>.st_…)       use init(truncatingIfNeeded:)
#
#   bash Scripts/lint-integers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Perl-style, for the look-ahead: a labelled conversion (exactly:, clamping:, …) is fine.
unlabelled='(?!\s*(exactly|clamping|truncatingIfNeeded|bitPattern):)'
patterns=(
    '\bInt\((UInt32|UInt64|UInt)\.max\)'
    "\\bInt\\(${unlabelled}[^()]*\\bas U?Int(32|64)\\)"
    '\bInt\(tag\)'
    "\\b(U?Int(32|64)?)\\(${unlabelled}[^()]*\\.st_[a-z]+\\)"
)
status=0
for pattern in "${patterns[@]}"; do
    if grep -rnP --include='*.swift' "$pattern" Sources; then
        status=1
    fi
done
if [ "$status" -ne 0 ]; then
    echo "lint-integers: the conversions above trap on a 32-bit Int or a signed dev_t;" \
        "use Int(exactly:), Int(clamping:) or init(truncatingIfNeeded:)" >&2
fi
exit $status
