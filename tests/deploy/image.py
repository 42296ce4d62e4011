"""compose.yaml and the Dockerfile: the Compose specification, hadolint, the build context."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from compose_spec import PyCompose

from checks import Checks, env_names

def check_compose(c: Checks, repo: Path) -> None:
    path = repo / "deploy/compose.yaml"
    compose = yaml.safe_load(path.read_text())  # PyYAML resolves the `<<` merge keys
    # The spec parser does not read YAML merge keys (`<<`, a YAML 1.1 feature Compose accepts),
    # so it validates the effective file: merges expanded, `x-` anchors dropped.
    effective = {k: v for k, v in compose.items() if not k.startswith("x-")}
    try:
        PyCompose.from_json(json.dumps(effective)).to_spec()
        c.check(True, "compose: valid against the Compose specification")
    except ValueError as e:
        c.check(False, f"compose: Compose specification: {e}")
    services = compose.get("services", {})
    for name, svc in services.items():
        for dep in svc.get("depends_on", {}):
            c.check(dep in services, f"compose: {name} depends on {dep}, which exists")
    for s in ("redis", "mock-upstream", "node-1", "node-2", "node-3", "coordinator"):
        c.check(s in services, f"compose: service {s}")
    for name, svc in services.items():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("."):
                c.check((path.parent / src).exists(), f"compose: {name} mounts {src}, which exists")
        for port in svc.get("ports", []):
            c.check(str(port).startswith("127.0.0.1:"), f"compose: {name} binds {port} to loopback only")
        if "build" in svc:
            c.check(svc["build"].get("dockerfile") == "deploy/Dockerfile", f"compose: {name} builds deploy/Dockerfile")
    node_cfg = tomllib.loads((repo / "deploy/examples/cluster-node.toml").read_text())
    for s in ("node-1", "node-2", "node-3", "coordinator"):
        env = services.get(s, {}).get("environment", {})
        missing = env_names(node_cfg) - set(env)
        c.check(not missing, f"compose: {s} sets every variable the config names (missing {sorted(missing)})")
        c.check("SWITCHYARD_REDIS_URL" in env, f"compose: {s} gets the Redis URL")


def check_dockerfile(c: Checks, repo: Path) -> None:
    dockerfile = repo / "deploy/Dockerfile"
    text = dockerfile.read_text()
    hadolint = Path(sys.executable).parent / "hadolint"
    out = subprocess.run([str(hadolint), "--no-color", str(dockerfile)], capture_output=True,
                         text=True, timeout=120)
    c.check(out.returncode == 0, f"hadolint deploy/Dockerfile: {out.stdout}{out.stderr}")
    c.check("HEALTHCHECK" not in re.sub(r"#.*", "", text), "Dockerfile: no HEALTHCHECK")
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    c.check(bool(users) and all(not u.startswith("0") and u != "root" for u in users), f"Dockerfile: non-root USER {users}")
    for b in ("switchyard-node", "switchyard-coordinator"):
        c.check(f"/out/{b} /usr/local/bin/{b}" in text, f"Dockerfile: runtime image has {b}")
    c.check(re.search(r"^LABEL ", text, re.M) is not None, "Dockerfile: labels")
    ignore = (repo / ".dockerignore").read_text().split()
    c.check("target/" in ignore and ".git/" in ignore, ".dockerignore keeps target/ and .git/ out")
    check_build_context(c, repo, text, ignore)
    channel = tomllib.loads((repo / "rust-toolchain.toml").read_text())["toolchain"]["channel"]
    c.check(
        f"ARG RUST_VERSION={channel}\n" in text,
        f"Dockerfile builds with the toolchain of rust-toolchain.toml ({channel})",
    )


def check_build_context(c: Checks, repo: Path, dockerfile: str, ignore: list[str]) -> None:
    """Every file the build embeds (include_str!/include_bytes!) is copied into the build
    stage and not excluded by .dockerignore."""
    copied = [m for m in re.findall(r"^COPY\s+(?!--)(.+?)\s+\S+$", dockerfile, re.M)]
    sources = [Path(p) for line in copied for p in line.split()]

    def excluded(rel: str) -> bool:
        out = False
        for pat in ignore:
            if pat.startswith("#"):
                continue
            neg = pat.startswith("!")
            pat = pat.lstrip("!").removeprefix("**/")
            if rel == pat.rstrip("/") or rel.startswith(pat if pat.endswith("/") else pat + "/"):
                out = not neg
        return out

    def is_copied(rel: Path) -> bool:
        return any(rel == s or s in rel.parents for s in sources)

    crates = [s for s in sources if (repo / s / "Cargo.toml").exists()]
    c.check(len(crates) >= 4, f"Dockerfile copies the workspace crates ({[str(s) for s in crates]})")
    for crate in crates:
        for rs in (repo / crate / "src").rglob("*.rs"):
            for inc in re.findall(r'include_(?:str|bytes)!\(\s*"([^"]+)"', rs.read_text()):
                target = (rs.parent / inc).resolve().relative_to(repo)
                c.check(
                    is_copied(target) and not excluded(str(target)),
                    f"Dockerfile build context has {target} (embedded by {rs.relative_to(repo)})",
                )
