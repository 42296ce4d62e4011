#!/usr/bin/env bash
# Instructions per call of `request_body::scan`, the node's read of a client request body,
# counted by valgrind's callgrind over the criterion benches of shared/benches/policy.rs:
#
#   tests/bench/scan_instructions.sh            # the working tree
#   tests/bench/scan_instructions.sh d8bb14e    # the scan of an earlier commit, same bench
#
# For each body (`request_body/scan 4 KiB chat body` and `… with \u escapes`) it prints the
# calls made and the inclusive instructions per call. The count is exact for a given binary
# and input, whatever else the machine is doing, so a before/after pair is a fair comparison on
# a shared machine. With a commit, the working tree is copied and its `request_body` module
# replaced by the commit's, so both sides run the same bench and bodies (older commits do not
# have them). The bench is built without LTO (it changes little for this function and takes
# minutes), in its own target dir.
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
command -v valgrind >/dev/null || { echo "scan_instructions: valgrind is missing (apt-get install -y valgrind)" >&2; exit 2; }

REV=${1:-}
SRC=$ROOT
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
if [ -n "$REV" ]; then
	commit=$(git rev-parse --verify "${REV}^{commit}")
	SRC=$TARGET/scan-instructions/${commit:0:12}
	rm -rf "$SRC" && mkdir -p "$SRC"
	git ls-files -z | tar --null -T - -c | tar -x -m -C "$SRC"
	rm -rf "$SRC/shared/src/request_body" "$SRC/shared/src/request_body.rs"
	git archive --format=tar "$commit" shared/src/request_body.rs $(git ls-tree -d --name-only "$commit" shared/src/request_body) |
		tar -x -m -C "$SRC"
	TARGET=$TARGET/scan-instructions/target
fi

bench=$(cd "$SRC" && CARGO_TARGET_DIR=$TARGET CARGO_PROFILE_BENCH_LTO=false \
	cargo bench -p switchyard-shared --bench policy --no-run --message-format=json 2>/dev/null |
	python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "policy" and m.get("executable"):
        print(m["executable"])')
[ -x "$bench" ] || { echo "scan_instructions: the bench did not build" >&2; exit 3; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for name in 'request_body/scan 4 KiB chat body' 'request_body/scan 4 KiB chat body with \u escapes'; do
	file=$out/callgrind.out
	# --exact: the plain body's name is a prefix of the other's.
	valgrind --tool=callgrind --callgrind-out-file="$file" "$bench" --bench --exact "$name" \
		--profile-time 1 >/dev/null 2>&1
	python3 - "$file" "$name" <<'EOF'
import re, sys
path, name = sys.argv[1], sys.argv[2]
names = {}
calls = cost = 0
want = False
pending = False
for line in open(path, encoding="utf-8", errors="replace"):
    # Function names are compressed: the first `fn=(id) name` or `cfn=(id) name` names the id.
    m = re.match(r"(c?)fn=\((\d+)\)(?: (.*))?", line)
    if m:
        if m.group(3):
            names[m.group(2)] = m.group(3).strip()
        if m.group(1):
            want = names.get(m.group(2), "").endswith("request_body::scan")
        continue
    if line.startswith("calls="):
        pending = want
        if want:
            calls += int(line.split("=")[1].split()[0])
        continue
    if pending:
        cost += int(line.split()[1])
        pending = False
print(f"{name}: {calls} calls, {cost / max(calls, 1):,.0f} instructions per call")
EOF
done
