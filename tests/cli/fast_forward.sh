#!/usr/bin/env bash
# fast_forward.sh GMSIM SOURCE_DIR - fast-forward from the command line
# (sim/ffwd.h): on a generated trace whose iterations have one shape, run,
# compare and fit give the same JSON and the same table with it as with
# --no-fast-forward, the table says how many events were fast-forwarded
# (most of them) only when some were; a short trace with dynamic padding
# (which never comes back to a state) is simulated event by event, a long
# one has its large pool's iterations fast-forwarded, with the same results.
set -u
gmsim=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 total=0
fail() {
    echo "FAIL $*"
    fails=$((fails + 1))
}
ok() { echo "ok   $*"; }
strip() { grep -v -e '"created_utc"' -e '"wall_s"' "$1"; }
table() { grep -v -e '^  simulated ' -e ' fast-forwarded: ' "$1"; }
ff_of() { sed -n 's/^  \([0-9]*\) of them fast-forwarded.*/\1/p' "$1"; }

"$gmsim" gen gpt --iterations 120 -o "$tmp/fixed.h5" >/dev/null 2>&1 || fail "gen gpt"
"$gmsim" gen bert --iterations 60 -o "$tmp/jitter.h5" >/dev/null 2>&1 || fail "gen bert"
events=$("$gmsim" info "$tmp/fixed.h5" | awk '/^events:/ { print $2; exit }')

# gmsim run ARGS on TRACE as is and with --no-fast-forward: the same JSON
# (memory_stats() kept) and table, and at least MIN events of EVENTS
# fast-forwarded, said only without --no-fast-forward
both_ways() { # label trace events min args...
    local label=$1 trace=$2 n=$3 min=$4
    shift 4
    total=$((total + 1))
    "$gmsim" run "$@" --json "$tmp/a.json" "$trace" >"$tmp/a.out" 2>&1
    local ra=$?
    "$gmsim" run "$@" --no-fast-forward --json "$tmp/b.json" "$trace" >"$tmp/b.out" 2>&1
    local rb=$?
    local ff
    ff=$(ff_of "$tmp/a.out")
    if [ $ra != 0 ] || [ $rb != 0 ]; then
        fail "$label run $*: exit $ra / $rb"
    elif ! diff <(strip "$tmp/a.json") <(strip "$tmp/b.json") >/dev/null; then
        fail "$label run $*: the JSON differs with --no-fast-forward"
    elif ! diff <(table "$tmp/a.out") <(table "$tmp/b.out") >/dev/null; then
        fail "$label run $*: the table differs with --no-fast-forward"
    elif [ -z "$ff" ] || [ "$ff" -lt "$min" ]; then
        fail "$label run $*: ${ff:-no} events of $n fast-forwarded"
    elif [ -n "$(ff_of "$tmp/b.out")" ]; then
        fail "$label run $*: --no-fast-forward still fast-forwards"
    else
        ok "$label run $*: the same with and without, $ff of $n events fast-forwarded"
    fi
}

# the same result either way: run (text and JSON, stats kept), lru
for args in "" "--policy lru" "--alloc-conf expandable_segments:True" "--repeat 2"; do
    # shellcheck disable=SC2086
    both_ways "" "$tmp/fixed.h5" "$events" $((events / 2)) $args
done

# compare and fit: the same JSON
for cmd in compare fit; do
    total=$((total + 1))
    "$gmsim" $cmd -q --json "$tmp/a.json" "$tmp/fixed.h5" >/dev/null 2>&1
    ra=$?
    "$gmsim" $cmd -q --no-fast-forward --json "$tmp/b.json" "$tmp/fixed.h5" >/dev/null 2>&1
    rb=$?
    if [ $ra != $rb ] || ! diff <(strip "$tmp/a.json") <(strip "$tmp/b.json") >/dev/null; then
        fail "$cmd: exit $ra / $rb, or the JSON differs with --no-fast-forward"
    else
        ok "$cmd: the same JSON with and without"
    fi
done

# dynamic padding, 60 iterations: the whole state never comes back, and
# the search for one pool's cycles (ffwd.h, "One part") starts only after
# 2^18 events: nothing fast-forwarded, the same result
total=$((total + 1))
"$gmsim" run --json "$tmp/a.json" "$tmp/jitter.h5" >"$tmp/a.out" 2>&1
"$gmsim" run --no-fast-forward --json "$tmp/b.json" "$tmp/jitter.h5" >/dev/null 2>&1
if [ -n "$(ff_of "$tmp/a.out")" ] || ! diff <(strip "$tmp/a.json") <(strip "$tmp/b.json") >/dev/null; then
    fail "dynamic padding: fast-forwarded ($(ff_of "$tmp/a.out")), or the JSON differs"
else
    ok "dynamic padding: simulated event by event, the same JSON"
fi

# dynamic padding, 450 iterations (1.2 M events): the large pool's
# iterations are fast-forwarded, the small pool's events simulated among
# them; the same JSON (memory_stats() included) and table either way
"$gmsim" gen bert --iterations 450 -o "$tmp/jitter450.h5" >/dev/null 2>&1 || fail "gen bert 450"
events=$("$gmsim" info "$tmp/jitter450.h5" | awk '/^events:/ { print $2; exit }')
for args in "" "--policy lru"; do
    # shellcheck disable=SC2086
    both_ways "dynamic padding (one pool):" "$tmp/jitter450.h5" "$events" $((events / 5)) $args
done

echo "$((total - fails)) of $total passed"
[ $fails = 0 ]
