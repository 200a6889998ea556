#!/usr/bin/env bash
# Runs the test suite, or the tests a filter selects, many times, each run in a fresh process, and
# reports which tests failed in any of them.
#
#   bash Scripts/flake-hunt.sh [runs] [filter]     # default: 20 runs of the whole suite
#   bash Scripts/flake-hunt.sh 50 Memory           # 50 runs of `swift test --filter Memory`
#
# Swift seeds its hashing anew in every process, so repeated runs try as many hash seeds; a test
# whose outcome depends on the seed, on timing or on scheduling shows up as failing in some runs and
# passing in others. The tests are built once; no run stops the hunt. The log of every failed run is
# kept in .build/flake-hunt/. The last line is `flake-hunt: N passed, M failed`, followed by the
# names of the tests that failed and in how many runs; the script exits non-zero when a run failed.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

runs=${1:-20}
filter=${2:-}
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: bash Scripts/flake-hunt.sh [runs] [filter]" >&2
    exit 2
fi
selection=()
[ -n "$filter" ] && selection=(--filter "$filter")

logs=.build/flake-hunt
rm -rf "$logs"
mkdir -p "$logs"
if ! swift build --build-tests >"$logs/build.log" 2>&1; then
    echo "flake-hunt: the tests do not build; see $logs/build.log" >&2
    exit 2
fi

passed=0
failed=0
: >"$logs/failures.txt"
for run in $(seq 1 "$runs"); do
    log="$logs/run-$run.log"
    if swift test --skip-build "${selection[@]}" >"$log" 2>&1; then
        passed=$((passed + 1))
        rm -f "$log"
        echo "flake-hunt: run $run of $runs passed"
    else
        status=$?
        failed=$((failed + 1))
        # Swift Testing marks a failing test `✘ Test name() …`; XCTest, `Test Case '…' failed`.
        names=$(sed -n -E \
            -e 's/^✘ Test (.+) failed after .*/\1/p' \
            -e "s/^Test Case '(.+)' failed.*/\\1/p" "$log" | sed -E 's/ with [0-9]+ test cases?$//' | sort -u)
        if [ -z "$names" ]; then names="(run $run: exit status $status, no failing test named; see $log)"; fi
        printf '%s\n' "$names" >>"$logs/failures.txt"
        echo "flake-hunt: run $run of $runs FAILED (log: $log)"
    fi
done

echo "flake-hunt: $passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
    sort "$logs/failures.txt" | uniq -c | sort -rn | sed -E 's/^ *([0-9]+) (.*)/  \2 (failed in \1 run(s))/'
    exit 1
fi
