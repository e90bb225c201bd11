#!/usr/bin/env bash
# compare_allocators.sh GMSIM SOURCE_DIR - `gmsim compare --allocators`:
# every allocator x policy is ranked by the one ranking (gm_rank_cmp), the
# table and the JSON name allocator + settings + policy, the winner is the
# best row and carries its result (gmreplay --winner), the output does not
# depend on --threads, and bad lists are refused with a message.
set -u
gmsim=$1
src=${2:-.}
trace=$src/traces/bert.h5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

expect_fail() {
    local want=$1 what=$2
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: exit $rc, expected $want"
    grep -q "gmsim compare" "$tmp/err" || fail "$what: no message on stderr"
}

list='pytorch,pytorch:expandable_segments:True,max_split_size_mb:64,cuda-async,rmm-pool,rmm-arena,rmm-binning,tf-bfc:allow_growth:True'
"$gmsim" compare --capacity 6GiB --threads 1 --allocators "$list" --policies pytorch,lru \
    --json "$tmp/c1.json" "$trace" >"$tmp/t1" 2>"$tmp/e1" || fail "compare exited $? ($(cat "$tmp/e1"))"
"$gmsim" compare --capacity 6GiB --threads 3 --allocators "$list" --policies pytorch,lru \
    --json "$tmp/c3.json" "$trace" >"$tmp/t3" 2>/dev/null || fail "compare --threads 3 failed"
cmp -s "$tmp/t1" "$tmp/t3" || fail "the table depends on --threads"

# 7 allocators x 2 policies, each row named allocator[:settings] / policy
rows=$(grep -cE '^ +[0-9]+  [a-z-]+(:[^ ]+)? / (pytorch|lru) ' "$tmp/t1")
[ "$rows" -eq 14 ] || fail "expected 14 ranked rows, got $rows"
grep -q 'pytorch:expandable_segments:True,max_split_size_mb:64 / lru' "$tmp/t1" ||
    fail "settings with commas not kept in the label"
grep -q '^14 allocator / policy runs ranked' "$tmp/t1" || fail "no header line"
grep -q '^winner: ' "$tmp/t1" || fail "no winner line"

python3 - "$tmp/c1.json" <<'EOF' || fail "JSON checks"
import json, sys
d = json.load(open(sys.argv[1]))
rk, res = d["ranking"], d["results"]
assert len(rk) == 14 and len(res) == 14, (len(rk), len(res))
seen = set()
for row in rk:
    r = res[row["index"]]
    # the row names what ran: allocator, its settings, policy
    assert r["inputs"]["allocator"] == row["allocator"], row
    assert r["inputs"]["policy"] == row["policy"], row
    assert row["label"].startswith(row["allocator"]), row
    assert row["label"].endswith(" / " + row["policy"]), row
    seen.add(row["label"])
assert len(seen) == 14
# the one ranking: OOMs never decrease down the table
ooms = [row["oom_count"] for row in rk]
assert ooms == sorted(ooms), ooms
# settings given per allocator reach its result
conf = {row["label"]: row["alloc_conf"] for row in rk}
assert conf["tf-bfc:allow_growth:True / pytorch"] == "allow_growth:True", conf
assert conf["rmm-pool / pytorch"] == "", conf
w = d["winner"]
assert w["label"] == rk[0]["label"] and w["index"] == rk[0]["index"], w
assert w["result"]["inputs"]["allocator"] == rk[0]["allocator"]
EOF

# without --policies, each allocator runs under its library's own behaviour
"$gmsim" compare -q --capacity 6GiB --allocators cuda-async,tf-bfc --json "$tmp/d.json" "$trace" ||
    fail "compare --allocators without --policies failed"
python3 -c "
import json,sys; d=json.load(open('$tmp/d.json'))
assert [r['inputs']['policy'] for r in d['results']] == ['pytorch', 'pytorch']" || fail "default policy"

# the HTML report reads it
"$gmsim" report "$tmp/c1.json" -o "$tmp/r.html" 2>"$tmp/e" || fail "report: $(cat "$tmp/e")"

expect_fail 2 "unknown allocator" -- "$gmsim" compare --allocators pytorch,jemalloc "$trace"
grep -q "jemalloc" "$tmp/err" && grep -q "rmm-pool" "$tmp/err" || fail "message names the choices"
expect_fail 2 "--allocator with --allocators" -- \
    "$gmsim" compare --allocator pytorch --allocators cuda-async "$trace"
expect_fail 2 "listed twice" -- "$gmsim" compare --allocators rmm-pool,rmm-pool "$trace"
expect_fail 1 "bad settings" -- "$gmsim" compare --allocators rmm-pool:pool_size:1GiB "$trace"
grep -q "rmm-pool:pool_size:1GiB / pytorch" "$tmp/err" || fail "bad settings: which run"

[ "$fails" -eq 0 ] && echo "compare_allocators: all checks passed"
exit "$fails"
