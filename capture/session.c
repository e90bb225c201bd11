/* session.c - see session.h. */
#include "session.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct gmc_session {
    gmc_recorder *rec;
    gmc_open_fn open;
    void *ctx;
    pthread_mutex_t mu; /* serializes drains and finish */
    gm_trace_writer *w;
    gmc_rows rows;
    int finished;
    gm_err first; /* first error; first.code != GM_OK once failed */
};

int gmc_session_create(const gmc_opts *opts, gmc_open_fn open, void *ctx, gmc_session **out,
                       gm_err *err)
{
    *out = NULL;
    gmc_session *s = calloc(1, sizeof *s);
    if (!s) return gm_errf(err, GM_ENOMEM, "gmcapture: out of host memory");
    int rc = gmc_recorder_create(opts, &s->rec, err);
    if (rc != GM_OK) {
        free(s);
        return rc;
    }
    s->open = open;
    s->ctx = ctx;
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return GM_OK;
}

void gmc_session_free(gmc_session *s)
{
    if (!s) return;
    gm_trace_abort(s->w);
    gmc_rows_free(&s->rows);
    gmc_recorder_free(s->rec);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

gmc_recorder *gmc_session_recorder(gmc_session *s)
{
    return s->rec;
}

static int fail(gmc_session *s, const gm_err *e)
{
    if (s->first.code == GM_OK) s->first = *e;
    gm_trace_abort(s->w);
    s->w = NULL;
    return e->code;
}

static int open_writer(gmc_session *s, gm_err *e)
{
    if (s->w) return GM_OK;
    int rc = s->open(s->ctx, gmc_recorder_device(s->rec), &s->w, e);
    if (rc == GM_OK && !s->w) rc = gm_errf(e, GM_EIO, "gmcapture: the trace could not be opened");
    return rc;
}

/* With s->mu held. */
static int drain_locked(gmc_session *s, uint64_t watermark_ns)
{
    gm_err e = {0};
    int rc = gmc_recorder_drain(s->rec, watermark_ns, &s->rows, &e);
    if (rc == GM_OK && s->first.code == GM_OK && (s->rows.nev || s->rows.nmk)) {
        rc = open_writer(s, &e);
        if (rc == GM_OK) rc = gm_trace_append(s->w, s->rows.ev, s->rows.nev, &e);
        if (rc == GM_OK) rc = gm_trace_add_markers(s->w, s->rows.mk, s->rows.nmk, &e);
    }
    gmc_rows_clear(&s->rows);
    return rc == GM_OK ? GM_OK : fail(s, &e);
}

int gmc_session_drain(gmc_session *s, uint64_t watermark_ns, gm_err *err)
{
    pthread_mutex_lock(&s->mu);
    int rc = s->finished ? GM_OK : drain_locked(s, watermark_ns);
    if (rc == GM_OK && s->first.code != GM_OK) rc = s->first.code;
    if (rc != GM_OK && err) *err = s->first;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int finish_locked(gmc_session *s)
{
    gm_err e = {0};
    gmc_stats st;
    size_t ninit = 0;
    int rc = drain_locked(s, UINT64_MAX);
    if (rc == GM_OK) rc = s->first.code == GM_OK ? open_writer(s, &e) : s->first.code;
    if (rc != GM_OK) return s->first.code != GM_OK ? s->first.code : fail(s, &e);
    const gm_init_row *init = gmc_recorder_initial(s->rec, &ninit);
    if (ninit && (rc = gm_trace_write_initial(s->w, init, ninit, &e)) != GM_OK) return fail(s, &e);
    gmc_recorder_stats(s->rec, &st);
    gm_trace_set_dropped(s->w, st.dropped);
    rc = gm_trace_finish(s->w, &e); /* frees the writer whatever the result */
    s->w = NULL;
    return rc == GM_OK ? GM_OK : fail(s, &e);
}

int gmc_session_finish(gmc_session *s, gmc_stats *st, gm_err *err)
{
    pthread_mutex_lock(&s->mu);
    int rc = s->first.code;
    if (!s->finished) {
        s->finished = 1;
        rc = finish_locked(s);
    }
    if (rc != GM_OK && err) *err = s->first;
    if (st) gmc_recorder_stats(s->rec, st);
    pthread_mutex_unlock(&s->mu);
    return rc;
}
