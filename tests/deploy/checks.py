"""Failure collection and the node's own config check, shared by the deploy checks."""

from __future__ import annotations

import os
import subprocess
import tempfile
import tomllib
from pathlib import Path


class Checks:
    """Collects failures instead of stopping at the first one."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.passed = 0

    def check(self, ok: bool, what: str) -> bool:
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)
            print(f"FAIL: {what}", flush=True)
        return ok

    def note(self, text: str) -> None:
        print(text, flush=True)


def env_names(config: object) -> set[str]:
    """Every environment variable a config names through a `*_env` key."""
    names: set[str] = set()
    if isinstance(config, dict):
        for k, v in config.items():
            if k.endswith("_env") and isinstance(v, str) and v:
                names.add(v)
            else:
                names |= env_names(v)
    elif isinstance(config, list):
        for v in config:
            names |= env_names(v)
    return names


def node_check(c: Checks, node_bin: Path, toml_text: str, label: str) -> None:
    """`switchyard-node --check` on a config, with a dummy value for every variable it names."""
    config = tomllib.loads(toml_text)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for i, name in enumerate(sorted(env_names(config))):
        env[name] = f"dummy-secret-value-{i:04d}-for-the-check"
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "switchyard.toml"
        path.write_text(toml_text)
        try:
            out = subprocess.run(
                [str(node_bin), "--config", str(path), "--check"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            c.check(
                out.returncode == 0,
                f"{label}: switchyard-node --check exit {out.returncode}: {out.stderr.strip()}",
            )
        except OSError as e:
            c.check(False, f"{label}: cannot run {node_bin}: {e}")
