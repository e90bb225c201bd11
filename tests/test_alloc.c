/*
 * test_alloc.c - hand-checked cases for the allocator models, one per rule
 * of PyTorch's caching allocator that sim/alloc_pytorch.c claims to follow.
 * Expected values are worked out by hand from the rules (see the comments),
 * not read back from the model.
 */
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "policies/registry.h"
#include "sim/alloc.h"
#include "sim/device.h"
#include "traces/alloc_conf.h"

#define MiB GM_MiB
#define GiB GM_GiB

/* Driver events seen by the hook. */
typedef struct seglog {
    int n;
    gm_seg_event ev[256];
} seglog;

static void hook(void *ctx, const gm_seg_event *ev)
{
    seglog *l = ctx;
    if (l->n < 256) l->ev[l->n++] = *ev;
}

typedef struct fixture {
    gm_device *dev;
    gm_policy *pol;
    gm_alloc *a;
    seglog log;
} fixture;

/* Open an allocator with settings conf, parsed as PyTorch `version`
 * (GM_TORCH_*, 0 = the newest) parses them. */
static int fx_open_v(fixture *f, uint64_t capacity, const char *alloc, const char *conf,
                     double fraction, int version)
{
    gm_err err = {0};
    memset(f, 0, sizeof *f);
    if (gm_device_model_create(capacity, NULL, &f->dev, &err) != GM_OK) return -1;
    if (gm_policy_create("pytorch", &f->pol, &err) != GM_OK ||
        gm_alloc_create_for(gm_alloc_find(alloc), f->dev, conf, version, fraction, f->pol, &f->a,
                            &err) != GM_OK) {
        gm_policy_destroy(f->pol);
        gm_device_destroy(f->dev);
        return -1;
    }
    f->a->seg_hook = hook;
    f->a->seg_hook_ctx = &f->log;
    return 0;
}

static int fx_open(fixture *f, uint64_t capacity, const char *alloc, const char *conf,
                   double fraction)
{
    return fx_open_v(f, capacity, alloc, conf, fraction, 0);
}

static int fx_open_for(fixture *f, uint64_t capacity, const char *alloc, const char *conf,
                       int version)
{
    return fx_open_v(f, capacity, alloc, conf, 0, version);
}

static void fx_close(fixture *f)
{
    gm_alloc_destroy(f->a);
    gm_policy_destroy(f->pol);
    gm_device_destroy(f->dev);
}

static uint64_t must_malloc(fixture *f, uint64_t size, uint64_t stream)
{
    uint64_t h = 0;
    int rc = f->a->ops->malloc(f->a, size, stream, GM_CAT_ACTIVATION, 0, &h);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    return h;
}

static void test_round_size(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "roundup_power2_divisions:4", 0), 0);
    /* PyTorch's round_size applies divisions only to sizes above
     * 512 B * divisions (2 KiB here); below that it rounds to 512 B, so
     * 1200 B -> 1536 B (not 1280 B: that would be the division rule alone) */
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 1200), 1536);
    /* 9000 B: floor power of two 8192, 4 divisions of 2 KiB -> 10240 B
     * (plain 512 B rounding would give 9216 B) */
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 9000), 10240);
    /* powers of two are kept */
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 4096), 4096);
    /* 5 MiB + 1: floor 4 MiB, divisions of 1 MiB -> 6 MiB */
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 5 * MiB + 1), 6 * MiB);
    fx_close(&f);

    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "", 0), 0);
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 1), 512);     /* kMinBlockSize */
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 1200), 1536); /* multiple of 512 */
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 5 * MiB + 1), 5 * MiB + 512);
    fx_close(&f);

    /* list form "[2:4,>:8]" (keys in MiB): the first entry (2 MiB interval,
     * index 1) also fills every smaller interval; in PyTorch 2.0-2.9 (lexArgs)
     * '>' fills from the last index given, inclusive, so the 1 MiB interval
     * has 4 divisions and the 2 MiB one 8 ... */
    CU_ASSERT_EQUAL_FATAL(
        fx_open_for(&f, 80 * GiB, "pytorch", "roundup_power2_divisions:[2:4,>:8]", GM_TORCH_2_9),
        0);
    /* 1.5 MiB + 1: 4 divisions of 256 KiB -> 1.75 MiB */
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 3 * MiB / 2 + 1), 7 * MiB / 4);
    /* 3 MiB + 1: 8 divisions of 256 KiB -> 3.25 MiB */
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 3 * MiB + 1), 3 * MiB + 256 * 1024);
    fx_close(&f);
    /* ... from 2.10 (AcceleratorAllocatorConfig) from the one after it: the
     * 2 MiB interval keeps its 4 (3 MiB + 1: 4 divisions of 512 KiB -> 3.5 MiB) */
    CU_ASSERT_EQUAL_FATAL(
        fx_open_for(&f, 80 * GiB, "pytorch", "roundup_power2_divisions:[2:4,>:8]", GM_TORCH_2_10),
        0);
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 3 * MiB + 1), 3 * MiB + 512 * 1024);
    CU_ASSERT_EQUAL(f.a->ops->block_size(f.a, 5 * MiB + 1), 5 * MiB + 512 * 1024); /* 8 of 512K */
    fx_close(&f);
}

