#!/usr/bin/env bash
# Builds every fuzz target and runs each for a while; fails on the first crash, leak or
# timeout (libFuzzer exits non-zero and leaves the input under artifacts/<target>/).
#
# Usage: tests/fuzz/run.sh [seconds-per-target]   (default 60)
#
# Needs the nightly toolchain (sanitizers); installs cargo-fuzz when missing. Targets are
# built optimised with debug assertions and overflow checks on (`-O -a`), so an arithmetic
# overflow is a crash here even though release builds would wrap. Each run
# starts from the committed seeds in corpus/<target>/ and adds what it finds to a scratch
# corpus under target/, so the repository's seeds stay small and meaningful.
set -euo pipefail
cd "$(dirname "$0")"

seconds="${1:-60}"
toolchain="${FUZZ_TOOLCHAIN:-nightly}"
if ! rustc +"$toolchain" --version >/dev/null 2>&1; then
  echo "fuzz: the $toolchain toolchain is missing (libFuzzer needs nightly's sanitizers);"
  echo "install it with: rustup toolchain install $toolchain"
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

targets=$(cargo +"$toolchain" fuzz list --fuzz-dir .)
echo "== building fuzz targets: $(echo $targets)"
cargo +"$toolchain" fuzz build --fuzz-dir . -O -a

failed=()
for target in $targets; do
  scratch="target/corpus/$target"
  mkdir -p "$scratch" "artifacts/$target"
  echo "== $target for ${seconds}s"
  # -timeout: one input taking over 10 s is a hang. -rss_limit_mb bounds memory per input.
  if ! cargo +"$toolchain" fuzz run --fuzz-dir . -O -a "$target" "$scratch" "corpus/$target" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1; then
    failed+=("$target")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "FUZZ FAILURES: ${failed[*]} (inputs under tests/fuzz/artifacts/)"
  exit 1
fi
echo "fuzz: every target ran ${seconds}s without a crash"
