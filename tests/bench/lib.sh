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
