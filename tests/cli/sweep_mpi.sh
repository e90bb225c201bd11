#!/usr/bin/env bash
# sweep_mpi.sh GMSIM SOURCE_DIR - `gmsim sweep` on threads and on MPI ranks:
# a 24-case sweep written by `mpirun -np 2` is the same bytes (JSON and
# HDF5) as on 1 or 2 threads; --resume runs only what is missing and writes
# the same bytes again; a failing case is reported and the others go on
# (exit 1); a bad spec names its fault. MPI is in its own module
# (cli/mpi.h): gmsim itself does not load Open MPI's libraries, and a gmsim
# without its module says so under --mpi.
#
# MPI is optional at build time, but this test needs it: without an MPI
# gmsim or without mpirun it FAILS (it never counts as passed), saying how to
# get them (scripts/deps.sh installs Open MPI; CI runs it).
set -u
gmsim=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "${2:-.}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

if ! "$gmsim" sweep --help | grep -q "this gmsim has MPI"; then
    echo "FAIL: $gmsim was built without MPI: install libopenmpi-dev and openmpi-bin" \
        "(bash scripts/deps.sh) and configure again (cmake finds it with find_package(MPI))" >&2
    exit 1
fi
if ! command -v mpirun >/dev/null; then
    echo "FAIL: no mpirun on PATH: install openmpi-bin (bash scripts/deps.sh)" >&2
    exit 1
fi
# Open MPI's plugins keep allocations past MPI_Finalize and are unloaded
# before LeakSanitizer looks (no module name left to suppress): under an
# ASan build the ranks run without leak detection. The same cases run on
# threads below with it, and the gathering code frees all it takes.
mpi=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun -np 2 --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)

bert=$src/traces/bert.h5
cat >"$tmp/spec.json" <<EOF
{
  "comment": "2 mixes x 2 devices x 3 allocators x 2 policies = 24 cases",
  "traces": ["$bert"],
  "mixes": [{"name": "two-berts",
             "tenants": ["$bert", {"trace": "$bert", "offset": "100ms"}]}],
  "capacities": ["8GiB"],
  "gpus": ["a10"],
  "allocators": ["pytorch", "cuda-async", "rmm-pool:initial_pool_size:2GiB"],
  "policies": ["pytorch", "lru"]
}
EOF

n=$("$gmsim" sweep --list "$tmp/spec.json" | wc -l)
[ "$n" -eq 24 ] || fail "--list: $n cases, expected 24"

"$gmsim" sweep --threads 2 -o "$tmp/threads" "$tmp/spec.json" 2>"$tmp/e.threads" ||
    fail "threads: exit $? ($(tail -3 "$tmp/e.threads"))"
grep -q "^gmsim sweep: \[24/24\] case " "$tmp/e.threads" || fail "no progress on stderr"
grep -q "cases/s" "$tmp/e.threads" || fail "no summary line"
"$gmsim" sweep -q --threads 1 -o "$tmp/one" "$tmp/spec.json" || fail "1 thread: exit $?"
"${mpi[@]}" "$gmsim" sweep --threads 1 -o "$tmp/mpi" "$tmp/spec.json" 2>"$tmp/e.mpi" ||
    fail "mpirun: exit $? ($(tail -5 "$tmp/e.mpi"))"
grep -q "on 2 ranks" "$tmp/e.mpi" || fail "mpirun: not 2 ranks ($(head -3 "$tmp/e.mpi"))"
grep -q "rank 1 \[" "$tmp/e.mpi" || fail "mpirun: rank 1 ran nothing"
for ext in json h5; do
    cmp -s "$tmp/threads.$ext" "$tmp/one.$ext" || fail "$ext: 2 threads != 1 thread"
    cmp -s "$tmp/threads.$ext" "$tmp/mpi.$ext" || fail "$ext: 2 MPI ranks != threads"
done
python3 - "$tmp/threads.json" <<'EOF' || fail "JSON content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "gmsim-sweep/1"
c = d["cases"]
assert len(c) == 24 and [x["index"] for x in c] == list(range(24))
assert d["summary"] == {"cases": 24, "ok": 24, "failed": 0}
assert len({x["key"] for x in c}) == 24
# each (mix, device) group of 6 is ranked 1..6 by the one ranking
for g in range(4):
    grp = c[6 * g:6 * g + 6]
    assert sorted(x["rank"] for x in grp) == list(range(1, 7)), grp
    best = min(grp, key=lambda x: x["rank"])
    assert all(best["oom_count"] <= x["oom_count"] for x in grp)
