/* report.c - see report.h. */
#include "report.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gm_report *gm_report_new(void)
{
    return calloc(1, sizeof(gm_report));
}

void gm_report_free(gm_report *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->items[i].key);
        free(r->items[i].s);
    }
    free(r->items);
    free(r);
}

/* A new item at the end (NULL and r->failed set when out of memory). */
static gm_kv *add(gm_report *r, const char *key, int type, int unit)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        gm_kv *v = realloc(r->items, cap * sizeof *v);
        if (!v) {
            r->failed = 1;
            return NULL;
        }
        r->items = v;
        r->cap = cap;
    }
    gm_kv *kv = &r->items[r->n];
    memset(kv, 0, sizeof *kv);
    kv->key = strdup(key);
    if (!kv->key) {
        r->failed = 1;
        return NULL;
    }
    kv->type = (uint8_t)type;
    kv->unit = (uint8_t)unit;
    r->n++;
    return kv;
}

void gm_report_int(gm_report *r, const char *key, int unit, int64_t v)
{
    gm_kv *kv = add(r, key, GM_KV_INT, unit);
    if (kv) kv->v.i = v;
}

void gm_report_real(gm_report *r, const char *key, int unit, double v)
{
    if (!isfinite(v)) return; /* JSON has no NaN or infinity */
    gm_kv *kv = add(r, key, GM_KV_REAL, unit);
    if (kv) kv->v.d = v;
}

void gm_report_null(gm_report *r, const char *key, int unit)
{
    add(r, key, GM_KV_NULL, unit);
}

void gm_report_bool(gm_report *r, const char *key, int v)
{
    gm_kv *kv = add(r, key, GM_KV_BOOL, GM_KV_PLAIN);
    if (kv) kv->v.b = v != 0;
}

static void add_text(gm_report *r, const char *key, int type, const char *v)
{
    char *s = strdup(v);
    gm_kv *kv = s ? add(r, key, type, GM_KV_PLAIN) : NULL;
    if (kv)
        kv->s = s;
    else {
        free(s);
        r->failed = 1;
    }
}

void gm_report_str(gm_report *r, const char *key, const char *v)
{
    add_text(r, key, GM_KV_STR, v);
}

void gm_report_raw(gm_report *r, const char *key, const char *json)
{
    add_text(r, key, GM_KV_RAW, json);
}

void gm_report_summary(gm_report *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->summary, sizeof r->summary, fmt, ap);
    va_end(ap);
}

const gm_kv *gm_report_get(const gm_report *r, const char *key)
{
    for (size_t i = 0; r && i < r->n; i++)
        if (!strcmp(r->items[i].key, key)) return &r->items[i];
    return NULL;
}
