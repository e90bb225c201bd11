/* trace_scan.c - see trace_scan.h. */
#include "trace_scan.h"

#include <stdlib.h>
#include <string.h>

/* A live entry packs the requested size (< 2^48) and the category (top byte). */
#define CAT_SHIFT 56
#define SIZE_MASK ((1ull << 48) - 1)
#define LIVE_BIT (1ull << 48)

/* The bin of a size in the histograms' edges (scan_init: [0, 512), then
 * [2^(8+k), 2^(9+k)) for bin k): bin 0 under 512, else the size's bit
 * length less 9. A checked trace's sizes are at most 2^48 (traces/FORMAT.md),
 * inside the last edge, 2^49. */
static inline size_t size_bin(uint64_t size)
{
    return size < 512 ? 0 : (size_t)(55 - __builtin_clzll(size));
}

static int scan_init(gm_trace_scan *s, int dense_ids, gm_err *err)
{
    memset(s, 0, sizeof *s);
    double edges[GM_SCAN_HIST_BINS + 1];
    edges[0] = 0;
    for (int k = 1; k <= GM_SCAN_HIST_BINS; k++)
        edges[k] = (double)(1ull << (8 + k));
    s->h_count = gsl_histogram_alloc(GM_SCAN_HIST_BINS);
    s->h_bytes = gsl_histogram_alloc(GM_SCAN_HIST_BINS);
    if (!s->h_count || !s->h_bytes || gm_live_init(&s->live, dense_ids) != GM_OK)
        return gm_errf(err, GM_ENOMEM, "out of host memory");
    gsl_histogram_set_ranges(s->h_count, edges, GM_SCAN_HIST_BINS + 1);
    gsl_histogram_set_ranges(s->h_bytes, edges, GM_SCAN_HIST_BINS + 1);
    return GM_OK;
}

void gm_trace_scan_free(gm_trace_scan *s)
{
    gm_live_free(&s->live);
    gm_site_tally_free(&s->tally);
    gm_sites_free(&s->sites);
    if (s->h_count) gsl_histogram_free(s->h_count);
    if (s->h_bytes) gsl_histogram_free(s->h_bytes);
    s->h_count = s->h_bytes = NULL;
}

static void note_live(gm_trace_scan *s, uint64_t index, uint64_t t_ns)
{
    if (s->live_bytes > s->peak_live) {
        s->peak_live = s->live_bytes;
        s->peak_index = index;
        s->peak_t = t_ns;
        memcpy(s->peak_cat, s->live_cat, sizeof s->peak_cat);
        gm_site_tally_peak(&s->tally);
    }
}

static int category(uint8_t c)
{
    return c < GM_CAT_COUNT ? c : GM_CAT_UNKNOWN;
}

/* Make (id, addr) live with size bytes of category cat (live_slots.h:
 * the allocation's id, 0 for one kept by address). LIVE_BIT, between the
 * size and the category, makes no entry 0 (what live_slots.h keeps). */
static int make_live(gm_trace_scan *s, uint32_t id, uint64_t addr, uint64_t size, int cat,
                     uint32_t site)
{
    size &= SIZE_MASK;
    uint64_t v = size | LIVE_BIT | (uint64_t)cat << CAT_SHIFT;
    if (gm_live_put(&s->live, id, addr, v) || gm_site_tally_add(&s->tally, addr, size, site))
        return GM_ENOMEM;
    s->live_bytes += size;
    s->live_cat[cat] += size;
    return GM_OK;
}

/* Forget (id, addr) if live; 1 when it was. */
static int drop_live(gm_trace_scan *s, uint32_t id, uint64_t addr)
{
    uint64_t v;
    if (!gm_live_del(&s->live, id, addr, &v)) return 0;
    uint64_t size = v & SIZE_MASK;
    s->live_bytes -= size;
    s->live_cat[v >> CAT_SHIFT] -= size;
    gm_site_tally_drop(&s->tally, addr, size);
    return 1;
}

static int cmp_row_addr(const void *x, const void *y)
{
    const gm_init_row *a = x, *b = y;
    if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
    return (a->kind == GM_INIT_BLOCK) - (b->kind == GM_INIT_BLOCK); /* memory before its block */
}

