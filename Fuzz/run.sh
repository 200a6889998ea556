#!/usr/bin/env bash
# Fuzzes the parsers of untrusted bytes with libFuzzer and AddressSanitizer: the three of bytes read
# from disk, the entry decoder (EntryFormat.decode), the index snapshot parser (DiskIndexFile.decode)
# and the journal that follows the snapshot (DiskJournal.decode and .sections), and the RESP reply
# parser of the Redis level (HoardRedis's RESPParser), which reads what a server sends.
#
#   bash Fuzz/run.sh [seconds per target]   # default 30; exits non-zero on any crash or failed check
#   bash Fuzz/run.sh --make-seeds           # rewrites the checked-in seed corpus in Fuzz/corpus
#
# The parsers are internal to their modules, so each fuzzer is compiled from the library files they need
# (listed below) plus its target file; nothing here is part of the package build. New inputs that
# libFuzzer finds go to .build-fuzz/, never into the checked-in corpus; a crashing input is saved as
# .build-fuzz/crash-* (reproduce it with: .build-fuzz/entry-fuzzer .build-fuzz/crash-…).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v swiftc >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swiftc ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

# The library files the disk parsers depend on; the RESP parser needs only its own two files.
resp_sources=(
    Sources/HoardRedis/Protocol/RESPValue.swift
    Sources/HoardRedis/Protocol/RESPParser.swift
)
sources=(
    Sources/Hoard/Disk/EntryFormat.swift
    Sources/Hoard/Disk/FileNaming.swift
    Sources/Hoard/Disk/DiskIndex.swift
    Sources/Hoard/Disk/SharedContainer/DiskJournal.swift
    Sources/Hoard/Cache/Expiry.swift
    Sources/Hoard/Support/CRC32.swift
    Sources/Hoard/Support/SHA256.swift
    Sources/Hoard/Support/CanonicalKey.swift
)
out=.build-fuzz
mkdir -p "$out"
# Crashes must reach libFuzzer, not Swift's backtracer.
export SWIFT_BACKTRACE=enable=no

if [ "${1:-}" = "--make-seeds" ]; then
    swiftc -O -parse-as-library -package-name hoard -module-name Seeds "${sources[@]}" Fuzz/MakeSeeds.swift -o "$out/make-seeds"
    # Fuzz/corpus/resp is written by hand (short replies, one per file), not by make-seeds.
    rm -rf Fuzz/corpus/entry Fuzz/corpus/index Fuzz/corpus/journal
    "$out/make-seeds" Fuzz/corpus
    exit 0
fi

seconds="${1:-30}"
status=0
for target in entry index journal resp; do
    name="$(tr '[:lower:]' '[:upper:]' <<<"${target:0:1}")${target:1}Fuzzer"
    echo "== fuzz $target ($seconds s)"
    if [ "$target" = resp ]; then target_sources=("${resp_sources[@]}"); else target_sources=("${sources[@]}"); fi
    # The linker's "cannot export local symbol __asan_…" warnings are noise: show the log on failure only.
    if ! swiftc -sanitize=fuzzer,address -parse-as-library -package-name hoard -module-name "${name}" -g \
        "${target_sources[@]}" "Fuzz/$name.swift" -o "$out/$target-fuzzer" >"$out/$target-build.log" 2>&1; then
        grep -v "Cannot export local symbol" "$out/$target-build.log" >&2
        exit 1
    fi
    mkdir -p "$out/corpus-$target"
    # -max_total_time stops a clean run; a crash or a failed check stops it early with a non-zero status.
    if ! "$out/$target-fuzzer" "$out/corpus-$target" "Fuzz/corpus/$target" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
        -artifact_prefix="$out/$target-" -print_final_stats=1 2>"$out/$target.log"; then
        echo "fuzz $target FAILED; the report:" >&2
        grep -v '^#' "$out/$target.log" | tail -40 >&2
        status=1
    else
        grep -E 'stat::number_of_executed_units|stat::new_units_added' "$out/$target.log" || true
    fi
done
exit $status
