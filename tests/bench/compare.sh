#!/usr/bin/env bash
# The node against the proxies operators already trust, in one run: CPU per request and added
# latency of nginx, HAProxy, switchyard-proxy-floor and the node, each in front of the same
# bare server (switchyard-mock-minimal), with the bare server answering directly as the base.
#
#   tests/bench/compare.sh [--seconds S] [--lat-requests N] [--repeat R] [--systems LIST]
#                          [--tls] [--out DIR]
#
# Every system under test gets core 0 to itself, with one worker (nginx `worker_processes 1`,
# HAProxy `nbthread 1`, the node and the floor one actix worker); the bare server behind it,
# the TLS front (with --tls) and the load share core 1. Upstream connections are kept alive
# on every proxy: nginx `keepalive` with `proxy_http_version 1.1` and `proxy_buffering off`,
# HAProxy `http-reuse always`, the node's and the floor's own pools. The node runs the
# harness's base config with `require_api_key = true` and its default access log; nginx
# keeps its default access log (combined format, to a file); HAProxy logs nothing (its default).
#
# Per system and body (JSON, and SSE with 20 chunks):
#   CPU µs/req  user+system CPU of the system's processes (nginx: master and worker) from
#               /proc/PID/stat over S seconds (default 5) of `wrk -t1 -c4` at saturation,
#               after one second of warm-up, divided by the requests wrk completed;
#   p50 ms      the median of whole request times of one keep-alive connection at 200 req/s
#               (bench.py ttfb, N requests, default 600); `added` is that minus the bare
#               server's median in the same run.
# Then the ratios node ÷ nginx and (node − floor) ÷ nginx against the targets (≤ 1.5× and
# ≤ 0.25×).
#
# --tls puts the bare server behind a TLS front (switchyard-tls-front: ALPN h2 and
# http/1.1, a certificate authority made at run time with openssl) and measures nginx
# (`proxy_ssl_verify on`, sessions reused, keep-alive), HAProxy (`ssl verify required`,
# `http-reuse always`) and the node over HTTP/1.1 (`http_version = "http1"`) and over
# HTTP/2 (`"auto"`) against it; the floor speaks plain HTTP only and is left out.
# nginx (Debian `nginx-light`), HAProxy and wrk are installed with apt-get when missing.
# Results: DIR (default results/compare-TIMESTAMP), table.md and the raw files.
set -euo pipefail
export LC_ALL=C
BENCH_NAME=compare.sh
BENCH_GRACE_S=0.3
# shellcheck source=tests/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
NODE_BIN=$TARGET_DIR/release/switchyard-node
MINIMAL_BIN=$TARGET_DIR/release/switchyard-mock-minimal
FLOOR_BIN=$TARGET_DIR/release/switchyard-proxy-floor
FRONT_BIN=$TARGET_DIR/release/switchyard-tls-front
HELPER=$ROOT/tests/bench/bench.py
SECONDS_PER=5
LAT_REQUESTS=600
REPEAT=1
TLS=false
SYSTEMS=""
OUT=""
while (($#)); do
	case "$1" in
	--seconds) SECONDS_PER=$2; shift ;;
	--lat-requests) LAT_REQUESTS=$2; shift ;;
	--repeat) REPEAT=$2; shift ;;
	--systems) SYSTEMS=$2; shift ;;
	--tls) TLS=true ;;
	--out) OUT=$2; shift ;;
	-h | --help) sed -n 2,33p "$0"; exit 0 ;;
	*) sed -n 2,33p "$0" >&2; exit 2 ;;
	esac
	shift
done
if $TLS; then
	SYSTEMS=${SYSTEMS:-bare,nginx,haproxy,node,node-h2}
else
	SYSTEMS=${SYSTEMS:-bare,floor,nginx,haproxy,node}
