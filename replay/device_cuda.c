/* device_cuda.c - see device_cuda.h. cuda.h is used for types only: every
 * driver entry point is looked up with dlsym at run time. */
#define _GNU_SOURCE /* dladdr */
#include "device_cuda.h"

#include <cuda.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ballast.h"
#include "base/addrmap.h"

/* ---------------- the driver, loaded at run time ---------------- */

/* One pointer per entry point, typed from cuda.h's own prototype. cuda.h
 * maps some names to versioned symbols (cuMemAlloc -> cuMemAlloc_v2); SYM()
 * looks up the symbol the header means. */
#define FN(name) __typeof__(name) *name
typedef struct cu_fns {
    FN(cuInit);
    FN(cuDriverGetVersion);
    FN(cuDeviceGetCount);
    FN(cuDeviceGet);
    FN(cuDeviceGetName);
    FN(cuDeviceTotalMem);
    FN(cuDeviceGetAttribute);
    FN(cuDevicePrimaryCtxRetain);
    FN(cuDevicePrimaryCtxRelease);
    FN(cuCtxSetCurrent);
    FN(cuCtxSynchronize);
    FN(cuMemGetInfo);
    FN(cuMemAlloc);
    FN(cuMemFree);
    FN(cuMemAddressReserve);
    FN(cuMemAddressFree);
    FN(cuMemCreate);
    FN(cuMemRelease);
    FN(cuMemMap);
    FN(cuMemUnmap);
    FN(cuMemSetAccess);
    FN(cuMemGetAllocationGranularity);
    FN(cuGetErrorName);
    FN(cuGetErrorString);
} cu_fns;
#undef FN

struct gm_cuda {
    void *lib;
    cu_fns f;
    CUdevice dev;
    CUcontext ctx;
    int ctx_retained;
    gm_cuda_info info;
    CUdeviceptr *ballast;
    size_t n_ballast, cap_ballast;
    const volatile sig_atomic_t *stop;
};

#define STR_(x) #x
#define STR(x) STR_(x)

static int load_symbols(gm_cuda *c, gm_err *err)
{
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
#define SYM(fn) {STR(fn), offsetof(cu_fns, fn)}
        SYM(cuInit),
        SYM(cuDriverGetVersion),
        SYM(cuDeviceGetCount),
        SYM(cuDeviceGet),
        SYM(cuDeviceGetName),
        SYM(cuDeviceTotalMem),
        SYM(cuDeviceGetAttribute),
        SYM(cuDevicePrimaryCtxRetain),
        SYM(cuDevicePrimaryCtxRelease),
        SYM(cuCtxSetCurrent),
        SYM(cuCtxSynchronize),
        SYM(cuMemGetInfo),
        SYM(cuMemAlloc),
        SYM(cuMemFree),
        SYM(cuMemAddressReserve),
        SYM(cuMemAddressFree),
        SYM(cuMemCreate),
        SYM(cuMemRelease),
        SYM(cuMemMap),
        SYM(cuMemUnmap),
        SYM(cuMemSetAccess),
        SYM(cuMemGetAllocationGranularity),
        SYM(cuGetErrorName),
        SYM(cuGetErrorString),
#undef SYM
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *p = dlsym(c->lib, syms[i].name);
        if (!p)
            return gm_errf(err, GM_EIO,
                           "no CUDA driver: %s has no %s; it is not an NVIDIA driver library, "
                           "or one too old for gmreplay (CUDA 11.2 or later needed)",
                           c->info.library, syms[i].name);
        memcpy((char *)&c->f + syms[i].off, &p, sizeof p);
    }
    return GM_OK;
}

const char *gm_cuda_strerror(gm_cuda *c, int r, char *buf, size_t len)
{
    const char *name = NULL, *text = NULL;
    if (c && c->f.cuGetErrorName) c->f.cuGetErrorName((CUresult)r, &name);
    if (c && c->f.cuGetErrorString) c->f.cuGetErrorString((CUresult)r, &text);
    if (name)
        snprintf(buf, len, "%s (%s)", name, text ? text : "no description");
    else
        snprintf(buf, len, "CUDA error %d", r);
    return buf;
}

static int cu_fail(gm_cuda *c, gm_err *err, CUresult r, const char *what)
{
    char b[256];
    return gm_errf(err, GM_EIO, "%s failed: %s", what, gm_cuda_strerror(c, r, b, sizeof b));
}

