#!/usr/bin/env bash
# Runs the flash-sale demo: 10 buyers race for 5 items, without and with latchkey.
# Uses Redis at $LATCHKEY_REDIS (default redis://127.0.0.1:6379), or starts a private one.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-redis.sh
# Say what the wait is for: a first release build takes a few minutes, and cargo's
# own progress follows.
echo "latchkey demo: building the CLI (release mode; the first build takes 2-4 minutes, later ones seconds)" >&2
cargo build --locked --release -p latchkey-cli
cargo run --quiet --locked --release -p latchkey-cli -- demo flash-sale "$@"
