/*
 * gen_resnet.h - a synthetic ResNet-50 workload (torchvision's resnet50:
 * Bottleneck v1.5, stride on the 3x3 conv) as PyTorch's CUDA caching
 * allocator sees it, on the shared autograd and training-loop model
 * (gen_graph.h, gen_train.h).
 *
 * Parameters and buffers in model.to() order: conv1 [64, 3, 7, 7], bn1
 * (weight, bias, running_mean, running_var, num_batches_tracked); per
 * Bottleneck conv1 1x1, bn1, conv2 3x3, bn2, conv3 1x1, bn3 and, in the
 * first block of each stage, downsample conv 1x1 + bn; fc [classes, 2048]
 * and its bias. The 16 Bottleneck blocks are the "layers" of
 * --checkpoint and the ZeRO units.
 *
 * Forward per micro-batch: images [batch, 3, R, R] fp32 and int64 labels;
 * conv1 (stride 2) -> bn -> relu_ -> maxpool (stride 2); stages of 3, 4,
 * 6, 3 blocks at R/4, R/8, R/16, R/32; each conv output, BN output (kept by
 * the in-place ReLU) and BN's fp32 save_mean / save_invstd; avgpool, fc,
 * cross entropy. traces/GENERATORS.md gives the bytes per stage.
 */
#ifndef GM_GEN_RESNET_H
#define GM_GEN_RESNET_H

#include <stddef.h>
#include <stdint.h>

#include "gen_common.h"
#include "gen_train.h"
#include "trace.h"

typedef struct gm_resnet_params {
    gm_train_params t; /* batch, precision, optimizer, what-ifs (SGD by default) */
    int resolution;    /* input height = width (224)                 */
    int classes;       /* fc outputs (1000)                          */
} gm_resnet_params;

/* Batch 32, 224 x 224, fp32, SGD with momentum 0.9 (torchvision's recipe). */
void gm_resnet_defaults(gm_resnet_params *p);
int gm_resnet_check(const gm_resnet_params *p, gm_err *err);
uint64_t gm_resnet_param_count(const gm_resnet_params *p);
void gm_resnet_describe(const gm_resnet_params *p, char *buf, size_t len);
int gm_resnet_generate(const gm_resnet_params *p, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                       void *ctx, gm_gen_stats *stats, gm_err *err);
/* A trace file (source "synthetic:resnet50"); no file is left at path on error. */
int gm_resnet_write_trace(const char *path, const gm_resnet_params *p,
                          const gm_trace_write_opts *opts, const char *command, gm_gen_stats *stats,
                          gm_err *err);

#endif