static int init_error(gm_cuda *c, CUresult r, gm_err *err)
{
    char b[256];
    gm_cuda_strerror(c, r, b, sizeof b);
    switch (r) {
    case CUDA_ERROR_NO_DEVICE:
        return gm_errf(err, GM_EIO,
                       "no GPU: the CUDA driver (%s) found no CUDA device: %s; gmreplay "
                       "measures on a real GPU (predict without one with 'gmsim run')",
                       c->info.library, b);
    case CUDA_ERROR_STUB_LIBRARY:
        return gm_errf(err, GM_EIO,
                       "no CUDA driver: %s is the CUDA toolkit's stub library, not a driver; "
                       "remove the toolkit's stubs/ folder from LD_LIBRARY_PATH",
                       c->info.library);
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
        return gm_errf(err, GM_EIO, "no usable CUDA driver: %s: %s", c->info.library, b);
    default:
        return gm_errf(err, GM_EIO, "no GPU: cuInit failed: %s (driver %s)", b, c->info.library);
    }
}

static void fill_library_path(gm_cuda *c)
{
    Dl_info di;
    if (c->f.cuInit && dladdr((void *)c->f.cuInit, &di) && di.dli_fname)
        snprintf(c->info.library, sizeof c->info.library, "%s", di.dli_fname);
}

static int open_device(gm_cuda *c, int ordinal, gm_err *err)
{
    CUresult r = c->f.cuInit(0);
    if (r != CUDA_SUCCESS) return init_error(c, r, err);
    c->f.cuDriverGetVersion(&c->info.driver_version);
    int n = 0;
    if ((r = c->f.cuDeviceGetCount(&n)) != CUDA_SUCCESS) return init_error(c, r, err);
    if (n == 0) return init_error(c, CUDA_ERROR_NO_DEVICE, err);
    if (ordinal < 0 || ordinal >= n)
        return gm_errf(err, GM_EINVAL, "--device %d: this machine has %d GPU(s), numbered 0 to %d",
                       ordinal, n, n - 1);
    if ((r = c->f.cuDeviceGet(&c->dev, ordinal)) != CUDA_SUCCESS)
        return cu_fail(c, err, r, "cuDeviceGet");
    c->info.ordinal = ordinal;
    c->f.cuDeviceGetName(c->info.name, (int)sizeof c->info.name, c->dev);
    size_t total = 0, free_b = 0;
    if ((r = c->f.cuDeviceTotalMem(&total, c->dev)) != CUDA_SUCCESS)
        return cu_fail(c, err, r, "cuDeviceTotalMem");
    c->info.total_bytes = total;
    int vmm = 0;
    if (c->f.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                  c->dev) == CUDA_SUCCESS)
        c->info.vmm_supported = vmm;
    if ((r = c->f.cuDevicePrimaryCtxRetain(&c->ctx, c->dev)) != CUDA_SUCCESS)
        return cu_fail(c, err, r, "cuDevicePrimaryCtxRetain (creating the CUDA context)");
    c->ctx_retained = 1;
    if ((r = c->f.cuCtxSetCurrent(c->ctx)) != CUDA_SUCCESS)
        return cu_fail(c, err, r, "cuCtxSetCurrent");
    if ((r = c->f.cuMemGetInfo(&free_b, &total)) != CUDA_SUCCESS)
        return cu_fail(c, err, r, "cuMemGetInfo");
    c->info.free_at_open = free_b;
    c->info.granularity_bytes = GM_DRIVER_GRANULARITY;
    if (c->info.vmm_supported) {
        CUmemAllocationProp prop = {0};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = c->dev;
        size_t g = 0;
        if (c->f.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
                CUDA_SUCCESS &&
            g > GM_DRIVER_GRANULARITY)
            c->info.granularity_bytes = g;
    }
    return GM_OK;
}

