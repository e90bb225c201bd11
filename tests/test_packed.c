/*
 * test_packed.c - a packed trace (traces/packed.h) gives back exactly the
 * events put in: every field, at its extremes, read in pieces of any size,
 * again after a rewind and by several cursors at once; a store refuses to
 * grow past its bytes, and an event it cannot hold.
 */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "traces/packed.h"

static int same_event(const gm_event *a, const gm_event *b)
{
    return a->t_ns == b->t_ns && a->addr == b->addr && a->size == b->size &&
           a->stream == b->stream && a->op == b->op && a->category == b->category &&
           a->phase == b->phase && a->id == b->id && a->site == b->site;
}

/* Read all of c in pieces of `piece` events; 1 when they are ev[0..n). */
static int reads_back(gm_packed_cursor *c, const gm_event *ev, size_t n, size_t piece)
{
    gm_event *buf = malloc(piece * sizeof *buf);
    size_t at = 0, k;
    int ok = buf != NULL;
    while (ok && (k = gm_packed_read(c, buf, piece)) > 0) {
        for (size_t j = 0; ok && j < k; j++)
            ok = at + j < n && same_event(&buf[j], &ev[at + j]);
        at += k;
    }
    free(buf);
    return ok && at == n;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Events that use every path: frees that repeat their allocation (by id),
 * ones that do not, times that go back, values of 1 to 8 bytes and the
 * largest, streams and sites that change or stay. */
static gm_event *mixed_events(size_t n)
{
    gm_event *ev = calloc(n, sizeof *ev);
    uint64_t s = 88172645463325252ull, t = 1000;
    for (size_t i = 0; ev && i < n; i++) {
        gm_event *e = &ev[i];
        uint64_t r = rnd(&s);
        unsigned width = (unsigned)(r % 9) * 8; /* 0..64 bits */
        uint64_t big = width ? rnd(&s) >> (64 - width) : 0;
        t = r % 17 == 0 ? t - (r % 1000) : t + (r % 3 ? r % 50000 : big);
        e->t_ns = t;
        e->op = (uint8_t)(r % 11 == 0 ? GM_OP_EMPTY_CACHE : (r >> 8) % 2);
        e->id = (uint32_t)((r >> 12) % 5 == 0 ? 0 : (r >> 16) % 3000);
        if (e->op == GM_OP_FREE && i && e->id && r % 7) { /* as its allocation, mostly */
            for (size_t j = i; j-- > 0;)
                if (ev[j].id == e->id) {
                    e->addr = ev[j].addr;
                    e->size = ev[j].size;
                    break;
                }
        } else {
            e->addr = r % 13 == 0 ? UINT64_MAX - (r % 5) : 0x7f0000000000ull + (big & 0xffffffffff);
            e->size = r % 19 == 0 ? UINT64_MAX : big;
        }
        e->stream = r % 23 == 0 ? rnd(&s) : (r % 29 == 0 ? UINT64_MAX : 7);
        e->category = (uint8_t)(r >> 20) % GM_CAT_COUNT;
        e->phase = (uint8_t)(r >> 24) % GM_PHASE_COUNT;
        e->site = r % 31 == 0 ? UINT32_MAX : (r % 3 == 0 ? (uint32_t)(r >> 40) % 500 : 0);
        if (r % 37 == 0) e->id = UINT32_MAX - 1; /* the largest ids still pack */
    }
    return ev;
}

static void test_round_trip(void)
{
    const size_t n = 200000;
    gm_event *ev = mixed_events(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    /* the largest ids would need a 64 GiB table: keep them out here, and
     * check them on their own below */
    for (size_t i = 0; i < n; i++)
        if (ev[i].id == UINT32_MAX - 1) ev[i].id = 1;
    gm_packed *p = gm_packed_new(UINT64_MAX / 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    /* appended in uneven pieces */
    for (size_t i = 0; i < n;) {
        size_t k = i % 7 == 0 ? 1 : 4093;
        if (k > n - i) k = n - i;
        CU_ASSERT_EQUAL_FATAL(gm_packed_append(p, ev + i, k), GM_OK);
        i += k;
    }
    gm_packed_finish(p);
    CU_ASSERT_EQUAL(gm_packed_events(p), n);
    CU_ASSERT_TRUE(gm_packed_bytes(p) < n * sizeof *ev); /* smaller than the events */
    gm_packed_cursor *a = gm_packed_cursor_new(p), *b = gm_packed_cursor_new(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    static const size_t pieces[] = {1, 3, 64, 65536, 1000000};
    for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++) {
        CU_ASSERT_TRUE(reads_back(a, ev, n, pieces[i]));
        gm_event one;
        CU_ASSERT_EQUAL(gm_packed_read(a, &one, 1), 0); /* at the end: nothing */
        gm_packed_rewind(a);
    }
    /* two cursors, interleaved: each its own position */
    gm_event x[100], y[100];
    CU_ASSERT_EQUAL(gm_packed_read(a, x, 100), 100);
    CU_ASSERT_EQUAL(gm_packed_read(b, y, 50), 50);
    CU_ASSERT_EQUAL(gm_packed_read(b, y + 50, 50), 50);
    for (size_t i = 0; i < 100; i++)
        CU_ASSERT_TRUE(same_event(&x[i], &y[i]) && same_event(&x[i], &ev[i]));
    gm_packed_cursor_free(a);
    gm_packed_cursor_free(b);
    gm_packed_free(p);
    free(ev);
}

static void test_empty_and_one(void)
{
    gm_packed *p = gm_packed_new(1000);
    gm_packed_finish(p);
    gm_packed_cursor *c = gm_packed_cursor_new(p);
    gm_event e;
    CU_ASSERT_EQUAL(gm_packed_read(c, &e, 1), 0);
    gm_packed_cursor_free(c);
    gm_packed_free(p);
    gm_event one = {.t_ns = UINT64_MAX,
                    .addr = UINT64_MAX,
                    .size = UINT64_MAX,
                    .stream = UINT64_MAX,
                    .op = GM_OP_OOM,
                    .category = GM_CAT_COUNT - 1,
                    .phase = GM_PHASE_COUNT - 1,
                    .id = 0,
                    .site = UINT32_MAX};
    p = gm_packed_new(1000);
    CU_ASSERT_EQUAL_FATAL(gm_packed_append(p, &one, 1), GM_OK);
    gm_packed_finish(p);
    c = gm_packed_cursor_new(p);
    CU_ASSERT_TRUE(reads_back(c, &one, 1, 5));
    gm_packed_cursor_free(c);
    gm_packed_free(p);
}

/* A store stops at its bytes, and at an event whose op, category or phase
 * does not fit its 4 bits (never one of a checked trace). */
static void test_refusals(void)
{
    gm_event *ev = mixed_events(10000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    for (size_t i = 0; i < 10000; i++)
        if (ev[i].id == UINT32_MAX - 1) ev[i].id = 2;
    gm_packed *p = gm_packed_new(5000);
    CU_ASSERT_EQUAL(gm_packed_append(p, ev, 10000), GM_PACKED_FULL);
    CU_ASSERT_TRUE(gm_packed_bytes(p) <= 5000);
    gm_packed_free(p);
    gm_event bad[3] = {{.op = 16}, {.category = 16}, {.phase = 16}};
    for (int i = 0; i < 3; i++) {
        p = gm_packed_new(1000);
        CU_ASSERT_EQUAL(gm_packed_append(p, &bad[i], 1), GM_PACKED_FULL);
        gm_packed_free(p);
    }
    free(ev);
}

/* The largest id still packs (its decoder's table holds every id up to
 * it: a live slot is one of as many as are live at once). */
static void test_large_id(void)
{
    gm_event ev[2] = {{.t_ns = 1, .addr = 4096, .size = 512, .op = GM_OP_ALLOC, .id = 1u << 20},
                      {.t_ns = 2, .addr = 4096, .size = 512, .op = GM_OP_FREE, .id = 1u << 20}};
    gm_packed *p = gm_packed_new(1000);
    CU_ASSERT_EQUAL_FATAL(gm_packed_append(p, ev, 2), GM_OK);
    gm_packed_finish(p);
    gm_packed_cursor *c = gm_packed_cursor_new(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_TRUE(reads_back(c, ev, 2, 2));
    gm_packed_cursor_free(c);
    gm_packed_free(p);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("packed", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_round_trip);
    GM_ADD_TEST(s, test_empty_and_one);
    GM_ADD_TEST(s, test_refusals);
    GM_ADD_TEST(s, test_large_id);
    return CUE_SUCCESS;
}
