import json, sys, os, itertools, http.server, threading
OUT = sys.argv[2]; os.makedirs(OUT, exist_ok=True)
counter = itertools.count()
def has_tool_result(b):
    s = json.dumps(b)
    return '"tool_result"' in s or '"function_call_output"' in s or '"role": "tool"' in s
def pick_tool(b):
    names = []
    for t in b.get("tools", []) or []:
        n = t.get("name") or (t.get("function") or {}).get("name")
        if n: names.append(n)
    for pref in ["Bash", "shell", "exec_command", "shell_command"]:
        if pref in names: return pref, names
    return (names[0] if names else None), names
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self): self.handle_any()
    def do_HEAD(self): self.handle_any()
    def do_POST(self): self.handle_any()
    def send(self, status, body, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status); self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def handle_any(self):
        n = next(counter)
        ln = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(ln) if ln else b""
        try: body = json.loads(raw) if raw else None
        except Exception: body = raw.decode(errors="replace")
        rec = {"method": self.command, "path": self.path, "headers": dict(self.headers.items()), "body": body}
        with open(f"{OUT}/{n:03d}.json", "w") as f: json.dump(rec, f, indent=1)
        p = self.path.split("?")[0]
        if p.endswith("/messages/count_tokens"):
            return self.send(200, json.dumps({"input_tokens": 42}))
        if p.endswith("/v1/messages") and isinstance(body, dict):
            return self.anthropic(body)
        if p.endswith("/v1/responses") and isinstance(body, dict):
            return self.resp_api(body)
        if p.endswith("/v1/models"):
            return self.send(200, json.dumps({"object":"list","data":[]}))
        self.send(404, json.dumps({"detail": "Not Found"}))
    def anthropic(self, b):
        tool, names = pick_tool(b)
        final = has_tool_result(b) or not tool
        if final:
            content = [{"type": "text", "text": "CAPTURED-FINAL"}]; stop = "end_turn"
        else:
            content = [{"type": "tool_use", "id": "toolu_01", "name": tool, "input": {"command": "echo hi", "description": "say hi"}}]; stop = "tool_use"
        msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": b.get("model"), "content": content, "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}
        if not b.get("stream"):
            return self.send(200, json.dumps(msg))
        ev = []
        m0 = dict(msg, content=[], stop_reason=None)
        ev.append(("message_start", {"type": "message_start", "message": m0}))
        c = content[0]
        if c["type"] == "text":
            ev.append(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": c["text"]}}))
        else:
            ev.append(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": dict(c, input={})}))
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": json.dumps(c["input"])}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        ev.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}}))
        ev.append(("message_stop", {"type": "message_stop"}))
        self.send(200, "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in ev), "text/event-stream")
    def resp_api(self, b):
        tool, names = pick_tool(b)
        final = has_tool_result(b) or not tool
        if final:
            item = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "CAPTURED-FINAL", "annotations": []}]}
        else:
            args = {"command": ["bash", "-lc", "echo hi"]} if tool == "shell" else {"cmd": "echo hi"}
            item = {"type": "function_call", "id": "fc_1", "status": "completed", "call_id": "call_1", "name": tool, "arguments": json.dumps(args)}
        resp = {"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": b.get("model"), "output": [item], "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}
        if not b.get("stream"):
            return self.send(200, json.dumps(resp))
        ev = [("response.created", {"type": "response.created", "sequence_number": 0, "response": dict(resp, status="in_progress", output=[])}),
              ("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item}),
              ("response.output_item.done", {"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": item}),
              ("response.completed", {"type": "response.completed", "sequence_number": 3, "response": resp})]
        self.send(200, "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in ev), "text/event-stream")
srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
srv.serve_forever()
