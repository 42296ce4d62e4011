#!/usr/bin/env bash
# CPU per request of the node against the minimal upstream, the headline figure of
# docs/performance.md.
#
#   tests/bench/cpu.sh [--requests N] [--cg-requests N] [--repeat R] [--cpu-only] [--out DIR]
#
# For JSON and for SSE with 20 chunks, three processes are measured, each on its own:
#   minimal  switchyard-mock-minimal answering directly (the baseline: a bare hyper server),
#   mock     switchyard-mock-upstream answering directly (its plain path, no faults),
#   node     switchyard-node, base config with require_api_key = true and the default access
#            log, in front of the minimal responder; measured again in redis mode against a
#            redis-server the script starts (a fourth table: redis against embedded).
#   floor    switchyard-proxy-floor in front of the minimal responder: actix-web and hyper's
#            client forwarding bytes with no gateway logic, the part of the node's ratio its
#            HTTP stack and the kernel take whatever the node does (a fifth table).
# Two figures per process:
#   instr/req  instructions per request, counted by callgrind (tests/bench/callgrind.sh,
#              --cg-requests, default 2000): independent of machine load;
#   cpu µs/req user+system CPU time from /proc/PID/stat over --requests (default 100000)
#              requests at saturation (oha -c 4, no rate limit): no wall clock involved, but
#              cache and frequency effects of a busy machine still show. The measured process
#              is pinned to core 0, oha (and the responder behind the node) to core 1.
# The ratios node/minimal are printed against the targets (JSON ≤ 3.0×, SSE ≤ 2.5×), then a
# second table splits each CPU figure into user and system time: the node's system time alone
# over the bare server's whole CPU is the floor its ratio cannot go below. A third table puts
# the mock's plain path beside the bare server (issue 21's baseline: within 10 %), in CPU per
# request and in req/s from the same oha runs.
# --repeat runs the whole table R times; --cpu-only skips callgrind (instruction counts do
# not change between repeats of one build). Results go to DIR (default results/cpu-TIMESTAMP).
set -euo pipefail
export LC_ALL=C
BENCH_NAME=cpu.sh
BENCH_GRACE_S=0.3
# shellcheck source=tests/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
NODE_BIN=$TARGET_DIR/release/switchyard-node
MOCK_BIN=$TARGET_DIR/release/switchyard-mock-upstream
MINIMAL_BIN=$TARGET_DIR/release/switchyard-mock-minimal
FLOOR_BIN=$TARGET_DIR/release/switchyard-proxy-floor
HELPER=$ROOT/tests/bench/bench.py
REQUESTS=100000
CG_REQUESTS=2000
REPEAT=1
CPU_ONLY=false
OUT=""
while (($#)); do
	case "$1" in
	--requests) REQUESTS=$2; shift ;;
	--cg-requests) CG_REQUESTS=$2; shift ;;
	--repeat) REPEAT=$2; shift ;;
	--cpu-only) CPU_ONLY=true ;;
	--out) OUT=$2; shift ;;
	-h | --help) sed -n 2,25p "$0"; exit 0 ;;
	*) sed -n 2,25p "$0" >&2; exit 2 ;;
	esac
	shift
done
OUT=${OUT:-$ROOT/results/cpu-$(date -u +%Y%m%dT%H%M%SZ)}
OHA=$(command -v oha || echo "$HOME/.cargo/bin/oha")
[[ -x $OHA ]] || { echo "cpu.sh: oha is required (cargo install oha --locked)" >&2; exit 1; }
[[ -x $NODE_BIN && -x $MOCK_BIN && -x $MINIMAL_BIN && -x $FLOOR_BIN ]] || {
	echo "cpu.sh: build first: cargo build --release -p switchyard-node -p switchyard-mock" >&2
	exit 1
}
mkdir -p "$OUT"
TICK=$(getconf CLK_TCK)
CLIENT_KEY=sk-bench-client-not-a-secret
command -v redis-server >/dev/null || { echo "cpu.sh: redis-server is required (the node's redis mode is measured too)" >&2; exit 1; }


# The process measured gets core SERVER_CORE to itself; oha (and the responder behind the
# node) share LOAD_CORE, as in the issue's setup. Without taskset or a second core, no pinning.
SERVER_CORE=0
LOAD_CORE=1
PIN=false
command -v taskset >/dev/null && (($(nproc) > 1)) && PIN=true
# The command prefix that pins to core $1 (an array: the process started keeps its PID, which
# /proc is read by; a shell function would leave a subshell in between).
pin_to() { # core -> sets PINNED
	PINNED=()
	$PIN && PINNED=(taskset -c "$1")
	return 0
}

