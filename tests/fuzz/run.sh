#!/usr/bin/env bash
# Builds every fuzz target and runs each for a while; fails on the first crash, leak or
# timeout (libFuzzer exits non-zero and leaves the input under artifacts/<target>/).
#
# Usage: tests/fuzz/run.sh [seconds-per-target]   (default 60)
#        FUZZ_JOBS=N tests/fuzz/run.sh ...          (targets run N at a time; default 2)
#
# Each run first replays the whole corpus (committed seeds plus what earlier runs found), then
# fuzzes for the rest of its time. Two targets at a time fill a 2-core machine, which halves
# the wall time of CI's pass. Each target's output goes to target/fuzz-logs/<target>.log and
# is printed when it ends, so parallel runs do not interleave.
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

jobs="${FUZZ_JOBS:-2}"
mkdir -p target/fuzz-logs

# One target: replay, then fuzz. Its exit status is the fuzzer's.
fuzz_one() {
  local target=$1 scratch="target/corpus/$1"
  mkdir -p "$scratch" "artifacts/$target"
  # -timeout: one input taking over 10 s is a hang. -rss_limit_mb bounds memory per input.
  cargo +"$toolchain" fuzz run --fuzz-dir . -O -a "$target" "$scratch" "corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    >"target/fuzz-logs/$target.log" 2>&1
}

declare -A pid_of=()
failed=()
# Waits for one running target and records it; prints its log's tail.
reap_one() {
  local done_pid status=0 target
  wait -n -p done_pid "${!pid_of[@]}" || status=$?
  target="${pid_of[$done_pid]}"
  unset "pid_of[$done_pid]"
  echo "== $target: exit $status"
  tail -n 25 "target/fuzz-logs/$target.log"
  if [ "$status" -ne 0 ]; then
    failed+=("$target")
  fi
}

for target in $targets; do
  while [ ${#pid_of[@]} -ge "$jobs" ]; do
    reap_one
  done
  echo "== $target for ${seconds}s"
  fuzz_one "$target" &
  pid_of[$!]=$target
done
while [ ${#pid_of[@]} -gt 0 ]; do
  reap_one
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "FUZZ FAILURES: ${failed[*]} (inputs under tests/fuzz/artifacts/)"
  exit 1
fi
echo "fuzz: every target ran ${seconds}s without a crash"
