#!/usr/bin/env bash
# oom.sh GMSIM SOURCE_DIR - an OOM explained from the outside: its verdict
# (shortage, fragmentation, other tenant) with the deciding numbers, the live
# tensors by category at it, the trace's peak, and each single PyTorch change
# re-simulated, in the table and in the JSON; --empty-cache-at-phase.
set -u
gmsim=$1
src=${2:-.}
bert=$src/traces/bert.h5
gpt=$src/tests/data/gpt-medium-ctx128-train.pickle
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

run() {
    local want=$1 what=$2
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: exit $rc, expected $want ($(head -c 400 "$tmp/err"))"
}

expect_line() {
    grep -Eq -- "$1" "$2" || fail "no line matching '$1' in $(basename "$2"): $(head -c 900 "$2")"
}

py() { python3 -c "$@"; }

# --- bert at 5 GiB: fragmentation; expandable segments avoid it ---
run 3 "bert 5GiB" -- "$gmsim" run --capacity 5GiB --json "$tmp/b5.json" "$bert"
expect_line "^      verdict: fragmentation: .* free in the cache \(reserved - allocated\) and .* on the device, .* requested, but the largest free block is " "$tmp/out"
expect_line "^why the first OOM \(tenant 0, event [0-9]+, fragmentation\):$" "$tmp/out"
expect_line "^  live then: [0-9.]+ GiB in [0-9]+ tensors: activation " "$tmp/out"
expect_line "^  the live tensors peak at 4.26 GiB \(event [0-9]+\), within the 4.50 GiB this job may hold$" "$tmp/out"
expect_line "^  expandable_segments:True +no OOM; peak reserved " "$tmp/out"
expect_line "^  max_split_size_mb:128 +still 1 OOM" "$tmp/out"
expect_line "^  garbage_collection_threshold:0.8 +" "$tmp/out"
expect_line "^  empty_cache\(\) at phase boundaries +" "$tmp/out"
py "
import json
d = json.load(open('$tmp/b5.json'))
o = d['device']['ooms'][0]
assert o['verdict'] == 'fragmentation', o
assert o['reserved_bytes'] - o['allocated_bytes'] >= o['size_bytes'] > o['largest_free_bytes']
e = d['explain']
live = e['live_at_first_oom']
assert live['event_index'] == o['event_index']
assert sum(c['bytes'] for c in live['by_category'].values()) == live['live_bytes']
fx = {f['change']: f for f in e['fixes']}
assert fx['expandable_segments:True']['avoids_oom'] is True
assert fx['max_split_size_mb:128']['avoids_oom'] is False
assert e['live_at_peak']['live_bytes'] >= live['live_bytes']
" || fail "bert 5GiB JSON"
# the fix, run on its own, agrees
run 0 "bert 5GiB expandable" -- "$gmsim" run --capacity 5GiB --alloc-conf expandable_segments:True "$bert"
expect_line "^  OOMs +0$" "$tmp/out"
run 0 "bert 5GiB --empty-cache-at-phase" -- "$gmsim" run --capacity 5GiB --empty-cache-at-phase "$bert"
expect_line "^  tenant 0: [0-9]+ torch.cuda.empty_cache\(\) calls at phase boundaries \(--empty-cache-at-phase\), .* released$" "$tmp/out"
expect_line "^  OOMs +0$" "$tmp/out"

# --- bert at 4.5 GiB: the live tensors alone exceed what the job may hold later ---
run 3 "bert 4.5GiB" -- "$gmsim" run --capacity 4.5GiB "$bert"
expect_line "no allocator setting avoids an OOM here$" "$tmp/out"

# --- a shared snapshot at 7 GiB: shortage ---
run 3 "gpt-medium 7GiB" -- "$gmsim" run --capacity 7GiB --json "$tmp/g.json" "$gpt"
expect_line "^      verdict: shortage: .* allocated \+ .* requested > 6.50 GiB this job may hold$" "$tmp/out"
expect_line "^  live then: .* optimizer_state .*, parameter .*, gradient " "$tmp/out"
py "
import json
d = json.load(open('$tmp/g.json'))
assert d['device']['ooms'][0]['verdict'] == 'shortage'
assert not any(f.get('avoids_oom') for f in d['explain']['fixes'])
" || fail "gpt-medium JSON"

