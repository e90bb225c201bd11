/*
 * test_html.c - the HTML report: escaping, number and SVG formatting, the
 * timeline resampling, trace statistics, ranking, and an end-to-end report
 * of a trace whose metadata tries to inject markup.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cu.h"
#include "study/leak.h"
#include "base/strbuf.h"
#include "base/version.h"
#include "reports/html.h"
#include "reports/results.h"
#include "reports/svg.h"
#include "reports/trace_stats.h"
#include "sim/engine.h"
#include "study/simulate.h"
#include "traces/trace.h"

/* Occurrences of needle in hay. */
static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static const char *esc(gm_strbuf *b, const char *s)
{
    b->len = 0;
    if (b->s) b->s[0] = '\0';
    gm_sb_esc(b, s);
    return gm_sb_str(b);
}

/* ------------------------------------------------------------ escaping */

static void test_escape(void)
{
    gm_strbuf b;
    gm_sb_init(&b);
    CU_ASSERT_STRING_EQUAL(esc(&b, "<script>alert(\"x\")</script>"),
                           "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;");
    CU_ASSERT_STRING_EQUAL(esc(&b, "\"><img src=x onerror='a()'>"),
                           "&quot;&gt;&lt;img src=x onerror=&#39;a()&#39;&gt;");
    CU_ASSERT_STRING_EQUAL(esc(&b, "a & b"), "a &amp; b");
    CU_ASSERT_STRING_EQUAL(esc(&b, "&amp;"), "&amp;amp;"); /* no double meaning */
    CU_ASSERT_STRING_EQUAL(esc(&b, "plain text"), "plain text");
    CU_ASSERT_STRING_EQUAL(esc(&b, "line\nnext\ttab"), "line\nnext\ttab");
    /* control characters become U+FFFD; valid UTF-8 stays; invalid becomes '?' */
    CU_ASSERT_STRING_EQUAL(esc(&b, "a\x01z\x7f"), "a\xef\xbf\xbdz\xef\xbf\xbd");
    CU_ASSERT_STRING_EQUAL(esc(&b, "\xc3\xa9t\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x99\x82"),
                           "\xc3\xa9t\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x99\x82");
    CU_ASSERT_STRING_EQUAL(esc(&b, "\xff\xfe<"), "??&lt;");
    CU_ASSERT_STRING_EQUAL(esc(&b, "\xc0\xbc"), "??");      /* overlong '<' */
    CU_ASSERT_STRING_EQUAL(esc(&b, "\xed\xa0\x80"), "???"); /* a surrogate */
    CU_ASSERT_STRING_EQUAL(esc(&b, "\xe2\x82"), "??");      /* cut short */
    CU_ASSERT_STRING_EQUAL(esc(&b, ""), "");
    CU_ASSERT_STRING_EQUAL(esc(&b, NULL), "");
    b.len = 0;
    gm_sb_esc_max(&b, "<<<<<", 3);
    CU_ASSERT_STRING_EQUAL(gm_sb_str(&b), "&lt;&lt;&lt;\xe2\x80\xa6");
    b.len = 0;
    gm_sb_esc_max(&b, "abc", 3);
    CU_ASSERT_STRING_EQUAL(gm_sb_str(&b), "abc");
    gm_sb_free(&b);
}

static void test_strbuf(void)
{
    gm_strbuf b;
    gm_sb_init(&b);
    CU_ASSERT_STRING_EQUAL(gm_sb_str(&b), "");
    for (int i = 0; i < 10000; i++)
        gm_sb_printf(&b, "%d,", i % 10);
    CU_ASSERT_EQUAL(b.len, 20000);
    CU_ASSERT_EQUAL(b.failed, 0);
    CU_ASSERT_EQUAL(strncmp(gm_sb_str(&b), "0,1,2,", 6), 0);
    gm_sb_free(&b);
    CU_ASSERT_PTR_NULL(b.s);
}

/* ------------------------------------------------------------- numbers */

static void test_numbers(void)
{
    char buf[64];
    CU_ASSERT_STRING_EQUAL(gm_fmt_num(12.5, 1, buf, sizeof buf), "12.5");
    CU_ASSERT_STRING_EQUAL(gm_fmt_num(3.0, 2, buf, sizeof buf), "3");
    CU_ASSERT_STRING_EQUAL(gm_fmt_num(2.10, 2, buf, sizeof buf), "2.1");
    CU_ASSERT_STRING_EQUAL(gm_fmt_num(-0.25, 2, buf, sizeof buf), "-0.25");
    CU_ASSERT_STRING_EQUAL(gm_fmt_num(-0.0001, 2, buf, sizeof buf), "0");
    CU_ASSERT_STRING_EQUAL(gm_fmt_num(1234567, 0, buf, sizeof buf), "1234567");
    CU_ASSERT_STRING_EQUAL(gm_fmt_num(NAN, 2, buf, sizeof buf), "\xe2\x80\x94");
    CU_ASSERT_STRING_EQUAL(gm_fmt_count(10384396, buf, sizeof buf), "10,384,396");
    CU_ASSERT_STRING_EQUAL(gm_fmt_count(999, buf, sizeof buf), "999");
    CU_ASSERT_STRING_EQUAL(gm_fmt_count(1000, buf, sizeof buf), "1,000");
    CU_ASSERT_STRING_EQUAL(gm_fmt_count(-1234567, buf, sizeof buf), "-1,234,567");
    CU_ASSERT_STRING_EQUAL(gm_fmt_count(0, buf, sizeof buf), "0");
    CU_ASSERT_STRING_EQUAL(gm_fmt_count(NAN, buf, sizeof buf), "\xe2\x80\x94");
    char small[6];
    CU_ASSERT_STRING_EQUAL(gm_fmt_count(1234567, small, sizeof small),
                           "1,234"); /* truncated, terminated */
    CU_ASSERT_STRING_EQUAL(gm_fmt_pct(0.1108, buf, sizeof buf), "11.1 %");
    CU_ASSERT_STRING_EQUAL(gm_fmt_pct(1.0, buf, sizeof buf), "100.0 %");
    CU_ASSERT_STRING_EQUAL(gm_fmt_pct(NAN, buf, sizeof buf), "\xe2\x80\x94");
    gm_unit g = gm_unit_bytes(4.82 * GM_GiB);
    CU_ASSERT_STRING_EQUAL(g.name, "GiB");
    CU_ASSERT_STRING_EQUAL(gm_fmt_unit(5177868288.0, g, 2, buf, sizeof buf), "4.82 GiB");
    CU_ASSERT_STRING_EQUAL(gm_unit_bytes(1023).name, "B");
    CU_ASSERT_STRING_EQUAL(gm_unit_bytes(1024).name, "KiB");
    CU_ASSERT_STRING_EQUAL(gm_unit_bytes(600.0 * GM_MiB).name, "MiB");
    CU_ASSERT_STRING_EQUAL(gm_unit_bytes(3.0 * 1024 * GM_GiB).name, "TiB");
    CU_ASSERT_STRING_EQUAL(gm_unit_time(451191380).name, "ms");
    CU_ASSERT_STRING_EQUAL(gm_unit_time(1.9e6).name, "us");
    CU_ASSERT_STRING_EQUAL(gm_unit_time(12e9).name, "s");
    CU_ASSERT_STRING_EQUAL(gm_unit_time(0).name, "ns");
    CU_ASSERT_STRING_EQUAL(gm_fmt_unit(2.5e6, gm_unit_time(4e8), 2, buf, sizeof buf), "2.50 ms");
}

