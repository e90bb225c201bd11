/* preload.c - see preload.h. */
#include "preload.h"

#include <stdlib.h>
#include <string.h>

#include "traces/packed.h"

struct gm_preload_trace {
    gm_trace_reader *r; /* kept open: the meta the runs see is its own */
    gm_event *events;   /* the events as they are, or ... */
    gm_packed *packed;  /* ... packed (a trace above max_events) */
    gm_init_row *initial;
    char hash[17]; /* the events' trace hash, once for all the runs */
};

/* The whole trace of r packed into o (within max_bytes), its hash into
 * o->hash: 1, or 0 when it does not fit (or cannot be read: the run reads
 * the file again and reports it). */
static int pack_one(struct gm_preload_trace *o, uint64_t n, uint64_t max_bytes)
{
    gm_err err = {0};
    gm_event *buf = malloc(GM_TRACE_CHUNK_EVENTS * sizeof *buf);
    o->packed = buf ? gm_packed_new(max_bytes) : NULL;
    gm_hash h;
    gm_trace_hash_start(&h, gm_trace_meta_get(o->r)->source);
    int ok = o->packed != NULL;
    for (uint64_t done = 0; ok && done < n;) {
        /* whole chunks, as a run reads them: the hash goes by them */
        size_t want = n - done < GM_TRACE_CHUNK_EVENTS ? (size_t)(n - done) : GM_TRACE_CHUNK_EVENTS;
        for (size_t got = 0; ok && got < want;) {
            int64_t k = gm_trace_read(o->r, buf + got, want - got, &err);
            ok = k > 0;
            got += ok ? (size_t)k : 0;
        }
        ok = ok && gm_packed_append(o->packed, buf, want) == GM_OK;
        if (ok) gm_trace_hash_chunk(&h, buf, want);
        done += want;
    }
    free(buf);
    if (!ok) {
        gm_packed_free(o->packed);
        o->packed = NULL;
        return 0;
    }
    gm_packed_finish(o->packed);
    gm_trace_hash_end(&h, o->hash);
    return 1;
}

/* Read all of t's trace into o, as it is up to max_events, else packed
 * within max_packed_bytes; 0 when it stays on disk. */
static int load_one(const gm_tenant_spec *t, struct gm_preload_trace *o, gm_tenant_spec *into,
                    size_t max_events, uint64_t max_packed_bytes)
{
    gm_err err = {0};
    if (t->events || t->packed || gm_trace_open(t->path, &o->r, &err) != GM_OK) return 0;
    uint64_t n = gm_trace_nevents(o->r);
    size_t n_init = 0;
    if (n > max_events) {
        /* an event takes at least 6 bytes packed (traces/packed.h) */
        if (n > max_packed_bytes / 6 || !pack_one(o, n, max_packed_bytes)) goto disk;
        into->packed = o->packed;
    } else {
        if (!(o->events = malloc((n ? n : 1) * sizeof *o->events))) goto disk;
        for (uint64_t done = 0; done < n;) {
            int64_t k = gm_trace_read(o->r, o->events + done, n - done, &err);
            if (k <= 0) goto disk; /* the run reads the file again and reports it */
            done += (uint64_t)k;
        }
        into->events = o->events;
    }
    if (gm_trace_read_initial(o->r, &o->initial, &n_init, &err) != GM_OK) goto disk;
    into->n_events = (size_t)n;
    into->meta = gm_trace_meta_get(o->r);
    if (o->events) gm_trace_hash_events(into->meta->source, o->events, (size_t)n, o->hash);
    into->trace_hash = o->hash;
    into->initial = o->initial;
    into->n_initial = n_init;
    return 1;
disk:
    into->events = NULL;
    into->packed = NULL;
    free(o->events);
    o->events = NULL;
    gm_packed_free(o->packed);
    o->packed = NULL;
    gm_trace_close(o->r);
    o->r = NULL;
    return 0;
}

int gm_preload_config(gm_sim_config *cfg, gm_preload *p, size_t max_events,
                      uint64_t max_packed_bytes, gm_err *err)
{
    memset(p, 0, sizeof *p);
    p->n = cfg->n_tenants;
    p->tenants = calloc(p->n ? p->n : 1, sizeof *p->tenants);
    p->own = calloc(p->n ? p->n : 1, sizeof *p->own);
    if (!p->tenants || !p->own) {
        gm_preload_free(p);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < p->n; i++) {
        gm_tenant_spec *t = &p->tenants[i];
        *t = cfg->tenants[i];
        /* a trace named again (tenants of one trace at offsets, a sweep's
         * mix of copies) takes what its first tenant holds */
        size_t j = i;
        if (!t->events && !t->packed && t->path) /* an in-memory tenant may have no path */
            for (j = 0; j < i && !(p->own[j].r && !strcmp(p->tenants[j].path, t->path)); j++)
                ;
        if (j < i) {
            const gm_tenant_spec *u = &p->tenants[j];
            t->events = u->events;
            t->packed = u->packed;
            t->n_events = u->n_events;
            t->meta = u->meta;
            t->trace_hash = u->trace_hash;
            t->initial = u->initial;
            t->n_initial = u->n_initial;
            continue;
        }
        load_one(&cfg->tenants[i], &p->own[i], t, max_events, max_packed_bytes);
    }
    cfg->tenants = p->tenants;
    return GM_OK;
}

void gm_preload_free(gm_preload *p)
{
    for (size_t i = 0; p->own && i < p->n; i++) {
        free(p->own[i].events);
        gm_packed_free(p->own[i].packed);
        free(p->own[i].initial);
        gm_trace_close(p->own[i].r);
    }
    free(p->own);
    free(p->tenants);
    memset(p, 0, sizeof *p);
}
