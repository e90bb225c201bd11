/*
 * test_alloc_rmm_pool.c - one hand-checked case per rule that
 * sim/alloc_rmm_pool.c claims from RMM's pool_memory_resource. Expected
 * values are worked out in the comments (addresses relative to the pool's
 * first byte, "base").
 */
#include "alloc_fx.h"

/* initialize_pool: one upstream allocation of initial_pool_size; without
 * one, half the free memory (min(free, total / 2), aligned to 256 B). */
static void test_initial_pool(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "rmm-pool", "initial_pool_size:8MiB"), GM_OK);
    CU_ASSERT_EQUAL(f.log.n, 0); /* built at the first call */
    fx_alloc(&f, MiB, 0);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 0), 8 * MiB);
    fx_alloc(&f, 7 * MiB, 0); /* fills it: no growth */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    fx_close(&f);

    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 64 * MiB, "rmm-pool", ""), GM_OK);
    fx_alloc(&f, 1000, 0);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 0), 32 * MiB); /* 64 MiB free / 2 */
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 1024);                  /* 256 B alignment */
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 1100), 1280);         /* not 1536: 256, not 512 */
    fx_close(&f);
}

/* Best fit over the coalescing free list: smallest block that fits, the
 * lowest address among equals; the request takes the low part. */
static void test_best_fit(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "rmm-pool", "initial_pool_size:8MiB"), GM_OK);
    uint64_t a = fx_alloc(&f, 2 * MiB, 0); /* [0, 2M) */
    uint64_t b = fx_alloc(&f, MiB, 0);     /* [2M, 3M) */
    uint64_t c = fx_alloc(&f, MiB, 0);     /* [3M, 4M) */
    fx_alloc(&f, 3 * MiB, 0);              /* [4M, 7M); [7M, 8M) stays free */
    uint64_t base = fx_addr(&f, a);
    fx_free(&f, a, 1); /* free: 2M@0, 1M@7M */
    fx_free(&f, c, 1); /* free: 2M@0, 1M@3M, 1M@7M (b and d keep them apart) */
    uint64_t x = fx_alloc(&f, MiB, 0);
    CU_ASSERT_EQUAL(fx_addr(&f, x) - base, 3 * MiB); /* 1 MiB: the lowest of the two */
    uint64_t y = fx_alloc(&f, 3 * MiB / 2, 0);
    CU_ASSERT_EQUAL(fx_addr(&f, y) - base, 0); /* 1.5 MiB: the 2 MiB block */
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), MiB);
    /* coalescing: freeing y, b and x joins [0, 1.5M) [1.5M, 2M) [2M, 3M) [3M, 4M) */
    fx_free(&f, y, 2);
    fx_free(&f, b, 2);
    fx_free(&f, x, 2);
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), 4 * MiB);
    uint64_t z = fx_alloc(&f, 4 * MiB, 0);
    CU_ASSERT_EQUAL(fx_addr(&f, z) - base, 0);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    fx_close(&f);
}

/* Growth without a maximum doubles (size_to_grow = max(size, pool size));
 * blocks of two upstream allocations never merge, even when contiguous. */
static void test_growth_doubling_and_heads(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "rmm-pool", "initial_pool_size:4MiB"), GM_OK);
    uint64_t a = fx_alloc(&f, 4 * MiB, 0); /* the whole initial pool */
    uint64_t b = fx_alloc(&f, MiB, 0);     /* grows by max(1M, 4M) = 4 MiB */
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 1), 4 * MiB);
    fx_alloc(&f, 4 * MiB, 0); /* 3 MiB free: grows by max(4M, 8M) = 8 MiB */
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 2), 8 * MiB);
    /* the device hands out rising addresses: the second allocation starts
     * where the first ends, yet its head does not merge with it */
    CU_ASSERT_EQUAL(fx_addr(&f, b), fx_addr(&f, a) + 4 * MiB);
    fx_free(&f, a, 1);
    fx_free(&f, b, 1); /* [4M, 8M) whole again, next to [0, 4M): two blocks */
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), 4 * MiB);
    gm_seg_info s[4];
    CU_ASSERT_EQUAL(f.a->ops->segments(f.a, s, 4), 3);
    fx_close(&f);
}

/* With a maximum: grow by max(size, (maximum - pool) / 2) while the
 * request fits in what remains; then "Maximum pool size exceeded" even
 * with room on the device. */
static void test_growth_maximum(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(
        fx_open(&f, GiB, "rmm-pool", "initial_pool_size:4MiB,maximum_pool_size:16MiB"), GM_OK);
    fx_alloc(&f, 4 * MiB, 0);
    fx_alloc(&f, MiB, 0); /* remaining 12 MiB: grow by max(1M, 6M) = 6 MiB; 5 MiB left */
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 1), 6 * MiB);
    fx_alloc(&f, 6 * MiB, 0); /* remaining 6 MiB: grow by max(6M, 3M) = 6 MiB: pool 16 MiB */
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 2), 6 * MiB);
    fx_alloc_oom(&f, 6 * MiB, 0, 1); /* 5 MiB free, nothing remains under the maximum */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 3);
    fx_alloc(&f, 5 * MiB, 0); /* the 5 MiB block */
    fx_close(&f);
}