static void test_ticks(void)
{
    double step;
    CU_ASSERT_DOUBLE_EQUAL(gm_nice_step(4.8, 5), 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(gm_nice_step(451.0, 8), 100.0, 1e-12); /* 56.4 -> 100 */
    CU_ASSERT_DOUBLE_EQUAL(gm_nice_step(0.9, 5), 0.2, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(gm_nice_step(1e-3, 4), 5e-4, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(gm_nice_top(4.8, 5, &step), 5.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(step, 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(gm_nice_top(137, 4, &step), 150.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(step, 50.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(gm_nice_top(4.0, 4, &step), 4.0, 1e-9); /* exact tops stay */
    CU_ASSERT_DOUBLE_EQUAL(gm_nice_top(0, 5, &step), 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(gm_nice_top(NAN, 5, &step), 1.0, 1e-12);
}

/* ----------------------------------------------------------------- SVG */

static void test_paths(void)
{
    gm_strbuf b;
    gm_sb_init(&b);
    gm_scale x = {0, 10, 0, 100}, y = {0, 10, 100, 0};
    CU_ASSERT_DOUBLE_EQUAL(gm_scale_px(&y, 2.5), 75.0, 1e-12);
    double xs[] = {0, 1, 2, 3, 4, 5}, ys[] = {0, 5, 5, NAN, 1.23, 1.25};
    gm_svg_line_d(&b, &x, &y, xs, ys, 6);
    /* absolute start, relative moves; flat runs as h; NaN breaks the line */
    CU_ASSERT_STRING_EQUAL(gm_sb_str(&b), "M0 100l10-50h10M40 87.7l10-0.2");
    b.len = 0;
    gm_svg_area_d(&b, &x, &y, xs, ys, 3);
    CU_ASSERT_STRING_EQUAL(gm_sb_str(&b), "M0 100h0l10-50h10l0 50Z");
    b.len = 0;
    double none[] = {NAN, NAN};
    gm_svg_line_d(&b, &x, &y, xs, none, 2);
    CU_ASSERT_EQUAL(b.len, 0);
    /* a min-max band: along hi, back along lo; a NaN in either splits it */
    double lo[] = {1, 2, NAN, 3, 3}, hi[] = {5, 5, 5, 4, NAN};
    gm_svg_band_d(&b, &x, &y, xs, lo, hi, 5);
    CU_ASSERT_STRING_EQUAL(gm_sb_str(&b), "M0 50h10l0 30l-10 10ZM30 60l0 10Z");
    b.len = 0;
    gm_svg_band_d(&b, &x, &y, xs, none, hi, 2);
    CU_ASSERT_EQUAL(b.len, 0);
    /* rounding never accumulates: 400 steps of 2.18 px end where they should */
    b.len = 0;
    double cx[400], cy[400];
    for (int i = 0; i < 400; i++) {
        cx[i] = i;
        cy[i] = i % 2;
    }
    gm_scale x2 = {0, 400, 72, 944}, y2 = {0, 1, 10, 0};
    gm_svg_line_d(&b, &x2, &y2, cx, cy, 400);
    double sum = 72;
    const char *p = gm_sb_str(&b) + 1; /* after M */
    char *end;
    strtod(p, &end); /* absolute x = 72 */
    for (p = end; (p = strchr(p, 'l')); p++)
        sum += strtod(p + 1, NULL);
    CU_ASSERT_DOUBLE_EQUAL(sum, 72 + 399 * 2.18, 0.051);
    gm_sb_free(&b);
}

static void test_grid(void)
{
    gm_strbuf b;
    gm_sb_init(&b);
    gm_scale x = {0, 1, 70, 940}, y = {0, 5.0 * GM_GiB, 200, 10};
    gm_svg_grid_y(&b, &x, &y, 1.0 * GM_GiB, gm_unit_bytes(5.0 * GM_GiB), 0);
    CU_ASSERT_EQUAL(count(gm_sb_str(&b), "<line class=\"grid\""), 6);
    CU_ASSERT_PTR_NOT_NULL(strstr(gm_sb_str(&b), ">0 GiB</text>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(gm_sb_str(&b), ">5 GiB</text>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(gm_sb_str(&b), "y1=\"10\""));
    b.len = 0;
    gm_scale t = {0, 451e6, 70, 940}, ty = {0, 1, 200, 200};
    gm_svg_grid_x(&b, &t, &ty, 0, 100e6, gm_unit_time(451e6));
    CU_ASSERT_EQUAL(count(gm_sb_str(&b), "<text"), 5); /* 0, 100 ... 400 ms */
    CU_ASSERT_PTR_NOT_NULL(strstr(gm_sb_str(&b), ">400 ms</text>"));
    gm_sb_free(&b);
}

static void test_resample(void)
{
    double t[] = {0, 10, 20, 30}, v[] = {1, 5, 2, NAN}, col[8];
    gm_resample_max(t, v, 4, 10, 0, 40, col, 2);
    CU_ASSERT_DOUBLE_EQUAL(col[0], 5, 0);
    CU_ASSERT_DOUBLE_EQUAL(col[1], 2, 0);
    gm_resample_max(t, v, 4, 10, 0, 40, col, 8);
    double want[] = {1, 1, 5, 5, 2, 2, NAN, NAN};
    for (int i = 0; i < 8; i++) {
        if (isnan(want[i])) {
            CU_ASSERT(isnan(col[i]));
        } else {
            CU_ASSERT_DOUBLE_EQUAL(col[i], want[i], 0);
        }
    }
    /* a narrow peak inside a wide column is kept; columns before the first
     * bucket (a tenant starting late) have no value */
    double t2[] = {25, 26}, v2[] = {9, 1};
    gm_resample_max(t2, v2, 2, 1, 0, 40, col, 4);
    CU_ASSERT(isnan(col[0]) && isnan(col[1]));
    CU_ASSERT_DOUBLE_EQUAL(col[2], 9, 0);
    CU_ASSERT(isnan(col[3]));
    /* minima: a narrow trough is kept the same way */
    gm_resample_min(t2, v2, 2, 1, 0, 40, col, 4);
    CU_ASSERT(isnan(col[0]) && isnan(col[1]) && isnan(col[3]));
    CU_ASSERT_DOUBLE_EQUAL(col[2], 1, 0);
    gm_resample_min(t, v, 4, 10, 0, 40, col, 2);
    CU_ASSERT_DOUBLE_EQUAL(col[0], 1, 0);
    CU_ASSERT_DOUBLE_EQUAL(col[1], 2, 0);
}

/* ---------------------------------------------------------- rendering */

/* A minimal gmsim-result/1: policy, OOMs, fragmentation, a 3-point timeline. */
static json_t *result(const char *policy, int realizable, int ooms, double frag, uint64_t peak_r)
{
    return json_pack(
        "{s:s,s:s,s:s,s:{s:I,s:I,s:s,s:n,s:s,s:b,s:f,s:s,s:b},"
        "s:{s:I,s:I,s:I,s:f,s:f,s:f,s:I,s:I,s:[],s:{s:I,s:I,s:[s,s,s,s,s],"
        "s:[[I,I,I,I,f],[I,I,I,I,f],[I,I,I,I,f]]},s:{s:I,s:I,s:I},s:I,s:I},"
        "s:[{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:s,s:s,s:{s:I,s:I}}]}",
        "schema", GM_RESULT_SCHEMA, "gmsim_version", GM_VERSION, "created_utc",
        "2026-01-01T00:00:00Z", "inputs", "capacity_bytes", (json_int_t)(8 * GM_GiB),
        "overhead_bytes", (json_int_t)(512 * GM_MiB), "allocator", "pytorch", "alloc_conf_given",
        "policy", policy, "policy_realizable", realizable, "memory_fraction", 0.0, "on_oom", "skip",
        "lenient", 0, "device", "peak_live_bytes", (json_int_t)(3 * GM_GiB), "peak_reserved_bytes",
        (json_int_t)peak_r, "oom_count", (json_int_t)ooms, "fragmentation", frag, "utilization",
        1 - frag, "external_fragmentation_mean", 0.5, "t_first_ns", (json_int_t)0, "t_last_ns",
        (json_int_t)3000000, "ooms", "timeline", "t0_ns", (json_int_t)0, "width_ns",
        (json_int_t)1000000, "columns", "t_ns", "requested_max", "allocated_max", "reserved_max",
        "ext_frag", "points", (json_int_t)0, (json_int_t)GM_GiB, (json_int_t)GM_GiB,
        (json_int_t)(2 * GM_GiB), 0.25, (json_int_t)1000000, (json_int_t)(3 * GM_GiB),
        (json_int_t)(3 * GM_GiB), (json_int_t)peak_r, -1.0, (json_int_t)2000000, (json_int_t)GM_GiB,
        (json_int_t)GM_GiB, (json_int_t)peak_r, 0.5, "driver", "malloc_calls", (json_int_t)3,
        "free_calls", (json_int_t)1, "total_ns", (json_int_t)70000, "tenants", (json_int_t)1,
        "tenants_completed", (json_int_t)1, "tenants", "trace", "t.h5", "source", "synthetic:test",
        "trace_hash", "0123456789abcdef", "trace_events", (json_int_t)6, "offset_ns", (json_int_t)0,
        "repeat", (json_int_t)1, "quota_bytes", (json_int_t)0, "alloc_conf", "", "status",
        "completed", "metrics", "peak_live_bytes", (json_int_t)(3 * GM_GiB), "peak_reserved_bytes",
        (json_int_t)peak_r);
}

static char *render(json_t *j)
{
    gm_strbuf b;
    gm_err err = {0};
    gm_sb_init(&b);
    int rc = gm_html_render(j, &b, &err);
    CU_ASSERT_EQUAL(rc, GM_OK);
    if (rc != GM_OK) {
        fprintf(stderr, "render: %s\n", err.msg);
        gm_sb_free(&b);
        return NULL;
    }
    return b.s;
}

static void test_render_single(void)
{
    json_t *j = result("pytorch", 1, 0, 0.1, 4 * GM_GiB);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    char *h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(strncmp(h, "<!DOCTYPE html>", 15), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"cmp-table\""));
    CU_ASSERT_EQUAL(count(h, "<svg class=\"chart tl\" id=\"mem-"), 1);
    CU_ASSERT_EQUAL(count(h, "id=\"overlay\""), 0); /* one run: no overlay */
    CU_ASSERT_EQUAL(count(h, "badge win"), 0);      /* and no winner */
    CU_ASSERT_EQUAL(count(h, "<script"), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "Content-Security-Policy"));
    /* every value in single quotes (as HTML, &#39;), "--" before the trace */
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "gmsim run --policy &#39;pytorch&#39; --capacity "
                                     "&#39;8GiB&#39; --overhead &#39;512MiB&#39; --on-oom skip -- "
                                     "&#39;t.h5&#39;"));
    CU_ASSERT_PTR_NULL(strstr(h, "http://"));
    CU_ASSERT_PTR_NULL(strstr(h, "https://"));
    free(h);
    json_decref(j);
}

/* Timeline minima (columns after the first five) draw min-max bands and
 * give the hover "min–max" values; results without them draw lines only. */
static void test_render_band(void)
{
    json_t *j = result("pytorch", 1, 0, 0.1, 4 * GM_GiB);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    char *h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(count(h, "class=\"s-q band\""), 0);
    CU_ASSERT_EQUAL(count(h, "class=\"s-q\""), 1);
    free(h);
    json_t *tl = json_object_get(json_object_get(j, "device"), "timeline");
    json_t *cols = json_object_get(tl, "columns"), *pts = json_object_get(tl, "points");
    json_array_append_new(cols, json_string("requested_min"));
    json_array_append_new(cols, json_string("allocated_min"));
    json_array_append_new(cols, json_string("reserved_min"));
    size_t i;
    json_t *row;
    json_array_foreach(pts, i, row)
    {
        json_array_append_new(row, json_integer((json_int_t)GM_GiB / 2));
        json_array_append_new(row, json_integer((json_int_t)GM_GiB / 2));
        json_array_append_new(row, json_integer((json_int_t)GM_GiB));
    }
    h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(count(h, "class=\"s-q band\""), 1);
    CU_ASSERT_EQUAL(count(h, "class=\"s-a band\""), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "0.50\xe2\x80\x93"
                                     "3.00,")); /* requested, 2nd bucket */
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "requested 0.50 \xe2\x80\x93 3.00 GiB"));
    free(h);
    json_decref(j);
}

static void test_render_rejects(void)
{
    gm_strbuf b;
    gm_err err = {0};
    gm_sb_init(&b);
    json_t *j = json_pack("{s:s}", "schema", "something/9");
    CU_ASSERT_EQUAL(gm_html_render(j, &b, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "something/9"));
    json_decref(j);
    j = json_pack("{s:s,s:[]}", "schema", "gmsim-compare/1", "results");
    CU_ASSERT_EQUAL(gm_html_render(j, &b, &err), GM_EINVAL);
    json_decref(j);
    gm_sb_free(&b);
}

/* The position of the table row of label (after the table starts). */
static const char *row_of(const char *h, const char *label)
{
    const char *t = strstr(h, "id=\"cmp-table\"");
    char pat[128];
    snprintf(pat, sizeof pat, "\">%s</a>", label);
    return t ? strstr(t, pat) : NULL;
}

static void test_render_compare(void)
{
    /* no ranking given: fewest OOMs first, then fragmentation; the oracle is
     * better than all but is a bound, never the winner */
    json_t *list =
        json_pack("[o,o,o,o]", result("pytorch", 1, 3, 0.10, 5 * GM_GiB),
                  result("lru", 1, 0, 0.20, 4 * GM_GiB), result("priority", 1, 0, 0.05, 4 * GM_GiB),
                  result("oracle", 0, 0, 0.01, 3 * GM_GiB));
    json_t *j = json_pack("{s:s,s:o}", "schema", "gmsim-compare/1", "results", list);
    char *h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    const char *pr = row_of(h, "priority"), *lru = row_of(h, "lru"), *pt = row_of(h, "pytorch"),
               *orc = row_of(h, "oracle");
    CU_ASSERT_FATAL(pr && lru && pt && orc);
    CU_ASSERT(pr < lru && lru < pt && pt < orc);
    CU_ASSERT_EQUAL(count(h, "<tr class=\"win\">"), 1);
    CU_ASSERT(strstr(h, "<tr class=\"win\">") < pr);
    CU_ASSERT(strstr(pr, "</tr>") > strstr(pr, "badge win"));
    CU_ASSERT_EQUAL(count(h, "<tr class=\"bound\">"), 1);
    CU_ASSERT_EQUAL(count(h, "<svg class=\"chart tl\" id=\"mem-"), 4);
    CU_ASSERT_EQUAL(count(h, "<svg class=\"chart tl\" id=\"frag-"), 4);
    /* the runs as small multiples: one strip each, in ranked order, each
     * against the pytorch baseline drawn in it (not lines on one axis) */
    CU_ASSERT_EQUAL(count(h, "id=\"overlay\""), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "<h2 id=\"strips\">"));
    const char *ov = strstr(h, "id=\"overlay\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ov);
    CU_ASSERT_EQUAL(count(ov, "<title>pytorch (the baseline): reserved</title>"), 3);
    const char *s1 = strstr(ov, ">priority \xc2\xb7 peak reserved"),
               *s2 = strstr(ov, ">lru \xc2\xb7 peak reserved"),
               *s3 = strstr(ov, ">pytorch \xc2\xb7 peak reserved"),
               *s4 = strstr(ov, ">oracle (bound) \xc2\xb7 peak reserved");
    CU_ASSERT_FATAL(s1 && s2 && s3 && s4);
    CU_ASSERT(s1 < s2 && s2 < s3 && s3 < s4);
    CU_ASSERT_PTR_NOT_NULL(strstr(s4, "against pytorch"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "Winner: priority"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "limit: peak live 3.00 GiB"));
    free(h);

    /* a ranking and winner given by compare are followed */
    json_object_set_new(j, "ranking",
                        json_pack("[s,s,s,s]", "lru", "pytorch", "oracle", "priority"));
    json_object_set_new(j, "winner", json_string("lru"));
    h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    pr = row_of(h, "priority");
    lru = row_of(h, "lru");
    pt = row_of(h, "pytorch");
    CU_ASSERT_FATAL(pr && lru && pt);
    CU_ASSERT(lru < pt && pt < pr);
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "Winner: lru"));
    free(h);
    /* gmsim compare's own form: realizable rows only, as objects; the bound
     * (oracle) named apart and drawn after them */
    json_object_set_new(j, "ranking",
                        json_pack("[{s:i,s:s},{s:i,s:s},{s:i,s:s}]", "rank", 1, "policy", "pytorch",
                                  "rank", 2, "policy", "priority", "rank", 3, "policy", "lru"));
    json_object_set_new(j, "winner", json_string("pytorch"));
    h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT(row_of(h, "pytorch") < row_of(h, "priority"));
    CU_ASSERT(row_of(h, "priority") < row_of(h, "lru"));
    CU_ASSERT(row_of(h, "lru") < row_of(h, "oracle"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "Winner: pytorch"));
    CU_ASSERT_PTR_NULL(strstr(h, "Ranked by OOMs")); /* the note is for our own ranking */
    free(h);
    /* entries as objects with result indexes work too */
    json_object_set_new(
        j, "ranking",
        json_pack("[{s:i},{s:i},{s:i},{s:i}]", "index", 1, "index", 0, "index", 2, "index", 3));
    json_object_set_new(j, "winner", json_pack("{s:i}", "index", 1));
    h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT(row_of(h, "lru") < row_of(h, "pytorch"));
    CU_ASSERT(row_of(h, "pytorch") < row_of(h, "priority"));
    free(h);
    json_decref(j);
}

