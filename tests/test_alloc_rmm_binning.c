/*
 * test_alloc_rmm_binning.c - one hand-checked case per rule that
 * sim/alloc_rmm_binning.c claims from RMM's binning_memory_resource and
 * fixed_size_memory_resource. Bins of 4 KiB and 8 KiB (exponents 12..13)
 * keep the numbers small: 128 blocks are 512 KiB and 1 MiB, each one
 * cudaMalloc the driver rounds to 2 MiB.
 */
#include "alloc_fx.h"

#define SMALL "min_size_exponent:12,max_size_exponent:13"

/* Each bin allocates its first 128 blocks when the resource is built; a
 * request goes to the smallest bin that holds it, a larger one straight to
 * cudaMalloc, freed at once. */
static void test_bins(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "rmm-binning", SMALL), GM_OK);
    uint64_t a = fx_alloc(&f, 3000, 0);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 2); /* both bins' 128 blocks */
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 4 * MiB);       /* 512 KiB and 1 MiB, 2 MiB pages */
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 4 * KiB);      /* the 4 KiB bin */
    uint64_t b = fx_alloc(&f, 4097, 0);                    /* -> 8 KiB */
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 12 * KiB);
    uint64_t c = fx_alloc(&f, 9000, 0); /* above the bins: cudaMalloc(9216) */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 3);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 12 * KiB + 9216);
    fx_free(&f, c, 1);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_FREE), 1); /* cudaFree at once */
    fx_free(&f, a, 1);
    fx_free(&f, b, 1);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_FREE), 1); /* bins keep their blocks */
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 100), 4 * KiB);
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 8 * KiB), 8 * KiB);
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 8 * KiB + 1), 8 * KiB + 256);
    fx_close(&f);
}

/* Free lists are first-in first-out: a freed block goes to the back. */
static void test_fifo(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "rmm-binning", SMALL), GM_OK);
    uint64_t x = fx_alloc(&f, 4 * KiB, 0); /* block 0 */
    uint64_t base = fx_addr(&f, x);
    uint64_t y = fx_alloc(&f, 4 * KiB, 0); /* block 1 */
    CU_ASSERT_EQUAL(fx_addr(&f, y) - base, 4 * KiB);
    fx_free(&f, x, 1); /* list: 2..127, 0 */
    fx_free(&f, y, 1); /* list: 2..127, 0, 1 */
    uint64_t z = fx_alloc(&f, 4 * KiB, 0);
    CU_ASSERT_EQUAL(fx_addr(&f, z) - base, 8 * KiB); /* block 2, not the freed block 0 */
    fx_close(&f);
}

/* When a stream finds no block, 128 more come from upstream. */
static void test_growth(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "rmm-binning", SMALL), GM_OK);
    for (int i = 0; i < 128; i++)
        fx_alloc(&f, 4 * KiB, 0);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 2);
    fx_alloc(&f, 4 * KiB, 0); /* the 129th */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 3);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 2), 2 * MiB); /* 512 KiB, rounded */
    fx_close(&f);
}

/* A stream with an empty list takes the front block of another stream's
 * list; its frees go to its own list. */
static void test_streams(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "rmm-binning", SMALL), GM_OK);
    uint64_t a = fx_alloc(&f, 4 * KiB, 5); /* stream 0's front: block 0 */
    uint64_t base = fx_addr(&f, a);
    fx_free(&f, a, 1); /* stream 5's list: block 0 */
    uint64_t b = fx_alloc(&f, 4 * KiB, 0);
    CU_ASSERT_EQUAL(fx_addr(&f, b) - base, 4 * KiB); /* stream 0's own front: block 1 */
    uint64_t c = fx_alloc(&f, 4 * KiB, 5);
    CU_ASSERT_EQUAL(fx_addr(&f, c), base); /* stream 5's own: block 0 */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 2);
    fx_close(&f);
}

/* An OOM stays one: nothing cached can be released. */
static void test_oom(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open_policy(&f, 6 * MiB, "rmm-binning", SMALL, 0, "lru"), GM_OK);
    fx_alloc(&f, 4 * KiB, 0);              /* the bins: 4 MiB */
    fx_alloc_oom(&f, 3 * MiB, 0, 1);       /* cudaMalloc of 3 MiB: 2 MiB left */
    uint64_t h = fx_alloc(&f, 2 * MiB, 0); /* fits exactly */
    fx_free(&f, h, 2);
    fx_close(&f);
}

static void test_settings(void)
{
    fx f;
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "rmm-binning", "min_size_exponent:20,max_size_exponent:18"),
                    GM_EINVAL);
    fx_close(&f);
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "rmm-binning", "min_size_exponent:4"), GM_EINVAL);
    fx_close(&f);
    /* RMM's documented example, the default: 256 KiB .. 4 MiB, 128 blocks each */
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 4 * GiB, "rmm-binning", ""), GM_OK);
    fx_alloc(&f, 1, 0);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 5);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, (32 + 64 + 128 + 256 + 512) * MiB);
    fx_close(&f);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("alloc_rmm_binning", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_bins);
    GM_ADD_TEST(s, test_fifo);
    GM_ADD_TEST(s, test_growth);
    GM_ADD_TEST(s, test_streams);
    GM_ADD_TEST(s, test_oom);
    GM_ADD_TEST(s, test_settings);
    return CUE_SUCCESS;
}
