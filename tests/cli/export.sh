#!/usr/bin/env bash
# export.sh GMSIM SOURCE_DIR - `gmsim export --memory-viz`: the file is a
# PyTorch snapshot that plain pickle reads and memviz_check.py walks as
# PyTorch's viewer does; `gmsim import` + `gmsim fidelity` of it replay the
# model's own decisions exactly; a what-if setting shows in it; odd call-site
# texts (quotes, newlines, non-ASCII) survive; a result JSON is re-simulated.
set -u
gmsim=$1
src=$2
check="python3 $src/tests/cli/memviz_check.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

# round trip on real snapshots (and the synthetic trace): fidelity EXACT
for f in "$src"/tests/data/small-with-segments.pickle "$src"/tests/data/gpt-medium-ctx128-train.pickle \
    "$src"/tests/data/expandable-segments-fwd.pickle "$src"/tests/data/empty-cache-bursts.pickle \
    "$src"/tests/data/cases/record-stream.pickle "$src"/tests/data/cases/expandable-ranges.pickle \
    "$src"/traces/bert.h5; do
    b=$(basename "$f")
    "$gmsim" export -q --capacity 80GiB --memory-viz "$tmp/$b.out" "$f" || { fail "export $b"; continue; }
    $check "$tmp/$b.out" >"$tmp/check" || fail "memviz_check $b: $(cat "$tmp/check")"
    "$gmsim" fidelity "$tmp/$b.out" >"$tmp/fid" 2>&1 || fail "fidelity of the export of $b: $(tail -5 "$tmp/fid")"
    "$gmsim" import -q "$tmp/$b.out" -o "$tmp/$b.h5" >/dev/null 2>&1 || fail "import of the export of $b"
done

# the what-if is the model's: expandable segments give segment_map entries, not segment_alloc
f="$src/tests/data/small-with-segments.pickle"
"$gmsim" export -q --capacity 80GiB --alloc-conf expandable_segments:True \
    --memory-viz "$tmp/exp.pickle" "$f" || fail "export expandable"
python3 - "$tmp/exp.pickle" <<'PY' || fail "expandable what-if not in the export"
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
acts = {e["action"] for e in d["device_traces"][0]}
assert "segment_map" in acts and "segment_alloc" not in acts, acts
assert d["allocator_settings"]["expandable_segments"] is True
assert all(s["is_expandable"] for s in d["segments"])
PY
"$gmsim" fidelity "$tmp/exp.pickle" >/dev/null 2>&1 || fail "fidelity of the expandable what-if"

# on a smaller card the run stops at an OOM: the snapshot ends with an oom entry
"$gmsim" export -q --capacity 1GiB --memory-viz "$tmp/oom.pickle" "$src/traces/bert.h5"
python3 - "$tmp/oom.pickle" <<'PY' || fail "no oom entry at the end of a run that ran out"
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
e = d["device_traces"][0][-1]
assert e["action"] == "oom" and "device_free" in e and e["size"] > 0, e
PY

# odd call sites: quotes, a newline in a name, non-ASCII, a backslash
python3 - "$tmp/odd.pickle" <<'PY'
import pickle, sys
MiB = 1 << 20
odd = [{'filename': '/home/u/tr"ain\'s.py', 'line': 42, 'name': 'fwd\nnext'},
       {'filename': '/home/u/caf\u00e9\\x.py', 'line': 7, 'name': 'g<o>&'}]
tr = [dict(action='segment_alloc', addr=1 << 40, size=20 * MiB, stream=0, time_us=1, frames=odd),
      dict(action='alloc', addr=1 << 40, size=4 * MiB, stream=0, time_us=2, frames=odd),
      dict(action='free_requested', addr=1 << 40, size=4 * MiB, stream=0, time_us=3, frames=odd),
      dict(action='free_completed', addr=1 << 40, size=4 * MiB, stream=0, time_us=3, frames=odd),
      dict(action='alloc', addr=(1 << 40) + 4 * MiB, size=MiB * 3, stream=0, time_us=4, frames=odd)]
