/*
 * fake_cuda.c - a stand-in libcuda.so.1 for testing gmreplay without a GPU.
 *
 * One made-up device whose memory is bookkept like a real card's: a context
 * takes GM_FAKE_CUDA_CONTEXT bytes once the primary context is retained;
 * cuMemAlloc and cuMemCreate take their size rounded to 2 MiB (plus
 * GM_FAKE_CUDA_EXTRA bytes of "driver bookkeeping" each, default 0) and fail
 * with CUDA_ERROR_OUT_OF_MEMORY when that is more than is free. It is strict
 * where the real driver is: cuMemUnmap must name a whole mapping, cuMemMap
 * needs a reserved, unmapped range and a whole handle, cuMemAddressFree a
 * whole reservation, cuMemFree an allocation.
 *
 * Environment (read at cuInit):
 *   GM_FAKE_CUDA_TOTAL      device memory (default 16 GiB)
 *   GM_FAKE_CUDA_CONTEXT    context overhead (default 300 MiB)
 *   GM_FAKE_CUDA_EXTRA      extra bytes per allocation (default 0)
 *   GM_FAKE_CUDA_NO_DEVICE  cuInit returns CUDA_ERROR_NO_DEVICE
 *   GM_FAKE_CUDA_NO_VMM     the device does not support VMM
 *   GM_FAKE_CUDA_SIGNAL_AT  raise SIGTERM inside the N-th cuMemAlloc/cuMemCreate
 *   GM_FAKE_CUDA_ERROR_AT   the N-th cuMemAlloc/cuMemCreate fails with
 *                           CUDA_ERROR_ILLEGAL_ADDRESS
 *   GM_FAKE_CUDA_REPORT     file to append a line to when the library unloads:
 *                           what is still allocated, peak use and call counts
 * Tests in the same process can also call fake_cuda_set() / fake_cuda_get().
 * Test use only: built into its own folder, never installed.
 */
#include <cuda.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
#define GRAN (2ull << 20)
#define MAXN 65536

typedef struct range {
    uint64_t addr, size;
    uint64_t handle; /* mappings: the handle mapped there */
} range;

typedef struct handle {
    uint64_t id, size;
    int released, maps;
} handle;

static struct {
    int init;
    uint64_t total, context, extra;
    int no_device, no_vmm;
    uint64_t signal_at, error_at;
    int ctx_refs;
    uint64_t used, peak;
    range allocs[MAXN];
    size_t n_allocs;
    range res[256];
    size_t n_res;
    range maps[MAXN];
    size_t n_maps;
    handle handles[MAXN];
    size_t n_handles;
    uint64_t next_ptr, next_va, next_handle;
    uint64_t n_alloc_calls, n_free_calls, n_create_calls, n_ooms, n_errors;
} F;

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 0) : def;
}

static void setup(void)
{
    if (F.init) return;
    F.init = 1;
    F.total = env_u64("GM_FAKE_CUDA_TOTAL", 16ull << 30);
    F.context = env_u64("GM_FAKE_CUDA_CONTEXT", 300ull << 20);
    F.extra = env_u64("GM_FAKE_CUDA_EXTRA", 0);
    F.no_device = getenv("GM_FAKE_CUDA_NO_DEVICE") != NULL;
    F.no_vmm = getenv("GM_FAKE_CUDA_NO_VMM") != NULL;
    F.signal_at = env_u64("GM_FAKE_CUDA_SIGNAL_AT", 0);
    F.error_at = env_u64("GM_FAKE_CUDA_ERROR_AT", 0);
    F.next_ptr = 0x7f0000000000ull;
    F.next_va = 0x500000000000ull;
    F.next_handle = 1;
}

static uint64_t rnd(uint64_t b)
{
    return (b + GRAN - 1) / GRAN * GRAN;
}

static uint64_t free_bytes(void)
{
    return F.used >= F.total ? 0 : F.total - F.used;
}

static void take(uint64_t b)
{
    F.used += b;
    if (F.used > F.peak) F.peak = F.used;
}

