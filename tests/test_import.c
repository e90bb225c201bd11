/*
 * test_import.c - `gmsim import` (traces/import_torch.c, traces/import_rmm.c)
 * and `gmsim fidelity` (study/fidelity.c).
 *
 * Real snapshots: the seven files in tests/data (provenance in SOURCES.md).
 * Their expected numbers were derived independently of this code, in Python
 * with pickle.load, by undoing each trace from the dump state as
 * SNAPSHOTS.md rule 3 says (alloc removes its block, free_completed adds it
 * back, segment_alloc removes its segment) and summing what is left.
 *
 * Hand-made snapshots are written below as Python literals and turned into
 * protocol-2 pickles by a small writer (lit()), so each case reads like the
 * snapshot it stands for.
 */
#include "cu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reports/results.h"
#include "study/fidelity.h"
#include "traces/import_rmm.h"
#include "traces/import_torch.h"
#include "traces/trace.h"
#include "traces/unpickle.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------- a Python-literal -> pickle writer ---------------- */

typedef struct pbuf {
    unsigned char b[1 << 16];
    size_t n;
} pbuf;

static void put(pbuf *p, const void *x, size_t n)
{
    CU_ASSERT_FATAL(p->n + n <= sizeof p->b);
    memcpy(p->b + p->n, x, n);
    p->n += n;
}

static void put1(pbuf *p, unsigned char c)
{
    put(p, &c, 1);
}

static const char *ws(const char *s)
{
    while (*s == ' ' || *s == '\n')
        s++;
    return s;
}

static const char *lit(pbuf *p, const char *s);

/* Items of a container up to `close`; dict items are key: value. */
static const char *items(pbuf *p, const char *s, char close, int dict)
{
    s = ws(s);
    while (*s != close) {
        s = lit(p, s);
        if (dict) {
            s = ws(s);
            CU_ASSERT_FATAL(*s == ':');
            s = lit(p, s + 1);
        }
        s = ws(s);
        if (*s == ',') s = ws(s + 1);
    }
    return s + 1;
}

static void put_int(pbuf *p, long long v)
{
    unsigned char le[8];
    int n = 8;
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)((unsigned long long)v >> (8 * i));
    while (n > 1 &&
           ((le[n - 1] == 0 && !(le[n - 2] & 0x80)) || (le[n - 1] == 0xff && (le[n - 2] & 0x80))))
        n--;
    put1(p, 0x8a); /* LONG1 */
    put1(p, (unsigned char)n);
    put(p, le, (size_t)n);
}

static const char *lit(pbuf *p, const char *s)
{
    s = ws(s);
    if (*s == '{' || *s == '[') {
        int dict = *s == '{';
        put1(p, dict ? '}' : ']');
        put1(p, '(');
        s = items(p, s + 1, dict ? '}' : ']', dict);
        put1(p, dict ? 'u' : 'e');
    } else if (*s == '(') {
        put1(p, '(');
        s = items(p, s + 1, ')', 0);
        put1(p, 't');
    } else if (*s == '\'') {
        const char *e = strchr(s + 1, '\'');
        unsigned len = (unsigned)(e - s - 1);
        unsigned char hdr[5] = {'X', (unsigned char)len, (unsigned char)(len >> 8),
                                (unsigned char)(len >> 16), (unsigned char)(len >> 24)};
        put(p, hdr, 5);
        put(p, s + 1, len);
        s = e + 1;
    } else if (!strncmp(s, "True", 4) || !strncmp(s, "False", 5) || !strncmp(s, "None", 4)) {
        put1(p, *s == 'T' ? 0x88 : *s == 'F' ? 0x89 : 'N');
        s += *s == 'F' ? 5 : 4;
    } else {
        char *end;
        long long v = strtoll(s, &end, 0);
        if (*end == '.' || *end == 'e') {
            double d = strtod(s, &end);
            unsigned long long u;
            memcpy(&u, &d, 8);
            put1(p, 'G');
            for (int i = 7; i >= 0; i--)
                put1(p, (unsigned char)(u >> (8 * i)));
        } else {
            CU_ASSERT_FATAL(end != s);
            put_int(p, v);
        }
        s = end;
    }
    return s;
}

/* Pickle the literal and import it. */
static int import_lit(const char *text, int device, gm_torch_import **out, gm_err *err)
{
    static pbuf p;
    pkl_doc *doc;
    p.n = 0;
    put1(&p, 0x80);
    put1(&p, 2);
    lit(&p, text);
    put1(&p, '.');
    CU_ASSERT_EQUAL_FATAL(pkl_parse(p.b, p.n, NULL, &doc, err), GM_OK);
    gm_torch_opts o = {.name = "test.pickle", .command = "test", .device = device};
    int rc = gm_torch_import_value(pkl_root(doc), &o, out, err);
    pkl_free(doc);
    return rc;
}

static const gm_init_row *init_at(const gm_import_trace *t, uint64_t addr, int kind)
{
    for (size_t i = 0; i < t->n_init; i++)
        if (t->init[i].addr == addr && t->init[i].kind == kind) return &t->init[i];
    return NULL;
}

/* ---------------- the seven real snapshots ---------------- */

struct snap_case {
    const char *file;
    const char *layout;
    size_t events, alloc, free, seg_alloc, markers;
    uint64_t init_segments, init_segment_bytes, init_blocks, init_block_bytes;
    uint64_t init_block_size_sum; /* sum of block_size of the initial blocks */
    uint64_t guessed, live_at_end;
    int order_only;
};

static const struct snap_case snap_cases[] = {
    {"tiny-segments-only.pickle", "current", 0, 0, 0, 0, 0, 3, 46137344, 73, 20981596, 21002752, 0,
     73, 0},
    {"small-with-segments.pickle", "current", 71, 36, 26, 9, 0, 0, 0, 0, 0, 0, 0, 10, 0},
    {"oom-state-torch20.pickle", "PyTorch 2.0", 0, 0, 0, 0, 1, 176, 11844714496ull, 460,
     11840159744ull, 11840159744ull, 0, 460, 1},
    {"forward-bf16-ctx128.pickle", "current", 1874, 937, 937, 0, 2, 43, 861929472, 137, 523811840,
     525286400, 0, 137, 0},
    {"gpt-medium-ctx512-infer.pickle", "current", 3332, 1666, 1666, 0, 0, 101, 1981808640, 223,
     1701482496, 1703448576, 0, 223, 0},
    {"gpt-medium-ctx128-train.pickle", "current", 12831, 6526, 6305, 0, 2, 377, 7235174400ull, 664,
     5095321600ull, 5101219840ull, 438, 885, 0},
    {"finetune-no-timestamps.pickle", "older (no time_us)", 6982, 3505, 3325, 152, 0, 63,
     1400897536, 622, 1095725248, 1103667200, 0, 802, 1},
};