assert c[0]["capacity_bytes"] == 8 << 30 and c[6]["device"] == "a10"
assert c[12]["mix"] == "two-berts" and c[12]["tenants"] == 2
assert {x["allocator_used"] for x in c} == {"pytorch", "cuda-async", "rmm-pool"}
EOF
command -v h5dump >/dev/null && { h5dump -d cases -A "$tmp/mpi.h5" | grep -q "gmsim-sweep/1" ||
    fail "HDF5: no schema attribute"; }

# --resume: half the spec first, then all of it: only the rest runs, and
# the result is the fresh one, byte for byte
python3 -c "
import json; s = json.load(open('$tmp/spec.json')); s['policies'] = ['pytorch']
json.dump(s, open('$tmp/half.json', 'w'))"
"$gmsim" sweep -q -o "$tmp/res" "$tmp/half.json" || fail "half: exit $?"
"${mpi[@]}" "$gmsim" sweep --resume -o "$tmp/res" "$tmp/spec.json" 2>"$tmp/e.res" ||
    fail "resume: exit $?"
grep -q "24 cases (12 done before, 12 to run)" "$tmp/e.res" || fail "resume: $(head -1 "$tmp/e.res")"
for ext in json h5; do
    cmp -s "$tmp/threads.$ext" "$tmp/res.$ext" || fail "$ext: resumed != fresh"
done

# a failing case is reported, the others go on, exit 1
sed "s|\"tenants\": \[\"$bert\"|\"tenants\": [\"$tmp/missing.h5\"|" "$tmp/spec.json" >"$tmp/bad.json"
"$gmsim" sweep -o "$tmp/bad" "$tmp/bad.json" 2>"$tmp/e.bad"
rc=$?
[ "$rc" -eq 1 ] || fail "failing case: exit $rc, expected 1"
grep -q "FAILED: .*missing.h5" "$tmp/e.bad" || fail "failing case not reported on stderr"
grep -q "12 of 24 cases failed" "$tmp/e.bad" || fail "no failure count"
python3 - "$tmp/bad" <<'EOF' || fail "failed cases in the JSON"
import json, sys
d = json.load(open(sys.argv[1] + ".json"))
bad = [x for x in d["cases"] if x["status"] == "failed"]
assert len(bad) == 12 and all("missing.h5" in x["error"] for x in bad)
assert all(x["mix"] == "two-berts" for x in bad)
assert all(x["status"] == "ok" for x in d["cases"] if x["mix"] != "two-berts")
EOF

# relative trace paths are the spec's folder's
mkdir -p "$tmp/sub"
cp "$bert" "$tmp/sub/bert.h5"
echo '{"traces": ["bert.h5"], "capacities": ["8GiB"]}' >"$tmp/sub/rel.json"
(cd / && "$gmsim" sweep -q -o "$tmp/rel" "$tmp/sub/rel.json") || fail "relative trace path"

# a bad spec names its fault; no -o is a usage error
echo '{"traces": ["x.h5"], "polices": ["lru"]}' >"$tmp/typo.json"
"$gmsim" sweep -o "$tmp/t" "$tmp/typo.json" 2>"$tmp/e"
[ $? -eq 1 ] && grep -q 'unknown key "polices"' "$tmp/e" || fail "typo in spec: $(cat "$tmp/e")"
echo '{"traces": ["x.h5"], "allocators": ["jemalloc"]}' >"$tmp/al.json"
"$gmsim" sweep -o "$tmp/t" "$tmp/al.json" 2>"$tmp/e"
[ $? -eq 1 ] && grep -q "rmm-pool" "$tmp/e" || fail "bad allocator: $(cat "$tmp/e")"
"$gmsim" sweep "$tmp/spec.json" 2>"$tmp/e"
[ $? -eq 2 ] || fail "no -o: not a usage error"

# MPI in its module only: gmsim starts without Open MPI's libraries, and a
# copy without the module beside it says what is missing (exit 1)
if ldd "$gmsim" | grep -q -e libmpi -e libopen-pal; then
    fail "gmsim links Open MPI: $(ldd "$gmsim" | grep -e libmpi -e libopen-pal | tr '\n' ' ')"
fi
mkdir -p "$tmp/alone"
cp "$gmsim" "$tmp/alone/gmsim"
"$tmp/alone/gmsim" sweep --mpi -o "$tmp/t" "$tmp/spec.json" 2>"$tmp/e"
[ $? -eq 1 ] && grep -q "cannot load this gmsim's MPI module gmsim-mpi.so" "$tmp/e" ||
    fail "no MPI module: $(cat "$tmp/e")"

[ "$fails" -eq 0 ] && echo "sweep_mpi: all checks passed"
exit "$fails"