int gm_cuda_open(const char *lib, int ordinal, gm_cuda **out, gm_err *err)
{
    *out = NULL;
    gm_cuda *c = calloc(1, sizeof *c);
    if (!c) return gm_errf(err, GM_ENOMEM, "out of memory");
    const char *name = lib ? lib : "libcuda.so.1";
    snprintf(c->info.library, sizeof c->info.library, "%s", name);
    c->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!c->lib) {
        const char *why = dlerror();
        gm_errf(err, GM_EIO,
                "no CUDA driver: cannot load %s (%s); gmreplay measures on a machine with an "
                "NVIDIA GPU and its driver (predict without one with 'gmsim run')",
                name, why ? why : "not found");
        free(c);
        return GM_EIO;
    }
    int rc = load_symbols(c, err);
    if (!rc) {
        fill_library_path(c);
        rc = open_device(c, ordinal, err);
    }
    if (rc) {
        gm_cuda_close(c);
        return rc;
    }
    *out = c;
    return GM_OK;
}

void gm_cuda_close(gm_cuda *c)
{
    if (!c) return;
    gm_cuda_ballast_release(c);
    free(c->ballast);
    if (c->ctx_retained) c->f.cuDevicePrimaryCtxRelease(c->dev);
    if (c->lib) dlclose(c->lib);
    free(c);
}

void gm_cuda_set_stop(gm_cuda *c, const volatile sig_atomic_t *stop)
{
    c->stop = stop;
}

int gm_cuda_stopped(const gm_cuda *c)
{
    return c->stop && *c->stop;
}

const gm_cuda_info *gm_cuda_info_get(const gm_cuda *c)
{
    return &c->info;
}

int gm_cuda_mem_info(gm_cuda *c, uint64_t *free_bytes, uint64_t *total_bytes, gm_err *err)
{
    size_t f = 0, t = 0;
    CUresult r = c->f.cuMemGetInfo(&f, &t);
    if (r != CUDA_SUCCESS) return cu_fail(c, err, r, "cuMemGetInfo");
    *free_bytes = f;
    if (total_bytes) *total_bytes = t;
    return GM_OK;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------- timed raw calls (calibration) ---------------- */

int gm_cuda_alloc_timed(gm_cuda *c, uint64_t bytes, uint64_t *dptr, uint64_t *ns, gm_err *err)
{
    CUdeviceptr p = 0;
    uint64_t t0 = mono_ns();
    CUresult r = c->f.cuMemAlloc(&p, bytes);
    *ns = mono_ns() - t0;
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return gm_errf(err, GM_EOOM, "cuMemAlloc(%" PRIu64 "): out of memory", bytes);
    if (r != CUDA_SUCCESS) return cu_fail(c, err, r, "cuMemAlloc");
    *dptr = p;
    return GM_OK;
}

int gm_cuda_free_timed(gm_cuda *c, uint64_t dptr, uint64_t *ns, gm_err *err)
{
    uint64_t t0 = mono_ns();
    CUresult r = c->f.cuMemFree((CUdeviceptr)dptr);
    *ns = mono_ns() - t0;
    return r == CUDA_SUCCESS ? GM_OK : cu_fail(c, err, r, "cuMemFree");
}

static CUmemAllocationProp phys_prop(const gm_cuda *c)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = c->dev;
    return prop;
}

static CUmemAccessDesc access_desc(const gm_cuda *c)
{
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = c->dev;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return d;
}

/* Map [va, va + n granules) with one handle per granule; on failure every
 * granule mapped here is undone. Returns the CUresult. */
static CUresult map_granules(gm_cuda *c, CUdeviceptr va, size_t n, CUmemGenericAllocationHandle *h)
{
    uint64_t g = c->info.granularity_bytes;
    CUmemAllocationProp prop = phys_prop(c);
    CUmemAccessDesc acc = access_desc(c);
    CUresult r = CUDA_SUCCESS;
    size_t done = 0;
    for (; done < n; done++) {
        if ((r = c->f.cuMemCreate(&h[done], g, &prop, 0)) != CUDA_SUCCESS) break;
        if ((r = c->f.cuMemMap(va + done * g, g, 0, h[done], 0)) != CUDA_SUCCESS) {
            c->f.cuMemRelease(h[done]);
            break;
        }
    }
    if (r == CUDA_SUCCESS && n && (r = c->f.cuMemSetAccess(va, n * g, &acc, 1)) == CUDA_SUCCESS)
        return CUDA_SUCCESS;
    for (size_t i = 0; i < done; i++) {
        c->f.cuMemUnmap(va + i * g, g);
        c->f.cuMemRelease(h[i]);
    }
    return r;
}

