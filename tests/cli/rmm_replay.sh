#!/usr/bin/env bash
# rmm_replay.sh GMSIM SOURCE_DIR - an RMM log replays against the resource
# it came from, and a failure is named and exits non-zero.
#
# tests/data/rmm-log-third-run.csv is one run of a job on a fixed RMM pool
# (initial = maximum = 4 GiB) with two streams; replayed three times back to
# back (--repeat 3) the first two runs fit and the third fails, the symptom
# RMM users report (rapidsai/rmm#1969). Why, by RMM's rules
# (sim/alloc_rmm_pool.c; G = GiB, [a,b) = pool offsets):
#   run 1: A0 (2G, s1) takes [0,2) from s0's list, frees it into s1's list;
#          A1, A2 (1G, s0) take [2,3), [3,4); A1's free goes to s0's list;
#          A3 (3G, s1) finds no 3G block, merges s0's list into s1's: [0,3);
#          at the end s1's list holds [0,3) and A2's free starts a new s0
#          list [3,4)
#   run 2: A2 finds s0's list empty after A1 took [3,4), takes [0,1) from
#          s1's list; A3 fits in [1,4) after a merge; s0's list ends [0,1)
#   run 3: A1 takes [0,1), A2 takes [1,2) from s1's list, and A3 (3G) finds
#          [0,1) and [2,4): 3G free, largest block 2G: out of memory.
set -u
gmsim=$1
src=${2:-.}
data=$src/tests/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

"$gmsim" import --format rmm "$data/rmm-log-third-run.csv" -o "$tmp/third.h5" >/dev/null ||
    fail "import of the RMM log"
pool=(--allocator rmm-pool --alloc-conf initial_pool_size:4GiB,maximum_pool_size:4GiB
    --capacity 80GiB)

# the third identical run fails, named, exit 3
"$gmsim" run "${pool[@]}" --repeat 3 --json "$tmp/r3.json" "$tmp/third.h5" \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] || fail "third run: exit $rc, expected 3 ($(cat "$tmp/err"))"
grep -q "^gmsim run: 1 OOM under allocator rmm-pool" "$tmp/err" || fail "OOM not named on stderr"
grep -q "event 5 of pass 3 .*3.00 GiB requested, 4.00 GiB reserved, 1.00 GiB allocated" \
    "$tmp/err" || fail "not the third run's A3: $(cat "$tmp/err")"
grep -q "fragmentation: 3.00 GiB free in the cache (reserved - allocated) and .* on the device, 3.00 GiB requested, but the largest free block is 2.00 GiB" \
    "$tmp/err" || fail "cause not named: $(cat "$tmp/err")"
grep -q "OOM tenant 0 event 5 (repeat pass 3)" "$tmp/out" || fail "table: OOM line"
grep -q "verdict: fragmentation" "$tmp/out" || fail "table: verdict line"
python3 - "$tmp/r3.json" <<'EOF' || fail "JSON: the OOM"
import json, sys
d = json.load(open(sys.argv[1]))
found = d["device"]["ooms"][0]
assert found and found["pass"] == 2 and found["event_index"] == 5, found
EOF

# two runs fit: exit 0
"$gmsim" run -q "${pool[@]}" --repeat 2 "$tmp/third.h5" >/dev/null 2>"$tmp/err" ||
    fail "two runs: exit $? ($(cat "$tmp/err"))"
# PyTorch's allocator on the same log: no OOM
"$gmsim" run -q --capacity 80GiB --repeat 3 "$tmp/third.h5" ||
    fail "pytorch on the RMM log: exit $?"

# every RMM resource replays RMM logs, pre-existing blocks included
"$gmsim" import --format rmm "$data/rmm-log-sample.csv" -o "$tmp/sample.h5" >/dev/null ||
    fail "import of the sample"
for a in rmm-pool rmm-arena rmm-binning; do
    for t in third sample; do
        "$gmsim" run --allocator "$a" --capacity 80GiB "$tmp/$t.h5" >"$tmp/o" 2>"$tmp/e" ||
            fail "$a on $t: exit $? ($(cat "$tmp/e"))"
        grep -q "^allocator $a, policy pytorch" "$tmp/o" || fail "$a on $t: not the model asked for"
    done
done

[ "$fails" -eq 0 ] && echo "rmm_replay: all checks passed"
exit "$fails"
