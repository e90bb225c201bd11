#!/usr/bin/env bash
# whatif.sh GMSIM SOURCE_DIR - what-ifs on real snapshots from the command
# line: a snapshot is taken wherever a trace is, the initial-state modes, the
# device size (--gpu, the trace's window, none: a clear error), a live set
# that cannot fit, fit with no starting point, import --gpu / --device-total,
# and no temporary file left behind.
set -u
gmsim=$1 src=$2
data=$src/tests/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp/tmpdir
mkdir -p "$TMPDIR"
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
# reserved peak of the last run's table
peak_r() { awk '/live \(Q\) +allocated +reserved/ { getline; print $5 $6; exit }' "$tmp/out"; }
gpt=$data/gpt-medium-ctx128-train.pickle

check "a snapshot is a trace" 0 "^  \[0\] .*gpt-medium-ctx128-train\.pickle " -- \
    "$gmsim" run --capacity 24GiB "$gpt"
check "its size is not recorded" 1 "does not record the device's memory size; give one with --capacity .* or --gpu NAME" -- \
    "$gmsim" run "$gpt"
check "--gpu" 0 "on a 79.20 GiB device" -- "$gmsim" run --gpu h100-80gb "$gpt"
check "--gpu unknown" 2 "not a GPU gmsim knows; choose one of: a100-40gb" -- \
    "$gmsim" run --gpu h99 "$gpt"
check "the window is the device" 0 "^device size: the memory the recorded process had" -- \
    "$gmsim" run "$data/device-full-retry-10-streams.pickle"
grep -q "on a 20.97 GiB device (0 B context overhead" "$tmp/out" || {
    echo "FAIL window: not 20.97 GiB without context"; fails=$((fails + 1)); }

# --initial-state: recorded replays the recorded cache (6.74 GiB reserved, as
# PyTorch held it), live lets the model build its own, none leaves it out
check "recorded" 0 "--initial-state recorded" -- \
    "$gmsim" run --capacity 24GiB --initial-state recorded "$gpt"
rec=$(peak_r)
check "live (default)" 0 "allocated through the model \(--initial-state live" -- \
    "$gmsim" run --capacity 24GiB "$gpt"
live=$(peak_r)
check "live, expandable" 0 "" -- \
    "$gmsim" run --capacity 24GiB --alloc-conf expandable_segments:True "$gpt"
exp=$(peak_r)
check "none" 0 "left out \(--initial-state none\)" -- \
    "$gmsim" run --capacity 24GiB --initial-state none "$gpt"
total=$((total + 1))
if [ "$rec" = "6.74GiB" ] && [ "$live" != "$rec" ] && [ "$exp" != "$live" ]; then
    echo "ok   modes differ (recorded $rec, live $live, live+expandable $exp)"
else
    echo "FAIL modes: recorded $rec, live $live, expandable $exp"; fails=$((fails + 1))
fi
check "bad mode" 2 "--initial-state takes live, recorded or none" -- \
    "$gmsim" run --capacity 24GiB --initial-state warm "$gpt"

# a state at an OOM: 11.03 GiB live; on 8 GiB it cannot even be held
check "live set does not fit" 3 "the 11.03 GiB alive at the start of the trace do not fit in 7.50 GiB usable" -- \
    "$gmsim" run --capacity 8GiB "$data/oom-state-torch20.pickle"
check "live set fits" 0 "^ +11.03 GiB +11.03 GiB" -- \
    "$gmsim" run --capacity 16GiB "$data/oom-state-torch20.pickle"

# fit never asks for a starting point
check "fit from peak live" 0 "^smallest device: " -- "$gmsim" fit --policies pytorch "$gpt"

# import records the card
check "import --gpu" 0 "" -- "$gmsim" import --gpu a100-80gb "$gpt" -o "$tmp/g.h5"
check "info shows it" 0 "^device: +NVIDIA A100-SXM4-80GB, 79.26 GiB total" -- "$gmsim" info "$tmp/g.h5"
check "run uses it" 0 "^device size: the trace's device" -- "$gmsim" run "$tmp/g.h5"
check "import --device-total" 0 "" -- "$gmsim" import --device-total 24GiB "$gpt" -o "$tmp/d.h5"
check "info, total" 0 "24.00 GiB total" -- "$gmsim" info "$tmp/d.h5"
check "import --gpu unknown" 2 "not a GPU gmsim knows" -- "$gmsim" import --gpu x "$gpt" -o "$tmp/x.h5"
check "info of a snapshot" 0 "^trace: +.*cuda-graph-pools-no-trace.pickle$" -- \
    "$gmsim" info "$data/cuda-graph-pools-no-trace.pickle"
grep -q "68 in CUDA-graph private pools" "$tmp/out" || {
    echo "FAIL info: private pools not shown"; fails=$((fails + 1)); }
check "several devices: one at a time" 1 "holds the traces of several devices \(0, 1, 2\); replay one" -- \
    "$gmsim" run --capacity 80GiB "$data/expandable-mapped-3gpu-oom.pickle"

total=$((total + 1))
# decimal units: 24GB is 22.35 GiB, said once; 24Gi (Kubernetes) is 24 GiB
check "24GB is 22.35 GiB" 0 "on a 22.35 GiB device" -- "$gmsim" run --capacity 24GB "$src/traces/bert.h5"
check "24GB: the note" 0 "^gmsim run: note: --capacity 24GB = 22.35 GiB \(GB is 10\^9 bytes\); did you mean 24GiB\?$" \
    -- "$gmsim" run --capacity 24GB "$src/traces/bert.h5"
check "24GiB: no note" 0 "" -- "$gmsim" run --capacity 24GiB "$src/traces/bert.h5"
if [ -s "$tmp/err" ]; then echo "FAIL 24GiB: a note: $(cat "$tmp/err")"; fails=$((fails + 1)); fi
check "24Gi is 24 GiB" 0 "on a 24.00 GiB device" -- "$gmsim" run --capacity 24Gi "$src/traces/bert.h5"
check "fit --max-capacity 40GB: the note" 0 "note: --max-capacity 40GB = 37.25 GiB" \
    -- "$gmsim" fit --policies pytorch --max-capacity 40GB "$src/traces/bert.h5"
if [ -z "$(ls -A "$TMPDIR")" ]; then echo "ok   no temporary file left"; else
    echo "FAIL temporary files left: $(ls -A "$TMPDIR")"; fails=$((fails + 1)); fi
echo "$((total - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