int gm_cuda_vmm_timed(gm_cuda *c, uint64_t bytes, uint64_t *map_ns, uint64_t *unmap_ns, gm_err *err)
{
    if (!c->info.vmm_supported)
        return gm_errf(err, GM_EIO, "this GPU or driver has no virtual memory management");
    uint64_t g = c->info.granularity_bytes;
    size_t n = (size_t)((bytes + g - 1) / g);
    CUmemGenericAllocationHandle *h = calloc(n, sizeof *h);
    if (!h) return gm_errf(err, GM_ENOMEM, "out of memory");
    CUdeviceptr va = 0;
    CUresult r = c->f.cuMemAddressReserve(&va, n * g, g, 0, 0);
    if (r != CUDA_SUCCESS) {
        free(h);
        return cu_fail(c, err, r, "cuMemAddressReserve");
    }
    uint64_t t0 = mono_ns();
    r = map_granules(c, va, n, h);
    *map_ns = mono_ns() - t0;
    int rc = GM_OK;
    if (r == CUDA_SUCCESS) {
        t0 = mono_ns();
        for (size_t i = 0; i < n; i++) {
            c->f.cuMemUnmap(va + i * g, g);
            c->f.cuMemRelease(h[i]);
        }
        *unmap_ns = mono_ns() - t0;
    } else {
        rc = r == CUDA_ERROR_OUT_OF_MEMORY ? gm_errf(err, GM_EOOM, "cuMemCreate: out of memory")
                                           : cu_fail(c, err, r, "cuMemCreate/cuMemMap");
    }
    c->f.cuMemAddressFree(va, n * g);
    free(h);
    return rc;
}

/* ---------------- ballast ---------------- */

int gm_cuda_ballast_hold(gm_cuda *c, uint64_t target_free, gm_measured *m, gm_err *err)
{
    uint64_t free_now = 0, held = 0;
    int rc = gm_cuda_mem_info(c, &free_now, NULL, err);
    m->target_free_bytes = target_free;
    for (uint64_t chunk;
         rc == GM_OK && (chunk = gm_ballast_next_chunk(free_now, target_free, GM_DRIVER_GRANULARITY,
                                                       GM_BALLAST_MAX_CHUNK)) != 0;) {
        if (c->n_ballast == c->cap_ballast) {
            size_t cap = c->cap_ballast ? c->cap_ballast * 2 : 64;
            CUdeviceptr *p = realloc(c->ballast, cap * sizeof *p);
            if (!p) return gm_errf(err, GM_ENOMEM, "out of memory");
            c->ballast = p;
            c->cap_ballast = cap;
        }
        if (gm_cuda_stopped(c))
            return gm_errf(err, GM_EIO, "interrupted while holding the ballast");
        CUdeviceptr p = 0;
        CUresult r = c->f.cuMemAlloc(&p, chunk);
        if (r != CUDA_SUCCESS) {
            char b[256];
            return gm_errf(err, GM_EIO,
                           "could not hold the ballast that emulates the smaller card: "
                           "cuMemAlloc(%" PRIu64 ") after %" PRIu64 " bytes: %s; is another "
                           "process using the GPU?",
                           chunk, held, gm_cuda_strerror(c, r, b, sizeof b));
        }
        c->ballast[c->n_ballast++] = p;
        held += chunk;
        rc = gm_cuda_mem_info(c, &free_now, NULL, err);
    }
    m->ballast_bytes = held;
    m->ballast_chunks = (uint32_t)c->n_ballast;
    m->free_after_ballast_bytes = free_now;
    return rc;
}

void gm_cuda_ballast_release(gm_cuda *c)
{
    for (size_t i = 0; i < c->n_ballast; i++)
        c->f.cuMemFree(c->ballast[i]);
    c->n_ballast = 0;
}

/* ---------------- the backend ---------------- */

/* An address range from va_reserve, with one physical handle per granule. */
typedef struct vres {
    uint64_t base, size;
    size_t n;
    CUmemGenericAllocationHandle *h;
    uint8_t *mapped;
    struct vres *next;
} vres;

typedef struct cuda_dev {
    gm_cuda *c;
    gm_measured *m;
    gm_addrmap live; /* cuMemAlloc blocks: key(dptr) -> bytes */
    uint64_t live_bytes;
    vres *res;
    const volatile sig_atomic_t *stop;
    void (*pace)(void *);
    void *pace_ctx;
    uint64_t t0;
    int failed;
} cuda_dev;

