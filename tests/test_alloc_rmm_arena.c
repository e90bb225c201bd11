/*
 * test_alloc_rmm_arena.c - one hand-checked case per rule that
 * sim/alloc_rmm_arena.c claims from RMM's arena_memory_resource. Addresses
 * are relative to the global arena's first byte ("base").
 */
#include "alloc_fx.h"

/* The global arena is one upstream allocation, arena_size or half the free
 * device memory, taken at the first call and never grown. */
static void test_global_arena(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 64 * MiB, "rmm-arena", ""), GM_OK);
    CU_ASSERT_EQUAL(f.log.n, 0);
    fx_alloc(&f, 1000, 1);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 0), 32 * MiB);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 1024); /* aligned to 256 B */
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 1100), 1280);
    fx_close(&f);
}

/* Small requests (<= 1 MiB) go to their stream's arena, which acquires
 * 1 MiB superblocks split off an empty global superblock; large ones are
 * served by the global arena directly, split to max(1 MiB, size); a freed
 * global superblock that is empty coalesces with empty neighbours. */
static void test_superblocks(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "rmm-arena", "arena_size:16MiB"), GM_OK);
    uint64_t a = fx_alloc(&f, 256 * KiB, 1); /* s1 acquires [0,1M); tail [1M,16M) */
    uint64_t base = fx_addr(&f, a);
    uint64_t b = fx_alloc(&f, 512 * KiB, 1); /* [256K,768K) in s1's superblock */
    CU_ASSERT_EQUAL(fx_addr(&f, b) - base, 256 * KiB);
    uint64_t c = fx_alloc(&f, 512 * KiB, 1); /* 256K left: s1 acquires [1M,2M) */
    CU_ASSERT_EQUAL(fx_addr(&f, c) - base, MiB);
    uint64_t d = fx_alloc(&f, 256 * KiB, 2); /* stream 2's own arena: [2M,3M) */
    CU_ASSERT_EQUAL(fx_addr(&f, d) - base, 2 * MiB);
    uint64_t e = fx_alloc(&f, 3 * MiB, 1); /* global: [3M,6M) split off [3M,16M) */
    CU_ASSERT_EQUAL(fx_addr(&f, e) - base, 3 * MiB);
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), 10 * MiB); /* [6M,16M) */
    fx_free(&f, e, 1); /* [3M,6M) empty again: joins [6M,16M) */
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), 13 * MiB);
    uint64_t g = fx_alloc(&f, 13 * MiB, 2); /* exactly [3M,16M): no split */
    CU_ASSERT_EQUAL(fx_addr(&f, g) - base, 3 * MiB);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    fx_close(&f);
}

/* Address-ordered first fit, not best fit. */
static void test_first_fit(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "rmm-arena", "arena_size:16MiB"), GM_OK);
    uint64_t x = fx_alloc(&f, 512 * KiB, 1); /* [0,512K) */
    uint64_t base = fx_addr(&f, x);
    fx_alloc(&f, 128 * KiB, 1); /* [512K,640K); [640K,1M) = 384K free */
    fx_free(&f, x, 1);          /* free: 512K at 0, 384K at 640K */
    uint64_t y = fx_alloc(&f, 300 * KiB, 1);
    CU_ASSERT_EQUAL(fx_addr(&f, y), base); /* first fit: 0 (best fit would take 640K) */
    fx_close(&f);
}

/* When a search fails, every arena's superblocks go back to the global
 * arena (defragment) and the search runs once more; then out of memory. */
static void test_defragment(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "rmm-arena", "arena_size:4MiB"), GM_OK);
    uint64_t a1 = fx_alloc(&f, MiB, 1); /* s1: [0,1M) */
    uint64_t base = fx_addr(&f, a1);
    uint64_t a2 = fx_alloc(&f, MiB, 2); /* s2: [1M,2M) */
    uint64_t a3 = fx_alloc(&f, MiB, 3); /* s3: [2M,3M); global keeps [3M,4M) */
    fx_free(&f, a1, 1);
    fx_free(&f, a2, 1);
    fx_free(&f, a3, 1); /* the arenas keep their (empty) superblocks */
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), MiB);
    /* 3 MiB: the global set holds only [3M,4M); defragment joins all four
     * empty superblocks into [0,4M), then [0,3M) is taken */
    uint64_t big = fx_alloc(&f, 3 * MiB, 1);
    CU_ASSERT_EQUAL(fx_addr(&f, big), base);
    fx_alloc_oom(&f, 2 * MiB, 1, 2); /* 1 MiB left: "Maximum pool size exceeded" */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 4 * MiB);
    gm_seg_info s[1];
    CU_ASSERT_EQUAL(f.a->ops->segments(f.a, s, 1), 1);
    CU_ASSERT_EQUAL(s[0].releasable, 0);
    CU_ASSERT_EQUAL(f.a->ops->empty_cache(f.a, 3), 0);
    fx_close(&f);
}

static void test_settings(void)
{
    fx f;
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "rmm-arena", "arena_size:512KiB"), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "1 MiB"));
    fx_close(&f);
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "rmm-arena", "initial_pool_size:1GiB"), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "arena_size"));
    fx_close(&f);
    /* a global arena larger than the device: an OOM at the first call */
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 8 * MiB, "rmm-arena", "arena_size:16MiB"), GM_OK);
    fx_alloc_oom(&f, KiB, 0, 0);
    fx_close(&f);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("alloc_rmm_arena", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_global_arena);
    GM_ADD_TEST(s, test_superblocks);
    GM_ADD_TEST(s, test_first_fit);
    GM_ADD_TEST(s, test_defragment);
    GM_ADD_TEST(s, test_settings);
    return CUE_SUCCESS;
}
