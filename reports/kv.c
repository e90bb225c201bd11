/* kv.c - see kv.h. */
#include "kv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "svg.h"
#include "base/units.h"

/* ------------------------------------------------------------------ JSON */

static json_t *value_json(const gm_kv *kv)
{
    switch (kv->type) {
    case GM_KV_INT:
        return json_integer((json_int_t)kv->v.i);
    case GM_KV_REAL:
        return json_real(kv->v.d);
    case GM_KV_BOOL:
        return json_boolean(kv->v.b);
    case GM_KV_STR:
        return json_string(kv->s);
    case GM_KV_RAW:
        return json_loads(kv->s, JSON_DECODE_ANY, NULL);
    default:
        return json_null();
    }
}

json_t *gm_report_json(const gm_report *r)
{
    if (!r) return NULL;
    json_t *o = json_object();
    for (size_t i = 0; o && i < r->n; i++) {
        const gm_kv *kv = &r->items[i];
        const char *dot = strchr(kv->key, '.');
        if (!dot) {
            json_object_set_new(o, kv->key, value_json(kv));
            continue;
        }
        char group[128];
        snprintf(group, sizeof group, "%.*s", (int)(dot - kv->key), kv->key);
        json_t *g = json_object_get(o, group);
        if (!json_is_object(g)) {
            g = json_object();
            json_object_set_new(o, group, g);
        }
        json_object_set_new(g, dot + 1, value_json(kv));
    }
    return o;
}

/* -------------------------------------------------------- from JSON */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* The unit a saved value has by the naming rule (kv.h); name is the last
 * part of its key. */
static int unit_by_name(const char *name, json_t *v)
{
    static const char *const ratio_words[] = {"precision", "recall",   "accuracy", "rate",
                                              "ratio",     "fraction", "share"};
    if (json_is_integer(v) && ends_with(name, "_bytes")) return GM_KV_BYTES;
    if (json_is_number(v) && ends_with(name, "_ns")) return GM_KV_NS;
    for (size_t i = 0; json_is_real(v) && i < sizeof ratio_words / sizeof ratio_words[0]; i++)
        if (strstr(name, ratio_words[i])) return GM_KV_RATIO;
    return GM_KV_PLAIN;
}

static void add_json(gm_report *r, const char *key, const char *name, json_t *v)
{
    int unit = unit_by_name(name, v);
    if (json_is_integer(v)) {
        gm_report_int(r, key, unit, (int64_t)json_integer_value(v));
    } else if (json_is_real(v)) {
        gm_report_real(r, key, unit, json_real_value(v));
    } else if (json_is_boolean(v)) {
        gm_report_bool(r, key, json_is_true(v));
    } else if (json_is_string(v)) {
        gm_report_str(r, key, json_string_value(v));
    } else if (!v || json_is_null(v)) {
        gm_report_null(r, key, unit);
    } else {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        gm_report_raw(r, key, s ? s : "");
        free(s);
    }
}

/* Every member of obj, nested objects as "prefix.name" (keys of any length). */
static void flatten(gm_report *r, json_t *obj, const char *prefix, int depth)
{
    const char *name;
    json_t *v;
    json_object_foreach(obj, name, v)
    {
        size_t len = strlen(prefix) + 1 + strlen(name) + 1;
        char *key = malloc(len);
        if (!key) {
            r->failed = 1;
            return;
        }
        snprintf(key, len, "%s%s%s", prefix, *prefix ? "." : "", name);
        if (json_is_object(v) && depth < 4)
            flatten(r, v, key, depth + 1);
        else
            add_json(r, key, name, v);
        free(key);
    }
}

gm_report *gm_report_from_json(json_t *obj)
{
    if (!json_is_object(obj)) return NULL;
    gm_report *r = gm_report_new();
    if (r) flatten(r, obj, "", 0);
    if (r && r->failed) {
        gm_report_free(r);
        return NULL;
    }
    return r;
}

/* ------------------------------------------------------------ run table */

