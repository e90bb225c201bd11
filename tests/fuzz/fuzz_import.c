/*
 * fuzz_import.c - libFuzzer harness for the PyTorch snapshot importer
 * (traces/import_torch.c) behind the safe unpickler (see README.md).
 *
 * Parses the input, imports it in memory (nothing is written), and checks
 * what import_torch.h and IMPORT.md promise:
 *  - on failure: no result, and a message that names the input;
 *  - on success: every device's /events would pass the trace reader's
 *    checks (op, time order, alloc sizes 1..2^48, category, phase);
 *    /initial_state holds segments first, then blocks, each block inside a
 *    segment and clear of the next block; replaying the events from that
 *    state never allocates a live address nor frees a dead one; markers
 *    have a kind and a terminated name; the recorded allocator settings
 *    parse (traces/alloc_conf.c), as `gmsim run` will parse them.
 * A broken promise aborts, so libFuzzer reports it as a crash.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/alloc_conf.h"
#include "traces/import_torch.h"
#include "traces/unpickle.h"

#define FUZZ_MAX_DEPTH 64u
#define NAME "fuzz.pickle"

static void check(int cond)
{
    if (!cond) abort();
}

/* ---------------- live addresses: open addressing, tombstones ---------------- */

typedef struct live_set {
    uint64_t *key; /* addr + 1; 0 = empty, UINT64_MAX = deleted */
    size_t cap;    /* at least 4 x the adds to come: never full   */
} live_set;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static size_t slot(const live_set *s, uint64_t addr, int for_insert)
{
    size_t m = s->cap - 1, i = (size_t)mix(addr) & m, tomb = SIZE_MAX;
    for (;; i = (i + 1) & m) {
        uint64_t k = s->key[i];
        if (k == addr + 1) return i;
        if (k == UINT64_MAX && tomb == SIZE_MAX) tomb = i;
        if (k == 0) return for_insert && tomb != SIZE_MAX ? tomb : i;
    }
}

static void set_init(live_set *s, size_t n)
{
    s->cap = 16;
    while (s->cap < 4 * n + 16)
        s->cap *= 2;
    s->key = calloc(s->cap, sizeof *s->key);
    check(s->key != NULL);
}

static int set_has(const live_set *s, uint64_t addr)
{
    return s->key[slot(s, addr, 0)] == addr + 1;
}

static void set_add(live_set *s, uint64_t addr)
{
    s->key[slot(s, addr, 1)] = addr + 1;
}

static void set_del(live_set *s, uint64_t addr)
{
    s->key[slot(s, addr, 0)] = UINT64_MAX;
}

/* ---------------- checks ---------------- */

static int by_addr(const void *a, const void *b)
{
    uint64_t x = ((const gm_init_row *)a)->addr, y = ((const gm_init_row *)b)->addr;
    return x < y ? -1 : x > y;
}

/* Rows are segments, mapped ranges of expandable segments (v2) and blocks:
 * segments do not overlap, each mapped range and each block lies in a
 * segment, and blocks do not overlap each other. */
static void check_initial(const gm_import_trace *t)
{
    size_t n = t->n_init, nseg = 0, nmap = 0, nblk = 0;
    gm_init_row *seg = malloc((n + 1) * sizeof *seg), *map = malloc((n + 1) * sizeof *map);
    gm_init_row *blk = malloc((n + 1) * sizeof *blk);
    check(seg && map && blk);
    for (size_t i = 0; i < n; i++) {
        const gm_init_row *r = &t->init[i];
        check(r->kind == GM_INIT_SEGMENT || r->kind == GM_INIT_MAPPED || r->kind == GM_INIT_BLOCK);
        check(r->category < GM_CAT_COUNT);
        if (r->kind == GM_INIT_SEGMENT)
            seg[nseg++] = *r;
        else if (r->kind == GM_INIT_MAPPED)
            map[nmap++] = *r;
        else
            blk[nblk++] = *r;
    }
    if (nseg > 1) qsort(seg, nseg, sizeof *seg, by_addr);
    if (nmap > 1) qsort(map, nmap, sizeof *map, by_addr);
    if (nblk > 1) qsort(blk, nblk, sizeof *blk, by_addr);
    for (size_t i = 0; i < nseg; i++) {
        check(seg[i].size > 0 && seg[i].addr + seg[i].size > seg[i].addr);
        if (i) check(seg[i - 1].addr + seg[i - 1].size <= seg[i].addr);
    }
    for (int pass = 0; pass < 2; pass++) { /* mapped ranges, then blocks: inside a segment */
        const gm_init_row *v = pass ? blk : map;
        size_t m = pass ? nblk : nmap, s = 0;
        for (size_t i = 0; i < m; i++) {
            uint64_t len = pass ? v[i].block_size : v[i].size;
            if (pass) check(v[i].block_size >= v[i].size);
            check(v[i].addr + len >= v[i].addr);
            while (s < nseg && seg[s].addr + seg[s].size <= v[i].addr)
                s++;
            check(s < nseg && seg[s].addr <= v[i].addr &&
                  v[i].addr + len <= seg[s].addr + seg[s].size);
            if (pass && i + 1 < m) check(v[i].addr + v[i].block_size <= v[i + 1].addr);
        }
    }
    free(seg);
    free(map);
    free(blk);
}