static void record_error(cuda_dev *cd, CUresult r, const char *what)
{
    char b[256];
    if (!cd->failed)
        snprintf(cd->m->error, sizeof cd->m->error, "%s failed: %s", what,
                 gm_cuda_strerror(cd->c, r, b, sizeof b));
    cd->failed = 1;
}

static uint64_t free_now(cuda_dev *cd)
{
    size_t f = 0, t = 0;
    return cd->c->f.cuMemGetInfo(&f, &t) == CUDA_SUCCESS ? f : 0;
}

/* May the tenants take `phys` more bytes of the emulated card? If not, the
 * refusal is counted (with whether the driver would have had room). */
static int within_cap(gm_device *d, uint64_t phys)
{
    cuda_dev *cd = d->impl;
    if (d->overhead_bytes <= d->capacity_bytes &&
        phys <= d->capacity_bytes - d->overhead_bytes - d->used_bytes)
        return 1;
    gm_backend_oom o = {GM_BOOM_CAP, phys, free_now(cd), d->used_bytes, mono_ns() - cd->t0};
    if (o.free_bytes >= phys) cd->m->cap_refusals_driver_had_room++;
    gm_measured_oom(cd->m, &o);
    return 0;
}

static void driver_oom(gm_device *d, uint64_t bytes)
{
    cuda_dev *cd = d->impl;
    gm_backend_oom o = {GM_BOOM_DRIVER, bytes, free_now(cd), d->used_bytes, mono_ns() - cd->t0};
    gm_measured_oom(cd->m, &o);
}

static void take(gm_device *d, uint64_t phys)
{
    d->used_bytes += phys;
    if (d->used_bytes + d->overhead_bytes > d->peak_used_bytes)
        d->peak_used_bytes = d->used_bytes + d->overhead_bytes;
}

/* New memory is not asked for after a signal or a driver failure. */
static int refusing(cuda_dev *cd)
{
    return cd->failed || (cd->stop && *cd->stop);
}

static void pace(cuda_dev *cd)
{
    if (cd->pace && !refusing(cd)) cd->pace(cd->pace_ctx);
}

static int c_alloc(gm_device *d, uint64_t bytes, uint64_t *dptr, uint64_t *cost_ns)
{
    cuda_dev *cd = d->impl;
    uint64_t phys = gm_device_round(bytes);
    *cost_ns = 0;
    if (refusing(cd) || !within_cap(d, phys)) return GM_EOOM;
    pace(cd);
    CUdeviceptr p = 0;
    uint64_t t0 = mono_ns();
    CUresult r = cd->c->f.cuMemAlloc(&p, bytes);
    *cost_ns = mono_ns() - t0;
    gm_lat_add(&cd->m->malloc_lat, *cost_ns);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        driver_oom(d, bytes);
        return GM_EOOM;
    }
    if (r != CUDA_SUCCESS) {
        record_error(cd, r, "cuMemAlloc");
        return GM_EOOM;
    }
    if (gm_addrmap_put(&cd->live, gm_addrmap_key(p), bytes) != GM_OK) {
        cd->c->f.cuMemFree(p);
        snprintf(cd->m->error, sizeof cd->m->error, "out of host memory");
        cd->failed = 1;
        return GM_EOOM;
    }
    cd->live_bytes += phys;
    take(d, phys);
    *dptr = p;
    return GM_OK;
}

static void c_free(gm_device *d, uint64_t dptr, uint64_t bytes, uint64_t *cost_ns)
{
    cuda_dev *cd = d->impl;
    uint64_t known;
    *cost_ns = 0;
    if (!gm_addrmap_del(&cd->live, gm_addrmap_key(dptr), &known)) {
        record_error(cd, CUDA_ERROR_INVALID_VALUE, "cuMemFree of an address not allocated here");
        return;
    }
    pace(cd);
    uint64_t t0 = mono_ns();
    CUresult r = cd->c->f.cuMemFree((CUdeviceptr)dptr);
    *cost_ns = mono_ns() - t0;
    gm_lat_add(&cd->m->free_lat, *cost_ns);
    if (r != CUDA_SUCCESS) record_error(cd, r, "cuMemFree");
    (void)bytes; /* the size it was allocated with is the one that counts */
    cd->live_bytes -= gm_device_round(known);
    d->used_bytes -= gm_device_round(known);
}

