#!/usr/bin/env bash
# replay_fake.sh GMREPLAY GMSIM FAKE_DIR SOURCE_DIR - gmreplay and gmsim
# validate end to end, with the stand-in libcuda.so.1 of FAKE_DIR (a 16 GiB
# card whose driver books memory like the model): calibration and
# --device-profile, prediction vs measurement at the full card and at a
# capacity that OOMs (ballast), expandable segments, two tenants, --pace,
# --winner from a real `gmsim compare --json`, a driver stricter than the model
# (validate must fail), a signal and a driver error mid-run (everything freed,
# the partial result marked), no device, and replay/device-check.sh itself on
# a bundle. Needs jq for the JSON checks (skipped without it).
set -u
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
gmreplay=$(abs "$1")
gmsim=$(abs "$2")
fake=$(cd "$3" && pwd)
src=$(cd "$4" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GMREPLAY_LIBCUDA=$fake/libcuda.so.1
export GM_FAKE_CUDA_REPORT=$tmp/driver.report
unset GM_FAKE_CUDA_EXTRA GM_FAKE_CUDA_SIGNAL_AT GM_FAKE_CUDA_ERROR_AT GM_FAKE_CUDA_NO_DEVICE
trace=$src/traces/bert.h5
fails=0
fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}
have_jq=0
command -v jq >/dev/null && have_jq=1
# jqcheck FILE EXPR DESCRIPTION: EXPR is true of FILE
jqcheck() {
    [ "$have_jq" = 1 ] || return 0
    [ "$(jq -r "$2" "$1" 2>&1)" = true ] || fail "$3 ($2 on $(basename "$1"))"
}

# After every gmreplay the stand-in driver must hold nothing: every
# allocation, mapping, handle, reservation and the context given back.
driver_clean() {
    local what=$1
    [ -s "$tmp/driver.report" ] || { fail "$what: the driver wrote no report"; return; }
    grep -v '^allocs=0 alloc_bytes=0 handles=0 mappings=0 reservations=0 context_refs=0 used=0 ' \
        "$tmp/driver.report" >"$tmp/leaks" && fail "$what: driver memory left: $(cat "$tmp/leaks")"
    : >"$tmp/driver.report"
}