/* Every cuMemAlloc / cuMemCreate: the test hooks, then the memory check. */
static CUresult admit(uint64_t phys)
{
    uint64_t n = ++F.n_alloc_calls;
    if (F.signal_at && n == F.signal_at) raise(SIGTERM);
    if (F.error_at && n == F.error_at) {
        F.n_errors++;
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    if (phys > free_bytes()) {
        F.n_ooms++;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    take(phys);
    return CUDA_SUCCESS;
}

/* ---- test controls ---- */

FAKE_EXPORT void fake_cuda_set(const char *key, uint64_t v)
{
    setup();
    if (!strcmp(key, "total"))
        F.total = v;
    else if (!strcmp(key, "extra"))
        F.extra = v;
    else if (!strcmp(key, "error_at"))
        F.error_at = v ? F.n_alloc_calls + v : 0;
    else if (!strcmp(key, "no_vmm"))
        F.no_vmm = (int)v;
    else if (!strcmp(key, "no_device"))
        F.no_device = (int)v;
}

FAKE_EXPORT uint64_t fake_cuda_get(const char *key)
{
    if (!strcmp(key, "used")) return F.used;
    if (!strcmp(key, "allocs")) return F.n_allocs;
    if (!strcmp(key, "maps")) return F.n_maps;
    if (!strcmp(key, "handles")) return F.n_handles;
    if (!strcmp(key, "reservations")) return F.n_res;
    if (!strcmp(key, "alloc_calls")) return F.n_alloc_calls;
    if (!strcmp(key, "ooms")) return F.n_ooms;
    if (!strcmp(key, "peak")) return F.peak;
    return 0;
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("GM_FAKE_CUDA_REPORT");
    if (!path || !F.init) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    uint64_t held = 0;
    for (size_t i = 0; i < F.n_allocs; i++)
        held += F.allocs[i].size;
    fprintf(f,
            "allocs=%zu alloc_bytes=%llu handles=%zu mappings=%zu reservations=%zu "
            "context_refs=%d used=%llu peak=%llu alloc_calls=%llu ooms=%llu errors=%llu\n",
            F.n_allocs, (unsigned long long)held, F.n_handles, F.n_maps, F.n_res, F.ctx_refs,
            (unsigned long long)F.used, (unsigned long long)F.peak,
            (unsigned long long)F.n_alloc_calls, (unsigned long long)F.n_ooms,
            (unsigned long long)F.n_errors);
    fclose(f);
}

/* ---- initialization, device, context ---- */

FAKE_EXPORT CUresult cuInit(unsigned int flags)
{
    (void)flags;
    setup();
    return F.no_device ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetCount(int *n)
{
    *n = F.no_device ? 0 : 1;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    (void)d;
    snprintf(name, (size_t)len, "Fake GPU (gmreplay tests)");
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceTotalMem(size_t *bytes, CUdevice d)
{
    (void)d;
    *bytes = F.total;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)d;
    *v = a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ? !F.no_vmm : 0;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d)
{
    (void)d;
    if (F.ctx_refs++ == 0) take(F.context);
    *ctx = (CUcontext)(uintptr_t)0x1000;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice d)
{
    (void)d;
    if (F.ctx_refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--F.ctx_refs == 0) F.used -= F.context;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    (void)ctx;
    return F.ctx_refs ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

FAKE_EXPORT CUresult cuCtxSynchronize(void)
{
    return F.ctx_refs ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

FAKE_EXPORT CUresult cuMemGetInfo(size_t *free_b, size_t *total)
{
    if (!F.ctx_refs) return CUDA_ERROR_INVALID_CONTEXT;
    *free_b = free_bytes();
    *total = F.total;
    return CUDA_SUCCESS;
}

/* ---- cuMemAlloc / cuMemFree ---- */

FAKE_EXPORT CUresult cuMemAlloc(CUdeviceptr *p, size_t bytes)
{
    if (!F.ctx_refs) return CUDA_ERROR_INVALID_CONTEXT;
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    if (F.n_allocs == MAXN) return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t phys = rnd(bytes) + F.extra;
    CUresult r = admit(phys);
    if (r != CUDA_SUCCESS) return r;
    F.allocs[F.n_allocs++] = (range){F.next_ptr, phys, 0};
    *p = F.next_ptr;
    F.next_ptr += rnd(bytes);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemFree(CUdeviceptr p)
{
    F.n_free_calls++;
    for (size_t i = 0; i < F.n_allocs; i++)
        if (F.allocs[i].addr == p) {
            F.used -= F.allocs[i].size;
            F.allocs[i] = F.allocs[--F.n_allocs];
            return CUDA_SUCCESS;
        }
    F.n_errors++;
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---- virtual memory management ---- */

FAKE_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                                   CUmemAllocationGranularity_flags option)
{
    (void)prop, (void)option;
    if (F.no_vmm) return CUDA_ERROR_NOT_SUPPORTED;
    *g = GRAN;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align,
                                         CUdeviceptr addr, unsigned long long flags)
{
    (void)align, (void)addr, (void)flags;
    if (F.no_vmm) return CUDA_ERROR_NOT_SUPPORTED;
    if (size == 0 || size % GRAN || F.n_res == 256) {
        F.n_errors++;
        return CUDA_ERROR_INVALID_VALUE;
    }
    F.res[F.n_res++] = (range){F.next_va, size, 0};
    *p = F.next_va;
    F.next_va += size + GRAN;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemAddressFree(CUdeviceptr p, size_t size)
{
    for (size_t i = 0; i < F.n_res; i++)
        if (F.res[i].addr == p && F.res[i].size == size) {
            for (size_t k = 0; k < F.n_maps; k++)
                if (F.maps[k].addr >= p && F.maps[k].addr < p + size) {
                    F.n_errors++;
                    return CUDA_ERROR_INVALID_VALUE; /* still mapped */
                }
            F.res[i] = F.res[--F.n_res];
            return CUDA_SUCCESS;
        }
    F.n_errors++;
    return CUDA_ERROR_INVALID_VALUE;
}

static handle *find_handle(uint64_t id)
{
    for (size_t i = 0; i < F.n_handles; i++)
        if (F.handles[i].id == id) return &F.handles[i];
    return NULL;
}

static void drop_handle_if_done(handle *h)
{
    if (h->released && h->maps == 0) {
        F.used -= rnd(h->size) + F.extra;
        *h = F.handles[--F.n_handles];
    }
}

FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags)
{
    (void)prop, (void)flags;
    if (F.no_vmm) return CUDA_ERROR_NOT_SUPPORTED;
    if (size == 0 || size % GRAN || F.n_handles == MAXN) {
        F.n_errors++;
        return CUDA_ERROR_INVALID_VALUE;
    }
    F.n_create_calls++;
    CUresult r = admit(size + F.extra);
    if (r != CUDA_SUCCESS) return r;
    F.handles[F.n_handles++] = (handle){F.next_handle, size, 0, 0};
    *h = F.next_handle++;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle id)
{
    handle *h = find_handle(id);
    if (!h || h->released) {
        F.n_errors++;
        return CUDA_ERROR_INVALID_VALUE;
    }
    h->released = 1;
    drop_handle_if_done(h);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset,
                              CUmemGenericAllocationHandle id, unsigned long long flags)
{
    (void)flags;
    handle *h = find_handle(id);
    int inside = 0;
    for (size_t i = 0; i < F.n_res; i++)
        inside |= p >= F.res[i].addr && p + size <= F.res[i].addr + F.res[i].size;
    for (size_t k = 0; k < F.n_maps; k++)
        if (p < F.maps[k].addr + F.maps[k].size && F.maps[k].addr < p + size)
            inside = 0; /* overlaps a mapping */
    if (!h || h->released || offset != 0 || size != h->size || !inside || F.n_maps == MAXN) {
        F.n_errors++;
        return CUDA_ERROR_INVALID_VALUE;
    }
    F.maps[F.n_maps++] = (range){p, size, id};
    h->maps++;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t size)
{
    for (size_t k = 0; k < F.n_maps; k++)
        if (F.maps[k].addr == p && F.maps[k].size == size) {
            handle *h = find_handle(F.maps[k].handle);
            F.maps[k] = F.maps[--F.n_maps];
            if (h) {
                h->maps--;
                drop_handle_if_done(h);
            }
            return CUDA_SUCCESS;
        }
    F.n_errors++;
    return CUDA_ERROR_INVALID_VALUE; /* not a whole mapping */
}

FAKE_EXPORT CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc,
                                    size_t count)
{
    (void)desc;
    uint64_t covered = 0;
    for (size_t k = 0; k < F.n_maps; k++)
        if (F.maps[k].addr >= p && F.maps[k].addr + F.maps[k].size <= p + size)
            covered += F.maps[k].size;
    if (count != 1 || covered != size) {
        F.n_errors++;
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* ---- errors ---- */

FAKE_EXPORT CUresult cuGetErrorName(CUresult r, const char **s)
{
    switch (r) {
    case CUDA_SUCCESS:
        *s = "CUDA_SUCCESS";
        break;
    case CUDA_ERROR_OUT_OF_MEMORY:
        *s = "CUDA_ERROR_OUT_OF_MEMORY";
        break;
    case CUDA_ERROR_NO_DEVICE:
        *s = "CUDA_ERROR_NO_DEVICE";
        break;
    case CUDA_ERROR_INVALID_VALUE:
        *s = "CUDA_ERROR_INVALID_VALUE";
        break;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        *s = "CUDA_ERROR_ILLEGAL_ADDRESS";
        break;
    case CUDA_ERROR_NOT_SUPPORTED:
        *s = "CUDA_ERROR_NOT_SUPPORTED";
        break;
    default:
        *s = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGetErrorString(CUresult r, const char **s)
{
    switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY:
        *s = "out of memory";
        break;
    case CUDA_ERROR_NO_DEVICE:
        *s = "no CUDA-capable device is detected";
        break;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        *s = "an illegal memory access was encountered";
        break;
    default:
        *s = "fake error";
        break;
    }
    return CUDA_SUCCESS;
}