/* What the trace reader checks, and alloc/free pairing from the initial blocks. */
static void check_events(const gm_import_trace *t)
{
    live_set live;
    set_init(&live, t->n_init + t->n_events);
    for (size_t i = 0; i < t->n_init; i++)
        if (t->init[i].kind == GM_INIT_BLOCK) set_add(&live, t->init[i].addr);
    uint64_t prev = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        const gm_event *e = &t->events[i];
        check(e->op < GM_OP_COUNT && e->category < GM_CAT_COUNT && e->phase < GM_PHASE_COUNT);
        check(e->t_ns >= prev);
        prev = e->t_ns;
        check(e->size <= GM_TRACE_MAX_SIZE);
        if (e->op == GM_OP_ALLOC || e->op == GM_OP_SEGMENT_ALLOC) check(e->size > 0);
        if (e->op == GM_OP_ALLOC) {
            check(!set_has(&live, e->addr));
            set_add(&live, e->addr);
        } else if (e->op == GM_OP_FREE) {
            check(set_has(&live, e->addr));
            set_del(&live, e->addr);
        }
    }
    free(live.key);
}

static void check_trace(const gm_import_trace *t)
{
    check(t->meta.source && t->meta.workload && t->meta.alloc_conf && t->meta.command);
    check(strlen(t->summary) < sizeof t->summary);
    check(t->n_events == 0 || t->events);
    check(t->n_init == 0 || t->init);
    check_initial(t);
    check_events(t);
    for (size_t i = 0; i < t->n_markers; i++)
        check(t->markers[i].kind <= GM_MARK_INSTANT &&
              memchr(t->markers[i].name, 0, sizeof t->markers[i].name));
    gm_pt_conf c;
    gm_err err = {0};
    check(gm_pt_conf_parse(t->meta.alloc_conf, &c, &err) == GM_OK);
}

/* ---------------- structured inputs ----------------
 *
 * Byte mutations of a pickle mostly break the pickle, and reach the
 * importer's own checks (trace vs dump) slowly. An input whose first byte
 * is 0xff (no pickle opcode) is instead read as choices: a snapshot of a
 * few segments, blocks and entries over a small address range (so
 * addresses collide), written as a protocol-2 pickle and parsed as usual.
 */
typedef struct gen {
    const uint8_t *p, *end; /* the choices; 0 once used up */
    uint8_t *out;
    size_t len, cap;
} gen;

static unsigned pick(gen *g, unsigned n)
{
    return g->p < g->end ? *g->p++ % n : 0;
}

static void put(gen *g, const void *b, size_t n)
{
    if (g->len + n > g->cap) return; /* cap is far above what gen_snapshot writes */
    memcpy(g->out + g->len, b, n);
    g->len += n;
}

static void op(gen *g, uint8_t c)
{
    put(g, &c, 1);
}

