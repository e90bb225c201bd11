/*
 * test_device_cuda.c - the CUDA backend (replay/device_cuda.c) against the
 * stand-in driver (fake_cuda.c, loaded by path, in this process): loading
 * and its errors, the ballast, the device contract (capacity guard, driver
 * OOMs counted apart, VMM granules, errors, the stop flag), and the engine
 * over the CUDA backend giving the very results of the simulated GPU.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "replay/ballast.h"
#include "replay/device_cuda.h"
#include "sim/engine.h"
#include "sim/measured.h"
#include "study/simulate.h"

#define MiB GM_MiB
#define GiB GM_GiB

static void *fake;
static void (*fake_set)(const char *, uint64_t);
static uint64_t (*fake_get)(const char *);

static int suite_init(void)
{
    /* our own reference keeps the stand-in loaded (and its state) between
     * gm_cuda_open/close */
    fake = dlopen(GM_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    if (!fake) return 1;
    fake_set = (void (*)(const char *, uint64_t))dlsym(fake, "fake_cuda_set");
    fake_get = (uint64_t(*)(const char *))dlsym(fake, "fake_cuda_get");
    if (!fake_set || !fake_get) return 1;
    fake_set("total", 16 * GiB);
    return 0;
}

static int suite_clean(void)
{
    if (fake) dlclose(fake);
    return 0;
}

static gm_cuda *open_fake(void)
{
    gm_cuda *c = NULL;
    gm_err err = {0};
    int rc = gm_cuda_open(GM_FAKE_CUDA, 0, &c, &err);
    if (rc) fprintf(stderr, "gm_cuda_open: %s\n", err.msg);
    CU_ASSERT_FATAL(rc == GM_OK);
    return c;
}

/* Nothing left in the stand-in driver but the context (or nothing at all). */
static void assert_driver_clean(int context_open)
{
    CU_ASSERT_EQUAL(fake_get("allocs"), 0);
    CU_ASSERT_EQUAL(fake_get("handles"), 0);
    CU_ASSERT_EQUAL(fake_get("maps"), 0);
    CU_ASSERT_EQUAL(fake_get("reservations"), 0);
    CU_ASSERT_EQUAL(fake_get("used"), context_open ? 300 * MiB : 0);
}