static void check_snapshot(const struct snap_case *c)
{
    char rel[256];
    gm_err err;
    gm_torch_import *imp;
    snprintf(rel, sizeof rel, "tests/data/%s", c->file);
    int rc = gm_torch_import_file(gm_test_path(rel), NULL, &imp, &err);
    if (rc) fprintf(stderr, "%s: %s\n", c->file, err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    CU_ASSERT_STRING_EQUAL(imp->layout, c->layout);
    CU_ASSERT_EQUAL_FATAL(imp->n, 1);
    const gm_import_trace *t = &imp->dev[0];
    size_t nop[GM_OP_COUNT] = {0};
    for (size_t i = 0; i < t->n_events; i++)
        nop[t->events[i].op]++;
    uint64_t bs = 0;
    for (size_t i = 0; i < t->n_init; i++)
        if (t->init[i].kind == GM_INIT_BLOCK) bs += t->init[i].block_size;
    CU_ASSERT_EQUAL(t->n_events, c->events);
    CU_ASSERT_EQUAL(nop[GM_OP_ALLOC], c->alloc);
    CU_ASSERT_EQUAL(nop[GM_OP_FREE], c->free);
    CU_ASSERT_EQUAL(nop[GM_OP_SEGMENT_ALLOC], c->seg_alloc);
    CU_ASSERT_EQUAL(nop[GM_OP_SEGMENT_FREE], 0);
    CU_ASSERT_EQUAL(t->n_markers, c->markers);
    CU_ASSERT_EQUAL(t->init_segments, c->init_segments);
    CU_ASSERT_EQUAL(t->init_segment_bytes, c->init_segment_bytes);
    CU_ASSERT_EQUAL(t->init_blocks, c->init_blocks);
    CU_ASSERT_EQUAL(t->init_block_bytes, c->init_block_bytes);
    CU_ASSERT_EQUAL(bs, c->init_block_size_sum);
    CU_ASSERT_EQUAL(t->init_guessed_sizes, c->guessed);
    CU_ASSERT_EQUAL(t->live_at_end, c->live_at_end);
    CU_ASSERT_EQUAL(t->order_only_time, c->order_only);
    CU_ASSERT_EQUAL(t->time_repairs, 0);
    CU_ASSERT_STRING_EQUAL(t->meta.source, "torch-snapshot");
    CU_ASSERT_STRING_EQUAL(t->meta.alloc_conf, ""); /* all recorded PyTorch defaults */
    CU_ASSERT_EQUAL(t->meta.device_total_bytes, 0); /* no oom entry anywhere */
    if (!c->events) CU_ASSERT_PTR_NOT_NULL(strstr(t->summary, "no trace"));
    for (size_t i = 1; i < t->n_events; i++)
        CU_ASSERT_TRUE_FATAL(t->events[i].t_ns >= t->events[i - 1].t_ns);

    /* written and read back, as `gmsim run` will see it */
    const char *path = gm_test_tmp("snap.h5");
    CU_ASSERT_EQUAL_FATAL(gm_import_trace_write(t, path, NULL, &err), GM_OK);
    gm_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_nevents(r), c->events);
    gm_init_row *rows;
    size_t n;
    CU_ASSERT_EQUAL(gm_trace_read_initial(r, &rows, &n, &err), GM_OK);
    CU_ASSERT_EQUAL(n, c->init_segments + c->init_blocks);
    free(rows);
    gm_event buf[4096];
    int64_t got, total = 0;
    while ((got = gm_trace_read(r, buf, N_OF(buf), &err)) > 0) /* the reader's checks pass */
        total += got;
    CU_ASSERT_EQUAL(got, 0);
    CU_ASSERT_EQUAL((size_t)total, c->events);
    gm_trace_close(r);
    unlink(path);
    gm_torch_import_free(imp);
}

static void test_real_snapshots(void)
{
    for (size_t i = 0; i < N_OF(snap_cases); i++)
        check_snapshot(&snap_cases[i]);
}

/* Categories on gpt-medium-ctx128-train: the pre-existing blocks are the 226
 * live through the whole trace (weights: parameter) and the 438 freed by the
 * optimizer step (its replaced Adam states); in the trace, backward
 * allocations that outlive the backward pass are the 219 gradients. */
static void test_real_categories(void)
{
    gm_err err;
    gm_torch_import *imp;
    CU_ASSERT_EQUAL_FATAL(gm_torch_import_file(gm_test_path("tests/data/gpt-medium-ctx128-train."
                                                            "pickle"),
                                               NULL, &imp, &err),
                          GM_OK);
    const gm_import_trace *t = &imp->dev[0];
    CU_ASSERT_EQUAL(t->cat_init[GM_CAT_PARAMETER], 226);
    CU_ASSERT_EQUAL(t->cat_init[GM_CAT_OPTIMIZER_STATE], 438);
    CU_ASSERT_EQUAL(t->cat_allocs[GM_CAT_GRADIENT], 219);
    CU_ASSERT_EQUAL(t->cat_allocs[GM_CAT_OPTIMIZER_STATE], 438);
    uint64_t sum = 0;
    for (int k = 0; k < GM_CAT_COUNT; k++)
        sum += t->cat_allocs[k];
    CU_ASSERT_EQUAL(sum, 6526);
    gm_torch_import_free(imp);
}

/* ---------------- fidelity on the real snapshots ---------------- */

static void fidelity_of(const char *file, const char *conf, int fresh, gm_fidelity *f)
{
    char rel[256];
    gm_err err;
    gm_torch_import *imp;
    snprintf(rel, sizeof rel, "tests/data/%s", file);
    CU_ASSERT_EQUAL_FATAL(gm_torch_import_file(gm_test_path(rel), NULL, &imp, &err), GM_OK);
    const char *path = gm_test_tmp("fid.h5");
    CU_ASSERT_EQUAL_FATAL(gm_import_trace_write(&imp->dev[0], path, NULL, &err), GM_OK);
    gm_fidelity_opts o = {.alloc_conf = conf, .fresh_addresses = fresh};
    int rc = gm_fidelity_check(path, &o, f, &err);
    if (rc) fprintf(stderr, "%s: %s\n", file, err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    unlink(path);
    gm_torch_import_free(imp);
}

/* The two snapshots that record PyTorch's own driver calls replay to exactly
 * those calls, with or without the recorded addresses. */
static void test_fidelity_recorded_segments(void)
{
    static const struct {
        const char *file;
        size_t calls;
        uint64_t allocs;
    } cases[] = {{"small-with-segments.pickle", 9, 36},
                 {"finetune-no-timestamps.pickle", 152, 3505}};
    for (size_t i = 0; i < N_OF(cases); i++)
        for (int fresh = 0; fresh < 2; fresh++) {
            gm_fidelity f;
            fidelity_of(cases[i].file, NULL, fresh, &f);
            CU_ASSERT_EQUAL(f.n_rec, cases[i].calls);
            CU_ASSERT_EQUAL(f.n_ours, cases[i].calls);
            CU_ASSERT_EQUAL(f.matched, cases[i].calls);
            CU_ASSERT_TRUE(gm_fidelity_exact(&f));
            CU_ASSERT_FALSE(f.diverged);
            CU_ASSERT_EQUAL(f.max_reserved_err, 0);
            CU_ASSERT_EQUAL(f.model_init_calls, f.init_segments);
            CU_ASSERT_EQUAL(f.placement_checked, !fresh);
            if (!fresh) { /* every tensor at the address PyTorch recorded for it */
                CU_ASSERT_EQUAL(f.placed, cases[i].allocs);
                CU_ASSERT_EQUAL(f.placed_same, cases[i].allocs);
                CU_ASSERT_FALSE(f.place_diverged);
            }
            for (size_t k = 0; k < f.n_rec; k++) /* same event, op and size, in order */
                CU_ASSERT_TRUE(f.rec[k].event_index == f.ours[k].event_index &&
                               f.rec[k].size == f.ours[k].size && f.rec[k].op == f.ours[k].op);
            gm_fidelity_free(&f);
        }
}

/* Warm-cache traces: once the initial state is rebuilt, the model invents no segment. */
static void test_fidelity_warm_cache(void)
{
    static const char *const files[] = {"gpt-medium-ctx128-train.pickle",
                                        "gpt-medium-ctx512-infer.pickle",
                                        "forward-bf16-ctx128.pickle"};
    static const uint64_t segs[] = {377, 101, 43};
    static const uint64_t allocs[] = {6526, 1666, 937};
    for (size_t i = 0; i < N_OF(files); i++) {
        gm_fidelity f;
        fidelity_of(files[i], NULL, 0, &f);
        CU_ASSERT_EQUAL(f.n_rec, 0);
        CU_ASSERT_EQUAL(f.n_ours, 0);
        CU_ASSERT_TRUE(gm_fidelity_exact(&f));
        CU_ASSERT_EQUAL(f.init_segments, segs[i]);
        CU_ASSERT_EQUAL(f.model_init_calls, segs[i]);
        CU_ASSERT_EQUAL(f.model_ooms, 0);
        CU_ASSERT_EQUAL(f.placed, allocs[i]);
        CU_ASSERT_EQUAL(f.placed_same, allocs[i]);
        CU_ASSERT_FALSE(f.place_diverged);
        gm_fidelity_free(&f);
    }
}

/* The check is not vacuous: other allocator settings than the recorded ones
 * give other driver calls, and it says so. */
static void test_fidelity_detects_mismatch(void)
{
    gm_fidelity f;
    fidelity_of("finetune-no-timestamps.pickle", "roundup_power2_divisions:4", 0, &f);
    CU_ASSERT_FALSE(gm_fidelity_exact(&f));
    CU_ASSERT_TRUE(f.diverged);
    CU_ASSERT_TRUE(f.missing > 0 && f.extra > 0);
    CU_ASSERT_TRUE(f.max_reserved_err > 0);
    CU_ASSERT_EQUAL(f.matched + f.missing, f.n_rec);
    CU_ASSERT_EQUAL(f.matched + f.extra, f.n_ours);
    json_t *j = gm_fidelity_json(&f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_TRUE(json_is_false(json_object_get(j, "exact")));
    CU_ASSERT_TRUE(json_is_object(json_object_get(j, "first_divergence")));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(json_object_get(j, "calls"), "pytorch")), 152);
    json_t *bp = json_object_get(j, "block_placement");
    CU_ASSERT_TRUE(json_is_false(json_object_get(bp, "exact")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(bp, "allocations")), 3505);
    CU_ASSERT_TRUE(json_is_object(json_object_get(bp, "first_mismatch")));
    json_decref(j);
    CU_ASSERT_TRUE(f.place_diverged);
    CU_ASSERT_TRUE(f.placed_same < f.placed);
    gm_fidelity_free(&f);
}

