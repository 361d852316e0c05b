#!/usr/bin/env bash
# Runs every test of the workspace against real redis-server processes it starts itself,
# then prints one line: how many passed, failed and were ignored in all. Exits non-zero
# if anything failed (or did not build).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-redis.sh
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
# Every test binary and doc-test run ends with a "test result:" line; add them up.
awk '/^test result:/ {
        for (i = 1; i <= NF; i++) {
            if ($(i + 1) ~ /^passed/) passed += $i
            if ($(i + 1) ~ /^failed/) failed += $i
            if ($(i + 1) ~ /^ignored/) ignored += $i
        }
     }
     END { printf "%d passed, %d failed, %d ignored\n", passed, failed, ignored }' "$log"
exit "$status"
