#!/usr/bin/env bash
# Compiles every ```swift block of the README (and of the documentation articles, when they exist)
# and runs the ones that are complete programs.
#
#   bash Scripts/check-readme.sh [file.md …]      # default: README.md and Sources/*/*.docc/*.md
#
# Each block is the main.swift of an executable of its own in a scratch package that depends on this
# checkout, with `import Foundation` and `import Hoard` implied; it is built with warnings as errors.
# A block is then run with HOME, XDG_CACHE_HOME and TMPDIR in a temporary folder, and must exit 0
# within 60 seconds. Two markers, on the line before a block, change that:
#   <!-- fragment -->       the block is a piece of a larger program: not compiled (at most a quarter
#                           of a file's blocks may be fragments)
#   <!-- compile-only -->   compiled, not run (it needs the network, or runs forever)
# The scratch package builds in .build-readme/ of the checkout, so later runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
    files=(README.md)
    for article in Sources/*/*.docc/*.md; do
        [ -e "$article" ] && files+=("$article")
    done
fi

package=$(mktemp -d)
sandbox=$(mktemp -d)
trap 'rm -rf "$package" "$sandbox"' EXIT

# Extract the blocks into the scratch package; prints one line per block: name, whether it runs, origin.
python3 - "$package" "${files[@]}" >"$package/blocks.txt" <<'PY'
import os, re, sys
package, files = sys.argv[1], sys.argv[2:]
targets, failures = [], []
for path in files:
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, fragments = 0, 0
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```swift":
            start = i + 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            marker = ""
            j = i - 1
            while j >= 0 and lines[j].strip() == "":
                j -= 1
            if j >= 0:
                marker = lines[j].strip()
            blocks += 1
            if marker == "<!-- fragment -->":
                fragments += 1
            else:
                name = "Block%02d" % (len(targets) + 1)
                os.makedirs(os.path.join(package, "Sources", name))
                with open(os.path.join(package, "Sources", name, "main.swift"), "w", encoding="utf-8") as out:
                    out.write("import Foundation\nimport Hoard\n\n")
                    out.write("\n".join(lines[start:end]) + "\n")
                runs = marker != "<!-- compile-only -->"
                targets.append(name)
                print(name, "run" if runs else "compile", "%s:%d" % (path, start))
            i = end + 1
            continue
        i += 1
    if blocks and fragments * 4 > blocks:
        failures.append("%s: %d of %d blocks are fragments; at most a quarter may be" % (path, fragments, blocks))
with open(os.path.join(package, "Package.swift"), "w") as manifest:
    manifest.write('// swift-tools-version: 6.2\nimport PackageDescription\n\n')
    manifest.write('let package = Package(\n    name: "ReadmeCheck",\n')
    manifest.write('    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],\n')
    manifest.write('    dependencies: [.package(name: "Hoard", path: "%s")],\n' % os.getcwd())
    manifest.write('    targets: [\n')
    for name in targets:
        manifest.write('        .executableTarget(name: "%s", dependencies: [.product(name: "Hoard", package: "Hoard"), .product(name: "HoardRedis", package: "Hoard")]),\n' % name)
    manifest.write('    ],\n    swiftLanguageModes: [.v6]\n)\n')
for failure in failures:
    print("FAIL", failure)
PY

if grep -q '^FAIL' "$package/blocks.txt"; then
    grep '^FAIL' "$package/blocks.txt" | sed 's/^FAIL /check-readme: /' >&2
    exit 1
fi
count=$(wc -l <"$package/blocks.txt")
echo "check-readme: $count block(s) from ${files[*]}"
[ "$count" -gt 0 ] || exit 0

if ! swift build --package-path "$package" --scratch-path "$root/.build-readme" -Xswiftc -warnings-as-errors; then
    echo "check-readme: a block does not compile; the blocks are:" >&2
    cat "$package/blocks.txt" >&2
    exit 1
fi

status=0
while read -r name mode origin; do
    if [ "$mode" != run ]; then
        echo "  $name ($origin): compiled"
        continue
    fi
    home="$sandbox/$name"
    mkdir -p "$home/cache" "$home/tmp"
    if HOME="$home" XDG_CACHE_HOME="$home/cache" TMPDIR="$home/tmp" \
        timeout 60 "$root/.build-readme/debug/$name" >"$home/output.txt" 2>&1; then
        echo "  $name ($origin): compiled and ran"
    else
        echo "check-readme: $name ($origin) failed when run:" >&2
        cat "$home/output.txt" >&2
        status=1
    fi
done <"$package/blocks.txt"
exit $status
