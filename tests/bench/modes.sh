#!/usr/bin/env bash
# Saturation req/s of the node in several modes on the same load, alternated round by round
# (issue 21, items 5 and 6): embedded, redis (mode = "redis" against a redis-server started
# here on a free port) and traces (OpenTelemetry on, sampled at --ratio, exported to
# bench.py's stand-in OTLP collector).
#
#   tests/bench/modes.sh [--modes embedded,redis,traces] [--rounds R] [--seconds S]
#                        [--ratio 0.01] [--stream] [--node-bin FILE] [--out DIR]
#
# Each round starts a fresh node per mode, warms it up for 2 s, then runs `wrk -t1 -c64` for
# --seconds (default 10) with the harness's request body. The node is pinned to core 0, the
# mock upstream, redis, the collector and wrk to core 1, as in run.sh. Alternating the modes
# within each round spreads a busy machine's drift over all of them; the table gives each
# round's req/s and each mode's ratio to embedded in that round, then the median ratio.
# Every process started here is stopped by its PID on exit.
set -euo pipefail
export LC_ALL=C
BENCH_NAME=modes.sh
# shellcheck source=tests/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
NODE_BIN=$TARGET_DIR/release/switchyard-node
MOCK_BIN=$TARGET_DIR/release/switchyard-mock-upstream
HELPER=$ROOT/tests/bench/bench.py
MODES=embedded,redis,traces
ROUNDS=3
SECONDS_PER=10
RATIO=0.01
STREAM=false
OUT=""
while (($#)); do
	case "$1" in
	--modes) MODES=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--seconds) SECONDS_PER=$2; shift ;;
	--ratio) RATIO=$2; shift ;;
	--stream) STREAM=true ;;
	--node-bin) NODE_BIN=$2; shift ;;
	--out) OUT=$2; shift ;;
	-h | --help) sed -n 2,16p "$0"; exit 0 ;;
	*) sed -n 2,16p "$0" >&2; exit 2 ;;
	esac
	shift
done
OUT=${OUT:-$ROOT/results/modes-$(date -u +%Y%m%dT%H%M%SZ)}
for tool in wrk taskset python3 curl; do
	command -v "$tool" >/dev/null || { echo "modes.sh: $tool is required (wrk: apt-get install wrk)" >&2; exit 1; }
