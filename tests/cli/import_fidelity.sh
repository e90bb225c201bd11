#!/usr/bin/env bash
# import_fidelity.sh GMSIM SOURCE_DIR - `gmsim import` and `gmsim fidelity` from
# the outside: every snapshot in tests/data imports (pre-existing bytes as
# derived in Python, see tests/test_import.c), unsafe and damaged pickles are
# refused with exit 1, the recorded segment calls are reproduced exactly, and
# exit codes follow DESIGN.md §7 (0 ok, 1 error or mismatch, 2 usage).
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

# run WANT DESCRIPTION -- command...: exit code WANT; output in $tmp/out, $tmp/err
run() {
    local want=$1 what=$2
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: exit $rc, expected $want ($(head -c 400 "$tmp/err"))"
}

# expect_line PATTERN FILE: FILE has a line matching the extended regex PATTERN
expect_line() {
    grep -Eq -- "$1" "$2" || fail "no line matching '$1' in $(basename "$2"): $(head -c 600 "$2")"
}

# --- every snapshot imports; gmsim info shows what existed before the first entry ---
# file  events  "pre-existing bytes" fields (requested B, blocks, segments)
while read -r name events bytes blocks segs; do
    run 0 "import $name" -- "$gmsim" import "$data/$name.pickle" -o "$tmp/$name.h5"
    expect_line "^wrote .*$name\.h5: device 0: " "$tmp/out"
    run 0 "info $name" -- "$gmsim" info "$tmp/$name.h5"
    expect_line "^source: +torch-snapshot$" "$tmp/out"
    expect_line "^events: +$events " "$tmp/out"
    expect_line "^pre-existing bytes: .*\($bytes B in $blocks blocks; $segs segments" "$tmp/out"
done <<'EOF'
tiny-segments-only 0 20981596 73 3
small-with-segments 71 0 0 0
oom-state-torch20 0 11840159744 460 176
forward-bf16-ctx128 1874 523811840 137 43
gpt-medium-ctx512-infer 3332 1701482496 223 101
gpt-medium-ctx128-train 12831 5095321600 664 377
finetune-no-timestamps 6982 1095725248 622 63
EOF
run 0 "import tiny" -- "$gmsim" import "$data/tiny-segments-only.pickle" -o "$tmp/t.h5"
expect_line "no trace of allocations .*initial state only, 3 segments .* 73 live blocks" "$tmp/out"
expect_line "^\(PyTorch memory snapshot, current layout\)$" "$tmp/out"
run 0 "import quiet" -- "$gmsim" import -q "$data/small-with-segments.pickle" -o "$tmp/q.h5"
[ -s "$tmp/out" ] && fail "import -q printed something"
[ -z "$(ls "$tmp" | grep '\.tmp\.')" ] || fail "import left a temporary file behind"

# --- the replay needs a device size, which snapshots do not record ---
run 1 "run without --capacity" -- "$gmsim" run "$tmp/gpt-medium-ctx128-train.h5"
expect_line "--capacity" "$tmp/err"
run 0 "run with --capacity" -- "$gmsim" run --capacity 80GiB "$tmp/gpt-medium-ctx128-train.h5"
expect_line "alive before the first event" "$tmp/out"

# --- a pickle that would run code is refused, and nothing runs ---
printf '\x80\x02cposix\nsystem\nX%b%s\x85R.' "\\x$(printf %02x $((12 + ${#tmp})))\\x00\\x00\\x00" \
    "touch $tmp/pwned" >"$tmp/evil.pickle"
run 1 "evil pickle" -- "$gmsim" import "$tmp/evil.pickle" -o "$tmp/evil.h5"
expect_line "gmsim import: .*evil\.pickle: offset 2: .*GLOBAL" "$tmp/err"
[ -e "$tmp/pwned" ] && fail "the evil pickle ran code"
[ -e "$tmp/evil.h5" ] && fail "the evil pickle produced a trace"
run 1 "fidelity of an evil pickle" -- "$gmsim" fidelity "$tmp/evil.pickle"
expect_line "GLOBAL" "$tmp/err"

