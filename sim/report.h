/*
 * report.h - what a release policy says about its own run: a short list of
 * typed key/value items, each with the unit the policy declares, plus an
 * optional one-line summary for comparison tables.
 *
 * The simulator only stores the list (gm_tenant_result.policy_report);
 * reports/kv.h renders it, in one place, as the result's "policy_report"
 * JSON object, as the run table's "key: value" lines and as the HTML
 * report's rows. Units are declared here, never guessed from key names.
 *
 * Keys are unique and items keep the order they were added in. A key
 * "group.name" puts the item in a group: a nested object in JSON, the
 * dotted name in tables. A value that JSON cannot hold (a non-finite real)
 * is left out.
 */
#ifndef GM_REPORT_H
#define GM_REPORT_H

#include <stddef.h>
#include <stdint.h>

/* What a value is. */
enum gm_kv_type {
    GM_KV_NULL = 0, /* no value (e.g. a ratio of nothing): null in JSON       */
    GM_KV_INT,      /* v.i                                                    */
    GM_KV_REAL,     /* v.d                                                    */
    GM_KV_BOOL,     /* v.b                                                    */
    GM_KV_STR,      /* s                                                      */
    GM_KV_RAW,      /* s: compact JSON of a value no other type holds (only
                       from a saved result: reports/kv.h, gm_report_from_json) */
};

/* What a number measures: how tables show it. */
enum gm_kv_unit {
    GM_KV_PLAIN = 0, /* a count or a plain number              */
    GM_KV_BYTES,     /* bytes: "1.50 GiB"                      */
    GM_KV_NS,        /* nanoseconds: "12.3 ms"                 */
    GM_KV_RATIO,     /* a fraction 0..1 shown as a percentage  */
};

typedef struct gm_kv {
    char *key; /* owned */
    uint8_t type, unit;
    union {
        int64_t i;
        double d;
        int b;
    } v;
    char *s; /* GM_KV_STR, GM_KV_RAW: owned */
} gm_kv;

typedef struct gm_report {
    gm_kv *items;
    size_t n, cap;
    char summary[256]; /* one line for comparison tables; "" = none */
    int failed;        /* an item was dropped for lack of memory        */
} gm_report;

/* A new, empty report (NULL when out of memory) and its release. */
gm_report *gm_report_new(void);
void gm_report_free(gm_report *r);

void gm_report_int(gm_report *r, const char *key, int unit, int64_t v);
void gm_report_real(gm_report *r, const char *key, int unit, double v);
void gm_report_null(gm_report *r, const char *key, int unit);
void gm_report_bool(gm_report *r, const char *key, int v);
void gm_report_str(gm_report *r, const char *key, const char *v);
/* A value as compact JSON text (GM_KV_RAW; for reports read back from JSON). */
void gm_report_raw(gm_report *r, const char *key, const char *json);
void gm_report_summary(gm_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The item with this key, or NULL. */
const gm_kv *gm_report_get(const gm_report *r, const char *key);

#endif
