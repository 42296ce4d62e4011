#!/usr/bin/env bash
# Switchyard benchmark harness (issue 8). Builds the release binaries, runs the mock upstream
# direct and behind one switchyard-node, and writes results/<timestamp>/{results.md,summary.json,raw/}.
#
#   tests/bench/run.sh            # full run, about 6 minutes once built
#   tests/bench/run.sh --quick    # shorter phases, about 90 seconds once built
#   tests/bench/run.sh --quick --phases json,sse,traces   # OpenTelemetry traces on against off
#
# The gateway is pinned to one core and the mock upstream plus the load generator (oha) to
# another, as in the peers' measurements. All traffic stays on 127.0.0.1; every process the
# script starts is stopped by its PID when the script exits. See docs/performance.md.
set -euo pipefail
export LC_ALL=C
BENCH_NAME=run.sh
# shellcheck source=tests/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
	cat <<'EOF'
usage: tests/bench/run.sh [--quick] [--no-build] [--node-bin FILE] [--phases LIST] [--out DIR]
                          [--max-load L] [--quiet-timeout S] [--gateway-core N] [--load-core N]
                          [--require-key]

  --quick            shorter phases (about 90 s after the build)
  --no-build         use the existing release binaries
  --node-bin FILE    the switchyard-node binary to measure (default: the release build); for
                     A/B runs of two builds in one session
  --phases LIST      comma-separated groups to run (default: all): json (saturation + probe),
                     sse (saturation + probe), ttfb, leak, redis, combo, catalog, slow,
                     traces (json and sse again with OpenTelemetry traces on, exported to a
                     local OTLP sink: run with json,sse for on against off in one report)
  --out DIR          results folder (default: results/<UTC timestamp> in the repository)
  --max-load L       wait until the 1-minute load average is below L (default 1.0) ...
  --quiet-timeout S  ... or S seconds have passed (default 45, quick 2); the load is recorded
  --gateway-core N   core for switchyard-node (default 0)
  --load-core N      core for the mock upstream and oha (default 1)
  --require-key      nodes run with require_api_key = true and one client key, which every
                     request to a node carries (issue 21's condition for its targets; the
                     ttfb probe sends none, so leave that phase out)
EOF
}

QUICK=0
BUILD=1
REQUIRE_KEY=0
NODE_BIN_ARG=""
PHASES=all
OUT=""
MAX_LOAD=1.0
QUIET_TIMEOUT=""
GW_CORE=0
LOAD_CORE=1
while (($#)); do
	case "$1" in
	--quick) QUICK=1 ;;
	--no-build) BUILD=0 ;;
	--node-bin) NODE_BIN_ARG=$2; shift ;;
	--phases) PHASES=$2; shift ;;
	--out) OUT=$2; shift ;;
	--max-load) MAX_LOAD=$2; shift ;;
	--quiet-timeout) QUIET_TIMEOUT=$2; shift ;;
	--gateway-core) GW_CORE=$2; shift ;;
	--load-core) LOAD_CORE=$2; shift ;;
	--require-key) REQUIRE_KEY=1 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done

# Phase lengths (seconds) and sizes.
if ((QUICK)); then
	WARM=1 SAT=3 LAT=2 SHORT_SAT=2 SHORT_LAT=2 TTFB_REQS=150 LEAK_BUDGET=4 SLOW_S=4
	QUIET_TIMEOUT=${QUIET_TIMEOUT:-2}
else
	WARM=3 SAT=15 LAT=10 SHORT_SAT=8 SHORT_LAT=8 TTFB_REQS=1000 LEAK_BUDGET=40 SLOW_S=12
	QUIET_TIMEOUT=${QUIET_TIMEOUT:-45}
fi
RATE=200             # latency probes: one connection at this fixed rate
SAT_CONNS=64         # saturation phases
SSE_CHUNKS=20        # content chunks per streamed response (words per JSON one)
SLOW_STREAMS=5000    # concurrent slow streams for the memory phase
SLOW_CHUNKS=5
SLOW_DELAY_MS=1000
LEAK_REQUESTS=200000 # the issue's leak check; fewer if the node is too slow for the budget
UPSTREAM_KEY=sk-bench-not-a-secret

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HELPER=$ROOT/tests/bench/bench.py
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
NODE_BIN=${NODE_BIN_ARG:-$TARGET_DIR/release/switchyard-node}
MOCK_BIN=$TARGET_DIR/release/switchyard-mock-upstream
RUN=${OUT:-$ROOT/results/$(date -u +%Y%m%dT%H%M%SZ)}
RAW=$RUN/raw
CLK_TCK=$(getconf CLK_TCK)

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
now_us() { local t=${EPOCHREALTIME/[.,]/}; echo "$((10#$t))"; }