static void test_conf_errors(void)
{
    gm_pt_conf c;
    gm_err err = {0};
    CU_ASSERT_EQUAL(gm_pt_conf_parse_for("max_split_size_mb:20", GM_TORCH_2_9, &c, &err),
                    GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "must be > 20"));
    CU_ASSERT_EQUAL(gm_pt_conf_parse("garbage_collection_threshold:1.5", &c, &err), GM_EINVAL);
    CU_ASSERT_EQUAL(gm_pt_conf_parse("roundup_power2_divisions:3", &c, &err), GM_EINVAL);
    CU_ASSERT_EQUAL(gm_pt_conf_parse("bogus_option:1", &c, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bogus_option"));
    CU_ASSERT_EQUAL(gm_pt_conf_parse("expandable_segments:maybe", &c, &err), GM_EINVAL);
    CU_ASSERT_EQUAL(gm_pt_conf_parse("max_split_size_mb", &c, &err), GM_EINVAL);
    CU_ASSERT_EQUAL(gm_pt_conf_parse("max_split_size_mb:128,garbage_collection_threshold:0.6,"
                                     "expandable_segments:True",
                                     &c, &err),
                    GM_OK);
    CU_ASSERT_EQUAL(c.max_split_size, 128 * MiB);
    CU_ASSERT_DOUBLE_EQUAL(c.gc_threshold, 0.6, 1e-12);
    CU_ASSERT_EQUAL(c.expandable_segments, 1);
    char buf[512];
    gm_pt_conf_format(&c, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "max_split_size_mb:128,garbage_collection_threshold:0.6,"
                                "expandable_segments:True");
    /* the canonical form of a full divisions list parses back to the same */
    gm_pt_conf c2;
    CU_ASSERT_EQUAL_FATAL(gm_pt_conf_parse("roundup_power2_divisions:[1:2,64:4,>:8]", &c, &err),
                          GM_OK);
    gm_pt_conf_format(&c, buf, sizeof buf);
    CU_ASSERT_EQUAL(gm_pt_conf_parse(buf, &c2, &err), GM_OK);
    CU_ASSERT_EQUAL(memcmp(c.roundup_divisions, c2.roundup_divisions, sizeof c.roundup_divisions),
                    0);
    CU_ASSERT_EQUAL(c2.roundup_divisions[0], 2);
    CU_ASSERT_EQUAL(c2.roundup_divisions[5], 0); /* gaps between entries stay unset */
    CU_ASSERT_EQUAL(c2.roundup_divisions[6], 4); /* 2.10 on: '>' fills after 64 MiB */
    CU_ASSERT_EQUAL(c2.roundup_divisions[7], 8);
    CU_ASSERT_EQUAL_FATAL(
        gm_pt_conf_parse_for("roundup_power2_divisions:[1:2,64:4,>:8]", GM_TORCH_2_9, &c, &err),
        GM_OK);
    CU_ASSERT_EQUAL(c.roundup_divisions[6], 8); /* 2.0-2.9: from 64 MiB inclusive */
}

/* Each setting as each PyTorch parses it: accepted, or refused with
 * PyTorch's own message (the messages of c10/cuda/CUDAAllocatorConfig.cpp
 * and c10/core/AllocatorConfig.{h,cpp}; traces/ALLOC_CONF.md). */
typedef struct conf_case {
    int version;
    const char *conf;
    const char *refusal; /* NULL: accepted */
} conf_case;

static const conf_case conf_cases[] = {
    /* keys newer than 2.6 and the ROCm spellings, accepted where they exist */
    {GM_TORCH_2_11, "per_process_memory_fraction:0.5", NULL},
    {GM_TORCH_2_9, "per_process_memory_fraction:0.5",
     "Unrecognized CachingAllocator option: per_process_memory_fraction (per_process_memory_"
     "fraction exists from PyTorch 2.10 on"},
    {GM_TORCH_2_11, "per_process_memory_fraction:1.5",
     "per_process_memory_fraction is invalid, set it in [0.0, 1.0]"},
    {GM_TORCH_2_2, "release_lock_on_hipmalloc:True,pinned_use_hip_host_register:False", NULL},
    {GM_TORCH_2_1, "release_lock_on_cudamalloc:True",
     "Unrecognized CachingAllocator option: release_lock_on_cudamalloc"},
    {GM_TORCH_2_9, "graph_capture_record_stream_reuse:True", NULL},
    {GM_TORCH_2_5, "graph_capture_record_stream_reuse:True",
     "Unrecognized CachingAllocator option: graph_capture_record_stream_reuse"},
    {GM_TORCH_2_10, "pinned_reserve_segment_size_mb:64", NULL},
    {GM_TORCH_2_11, "pinned_reserve_segment_size_mb:0",
     "Pinned reserve segment size has to be greater than 0"},
    {GM_TORCH_2_11,
     "throw_on_cudamalloc_oom:True,expandable_segments_reserve_by_class:[a:1,b:2],"
     "pinned_free_catch_all:False",
     NULL},
    {GM_TORCH_2_0, "expandable_segments:True",
     "Unrecognized CachingAllocator option: expandable_segments"},
    {GM_TORCH_2_11, "large_segment_size_mb:64,max_split_size_mb:64", NULL},
    {GM_TORCH_2_11, "max_split_size_mb:32,large_segment_size_mb:64",
     "CachingAllocator option max_split_size_mb too small, must be >= 64"},
    {GM_TORCH_2_11, "large_segment_size_mb:10",
     "CachingAllocator option large_segment_size_mb must be > 10 MB"},
    {GM_TORCH_2_10, "large_segment_size_mb:64",
     "Unrecognized key 'large_segment_size_mb' in CUDA allocator config."},
    /* the minimum split sizes: > 20 with the old parser, >= 20 with the new */
    {GM_TORCH_2_10, "max_split_size_mb:20", NULL},
    {GM_TORCH_2_9, "max_split_size_mb:20",
     "CachingAllocator option max_split_size_mb too small, must be > 20"},
    {GM_TORCH_2_11, "max_split_size_mb:19",
     "CachingAllocator option max_split_size_mb too small, must be >= 20"},
    {GM_TORCH_2_9, "max_non_split_rounding_mb:19",
     "CachingAllocator option max_non_split_rounding_mb too small, must be > 20"},
    {GM_TORCH_2_5, "max_non_split_rounding_mb:20",
     "CachingAllocator option max_non_split_rounding_mb too small, must be > 20"},
    {GM_TORCH_2_11, "max_non_split_rounding_mb:19",
     "CachingAllocator option max_non_split_rounding_mb too small, must be >= 20"},
    {GM_TORCH_2_3, "max_non_split_rounding_mb:64",
     "Unrecognized CachingAllocator option: max_non_split_rounding_mb"},
    {GM_TORCH_2_9, "max_split_size_mb:", "Error, expecting max_split_size_mb value"},
    /* spaces do not separate options */
    {GM_TORCH_2_9, "max_split_size_mb:128 expandable_segments:True",
     "Error parsing CachingAllocator settings, expected ,"},
    {GM_TORCH_2_11, "max_split_size_mb:128 expandable_segments:True",
     "Unrecognized key 'True' in CUDA allocator config."},
    {GM_TORCH_2_9, "expandable_segments:True max_split_size_mb:128",
     "Expected a single True/False argument for expandable_segments"},
    {GM_TORCH_2_11, "expandable_segments:True max_split_size_mb:128",
     "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'Truemax_split_size_mb'"},
    {GM_TORCH_2_11, "max_split_size_mb : 128 , expandable_segments : True", NULL},
    {GM_TORCH_2_11, "expandable_segments:\tTrue", NULL}, /* every space character goes */
    {GM_TORCH_2_9, "expandable_segments:\tTrue",         /* only ' ' goes */
     "Expected a single True/False argument for expandable_segments"},
    /* booleans are True and False exactly */
    {GM_TORCH_2_9, "expandable_segments:true",
     "Expected a single True/False argument for expandable_segments"},
    {GM_TORCH_2_11, "expandable_segments:true",
     "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'"},
    {GM_TORCH_2_11, "expandable_segments", "Index out of bounds in ConfigTokenizer"},
    {GM_TORCH_2_9, "expandable_segments", "Error parsing CachingAllocator settings, expected :"},
    /* separators: checked by lexArgs, only looked at by ConfigTokenizer */
    {GM_TORCH_2_9, "expandable_segments,True",
     "Error parsing CachingAllocator settings, expected :"},
    {GM_TORCH_2_11, "expandable_segments,True", NULL},
    {GM_TORCH_2_9, ",max_split_size_mb:128", "Unrecognized CachingAllocator option: ,"},
    {GM_TORCH_2_11, "max_split_size_mb=128",
     "Unrecognized key 'max_split_size_mb=128' in CUDA allocator config."},
    /* garbage_collection_threshold: the open interval (0, 1) */
    {GM_TORCH_2_9, "garbage_collection_threshold:0",
     "garbage_collect_threshold too small, set it 0.0~1.0"},
    {GM_TORCH_2_9, "garbage_collection_threshold:1.0",
     "garbage_collect_threshold too big, set it 0.0~1.0"},
    {GM_TORCH_2_11, "garbage_collection_threshold:1.0",
     "garbage_collect_threshold is invalid, set it in (0.0, 1.0)"},
    /* roundup_power2_divisions, with the old spelling of the message */
    {GM_TORCH_2_5, "roundup_power2_divisions:3", "For roundups, the divisons has to be power of 2"},
    {GM_TORCH_2_9, "roundup_power2_divisions:3",
     "For roundups, the divisions has to be power of 2"},
    {GM_TORCH_2_3, "roundup_power2_divisions:[256:0,>:4]", NULL},
    {GM_TORCH_2_2, "roundup_power2_divisions:[256:0,>:4]",
     "For roundups, the divisons has to be power of 2"},
    {GM_TORCH_2_11, "roundup_power2_divisions:[3:2]",
     "For roundups, the intervals have to be power of 2"},
    {GM_TORCH_2_11, "roundup_power2_divisions:[1:2",
     "Expected closing bracket ']' in ConfigTokenizer but reached end of config"},
    {GM_TORCH_2_9, "roundup_power2_divisions:[1:2", "Error parsing roundup_power2_divisions value"},
    {GM_TORCH_2_11, "backend:foo",
     "Unknown allocator backend, options are native and cudaMallocAsync"},
    {GM_TORCH_2_11, "pinned_num_register_threads:3",
     "Number of register threads has to be power of 2, got 3"},
    {GM_TORCH_2_9, "pinned_num_register_threads:256",
     "Number of register threads should be less than or equal to 128"},
    {GM_TORCH_2_11, "pinned_num_register_threads:256",
     "Number of register threads should be less than or equal to 128, got 256"},
};

static void test_conf_versions(void)
{
    for (size_t i = 0; i < sizeof conf_cases / sizeof *conf_cases; i++) {
        const conf_case *k = &conf_cases[i];
        gm_pt_conf c;
        gm_err err = {0};
        int rc = gm_pt_conf_parse_for(k->conf, k->version, &c, &err);
        int ok = k->refusal ? rc == GM_EINVAL && strstr(err.msg, k->refusal) != NULL : rc == GM_OK;
        if (!ok)
            fprintf(stderr, "\n  case %zu: %d.%d '%s': rc %d, '%s'\n", i, k->version / 100,
                    k->version % 100, k->conf, rc, err.msg);
        CU_ASSERT(ok);
    }
}

/* What the accepted settings do: applied, or listed as no effect. */
static void test_conf_effects(void)
{
    gm_pt_conf c;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_pt_conf_parse_for("per_process_memory_fraction:0.5,"
                                               "release_lock_on_hipmalloc:True",
                                               GM_TORCH_2_11, &c, &err),
                          GM_OK);
    CU_ASSERT_DOUBLE_EQUAL(c.memory_fraction, 0.5, 1e-12);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.no_effect, "release_lock_on_hipmalloc"));
    CU_ASSERT_PTR_NULL(strstr(c.no_effect, "per_process_memory_fraction"));
    CU_ASSERT_EQUAL_FATAL(gm_pt_conf_parse_for("large_segment_size_mb:64", GM_TORCH_2_11, &c, &err),
                          GM_OK);
    CU_ASSERT_EQUAL(c.large_segment_size, 64 * MiB);
    CU_ASSERT_EQUAL(c.max_non_split_rounding_size, 64 * MiB); /* its default follows */
    CU_ASSERT_EQUAL_FATAL(gm_pt_conf_parse_for("max_split_size_mb:20", GM_TORCH_2_10, &c, &err),
                          GM_OK);
    CU_ASSERT_EQUAL(c.max_split_size, 20 * MiB);
    CU_ASSERT_EQUAL_FATAL(gm_pt_conf_parse_for("expandable_segments,True", GM_TORCH_2_11, &c, &err),
                          GM_OK);
    CU_ASSERT_EQUAL(c.expandable_segments, 1);
    CU_ASSERT_EQUAL_FATAL(gm_pt_conf_parse_for("", GM_TORCH_2_11, &c, &err), GM_OK);
    CU_ASSERT_EQUAL(c.max_split_size, UINT64_MAX);
    CU_ASSERT_STRING_EQUAL(c.no_effect, "");
    /* the version a snapshot or --torch-version names */
    CU_ASSERT_EQUAL(gm_torch_version_parse("2.3-2.8"), GM_TORCH_2_5);
    CU_ASSERT_EQUAL(gm_torch_version_parse("2.9"), GM_TORCH_2_9);
    CU_ASSERT_EQUAL(gm_torch_version_parse("2.12"), GM_TORCH_2_11);
    CU_ASSERT_EQUAL(gm_torch_version_parse("2.0-2.2"), GM_TORCH_2_2);
    CU_ASSERT_EQUAL(gm_torch_version_parse("1.13"), 0);
    CU_ASSERT_EQUAL(gm_torch_version_parse("two"), 0);
}