done
[[ -x $NODE_BIN && -x $MOCK_BIN ]] || {
	echo "modes.sh: build first: cargo build --release -p switchyard-node -p switchyard-mock" >&2
	exit 1
}
for m in ${MODES//,/ }; do
	[[ $m == embedded || $m == redis || $m == traces ]] || { echo "modes.sh: unknown mode $m" >&2; exit 2; }
done
mkdir -p "$OUT"
GW_CORE=0
LOAD_CORE=1

stop() { # pid
	kill -TERM "$1" 2>/dev/null || true
	local i
	for ((i = 0; i < 50; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
taskset -c "$LOAD_CORE" "$MOCK_BIN" --listen 127.0.0.1:0 --workers 1 --chunks 20 \
	>"$OUT/mock.out" 2>"$OUT/mock.err" &
PIDS+=("$!")
MOCK_ADDR=$(wait_addr "$OUT/mock.out" "the mock upstream") || exit 1

if [[ ,$MODES, == *,redis,* ]]; then
	read -r redis_port < <(python3 "$HELPER" free-ports 1)
	taskset -c "$LOAD_CORE" redis-server --port "$redis_port" --bind 127.0.0.1 --save "" \
		--appendonly no >"$OUT/redis.log" 2>&1 &
	PIDS+=("$!")
	wait_port "$redis_port"
fi
if [[ ,$MODES, == *,traces,* ]]; then
	read -r sink_port < <(python3 "$HELPER" free-ports 1)
	taskset -c "$LOAD_CORE" python3 "$HELPER" otlp-sink --port "$sink_port" --out "$OUT/otlp-sink.json" \
		>"$OUT/otlp-sink.log" 2>&1 &
	PIDS+=("$!")
	wait_port "$sink_port"
fi

BODY='{"model":"mock/bench-model","messages":[{"role":"user","content":"Say hello to the benchmark."}],"stream":'$STREAM'}'
python3 - "$OUT/post.lua" "$BODY" <<'EOF'
import json, sys
open(sys.argv[1], "w").write(
    'wrk.method = "POST"\nwrk.headers["content-type"] = "application/json"\n'
    f"wrk.body = {json.dumps(sys.argv[2])}\n")
EOF

run_mode() { # mode round -> sets RPS
	local mode=$1 round=$2 kind=base extra=() env=() port admin pid i rps non2xx
	read -r port admin < <(python3 "$HELPER" free-ports 2)
	if [[ $mode == redis ]]; then
		kind=redis
		extra=(--redis-url "redis://127.0.0.1:$redis_port/0")
	fi
	[[ $mode == traces ]] && env=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$sink_port"
		OTEL_SERVICE_NAME=switchyard-bench OTEL_TRACES_SAMPLER=parentbased_traceidratio
		OTEL_TRACES_SAMPLER_ARG="$RATIO")
	python3 "$HELPER" config "$kind" "$OUT/node-$mode.toml" --upstream "$MOCK_ADDR" \
		--listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" "${extra[@]}" >/dev/null
	env -u RUST_LOG BENCH_UPSTREAM_KEY=sk-bench-not-a-secret "${env[@]}" \
		taskset -c "$GW_CORE" "$NODE_BIN" --config "$OUT/node-$mode.toml" >"$OUT/node-$mode.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	for ((i = 0; i < 300; i++)); do
		curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$admin/readyz" 2>/dev/null && break
		kill -0 "$pid" 2>/dev/null || { echo "modes.sh: node $mode exited" >&2; tail "$OUT/node-$mode.log" >&2; exit 1; }
		sleep 0.1
	done
	local url=http://127.0.0.1:$port/v1/chat/completions
	taskset -c "$LOAD_CORE" wrk -t1 -c64 -d2s -s "$OUT/post.lua" "$url" >/dev/null
	taskset -c "$LOAD_CORE" wrk -t1 -c64 -d"${SECONDS_PER}s" -s "$OUT/post.lua" "$url" >"$OUT/wrk-$mode-$round.txt"
	stop "$pid"
	: >"$OUT/node-$mode.log"
	rps=$(awk '/^Requests\/sec:/ { print $2 }' "$OUT/wrk-$mode-$round.txt")
	non2xx=$(awk '/Non-2xx/ { print $NF }' "$OUT/wrk-$mode-$round.txt")
	[[ -z $non2xx ]] || { echo "modes.sh: $mode: $non2xx non-2xx answers" >&2; exit 1; }
	RPS=$rps
}

declare -A R
for ((r = 1; r <= ROUNDS; r++)); do
	for m in ${MODES//,/ }; do
		run_mode "$m" "$r"
		R[$r,$m]=$RPS
		echo "round $r $m: ${R[$r,$m]} req/s (1-min load $(cut -d' ' -f1 /proc/loadavg))" >&2
	done
done

{
	echo "modes.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), node $NODE_BIN, stream $STREAM, traces ratio $RATIO, ${SECONDS_PER} s per run, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	printf '| round |'; for m in ${MODES//,/ }; do printf ' %s req/s |' "$m"; done
	for m in ${MODES//,/ }; do [[ $m == embedded ]] || printf ' %s ÷ embedded |' "$m"; done
	echo
	printf '|---:|'; for m in ${MODES//,/ }; do printf -- '---:|'; done
	for m in ${MODES//,/ }; do [[ $m == embedded ]] || printf -- '---:|'; done
	echo
	args=()
	for ((r = 1; r <= ROUNDS; r++)); do for m in ${MODES//,/ }; do args+=("$r:$m:${R[$r,$m]}"); done; done
	python3 - "$ROUNDS" "$MODES" "${args[@]}" <<'EOF'
import statistics, sys
rounds, modes = int(sys.argv[1]), sys.argv[2].split(",")
v = {}
for a in sys.argv[3:]:
    r, m, x = a.split(":")
    v[int(r), m] = float(x)
ratios = {m: [] for m in modes if m != "embedded"}
for r in range(1, rounds + 1):
    row = [f"{v[r, m]:,.0f}" for m in modes]
    for m in ratios:
        q = v[r, m] / v[r, "embedded"] if "embedded" in modes else 0
        ratios[m].append(q)
        row.append(f"{100 * q:.1f} %")
    print(f"| {r} | " + " | ".join(row) + " |")
if "embedded" in modes and rounds:
    med = ["median", *[""] * len(modes), *[f"{100 * statistics.median(q):.1f} %" for q in ratios.values()]]
    print("| " + " | ".join(med) + " |")
EOF
} | tee "$OUT/table.md"
echo "results: $OUT"