static void test_policy_report(void)
{
    json_t *j = result("predictive:horizon=2", 1, 0, 0.1, 4 * GM_GiB);
    json_t *t = json_array_get(json_object_get(j, "tenants"), 0);
    json_object_set_new(t, "policy_report",
                        json_pack("{s:f,s:f,s:I,s:{s:I},s:s}", "precision", 0.913, "recall", 0.5,
                                  "released_bytes", (json_int_t)(3 * GM_MiB), "misses", "count",
                                  (json_int_t)12, "note", "<b>x</b>"));
    char *h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(h, "<dt title=\"precision\">precision</dt><dd>0.913 (91.3 %)</dd>"));
    /* unknown keys: their words, the unit suffix dropped (the value has it) */
    CU_ASSERT_PTR_NOT_NULL(
        strstr(h, "<dt title=\"released_bytes\">released</dt><dd>3.00 MiB</dd>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "<dt title=\"misses.count\">misses: count</dt><dd>12</dd>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "&lt;b&gt;x&lt;/b&gt;"));
    free(h);
    /* known keys get their names for people, and a 0 that means "not yet" says so */
    json_object_set_new(t, "policy_report",
                        json_pack("{s:I,s:b,s:I,s:f,s:s}", "period_ns", (json_int_t)0,
                                  "horizon_auto", 1, "sample_ns", (json_int_t)25000000,
                                  "period_confidence", 0.5, "<i>key</i>", "v"));
    h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_NOT_NULL(strstr(h, ">iteration period learned</dt><dd>not found"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, ">reuse horizon: one learned period</dt><dd>yes</dd>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, ">sampling interval</dt><dd>25 ms</dd>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, ">period confidence (autocorrelation)</dt><dd>0.5</dd>"));
    CU_ASSERT_PTR_NULL(strstr(h, ">period_ns<"));
    CU_ASSERT_PTR_NULL(strstr(h, ">horizon_auto<"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "&lt;i&gt;key&lt;/i&gt;</dt>")); /* escaped, twice */
    CU_ASSERT_PTR_NULL(strstr(h, "<i>key"));
    free(h);
    json_decref(j);
}

/* The memory axis starts near the data when the data sits high on it, and
 * keeps the peak-live line in range; a wide range keeps the axis from 0. */
static void test_axis_fit(void)
{
    json_t *j = result("pytorch", 1, 0, 0.1, 4 * GM_GiB);
    char *h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_NOT_NULL(strstr(h, ">0 GiB</text>")); /* 1..4 GiB: from 0 */
    CU_ASSERT_PTR_NULL(strstr(h, "y axis from"));
    free(h);
    json_t *dev = json_object_get(j, "device"), *tl = json_object_get(dev, "timeline");
    double g = (double)GM_GiB;
    json_object_set_new(dev, "peak_live_bytes", json_integer((json_int_t)(6.6 * g)));
    json_object_set_new(dev, "peak_reserved_bytes", json_integer((json_int_t)(6.74 * g)));
    json_object_set_new(
        tl, "points",
        json_pack("[[I,I,I,I,f],[I,I,I,I,f],[I,I,I,I,f]]", (json_int_t)0, (json_int_t)(6.3 * g),
                  (json_int_t)(6.3 * g), (json_int_t)(6.5 * g), 0.1, (json_int_t)1000000,
                  (json_int_t)(6.6 * g), (json_int_t)(6.6 * g), (json_int_t)(6.74 * g), 0.1,
                  (json_int_t)2000000, (json_int_t)(6.4 * g), (json_int_t)(6.4 * g),
                  (json_int_t)(6.74 * g), 0.1));
    h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_NULL(strstr(h, ">0 GiB</text>"));
    const char *from = strstr(h, "y axis from ");
    double y0 = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(from);
    CU_ASSERT_EQUAL(sscanf(from, "y axis from %lf GiB", &y0), 1);
    CU_ASSERT(y0 >= 6.0 && y0 <= 6.3); /* a tick at or below the lowest value */
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "limit: peak live 6.60 GiB"));
    /* zoom: every time chart has its plot in a nested svg and zoomed-axis slots */
    CU_ASSERT_EQUAL(count(h, "<svg class=\"pz\""), count(h, "<svg class=\"chart tl\""));
    CU_ASSERT_EQUAL(count(h, "<g class=\"xax1\""), count(h, "<svg class=\"chart tl\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "<button id=\"zr\" type=\"button\" hidden>"));
    free(h);
    json_decref(j);
}