/* Which variable a CUDA process reads: PYTORCH_CUDA_ALLOC_CONF only up to
 * 2.9; from 2.10 the first that is set, CUDA's first. */
static void test_conf_env(void)
{
    const char *which = "x";
    CU_ASSERT_PTR_NULL(gm_pt_conf_env(GM_TORCH_2_9, NULL, "expandable_segments:True", &which));
    CU_ASSERT_PTR_NULL(which);
    CU_ASSERT_STRING_EQUAL(gm_pt_conf_env(GM_TORCH_2_10, NULL, "a:1", &which), "a:1");
    CU_ASSERT_STRING_EQUAL(which, "PYTORCH_ALLOC_CONF");
    CU_ASSERT_STRING_EQUAL(gm_pt_conf_env(GM_TORCH_2_11, "c:1", "a:1", &which), "c:1");
    CU_ASSERT_STRING_EQUAL(which, "PYTORCH_CUDA_ALLOC_CONF");
    CU_ASSERT_STRING_EQUAL(gm_pt_conf_env(GM_TORCH_2_11, "", "a:1", &which), ""); /* set: hides */
    CU_ASSERT_STRING_EQUAL(gm_pt_conf_env(GM_TORCH_2_0, "c:1", NULL, &which), "c:1");
    CU_ASSERT_PTR_NULL(gm_pt_conf_env(GM_TORCH_2_11, NULL, NULL, &which));
}

/* A 5 MiB request gets a 20 MiB segment (kLargeBuffer, as < 10 MiB) and the
 * 15 MiB remainder stays in the pool, split off; the next 5 MiB request uses
 * it without a driver call. */
static void test_large_segment_split(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "", 0), 0);
    uint64_t h1 = must_malloc(&f, 5 * MiB, 0);
    CU_ASSERT_EQUAL(f.log.n, 1);
    CU_ASSERT_EQUAL(f.log.ev[0].op, GM_OP_SEGMENT_ALLOC);
    CU_ASSERT_EQUAL(f.log.ev[0].size, 20 * MiB);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 20 * MiB);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 5 * MiB);
    CU_ASSERT_EQUAL(f.a->c.requested_bytes, 5 * MiB);
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), 15 * MiB);
    gm_seg_info s[4];
    CU_ASSERT_EQUAL(f.a->ops->segments(f.a, s, 4), 1);
    CU_ASSERT_EQUAL(s[0].n_blocks, 2);
    CU_ASSERT_EQUAL(s[0].n_allocated, 1);
    uint64_t h2 = must_malloc(&f, 5 * MiB, 0);
    CU_ASSERT_EQUAL(f.log.n, 1); /* reused the remainder */
    CU_ASSERT_EQUAL(f.a->ops->largest_free(f.a), 10 * MiB);
    /* free both: the blocks merge back into one 20 MiB block, kept cached */
    f.a->ops->free(f.a, h1, 1);
    f.a->ops->free(f.a, h2, 2);
    CU_ASSERT_EQUAL(f.a->ops->segments(f.a, s, 4), 1);
    CU_ASSERT_EQUAL(s[0].n_blocks, 1);
    CU_ASSERT_EQUAL(s[0].releasable, 20 * MiB);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 20 * MiB);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 0);
    fx_close(&f);
}

/* Small requests (<= 1 MiB) get 2 MiB segments of the small pool, and a
 * large request never uses a small-pool block. 11 MiB gets its own 12 MiB
 * segment (>= 10 MiB: rounded to 2 MiB) and is not split, since only 1 MiB
 * would remain (the large pool splits only when more than 1 MiB remains). */
static void test_pools(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "", 0), 0);
    must_malloc(&f, 1000, 0);
    CU_ASSERT_EQUAL(f.log.ev[0].size, 2 * MiB);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 1024);
    must_malloc(&f, 1 * MiB, 0); /* fits in the same small segment */
    CU_ASSERT_EQUAL(f.log.n, 1);
    must_malloc(&f, 1 * MiB + 1, 0); /* large pool: new 20 MiB segment */
    CU_ASSERT_EQUAL(f.log.n, 2);
    CU_ASSERT_EQUAL(f.log.ev[1].size, 20 * MiB);
    uint64_t before = f.a->c.allocated_bytes;
    must_malloc(&f, 11 * MiB, 0); /* 11 MiB fits the 20 MiB segment's 19 MiB - 512 B */
    CU_ASSERT_EQUAL(f.log.n, 2);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes - before, 11 * MiB);
    must_malloc(&f, 11 * MiB, 0); /* no room left: 12 MiB segment, unsplit */
    CU_ASSERT_EQUAL(f.log.n, 3);
    CU_ASSERT_EQUAL(f.log.ev[2].size, 12 * MiB);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes - before, 11 * MiB + 12 * MiB);
    fx_close(&f);
}

