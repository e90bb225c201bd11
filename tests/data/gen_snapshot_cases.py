#!/usr/bin/env python3
"""Write the hand-made PyTorch memory snapshots of tests/data/cases/.

Run:  python3 tests/data/gen_snapshot_cases.py     (from the repository root)

Each case is a small snapshot in the layout torch.cuda.memory._dump_snapshot()
writes (SNAPSHOTS.md): `segments` at dump time and `device_traces`. Every
entry below is what PyTorch's c10/cuda/CUDACachingAllocator.cpp
(DeviceCachingAllocator) writes for the program described in the comment, and
the comments say which function does what; tests/cli/import_fidelity.sh
replays each through `gmsim fidelity`, which must reproduce every recorded
segment call and tensor address. Constants (kSmallSize 1 MiB, kSmallBuffer
2 MiB, kLargeBuffer 20 MiB, kMinLargeAlloc 10 MiB, kRoundLarge 2 MiB,
expandable pages of 2 / 20 MiB) are PyTorch's.

The output is deterministic: running the script again rewrites the same bytes.
"""
import os
import pickle

MiB = 1 << 20
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'cases')

# Frames as _record_memory_history(stacks='all') records them (innermost first).
EMPTY_CACHE = [
    {'filename': '??', 'line': 0,
     'name': 'c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::emptyCache()'},
    {'filename': '/usr/lib/python3/site-packages/torch/cuda/memory.py', 'line': 192,
     'name': 'empty_cache'},
    {'filename': '/home/user/train.py', 'line': 40, 'name': 'main'},
]
MALLOC = [
    {'filename': '??', 'line': 0,
     'name': 'c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc('
             'signed char, unsigned long, CUstream_st*)'},
    {'filename': '/home/user/train.py', 'line': 30, 'name': 'forward'},
]

SETTINGS = {'PYTORCH_CUDA_ALLOC_CONF': '', 'max_split_size': -1,
            'garbage_collection_threshold': 0.0, 'expandable_segments': False,
            'pinned_num_register_threads': 1, 'release_lock_on_cudamalloc': False,
            'pinned_use_cuda_host_register': False,
            'roundup_power2_divisions': {str(1 << i): 0 for i in range(16)}}


def settings(**kw):
    s = dict(SETTINGS)
    s.update(kw)
    return s


class Trace:
    """Entries of one device, with a clock of 10 us per entry."""

    def __init__(self, t0=1_000_000):
        self.t = t0
        self.e = []

    def add(self, action, addr, size, frames=None, stream=0, **extra):
        ent = {'action': action, 'addr': addr, 'size': size, 'stream': stream,
               'time_us': self.t}
        if action == 'oom':
            ent.pop('addr')
            ent['device_free'] = extra.pop('device_free')
        if frames is not None:
            ent['frames'] = frames
        ent.update(extra)
        self.e.append(ent)
        self.t += 10

    def alloc(self, addr, size, **kw):
        self.add('alloc', addr, size, frames=kw.pop('frames', MALLOC), **kw)

    def free(self, addr, size, **kw):
        self.add('free_requested', addr, size, frames=[], **kw)
        self.add('free_completed', addr, size, frames=[], **kw)


def segment(addr, total, blocks, device=0, stream=0, small=False, expandable=False,
            pool=(0, 0)):
    """A dump-time segment; blocks = [(size, requested or 0 for inactive)]."""
    out, pos = [], addr
    for size, req in blocks:
        out.append({'address': pos, 'size': size, 'requested_size': req,
                    'state': 'active_allocated' if req else 'inactive', 'frames': []})
        pos += size
    assert pos == addr + total, (hex(addr), pos - addr, total)
    return {'device': device, 'address': addr, 'total_size': total,
            'allocated_size': sum(s for s, r in blocks if r),
            'active_size': sum(s for s, r in blocks if r),
            'requested_size': sum(r for s, r in blocks), 'stream': stream,
            'segment_type': 'small' if small else 'large', 'segment_pool_id': pool,
            'is_expandable': expandable, 'frames': [], 'blocks': out}


def write(name, snap):
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name + '.pickle'), 'wb') as f:
        pickle.dump(snap, f, protocol=4)