ALL_PHASES=(json sse ttfb leak redis combo catalog slow traces)
[[ $PHASES == all ]] && PHASES=$(IFS=,; echo "${ALL_PHASES[*]}")
for ph in ${PHASES//,/ }; do
	[[ " ${ALL_PHASES[*]} " == *" $ph "* ]] || { usage >&2; exit 2; }
done
want() { [[ ",$PHASES," == *",$1,"* ]]; }

for tool in taskset python3 curl; do
	command -v "$tool" >/dev/null || die "$tool is required"
done
NCPU=$(nproc)
((GW_CORE < NCPU && LOAD_CORE < NCPU)) || die "cores $GW_CORE and $LOAD_CORE need a machine with at least 2 cores (this one has $NCPU)"

# --- processes: every PID we start is tracked and stopped on exit --------------------------
track() { PIDS+=("$1"); }
untrack() {
	local keep=() p
	for p in "${PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}
stop_pid() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	untrack "$pid"
}
# Runs a command in the background and waits for it, so that a SIGINT or SIGTERM to this
# script interrupts the wait at once (bash defers traps while a foreground child runs) and the
# EXIT trap stops the child by its PID. Returns the command's status.
run_tracked() {
	local pid rc=0
	"$@" &
	pid=$!
	track "$pid"
	wait "$pid" || rc=$?
	untrack "$pid"
	return "$rc"
}

# --- /proc readings ------------------------------------------------------------------------
proc_ticks() { # utime + stime of a process, all threads, in clock ticks
	local stat f
	stat=$(<"/proc/$1/stat")
	read -r -a f <<<"${stat##*) }"
	echo $((f[11] + f[12]))
}
proc_ut_st() { # "utime stime" of a process, all threads, in clock ticks
	local stat f
	stat=$(<"/proc/$1/stat")
	read -r -a f <<<"${stat##*) }"
	echo "${f[11]} ${f[12]}"
}
proc_cpu_ns() { # nanoseconds on a CPU, all threads (scheduler statistics: exact, not ticks)
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'
}
proc_kib() { # a Vm* line of /proc/PID/status, in KiB
	awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"
}
reset_hwm() { # restart VmHWM from the current RSS so each phase gets its own peak
	echo 5 >"/proc/$1/clear_refs" 2>/dev/null || HWM_RESET=no
}
HWM_RESET=yes
core_ticks() { # "busy total" jiffies of one core; busy includes steal (time the core was not ours)
	awk -v c="cpu$1" '$1 == c { b = $2 + $3 + $4 + $7 + $8 + $9; print b, b + $5 + $6 }' /proc/stat
}
busy_pct() { # before after (each "busy total")
	awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); t = y[2] - x[2]; p = 0
		if (t > 0) p = 100 * (y[1] - x[1]) / t
		printf "%.1f", p }'
}
fd_count() { local fds=("/proc/$1/fd/"*); echo "${#fds[@]}"; }

# --- the build and the load generator ------------------------------------------------------
if ((BUILD)); then
	log "building release binaries"
	(cd "$ROOT" && cargo build --release -p switchyard-node -p switchyard-mock)
fi
[[ -x $NODE_BIN && -x $MOCK_BIN ]] || die "missing $NODE_BIN or $MOCK_BIN (run without --no-build)"
OHA=$(command -v oha || true)
if [[ -z $OHA && -x $HOME/.cargo/bin/oha ]]; then OHA=$HOME/.cargo/bin/oha; fi
if [[ -z $OHA ]]; then
	log "installing oha (cargo install oha --locked)"
	cargo install oha --locked
	OHA=$HOME/.cargo/bin/oha
fi

# Many sockets for the slow-stream phase: the node holds a client and an upstream socket per stream.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
if [[ $NOFILE != unlimited ]] && ((NOFILE < 2 * SLOW_STREAMS + 1000)); then
	SLOW_STREAMS=$(((NOFILE - 1000) / 2))
	log "open-file limit $NOFILE: slow-stream phase reduced to $SLOW_STREAMS streams"
fi

