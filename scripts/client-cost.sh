#!/usr/bin/env bash
# What one lock cycle costs the client with 50 tasks on a multi-threaded runtime,
# counted by callgrind (repeatable on a shared machine, where time is not): the raw
# floor (`SET NX PX` + compare-and-delete), latchkey on one server, and latchkey on
# a quorum of five. Each runs 100 and 200 cycles per task; the difference over
# 5 000 is one cycle, start-up cancelled out. Needs valgrind and redis-server;
# starts its own servers on free ports.
#
# With `--budget FILE` (docs/client-cost-budget.json in CI), a count more than 5 %
# over its budget fails the run (exit 70), as `latchkey bench --scenario cost
# --cost-budget` does for the server's counts. A change that makes the hot path
# cheaper lowers the budget in the same commit.
set -euo pipefail
budget=""
if [ "${1:-}" = "--budget" ]; then
  [ -f "${2:-}" ] || { echo "client-cost.sh: no budget file ${2:-}" >&2; exit 2; }
  budget=$(realpath "$2")
fi
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
over=0
for mode in raw latchkey quorum; do
  target=${urls[0]}
  [ "$mode" = quorum ] && target=$quorum
  short=$(count "$mode" "$target" 100)
  long=$(count "$mode" "$target" 200)
  cost=$(( (long - short) / 5000 ))
  allowed=""
  if [ -n "$budget" ]; then
    allowed=$(sed -n "s/.*\"$mode\": *\([0-9]*\).*/\1/p" "$budget")
  fi
  if [ -z "$allowed" ]; then
    echo "  $mode: $cost"
  elif [ $(( cost * 100 )) -gt $(( allowed * 105 )) ]; then
    echo "  $mode: $cost, over its budget of $allowed by more than 5 %"
    over=1
  else
    echo "  $mode: $cost (budget $allowed)"
  fi
done
if [ "$over" = 1 ]; then
  exit 70
fi
