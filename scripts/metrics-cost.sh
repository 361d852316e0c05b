#!/usr/bin/env bash
# What latchkey's metrics cost an uncontended lock cycle in the client, counted by
# callgrind (repeatable on a shared machine, where time is not): the feature off,
# on with no recorder, on with a Prometheus recorder. Each build runs 2 000 and
# 4 000 cycles; the difference over 2 000 is one cycle, start-up cancelled out.
# Needs valgrind and redis-server; starts its own server on a free port.
set -euo pipefail
cd "$(dirname "$0")/../tools/metrics-cost"
port=$((20000 + RANDOM % 20000))
dir=$(mktemp -d)
redis-server --port "$port" --save "" --appendonly no --dir "$dir" --daemonize yes \
  --pidfile "$dir/redis.pid" > /dev/null
trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null; rm -rf "$dir"' EXIT
sleep 0.5
cp ../../Cargo.lock . 2>/dev/null || true
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$dir/target}"
count() {
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
    "$CARGO_TARGET_DIR/release/metrics-cost" "redis://127.0.0.1:$port" "$1" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
echo "client instructions per uncontended lock + release"
for features in "" on prometheus; do
  cargo build --quiet --release --features "$features"
  short=$(count 2000)
  long=$(count 4000)
  echo "  ${features:-off}: $(( (long - short) / 2000 ))"
done