/* ---------------- hand-made layouts ---------------- */

/* torch.cuda.memory_snapshot() of PyTorch <= 1.13: a bare list of segments;
 * blocks without addresses (computed from the segment start). */
static void test_legacy_list(void)
{
    gm_err err;
    gm_torch_import *imp;
    const char *snap =
        "[{'device': 0, 'address': 0x20000000, 'total_size': 20971520, 'stream': 0,"
        "  'segment_type': 'large', 'blocks': ["
        "    {'size': 2097152, 'state': 'inactive'},"
        "    {'size': 4194304, 'requested_size': 4000000, 'state': 'active_allocated'},"
        "    {'size': 14680064, 'state': 'inactive'}]}]";
    CU_ASSERT_EQUAL_FATAL(import_lit(snap, -1, &imp, &err), GM_OK);
    CU_ASSERT_STRING_EQUAL(imp->layout, "legacy list");
    const gm_import_trace *t = &imp->dev[0];
    CU_ASSERT_EQUAL(t->n_events, 0);
    CU_ASSERT_EQUAL(t->init_segments, 1);
    const gm_init_row *b = init_at(t, 0x20200000, GM_INIT_BLOCK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(b->size, 4000000);
    CU_ASSERT_EQUAL(b->block_size, 4194304);
    CU_ASSERT_EQUAL(b->category, GM_CAT_UNKNOWN); /* no trace: nothing known */
    CU_ASSERT_PTR_NOT_NULL(strstr(t->summary, "no trace"));
    gm_torch_import_free(imp);
}

/* PyTorch 2.0: blocks carry `history`, no address; a `snapshot` entry. */
static void test_torch20(void)
{
    gm_err err;
    gm_torch_import *imp;
    const char *snap =
        "{'segments': [{'device': 0, 'address': 0x30000000, 'total_size': 2097152,"
        "   'allocated_size': 1024, 'active_size': 1024, 'stream': 0, 'segment_type': 'small',"
        "   'blocks': [{'size': 512, 'requested_size': 100, 'state': 'active_allocated',"
        "               'history': [{'addr': 0x30000000, 'real_size': 100, 'frames': []}]},"
        "              {'size': 512, 'requested_size': 512, 'state': 'active_allocated',"
        "               'history': [{'addr': 0x30000200, 'real_size': 512, 'frames': []}]},"
        "              {'size': 2096128, 'requested_size': 0, 'state': 'inactive'}]}],"
        " 'device_traces': [[{'action': 'snapshot', 'addr': 0, 'size': 1024, 'stream': 0}]]}";
    CU_ASSERT_EQUAL_FATAL(import_lit(snap, -1, &imp, &err), GM_OK);
    CU_ASSERT_STRING_EQUAL(imp->layout, "PyTorch 2.0");
    const gm_import_trace *t = &imp->dev[0];
    CU_ASSERT_EQUAL(t->n_events, 0);
    CU_ASSERT_EQUAL(t->n_markers, 1);
    CU_ASSERT_STRING_EQUAL(t->markers[0].name, "snapshot");
    CU_ASSERT_EQUAL(t->init_blocks, 2);
    CU_ASSERT_PTR_NOT_NULL(init_at(t, 0x30000200, GM_INIT_BLOCK));
    CU_ASSERT_STRING_EQUAL(t->meta.alloc_conf, ""); /* no settings: defaults */
    CU_ASSERT_PTR_NOT_NULL(strstr(t->meta.workload, "PyTorch defaults assumed"));
    gm_torch_import_free(imp);
}

/* Two devices: one trace each, or --device N; an oom entry gives the device
 * size (free + reserved at that moment); unknown actions are skipped. */
static const char *two_devices =
    "{'segments': ["
    "  {'device': 0, 'address': 0x10000000, 'total_size': 2097152, 'stream': 0,"
    "   'segment_type': 'small', 'blocks': ["
    "     {'address': 0x10000000, 'size': 512, 'requested_size': 8, 'state': 'active_allocated',"
    "      'frames': []},"
    "     {'address': 0x10000200, 'size': 2096640, 'requested_size': 0, 'state': 'inactive',"
    "      'frames': []}]},"
    "  {'device': 1, 'address': 0x40000000, 'total_size': 20971520, 'stream': 0,"
    "   'segment_type': 'large', 'blocks': ["
    "     {'address': 0x40000000, 'size': 2000384, 'requested_size': 2000000,"
    "      'state': 'active_allocated', 'frames': []},"
    "     {'address': 0x401e8600, 'size': 18971136, 'requested_size': 0, 'state': 'inactive',"
    "      'frames': []}]}],"
    " 'device_traces': [[], ["
    "  {'action': 'segment_alloc', 'addr': 0x40000000, 'size': 20971520, 'stream': 0,"
    "   'time_us': 5000, 'frames': []},"
    "  {'action': 'alloc', 'addr': 0x40000000, 'size': 2000000, 'stream': 0, 'time_us': 5000,"
    "   'frames': []},"
    "  {'action': 'alloc', 'addr': 0x401e8600, 'size': 3000000, 'stream': 0, 'time_us': 5002,"
    "   'frames': []},"
    "  {'action': 'free_requested', 'addr': 0x401e8600, 'size': 3000000, 'stream': 0,"
    "   'time_us': 5003, 'frames': []},"
    "  {'action': 'free_completed', 'addr': 0x401e8600, 'size': 3000000, 'stream': 0,"
    "   'time_us': 5003, 'frames': []},"
    "  {'action': 'oom', 'device_free': 1073741824, 'size': 107374182400, 'stream': 0,"
    "   'time_us': 5004, 'frames': []},"
    "  {'action': 'user_defined', 'addr': 0, 'size': 0, 'stream': 0, 'time_us': 5005}]],"
    " 'allocator_settings': {'PYTORCH_CUDA_ALLOC_CONF': '', 'max_split_size': -1,"
    "   'garbage_collection_threshold': 0.0, 'expandable_segments': False},"
    " 'external_annotations': []}";

static void test_two_devices(void)
{
    gm_err err;
    gm_torch_import *imp;
    CU_ASSERT_EQUAL_FATAL(import_lit(two_devices, -1, &imp, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(imp->n, 2);
    CU_ASSERT_EQUAL(imp->dev[0].device, 0);
    CU_ASSERT_EQUAL(imp->dev[0].n_events, 0);
    CU_ASSERT_EQUAL(imp->dev[0].init_blocks, 1);
    const gm_import_trace *t = &imp->dev[1];
    CU_ASSERT_EQUAL(t->device, 1);
    CU_ASSERT_EQUAL_FATAL(t->n_events, 5); /* segment_alloc, alloc, alloc, free, oom */
    CU_ASSERT_EQUAL(t->events[0].op, GM_OP_SEGMENT_ALLOC);
    CU_ASSERT_EQUAL(t->events[3].op, GM_OP_FREE);
    CU_ASSERT_EQUAL(t->events[3].t_ns, 3000);
    /* the allocation that failed, replayed as an attempt; addr = device_free */
    CU_ASSERT_EQUAL(t->events[4].op, GM_OP_OOM);
    CU_ASSERT_EQUAL(t->events[4].size, 107374182400ull);
    CU_ASSERT_EQUAL(t->events[4].addr, 1073741824ull);
    CU_ASSERT_EQUAL(t->init_segments, 0); /* the only segment was created in the trace */
    CU_ASSERT_EQUAL(t->init_blocks, 0);
    CU_ASSERT_EQUAL(t->live_at_end, 1);
    CU_ASSERT_EQUAL(t->skipped, 1);
    CU_ASSERT_EQUAL(t->n_action[GM_TA_OTHER], 1);
    /* the card's size is not recorded; what the process could use is:
     * reserved + device_free at the oom, inside [largest reserve held,
     * reserved + the segment the request needed) */
    CU_ASSERT_EQUAL(t->meta.device_total_bytes, 0);
    CU_ASSERT_EQUAL(t->meta.device_avail_bytes, 1073741824ull + 20971520ull);
    CU_ASSERT_EQUAL(t->meta.device_avail_min_bytes, 20971520ull);
    CU_ASSERT_EQUAL(t->meta.device_avail_max_bytes, 20971520ull + 107374182400ull);
    CU_ASSERT_PTR_NOT_NULL(strstr(t->meta.device_avail_source, "device_free at the first oom"));
    CU_ASSERT_EQUAL_FATAL(t->n_markers, 1);
    CU_ASSERT_EQUAL(t->markers[0].kind, GM_MARK_INSTANT);
    CU_ASSERT_EQUAL(strncmp(t->markers[0].name, "oom: 107374182400 B requested", 29), 0);
    gm_torch_import_free(imp);

    CU_ASSERT_EQUAL_FATAL(import_lit(two_devices, 1, &imp, &err), GM_OK);
    CU_ASSERT_EQUAL(imp->n, 1);
    CU_ASSERT_EQUAL(imp->dev[0].device, 1);
    gm_torch_import_free(imp);
    CU_ASSERT_EQUAL(import_lit(two_devices, 5, &imp, &err), GM_EINVAL);
    CU_ASSERT_PTR_NULL(imp);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "device(s) 0, 1"));
}

/*
 * Reconstruction and categories. Device 0 at dump: segment A (large, 20 MiB)
 * holds P (pre-existing, never freed), the free space Q left, R (pre-existing)
 * and O (allocated by the optimizer); B (small) holds W, freed by the program
 * but awaiting its stream (active_awaiting_free); C (large) was created in
 * the trace for G. D (small) existed before the trace and was freed in it.
 *   0,1  Q freed by zero_grad (pre-existing: its block size is not recorded)
 *   2    W allocated in forward          -> freed in backward (6): activation
 *   3-5  T allocated and freed in forward: temporary
 *   6    W free_requested in backward (no free_completed: live at the end)
 *   7,8  segment_alloc C, G allocated in backward, live at the end: gradient
 *   9    O allocated in the optimizer step, live at the end: optimizer_state
 *   10   segment_free D
 */
#define FWD "[{'name': 'forward', 'filename': '/w/model.py', 'line': 3}]"
#define BWD "[{'name': 'torch::autograd::Node::operator()(x)', 'filename': '?\?', 'line': 0}]"
#define OPT "[{'name': 'step', 'filename': '/p/torch/optim/adamw.py', 'line': 9}]"
#define ZG "[{'name': 'zero_grad', 'filename': '/p/torch/optim/optimizer.py', 'line': 5}]"
#define ENT(act, addr, size, t, fr)                                                                \
    "{'action': '" act "', 'addr': " addr ", 'size': " size ", 'stream': 0, 'time_us': " t         \
    ", 'frames': " fr "},"
static const char *rebuild =
    "{'segments': ["
    " {'device': 0, 'address': 0x10000000, 'total_size': 20971520, 'stream': 0,"
    "  'segment_type': 'large', 'blocks': ["
    "   {'address': 0x10000000, 'size': 4194304, 'requested_size': 4194304,"
    "    'state': 'active_allocated', 'frames': []},"
    "   {'address': 0x10400000, 'size': 3024384, 'requested_size': 0, 'state': 'inactive'},"
    "   {'address': 0x106e2600, 'size': 2097152, 'requested_size': 2097152,"
    "    'state': 'active_allocated', 'frames': []},"
    "   {'address': 0x108e2600, 'size': 2097152, 'requested_size': 2000000,"
    "    'state': 'active_allocated', 'frames': " OPT "},"
    "   {'address': 0x10ae2600, 'size': 9558528, 'requested_size': 0, 'state': 'inactive'}]},"
    " {'device': 0, 'address': 0x30000000, 'total_size': 2097152, 'stream': 0,"
    "  'segment_type': 'small', 'blocks': ["
    "   {'address': 0x30000000, 'size': 512, 'requested_size': 100,"
    "    'state': 'active_awaiting_free', 'frames': " FWD "},"
    "   {'address': 0x30000200, 'size': 2096640, 'requested_size': 0, 'state': 'inactive'}]},"
    " {'device': 0, 'address': 0x50000000, 'total_size': 20971520, 'stream': 0,"
    "  'segment_type': 'large', 'blocks': ["
    "   {'address': 0x50000000, 'size': 5000192, 'requested_size': 5000000,"
    "    'state': 'active_allocated', 'frames': " BWD "},"
    "   {'address': 0x504c4c00, 'size': 15971328, 'requested_size': 0, 'state': 'inactive'}]}],"
    " 'device_traces': [[" ENT("free_requested", "0x10400000", "2500000", "1000", ZG) ENT(
        "free_completed", "0x10400000", "2500000", "1010",
        ZG) ENT("alloc", "0x30000000", "100", "1020",
                FWD) ENT("alloc", "0x10400000", "1500000", "1030",
                         FWD) ENT("free_requested", "0x10400000", "1500000", "1040",
                                  FWD) ENT("free_completed", "0x10400000", "1500000", "1050", FWD)
        ENT("free_requested", "0x30000000", "100", "1060",
            BWD) ENT("segment_alloc", "0x50000000", "20971520", "1070",
                     "[]") ENT("alloc", "0x50000000", "5000000", "1080",
                               BWD) ENT("alloc", "0x108e2600", "2000000", "1090", OPT)
            ENT("segment_free", "0x60000000", "2097152", "1100",
                "[]") "]],"
                      " 'allocator_settings': {'PYTORCH_CUDA_ALLOC_CONF': 'max_split_size_mb:128',"
                      "   'max_split_size': 134217728, 'garbage_collection_threshold': 0.6,"
                      "   'expandable_segments': False, 'roundup_power2_divisions': {'1': 0, '2': "
                      "0, '64': 4},"
                      "   'pinned_num_register_threads': 1, 'some_new_knob': 3},"
                      " 'external_annotations': ["
                      "   {'stage': 'START', 'name': 'Optimizer.step#AdamW.step', 'device': 0, "
                      "'time_us': 1085},"
                      "   {'stage': 'END', 'name': 'Optimizer.step#AdamW.step', 'device': 0, "
                      "'time_us': 1095}]}";

static uint8_t cat_of_alloc(const gm_import_trace *t, uint64_t addr, uint64_t size)
{
    for (size_t i = 0; i < t->n_events; i++)
        if (t->events[i].op == GM_OP_ALLOC && t->events[i].addr == addr &&
            t->events[i].size == size)
            return t->events[i].category;
    return 255;
}

static void test_rebuild_and_categories(void)
{
    gm_err err;
    gm_torch_import *imp;
    int rc = import_lit(rebuild, -1, &imp, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    const gm_import_trace *t = &imp->dev[0];
    /* before entry 0: A, B and D; C came later */
    CU_ASSERT_EQUAL(t->init_segments, 3);
    CU_ASSERT_EQUAL(t->init_segment_bytes, 20971520 + 2097152 + 2097152);
    CU_ASSERT_PTR_NOT_NULL(init_at(t, 0x60000000, GM_INIT_SEGMENT));
    CU_ASSERT_PTR_NULL(init_at(t, 0x50000000, GM_INIT_SEGMENT));
    CU_ASSERT_EQUAL(t->init_blocks, 3); /* P, Q, R */
    CU_ASSERT_EQUAL(t->init_block_bytes, 4194304 + 2500000 + 2097152);
    const gm_init_row *q = init_at(t, 0x10400000, GM_INIT_BLOCK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    /* 2500000 rounds to 2500096; the 524288-byte tail before R is too short to
     * have been split off in the large pool, so it is part of Q */
    CU_ASSERT_EQUAL(q->block_size, 3024384);
    CU_ASSERT_EQUAL(q->category, GM_CAT_GRADIENT); /* freed by zero_grad */
    CU_ASSERT_EQUAL(init_at(t, 0x10000000, GM_INIT_BLOCK)->category, GM_CAT_PARAMETER);
    CU_ASSERT_EQUAL(init_at(t, 0x106e2600, GM_INIT_BLOCK)->category, GM_CAT_PARAMETER);
    CU_ASSERT_EQUAL(t->init_guessed_sizes, 1);
    /* events: free Q, alloc W, alloc T, free T, free_requested W (its free
     * never completes: awaiting its stream), segment_alloc C, alloc G, alloc
     * O, segment_free D, and empty_cache: a release at the end of the trace
     * that no allocation needed */
    CU_ASSERT_EQUAL_FATAL(t->n_events, 10);
    CU_ASSERT_EQUAL(t->events[0].op, GM_OP_FREE);
    CU_ASSERT_EQUAL(t->events[0].phase, GM_PHASE_OPTIMIZER);
    CU_ASSERT_EQUAL(t->events[0].t_ns, 10000);
    CU_ASSERT_EQUAL(t->events[4].op, GM_OP_FREE_REQUESTED);
    CU_ASSERT_EQUAL(t->events[4].addr, 0x30000000);
    CU_ASSERT_EQUAL(t->events[4].size, 100);
    CU_ASSERT_EQUAL(t->deferred_frees, 1);
    CU_ASSERT_EQUAL(t->events[8].op, GM_OP_SEGMENT_FREE);
    CU_ASSERT_EQUAL(t->events[8].t_ns, 100000);
    CU_ASSERT_EQUAL(t->events[9].op, GM_OP_EMPTY_CACHE);
    CU_ASSERT_EQUAL(t->events[9].size, 2097152);
    CU_ASSERT_EQUAL(t->n_empty_cache, 1);
    CU_ASSERT_EQUAL(cat_of_alloc(t, 0x30000000, 100), GM_CAT_ACTIVATION);
    CU_ASSERT_EQUAL(cat_of_alloc(t, 0x10400000, 1500000), GM_CAT_TEMPORARY);
    CU_ASSERT_EQUAL(cat_of_alloc(t, 0x50000000, 5000000), GM_CAT_GRADIENT);
    CU_ASSERT_EQUAL(cat_of_alloc(t, 0x108e2600, 2000000), GM_CAT_OPTIMIZER_STATE);
    CU_ASSERT_EQUAL(t->events[1].phase, GM_PHASE_FORWARD);
    CU_ASSERT_EQUAL(t->live_at_end, 5); /* P, R, O, W (awaiting its stream), G */
    /* allocator settings, translated; host-side and unknown fields noted */
    CU_ASSERT_STRING_EQUAL(t->meta.alloc_conf, "max_split_size_mb:128,"
                                               "garbage_collection_threshold:0.6,"
                                               "roundup_power2_divisions:[1:0,64:4]");
    CU_ASSERT_PTR_NOT_NULL(strstr(t->meta.workload, "pinned_num_register_threads, some_new_knob "
                                                    "(unknown to gmsim)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t->meta.workload, "PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:"
                                                    "128'"));
    CU_ASSERT_EQUAL(t->n_markers, 2); /* the Optimizer.step range */
    gm_torch_import_free(imp);
}

/* Every rule that makes the importer refuse a snapshot names what is wrong. */
/* Block placement: the same driver calls, but PyTorch put the second tensor
 * 4 MiB further than best fit would (as if a block freed before the trace
 * sat there). The segment calls match; the placement check says where. */
static const char *misplaced =
    "{'segments': [{'device': 0, 'address': 0x20000000, 'total_size': 20971520, 'stream': 0,"
    "  'segment_type': 'large', 'blocks': ["
    "   {'address': 0x20000000, 'size': 4194304, 'requested_size': 4194304,"
    "    'state': 'active_allocated', 'frames': []},"
    "   {'address': 0x20400000, 'size': 4194304, 'requested_size': 0, 'state': 'inactive'},"
    "   {'address': 0x20800000, 'size': 4194304, 'requested_size': 4194304,"
    "    'state': 'active_allocated', 'frames': []},"
    "   {'address': 0x20c00000, 'size': 8388608, 'requested_size': 0, 'state': 'inactive'}]}],"
    " 'device_traces': [[" ENT("segment_alloc", "0x20000000", "20971520", "1000", "[]")
        ENT("alloc", "0x20000000", "4194304", "1010", "[]")
            ENT("alloc", "0x20800000", "4194304", "1020", "[]") "]]}";

static void test_fidelity_placement(void)
{
    gm_err err;
    gm_torch_import *imp;
    CU_ASSERT_EQUAL_FATAL(import_lit(misplaced, -1, &imp, &err), GM_OK);
    const char *path = gm_test_tmp("misplaced.h5");
    CU_ASSERT_EQUAL_FATAL(gm_import_trace_write(&imp->dev[0], path, NULL, &err), GM_OK);
    gm_torch_import_free(imp);
    for (int fresh = 0; fresh < 2; fresh++) {
        gm_fidelity f;
        gm_fidelity_opts o = {.fresh_addresses = fresh};
        CU_ASSERT_EQUAL_FATAL(gm_fidelity_check(path, &o, &f, &err), GM_OK);
        CU_ASSERT_EQUAL(f.matched, 1); /* the driver calls agree */
        CU_ASSERT_EQUAL(f.missing + f.extra, 0);
        if (fresh) { /* addresses differ by construction: not checked */
            CU_ASSERT_FALSE(f.placement_checked);
            CU_ASSERT_TRUE(gm_fidelity_exact(&f));
        } else {
            CU_ASSERT_TRUE(f.placement_checked);
            CU_ASSERT_FALSE(gm_fidelity_exact(&f));
            CU_ASSERT_EQUAL(f.placed, 2);
            CU_ASSERT_EQUAL(f.placed_same, 1);
            CU_ASSERT_EQUAL(f.place_event, 2);
            CU_ASSERT_EQUAL(f.place_size, 4194304);
            CU_ASSERT_EQUAL(f.place_ours.addr, 0x20400000);
            CU_ASSERT_EQUAL(f.place_theirs.addr, 0x20800000);
            CU_ASSERT_EQUAL(f.place_ours.seg_addr, 0x20000000);
            CU_ASSERT_EQUAL(f.place_theirs.seg_addr, 0x20000000);
            CU_ASSERT_EQUAL(f.place_theirs.seg_size, 20971520);
        }
        gm_fidelity_free(&f);
    }
    unlink(path);
}

static void test_inconsistent(void)
{
    static const struct {
        const char *snap, *msg;
    } cases[] = {
        {"{'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 4096, 'size': 100,"
         " 'stream': 0}]]}",
         "entry 0 (alloc of 100 bytes at 0x1000): no block at that address is live after it"},
        {"{'segments': [{'device': 0, 'address': 0, 'total_size': 2097152, 'blocks': ["
         " {'address': 0, 'size': 512, 'requested_size': 200, 'state': 'active_allocated'},"
         " {'address': 512, 'size': 2096640, 'state': 'inactive'}]}],"
         " 'device_traces': [[{'action': 'alloc', 'addr': 0, 'size': 100, 'stream': 0}]]}",
         "another requested size"},
        {"{'segments': [], 'device_traces': [[{'action': 'segment_alloc', 'addr': 4096,"
         " 'size': 2097152, 'stream': 0}]]}",
         "no segment of that address and size exists after it"},
        {"{'segments': [], 'device_traces': [[{'action': 'free_completed', 'addr': 4096,"
         " 'size': 100, 'stream': 0}]]}",
         "lies in no segment that existed then"},
        {"{'segments': [{'device': 0, 'address': 0, 'total_size': 2097152, 'blocks': ["
         " {'address': 0, 'size': 512, 'state': 'inactive'}]}], 'device_traces': [[]]}",
         "its blocks add up to 512 bytes but total_size is 2097152"},
        {"{'segments': [{'device': 0, 'address': 0, 'total_size': 1024, 'blocks': ["
         " {'address': 0, 'size': 512, 'state': 'inactive'},"
         " {'address': 4096, 'size': 512, 'state': 'inactive'}]}], 'device_traces': [[]]}",
         "blocks must cover their segment contiguously"},
        /* a segment_free undone inside a segment that exists after it (fuzz_import) */
        {"{'segments': [{'device': 0, 'address': 0, 'total_size': 2097152, 'blocks': ["
         " {'address': 0, 'size': 2097152, 'state': 'inactive'}]}],"
         " 'device_traces': [[{'action': 'segment_free', 'addr': 1048576, 'size': 2097152,"
         " 'stream': 0}]]}",
         "the segments at 0x0 (2097152 bytes) and 0x100000 (2097152 bytes), both there before "
         "the first entry, overlap"},
        /* an expandable segment's reserved range (whole 20 MiB pages) over
         * another segment (fuzz_import) */
        {"{'segments': [{'device': 0, 'address': 6291456, 'total_size': 458752,"
         " 'is_expandable': True, 'segment_type': 'large', 'blocks': ["
         " {'address': 6291456, 'size': 458752, 'state': 'inactive'}]},"
         " {'device': 0, 'address': 12582912, 'total_size': 2097152, 'segment_type': 'large',"
         " 'blocks': [{'address': 12582912, 'size': 2097152, 'state': 'inactive'}]}],"
         " 'device_traces': [[]]}",
         "the expandable segment at 0x600000 (20971520 bytes, its reserved range in whole pages) "
         "and the segment at 0xc00000 overlap before the first entry"},
        {"{'segments': [], 'device_traces': [[{'action': 'segment_free', 'addr': 4096,"
         " 'size': 0, 'stream': 0}]]}",
         "(segment_free): size 0 at 0x1000 is out of range"},
        {"{'segments': [], 'device_traces': [[]]}", "nothing to import"},
        {"{'traces': []}", "not a PyTorch memory snapshot"},
        {"[1, 2]", "segment 0 has no 'address'"},
        {"{'segments': [], 'device_traces': [[{'action': 'alloc', 'size': 1}]]}",
         "needs a non-negative int 'addr' and 'size'"},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        gm_err err = {0};
        gm_torch_import *imp = (gm_torch_import *)&err;
        CU_ASSERT_EQUAL(import_lit(cases[i].snap, -1, &imp, &err), GM_EINVAL);
        CU_ASSERT_PTR_NULL(imp);
        if (!strstr(err.msg, cases[i].msg))
            fprintf(stderr, "case %zu: message '%s' lacks '%s'\n", i, err.msg, cases[i].msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, cases[i].msg));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "test.pickle"));
    }
}

