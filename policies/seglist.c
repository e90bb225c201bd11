/* seglist.c - see seglist.h. */
#include "seglist.h"

#include <stdlib.h>
#include <string.h>

static int fetch(gm_seglist *l, gm_alloc *a, size_t (*get)(gm_alloc *, gm_seg_info *, size_t))
{
    if (!l->v) { /* never NULL after a fetch: qsort(NULL, 0) is undefined */
        l->v = malloc(16 * sizeof *l->v);
        if (!l->v) return GM_ENOMEM;
        l->cap = 16;
    }
    for (;;) {
        size_t n = get(a, l->v, l->cap);
        if (n <= l->cap) {
            l->n = n;
            return GM_OK;
        }
        size_t cap = n * 2;
        gm_seg_info *v = realloc(l->v, cap * sizeof *v);
        if (!v) return GM_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
}

int gm_seglist_fetch(gm_seglist *l, gm_alloc *a)
{
    return fetch(l, a, a->ops->segments);
}

static int releasable(const gm_seg_info *s, const void *ctx)
{
    (void)ctx;
    return s->releasable > 0;
}

int gm_seglist_fetch_releasable(gm_seglist *l, gm_alloc *a)
{
    if (a->ops->releasable) return fetch(l, a, a->ops->releasable);
    int rc = fetch(l, a, a->ops->segments);
    if (rc == GM_OK) gm_seglist_filter(l, releasable, NULL);
    return rc;
}

static int whole_free(const gm_seg_info *s, const void *ctx)
{
    (void)ctx;
    return !s->expandable && s->n_allocated == 0 && s->n_blocks == 1;
}

int gm_seglist_fetch_whole_free(gm_seglist *l, gm_alloc *a)
{
    if (a->ops->whole_free) return fetch(l, a, a->ops->whole_free);
    int rc = gm_seglist_fetch_releasable(l, a);
    if (rc == GM_OK) gm_seglist_filter(l, whole_free, NULL);
    return rc;
}

/* Room in buf for n entries (v left as it is). */
static int buf_room(gm_brieflist *l, size_t n)
{
    if (l->buf && l->cap >= n) return GM_OK;
    size_t cap = n > 8 ? 2 * n : 16;
    gm_seg_brief *v = realloc(l->buf, cap * sizeof *v);
    if (!v) return GM_ENOMEM;
    l->buf = v;
    l->cap = cap;
    return GM_OK;
}

/* Room in buf for n entries; the list becomes buf's (not borrowed). */
static int brief_room(gm_brieflist *l, size_t n)
{
    int rc = buf_room(l, n);
    l->v = l->buf;
    l->borrowed = 0;
    return rc;
}

static int brief_fetch(gm_brieflist *l, gm_alloc *a, int releasable_only)
{
    size_t n;
    const gm_seg_brief *own;
    if (releasable_only && a->ops->releasable_briefs &&
        (own = a->ops->releasable_briefs(a, &n)) != NULL) {
        l->v = own;
        l->n = n;
        l->borrowed = 1;
        return GM_OK;
    }
    if (a->ops->briefs) {
        if (brief_room(l, 0) != GM_OK) return GM_ENOMEM;
        for (;;) {
            n = a->ops->briefs(a, releasable_only, l->buf, l->cap);
            if (n <= l->cap) {
                l->n = n;
                return GM_OK;
            }
            if (brief_room(l, n) != GM_OK) return GM_ENOMEM;
        }
    }
    int rc =
        releasable_only ? gm_seglist_fetch_releasable(&l->full, a) : gm_seglist_fetch(&l->full, a);
    if (rc != GM_OK) return GM_ENOMEM;
    return gm_brieflist_of(l, l->full.v, l->full.n);
}

int gm_brieflist_fetch(gm_brieflist *l, gm_alloc *a)
{
    return brief_fetch(l, a, 0);
}

int gm_brieflist_fetch_releasable(gm_brieflist *l, gm_alloc *a)
{
    return brief_fetch(l, a, 1);
}

int gm_brieflist_of(gm_brieflist *l, const gm_seg_info *v, size_t n)
{
    if (brief_room(l, n) != GM_OK) return GM_ENOMEM;
    for (size_t i = 0; i < n; i++)
        l->buf[i] = gm_seg_brief_of(&v[i]);
    l->n = n;
    return GM_OK;
}

int gm_brieflist_own(gm_brieflist *l)
{
    if (!l->borrowed) return GM_OK;
    if (buf_room(l, l->n) != GM_OK) return GM_ENOMEM; /* still borrowed */
    if (l->n) memcpy(l->buf, l->v, l->n * sizeof *l->v);
    l->v = l->buf;
    l->borrowed = 0;
    return GM_OK;
}

void gm_brieflist_forget(gm_brieflist *l)
{
    if (!l->borrowed) return;
    l->v = l->buf;
    l->n = 0;
    l->borrowed = 0;
}

void gm_brieflist_free(gm_brieflist *l)
{
    free(l->buf);
    l->v = l->buf = NULL;
    l->borrowed = 0;
    l->n = l->cap = 0;
    gm_seglist_free(&l->full);
}

void gm_seglist_free(gm_seglist *l)
{
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

void gm_seglist_filter(gm_seglist *l, int (*keep)(const gm_seg_info *, const void *),
                       const void *ctx)
{
    size_t j = 0;
    for (size_t i = 0; i < l->n; i++)
        if (keep(&l->v[i], ctx)) l->v[j++] = l->v[i];
    l->n = j;
}

int gm_seg_cmp_pool_order(const void *x, const void *y)
{
    const gm_seg_info *a = x, *b = y;
    if (a->stream != b->stream) return a->stream < b->stream ? -1 : 1;
    if (a->size != b->size) return a->size < b->size ? -1 : 1;
    if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
    return 0;
}