# utime + stime of a process, in clock ticks.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# stime alone: the kernel's share (socket calls, and on loopback the peer's receive path).
sys_ticks() { awk '{ print $15 }' "/proc/$1/stat"; }

start_upstream() { # bin name core -> sets UP_ADDR, UP_PID
	# Removed first: the redirect below truncates it only once the child runs, and the loop
	# must not read the previous process's address.
	rm -f "$OUT/$2.out"
	pin_to "$3"
	"${PINNED[@]}" "$1" --listen 127.0.0.1:0 --workers 1 --chunks 20 >"$OUT/$2.out" 2>"$OUT/$2.err" &
	UP_PID=$!
	PIDS+=("$UP_PID")
	UP_ADDR=$(wait_addr "$OUT/$2.out" "$2") || exit 1
}

start_floor() { # upstream addr -> sets FLOOR_ADDR, FLOOR_PID
	rm -f "$OUT/floor.out"
	pin_to "$SERVER_CORE"
	"${PINNED[@]}" "$FLOOR_BIN" --listen 127.0.0.1:0 --upstream "$1" >"$OUT/floor.out" 2>"$OUT/floor.err" &
	FLOOR_PID=$!
	PIDS+=("$FLOOR_PID")
	FLOOR_ADDR=$(wait_addr "$OUT/floor.out" "the floor proxy") || exit 1
}

start_node() { # upstream addr [redis url] -> sets NODE_PORT, NODE_PID
	local admin kind=base mode=()
	read -r NODE_PORT admin < <(python3 "$HELPER" free-ports 2)
	[[ -n ${2:-} ]] && kind=redis mode=(--redis-url "$2")
	python3 "$HELPER" config "$kind" "$OUT/node.toml" --upstream "$1" --require-key "${mode[@]}" \
		--listen "127.0.0.1:$NODE_PORT" --admin "127.0.0.1:$admin" >/dev/null
	pin_to "$SERVER_CORE"
	"${PINNED[@]}" env -u RUST_LOG BENCH_UPSTREAM_KEY=sk-bench-not-a-secret BENCH_CLIENT_KEY=$CLIENT_KEY \
		"$NODE_BIN" --config "$OUT/node.toml" >"$OUT/node.log" 2>"$OUT/node.err" &
	NODE_PID=$!
	PIDS+=("$NODE_PID")
	for ((i = 0; i < 300; i++)); do
		curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$admin/readyz" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "cpu.sh: the node did not become ready" >&2
	exit 1
}

load() { # url model stream requests tag
	local body='{"model":"'$2'","messages":[{"role":"user","content":"Say hello to the benchmark."}],"stream":'$3'}'
	pin_to "$LOAD_CORE"
	"${PINNED[@]}" "$OHA" --no-tui --output-format json -o "$OUT/oha-$5.json" -c 4 -n "$4" -m POST \
		-H 'content-type: application/json' -H "authorization: Bearer $CLIENT_KEY" \
		-d "$body" "$1"
	python3 - "$OUT/oha-$5.json" <<'PY'
import json, sys
codes = json.load(open(sys.argv[1])).get("statusCodeDistribution", {})
if set(codes) != {"200"}:
    sys.exit(f"cpu.sh: not every request succeeded: {codes}")
PY
}

# CPU µs per request of PID while URL serves REQUESTS requests (after 1,000 warm-up ones).
cpu_us() { # pid url model stream tag
	load "$2" "$3" "$4" 1000 "$5-warm"
	local before after sys_before sys_after
	before=$(ticks "$1")
	sys_before=$(sys_ticks "$1")
	load "$2" "$3" "$4" "$REQUESTS" "$5"
	after=$(ticks "$1")
	sys_after=$(sys_ticks "$1")
	python3 -c "print(f'{($sys_after - $sys_before) / $TICK / $REQUESTS * 1e6:.1f}')" >"$OUT/sys-$5.txt"
	python3 -c "import json; print(round(json.load(open('$OUT/oha-$5.json'))['summary']['requestsPerSec']))" >"$OUT/rps-$5.txt"
	python3 -c "print(f'{($after - $before) / $TICK / $REQUESTS * 1e6:.1f}')" | tee "$OUT/cpu-$5.txt"
}

instr() { # callgrind.sh args... -> instructions per request
	"$ROOT/tests/bench/callgrind.sh" --requests "$CG_REQUESTS" --out "$OUT/cg-$1-$2" "${@:3}" \
		>"$OUT/cg-$1-$2.txt"
	awk -F': ' '/instructions per request/ { print $2 }' "$OUT/cg-$1-$2.txt"
}