static void test_settings(void)
{
    static const struct {
        const char *settings, *conf;
    } cases[] = {
        {"{}", ""},
        {"{'max_split_size': -1, 'expandable_segments': True}", "expandable_segments:True"},
        {"{'max_split_size': 536870912, 'roundup_power2_divisions': {'1': 8, '2': 8, '4': 8,"
         " '8': 8, '16': 8, '32': 8, '64': 8, '128': 8, '256': 8, '512': 8, '1024': 8,"
         " '2048': 8, '4096': 8, '8192': 8, '16384': 8, '32768': 8}}",
         "max_split_size_mb:512,roundup_power2_divisions:8"},
        {"{'max_non_split_rounding_size': 41943040}", "max_non_split_rounding_mb:40"},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        static pbuf p;
        pkl_doc *doc;
        gm_err err;
        char conf[256], dropped[256];
        p.n = 0;
        put1(&p, 0x80);
        put1(&p, 2);
        lit(&p, cases[i].settings);
        put1(&p, '.');
        CU_ASSERT_EQUAL_FATAL(pkl_parse(p.b, p.n, NULL, &doc, &err), GM_OK);
        CU_ASSERT_EQUAL(
            gm_torch_settings_conf(pkl_root(doc), conf, sizeof conf, dropped, sizeof dropped, &err),
            GM_OK);
        CU_ASSERT_STRING_EQUAL(conf, cases[i].conf);
        pkl_free(doc);
    }
}

