#!/usr/bin/env bash
# The test command: installs what a fresh Debian/Ubuntu machine lacks, then runs the whole
# test suite with cargo-nextest. Arguments go to `cargo nextest run --workspace`, e.g.
#
#   tests/run.sh                        # everything
#   tests/run.sh --profile ci           # what .ci/run uses
#   tests/run.sh -E 'binary(node)'      # one binary
#
# What it installs, only when missing:
# - apt: redis-server (the tests start their own servers on free ports), prometheus (for
#   promtool: the metrics exposition and the alert rules), chromium and chromium-driver (the
#   coordinator dashboard test), python3-venv and python3-pip (the SDK, OpenAPI and Helm
#   chart checks build their own virtualenvs under target/ from PyPI on first use), and
#   nodejs and npm when tests/agents/ exists;
# - cargo-nextest, with `cargo install --locked`;
# - tests/agents/'s npm packages (from its lock file, again only when the lock changed).
#
# apt-get needs root: run it as root (CI) or with sudo available.
set -euo pipefail
cd "$(dirname "$0")/.."

agents=tests/agents

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium chromium-driver)
if ! command -v python3 >/dev/null 2>&1; then
  need_apt+=(python3 python3-venv python3-pip)
elif ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  need_apt+=(python3-venv python3-pip)
fi
if [ -f "$agents/package.json" ] && ! command -v npm >/dev/null 2>&1; then
  need_apt+=(nodejs npm)
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== tests/run.sh: installing ${need_apt[*]} (apt)"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo_cmd=(sudo)
    else
      echo "tests/run.sh: ${need_apt[*]} missing and not root (no sudo); install them first" >&2
      exit 2
    fi
  fi
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}"
fi

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "== tests/run.sh: installing cargo-nextest"
  cargo install cargo-nextest --locked
fi

# The coding-agent tests drive the real agents from npm, pinned by the lock file. It installs
# only when the lock file differs from the one last installed.
#
# Not `npm ci`: Qwen Code lists optional per-platform packages that the registry does not
# serve (`@teddyzhu/clipboard-darwin-*` answer 404). `npm install` skips them and writes a
# lock without them, and `npm ci` then refuses that same lock as "not in sync". So this is a
# clean `npm install` that may not touch the lock (`--no-save`), checked afterwards: `npm ls`
# fails when any pinned package is missing or at another version, and the lock's hash must
# not have moved.
if [ -f "$agents/package.json" ]; then
  stamp="$agents/node_modules/.installed-lock.sha256"
  want="$(sha256sum "$agents/package-lock.json" 2>/dev/null | cut -d' ' -f1 || true)"
  if [ -z "$want" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "== tests/run.sh: npm install (from the lock) in $agents"
    rm -rf "$agents/node_modules"
    (cd "$agents" && npm install --no-save --no-audit --no-fund && npm ls --depth=0)
    now="$(sha256sum "$agents/package-lock.json" | cut -d' ' -f1)"
    if [ "$now" != "$want" ]; then
      echo "tests/run.sh: npm install changed $agents/package-lock.json" >&2
      exit 2
    fi
    echo "$want" >"$stamp"
  fi
fi

echo "== cargo nextest run --workspace $*"
exec cargo nextest run --workspace "$@"