mkdir -p "$RAW"
log "results in $RUN"
# The nodes' access logs reach about 400 MB in a full run before the script trims them.
free_kib=$(df -Pk "$RUN" | awk 'NR == 2 { print $4 }')
((free_kib > 1048576)) || die "less than 1 GiB free under $RUN; the access logs need room"

# --- a quiet machine -----------------------------------------------------------------------
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
deadline=$((SECONDS + QUIET_TIMEOUT))
next_note=0
while :; do
	read -r load1 _ </proc/loadavg
	if awk -v l="$load1" -v m="$MAX_LOAD" 'BEGIN { exit !(l < m) }'; then
		QUIET="1-min load $load1 < $MAX_LOAD"
		break
	fi
	if ((SECONDS >= deadline)); then
		QUIET="not reached: 1-min load still $load1 (>= $MAX_LOAD) after ${QUIET_TIMEOUT} s; measured anyway"
		break
	fi
	if ((SECONDS >= next_note)); then
		log "waiting for a quiet machine: 1-min load $load1"
		next_note=$((SECONDS + 10))
	fi
	sleep 1
done
log "quiet machine: $QUIET"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# --- request bodies ------------------------------------------------------------------------
body() { # file model stream
	printf '{"model":"%s","messages":[{"role":"user","content":"Say hello to the benchmark."}]%s}\n' \
		"$2" "$([[ $3 == true ]] && echo ',"stream":true')" >"$RAW/$1"
}
body direct-json.body bench-model false
body direct-sse.body bench-model true
body gw-json.body mock/bench-model false
body gw-sse.body mock/bench-model true
body gw-combo.body bench-combo false

# --- the mock upstream ---------------------------------------------------------------------
MOCK_PID="" MOCK_ADDR=""
start_mock() { # name chunks chunk-delay-ms
	local out=$RUN/mock-$1.out i
	taskset -c "$LOAD_CORE" "$MOCK_BIN" --listen 127.0.0.1:0 --workers 1 \
		--chunks "$2" --chunk-delay-ms "$3" >"$out" 2>"$RUN/mock-$1.err" &
	MOCK_PID=$!
	track "$MOCK_PID"
	for ((i = 0; i < 200; i++)); do
		MOCK_ADDR=$(head -n1 "$out" 2>/dev/null || true)
		[[ -n $MOCK_ADDR ]] && return 0
		kill -0 "$MOCK_PID" 2>/dev/null || die "mock upstream exited: $(cat "$RUN/mock-$1.err")"
		sleep 0.05
	done
	die "mock upstream did not print its address"
}

# --- the node ------------------------------------------------------------------------------
NODE_PID="" NODE_URL="" NODE_ADMIN="" NODE_NAME="" CATALOG_MODEL="" REDIS_URL=""
# Extra environment for the next node (VAR=value words); the traces phase sets OTEL_*.
NODE_ENV=()
start_node() { # name config-kind
	local name=$1 kind=$2 port admin cfg=$RUN/node-$1.toml t0 t1 idle
	read -r port admin < <(python3 "$HELPER" free-ports 2)
	CATALOG_MODEL=$(python3 "$HELPER" config "$kind" "$cfg" --upstream "$MOCK_ADDR" \
		--listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" ${REDIS_URL:+--redis-url "$REDIS_URL"} \
		$( ((REQUIRE_KEY)) && echo --require-key))
	# Default log level: the access log (one JSON line per request) goes to a file, as in production.
	t0=$(now_us)
	env -u RUST_LOG BENCH_UPSTREAM_KEY="$UPSTREAM_KEY" BENCH_CLIENT_KEY="$CLIENT_KEY" "${NODE_ENV[@]}" \
		taskset -c "$GW_CORE" "$NODE_BIN" --config "$cfg" >"$RUN/node-$name.log" 2>&1 &
	NODE_PID=$!
	track "$NODE_PID"
	until curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$admin/readyz" 2>/dev/null; do
		kill -0 "$NODE_PID" 2>/dev/null || die "node $name exited: $(tail -n 20 "$RUN/node-$name.log")"
		(($(now_us) - t0 < 60000000)) || die "node $name not ready in 60 s"
		sleep 0.002
	done
	t1=$(now_us)
	sleep 1
	idle=$(proc_kib "$NODE_PID" VmRSS)
	NODE_URL="http://127.0.0.1:$port"
	NODE_ADMIN="http://127.0.0.1:$admin"
	NODE_NAME=$name
	printf '{"name":"%s","kind":"%s","startup_ms":%d,"idle_rss_kib":%d,"config_bytes":%d}\n' \
		"$name" "$kind" $(((t1 - t0) / 1000)) "$idle" "$(wc -c <"$cfg")" >"$RAW/node-$name.json"
	log "node $name ready in $(((t1 - t0) / 1000)) ms, idle RSS $((idle / 1024)) MiB"
}
stop_node() {
	local log=$RUN/node-$NODE_NAME.log bytes lines
	stop_pid "$NODE_PID"
	bytes=$(wc -c <"$log")
	lines=$(wc -l <"$log")
	# Keep the tail only: at tens of thousands of requests a second the access log grows fast.
	tail -n 200 "$log" >"$log.tail" && mv "$log.tail" "$log"
	python3 - "$RAW/node-$NODE_NAME.json" "$bytes" "$lines" <<'EOF'
import json, sys
path, size, lines = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path) as f:
    doc = json.load(f)
doc.update(log_bytes=size, log_lines=lines)
with open(path, "w") as f:
    json.dump(doc, f)
EOF
	NODE_PID=""
}