static void str(gen *g, const char *s)
{
    uint32_t n = (uint32_t)strlen(s);
    uint8_t h[5] = {'X', (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    put(g, h, 5);
    put(g, s, n);
}

static void num(gen *g, int64_t v) /* LONG1, 8 bytes little-endian two's complement */
{
    uint8_t h[10] = {0x8a, 8};
    for (int i = 0; i < 8; i++)
        h[2 + i] = (uint8_t)((uint64_t)v >> (8 * i));
    put(g, h, 10);
}

static void key_num(gen *g, const char *k, int64_t v)
{
    str(g, k);
    num(g, v);
}

static void key_str(gen *g, const char *k, const char *v)
{
    str(g, k);
    str(g, v);
}

#define KB 512
#define SEG_ALIGN (2u << 20)
#define BASE 0x7f0000000000ll

static const char *const frame_names[] = {"forward", "torch::autograd::Engine::thread_main",
                                          "step",    "zero_grad",
                                          "_apply",  "aten::_to_copy",
                                          "x",       "backward"};
static const char *const frame_files[] = {"model.py", "torch/optim/adam.py",
                                          "torch/nn/modules/module.py",
                                          "torch/autograd/__init__.py", "??"};

static void frames(gen *g)
{
    op(g, ']');
    unsigned n = pick(g, 3);
    if (!n) return;
    op(g, '(');
    for (unsigned i = 0; i < n; i++) {
        op(g, '}');
        op(g, '(');
        key_str(g, "name", frame_names[pick(g, 8)]);
        key_str(g, "filename", frame_files[pick(g, 5)]);
        key_num(g, "line", 1);
        op(g, 'u');
    }
    op(g, 'e');
}

static int64_t an_addr(gen *g)
{
    return BASE + (int64_t)pick(g, 8) * SEG_ALIGN + (int64_t)pick(g, 8) * 64 * KB;
}

static int64_t a_size(gen *g)
{
    static const int64_t sz[] = {0, 1, 512, 513, 64 * KB, 1 << 20, 2 << 20, 4 << 20};
    return sz[pick(g, 8)] + (pick(g, 4) == 0 ? (int64_t)pick(g, 256) * KB : 0);
}

static void segment(gen *g, int legacy)
{
    static const char *const states[] = {"active_allocated", "inactive", "active_awaiting_free",
                                         "active_pending_free"};
    int64_t addr = BASE + (int64_t)pick(g, 8) * SEG_ALIGN, total = 0;
    unsigned nb = 1 + pick(g, 4);
    int64_t bs[4];
    for (unsigned i = 0; i < nb; i++)
        total += bs[i] = (1 + (int64_t)pick(g, 8)) * 64 * KB * (pick(g, 8) ? 1 : 3);
    if (pick(g, 8) == 0) total += KB; /* blocks that do not cover it */
    op(g, '}');
    op(g, '(');
    key_num(g, "device", pick(g, 6) == 0);
    key_num(g, "address", addr);
    key_num(g, "total_size", total);
    key_num(g, "stream", pick(g, 4) == 0 ? 7 : 0);
    key_str(g, "segment_type", pick(g, 2) ? "large" : "small");
    str(g, "is_expandable");
    op(g, pick(g, 4) == 0 ? 0x88 : 0x89);
    str(g, "blocks");
    op(g, ']');
    op(g, '(');
    for (unsigned i = 0, off = 0; i < nb; off += (unsigned)bs[i], i++) {
        op(g, '}');
        op(g, '(');
        if (!legacy) key_num(g, "address", addr + off);
        key_num(g, "size", bs[i]);
        key_num(g, "requested_size", bs[i] - (int64_t)pick(g, 4) * 100);
        key_str(g, "state", states[pick(g, 4)]);
        if (legacy) {
            str(g, "history");
            op(g, ']');
            op(g, '(');
            op(g, '}');
            op(g, '(');
            key_num(g, "addr", addr + off);
            key_num(g, "real_size", bs[i]);
            op(g, 'u');
            op(g, 'e');
        } else {
            str(g, "frames");
            frames(g);
        }
        op(g, 'u');
    }
    op(g, 'e');
    op(g, 'u');
}

static void entries(gen *g, int timed)
{
    static const char *const actions[] = {
        "alloc",       "free_requested", "free_completed", "segment_alloc", "segment_free",
        "segment_map", "segment_unmap",  "snapshot",       "oom",           "bogus"};
    op(g, ']');
    unsigned n = pick(g, 24);
    if (!n) return;
    op(g, '(');
    int64_t t = 1700000000000000ll, last_addr = BASE, last_size = KB;
    for (unsigned i = 0; i < n; i++) {
        unsigned a = pick(g, 10), same = pick(g, 2);
        int64_t addr = same ? last_addr : an_addr(g), size = same ? last_size : a_size(g);
        last_addr = addr;
        last_size = size;
        op(g, '}');
        op(g, '(');
        key_str(g, "action", actions[a]);
        if (a == 8)
            key_num(g, "device_free", a_size(g));
        else
            key_num(g, "addr", addr);
        key_num(g, "size", size);
        key_num(g, "stream", pick(g, 8) == 0 ? 7 : 0);
        if (timed) key_num(g, "time_us", t += (int64_t)pick(g, 4) - (pick(g, 16) == 0 ? 8 : 0));
        str(g, "frames");
        frames(g);
        op(g, 'u');
    }
    op(g, 'e');
}

static void settings(gen *g)
{
    str(g, "allocator_settings");
    op(g, '}');
    op(g, '(');
    key_num(g, "max_split_size", pick(g, 2) ? -1 : (int64_t)pick(g, 64) << 20);
    key_num(g, "max_non_split_rounding_size", (int64_t)pick(g, 4) << 20);
    str(g, "expandable_segments");
    op(g, pick(g, 2) ? 0x88 : 0x89);
    str(g, "garbage_collection_threshold");
    uint8_t f[9] = {'G', 0x3f, 0xe0 + (uint8_t)pick(g, 16)}; /* 0.5..1.0, big-endian double */
    put(g, f, 9);
    str(g, "roundup_power2_divisions");
    op(g, '}');
    op(g, '(');
    for (int i = 0; i < 16; i++) {
        char k[8];
        snprintf(k, sizeof k, "%d", 1 << i);
        key_num(g, k, (int64_t)1 << pick(g, 4) >> 1);
    }
    op(g, 'u');
    key_str(g, "PYTORCH_CUDA_ALLOC_CONF", "x");
    op(g, 'u');
}

/* Write the snapshot the choices describe into g->out. */
static void gen_snapshot(gen *g)
{
    unsigned layout = pick(g, 4); /* current, older, 2.0, legacy list */
    put(g, "\x80\x02", 2);
    if (layout == 3) {
        op(g, ']');
        op(g, '(');
        for (unsigned i = 0, n = 1 + pick(g, 3); i < n; i++)
            segment(g, 1);
        op(g, 'e');
        op(g, '.');
        return;
    }
    op(g, '}');
    op(g, '(');
    str(g, "segments");
    op(g, ']');
    op(g, '(');
    for (unsigned i = 0, n = pick(g, 4); i < n; i++)
        segment(g, layout == 2);
    op(g, 'e');
    str(g, "device_traces");
    op(g, ']');
    op(g, '(');
    for (unsigned d = 0, n = 1 + (pick(g, 4) == 0); d < n; d++)
        entries(g, layout == 0);
    op(g, 'e');
    if (layout == 0 && pick(g, 2)) settings(g);
    if (layout == 0 && pick(g, 2)) {
        str(g, "external_annotations");
        op(g, ']');
        op(g, '(');
        for (int i = 0; i < 2; i++) {
            op(g, '}');
            op(g, '(');
            key_num(g, "device", 0);
            key_str(g, "stage", i ? "END" : "START");
            key_str(g, "name", "Optimizer.step#Adam.step");
            key_num(g, "time_us", 1700000000000000ll + (int64_t)pick(g, 32));
            op(g, 'u');
        }
        op(g, 'e');
    }
    op(g, 'u');
    op(g, '.');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t buf[1 << 20];
    if (size > 0 && data[0] == 0xff) {
        gen g = {data + 1, data + size, buf, 0, sizeof buf};
        gen_snapshot(&g);
        data = buf;
        size = g.len;
    }
    pkl_opts po = {.name = NAME, .max_depth = FUZZ_MAX_DEPTH, .max_bytes = 64u << 20};
    pkl_doc *doc = NULL;
    gm_err err = {0};
    if (pkl_parse(data, size, &po, &doc, &err) != GM_OK) return 0; /* fuzz_unpickle's part */
    gm_torch_opts opts = {.name = NAME, .command = "fuzz", .device = -1};
    gm_torch_import *imp = (gm_torch_import *)1;
    int rc = gm_torch_import_value(pkl_root(doc), &opts, &imp, &err);
    if (rc != GM_OK) {
        check(imp == NULL && err.code == rc && err.msg[0] != 0);
        check(strncmp(err.msg, NAME, strlen(NAME)) == 0 || rc == GM_ENOMEM);
    } else {
        check(imp != NULL && imp->layout != NULL && imp->n >= 1 && imp->dev);
        for (size_t i = 0; i < imp->n; i++) {
            check(i == 0 || imp->dev[i - 1].device < imp->dev[i].device);
            check_trace(&imp->dev[i]);
        }
        gm_torch_import_free(imp);
    }
    pkl_free(doc);
    return 0;
}