/* What a trace does not record is not shown as 0 B; a state-only snapshot
 * says what it holds instead of "0 allocations, 0 B". */
static void test_unknown_device(void)
{
    json_t *j = result("pytorch", 1, 0, 0.1, 4 * GM_GiB);
    json_t *t = json_array_get(json_object_get(j, "tenants"), 0);
    json_object_set_new(t, "trace_stats",
                        json_pack("{s:s,s:{s:s,s:s,s:I,s:s},s:I,s:I,s:I,s:I}", "path",
                                  "state.pickle", "meta", "source", "torch-snapshot", "device_name",
                                  "", "device_total_bytes", (json_int_t)0, "created_utc", "",
                                  "events", (json_int_t)0, "allocations", (json_int_t)0,
                                  "alloc_bytes", (json_int_t)0, "peak_live_bytes",
                                  (json_int_t)(11 * GM_GiB)));
    char *h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "<dt>recorded on</dt><dd>not recorded in the trace</dd>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "none: the trace holds the state at one instant, 11.00 GiB"));
    CU_ASSERT_PTR_NULL(strstr(h, "(unknown device)"));
    CU_ASSERT_PTR_NULL(strstr(h, ", 0 B"));
    CU_ASSERT_PTR_NULL(strstr(h, "0 B requested"));
    free(h);
    json_object_set_new(json_object_get(json_object_get(t, "trace_stats"), "meta"),
                        "device_total_bytes", json_integer((json_int_t)(16 * GM_GiB)));
    h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "<dt>recorded on</dt><dd>16.00 GiB device memory</dd>"));
    free(h);
    json_decref(j);
}

