#!/usr/bin/env bash
# fast_forward.sh GMSIM SOURCE_DIR - fast-forward from the command line
# (sim/ffwd.h): on a generated trace whose iterations have one shape, run,
# compare and fit give the same JSON and the same table with it as with
# --no-fast-forward, the table says how many events were fast-forwarded
# (most of them) only when some were, and a trace with dynamic padding
# (which never comes back to a state) is simulated event by event.
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

# the same result either way: run (text and JSON, stats kept), lru
for args in "" "--policy lru" "--alloc-conf expandable_segments:True" "--repeat 2"; do
    total=$((total + 1))
    # shellcheck disable=SC2086
    "$gmsim" run $args --json "$tmp/a.json" "$tmp/fixed.h5" >"$tmp/a.out" 2>&1
    ra=$?
    # shellcheck disable=SC2086
    "$gmsim" run $args --no-fast-forward --json "$tmp/b.json" "$tmp/fixed.h5" >"$tmp/b.out" 2>&1
    rb=$?
    ff=$(ff_of "$tmp/a.out")
    if [ $ra != 0 ] || [ $rb != 0 ]; then
        fail "run $args: exit $ra / $rb"
    elif ! diff <(strip "$tmp/a.json") <(strip "$tmp/b.json") >/dev/null; then
        fail "run $args: the JSON differs with --no-fast-forward"
    elif ! diff <(table "$tmp/a.out") <(table "$tmp/b.out") >/dev/null; then
        fail "run $args: the table differs with --no-fast-forward"
    elif [ -z "$ff" ] || [ "$ff" -lt $((events / 2)) ]; then
        fail "run $args: ${ff:-no} events of $events fast-forwarded"
    elif [ -n "$(ff_of "$tmp/b.out")" ]; then
        fail "run $args: --no-fast-forward still fast-forwards"
    else
        ok "run $args: the same with and without, $ff of $events events fast-forwarded"
    fi
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

# dynamic padding: no state comes back, nothing fast-forwarded, the same result
total=$((total + 1))
"$gmsim" run --json "$tmp/a.json" "$tmp/jitter.h5" >"$tmp/a.out" 2>&1
"$gmsim" run --no-fast-forward --json "$tmp/b.json" "$tmp/jitter.h5" >/dev/null 2>&1
if [ -n "$(ff_of "$tmp/a.out")" ] || ! diff <(strip "$tmp/a.json") <(strip "$tmp/b.json") >/dev/null; then
    fail "dynamic padding: fast-forwarded ($(ff_of "$tmp/a.out")), or the JSON differs"
else
    ok "dynamic padding: simulated event by event, the same JSON"
fi

echo "$((total - fails)) of $total passed"
[ $fails = 0 ]