def empty_cache_case():
    """torch.cuda.empty_cache() between two phases and at the end.

    A (4 MiB) gets a 20 MiB large segment (get_allocation_size: < kMinLargeAlloc
    -> kLargeBuffer), B (1000 B) a 2 MiB small one. Both are freed; empty_cache
    (emptyCache -> release_cached_blocks) frees the large pool's whole free
    segments, then the small pool's (release_blocks), recording segment_free
    with the emptyCache stack. C (4 MiB) then needs a new segment: without
    replaying empty_cache a model would reuse A's. The last release has no
    frames and nothing after it: an empty_cache too.
    """
    t = Trace()
    S1, S2, S3 = 0x7f0040000000, 0x7f0030000000, 0x7f0020000000
    t.add('segment_alloc', S1, 20 * MiB, frames=MALLOC)
    t.alloc(S1, 4 * MiB)
    t.add('segment_alloc', S2, 2 * MiB, frames=MALLOC)
    t.alloc(S2, 1000)
    t.free(S1, 4 * MiB)
    t.free(S2, 1000)
    t.add('segment_free', S1, 20 * MiB, frames=EMPTY_CACHE)
    t.add('segment_free', S2, 2 * MiB, frames=EMPTY_CACHE)
    t.add('segment_alloc', S3, 20 * MiB, frames=MALLOC)
    t.alloc(S3, 4 * MiB)
    t.free(S3, 4 * MiB)
    t.add('segment_free', S3, 20 * MiB)
    write('empty-cache', {'segments': [], 'device_traces': [t.e],
                          'allocator_settings': settings()})


def empty_cache_noframes_case():
    """Releases recorded without frames (context=None): told apart by shape.

    X (1000 B) lives in a small segment all along. Phase 1 holds 100 MiB; the
    release of its segment is followed by an allocation served from the
    cache: an empty_cache. Phase 2's release is followed by a segment_alloc,
    the shape of a device-full retry, but the refused total (22 MiB held +
    20 MiB asked) is below the 102 MiB the process held in phase 1, so the
    device had room: it was an empty_cache too (IMPORT.md, "Releases").
    """
    t = Trace()
    S0, S1, S3, S4 = 0x7f0050000000, 0x7f0040000000, 0x7f0030000000, 0x7f0020000000
    t.add('segment_alloc', S0, 2 * MiB)
    t.alloc(S0, 1000)
    t.add('segment_alloc', S1, 100 * MiB)
    t.alloc(S1, 100 * MiB)
    t.free(S1, 100 * MiB)
    t.add('segment_free', S1, 100 * MiB)
    t.alloc(S0 + 1024, 1000)  # from the small segment's free tail: no segment call
    t.add('segment_alloc', S3, 20 * MiB)
    t.alloc(S3, 4 * MiB)
    t.free(S3, 4 * MiB)
    t.add('segment_free', S3, 20 * MiB)
    t.add('segment_alloc', S4, 20 * MiB)
    t.alloc(S4, 4 * MiB)
    segs = [segment(S0, 2 * MiB, [(1024, 1000), (1024, 1000), (2 * MiB - 2048, 0)], small=True),
            segment(S4, 20 * MiB, [(4 * MiB, 4 * MiB), (16 * MiB, 0)])]
    for e in t.e:
        e.pop('frames', None)
    write('empty-cache-noframes', {'segments': segs, 'device_traces': [t.e],
                                   'allocator_settings': settings()})