fi
OUT=${OUT:-$ROOT/results/compare-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"

# The reference proxies and the load generator come from the distribution.
need_pkg() { # command package
	command -v "$1" >/dev/null && return 0
	echo "compare.sh: installing $2" >&2
	if [[ -z ${APT_UPDATED:-} ]]; then
		apt-get update -qq >"$OUT/apt.log" 2>&1
		APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >>"$OUT/apt.log" 2>&1 || {
		echo "compare.sh: apt-get install $2 failed (see $OUT/apt.log)" >&2
		exit 1
	}
}
need_pkg wrk wrk
need_pkg taskset util-linux
[[ ,$SYSTEMS, == *,nginx,* ]] && need_pkg nginx nginx-light
[[ ,$SYSTEMS, == *,haproxy,* ]] && need_pkg haproxy haproxy
$TLS && need_pkg openssl openssl
for bin in "$NODE_BIN" "$MINIMAL_BIN" "$FLOOR_BIN" $($TLS && echo "$FRONT_BIN"); do
	[[ -x $bin ]] || {
		echo "compare.sh: build first: cargo build --release -p switchyard-node -p switchyard-mock ($bin is missing)" >&2
		exit 1
	}
done
(($(nproc) > 1)) || { echo "compare.sh: needs 2 cores (one for the system, one for load and upstream)" >&2; exit 1; }

SERVER_CORE=0
LOAD_CORE=1
TICK=$(getconf CLK_TCK)
CLIENT_KEY=sk-bench-client-not-a-secret

# utime + stime of a process and its children (nginx's worker is its master's child).
tree_ticks() {
	local total=0 p
	for p in $1 $(ps -o pid= --ppid "$1" 2>/dev/null); do
		total=$((total + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$total"
}

# A certificate authority and a server certificate for 127.0.0.1, made for this run only.
make_certs() {
	local d=$OUT/tls
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-subj "/CN=switchyard bench CA" -keyout "$d/ca.key" -out "$d/ca.pem" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign >/dev/null 2>&1
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
		-keyout "$d/server.key" -out "$d/server.csr" >/dev/null 2>&1
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$d/ext.cnf"
	openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
		-days 2 -extfile "$d/ext.cnf" -out "$d/server.pem" >/dev/null 2>&1
	CA=$d/ca.pem
}

start_minimal() { # core -> UP_ADDR, UP_PID
	rm -f "$OUT/minimal.out"
	taskset -c "$1" "$MINIMAL_BIN" --listen 127.0.0.1:0 --workers 1 --chunks 20 >"$OUT/minimal.out" 2>"$OUT/minimal.err" &
	UP_PID=$!
	PIDS+=("$UP_PID")
	UP_ADDR=$(wait_addr "$OUT/minimal.out" "the bare server") || exit 1
	UP_HOST=$UP_ADDR
	UP_SCHEME=http
	if $TLS; then
		rm -f "$OUT/front.out"
		taskset -c "$LOAD_CORE" "$FRONT_BIN" --listen 127.0.0.1:0 --upstream "$UP_ADDR" \
			--cert "$OUT/tls/server.pem" --key "$OUT/tls/server.key" >"$OUT/front.out" 2>"$OUT/front.err" &
		PIDS+=("$!")
		UP_HOST=$(wait_addr "$OUT/front.out" "the TLS front") || exit 1
		UP_SCHEME=https
	fi
}

start_nginx() { # -> SUT_PID, SUT_URL
	local port conf=$OUT/nginx.conf upstream_tls=""
	read -r port < <(python3 "$HELPER" free-ports 1)
	$TLS && upstream_tls="proxy_ssl_verify on; proxy_ssl_trusted_certificate $CA; proxy_ssl_name localhost; proxy_ssl_session_reuse on;"
	mkdir -p "$OUT/nginx-tmp"
	cat >"$conf" <<EOF
worker_processes 1;
daemon off;
pid $OUT/nginx.pid;
error_log $OUT/nginx-error.log warn;
events { worker_connections 16384; }
http {
    access_log $OUT/nginx-access.log;
    client_body_temp_path $OUT/nginx-tmp;
    proxy_temp_path $OUT/nginx-tmp;
    upstream up { server $UP_HOST; keepalive 64; }
    server {
        listen 127.0.0.1:$port;
        location / {
            proxy_pass $UP_SCHEME://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            $upstream_tls
        }
    }
}
EOF
	taskset -c "$SERVER_CORE" nginx -c "$conf" -e "$OUT/nginx-error.log" >"$OUT/nginx.out" 2>&1 &
	SUT_PID=$!
	PIDS+=("$SUT_PID")
	wait_port "$port"
	SUT_URL=http://127.0.0.1:$port/v1/chat/completions
	MODEL=bench-model
}

start_haproxy() { # -> SUT_PID, SUT_URL
	local port conf=$OUT/haproxy.cfg server_tls=""
	read -r port < <(python3 "$HELPER" free-ports 1)
	$TLS && server_tls="ssl verify required ca-file $CA sni str(localhost) alpn http/1.1"
	cat >"$conf" <<EOF
global
    nbthread 1
    maxconn 4000
defaults
    mode http
    timeout connect 5s
    timeout client 600s
    timeout server 600s
    http-reuse always
frontend fe
    bind 127.0.0.1:$port
    default_backend be
backend be
    server up $UP_HOST $server_tls
EOF
	taskset -c "$SERVER_CORE" haproxy -db -f "$conf" >"$OUT/haproxy.out" 2>&1 &
	SUT_PID=$!
	PIDS+=("$SUT_PID")
	wait_port "$port"
	SUT_URL=http://127.0.0.1:$port/v1/chat/completions
	MODEL=bench-model
}

start_floor() { # -> SUT_PID, SUT_URL
	rm -f "$OUT/floor.out"
	taskset -c "$SERVER_CORE" "$FLOOR_BIN" --listen 127.0.0.1:0 --upstream "$UP_ADDR" >"$OUT/floor.out" 2>"$OUT/floor.err" &
	SUT_PID=$!
	PIDS+=("$SUT_PID")
	SUT_URL=http://$(wait_addr "$OUT/floor.out" "the floor proxy")/v1/chat/completions || exit 1
	MODEL=bench-model
}

start_node() { # http_version -> SUT_PID, SUT_URL
	local port admin tls=()
	read -r port admin < <(python3 "$HELPER" free-ports 2)
	$TLS && tls=(--scheme https --ca-file "$CA" --http-version "$1")
	python3 "$HELPER" config base "$OUT/node.toml" --upstream "$UP_HOST" --require-key "${tls[@]}" \
		--listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" >/dev/null
	taskset -c "$SERVER_CORE" env -u RUST_LOG BENCH_UPSTREAM_KEY=sk-bench-not-a-secret BENCH_CLIENT_KEY=$CLIENT_KEY \
		"$NODE_BIN" --config "$OUT/node.toml" >"$OUT/node.log" 2>"$OUT/node.err" &
	SUT_PID=$!
	PIDS+=("$SUT_PID")
	for ((i = 0; i < 300; i++)); do
		curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$admin/readyz" 2>/dev/null && break
		kill -0 "$SUT_PID" 2>/dev/null || { echo "compare.sh: the node exited" >&2; tail "$OUT/node.err" >&2; exit 1; }
		sleep 0.1
	done
	SUT_URL=http://127.0.0.1:$port/v1/chat/completions
	MODEL=mock/bench-model
}

start_system() { # system
	case "$1" in
	bare)
		start_minimal "$SERVER_CORE"
		SUT_PID=$UP_PID
		SUT_URL=http://$UP_ADDR/v1/chat/completions
		MODEL=bench-model
		;;
	floor) start_minimal "$LOAD_CORE"; start_floor ;;
	nginx) start_minimal "$LOAD_CORE"; start_nginx ;;
	haproxy) start_minimal "$LOAD_CORE"; start_haproxy ;;
	node) start_minimal "$LOAD_CORE"; start_node http1 ;;
	node-h2) start_minimal "$LOAD_CORE"; start_node auto ;;
	*) echo "compare.sh: unknown system $1" >&2; exit 2 ;;
	esac
}

