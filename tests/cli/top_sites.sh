#!/usr/bin/env bash
# top_sites.sh GMSIM SOURCE_DIR - `gmsim run --top-sites N [--profiler]` and
# `gmsim info --top-sites N` on a tiny snapshot whose orders are worked out by
# hand (bytes allocated and live bytes at the peak rank the sites
# differently), the note for a trace without call sites, and bad N refused.
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
    grep -Eq -- "$1" "$2" || fail "no line matching '$1' in $(basename "$2"): $(head -c 2000 "$2")"
}

# One 100 MiB segment. a.py:1 allocates 4 x 10 MiB one at a time (40 MiB in
# all, none live at the peak); b.py:2 30 MiB, live at the peak, freed after
# it; c.py:3 2 x 8 MiB, live at the peak and at the end. The peak (simulated
# allocated and live requested alike: sizes are whole blocks) is 30 + 16 =
# 46 MiB, just after the second c.py:3 allocation (event 11: segment_alloc,
# 4 x alloc+free, then b, c, c).
#   by bytes allocated:  a 40 MiB (4), b 30 MiB (1), c 16 MiB (2)
#   by live at the peak: b 30 MiB (1), c 16 MiB (2), a 0 B (0)
#   Self CUDA Mem:       c 16 MiB (allocated, never freed), a 0, b 0
#   CUDA Mem:            b 16 MiB (c.py:3 is called from b.py:2: its stack
#                        holds b's frame), c 16 MiB, a 0; ties by site: b, c, a
python3 - "$tmp/tiny.pickle" "$2" <<'PY'
import sys
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, sys.argv[-1] + '/tests/cli')
from snapgen import MiB, S, fr, Trace
A, B = fr('a.py', 1, 'fa'), fr('b.py', 2, 'fb')
C = [{'filename': '/home/u/proj/c.py', 'line': 3, 'name': 'fc'}] + B   # fc is called from b.py:2
tr = Trace()
add, free = tr.add, tr.free
add('segment_alloc', S, 100 * MiB, A)
for i in range(4):
    add('alloc', S, 10 * MiB, A)
    free(S, 10 * MiB)
add('alloc', S + 10 * MiB, 30 * MiB, B)
add('alloc', S + 40 * MiB, 8 * MiB, C)
add('alloc', S + 48 * MiB, 8 * MiB, C)
free(S + 10 * MiB, 30 * MiB)
blk = lambda a, s, st, f: {'address': a, 'size': s, 'requested_size': s if st != 'inactive' else 0,
                           'state': st, 'frames': f}
seg = {'device': 0, 'address': S, 'total_size': 100 * MiB, 'stream': 0, 'segment_type': 'large',
       'allocated_size': 16 * MiB, 'active_size': 16 * MiB, 'requested_size': 16 * MiB,
       'blocks': [blk(S, 40 * MiB, 'inactive', []), blk(S + 40 * MiB, 8 * MiB, 'active_allocated', C),
                  blk(S + 48 * MiB, 8 * MiB, 'active_allocated', C),
                  blk(S + 56 * MiB, 44 * MiB, 'inactive', [])]}
tr.dump(sys.argv[1], [seg])
PY
"$gmsim" import "$tmp/tiny.pickle" -o "$tmp/tiny.h5" >/dev/null 2>"$tmp/err" || fail "import: $(cat "$tmp/err")"
run() { "$gmsim" run --capacity 80MiB --overhead 0 "$@"; }

run --top-sites 3 "$tmp/tiny.h5" >"$tmp/run" 2>&1 || fail "run --top-sites 3: exit $?"
expect_line "^top 3 call sites of .*tiny.h5 \(3 sites in the trace\), live bytes at the simulated peak of allocated memory: 46.00 MiB, after event 11$" "$tmp/run"
# the two orders, in the order printed
sed -n '/by bytes allocated/,/by live bytes/p' "$tmp/run" | awk 'NR>1 && !/by live/ {print $1, $4, $5}' >"$tmp/by_alloc"
printf 'a.py:1 4 40.00\nb.py:2 1 30.00\nc.py:3 2 16.00\n' | cmp -s - "$tmp/by_alloc" || fail "by bytes allocated: $(cat "$tmp/by_alloc")"
sed -n '/by live bytes at the peak/,$p' "$tmp/run" | awk 'NR>1 {print $1, $4, $6}' >"$tmp/by_peak"
printf 'b.py:2 30.00 1\nc.py:3 16.00 2\na.py:1 0 0\n' | cmp -s - "$tmp/by_peak" || fail "by live at peak: $(cat "$tmp/by_peak")"
expect_line "^    a.py:1 in fa +4 +40.00 MiB +0 B$" "$tmp/run"

# JSON: the same orders, and the peak is the run's own peak of allocated memory
run --top-sites 2 --json "$tmp/run.json" "$tmp/tiny.h5" >/dev/null 2>&1 || fail "run --json"
python3 - "$tmp/run.json" <<'PY' || fail "run --json top_sites"
import json, sys
j = json.load(open(sys.argv[1]))
MiB = 1 << 20
ts = j['top_sites']
assert ts['n'] == 2 and ts['peak'] == 'simulated allocated bytes', ts
assert ts['peak_bytes'] == 46 * MiB == j['device']['peak_allocated_bytes'], (ts['peak_bytes'], j['device'])
assert ts['peak_event'] == 11 and ts['peak_tenant'] == 0, ts
t = ts['tenants'][0]
assert t['sites'] == 3 and t['note'] is None, t
got = [(r['name'], r['allocations'], r['bytes_allocated'], r['peak_live_bytes']) for r in t['by_bytes_allocated']]
assert got == [('a.py:1 in fa', 4, 40 * MiB, 0), ('b.py:2 in fb', 1, 30 * MiB, 30 * MiB)], got
got = [(r['name'], r['peak_live_bytes'], r['peak_live_allocations']) for r in t['by_peak_live']]
assert got == [('b.py:2 in fb', 30 * MiB, 1), ('c.py:3 in fc', 16 * MiB, 2)], got
got = [(r['name'], r['cuda_mem_bytes'], r['self_cuda_mem_bytes'], r['frees']) for r in t['by_cuda_mem']]
assert got == [('b.py:2 in fb', 16 * MiB, 0, 1), ('c.py:3 in fc', 16 * MiB, 16 * MiB, 0)], got
assert t['no_site']['allocations'] == 0, t['no_site']
PY