static void test_open_errors(void)
{
    gm_cuda *c = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL(gm_cuda_open("/nonexistent/libcuda.so.1", 0, &c, &err), GM_EIO);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT(strncmp(err.msg, "no CUDA driver", 14) == 0);
    fake_set("no_device", 1);
    CU_ASSERT_EQUAL(gm_cuda_open(GM_FAKE_CUDA, 0, &c, &err), GM_EIO);
    CU_ASSERT(strncmp(err.msg, "no GPU", 6) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "CUDA_ERROR_NO_DEVICE"));
    fake_set("no_device", 0);
    CU_ASSERT_EQUAL(gm_cuda_open(GM_FAKE_CUDA, 3, &c, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--device 3"));
    assert_driver_clean(0);
}

static void test_info_and_ballast(void)
{
    gm_cuda *c = open_fake();
    const gm_cuda_info *in = gm_cuda_info_get(c);
    CU_ASSERT_EQUAL(in->total_bytes, 16 * GiB);
    CU_ASSERT_EQUAL(in->free_at_open, 16 * GiB - 300 * MiB);
    CU_ASSERT_EQUAL(in->granularity_bytes, 2 * MiB);
    CU_ASSERT(in->vmm_supported);
    CU_ASSERT_PTR_NOT_NULL(strstr(in->library, "libcuda.so.1"));

    /* emulate 5 GiB + 1 MiB with one tenant of 300 MiB: 4.71 GiB + 1 MiB
     * free, i.e. the same whole granules the simulator allows */
    gm_measured m;
    gm_measured_init(&m);
    gm_err err = {0};
    uint64_t target = 0;
    CU_ASSERT_EQUAL(gm_ballast_target(5 * GiB + MiB, 1, 300 * MiB, in->free_at_open,
                                      in->total_bytes, &target, &err),
                    GM_OK);
    CU_ASSERT_EQUAL(target, 5 * GiB + MiB - 300 * MiB);
    CU_ASSERT_EQUAL(gm_cuda_ballast_hold(c, target, &m, &err), GM_OK);
    CU_ASSERT_EQUAL(m.free_after_ballast_bytes, target / (2 * MiB) * (2 * MiB));
    CU_ASSERT_EQUAL(m.ballast_bytes, 16 * GiB - 300 * MiB - m.free_after_ballast_bytes);
    CU_ASSERT_EQUAL(m.ballast_chunks, 3); /* 4 GiB + 4 GiB + the rest */
    uint64_t f;
    CU_ASSERT_EQUAL(gm_cuda_mem_info(c, &f, NULL, &err), GM_OK);
    CU_ASSERT_EQUAL(f, m.free_after_ballast_bytes);
    gm_cuda_ballast_release(c);
    CU_ASSERT_EQUAL(gm_cuda_mem_info(c, &f, NULL, &err), GM_OK);
    CU_ASSERT_EQUAL(f, in->free_at_open);
    gm_measured_free(&m);
    gm_cuda_close(c);
    assert_driver_clean(0);
}

static void test_backend_contract(void)
{
    gm_cuda *c = open_fake();
    gm_measured *m = malloc(sizeof *m);
    gm_measured_init(m);
    volatile sig_atomic_t stop = 0;
    gm_device *d;
    gm_err err = {0};
    CU_ASSERT_FATAL(gm_cuda_device_create(c, 1 * GiB, m, &stop, &d, &err) == GM_OK);
    CU_ASSERT_EQUAL(gm_device_add_context(d, 300 * MiB), GM_OK);
    uint64_t p1, p2, ns;

    /* within the cap: the driver is asked; used counts granules */
    CU_ASSERT_EQUAL(d->ops->mem_alloc(d, 3 * MiB, &p1, &ns), GM_OK);
    CU_ASSERT_EQUAL(d->used_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(fake_get("used"), 304 * MiB);
    CU_ASSERT_EQUAL(m->malloc_lat.seen, 1);
    /* over the emulated capacity: refused, the driver never asked */
    uint64_t calls = fake_get("alloc_calls");
    CU_ASSERT_EQUAL(d->ops->mem_alloc(d, 1 * GiB, &p2, &ns), GM_EOOM);
    CU_ASSERT_EQUAL(fake_get("alloc_calls"), calls);
    CU_ASSERT_EQUAL(m->cap_refusals, 1);
    CU_ASSERT_EQUAL(m->cap_refusals_driver_had_room, 1); /* 16 GiB card, no ballast */
    CU_ASSERT_EQUAL(m->driver_oom_returns, 0);
    /* the driver itself out of memory within the cap: GM_EOOM, counted */
    fake_set("total", 400 * MiB);
    CU_ASSERT_EQUAL(d->ops->mem_alloc(d, 200 * MiB, &p2, &ns), GM_EOOM);
    CU_ASSERT_EQUAL(m->driver_oom_returns, 1);
    CU_ASSERT_EQUAL(m->n_ooms_kept, 2);
    CU_ASSERT_EQUAL(m->ooms[1].kind, GM_BOOM_DRIVER);
    CU_ASSERT_EQUAL(m->ooms[1].free_bytes, 96 * MiB);
    CU_ASSERT_EQUAL(d->used_bytes, 4 * MiB);
    fake_set("total", 16 * GiB);
    d->ops->mem_free(d, p1, 3 * MiB, &ns);
    CU_ASSERT_EQUAL(d->used_bytes, 0);
    CU_ASSERT_EQUAL(fake_get("allocs"), 0);

    /* VMM: one handle per granule, so any granule-aligned part can go back */
    uint64_t va;
    CU_ASSERT_EQUAL(d->ops->va_reserve(d, 600 * MiB, &va), GM_OK);
    CU_ASSERT_EQUAL(d->ops->mem_map(d, va, 20 * MiB, &ns), GM_OK);
    CU_ASSERT_EQUAL(d->ops->mem_map(d, va + 40 * MiB, 20 * MiB, &ns), GM_OK);
    CU_ASSERT_EQUAL(fake_get("handles"), 20);
    CU_ASSERT_EQUAL(d->used_bytes, 40 * MiB);
    CU_ASSERT_EQUAL(gm_cuda_device_held(d), 40 * MiB);
    d->ops->mem_unmap(d, va + 4 * MiB, 10 * MiB, &ns); /* part of the first map */
    CU_ASSERT_EQUAL(fake_get("maps"), 15);
    CU_ASSERT_EQUAL(d->used_bytes, 30 * MiB);
    /* over the cap: refused */
    CU_ASSERT_EQUAL(d->ops->mem_map(d, va + 60 * MiB, 800 * MiB, &ns), GM_EOOM);
    CU_ASSERT_EQUAL(m->cap_refusals, 2);
    /* the allocator's teardown: one range from the base (not all mapped) */
    d->ops->mem_unmap(d, va, 30 * MiB, &ns);
    CU_ASSERT_EQUAL(d->used_bytes, 20 * MiB);
    d->ops->va_release(d, va, 600 * MiB); /* unmaps what is left */
    CU_ASSERT_EQUAL(d->used_bytes, 0);
    CU_ASSERT_EQUAL(gm_cuda_device_held(d), 0);
    CU_ASSERT_FALSE(gm_cuda_device_failed(d));
    assert_driver_clean(1);

    /* a signal: new memory refused without asking or counting */
    stop = 1;
    calls = fake_get("alloc_calls");
    CU_ASSERT_EQUAL(d->ops->mem_alloc(d, 2 * MiB, &p1, &ns), GM_EOOM);
    CU_ASSERT_EQUAL(fake_get("alloc_calls"), calls);
    CU_ASSERT_EQUAL(m->cap_refusals + m->driver_oom_returns, 3);
    stop = 0;

    /* a driver error other than OOM: recorded, further allocations refused */
    fake_set("error_at", 1);
    CU_ASSERT_EQUAL(d->ops->mem_alloc(d, 2 * MiB, &p1, &ns), GM_EOOM);
    CU_ASSERT(gm_cuda_device_failed(d));
    CU_ASSERT_PTR_NOT_NULL(strstr(m->error, "CUDA_ERROR_ILLEGAL_ADDRESS"));
    CU_ASSERT_EQUAL(m->driver_oom_returns, 1);
    fake_set("error_at", 0);
    calls = fake_get("alloc_calls");
    CU_ASSERT_EQUAL(d->ops->mem_alloc(d, 2 * MiB, &p1, &ns), GM_EOOM);
    CU_ASSERT_EQUAL(fake_get("alloc_calls"), calls);

    gm_device_destroy(d);
    gm_cuda_close(c);
    assert_driver_clean(0);
    gm_measured_free(m);
    free(m);
}

/* Whatever is still held at the end is freed by destroy. */
static void test_destroy_frees_leftovers(void)
{
    gm_cuda *c = open_fake();
    gm_measured *m = malloc(sizeof *m);
    gm_measured_init(m);
    gm_device *d;
    gm_err err = {0};
    CU_ASSERT_FATAL(gm_cuda_device_create(c, 8 * GiB, m, NULL, &d, &err) == GM_OK);
    uint64_t p, va, ns;
    CU_ASSERT_EQUAL(d->ops->mem_alloc(d, 64 * MiB, &p, &ns), GM_OK);
    CU_ASSERT_EQUAL(d->ops->va_reserve(d, 64 * MiB, &va), GM_OK);
    CU_ASSERT_EQUAL(d->ops->mem_map(d, va + 2 * MiB, 4 * MiB, &ns), GM_OK);
    CU_ASSERT_EQUAL(gm_cuda_device_held(d), 68 * MiB);
    gm_device_destroy(d);
    assert_driver_clean(1);
    gm_cuda_close(c);
    gm_measured_free(m);
    free(m);
}

/* ---------------- the engine over both backends ---------------- */

typedef struct run_out {
    gm_sim_result *r;
    uint64_t ballast;
} run_out;

static gm_sim_result *simulate(const char *conf, const char *allocator, uint64_t cap,
                               uint64_t overhead, gm_device *dev)
{
    static gm_tenant_spec t = {.repeat = 1};
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    t.path = gm_test_path("traces/bert.h5");
    gm_sim_config cfg = {.tenants = &t,
                         .n_tenants = 1,
                         .alloc_conf = conf,
                         .allocator = allocator,
                         .capacity_bytes = cap,
                         .overhead_bytes = overhead,
                         .latency = lat,
                         .device = dev};
    gm_sim_result *r = NULL;
    gm_err err = {0};
    int rc = gm_simulate(&cfg, &r, &err);
    if (rc) fprintf(stderr, "gm_simulate: %s\n", err.msg);
    CU_ASSERT_FATAL(rc == GM_OK);
    return r;
}

static void assert_same(const gm_sim_result *a, const gm_sim_result *b)
{
    const gm_metrics *x = &a->device, *y = &b->device;
    CU_ASSERT_EQUAL(x->peak_q, y->peak_q);
    CU_ASSERT_EQUAL(x->peak_a, y->peak_a);
    CU_ASSERT_EQUAL(x->peak_r, y->peak_r);
    CU_ASSERT_EQUAL(x->n_oom, y->n_oom);
    CU_ASSERT_EQUAL(x->n_oom_kept, y->n_oom_kept);
    for (size_t i = 0; i < x->n_oom_kept && i < y->n_oom_kept; i++) {
        CU_ASSERT_EQUAL(x->ooms[i].event_index, y->ooms[i].event_index);
        CU_ASSERT_EQUAL(x->ooms[i].size, y->ooms[i].size);
        CU_ASSERT_EQUAL(x->ooms[i].device_used, y->ooms[i].device_used);
    }
    CU_ASSERT_EQUAL(a->t[0].c.n_driver_alloc, b->t[0].c.n_driver_alloc);
    CU_ASSERT_EQUAL(a->t[0].c.n_driver_free, b->t[0].c.n_driver_free);
    CU_ASSERT_EQUAL(a->t[0].status, b->t[0].status);
    CU_ASSERT_EQUAL(a->t[0].events_done, b->t[0].events_done);
    CU_ASSERT_EQUAL(a->peak_device_used, b->peak_device_used);
}

/* The simulator's prediction and the replay on a (stand-in) driver that
 * behaves like the model agree exactly: same engine, allocator and policy
 * code; the capacity is made by ballast, not by the backend's guard. */
static void same_as_model(const char *conf, const char *allocator, uint64_t cap, int expect_oom)
{
    gm_cuda *c = open_fake();
    const gm_cuda_info *in = gm_cuda_info_get(c);
    uint64_t overhead = in->total_bytes - in->free_at_open, target = 0;
    gm_measured *m = malloc(sizeof *m);
    gm_measured_init(m);
    gm_err err = {0};
    CU_ASSERT_FATAL(gm_ballast_target(cap, 1, overhead, in->free_at_open, in->total_bytes, &target,
                                      &err) == GM_OK);
    CU_ASSERT_FATAL(gm_cuda_ballast_hold(c, target, m, &err) == GM_OK);
    gm_device *d;
    CU_ASSERT_FATAL(gm_cuda_device_create(c, cap, m, NULL, &d, &err) == GM_OK);

    gm_sim_result *pred = simulate(conf, allocator, cap, overhead, NULL);
    gm_sim_result *meas = simulate(conf, allocator, cap, overhead, d);
    assert_same(pred, meas);
    CU_ASSERT_EQUAL(pred->device.n_oom > 0, expect_oom);
    /* the refusals are the guard's, and the driver agreed: it had no room */
    CU_ASSERT_EQUAL(m->cap_refusals_driver_had_room, 0);
    CU_ASSERT_EQUAL(m->driver_oom_returns, 0);
    if (expect_oom) CU_ASSERT(m->cap_refusals > 0);
    CU_ASSERT_EQUAL(gm_cuda_device_held(d), 0);
    CU_ASSERT_FALSE(gm_cuda_device_failed(d));
    CU_ASSERT(m->malloc_lat.seen + m->map_lat.seen >= meas->t[0].c.n_driver_alloc);

    /* a driver stricter than the model (bookkeeping per allocation): the
     * driver's own refusal shows up, counted apart, at an earlier event */
    if (expect_oom && !strcmp(allocator, "pytorch")) {
        fake_set("extra", 1 * MiB);
        gm_measured_free(m);
        gm_measured_init(m);
        gm_sim_result *strict = simulate(conf, allocator, cap, overhead, d);
        CU_ASSERT(m->driver_oom_returns > 0);
        CU_ASSERT(strict->device.n_oom > 0);
        CU_ASSERT(strict->device.ooms[0].event_index < pred->device.ooms[0].event_index);
        fake_set("extra", 0);
        gm_sim_result_free(strict);
    }
    gm_sim_result_free(pred);
    gm_sim_result_free(meas);
    gm_device_destroy(d);
    gm_cuda_close(c);
    assert_driver_clean(0);
    gm_measured_free(m);
    free(m);
}

static void test_same_as_model_full_card(void)
{
    same_as_model(NULL, "pytorch", 16 * GiB, 0);
}

static void test_same_as_model_small_card(void)
{
    same_as_model(NULL, "pytorch", 4 * GiB, 1);
}

static void test_same_as_model_expandable(void)
{
    same_as_model("expandable_segments:True", "pytorch", 4 * GiB, 1);
    same_as_model("expandable_segments:True", "pytorch", 12 * GiB, 0);
}

static void test_same_as_model_direct(void)
{
    same_as_model(NULL, "direct", 3 * GiB, 1);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("device_cuda", suite_init, suite_clean);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_open_errors);
    GM_ADD_TEST(s, test_info_and_ballast);
    GM_ADD_TEST(s, test_backend_contract);
    GM_ADD_TEST(s, test_destroy_frees_leftovers);
    GM_ADD_TEST(s, test_same_as_model_full_card);
    GM_ADD_TEST(s, test_same_as_model_small_card);
    GM_ADD_TEST(s, test_same_as_model_expandable);
    GM_ADD_TEST(s, test_same_as_model_direct);
    return CUE_SUCCESS;
}