# --- one measured phase --------------------------------------------------------------------
# Requests to the mock direct carry the API key the node would send upstream (AUTH, set by
# direct()); requests to the node are anonymous, as its config allows.
# Requests to a node carry the client key when the node requires one (--require-key).
CLIENT_KEY=sk-bench-client-not-a-secret
AUTH=""
((REQUIRE_KEY)) && AUTH="authorization: Bearer $CLIENT_KEY"
oha_run() { # out-file oha-args...
	local out=$1 auth=()
	shift
	[[ -n $AUTH ]] && auth=(-H "$AUTH")
	run_tracked taskset -c "${OHA_CORE:-$LOAD_CORE}" "$OHA" --no-tui --output-format json -o "$out" --worker-threads 1 \
		-m POST -T application/json "${auth[@]}" -t 60s "$@"
}
# measure NAME WARMUP_S DURATION_S BODY URL OHA_ARGS...: warm-up, then the measured phase,
# recording the CPU time and peak RSS of the node (if one is running) and of the mock.
measure() {
	local name=$1 warm=$2 dur=$3 body=$4 url=$5 t0 t1 n0 n1 m0 m1 g0 g1 l0 l1
	local nhwm="null" nrss="null" ncpu="null" wall ut0=0 st0=0 ut1=0 st1=0 ns0=0 ns1=0
	shift 5
	log "phase $name"
	if [[ $warm != 0 ]]; then
		oha_run "$RAW/$name.warmup.json" -z "${warm}s" -D "$RAW/$body" "$@" "$url"
	fi
	if [[ -n ${METRICS_PHASE:-} && -n $NODE_PID ]]; then
		# The node's own histograms around the measured run (warm-up excluded).
		curl -fsS --max-time 5 -o "$RAW/$name.metrics-before.txt" "$NODE_ADMIN/metrics" || true
	fi
	[[ -n $NODE_PID ]] && reset_hwm "$NODE_PID"
	reset_hwm "$MOCK_PID"
	t0=$(now_us)
	n0=$([[ -n $NODE_PID ]] && proc_ticks "$NODE_PID" || echo 0)
	if [[ -n $NODE_PID ]]; then
		read -r ut0 st0 < <(proc_ut_st "$NODE_PID")
		ns0=$(proc_cpu_ns "$NODE_PID")
	fi
	m0=$(proc_ticks "$MOCK_PID")
	g0=$(core_ticks "$GW_CORE")
	l0=$(core_ticks "$LOAD_CORE")
	oha_run "$RAW/$name.json" -z "${dur}s" -D "$RAW/$body" "$@" "$url"
	t1=$(now_us)
	n1=$([[ -n $NODE_PID ]] && proc_ticks "$NODE_PID" || echo 0)
	if [[ -n $NODE_PID ]]; then
		read -r ut1 st1 < <(proc_ut_st "$NODE_PID")
		ns1=$(proc_cpu_ns "$NODE_PID")
	fi
	m1=$(proc_ticks "$MOCK_PID")
	g1=$(core_ticks "$GW_CORE")
	l1=$(core_ticks "$LOAD_CORE")
	if [[ -n ${METRICS_PHASE:-} && -n $NODE_PID ]]; then
		curl -fsS --max-time 5 -o "$RAW/$name.metrics-after.txt" "$NODE_ADMIN/metrics" || true
	fi
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e6 }')
	if [[ -n $NODE_PID ]]; then
		nhwm=$(proc_kib "$NODE_PID" VmHWM)
		nrss=$(proc_kib "$NODE_PID" VmRSS)
		ncpu=$(awk -v t=$((n1 - n0)) -v hz="$CLK_TCK" -v w="$wall" 'BEGIN { printf "%.1f", 100 * t / hz / w }')
	fi
	printf '{"wall_s":%s,"node":"%s","cpu_pct":%s,"node_cpu_ns":%s,"node_user_ticks":%s,"node_system_ticks":%s,"clk_tck":%s,"hwm_kib":%s,"rss_kib":%s,"mock_cpu_pct":%s,"mock_hwm_kib":%s,"peak_sockets":%s,"hwm_reset":"%s","gw_core_busy_pct":%s,"load_core_busy_pct":%s}\n' \
		"$wall" "$([[ -n $NODE_PID ]] && echo "$NODE_NAME")" "$ncpu" "$((ns1 - ns0))" "$((ut1 - ut0))" "$((st1 - st0))" "$CLK_TCK" "$nhwm" "$nrss" \
		"$(awk -v t=$((m1 - m0)) -v hz="$CLK_TCK" -v w="$wall" 'BEGIN { printf "%.1f", 100 * t / hz / w }')" \
		"$(proc_kib "$MOCK_PID" VmHWM)" "${PEAK_SOCKETS:-null}" "$HWM_RESET" \
		"$(busy_pct "$g0" "$g1")" "$(busy_pct "$l0" "$l1")" >"$RAW/$name.proc.json"
}
sat() { measure "$1" "$WARM" "${4:-$SAT}" "$2" "$3" -c "$SAT_CONNS"; }
lat() { measure "$1" 1 "${4:-$LAT}" "$2" "$3" -c 1 -q "$RATE"; }