static vres *find_res(cuda_dev *cd, uint64_t va, uint64_t bytes)
{
    for (vres *v = cd->res; v; v = v->next)
        if (va >= v->base && bytes <= v->size && va - v->base <= v->size - bytes) return v;
    return NULL;
}

static int c_va_reserve(gm_device *d, uint64_t bytes, uint64_t *va)
{
    cuda_dev *cd = d->impl;
    gm_cuda *c = cd->c;
    if (refusing(cd)) return GM_EOOM;
    if (!c->info.vmm_supported) {
        snprintf(cd->m->error, sizeof cd->m->error,
                 "expandable segments need virtual memory management, which this GPU or "
                 "driver does not support; replay without expandable_segments:True");
        cd->failed = 1;
        return GM_EOOM;
    }
    uint64_t g = c->info.granularity_bytes;
    vres *v = calloc(1, sizeof *v);
    if (v) {
        v->size = (bytes + g - 1) / g * g;
        v->n = (size_t)(v->size / g);
        v->h = calloc(v->n, sizeof *v->h);
        v->mapped = calloc(v->n, 1);
    }
    if (!v || !v->h || !v->mapped) {
        if (v) {
            free(v->h);
            free(v->mapped);
        }
        free(v);
        snprintf(cd->m->error, sizeof cd->m->error, "out of host memory");
        cd->failed = 1;
        return GM_EOOM;
    }
    CUdeviceptr p = 0;
    CUresult r = c->f.cuMemAddressReserve(&p, v->size, g, 0, 0);
    if (r != CUDA_SUCCESS) {
        record_error(cd, r, "cuMemAddressReserve");
        free(v->h);
        free(v->mapped);
        free(v);
        return GM_EOOM;
    }
    v->base = p;
    v->next = cd->res;
    cd->res = v;
    *va = p;
    return GM_OK;
}

/* Unmap and release granules [i, j) of v that are mapped; returns bytes. */
static uint64_t unmap_granules(cuda_dev *cd, vres *v, size_t i, size_t j)
{
    gm_cuda *c = cd->c;
    uint64_t g = c->info.granularity_bytes, n = 0;
    for (; i < j; i++) {
        if (!v->mapped[i]) continue;
        CUresult r = c->f.cuMemUnmap(v->base + i * g, g);
        if (r != CUDA_SUCCESS) record_error(cd, r, "cuMemUnmap");
        if ((r = c->f.cuMemRelease(v->h[i])) != CUDA_SUCCESS) record_error(cd, r, "cuMemRelease");
        v->mapped[i] = 0;
        n += g;
    }
    return n;
}

static void c_va_release(gm_device *d, uint64_t va, uint64_t bytes)
{
    cuda_dev *cd = d->impl;
    vres **pp = &cd->res;
    while (*pp && (*pp)->base != va)
        pp = &(*pp)->next;
    vres *v = *pp;
    (void)bytes;
    if (!v) {
        record_error(cd, CUDA_ERROR_INVALID_VALUE, "release of an address range not reserved here");
        return;
    }
    d->used_bytes -= unmap_granules(cd, v, 0, v->n);
    CUresult r = cd->c->f.cuMemAddressFree(v->base, v->size);
    if (r != CUDA_SUCCESS) record_error(cd, r, "cuMemAddressFree");
    *pp = v->next;
    free(v->h);
    free(v->mapped);
    free(v);
}

/* Granules [*i, *j) of the reservation holding [va, va + bytes), or NULL
 * (recorded as an error) when the range is not granule-aligned inside one. */
static vres *range_of(cuda_dev *cd, uint64_t va, uint64_t bytes, size_t *i, size_t *j)
{
    uint64_t g = cd->c->info.granularity_bytes;
    vres *v = find_res(cd, va, bytes);
    if (!v || (va - v->base) % g || bytes % g) {
        snprintf(cd->m->error, sizeof cd->m->error,
                 "map/unmap of [0x%" PRIx64 ", +%" PRIu64 ") is not whole %" PRIu64
                 "-byte granules of a reserved range; the allocator's page size does not suit "
                 "this GPU's VMM granularity",
                 va, bytes, g);
        cd->failed = 1;
        return NULL;
    }
    *i = (size_t)((va - v->base) / g);
    *j = *i + (size_t)(bytes / g);
    return v;
}