# predict_and_replay NAME [options] TRACE...: gmsim run and gmreplay, same settings
predict_and_replay() {
    local name=$1
    shift
    "$gmsim" run -q --device-profile "$tmp/profile.json" --json "$tmp/$name.pred.json" "$@" \
        >/dev/null 2>"$tmp/$name.err"
    local rc=$? # 3: an OOM is predicted
    [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || fail "$name: gmsim run exited $rc ($(cat "$tmp/$name.err"))"
    "$gmreplay" -q --device-profile "$tmp/profile.json" "$@" -o "$tmp/$name.meas.json" \
        2>"$tmp/$name.err" || fail "$name: gmreplay exited $? ($(cat "$tmp/$name.err"))"
    driver_clean "$name"
}

# validate NAME WANT_EXIT
validate() {
    "$gmsim" validate "$tmp/$1.pred.json" "$tmp/$1.meas.json" --json "$tmp/$1.val.json" \
        --html "$tmp/$1.val.html" >"$tmp/$1.val.txt" 2>&1
    local rc=$?
    [ "$rc" -eq "$2" ] || fail "$1: validate exited $rc, expected $2: $(cat "$tmp/$1.val.txt")"
}

# --- calibration ---
"$gmreplay" --calibrate -o "$tmp/profile.json" >"$tmp/cal.out" 2>&1 ||
    fail "calibrate exited $? ($(cat "$tmp/cal.out"))"
driver_clean calibrate
grep -q "cuMemAlloc" "$tmp/cal.out" || fail "calibrate printed no measurements"
jqcheck "$tmp/profile.json" '.schema == "gmsim-device-profile/1"' "profile schema"
jqcheck "$tmp/profile.json" '.device.total_bytes == 17179869184' "profile total"
jqcheck "$tmp/profile.json" '.context_overhead_bytes == 314572800' "profile context overhead"
jqcheck "$tmp/profile.json" '(.samples | length) >= 8 and (.fit.malloc.points >= 8)' "profile samples"
jqcheck "$tmp/profile.json" '.vmm.supported' "profile vmm"

# --- the full card: no ballast, no OOM, every check passes ---
predict_and_replay full --capacity 16GiB "$trace"
validate full 0
grep -q "^validate: PASS (4 of 4 checks)" "$tmp/full.val.txt" || fail "full: no PASS line"
jqcheck "$tmp/full.meas.json" '.backend == "cuda" and .command == "replay"' "full: backend"
jqcheck "$tmp/full.meas.json" '.measured.capacity.ballast_bytes == 0' "full: no ballast"
jqcheck "$tmp/full.meas.json" '.measured.freed_all and .measured.leaked_bytes == 0' "full: freed"
jqcheck "$tmp/full.meas.json" '.measured.latency.malloc.calls == .device.driver.malloc_calls' \
    "full: one latency sample per cuMemAlloc"
jqcheck "$tmp/full.meas.json" \
    '.measured.device_used.peak_bytes == .device.peak_device_used_bytes' \
    "full: cuMemGetInfo agrees with the accounting"
jqcheck "$tmp/full.meas.json" '.inputs.overhead_bytes == 314572800' "full: overhead from profile"
jqcheck "$tmp/full.val.json" '.pass and .checks == 4' "full: validate json"
grep -q "<table>" "$tmp/full.val.html" || fail "full: no HTML table"
grep -q "PASS" "$tmp/full.val.html" || fail "full: HTML has no verdict"

# --- a 4 GiB card: ballast, the baseline OOMs at the same event ---
predict_and_replay small --capacity 4GiB "$trace"
validate small 0
jqcheck "$tmp/small.pred.json" '.device.oom_count >= 1' "small: the prediction OOMs"
jqcheck "$tmp/small.meas.json" '.device.ooms[0].event_index == 11340' "small: OOM event"
jqcheck "$tmp/small.meas.json" '.measured.capacity.ballast_bytes == 12884901888' "small: ballast"
jqcheck "$tmp/small.meas.json" \
    '.measured.capacity.free_after_ballast_bytes == .measured.capacity.target_free_bytes' \
    "small: free after the ballast"
jqcheck "$tmp/small.meas.json" '.measured.oom.cap_refusals_driver_had_room == 0' "small: room"

# --- expandable segments (VMM), and two tenants ---
predict_and_replay expandable --capacity 4GiB --alloc-conf expandable_segments:True "$trace"
validate expandable 0
jqcheck "$tmp/expandable.meas.json" '.measured.latency.map.calls > 0' "expandable: no cuMemMap"
predict_and_replay tenants --capacity 10GiB "$trace" --offset 100ms "$trace"
validate tenants 0
jqcheck "$tmp/tenants.meas.json" '(.tenants | length) == 2' "tenants: two"
jqcheck "$tmp/tenants.meas.json" \
    '.measured.capacity.target_free_bytes == 10737418240 - 2 * 314572800' "tenants: target"

# --- a driver stricter than the model: validate says so ---
GM_FAKE_CUDA_EXTRA=1048576 predict_and_replay strict --capacity 4GiB "$trace"
validate strict 1
grep -Eq "OOM events .*FAIL" "$tmp/strict.val.txt" || fail "strict: OOM events did not fail"
grep -q "^validate: FAIL" "$tmp/strict.val.txt" || fail "strict: no FAIL line"
jqcheck "$tmp/strict.meas.json" '.measured.oom.driver_oom_returns > 0' "strict: driver OOMs"

# --- --pace: driver calls at their trace times ---
"$gmreplay" -q --pace --capacity 16GiB "$trace" -o "$tmp/paced.json" ||
    fail "--pace exited $?"
driver_clean pace
jqcheck "$tmp/paced.json" '.measured.paced and (.measured.pace_diverged | not)' "paced"
jqcheck "$tmp/paced.json" \
    '.measured.wall_s * 1e9 >= ([.measured.device_used.timeline.points[][0]] | max) - 1e6' \
    "paced: wall time covers the last driver call"

# --- --winner from gmsim compare ---
"$gmsim" compare -q --policies pytorch,lru --device-profile "$tmp/profile.json" \
    --capacity 4GiB --json "$tmp/cmp.json" "$trace" >/dev/null 2>"$tmp/cmp.err"
cmp_rc=$? # 3: even the winner OOMs on 4 GiB; its JSON is written all the same
if [ "$cmp_rc" -eq 0 ] || [ "$cmp_rc" -eq 3 ]; then
    (cd "$tmp" && "$gmreplay" -q --winner cmp.json -o winner.json 2>winner.err) ||
        fail "--winner exited $? ($(cat "$tmp/winner.err"))"
    driver_clean winner
    if [ "$have_jq" = 1 ]; then
        w=$(jq -r .winner "$tmp/cmp.json")
        jq --arg w "$w" '.results[] | select(.inputs.policy == $w)' "$tmp/cmp.json" \
            >"$tmp/winner.pred.json"
        cp "$tmp/winner.json" "$tmp/winner.meas.json"
        validate winner 0
        jqcheck "$tmp/winner.meas.json" ".inputs.policy == \"$w\"" "winner: policy"
        jqcheck "$tmp/winner.meas.json" '.inputs.capacity_bytes == 4294967296' "winner: capacity"
    fi
else
    echo "replay_fake.sh: gmsim compare failed or is missing; --winner not checked: $(cat "$tmp/cmp.err")"
fi
echo '{"schema": "gmsim-result/1"}' >"$tmp/notcmp.json"
"$gmreplay" --winner "$tmp/notcmp.json" -o "$tmp/x.json" 2>"$tmp/err" && fail "--winner of a run result"
grep -q "not a 'gmsim compare --json' result" "$tmp/err" || fail "--winner message: $(cat "$tmp/err")"

# --- a signal mid-run: everything freed, marked, exit 128+15 ---
GM_FAKE_CUDA_SIGNAL_AT=20 "$gmreplay" --capacity 4GiB "$trace" -o "$tmp/sig.json" \
    >/dev/null 2>"$tmp/sig.err"
rc=$?
[ "$rc" -eq 143 ] || fail "signal: exit $rc, expected 143"
grep -q "interrupted by signal 15; every allocation was freed" "$tmp/sig.err" ||
    fail "signal: message: $(cat "$tmp/sig.err")"
driver_clean signal
jqcheck "$tmp/sig.json" '.measured.interrupted_by_signal == 15' "signal: marked"
cp "$tmp/small.pred.json" "$tmp/sig.pred.json"
cp "$tmp/sig.json" "$tmp/sig.meas.json"
validate sig 1

# ... and while the ballast is taken: nothing written, nothing left
GM_FAKE_CUDA_SIGNAL_AT=2 "$gmreplay" --capacity 4GiB "$trace" -o "$tmp/sig2.json" \
    >/dev/null 2>"$tmp/sig2.err"
rc=$?
[ "$rc" -eq 143 ] || fail "signal in the ballast: exit $rc, expected 143"
grep -q "interrupted by signal 15 (interrupted while holding the ballast)" "$tmp/sig2.err" ||
    fail "signal in the ballast: message: $(cat "$tmp/sig2.err")"
[ -e "$tmp/sig2.json" ] && fail "signal in the ballast: a result was written"
driver_clean "signal in the ballast"

# --- a driver error mid-run: exit 1, the error in the result ---
GM_FAKE_CUDA_ERROR_AT=20 "$gmreplay" --capacity 4GiB "$trace" -o "$tmp/drverr.json" \
    >/dev/null 2>"$tmp/drverr.err"
rc=$?
[ "$rc" -eq 1 ] || fail "driver error: exit $rc, expected 1"
grep -q "CUDA_ERROR_ILLEGAL_ADDRESS" "$tmp/drverr.err" || fail "driver error: $(cat "$tmp/drverr.err")"
driver_clean "driver error"
jqcheck "$tmp/drverr.json" '.measured.error | test("ILLEGAL_ADDRESS")' "driver error: recorded"

# --- impossible requests ---
"$gmreplay" --capacity 32GiB "$trace" -o "$tmp/x.json" 2>"$tmp/err" && fail "32 GiB on 16"
grep -q "more than this GPU has" "$tmp/err" || fail "bigger card: $(cat "$tmp/err")"
driver_clean "bigger card"
GM_FAKE_CUDA_NO_DEVICE=1 "$gmreplay" "$trace" -o "$tmp/x.json" 2>"$tmp/err" && fail "no device"
grep -q "^gmreplay: no GPU" "$tmp/err" || fail "no device: $(cat "$tmp/err")"
[ -e "$tmp/x.json" ] && fail "a failed replay wrote a result"

# --- replay/device-check.sh itself, on a bundle ---
bash "$src/replay/bundle.sh" "$tmp/bundle" "$gmsim" "$gmreplay" >/dev/null ||
    fail "bundle.sh exited $?"
(cd "$src" && OUT=$tmp/dc LD_LIBRARY_PATH=$fake bash replay/device-check.sh "$tmp/bundle" \
    >"$tmp/dc.out" 2>&1) || fail "device-check.sh exited $? ($(tail -20 "$tmp/dc.out"))"
grep -q "device-check: every case passed" "$tmp/dc.out" || fail "device-check: no verdict"
for c in bert-full bert-oom bert-oom-expandable; do
    grep -Eq "^$c +[0-9.]+ GiB .*PASS" "$tmp/dc/summary.txt" || fail "device-check: no $c row"
done
if "$gmsim" import --help >/dev/null 2>&1; then # an imported snapshot, at the full card
    grep -Eq "^snapshot-full +[0-9.]+ GiB .*PASS" "$tmp/dc/summary.txt" ||
        fail "device-check: no snapshot-full row"
fi
[ -s "$tmp/dc/profile.json" ] || fail "device-check: no profile"
driver_clean device-check

if [ "$fails" -ne 0 ]; then
    echo "replay_fake.sh: $fails check(s) failed" >&2
    exit 1
fi
echo "replay_fake.sh: all checks passed"