/* ---------------- unsafe, truncated and corrupted pickles ---------------- */

static const char *write_tmp(const char *name, const void *bytes, size_t n)
{
    const char *path = gm_test_tmp(name);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(bytes, 1, n, f), n);
    fclose(f);
    return path;
}

/* pickle.dumps of a class whose __reduce__ returns (os.system, ('touch ...',)):
 * GLOBAL 'posix system', the argument tuple, REDUCE. Never run, refused. */
static void test_refuses_code(void)
{
    static const char evil[] = "\x80\x02"
                               "cposix\nsystem\n"
                               "X\x0b\x00\x00\x00touch pwned"
                               "\x85"
                               "R"
                               ".";
    const char *path = write_tmp("evil.pickle", evil, sizeof evil - 1);
    gm_err err;
    gm_torch_import *imp;
    CU_ASSERT_EQUAL(gm_torch_import_file(path, NULL, &imp, &err), GM_EINVAL);
    CU_ASSERT_PTR_NULL(imp);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "GLOBAL"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
    CU_ASSERT_EQUAL(access("pwned", F_OK), -1);
    unlink(path);
}

static void test_truncated_and_corrupted(void)
{
    FILE *f = fopen(gm_test_path("tests/data/small-with-segments.pickle"), "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static unsigned char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    CU_ASSERT_TRUE_FATAL(n > 1000 && n < sizeof buf);
    gm_err err;
    gm_torch_import *imp;
    size_t cuts[] = {1, 2, 11, n / 3, n / 2, n - 1};
    for (size_t i = 0; i < N_OF(cuts); i++) {
        const char *path = write_tmp("cut.pickle", buf, cuts[i]);
        CU_ASSERT_EQUAL(gm_torch_import_file(path, NULL, &imp, &err), GM_EINVAL);
        CU_ASSERT_PTR_NULL(imp);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "cut.pickle"));
        unlink(path);
    }
    /* every byte of the first 4 KiB overwritten in turn: an error or a valid
     * import, never a crash (run under the sanitizers in CI) */
    for (size_t off = 0; off < 4096; off += 7) {
        unsigned char save = buf[off];
        buf[off] = (unsigned char)(save ^ 0x5a);
        pkl_doc *doc;
        if (pkl_parse(buf, n, NULL, &doc, &err) == GM_OK) {
            gm_torch_opts o = {.name = "corrupt", .device = -1};
            if (gm_torch_import_value(pkl_root(doc), &o, &imp, &err) == GM_OK)
                gm_torch_import_free(imp);
            else
                CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "corrupt"));
            pkl_free(doc);
        }
        buf[off] = save;
    }
    const char *path = write_tmp("empty.pickle", "", 0);
    CU_ASSERT_NOT_EQUAL(gm_torch_import_file(path, NULL, &imp, &err), GM_OK);
    unlink(path);
    CU_ASSERT_EQUAL(gm_torch_import_file("/nonexistent/x.pickle", NULL, &imp, &err), GM_EIO);
}