/* A value as the run table shows it. */
static void text_value(const gm_kv *kv, char *buf, size_t len)
{
    switch (kv->type) {
    case GM_KV_INT:
        if (kv->unit == GM_KV_BYTES && kv->v.i >= 0)
            gm_fmt_bytes((uint64_t)kv->v.i, buf, len);
        else if (kv->unit == GM_KV_NS && kv->v.i >= 0)
            gm_fmt_ns((uint64_t)kv->v.i, buf, len);
        else
            snprintf(buf, len, "%lld", (long long)kv->v.i);
        break;
    case GM_KV_REAL:
        if (kv->unit == GM_KV_RATIO)
            snprintf(buf, len, "%.1f %%", kv->v.d * 100.0);
        else
            snprintf(buf, len, "%.4g", kv->v.d);
        break;
    case GM_KV_BOOL:
        snprintf(buf, len, "%s", kv->v.b ? "true" : "false");
        break;
    case GM_KV_STR:
        snprintf(buf, len, "%s", kv->s);
        break;
    case GM_KV_RAW:
        snprintf(buf, len, "%.60s%s", kv->s, strlen(kv->s) > 60 ? "..." : "");
        break;
    default:
        snprintf(buf, len, "null");
    }
}

#define REPORT_WIDTH 100
#define REPORT_LINES 12

typedef struct report_lines {
    FILE *f;
    char line[REPORT_WIDTH + 256]; /* one item may be longer than the width */
    size_t len;
    int lines;
    size_t left; /* items that did not fit */
} report_lines;

static void report_flush(report_lines *rl)
{
    if (rl->len) fprintf(rl->f, "    %s\n", rl->line);
    rl->len = 0;
    rl->line[0] = '\0';
    rl->lines++;
}

static void report_item(report_lines *rl, const char *item)
{
    size_t n = strlen(item);
    if (rl->len && rl->len + 3 + n > REPORT_WIDTH - 4) report_flush(rl);
    if (rl->lines >= REPORT_LINES) {
        rl->left++;
        return;
    }
    int w =
        snprintf(rl->line + rl->len, sizeof rl->line - rl->len, "%s%s", rl->len ? "   " : "", item);
    rl->len += w > 0 ? (size_t)w : 0;
    if (rl->len >= sizeof rl->line) rl->len = sizeof rl->line - 1;
}

void gm_report_print(FILE *f, const gm_report *r)
{
    if (!r || r->n == 0) return;
    report_lines rl = {.f = f};
    for (size_t i = 0; i < r->n; i++) {
        char val[200], item[160 + sizeof val + 2];
        text_value(&r->items[i], val, sizeof val);
        snprintf(item, sizeof item, "%.159s: %s", r->items[i].key, val);
        report_item(&rl, item);
    }
    if (rl.lines < REPORT_LINES) report_flush(&rl);
    if (rl.left) fprintf(f, "    ... %zu more (all in --json)\n", rl.left);
}

/* ----------------------------------------------------------------- HTML */

/* A value as the HTML report shows it. */
static void html_value(gm_strbuf *b, const gm_kv *kv)
{
    char num[64], pct[32];
    double d = kv->type == GM_KV_INT ? (double)kv->v.i : kv->v.d;
    switch (kv->type) {
    case GM_KV_INT:
    case GM_KV_REAL:
        if (kv->unit == GM_KV_BYTES && kv->type == GM_KV_INT)
            gm_sb_puts(b, gm_fmt_bytes_auto(d, num, sizeof num));
        else if (kv->unit == GM_KV_NS)
            gm_sb_puts(b, gm_fmt_time_auto(d, num, sizeof num));
        else if (kv->type == GM_KV_INT)
            gm_sb_puts(b, gm_fmt_count(d, num, sizeof num));
        else
            gm_sb_puts(b, gm_fmt_num(d, 4, num, sizeof num));
        if (kv->type == GM_KV_REAL && kv->unit == GM_KV_RATIO && d >= 0 && d <= 1)
            gm_sb_printf(b, " (%s)", gm_fmt_pct(d, pct, sizeof pct));
        break;
    case GM_KV_BOOL:
        gm_sb_puts(b, kv->v.b ? "yes" : "no");
        break;
    case GM_KV_STR:
        gm_sb_esc(b, kv->s);
        break;
    case GM_KV_RAW:
        gm_sb_esc_max(b, kv->s, 300);
        break;
    default:
        gm_sb_puts(b, "\xe2\x80\x94"); /* — */
    }
}

void gm_report_html_value(gm_strbuf *b, const char *name, json_t *v)
{
    gm_report one = {0};
    add_json(&one, name, name, v);
    if (one.n) {
        html_value(b, &one.items[0]);
        free(one.items[0].key);
        free(one.items[0].s);
    }
    free(one.items);
}