static int c_map(gm_device *d, uint64_t va, uint64_t bytes, uint64_t *cost_ns)
{
    cuda_dev *cd = d->impl;
    size_t i, j;
    *cost_ns = 0;
    if (refusing(cd) || !within_cap(d, bytes)) return GM_EOOM;
    vres *v = range_of(cd, va, bytes, &i, &j);
    if (!v) return GM_EOOM;
    for (size_t k = i; k < j; k++)
        if (v->mapped[k]) {
            snprintf(cd->m->error, sizeof cd->m->error,
                     "map of [0x%" PRIx64 ", +%" PRIu64 ") overlaps memory already mapped", va,
                     bytes);
            cd->failed = 1;
            return GM_EOOM;
        }
    pace(cd);
    uint64_t t0 = mono_ns();
    CUresult r = map_granules(cd->c, va, j - i, &v->h[i]);
    *cost_ns = mono_ns() - t0;
    gm_lat_add(&cd->m->map_lat, *cost_ns);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        driver_oom(d, bytes);
        return GM_EOOM;
    }
    if (r != CUDA_SUCCESS) {
        record_error(cd, r, "cuMemCreate/cuMemMap/cuMemSetAccess");
        return GM_EOOM;
    }
    memset(&v->mapped[i], 1, j - i);
    take(d, bytes);
    return GM_OK;
}

static void c_unmap(gm_device *d, uint64_t va, uint64_t bytes, uint64_t *cost_ns)
{
    cuda_dev *cd = d->impl;
    size_t i, j;
    *cost_ns = 0;
    vres *v = range_of(cd, va, bytes, &i, &j);
    if (!v) return;
    pace(cd);
    uint64_t t0 = mono_ns();
    CUresult r = cd->c->f.cuCtxSynchronize();
    if (r != CUDA_SUCCESS) record_error(cd, r, "cuCtxSynchronize");
    uint64_t n = unmap_granules(cd, v, i, j);
    *cost_ns = mono_ns() - t0;
    gm_lat_add(&cd->m->unmap_lat, *cost_ns);
    d->used_bytes -= n;
}

static void c_destroy(gm_device *d)
{
    cuda_dev *cd = d->impl;
    for (size_t i = 0; i <= cd->live.mask; i++)
        if (cd->live.slots[i].key) cd->c->f.cuMemFree((CUdeviceptr)(cd->live.slots[i].key - 1));
    while (cd->res)
        c_va_release(d, cd->res->base, cd->res->size);
    gm_addrmap_free(&cd->live);
    free(cd);
    free(d);
}

static const gm_device_ops cuda_ops = {
    .name = "cuda",
    .mem_alloc = c_alloc,
    .mem_free = c_free,
    .va_reserve = c_va_reserve,
    .va_release = c_va_release,
    .mem_map = c_map,
    .mem_unmap = c_unmap,
    .destroy = c_destroy,
};

int gm_cuda_device_create(gm_cuda *c, uint64_t capacity_bytes, gm_measured *m,
                          const volatile sig_atomic_t *stop, gm_device **out, gm_err *err)
{
    gm_device *d = calloc(1, sizeof *d);
    cuda_dev *cd = calloc(1, sizeof *cd);
    if (!d || !cd || gm_addrmap_init(&cd->live, 1024) != GM_OK) {
        free(d);
        free(cd);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    cd->c = c;
    cd->m = m;
    cd->stop = stop;
    cd->t0 = mono_ns();
    d->ops = &cuda_ops;
    d->impl = cd;
    d->capacity_bytes = capacity_bytes;
    *out = d;
    return GM_OK;
}

void gm_cuda_device_set_pacer(gm_device *d, void (*before_call)(void *ctx), void *ctx)
{
    cuda_dev *cd = d->impl;
    cd->pace = before_call;
    cd->pace_ctx = ctx;
}

uint64_t gm_cuda_device_held(const gm_device *d)
{
    const cuda_dev *cd = d->impl;
    uint64_t n = cd->live_bytes, g = cd->c->info.granularity_bytes;
    for (const vres *v = cd->res; v; v = v->next)
        for (size_t i = 0; i < v->n; i++)
            n += v->mapped[i] ? g : 0;
    return n;
}

int gm_cuda_device_failed(const gm_device *d)
{
    return ((const cuda_dev *)d->impl)->failed;
}
