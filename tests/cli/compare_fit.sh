#!/usr/bin/env bash
# compare_fit.sh GMSIM SOURCE_DIR - `gmsim compare`, `gmsim fit` and the
# release policies from the outside: the table is the same for any
# --threads, the oracle is the bound and never the winner, fit's capacity
# runs without OOM and 2 MiB less does not, bad invocations exit non-zero.
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

# expect_fail CODE DESCRIPTION -- command...: exit code CODE and a "gmsim" message on stderr
expect_fail() {
    local want=$1 what=$2
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: exit $rc, expected $want"
    grep -q "gmsim" "$tmp/err" || fail "$what: no message on stderr"
}

expect_line() {
    grep -Eq -- "$1" "$2" || fail "no line matching '$1' in $(basename "$2")"
}

# --- every policy runs by name; the oracle is labelled ---
for p in pytorch lru priority predictive oracle "lru:threshold=0.8" \
    "priority:order=temporary>activation" "predictive:horizon=10ms"; do
    "$gmsim" run --policy "$p" "$trace" >"$tmp/run.out" 2>"$tmp/run.err" ||
        fail "run --policy $p exited $? ($(cat "$tmp/run.err"))"
    expect_line "^allocator pytorch, policy $p" "$tmp/run.out"
done
"$gmsim" run --policy oracle "$trace" >"$tmp/run.out" 2>&1
expect_line "UNREALIZABLE" "$tmp/run.out"

# --- compare: deterministic across thread counts, three staggered tenants ---
args=(--capacity 13GiB --scope device "$trace" --offset 20ms "$trace" --offset 40ms "$trace")
"$gmsim" compare --threads 1 --json "$tmp/c1.json" "${args[@]}" >"$tmp/c1.out" 2>"$tmp/c1.err" ||
    fail "compare --threads 1 exited $? ($(cat "$tmp/c1.err"))"
"$gmsim" compare --threads 4 "${args[@]}" >"$tmp/c4.out" 2>"$tmp/c4.err" ||
    fail "compare --threads 4 exited $? ($(cat "$tmp/c4.err"))"
cmp -s "$tmp/c1.out" "$tmp/c4.out" || fail "compare table differs between --threads 1 and 4"
expect_line "^ +1 +[a-z]+ " "$tmp/c1.out"
expect_line "^ +bound +oracle " "$tmp/c1.out"
expect_line "^winner: (pytorch|lru|priority|predictive)" "$tmp/c1.out"
expect_line "^bound: +oracle is UNREALIZABLE" "$tmp/c1.out"
grep -q '"schema": "gmsim-compare/1"' "$tmp/c1.json" || fail "compare JSON has no schema"
grep -q '"winner": "oracle"' "$tmp/c1.json" && fail "the oracle won"
[ "$(grep -c '"schema": "gmsim-result/1"' "$tmp/c1.json")" -eq 5 ] ||
    fail "compare JSON should hold 5 results"
grep -q '"policy_report"' "$tmp/c1.json" || fail "no policy_report in the results"
# the help names the default set: the policies compare runs without --policies
ran=$(sed -n '/"policies": \[/,/\]/p' "$tmp/c1.json" | grep -o '^ *"[a-z]*",\{0,1\}$' | tr -d '", ' |
    paste -sd, -)
for cmd in compare fit; do
    said=$("$gmsim" $cmd --help | awk '/--policies LIST/ { on = 1; print; next } on && /^  --/ { exit } on' |
        tr '\n' ' ' | grep -o 'default: *[a-z, ]*' | sed 's/default: *//; s/ //g; s/,$//')
    [ "$said" = "$ran" ] || fail "$cmd --help says the default policies are '$said'; compare ran '$ran'"
done
grep -q '"precision"' "$tmp/c1.json" || fail "predictive reports no precision"

# --- fit: C has no OOM, C - 2 MiB has one ---
"$gmsim" fit --policies pytorch,lru --json "$tmp/fit.json" "$trace" >"$tmp/fit.out" \
    2>"$tmp/fit.err" || fail "fit exited $? ($(cat "$tmp/fit.err"))"
expect_line "^peak live bytes" "$tmp/fit.out"
expect_line "^  pytorch +[0-9.]+ [MG]iB" "$tmp/fit.out"
caps=$(grep -o '"capacity_bytes": [0-9]*' "$tmp/fit.json" | grep -o '[0-9]*$')
[ "$(echo "$caps" | wc -l)" -ge 2 ] || fail "fit JSON has no capacities"
cap=$(echo "$caps" | tail -n 1) # lru's (the last result)
"$gmsim" run --policy lru --capacity "$cap" "$trace" >"$tmp/ok.out" 2>&1
expect_line "^  OOMs +0$" "$tmp/ok.out"
"$gmsim" run --policy lru --capacity $((cap - 2097152)) "$trace" >"$tmp/oom.out" 2>&1
expect_line "^  OOMs +[1-9]" "$tmp/oom.out"

# --- fit --tenants ---
"$gmsim" fit --tenants 3 --capacity 12GiB --stagger 30ms --policies pytorch,oracle "$trace" \
    >"$tmp/ft.out" 2>"$tmp/ft.err" || fail "fit --tenants exited $? ($(cat "$tmp/ft.err"))"
expect_line "^  pytorch +[0-9]+  " "$tmp/ft.out"
expect_line "^  oracle \(UNREALIZABLE\) +[0-9]+  " "$tmp/ft.out"

# --- help and bad invocations ---
"$gmsim" compare --help >"$tmp/h.out" || fail "compare --help exited $?"
expect_line "--policies LIST" "$tmp/h.out"
expect_line "--scope self\|device" "$tmp/h.out"
"$gmsim" fit --help >"$tmp/h.out" || fail "fit --help exited $?"
expect_line "--tenants N" "$tmp/h.out"
expect_fail 2 "compare --policy" -- "$gmsim" compare --policy lru "$trace"
expect_fail 1 "unknown policy" -- "$gmsim" compare --policies lru,bogus "$trace"
expect_fail 2 "compare without trace" -- "$gmsim" compare
expect_fail 2 "--stagger without --tenants" -- "$gmsim" fit --stagger 1ms "$trace"
expect_fail 2 "bad --scope" -- "$gmsim" run --scope everyone "$trace"
expect_fail 1 "bad policy parameter" -- "$gmsim" run --policy lru:threshold=7 "$trace"
expect_fail 2 "--threads 0 (a bad option value is a usage error)" -- "$gmsim" compare --threads 0 "$trace"
expect_fail 2 "bad --tenants" -- "$gmsim" fit --tenants 1.5 --capacity 8GiB "$trace"

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed" >&2
    exit 1
fi
echo "compare_fit: all checks passed"
