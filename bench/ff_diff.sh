#!/usr/bin/env bash
# ff_diff.sh - fast-forward (sim/ffwd.h) against simulating every event.
#
#   bash bench/ff_diff.sh GMSIM TRACE...
#
# Runs `gmsim run --json` of one binary twice per case, as is and with
# --no-fast-forward, and compares the whole results JSON but for its time
# stamp and wall time, and the table's lines but for the timing line and
# the fast-forward line. Cases per TRACE: the policies fast-forward applies
# to (pytorch, lru, priority) with room, and pytorch, lru and priority
# under pressure (capacities below the trace's peak reserved, OOMs
# skipped), with expandable_segments, max_split_size_mb,
# roundup_power2_divisions, --repeat 3, --initial-state recorded,
# garbage_collection_threshold under a memory fraction (with room, and
# near the peak, where it releases), and
# predictive (which fast-forward leaves alone: a check that it does).
# Prints how many events each case fast-forwarded, so a case that never
# engages shows. Exit 0 when every pair is identical, 1 otherwise.
set -u
g=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 runs=0 ffs=0
# shellcheck source=bench/diff_lib.sh
. "$(dirname "$0")/diff_lib.sh"
table() { grep -v -e '^  simulated ' -e ' fast-forwarded: ' "$1"; }
one() { # label, gmsim args...
    local label=$1
    shift
    "$g" run --json "$tmp/a.json" "$@" >"$tmp/a.out" 2>"$tmp/a.err"
    local ra=$?
    "$g" run --no-fast-forward --json "$tmp/b.json" "$@" >"$tmp/b.out" 2>"$tmp/b.err"
    local rb=$?
    runs=$((runs + 1))
    local ff
    ff=$(sed -n 's/^  \([0-9]*\) of them fast-forwarded.*/\1/p' "$tmp/a.out")
    [ -n "$ff" ] && ffs=$((ffs + 1))
    printf '%-70s %s\n' "$label" "fast-forwarded ${ff:-0}"
    if [ $ra != $rb ] || ! cmp -s "$tmp/a.err" "$tmp/b.err" ||
        ! diff <(table "$tmp/a.out") <(table "$tmp/b.out") >/dev/null; then
        echo "DIFF $label: exit $ra vs $rb"
        diff "$tmp/a.err" "$tmp/b.err" | head -5
        diff <(table "$tmp/a.out") <(table "$tmp/b.out") | head -5
        fail=1
        return
    fi
    [ $ra != 0 ] && [ ! -s "$tmp/a.json" ] && return
    compare_json "$label" "$tmp/a.json" "$tmp/b.json"
}
for t in "$@"; do
    trace_peak "$g" "$t" || continue
    for pol in pytorch lru priority; do
        one "$t $pol" --policy $pol "${cap0[@]}" "$t"
        for f in 0.95 0.8 0.6; do
            cap=$(python3 -c "print(int($peak * $f) + 536870912)")
            one "$t $pol cap=$f" --policy $pol --capacity $cap --on-oom skip "$t"
        done
    done
    one "$t expandable" --alloc-conf expandable_segments:True "${cap0[@]}" "$t"
    one "$t max_split 64" --alloc-conf max_split_size_mb:64 "${cap0[@]}" "$t"
    one "$t divisions 4" --alloc-conf roundup_power2_divisions:4 "${cap0[@]}" "$t"
    one "$t repeat 3" --repeat 3 "${cap0[@]}" "$t"
    one "$t recorded" --initial-state recorded "${cap0[@]}" "$t"
    one "$t gc" --alloc-conf garbage_collection_threshold:0.6 --memory-fraction 0.95 \
        "${cap0[@]}" "$t"
    cap=$(python3 -c "print(int($peak * 1.05) + 536870912)")
    one "$t gc, releasing" --alloc-conf garbage_collection_threshold:0.5 --memory-fraction 1 \
        --capacity $cap --on-oom skip "$t"
    one "$t predictive" --policy predictive "${cap0[@]}" "$t"
done
echo "$runs pairs compared, $ffs fast-forwarded: $([ $fail = 0 ] && echo identical || echo DIFFERENT)"
exit $fail
