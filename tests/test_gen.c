/*
 * test_gen.c - the synthetic BERT generator (traces/gen_bert.c): determinism,
 * a well-formed event stream, the analytic parameter count, memory that
 * grows with the batch, no leak across iterations, and the trace file it
 * writes read back through the reader.
 */
#include "cu.h"

#include "base/addrmap.h"
#include "base/hash.h"
#include "base/units.h"
#include "traces/gen_bert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a sink saw: a hash of every field, and the stream's invariants. */
typedef struct seen {
    gm_hash hash;
    gm_addrmap live; /* key(addr) -> size */
    uint64_t events, allocs, last_t;
    uint64_t cat_bytes[GM_CAT_COUNT];
    uint64_t live_bytes, peak_live;
    uint64_t bad_time, bad_free, bad_realloc, bad_size, bad_enum, size_mismatch;
    uint64_t distinct_probe[64]; /* a few alloc sizes, to see shapes vary */
    size_t ndistinct;
    int fail_after; /* > 0: the sink fails on that call */
    int calls;
} seen;

static void seen_init(seen *s)
{
    memset(s, 0, sizeof *s);
    gm_hash_init(&s->hash);
    CU_ASSERT_FATAL(gm_addrmap_init(&s->live, 1024) == GM_OK);
}

static void note_size(seen *s, uint64_t size)
{
    for (size_t i = 0; i < s->ndistinct; i++)
        if (s->distinct_probe[i] == size) return;
    if (s->ndistinct < 64) s->distinct_probe[s->ndistinct++] = size;
}

static void seen_event(seen *s, const gm_event *e)
{
    gm_hash_u64(&s->hash, e->t_ns);
    gm_hash_u64(&s->hash, e->addr);
    gm_hash_u64(&s->hash, e->size);
    gm_hash_u64(&s->hash, e->stream);
    gm_hash_u64(&s->hash, (uint64_t)e->op << 16 | (uint64_t)e->category << 8 | e->phase);
    s->events++;
    if (e->t_ns < s->last_t) s->bad_time++;
    s->last_t = e->t_ns;
    if (e->size == 0 || e->size > GM_TRACE_MAX_SIZE) s->bad_size++;
    if (e->category >= GM_CAT_COUNT || e->phase >= GM_PHASE_COUNT || e->op > GM_OP_FREE)
        s->bad_enum++;
    uint64_t key = gm_addrmap_key(e->addr), size;
    if (e->op == GM_OP_ALLOC) {
        if (gm_addrmap_get(&s->live, key) || gm_addrmap_put(&s->live, key, e->size) != GM_OK)
            s->bad_realloc++;
        s->allocs++;
        s->cat_bytes[e->category < GM_CAT_COUNT ? e->category : 0] += e->size;
        s->live_bytes += e->size;
        if (s->live_bytes > s->peak_live) s->peak_live = s->live_bytes;
        if (e->category == GM_CAT_ACTIVATION) note_size(s, e->size);
    } else if (gm_addrmap_del(&s->live, key, &size)) {
        s->live_bytes -= size;
        if (size != e->size) s->size_mismatch++;
    } else {
        s->bad_free++;
    }
}

static int sink(void *ctx, const gm_event *ev, size_t n, gm_err *err)
{
    seen *s = ctx;
    if (++s->calls == s->fail_after) return gm_errf(err, GM_EIO, "test sink: disk full");
    for (size_t i = 0; i < n; i++)
        seen_event(s, &ev[i]);
    return GM_OK;
}

static int marker_sink(void *ctx, const gm_marker *m, size_t n, gm_err *err)
{
    (void)ctx;
    (void)m;
    (void)err;
    CU_ASSERT(n == 1);
    CU_ASSERT(m->kind == GM_MARK_ITERATION);
    return GM_OK;
}

/* Generate p into s (initialised here); returns gm_bert_generate's code. */
static int run(const gm_bert_params *p, seen *s, gm_bert_stats *st)
{
    gm_err err;
    seen_init(s);
    int rc = gm_bert_generate(p, sink, marker_sink, s, st, &err);
    if (rc != GM_OK) fprintf(stderr, "gm_bert_generate: %s\n", err.msg);
    return rc;
}

