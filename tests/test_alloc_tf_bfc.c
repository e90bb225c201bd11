/*
 * test_alloc_tf_bfc.c - one hand-checked case per rule that
 * sim/alloc_tf_bfc.c claims from TensorFlow's BFC allocator. Addresses are
 * relative to the first region's first byte ("base").
 */
#include "alloc_fx.h"

/* per_process_gpu_memory_fraction 0.5 of 1 GiB: a 512 MiB limit. */
#define HALF "per_process_gpu_memory_fraction:0.5"

/* Without allow_growth the first allocation takes the whole limit. */
static void test_no_growth(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "tf-bfc", HALF), GM_OK);
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 1000), 1024); /* RoundedBytes: 256 B */
    fx_alloc(&f, MiB, 0);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 0), 512 * MiB);
    fx_close(&f);
}

/* allow_growth: regions of 2 MiB, doubling after each success that did not
 * need doubling; a request above the next size doubles it until it fits,
 * and that size is kept for the next region. */
static void test_allow_growth(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "tf-bfc", HALF ",allow_growth:True"), GM_OK);
    fx_alloc(&f, MiB, 0);      /* region 2 MiB (next: 4), split: 1 MiB free */
    fx_alloc(&f, MiB, 0);      /* the free 1 MiB */
    fx_alloc(&f, MiB, 0);      /* region 4 MiB (next: 8), 3 MiB free */
    fx_alloc(&f, 10 * MiB, 0); /* 10 > 8: doubled to 16 MiB, kept at 16 */
    fx_alloc(&f, MiB, 0);      /* the 3 MiB chunk (bin [2M,4M)) before the 6 MiB one */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 3);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 0), 2 * MiB);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 1), 4 * MiB);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 2), 16 * MiB);
    fx_alloc(&f, 16 * MiB, 0); /* none fits (2 + 6 MiB free): region 16 MiB again */
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 3), 16 * MiB);
    fx_close(&f);
}

/* The memory limit without a fraction: the free memory minus
 * MinSystemMemory (by compute capability; 225 MiB below 2 GiB free). The
 * first region is the whole limit; the driver call is in 2 MiB pages. */
static void test_min_system_memory(void)
{
    static const struct {
        uint64_t capacity;
        const char *conf;
        uint64_t limit;
    } cases[] = {
        {8 * GiB, "", 8 * GiB - 1536 * MiB}, /* cc 8 (default) */
        {8 * GiB, "compute_capability:7", 8 * GiB - 1050 * MiB},
        {8 * GiB, "compute_capability:6", 8 * GiB - 500 * MiB},
        {8 * GiB, "compute_capability:9", 8 * GiB - 1800 * MiB},
        {GiB, "", 800 * MiB}, /* 1024 - 225 = 799 MiB, in 2 MiB pages */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fx f;
        CU_ASSERT_EQUAL_FATAL(fx_open(&f, cases[i].capacity, "tf-bfc", cases[i].conf), GM_OK);
        fx_alloc(&f, MiB, 0);
        CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 0), cases[i].limit);
        fx_close(&f);
    }
}

/* SplitChunk only when the chunk is at least twice the request or the waste
 * would reach 128 MiB. */
static void test_split_rule(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "tf-bfc", HALF), GM_OK);
    fx_alloc(&f, 300 * MiB, 0); /* 512 < 600, but 212 MiB of waste >= 128: split */
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 300 * MiB);
    fx_alloc(&f, 150 * MiB, 0); /* 212 < 300 and 62 MiB < 128: the whole 212 MiB chunk */
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 512 * MiB);
    fx_close(&f);
}

/* Bins: the smallest chunk that fits, searched from the request's bin up. */
static void test_best_fit(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "tf-bfc", HALF), GM_OK);
    uint64_t a = fx_alloc(&f, 4 * MiB, 0); /* [0,4M) */
    uint64_t base = fx_addr(&f, a);
    fx_alloc(&f, MiB, 0);                  /* [4M,5M) */
    uint64_t c = fx_alloc(&f, 2 * MiB, 0); /* [5M,7M) */
    fx_alloc(&f, MiB, 0);                  /* [7M,8M) */
    fx_free(&f, a, 1);                     /* 4 MiB at 0 */
    fx_free(&f, c, 1);                     /* 2 MiB at 5M */
    uint64_t x = fx_alloc(&f, 2 * MiB, 0); /* bin [2M,4M): the 2 MiB chunk */
    CU_ASSERT_EQUAL(fx_addr(&f, x) - base, 5 * MiB);
    uint64_t y = fx_alloc(&f, 3 * MiB, 0); /* next bin: the 4 MiB one, not split */
    CU_ASSERT_EQUAL(fx_addr(&f, y), base);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, (4 + 1 + 2 + 1) * MiB);
    fx_close(&f);
}

