/*
 * test_alloc_cuda_async.c - one hand-checked case per rule that
 * sim/alloc_cuda_async.c claims from CUDA's stream-ordered allocator and
 * PyTorch's cudaMallocAsync backend. Expected values are worked out in the
 * comments from the rules, not read back from the model.
 */
#include "alloc_fx.h"
#include "study/simulate.h"
#include "traces/alloc_conf.h"

#define MS 1000000ull

/* Growth: requests round to 256 B; the pool grows by the request rounded
 * up to 2 MiB, and later requests are carved from what a chunk has left. */
static void test_growth(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "cuda-async", ""), GM_OK);
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 1000), 1024); /* 1000 -> 4 x 256 */
    fx_alloc(&f, 1000, 1);                                  /* 1024 B: a 2 MiB chunk */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 0), 2 * MiB);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 1024);
    fx_alloc(&f, MiB, 1); /* 2 MiB - 1024 B left: fits, no driver call */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    fx_alloc(&f, 3 * MiB / 2, 1); /* 1 MiB - 1024 B left: a new chunk of 2 MiB */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 2);
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 1), 2 * MiB);
    fx_alloc(&f, 5 * MiB + 1, 1); /* 5 MiB + 256 B -> a 6 MiB chunk */
    CU_ASSERT_EQUAL(fx_size(&f, GM_OP_SEGMENT_ALLOC, 2), 6 * MiB);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 10 * MiB);
    fx_close(&f);
}

/* Stream order: a free is reused at once by its own stream; another stream
 * cannot use it before a synchronization, so it grows the pool. */
static void test_same_stream_reuse(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "cuda-async", ""), GM_OK);
    uint64_t h = fx_alloc_at(&f, 4 * MiB, 1, 0);
    fx_free(&f, h, 10);
    uint64_t h2 = fx_alloc_at(&f, 4 * MiB, 1, 20); /* same stream: the same 4 MiB */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    fx_free(&f, h2, 30);
    fx_alloc_at(&f, 4 * MiB, 2, 40); /* stream 2: pending on stream 1 -> a new chunk */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 2);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 8 * MiB);
    fx_close(&f);
}

/* sync_interval: at each boundary of trace time the host synchronizes and
 * the frees before it become reusable by every stream. */
static void test_sync_makes_ready(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "cuda-async", "sync_interval:100ms"), GM_OK);
    uint64_t h = fx_alloc_at(&f, 4 * MiB, 1, 0);
    fx_free(&f, h, 10 * MS);
    fx_alloc_at(&f, 4 * MiB, 2, 50 * MS); /* before the 100 ms sync: a new chunk */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 2);
    fx_alloc_at(&f, 4 * MiB, 3, 150 * MS); /* after it: stream 1's free is ready */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 2);
    fx_close(&f);
}

/* cudaMemPoolAttrReleaseThreshold: at a synchronization the pool gives
 * whole free chunks back while it holds more than the threshold.
 * PyTorch's default (max) never does; 0 (CUDA's default) releases all. */
static void test_release_threshold(void)
{
    static const struct {
        const char *conf;
        int frees; /* driver frees expected at the 100 ms sync */
    } cases[] = {
        {"sync_interval:100ms", 0},                        /* threshold max */
        {"sync_interval:100ms,release_threshold:0", 1},    /* 4 MiB > 0 */
        {"sync_interval:100ms,release_threshold:3MiB", 1}, /* 4 MiB > 3 MiB */
        {"sync_interval:100ms,release_threshold:4MiB", 0}, /* not more than 4 MiB */
        {"sync_interval:100ms,release_threshold:max", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fx f;
        CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "cuda-async", cases[i].conf), GM_OK);
        uint64_t h = fx_alloc_at(&f, 4 * MiB, 1, 0);
        fx_free(&f, h, 10 * MS);
        fx_alloc_at(&f, MiB, 1, 150 * MS); /* the sync happens first */
        CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_FREE), cases[i].frees);
        /* trimmed: the 1 MiB needs a new 2 MiB chunk; kept: it is carved from the 4 MiB */
        CU_ASSERT_EQUAL(f.a->c.reserved_bytes, cases[i].frees ? 2 * MiB : 4 * MiB);
        fx_close(&f);
    }
}

