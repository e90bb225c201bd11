/* gpus.c - the table of gpus.h; the sources of every figure are in
 * traces/GPUS.md (public nvidia-smi and deviceQuery output). */
#include "gpus.h"

#include <stdio.h>
#include <strings.h>

/* clang-format off */
static const gm_gpu gpus[] = {
    {"a100-40gb",      "NVIDIA A100-SXM4-40GB",   42298834944ull,  40960, NULL},
    {"a100-40gb-pcie", "NVIDIA A100-PCIE-40GB",   42285268992ull,  40960, NULL},
    {"a100-80gb",      "NVIDIA A100-SXM4-80GB",   85100068864ull,  81920, NULL},
    {"a100-80gb-pcie", "NVIDIA A100 80GB PCIe",   84974239744ull,  81920, NULL},
    {"h100-80gb",      "NVIDIA H100 80GB HBM3",   85045477376ull,  81559, NULL},
    {"h100-pcie",      "NVIDIA H100 PCIe",        85045477376ull,  81559,
     "same memory as the SXM board; no public deviceQuery found"},
    {"h100-nvl",       "NVIDIA H100 NVL",         99861594112ull,  95830, NULL},
    {"h200",           "NVIDIA H200",             150021734400ull, 143771, NULL},
    {"gh200-96gb",     "NVIDIA GH200 480GB",      101468602368ull, 97871, NULL},
    {"b200",           "NVIDIA B200",             191514411008ull, 183359, NULL},
    {"l4",             "NVIDIA L4",               23570219008ull,  23034, NULL},
    {"l40s",           "NVIDIA L40S",             47803596800ull,  46068, NULL},
    {"a10",            "NVIDIA A10",              23595909120ull,  23028, NULL},
    {"a10g",           "NVIDIA A10G",             23595909120ull,  23028,
     "same memory as the A10; no public deviceQuery found"},
    {"t4",             "Tesla T4",                15642329088ull,  15360, NULL},
    {"v100-16gb",      "Tesla V100-SXM2-16GB",    16928342016ull,  16384, NULL},
    {"v100-32gb",      "Tesla V100-SXM2-32GB",    34072559616ull,  32768, NULL},
    {"rtx3090",        "NVIDIA GeForce RTX 3090", 25327697920ull,  24576, NULL},
    {"rtx4090",        "NVIDIA GeForce RTX 4090", 25386352640ull,  24564, NULL},
    {"rtxa6000",       "NVIDIA RTX A6000",        47834660864ull,  46068, "with ECC on (its default)"},
};
/* clang-format on */

#define NGPUS (sizeof gpus / sizeof gpus[0])

const gm_gpu *gm_gpu_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < NGPUS; i++)
        if (!strcasecmp(name, gpus[i].key) || !strcasecmp(name, gpus[i].name)) return &gpus[i];
    return NULL;
}

const gm_gpu *gm_gpu_at(size_t i)
{
    return i < NGPUS ? &gpus[i] : NULL;
}

void gm_gpu_keys(char *buf, size_t len)
{
    size_t n = 0;
    if (len) buf[0] = 0;
    for (size_t i = 0; i < NGPUS && n < len; i++) {
        int w = snprintf(buf + n, len - n, "%s%s", i ? ", " : "", gpus[i].key);
        if (w < 0) break;
        n += (size_t)w;
    }
}
