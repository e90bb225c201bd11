#!/usr/bin/env bash
# leak_sites.sh GMSIM SOURCE_DIR - `gmsim info`'s leak verdict grouped by call
# site, from the outside: snapshots of a 30-iteration loop (weights, an input,
# six activations from two sites, all freed each iteration) with and without a
# loss tensor kept every iteration at train.py:99 (2 and 8 MiB per
# iteration). The growing trace names exactly that site, at its rate; the
# steady one names none. Iterations come from the period of live bytes (a
# snapshot has no markers).
set -u
gmsim=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

cat >"$tmp/gen.py" <<'PY'
import sys
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, sys.argv[-1] + '/tests/cli')
from snapgen import MiB, S, fr, Trace
leak = int(sys.argv[2]) * MiB
INIT, LOAD, ATTN, MLP, LOSS = (fr('model.py', 10, '__init__'), fr('train.py', 20, 'load'),
                               fr('model.py', 30, 'attn'), fr('model.py', 31, 'mlp'),
                               fr('train.py', 99, 'log_loss'))
tr = Trace()
add, free = tr.add, tr.free
add('segment_alloc', S, 4096 * MiB, INIT)
add('alloc', S, 200 * MiB, INIT)
live = [(S, 200 * MiB, INIT)]
kept = S + 1024 * MiB
for it in range(30):
    add('alloc', S + 200 * MiB, 1 * MiB, LOAD)
    acts = []
    for k in range(6):
        a, s = S + 256 * MiB + k * 64 * MiB, 20 * MiB + k * MiB
        add('alloc', a, s, ATTN if k % 2 == 0 else MLP)
        acts.append((a, s))
    if leak:
        add('alloc', kept, leak, LOSS)
        live.append((kept, leak, LOSS))
        kept += leak
    for a, s in reversed(acts):
        free(a, s)
    free(S + 200 * MiB, 1 * MiB)
blocks, at = [], S
for a, sz, f in live:   # the dump-time segment: the live blocks, the gaps inactive
    if a > at:
        blocks.append({'address': at, 'size': a - at, 'requested_size': 0, 'state': 'inactive', 'frames': []})
    blocks.append({'address': a, 'size': sz, 'requested_size': sz, 'state': 'active_allocated', 'frames': f})
    at = a + sz
blocks.append({'address': at, 'size': S + 4096 * MiB - at, 'requested_size': 0, 'state': 'inactive', 'frames': []})
used = sum(sz for _, sz, _ in live)
seg = {'device': 0, 'address': S, 'total_size': 4096 * MiB, 'stream': 0, 'segment_type': 'large',
       'allocated_size': used, 'active_size': used, 'requested_size': used, 'blocks': blocks}
tr.dump(sys.argv[1], [seg])
PY

for mib in 0 2 8; do
    python3 "$tmp/gen.py" "$tmp/l$mib.pickle" $mib "$2" || fail "generate $mib"
    "$gmsim" info --json - "$tmp/l$mib.pickle" >"$tmp/l$mib.json" 2>"$tmp/err" || fail "info --json ($mib MiB): $(cat "$tmp/err")"
    python3 - "$tmp/l$mib.json" $mib <<'PY' || fail "$mib MiB per iteration: JSON"
import json, sys
j = json.load(open(sys.argv[1]))['iterations']
mib = int(sys.argv[2])
assert j['source'] == 'period' and len(j['boundaries']) >= 20, (j['source'], len(j['boundaries']))
assert j['group_kind'] == 'site', j['group_kind']
if mib == 0:
    assert j['verdict'] == 'steady', j['verdict']
    assert j['growing'] == [] and j['growing_groups'] == {}, j['growing']
else:
    assert j['verdict'] == 'growing', j['verdict']
    assert [g['name'] for g in j['growing']] == ['train.py:99 in log_loss'], j['growing']
    assert abs(j['growing'][0]['slope_bytes_per_iteration'] - mib * 2**20) < 1, j['growing']
    assert list(j['growing_groups']) == ['train.py:99 in log_loss'], j['growing_groups']
# by_group holds the sites with live bytes: the weights at every boundary
assert all(b['by_group']['model.py:10 in __init__'] == 200 << 20 for b in j['boundaries'][1:])
PY
    "$gmsim" info "$tmp/l$mib.pickle" >"$tmp/l$mib.txt" 2>&1 || fail "info ($mib MiB)"
    n=$(grep -c "^  growing call site: " "$tmp/l$mib.txt")
    if [ $mib = 0 ]; then
        [ "$n" = 0 ] || fail "steady trace names $n growing sites"
        grep -Eq "^leak: +steady: " "$tmp/l$mib.txt" || fail "steady: leak line"
    else
        [ "$n" = 1 ] || fail "$mib MiB: $n growing sites named, expected 1"
        grep -Eq "^  growing call site: train.py:99 in log_loss \+$mib.00 MiB per iteration \(R\^2 1.000\)$" "$tmp/l$mib.txt" ||
            fail "$mib MiB: growing site line: $(grep growing "$tmp/l$mib.txt")"
    fi
done

# the HTML report's leak chart names the growing site in its caption
"$gmsim" run --capacity 8GiB --html "$tmp/l8.html" "$tmp/l8.pickle" >/dev/null 2>&1 || fail "run --html"
grep -q "Growing call sites: train.py:99 in log_loss (+8.00 MiB per iteration)" "$tmp/l8.html" ||
    fail "HTML caption does not name the growing site"

[ $fails -eq 0 ] && echo "leak_sites: all passed"
exit $((fails > 0))
