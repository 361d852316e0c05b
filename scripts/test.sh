#!/usr/bin/env bash
# Runs every test of the workspace against real redis-server processes it starts itself.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-redis.sh
cargo test --workspace --locked "$@"
