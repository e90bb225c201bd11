/*
 * seglist.h - a reusable snapshot of an allocator's segments for policies:
 * fetch all gm_seg_info, filter, sort. Policies run only under memory
 * pressure, so a snapshot per decision is cheap next to the driver call.
 */
#ifndef GM_SEGLIST_H
#define GM_SEGLIST_H

#include "sim/alloc.h"

typedef struct gm_seglist {
    gm_seg_info *v;
    size_t n, cap;
} gm_seglist;

/* Refresh the snapshot; returns GM_OK or GM_ENOMEM. */
int gm_seglist_fetch(gm_seglist *l, gm_alloc *a);
/* Only the releasable segments (releasable > 0), in no particular order:
 * sort them (the model's releasable(), else segments() filtered). */
int gm_seglist_fetch_releasable(gm_seglist *l, gm_alloc *a);
/* Only the classic segments that are one free block (gm_alloc_ops.
 * whole_free: PyTorch's free blocks that are not split), in no particular
 * order (the model's whole_free(), else releasable() filtered). */
int gm_seglist_fetch_whole_free(gm_seglist *l, gm_alloc *a);
void gm_seglist_free(gm_seglist *l);

/* Keep only entries for which keep(info, ctx) is true. */
void gm_seglist_filter(gm_seglist *l, int (*keep)(const gm_seg_info *, const void *),
                       const void *ctx);
/* Order as PyTorch's free-block set: (stream, size, address). */
int gm_seg_cmp_pool_order(const void *a, const void *b);

/* The segments in short (gm_seg_brief), as gm_seglist_fetch and
 * gm_seglist_fetch_releasable list them: the model's briefs, else the
 * full views (in full) cut short. */
typedef struct gm_brieflist {
    const gm_seg_brief *v; /* the list: buf, or the model's own (borrowed) */
    size_t n;
    gm_seg_brief *buf; /* the list's own room, cap entries */
    size_t cap;
    /* 1: v is the model's array (gm_alloc_ops.releasable_briefs), read in
     * place: it holds only until the model's next change (gm_brieflist_own
     * copies it before one) */
    int borrowed;
    gm_seglist full; /* the views, for a model without briefs */
} gm_brieflist;

/* Refresh the list with every segment (into buf), or only the releasable
 * ones (borrowed where the model has them at hand); GM_OK or GM_ENOMEM. */
int gm_brieflist_fetch(gm_brieflist *l, gm_alloc *a);
int gm_brieflist_fetch_releasable(gm_brieflist *l, gm_alloc *a);
/* A borrowed list copied into buf, the same entries in the same order,
 * before the model changes; GM_OK (also when not borrowed) or GM_ENOMEM. */
int gm_brieflist_own(gm_brieflist *l);
/* A borrowed list emptied, so that nothing reads it once the model has
 * moved on; an own one is left as it is. */
void gm_brieflist_forget(gm_brieflist *l);
void gm_brieflist_free(gm_brieflist *l);
/* The list of v[0..n) cut short, in that order; GM_OK or GM_ENOMEM. */
int gm_brieflist_of(gm_brieflist *l, const gm_seg_info *v, size_t n);

#endif
