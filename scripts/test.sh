#!/usr/bin/env bash
# Runs every test of the workspace against real redis-server processes it starts itself,
# then prints one line: how many passed, failed and were ignored in all. Exits non-zero
# if anything failed (or did not build).
#
# It builds every test once, then runs the test binaries two at a time, slowest first:
# most of their time goes to waiting (for servers to start, failovers, leases), not to
# the CPU, so two fit on two cores. The doc tests run last.
#
#   scripts/test.sh                 everything
#   scripts/test.sh --serial        one binary at a time, as `cargo test` runs them
#   scripts/test.sh FILTER [ARGS]   only tests whose names contain FILTER (libtest args)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-redis.sh

lanes=2
if [ "${1:-}" = "--serial" ]; then
    lanes=1
    shift
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "test.sh: building the tests (cargo test --no-run)" >&2
cargo test --workspace --locked --no-run --message-format=json-render-diagnostics > "$work/build.json"

# "<package dir> <test binary>" for every test binary cargo built.
grep '"reason":"compiler-artifact"' "$work/build.json" |
    grep -E '"profile":\{[^}]*"test":true' |
    grep -v '"executable":null' |
    sed -E 's/.*"manifest_path":"([^"]*)\/Cargo.toml".*"executable":"([^"]*)".*/\1 \2/' > "$work/binaries"

if [ ! -s "$work/binaries" ]; then
    echo "test.sh: cargo built no test binary" >&2
    exit 1
fi

# The slowest binaries first, so the two lanes end together. The quorum tests run
# alone at the end, one at a time: their per-node deadlines (tens of ms) are part of
# what they test, and a second binary, or a second test of theirs, running beside
# them on two cores can miss them (CI failed `force_release` finding no majority).
slow="cluster latchkey deployments smoke commands replicas sentinel ratelimit waiting faults"
solo="quorum"
pattern() {
    local name
    for name in "$@"; do
        printf '/deps/%s-[0-9a-f]+$\n' "$name"
    done
}
order() {
    local name
    for name in $slow; do
        grep -E "/deps/${name}-[0-9a-f]+$" "$work/binaries" || true
    done
    pattern $slow $solo > "$work/placed"
    grep -v -E -f "$work/placed" "$work/binaries" || true
}

# Runs one binary from its package's directory (as cargo does) and prints its whole
# output at once when it ends, so the lanes' outputs never interleave.
run_one() {
    local dir=$1 binary=$2
    shift 2
    local log
    log="$(mktemp -p "$work")"
    local status=0
    (cd "$dir" && "$binary" "$@") > "$log" 2>&1 || status=$?
    {
        flock 9
        {
            echo "     Running $(basename "$binary")"
            cat "$log"
            # libtest exits 101 when tests fail (its summary counts them); anything
            # else is a crash, counted as one failure.
            if [ "$status" -ne 0 ]; then echo "$(basename "$binary") FAILED (exit $status)"; fi
            if [ "$status" -ne 0 ] && [ "$status" -ne 101 ]; then echo "CRASHED $(basename "$binary")"; fi
        } | tee -a "$work/all.log"
    } 9>> "$work/print.lock"
    return "$status"
}

status=0
running=0
while read -r dir binary; do
    if [ "$running" -ge "$lanes" ]; then
        wait -n || status=1
        running=$((running - 1))
    fi
    run_one "$dir" "$binary" "$@" &
    running=$((running + 1))
done < <(order)
while [ "$running" -gt 0 ]; do
    wait -n || status=1
    running=$((running - 1))
done
pattern $solo > "$work/solo"
while read -r dir binary; do
    run_one "$dir" "$binary" "$@" --test-threads=1 || status=1
done < <(grep -E -f "$work/solo" "$work/binaries" || true)
# A binary that failed to run (or crashed) prints no "test result:" line.
grep -q "FAILED (exit" "$work/all.log" && status=1

cargo test --workspace --locked --doc -- "$@" 2>&1 | tee -a "$work/all.log" || status=1

# Every test binary and doc-test run ends with a "test result:" line; add them up.
awk '/^test result:/ {
        for (i = 1; i <= NF; i++) {
            if ($(i + 1) ~ /^passed/) passed += $i
            if ($(i + 1) ~ /^failed/) failed += $i
            if ($(i + 1) ~ /^ignored/) ignored += $i
        }
     }
     /^CRASHED / { failed += 1 }
     END { printf "%d passed, %d failed, %d ignored\n", passed, failed, ignored }' "$work/all.log"
exit "$status"
