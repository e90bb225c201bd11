/*
 * priority.c - release cached segments in order of the category of the
 * tensors that used them, ties by least recent use.
 *
 * order=CAT>CAT>...  release-first to release-last. Default:
 *     activation>temporary>autograd_detail>input>gradient>optimizer_state>
 *     parameter>unknown
 *   i.e. DESIGN §5's order (activation > temporary > gradient >
 *   optimizer_state > parameter) with autograd_detail beside the other
 *   per-iteration memory, input before gradients, and unknown last (keep
 *   what we cannot classify). Long-lived memory stays cached. Categories an
 *   order leaves out follow it, in the default order.
 *
 * A segment's category: segments are shared by many tensors, so the view
 * gives a mask of every category that ever used one. A segment ranks as the
 * category in its mask that is kept longest (the highest-priority-to-keep
 * one): a segment that held a parameter is treated as parameter memory even
 * if activations also passed through it. A never-used segment (restored
 * from an initial state) is `unknown`.
 *
 * Steps are those of lru (attempt 0: only as much as needed, in this order;
 * attempt 1: release all; attempt 2: OOM; optional threshold=F before a
 * grow; --scope device: release in this order for another tenant).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pressure.h"
#include "sim/policy.h"

static const int default_order[GM_CAT_COUNT] = {
    GM_CAT_ACTIVATION, GM_CAT_TEMPORARY,       GM_CAT_AUTOGRAD_DETAIL, GM_CAT_INPUT,
    GM_CAT_GRADIENT,   GM_CAT_OPTIMIZER_STATE, GM_CAT_PARAMETER,       GM_CAT_UNKNOWN,
};

typedef struct prio_policy {
    double threshold;
    int rank[GM_CAT_COUNT]; /* 0: released first */
    gm_seglist segs;
    gm_addr_list order;
    int *cats;     /* category of order.v[i]        */
    uint64_t *got; /* bytes order.v[i] gave back    */
    size_t cap;
    uint64_t released_by_cat[GM_CAT_COUNT];
    uint64_t flushes;
} prio_policy;

/* Parse "a>b>c" into ranks; the rest follow in the default order. */
static int parse_order(prio_policy *p, const char *s, gm_err *err)
{
    for (int c = 0; c < GM_CAT_COUNT; c++)
        p->rank[c] = -1;
    int next = 0;
    const char *q = s;
    while (*q) {
        const char *end = strchr(q, '>');
        size_t n = end ? (size_t)(end - q) : strlen(q);
        char name[32];
        if (n == 0 || n >= sizeof name)
            return gm_errf(err, GM_EINVAL,
                           "--policy priority:order='%s': expected categories "
                           "separated by '>', e.g. order=activation>temporary",
                           s);
        memcpy(name, q, n);
        name[n] = 0;
        int c = gm_category_parse(name);
        if (c < 0)
            return gm_errf(err, GM_EINVAL,
                           "--policy priority:order: unknown category '%s'; categories: unknown, "
                           "parameter, optimizer_state, input, temporary, activation, gradient, "
                           "autograd_detail",
                           name);
        if (p->rank[c] >= 0)
            return gm_errf(err, GM_EINVAL, "--policy priority:order: '%s' is listed twice", name);
        p->rank[c] = next++;
        q = end ? end + 1 : q + n;
    }
    for (int i = 0; i < GM_CAT_COUNT; i++)
        if (p->rank[default_order[i]] < 0) p->rank[default_order[i]] = next++;
    return GM_OK;
}

static int create(const char *params, void **state, gm_err *err)
{
    static const char *const known[] = {"order", "threshold", NULL};
    if (gm_policy_check_params("priority", params, known, err)) return err->code;
    prio_policy *p = calloc(1, sizeof *p);
    if (!p) return gm_errf(err, GM_ENOMEM, "out of memory");
    char v[256] = "";
    gm_policy_param(params, "order", v, sizeof v);
    int rc = parse_order(p, v, err);
    if (!rc && gm_policy_param(params, "threshold", v, sizeof v))
        rc = gm_parse_double(v, "--policy priority:threshold", 0.0, 1.0, &p->threshold, err);
    if (rc) {
        free(p);
        return rc;
    }
    *state = p;
    return GM_OK;
}

static void destroy(void *state)
{
    prio_policy *p = state;
    gm_seglist_free(&p->segs);
    gm_addr_list_free(&p->order);
    free(p->cats);
    free(p->got);
    free(p);
}

