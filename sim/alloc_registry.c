/*
 * alloc_registry.c - the allocator models by name. Adding a model is one
 * file sim/alloc_<name>.c defining `const gm_alloc_ops gm_alloc_<ident>`
 * (alloc.h) whose .name is "<name>", and one line X(<ident>, "<name>") in
 * the list below. The first is the default.
 */
#include "alloc.h"

#include <string.h>

#define GM_ALLOC_MODELS(X)                                                                         \
    X(pytorch, "pytorch")                                                                          \
    X(direct, "direct")                                                                            \
    X(cuda_async, "cuda-async")                                                                    \
    X(rmm_pool, "rmm-pool")                                                                        \
    X(rmm_arena, "rmm-arena")                                                                      \
    X(rmm_binning, "rmm-binning")                                                                  \
    X(tf_bfc, "tf-bfc")

#define DECLARE(n, s) extern const gm_alloc_ops gm_alloc_##n;
GM_ALLOC_MODELS(DECLARE)
#define ENTRY(n, s) &gm_alloc_##n,
static const gm_alloc_ops *const models[] = {GM_ALLOC_MODELS(ENTRY)};
#define NAME(n, s) ", " s
static const char names[] = GM_ALLOC_MODELS(NAME); /* ", pytorch, direct, ..." */
#define NMODELS (sizeof models / sizeof models[0])

const gm_alloc_ops *gm_alloc_find(const char *name)
{
    for (size_t i = 0; i < NMODELS; i++)
        if (!strcmp(models[i]->name, name)) return models[i];
    return NULL;
}

const char *gm_alloc_names(void)
{
    return names + 2;
}

const gm_alloc_ops *gm_alloc_at(size_t i)
{
    return i < NMODELS ? models[i] : NULL;
}
