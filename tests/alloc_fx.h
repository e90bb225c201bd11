/*
 * alloc_fx.h - the fixture the allocator-model tests share: a simulated
 * device, a release policy, one allocator instance and a log of its driver
 * calls. Header-only (static functions), included by tests/test_alloc_*.c.
 */
#ifndef GM_TESTS_ALLOC_FX_H
#define GM_TESTS_ALLOC_FX_H

#include <string.h>

#include "cu.h"
#include "policies/registry.h"
#include "sim/alloc.h"
#include "sim/device.h"

#define MiB GM_MiB
#define KiB GM_KiB
#define GiB GM_GiB

typedef struct fx_log {
    int n;
    gm_seg_event ev[512];
} fx_log;

typedef struct fx {
    gm_device *dev;
    gm_policy *pol;
    gm_alloc *a;
    fx_log log;
    gm_err err;
} fx;

static inline void fx_hook(void *ctx, const gm_seg_event *ev)
{
    fx_log *l = ctx;
    if (l->n < 512) l->ev[l->n++] = *ev;
}

/* Open a device of `capacity` bytes (no context overhead) with allocator
 * `alloc` configured by `conf` and release policy `policy`. Returns the
 * gm_alloc_create code (f->err has the message). */
static inline int fx_open_policy(fx *f, uint64_t capacity, const char *alloc, const char *conf,
                                 double fraction, const char *policy)
{
    memset(f, 0, sizeof *f);
    if (gm_device_model_create(capacity, NULL, &f->dev, &f->err) != GM_OK) return -1;
    if (gm_policy_create(policy, &f->pol, &f->err) != GM_OK) return -1;
    int rc = gm_alloc_create(gm_alloc_find(alloc), f->dev, conf, fraction, f->pol, &f->a, &f->err);
    if (rc == GM_OK) {
        f->a->seg_hook = fx_hook;
        f->a->seg_hook_ctx = &f->log;
    }
    return rc;
}

static inline int fx_open(fx *f, uint64_t capacity, const char *alloc, const char *conf)
{
    return fx_open_policy(f, capacity, alloc, conf, 0, "pytorch");
}

static inline void fx_close(fx *f)
{
    gm_alloc_destroy(f->a);
    gm_policy_destroy(f->pol);
    if (f->dev) CU_ASSERT_EQUAL(f->dev->used_bytes, 0); /* destroy gave everything back */
    gm_device_destroy(f->dev);
    memset(f, 0, sizeof *f);
}

/* malloc that must succeed; returns the handle. */
static inline uint64_t fx_alloc_at(fx *f, uint64_t size, uint64_t stream, uint64_t now)
{
    uint64_t h = 0;
    int rc = f->a->ops->malloc(f->a, size, stream, GM_CAT_ACTIVATION, now, &h);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    return h;
}

static inline uint64_t fx_alloc(fx *f, uint64_t size, uint64_t stream)
{
    return fx_alloc_at(f, size, stream, 0);
}

/* malloc that must fail with GM_EOOM. */
static inline void fx_alloc_oom(fx *f, uint64_t size, uint64_t stream, uint64_t now)
{
    uint64_t h = 0;
    CU_ASSERT_EQUAL(f->a->ops->malloc(f->a, size, stream, GM_CAT_ACTIVATION, now, &h), GM_EOOM);
}

static inline void fx_free(fx *f, uint64_t h, uint64_t now)
{
    f->a->ops->free(f->a, h, now);
}

/* Address of a live allocation. */
static inline uint64_t fx_addr(fx *f, uint64_t h)
{
    return f->a->ops->block_addr(f->a, h);
}

/* Driver calls of kind op (GM_OP_SEGMENT_ALLOC / _FREE) seen so far. */
static inline int fx_count(const fx *f, int op)
{
    int n = 0;
    for (int i = 0; i < f->log.n; i++)
        n += f->log.ev[i].op == op;
    return n;
}

/* Size of the k-th driver call of kind op (0-based), 0 if none. */
static inline uint64_t fx_size(const fx *f, int op, int k)
{
    for (int i = 0; i < f->log.n; i++)
        if (f->log.ev[i].op == op && k-- == 0) return f->log.ev[i].size;
    return 0;
}

#endif
