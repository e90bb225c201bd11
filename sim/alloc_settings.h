/*
 * alloc_settings.h - the settings of an allocator model other than
 * PyTorch's (--alloc-conf for cuda-async, rmm-*, tf-bfc), in the syntax
 * PYTORCH_CUDA_ALLOC_CONF uses: "key:value" pairs separated by ',', a value
 * in [...] may itself hold ',' and ':'. Sizes take units (1GiB, 512MB),
 * durations too (100ms), booleans True/False/true/false/1/0.
 *
 * Every key a model reads is marked used; gm_settings_check() then refuses
 * a key no one read, naming it and the keys the model knows, so a typo is an
 * error and not a silent default.
 */
#ifndef GM_ALLOC_SETTINGS_H
#define GM_ALLOC_SETTINGS_H

#include <stdint.h>

#include "base/err.h"

#define GM_SETTINGS_MAX 32

typedef struct gm_setting {
    char key[64];
    char val[256];
    int used;
} gm_setting;

typedef struct gm_settings {
    const char *model; /* for messages: "allocator rmm-pool" */
    const char *conf;  /* the string as given                */
    gm_setting v[GM_SETTINGS_MAX];
    int n;
} gm_settings;

/* Split conf ("" or NULL: no settings). GM_EINVAL on a piece without ':' or
 * a key given twice. */
int gm_settings_parse(const char *model, const char *conf, gm_settings *s, gm_err *err);

/* The value of key (and mark it used), NULL when absent. */
const char *gm_settings_get(gm_settings *s, const char *key);

/* Typed getters: 1 = found (*out set), 0 = absent (*out untouched), or a
 * negative GM_E* with err naming the model, key and value. */
int gm_settings_size(gm_settings *s, const char *key, uint64_t *out, gm_err *err);
int gm_settings_time(gm_settings *s, const char *key, uint64_t *out_ns, gm_err *err);
int gm_settings_bool(gm_settings *s, const char *key, int *out, gm_err *err);
int gm_settings_double(gm_settings *s, const char *key, double lo, double hi, double *out,
                       gm_err *err);
int gm_settings_int(gm_settings *s, const char *key, long lo, long hi, long *out, gm_err *err);

/* GM_EINVAL naming the first key nobody read; `known` lists the model's
 * keys for the message ("initial_pool_size, maximum_pool_size"). */
int gm_settings_check(const gm_settings *s, const char *known, gm_err *err);

#endif
