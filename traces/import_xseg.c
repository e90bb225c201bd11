/*
 * import_xseg.c - expandable segments in a snapshot (import_torch_int.h).
 *
 * With expandable_segments:True PyTorch reserves one virtual address range
 * per (stream, pool) (DeviceCachingAllocator::find_expandable_block: 9/8 of
 * the device's memory) and maps pages into it on demand: 2 MiB pages for
 * the small pool, 20 MiB for the large one (ExpandableSegment::map, traced
 * as segment_map), unmapping whole free pages on release (unmap_block,
 * segment_unmap). Its snapshot() reports one segment entry per contiguous
 * *mapped* range (a block whose prev is unmapped starts a new entry), so a
 * dump of one expandable segment with holes lists several "segments".
 *
 * The importer keeps the mapped ranges, not the segments: it starts from the
 * dump's ranges and undoes every segment_map (the range was not mapped
 * before it) and segment_unmap (it was) walking the trace backwards. What is
 * left is what was mapped before the first entry. Those ranges are then
 * grouped back into their segments by (stream, pool, private pool id) —
 * PyTorch keeps one expandable segment per such key unless a request does
 * not fit the reserved range, which 9/8 of the device makes rare — with the
 * segment starting at the lowest address the snapshot shows for that key
 * (IMPORT.md, "Expandable segments").
 *
 * Pool of a range that no dump entry names: a small-pool request is at most
 * 1 MiB (kSmallSize) and maps one 2 MiB page, a large-pool one maps a
 * multiple of 20 MiB; a range touching a known one belongs to its segment.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "import_torch_int.h"

static uint64_t xr_end(const gm_imp_xr *r)
{
    return r->addr + r->size;
}

/* Order of d->x: by stream, then address (ranges never overlap). */
static int xr_before(const gm_imp_xr *r, uint64_t stream, uint64_t addr)
{
    return r->stream != stream ? r->stream < stream : r->addr < addr;
}

static int xr_insert(gm_imp_dev *d, const gm_imp_xr *r, gm_err *err)
{
    if (gm_imp_grow(&d->x, &d->cx, d->nx + 1, sizeof *d->x)) return gm_imp_oom(err);
    size_t i = 0;
    while (i < d->nx && xr_before(&d->x[i], r->stream, r->addr))
        i++;
    memmove(&d->x[i + 1], &d->x[i], (d->nx - i) * sizeof *d->x);
    d->x[i] = *r;
    d->nx++;
    return GM_OK;
}

/* Index of the first range of `stream` that ends after addr (d->nx if none). */
static size_t first_after(const gm_imp_dev *d, uint64_t stream, uint64_t addr)
{
    size_t i = 0;
    while (i < d->nx &&
           (d->x[i].stream < stream || (d->x[i].stream == stream && xr_end(&d->x[i]) <= addr)))
        i++;
    return i;
}

static int overlaps(const gm_imp_dev *d, uint64_t stream, uint64_t addr, uint64_t size)
{
    size_t i = first_after(d, stream, addr);
    return i < d->nx && d->x[i].stream == stream && d->x[i].addr < addr + size;
}

int gm_imp_xr_add_dump(gm_imp_dev *d, uint64_t addr, uint64_t size, uint64_t stream, int small,
                       uint64_t pid0, uint64_t pid1, gm_err *err)
{
    if (overlaps(d, stream, addr, size))
        return gm_errf(err, GM_EINVAL,
                       "%s: device %d: two expandable segment entries overlap at 0x%" PRIx64
                       "; the snapshot is damaged",
                       d->name, d->device, addr);
    gm_imp_xr r = {.addr = addr,
                   .size = size,
                   .stream = stream,
                   .pid0 = pid0,
                   .pid1 = pid1,
                   .small = (uint8_t)small};
    return xr_insert(d, &r, err);
}

/* Undo a segment_map: [a, a+size) was mapped after it, and not before. */
static int undo_map(gm_imp_dev *d, size_t k, gm_err *err)
{
    gm_imp_ent *e = &d->e[k];
    uint64_t a = e->addr, b = e->addr + e->size, covered = a;
    size_t i0 = first_after(d, e->stream, a), i1 = i0;
    for (; i1 < d->nx && d->x[i1].stream == e->stream && d->x[i1].addr < b; i1++) {
        if (d->x[i1].addr > covered) break;
        covered = xr_end(&d->x[i1]);
    }
    if (i1 == i0 || covered < b || d->x[i0].addr > a)
        return gm_imp_undo_err(d, k,
                               "those pages are not mapped after it in any expandable segment "
                               "the dump or the rest of the trace shows",
                               err);
    gm_imp_xr first = d->x[i0], last = d->x[i1 - 1];
    e->small = first.small;
    memmove(&d->x[i0], &d->x[i1], (d->nx - i1) * sizeof *d->x);
    d->nx -= i1 - i0;
    if (first.addr < a) { /* the part below stays mapped */
        gm_imp_xr lo = first;
        lo.size = a - first.addr;
        if (xr_insert(d, &lo, err)) return err->code;
    }
    if (xr_end(&last) > b) { /* ... and the part above */
        gm_imp_xr hi = last;
        hi.addr = b;
        hi.size = xr_end(&last) - b;
        if (xr_insert(d, &hi, err)) return err->code;
    }
    return GM_OK;
}