/* ------------------------------------------- a trace that attacks the page */

#define EVIL_WORKLOAD "<script>document.title='PWNED';</script>"
#define EVIL_COMMAND "\"><img src=x id=gm-pwned onerror=\"document.title='PWNED'\">"
#define EVIL_SOURCE "synthetic:<svg onload=alert(1)>"
#define EVIL_SITE "<script>alert('site')</script>/train.py:7 in \"forward\""

static const char *evil_trace(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s", gm_test_tmp("evil<b>'\"x.h5"));
    gm_trace_meta m;
    gm_trace_meta_init(&m);
    gm_err err = {0};
    CU_ASSERT_EQUAL(gm_trace_meta_set(&m.source, EVIL_SOURCE), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_meta_set(&m.workload, EVIL_WORKLOAD), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_meta_set(&m.command, EVIL_COMMAND), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_meta_set(&m.device_name, "<i>GPU</i>"), GM_OK);
    m.device_total_bytes = 16 * GM_GiB;
    gm_event ev[] = {
        {.t_ns = 0, .addr = 0x1000, .size = 100, .op = GM_OP_ALLOC, .category = GM_CAT_ACTIVATION},
        {.t_ns = 10,
         .addr = 0x2000,
         .size = GM_MiB,
         .op = GM_OP_ALLOC,
         .category = GM_CAT_PARAMETER,
         .site = 1},
        {.t_ns = 20,
         .addr = 0x3000,
         .size = 3000,
         .op = GM_OP_ALLOC,
         .category = GM_CAT_ACTIVATION},
        {.t_ns = 30, .addr = 0x1000, .op = GM_OP_FREE},
        {.t_ns = 40,
         .addr = 0x4000,
         .size = 5 * GM_MiB,
         .op = GM_OP_ALLOC,
         .category = GM_CAT_TEMPORARY},
        {.t_ns = 50, .addr = 0x4000, .op = GM_OP_FREE},
    };
    gm_trace_writer *w;
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, &m, NULL, &w, &err), GM_OK);
    gm_site site = {EVIL_SITE, "train.py:7\n"};
    CU_ASSERT_EQUAL(gm_trace_write_sites(w, &site, 1, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_append(w, ev, 6, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_finish(w, &err), GM_OK);
    gm_trace_meta_free(&m);
    return path;
}

static void test_trace_stats(void)
{
    const char *path = evil_trace();
    json_t *st;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_trace_stats_json(path, &st, &err), GM_OK);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(st, "path")), path);
    CU_ASSERT_STRING_EQUAL(
        json_string_value(json_object_get(json_object_get(st, "meta"), "workload")), EVIL_WORKLOAD);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(st, "events")), 6);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(st, "allocations")), 4);
    /* live: 100, +1Mi, +3000, -100, +5Mi (peak at t=40), -5Mi */
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(st, "peak_live_bytes")),
                    (json_int_t)(GM_MiB + 3000 + 5 * GM_MiB));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(st, "peak_live_t_ns")), 40);
    /* sizes 100 -> [0,512); 3000 -> [2K,4K); 1Mi -> [1M,2M); 5Mi -> [4M,8M) */
    json_t *h = json_object_get(st, "size_histogram");
    json_t *edges = json_object_get(h, "edges_bytes"), *n = json_object_get(h, "allocs");
    CU_ASSERT_EQUAL_FATAL(json_array_size(n), 15); /* bins 0 .. 14 */
    CU_ASSERT_EQUAL(json_array_size(edges), 16);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(edges, 0)), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(edges, 1)), 512);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(edges, 15)), 8 * GM_MiB);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(n, 0)), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(n, 3)), 1);  /* [2K, 4K) */
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(n, 12)), 1); /* [1M, 2M) */
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(n, 14)), 1); /* [4M, 8M) */
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(h, "bytes"), 14)),
                    5 * GM_MiB);
    json_t *cats = json_object_get(st, "categories");
    CU_ASSERT_EQUAL_FATAL(json_array_size(cats), 3);
    json_t *c;
    size_t i;
    int seen = 0;
    json_array_foreach(cats, i, c)
    {
        const char *name = json_string_value(json_object_get(c, "category"));
        json_int_t allocs = json_integer_value(json_object_get(c, "allocs"));
        json_int_t bytes = json_integer_value(json_object_get(c, "bytes"));
        json_int_t live = json_integer_value(json_object_get(c, "live_at_peak_bytes"));
        if (!strcmp(name, "activation")) {
            CU_ASSERT(allocs == 2 && bytes == 3100 && live == 3000);
            seen |= 1;
        } else if (!strcmp(name, "parameter")) {
            CU_ASSERT(allocs == 1 && bytes == (json_int_t)GM_MiB && live == (json_int_t)GM_MiB);
            seen |= 2;
        } else if (!strcmp(name, "temporary")) {
            CU_ASSERT(allocs == 1 && live == (json_int_t)(5 * GM_MiB));
            seen |= 4;
        }
    }
    CU_ASSERT_EQUAL(seen, 7);
    /* the allocations, largest first, with lifetimes (-1: live at the end) */
    json_t *top = json_object_get(st, "allocations_top");
    json_t *rows = json_object_get(top, "rows");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(top, "allocations")), 4);
    CU_ASSERT_EQUAL_FATAL(json_array_size(rows), 4);
    json_int_t want[4][3] = {{40, 50, 5 * GM_MiB}, {10, -1, GM_MiB}, {20, -1, 3000}, {0, 30, 100}};
    for (size_t k = 0; k < 4; k++)
        for (size_t f = 0; f < 3; f++)
            CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_array_get(rows, k), f)),
                            want[k][f]);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_array_get(rows, 0), 3)),
                           "temporary");
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_array_get(rows, 1), 4)), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_array_get(rows, 0), 4)), -1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(top, "sites"), 0)),
                           EVIL_SITE);
    json_decref(st);
    /* only 2 kept (the most bytes x time: 5 MiB for 10 ns, 1 MiB for 40 ns):
     * the rest is the 100 B (t 0-30) and the 3000 B
     * (from t 20) allocations, max per column of 400 over t 0..50 */
    gm_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_allocs_json(r, 2, 0, 50, &top, &err), GM_OK);
    gm_trace_close(r);
    json_t *rest = json_object_get(top, "rest_max_bytes");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(top, "rows")), 2);
    CU_ASSERT_EQUAL_FATAL(json_array_size(rest), 400);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(rest, 40)), 100);   /* t = 5  */
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(rest, 200)), 3100); /* t = 25 */
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(rest, 320)), 3000); /* t = 40 */
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(rest, 399)), 3000);
    json_decref(top);
    CU_ASSERT_NOT_EQUAL(gm_trace_stats_json("/nonexistent/x.h5", &st, &err), GM_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent/x.h5"));
    CU_ASSERT_PTR_NULL(st);
    unlink(path);
}

