#!/usr/bin/env bash
# policy_diff.sh - a policy's decisions before and after a speed change.
#
#   bash bench/policy_diff.sh OLD_GMSIM NEW_GMSIM TRACE...
#
# Runs `gmsim run --json` of both binaries with the predictive and oracle
# policies on every TRACE, with room to spare and under pressure (a
# capacity below the trace's peak, a proactive threshold, two tenants with
# --scope device), and compares the whole results JSON but for its time
# stamp and wall time. Any difference in a decision shows up as a changed
# figure (releases, driver calls, peaks, predictions, the timeline). Exit
# 0 when every pair is identical, 1 otherwise. Not part of ctest: it needs
# a build of the commit to compare against (e.g. `git archive REV | tar -x
# -C DIR` and a Release build there).
set -u
old=$1 new=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 runs=0
# shellcheck source=bench/diff_lib.sh
. "$(dirname "$0")/diff_lib.sh"
one() { # label, gmsim args...
    local label=$1
    shift
    "$old" run -q --json "$tmp/a.json" "$@" >/dev/null 2>"$tmp/a.err"
    local ra=$?
    "$new" run -q --json "$tmp/b.json" "$@" >/dev/null 2>"$tmp/b.err"
    local rb=$?
    runs=$((runs + 1))
    if [ $ra != $rb ] || ! cmp -s "$tmp/a.err" "$tmp/b.err"; then
        echo "DIFF $label: exit $ra vs $rb"
        diff "$tmp/a.err" "$tmp/b.err" | head -5
        fail=1
        return
    fi
    [ $ra != 0 ] && [ ! -s "$tmp/a.json" ] && return
    compare_json "$label" "$tmp/a.json" "$tmp/b.json"
}
for t in "$@"; do
    # the trace's own peak reserved, to put it under pressure; 80 GiB for
    # a snapshot that does not record the device's size
    trace_peak "$old" "$t" || continue
    for pol in predictive oracle; do
        one "$t $pol" --policy $pol "${cap0[@]}" "$t"
        for f in 0.9 0.7; do
            cap=$(python3 -c "print(int($peak * $f) + 536870912)")
            one "$t $pol cap=$f" --policy $pol --capacity $cap --on-oom skip "$t"
            one "$t $pol cap=$f two tenants, scope device" --policy $pol --capacity $((cap * 2)) \
                --scope device --on-oom skip "$t" --offset 3ms "$t"
        done
    done
    one "$t predictive threshold" --policy predictive:threshold=0.5 \
        --capacity $(python3 -c "print(int($peak * 1.2) + 536870912)") "$t"
    one "$t predictive sample=100us" --policy predictive:sample=100us,horizon=20ms "${cap0[@]}" "$t"
done
echo "$runs pairs compared: $([ $fail = 0 ] && echo identical || echo DIFFERENT)"
exit $fail