/* The largest free gap the recorded segments had: memory (classic segments,
 * mapped ranges of expandable ones) that no live block covers. Sorts rows. */
static uint64_t largest_free(gm_init_row *rows, size_t n)
{
    if (n > 1) qsort(rows, n, sizeof *rows, cmp_row_addr); /* rows may be NULL when n is 0 */
    uint64_t best = 0, pos = 0, end = 0; /* inside memory [.., end), free from pos */
    for (size_t i = 0; i < n; i++) {
        const gm_init_row *w = &rows[i];
        int memory = w->kind == GM_INIT_MAPPED || (w->kind == GM_INIT_SEGMENT && !w->expandable);
        if (memory) {
            if (end > pos && end - pos > best) best = end - pos;
            if (pos < end && w->addr == end) { /* an adjacent range: the gap goes on */
                end = w->addr + w->size;
                continue;
            }
            pos = w->addr;
            end = w->addr + w->size;
        } else if (w->kind == GM_INIT_BLOCK && w->addr >= pos && w->addr < end) {
            uint64_t bs = w->block_size ? w->block_size : (w->size + 511) / 512 * 512;
            if (w->addr - pos > best) best = w->addr - pos;
            pos = w->addr + bs < end ? w->addr + bs : end;
        }
    }
    if (end > pos && end - pos > best) best = end - pos;
    return best;
}

static int scan_initial(gm_trace_scan *s, gm_trace_reader *r, gm_err *err)
{
    gm_init_row *rows;
    size_t n;
    int rc = gm_trace_read_initial(r, &rows, &n, err);
    if (rc != GM_OK) return rc;
    gm_live_seeded(&s->live, rows, n);
    uint32_t k = 0;
    for (size_t i = 0; i < n && rc == GM_OK; i++) {
        if (rows[i].kind == GM_INIT_MAPPED) { /* an expandable segment's memory */
            s->init_segment_bytes += rows[i].size;
            continue;
        }
        if (rows[i].kind == GM_INIT_SEGMENT) {
            s->init_segments++;
            s->init_expandable += rows[i].expandable;
            if (!rows[i].expandable) s->init_segment_bytes += rows[i].size;
            if (rows[i].pool_id0 || rows[i].pool_id1) {
                s->init_private++;
                s->init_private_bytes += rows[i].size;
            }
            continue;
        }
        if (rows[i].kind != GM_INIT_BLOCK) continue;  /* a mapped range: memory, not a tensor */
        uint32_t id = gm_live_block_id(&s->live, &k); /* its slot, if the trace numbered it */
        if (gm_live_get(&s->live, id, rows[i].addr))
            continue; /* a duplicate block row: counted once */
        if (make_live(s, id, rows[i].addr, rows[i].size, category(rows[i].category),
                      rows[i].site) != GM_OK)
            rc = gm_errf(err, GM_ENOMEM, "out of host memory");
        s->pre_blocks++;
        s->pre_bytes += rows[i].size;
    }
    s->init_largest_free = largest_free(rows, n);
    free(rows);
    s->peak_live = s->live_bytes;
    memcpy(s->peak_cat, s->live_cat, sizeof s->peak_cat);
    gm_site_tally_peak(&s->tally);
    s->reserved = s->peak_reserved = s->init_segment_bytes;
    return rc;
}

static int scan_markers(gm_trace_scan *s, gm_trace_reader *r, gm_err *err)
{
    gm_marker *marks;
    size_t n;
    int rc = gm_trace_read_markers(r, &marks, &n, err);
    if (rc != GM_OK) return rc;
    s->markers = n;
    for (size_t i = 0; i < n; i++)
        if (marks[i].kind < 4) s->marker_kinds[marks[i].kind]++;
    free(marks);
    return GM_OK;
}