/* Best fit by (stream, size, address): blocks of another stream are never
 * used, and the smallest fitting block wins. */
static void test_streams_best_fit(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "", 0), 0);
    uint64_t a = must_malloc(&f, 12 * MiB, 7);
    f.a->ops->free(f.a, a, 1);
    must_malloc(&f, 12 * MiB, 8); /* stream 8 cannot use stream 7's block */
    CU_ASSERT_EQUAL(f.log.n, 2);
    uint64_t b1 = must_malloc(&f, 30 * MiB, 7);
    uint64_t b2 = must_malloc(&f, 14 * MiB, 7);
    f.a->ops->free(f.a, b1, 2);
    f.a->ops->free(f.a, b2, 3);
    int n = f.log.n;
    /* free on stream 7: 12, 30 and 14 MiB blocks; 13 MiB takes the 14 MiB one */
    must_malloc(&f, 13 * MiB, 7);
    CU_ASSERT_EQUAL(f.log.n, n);
    gm_seg_info s[8];
    size_t ns = f.a->ops->segments(f.a, s, 8);
    int found = 0;
    for (size_t i = 0; i < ns; i++)
        if (s[i].size == 14 * MiB && s[i].n_allocated == 1) found = 1;
    CU_ASSERT(found);
    fx_close(&f);
}

/* Freed blocks merge with free neighbours only. */
static void test_merge(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "", 0), 0);
    uint64_t x = must_malloc(&f, 4 * MiB, 0), y = must_malloc(&f, 4 * MiB, 0),
             z = must_malloc(&f, 4 * MiB, 0);
    gm_seg_info s[2];
    f.a->ops->segments(f.a, s, 2);
    CU_ASSERT_EQUAL(s[0].n_blocks, 4); /* x, y, z, 8 MiB remainder */
    f.a->ops->free(f.a, y, 1);
    f.a->ops->segments(f.a, s, 2);
    CU_ASSERT_EQUAL(s[0].n_blocks, 4); /* y's neighbours are allocated */
    f.a->ops->free(f.a, x, 2);
    f.a->ops->segments(f.a, s, 2);
    CU_ASSERT_EQUAL(s[0].n_blocks, 3); /* x+y merged */
    CU_ASSERT_EQUAL(s[0].largest_free, 8 * MiB);
    f.a->ops->free(f.a, z, 3);
    f.a->ops->segments(f.a, s, 2);
    CU_ASSERT_EQUAL(s[0].n_blocks, 1);
    CU_ASSERT_EQUAL(s[0].largest_free, 20 * MiB);
    fx_close(&f);
}

/* max_split_size_mb:64: oversize blocks (>= 64 MiB) are never split, never
 * handed to requests below 64 MiB, and an oversize request takes a cached
 * oversize block only if it wastes < 20 MiB (max_non_split_rounding). */
static void test_max_split(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "max_split_size_mb:64", 0), 0);
    uint64_t h = must_malloc(&f, 100 * MiB, 0);
    CU_ASSERT_EQUAL(f.log.ev[0].size, 100 * MiB);
    f.a->ops->free(f.a, h, 1);
    must_malloc(&f, 30 * MiB, 0); /* below max split: not from the oversize block */
    CU_ASSERT_EQUAL(f.log.n, 2);
    CU_ASSERT_EQUAL(f.log.ev[1].size, 30 * MiB);
    uint64_t h70 = must_malloc(&f, 70 * MiB, 0); /* 100 >= 70 + 20: too wasteful */
    CU_ASSERT_EQUAL(f.log.n, 3);
    CU_ASSERT_EQUAL(f.log.ev[2].size, 70 * MiB);
    f.a->ops->free(f.a, h70, 2);
    /* 90 MiB: free oversize blocks 70 (too small) and 100 (< 90 + 20): use 100, unsplit */
    must_malloc(&f, 90 * MiB, 0);
    CU_ASSERT_EQUAL(f.log.n, 3);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 30 * MiB + 100 * MiB);
    fx_close(&f);
}

/* Retry order on a full device, with max_split_size set: first release the
 * smallest cached oversize block that is large enough (not everything), and
 * only then release all cached blocks. */
static void test_retry_order(void)
{
    fixture f;
    /* 1 GiB card, 512 MiB context overhead: 512 MiB usable */
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 1 * GiB, "pytorch", "max_split_size_mb:64", 0), 0);
    CU_ASSERT_EQUAL_FATAL(gm_device_add_context(f.dev, 512 * MiB), GM_OK);
    uint64_t a = must_malloc(&f, 200 * MiB, 0);
    uint64_t b = must_malloc(&f, 100 * MiB, 0);
    uint64_t c = must_malloc(&f, 4 * MiB, 0); /* 20 MiB segment */
    f.a->ops->free(f.a, a, 1);
    f.a->ops->free(f.a, b, 2);
    f.a->ops->free(f.a, c, 3);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 320 * MiB);
    /* 250 MiB: 192 MiB free on the device; cached oversize 200 and 100 MiB
     * do not fit it (250 + 20 > 200 is fine, but 200 < 250). Step 1 releases
     * oversize blocks from the largest down until 250 MiB: 200 then 100. */
    int n0 = f.log.n;
    must_malloc(&f, 250 * MiB, 0);
    CU_ASSERT_EQUAL(f.log.n, n0 + 3);
    CU_ASSERT_EQUAL(f.log.ev[n0].op, GM_OP_SEGMENT_FREE);
    CU_ASSERT_EQUAL(f.log.ev[n0].size, 200 * MiB);
    CU_ASSERT_EQUAL(f.log.ev[n0 + 1].size, 100 * MiB);
    CU_ASSERT_EQUAL(f.log.ev[n0 + 2].op, GM_OP_SEGMENT_ALLOC);
    CU_ASSERT_EQUAL(f.a->c.n_cache_flushes, 0); /* the 20 MiB segment stayed */
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 270 * MiB);
    /* a retry, but not after a full flush: PyTorch's num_alloc_retries stays 0 */
    CU_ASSERT_EQUAL(f.a->c.grow_retries, 1);
    CU_ASSERT_EQUAL(f.a->c.num_alloc_retries, 0);
    /* 250 MiB more: 242 MiB free, nothing oversize cached: flush all (the
     * 20 MiB segment), then 262 MiB free: fits */
    must_malloc(&f, 250 * MiB, 0);
    CU_ASSERT_EQUAL(f.a->c.n_cache_flushes, 1);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 500 * MiB);
    CU_ASSERT_EQUAL(f.a->c.grow_retries, 2);
    CU_ASSERT_EQUAL(f.a->c.num_alloc_retries, 1);
    /* and now a real OOM: the retry after the flush fails and still counts,
     * as in PyTorch's alloc_block(..., isRetry = true) */
    uint64_t h;
    CU_ASSERT_EQUAL(f.a->ops->malloc(f.a, 100 * MiB, 0, 0, 5, &h), GM_EOOM);
    CU_ASSERT_EQUAL(f.a->c.n_cache_flushes, 2);
    CU_ASSERT_EQUAL(f.a->c.grow_retries, 3);
    CU_ASSERT_EQUAL(f.a->c.num_alloc_retries, 2);
    fx_close(&f);
}

/* Without max_split_size, step 1 does nothing and step 2 releases every
 * whole free segment, large pool first; split segments stay. */