# --- two tenants: the second one's memory is held by the first ---
run 3 "two tenants" -- "$gmsim" run --capacity 6GiB "$bert" --offset 100ms "$bert"
expect_line "^      verdict: other tenant: the other tenants use .*, leaving .* on the device for .* requested; alone, this job's .* reserved would leave " "$tmp/out"

# --- --no-explain ---
run 3 "--no-explain" -- "$gmsim" run --no-explain --capacity 5GiB --json "$tmp/n.json" "$bert"
grep -q "^why the first OOM" "$tmp/out" && fail "--no-explain still explains"
py "import json; assert 'explain' not in json.load(open('$tmp/n.json'))" || fail "--no-explain JSON"
# --- no OOM, nothing to explain ---
run 0 "no OOM" -- "$gmsim" run --capacity 8GiB "$bert"
grep -q "^why the first OOM" "$tmp/out" && fail "explains a run without OOM"

# --- the verdict for scripts: exit 3 and one line with -q, for run, compare and fit ---
run 3 "run -q OOM" -- "$gmsim" run -q --capacity 5GiB "$bert"
expect_line "^OOM: 1 OOM under allocator pytorch, policy pytorch; the first: event [0-9]+ of pass 1 .*; fragmentation: " "$tmp/out"
[ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "run -q: more than one line"
[ -s "$tmp/err" ] && fail "run -q wrote to stderr: $(cat "$tmp/err")"
run 0 "run -q fits" -- "$gmsim" run -q --capacity 8GiB "$bert"
expect_line "^fits: no OOM; peak reserved .* on 8.00 GiB$" "$tmp/out"
run 3 "run OOM: stderr names it" -- "$gmsim" run --capacity 5GiB --no-explain "$bert"
expect_line "^gmsim run: 1 OOM under allocator pytorch" "$tmp/err"
run 3 "compare -q nothing fits" -- "$gmsim" compare -q --capacity 4.5GiB "$bert"
expect_line "^OOM: nothing realizable runs on 4.50 GiB without OOM; the smallest card that does is [0-9.]+ GiB \(" "$tmp/out"
run 3 "compare table: no winner that OOMs" -- "$gmsim" compare --capacity 4.5GiB --json "$tmp/c.json" "$bert"
expect_line "^winner: none: nothing realizable runs on 4.50 GiB without OOM" "$tmp/out"
expect_line "^deployable today \(the allocator's own behaviour, its settings\): pytorch, 1 OOM" "$tmp/out"
expect_line "^with a custom allocator \(policies/README.md\): " "$tmp/out"
py "
import json
d = json.load(open('$tmp/c.json'))
assert d['verdict'] == 'oom' and d['best_deployable'] == 'pytorch'
rows = {r['policy']: r for r in d['ranking']}
assert rows['pytorch']['deployable'] and not rows['lru']['deployable']
assert rows['pytorch']['smallest_capacity_bytes'] > 4.5 * 2**30
" || fail "compare JSON verdict"
run 0 "compare -q fits" -- "$gmsim" compare -q --capacity 8GiB "$bert"
expect_line "^fits: " "$tmp/out"
run 3 "fit -q nothing fits" -- "$gmsim" fit -q --capacity 3GiB --max-capacity 4GiB "$bert"
expect_line "^OOM: nothing realizable runs without OOM up to 4.00 GiB$" "$tmp/out"
run 0 "fit -q fits" -- "$gmsim" fit -q --policies pytorch "$bert"
expect_line "^fits: the smallest card is [0-9.]+ GiB \(pytorch\)$" "$tmp/out"

# --- a snapshot taken at an OOM: the live set that does not fit, said as such;
# its HTML page is made from the snapshot (not only from a trace file) ---
st=$src/tests/data/oom-state-torch20.pickle
run 3 "state-only snapshot on 10 GiB" -- "$gmsim" run -q --capacity 10GiB "$st"
expect_line "^OOM: 1 OOM under allocator pytorch, policy pytorch; the first: before the first event: the 11.03 GiB alive at the start of the trace do not fit in the 9.50 GiB this job may hold; nothing was replayed$" "$tmp/out"
run 0 "state-only snapshot, --html" -- "$gmsim" run -q --capacity 16GiB --html "$tmp/st.html" "$st"
grep -q "oom-state-torch20.pickle" "$tmp/st.html" || fail "the snapshot's page does not name it"
grep -q "11.03 GiB" "$tmp/st.html" || fail "the snapshot's page does not show its live set"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "oom: all checks passed"
