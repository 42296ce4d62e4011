#!/usr/bin/env bash
# Builds the node binary of an earlier commit, for the rolling-upgrade test
# (tests/tests/upgrade/main.rs, docs/cluster.md "Rolling upgrade").
#
#   tests/upgrade/build_previous.sh [COMMIT]     # default: d8bb14e, the previous landed release
#
# The commit's tree is exported with `git archive` into target/upgrade/<commit>/src and built
# there with `cargo build -p switchyard-node` (debug profile, as the tests build the current
# node) into target/upgrade/target, one target dir shared by every old commit so that their
# common dependencies compile once. The binary is copied to target/upgrade/<commit>/switchyard-node,
# and that file is the cache: a second run for the same commit does nothing.
#
# The last line of stdout is the binary's path. Exit status: 0 built or cached, 2 the commit is
# not in this clone's history (a shallow CI checkout: fetch it with `git fetch --unshallow` or
# `git fetch origin <commit>`), 3 the build failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"

want="${1:-d8bb14e}"
if ! commit="$(git rev-parse --verify --quiet "${want}^{commit}")"; then
  echo "build_previous: commit $want is not in this clone's history (shallow clone? fetch it first)" >&2
  exit 2
fi
short="${commit:0:12}"
base="${CARGO_TARGET_DIR:-$root/target}/upgrade"
out="$base/$short"
bin="$out/switchyard-node"

if [ -x "$bin" ]; then
  echo "build_previous: $short cached" >&2
  echo "$bin"
  exit 0
fi

mkdir -p "$out"
src="$out/src"
if [ ! -f "$src/Cargo.toml" ]; then
  rm -rf "$src.tmp"
  mkdir -p "$src.tmp"
  git archive --format=tar "$commit" | tar -x -C "$src.tmp"
  mv "$src.tmp" "$src"
fi

started=$(date +%s)
echo "build_previous: building switchyard-node at $short (cargo build, debug)" >&2
# The commit's own rust-toolchain.toml picks the compiler (rustup reads it from the source dir).
# --locked: the commit's Cargo.lock, nothing newer.
if ! (cd "$src" && CARGO_TARGET_DIR="$base/target" cargo build --locked -p switchyard-node --bin switchyard-node >&2); then
  echo "build_previous: cargo build of $short failed" >&2
  exit 3
fi
cp "$base/target/debug/switchyard-node" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "build_previous: $short built in $(( $(date +%s) - started )) s" >&2
echo "$bin"
