/*
 * device_cuda.h - the real GPU behind the device seam (sim/device.h).
 *
 * The CUDA driver is loaded at run time (dlopen of libcuda.so.1), so
 * gmreplay starts on a machine without one and says so. One gm_cuda is a
 * driver session: the library, device `ordinal`, its primary context (made
 * current in the calling thread), and the ballast that shrinks the card to
 * the emulated capacity (replay/ballast.h).
 *
 * The backend (gm_cuda_device_create) implements gm_device_ops with:
 *   mem_alloc/mem_free     cuMemAlloc / cuMemFree;
 *   va_reserve/va_release  cuMemAddressReserve / cuMemAddressFree;
 *   mem_map                cuMemCreate + cuMemMap per granule (2 MiB), then
 *                          one cuMemSetAccess over the range;
 *   mem_unmap              cuCtxSynchronize (PyTorch synchronizes before it
 *                          unmaps), then cuMemUnmap + cuMemRelease per granule.
 * cuMemUnmap cannot unmap part of a mapping, and an allocator may give back
 * any page-aligned part of what it mapped, so each granule has its own
 * physical handle (PyTorch's expandable segments keep one per 2 MiB or
 * 20 MiB page; the memory taken is the same, the call count differs).
 *
 * Every call is timed with clock_gettime and reported in *cost_ns, so the
 * allocator's driver counters hold measured time. A request that would take
 * the tenants past the emulated capacity (used + context overheads +
 * size > capacity, the simulator's rule) is refused without asking the
 * driver: gmreplay never asks for more than the cap. CUDA_ERROR_OUT_OF_MEMORY
 * from the driver is GM_EOOM too. Both are counted apart in gm_measured,
 * with cuMemGetInfo's free memory at that moment; so is every other driver
 * error, which also stops further allocations (the run is then invalid).
 *
 * Single-threaded: the engine runs every tenant in one thread.
 */
#ifndef GM_DEVICE_CUDA_H
#define GM_DEVICE_CUDA_H

#include <signal.h>
#include <stdint.h>

#include "base/err.h"
#include "sim/device.h"
#include "sim/measured.h"

typedef struct gm_cuda gm_cuda;

typedef struct gm_cuda_info {
    char library[256];  /* the libcuda that was loaded (its path)     */
    int driver_version; /* cuDriverGetVersion                         */
    char name[128];     /* cuDeviceGetName                            */
    int ordinal;
    uint64_t total_bytes;       /* cuDeviceTotalMem                           */
    uint64_t free_at_open;      /* cuMemGetInfo right after the context       */
    uint64_t granularity_bytes; /* VMM minimum granularity (2 MiB if unknown) */
    int vmm_supported;
} gm_cuda_info;

/* Load `lib` (NULL: "libcuda.so.1"), initialize, open device `ordinal` and
 * make its primary context current. GM_EIO with a message that starts with
 * "no CUDA driver" or "no GPU" when there is none. */
int gm_cuda_open(const char *lib, int ordinal, gm_cuda **out, gm_err *err);
/* Release the ballast and the context, unload the library. NULL is fine. */
void gm_cuda_close(gm_cuda *c);
const gm_cuda_info *gm_cuda_info_get(const gm_cuda *c);
int gm_cuda_mem_info(gm_cuda *c, uint64_t *free_bytes, uint64_t *total_bytes, gm_err *err);
/* While *stop is non-zero (a signal arrived), the ballast and calibration
 * loops stop early with GM_EIO "interrupted". NULL: never. */
void gm_cuda_set_stop(gm_cuda *c, const volatile sig_atomic_t *stop);
int gm_cuda_stopped(const gm_cuda *c);
/* "CUDA_ERROR_X (text)" for a CUresult. */
const char *gm_cuda_strerror(gm_cuda *c, int cu_result, char *buf, size_t len);

/* Timed raw calls, for calibration: GM_OK, GM_EOOM, or GM_EIO (message set). */
int gm_cuda_alloc_timed(gm_cuda *c, uint64_t bytes, uint64_t *dptr, uint64_t *ns, gm_err *err);
int gm_cuda_free_timed(gm_cuda *c, uint64_t dptr, uint64_t *ns, gm_err *err);
/* Reserve `bytes` of address space, map it granule by granule (timed:
 * create + map + set access), unmap and release it (timed), free the range. */
int gm_cuda_vmm_timed(gm_cuda *c, uint64_t bytes, uint64_t *map_ns, uint64_t *unmap_ns,
                      gm_err *err);

/* Hold ballast until cuMemGetInfo's free memory is target_free (to the
 * granule; replay/ballast.h). Fills m's capacity fields. GM_EIO when the
 * driver will not give it (memory taken by another process meanwhile). */
int gm_cuda_ballast_hold(gm_cuda *c, uint64_t target_free, gm_measured *m, gm_err *err);
void gm_cuda_ballast_release(gm_cuda *c);

/* The backend: capacity_bytes is the emulated card; m receives latencies,
 * refusals and errors; while *stop is non-zero (a signal arrived), new
 * memory is refused without asking the driver and without being counted. */
int gm_cuda_device_create(gm_cuda *c, uint64_t capacity_bytes, gm_measured *m,
                          const volatile sig_atomic_t *stop, gm_device **out, gm_err *err);
/* Called before every driver call the backend makes for the allocator
 * (gmreplay's --pace waits there). */
void gm_cuda_device_set_pacer(gm_device *d, void (*before_call)(void *ctx), void *ctx);
/* Memory still held through the backend (0 after a clean run); gm_device_destroy
 * frees it. */
uint64_t gm_cuda_device_held(const gm_device *d);
/* 1 once a driver call failed with something other than OOM (see m->error). */
int gm_cuda_device_failed(const gm_device *d);

#endif
