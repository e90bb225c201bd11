#!/usr/bin/env bash
# sites.sh GMSIM SOURCE_DIR - call sites from a snapshot's frames: the
# innermost frame of the user's own code names an allocation (torch/, C++
# and Python internals skipped; the innermost Python frame when there is no
# user frame; none without a Python frame), and `gmsim info` and the OOM
# explanation of `gmsim run` show which sites hold the memory (text, JSON).
set -u
gmsim=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}
expect_line() {
    grep -Eq -- "$1" "$2" || fail "no line matching '$1' in $(basename "$2"): $(head -c 1500 "$2")"
}

# A 100 MiB segment; 60 MiB from train.py:42 (below: torch and C++ frames),
# 30 MiB from model.py:7 (called from train.py:42), 4 MiB with only torch
# frames, 2 MiB with only C++ frames; all freed, the segment released.
python3 - "$tmp/snap.pickle" "$2" <<'PY'
import sys
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, sys.argv[-1] + '/tests/cli')
from snapgen import MiB, S, fr, Trace
CPP = [{'filename': '??', 'line': 0, 'name': 'torch::unwind::unwind()'},
       {'filename': 'CUDACachingAllocator.cpp', 'line': 0, 'name': 'DeviceCachingAllocator::malloc'},
       {'filename': '', 'line': 0, 'name': 'at::empty_cuda'}]
TORCH = [{'filename': '/venv/lib/python3.12/site-packages/torch/nn/modules/module.py',
          'line': 1100, 'name': '_call_impl'}]
TRAIN = [{'filename': '/home/u/proj/train.py', 'line': 42, 'name': 'forward'},
         {'filename': '/usr/lib/python3.12/runpy.py', 'line': 86, 'name': '_run_code'},
         {'filename': '<frozen runpy>', 'line': 198, 'name': '_run_module_as_main'}]
ATTN = [{'filename': '/home/u/proj/model.py', 'line': 7, 'name': 'attn'}] + TRAIN
tr = Trace()
add = tr.add
add('segment_alloc', S, 100 * MiB, CPP + TORCH + TRAIN)
add('alloc', S, 60 * MiB, CPP + TORCH + TRAIN)
add('alloc', S + 60 * MiB, 30 * MiB, CPP + TORCH + ATTN)
add('alloc', S + 90 * MiB, 4 * MiB, CPP + TORCH)
add('alloc', S + 94 * MiB, 2 * MiB, CPP)
for a, s in [(S, 60), (S + 60 * MiB, 30), (S + 90 * MiB, 4), (S + 94 * MiB, 2)]:
    tr.free(a, s * MiB)
add('segment_free', S, 100 * MiB, [])
tr.dump(sys.argv[1], [])
PY

"$gmsim" import "$tmp/snap.pickle" -o "$tmp/snap.h5" >/dev/null 2>"$tmp/err" ||
    fail "import: $(cat "$tmp/err")"
"$gmsim" info "$tmp/snap.h5" >"$tmp/info" 2>&1 || fail "info failed"
expect_line "^top call sites at peak \(3 sites in the trace\):" "$tmp/info"
expect_line "^  train.py:42 in forward +60.00 MiB +1$" "$tmp/info"
expect_line "^  model.py:7 in attn +30.00 MiB +1$" "$tmp/info"
expect_line "^  module.py:1100 in _call_impl +4.00 MiB +1$" "$tmp/info"
expect_line "^  \(no site recorded\) +2.00 MiB +1$" "$tmp/info"
"$gmsim" info --json - "$tmp/snap.h5" >"$tmp/info.json" 2>/dev/null || fail "info --json failed"
python3 - "$tmp/info.json" <<'PY' || fail "info JSON sites"
import json, sys
j = json.load(open(sys.argv[1]))
MiB = 1 << 20
assert j['sites'] == 3, j['sites']
got = [(s['name'], s['bytes'], s['count']) for s in j['live_at_peak_by_site']]
assert got == [('train.py:42 in forward', 60 * MiB, 1), ('model.py:7 in attn', 30 * MiB, 1),
               ('module.py:1100 in _call_impl', 4 * MiB, 1)], got
assert j['live_at_peak_unknown_site_bytes'] == 2 * MiB
PY

# At 80 MiB (no context overhead) the 30 MiB allocation does not fit: the
# 60 MiB of train.py:42 are what is live at the OOM.
"$gmsim" run --capacity 80MiB --overhead 0 --json "$tmp/run.json" "$tmp/snap.h5" >"$tmp/run" 2>&1
rc=$?
[ "$rc" -eq 3 ] || fail "run at 80 MiB: exit $rc, expected 3: $(head -c 600 "$tmp/run")"
expect_line "^  live then: 60.00 MiB in 1 tensors" "$tmp/run"
expect_line "^    train.py:42 in forward +60.00 MiB in 1 tensor$" "$tmp/run"
python3 - "$tmp/run.json" <<'PY' || fail "run JSON explain sites"
import json, sys
j = json.load(open(sys.argv[1]))
def find(o):
    if isinstance(o, dict):
        if 'explain' in o:
            return o['explain']
        o = list(o.values())
    if isinstance(o, list):
        for v in o:
            r = find(v)
            if r:
                return r
e = find(j)
at = e['live_at_first_oom']
assert at['top_sites'] == [{'site': 'train.py:42 in forward', 'bytes': 60 << 20, 'count': 1}], at
pk = e['live_at_peak']['top_sites']
assert [s['site'] for s in pk][:2] == ['train.py:42 in forward', 'model.py:7 in attn'], pk
PY

# A trace without sites (the generators') shows none.
"$gmsim" gen bert --batch 1 --seq 16 --layers 1 -o "$tmp/g.h5" >/dev/null 2>&1 || fail "gen"
"$gmsim" info "$tmp/g.h5" >"$tmp/ginfo" 2>&1 || fail "info gen"
grep -q "top call sites" "$tmp/ginfo" && fail "a trace without /sites lists call sites"

[ "$fails" -eq 0 ] && echo "sites: all passed"
exit $((fails > 0))
