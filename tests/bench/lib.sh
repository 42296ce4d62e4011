# Shared by the bench scripts (sourced, not run): every process a script starts goes into
# PIDS and is stopped by its PID when the script exits, and wait_port waits for a listener.
# Before sourcing, a script may set BENCH_NAME (for messages) and BENCH_GRACE_S (how long a
# TERM may take before KILL; default 0.5).

PIDS=()

# Stops every process in PIDS (TERM, then KILL after the grace) and empties the list, so a
# script may also call it between phases.
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	sleep "${BENCH_GRACE_S:-0.5}"
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	PIDS=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_port PORT: returns once something listens on 127.0.0.1:PORT (30 s at most, then exits).
wait_port() {
	local i
	for ((i = 0; i < 300; i++)); do
		(echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "${BENCH_NAME:-bench}: nothing listens on port $1" >&2
	exit 1
}

# wait_addr FILE WHAT [TRIES]: prints the address a process just started writes as the first
# line of FILE (its stdout), polling every 50 ms TRIES times (default 200: 10 s); when none
# comes, names WHAT and fails. Call it as `ADDR=$(wait_addr …) || exit 1`.
wait_addr() {
	local i addr
	for ((i = 0; i < ${3:-200}; i++)); do
		addr=$(head -n1 "$1" 2>/dev/null || true)
		[[ -n $addr ]] && { echo "$addr"; return 0; }
		sleep 0.05
	done
	echo "${BENCH_NAME:-bench}: $2 did not start" >&2
	return 1
}

# start_redis LOG [PREFIX...]: a redis-server of the script's own on a free port, nothing kept
# on disk, started through PREFIX (for example `taskset -c 1`); sets REDIS_URL. Needs HELPER
# (bench.py) for the free port.
start_redis() {
	local log=$1 bin port
	shift
	bin=$(command -v redis-server || true)
	[[ -n $bin ]] || { echo "${BENCH_NAME:-bench}: redis-server is required" >&2; exit 1; }
	read -r port < <(python3 "$HELPER" free-ports 1)
	"$@" "$bin" --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$log" 2>&1 &
	PIDS+=("$!")
	wait_port "$port"
	REDIS_URL="redis://127.0.0.1:$port/0"
}
