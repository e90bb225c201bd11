/*
 * gmstates.c - how often a trace's allocator state comes back: what
 * decides whether fast-forward (sim/ffwd.h) can skip its iterations.
 *
 *   gmstates TRACE [ALLOC_CONF]
 *
 * Replays TRACE's allocations and frees through the pytorch model (80 GiB,
 * policy pytorch, no engine) and, at the start of every iteration (the
 * trace's /markers of kind iteration), hashes the model's whole state
 * (gm_alloc_ops.ff_state) and each pool's (ff_part_state: part 0 the small
 * pool, 1 the large one). Prints, per state, how many of the iterations
 * started in a state seen at an earlier iteration start, how many distinct
 * states there were and at which iteration the last new one came. A trace
 * whose whole state comes back is fast-forwarded whole; one whose large
 * pool's state comes back (dynamic padding) has that pool's events
 * fast-forwarded; one where neither does is simulated event by event.
 * A diagnostic, not a test: prints figures (bench/README, "Tenth round").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "base/hash.h"
#include "policies/registry.h"
#include "sim/alloc.h"
#include "sim/device.h"
#include "traces/trace.h"

#define N_VIEWS (1 + GM_FF_PARTS)

typedef struct seen {
    uint64_t *h; /* the hashes seen, in order */
    size_t n, cap;
    uint64_t repeats, last_new;
} seen;

static uint64_t hash_words(const uint64_t *w, size_t n)
{
    gm_hash h;
    gm_hash_init(&h);
    for (size_t i = 0; i < n; i++)
        gm_hash_u64(&h, w[i]);
    return gm_hash_final(&h);
}

/* Note hash h at iteration it: 0 when out of memory. */
static int note(seen *s, uint64_t h, uint64_t it)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->h[i] == h) {
            s->repeats++;
            return 1;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        uint64_t *v = realloc(s->h, cap * sizeof *v);
        if (!v) return 0;
        s->h = v;
        s->cap = cap;
    }
    s->h[s->n++] = h;
    s->last_new = it;
    return 1;
}

/* The state (view 0: whole; 1 + k: part k) into *buf: its word count, or
 * SIZE_MAX (no promise, or out of memory). */
static size_t take(gm_alloc *a, int view, uint64_t **buf, size_t *cap)
{
    for (;;) {
        size_t n =
            view ? a->ops->ff_part_state(a, view - 1, *buf, *cap) : a->ops->ff_state(a, *buf, *cap);
        if (n == SIZE_MAX || n <= *cap) return n;
        uint64_t *v = realloc(*buf, (n + n / 4) * sizeof *v);
        if (!v) return SIZE_MAX;
        *buf = v;
        *cap = n + n / 4;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: gmstates TRACE [ALLOC_CONF]\n");
        return 2;
    }
    gm_err err = {0};
    gm_trace_reader *r = NULL;
    gm_marker *mk = NULL;
    size_t n_mk = 0;
    gm_device *dev = NULL;
    gm_policy *pol = NULL;
    gm_alloc *a = NULL;
    uint64_t *slot = NULL, *buf = NULL;
    size_t n_slot = 0, cap = 0;
    gm_event *ev = malloc(GM_TRACE_CHUNK_EVENTS * sizeof *ev);
    seen s[N_VIEWS] = {{0}};
    gm_addrmap by_addr = {0};
    int rc = 1;
    if (!ev || gm_trace_open(argv[1], &r, &err) || gm_trace_read_markers(r, &mk, &n_mk, &err) ||
        gm_device_model_create(80 * GM_GiB, NULL, &dev, &err) ||
        gm_policy_create("pytorch", &pol, &err) ||
        gm_alloc_create(gm_alloc_find("pytorch"), dev, argc > 2 ? argv[2] : "", 0, pol, &a, &err)) {
        fprintf(stderr, "gmstates: %s\n", err.msg[0] ? err.msg : "out of memory");
        goto out;
    }
    /* allocations paired by id (gmsim gen, import), else by address */
    const int ids = gm_trace_meta_get(r)->dense_ids;
    if (!ids && gm_addrmap_init(&by_addr, 1024) != GM_OK) goto oom;
    a->no_stats = 1;
    uint64_t it = 0, oom = 0;
    size_t m = 0;
    int64_t n;
    while ((n = gm_trace_read(r, ev, GM_TRACE_CHUNK_EVENTS, &err)) > 0) {
        for (int64_t i = 0; i < n; i++) {
            const gm_event *e = &ev[i];
            int start = 0;
            for (; m < n_mk && mk[m].t_ns <= e->t_ns; m++)
                start |= mk[m].kind == GM_MARK_ITERATION;
            for (int v = 0; start && v < N_VIEWS; v++) {
                size_t w = take(a, v, &buf, &cap);
                if (w != SIZE_MAX && !note(&s[v], hash_words(buf, w), it)) goto oom;
            }
            it += start;
            if (ids && e->id >= n_slot) {
                size_t k = 2 * (size_t)e->id + 1024;
                uint64_t *x = realloc(slot, k * sizeof *x);
                if (!x) goto oom;
                memset(x + n_slot, 0, (k - n_slot) * sizeof *x);
                slot = x;
                n_slot = k;
            }
            uint64_t h, key = gm_addrmap_key(e->addr);
            if (e->op == GM_OP_ALLOC && (!ids || e->id)) {
                if (a->ops->malloc(a, e->size, e->stream, e->category, e->t_ns, &h) != GM_OK)
                    oom++;
                else if (ids)
                    slot[e->id] = h + 1;
                else if (gm_addrmap_get(&by_addr, key)) /* a live address again: the newer */
                    *gm_addrmap_get(&by_addr, key) = h;
                else if (gm_addrmap_put(&by_addr, key, h) != GM_OK)
                    goto oom;
            } else if (e->op == GM_OP_FREE && ids && e->id && slot[e->id]) {
                a->ops->free(a, slot[e->id] - 1, e->t_ns);
                slot[e->id] = 0;
            } else if (e->op == GM_OP_FREE && !ids && gm_addrmap_del(&by_addr, key, &h)) {
                a->ops->free(a, h, e->t_ns);
            }
        }
    }
    if (n < 0) {
        fprintf(stderr, "gmstates: %s\n", err.msg);
        goto out;
    }
    static const char *const name[N_VIEWS] = {"whole model", "small pool", "large pool"};
    printf("%s: %llu iterations%s\n", argv[1], (unsigned long long)it,
           oom ? " (some allocations did not fit in 80 GiB: skipped)" : "");
    if (!it) printf("  no iteration markers (/markers of kind iteration): nothing to compare\n");
    for (int v = 0; it && v < N_VIEWS; v++) {
        if (!s[v].n) {
            printf("  %-12s no state (the model makes no promise with these settings)\n", name[v]);
            continue;
        }
        printf("  %-12s %llu of %llu iteration starts in a state seen before; %zu distinct, the "
               "last new one at iteration %llu\n",
               name[v], (unsigned long long)s[v].repeats, (unsigned long long)it, s[v].n,
               (unsigned long long)s[v].last_new);
    }
    rc = 0;
    goto out;
oom:
    fprintf(stderr, "gmstates: out of memory\n");
out:
    for (int v = 0; v < N_VIEWS; v++)
        free(s[v].h);
    free(slot);
    gm_addrmap_free(&by_addr);
    free(buf);
    free(ev);
    free(mk);
    gm_alloc_destroy(a);
    gm_policy_destroy(pol);
    gm_device_destroy(dev);
    gm_trace_close(r);
    return rc;
}