static int scan_alloc(gm_trace_scan *s, const gm_event *e, uint64_t index, gm_err *err)
{
    gm_live_count_alloc(&s->live);
    if (drop_live(s, e->id, e->addr) && !s->live_reallocs++) /* address already live: replace */
        s->first_realloc_index = index;
    int cat = category(e->category);
    if (make_live(s, e->id, e->addr, e->size, cat, e->site) != GM_OK)
        return gm_errf(err, GM_ENOMEM, "out of host memory");
    int ph = e->phase < GM_PHASE_COUNT ? e->phase : GM_PHASE_UNKNOWN;
    s->cat_count[cat]++;
    s->cat_bytes[cat] += e->size;
    s->phase_count[ph]++;
    s->phase_bytes[ph] += e->size;
    s->alloc_bytes += e->size;
    if (e->size > s->max_size) s->max_size = e->size;
    /* gsl_histogram_increment and _accumulate, the bin found directly: GSL
     * finds it by a binary search of the edges (a sixth of `gmsim info`'s
     * time on 100 M events); the histogram's bin array is its documented
     * public member (GSL manual, "The histogram struct") */
    size_t b = size_bin(e->size);
    if (b < GM_SCAN_HIST_BINS) { /* as GSL, nothing past the last edge */
        s->h_count->bin[b] += 1;
        s->h_bytes->bin[b] += (double)e->size;
    }
    note_live(s, index, e->t_ns);
    return GM_OK;
}

static int scan_event(gm_trace_scan *s, const gm_event *e, uint64_t index, gm_err *err)
{
    if (s->nevents++ == 0) s->t_first = e->t_ns;
    s->t_last = e->t_ns;
    if (e->op < GM_OP_COUNT) s->by_op[e->op]++;
    switch (e->op) {
    case GM_OP_ALLOC:
        return scan_alloc(s, e, index, err);
    case GM_OP_FREE:
        if (!drop_live(s, e->id, e->addr) && !s->unknown_frees++) {
            s->first_unknown_index = index;
            s->first_unknown_addr = e->addr;
        }
        return GM_OK;
    case GM_OP_SEGMENT_ALLOC:
    case GM_OP_SEGMENT_MAP:
        s->reserved += e->size;
        if (s->reserved > s->peak_reserved) s->peak_reserved = s->reserved;
        return GM_OK;
    case GM_OP_SEGMENT_FREE:
    case GM_OP_SEGMENT_UNMAP:
        s->reserved -= e->size < s->reserved ? e->size : s->reserved;
        return GM_OK;
    default:
        return GM_OK;
    }
}

int gm_trace_scan_begin(gm_trace_reader *r, gm_trace_scan *s, gm_err *err)
{
    int rc = scan_init(s, gm_trace_meta_get(r)->dense_ids, err);
    if (rc == GM_OK) rc = gm_trace_read_sites(r, &s->sites, err);
    if (rc == GM_OK && gm_site_tally_init(&s->tally, s->sites.n))
        rc = gm_errf(err, GM_ENOMEM, "out of host memory");
    if (rc == GM_OK) rc = scan_initial(s, r, err);
    if (rc == GM_OK) rc = scan_markers(s, r, err);
    return rc;
}

int gm_trace_scan_feed(gm_trace_scan *s, const gm_event *ev, size_t n, uint64_t first, gm_err *err)
{
    int rc = GM_OK;
    for (size_t i = 0; i < n && rc == GM_OK; i++)
        rc = scan_event(s, &ev[i], first + i, err);
    return rc;
}

int gm_trace_scan_run(gm_trace_reader *r, gm_trace_scan *s, gm_err *err)
{
    int rc = gm_trace_scan_begin(r, s, err);
    if (rc != GM_OK) return rc;
    gm_event *buf = malloc(GM_TRACE_CHUNK_EVENTS * sizeof *buf);
    if (!buf) return gm_errf(err, GM_ENOMEM, "out of host memory");
    for (;;) {
        uint64_t base = gm_trace_position(r);
        int64_t n = gm_trace_read(r, buf, GM_TRACE_CHUNK_EVENTS, err);
        if (n <= 0) {
            rc = n < 0 ? (int)n : GM_OK;
            break;
        }
        if ((rc = gm_trace_scan_feed(s, buf, (size_t)n, base, err)) != GM_OK) break;
    }
    free(buf);
    return rc;
}
