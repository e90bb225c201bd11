#!/usr/bin/env bash
# tune.sh GMSIM SOURCE_DIR - `gmsim tune` from the outside: the ranking
# agrees with single `gmsim run`s of the same settings, the defaults' OOM is
# named, the line to paste is printed, the exit status says whether any
# setting fits (0) or none (3), settings an old PyTorch refuses are listed
# and not run, and the thread count changes nothing.
set -u
gmsim=$1
src=${2:-.}
bert=$src/traces/bert.h5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

# run WANT DESCRIPTION -- command...: exit code WANT; output in $tmp/out, $tmp/err
run() {
    local want=$1 what=$2
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: exit $rc, expected $want ($(head -c 400 "$tmp/err"))"
}

expect_line() {
    grep -Eq -- "$1" "$2" || fail "no line matching '$1' in $(basename "$2"): $(head -c 600 "$2")"
}

# jq-free JSON checks: python3 is on every machine this runs on (scripts/setup.sh)
py() { python3 -c "$@"; }

# --- bert at 5 GiB: the defaults OOM, expandable segments do not ---
run 0 "tune bert 5GiB" -- "$gmsim" tune --threads 2 --capacity 5GiB --json "$tmp/t.json" "$bert"
cp "$tmp/out" "$tmp/table.txt"
expect_line "^grid: 120 settings \(2 expandable_segments x 5 max_split_size_mb x 3 garbage_collection_threshold x 4 roundup_power2_divisions\)" "$tmp/table.txt"
expect_line "^ rank  OOMs  peak reserved" "$tmp/table.txt"
expect_line "\(PyTorch's defaults\)$" "$tmp/table.txt"
expect_line "^export PYTORCH_CUDA_ALLOC_CONF=[a-z]" "$tmp/table.txt"
expect_line "^  against the defaults: .* less reserved .*, and the OOM at event [0-9]+ \(.* requested\) is gone" "$tmp/table.txt"
expect_line "^  smallest card without OOM \(gmsim fit, policy pytorch\): [0-9.]+ [GM]iB with it, [0-9.]+ [GM]iB with the defaults$" "$tmp/table.txt"

# the ranking: no OOM first, then peak reserved, in order
py "
import json, sys
d = json.load(open('$tmp/t.json'))
r = [s for s in d['settings'] if 'rank' in s]
assert len(r) == 120, len(r)
keys = [(s['oom_count'], s['peak_reserved_bytes']) for s in r]
assert keys == sorted(keys), 'not ranked by OOMs then peak reserved'
assert r[0]['oom_count'] == 0 and d['best_runs_without_oom']
dflt = [s for s in r if s['default']][0]
assert dflt['oom_count'] >= 1, dflt
assert d['paste'] == 'export PYTORCH_CUDA_ALLOC_CONF=' + d['best']
assert d['fit']['best_bytes'] <= d['fit']['default_bytes']
" || fail "bert ranking JSON"

# each of the best three and the defaults, run alone, gives the same figures
py "
import json
d = json.load(open('$tmp/t.json'))
r = [s for s in d['settings'] if 'rank' in s]
pick = r[:3] + [s for s in r if s['default']]
with open('$tmp/picks', 'w') as f:
    for s in pick:
        frac = s['memory_fraction']
        f.write('%s|%s|%d|%d\n' % (s['alloc_conf'], repr(frac) if frac > 0 else '',
                                    s['oom_count'], s['peak_reserved_bytes']))
