#!/usr/bin/env bash
# memory_summary.sh GMSIM SOURCE_DIR - `gmsim run --summary` (PyTorch's
# torch.cuda.memory_summary() table) and run --json's "memory_stats" (its
# torch.cuda.memory_stats()) from the outside.
#
# The end state of a replay started from the recorded cache
# (--initial-state recorded) must be the state the snapshot's `segments`
# dump: torch.cuda.memory._snapshot() takes the segments at the moment its
# trace ends. That holds for a snapshot whose trace runs to the dump with
# nothing of the dumped state left out of it and that the model replays
# exactly. small-with-segments.pickle is one: its trace (97 entries) ends at
# the dump, its blocks are only active_allocated and inactive (no
# active_pending_free: no free is waiting on a stream, so PyTorch's
# allocated_bytes is the active blocks' sum), it holds both pools and split
# and whole segments, no expandable or private-pool ones, and gmsim
# fidelity finds it EXACT (import_fidelity.sh). gpt-medium-ctx128-train
# (19136 entries, 377 segments, the same properties) is a second, larger one.
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

# dumped NAME: the snapshot's own figures, from its segments, as PyTorch's
# stats would name them (inactive_split: free blocks of split segments)
dumped() {
    python3 - "$data/$1.pickle" <<'EOF'
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
segs = d["segments"]
assert all(b["state"] in ("active_allocated", "inactive") for s in segs for b in s["blocks"])
act = [b for s in segs for b in s["blocks"] if b["state"] == "active_allocated"]
split = [b for s in segs if len(s["blocks"]) > 1 for b in s["blocks"] if b["state"] == "inactive"]
large = [s for s in segs if s["segment_type"] == "large"]
print(sum(s["total_size"] for s in segs), sum(b["size"] for b in act), len(segs), len(act),
      len(split), sum(b["size"] for b in split), sum(s["total_size"] for s in large))
EOF
}

# stats JSON NAMES...: those memory_stats keys of tenant 0, space-separated
stats() {
    local j=$1
    shift
    python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["tenants"][0]["memory_stats"]; print(" ".join(str(m[k]) for k in sys.argv[2:]))' "$j" "$@"
}

for name in small-with-segments gpt-medium-ctx128-train; do
    want=$(dumped "$name") || { fail "$name: cannot read the snapshot"; continue; }
    "$gmsim" run --capacity 80GiB --initial-state recorded "$data/$name.pickle" \
        --json "$tmp/$name.json" >/dev/null 2>&1 || fail "$name: run --json"
    got=$(stats "$tmp/$name.json" reserved_bytes.all.current allocated_bytes.all.current \
        segment.all.current allocation.all.current inactive_split.all.current \
        inactive_split_bytes.all.current reserved_bytes.large_pool.current)
    [ "$got" = "$want" ] || fail "$name: end state (reserved allocated segments allocations" \
        "split-blocks split-bytes large-reserved) $got, the snapshot's segments say $want"
done

# the JSON is memory_stats(): PyTorch's keys in its sorted order, and every
# Stat adds up (current = allocated - freed; all = large_pool + small_pool)
python3 - "$tmp/small-with-segments.json" <<'EOF' || fail "memory_stats keys or sums"
import json, sys
m = json.load(open(sys.argv[1]))["tenants"][0]["memory_stats"]
keys = list(m)
assert keys == sorted(keys), "not in memory_stats() order"
for k in ("num_ooms", "num_alloc_retries", "num_device_alloc", "num_device_free",
          "oversize_allocations.peak", "oversize_segments.current", "requested_bytes.all.freed"):
    assert k in m, k
assert m["max_split_size"] == -1
for metric in ("allocated_bytes", "active_bytes", "requested_bytes", "reserved_bytes",
               "inactive_split_bytes", "allocation", "active", "segment", "inactive_split"):
    for pool in ("all", "large_pool", "small_pool"):
        p = metric + "." + pool + "."
        assert m[p + "current"] == m[p + "allocated"] - m[p + "freed"], p
        assert m[p + "peak"] >= m[p + "current"], p
    for fig in ("current", "allocated", "freed"):
        a = metric + ".%s." + fig
        assert m[a % "all"] == m[a % "large_pool"] + m[a % "small_pool"], a
