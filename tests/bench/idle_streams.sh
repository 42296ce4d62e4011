#!/usr/bin/env bash
# Memory per idle long-lived stream (issue 21, item 4): RSS of the node holding N streams that
# got their first event and then wait, as a coding agent's do.
#
#   tests/bench/idle_streams.sh [--steps 1000,5000,10000] [--node-bin FILE] [--hold-s S]
#                               [--settle S] [--node-env VAR=VALUE]... [--keepalive]
#                               [--tls [--http-version auto|http1]] [--out DIR]
#
# The mock upstream answers every stream with its first content chunk at once and the next
# one only after --hold-s seconds (default 600: `--chunks 2 --chunk-delay-ms`), so the streams
# stay open and idle. One release node in embedded mode (the harness's base config, one
# worker) sits in front of it. tests/bench/streams.py opens the streams in steps over
# loopback, reads each one's response head and first event, then holds it; after each step it
# waits --settle seconds (default 3) and reads the node's VmRSS and open descriptors.
# Reported per step: (RSS_N - RSS_0) / N, and the marginal cost between steps.
#
# The node holds two sockets per stream over HTTP/1.1 (client and upstream), so 10,000 streams
# need an open-file limit of at least 20,300 (over HTTP/2 with --tls, one per stream: 10,300
# will do): the script raises the limit to 65,536 (root may
# raise the hard limit too), else to the hard limit, and caps N to what fits. --tls puts the
# mock behind switchyard-tls-front (HTTPS, ALPN h2 and http/1.1, a CA made with openssl at
# run time and trusted through the provider's ca_file) and the node speaks --http-version
# (default auto: HTTP/2) to it; each step then also reports the node's upstream TCP
# connections and its CPU per stream opened. --node-env passes variables to
# the node (for A/B runs of allocator settings). --keepalive holds idle keep-alive
# connections that made one `GET /v1/models` instead of streams: the HTTP server's own share
# of a stream's memory, with no upstream connection. Every process started here is stopped by
# its PID on exit. Results: DIR (default results/idle-TIMESTAMP): streams.json and table.md.
set -euo pipefail
export LC_ALL=C
BENCH_NAME=idle_streams.sh
# shellcheck source=tests/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
NODE_BIN=$TARGET_DIR/release/switchyard-node
MOCK_BIN=$TARGET_DIR/release/switchyard-mock-upstream
HELPER=$ROOT/tests/bench/bench.py
CLIENT=$ROOT/tests/bench/streams.py
STEPS=1000,5000,10000
HOLD_S=600
SETTLE=3
NODE_ENV=()
KEEPALIVE=()
TLS=false
HTTP_VERSION=auto
OUT=""
while (($#)); do
	case "$1" in
	--steps) STEPS=$2; shift ;;
	--node-bin) NODE_BIN=$2; shift ;;
	--hold-s) HOLD_S=$2; shift ;;
	--settle) SETTLE=$2; shift ;;
	--node-env) NODE_ENV+=("$2"); shift ;;
	--keepalive) KEEPALIVE=(--keepalive) ;;
	--tls) TLS=true ;;
	--http-version) HTTP_VERSION=$2; shift ;;
	--out) OUT=$2; shift ;;
	-h | --help) sed -n 2,28p "$0"; exit 0 ;;
	*) sed -n 2,28p "$0" >&2; exit 2 ;;
	esac
	shift
done
OUT=${OUT:-$ROOT/results/idle-$(date -u +%Y%m%dT%H%M%SZ)}
for tool in python3 curl; do
	command -v "$tool" >/dev/null || { echo "idle_streams.sh: $tool is required" >&2; exit 1; }
done
[[ -x $NODE_BIN && -x $MOCK_BIN ]] || {
	echo "idle_streams.sh: build first: cargo build --release -p switchyard-node -p switchyard-mock" >&2
	exit 1
}
mkdir -p "$OUT"

# Two sockets per stream in the node; the client and the mock hold one each.
if (($(ulimit -Hn) < 65536)); then ulimit -Hn 65536 2>/dev/null || true; fi
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
read -r port_lo port_hi </proc/sys/net/ipv4/ip_local_port_range
if $TLS && [[ $HTTP_VERSION != http1 ]]; then
	# Over HTTP/2 the streams share a few upstream connections: one socket per stream.
	MAX=$((NOFILE - 300))
else
	MAX=$(((NOFILE - 200) / 2))
