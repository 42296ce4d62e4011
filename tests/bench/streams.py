#!/usr/bin/env python3
"""Load clients for the benchmark scripts that oha cannot play. Standard library only.

    streams.py hold --url URL --body FILE --steps 1000,5000 --pid PID[,PID...] --out FILE
                    [--settle S] [--parallel P] [--timeout S] [--keepalive] [--upstream-port P]
    streams.py load --url URL --body FILE --requests N [--conns C] [--header H]... --out FILE

`hold` opens streaming requests in steps and keeps them open: each connection sends one
request, reads the response head and the first `data:` event, then reads nothing more. Once a
step's streams are all open it waits --settle seconds and records VmRSS of every PID (the node
first), their open descriptors and CPU ticks, and with --upstream-port the established TCP
connections to that port (the node's upstream connections). The record starts with the processes' readings before any
stream. It answers tests/bench/idle_streams.sh's question: memory per idle long-lived stream.
With --keepalive each connection instead sends one `GET /v1/models` (answered by the node
itself), reads the whole answer and stays open as an idle keep-alive connection: the HTTP
server's own cost per connection, without an upstream.

`load` is a keep-alive load of N requests over C connections (one thread each), like
`oha -c C -n N`; every answer must be a 200. It stands in for oha where oha is not installed
(tests/bench/callgrind.sh --client python). The load client changes how many requests the
server finds per wake-up, so its instruction counts are compared with each other only.
"""

import argparse
import asyncio
import http.client
import json
import os
import resource
import sys
import threading
import time
from urllib.parse import urlsplit


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def proc_reading(pid):
    out = {"pid": pid}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
                    out[key] = int(rest.split()[0])
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # utime + stime in clock ticks (fields 14 and 15 of proc(5), after the name).
        out["cpu_ticks"] = int(fields[11]) + int(fields[12])
    except OSError as e:
        out["error"] = str(e)
    return out


def established_to(port):
    """Established TCP connections to `port` on this machine (IPv4 and IPv6), from
    /proc/net/tcp*: the node's upstream connections when only the node connects there."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if cols[3] == "01" and int(cols[2].rsplit(":", 1)[1], 16) == port:
                        n += 1
        except OSError:
            pass
    return n


# ---------------------------------------------------------------------------------------------
# hold


async def open_stream(host, port, request, timeout, keepalive=False):
    """One streaming request; returns (reader, writer) once the first event arrived (with
    `keepalive`: once the whole content-length answer arrived)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    writer.write(request)
    await writer.drain()
    seen = b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no first event")
        chunk = await asyncio.wait_for(reader.read(65536), left)
        if not chunk:
            raise ConnectionError(f"closed before the first event: {seen[:200]!r}")
        seen += chunk
        if not seen.startswith(b"HTTP/1.1 200"):
            raise ConnectionError(f"not a 200: {seen[:200]!r}")
        if keepalive:
            head, sep, body = seen.partition(b"\r\n\r\n")
            for line in head.lower().split(b"\r\n"):
                if sep and line.startswith(b"content-length:") and len(body) >= int(line[15:]):
                    return reader, writer
            continue
        at = seen.find(b"data:")
        if at >= 0 and seen.find(b"\n\n", at) >= 0:
            return reader, writer


async def hold(args):
    url = urlsplit(args.url)
    host, port = url.hostname, url.port or 80
    body = open(args.body, "rb").read()
    request = (
        f"POST {url.path} HTTP/1.1\r\nhost: {url.netloc}\r\ncontent-type: application/json\r\n"
        f"accept: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body
    if args.keepalive:
        request = f"GET /v1/models HTTP/1.1\r\nhost: {url.netloc}\r\n\r\n".encode()
    pids = [int(p) for p in args.pid.split(",")]
    steps = [int(s) for s in args.steps.split(",")]
    held = []
    record = {"nofile": raise_nofile(), "steps": []}
    upstream = (lambda: established_to(args.upstream_port)) if args.upstream_port else (lambda: None)
    record["steps"].append({"streams": 0, "procs": [proc_reading(p) for p in pids],
                            "upstream_conns": upstream()})
    errors = 0
    sem = asyncio.Semaphore(args.parallel)

    async def one():
        nonlocal errors
        async with sem:
            try:
                held.append(await open_stream(host, port, request, args.timeout, args.keepalive))
            except (OSError, TimeoutError, asyncio.TimeoutError, ConnectionError) as e:
                errors += 1
                if errors <= 5:
                    print(f"streams.py: stream failed: {e}", file=sys.stderr)

    for n in steps:
        t0 = time.monotonic()
        await asyncio.gather(*(one() for _ in range(n - len(held))))
        opened = time.monotonic() - t0
        await asyncio.sleep(args.settle)
        step = {"streams": len(held), "wanted": n, "errors": errors, "open_s": round(opened, 2),
                "procs": [proc_reading(p) for p in pids], "upstream_conns": upstream()}
        record["steps"].append(step)
        print(f"streams.py: {len(held)} streams open ({errors} failed) in {opened:.1f} s; "
              f"node VmRSS {step['procs'][0].get('VmRSS')} KiB", file=sys.stderr)
        if errors:
            break
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
    for _, writer in held:
        writer.close()
    return 1 if errors else 0


# ---------------------------------------------------------------------------------------------
# load


def cmd_load(args):
    url = urlsplit(args.url)
    body = open(args.body, "rb").read()
    headers = {"content-type": "application/json"}
    for h in args.header:
        k, _, v = h.partition(":")
        headers[k.strip()] = v.strip()
    lock = threading.Lock()
    left = [args.requests]
    codes = {}

    def worker():
        conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=60)
        while True:
            with lock:
                if left[0] == 0:
                    break
                left[0] -= 1
            conn.request("POST", url.path, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()
            with lock:
                codes[str(resp.status)] = codes.get(str(resp.status), 0) + 1
        conn.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(args.conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    # The same key as oha's JSON output, which the calling scripts check.
    doc = {"statusCodeDistribution": codes,
           "summary": {"total": elapsed, "requestsPerSec": args.requests / elapsed}}
    with open(args.out, "w") as f:
        json.dump(doc, f)
    return 0 if set(codes) == {"200"} else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("hold")
    p.add_argument("--url", required=True)
    p.add_argument("--body", required=True)
    p.add_argument("--steps", required=True, help="comma-separated stream counts, ascending")
    p.add_argument("--pid", required=True, help="PIDs to read, comma-separated (the node first)")
    p.add_argument("--settle", type=float, default=3.0)
    p.add_argument("--parallel", type=int, default=200, help="streams being opened at once")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--keepalive", action="store_true",
                   help="idle keep-alive connections after one GET /v1/models instead of streams")
    p.add_argument("--upstream-port", type=int,
                   help="count established connections to this port at each step")
    p.add_argument("--out", required=True)
    p = sub.add_parser("load")
    p.add_argument("--url", required=True)
    p.add_argument("--body", required=True)
    p.add_argument("--requests", type=int, required=True)
    p.add_argument("--conns", type=int, default=4)
    p.add_argument("--header", action="append", default=[])
    p.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.cmd == "hold":
        sys.exit(asyncio.run(hold(args)))
    sys.exit(cmd_load(args))


if __name__ == "__main__":
    main()
