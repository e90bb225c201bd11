/* preload.c - see preload.h. */
#include "preload.h"

#include <stdlib.h>
#include <string.h>

struct gm_preload_trace {
    gm_trace_reader *r; /* kept open: the meta the runs see is its own */
    gm_event *events;
    gm_init_row *initial;
    char hash[17]; /* the events' trace hash, once for all the runs */
};

/* Read all of t's trace into o; 0 when it stays on disk. */
static int load_one(const gm_tenant_spec *t, struct gm_preload_trace *o, gm_tenant_spec *into,
                    size_t max_events)
{
    gm_err err = {0};
    if (t->events || gm_trace_open(t->path, &o->r, &err) != GM_OK) return 0;
    uint64_t n = gm_trace_nevents(o->r);
    size_t n_init = 0;
    if (n > max_events || !(o->events = malloc((n ? n : 1) * sizeof *o->events))) goto disk;
    for (uint64_t done = 0; done < n;) {
        int64_t k = gm_trace_read(o->r, o->events + done, n - done, &err);
        if (k <= 0) goto disk; /* the run reads the file again and reports it */
        done += (uint64_t)k;
    }
    if (gm_trace_read_initial(o->r, &o->initial, &n_init, &err) != GM_OK) goto disk;
    into->events = o->events;
    into->n_events = (size_t)n;
    into->meta = gm_trace_meta_get(o->r);
    gm_trace_hash_events(into->meta->source, o->events, (size_t)n, o->hash);
    into->trace_hash = o->hash;
    into->initial = o->initial;
    into->n_initial = n_init;
    return 1;
disk:
    free(o->events);
    o->events = NULL;
    gm_trace_close(o->r);
    o->r = NULL;
    return 0;
}

int gm_preload_config(gm_sim_config *cfg, gm_preload *p, size_t max_events, gm_err *err)
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
        p->tenants[i] = cfg->tenants[i];
        load_one(&cfg->tenants[i], &p->own[i], &p->tenants[i], max_events);
    }
    cfg->tenants = p->tenants;
    return GM_OK;
}

void gm_preload_free(gm_preload *p)
{
    for (size_t i = 0; p->own && i < p->n; i++) {
        free(p->own[i].events);
        free(p->own[i].initial);
        gm_trace_close(p->own[i].r);
    }
    free(p->own);
    free(p->tenants);
    memset(p, 0, sizeof *p);
}