declare -A R
for ((run = 1; run <= REPEAT; run++)); do
	for kind in json sse; do
		stream=false
		[[ $kind == sse ]] && stream=true
		sflag=()
		$stream && sflag=(--stream)
		# CPU time: each upstream directly, then the node in front of the minimal responder.
		start_upstream "$MINIMAL_BIN" minimal "$SERVER_CORE"
		R[$run,$kind,minimal,cpu]=$(cpu_us "$UP_PID" "http://$UP_ADDR/v1/chat/completions" bench-model $stream "$run-$kind-minimal")
		cleanup
		# Behind the node the responder moves to the load's core: the node has its own.
		start_upstream "$MINIMAL_BIN" minimal "$LOAD_CORE"
		start_node "$UP_ADDR"
		R[$run,$kind,node,cpu]=$(cpu_us "$NODE_PID" "http://127.0.0.1:$NODE_PORT/v1/chat/completions" mock/bench-model $stream "$run-$kind-node")
		cleanup
		# The same node in redis mode (cluster state through a redis-server of our own).
		start_upstream "$MINIMAL_BIN" minimal "$LOAD_CORE"
		# redis-server on the load's core: the node's core stays its own.
		pin_to "$LOAD_CORE"
		start_redis "$OUT/redis.log" "${PINNED[@]}"
		start_node "$UP_ADDR" "$REDIS_URL"
		R[$run,$kind,redis,cpu]=$(cpu_us "$NODE_PID" "http://127.0.0.1:$NODE_PORT/v1/chat/completions" mock/bench-model $stream "$run-$kind-redis")
		cleanup
		# The HTTP stack alone, in the node's place.
		start_upstream "$MINIMAL_BIN" minimal "$LOAD_CORE"
		start_floor "$UP_ADDR"
		R[$run,$kind,floor,cpu]=$(cpu_us "$FLOOR_PID" "http://$FLOOR_ADDR/v1/chat/completions" bench-model $stream "$run-$kind-floor")
		cleanup
		start_upstream "$MOCK_BIN" mock "$SERVER_CORE"
		R[$run,$kind,mock,cpu]=$(cpu_us "$UP_PID" "http://$UP_ADDR/v1/chat/completions" bench-model $stream "$run-$kind-mock")
		cleanup
		# Instruction counts.
		if $CPU_ONLY; then
			for p in minimal mock node; do R[$run,$kind,$p,instr]=0; done
			continue
		fi
		R[$run,$kind,minimal,instr]=$(instr "$run-$kind" minimal --target minimal "${sflag[@]}")
		R[$run,$kind,mock,instr]=$(instr "$run-$kind" mock --target mock "${sflag[@]}")
		R[$run,$kind,node,instr]=$(instr "$run-$kind" node --target node --upstream minimal --require-key "${sflag[@]}")
	done
done

{
	echo "| run | body | minimal instr/req | mock instr/req | node instr/req | node ÷ minimal (instr) | target | minimal CPU µs/req | mock CPU µs/req | node CPU µs/req | node ÷ minimal (CPU) |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for ((run = 1; run <= REPEAT; run++)); do
		for kind in json sse; do
			target="≤ 3.0×"
			[[ $kind == sse ]] && target="≤ 2.5×"
			python3 - "$run" "$kind" "$target" \
				"${R[$run,$kind,minimal,instr]}" "${R[$run,$kind,mock,instr]}" "${R[$run,$kind,node,instr]}" \
				"${R[$run,$kind,minimal,cpu]}" "${R[$run,$kind,mock,cpu]}" "${R[$run,$kind,node,cpu]}" <<'PY'
import sys
run, kind, target, mi, mo, no, mc, oc, nc = sys.argv[1:]
mi, mo, no = int(mi), int(mo), int(no)
mc, oc, nc = float(mc), float(oc), float(nc)
label = "JSON" if kind == "json" else "SSE, 20 chunks"
instr = f"{mi:,} | {mo:,} | {no:,} | {no / mi:.2f}×" if mi else "– | – | – | –"
print(f"| {run} | {label} | {instr} | {target} | {mc:.1f} | {oc:.1f} | {nc:.1f} | {nc / mc:.2f}× |")
PY
		done
	done
} | tee "$OUT/table.md"