/* ---------------- RMM logs ---------------- */

static void test_rmm_sample(void)
{
    gm_err err;
    gm_import_trace t;
    int rc = gm_rmm_import_file(gm_test_path("tests/data/rmm-log-sample.csv"), NULL, &t, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    CU_ASSERT_STRING_EQUAL(t.meta.source, "rmm-log");
    CU_ASSERT_EQUAL(t.n_entries, 9);
    CU_ASSERT_EQUAL_FATAL(t.n_events, 7);
    CU_ASSERT_EQUAL(t.n_action[GM_TA_ALLOC], 4);
    CU_ASSERT_EQUAL(t.n_action[GM_TA_FREE_COMPLETED], 3);
    CU_ASSERT_EQUAL(t.n_action[GM_TA_OOM], 1);
    CU_ASSERT_EQUAL(t.skipped, 1);
    /* the first row frees a pointer allocated before logging started */
    CU_ASSERT_EQUAL(t.init_blocks, 1);
    CU_ASSERT_EQUAL(t.init_block_bytes, 4096);
    CU_ASSERT_PTR_NOT_NULL(init_at(&t, 0x7f0000100000ull, GM_INIT_BLOCK));
    CU_ASSERT_EQUAL(t.init_segments, 0);
    /* 23:59:59.999 -> 00:00:00.00025 crosses midnight: +1.25 ms */
    CU_ASSERT_EQUAL(t.events[1].t_ns, 500000);
    CU_ASSERT_EQUAL(t.events[2].t_ns, 1250000);
    CU_ASSERT_EQUAL(t.events[2].stream, 0x5555aaaaull);
    CU_ASSERT_EQUAL(t.events[3].t_ns, 1250000); /* 50 us back (another thread): clamped */
    CU_ASSERT_EQUAL(t.time_repairs, 1);
    CU_ASSERT_EQUAL(t.events[6].t_ns, 6000000);
    CU_ASSERT_EQUAL(t.live_at_end, 2);
    CU_ASSERT_EQUAL_FATAL(t.n_markers, 1);
    CU_ASSERT_EQUAL(t.markers[0].t_ns, 2000000);
    const char *path = gm_test_tmp("rmm.h5");
    CU_ASSERT_EQUAL(gm_import_trace_write(&t, path, NULL, &err), GM_OK);
    gm_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_nevents(r), 7);
    gm_trace_close(r);
    unlink(path);
    gm_import_trace_free(&t);
}