static void test_flush_all(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 1 * GiB, "pytorch", "", 0), 0);
    CU_ASSERT_EQUAL_FATAL(gm_device_add_context(f.dev, 512 * MiB), GM_OK);
    uint64_t s1 = must_malloc(&f, 1000, 0);      /* small 2 MiB segment */
    uint64_t l1 = must_malloc(&f, 100 * MiB, 0); /* 100 MiB */
    must_malloc(&f, 1000, 0);                    /* stays: same small segment */
    uint64_t l2 = must_malloc(&f, 300 * MiB, 0); /* 300 MiB */
    f.a->ops->free(f.a, s1, 1);
    f.a->ops->free(f.a, l1, 2);
    f.a->ops->free(f.a, l2, 3);
    int n0 = f.log.n;
    must_malloc(&f, 450 * MiB, 0); /* 110 MiB free: needs both large segments back */
    CU_ASSERT_EQUAL(f.log.n, n0 + 3);
    CU_ASSERT_EQUAL(f.log.ev[n0].size, 100 * MiB); /* (stream, size, address) order */
    CU_ASSERT_EQUAL(f.log.ev[n0 + 1].size, 300 * MiB);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 450 * MiB + 2 * MiB);
    fx_close(&f);
}

/* garbage_collection_threshold (with a memory fraction): before growing,
 * when reserved > threshold * limit, release whole free large segments whose
 * age (pool lookups since they were freed) is >= the average age. */
static void test_gc(void)
{
    fixture f;
    /* limit = 1.0 * 2 GiB; GC starts above 0.5 * 2 GiB = 1 GiB reserved */
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 2 * GiB, "pytorch", "garbage_collection_threshold:0.5", 1.0),
                          0);
    uint64_t old = must_malloc(&f, 100 * MiB, 0);
    uint64_t young = must_malloc(&f, 110 * MiB, 0);
    f.a->ops->free(f.a, old, 1);
    /* three large-pool lookups that miss (300 MiB fits no cached block) age
     * the old block to 3; reserved stays below 1 GiB meanwhile (210..810) */
    for (int i = 0; i < 3; i++)
        must_malloc(&f, 300 * MiB, 0);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 1110 * MiB);
    CU_ASSERT_EQUAL(f.a->c.n_driver_free, 0);
    f.a->ops->free(f.a, young, 2);
    /* next miss: ages old 4, young 1, average 2.5; reserved 1110 MiB is
     * 86 MiB over the threshold: releasing old (100 MiB) is enough */
    int n0 = f.log.n;
    must_malloc(&f, 400 * MiB, 0);
    CU_ASSERT_EQUAL_FATAL(f.log.n, n0 + 2);
    CU_ASSERT_EQUAL(f.log.ev[n0].op, GM_OP_SEGMENT_FREE);
    CU_ASSERT_EQUAL(f.log.ev[n0].size, 100 * MiB);
    CU_ASSERT_EQUAL(f.log.ev[n0 + 1].op, GM_OP_SEGMENT_ALLOC);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, (1110 - 100 + 400) * MiB);
    fx_close(&f);

    /* without a memory fraction, the threshold has no effect (PyTorch) */
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 2 * GiB, "pytorch", "garbage_collection_threshold:0.5", 0),
                          0);
    old = must_malloc(&f, 100 * MiB, 0);
    f.a->ops->free(f.a, old, 1);
    for (int i = 0; i < 4; i++)
        must_malloc(&f, 300 * MiB, 0);
    CU_ASSERT_EQUAL(f.a->c.n_driver_free, 0);
    fx_close(&f);
}

/* Per-process memory fraction: reserved never exceeds fraction * capacity. */
static void test_memory_fraction(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 10 * GiB, "pytorch", "", 0.1), 0); /* 1 GiB allowed */
    must_malloc(&f, 600 * MiB, 0);
    uint64_t h;
    CU_ASSERT_EQUAL(f.a->ops->malloc(f.a, 600 * MiB, 0, 0, 1, &h), GM_EOOM);
    CU_ASSERT(f.a->c.reserved_bytes <= 1 * GiB);
    fx_close(&f);
}

/* expandable_segments: pages of 20 MiB (large pool) are mapped on demand in
 * one growing range; a 30 MiB request after a 5 MiB one maps one more page
 * and both live in the same segment. */
static void test_expandable(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "expandable_segments:True", 0), 0);
    uint64_t a = must_malloc(&f, 5 * MiB, 0);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 20 * MiB);
    CU_ASSERT_EQUAL(f.log.n, 1);
    uint64_t b = must_malloc(&f, 30 * MiB, 0);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 40 * MiB);
    CU_ASSERT_EQUAL(f.log.n, 2);
    CU_ASSERT_EQUAL(f.log.ev[1].size, 20 * MiB);
    gm_seg_info s[4];
    CU_ASSERT_EQUAL(f.a->ops->segments(f.a, s, 4), 1);
    CU_ASSERT(s[0].expandable);
    CU_ASSERT_EQUAL(s[0].size, 40 * MiB);
    /* freeing b leaves [5, 40) MiB free: the page [20, 40) is whole and can
     * be unmapped; [5, 20) shares a page with a and stays mapped */
    f.a->ops->free(f.a, b, 1);
    f.a->ops->segments(f.a, s, 4);
    CU_ASSERT_EQUAL(s[0].releasable, 20 * MiB);
    CU_ASSERT_EQUAL(f.a->ops->empty_cache(f.a, 2), 20 * MiB);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 20 * MiB);
    f.a->ops->free(f.a, a, 3);
    CU_ASSERT_EQUAL(f.a->ops->empty_cache(f.a, 4), 20 * MiB);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 0);
    CU_ASSERT_EQUAL(f.dev->used_bytes, 0);
    CU_ASSERT_EQUAL(f.log.ev[f.log.n - 1].op, GM_OP_SEGMENT_UNMAP);
    /* no page left mapped: release_blocks -> release_expandable_segment gives
     * the address range back, so the segment is gone ... */
    CU_ASSERT_EQUAL(f.a->ops->segments(f.a, s, 4), 0);
    /* ... and the next request reserves a new one */
    must_malloc(&f, 5 * MiB, 0);
    CU_ASSERT_EQUAL(f.a->ops->segments(f.a, s, 4), 1);
    CU_ASSERT_EQUAL(f.log.ev[f.log.n - 1].op, GM_OP_SEGMENT_MAP);
    fx_close(&f);
}

/* An expandable segment rebuilt from a dump that lists it as two mapped
 * ranges with a hole between them (import_xseg.c): [0, 40) and [60, 100)
 * MiB mapped, P at 0 (30 MiB), Q at 70 (20 MiB). A 15 MiB request fits no
 * free block; find_expandable_block takes the lowest unmapped range
 * ([40, 60)) together with the free block before it ([30, 40)): one 20 MiB
 * page is mapped, merges with the free blocks on both sides, and the
 * request lands at 30 MiB (try_allocate_expandable_block, map_block). */