def device_full_case():
    """The device is full: cudaMalloc fails, PyTorch releases its cache and retries.

    100 MiB available. A and B take 40 MiB segments; A is freed (cached). C
    (50 MiB) fits no cached block; alloc_block's cudaMalloc(50 MiB) fails with
    80 MiB held (nothing is recorded); release_available_cached_blocks does
    nothing (no max_split_size_mb); release_cached_blocks frees A's whole
    segment (segment_free); the retry gets 50 MiB (segment_alloc), then the
    alloc. No oom entry. The device window: at least 90 MiB (held after C),
    less than 130 MiB (80 held + 50 refused). D (10 MiB) then splits B's
    freed block (best fit; > 1 MiB remains).
    """
    t = Trace()
    S1, S2, S3 = 0x7f1000000000, 0x7f0f00000000, 0x7f0e00000000
    t.add('segment_alloc', S1, 40 * MiB)
    t.alloc(S1, 40 * MiB)
    t.add('segment_alloc', S2, 40 * MiB)
    t.alloc(S2, 40 * MiB)
    t.free(S1, 40 * MiB)
    t.add('segment_free', S1, 40 * MiB)
    t.add('segment_alloc', S3, 50 * MiB)
    t.alloc(S3, 50 * MiB)
    t.free(S2, 40 * MiB)
    t.free(S3, 50 * MiB)
    t.alloc(S2, 10 * MiB)
    segs = [segment(S2, 40 * MiB, [(10 * MiB, 10 * MiB), (30 * MiB, 0)]),
            segment(S3, 50 * MiB, [(50 * MiB, 0)])]
    for e in t.e:
        e.pop('frames', None)
        e.pop('time_us')  # the older layout, as device-full-retry-10-streams
    write('device-full', {'segments': segs, 'device_traces': [t.e]})


def expandable_case():
    """expandable_segments:True from an empty allocator: map, unmap, map again.

    Large pages are 20 MiB (find_expandable_block: kLargeBuffer). A (30 MiB):
    no free block, so try_allocate_expandable_block creates the segment (one
    unmapped block over its whole reserved range) and map_block maps 30 MiB
    rounded up to pages: segment_map of 40 MiB at the base; should_split
    splits at >= 512 B remaining when expandable segments are configured, so
    10 MiB stay free after A. B (10 MiB) takes them exactly. C (25 MiB): the
    lowest unmapped range follows B (allocated), so map 25 MiB there: 40 MiB.
    A and C are freed; empty_cache unmaps the whole free pages (unmap_block):
    20 MiB under A (the page above holds B), 40 MiB under C. D (15 MiB): no
    free block is 15 MiB, so the lowest unmapped range (where A's first page
    was) is mapped again (20 MiB) and merges with the free 10 MiB above it.
    """
    t = Trace()
    L = 0x7f2000000000
    t.add('segment_map', L, 40 * MiB, frames=MALLOC)
    t.alloc(L, 30 * MiB)
    t.alloc(L + 30 * MiB, 10 * MiB)
    t.add('segment_map', L + 40 * MiB, 40 * MiB, frames=MALLOC)
    t.alloc(L + 40 * MiB, 25 * MiB)
    t.free(L, 30 * MiB)
    t.free(L + 40 * MiB, 25 * MiB)
    t.add('segment_unmap', L, 20 * MiB, frames=EMPTY_CACHE)
    t.add('segment_unmap', L + 40 * MiB, 40 * MiB, frames=EMPTY_CACHE)
    t.add('segment_map', L, 20 * MiB, frames=MALLOC)
    t.alloc(L, 15 * MiB)
    segs = [segment(L, 40 * MiB, [(15 * MiB, 15 * MiB), (15 * MiB, 0), (10 * MiB, 10 * MiB)],
                    expandable=True)]
    write('expandable', {'segments': segs, 'device_traces': [t.e],
                         'allocator_settings': settings(
                             PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True',
                             expandable_segments=True)})


def expandable_ranges_case():
    """A dump that lists one expandable segment as two mapped ranges.

    The trace is a ring buffer that starts mid-run: the segment (base L) was
    mapped over [L, L+100 MiB) and held P (30 MiB), T (20 MiB at +40) and
    Q (20 MiB at +70). T is freed and merges with the free 10 MiB on each
    side; empty_cache's unmap_block unmaps the one whole page inside
    ([+40, +60)), leaving a hole. snapshot() reports a segment per contiguous
    mapped range (a block whose prev is unmapped starts one): [L, L+40) and
    [L+60, L+100). The importer must rebuild the single segment with both
    ranges (and T) before the first entry.
    """
    t = Trace()
    L = 0x7f3000000000
    t.free(L + 40 * MiB, 20 * MiB)
    t.add('segment_unmap', L + 40 * MiB, 20 * MiB, frames=EMPTY_CACHE)
    segs = [segment(L, 40 * MiB, [(30 * MiB, 30 * MiB), (10 * MiB, 0)], expandable=True),
            segment(L + 60 * MiB, 40 * MiB, [(10 * MiB, 0), (20 * MiB, 20 * MiB), (10 * MiB, 0)],
                    expandable=True)]
    write('expandable-ranges', {'segments': segs, 'device_traces': [t.e],
                                'allocator_settings': settings(
                                    PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True',
                                    expandable_segments=True)})


