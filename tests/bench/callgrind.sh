#!/usr/bin/env bash
# Instructions per request of one process, counted by valgrind's callgrind.
#
#   tests/bench/callgrind.sh [--target node|mock|minimal|floor] [--upstream mock|minimal]
#                            [--require-key] [--node-bin FILE] [--requests N] [--stream] [--out DIR]
#                            [--redis] [--traces RATIO] [--client oha|python]
#
# Instruction counts do not depend on what else the machine is doing, so two builds can be
# compared on a shared machine where req/s and latency are noise (docs/performance.md).
# --target node (default): the node runs the harness's base config (one provider, one
# connection, embedded mode) under callgrind, in front of the --upstream (default mock);
# --require-key turns on require_api_key with one client key. --target mock or minimal: that
# upstream itself runs under callgrind and the load goes to it directly (the baselines).
# --target floor: switchyard-proxy-floor (actix-web and hyper's client with no gateway logic)
# runs under callgrind in front of the minimal responder, the HTTP stack's own share.
# --redis puts the node in mode = "redis" against a redis-server the script starts on a free
# port. --traces RATIO turns OpenTelemetry traces on, sampled at RATIO
# (parentbased_traceidratio), exported to bench.py's stand-in OTLP collector. --client python
# loads with tests/bench/streams.py instead of oha (the default when oha is not installed).
# 300 warm-up requests, then counters zeroed, N requests with `oha -c 4`, dump. Prints
# instructions per request and the 30 heaviest functions (inclusive), and keeps the
# callgrind profile under the output folder for callgrind_annotate or kcachegrind.
set -euo pipefail
export LC_ALL=C
BENCH_NAME=callgrind.sh
# shellcheck source=tests/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
NODE_BIN=$TARGET_DIR/release/switchyard-node
MOCK_BIN=$TARGET_DIR/release/switchyard-mock-upstream
MINIMAL_BIN=$TARGET_DIR/release/switchyard-mock-minimal
FLOOR_BIN=$TARGET_DIR/release/switchyard-proxy-floor
TARGET=node
UPSTREAM=mock
REQUIRE_KEY=false
HELPER=$ROOT/tests/bench/bench.py
REQUESTS=2000
STREAM=false
OUT=""
REDIS=false
TRACES=""
CLIENT=""
while (($#)); do
	case "$1" in
	--node-bin) NODE_BIN=$2; shift ;;
	--requests) REQUESTS=$2; shift ;;
	--stream) STREAM=true ;;
	--out) OUT=$2; shift ;;
	--target) TARGET=$2; shift ;;
	--upstream) UPSTREAM=$2; shift ;;
	--require-key) REQUIRE_KEY=true ;;
	--redis) REDIS=true ;;
	--traces) TRACES=$2; shift ;;
	--client) CLIENT=$2; shift ;;
	-h | --help) sed -n 2,22p "$0"; exit 0 ;;
	*) sed -n 2,22p "$0" >&2; exit 2 ;;
	esac
	shift
done
OUT=${OUT:-$ROOT/results/callgrind-$(date -u +%Y%m%dT%H%M%SZ)}
for tool in valgrind callgrind_control callgrind_annotate python3 curl; do
	command -v "$tool" >/dev/null || { echo "callgrind.sh: $tool is required" >&2; exit 1; }
done
OHA=$(command -v oha || echo "$HOME/.cargo/bin/oha")
if [[ -z $CLIENT ]]; then
	CLIENT=oha
	[[ -x $OHA ]] || { CLIENT=python; echo "callgrind.sh: oha not installed; loading with streams.py" >&2; }
fi
case "$CLIENT" in
oha) [[ -x $OHA ]] || { echo "callgrind.sh: oha is required (cargo install oha --locked)" >&2; exit 1; } ;;
python) ;;
*) echo "callgrind.sh: --client oha|python" >&2; exit 2 ;;
esac
if [[ $TARGET != node ]] && { $REDIS || [[ -n $TRACES ]]; }; then
	echo "callgrind.sh: --redis and --traces apply to --target node" >&2
	exit 2