static void test_restore_expandable(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "expandable_segments:True", 0), 0);
    const uint64_t B = 0x7f3000000000ull;
    gm_init_row rows[] = {
        {.addr = B,
         .size = 100 * MiB,
         .kind = GM_INIT_SEGMENT,
         .pool = GM_POOL_LARGE,
         .expandable = 1},
        {.addr = B, .size = 40 * MiB, .kind = GM_INIT_MAPPED},
        {.addr = B + 60 * MiB, .size = 40 * MiB, .kind = GM_INIT_MAPPED},
        {.addr = B, .size = 30 * MiB, .block_size = 30 * MiB, .kind = GM_INIT_BLOCK},
        {.addr = B + 70 * MiB, .size = 20 * MiB, .block_size = 20 * MiB, .kind = GM_INIT_BLOCK},
    };
    uint64_t h[5];
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(f.a->ops->restore(f.a, rows, 5, h, &err), GM_OK);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 80 * MiB);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 50 * MiB);
    gm_seg_info s[4];
    CU_ASSERT_EQUAL_FATAL(f.a->ops->segments(f.a, s, 4), 1);
    CU_ASSERT(s[0].expandable);
    CU_ASSERT_EQUAL(s[0].size, 80 * MiB); /* mapped bytes */
    CU_ASSERT_EQUAL(s[0].releasable, 0);  /* no free page is whole */
    uint64_t base = s[0].addr;
    CU_ASSERT_EQUAL(f.a->ops->block_addr(f.a, h[3]), base);
    CU_ASSERT_EQUAL(f.a->ops->block_addr(f.a, h[4]), base + 70 * MiB);
    int n0 = f.log.n;
    uint64_t u = must_malloc(&f, 15 * MiB, 0);
    CU_ASSERT_EQUAL_FATAL(f.log.n, n0 + 1);
    CU_ASSERT_EQUAL(f.log.ev[n0].op, GM_OP_SEGMENT_MAP);
    CU_ASSERT_EQUAL(f.log.ev[n0].addr, base + 40 * MiB);
    CU_ASSERT_EQUAL(f.log.ev[n0].size, 20 * MiB);
    CU_ASSERT_EQUAL(f.a->ops->block_addr(f.a, u), base + 30 * MiB);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 100 * MiB);
    /* a mapped range outside its segment is refused */
    fixture g;
    CU_ASSERT_EQUAL_FATAL(fx_open(&g, 80 * GiB, "pytorch", "expandable_segments:True", 0), 0);
    rows[2].addr = B + 200 * MiB;
    CU_ASSERT_EQUAL(g.a->ops->restore(g.a, rows, 3, h, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "mapped range"));
    fx_close(&g);
    fx_close(&f);
}

/* A CUDA-graph private pool (pool id other than (0, 0)): its free memory is
 * never used for ordinary allocations (get_pool), the policy view does not
 * show it, and empty_cache leaves it alone (release_cached_blocks frees a
 * private pool only when its graph is gone). */
static void test_private_pool(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "", 0), 0);
    gm_init_row rows[] = {
        {.addr = 0x10000000, .size = 20 * MiB, .kind = GM_INIT_SEGMENT, .pool = GM_POOL_LARGE},
        {.addr = 0x20000000,
         .size = 20 * MiB,
         .kind = GM_INIT_SEGMENT,
         .pool = GM_POOL_LARGE,
         .pool_id1 = 1},
        {.addr = 0x10000000, .size = 4 * MiB, .block_size = 4 * MiB, .kind = GM_INIT_BLOCK},
        {.addr = 0x20000000, .size = 2 * MiB, .block_size = 2 * MiB, .kind = GM_INIT_BLOCK},
    };
    uint64_t h[4];
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(f.a->ops->restore(f.a, rows, 4, h, &err), GM_OK);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 40 * MiB);
    gm_seg_info s[4];
    CU_ASSERT_EQUAL(f.a->ops->segments(f.a, s, 4), 1); /* the private one is not shown */
    /* 17 MiB: the default pool's 16 MiB free block is too small and the
     * private pool's 18 MiB one is not searched: a new 18 MiB segment */
    int n0 = f.log.n;
    uint64_t z = must_malloc(&f, 17 * MiB, 0);
    CU_ASSERT_EQUAL_FATAL(f.log.n, n0 + 1);
    CU_ASSERT_EQUAL(f.log.ev[n0].op, GM_OP_SEGMENT_ALLOC);
    CU_ASSERT_EQUAL(f.log.ev[n0].size, 18 * MiB);
    f.a->ops->free(f.a, z, 1);
    f.a->ops->free(f.a, h[3], 2); /* the private pool is now wholly free ... */
    CU_ASSERT_EQUAL(f.a->ops->empty_cache(f.a, 3), 18 * MiB); /* ... and stays */
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 40 * MiB);
    fx_close(&f);
}

/* empty_cache releases the large pool's whole free segments, then the small
 * pool's (release_cached_blocks: release_blocks(large_blocks), then
 * release_blocks(small_blocks)). */
static void test_empty_cache_order(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "", 0), 0);
    uint64_t small = must_malloc(&f, 1000, 0), large = must_malloc(&f, 4 * MiB, 0);
    f.a->ops->free(f.a, small, 1);
    f.a->ops->free(f.a, large, 2);
    int n0 = f.log.n;
    CU_ASSERT_EQUAL(f.a->ops->empty_cache(f.a, 3), 22 * MiB);
    CU_ASSERT_EQUAL_FATAL(f.log.n, n0 + 2);
    CU_ASSERT(f.log.ev[n0].op == GM_OP_SEGMENT_FREE && f.log.ev[n0].size == 20 * MiB);
    CU_ASSERT(f.log.ev[n0 + 1].op == GM_OP_SEGMENT_FREE && f.log.ev[n0 + 1].size == 2 * MiB);
    fx_close(&f);
}

/* The direct allocator: one driver call per tensor, 2 MiB granularity. */
static void test_direct(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "direct", "", 0), 0);
    uint64_t h = must_malloc(&f, 1000, 0);
    CU_ASSERT_EQUAL(f.log.n, 1);
    CU_ASSERT_EQUAL(f.log.ev[0].size, 2 * MiB);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 2 * MiB);
    CU_ASSERT_EQUAL(f.a->c.requested_bytes, 1000);
    f.a->ops->free(f.a, h, 1);
    CU_ASSERT_EQUAL(f.log.n, 2);
    CU_ASSERT_EQUAL(f.log.ev[1].op, GM_OP_SEGMENT_FREE);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 0);
    fx_close(&f);
    gm_device *d;
    gm_policy *pol;
    gm_alloc *a;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_device_model_create(GiB, NULL, &d, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_policy_create("pytorch", &pol, &err), GM_OK);
    CU_ASSERT_EQUAL(
        gm_alloc_create(gm_alloc_find("direct"), d, "max_split_size_mb:64", 0, pol, &a, &err),
        GM_EINVAL);
    gm_policy_destroy(pol);
    gm_device_destroy(d);
}

/* ff_state and ff_part_state with too little room (alloc.h): for every
 * cap below the state's length, a count above cap and the state's first
 * cap words written (the model may stop past them); with room, the whole
 * state, the same words as counted whole. A model of a few hundred blocks
 * in both pools, some freed. */
static void test_ff_state_room(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "", 0), 0);
    uint64_t h[300];
    for (size_t i = 0; i < 300; i++)
        h[i] = must_malloc(&f, i % 3 ? 4096 * (1 + i % 7) : (1 + i % 5) * MiB + 512, 0);
    for (size_t i = 0; i < 300; i += 4)
        f.a->ops->free(f.a, h[i], 1);
    for (int part = -1; part < GM_FF_PARTS; part++) {
        enum { ROOM = 1 << 16 }; /* more than the state has */
        uint64_t *whole = calloc(ROOM, sizeof *whole), *buf = calloc(ROOM, sizeof *buf);
        CU_ASSERT_FATAL(whole && buf);
        size_t n = part < 0 ? f.a->ops->ff_state(f.a, whole, ROOM)
                            : f.a->ops->ff_part_state(f.a, part, whole, ROOM);
        CU_ASSERT_FATAL(n > 300 && n < ROOM - 8);
        for (size_t cap = 0; cap <= n; cap++) {
            memset(buf, 0xa5, (n + 8) * sizeof *buf);
            size_t r = part < 0 ? f.a->ops->ff_state(f.a, buf, cap)
                                : f.a->ops->ff_part_state(f.a, part, buf, cap);
            if (cap < n) {
                CU_ASSERT(r > cap);
            } else {
                CU_ASSERT_EQUAL(r, n);
            }
            CU_ASSERT_EQUAL(memcmp(buf, whole, cap * sizeof *buf), 0);
            CU_ASSERT_EQUAL(buf[cap], 0xa5a5a5a5a5a5a5a5ull); /* nothing past cap */
        }
        free(whole);
        free(buf);
    }
    fx_close(&f);
}

/* Restoring an initial state: blocks land at their recorded offsets and
 * the gaps between them are free and usable. */
