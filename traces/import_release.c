/*
 * import_release.c - release bursts and the device window
 * (import_torch_int.h; the rules are traces/IMPORT.md, "Releases").
 *
 * PyTorch gives cached memory back to the driver in exactly three places,
 * each a run of segment_free (classic segments: release_block) or
 * segment_unmap (expandable ones: unmap_block) entries with nothing else
 * between them but the free_completed entries of synchronize_and_free_events
 * (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator):
 *
 *  1. torch.cuda.empty_cache() -> emptyCache -> release_cached_blocks;
 *  2. malloc, when no cached block fits and the driver refuses a new
 *     segment (alloc_block fails, which writes nothing):
 *     release_available_cached_blocks (only with max_split_size_mb) and
 *     release_cached_blocks, each followed by a retry; the retry that works
 *     writes segment_alloc / segment_map and then the alloc; if none works,
 *     an oom entry (addr = device_free from cudaMemGetInfo, size = the
 *     rounded request);
 *  3. malloc's garbage_collect_cached_blocks, before it asks the driver,
 *     only with garbage_collection_threshold and a memory fraction.
 *
 * Which one a burst is: frames that name emptyCache (torch.cuda.empty_cache
 * in Python) say 1. Otherwise the shape does: a burst right before a
 * segment_alloc / segment_map / oom is malloc's (2, or 2-or-3 when garbage
 * collection is configured); any other (at the start of a trace, between
 * phases, at the end) is an explicit empty_cache. Frames are not enough on
 * their own: with _record_memory_history(context="alloc") a release keeps
 * the stack of the segment's own allocation, which names malloc.
 *
 * The window. A retry burst shows the driver refused reserved-before + S
 * (S: the segment the retry then got), so the memory available to the
 * process was less than that; every segment the allocator did get shows it
 * had at least what it then held. A candidate retry whose refusal is below
 * what the process is known to have held cannot have been one: it is an
 * empty_cache without frames, and is emitted as one. An oom entry gives the
 * point estimate reserved + device_free.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "import_torch_int.h"

static int is_release(int action)
{
    return action == GM_TA_SEGMENT_FREE || action == GM_TA_SEGMENT_UNMAP;
}

static int is_grow(int action)
{
    return action == GM_TA_SEGMENT_ALLOC || action == GM_TA_SEGMENT_MAP;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !memcmp(s + n - m, suffix, m);
}

/* Frames of an entry that name torch.cuda.empty_cache. */
static int names_empty_cache(const pkl_value *frames)
{
    for (size_t i = 0; i < pkl_len(frames); i++) {
        const pkl_value *f = pkl_item(frames, i);
        const char *name = pkl_dict_str(f, "name"), *file = pkl_dict_str(f, "filename");
        if (!name) continue;
        if (strstr(name, "emptyCache")) return 1;
        if (!strcmp(name, "empty_cache") && file && ends_with(file, "cuda/memory.py")) return 1;
    }
    return 0;
}

typedef struct window {
    uint64_t lo, hi, est; /* hi 0: no bound; est 0: no oom estimate */
    uint64_t n_retry, n_oom, n_gc, n_reclassified;
} window;

/* A walk over the bursts of the trace: runs of releases and free_completed
 * that start and end with a release, with the recorded reserve followed. */
typedef struct walk {
    gm_imp_dev *d;
    uint64_t reserved;
    window w;
} walk;

/* Classify the burst [k0, k1). */
static void burst(walk *wk, size_t k0, size_t k1)
{
    gm_imp_dev *d = wk->d;
    gm_imp_ent *last = &d->e[k1 - 1];
    uint64_t released = 0;
    int named = 0;
    for (size_t k = k0; k < k1; k++)
        if (is_release(d->e[k].action)) {
            released += d->e[k].size;
            named |= names_empty_cache(d->e[k].frames);
        }
    last->burst_bytes = released;
    const gm_imp_ent *next = k1 < d->ne ? &d->e[k1] : NULL;
    if (named || !next || (!is_grow(next->action) && next->action != GM_TA_OOM)) {
        last->burst_end = GM_BURST_EMPTY_CACHE;
        return;
    }
    if (next->action == GM_TA_OOM) {
        last->burst_end = GM_BURST_OOM;
        return;
    }
    if (d->gc_conf) {
        last->burst_end = GM_BURST_GC_OR_RETRY;
        wk->w.n_gc++;
        return;
    }
    last->burst_end = GM_BURST_RETRY;
}