body() { # stream -> the request body
	printf '{"model":"%s","messages":[{"role":"user","content":"Say hello to the benchmark."}],"stream":%s}' "$MODEL" "$1"
}

# wrk at saturation for S seconds; prints the requests it completed (every one a 2xx).
saturate() { # url stream seconds tag
	python3 - "$(body "$2")" "$CLIENT_KEY" >"$OUT/post.lua" <<'PY'
import json, sys
print('wrk.method = "POST"\nwrk.headers["content-type"] = "application/json"\n'
      f'wrk.headers["authorization"] = "Bearer {sys.argv[2]}"\nwrk.body = {json.dumps(sys.argv[1])}')
PY
	taskset -c "$LOAD_CORE" wrk -t1 -c4 -d"${3}s" -s "$OUT/post.lua" "$1" >"$OUT/wrk-$4.txt"
	if grep -qE 'Non-2xx|Socket errors' "$OUT/wrk-$4.txt"; then
		echo "compare.sh: $4: not every request succeeded:" >&2
		cat "$OUT/wrk-$4.txt" >&2
		exit 1
	fi
	awk '/requests in/ { print $1 }' "$OUT/wrk-$4.txt"
}

measure() { # system kind run -> fills R[run,system,kind,cpu|p50]
	local stream=false tag=$3-$1-$2 before after n
	[[ $2 == sse ]] && stream=true
	saturate "$SUT_URL" $stream 1 "$tag-warm" >/dev/null
	before=$(tree_ticks "$SUT_PID")
	n=$(saturate "$SUT_URL" $stream "$SECONDS_PER" "$tag")
	after=$(tree_ticks "$SUT_PID")
	R[$3,$1,$2,cpu]=$(python3 -c "print(f'{($after - $before) / $TICK / $n * 1e6:.1f}')")
	R[$3,$1,$2,rps]=$((n / SECONDS_PER))
	body $stream >"$OUT/body-$tag.json"
	taskset -c "$LOAD_CORE" python3 "$HELPER" ttfb --url "$SUT_URL" --body "$OUT/body-$tag.json" \
		--rate 200 --requests "$LAT_REQUESTS" --header "authorization: Bearer $CLIENT_KEY" \
		--out "$OUT/lat-$tag.json"
	R[$3,$1,$2,p50]=$(python3 -c "import json; d = json.load(open('$OUT/lat-$tag.json')); assert d['errors'] == 0, d; print(d['total']['p50'] * 1000)")
}

