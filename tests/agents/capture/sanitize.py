"""Turns raw captures of capture_server.py into the fixtures in tests/fixtures/agents/.

Secrets and per-machine identifiers are replaced, working directories become
/home/user/project, and long texts (the agents' system prompts and tool descriptions) are
cut to their first 160 characters: the fixtures record which fields the agents send, not
the vendors' prompt text.

usage: sanitize.py RAW_DIR OUT_PREFIX WORKDIR HOMEDIR
"""
import json, re, sys, pathlib

RAW, PREFIX, WORKDIR, HOMEDIR = sys.argv[1:5]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
HEX = re.compile(r"\b[0-9a-f]{40,}\b")
SECRET_HEADERS = {"x-api-key", "authorization"}
DROP_HEADERS = {"host", "content-length", "connection"}


def clean_text(s):
    s = s.replace(WORKDIR, "/home/user/project").replace(HOMEDIR, "/home/user")
    s = UUID.sub("00000000-0000-0000-0000-000000000000", s)
    s = HEX.sub("<hex>", s)
    if len(s) > 160:
        s = s[:160] + f"…[{len(s)} chars]"
    return s


def clean(v):
    if isinstance(v, str):
        return clean_text(v)
    if isinstance(v, list):
        return [clean(x) for x in v]
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items()}
    return v


for i, f in enumerate(sorted(pathlib.Path(RAW).glob("*.json"))):
    rec = json.loads(f.read_text())
    headers = {}
    for k, v in sorted(rec["headers"].items(), key=lambda kv: kv[0].lower()):
        lk = k.lower()
        if lk in DROP_HEADERS:
            continue
        headers[lk] = "<redacted>" if lk in SECRET_HEADERS else clean_text(v)
    out = {"method": rec["method"], "path": rec["path"], "headers": headers, "body": clean(rec["body"])}
    pathlib.Path(f"{PREFIX}-{i + 1:02d}.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