/* Pass 1: classify; pass 2 (after lo is known): bound, reclassify. */
static void scan(walk *wk, int pass)
{
    gm_imp_dev *d = wk->d;
    uint64_t r = wk->reserved;
    for (size_t k = 0; k < d->ne;) {
        gm_imp_ent *e = &d->e[k];
        if (is_release(e->action)) {
            size_t k1 = k, j = k;
            uint64_t before = r;
            for (; j < d->ne &&
                   (is_release(d->e[j].action) || d->e[j].action == GM_TA_FREE_COMPLETED);
                 j++)
                if (is_release(d->e[j].action)) {
                    k1 = j + 1;
                    r -= d->e[j].size < r ? d->e[j].size : r;
                }
            if (pass == 1) {
                burst(wk, k, k1);
            } else if (d->e[k1 - 1].burst_end == GM_BURST_RETRY) {
                gm_imp_ent *last = &d->e[k1 - 1];
                const gm_imp_ent *next = &d->e[k1];
                uint64_t refused = before + next->size; /* what the driver did not give */
                if (next->action == GM_TA_SEGMENT_ALLOC && refused <= wk->w.lo) {
                    last->burst_end = GM_BURST_EMPTY_CACHE; /* it had room: not a retry */
                    wk->w.n_reclassified++;
                } else {
                    wk->w.n_retry++;
                    /* a map retry: the refused pages are not known exactly */
                    if (next->action == GM_TA_SEGMENT_ALLOC && (!wk->w.hi || refused < wk->w.hi))
                        wk->w.hi = refused;
                }
            }
            k = k1;
            continue;
        }
        if (is_grow(e->action)) {
            r += e->size;
            if (pass == 1 && r > wk->w.lo) wk->w.lo = r;
        } else if (e->action == GM_TA_OOM && pass == 2) {
            wk->w.n_oom++;
            if (!wk->w.est) wk->w.est = r + e->device_free;
            /* the request (rounded) needed a segment of get_allocation_size() */
            uint64_t need = gm_pt_allocation_size(e->size, GM_PT_LARGE_BUFFER);
            if (!d->expandable_conf && (!wk->w.hi || r + need < wk->w.hi)) wk->w.hi = r + need;
        }
        k++;
    }
}

static void describe(const window *w, const char *chosen, char *buf, size_t len)
{
    int n = snprintf(
        buf, len,
        "%s; window from %" PRIu64 " release-and-retry burst%s and %" PRIu64 " oom entr%s", chosen,
        w->n_retry, w->n_retry == 1 ? "" : "s", w->n_oom, w->n_oom == 1 ? "y" : "ies");
    if (w->n_gc && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n,
                      "; %" PRIu64 " bursts before a new segment not used (garbage collection "
                      "is configured, so they may be its releases)",
                      w->n_gc);
    if (w->n_reclassified && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n,
                 "; %" PRIu64 " burst%s with room left on the device taken as empty_cache",
                 w->n_reclassified, w->n_reclassified == 1 ? "" : "s");
}

int gm_imp_bursts(gm_imp_dev *d, uint64_t reserved0, gm_import_trace *t, gm_err *err)
{
    walk wk = {.d = d, .reserved = reserved0};
    (void)err;
    scan(&wk, 1);
    scan(&wk, 2);
    for (size_t k = 0; k < d->ne; k++) {
        uint8_t b = d->e[k].burst_end;
        t->n_empty_cache += b == GM_BURST_EMPTY_CACHE;
        t->n_release_bursts += b != GM_BURST_NONE && b != GM_BURST_EMPTY_CACHE;
    }
    const window *w = &wk.w;
    if (!w->n_retry && !w->n_oom) return GM_OK; /* nothing says where the device ended */
    gm_trace_meta *m = &t->meta;
    m->device_avail_min_bytes = w->lo;
    m->device_avail_max_bytes = w->hi;
    const char *chosen;
    if (w->est && w->est >= w->lo && (!w->hi || w->est < w->hi)) {
        m->device_avail_bytes = w->est;
        chosen = "reserved + device_free at the first oom entry";
    } else {
        m->device_avail_bytes = w->lo;
        chosen = w->hi && w->lo >= w->hi
                     ? "the largest reserve held (the bursts disagree: the memory available to "
                       "the process changed during the run)"
                     : "the largest reserve held";
    }
    describe(w, chosen, t->avail_source, sizeof t->avail_source);
    return GM_OK;
}