static void test_rmm_errors(void)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"a,b,c\n", "no column 'Time'"},
        {"", "empty file"},
        {"Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,allocate,0x10,8,0x0\n"
         "1,10:00:00.000001,allocate,0x10,8,0x0\n",
         "line 3: allocate returned a pointer that is still live"},
        {"Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,allocate,0x10,8,0x0\n"
         "1,10:00:00.000001,free,0x10,8,0x0\n1,10:00:00.000002,free,0x10,8,0x0\n",
         "line 4: free of a pointer that is not live (a double free)"},
        {"Thread,Time,Action,Pointer,Size,Stream\n1,noon,allocate,0x10,8,0x0\n", "bad Time"},
        {"Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.0,resize,0x10,8,0x0\n",
         "unknown Action"},
        {"Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.0,allocate\n", "too few columns"},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        FILE *f = fmemopen((void *)cases[i].text, strlen(cases[i].text), "r");
        if (!*cases[i].text) /* fmemopen rejects size 0 on some libcs */
            f = fopen("/dev/null", "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        gm_err err = {0};
        gm_import_trace t;
        gm_rmm_opts o = {.name = "log.csv"};
        CU_ASSERT_EQUAL(gm_rmm_import_stream(f, &o, &t, &err), GM_EINVAL);
        fclose(f);
        if (!strstr(err.msg, cases[i].msg))
            fprintf(stderr, "rmm case %zu: message '%s' lacks '%s'\n", i, err.msg, cases[i].msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, cases[i].msg));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "log.csv"));
        CU_ASSERT_PTR_NULL(t.events);
    }
}

/* The hand-made snapshots of tests/data/cases (gen_snapshot_cases.py):
 * what the importer finds in each, and a replay that reproduces every
 * recorded call and address. */