/* A trace with iterations: the statistics read its events three times,
 * the allocations chart's first pass riding on the leak analysis's second
 * (trace_stats.c); what they give is what each gives read on its own: the
 * same iterations as the analysis alone, the same "allocations_top" as
 * gm_trace_allocs_json over the scan's span. */
static void test_trace_stats_one_ride(void)
{
    const char *path = gm_test_tmp("iters.h5");
    enum { IT = 12, PER = 40 };
    gm_event ev[IT * PER];
    gm_marker mk[IT];
    size_t n = 0;
    for (int it = 0; it < IT; it++) {
        uint64_t t0 = (uint64_t)it * 1000;
        mk[it] = (gm_marker){.t_ns = t0, .kind = GM_MARK_ITERATION};
        snprintf(mk[it].name, sizeof mk[it].name, "iteration %d", it);
        for (int k = 0; k < PER / 2; k++) /* activations, freed in reverse; one kept a step */
            ev[n++] = (gm_event){.t_ns = t0 + 1 + (uint64_t)k,
                                 .addr = 0x100000ull * (uint64_t)(it * PER + k + 1),
                                 .size = (uint64_t)(k + 1) * GM_MiB,
                                 .op = GM_OP_ALLOC,
                                 .category = GM_CAT_ACTIVATION};
        for (int k = PER / 2; k-- > 0;)
            ev[n++] = (gm_event){.t_ns = t0 + 500 + (uint64_t)(PER / 2 - k),
                                 .addr = 0x100000ull * (uint64_t)(it * PER + k + 1),
                                 .op = GM_OP_FREE};
    }
    gm_err err = {0};
    gm_trace_writer *w;
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, NULL, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_append(w, ev, n, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_add_markers(w, mk, IT, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_finish(w, &err), GM_OK);
    json_t *st = NULL, *top = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_trace_stats_json(path, &st, &err), GM_OK);
    gm_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    gm_leak_report lk;
    CU_ASSERT_EQUAL_FATAL(gm_leak_analyze_trace(r, NULL, &lk, &err), GM_OK);
    CU_ASSERT_EQUAL(lk.n, IT); /* a boundary per marker: the analysis made its second pass */
    json_t *it = gm_leak_json(&lk);
    CU_ASSERT_TRUE(json_equal(it, json_object_get(st, "iterations")));
    json_decref(it);
    gm_leak_report_free(&lk);
    CU_ASSERT_EQUAL_FATAL(
        gm_trace_allocs_json(r, GM_TOP_ALLOCS, ev[0].t_ns, ev[n - 1].t_ns, &top, &err), GM_OK);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(top, "allocations")), IT * PER / 2);
    CU_ASSERT_TRUE(json_equal(top, json_object_get(st, "allocations_top")));
    json_decref(top);
    json_decref(st);
    gm_trace_close(r);
    unlink(path);
}

