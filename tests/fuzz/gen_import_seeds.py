#!/usr/bin/env python3
"""Small seed snapshots for fuzz_import (see README.md): python3 gen_import_seeds.py OUTDIR

Each real snapshot in tests/data is cut down to the last few trace entries, the segments they
touch (plus a couple of others), stacks of at most three frames (the ones the importer's phase
rules look at), in several pickle protocols; a few hand-made snapshots add what the real ones
lack (two devices, an expandable segment with segment_map, an oom entry, rounding
settings, annotations, the legacy bare list); and a few structured inputs (0xff, then choices
that fuzz_import.c turns into a snapshot). Small seeds mutate far faster than the MB-sized
originals. Loaded with a restricted unpickler: the inputs never construct Python objects.
"""
import os
import pickle
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
KEYWORDS = ("forward", "backward", "Engine", "optim", "step", "zero_grad", "_apply", "_to_copy")


class Plain(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing global {module}.{name}")


def short_frames(frames):
    if not isinstance(frames, list):
        return frames
    keep = [f for f in frames if any(k in str(f.get("name", "")) for k in KEYWORDS)][:2]
    return frames[:1] + keep


def trim_snapshot(d, n_entries, n_extra_segments=2):
    if isinstance(d, list):  # legacy: a bare list of segments
        return [trim_segment(s) for s in d[:3]]
    out = {k: v for k, v in d.items() if k not in ("segments", "device_traces")}
    traces = []
    for tr in d.get("device_traces", []):
        tr = tr[-n_entries:] if n_entries else []
        traces.append([{**e, "frames": short_frames(e.get("frames", []))} for e in tr])
    out["device_traces"] = traces
    addrs = [e.get("addr", 0) for tr in traces for e in tr]
    segs = []
    for i, s in enumerate(d["segments"]):
        lo, hi = s["address"], s["address"] + s["total_size"]
        if i < n_extra_segments or any(lo <= a < hi for a in addrs):
            segs.append(trim_segment(s))
    out["segments"] = segs
    if "external_annotations" in out:
        out["external_annotations"] = out["external_annotations"][:4]
    return out


def trim_segment(s):
    s = dict(s)
    if "frames" in s:
        s["frames"] = short_frames(s["frames"])
    blocks = []
    for b in s.get("blocks", []):
        b = dict(b)
        if "frames" in b:
            b["frames"] = short_frames(b["frames"])
        if "history" in b:
            b["history"] = [{**h, "frames": short_frames(h.get("frames", []))}
                            for h in b["history"][:1]]
        blocks.append(b)
    s["blocks"] = blocks
    return s


def frame(name, filename="model.py"):
    return {"name": name, "filename": filename, "line": 1}


def handmade():
    MiB = 1 << 20
    fwd, bwd = [frame("forward")], [frame("torch::autograd::Engine::thread_main", "??")]
    opt = [frame("step", "torch/optim/adam.py")]
    base = 0x7F0000000000
    seg0 = {"device": 0, "address": base, "total_size": 20 * MiB, "stream": 0,
            "segment_type": "large", "is_expandable": False, "frames": [],
            "blocks": [{"address": base, "size": 2 * MiB, "requested_size": 2 * MiB - 100,
                        "state": "active_allocated", "frames": fwd},
                       {"address": base + 2 * MiB, "size": 18 * MiB, "requested_size": 0,
                        "state": "inactive", "frames": []}]}
    seg1 = {"device": 1, "address": base + 64 * MiB, "total_size": 2 * MiB, "stream": 7,
            "segment_type": "small", "is_expandable": False, "frames": [],
            "blocks": [{"address": base + 64 * MiB, "size": 2 * MiB, "requested_size": 0,
                        "state": "inactive", "frames": []}]}
    t = 1_700_000_000_000_000
    dev0 = [
        {"action": "alloc", "addr": base + 2 * MiB, "size": 4 * MiB, "stream": 0,
         "time_us": t, "frames": fwd},
        {"action": "alloc", "addr": base, "size": 2 * MiB - 100, "stream": 0,
         "time_us": t + 1, "frames": bwd},
        {"action": "free_requested", "addr": base + 2 * MiB, "size": 4 * MiB, "stream": 0,
         "time_us": t + 2, "frames": opt},
        {"action": "free_completed", "addr": base + 2 * MiB, "size": 4 * MiB, "stream": 0,
         "time_us": t + 3, "frames": opt},
        {"action": "oom", "addr": 0, "size": 80 * MiB, "stream": 0, "device_free": 10 * MiB,
         "time_us": t + 4, "frames": []},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": t + 5,
         "frames": []},
    ]
    dev1 = [
        {"action": "segment_alloc", "addr": base + 64 * MiB, "size": 2 * MiB, "stream": 7,
         "time_us": t, "frames": []},
        {"action": "alloc", "addr": base + 64 * MiB, "size": 512, "stream": 7,
         "time_us": t + 1, "frames": fwd},
        {"action": "free_completed", "addr": base + 64 * MiB, "size": 512, "stream": 7,
         "time_us": t + 2, "frames": []},
    ]
    rp2 = {str(1 << i): (4 if i < 8 else 1) for i in range(16)}
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128",
                "max_split_size": 128 * MiB, "garbage_collection_threshold": 0.6,
                "expandable_segments": False, "roundup_power2_divisions": rp2,
                "release_lock_on_cudamalloc": False}
    ann = [{"device": 0, "stage": "START", "name": "Optimizer.step#Adam.step",
            "time_us": t + 2},
           {"device": 0, "stage": "END", "name": "Optimizer.step#Adam.step", "time_us": t + 3}]
    two_dev = {"segments": [seg0, seg1], "device_traces": [dev0, dev1],
               "allocator_settings": settings, "external_annotations": ann}
    exp_seg = {"device": 0, "address": base, "total_size": 4 * MiB, "stream": 0,
               "segment_type": "large", "is_expandable": True, "frames": [],
               "blocks": [{"address": base, "size": 4 * MiB, "requested_size": 0,
                           "state": "inactive", "frames": []}]}
    expandable = {"segments": [exp_seg], "device_traces": [[
        {"action": "segment_map", "addr": base, "size": 4 * MiB, "stream": 0, "time_us": t,
         "frames": []},
        {"action": "alloc", "addr": base, "size": 3 * MiB, "stream": 0, "time_us": t + 2,
         "frames": fwd},
        {"action": "free_completed", "addr": base, "size": 3 * MiB, "stream": 0,
         "time_us": t + 3, "frames": []}]],
        "allocator_settings": {**settings, "expandable_segments": True}}
    legacy = [dict(seg0)]
    return {"two-devices": two_dev, "expandable": expandable, "legacy-list": legacy,
            "no-trace": {"segments": [seg0], "device_traces": [[]]}}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "fuzz-import-seeds"
    os.makedirs(out, exist_ok=True)
    n = 0
    for fn in sorted(os.listdir(DATA)):
        if not fn.endswith(".pickle"):
            continue
        with open(os.path.join(DATA, fn), "rb") as f:
            d = Plain(f).load()
        stem = fn[: -len(".pickle")]
        for k, proto in ((6, 2), (30, 4)):
            with open(os.path.join(out, f"{stem}-last{k}-p{proto}.pickle"), "wb") as f:
                pickle.dump(trim_snapshot(d, k), f, protocol=proto)
            n += 1
    for name, d in handmade().items():
        for proto in (0, 5):
            with open(os.path.join(out, f"{name}-p{proto}.pickle"), "wb") as f:
                pickle.dump(d, f, protocol=proto)
            n += 1
    # structured inputs (fuzz_import.c): 0xff, then the choices
    rng = random.Random(1)
    for i in range(8):
        with open(os.path.join(out, f"structured-{i}.bin"), "wb") as f:
            f.write(b"\xff" + bytes(rng.randrange(256) for _ in range(64 + 64 * i)))
        n += 1
    print(f"wrote {n} seeds to {out}")


if __name__ == "__main__":
    main()