# The kernel floor: the node's system time alone, as a multiple of the bare server's whole CPU.
# A proxy makes about twice the socket calls of the server behind it, and on loopback each
# send also pays the receiver's path, so this part of the ratio stays whatever the node's own
# code costs; the user-space part is what the levers can move.
{
	echo
	echo "| run | body | minimal user / sys µs/req | node user / sys µs/req | node sys ÷ minimal CPU (floor) | node user ÷ minimal CPU | target |"
	echo "|---|---|---:|---:|---:|---:|---:|"
	for ((run = 1; run <= REPEAT; run++)); do
		for kind in json sse; do
			target="≤ 3.0×"
			[[ $kind == sse ]] && target="≤ 2.5×"
			python3 - "$run" "$kind" "$target" "${R[$run,$kind,minimal,cpu]}" "${R[$run,$kind,node,cpu]}" \
				"$(cat "$OUT/sys-$run-$kind-minimal.txt")" "$(cat "$OUT/sys-$run-$kind-node.txt")" <<'PY'
import sys
run, kind, target, mc, nc, ms, ns = sys.argv[1:]
mc, nc, ms, ns = float(mc), float(nc), float(ms), float(ns)
label = "JSON" if kind == "json" else "SSE, 20 chunks"
print(f"| {run} | {label} | {mc - ms:.1f} / {ms:.1f} | {nc - ns:.1f} / {ns:.1f} | {ns / mc:.2f}× | {(nc - ns) / mc:.2f}× | {target} |")
PY
		done
	done
} | tee "$OUT/floor.md"

# The baseline (item 1 of issue 21): the mock's plain path against the bare server, each
# pinned alone to one core, in CPU per request and in req/s at `oha -c 4` from the same runs.
{
	echo
	echo "| run | body | minimal req/s | mock req/s | mock ÷ minimal (req/s) | minimal CPU µs/req | mock CPU µs/req | mock ÷ minimal (CPU) |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|"
	for ((run = 1; run <= REPEAT; run++)); do
		for kind in json sse; do
			python3 - "$run" "$kind" "$(cat "$OUT/rps-$run-$kind-minimal.txt")" "$(cat "$OUT/rps-$run-$kind-mock.txt")" \
				"${R[$run,$kind,minimal,cpu]}" "${R[$run,$kind,mock,cpu]}" <<'PY'
import sys
run, kind, mr, orr, mc, oc = sys.argv[1:]
mr, orr, mc, oc = int(mr), int(orr), float(mc), float(oc)
label = "JSON" if kind == "json" else "SSE, 20 chunks"
print(f"| {run} | {label} | {mr:,} | {orr:,} | {orr / mr:.2f}× | {mc:.1f} | {oc:.1f} | {oc / mc:.2f}× |")
PY
		done
	done
} | tee -a "$OUT/table.md"
# Redis mode against embedded (item 5 of issue 21: within 5 %), in CPU per request.
{
	echo
	echo "| run | body | node embedded CPU µs/req | node redis CPU µs/req | redis ÷ embedded | redis ÷ minimal |"
	echo "|---|---|---:|---:|---:|---:|"
	for ((run = 1; run <= REPEAT; run++)); do
		for kind in json sse; do
			python3 - "$run" "$kind" "${R[$run,$kind,node,cpu]}" "${R[$run,$kind,redis,cpu]}" "${R[$run,$kind,minimal,cpu]}" <<'PY'
import sys
run, kind, ec, rc, mc = sys.argv[1:]
ec, rc, mc = float(ec), float(rc), float(mc)
label = "JSON" if kind == "json" else "SSE, 20 chunks"
print(f"| {run} | {label} | {ec:.1f} | {rc:.1f} | {rc / ec:.2f}× | {rc / mc:.2f}× |")
PY
		done
	done
} | tee -a "$OUT/table.md"

# The HTTP stack's floor: a proxy with no gateway logic on the same stack, against the bare
# server, and the node against it. floor ÷ minimal is the part of the node's ratio that its
# code cannot move; node ÷ floor is what the gateway's own work costs on top.
{
	echo
	echo "| run | body | minimal CPU µs/req | floor CPU µs/req | floor user / sys µs/req | floor ÷ minimal | node CPU µs/req | node ÷ floor | target (node ÷ minimal) |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
	for ((run = 1; run <= REPEAT; run++)); do
		for kind in json sse; do
			target="≤ 3.0×"
			[[ $kind == sse ]] && target="≤ 2.5×"
			python3 - "$run" "$kind" "$target" "${R[$run,$kind,minimal,cpu]}" "${R[$run,$kind,floor,cpu]}" \
				"$(cat "$OUT/sys-$run-$kind-floor.txt")" "${R[$run,$kind,node,cpu]}" <<'PY'
import sys
run, kind, target, mc, fc, fs, nc = sys.argv[1:]
mc, fc, fs, nc = float(mc), float(fc), float(fs), float(nc)
label = "JSON" if kind == "json" else "SSE, 20 chunks"
print(f"| {run} | {label} | {mc:.1f} | {fc:.1f} | {fc - fs:.1f} / {fs:.1f} | {fc / mc:.2f}× | {nc:.1f} | {nc / fc:.2f}× | {target} |")
PY
		done
	done
} | tee "$OUT/stack.md"
echo "results: $OUT"