/* A chunk holding a live block is never trimmed (it backs an outstanding
 * allocation). */
static void test_trim_keeps_live(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "cuda-async", "release_threshold:0"), GM_OK);
    uint64_t a = fx_alloc(&f, MiB, 1);     /* chunk 1: 2 MiB */
    uint64_t b = fx_alloc(&f, 4 * MiB, 1); /* chunk 2: 4 MiB */
    fx_free(&f, b, 1);
    (void)a;
    /* empty_cache = sync + trim to 0: only chunk 2 is whole free */
    CU_ASSERT_EQUAL(f.a->ops->empty_cache(f.a, 2), 4 * MiB);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 2 * MiB);
    fx_close(&f);
}

/* Internal dependencies: when the pool cannot grow, a block pending on
 * another stream is used (the driver inserts the wait); with the policy
 * off, that allocation is an OOM. */
static void test_internal_dependencies(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 6 * MiB, "cuda-async", ""), GM_OK);
    uint64_t h = fx_alloc(&f, 4 * MiB, 1), at = fx_addr(&f, h);
    fx_free(&f, h, 1);
    /* stream 2: nothing usable, a 4 MiB chunk does not fit in 6 - 4 MiB:
     * stream 1's pending block, the same address */
    uint64_t h2 = fx_alloc_at(&f, 4 * MiB, 2, 2);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    CU_ASSERT_EQUAL(fx_addr(&f, h2), at);
    fx_close(&f);

    CU_ASSERT_EQUAL_FATAL(
        fx_open(&f, 6 * MiB, "cuda-async", "reuse_allow_internal_dependencies:False"), GM_OK);
    h = fx_alloc(&f, 4 * MiB, 1);
    fx_free(&f, h, 1);
    fx_alloc_oom(&f, 4 * MiB, 2, 2); /* PyTorch raises at once: no release */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_FREE), 0);
    fx_close(&f);

    /* the lru policy (a what-if) releases the free chunk (a sync first), then
     * the pool grows */
    CU_ASSERT_EQUAL_FATAL(fx_open_policy(&f, 6 * MiB, "cuda-async",
                                         "reuse_allow_internal_dependencies:False", 0, "lru"),
                          GM_OK);
    h = fx_alloc(&f, 4 * MiB, 1);
    fx_free(&f, h, 1);
    fx_alloc_at(&f, 4 * MiB, 2, 2);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_FREE), 1);
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 2);
    fx_close(&f);
}

/* Merging: free neighbours merge when one stream may use both alike
 * (pending on the same stream, or both ready); pending on two streams, they
 * stay apart until a synchronization. */
static void test_merge_rules(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "cuda-async", ""), GM_OK);
    uint64_t a = fx_alloc(&f, MiB, 1); /* [0, 1M) of a 2 MiB chunk */
    uint64_t b = fx_alloc(&f, MiB, 1); /* [1M, 2M) */
    fx_free(&f, a, 1);
    fx_free(&f, b, 1);
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), 2 * MiB); /* both pending on stream 1 */
    fx_alloc(&f, 2 * MiB, 1);                              /* reused: no driver call */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    fx_close(&f);

    CU_ASSERT_EQUAL_FATAL(fx_open(&f, GiB, "cuda-async", ""), GM_OK);
    a = fx_alloc(&f, MiB, 1);
    b = fx_alloc(&f, MiB, 2); /* the same chunk, another stream */
    fx_free(&f, a, 1);        /* pending on 1 */
    fx_free(&f, b, 1);        /* pending on 2 */
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), MiB);
    gm_seg_info s[2];
    CU_ASSERT_EQUAL(f.a->ops->segments(f.a, s, 2), 1);
    CU_ASSERT_EQUAL(s[0].n_blocks, 2);
    CU_ASSERT_EQUAL(s[0].releasable, 2 * MiB); /* whole free, after the sync a release does */
    fx_alloc(&f, 2 * MiB, 1);                  /* no 2 MiB block: a new chunk */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 2);
    fx_close(&f);
}

/* setMemoryFraction: PyTorch's limit is on the bytes it handed out
 * (pytorch_used_bytes + size > fraction * total is an OOM, the pool is not
 * asked). 0.5 of 16 MiB = 8 MiB. */