seg = dict(device=0, address=1 << 40, total_size=20 * MiB, allocated_size=3 * MiB,
           active_size=3 * MiB, requested_size=3 * MiB, stream=0, segment_type='large',
           segment_pool_id=(0, 0), is_expandable=False, frames=odd,
           blocks=[dict(address=1 << 40, size=4 * MiB, requested_size=0, state='inactive', frames=[]),
                   dict(address=(1 << 40) + 4 * MiB, size=3 * MiB, requested_size=3 * MiB,
                        state='active_allocated', frames=odd),
                   dict(address=(1 << 40) + 7 * MiB, size=13 * MiB, requested_size=0,
                        state='inactive', frames=[])])
pickle.dump(dict(segments=[seg], device_traces=[tr], allocator_settings={}), open(sys.argv[1], 'wb'))
PY
"$gmsim" export -q --capacity 1GiB --memory-viz "$tmp/odd.out" "$tmp/odd.pickle" || fail "export odd"
# the site is the innermost user frame, its text as /sites keeps it (control
# characters as C escapes: the newline in the name is the two characters \n)
$check "$tmp/odd.out" "/home/u/tr\"ain's.py:42 in fwd\\nnext" >"$tmp/check" 2>&1 ||
    fail "odd site: $(cat "$tmp/check")"
python3 - "$tmp/odd.out" <<'PY' || fail "odd frames not kept"
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
f = d["device_traces"][0][0]["frames"]
assert f[0]["filename"] == "/home/u/tr\"ain's.py" and f[0]["line"] == 42 and f[0]["name"] == "fwd\\nnext", f
assert f[1]["filename"] == "/home/u/caf\u00e9\\x.py" and f[1]["name"] == "g<o>&", f
PY
"$gmsim" fidelity "$tmp/odd.out" >/dev/null 2>&1 || fail "fidelity of the odd export"

# a result JSON: its inputs are simulated again (here: its capacity and policy)
"$gmsim" run -q --capacity 1GiB --on-oom skip --json "$tmp/r.json" "$src/traces/bert.h5" >/dev/null 2>&1
"$gmsim" export -q --memory-viz "$tmp/r.pickle" "$tmp/r.json" || fail "export of a result"
n=$(python3 -c "import pickle,sys;d=pickle.load(open(sys.argv[1],'rb'));print(sum(e['action']=='oom' for e in d['device_traces'][0]))" "$tmp/r.pickle")
[ "${n:-0}" -gt 1 ] || fail "the result's --on-oom skip and 1 GiB not re-simulated (oom entries: $n)"
# ... and an option given here overrides it
"$gmsim" export -q --capacity 80GiB --memory-viz "$tmp/r2.pickle" "$tmp/r.json" || fail "export with override"
n=$(python3 -c "import pickle,sys;d=pickle.load(open(sys.argv[1],'rb'));print(sum(e['action']=='oom' for e in d['device_traces'][0]))" "$tmp/r2.pickle")
[ "$n" = 0 ] || fail "--capacity did not override the result's (oom entries: $n)"

# usage errors: exit 2, nothing written
"$gmsim" export "$src/traces/bert.h5" >/dev/null 2>&1
[ $? = 2 ] || fail "no --memory-viz is not a usage error"
"$gmsim" export --memory-viz "$tmp/two.pickle" "$src/traces/bert.h5" "$src/traces/bert.h5" 2>"$tmp/err"
[ $? = 2 ] || fail "two traces not refused: $(cat "$tmp/err")"
grep -q "one process" "$tmp/err" || fail "two traces: no reason given: $(cat "$tmp/err")"
"$gmsim" export --repeat 2 --memory-viz "$tmp/rep.pickle" "$src/traces/bert.h5" 2>/dev/null
[ $? = 2 ] || fail "--repeat not refused"
[ ! -e "$tmp/two.pickle" ] && [ ! -e "$tmp/rep.pickle" ] || fail "a refused export wrote a file"
ls "$tmp" | grep -q '\.tmp\.' && fail "a temporary file was left behind"

[ "$fails" = 0 ] && echo "export: all passed"
exit $((fails > 0))