static void small(gm_bert_params *p)
{
    gm_bert_defaults(p);
    p->layers = 2;
    p->batch = 4;
    p->iterations = 3;
}

/* BERT parameter count, written out from the architecture independently of
 * gen_bert.c: embeddings (word, position, token type, LayerNorm), per layer
 * Q/K/V/O dense with bias, 2 LayerNorms, FFN in/out with bias; pooler dense;
 * classifier. */
static uint64_t expected_params(uint64_t L, uint64_t H, uint64_t I, uint64_t V, uint64_t P,
                                uint64_t T, uint64_t labels)
{
    uint64_t emb = V * H + P * H + T * H + 2 * H;
    uint64_t layer = 4 * (H * H + H) + 2 * H + (H * I + I) + (I * H + H) + 2 * H;
    return emb + L * layer + (H * H + H) + (labels * H + labels);
}

static void test_determinism(void)
{
    gm_bert_params p;
    gm_bert_defaults(&p);
    seen a, b;
    gm_bert_stats sa, sb;
    CU_ASSERT_FATAL(run(&p, &a, &sa) == GM_OK);
    CU_ASSERT_FATAL(run(&p, &b, &sb) == GM_OK);
    CU_ASSERT(a.events > 10000);
    CU_ASSERT(a.events == b.events);
    CU_ASSERT(gm_hash_final(&a.hash) == gm_hash_final(&b.hash));
    CU_ASSERT(sa.events == a.events);
    CU_ASSERT(sa.markers == (uint64_t)p.iterations);
    gm_addrmap_free(&a.live);
    gm_addrmap_free(&b.live);
}

static void test_seed_changes_output(void)
{
    gm_bert_params p;
    gm_bert_defaults(&p);
    seen a, b, c;
    CU_ASSERT_FATAL(run(&p, &a, NULL) == GM_OK);
    p.seed = 2;
    CU_ASSERT_FATAL(run(&p, &b, NULL) == GM_OK);
    CU_ASSERT(gm_hash_final(&a.hash) != gm_hash_final(&b.hash));
    /* without jitter the seed has nothing to change: shapes are fixed */
    p.jitter = 0;
    CU_ASSERT_FATAL(run(&p, &c, NULL) == GM_OK);
    CU_ASSERT(gm_hash_final(&c.hash) != gm_hash_final(&a.hash));
    CU_ASSERT(c.ndistinct < a.ndistinct); /* jitter varies activation shapes */
    gm_addrmap_free(&a.live);
    gm_addrmap_free(&b.live);
    gm_addrmap_free(&c.live);
}

static void check_well_formed(const gm_bert_params *p)
{
    seen s;
    gm_bert_stats st;
    CU_ASSERT_FATAL(run(p, &s, &st) == GM_OK);
    CU_ASSERT(s.bad_time == 0);
    CU_ASSERT(s.bad_free == 0);
    CU_ASSERT(s.bad_realloc == 0);
    CU_ASSERT(s.bad_size == 0);
    CU_ASSERT(s.bad_enum == 0);
    CU_ASSERT(s.size_mismatch == 0);
    CU_ASSERT(st.peak_live_bytes == s.peak_live);
    CU_ASSERT(st.end_live_bytes == s.live_bytes);
    CU_ASSERT(st.end_t_ns == s.last_t);
    for (int c = GM_CAT_PARAMETER; c < GM_CAT_COUNT; c++) {
        int expect_none = c == GM_CAT_OPTIMIZER_STATE && !p->adam;
        CU_ASSERT((s.cat_bytes[c] == 0) == expect_none);
    }
    CU_ASSERT(s.cat_bytes[GM_CAT_UNKNOWN] == 0);
    gm_addrmap_free(&s.live);
}

static void test_well_formed(void)
{
    gm_bert_params p;
    gm_bert_defaults(&p);
    check_well_formed(&p);
    p.set_to_none = 0;
    p.adam = 0;
    p.dtype_bytes = 2;
    check_well_formed(&p);
    small(&p);
    p.seq = 13; /* not a multiple of 8: jitter's padding must stay <= seq */
    p.jitter = 1;
    check_well_formed(&p);
}