def private_pool_case():
    """A CUDA-graph private pool's segment is never used for ordinary allocations.

    G0 (default pool) holds X (4 MiB) with 16 MiB free; G1 belongs to private
    pool (0, 1) (segment_pool_id) and holds Y (2 MiB) with 18 MiB free. Z
    (17 MiB, outside any capture) is served from the default pools only
    (get_pool), where no block fits, so it gets a new segment of 18 MiB
    (>= kMinLargeAlloc: rounded up to 2 MiB). Y and Z are freed; empty_cache
    releases Z's segment, but not G1: release_cached_blocks frees a private
    pool only once its use_count is 0 (the graph was destroyed).
    """
    t = Trace()
    G0, G1, S = 0x7f4000000000, 0x7f4100000000, 0x7f4200000000
    t.add('segment_alloc', S, 18 * MiB, frames=MALLOC)
    t.alloc(S, 17 * MiB)
    t.free(S, 17 * MiB)
    t.free(G1, 2 * MiB)
    t.add('segment_free', S, 18 * MiB, frames=EMPTY_CACHE)
    segs = [segment(G0, 20 * MiB, [(4 * MiB, 4 * MiB), (16 * MiB, 0)]),
            segment(G1, 20 * MiB, [(20 * MiB, 0)], pool=(0, 1))]
    write('private-pool', {'segments': segs, 'device_traces': [t.e],
                           'allocator_settings': settings()})


def two_devices_one_bad_case():
    """Device 0 is fine; device 1's trace frees a block that lies in no segment.

    Import and fidelity go through both devices: device 0 is imported and
    replayed exactly, device 1 is reported as damaged, and the exit status
    says something failed.
    """
    t0 = Trace()
    S = 0x7f5000000000
    t0.add('segment_alloc', S, 20 * MiB, frames=MALLOC)
    t0.alloc(S, 5 * MiB)
    t0.free(S, 5 * MiB)
    t1 = Trace()
    t1.free(0x7f6000000000, 1 * MiB)  # live before the trace, but in no segment at all
    segs = [segment(S, 20 * MiB, [(20 * MiB, 0)])]
    write('two-devices-one-bad', {'segments': segs, 'device_traces': [t0.e, t1.e],
                                  'allocator_settings': settings()})


def record_stream_case():
    """A block used on a second stream (Tensor.record_stream) is freed late.

    A (4 MiB) and B (8 MiB) split a 20 MiB segment. A was used on stream 1,
    so free() records free_requested and only inserts an event; the block
    stays out of the pool until process_events sees the event complete and
    calls free_block (free_completed). Meanwhile C and E (4 MiB each) take
    the rest of the segment: had A been reusable at free_requested, C would
    be at A's address. PyTorch's allocated_bytes falls at free_requested
    (it peaks at 16 MiB), active_bytes at free_completed (20 MiB).
    """
    t = Trace()
    S = 0x7f0050000000
    t.add('segment_alloc', S, 20 * MiB, frames=MALLOC)
    t.alloc(S, 4 * MiB)
    t.alloc(S + 4 * MiB, 8 * MiB)
    t.add('free_requested', S, 4 * MiB, frames=[])
    t.alloc(S + 12 * MiB, 4 * MiB)
    t.alloc(S + 16 * MiB, 4 * MiB)
    t.add('free_completed', S, 4 * MiB, frames=[])
    t.free(S + 4 * MiB, 8 * MiB)
    t.free(S + 12 * MiB, 4 * MiB)
    t.free(S + 16 * MiB, 4 * MiB)
    t.alloc(S, 4 * MiB)  # A's block is reusable now
    t.free(S, 4 * MiB)
    write('record-stream', {'segments': [segment(S, 20 * MiB, [(20 * MiB, 0)])],
                            'device_traces': [t.e], 'allocator_settings': settings()})


def main():
    record_stream_case()
    empty_cache_case()
    empty_cache_noframes_case()
    device_full_case()
    expandable_case()
    expandable_ranges_case()
    private_pool_case()
    two_devices_one_bad_case()


if __name__ == '__main__':
    main()