/* try_to_expand halves the attempt on failure, down to the request. */
static void test_try_to_expand_halves(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 14 * MiB, "rmm-pool", "initial_pool_size:8MiB"), GM_OK);
    fx_alloc(&f, 8 * MiB, 0);
    /* grow 8 MiB: the device has 6 MiB -> refused; 4 MiB -> granted */
    fx_alloc(&f, 2 * MiB, 0);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 2);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 1), 4 * MiB);
    fx_alloc(&f, 2 * MiB, 0); /* the rest of that 4 MiB */
    /* 3 MiB: grow max(3M, 12M) = 12 -> 6 -> 3 MiB; the device has 2 MiB: OOM */
    fx_alloc_oom(&f, 3 * MiB, 0, 1);
    fx_close(&f);
}

/* Per-stream free lists: a stream takes another stream's best fit (the
 * remainder stays there); its own frees go to its own list and do not merge
 * with the other list until a merge pass. */
static void test_streams(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "rmm-pool", "initial_pool_size:4MiB"), GM_OK);
    uint64_t a = fx_alloc(&f, MiB, 7); /* from stream 0's list: [0, 1M); [1M, 4M) stays there */
    uint64_t base = fx_addr(&f, a);
    fx_free(&f, a, 1); /* into stream 7's list: 1M@0, apart from stream 0's 3M@1M */
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), 3 * MiB);
    uint64_t b = fx_alloc(&f, 2 * MiB, 0); /* stream 0's own list: [1M, 3M) */
    CU_ASSERT_EQUAL(fx_addr(&f, b) - base, MiB);
    fx_free(&f, b, 2); /* stream 0: 3M@1M again */
    /* 4 MiB on stream 7: own list 1M, stream 0's 3M: no; merge stream 0's
     * list into 7's: [0,1M) + [1M,4M) = 4 MiB at 0. No growth. */
    uint64_t c = fx_alloc(&f, 4 * MiB, 7);
    CU_ASSERT_EQUAL(fx_addr(&f, c), base);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    fx_close(&f);
}

/* Nothing can be released: release and empty_cache give 0, and an OOM
 * stays an OOM whatever the policy. */
static void test_no_release(void)
{
    static const char *const policies[] = {"pytorch", "lru", "priority"};
    for (size_t i = 0; i < 3; i++) {
        fx f;
        CU_ASSERT_EQUAL_FATAL(fx_open_policy(&f, GiB, "rmm-pool",
                                             "initial_pool_size:4MiB,maximum_pool_size:4MiB", 0,
                                             policies[i]),
                              GM_OK);
        uint64_t a = fx_alloc(&f, 2 * MiB, 0);
        fx_free(&f, a, 1);
        gm_seg_info s[1];
        CU_ASSERT_EQUAL(f.a->ops->segments(f.a, s, 1), 1);
        CU_ASSERT_EQUAL(s[0].releasable, 0);
        CU_ASSERT_EQUAL(f.a->ops->release(f.a, s[0].id, 2), 0);
        CU_ASSERT_EQUAL(f.a->ops->empty_cache(f.a, 2), 0);
        fx_alloc_oom(&f, 5 * MiB, 0, 3);
        CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 4 * MiB);
        CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_FREE), 0);
        fx_close(&f);
    }
}

static void test_settings(void)
{
    fx f;
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "rmm-pool", "initial_pool_size:1000"), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "256"));
    fx_close(&f);
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "rmm-pool", "initial_pool_size:2GiB,maximum_pool_size:1GiB"),
                    GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "exceeds"));
    fx_close(&f);
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "rmm-pool", "pool_size:1GiB"), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "initial_pool_size, maximum_pool_size"));
    fx_close(&f);
    /* an initial pool larger than the device: an OOM at the first call */
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 64 * MiB, "rmm-pool", "initial_pool_size:128MiB"), GM_OK);
    fx_alloc_oom(&f, MiB, 0, 0);
    fx_close(&f);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("alloc_rmm_pool", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_initial_pool);
    GM_ADD_TEST(s, test_best_fit);
    GM_ADD_TEST(s, test_growth_doubling_and_heads);
    GM_ADD_TEST(s, test_growth_maximum);
    GM_ADD_TEST(s, test_try_to_expand_halves);
    GM_ADD_TEST(s, test_streams);
    GM_ADD_TEST(s, test_no_release);
    GM_ADD_TEST(s, test_settings);
    return CUE_SUCCESS;
}