fi
# Loopback connects to two destinations (node, mock): each needs its own ephemeral port.
((MAX * 2 < port_hi - port_lo)) || MAX=$(((port_hi - port_lo) / 2 - 100))
CAPPED=()
for s in ${STEPS//,/ }; do
	if ((s > MAX)); then
		echo "idle_streams.sh: $s streams do not fit the open-file limit $NOFILE: capped to $MAX" >&2
		s=$MAX
	fi
	CAPPED+=("$s")
done
STEPS=$(IFS=,; echo "${CAPPED[*]}")


"$MOCK_BIN" --listen 127.0.0.1:0 --workers 1 --chunks 2 --chunk-delay-ms $((HOLD_S * 1000)) \
	--max-stall-secs $((HOLD_S + 60)) >"$OUT/mock.out" 2>"$OUT/mock.err" &
MOCK_PID=$!
PIDS+=("$MOCK_PID")
MOCK_ADDR=$(wait_addr "$OUT/mock.out" "the mock upstream") || exit 1
UPSTREAM=$MOCK_ADDR
TLS_ARGS=()
if $TLS; then
	FRONT_BIN=$TARGET_DIR/release/switchyard-tls-front
	[[ -x $FRONT_BIN ]] || { echo "idle_streams.sh: build first ($FRONT_BIN is missing)" >&2; exit 1; }
	d=$OUT/tls
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-subj "/CN=switchyard bench CA" -keyout "$d/ca.key" -out "$d/ca.pem" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign >/dev/null 2>&1
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
		-keyout "$d/server.key" -out "$d/server.csr" >/dev/null 2>&1
	printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$d/ext.cnf"
	openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
		-days 2 -extfile "$d/ext.cnf" -out "$d/server.pem" >/dev/null 2>&1
	"$FRONT_BIN" --listen 127.0.0.1:0 --upstream "$MOCK_ADDR" --cert "$d/server.pem" --key "$d/server.key" \
		>"$OUT/front.out" 2>"$OUT/front.err" &
	PIDS+=("$!")
	UPSTREAM=$(wait_addr "$OUT/front.out" "the TLS front") || exit 1
	TLS_ARGS=(--scheme https --ca-file "$d/ca.pem" --http-version "$HTTP_VERSION")
fi

read -r port admin < <(python3 "$HELPER" free-ports 2)
python3 "$HELPER" config base "$OUT/node.toml" --upstream "$UPSTREAM" "${TLS_ARGS[@]}" \
	--listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" >/dev/null
env -u RUST_LOG BENCH_UPSTREAM_KEY=sk-bench-not-a-secret "${NODE_ENV[@]}" \
	"$NODE_BIN" --config "$OUT/node.toml" >"$OUT/node.log" 2>&1 &
NODE_PID=$!
PIDS+=("$NODE_PID")
for ((i = 0; i < 300; i++)); do
	curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$admin/readyz" 2>/dev/null && break
	kill -0 "$NODE_PID" 2>/dev/null || { echo "idle_streams.sh: the node exited" >&2; tail "$OUT/node.log" >&2; exit 1; }
	sleep 0.1
done
sleep 1

printf '{"model":"mock/bench-model","messages":[{"role":"user","content":"Say hello to the benchmark."}],"stream":true}\n' >"$OUT/body.json"
rc=0
python3 "$CLIENT" hold --url "http://127.0.0.1:$port/v1/chat/completions" --body "$OUT/body.json" \
	--steps "$STEPS" --pid "$NODE_PID,$MOCK_PID" --settle "$SETTLE" "${KEEPALIVE[@]}" \
	--upstream-port "${UPSTREAM##*:}" --out "$OUT/streams.json" &
CLIENT_PID=$!
PIDS+=("$CLIENT_PID")
wait "$CLIENT_PID" || rc=$?

python3 - "$OUT/streams.json" "$NODE_BIN" "$NOFILE" "$(getconf CLK_TCK)" "$($TLS && echo "https, http_version = $HTTP_VERSION" || echo "plain HTTP/1.1")" <<'EOF' | tee "$OUT/table.md"
import json, sys
doc = json.load(open(sys.argv[1]))
tick = int(sys.argv[4])
steps = doc["steps"]
base = steps[0]["procs"][0]
print(f"node: {sys.argv[2]}; open-file limit {sys.argv[3]}; upstream: {sys.argv[5]}")
print(f"idle node: VmRSS {base['VmRSS']:,} KiB, {base['fds']} descriptors")
print()
print("| streams | node VmRSS KiB | (RSS_N - RSS_0) / N KiB | marginal KiB/stream | node descriptors | upstream TCP connections | node CPU µs per stream opened | mock VmRSS KiB | failed |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
prev = steps[0]
for s in steps[1:]:
    node, mock = s["procs"][0], s["procs"][1]
    n = s["streams"]
    per = (node["VmRSS"] - base["VmRSS"]) / n if n else 0
    dn = n - prev["streams"]
    marginal = (node["VmRSS"] - prev["procs"][0]["VmRSS"]) / dn if dn else 0
    cpu = (node.get("cpu_ticks", 0) - prev["procs"][0].get("cpu_ticks", 0)) / tick / dn * 1e6 if dn else 0
    up = s.get("upstream_conns")
    print(f"| {n:,} | {node['VmRSS']:,} | {per:.1f} | {marginal:.1f} | {node['fds']:,} | "
          f"{'—' if up is None else f'{up:,}'} | {cpu:.0f} | {mock.get('VmRSS', 0):,} | {s['errors']} |")
    prev = s
EOF
echo "results: $OUT"
exit "$rc"