static void test_memory_fraction(void)
{
    fx f;
    CU_ASSERT_EQUAL_FATAL(fx_open_policy(&f, 16 * MiB, "cuda-async", "", 0.5, "pytorch"), GM_OK);
    fx_alloc(&f, 5 * MiB, 1);
    fx_alloc_oom(&f, 4 * MiB, 1, 0); /* 9 MiB > 8 MiB */
    CU_ASSERT_EQUAL(fx_count(&f, GM_OP_SEGMENT_ALLOC), 1);
    fx_alloc(&f, 3 * MiB, 1); /* 8 MiB: allowed (not more than the limit) */
    CU_ASSERT_EQUAL(f.a->c.requested_bytes, 8 * MiB);
    fx_close(&f);
}

/* Settings: PyTorch's keys are accepted (the async backend ignores them),
 * cuda-async's own are checked, anything else is refused by name. */
static void test_settings(void)
{
    fx f;
    CU_ASSERT_EQUAL(
        fx_open(&f, GiB, "cuda-async",
                "backend:cudaMallocAsync,max_split_size_mb:128,roundup_power2_divisions:[256:1,"
                ">:4],release_threshold:1GiB"),
        GM_OK);
    fx_close(&f);
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "cuda-async", "backend:native"), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "--allocator pytorch"));
    fx_close(&f);
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "cuda-async", "release_treshold:0"), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "release_treshold"));
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "release_threshold"));
    fx_close(&f);
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "cuda-async", "sync_interval:soon"), GM_EINVAL);
    fx_close(&f);
    /* and PyTorch's native model sends the user here */
    CU_ASSERT_EQUAL(fx_open(&f, GiB, "pytorch", "backend:cudaMallocAsync"), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "cuda-async"));
    fx_close(&f);
}

/* The settings choose the model when --allocator is not given. */
static void test_conf_selects_model(void)
{
    CU_ASSERT_EQUAL(gm_pt_conf_selects_async("backend:cudaMallocAsync"), 1);
    CU_ASSERT_EQUAL(gm_pt_conf_selects_async("expandable_segments:True,backend:cudaMallocAsync"),
                    1);
    CU_ASSERT_EQUAL(gm_pt_conf_selects_async("backend:native"), 0);
    CU_ASSERT_EQUAL(gm_pt_conf_selects_async("backend:cudaMallocAsync,backend:native"), 0);
    CU_ASSERT_EQUAL(gm_pt_conf_selects_async(""), 0);
    CU_ASSERT_EQUAL(gm_pt_conf_selects_async(NULL), 0);

    gm_event ev[2] = {{.t_ns = 0, .addr = 0x100, .size = MiB, .op = GM_OP_ALLOC},
                      {.t_ns = 10, .addr = 0x100, .op = GM_OP_FREE}};
    gm_trace_meta meta;
    gm_trace_meta_init(&meta);
    gm_trace_meta_set(&meta.alloc_conf, "backend:cudaMallocAsync");
    gm_tenant_spec t = {.path = "mem", .events = ev, .n_events = 2, .meta = &meta, .repeat = 1};
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_sim_config c = {.tenants = &t, .n_tenants = 1, .capacity_bytes = GiB, .latency = lat};
    gm_sim_result *r = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_STRING_EQUAL(r->allocator, "cuda-async");
    CU_ASSERT_EQUAL(r->t[0].c.reserved_bytes, 2 * MiB); /* 1 MiB -> a 2 MiB chunk, kept */
    gm_sim_result_free(r);
    c.allocator = "pytorch"; /* asked for by name: the native model refuses the backend */
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "cuda-async"));
    gm_trace_meta_free(&meta);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("alloc_cuda_async", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_growth);
    GM_ADD_TEST(s, test_same_stream_reuse);
    GM_ADD_TEST(s, test_sync_makes_ready);
    GM_ADD_TEST(s, test_release_threshold);
    GM_ADD_TEST(s, test_trim_keeps_live);
    GM_ADD_TEST(s, test_internal_dependencies);
    GM_ADD_TEST(s, test_merge_rules);
    GM_ADD_TEST(s, test_memory_fraction);
    GM_ADD_TEST(s, test_settings);
    GM_ADD_TEST(s, test_conf_selects_model);
    return CUE_SUCCESS;
}