static void test_cases(void)
{
    static const struct {
        const char *file;
        uint64_t empty_cache, retry_bursts, avail, avail_min, avail_max;
        uint64_t init_segments, init_expandable, init_private, init_blocks;
        size_t calls;
        uint64_t deferred;
    } cases[] = {
        {"empty-cache", 2, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0},
        {"empty-cache-noframes", 2, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0},
        {"device-full", 0, 1, 90 * GM_MiB, 90 * GM_MiB, 130 * GM_MiB, 0, 0, 0, 0, 4, 0},
        {"expandable", 1, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0},
        {"expandable-ranges", 1, 0, 0, 0, 0, 1, 1, 0, 3, 1, 0},
        {"private-pool", 1, 0, 0, 0, 0, 2, 0, 1, 2, 2, 0},
        {"record-stream", 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        char rel[256];
        gm_err err;
        gm_torch_import *imp;
        snprintf(rel, sizeof rel, "tests/data/cases/%s.pickle", cases[i].file);
        int rc = gm_torch_import_file(gm_test_path(rel), NULL, &imp, &err);
        if (rc) fprintf(stderr, "%s: %s\n", cases[i].file, err.msg);
        CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
        const gm_import_trace *t = &imp->dev[0];
        CU_ASSERT_EQUAL(t->n_empty_cache, cases[i].empty_cache);
        CU_ASSERT_EQUAL(t->n_release_bursts, cases[i].retry_bursts);
        CU_ASSERT_EQUAL(t->meta.device_avail_bytes, cases[i].avail);
        CU_ASSERT_EQUAL(t->meta.device_avail_min_bytes, cases[i].avail_min);
        CU_ASSERT_EQUAL(t->meta.device_avail_max_bytes, cases[i].avail_max);
        CU_ASSERT_EQUAL(t->init_segments, cases[i].init_segments);
        CU_ASSERT_EQUAL(t->init_expandable, cases[i].init_expandable);
        CU_ASSERT_EQUAL(t->init_private, cases[i].init_private);
        CU_ASSERT_EQUAL(t->init_blocks, cases[i].init_blocks);
        size_t n_ec = 0, n_fr = 0;
        for (size_t k = 0; k < t->n_events; k++) {
            n_ec += t->events[k].op == GM_OP_EMPTY_CACHE;
            n_fr += t->events[k].op == GM_OP_FREE_REQUESTED;
        }
        CU_ASSERT_EQUAL(n_ec, cases[i].empty_cache);
        CU_ASSERT_EQUAL(n_fr, cases[i].deferred); /* only deferred frees are written */
        CU_ASSERT_EQUAL(t->deferred_frees, cases[i].deferred);
        const char *path = gm_test_tmp("case.h5");
        CU_ASSERT_EQUAL_FATAL(gm_import_trace_write(t, path, NULL, &err), GM_OK);
        gm_fidelity f;
        rc = gm_fidelity_check(path, NULL, &f, &err);
        if (rc) fprintf(stderr, "%s: %s\n", cases[i].file, err.msg);
        CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
        CU_ASSERT_EQUAL(f.n_rec, cases[i].calls);
        CU_ASSERT_EQUAL(f.matched, cases[i].calls);
        if (!gm_fidelity_exact(&f)) fprintf(stderr, "%s: not exact\n", cases[i].file);
        CU_ASSERT_TRUE(gm_fidelity_exact(&f));
        CU_ASSERT_EQUAL(f.placed, f.placed_same);
        gm_fidelity_free(&f);
        unlink(path);
        gm_torch_import_free(imp);
    }
    /* the expandable ranges: one segment over [L, L+100 MiB), mapped throughout */
    gm_err err;
    gm_torch_import *imp;
    CU_ASSERT_EQUAL_FATAL(
        gm_torch_import_file(gm_test_path("tests/data/cases/expandable-ranges.pickle"), NULL, &imp,
                             &err),
        GM_OK);
    const gm_import_trace *t = &imp->dev[0];
    const gm_init_row *seg = init_at(t, 0x7f3000000000ull, GM_INIT_SEGMENT);
    const gm_init_row *map = init_at(t, 0x7f3000000000ull, GM_INIT_MAPPED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(seg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(map);
    CU_ASSERT(seg->expandable && seg->pool == GM_POOL_LARGE && seg->size == 100 * GM_MiB);
    CU_ASSERT_EQUAL(map->size, 100 * GM_MiB);
    CU_ASSERT_EQUAL(t->init_segment_bytes, 100 * GM_MiB);
    gm_torch_import_free(imp);
    /* one damaged device: the other is still imported, the failure named */
    CU_ASSERT_EQUAL_FATAL(
        gm_torch_import_file(gm_test_path("tests/data/cases/two-devices-one-bad.pickle"), NULL,
                             &imp, &err),
        GM_OK);
    CU_ASSERT_EQUAL(imp->n, 1);
    CU_ASSERT_EQUAL(imp->dev[0].device, 0);
    CU_ASSERT_EQUAL_FATAL(imp->n_failed, 1);
    CU_ASSERT_EQUAL(imp->failed[0].device, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(imp->failed[0].msg, "device 1: the block at 0x7f6000000000"));
    gm_torch_import_free(imp);
    /* ... and when it is the only one asked for, it is an error */
    gm_torch_opts o = {.device = 1};
    CU_ASSERT_EQUAL(
        gm_torch_import_file(gm_test_path("tests/data/cases/two-devices-one-bad.pickle"), &o, &imp,
                             &err),
        GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "lies in no segment"));
}

/* The frame rule of IMPORT.md "Call sites": which frames are the user's. */
static void test_frame_kind(void)
{
    CU_ASSERT_EQUAL(gm_frame_kind("/home/u/train.py"), GM_FRAME_USER);
    CU_ASSERT_EQUAL(gm_frame_kind("train.py"), GM_FRAME_USER);
    CU_ASSERT_EQUAL(gm_frame_kind("/venv/lib/python3.12/site-packages/transformers/models/gpt2.py"),
                    GM_FRAME_USER); /* other libraries count as the program's */
    CU_ASSERT_EQUAL(gm_frame_kind("<stdin>"), GM_FRAME_USER);
    CU_ASSERT_EQUAL(gm_frame_kind("/venv/lib/python3.12/site-packages/torch/nn/modules/module.py"),
                    GM_FRAME_TORCH);
    CU_ASSERT_EQUAL(gm_frame_kind("/src/pytorch/torch/_tensor.py"), GM_FRAME_TORCH);
    CU_ASSERT_EQUAL(gm_frame_kind("torch/autograd/__init__.py"), GM_FRAME_TORCH);
    CU_ASSERT_EQUAL(gm_frame_kind("/home/u/functorch_demo.py"), GM_FRAME_USER);
    CU_ASSERT_EQUAL(gm_frame_kind("??"), GM_FRAME_CPP);
    CU_ASSERT_EQUAL(gm_frame_kind(""), GM_FRAME_CPP);
    CU_ASSERT_EQUAL(gm_frame_kind(NULL), GM_FRAME_CPP);
    CU_ASSERT_EQUAL(gm_frame_kind("CUDACachingAllocator.cpp"), GM_FRAME_CPP);
    CU_ASSERT_EQUAL(gm_frame_kind("/usr/include/c10/util/Exception.h"), GM_FRAME_CPP);
    CU_ASSERT_EQUAL(gm_frame_kind("kernel.cc"), GM_FRAME_CPP);
    CU_ASSERT_EQUAL(gm_frame_kind("<frozen runpy>"), GM_FRAME_PYTHON_INTERNAL);
    CU_ASSERT_EQUAL(gm_frame_kind("<string>"), GM_FRAME_PYTHON_INTERNAL);
    CU_ASSERT_EQUAL(gm_frame_kind("/usr/lib/python3.12/threading.py"), GM_FRAME_PYTHON_INTERNAL);
    CU_ASSERT_EQUAL(gm_frame_kind("/usr/lib/python3.12/contextlib.py"), GM_FRAME_PYTHON_INTERNAL);
    CU_ASSERT_EQUAL(gm_frame_kind("/opt/conda/lib/python3.10/runpy.py"), GM_FRAME_PYTHON_INTERNAL);
}

/* A real snapshot's sites: deduplicated, each named by a user frame. */
static void test_real_sites(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/device-full-retry-10-streams.pickle", GM_SOURCE_DIR);
    gm_torch_opts o = {.device = -1};
    gm_torch_import *imp;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_torch_import_file(path, &o, &imp, &err), GM_OK);
    const gm_import_trace *t = &imp->dev[0];
    CU_ASSERT(t->n_sites > 10);
    size_t named = 0, llama = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        CU_ASSERT(t->events[i].site <= t->n_sites);
        named += t->events[i].site != 0;
    }
    CU_ASSERT(named > t->n_events / 2);
    for (size_t i = 0; i < t->n_sites; i++) {
        for (size_t j = 0; j < i; j++) /* deduplicated */
            CU_ASSERT(strcmp(t->sites[i].name, t->sites[j].name) != 0);
        CU_ASSERT(strstr(t->sites[i].name, ".py") != NULL);
        CU_ASSERT(strncmp(t->sites[i].name, "module.py", 9) != 0); /* torch's: skipped */
        llama += strstr(t->sites[i].name, "modeling_llama.py:") == t->sites[i].name;
        CU_ASSERT(strlen(t->sites[i].stack) < GM_SITE_STACK_MAX);
    }
    CU_ASSERT(llama > 0);
    gm_torch_import_free(imp);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("import", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_real_snapshots);
    GM_ADD_TEST(s, test_frame_kind);
    GM_ADD_TEST(s, test_real_sites);
    GM_ADD_TEST(s, test_real_categories);
    GM_ADD_TEST(s, test_fidelity_recorded_segments);
    GM_ADD_TEST(s, test_fidelity_warm_cache);
    GM_ADD_TEST(s, test_fidelity_detects_mismatch);
    GM_ADD_TEST(s, test_fidelity_placement);
    GM_ADD_TEST(s, test_legacy_list);
    GM_ADD_TEST(s, test_torch20);
    GM_ADD_TEST(s, test_two_devices);
    GM_ADD_TEST(s, test_rebuild_and_categories);
    GM_ADD_TEST(s, test_inconsistent);
    GM_ADD_TEST(s, test_settings);
    GM_ADD_TEST(s, test_refuses_code);
    GM_ADD_TEST(s, test_truncated_and_corrupted);
    GM_ADD_TEST(s, test_rmm_sample);
    GM_ADD_TEST(s, test_rmm_errors);
    GM_ADD_TEST(s, test_cases);
    return CUE_SUCCESS;
}
