#!/usr/bin/env bash
# What `latchkey exporter` (and `latchkey top`, which refreshes the same way) costs
# Redis per refresh: a private redis-server holding 100 000 strings of another
# application and 1 000 latchkey locks, scraped N times (default 300) at the default
# budget; prints the server's own accounting (INFO commandstats) per scrape.
#
#   scripts/watch-cost.sh [SCRAPES] [extra exporter options...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-redis.sh
scrapes=${1:-300}
shift || true
cargo build --quiet --release --locked -p latchkey-cli
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
redis-server --port "$port" --save "" --appendonly no --dir "$dir" --daemonize yes \
    --pidfile "$dir/redis.pid" >/dev/null
cleanup() {
    kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
    [ -n "${exporter:-}" ] && kill "$exporter" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
for chunk in $(seq 0 9); do
    redis-cli -p "$port" eval "for i = 1, 10000 do redis.call('SET', 'cache:' .. ARGV[1] .. ':' .. i, 'v') end" 0 "$chunk" >/dev/null
done
# 1 000 held locks as latchkey writes them: an owner token, and a fencing counter.
redis-cli -p "$port" eval "for i = 1, 1000 do
    redis.call('SET', 'lock:' .. i, string.format('%032x', i) .. ':lk', 'PX', 3600000)
    redis.call('SET', '{lock:' .. i .. '}:lk:fence', i) end" 0 >/dev/null
echo "keys: $(redis-cli -p "$port" dbsize)"
./target/release/latchkey --redis "redis://127.0.0.1:$port" exporter --listen 127.0.0.1:0 "$@" \
    2>"$dir/exporter.err" &
exporter=$!
until grep -q http "$dir/exporter.err" 2>/dev/null; do sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$dir/exporter.err")
curl -s "$url" >/dev/null   # loads the scripts
redis-cli -p "$port" config resetstat >/dev/null
start=$(date +%s%N)
for _ in $(seq 1 "$scrapes"); do curl -s "$url" >"$dir/scrape.txt"; done
end=$(date +%s%N)
echo "scrapes: $scrapes, wall per scrape: $(( (end - start) / scrapes / 1000 )) us"
redis-cli -p "$port" info commandstats | grep -E 'cmdstat_(scan|evalsha)' | tr -d '\r' |
    awk -F'[:,=]' -v n="$scrapes" '{ printf "%s: %d calls, %.1f us per call, %.0f us per scrape\n", $1, $3, $7, $5 / n }'
grep -E '^latchkey_(exporter_(keys_walked|names_read|names_to_read|walks_completed_total|scrape_seconds)|state_locks_held)' "$dir/scrape.txt"
