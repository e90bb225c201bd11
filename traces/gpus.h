/*
 * gpus.h - the memory the driver reports for common GPUs, so a user can say
 * `--gpu h100-80gb` instead of a size (`gmsim import`, `run`, `compare`,
 * `fit`). traces/GPUS.md gives each figure's source.
 *
 * Two totals exist: nvidia-smi's "Total" (the framebuffer, driver-reserved
 * memory included since driver R510) and CUDA's totalGlobalMem (what
 * cudaMemGetInfo, deviceQuery and torch.cuda.get_device_properties().
 * total_memory report: nvidia-smi's total minus the reserved part). The
 * second is what a process can allocate from, and what PyTorch's
 * set_per_process_memory_fraction and expandable segments are sized by, so
 * it is the capacity --gpu gives. It drifts by a few tens of MiB between
 * driver versions; the figures are from recent (R550+) drivers.
 */
#ifndef GM_GPUS_H
#define GM_GPUS_H

#include <stddef.h>
#include <stdint.h>

typedef struct gm_gpu {
    const char *key;     /* --gpu NAME: "h100-80gb"                            */
    const char *name;    /* as the driver prints it: "NVIDIA H100 80GB HBM3"    */
    uint64_t cuda_bytes; /* totalGlobalMem: the capacity --gpu gives            */
    uint64_t smi_mib;    /* nvidia-smi "Total", MiB                             */
    const char *note;    /* how cuda_bytes was obtained, when not measured       */
} gm_gpu;

/* The GPU whose key is name (case-insensitive; the driver's name too), or NULL. */
const gm_gpu *gm_gpu_find(const char *name);
/* The i-th entry, NULL past the end. */
const gm_gpu *gm_gpu_at(size_t i);
/* "a100-40gb, a100-40gb-pcie, ..." for messages (truncated to len). */
void gm_gpu_keys(char *buf, size_t len);

#endif