/* Undo a segment_unmap: [a, a+size) was mapped before it. */
static int undo_unmap(gm_imp_dev *d, size_t k, gm_err *err)
{
    gm_imp_ent *e = &d->e[k];
    if (overlaps(d, e->stream, e->addr, e->size))
        return gm_imp_undo_err(d, k, "some of those pages are still mapped after it", err);
    gm_imp_xr r = {.addr = e->addr,
                   .size = e->size,
                   .stream = e->stream,
                   .pid0 = e->pid0,
                   .pid1 = e->pid1,
                   /* pool from the size: small pages are 2 MiB, large 20 MiB */
                   .small = e->size % GM_PT_LARGE_BUFFER != 0};
    for (size_t i = 0; i < d->nx; i++) { /* a touching range is the same segment */
        const gm_imp_xr *x = &d->x[i];
        if (x->stream == e->stream && (xr_end(x) == r.addr || x->addr == xr_end(&r))) {
            r.small = x->small;
            r.pid0 = x->pid0;
            r.pid1 = x->pid1;
            break;
        }
    }
    e->small = r.small;
    return xr_insert(d, &r, err);
}

int gm_imp_xr_undo(gm_imp_dev *d, size_t k, gm_err *err)
{
    return d->e[k].action == GM_TA_SEGMENT_MAP ? undo_map(d, k, err) : undo_unmap(d, k, err);
}

/* ---------------- grouping into segments ---------------- */

static int same_key(const gm_imp_xr *a, const gm_imp_xr *b)
{
    return a->stream == b->stream && a->small == b->small && a->pid0 == b->pid0 &&
           a->pid1 == b->pid1;
}

/* Whether trace entry e (a segment_map/unmap) belongs to the segment of key. */
static int entry_in_key(const gm_imp_ent *e, const gm_imp_xr *key)
{
    if (e->action != GM_TA_SEGMENT_MAP && e->action != GM_TA_SEGMENT_UNMAP) return 0;
    if (e->stream != key->stream || e->small != key->small) return 0;
    return !e->has_pid || (e->pid0 == key->pid0 && e->pid1 == key->pid1);
}

void gm_imp_xr_rows(const gm_imp_dev *d, gm_init_row *rows, size_t *n, gm_import_trace *t)
{
    uint8_t *done = calloc(d->nx ? d->nx : 1, 1);
    if (!done) return; /* callers checked memory for rows; a failure here only loses grouping */
    for (size_t i = 0; i < d->nx; i++) {
        if (done[i]) continue;
        const gm_imp_xr *key = &d->x[i];
        uint64_t base = key->addr, end = xr_end(key), mapped = 0;
        for (size_t j = i; j < d->nx; j++)
            if (same_key(&d->x[j], key)) {
                base = d->x[j].addr < base ? d->x[j].addr : base;
                end = xr_end(&d->x[j]) > end ? xr_end(&d->x[j]) : end;
            }
        for (size_t k = 0; k < d->ne; k++) /* the trace may reach below or above */
            if (entry_in_key(&d->e[k], key)) {
                const gm_imp_ent *e = &d->e[k];
                base = e->addr < base ? e->addr : base;
                end = e->addr + e->size > end ? e->addr + e->size : end;
            }
        uint64_t page = key->small ? GM_PT_SMALL_BUFFER : GM_PT_LARGE_BUFFER;
        rows[(*n)++] = (gm_init_row){.addr = base,
                                     .size = (end - base + page - 1) / page * page,
                                     .stream = key->stream,
                                     .kind = GM_INIT_SEGMENT,
                                     .pool = key->small ? GM_POOL_SMALL : GM_POOL_LARGE,
                                     .expandable = 1,
                                     .pool_id0 = key->pid0,
                                     .pool_id1 = key->pid1};
        for (size_t j = i; j < d->nx; j++) { /* its mapped ranges, adjacent ones merged */
            if (!same_key(&d->x[j], key)) continue;
            done[j] = 1;
            gm_init_row *last = *n ? &rows[*n - 1] : NULL;
            if (last && last->kind == GM_INIT_MAPPED && last->addr + last->size == d->x[j].addr)
                last->size += d->x[j].size;
            else
                rows[(*n)++] = (gm_init_row){.addr = d->x[j].addr,
                                             .size = d->x[j].size,
                                             .stream = key->stream,
                                             .kind = GM_INIT_MAPPED};
            mapped += d->x[j].size;
        }
        t->init_segments++;
        t->init_segment_bytes += mapped;
        t->init_expandable++;
    }
    free(done);
}