/* The report's iteration chart (trace_stats.iterations, the object `gmsim
 * info --json` writes): a point per boundary, hollow for warm-up, the
 * fitted line over the fit's points, the verdict in words; nothing when a
 * trace has no iterations. */
static void test_iterations_chart(void)
{
    json_t *j = result("pytorch", 1, 0, 0.1, 4 * GM_GiB);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *pts = json_array();
    for (int k = 0; k < 6; k++) /* warm-up at 0, then +2 MiB per iteration from 100 MiB */
        json_array_append_new(
            pts, json_pack("{s:I}", "live_bytes", (json_int_t)((k ? 98 + 2 * k : 60) * GM_MiB)));
    json_t *it = json_pack(
        "{s:s,s:s,s:I,s:{s:I,s:I,s:f,s:f,s:f},s:I,s:I,s:o}", "source", "iteration-markers",
        "verdict", "growing", "warmup_iterations", (json_int_t)1, "fit", "first_iteration",
        (json_int_t)1, "iterations", (json_int_t)5, "slope_bytes_per_iteration", 2.0 * GM_MiB,
        "intercept_bytes", 98.0 * GM_MiB, "r2", 1.0, "capacity_bytes", (json_int_t)(GM_GiB),
        "runout_iteration", (json_int_t)463, "boundaries", pts);
    json_t *t0 = json_array_get(json_object_get(j, "tenants"), 0);
    json_object_set_new(
        t0, "trace_stats",
        json_pack("{s:s,s:I,s:o}", "path", "it.h5", "events", (json_int_t)60, "iterations", it));
    char *h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    const char *svg = strstr(h, "<svg class=\"chart iter\" id=\"iterations\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(svg);
    const char *end = strstr(svg, "</svg>");
    CU_ASSERT_PTR_NOT_NULL_FATAL(end);
    char *chart = strndup(svg, (size_t)(end - svg));
    CU_ASSERT_EQUAL(count(chart, "<circle class=\"pt\""), 5);
    CU_ASSERT_EQUAL(count(chart, "<circle class=\"pt warm\""), 1);
    CU_ASSERT_EQUAL(count(chart, "<line class=\"fit\""), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(chart, "iteration 0 (warm-up): 60.00 MiB live"));
    free(chart);
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "<b>growing</b>: +2.00 MiB per iteration over iterations "
                                     "1&ndash;5"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "runs out at iteration 463"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "from the trace&#39;s iteration markers"));
    free(h);
    /* 5000 boundaries (a long trace): the warm-up point, then 400 min-max
     * bars, one holding a 1 GiB spike at boundary 1234 */
    pts = json_array();
    for (int k = 0; k < 5000; k++)
        json_array_append_new(
            pts, json_pack("{s:I}", "live_bytes",
                           (json_int_t)(k == 1234 ? GM_GiB : (json_int_t)(100 + k % 7) * GM_MiB)));
    json_object_set_new(it, "boundaries", pts);
    h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    svg = strstr(h, "<svg class=\"chart iter\" id=\"iterations\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(svg);
    end = strstr(svg, "</svg>");
    CU_ASSERT_PTR_NOT_NULL_FATAL(end);
    chart = strndup(svg, (size_t)(end - svg));
    CU_ASSERT_EQUAL(count(chart, "<line class=\"pt rng\""), 400);
    CU_ASSERT_EQUAL(count(chart, "<circle class=\"pt warm\""), 1);
    CU_ASSERT_EQUAL(count(chart, "<circle class=\"pt\""), 0);
    CU_ASSERT_EQUAL(count(chart, "1.00 GiB live</title>"), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(chart, "iterations 1&ndash;12: 0.10 GiB &ndash; 0.10 GiB live"));
    CU_ASSERT(strlen(chart) < 80000);
    free(chart);
    free(h);
    /* the same trace without iterations: no chart, no verdict */
    json_object_set_new(it, "boundaries", json_array());
    h = render(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_NULL(strstr(h, "id=\"iterations\""));
    CU_ASSERT_PTR_NULL(strstr(h, "iter-verdict"));
    free(h);
    json_decref(j);
}

/* The whole path: a trace whose metadata and file name carry markup is run,
 * turned into JSON, given trace statistics and rendered. Everything shows
 * as text: no element, attribute or script from the trace reaches the page. */
static void test_end_to_end_hostile(void)
{
    const char *path = evil_trace();
    gm_tenant_spec t = {.path = path, .repeat = 1};
    gm_sim_config cfg;
    gm_latency lat = GM_LATENCY_DEFAULT;
    memset(&cfg, 0, sizeof cfg);
    cfg.tenants = &t;
    cfg.n_tenants = 1;
    cfg.latency = lat;
    cfg.overhead_bytes = 0;
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&cfg, &r, &err), GM_OK);
    json_t *j = gm_result_json(&cfg, r, "run");
    gm_sim_result_free(r);
    CU_ASSERT_EQUAL_FATAL(gm_trace_stats_attach(j, NULL, &err), GM_OK);
    const char *out = gm_test_tmp("evil.html");
    CU_ASSERT_EQUAL_FATAL(gm_html_write_file(j, out, &err), GM_OK);
    json_decref(j);
    FILE *f = fopen(out, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static char h[1 << 20];
    size_t n = fread(h, 1, sizeof h - 1, f);
    fclose(f);
    h[n] = '\0';
    CU_ASSERT(n > 1000 && n < sizeof h - 1);
    /* the hostile strings are there, as text */
    CU_ASSERT_PTR_NOT_NULL(
        strstr(h, "&lt;script&gt;document.title=&#39;PWNED&#39;;&lt;/script&gt;"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "&quot;&gt;&lt;img src=x id=gm-pwned onerror="));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "synthetic:&lt;svg onload=alert(1)&gt;"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "evil&lt;b&gt;&#39;&quot;x.h5"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "&lt;i&gt;GPU&lt;/i&gt;"));
    /* the call site, in the allocation band's tooltip */
    CU_ASSERT_PTR_NOT_NULL(strstr(h,
                                  "1.00 MiB parameter \xc2\xb7 &lt;script&gt;alert(&#39;site&#39;)"
                                  "&lt;/script&gt;/train.py:7 in &quot;forward&quot; \xc2\xb7 "
                                  "allocated at "));
    CU_ASSERT_EQUAL(count(h, "<rect class=\"ab k"), 4);
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"alloc-0-tip\""));
    CU_ASSERT_PTR_NULL(strstr(h, "alert('site')"));
    /* and never as markup */
    CU_ASSERT_EQUAL(count(h, "<script"), 1); /* the page's own */
    CU_ASSERT_EQUAL(count(h, "<img"), 0);
    CU_ASSERT_EQUAL(count(h, "onerror=\""), 0);
    CU_ASSERT_PTR_NULL(strstr(h, "<svg onload"));
    CU_ASSERT_PTR_NULL(strstr(h, "evil<b>"));
    CU_ASSERT_PTR_NULL(strstr(h, "<i>GPU"));
    CU_ASSERT_PTR_NULL(strstr(h, "PWNED';</script>"));
    /* the report still has its parts */
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"cmp-table\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"mem-0\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "aria-label=\"allocation sizes\""));
    /* six events, no iterations: no iteration chart */
    CU_ASSERT_PTR_NULL(strstr(h, "id=\"iterations\""));
    unlink(out);
    unlink(path);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("html", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_escape);
    GM_ADD_TEST(s, test_strbuf);
    GM_ADD_TEST(s, test_numbers);
    GM_ADD_TEST(s, test_ticks);
    GM_ADD_TEST(s, test_paths);
    GM_ADD_TEST(s, test_grid);
    GM_ADD_TEST(s, test_resample);
    GM_ADD_TEST(s, test_render_single);
    GM_ADD_TEST(s, test_render_band);
    GM_ADD_TEST(s, test_render_rejects);
    GM_ADD_TEST(s, test_render_compare);
    GM_ADD_TEST(s, test_policy_report);
    GM_ADD_TEST(s, test_axis_fit);
    GM_ADD_TEST(s, test_unknown_device);
    GM_ADD_TEST(s, test_trace_stats);
    GM_ADD_TEST(s, test_trace_stats_one_ride);
    GM_ADD_TEST(s, test_end_to_end_hostile);
    GM_ADD_TEST(s, test_iterations_chart);
    return CUE_SUCCESS;
}