assert m["segment.all.current"] > 0 and m["allocation.all.allocated"] > m["allocation.all.current"]
EOF

# the table: PyTorch's layout (77 columns, its rows in its order) and its
# _format_size of the dumped reserved bytes in "GPU reserved memory"
"$gmsim" run --capacity 80GiB --initial-state recorded --summary \
    "$data/small-with-segments.pickle" >"$tmp/sum.txt" 2>&1 || fail "run --summary"
sed -n '/^torch.cuda.memory_summary()/,$p' "$tmp/sum.txt" | tail -n +2 >"$tmp/table.txt"
python3 - "$tmp/table.txt" "$(dumped small-with-segments)" <<'EOF' || fail "summary table: $(head -c 800 "$tmp/table.txt")"
import sys
lines = open(sys.argv[1]).read().splitlines()
reserved, allocated = (int(x) for x in sys.argv[2].split()[:2])
assert lines and all(len(l) == 77 and l[0] == "|" and l[-1] == "|" for l in lines), "width"
def size(sz, pref):  # PyTorch's _format_size, written out again
    units = ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"]
    u = 0
    while u + 1 < len(units) and pref >= 768 * 1024:
        u, sz, pref = u + 1, sz // 1024, pref / 1024
    return "%6d %s" % (sz, units[u])
names = [l[1:24].strip() for l in lines]
order = ["Allocated memory", "Active memory", "Requested memory", "GPU reserved memory",
         "Non-releasable memory", "Allocations", "Active allocs", "GPU reserved segments",
         "Non-releasable allocs", "Oversize allocations", "Oversize GPU segments"]
pos = [names.index(n) for n in order]
assert pos == sorted(pos), "row order"
for n in order[:9]:
    i = names.index(n)
    assert names[i + 1] == "from large pool" and names[i + 2] == "from small pool", n
cells = lambda n: [c.strip() for c in lines[names.index(n)].split("|")[2:6]]
assert cells("GPU reserved memory")[0] == size(reserved, reserved).strip(), cells("GPU reserved memory")
assert cells("Allocated memory")[0] == size(allocated, allocated).strip(), cells("Allocated memory")
assert "PyTorch CUDA memory summary, device ID 0" in lines[1]
assert "CUDA OOMs: 0" in lines[3] and "cudaMalloc retries: 0" in lines[3]
EOF

# max_split_size as the setting gives it, in bytes
"$gmsim" run --capacity 80GiB --alloc-conf max_split_size_mb:128 "$data/small-with-segments.pickle" \
    --json "$tmp/ms.json" >/dev/null 2>&1 || fail "run max_split_size_mb"
[ "$(stats "$tmp/ms.json" max_split_size)" = $((128 << 20)) ] || fail "max_split_size: $(stats "$tmp/ms.json" max_split_size)"

# another allocator model keeps no PyTorch statistics: said, not invented
"$gmsim" run --capacity 80GiB --allocator rmm-pool --summary "$data/small-with-segments.pickle" \
    --json "$tmp/rmm.json" >"$tmp/rmm.txt" 2>&1 || fail "rmm-pool run --summary"
grep -q "not available: allocator rmm-pool keeps no PyTorch statistics" "$tmp/rmm.txt" ||
    fail "rmm-pool: no 'not available' line: $(tail -3 "$tmp/rmm.txt")"
grep -q "Allocated memory" "$tmp/rmm.txt" && fail "rmm-pool printed a table"
python3 -c 'import json,sys; sys.exit("memory_stats" in json.load(open(sys.argv[1]))["tenants"][0])' \
    "$tmp/rmm.json" || fail "rmm-pool JSON has memory_stats"

[ "$fails" -eq 0 ] || exit 1
echo "memory_summary: ok"