static void test_parameter_bytes(void)
{
    /* BERT-base: 109,482,240 in BertModel + 1,538 in a 2-label classifier */
    CU_ASSERT(expected_params(12, 768, 3072, 30522, 512, 2, 2) == 109483778ull);
    gm_bert_params p;
    gm_bert_defaults(&p);
    p.iterations = 1;
    for (int d = 2; d <= 4; d += 2) {
        p.dtype_bytes = d;
        seen s;
        gm_bert_stats st;
        CU_ASSERT_FATAL(run(&p, &s, &st) == GM_OK);
        CU_ASSERT(s.cat_bytes[GM_CAT_PARAMETER] == 109483778ull * (uint64_t)d);
        CU_ASSERT(st.param_bytes == 109483778ull * (uint64_t)d);
        /* AdamW keeps two states per parameter */
        CU_ASSERT(s.cat_bytes[GM_CAT_OPTIMIZER_STATE] == 2 * 109483778ull * (uint64_t)d);
        gm_addrmap_free(&s.live);
    }
    CU_ASSERT(gm_bert_param_count(&p) == 109483778ull);
    /* another shape: BERT-large-like with 3 labels and an explicit FFN width */
    p.layers = 24;
    p.hidden = 1024;
    p.heads = 16;
    p.intermediate = 4000;
    p.labels = 3;
    CU_ASSERT(gm_bert_param_count(&p) == expected_params(24, 1024, 4000, 30522, 512, 2, 3));
}

static void test_peak_grows_with_batch(void)
{
    gm_bert_params p;
    small(&p);
    p.jitter = 0;
    uint64_t prev = 0;
    for (int b = 1; b <= 16; b *= 2) {
        p.batch = b;
        seen s;
        gm_bert_stats st;
        CU_ASSERT_FATAL(run(&p, &s, &st) == GM_OK);
        CU_ASSERT(st.peak_live_bytes > prev);
        prev = st.peak_live_bytes;
        gm_addrmap_free(&s.live);
    }
}

/* Every iteration frees what it allocated: what is live after the last
 * iteration does not depend on how many ran (without jitter, shapes equal). */
static void test_no_leak_across_iterations(void)
{
    for (int keep = 0; keep <= 1; keep++) {
        gm_bert_params p;
        small(&p);
        p.jitter = 0;
        p.set_to_none = !keep;
        gm_bert_stats s2, s3;
        seen a, b;
        p.iterations = 2;
        CU_ASSERT_FATAL(run(&p, &a, &s2) == GM_OK);
        p.iterations = 3;
        CU_ASSERT_FATAL(run(&p, &b, &s3) == GM_OK);
        CU_ASSERT(s2.end_live_bytes == s3.end_live_bytes);
        CU_ASSERT(a.live.count == b.live.count);
        /* params + grads + 2 Adam states + batch inputs + logits/loss */
        uint64_t P = gm_bert_param_count(&p) * (uint64_t)p.dtype_bytes;
        CU_ASSERT(s3.end_live_bytes > 4 * P);
        CU_ASSERT(s3.end_live_bytes < 4 * P + 64 * 1024);
        gm_addrmap_free(&a.live);
        gm_addrmap_free(&b.live);
    }
}

static void test_rejects_bad_params(void)
{
    gm_bert_params p;
    gm_err err;
    gm_bert_defaults(&p);
    CU_ASSERT(gm_bert_check(&p, &err) == GM_OK);
    p.heads = 7;
    CU_ASSERT(gm_bert_check(&p, &err) == GM_EINVAL);
    CU_ASSERT(strstr(err.msg, "heads") != NULL);
    gm_bert_defaults(&p);
    p.seq = 513;
    CU_ASSERT(gm_bert_check(&p, &err) == GM_EINVAL);
    CU_ASSERT(strstr(err.msg, "seq") != NULL);
    gm_bert_defaults(&p);
    p.dtype_bytes = 3;
    CU_ASSERT(gm_bert_check(&p, &err) == GM_EINVAL);
    gm_bert_defaults(&p);
    p.layers = 0;
    CU_ASSERT(gm_bert_check(&p, &err) == GM_EINVAL);
    gm_bert_defaults(&p);
    p.batch = 1 << 24;
    p.seq = 512;
    p.heads = 768; /* scores: 2^24 * 768 * 512^2 * 4 bytes > 2^48 */
    CU_ASSERT(gm_bert_check(&p, &err) == GM_EINVAL);
    CU_ASSERT(strstr(err.msg, "2^48") != NULL);
    seen s;
    seen_init(&s);
    CU_ASSERT(gm_bert_generate(&p, sink, NULL, &s, NULL, &err) == GM_EINVAL);
    CU_ASSERT(s.events == 0);
    gm_addrmap_free(&s.live);
}