/* Names for people of the keys the policies report (policies/), and
 * what a 0 means where it means something else than "none"; the key itself
 * stays in the row's title (what to look for in the JSON). */
static const struct key_label {
    const char *key, *label, *zero;
} key_labels[] = {
    {"threshold", "proactive threshold (share of the limit)", "off"},
    {"failure_releases", "releases after a failed allocation", NULL},
    {"failure_released_bytes", "released after a failed allocation", NULL},
    {"cache_flushes", "whole-cache flushes", NULL},
    {"proactive_released_bytes", "released ahead of need", NULL},
    {"foreign_released_bytes", "released for other tenants", NULL},
    {"order", "release order (first released first)", NULL},
    {"selective_released_bytes_by_category", "released, by category", NULL},
    {"period_ns", "iteration period learned", "not found (no repeating pattern yet)"},
    {"period_confidence", "period confidence (autocorrelation)", NULL},
    {"period_estimates", "period estimates made", NULL},
    {"period_changes", "times the period changed", NULL},
    {"sample_ns", "sampling interval", NULL},
    {"horizon_ns", "reuse horizon", "one period (none learned yet)"},
    {"horizon_auto", "reuse horizon: one learned period", NULL},
    {"proactive", "releases ahead of need", NULL},
    {"predictions", "predictions resolved", NULL},
    {"true_positives", "predicted reused, was reused", NULL},
    {"false_positives", "predicted reused, was not", NULL},
    {"false_negatives", "predicted idle, was reused", NULL},
    {"true_negatives", "predicted idle, was idle", NULL},
    {"precision", "precision", NULL},
    {"recall", "recall", NULL},
    {"accuracy", "accuracy", NULL},
    {"predicted_released_bytes", "released on a prediction", NULL},
    {"released_needed_again_bytes", "released, then needed again", NULL},
    {"realizable", "a policy a program can run", NULL},
    {"note", "note", NULL},
    {"segment_classes", "segment size classes", NULL},
};

static const struct key_label *find_label(const char *key)
{
    for (size_t i = 0; i < sizeof key_labels / sizeof key_labels[0]; i++)
        if (!strcmp(key_labels[i].key, key)) return &key_labels[i];
    return NULL;
}

/* One part of a key for people: its label, else the words of the key with
 * the unit suffix the value already shows dropped ("grow_events" -> "grow
 * events", "spill_bytes" -> "spill"). */
static void human_part(gm_strbuf *b, const char *part, size_t n)
{
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%.*s", (int)(n < sizeof tmp ? n : sizeof tmp - 1), part);
    const struct key_label *l = find_label(tmp);
    if (l) {
        gm_sb_esc(b, l->label);
        return;
    }
    size_t m = strlen(tmp);
    if (m > 6 && !strcmp(tmp + m - 6, "_bytes"))
        tmp[m - 6] = '\0';
    else if (m > 3 && !strcmp(tmp + m - 3, "_ns"))
        tmp[m - 3] = '\0';
    for (char *c = tmp; *c; c++)
        if (*c == '_') *c = ' ';
    gm_sb_esc(b, tmp);
}

void gm_report_html_label(gm_strbuf *b, const char *key)
{
    const char *part = key;
    for (const char *dot; (dot = strchr(part, '.')); part = dot + 1) {
        human_part(b, part, (size_t)(dot - part));
        gm_sb_puts(b, ": ");
    }
    human_part(b, part, strlen(part));
}

void gm_report_html(gm_strbuf *b, const gm_report *r)
{
    for (size_t i = 0; r && i < r->n; i++) {
        const gm_kv *kv = &r->items[i];
        const char *last = strrchr(kv->key, '.');
        const struct key_label *l = find_label(last ? last + 1 : kv->key);
        gm_sb_puts(b, "<dt title=\"");
        gm_sb_esc(b, kv->key);
        gm_sb_puts(b, "\">");
        gm_report_html_label(b, kv->key);
        gm_sb_puts(b, "</dt><dd>");
        int zero =
            (kv->type == GM_KV_INT && kv->v.i == 0) || (kv->type == GM_KV_REAL && kv->v.d == 0);
        if (l && l->zero && zero)
            gm_sb_puts(b, l->zero);
        else
            html_value(b, kv);
        gm_sb_puts(b, "</dd>");
    }
}
