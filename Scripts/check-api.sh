#!/usr/bin/env bash
# Compares the public API of the Hoard and HoardRedis libraries with the baseline saved in
# Documentation/API/<commit>/, and fails on any breaking change (a removed or changed public
# declaration). The folder is named after the commit the baseline was made from, as the tool wants.
#
#   bash Scripts/check-api.sh               # check against the saved baseline
#   bash Scripts/check-api.sh --regenerate  # save the committed API as the baseline (commit it, and
#                                           # say in CHANGELOG.md what changed and why)
#
# It uses `swift package diagnose-api-breaking-changes`, whose swift-api-digester ships with the
# toolchain. Additions are not breaking and pass.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

baseline=Documentation/API
products=(--products Hoard HoardRedis)
if [ "${1:-}" = "--regenerate" ]; then
    # The tool builds the baseline from a commit, so the sources must be committed.
    if ! git diff --quiet HEAD -- Sources Package.swift; then
        echo "check-api: Sources or Package.swift differ from HEAD; commit before regenerating" >&2
        exit 2
    fi
    rm -rf "$baseline"
    mkdir -p "$baseline"
    swift package diagnose-api-breaking-changes HEAD "${products[@]}" --baseline-dir "$baseline" \
        --regenerate-baseline | grep -v '^\['
    echo "check-api: baseline saved in $(ls -d "$baseline"/*/)"
    exit 0
fi

commits=("$baseline"/*/)
if [ ${#commits[@]} -ne 1 ] || [ ! -d "${commits[0]}" ]; then
    echo "check-api: expected one baseline folder in $baseline (run with --regenerate)" >&2
    exit 2
fi
commit=$(basename "${commits[0]}")
for module in Hoard HoardRedis; do
    if [ ! -f "$baseline/$commit/$module.json" ]; then
        echo "check-api: no baseline for $module in $baseline/$commit (run with --regenerate)" >&2
        exit 2
    fi
done
# With every module's baseline present, the tool compares with it and does not build that commit.
# The tool itself sometimes crashes (seen once in swift-package 6.3.1, a backtrace and no verdict):
# a crash is not a verdict, and it runs again, at most twice.
check() {
    swift package diagnose-api-breaking-changes "$commit" "${products[@]}" --baseline-dir "$baseline" 2>&1
}
status=0
for attempt in 1 2 3; do
    status=0
    output=$(check) || status=$?
    if [ "$status" -eq 0 ] || ! grep -q "Program crashed\|Backtrace took" <<<"$output"; then break; fi
    echo "check-api: swift package crashed (attempt $attempt); running it again" >&2
done
if [ "$status" -ne 0 ]; then
    echo "$output" | grep -v '^\[' >&2
    echo "check-api: the public API changed in a breaking way (see above). If that is intended," \
        "regenerate the baseline and record the change in CHANGELOG.md." >&2
    exit 1
fi
echo "$output" | grep -v '^\[' || true