fi
# The node binary is needed only when the node is measured; the baselines run without it.
[[ -x $MOCK_BIN && -x $MINIMAL_BIN && ($TARGET != node || -x $NODE_BIN) && ($TARGET != floor || -x $FLOOR_BIN) ]] || {
	echo "callgrind.sh: build first: cargo build --release -p switchyard-node -p switchyard-mock" >&2
	exit 1
}
case "$TARGET/$UPSTREAM" in
node/mock | mock/* ) UP_BIN=$MOCK_BIN ;;
node/minimal | minimal/* | floor/*) UP_BIN=$MINIMAL_BIN ;;
*) echo "callgrind.sh: --target node|mock|minimal|floor, --upstream mock|minimal" >&2; exit 2 ;;
esac
CLIENT_KEY=sk-bench-client-not-a-secret
mkdir -p "$OUT"


UP_CMD=("$UP_BIN" --listen 127.0.0.1:0 --workers 1 --chunks 20)
if [[ $TARGET == mock || $TARGET == minimal ]]; then
	UP_CMD=(valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" "${UP_CMD[@]}")
fi
"${UP_CMD[@]}" >"$OUT/mock.out" 2>"$OUT/mock.err" &
PIDS+=("$!")
UP_PID=$!
# Under valgrind a start takes seconds: 30 s at most.
MOCK_ADDR=$(wait_addr "$OUT/mock.out" "the mock upstream" 600) || exit 1

if [[ $TARGET == node ]]; then
	read -r port admin < <(python3 "$HELPER" free-ports 2)
	key_flag=()
	$REQUIRE_KEY && key_flag=(--require-key)
	kind=base
	node_env=()
	if $REDIS; then
		start_redis "$OUT/redis.log"
		kind=redis
		key_flag+=(--redis-url "$REDIS_URL")
	fi
	if [[ -n $TRACES ]]; then
		read -r sink_port < <(python3 "$HELPER" free-ports 1)
		python3 "$HELPER" otlp-sink --port "$sink_port" --out "$OUT/otlp-sink.json" >"$OUT/otlp-sink.log" 2>&1 &
		PIDS+=("$!")
		wait_port "$sink_port"
		node_env=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$sink_port" OTEL_SERVICE_NAME=switchyard-bench
			OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG="$TRACES")
	fi
	python3 "$HELPER" config "$kind" "$OUT/node.toml" --upstream "$MOCK_ADDR" \
		--listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" "${key_flag[@]}" >/dev/null
	env -u RUST_LOG BENCH_UPSTREAM_KEY=sk-bench-not-a-secret BENCH_CLIENT_KEY=$CLIENT_KEY "${node_env[@]}" \
		valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" \
		"$NODE_BIN" --config "$OUT/node.toml" >"$OUT/node.log" 2>"$OUT/valgrind.log" &
	NODE_PID=$!
	PIDS+=("$NODE_PID")
	for ((i = 0; i < 600; i++)); do
		curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$admin/readyz" 2>/dev/null && break
		kill -0 "$NODE_PID" 2>/dev/null || { echo "callgrind.sh: the node exited" >&2; tail "$OUT/valgrind.log" >&2; exit 1; }
		sleep 0.1
	done
	URL=http://127.0.0.1:$port/v1/chat/completions
	MODEL=mock/bench-model
elif [[ $TARGET == floor ]]; then
	valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" \
		"$FLOOR_BIN" --listen 127.0.0.1:0 --upstream "$MOCK_ADDR" >"$OUT/floor.out" 2>"$OUT/valgrind.log" &
	NODE_PID=$!
	PIDS+=("$NODE_PID")
	FLOOR_ADDR=$(wait_addr "$OUT/floor.out" "the floor proxy" 600) || exit 1
	URL=http://$FLOOR_ADDR/v1/chat/completions
	MODEL=bench-model
else
	# The upstream itself is measured; the load goes to it directly.
	NODE_PID=$UP_PID
	URL=http://$MOCK_ADDR/v1/chat/completions
	MODEL=bench-model
fi

# The harness's request body (run.sh).
BODY='{"model":"'$MODEL'","messages":[{"role":"user","content":"Say hello to the benchmark."}],"stream":'$STREAM'}'
load() { # requests
	if [[ $CLIENT == python ]]; then
		printf '%s' "$BODY" >"$OUT/body.json"
		python3 "$ROOT/tests/bench/streams.py" load --url "$URL" --body "$OUT/body.json" --conns 4 \
			--requests "$1" --header "authorization: Bearer $CLIENT_KEY" --out "$OUT/oha-$1.json"
		return
	fi
	"$OHA" --no-tui --output-format json -o "$OUT/oha-$1.json" -c 4 -n "$1" -m POST \
		-H 'content-type: application/json' -H "authorization: Bearer $CLIENT_KEY" \
		-d "$BODY" "$URL"
}
load 300
callgrind_control -z "$NODE_PID" >/dev/null
load "$REQUESTS"
callgrind_control -d "$NODE_PID" >/dev/null
sleep 1

python3 - "$OUT/oha-$REQUESTS.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
codes = doc.get("statusCodeDistribution", {})
if set(codes) != {"200"}:
    sys.exit(f"callgrind.sh: not every request succeeded: {codes}")
EOF
dump=$(ls -t "$OUT"/callgrind.out.* 2>/dev/null | head -n1)
[[ -n $dump ]] || { echo "callgrind.sh: no dump was written" >&2; exit 1; }
total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }')
if [[ $TARGET == floor ]]; then
	echo "build: $FLOOR_BIN (in front of the minimal responder)"
elif [[ $TARGET == node ]]; then
	echo "build: $NODE_BIN (upstream: $UPSTREAM, require_api_key: $REQUIRE_KEY, redis: $REDIS, traces: ${TRACES:-off})"
else
	echo "build: $UP_BIN (direct)"
fi
echo "requests: $REQUESTS (stream: $STREAM, client: $CLIENT)"
echo "instructions per request: $((total / REQUESTS))"
callgrind_annotate --inclusive=yes "$dump" 2>/dev/null | grep -v '^-' | sed -n '/file:function/,$p' | head -n 32 >"$OUT/top.txt"
cat "$OUT/top.txt"
echo "profile: $dump"