/* The category a segment ranks as (see the file comment). */
static int seg_category(const prio_policy *p, const gm_seg_info *s)
{
    int best = GM_CAT_UNKNOWN;
    if (!s->category_mask) return best;
    int best_rank = -1;
    for (int c = 0; c < GM_CAT_COUNT; c++)
        if ((s->category_mask >> c & 1u) && p->rank[c] > best_rank) {
            best_rank = p->rank[c];
            best = c;
        }
    return best;
}

/* qsort has no context argument: the rank rides in gc_age, which this
 * policy does not use (a private copy of the view). */
static int cmp_rank(const void *x, const void *y)
{
    const gm_seg_info *a = x, *b = y;
    if (a->gc_age != b->gc_age) return a->gc_age < b->gc_age ? -1 : 1;
    return gm_seg_cmp_lru(x, y);
}

static uint64_t release_ranked(prio_policy *p, gm_alloc *a, uint64_t need, uint64_t now)
{
    if (gm_seglist_fetch_releasable(&p->segs, a) != GM_OK) return 0;
    for (size_t i = 0; i < p->segs.n; i++)
        p->segs.v[i].gc_age = (uint64_t)p->rank[seg_category(p, &p->segs.v[i])];
    gm_seg_sort(p->segs.v, p->segs.n, cmp_rank);
    size_t n = p->segs.n;
    if (n > p->cap) { /* per-address category and bytes released */
        int *c = realloc(p->cats, n * sizeof *c);
        uint64_t *g = c ? realloc(p->got, n * sizeof *g) : NULL;
        if (c) p->cats = c;
        if (!g) return 0;
        p->got = g;
        p->cap = n;
    }
    for (size_t i = 0; i < n; i++)
        p->cats[i] = seg_category(p, &p->segs.v[i]);
    if (gm_addr_list_from(&p->order, &p->segs) != GM_OK) return 0;
    uint64_t total = gm_release_in_order(a, &p->segs, p->order.v, n, need, now, p->got);
    for (size_t i = 0; i < n; i++)
        p->released_by_cat[p->cats[i]] += p->got[i];
    return total;
}

static void before_grow(void *state, gm_alloc *a, const gm_pressure *pr)
{
    prio_policy *p = state;
    uint64_t over = gm_pressure_over(a, p->threshold, gm_device_round(pr->alloc_size));
    if (over) release_ranked(p, a, over, pr->now_ns);
}

static int on_alloc_fail(void *state, gm_alloc *a, const gm_pressure *pr)
{
    prio_policy *p = state;
    if (pr->attempt == 0) {
        uint64_t need = gm_pressure_need(a, pr);
        return release_ranked(p, a, need, pr->now_ns) >= need ? GM_POLICY_RETRY : GM_POLICY_NEXT;
    }
    if (pr->attempt == 1) {
        p->flushes++;
        gm_release_all(a, pr->now_ns);
        return GM_POLICY_RETRY;
    }
    return GM_POLICY_GIVE_UP;
}

static uint64_t on_foreign_pressure(void *state, gm_alloc *a, uint64_t need, uint64_t now)
{
    return release_ranked(state, a, need, now);
}

static void report(void *state, gm_report *o)
{
    prio_policy *p = state;
    char order[256];
    size_t n = 0;
    for (int r = 0; r < GM_CAT_COUNT; r++)
        for (int c = 0; c < GM_CAT_COUNT; c++)
            if (p->rank[c] == r)
                n += (size_t)snprintf(order + n, sizeof order - n, "%s%s", r ? ">" : "",
                                      gm_category_name(c));
    gm_report_str(o, "order", order);
    gm_report_real(o, "threshold", GM_KV_PLAIN, p->threshold);
    gm_report_int(o, "cache_flushes", GM_KV_PLAIN, (int64_t)p->flushes);
    for (int c = 0; c < GM_CAT_COUNT; c++) {
        char key[96];
        snprintf(key, sizeof key, "selective_released_bytes_by_category.%s", gm_category_name(c));
        gm_report_int(o, key, GM_KV_BYTES, (int64_t)p->released_by_cat[c]);
    }
}

const gm_policy_ops gm_policy_priority = {
    .version = GM_POLICY_VERSION,
    .name = "priority",
    .summary = "release by tensor category (order=activation>temporary>...), ties by LRU",
    .realizable = 1,
    .cost = 1.05,
    .create = create,
    .destroy = destroy,
    .before_grow = before_grow,
    .on_alloc_fail = on_alloc_fail,
    .report = report,
    .on_foreign_pressure = on_foreign_pressure,
    .inert = gm_threshold_inert,
};
