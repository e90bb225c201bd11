/* measured.c - see measured.h. */
#include "measured.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- latency samples ---------------- */

void gm_lat_init(gm_lat_samples *s)
{
    memset(s, 0, sizeof *s);
    s->rng = 0x9e3779b97f4a7c15ull;
}

void gm_lat_free(gm_lat_samples *s)
{
    free(s->ns);
    s->ns = NULL;
    s->n = s->cap = 0;
}

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

void gm_lat_add(gm_lat_samples *s, uint64_t ns)
{
    double v = (double)ns;
    s->sum += v;
    s->min = s->seen == 0 || v < s->min ? v : s->min;
    s->max = v > s->max ? v : s->max;
    s->seen++;
    if (s->n < GM_LAT_MAX_SAMPLES) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 1024;
            double *p = realloc(s->ns, cap * sizeof *p);
            if (!p) return; /* the count, sum and extremes stay exact */
            s->ns = p;
            s->cap = cap;
        }
        s->ns[s->n++] = v;
        return;
    }
    uint64_t j = xorshift(&s->rng) % s->seen; /* Algorithm R */
    if (j < s->n) s->ns[j] = v;
}

/* ---------------- device used over time ---------------- */

static void fold(gm_used_point *into, const gm_used_point *pt, int first)
{
    if (first || pt->used_bytes > into->used_bytes) {
        uint64_t t = first ? pt->t_ns : into->t_ns, w = first ? pt->wall_ns : into->wall_ns;
        *into = *pt;
        into->t_ns = t; /* a point keeps the time its window began */
        into->wall_ns = w;
    }
}

void gm_used_add(gm_used_series *s, const gm_used_point *pt)
{
    if (s->samples == 0 || pt->used_bytes > s->peak.used_bytes) s->peak = *pt;
    s->samples++;
    if (s->stride == 0) s->stride = 1;
    if (s->n == GM_USED_POINTS) { /* full: merge pairs, double the stride */
        for (size_t i = 0; i < GM_USED_POINTS / 2; i++) {
            gm_used_point a = s->p[2 * i];
            fold(&a, &s->p[2 * i + 1], 0);
            s->p[i] = a;
        }
        s->n = GM_USED_POINTS / 2;
        s->stride *= 2;
        s->pending = 0;
    }
    fold(&s->p[s->n], pt, s->pending == 0);
    if (++s->pending == s->stride) {
        s->n++;
        s->pending = 0;
    }
}

/* ---------------- the measured object ---------------- */

void gm_measured_init(gm_measured *m)
{
    memset(m, 0, sizeof *m);
    gm_lat_init(&m->malloc_lat);
    gm_lat_init(&m->free_lat);
    gm_lat_init(&m->map_lat);
    gm_lat_init(&m->unmap_lat);
    m->device_ordinal = -1;
}

void gm_measured_free(gm_measured *m)
{
    gm_lat_free(&m->malloc_lat);
    gm_lat_free(&m->free_lat);
    gm_lat_free(&m->map_lat);
    gm_lat_free(&m->unmap_lat);
}

void gm_measured_oom(gm_measured *m, const gm_backend_oom *o)
{
    if (o->kind == GM_BOOM_DRIVER)
        m->driver_oom_returns++;
    else
        m->cap_refusals++;
    if (m->n_ooms_kept < GM_BACKEND_OOMS) m->ooms[m->n_ooms_kept++] = *o;
}