# --- damaged input ---
head -c 5000 "$data/small-with-segments.pickle" >"$tmp/cut.pickle"
run 1 "truncated pickle" -- "$gmsim" import "$tmp/cut.pickle" -o "$tmp/cut.h5"
expect_line "gmsim import: .*cut\.pickle" "$tmp/err"
echo "not a pickle" >"$tmp/text.pickle"
run 1 "text file" -- "$gmsim" import "$tmp/text.pickle" -o "$tmp/text.h5"
run 1 "missing file" -- "$gmsim" import "$tmp/none.pickle" -o "$tmp/none.h5"

# --- usage errors: exit 2 ---
run 2 "no -o" -- "$gmsim" import "$data/tiny-segments-only.pickle"
run 2 "no input" -- "$gmsim" import -o "$tmp/x.h5"
run 2 "bad --format" -- "$gmsim" import --format xml "$data/tiny-segments-only.pickle" -o x.h5
run 2 "bad --device" -- "$gmsim" import --device x "$data/tiny-segments-only.pickle" -o x.h5
run 2 "unknown option" -- "$gmsim" import --bogus "$data/tiny-segments-only.pickle" -o x.h5
run 0 "import --help" -- "$gmsim" import --help
expect_line "^usage: gmsim import" "$tmp/out"
run 2 "fidelity without input" -- "$gmsim" fidelity
run 2 "fidelity bad capacity" -- "$gmsim" fidelity --capacity lots "$data/tiny-segments-only.pickle"
run 0 "fidelity --help" -- "$gmsim" fidelity --help
expect_line "^usage: gmsim fidelity" "$tmp/out"

# --- several devices: one trace each, or --device N (a protocol-0 pickle) ---
seg() { # seg DEVICE ADDRESS: a small segment holding one inactive block
    printf '(dVdevice\nI%s\nsVaddress\nI%s\nsVtotal_size\nI2097152\nsVblocks\n(l(dVsize\nI2097152\nsVstate\nVinactive\nsasa' "$1" "$2"
}
{
    printf '(dVsegments\n(l'
    seg 0 268435456
    seg 1 536870912
    printf 'sVdevice_traces\n(l(la(las.'
} >"$tmp/two.pickle"
run 0 "two devices" -- "$gmsim" import "$tmp/two.pickle" -o "$tmp/two.h5"
[ -s "$tmp/two-dev0.h5" ] && [ -s "$tmp/two-dev1.h5" ] || fail "two devices: no two-dev{0,1}.h5"
expect_line "several devices, one trace each" "$tmp/out"
run 0 "--device 1" -- "$gmsim" import --device 1 "$tmp/two.pickle" -o "$tmp/one.h5"
expect_line "^wrote .*one\.h5: device 1: " "$tmp/out"
run 1 "--device 7" -- "$gmsim" import --device 7 "$tmp/two.pickle" -o "$tmp/seven.h5"
expect_line "device\(s\) 0, 1" "$tmp/err"

# --- RMM logs ---
run 0 "rmm import" -- "$gmsim" import "$data/rmm-log-sample.csv" -o "$tmp/rmm.h5"
expect_line "^wrote .*rmm\.h5: 7 events \(4 alloc, 3 free\)" "$tmp/out"
run 0 "rmm info" -- "$gmsim" info "$tmp/rmm.h5"
expect_line "^source: +rmm-log$" "$tmp/out"
run 0 "rmm --format" -- "$gmsim" import --format rmm "$data/rmm-log-sample.csv" -o "$tmp/r2.h5"
run 2 "rmm --device" -- "$gmsim" import --device 0 --format rmm "$data/rmm-log-sample.csv" -o x
run 1 "rmm as torch" -- "$gmsim" import --format torch "$data/rmm-log-sample.csv" -o "$tmp/r3.h5"