/* TryToCoalesce: a freed chunk merges with a free next and previous one. */
static void test_coalesce(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "tf-bfc", HALF), GM_OK);
    uint64_t x = fx_alloc(&f, MiB, 0), y = fx_alloc(&f, MiB, 0), z = fx_alloc(&f, MiB, 0);
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), 509 * MiB);
    fx_free(&f, x, 1); /* 1 MiB at 0 */
    fx_free(&f, z, 1); /* joins the 509 MiB tail: 510 MiB */
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), 510 * MiB);
    fx_free(&f, y, 1); /* joins both: the whole 512 MiB */
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), 512 * MiB);
    gm_seg_info s[1];
    CU_ASSERT_EQUAL(f.a->ops->segments(f.a, s, 1), 1);
    CU_ASSERT_EQUAL(s[0].n_blocks, 1);
    CU_ASSERT_EQUAL(s[0].releasable, 512 * MiB);
    CU_ASSERT_EQUAL(f.a->ops->release(f.a, s[0].id, 2), 512 * MiB); /* DeallocateRegions */
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 0);
    fx_close(&f);
}

/* Garbage collection: when Extend cannot serve a request, whole free
 * regions are freed if that makes room under the limit, and Extend runs
 * again; with it off, the request is an OOM. */
static void test_garbage_collection(void)
{
    for (int gc = 1; gc >= 0; gc--) {
        fx f;
        CU_ASSERT_EQUAL_FATAL(fx_open(&f, 64 * MiB, "tf-bfc",
                                      gc ? "per_process_gpu_memory_fraction:1,allow_growth:True"
                                         : "per_process_gpu_memory_fraction:1,allow_growth:True,"
                                           "garbage_collection:False"),
                              GM_OK);
        uint64_t a = fx_alloc(&f, 2 * MiB, 0); /* regions 2, 4, 8 MiB: 14 MiB */
        uint64_t b = fx_alloc(&f, 4 * MiB, 0);
        uint64_t c = fx_alloc(&f, 8 * MiB, 0);
        fx_free(&f, a, 1);
        fx_free(&f, b, 1);
        fx_free(&f, c, 1);
        /* 60 MiB: 50 MiB left under the limit; freeing the 14 MiB of free
         * regions makes 64: then a region of min(64, 64) MiB (16 doubled) */
        if (gc) {
            fx_alloc(&f, 60 * MiB, 0);
            CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_FREE), 3);
            CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 3), 64 * MiB);
        } else {
            fx_alloc_oom(&f, 60 * MiB, 0, 2);
            CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_FREE), 0);
        }
        fx_close(&f);
    }
}

/* Extend backpedals once: when the driver refuses, 90 % (in float) of the
 * size until it is below the request. The limit is 100 MiB (fraction 1 of
 * 100 MiB), the device has 70 MiB free: 100 MiB refused; 90 MiB (2 MiB
 * pages: 90) refused; 84934656 B (82) refused; 76441344 B (74) refused;
 * 68797440 B (66 MiB of pages) granted. */
static void test_backpedal(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 100 * MiB, "tf-bfc", "per_process_gpu_memory_fraction:1"),
                          GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_device_take(f.dev, 30 * MiB), GM_OK); /* another process */
    fx_alloc(&f, MiB, 0);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 0), 66 * MiB);
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), 68797440 - MiB);
    /* 65 MiB: 100 MiB - 68797440 B = 36060160 B left under the limit */
    fx_alloc_oom(&f, 65 * MiB, 0, 1);
    gm_device_give(f.dev, 30 * MiB);
    fx_close(&f);
}

static void test_settings(void)
{
    fx f;
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "tf-bfc", "per_process_gpu_memory_fraction:1.5"), GM_EINVAL);
    fx_close(&f);
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "tf-bfc", "memory_growth:True"), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "allow_growth"));
    fx_close(&f);
    /* --memory-fraction caps the limit like per_process_gpu_memory_fraction */
    CU_ASSERT_EQUAL_FATAL(fx_open_policy(&f, GiB, "tf-bfc", "", 0.25, "pytorch"), GM_OK);
    fx_alloc(&f, MiB, 0);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 0), 256 * MiB);
    fx_close(&f);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("alloc_tf_bfc", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_no_growth);
    GM_ADD_TEST(s, test_allow_growth);
    GM_ADD_TEST(s, test_min_system_memory);
    GM_ADD_TEST(s, test_split_rule);
    GM_ADD_TEST(s, test_best_fit);
    GM_ADD_TEST(s, test_coalesce);
    GM_ADD_TEST(s, test_garbage_collection);
    GM_ADD_TEST(s, test_backpedal);
    GM_ADD_TEST(s, test_settings);
    return CUE_SUCCESS;
}
