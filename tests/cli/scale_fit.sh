#!/usr/bin/env bash
# scale_fit.sh GMSIM SOURCE_DIR - `gmsim gen gpt|llama|resnet50`, `gmsim scale`
# and `gmsim fit --largest` from the outside: a scaled trace equals the one
# generated at that value (batch: a line; seq with eager attention: a
# parabola through three); snapshots are accepted; recordings that do not
# align are refused with the reason; --largest's answer fits and the next
# value does not, checked by simulating generated traces at both.
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

expect_fail() {
    local want=$1 what=$2
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: exit $rc, expected $want"
    grep -q "gmsim" "$tmp/err" || fail "$what: no message on stderr"
}

# field FILE KEY: a top-level integer of `gmsim info --json`
field() {
    "$gmsim" info --json - "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"
}

same_trace() { # same_trace A B WHAT: the same events, sizes and peak
    for k in events allocations bytes_allocated peak_live_bytes; do
        [ "$(field "$1" $k)" = "$(field "$2" $k)" ] ||
            fail "$3: $k $(field "$1" $k) against $(field "$2" $k)"
    done
}

small="--layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 64 --iterations 2"

# --- the generators' command line ---
for w in gpt llama resnet50; do
    "$gmsim" gen $w --help | grep -q -- '--checkpoint' || fail "gen $w --help"
done
"$gmsim" gen llama --model cs336-small --seq 64 --batch 2 --iterations 1 --dtype bf16 \
    --checkpoint 2 --zero 3 --world 4 -o "$tmp/l.h5" >"$tmp/out" || fail "gen llama"
grep -q "wrote $tmp/l.h5" "$tmp/out" || fail "gen llama: no summary"
"$gmsim" info "$tmp/l.h5" | grep -q "synthetic:llama" || fail "gen llama: source"
"$gmsim" gen resnet50 --batch 2 --resolution 64 --iterations 1 -o "$tmp/r.h5" >/dev/null ||
    fail "gen resnet50"
expect_fail 2 "gen gpt --kv-heads" -- "$gmsim" gen gpt --kv-heads 2 -o "$tmp/x.h5"
grep -q "does not apply to gpt" "$tmp/err" || fail "gen gpt --kv-heads: message"
expect_fail 2 "gen llama --zero without --world" -- "$gmsim" gen llama --zero 2 -o "$tmp/x.h5"
grep -q "world" "$tmp/err" || fail "gen --zero: message does not name --world"
expect_fail 2 "gen gpt --model gpt5" -- "$gmsim" gen gpt --model gpt5 -o "$tmp/x.h5"
grep -q "gpt2-medium" "$tmp/err" || fail "gen --model: message does not list the models"
expect_fail 2 "gen resnet50 --optimizer lamb" -- "$gmsim" gen resnet50 --optimizer lamb \
    -o "$tmp/x.h5"

# --- scale by batch: the line through two recordings is exact ---
for b in 2 4 6; do
    "$gmsim" gen gpt $small --seq 32 --batch $b -o "$tmp/b$b.h5" >/dev/null || fail "gen b$b"
done
"$gmsim" scale "$tmp/b2.h5=2" "$tmp/b4.h5=4" --to 6 -o "$tmp/s6.h5" >"$tmp/out" ||
    fail "scale to 6"
grep -q "linear" "$tmp/out" || fail "scale: no fit summary"
same_trace "$tmp/b6.h5" "$tmp/s6.h5" "scale by batch"
"$gmsim" info "$tmp/s6.h5" | grep -q "^source: *scaled" || fail "scale: source"

# --- scale by seq with eager attention: the parabola through three ---
for s in 16 32 48 40; do
    "$gmsim" gen gpt $small --attention eager --batch 2 --seq $s -o "$tmp/q$s.h5" >/dev/null ||
        fail "gen seq $s"
done
"$gmsim" scale "$tmp/q16.h5=16" "$tmp/q32.h5=32" "$tmp/q48.h5=48" --to 40 -o "$tmp/sq.h5" \
    >"$tmp/out" || fail "scale seq"