static void test_restore(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "", 0), 0);
    gm_init_row rows[] = {
        {.addr = 0x1000000, .size = 20 * MiB, .kind = GM_INIT_SEGMENT},
        {.addr = 0x1000000 + 4 * MiB,
         .size = 3 * MiB,
         .block_size = 3 * MiB,
         .kind = GM_INIT_BLOCK,
         .category = GM_CAT_PARAMETER},
        {.addr = 0x1000000 + 10 * MiB, .size = 1000000, .kind = GM_INIT_BLOCK},
    };
    uint64_t handles[3];
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(f.a->ops->restore(f.a, rows, 3, handles, &err), GM_OK);
    CU_ASSERT_EQUAL(handles[0], 0);
    CU_ASSERT(handles[1] != 0 && handles[2] != 0);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 20 * MiB);
    CU_ASSERT_EQUAL(f.a->c.requested_bytes, 3 * MiB + 1000000);
    gm_seg_info s[2];
    f.a->ops->segments(f.a, s, 2);
    CU_ASSERT_EQUAL(s[0].n_blocks, 5); /* gap, block, gap, block, tail */
    CU_ASSERT_EQUAL(s[0].largest_free, 10 * MiB - 1000448);
    /* a 4 MiB request fits the 4 MiB gap at the start: no driver call */
    int n = f.log.n;
    must_malloc(&f, 4 * MiB, 0);
    CU_ASSERT_EQUAL(f.log.n, n);
    f.a->ops->free(f.a, handles[1], 1);
    f.a->ops->free(f.a, handles[2], 1);
    CU_ASSERT_EQUAL(f.a->c.requested_bytes, 4 * MiB);
    /* a block that overlaps the end of its segment is an error naming it */
    gm_init_row bad[] = {{.addr = 0x9000000, .size = 2 * MiB, .kind = GM_INIT_SEGMENT},
                         {.addr = 0x9000000 + MiB, .size = 2 * MiB, .kind = GM_INIT_BLOCK}};
    CU_ASSERT_EQUAL(f.a->ops->restore(f.a, bad, 2, handles, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "overlaps"));
    fx_close(&f);

    /* live blocks no recorded segment holds (an RMM log records none) are
     * allocated through the model: 1000 B -> a 2 MiB small segment */
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "", 0), 0);
    gm_init_row loose[] = {{.addr = 0x5000, .size = 1000, .kind = GM_INIT_BLOCK},
                           {.addr = 0x9000, .size = 3000, .kind = GM_INIT_BLOCK}};
    CU_ASSERT_EQUAL_FATAL(f.a->ops->restore(f.a, loose, 2, handles, &err), GM_OK);
    CU_ASSERT(handles[0] != 0 && handles[1] != 0);
    CU_ASSERT_EQUAL(f.a->c.reserved_bytes, 2 * MiB);
    CU_ASSERT_EQUAL(f.a->c.requested_bytes, 4000);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 1024 + 3072);
    fx_close(&f);
}

/* PyTorch's DeviceStats (gm_alloc_stats), hand-worked from the update rules
 * of CUDACachingAllocator.cpp (alloc_block, alloc_found_block, free,
 * free_block, release_block; sim/alloc_pytorch.c "statistics"). */
static gm_alloc_stats stats_of(fixture *f)
{
    gm_alloc_stats st;
    memset(&st, 0xff, sizeof st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->a->ops->stats);
    f->a->ops->stats(f->a, &st);
    return st;
}

#define STAT_EQ(x, cur, pk, al, fr)                                                                \
    do {                                                                                           \
        CU_ASSERT_EQUAL((x).current, cur);                                                         \
        CU_ASSERT_EQUAL((x).peak, pk);                                                             \
        CU_ASSERT_EQUAL((x).allocated, al);                                                        \
        CU_ASSERT_EQUAL((x).freed, fr);                                                            \
    } while (0)

/* Splits: two 4 MiB tensors in one 20 MiB segment, freed in order. */
static void test_stats_splits(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "", 0), 0);
    uint64_t x = must_malloc(&f, 4 * MiB, 0);
    gm_alloc_stats st = stats_of(&f);
    /* a new 20 MiB segment, split: the 16 MiB rest is an inactive split block */
    STAT_EQ(st.segment[GM_STAT_ALL], 1, 1, 1, 0);
    STAT_EQ(st.reserved_bytes[GM_STAT_LARGE], 20 * MiB, 20 * MiB, 20 * MiB, 0);
    STAT_EQ(st.inactive_split[GM_STAT_ALL], 1, 1, 1, 0);
    STAT_EQ(st.inactive_split_bytes[GM_STAT_ALL], 16 * MiB, 16 * MiB, 16 * MiB, 0);
    uint64_t y = must_malloc(&f, 4 * MiB, 0);
    st = stats_of(&f);
    /* the split block shrinks by 4 MiB; still one block */
    STAT_EQ(st.inactive_split[GM_STAT_ALL], 1, 1, 1, 0);
    STAT_EQ(st.inactive_split_bytes[GM_STAT_ALL], 12 * MiB, 16 * MiB, 16 * MiB, 4 * MiB);
    STAT_EQ(st.allocation[GM_STAT_ALL], 2, 2, 2, 0);
    f.a->ops->free(f.a, x, 1);
    st = stats_of(&f);
    /* x is free beside allocated y: a second inactive split block */
    STAT_EQ(st.inactive_split[GM_STAT_ALL], 2, 2, 2, 0);
    STAT_EQ(st.inactive_split_bytes[GM_STAT_ALL], 16 * MiB, 16 * MiB, 20 * MiB, 4 * MiB);
    STAT_EQ(st.allocated_bytes[GM_STAT_ALL], 4 * MiB, 8 * MiB, 8 * MiB, 4 * MiB);
    STAT_EQ(st.active[GM_STAT_ALL], 1, 2, 2, 1);
    f.a->ops->free(f.a, y, 2);
    st = stats_of(&f);
    /* y merges both neighbours: the segment is whole again, nothing split */
    STAT_EQ(st.inactive_split[GM_STAT_ALL], 0, 2, 2, 2);
    STAT_EQ(st.inactive_split_bytes[GM_STAT_ALL], 0, 16 * MiB, 20 * MiB, 20 * MiB);
    STAT_EQ(st.requested_bytes[GM_STAT_ALL], 0, 8 * MiB, 8 * MiB, 8 * MiB);
    STAT_EQ(st.active_bytes[GM_STAT_LARGE], 0, 8 * MiB, 8 * MiB, 8 * MiB);
    STAT_EQ(st.allocation[GM_STAT_SMALL], 0, 0, 0, 0);
    /* 4 MiB then exactly the 16 MiB rest: taking a split block whole removes it */
    x = must_malloc(&f, 4 * MiB, 0);
    y = must_malloc(&f, 16 * MiB, 0);
    st = stats_of(&f);
    CU_ASSERT_EQUAL(st.segment[GM_STAT_ALL].current, 1);
    STAT_EQ(st.inactive_split[GM_STAT_ALL], 0, 2, 3, 3);
    /* a small tensor: the small pool's 2 MiB segment, split; all = large + small */
    uint64_t z = must_malloc(&f, 1000, 0);
    st = stats_of(&f);
    STAT_EQ(st.inactive_split_bytes[GM_STAT_SMALL], 2 * MiB - 1024, 2 * MiB - 1024, 2 * MiB - 1024,
            0);
    STAT_EQ(st.requested_bytes[GM_STAT_SMALL], 1000, 1000, 1000, 0);
    STAT_EQ(st.allocated_bytes[GM_STAT_SMALL], 1024, 1024, 1024, 0);
    CU_ASSERT_EQUAL(st.reserved_bytes[GM_STAT_ALL].current, 22 * MiB);
    CU_ASSERT_EQUAL(st.inactive_split[GM_STAT_ALL].current, 1);
    /* empty_cache gives back only the whole free small segment after z's free */
    f.a->ops->free(f.a, z, 3);
    f.a->ops->empty_cache(f.a, 4);
    st = stats_of(&f);
    STAT_EQ(st.segment[GM_STAT_SMALL], 0, 1, 1, 1);
    STAT_EQ(st.reserved_bytes[GM_STAT_ALL], 20 * MiB, 22 * MiB, 22 * MiB, 2 * MiB);
    CU_ASSERT_EQUAL(st.num_device_alloc, 2);
    CU_ASSERT_EQUAL(st.num_device_free, 1);
    CU_ASSERT_EQUAL(st.max_split_size, -1); /* unset, as PyTorch reports it */
    CU_ASSERT_EQUAL(st.num_ooms, 0);
    fx_close(&f);
}

