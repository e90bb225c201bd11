#!/usr/bin/env bash
# gmsim run from the command line: the table, JSON, OOM context, exit codes
# and messages for bad input. Usage: run_cli.sh GMSIM SOURCE_DIR
set -u
gmsim=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 total=0
check() { # check NAME EXPECTED_RC PATTERN -- CMD...
    local name=$1 want=$2 pat=$3
    shift 4
    total=$((total + 1))
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" != "$want" ]; then
        echo "FAIL $name: exit $rc, expected $want"; cat "$tmp/err"; fails=$((fails + 1)); return
    fi
    if [ -n "$pat" ] && ! grep -qE -- "$pat" "$tmp/out" "$tmp/err"; then
        echo "FAIL $name: output lacks /$pat/"; cat "$tmp/out" "$tmp/err"; fails=$((fails + 1)); return
    fi
    echo "ok   $name"
}
bert=$src/traces/bert.h5
check "summary table" 0 "fragmentation \(1 - peak A / peak R\)" -- "$gmsim" run --policy pytorch "$bert"
check "peak live line" 0 "live \(Q\)" -- "$gmsim" run "$bert"
check "json written" 0 "" -- "$gmsim" run -q "$bert" --json "$tmp/r.json"
total=$((total + 1))
if grep -q '"schema": "gmsim-result/1"' "$tmp/r.json" && grep -q '"trace_hash"' "$tmp/r.json"; then
    echo "ok   json content"
else
    echo "FAIL json content"; fails=$((fails + 1))
fi
check "small card OOMs with context (exit 3)" 3 "OOM tenant 0 event [0-9]+ .*requested; reserved" -- \
    "$gmsim" run --capacity 3GiB "$bert"
check "skip counts every OOM (exit 3)" 3 "OOMs +[0-9]{2,}" -- "$gmsim" run --capacity 3GiB --on-oom skip "$bert"
check "direct allocator" 0 "allocator direct" -- "$gmsim" run --allocator direct "$bert"
check "alloc conf" 0 "max_split_size_mb:128" -- "$gmsim" run --alloc-conf max_split_size_mb:128 "$bert"
check "two tenants" 0 "tenants that ran to completion +2 of 2" -- \
    "$gmsim" run "$bert" --offset 100ms --repeat 2 "$bert"
check "policy report: learned period" 0 "^    period_ns: [0-9.]+ (ms|s|us)   period_confidence: " -- \
    "$gmsim" run --policy predictive "$bert"
check "policy report: precision" 0 "precision: [0-9.]+ %   recall: [0-9.]+ %" -- \
    "$gmsim" run --policy predictive "$bert"
check "policy report: nested keys flattened" 0 "selective_released_bytes_by_category\.activation: " -- \
    "$gmsim" run --policy priority "$bert"
total=$((total + 1))
"$gmsim" run --policy predictive "$bert" >"$tmp/out" 2>&1
n=$(sed -n '/^  policy report/,/^$/p' "$tmp/out" | grep -c '^    ')
"$gmsim" run --policy pytorch "$bert" >"$tmp/out2" 2>&1
if [ "$n" -ge 1 ] && [ "$n" -le 13 ] && ! grep -q "policy report" "$tmp/out2"; then
    echo "ok   policy report: at most 12 lines (+ 'more'), none without a report"
else
    echo "FAIL policy report: $n lines, or a report for pytorch"; fails=$((fails + 1))
fi
check "scope device" 0 "scope device \(tenants release for others\) +[0-9.]+ [KMGT]?i?B released for others, [0-9]+ allocation" -- \
    "$gmsim" run --scope device --policy lru --capacity 10GiB "$bert" --offset 20ms "$bert"
check "scope device in the header" 0 "^allocator pytorch, policy lru, scope device" -- \
    "$gmsim" run --scope device --policy lru "$bert"
total=$((total + 1))
if "$gmsim" run "$bert" | grep -q "scope device"; then
    echo "FAIL scope self printed as device"; fails=$((fails + 1))
else
    echo "ok   scope self: no scope line"
fi
check "help" 0 "usage: gmsim run" -- "$gmsim" run --help
check "no trace" 2 "no trace given" -- "$gmsim" run
check "missing file" 1 "/nonexistent.h5" -- "$gmsim" run /nonexistent.h5
printf 'not hdf5' >"$tmp/bad.h5"
check "not a trace" 1 "bad.h5.*not an HDF5 file" -- "$gmsim" run "$tmp/bad.h5"
head -c 3000 "$bert" >"$tmp/trunc.h5"
check "truncated trace" 1 "trunc.h5" -- "$gmsim" run "$tmp/trunc.h5"
check "bad capacity" 2 "--capacity: 'lots' is not a size" -- "$gmsim" run --capacity lots "$bert"
check "bad on-oom" 2 "--on-oom takes" -- "$gmsim" run --on-oom maybe "$bert"
check "bad policy" 1 "unknown policy" -- "$gmsim" run --policy nosuch "$bert"
check "bad alloc conf" 1 "max_split_size_mb too small" -- "$gmsim" run --alloc-conf max_split_size_mb:5 "$bert"
check "unknown option" 2 "unknown option" -- "$gmsim" run --bogus "$bert"
check "unknown command" 2 "not a command" -- "$gmsim" frobnicate
echo "$((total - fails)) passed, $fails failed"
[ "$fails" = 0 ]
