#!/usr/bin/env bash
# What one lock cycle costs the client with 50 tasks on a multi-threaded runtime,
# counted by callgrind (repeatable on a shared machine, where time is not): the raw
# floor (`SET NX PX` + compare-and-delete), latchkey on one server, and latchkey on
# a quorum of five. Each runs 100 and 200 cycles per task; the difference over
# 5 000 is one cycle, start-up cancelled out. Needs valgrind and redis-server;
# starts its own servers on free ports.
set -euo pipefail
cd "$(dirname "$0")/../tools/client-cost"
dir=$(mktemp -d)
trap 'for p in "$dir"/*.pid; do kill "$(cat "$p")" 2>/dev/null || true; done; rm -rf "$dir"' EXIT
urls=()
for n in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 20000))
  redis-server --port "$port" --save "" --appendonly no --dir "$dir" --daemonize yes \
    --pidfile "$dir/redis-$n.pid" --dbfilename "dump-$n.rdb" > /dev/null
  urls+=("redis://127.0.0.1:$port")
done
sleep 0.5
quorum=$(IFS=,; echo "${urls[*]}")
cp ../../Cargo.lock . 2>/dev/null || true
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$dir/target}"
cargo build --quiet --release
count() {
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
    "$CARGO_TARGET_DIR/release/client-cost" "$1" "$2" "$3" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
echo "client instructions per lock + release, 50 tasks on their own keys"
for mode in raw latchkey quorum; do
  target=${urls[0]}
  [ "$mode" = quorum ] && target=$quorum
  short=$(count "$mode" "$target" 100)
  long=$(count "$mode" "$target" 200)
  echo "  $mode: $(( (long - short) / 5000 ))"
done
