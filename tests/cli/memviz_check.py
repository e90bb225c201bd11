#!/usr/bin/env python3
"""memviz_check.py SNAPSHOT [EXPECT_SITE] - read a `gmsim export --memory-viz`
file with plain pickle (no torch) and walk it as PyTorch's viewer does
(torch/cuda/_memory_viz.py hands the dict to MemoryViz.js, which reads
segments[].blocks[] and device_traces[d][] with these keys): every segment is
cut into contiguous blocks that cover it, the sums match, every entry has the
keys of its action, and replaying the entries keeps allocs and frees paired
and ends at the segments' active blocks. Prints one summary line; exit 1 with
the reason on the first violation."""
import pickle
import sys


def fail(msg):
    print("memviz_check: " + msg, file=sys.stderr)
    sys.exit(1)


d = pickle.load(open(sys.argv[1], "rb"))
for k in ("segments", "device_traces", "allocator_settings"):
    if k not in d:
        fail("no key %r" % k)
st = d["allocator_settings"]
for k in ("PYTORCH_CUDA_ALLOC_CONF", "max_split_size", "garbage_collection_threshold",
          "expandable_segments", "roundup_power2_divisions"):
    if k not in st:
        fail("allocator_settings has no %r" % k)
active = {}
for s in d["segments"]:
    for k in ("device", "address", "total_size", "allocated_size", "active_size",
              "requested_size", "stream", "segment_type", "segment_pool_id", "is_expandable",
              "frames", "blocks"):
        if k not in s:
            fail("segment without %r" % k)
    if s["segment_type"] not in ("small", "large"):
        fail("segment_type %r" % s["segment_type"])
    at, alloc, act = s["address"], 0, 0
    for b in s["blocks"]:
        for k in ("address", "size", "requested_size", "state", "frames"):
            if k not in b:
                fail("block without %r" % k)
        if b["address"] != at:
            fail("segment 0x%x: block at 0x%x, expected 0x%x" % (s["address"], b["address"], at))
        if b["state"] not in ("active_allocated", "active_awaiting_free", "inactive"):
            fail("block state %r" % b["state"])
        if b["state"] != "inactive":
            act += b["size"]
            active[b["address"]] = b["requested_size"]
        if b["state"] == "active_allocated":
            alloc += b["size"]
        at += b["size"]
    if at != s["address"] + s["total_size"]:
        fail("segment 0x%x: blocks do not cover it" % s["address"])
    if alloc != s["allocated_size"] or act != s["active_size"]:
        fail("segment 0x%x: allocated/active sizes are not its blocks' sums" % s["address"])
traces = d["device_traces"]
if len(traces) != 1:
    fail("%d device traces" % len(traces))
live, n, sites = {}, {}, set()
for e in traces[0]:
    a = e.get("action")
    need = ("action", "size", "stream", "time_us", "frames") + (
        ("device_free",) if a == "oom" else ("addr",))
    for k in need:
        if k not in e:
            fail("%s entry without %r" % (a, k))
    n[a] = n.get(a, 0) + 1
    for f in e["frames"]:
        if set(f) != {"name", "filename", "line"}:
            fail("frame keys %r" % sorted(f))
        sites.add("%s:%d in %s" % (f["filename"], f["line"], f["name"]))
    if a == "alloc":
        if e["addr"] in live:
            fail("alloc at live 0x%x" % e["addr"])
        live[e["addr"]] = e["size"]
    elif a == "free_completed":
        live.pop(e["addr"], None)  # a block from before the first entry may be freed
    elif a not in ("free_requested", "segment_alloc", "segment_free", "segment_map",
                   "segment_unmap", "oom"):
        fail("unknown action %r" % a)
for addr, size in live.items():
    if active.get(addr) != size:
        fail("0x%x allocated in the trace, not an active block of that size at the end" % addr)
if len(sys.argv) > 2 and sys.argv[2] not in sites:
    fail("no frame %r among %d" % (sys.argv[2], len(sites)))
print("segments %d, blocks %d, entries %d, %s" % (
    len(d["segments"]), sum(len(s["blocks"]) for s in d["segments"]), len(traces[0]),
    ", ".join("%s %d" % kv for kv in sorted(n.items()))))