# two tenants on one device: the peak is the device's (both copies at their
# peak, 2 x 46 MiB, reached at the second copy's event 11), each trace listed
run --top-sites 1 --json "$tmp/two.json" "$tmp/tiny.h5" "$tmp/tiny.h5" --capacity 200MiB >/dev/null 2>&1 ||
    fail "run --top-sites, two tenants"
python3 - "$tmp/two.json" <<'PY' || fail "two tenants: top_sites"
import json, sys
j = json.load(open(sys.argv[1]))
ts = j['top_sites']
assert ts['peak_bytes'] == 92 << 20 == j['device']['peak_allocated_bytes'], (ts['peak_bytes'], j['device'])
assert ts['peak_tenant'] == 1 and ts['peak_event'] == 11, ts
assert [[(r['name'], r['peak_live_bytes']) for r in t['by_peak_live']] for t in ts['tenants']] == \
    [[('b.py:2 in fb', 30 << 20)]] * 2, ts['tenants']
PY

# --profiler: PyTorch's columns, sorted by CUDA memory usage, row_limit N
run --top-sites 3 --profiler "$tmp/tiny.h5" >"$tmp/prof" 2>&1 || fail "run --profiler: exit $?"
expect_line "^Name +CUDA Mem +Self CUDA Mem +# of Calls$" "$tmp/prof"
grep -A4 '^Name' "$tmp/prof" | tail -3 | awk '{print $1, $4, $5, $6, $7, $8}' >"$tmp/prof_rows"
printf 'b.py:2 16.00 Mb 0 b 1\nc.py:3 16.00 Mb 16.00 Mb 2\na.py:1 0 b 0 b 4\n' | cmp -s - "$tmp/prof_rows" ||
    fail "profiler rows: $(cat "$tmp/prof_rows")"
# --profiler alone: 10 rows at most (three here)
run --profiler "$tmp/tiny.h5" >"$tmp/prof10" 2>&1 || fail "run --profiler alone"
expect_line "row_limit=10\) prints them:$" "$tmp/prof10"

# info: the trace's own peak of live bytes (no allocator), same orders
"$gmsim" info --top-sites 3 "$tmp/tiny.h5" >"$tmp/info" 2>&1 || fail "info --top-sites"
expect_line "live bytes at the peak of live bytes: 46.00 MiB, after event 11$" "$tmp/info"
"$gmsim" info --top-sites 3 --json - "$tmp/tiny.h5" >"$tmp/info.json" 2>/dev/null || fail "info --json"
python3 - "$tmp/info.json" <<'PY' || fail "info --json top_sites"
import json, sys
t = json.load(open(sys.argv[1]))['top_sites']
assert t['peak'] == 'live requested bytes' and t['peak_bytes'] == 46 << 20, t
names = lambda k: [r['name'].split()[0] for r in t['tenants'][0][k]]
assert names('by_bytes_allocated') == ['a.py:1', 'b.py:2', 'c.py:3'], names('by_bytes_allocated')
assert names('by_peak_live') == ['b.py:2', 'c.py:3', 'a.py:1'], names('by_peak_live')
PY

# a trace without call sites: said so, not an empty table
"$gmsim" gen bert --layers 1 --hidden 64 --heads 2 --vocab 100 --seq 16 --batch 2 --iterations 2 \
    -o "$tmp/gen.h5" >/dev/null 2>&1 || fail "gen"
"$gmsim" run --capacity 8GiB --top-sites 5 --json "$tmp/gen.json" "$tmp/gen.h5" >"$tmp/gen" 2>&1 ||
    fail "run --top-sites on a generated trace: exit $?"
expect_line "^top 5 call sites of .*gen.h5: this trace has no call sites \(no /sites table\): only an imported PyTorch memory snapshot recorded with stacks" "$tmp/gen"
grep -q "by bytes allocated" "$tmp/gen" && fail "a table for a trace without sites"
python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['top_sites']['tenants'][0]; assert t['sites']==0 and t['note'] and t['by_bytes_allocated']==[], t" \
    "$tmp/gen.json" || fail "JSON for a trace without sites"

# bad N: refused, a usage error (exit 2) that says what to give
for n in 0 -3 abc 1.5 "" 100001; do
    for cmd in run info; do
        if [ $cmd = run ]; then run --top-sites "$n" "$tmp/tiny.h5" >/dev/null 2>"$tmp/err"; else
            "$gmsim" info --top-sites "$n" "$tmp/tiny.h5" >/dev/null 2>"$tmp/err"; fi
        rc=$?
        [ $rc -eq 2 ] || fail "$cmd --top-sites '$n': exit $rc, expected 2"
        grep -q "gmsim $cmd: --top-sites: '$n' is not a number of call sites; give a whole number from 1 to 100000, e.g. --top-sites 10" "$tmp/err" ||
            fail "$cmd --top-sites '$n' message: $(cat "$tmp/err")"
    done
done

[ $fails -eq 0 ] && echo "top_sites: all passed"
exit $((fails > 0))