# =========================================================================================
# Direct phases: measure() leaves the (idle) node's readings out of them.
direct() { NODE_PID="" AUTH="authorization: Bearer $UPSTREAM_KEY" "$@"; }

# The main mock serves every phase but the slow streams.
if want json || want sse || want ttfb || want leak || want redis || want combo || want catalog || want traces; then
	start_mock main "$SSE_CHUNKS" 0
	DIRECT_URL="http://$MOCK_ADDR/v1/chat/completions"
fi

if want json || want sse || want ttfb || want leak; then
	start_node base base
	GW_URL="$NODE_URL/v1/chat/completions"
fi

if want json; then
	direct sat direct-json-sat direct-json.body "$DIRECT_URL"
	sat gw-json-sat gw-json.body "$GW_URL"
	direct lat direct-json-lat direct-json.body "$DIRECT_URL"
	if ((GW_CORE != LOAD_CORE)); then
		# The same direct probe with the load generator on the gateway's core: what one round
		# trip between the two cores costs (waking the other, idle, CPU), which every request
		# through the node pays and the direct probes above do not.
		OHA_CORE=$GW_CORE direct lat direct-json-lat-xcore direct-json.body "$DIRECT_URL"
	fi
	# Scrape the node's gateway-overhead histogram around the measured probe.
	METRICS_PHASE=1 lat gw-json-lat gw-json.body "$GW_URL"
fi
if want sse; then
	direct sat direct-sse-sat direct-sse.body "$DIRECT_URL"
	sat gw-sse-sat gw-sse.body "$GW_URL"
	direct lat direct-sse-lat direct-sse.body "$DIRECT_URL"
	lat gw-sse-lat gw-sse.body "$GW_URL"
fi

if want ttfb; then
	log "phase SSE time to first byte"
	run_tracked taskset -c "$LOAD_CORE" python3 "$HELPER" ttfb --url "$DIRECT_URL" --body "$RAW/direct-sse.body" \
		--rate "$RATE" --requests "$TTFB_REQS" --header "authorization: Bearer $UPSTREAM_KEY" \
		--out "$RAW/direct-sse.ttfb.json"
	run_tracked taskset -c "$LOAD_CORE" python3 "$HELPER" ttfb --url "$GW_URL" --body "$RAW/gw-sse.body" \
		--rate "$RATE" --requests "$TTFB_REQS" --out "$RAW/gw-sse.ttfb.json"
fi