"
while IFS='|' read -r conf frac ooms reserved; do
    extra=()
    [ -n "$frac" ] && extra=(--memory-fraction "$frac")
    want=0
    [ "$ooms" -gt 0 ] && want=3 # gmsim run exits 3 when it predicts an OOM
    run "$want" "run '$conf'" -- "$gmsim" run --capacity 5GiB --alloc-conf "$conf" "${extra[@]}" \
        --json "$tmp/one.json" "$bert"
    got=$(py "
import json
d = json.load(open('$tmp/one.json'))['device']
print(d['oom_count'], d['peak_reserved_bytes'])")
    [ "$got" = "$ooms $reserved" ] || fail "'$conf': tune says $ooms $reserved, run says $got"
done <"$tmp/picks"

# --- the thread count changes nothing ---
run 0 "tune 1 thread" -- "$gmsim" tune --threads 1 --no-fit --capacity 5GiB --json "$tmp/t1.json" "$bert"
py "
import json
a, b = json.load(open('$tmp/t.json')), json.load(open('$tmp/t1.json'))
assert a['settings'] == b['settings'], 'threads changed the ranking'
" || fail "threads change the result"

# --- the two fits (best settings, defaults; side by side on the threads)
# are what `gmsim fit` of each gives, on one thread as on two ---
run 0 "tune 1 thread, fits" -- "$gmsim" tune --threads 1 --capacity 5GiB --json "$tmp/t1f.json" "$bert"
best=$(py "
import json
d = json.load(open('$tmp/t.json'))
s = [s for s in d['settings'] if s.get('rank') == 1][0]
print(s['alloc_conf'] + '|' + (repr(s['memory_fraction']) if s['memory_fraction'] > 0 else ''))")
for pick in "$best" "|"; do
    conf=${pick%|*} frac=${pick#*|}
    extra=()
    [ -n "$frac" ] && extra=(--memory-fraction "$frac")
    name=${conf:-defaults}
    run 0 "fit '$name'" -- "$gmsim" fit --policies pytorch --capacity 5GiB --alloc-conf "$conf" \
        "${extra[@]}" --json "$tmp/fit.json" "$bert"
    py "
import json
a, b = json.load(open('$tmp/t.json')), json.load(open('$tmp/t1f.json'))
f = json.load(open('$tmp/fit.json'))['results'][0]
key = 'best_bytes' if '$pick' != '|' else 'default_bytes'
assert a['fit'] == b['fit'], ('threads changed the fits', a['fit'], b['fit'])
assert a['fit'][key] == f['capacity_bytes'], (key, a['fit'][key], f['capacity_bytes'])
assert key == 'best_bytes' or a['fit']['max_capacity_bytes'] == f['max_capacity_tried_bytes']
" || fail "tune's fit of '$name' is not gmsim fit's"
done

# --- nothing fits: exit 3, -q says so in one line ---

run 3 "tune bert 2GiB" -- "$gmsim" tune -q --no-fit --capacity 2GiB "$bert"
expect_line "^OOM: " "$tmp/out"
[ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "-q printed more than one line"
run 3 "tune bert 2GiB, table" -- "$gmsim" tune --no-fit --capacity 2GiB "$bert"
expect_line "^no setting runs without OOM on 2.00 GiB; the fewest OOMs: " "$tmp/out"
run 0 "tune -q fits" -- "$gmsim" tune -q --no-fit --capacity 8GiB "$bert"
expect_line "^fits: " "$tmp/out"

# --- PyTorch 2.0 has no expandable segments: refused, not run ---
run 0 "tune as 2.0" -- "$gmsim" tune --no-fit --torch-version 2.0 --capacity 8GiB \
    --json "$tmp/t20.json" "$bert"
expect_line "60 of them refused by this PyTorch" "$tmp/out"
py "
import json
d = json.load(open('$tmp/t20.json'))
ref = [s for s in d['settings'] if 'refused' in s]
assert len(ref) == 60 and all('expandable_segments' in s['alloc_conf'] for s in ref)
assert 'Unrecognized CachingAllocator option: expandable_segments' in ref[0]['refused']
" || fail "2.0 refusals"

# --- usage ---
run 2 "tune --alloc-conf" -- "$gmsim" tune --alloc-conf expandable_segments:True "$bert"
expect_line "tune searches the settings itself" "$tmp/err"
run 2 "tune without a trace" -- "$gmsim" tune --capacity 5GiB

[ "$fails" -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "tune: all checks passed"