# --- fidelity: PyTorch's own driver calls, reproduced ---
run 0 "fidelity small" -- "$gmsim" fidelity "$data/small-with-segments.pickle"
expect_line "PyTorch 9, model 9: 9 matched, 0 missing, 0 extra" "$tmp/out"
expect_line "max abs error 0 B" "$tmp/out"
expect_line "EXACT MATCH" "$tmp/out"
run 0 "fidelity finetune" -- "$gmsim" fidelity --json "$tmp/fid.json" \
    "$data/finetune-no-timestamps.pickle"
expect_line "PyTorch 152, model 152: 152 matched, 0 missing, 0 extra" "$tmp/out"
expect_line '"exact": true' "$tmp/fid.json"
expect_line '"at_pytorch_address": 3505' "$tmp/fid.json"
expect_line '"elsewhere": 0' "$tmp/fid.json"
run 0 "fidelity warm cache" -- "$gmsim" fidelity "$data/gpt-medium-ctx128-train.pickle"
expect_line "initial state: +377 segments" "$tmp/out"
expect_line "PyTorch 0, model 0: 0 matched, 0 missing, 0 extra" "$tmp/out"
# --- block placement: every tensor lands where PyTorch put it ---
while read -r name allocs; do
    run 0 "placement $name" -- "$gmsim" fidelity "$data/$name.pickle"
    expect_line "^  block placement: $allocs of $allocs allocations at PyTorch's address$" "$tmp/out"
    grep -q "first misplaced" "$tmp/out" && fail "placement $name: an allocation misplaced"
done <<'EOF'
small-with-segments 36
finetune-no-timestamps 3505
gpt-medium-ctx128-train 6526
gpt-medium-ctx512-infer 1666
forward-bf16-ctx128 937
EOF
run 0 "placement, fresh addresses" -- "$gmsim" fidelity --fresh-addresses \
    "$data/small-with-segments.pickle"
grep -q "block placement" "$tmp/out" && fail "fresh addresses: placement reported"
run 0 "fidelity of an imported trace" -- "$gmsim" fidelity "$tmp/small-with-segments.h5"
expect_line "9 matched" "$tmp/out"
run 0 "fidelity, no trace" -- "$gmsim" fidelity "$data/tiny-segments-only.pickle"
expect_line "nothing to compare" "$tmp/out"
run 1 "fidelity, other settings" -- "$gmsim" fidelity --alloc-conf roundup_power2_divisions:4 \
    --json "$tmp/bad.json" "$data/finetune-no-timestamps.pickle"
expect_line "first divergence at event [0-9]+ \(alloc of " "$tmp/out"
expect_line "MISMATCH" "$tmp/out"
expect_line '"exact": false' "$tmp/bad.json"
expect_line "^  first misplaced at event [0-9]+ \(alloc of .*\): model at 0x[0-9a-f]+ \(segment 0x[0-9a-f]+ \+ [0-9]+\); PyTorch at 0x" "$tmp/out"