static void test_sink_error_stops(void)
{
    gm_bert_params p;
    gm_bert_defaults(&p);
    seen s;
    gm_err err;
    seen_init(&s);
    s.fail_after = 2;
    CU_ASSERT(gm_bert_generate(&p, sink, NULL, &s, NULL, &err) == GM_EIO);
    CU_ASSERT(strstr(err.msg, "disk full") != NULL);
    CU_ASSERT(s.calls == 2); /* no call after the failing one */
    gm_addrmap_free(&s.live);
}

/* The written file holds exactly the in-memory stream, the meta and markers. */
static void test_write_trace_roundtrip(void)
{
    gm_bert_params p;
    small(&p);
    p.device_total_bytes = 24 * GM_GiB;
    const char *path = gm_test_tmp("gen.h5");
    gm_err err;
    gm_bert_stats st;
    seen mem, file;
    CU_ASSERT_FATAL(run(&p, &mem, NULL) == GM_OK);
    int rc = gm_bert_write_trace(path, &p, NULL, "test", &st, &err);
    if (rc != GM_OK) fprintf(stderr, "gm_bert_write_trace: %s\n", err.msg);
    CU_ASSERT_FATAL(rc == GM_OK);

    gm_trace_reader *r;
    rc = gm_trace_open(path, &r, &err);
    if (rc != GM_OK) fprintf(stderr, "gm_trace_open: %s\n", err.msg);
    CU_ASSERT_FATAL(rc == GM_OK);
    const gm_trace_meta *m = gm_trace_meta_get(r);
    CU_ASSERT_STRING_EQUAL(m->source, "synthetic:bert");
    CU_ASSERT_STRING_EQUAL(m->device_name, "");
    CU_ASSERT_STRING_EQUAL(m->command, "test");
    CU_ASSERT(m->device_total_bytes == 24 * GM_GiB);
    CU_ASSERT(strstr(m->workload, "layers=2") != NULL);
    CU_ASSERT(strlen(m->created_utc) == 20);
    CU_ASSERT(gm_trace_nevents(r) == st.events);

    seen_init(&file);
    gm_event buf[1000];
    int64_t n;
    while ((n = gm_trace_read(r, buf, 1000, &err)) > 0)
        for (int64_t i = 0; i < n; i++)
            seen_event(&file, &buf[i]);
    CU_ASSERT(n == 0);
    CU_ASSERT(file.events == mem.events);
    CU_ASSERT(gm_hash_final(&file.hash) == gm_hash_final(&mem.hash));

    gm_marker *marks;
    size_t nmarks;
    CU_ASSERT_FATAL(gm_trace_read_markers(r, &marks, &nmarks, &err) == GM_OK);
    CU_ASSERT(nmarks == (size_t)p.iterations);
    if (nmarks == (size_t)p.iterations) {
        CU_ASSERT_STRING_EQUAL(marks[0].name, "iteration 0");
        CU_ASSERT(marks[0].kind == GM_MARK_ITERATION);
        CU_ASSERT(marks[1].t_ns > marks[0].t_ns);
    }
    free(marks);
    gm_trace_close(r);
    remove(path);
    gm_addrmap_free(&mem.live);
    gm_addrmap_free(&file.live);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("gen_bert", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_determinism);
    GM_ADD_TEST(s, test_seed_changes_output);
    GM_ADD_TEST(s, test_well_formed);
    GM_ADD_TEST(s, test_parameter_bytes);
    GM_ADD_TEST(s, test_peak_grows_with_batch);
    GM_ADD_TEST(s, test_no_leak_across_iterations);
    GM_ADD_TEST(s, test_rejects_bad_params);
    GM_ADD_TEST(s, test_sink_error_stops);
    GM_ADD_TEST(s, test_write_trace_roundtrip);
    return CUE_SUCCESS;
}
