#!/usr/bin/env bash
# gen_info.sh GMSIM SOURCE_DIR - `gmsim gen` and `gmsim info` from the outside:
# a small trace is generated and summarized; bad invocations exit non-zero
# with a message on stderr.
set -u
gmsim=$1
src=${2:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

# expect_fail CODE DESCRIPTION -- command...: exit code CODE and a "gmsim" message on stderr
expect_fail() {
    local want=$1 what=$2
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: exit $rc, expected $want"
    grep -q "gmsim" "$tmp/err" || fail "$what: no message on stderr"
}

# expect_line PATTERN FILE: FILE has a line matching the extended regex PATTERN
expect_line() {
    grep -Eq "$1" "$2" || fail "no line matching '$1' in $(basename "$2")"
}

# --- gen: a small model, two iterations ---
"$gmsim" gen bert --layers 2 --hidden 128 --heads 4 --batch 4 --seq 64 --iterations 2 \
    --seed 7 --compress none -o "$tmp/small.h5" >"$tmp/gen.out" 2>"$tmp/gen.err" ||
    fail "gen exited $? ($(cat "$tmp/gen.err"))"
[ -s "$tmp/small.h5" ] || fail "gen wrote no file"
expect_line '^wrote .*small\.h5: [0-9]+ events, 2 iterations' "$tmp/gen.out"
[ -z "$(ls "$tmp" | grep '\.tmp\.')" ] || fail "gen left a temporary file behind"

# --- info: text ---
"$gmsim" info "$tmp/small.h5" >"$tmp/info.out" 2>"$tmp/info.err" ||
    fail "info exited $? ($(cat "$tmp/info.err"))"
expect_line '^source: +synthetic:bert$' "$tmp/info.out"
expect_line '^device: +\(unknown\), 80\.00 GiB total$' "$tmp/info.out"
expect_line '^command: +gmsim gen bert --layers 2 ' "$tmp/info.out"
expect_line '^workload: +BERT training .*layers=2 hidden=128 heads=4 .*seq=64 batch=4 ' "$tmp/info.out"
expect_line '^events: +[0-9]+ \(alloc [0-9]+, free [0-9]+, segment_alloc 0, segment_free 0\)$' \
    "$tmp/info.out"
expect_line '^time span: ' "$tmp/info.out"
expect_line '^allocations: +[1-9][0-9]*$' "$tmp/info.out"
expect_line '^peak live bytes: .*B requested' "$tmp/info.out"
expect_line '^pre-existing bytes: +0 B ' "$tmp/info.out"
expect_line '^markers: +2 \(iteration 2,' "$tmp/info.out"
expect_line '^unknown frees: +0$' "$tmp/info.out"
for cat in parameter optimizer_state input temporary activation gradient autograd_detail; do
    expect_line "^  $cat +[1-9][0-9]* " "$tmp/info.out"
done
for phase in forward backward optimizer; do
    expect_line "^  $phase +[1-9][0-9]* " "$tmp/info.out"
done
expect_line '^size histogram' "$tmp/info.out"
expect_line '^  [0-9]+ (B|KiB|MiB) - [0-9]+ (B|KiB|MiB) +[0-9]+ .*#' "$tmp/info.out"
[ -s "$tmp/info.err" ] && fail "info printed on stderr: $(cat "$tmp/info.err")"

# parameter bytes: the analytic count for this shape, fp32
H=128 L=2 I=512 V=30522 P=512 T=2 C=2
params=$((V * H + P * H + T * H + 2 * H + L * (4 * (H * H + H) + 2 * H + H * I + I + I * H + H + 2 * H) + H * H + H + C * H + C))
"$gmsim" info --json - "$tmp/small.h5" >"$tmp/info.json" || fail "info --json exited $?"
if command -v python3 >/dev/null; then
    python3 - "$tmp/info.json" "$params" <<'EOF' || fail "info --json content"
import json, sys
d = json.load(open(sys.argv[1]))
want = int(sys.argv[2]) * 4
got = d["by_category"]["parameter"]["bytes"]
assert got == want, (got, want)
assert d["meta"]["source"] == "synthetic:bert"
assert d["events"] == d["events_by_op"]["alloc"] + d["events_by_op"]["free"]
assert d["unknown_frees"] == 0 and d["pre_existing_bytes"] == 0
assert d["peak_live_bytes"] > want and d["markers"] == 2
assert sum(b["allocs"] for b in d["size_histogram"]) == d["allocations"]
EOF
else
    grep -q "\"bytes\": $((params * 4))" "$tmp/info.json" || fail "info --json: parameter bytes"
fi

# same seed, same events (created_utc aside): info's numbers agree
"$gmsim" gen bert --layers 2 --hidden 128 --heads 4 --batch 4 --seq 64 --iterations 2 \
    --seed 7 -o "$tmp/again.h5" >/dev/null 2>&1 || fail "second gen exited $?"
"$gmsim" info "$tmp/again.h5" >"$tmp/again.out" 2>&1 || fail "info on again.h5 exited $?"
diff <(grep -Ev '^(trace|created|command):' "$tmp/info.out") \
    <(grep -Ev '^(trace|created|command):' "$tmp/again.out") >/dev/null ||
    fail "same seed, different summary (deflate vs none must not matter either)"

# --help on both commands
"$gmsim" gen --help | grep -q -- '--layers' || fail "gen --help"
"$gmsim" info --help | grep -q -- '--json' || fail "info --help"

# --- bad invocations ---
expect_fail 1 "info of a missing file" -- "$gmsim" info /nonexistent.h5
grep -q "/nonexistent.h5" "$tmp/err" || fail "info of a missing file: message does not name it"
expect_fail 2 "info without a trace" -- "$gmsim" info
echo "not hdf5" >"$tmp/bad.h5"
expect_fail 1 "info of a non-HDF5 file" -- "$gmsim" info "$tmp/bad.h5"
expect_fail 2 "info with an unknown option" -- "$gmsim" info --bogus "$tmp/small.h5"
expect_fail 2 "gen --layers abc" -- "$gmsim" gen bert --layers abc -o "$tmp/x.h5"
grep -q -- "--layers" "$tmp/err" || fail "gen --layers abc: message does not name the option"
expect_fail 2 "gen with heads not dividing hidden" -- "$gmsim" gen bert --heads 7 -o "$tmp/x.h5"
expect_fail 2 "gen --dtype fp8" -- "$gmsim" gen bert --dtype fp8 -o "$tmp/x.h5"
expect_fail 2 "gen without -o" -- "$gmsim" gen bert
expect_fail 2 "gen of an unknown workload" -- "$gmsim" gen t5 -o "$tmp/x.h5"
expect_fail 1 "gen into a missing directory" -- "$gmsim" gen bert --layers 1 -o "$tmp/no/x.h5"
[ -e "$tmp/x.h5" ] && fail "a failed gen left $tmp/x.h5"

if [ "$fails" -ne 0 ]; then
    echo "gen_info.sh: $fails check(s) failed" >&2
    exit 1
fi
echo "gen_info.sh: all checks passed"
