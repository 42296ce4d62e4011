#!/usr/bin/env bash
# Runs a local 3-node Switchyard cluster in redis mode: its own redis-server on a free port,
# the mock upstream, and three router nodes sharing state through that Redis. Prints the URLs
# and stops everything it started on Ctrl-C.
#
#   deploy/local-cluster.sh            # debug build
#   RELEASE=1 deploy/local-cluster.sh  # release build
#   NODES=5 deploy/local-cluster.sh    # another node count
#
# Needs: cargo, redis-server, python3 (to pick free ports).
set -euo pipefail
cd "$(dirname "$0")/.."

NODES="${NODES:-3}"
profile=debug
build_flags=()
if [ "${RELEASE:-0}" = "1" ]; then
  profile=release
  build_flags=(--release)
fi
command -v redis-server >/dev/null || { echo "redis-server is required" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required (free ports)" >&2; exit 1; }

echo "== building ($profile)"
cargo build "${build_flags[@]}" -p switchyard-node -p switchyard-mock --bins
bin="target/$profile"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

work="$(mktemp -d -t switchyard-cluster.XXXXXX)"
pids=()
cleanup() {
  trap - INT TERM EXIT
  echo
  echo "== stopping"
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup INT TERM EXIT

redis_port="$(free_port)"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)

"$bin/switchyard-mock-upstream" --listen 127.0.0.1:0 >"$work/mock.out" 2>"$work/mock.log" &
pids+=($!)
for _ in $(seq 1 100); do
  [ -s "$work/mock.out" ] && break
  sleep 0.05
done
mock_addr="$(head -n1 "$work/mock.out")"
[ -n "$mock_addr" ] || { echo "the mock upstream did not start" >&2; exit 1; }

export SWITCHYARD_MANAGEMENT_KEY="local-cluster-admin"
export MOCK_KEY_A="sk-mock-a" MOCK_KEY_B="sk-mock-b"
urls=()
for i in $(seq 0 $((NODES - 1))); do
  port="$(free_port)"
  admin="$(free_port)"
  cat >"$work/node-$i.toml" <<TOML
[server]
node_id = "node-$i"
listen = "127.0.0.1:$port"
admin_listen = "127.0.0.1:$admin"
workers = 2

[auth]
require_api_key = false
management_key_env = "SWITCHYARD_MANAGEMENT_KEY"

[cluster]
mode = "redis"
redis_url = "redis://127.0.0.1:$redis_port/0"
key_prefix = "switchyard-local:"
heartbeat_interval_ms = 1000
node_ttl_ms = 5000
redis_timeout_ms = 250

[[providers]]
id = "mock"
category = "apikey"
format = "openai"
base_url = "http://$mock_addr/v1"
models = ["gpt-4o-mini"]

[[connections]]
id = "mock-a"
provider = "mock"
api_key_env = "MOCK_KEY_A"
priority = 1

[[connections]]
id = "mock-b"
provider = "mock"
api_key_env = "MOCK_KEY_B"
priority = 2
TOML
  RUST_LOG="${RUST_LOG:-info}" "$bin/switchyard-node" --config "$work/node-$i.toml" \
    >"$work/node-$i.log" 2>&1 &
  pids+=($!)
  urls+=("node-$i  client http://127.0.0.1:$port  admin http://127.0.0.1:$admin")
done

for line in "${urls[@]}"; do
  admin_url="${line##* }"
  for _ in $(seq 1 200); do
    curl -fsS "$admin_url/readyz" >/dev/null 2>&1 && break
    sleep 0.05
  done
done

first_client="$(echo "${urls[0]}" | awk '{print $3}')"
first_admin="$(echo "${urls[0]}" | awk '{print $5}')"
cat <<INFO

Switchyard local cluster ($NODES nodes, redis mode)
  redis   redis://127.0.0.1:$redis_port/0   (keys under "switchyard-local:")
  mock    http://$mock_addr                 (script faults: POST /__mock/script)
$(printf '  %s\n' "${urls[@]}")
  logs    $work

Try:
  curl -s $first_client/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model":"mock/gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
  curl -s $first_admin/api/monitoring/health -H 'authorization: Bearer $SWITCHYARD_MANAGEMENT_KEY'
  redis-cli -p $redis_port --scan --pattern 'switchyard-local:*'

Ctrl-C stops everything.
INFO
wait
