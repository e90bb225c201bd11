/*
 * fake_cuda.c - a stand-in libcuda.so.1 for testing gmcapture on a machine
 * without a GPU. cuInit does what the real driver does with
 * CUDA_INJECTION64_PATH: load the library and call its InitializeInjection
 * (once); the device queries answer for one made-up device. Test use only:
 * it is built into a separate folder and never installed.
 */
#include <cuda.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load_injection(void)
{
    const char *path = getenv("CUDA_INJECTION64_PATH");
    if (!path || !*path) return;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "fake libcuda: cannot load %s: %s\n", path, dlerror());
        return;
    }
    int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
    if (init) init();
}

FAKE_EXPORT CUresult cuInit(unsigned int flags)
{
    (void)flags;
    pthread_once(&once, load_injection);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetCount(int *n)
{
    *n = 1;
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
    snprintf(name, (size_t)len, "Fake GPU");
    return CUDA_SUCCESS;
}

/* cuda.h maps cuDeviceTotalMem to cuDeviceTotalMem_v2, the symbol callers bind to */
FAKE_EXPORT CUresult cuDeviceTotalMem(size_t *bytes, CUdevice d)
{
    (void)d;
    *bytes = (size_t)80 << 30;
    return CUDA_SUCCESS;
}