grep -Eq "[1-9][0-9]* quadratic" "$tmp/out" || fail "scale seq: no quadratic sizes"
same_trace "$tmp/q40.h5" "$tmp/sq.h5" "scale by seq"

# --- snapshots are read in memory ---
pk="$src/tests/data/gpt-medium-ctx128-train.pickle"
"$gmsim" scale "$pk=4" "$pk=8" --to 6 -o "$tmp/pk.h5" >"$tmp/out" || fail "scale a snapshot"
"$gmsim" import "$pk" -o "$tmp/imp.h5" >/dev/null || fail "import"
[ "$(field "$tmp/pk.h5" peak_live_bytes)" = "$(field "$tmp/imp.h5" peak_live_bytes)" ] ||
    fail "a snapshot scaled to itself: peak live differs from the import's"

# --- alignment refusals ---
"$gmsim" gen gpt --layers 3 --d-model 64 --heads 4 --vocab 256 --ctx 64 --iterations 2 \
    --seq 32 --batch 4 -o "$tmp/l3.h5" >/dev/null
expect_fail 1 "scale of different models" -- "$gmsim" scale "$tmp/b2.h5=2" "$tmp/l3.h5=4" \
    --to 6 -o "$tmp/x.h5"
grep -q "do not align" "$tmp/err" || fail "different models: message"
"$gmsim" gen gpt $small --seq 32 --batch 4 --stream 3 -o "$tmp/st.h5" >/dev/null
expect_fail 1 "scale across streams" -- "$gmsim" scale "$tmp/b2.h5=2" "$tmp/st.h5=4" --to 6 \
    -o "$tmp/x.h5"
grep -q "stream 0 against stream 3" "$tmp/err" || fail "streams: message"
expect_fail 2 "scale without --to" -- "$gmsim" scale "$tmp/b2.h5=2" "$tmp/b4.h5=4" -o "$tmp/x.h5"
expect_fail 2 "scale of one recording" -- "$gmsim" scale "$tmp/b2.h5=2" --to 6 -o "$tmp/x.h5"
expect_fail 2 "scale without a value" -- "$gmsim" scale "$tmp/b2.h5" "$tmp/b4.h5=4" --to 6 \
    -o "$tmp/x.h5"
expect_fail 1 "scale of a missing file" -- "$gmsim" scale "$tmp/b2.h5=2" "$tmp/no.h5=4" \
    --to 6 -o "$tmp/x.h5"
[ -e "$tmp/x.h5" ] && fail "a failed scale left $tmp/x.h5"

# --- fit --largest: the answer fits, the next value does not ---
"$gmsim" fit --largest batch "$tmp/b2.h5=2" "$tmp/b4.h5=4" --capacity 1GiB --overhead 768MiB \
    --json "$tmp/fl.json" >"$tmp/out" || fail "fit --largest"
n=$(sed -n 's/^largest batch that fits: \([0-9]*\) (peak reserved .* of .* usable.*/\1/p' \
    "$tmp/out")
if [ -z "$n" ]; then
    fail "fit --largest: no answer in: $(cat "$tmp/out")"
else
    grep -q '"schema": "gmsim-fit-largest/1"' "$tmp/fl.json" || fail "fit --largest --json"
    for b in $n $((n + 1)); do
        "$gmsim" gen gpt $small --seq 32 --batch $b -o "$tmp/g.h5" >/dev/null
        "$gmsim" run --capacity 1GiB --overhead 768MiB "$tmp/g.h5" >"$tmp/run" 2>&1
        ooms=$(sed -n 's/^  OOMs *\([0-9]*\)$/\1/p' "$tmp/run")
        if [ "$b" = "$n" ]; then
            [ "$ooms" = "0" ] || fail "fit --largest said $n fits; the generated trace OOMs"
        else
            [ "${ooms:-0}" != "0" ] || fail "fit --largest said $b does not fit; it does"
        fi
    done
fi
expect_fail 2 "fit --largest with one recording" -- "$gmsim" fit --largest batch \
    "$tmp/b2.h5=2" --capacity 1GiB

if [ "$fails" -ne 0 ]; then
    echo "scale_fit.sh: $fails check(s) failed" >&2
    exit 1
fi
echo "scale_fit.sh: all checks passed"