if want leak; then
	# Leak check: RSS after everything above (the warm-up) against RSS after many more requests.
	leak_n=$(python3 - "$RAW/gw-json-sat.json" "$LEAK_BUDGET" "$LEAK_REQUESTS" <<'EOF'
import json, sys
try:
    rps = json.load(open(sys.argv[1]))["summary"].get("requestsPerSec") or 0
except OSError:
    rps = 20000  # the JSON phases did not run: assume a typical rate
print(max(1000, min(int(sys.argv[3]), int(rps * float(sys.argv[2])))))
EOF
	)
	log "phase leak check: $leak_n requests"
	before=$(proc_kib "$NODE_PID" VmRSS)
	t0=$(now_us)
	# A count, not a duration: bound it in case the node stalls (status 124 = stopped by timeout).
	leak_rc=0
	run_tracked timeout --kill-after=5 $((LEAK_BUDGET * 4 + 30)) \
		taskset -c "$LOAD_CORE" "$OHA" --no-tui --output-format json -o "$RAW/leak.oha.json" --worker-threads 1 \
		-m POST -T application/json -t 60s -c "$SAT_CONNS" -n "$leak_n" -D "$RAW/gw-json.body" "$GW_URL" ||
		leak_rc=$?
	t1=$(now_us)
	sleep 2
	after=$(proc_kib "$NODE_PID" VmRSS)
	printf '{"requests":%d,"elapsed_s":%s,"before_kib":%d,"after_kib":%d,"oha_status":%d}\n' "$leak_n" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')" "$before" "$after" \
		"$leak_rc" >"$RAW/leak.json"
fi
if [[ -n $NODE_PID ]]; then stop_node; fi

if want traces; then
	# The base node again with OpenTelemetry traces on (every request sampled, the SDK's
	# default), exporting to a stand-in OTLP/HTTP collector on the load core. With json,sse in
	# the same run the report sets traces on against off.
	read -r sink_port < <(python3 "$HELPER" free-ports 1)
	taskset -c "$LOAD_CORE" python3 "$HELPER" otlp-sink --port "$sink_port" --out "$RAW/otlp-sink.json" \
		>"$RUN/otlp-sink.log" 2>&1 &
	SINK_PID=$!
	track "$SINK_PID"
	for ((i = 0; i < 100; i++)); do
		(echo >"/dev/tcp/127.0.0.1/$sink_port") 2>/dev/null && break
		sleep 0.05
	done
	NODE_ENV=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$sink_port" OTEL_SERVICE_NAME=switchyard-bench)
	start_node traced base
	NODE_ENV=()
	TRACED_URL="$NODE_URL/v1/chat/completions"
	sat gw-json-sat-traced gw-json.body "$TRACED_URL"
	lat gw-json-lat-traced gw-json.body "$TRACED_URL"
	sat gw-sse-sat-traced gw-sse.body "$TRACED_URL"
	lat gw-sse-lat-traced gw-sse.body "$TRACED_URL"
	stop_node
	stop_pid "$SINK_PID"
fi

# Redis mode: the same base config sharing state through a local redis-server (on the load
# core, like the other helpers). The ordinary success path makes no Redis call, so this should
# match embedded mode.
REDIS_BIN=$(command -v redis-server || true)
if want redis && [[ -n $REDIS_BIN ]]; then
	read -r redis_port < <(python3 "$HELPER" free-ports 1)
	taskset -c "$LOAD_CORE" "$REDIS_BIN" --port "$redis_port" --bind 127.0.0.1 --save "" \
		--appendonly no >"$RUN/redis.log" 2>&1 &
	REDIS_PID=$!
	track "$REDIS_PID"
	for ((i = 0; i < 100; i++)); do
		(echo >"/dev/tcp/127.0.0.1/$redis_port") 2>/dev/null && break
		sleep 0.05
	done
	REDIS_URL="redis://127.0.0.1:$redis_port/0"
	start_node redis redis
	sat gw-redis-json-sat gw-json.body "$NODE_URL/v1/chat/completions"
	lat gw-redis-json-lat gw-json.body "$NODE_URL/v1/chat/completions"
	stop_node
	REDIS_URL=""
	stop_pid "$REDIS_PID"
elif want redis; then
	log "redis-server not installed: redis-mode phases skipped"
fi

