/*
 * bert_trace.h - a generated BERT trace file (traces/gen_bert.h, default
 * parameters but the iterations) for the tests that need a real-sized
 * one: its path (gm_test_tmp) and its statistics, and a configuration to
 * run it with. Header-only.
 */
#ifndef GM_TESTS_BERT_TRACE_H
#define GM_TESTS_BERT_TRACE_H

#include "cu.h"
#include "sim/engine.h"
#include "traces/gen_bert.h"

static inline const char *bert_trace(const char *name, int iterations, gm_bert_stats *st)
{
    gm_bert_params p;
    gm_bert_defaults(&p);
    p.iterations = iterations;
    gm_err err = {0};
    const char *path = gm_test_tmp(name);
    CU_ASSERT_EQUAL_FATAL(gm_bert_write_trace(path, &p, NULL, NULL, st, &err), GM_OK);
    return path;
}

/* A configuration of the tenants t[0..n) on `capacity` bytes with the
 * default context overhead and latencies, the rest zero (the caller sets
 * what its test needs). */
static inline gm_sim_config bert_config(gm_tenant_spec *t, size_t n, uint64_t capacity)
{
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    return (gm_sim_config){.tenants = t,
                           .n_tenants = n,
                           .capacity_bytes = capacity,
                           .overhead_bytes = GM_DEFAULT_OVERHEAD,
                           .latency = lat};
}

#endif
