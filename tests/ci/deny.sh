#!/usr/bin/env bash
# Supply-chain policy (deny.toml): bans, licenses and sources always; advisories when the
# RustSec advisory database is available.
#
# The advisory database is a git repository that cargo-deny clones from GitHub. Where GitHub
# cannot be reached (the development machines and CI reach only the package registries, and
# no registry ships the database), advisories are skipped with a message saying so, and the
# run still fails on any bans, licenses or sources problem. The check runs offline against
#   ${CARGO_HOME:-~/.cargo}/advisory-dbs/advisory-db-*   (cargo-deny's own cache)
# whenever a clone is there; SWITCHYARD_DENY_FETCH=1 lets cargo-deny fetch it first instead.
#
# Usage: tests/ci/deny.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! cargo deny --version >/dev/null 2>&1; then
  cargo install cargo-deny --locked
fi

# `cargo deny --offline` reads `cargo metadata` for every platform, so crates that only other
# platforms use (Windows console support and the like) must be in the local cache too; a
# Linux build never downloads them. `cargo fetch` gets them from the registry.
cargo fetch --locked --quiet

echo "== cargo deny: bans licenses sources"
cargo deny --offline check --hide-inclusion-graph bans licenses sources

db_root="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs"
have_db=false
for dir in "$db_root"/advisory-db-*; do
  if [ -d "$dir/.git" ] && [ -d "$dir/crates" ]; then
    have_db=true
  fi
done

echo "== cargo deny: advisories"
if [ "${SWITCHYARD_DENY_FETCH:-0}" = "1" ]; then
  cargo deny check --hide-inclusion-graph advisories
elif $have_db; then
  echo "using the advisory database already in $db_root (not refreshed)"
  cargo deny --offline check --hide-inclusion-graph advisories
else
  echo "SKIPPED advisories: no RustSec advisory database in $db_root, and fetching it needs"
  echo "GitHub, which this machine cannot reach (no package registry ships the database)."
  echo "Run with SWITCHYARD_DENY_FETCH=1 where GitHub is reachable, or place a clone of the"
  echo "advisory database there, to include advisories."
fi
