#!/usr/bin/env bash
# Compiles every ```swift block of the README (and of the documentation articles, when they exist),
# runs the ones that are complete programs, and checks the output those state.
#
#   bash Scripts/check-readme.sh [file.md …]      # default: README.md and Sources/*/*.docc/*.md
#
# Each block is the main.swift of an executable of its own in a scratch package that depends on this
# checkout, exactly as a user would copy it: nothing is imported but what the block imports. It is
# built with warnings as errors, then run with HOME, XDG_CACHE_HOME and TMPDIR in a temporary
# folder, and must exit 0 within 60 seconds. Two markers, on the line before a block, change that:
#   <!-- fragment -->       the block is a piece of a larger program: not compiled (at most a quarter
#                           of a file's blocks may be fragments)
#   <!-- compile-only -->   compiled, not run (it needs the network, or runs forever)
# A block states what it prints with `// prints: <line>` comments, after the code that prints or on
# lines of their own, one per line of output: the lines the program writes to its standard output
# must be those, in that order. A block without such a comment may print anything. A block that
# states its output must run (no marker), and a comment that is only a value (`// "a"`, `// 42`) is
# refused: a result a block claims is printed and stated with `// prints:`, so that it is checked.
# The scratch package builds in .build-readme/ of the checkout, so later runs reuse it.
# Before any of that, it fails when README.md is larger than 8 192 bytes (`wc -c`), whatever files are
# named: the README is a short overview, and figures and details belong in the DocC articles.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

readme_limit=8192
readme_size=$(wc -c <README.md)
if [ "$readme_size" -gt "$readme_limit" ]; then
    echo "check-readme: README.md is $readme_size bytes, more than $readme_limit: keep it a short overview" \
        "and move figures and details to the DocC articles (Sources/*/*.docc)" >&2
    exit 1
fi

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
prints = re.compile(r"//\s*prints:\s?(.*)$")
# A comment that is only a value (`// "Ada"`, `// 42`, `// [1, 3]`, `// nil`), perhaps followed by
# a colon or a comma and more words: a result the block claims without printing it.
value_claim = re.compile(r'(^|\s)//\s*("[^"]*"|-?[0-9][0-9_.]*|nil|true|false|\[[^\]]*\])\s*($|[:,])')
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
            body = lines[start:end]
            expected = []
            for number, line in enumerate(body, start + 1):
                match = prints.search(line)
                if match:
                    expected.append(match.group(1).rstrip())
                elif value_claim.search(line):
                    failures.append("%s:%d: a comment states a value; print it and state it with `// prints:`"
                                    % (path, number))
            if expected and marker in ("<!-- fragment -->", "<!-- compile-only -->"):
                failures.append("%s:%d: the block states its output (`// prints:`), so it must run: remove %s"
                                % (path, start, marker))
            if marker == "<!-- fragment -->":
                fragments += 1
            else:
                name = "Block%02d" % (len(targets) + 1)
                os.makedirs(os.path.join(package, "Sources", name))
                with open(os.path.join(package, "Sources", name, "main.swift"), "w", encoding="utf-8") as out:
                    out.write("\n".join(body) + "\n")
                runs = marker != "<!-- compile-only -->"
                if expected:
                    os.makedirs(os.path.join(package, "expected"), exist_ok=True)
                    with open(os.path.join(package, "expected", name + ".txt"), "w", encoding="utf-8") as out:
                        out.write("\n".join(expected) + "\n")
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
    if ! HOME="$home" XDG_CACHE_HOME="$home/cache" TMPDIR="$home/tmp" \
        timeout 60 "$root/.build-readme/debug/$name" >"$home/output.txt" 2>"$home/errors.txt"; then
        echo "check-readme: $name ($origin) failed when run:" >&2
        cat "$home/output.txt" "$home/errors.txt" >&2
        status=1
    elif [ -e "$package/expected/$name.txt" ]; then
        if diff -u --label "stated (// prints:)" --label "printed" "$package/expected/$name.txt" "$home/output.txt" >"$home/diff.txt"; then
            echo "  $name ($origin): compiled, ran and printed what it states"
        else
            echo "check-readme: $name ($origin) does not print what it states:" >&2
            cat "$home/diff.txt" >&2
            status=1
        fi
    else
        echo "  $name ($origin): compiled and ran"
    fi
done <"$package/blocks.txt"
exit $status