if want combo; then
	# Combo of three targets (the first answers).
	start_node combo combo
	sat gw-combo-sat gw-combo.body "$NODE_URL/v1/chat/completions" "$SHORT_SAT"
	lat gw-combo-lat gw-combo.body "$NODE_URL/v1/chat/completions" "$SHORT_LAT"
	stop_node
fi

if want catalog; then
	# The size of the catalogue: 10 connections, then 10,000 over 1,000 providers.
	for kind in catalog-10 catalog-10k; do
		start_node "$kind" "$kind"
		body "gw-$kind.body" "$CATALOG_MODEL" false
		sat "gw-$kind-sat" "gw-$kind.body" "$NODE_URL/v1/chat/completions" "$SHORT_SAT"
		lat "gw-$kind-lat" "gw-$kind.body" "$NODE_URL/v1/chat/completions" "$SHORT_LAT"
		stop_node
	done
fi
if [[ -n $MOCK_PID ]]; then stop_pid "$MOCK_PID"; MOCK_PID=""; fi

if want slow; then
	# Memory under many concurrent slow streams, direct and through the node.
	start_mock slow "$SLOW_CHUNKS" "$SLOW_DELAY_MS"
	DIRECT_URL="http://$MOCK_ADDR/v1/chat/completions"
	slow() { measure "$1" 0 "$SLOW_S" "$2" "$3" -c "$SLOW_STREAMS" --connect-timeout 20s; }
	direct slow direct-slow-streams direct-sse.body "$DIRECT_URL"
	start_node slow base
	PEAK_SOCKETS=0
	(
		# Sample the node's open descriptors while the streams run.
		peak=0
		end=$((SECONDS + SLOW_S + WARM + 5))
		while ((SECONDS < end)) && kill -0 "$NODE_PID" 2>/dev/null; do
			n=$(fd_count "$NODE_PID" 2>/dev/null || echo 0)
			((n > peak)) && peak=$n
			echo "$peak" >"$RAW/slow-fds"
			sleep 0.5
		done
	) &
	SAMPLER=$!
	track "$SAMPLER"
	slow gw-slow-streams gw-sse.body "$NODE_URL/v1/chat/completions"
	PEAK_SOCKETS=$(cat "$RAW/slow-fds" 2>/dev/null || echo null)
	stop_pid "$SAMPLER"
	# Rewrite the phase's record with the sampled descriptor peak.
	sed -i "s/\"peak_sockets\":[^,]*/\"peak_sockets\":$PEAK_SOCKETS/" "$RAW/gw-slow-streams.proc.json"
	# Descriptors still open 2 s after the streams: mostly idle upstream sockets kept pooled.
	sleep 2
	fd_count "$NODE_PID" >"$RAW/slow-fds-after" 2>/dev/null || true
	stop_node
	stop_pid "$MOCK_PID"
fi

# --- the report ----------------------------------------------------------------------------
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=false
[[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]] && dirty=true
python3 - "$RUN/meta.json" <<EOF
import json, sys
json.dump({
    "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
    "mode": "$( ((QUICK)) && echo quick || echo full)",
    "commit": "$commit", "dirty": $([[ $dirty == true ]] && echo True || echo False),
    "cpu": "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)",
    "cores": $NCPU, "kernel": "$(uname -r)", "oha": "$("$OHA" --version)",
    "load_before": "$LOAD_BEFORE", "load_start": "$LOAD_START", "load_after": "$LOAD_AFTER",
    "quiet": "$QUIET", "max_load": "$MAX_LOAD",
    "gateway_core": $GW_CORE, "load_core": $LOAD_CORE,
    "access_log": "default level (info): JSON lines, stdout redirected to a file",
    "require_api_key": $( ((REQUIRE_KEY)) && echo True || echo False),
    "warmup_s": $WARM, "sat_s": $SAT, "lat_s": $LAT, "short_sat_s": $SHORT_SAT,
    "short_lat_s": $SHORT_LAT, "probe_rate": $RATE, "sat_conns": $SAT_CONNS,
    "sse_chunks": $SSE_CHUNKS, "slow_streams": $SLOW_STREAMS, "slow_chunks": $SLOW_CHUNKS,
    "slow_delay_ms": $SLOW_DELAY_MS, "slow_s": $SLOW_S, "hwm_reset": "$HWM_RESET",
    "elapsed_s": $SECONDS,
}, open(sys.argv[1], "w"), indent=2)
EOF
python3 "$HELPER" report "$RUN"
log "done in ${SECONDS} s: $RUN/results.md"