declare -A R
$TLS && make_certs
for ((run = 1; run <= REPEAT; run++)); do
	for system in ${SYSTEMS//,/ }; do
		for kind in json sse; do
			start_system "$system"
			measure "$system" "$kind" "$run"
			echo "run $run $system $kind: ${R[$run,$system,$kind,cpu]} µs/req, ${R[$run,$system,$kind,rps]} req/s, p50 ${R[$run,$system,$kind,p50]} ms" >&2
			cleanup
		done
	done
done

{
	$TLS && echo "Upstream: the bare server behind a TLS front (ALPN h2, http/1.1)." && echo
	echo "| run | system | JSON CPU µs/req | SSE-20 CPU µs/req | JSON req/s (1 core) | SSE req/s | JSON p50 ms | SSE p50 ms | added p50 JSON / SSE ms |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
	for ((run = 1; run <= REPEAT; run++)); do
		for system in ${SYSTEMS//,/ }; do
			python3 - "$run" "$system" "${R[$run,$system,json,cpu]}" "${R[$run,$system,sse,cpu]}" \
				"${R[$run,$system,json,rps]}" "${R[$run,$system,sse,rps]}" \
				"${R[$run,$system,json,p50]}" "${R[$run,$system,sse,p50]}" \
				"${R[$run,bare,json,p50]:-}" "${R[$run,bare,sse,p50]:-}" <<'PY'
import sys
run, system, jc, sc, jr, sr, jp, sp, bj, bs = sys.argv[1:]
jp, sp = float(jp), float(sp)
added = "—"
if system != "bare" and bj and bs:
    added = f"{jp - float(bj):+.3f} / {sp - float(bs):+.3f}"
print(f"| {run} | {system} | {float(jc):.1f} | {float(sc):.1f} | {int(jr):,} | {int(sr):,} | {jp:.3f} | {sp:.3f} | {added} |")
PY
		done
	done
	echo
	echo "| run | ratio | JSON | SSE-20 | target |"
	echo "|---|---|---:|---:|---:|"
	for ((run = 1; run <= REPEAT; run++)); do
		for node in node node-h2; do
			[[ -n ${R[$run,$node,json,cpu]:-} && -n ${R[$run,nginx,json,cpu]:-} ]] || continue
			python3 - "$run" "$node" "${R[$run,$node,json,cpu]}" "${R[$run,$node,sse,cpu]}" \
				"${R[$run,nginx,json,cpu]}" "${R[$run,nginx,sse,cpu]}" \
				"${R[$run,floor,json,cpu]:-}" "${R[$run,floor,sse,cpu]:-}" \
				"${R[$run,$node,json,p50]}" "${R[$run,$node,sse,p50]}" \
				"${R[$run,nginx,json,p50]}" "${R[$run,nginx,sse,p50]}" <<'PY'
import sys
run, node, nj, ns, gj, gs, fj, fs, npj, nps, gpj, gps = sys.argv[1:]
nj, ns, gj, gs = float(nj), float(ns), float(gj), float(gs)
print(f"| {run} | {node} ÷ nginx (CPU) | {nj / gj:.2f}× | {ns / gs:.2f}× | ≤ 1.5× |")
if fj and fs:
    fj, fs = float(fj), float(fs)
    print(f"| {run} | ({node} − floor) ÷ nginx (CPU) | {(nj - fj) / gj:.2f}× | {(ns - fs) / gs:.2f}× | ≤ 0.25× |")
    print(f"| {run} | floor ÷ nginx (CPU) | {fj / gj:.2f}× | {fs / gs:.2f}× | — |")
print(f"| {run} | {node} p50 − nginx p50 (ms) | {float(npj) - float(gpj):+.3f} | {float(nps) - float(gps):+.3f} | ≤ +0.100 |")
PY
		done
	done
} | tee "$OUT/table.md"
echo "results: $OUT"
