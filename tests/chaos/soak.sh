#!/usr/bin/env bash
# The long form of the chaos scenario: 10 minutes of mixed load over 3 nodes in redis mode
# with a fault every 30 s, then the invariant checks and each node's RSS and descriptor
# slope. Usage: tests/chaos/soak.sh [duration, default 10m] [report file]
set -euo pipefail
cd "$(dirname "$0")/../.."
duration="${1:-10m}"
out="${2:-target/chaos-soak.md}"
command -v redis-server >/dev/null || { echo "redis-server is needed (apt-get install -y redis-server)" >&2; exit 2; }
# Every bin of the tests package: the chaos driver and the node and coordinator it starts.
cargo build -q -p switchyard-tests --bins
mkdir -p "$(dirname "$out")"
exec target/debug/switchyard-chaos --duration "$duration" --out "$out"
