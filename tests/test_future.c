/*
 * test_future.c - the oracle's future store (policies/future.h): lookups
 * against a plain array, forward as the replay goes, back (a new pass) and
 * at random; big deltas; a file larger than the store reads at once; a
 * temporary folder that cannot be written.
 */
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "policies/future.h"

static uint64_t rnd(uint64_t *s) /* xorshift64* */
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* The answer from the plain lists (indices ascend): first entry >= from. */
static int lookup(const uint64_t *idx, const uint64_t *t, size_t n, uint64_t from, uint64_t *oi,
                  uint64_t *ot)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (idx[mid] < from)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == n) return 0;
    *oi = idx[lo];
    *ot = t[lo];
    return 1;
}

/* The store's answer for key's first entry >= q is the lists' one. */
static void expect_next(gm_future *f, long key, const uint64_t *idx, const uint64_t *t, size_t n,
                        uint64_t q)
{
    uint64_t a, b, x, y;
    int want = lookup(idx, t, n, q, &a, &b);
    CU_ASSERT_EQUAL_FATAL(gm_future_next(f, key, q, &x, &y), want);
    if (want) {
        CU_ASSERT_EQUAL_FATAL(x, a);
        CU_ASSERT_EQUAL_FATAL(y, b);
    }
}

#define KEYS 5
#define N 5000

static void test_lookups_match_the_lists(void)
{
    gm_future *f;
    gm_err err = {0};
    CU_ASSERT_FATAL(gm_future_open(&f, &err) == GM_OK);
    static uint64_t idx[KEYS][N], t[KEYS][N];
    size_t n[KEYS] = {0};
    long key[KEYS];
    for (int k = 0; k < KEYS; k++)
        key[k] = gm_future_key(f);
    uint64_t s = 42, time = 0;
    /* events 0..: each goes to one key (key 4 stays empty; key 3 gets one) */
    for (uint64_t i = 0; i < 3 * N; i++) {
        time += rnd(&s) % 3 ? rnd(&s) % 1000 : (1ull << 40); /* some huge gaps */
        int k = (int)(rnd(&s) % 3);
        if (i == 777) k = 3;
        if (n[k] == N) continue;
        idx[k][n[k]] = i;
        t[k][n[k]++] = time;
        CU_ASSERT_FATAL(gm_future_add(f, key[k], i, time, &err) == GM_OK);
    }
    CU_ASSERT_FATAL(gm_future_seal(f, &err) == GM_OK);
    for (int k = 0; k < KEYS; k++)
        CU_ASSERT_EQUAL(gm_future_count(f, key[k]), n[k]);
    CU_ASSERT(gm_future_file_bytes(f) > 0);
    CU_ASSERT(gm_future_file_bytes(f) < 3 * N * 16); /* delta-encoded: smaller than raw */
    uint64_t x, y;
    /* forward, as the replay goes (with one step back now and then), twice (passes) */
    for (int pass = 0; pass < 2; pass++)
        for (uint64_t from = 0; from <= 3 * N + 2; from++)
            for (int k = 0; k < KEYS; k++)
                expect_next(f, key[k], idx[k], t[k], n[k],
                            from && rnd(&s) % 4 == 0 ? from - 1 : from);
    /* at random */
    for (int i = 0; i < 20000; i++) {
        int k = (int)(rnd(&s) % KEYS);
        expect_next(f, key[k], idx[k], t[k], n[k], rnd(&s) % (3 * N + 10));
    }
    CU_ASSERT_EQUAL(gm_future_first(f, key[4], &x, &y), 0);
    CU_ASSERT_EQUAL(gm_future_first(f, key[3], &x, &y), 1);
    CU_ASSERT_EQUAL(x, 777);
    CU_ASSERT_EQUAL(gm_future_first(f, key[0], &x, &y), 1);
    CU_ASSERT_EQUAL(x, idx[0][0]);
    CU_ASSERT_EQUAL(y, t[0][0]);
    gm_future_free(f);
}

#define MKEYS 64
#define MEVENTS (1u << 19)

/* A file several times what the store reads at once (future.c: eight
 * windows of 64 KiB), so that reads replace windows: forward across all
 * keys, a pass from the start again, and at random. */
static void test_many_keys_beyond_the_read_windows(void)
{
    gm_future *f;
    gm_err err = {0};
    CU_ASSERT_FATAL(gm_future_open(&f, &err) == GM_OK);
    static uint64_t idx[MKEYS][MEVENTS / 16], t[MKEYS][MEVENTS / 16];
    size_t n[MKEYS] = {0};
    long key[MKEYS];
    for (int k = 0; k < MKEYS; k++)
        key[k] = gm_future_key(f);
    uint64_t s = 7, time = 0;
    for (uint64_t i = 0; i < MEVENTS; i++) {
        time += rnd(&s) % 100000;
        int k = (int)(rnd(&s) % MKEYS);
        if (n[k] == MEVENTS / 16) continue;
        idx[k][n[k]] = i;
        t[k][n[k]++] = time;
        CU_ASSERT_FATAL(gm_future_add(f, key[k], i, time, &err) == GM_OK);
    }
    CU_ASSERT_FATAL(gm_future_seal(f, &err) == GM_OK);
    CU_ASSERT(gm_future_file_bytes(f) > (1u << 20)); /* 16 read windows' worth */
    for (int pass = 0; pass < 2; pass++)
        for (uint64_t from = 0; from <= MEVENTS; from += 5) {
            int k = (int)(rnd(&s) % MKEYS);
            expect_next(f, key[k], idx[k], t[k], n[k], from);
        }
    for (int i = 0; i < 100000; i++) {
        int k = (int)(rnd(&s) % MKEYS);
        expect_next(f, key[k], idx[k], t[k], n[k], rnd(&s) % (MEVENTS + 10));
    }
    gm_future_free(f);
}

static void test_unwritable_tmpdir_is_an_error(void)
{
    const char *old = getenv("TMPDIR");
    char *keep = old ? strdup(old) : NULL;
    setenv("TMPDIR", "/nonexistent/gmsim-test", 1);
    gm_future *f = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL(gm_future_open(&f, &err), GM_EIO);
    CU_ASSERT_PTR_NULL(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent/gmsim-test"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "TMPDIR"));
    if (keep)
        setenv("TMPDIR", keep, 1);
    else
        unsetenv("TMPDIR");
    free(keep);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("future", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_lookups_match_the_lists);
    GM_ADD_TEST(s, test_many_keys_beyond_the_read_windows);
    GM_ADD_TEST(s, test_unwritable_tmpdir_is_an_error);
    return CUE_SUCCESS;
}