# --- every shared snapshot with something to replay, and every hand-made case
# (tests/data/gen_snapshot_cases.py), is EXACT: segment calls, OOMs, addresses ---
for f in "$data"/*.pickle "$data"/*.pkl "$data"/cases/*.pickle; do
    name=$(basename "$f")
    want=0
    [ "$name" = two-devices-one-bad.pickle ] && want=1
    run "$want" "fidelity $name" -- "$gmsim" fidelity "$f"
    grep -q "MISMATCH" "$tmp/out" && fail "fidelity $name: $(grep -A3 'first divergence' "$tmp/out")"
done
# what each release burst was, and the device window it implies
run 0 "empty_cache bursts" -- "$gmsim" fidelity "$data/empty-cache-bursts.pickle"
expect_line "^  empty_cache: +28 calls replayed$" "$tmp/out"
expect_line "PyTorch 840, model 840: 840 matched, 0 missing, 0 extra" "$tmp/out"
run 0 "device full, retried" -- "$gmsim" fidelity "$data/device-full-retry-10-streams.pickle"
expect_line "^  device window: +the process had at least 20.97 GiB and less than 21.01 GiB$" \
    "$tmp/out"
expect_line "PyTorch 1163, model 1163: 1163 matched" "$tmp/out"
run 1 "device full, on a device without limit" -- "$gmsim" fidelity --capacity 1TiB \
    "$data/device-full-retry-10-streams.pickle"
expect_line "^  likely cause: +device full: PyTorch released its cache and retried" "$tmp/out"
expect_line ", and [0-9]+ more$" "$tmp/out" # a long list of calls ends cleanly
run 0 "expandable, 3 devices" -- "$gmsim" fidelity "$data/expandable-mapped-3gpu-oom.pickle"
[ "$(grep -c 'EXACT MATCH' "$tmp/out")" -eq 3 ] || fail "3gpu: not 3 devices EXACT"
expect_line "^  OOMs: +PyTorch 1, model 1 " "$tmp/out"
run 0 "expandable, pre-mapped" -- "$gmsim" fidelity "$data/expandable-segments-fwd.pickle"
expect_line "2 segments \(12.81 GiB\) rebuilt, 2 of them expandable" "$tmp/out"
expect_line "^  block placement: 1704 of 1704 " "$tmp/out"
run 1 "one bad device" -- "$gmsim" fidelity "$data/cases/two-devices-one-bad.pickle"
expect_line "device 0: .*events replayed" "$tmp/out"
expect_line "device 1: not checked" "$tmp/out"
expect_line "device 1: the block at 0x7f6000000000" "$tmp/err"
run 1 "import, one bad device" -- "$gmsim" import "$data/cases/two-devices-one-bad.pickle" \
    -o "$tmp/bad.h5"
[ -s "$tmp/bad-dev0.h5" ] || fail "one bad device: device 0 not written"
[ -e "$tmp/bad-dev1.h5" ] && fail "one bad device: device 1 written"
run 0 "info shows the window" -- "$gmsim" import "$data/cases/device-full.pickle" -o "$tmp/df.h5"
run 0 "info df" -- "$gmsim" info "$tmp/df.h5"
expect_line "empty_cache|segment_free 1" "$tmp/out"
# what a file is, told from its first bytes, with the fix
printf 'a,b\n1,2\n' >"$tmp/other.csv"
run 1 "import a CSV that is not an RMM log" -- "$gmsim" import "$tmp/other.csv" -o "$tmp/o.h5"
expect_line "is a CSV file, but not an RMM log: RMM's log starts with the header Thread,Time,Action,Pointer,Size,Stream; if it is one, pass --format rmm" "$tmp/err"
run 1 "run a CSV" -- "$gmsim" run --capacity 1GiB "$tmp/other.csv"
expect_line "is a CSV file, but not an RMM log .*gmsim import --format rmm" "$tmp/err"
run 1 "import a trace" -- "$gmsim" import "$src/traces/bert.h5" -o "$tmp/o.h5"
expect_line "is an HDF5 file, which gmsim reads as a trace as it is" "$tmp/err"
printf 'hello' >"$tmp/x.bin"
run 1 "import junk" -- "$gmsim" import "$tmp/x.bin" -o "$tmp/o.h5"
expect_line "is neither a PyTorch memory snapshot .* nor an RMM log \(CSV\)" "$tmp/err"
run 0 "an RMM log without --format" -- "$gmsim" import "$data/rmm-log-sample.csv" -o "$tmp/rmm.h5"

# record_stream: the block is reused only after free_completed; both of
# PyTorch's counters are reported (allocated_bytes drops at free_requested)
run 0 "import record-stream" -- "$gmsim" import "$data/cases/record-stream.pickle" -o "$tmp/rs.h5"
expect_line "1 frees deferred past their free_requested" "$tmp/out"
run 0 "run record-stream" -- "$gmsim" run --capacity 1GiB --json "$tmp/rs.json" "$tmp/rs.h5"
expect_line "peak allocated 20.00 MiB counts their blocks until the free, as PyTorch's active_bytes does; PyTorch's allocated_bytes, which drops them at free_requested, peaked at 16.00 MiB" "$tmp/out"
expect_line '"peak_torch_allocated_bytes": 16777216' "$tmp/rs.json"
expect_line '"num_alloc_retries": 0' "$tmp/rs.json"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "import_fidelity: all checks passed"
