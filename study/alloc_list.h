/*
 * alloc_list.h - the list of allocators (and their settings) that `gmsim
 * compare --allocators` and `gmsim sweep` run: "NAME[:SETTINGS]" entries,
 * each name checked against the registry (sim/alloc.h).
 */
#ifndef GM_ALLOC_LIST_H
#define GM_ALLOC_LIST_H

#include <stddef.h>

#include "base/err.h"

typedef struct gm_alloc_choice {
    char name[32];  /* a registered model                              */
    char conf[512]; /* its settings (--alloc-conf syntax)               */
    int conf_given; /* 0: no ':' given, the run's --alloc-conf applies  */
} gm_alloc_choice;

/* Split a comma-separated list. An entry starts with a model's name,
 * alone or followed by ':' and its settings; a piece that does not start
 * with a model's name continues the previous entry's settings, so settings
 * keep their commas: "pytorch:max_split_size_mb:128,expandable_segments:
 * True,rmm-pool:initial_pool_size:8GiB,cuda-async" is three entries.
 * "NAME:" gives empty settings (the model's defaults). GM_EUSAGE naming
 * the models on an unknown name, an empty list or an entry given twice.
 * *out is malloc'd (free() it). */
int gm_alloc_list_split(const char *list, gm_alloc_choice **out, size_t *n, gm_err *err);

/* "rmm-pool:initial_pool_size:8GiB", or "rmm-pool" (no settings given). */
void gm_alloc_choice_label(const gm_alloc_choice *c, char *buf, size_t len);

#endif
