/*
 * import_torch_int.h - the snapshot importer's working state, shared by its
 * three files (not a public header):
 *
 *   import_torch.c    the main flow: dump state, trace entries, undoing the
 *                     trace, categories, events, metadata;
 *   import_xseg.c     expandable segments: the mapped ranges a dump lists
 *                     one per segment entry, undone through segment_map /
 *                     segment_unmap, and grouped back into the expandable
 *                     segments they belong to;
 *   import_release.c  what the recorded allocator did that the trace shows
 *                     only as segment_free / segment_unmap bursts
 *                     (torch.cuda.empty_cache(), device full: release and
 *                     retry) and the device memory window it implies.
 *
 * The rules are traces/IMPORT.md; the input is traces/SNAPSHOTS.md.
 */
#ifndef GM_IMPORT_TORCH_INT_H
#define GM_IMPORT_TORCH_INT_H

#include <stddef.h>
#include <stdint.h>

#include "import_torch.h"
#include "alloc_conf.h"
#include "base/addrmap.h"

#define GM_IMP_NONE UINT32_MAX

/* What a release burst was (import_release.c). */
enum gm_imp_burst {
    GM_BURST_NONE = 0,
    GM_BURST_EMPTY_CACHE, /* torch.cuda.empty_cache(): emitted as an event      */
    GM_BURST_RETRY,       /* device full: release_*_cached_blocks, then retry    */
    GM_BURST_GC_OR_RETRY, /* the same shape with garbage collection enabled      */
    GM_BURST_OOM,         /* released before an allocation that failed anyway   */
};

typedef struct gm_imp_ent { /* one trace entry */
    const pkl_value *frames;
    uint32_t site; /* its call site (import_sites.c), 0 = unknown */
    uint64_t addr, size, stream, time_us, device_free;
    uint64_t pid0, pid1;  /* pool_id of the entry when recorded (newer PyTorch) */
    uint64_t burst_bytes; /* last entry of a burst: bytes it released          */
    uint32_t blk;         /* block record of alloc / free_* entries; NONE otherwise */
    uint32_t region;      /* phase region (categories)                         */
    uint8_t action, phase, zero_grad, hint;
    uint8_t has_pid;   /* pid0/pid1 were recorded                          */
    uint8_t small;     /* segment_map/unmap: the range is in a small pool  */
    uint8_t burst_end; /* enum gm_imp_burst on the last entry of a burst    */
} gm_imp_ent;

typedef struct gm_imp_seg { /* a classic (cudaMalloc'd) segment */
    uint64_t addr, size, stream, pid0, pid1;
    uint8_t small, live; /* live: exists at the current point of the walk */
} gm_imp_seg;

typedef struct gm_imp_xr { /* a mapped range of an expandable segment */
    uint64_t addr, size, stream, pid0, pid1;
    uint8_t small;
} gm_imp_xr;

typedef struct gm_imp_blk { /* one block lifetime: a live tensor */
    uint64_t addr, requested, block_size, stream;
    const pkl_value *frames; /* at_dump: the dump's frames of the block (may be NULL) */
    uint32_t alloc_ent, freereq_ent, freecomp_ent;
    uint32_t site; /* call site that allocated it (its alloc entry's, else the dump's) */
    uint8_t at_dump, category;
} gm_imp_blk;

typedef struct gm_imp_range { /* external_annotations Optimizer.* range */
    uint64_t start_us, end_us;
    uint8_t zero_grad;
} gm_imp_range;

typedef struct gm_imp_dev {
    const char *name; /* input name */
    int device;
    int expandable_conf; /* the snapshot's allocator_settings had expandable_segments */
    int gc_conf;         /* ... garbage_collection_threshold > 0                     */
    gm_imp_ent *e;
    size_t ne;
    gm_imp_seg *s;
    size_t ns, cs;
    gm_imp_xr *x; /* mapped ranges now (during the undo: at that point of the trace) */
    size_t nx, cx;
    gm_imp_blk *b;
    size_t nb, cb;
    gm_addrmap live, segmap; /* addr -> blk / seg index */
    gm_imp_range *ranges;
    size_t nranges, cranges;
    int has_time;
    uint64_t t0_us;
    uint8_t *region_phase;
} gm_imp_dev;

/* Shared helpers (import_torch.c). */
int gm_imp_grow(void *pp, size_t *cap, size_t need, size_t elem);
/* The importer's out-of-memory error; a macro around gm_errf, so the
 * compiler sees that it returns non-zero (base/err.h). */
#define gm_imp_oom(err) gm_errf((err), GM_ENOMEM, "out of host memory importing the snapshot")
int gm_imp_undo_err(const gm_imp_dev *d, size_t k, const char *what, gm_err *err);
const char *gm_imp_action_name(int action);

/* import_sites.c: the call sites of one device's trace (IMPORT.md). */
typedef struct gm_imp_sites {
    gm_addrmap by_list;  /* frames list -> site                    */
    gm_addrmap by_frame; /* frame dict -> enum gm_frame_kind        */
    gm_addrmap by_text;  /* hash of a site's text (probed) -> site  */
    gm_site *rows;       /* rows[k-1] is site k; owned strings      */
    size_t n, cap;
} gm_imp_sites;
int gm_imp_sites_init(gm_imp_sites *s); /* GM_OK / GM_ENOMEM */
void gm_imp_sites_free(gm_imp_sites *s);
/* The site of a stack (innermost frame first): 0 when it has no Python
 * frame (or frames is NULL). GM_ENOMEM on failure. */
int gm_imp_site_of(gm_imp_sites *s, const pkl_value *frames, uint32_t *site);

/* import_xseg.c */
int gm_imp_xr_add_dump(gm_imp_dev *d, uint64_t addr, uint64_t size, uint64_t stream, int small,
                       uint64_t pid0, uint64_t pid1, gm_err *err);
int gm_imp_xr_undo(gm_imp_dev *d, size_t k, gm_err *err); /* entry k: segment_map/unmap */
/* The /initial_state rows of the expandable segments (segment + mapped rows),
 * appended to rows[*n] (room for 2 * d->nx + 1 more is the caller's). */
void gm_imp_xr_rows(const gm_imp_dev *d, gm_init_row *rows, size_t *n, gm_import_trace *t);

/* import_release.c: classify every burst (gm_imp_ent.burst_end), infer the
 * device window into t->meta.device_avail_*. reserved0 = bytes reserved
 * before the first entry. */
int gm_imp_bursts(gm_imp_dev *d, uint64_t reserved0, gm_import_trace *t, gm_err *err);

#endif
