#!/usr/bin/env bash
# leak_info.sh GMSIM SOURCE_DIR - `gmsim info`'s iterations and leak verdict
# from the outside: a generated steady trace (iteration markers, warm-up
# from the optimizer's states), a snapshot without markers (the period),
# --iteration-marker, and its errors.
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
# field JSON EXPR: a Python expression over j = info's "iterations" object
field() {
    python3 -c "import json,sys; j=json.load(open(sys.argv[1]))['iterations']; print($2)" "$1"
}

"$gmsim" gen bert --layers 2 --hidden 128 --heads 2 --vocab 1000 --seq 64 --batch 4 \
    --iterations 6 -o "$tmp/b.h5" >/dev/null 2>&1 || fail "gen bert"
"$gmsim" info --json - "$tmp/b.h5" >"$tmp/b.json" || fail "info --json"
[ "$(field "$tmp/b.json" "j['source']")" = iteration-markers ] || fail "source: $(field "$tmp/b.json" "j['source']")"
[ "$(field "$tmp/b.json" "len(j['boundaries'])")" = 6 ] || fail "6 boundaries expected"
[ "$(field "$tmp/b.json" "j['verdict']")" = steady ] || fail "steady expected: $(field "$tmp/b.json" "j['verdict']")"
[ "$(field "$tmp/b.json" "j['warmup_iterations']")" = 1 ] || fail "one warm-up iteration (optimizer states)"
# the optimizer's states are live at every boundary after the first
[ "$(field "$tmp/b.json" "all(b['by_group']['optimizer_state'] > 0 for b in j['boundaries'][1:])")" = True ] ||
    fail "optimizer states at boundaries 1.."
"$gmsim" info "$tmp/b.h5" >"$tmp/b.txt" || fail "info"
grep -Eq "^iterations: +6 boundaries, from iteration markers" "$tmp/b.txt" || fail "text: iterations line"
grep -Eq "^leak: +steady: " "$tmp/b.txt" || fail "text: leak line"

# --iteration-marker: a name the trace has, and one it has not
"$gmsim" info --json - --iteration-marker iteration "$tmp/b.h5" >"$tmp/u.json" || fail "--iteration-marker iteration"
[ "$(field "$tmp/u.json" "j['source']")" = user-marker ] || fail "user-marker source"
"$gmsim" info --iteration-marker epoch "$tmp/b.h5" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || fail "unknown marker: exit $rc, expected 1"
grep -q "no marker of the trace is named so ('iteration 0'" "$tmp/err" || fail "unknown marker message: $(cat "$tmp/err")"
"$gmsim" info --iteration-marker "" "$tmp/b.h5" >/dev/null 2>&1
[ $? -eq 2 ] || fail "empty marker name: usage error expected"

# a snapshot without markers: iterations from the period of live bytes
snap=$src/tests/data/empty-cache-bursts.pickle
"$gmsim" info --json - "$snap" >"$tmp/s.json" || fail "info --json snapshot"
[ "$(field "$tmp/s.json" "j['source']")" = period ] || fail "snapshot: period expected"
[ "$(field "$tmp/s.json" "j['verdict']")" = steady ] || fail "snapshot: steady expected"
[ "$(field "$tmp/s.json" "len(j['boundaries']) >= 20")" = True ] || fail "snapshot: 20+ boundaries"

# run --json with --html carries what the page draws: the trace's iterations (the same
# object as info's) under the tenant's trace_stats, and the page its chart
"$gmsim" run --capacity 8GiB "$tmp/b.h5" --json "$tmp/run.json" --html "$tmp/run.html" \
    >/dev/null 2>&1 || fail "run --json --html"
python3 - "$tmp/run.json" "$tmp/b.json" <<'EOF2' || fail "run --json: trace_stats.iterations differs from info's"
import json, sys
run = json.load(open(sys.argv[1]))["tenants"][0]["trace_stats"]["iterations"]
info = json.load(open(sys.argv[2]))["iterations"]
assert run == info, (run.get("verdict"), info.get("verdict"))
EOF2
grep -q '<svg class="chart iter" id="iterations"' "$tmp/run.html" || fail "run --html: no iteration chart"
grep -q '<p class="iter-verdict"><b>steady</b>' "$tmp/run.html" || fail "run --html: no steady verdict"
# a trace without iterations (record-stream.pickle, 16 entries: no markers, no period) has no chart
"$gmsim" run --capacity 80GiB "$src/tests/data/cases/record-stream.pickle" --html "$tmp/n.html" \
    >/dev/null 2>&1 || fail "run --html record-stream"
grep -q 'id="iterations"' "$tmp/n.html" && fail "record-stream: an iteration chart without iterations"

[ $fails -eq 0 ] || exit 1
echo "leak_info: all passed"