/* max_split_size_mb:64 (test_max_split's trace): oversize segments and
 * allocations are counted; an oversize block is never split. */
static void test_stats_oversize(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "max_split_size_mb:64", 0), 0);
    uint64_t h = must_malloc(&f, 100 * MiB, 0);
    gm_alloc_stats st = stats_of(&f);
    STAT_EQ(st.oversize_segments, 1, 1, 1, 0);
    STAT_EQ(st.oversize_allocations, 1, 1, 1, 0);
    CU_ASSERT_EQUAL(st.inactive_split[GM_STAT_ALL].allocated, 0);
    f.a->ops->free(f.a, h, 1);
    must_malloc(&f, 30 * MiB, 0); /* a new 30 MiB segment: not oversize */
    must_malloc(&f, 90 * MiB, 0); /* the cached 100 MiB block, whole */
    st = stats_of(&f);
    STAT_EQ(st.oversize_segments, 1, 1, 1, 0);
    STAT_EQ(st.oversize_allocations, 1, 1, 2, 1);
    STAT_EQ(st.segment[GM_STAT_ALL], 2, 2, 2, 0);
    STAT_EQ(st.allocated_bytes[GM_STAT_ALL], 130 * MiB, 130 * MiB, 230 * MiB, 100 * MiB);
    STAT_EQ(st.requested_bytes[GM_STAT_ALL], 120 * MiB, 120 * MiB, 220 * MiB, 100 * MiB);
    STAT_EQ(st.inactive_split[GM_STAT_ALL], 0, 0, 0, 0);
    CU_ASSERT_EQUAL(st.max_split_size, (int64_t)(64 * MiB));
    fx_close(&f);
}

/* An allocation that fails for good counts in num_ooms; the retry after
 * the flush in num_alloc_retries; a free_requested ends the allocation
 * (allocated_bytes) but not the block's activity (active_bytes). */
static void test_stats_oom_deferred(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 1 * GiB, "pytorch", "", 0), 0);
    CU_ASSERT_EQUAL_FATAL(gm_device_add_context(f.dev, 512 * MiB), GM_OK);
    uint64_t h = must_malloc(&f, 300 * MiB, 0), x;
    CU_ASSERT_EQUAL(f.a->ops->malloc(f.a, 300 * MiB, 0, 0, 1, &x), GM_EOOM);
    gm_alloc_stats st = stats_of(&f);
    CU_ASSERT_EQUAL(st.num_ooms, 1);
    CU_ASSERT_EQUAL(st.num_alloc_retries, 1);
    CU_ASSERT_EQUAL(st.allocation[GM_STAT_ALL].allocated, 1);
    f.a->ops->free_requested(f.a, h);
    st = stats_of(&f);
    STAT_EQ(st.allocation[GM_STAT_ALL], 0, 1, 1, 1);
    STAT_EQ(st.allocated_bytes[GM_STAT_ALL], 0, 300 * MiB, 300 * MiB, 300 * MiB);
    STAT_EQ(st.active_bytes[GM_STAT_ALL], 300 * MiB, 300 * MiB, 300 * MiB, 0);
    f.a->ops->free(f.a, h, 2);
    st = stats_of(&f);
    STAT_EQ(st.allocation[GM_STAT_ALL], 0, 1, 1, 1); /* counted once */
    STAT_EQ(st.active_bytes[GM_STAT_ALL], 0, 300 * MiB, 300 * MiB, 300 * MiB);
    fx_close(&f);
    /* models that keep no such statistics say so by a NULL op */
    CU_ASSERT_PTR_NULL(gm_alloc_find("rmm-pool")->stats);
    CU_ASSERT_PTR_NULL(gm_alloc_find("direct")->stats);
}

/* A restored segment with two live blocks carved out: the two gaps and the
 * tail are inactive split blocks, as in the PyTorch that took the dump. */
static void test_stats_restore(void)
{
    fixture f;
    CU_ASSERT_EQUAL_FATAL(fx_open(&f, 80 * GiB, "pytorch", "", 0), 0);
    gm_init_row rows[] = {
        {.addr = 0x1000000, .size = 20 * MiB, .kind = GM_INIT_SEGMENT},
        {.addr = 0x1000000 + 4 * MiB,
         .size = 3 * MiB,
         .block_size = 3 * MiB,
         .kind = GM_INIT_BLOCK},
        {.addr = 0x1000000 + 10 * MiB, .size = 1000000, .kind = GM_INIT_BLOCK},
    };
    uint64_t handles[3];
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(f.a->ops->restore(f.a, rows, 3, handles, &err), GM_OK);
    gm_alloc_stats st = stats_of(&f);
    /* gap 4 MiB, block, gap 3 MiB, block (1000448 B), tail */
    CU_ASSERT_EQUAL(st.inactive_split[GM_STAT_LARGE].current, 3);
    CU_ASSERT_EQUAL(st.inactive_split_bytes[GM_STAT_ALL].current, 20 * MiB - 3 * MiB - 1000448);
    STAT_EQ(st.allocation[GM_STAT_ALL], 2, 2, 2, 0);
    CU_ASSERT_EQUAL(st.allocated_bytes[GM_STAT_ALL].current, 3 * MiB + 1000448);
    CU_ASSERT_EQUAL(st.reserved_bytes[GM_STAT_ALL].current, 20 * MiB);
    f.a->ops->free(f.a, handles[1], 1); /* merges the gaps on both sides */
    st = stats_of(&f);
    CU_ASSERT_EQUAL(st.inactive_split[GM_STAT_ALL].current, 2);
    CU_ASSERT_EQUAL(st.inactive_split_bytes[GM_STAT_ALL].current, 20 * MiB - 1000448);
    fx_close(&f);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("alloc", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_round_size);
    GM_ADD_TEST(s, test_conf_errors);
    GM_ADD_TEST(s, test_conf_versions);
    GM_ADD_TEST(s, test_conf_effects);
    GM_ADD_TEST(s, test_conf_env);
    GM_ADD_TEST(s, test_large_segment_split);
    GM_ADD_TEST(s, test_pools);
    GM_ADD_TEST(s, test_streams_best_fit);
    GM_ADD_TEST(s, test_merge);
    GM_ADD_TEST(s, test_max_split);
    GM_ADD_TEST(s, test_retry_order);
    GM_ADD_TEST(s, test_flush_all);
    GM_ADD_TEST(s, test_gc);
    GM_ADD_TEST(s, test_memory_fraction);
    GM_ADD_TEST(s, test_expandable);
    GM_ADD_TEST(s, test_restore_expandable);
    GM_ADD_TEST(s, test_private_pool);
    GM_ADD_TEST(s, test_empty_cache_order);
    GM_ADD_TEST(s, test_direct);
    GM_ADD_TEST(s, test_restore);
    GM_ADD_TEST(s, test_ff_state_room);
    GM_ADD_TEST(s, test_stats_splits);
    GM_ADD_TEST(s, test_stats_oversize);
    GM_ADD_TEST(s, test_stats_oom_deferred);
    GM_ADD_TEST(s, test_stats_restore);
    return CUE_SUCCESS;
}
