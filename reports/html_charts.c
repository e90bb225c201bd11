/*
 * html_charts.c - the report's inline SVG charts. Every timeline chart uses
 * the same x geometry (REP_PX0..REP_PX1, REP_NCOL columns over the shared
 * time range), so one hover column means one instant in every chart.
 *
 * Each timeline <svg class="tl"> carries, for the page script, its column
 * values pre-formatted in data-v ("v,v,v v,v,v ..."; "-" = none) and the
 * series names in data-names ('|'-separated). Without the script, <title>
 * elements on 40 transparent column groups (g.tt) give native tooltips, and
 * every line, marker and bar has its own <title>.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "html_int.h"

#define TT_GROUPS 40
#define ZOOM_TICKS 12
#define COLW ((REP_PX1 - REP_PX0) / REP_NCOL)

static const char *const palette[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                      "#e69f00", "#56b4e9", "#8c564b", "#1b1b7a"};

const char *rep_color(int i)
{
    if (i < 0) return "#6b7280"; /* bounds: grey */
    return palette[(size_t)i % (sizeof palette / sizeof palette[0])];
}

/* Column centres in column-index space (the x scale maps it to pixels). */
typedef struct centres {
    double x[REP_NCOL];
} centres;

static centres col_centres(void)
{
    centres c;
    for (int i = 0; i < REP_NCOL; i++)
        c.x[i] = i + 0.5;
    return c;
}

/* The x scale maps column index space [0, NCOL] to the plot. */
static gm_scale xscale(void)
{
    return (gm_scale){0, REP_NCOL, REP_PX0, REP_PX1};
}

/* Decimals that give ~3 significant digits against an axis top. */
static int decimals(double top_in_unit)
{
    int d = 2 - (int)floor(log10(top_in_unit > 0 ? top_in_unit : 1));
    return d < 0 ? 0 : d > 4 ? 4 : d;
}

/* A name for data-names: '|' is the separator, so it may not occur. */
static void put_name(gm_strbuf *b, const char *s)
{
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s", s);
    for (char *c = tmp; *c; c++)
        if (*c == '|') *c = '/';
    gm_sb_esc(b, tmp);
}

/* <svg ...> with the hover metadata; data-v is written by the caller
 * (opened here, the caller appends values and closes the quote). */
static void svg_open(gm_strbuf *b, const rep *p, double h, const char *id, const char *aria,
                     const char *unit)
{
    char tc[48];
    gm_sb_printf(b,
                 "<svg class=\"chart tl\" id=\"%s\" viewBox=\"0 0 %g %g\" role=\"img\" "
                 "aria-label=\"",
                 id, REP_W, h);
    gm_sb_esc(b, aria);
    gm_sb_printf(b,
                 "\" data-px0=\"%g\" data-cw=\"%.6f\" data-n=\"%d\" data-tc=\"%s\" "
                 "data-tu=\"%s\" data-span=\"%.0f\" data-pw=\"%g\" data-unit=\"",
                 REP_PX0, COLW, REP_NCOL,
                 gm_fmt_num((p->t1 - p->t0) / REP_NCOL / p->tu.div, 6, tc, sizeof tc), p->tu.name,
                 p->t1 - p->t0, REP_PX1 - REP_PX0);
    gm_sb_esc(b, unit);
    gm_sb_puts(b, "\"");
}

/* A hover value: fixed decimals, so values line up as they change. */
static void put_val(gm_strbuf *b, double v, double div, int dec)
{
    if (isnan(v))
        gm_sb_puts(b, "-");
    else
        gm_sb_printf(b, "%.*f", dec, v / div);
}

/* The hover cursor: a vertical line over [top, bottom] and a read-out in
 * the strip above the plot (READOUT px high), clear of every label. */
#define READOUT 16.0
static void cursor(gm_strbuf *b, double top, double bottom)
{
    gm_sb_printf(b,
                 "<g class=\"cur\" visibility=\"hidden\"><line x1=\"0\" x2=\"0\" y1=\"%g\" "
                 "y2=\"%g\"/><text class=\"ro\" x=\"%g\" y=\"%g\" text-anchor=\"end\"></text></g>",
                 top, bottom, REP_PX1, top - 6);
    gm_sb_printf(b,
                 "<rect class=\"sel\" visibility=\"hidden\" x=\"0\" y=\"%g\" width=\"0\" "
                 "height=\"%g\"/>",
                 top, bottom - top);
}

/* The zoomable plot: a nested <svg> over the plot area whose viewBox the
 * page script narrows to the dragged time range (attributes only); strokes
 * do not scale (CSS vector-effect), text stays outside it. */
static void rep_zoom_open(gm_strbuf *b, double top, double bottom)
{
    gm_sb_printf(b,
                 "<svg class=\"pz\" x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" "
                 "viewBox=\"%g %g %g %g\" preserveAspectRatio=\"none\">",
                 REP_PX0, top, REP_PX1 - REP_PX0, bottom - top, REP_PX0, top, REP_PX1 - REP_PX0,
                 bottom - top);
}

static void rep_zoom_close(gm_strbuf *b)
{
    gm_sb_puts(b, "</svg>");
}

/* The band between a series' column minima and maxima (its troughs and
 * peaks): on a long trace a column spans whole iterations, and the maxima
 * alone would draw a flat line at the peak. */
static void minmax_band(gm_strbuf *b, const char *cls, const double *lo, const double *hi,
                        const gm_scale *y, const char *title)
{
    gm_scale x = xscale();
    centres cx = col_centres();
    gm_strbuf d;
    gm_sb_init(&d);
    gm_svg_band_d(&d, &x, y, cx.x, lo, hi, REP_NCOL);
    if (d.len) {
        gm_sb_printf(b, "<path class=\"%s\" d=\"%s\"><title>", cls, gm_sb_str(&d));
        gm_sb_esc(b, title);
        gm_sb_puts(b, "</title></path>");
    }
    gm_sb_free(&d);
}

static void path(gm_strbuf *b, const char *cls, const double *v, const gm_scale *y, int area,
                 const char *title)
{
    gm_scale x = xscale();
    centres cx = col_centres();
    gm_strbuf d;
    gm_sb_init(&d);
    if (area)
        gm_svg_area_d(&d, &x, y, cx.x, v, REP_NCOL);
    else
        gm_svg_line_d(&d, &x, y, cx.x, v, REP_NCOL);
    if (d.len) {
        gm_sb_printf(b, "<path class=\"%s\" d=\"%s\">", cls, gm_sb_str(&d));
        if (title) {
            gm_sb_puts(b, "<title>");
            gm_sb_esc(b, title);
            gm_sb_puts(b, "</title>");
        }
        gm_sb_puts(b, "</path>");
    }
    gm_sb_free(&d);
}

/* A horizontal reference line across the plot, labelled at its right end
 * (left end when left != 0, so two close lines keep readable labels). */
static void hline(gm_strbuf *b, const char *cls, double py, const char *label, int left)
{
    gm_sb_printf(b, "<line class=\"%s\" x1=\"%g\" x2=\"%g\" y1=\"", cls, REP_PX0, REP_PX1);
    gm_svg_num(b, py);
    gm_sb_puts(b, "\" y2=\"");
    gm_svg_num(b, py);
    gm_sb_printf(b, "\"/><text class=\"lbl %s\" x=\"%g\" y=\"", cls,
                 left ? REP_PX0 + 4 : REP_PX1 - 4);
    gm_svg_num(b, py - 4);
    gm_sb_printf(b, "\" text-anchor=\"%s\">", left ? "start" : "end");
    gm_sb_esc(b, label);
    gm_sb_puts(b, "</text>");
}

static void time_axis(gm_strbuf *b, const rep *p, double y_px)
{
    gm_scale x = {p->t0, p->t1, REP_PX0, REP_PX1}, y = {0, 1, y_px, y_px};
    gm_sb_printf(b, "<line class=\"axis\" x1=\"%g\" x2=\"%g\" y1=\"%g\" y2=\"%g\"/>", REP_PX0,
                 REP_PX1, y_px, y_px);
    gm_sb_puts(b, "<g class=\"xax0\">");
    gm_svg_grid_x(b, &x, &y, p->t0, gm_nice_step(p->t1 - p->t0, 8), p->tu);
    /* the ticks of a zoomed range, filled in by the page script */
    gm_sb_puts(b, "</g><g class=\"xax1\" visibility=\"hidden\">");
    for (int i = 0; i < ZOOM_TICKS; i++)
        gm_sb_printf(b,
                     "<line class=\"tick\" x1=\"0\" x2=\"0\" y1=\"%g\" y2=\"%g\"/><text "
                     "class=\"ax\" text-anchor=\"middle\" x=\"0\" y=\"%g\"></text>",
                     y_px, y_px + 4, y_px + 15);
    gm_sb_puts(b, "</g>");
}

/* One marker: a red triangle over a faint line, with the OOMs it stands for. */
static void oom_mark(gm_strbuf *b, const rep *p, json_t *first, size_t n, double t_last, double px,
                     double top, double bottom)
{
    char t[32], t2[32], s[32], r[32], a[32], lf[32];
    double sz = rep_num(first, "size_bytes"), rs = rep_num(first, "reserved_bytes");
    gm_sb_puts(b, "<g class=\"oom\" data-x=\"");
    gm_sb_printf(b, "%.4f", px);
    gm_sb_puts(b, "\"><title>");
    if (n > 1)
        gm_sb_printf(b, "%zu OOMs from %s to %s; the first: ", n,
                     gm_fmt_unit(rep_num(first, "t_ns") - p->t0, p->tu, 3, t, sizeof t),
                     gm_fmt_unit(t_last - p->t0, p->tu, 3, t2, sizeof t2));
    else
        gm_sb_printf(
            b, "OOM at %s: ", gm_fmt_unit(rep_num(first, "t_ns") - p->t0, p->tu, 3, t, sizeof t));
    gm_sb_printf(b,
                 "tenant %s, event %s, %s requested; reserved %s, allocated %s, largest free "
                 "block %s</title><line x1=\"",
                 gm_fmt_num(rep_num(first, "tenant"), 0, t2, sizeof t2),
                 gm_fmt_num(rep_num(first, "event_index"), 0, lf, sizeof lf),
                 gm_fmt_unit(sz, gm_unit_bytes(sz), 2, s, sizeof s),
                 gm_fmt_unit(rs, gm_unit_bytes(rs), 2, r, sizeof r),
                 gm_fmt_unit(rep_num(first, "allocated_bytes"), gm_unit_bytes(rs), 2, a, sizeof a),
                 gm_fmt_unit(rep_num(first, "largest_free_bytes"),
                             gm_unit_bytes(rep_num(first, "largest_free_bytes")), 2, lf,
                             sizeof lf));
    gm_sb_printf(b, "%.4f", px);
    gm_sb_puts(b, "\" x2=\"");
    gm_sb_printf(b, "%.4f", px);
    gm_sb_printf(b, "\" y1=\"%g\" y2=\"%g\"/><path d=\"M", top, bottom);
    gm_sb_printf(b, "%.4f", px - 5);
    gm_sb_printf(b, " %g h10 l-5 8Z\"/></g>", top - 8);
}

/* OOM markers (of one tenant, or all when tenant < 0); OOMs closer than a
 * few pixels share one marker, so 10 000 OOMs stay a handful of elements. */
static void oom_marks(gm_strbuf *b, const rep *p, json_t *ooms, int tenant, double top,
                      double bottom)
{
    size_t i, n = 0, shown = 0;
    json_t *o, *first = NULL;
    double px0 = 0, t_last = 0;
    gm_scale x = {p->t0, p->t1, REP_PX0, REP_PX1};
    json_array_foreach(ooms, i, o)
    {
        if (tenant >= 0 && rep_num(o, "tenant") != tenant) continue;
        double px = gm_scale_px(&x, rep_num(o, "t_ns"));
        if (first && px - px0 < 4) {
            n++;
            t_last = rep_num(o, "t_ns");
            continue;
        }
        if (first && shown++ < REP_MAX_OOM_MARKS)
            oom_mark(b, p, first, n, t_last, px0, top, bottom);
        first = o;
        n = 1;
        px0 = px;
        t_last = rep_num(o, "t_ns");
    }
    if (first && shown < REP_MAX_OOM_MARKS) oom_mark(b, p, first, n, t_last, px0, top, bottom);
}

/* Transparent column groups with native tooltips (the no-script hover). */
static void tooltips(gm_strbuf *b, const rep *p, double top, double bottom,
                     void (*text)(gm_strbuf *, const void *, size_t, size_t), const void *ctx)
{
    char t0[32], t1[32];
    gm_sb_puts(b, "<g class=\"tt\">");
    size_t per = REP_NCOL / TT_GROUPS;
    for (size_t g = 0; g < TT_GROUPS; g++) {
        size_t c0 = g * per, c1 = c0 + per;
        double a = (p->t1 - p->t0) * (double)c0 / REP_NCOL;
        double z = (p->t1 - p->t0) * (double)c1 / REP_NCOL;
        gm_sb_puts(b, "<rect x=\"");
        gm_svg_num(b, REP_PX0 + c0 * COLW);
        gm_sb_printf(b, "\" y=\"%g\" width=\"", top);
        gm_svg_num(b, per * COLW);
        gm_sb_printf(b, "\" height=\"%g\"><title>%s \xe2\x80\x93 %s %s: ", bottom - top,
                     gm_fmt_num(a / p->tu.div, 3, t0, sizeof t0),
                     gm_fmt_num(z / p->tu.div, 3, t1, sizeof t1), p->tu.name);
        text(b, ctx, c0, c1);
        gm_sb_puts(b, "</title></rect>");
    }
    gm_sb_puts(b, "</g>");
}

static double col_max(const double *v, size_t c0, size_t c1)
{
    double m = NAN;
    for (size_t c = c0; c < c1; c++)
        if (!isnan(v[c]) && (isnan(m) || v[c] > m)) m = v[c];
    return m;
}

static double col_min(const double *v, size_t c0, size_t c1)
{
    double m = NAN;
    for (size_t c = c0; c < c1; c++)
        if (!isnan(v[c]) && (isnan(m) || v[c] < m)) m = v[c];
    return m;
}

/* A hover value as "min–max" (one number when they print the same). */
static void put_range(gm_strbuf *b, double lo, double hi, double div, int dec)
{
    char l[48], h[48];
    if (isnan(hi)) {
        gm_sb_puts(b, "-");
        return;
    }
    snprintf(h, sizeof h, "%.*f", dec, hi / div);
    snprintf(l, sizeof l, "%.*f", dec, lo / div);
    if (isnan(lo) || !strcmp(l, h))
        gm_sb_puts(b, h);
    else
        gm_sb_printf(b, "%s\xe2\x80\x93%s", l, h);
}

/* "1.20 – 4.26 GiB" (or one value) for a tooltip. */
static char *fmt_range(double lo, double hi, gm_unit u, char *buf, size_t len)
{
    char l[32], h[32];
    gm_fmt_unit(hi, u, 2, h, sizeof h);
    gm_fmt_unit(lo, u, 2, l, sizeof l);
    if (isnan(lo) || isnan(hi) || !strcmp(l, h))
        snprintf(buf, len, "%s", h);
    else
        snprintf(buf, len, "%.*f \xe2\x80\x93 %s", 2, lo / u.div, h);
    return buf;
}

/* ------------------------------------------------------------- memory */

typedef struct mem_ctx {
    const rep_cols *c;
    gm_unit u;
} mem_ctx;

static void mem_text(gm_strbuf *b, const void *ctx, size_t c0, size_t c1)
{
    const mem_ctx *m = ctx;
    const rep_cols *c = m->c;
    char q[80], a[80], r[80];
    gm_sb_printf(b, "requested %s, allocated %s, reserved %s (min \xe2\x80\x93 max)",
                 fmt_range(col_min(c->q_min, c0, c1), col_max(c->q, c0, c1), m->u, q, sizeof q),
                 fmt_range(col_min(c->a_min, c0, c1), col_max(c->a, c0, c1), m->u, a, sizeof a),
                 fmt_range(col_min(c->r_min, c0, c1), col_max(c->r, c0, c1), m->u, r, sizeof r));
}

/* The zoom pyramid (reports/segmap.h "zoom") as data-lv: levels split by
 * '|', each "f0,f1,lo,hi,g;" (its window as fractions of the chart's span,
 * its value range in the axis unit, its group: 0 around the peak, k around
 * the k-th OOM) then its series reserved, allocated,
 * requested, requested minimum split by ';', each ZCOLS integers 0..999
 * over [lo, hi] split by ','. The script draws the finest level that holds
 * a zoomed range in the plot's fine layer (rep_zoom_fine). */
static void zoom_levels_attr(gm_strbuf *b, const rep *p, const rep_run *r)
{
    json_t *lv =
        json_object_get(json_object_get(json_object_get(r->j, "segment_maps"), "zoom"), "levels");
    double span = p->t1 - p->t0;
    if (!json_array_size(lv) || !(span > 0)) return;
    static const char *const ser[] = {"reserved", "allocated", "requested", "requested_min"};
    gm_sb_puts(b, " data-lv=\"");
    size_t i, nw = 0;
    json_t *l;
    json_array_foreach(lv, i, l)
    {
        double lo = INFINITY, hi = -INFINITY;
        for (int k = 0; k < 4; k++) {
            size_t j;
            json_t *v;
            json_array_foreach(json_object_get(l, ser[k]), j, v)
            {
                lo = fmin(lo, json_number_value(v));
                hi = fmax(hi, json_number_value(v));
            }
        }
        if (!(hi >= lo)) continue;
        if (hi == lo) hi = lo + 1;
        if (nw++) gm_sb_puts(b, "|");
        json_t *g = json_object_get(l, "oom");
        gm_sb_printf(b, "%.12g,%.12g,%.9g,%.9g,%d", (rep_num(l, "t0") - p->t0) / span,
                     (rep_num(l, "t1") - p->t0) / span, lo / p->yu.div, hi / p->yu.div,
                     json_is_integer(g) ? (int)json_integer_value(g) + 1 : 0);
        for (int k = 0; k < 4; k++) {
            size_t j;
            json_t *v;
            gm_sb_puts(b, ";");
            json_array_foreach(json_object_get(l, ser[k]), j, v) gm_sb_printf(
                b, "%s%.0f", j ? "," : "", (json_number_value(v) - lo) / (hi - lo) * 999);
        }
    }
    gm_sb_puts(b, "\"");
}

/* The OOMs inside the zoom pyramid's narrow windows (under 1/1000 of the
 * chart), each at its exact time (data-f: a fraction of the chart's span)
 * for the script to place while such a level is drawn: there the plot's
 * markers (x to 1/10000 px, drawn through a viewBox in single precision)
 * would sit beside the events; hidden otherwise. At most the results' own
 * list of OOMs (the first 256). */
static void fine_ooms(gm_strbuf *b, const rep *p, const rep_run *r, double top, double bottom)
{
    json_t *lv =
        json_object_get(json_object_get(json_object_get(r->j, "segment_maps"), "zoom"), "levels");
    double span = p->t1 - p->t0;
    if (!json_array_size(lv) || !(span > 0)) return;
    size_t i, k;
    json_t *o, *l;
    json_array_foreach(json_object_get(r->m, "ooms"), i, o)
    {
        double t = rep_num(o, "t_ns");
        int in = 0;
        json_array_foreach(lv, k, l) in |= t >= rep_num(l, "t0") && t < rep_num(l, "t1") &&
                                           rep_num(l, "t1") - rep_num(l, "t0") < span / 1000;
        if (!in) continue;
        char sz[32], lf[32];
        double req = rep_num(o, "size_bytes"), big = rep_num(o, "largest_free_bytes");
        gm_sb_printf(b,
                     "<g class=\"fo\" data-f=\"%.12g\" visibility=\"hidden\"><title>OOM at "
                     "%.10g %s: %s requested, largest free block %s</title><line x1=\"0\" "
                     "x2=\"0\" y1=\"%g\" y2=\"%g\"/><path d=\"M-5 %g h10 l-5 8Z\"/></g>",
                     (t - p->t0) / span, (t - p->t0) / p->tu.div, p->tu.name,
                     gm_fmt_unit(req, gm_unit_bytes(req), 2, sz, sizeof sz),
                     gm_fmt_unit(big, gm_unit_bytes(big), 2, lf, sizeof lf), top, bottom, top - 8);
    }
}

/* The fine layer over the plot: empty paths the script fills from data-lv
 * in the level's own columns (its viewBox: 0..400 wide), so a window a
 * millionth of the trace is drawn without float rounding. */
static void rep_zoom_fine(gm_strbuf *b, const rep *p, const rep_run *r, double top, double bottom)
{
    (void)p;
    if (!json_array_size(json_object_get(
            json_object_get(json_object_get(r->j, "segment_maps"), "zoom"), "levels")))
        return;
    gm_sb_printf(b,
                 "<svg class=\"pf\" x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" viewBox=\"0 %g "
                 "400 %g\" preserveAspectRatio=\"none\" visibility=\"hidden\"><path "
                 "class=\"s-r\"/><path class=\"s-a\"/><path class=\"s-q\"/><path class=\"s-q "
                 "lo\"/></svg>",
                 REP_PX0, top, REP_PX1 - REP_PX0, bottom - top, top, bottom - top);
}

void rep_chart_memory(gm_strbuf *b, const rep *p, size_t run)
{
    const rep_run *r = &p->run[run];
    const double H = 256, top = 14 + READOUT, bottom = H - 26;
    char id[32], lbl[512], v[32];
    snprintf(id, sizeof id, "mem-%zu", run);
    snprintf(lbl, sizeof lbl, "memory over time, %s", r->label);
    svg_open(b, p, H, id, lbl, p->yu.name);
    /* the y refit after a zoom (every memory chart together): the axis'
     * values at its bottom and top (in the unit), and their pixels */
    gm_sb_printf(b,
                 " data-yr=\"mem\" data-y0=\"%.6g\" data-y1=\"%.6g\" data-top=\"%g\" "
                 "data-bot=\"%g\"",
                 p->ymin / p->yu.div, p->ymax / p->yu.div, top, bottom);
    zoom_levels_attr(b, p, r);
    gm_sb_puts(b, " data-names=\"requested|allocated|reserved\" data-v=\"");
    int dec = decimals(p->ymax / p->yu.div);
    for (int c = 0; r->cols && c < REP_NCOL; c++) {
        const rep_cols *rc = r->cols;
        if (c) gm_sb_puts(b, " ");
        put_range(b, rc->q_min[c], rc->q[c], p->yu.div, dec);
        gm_sb_puts(b, ",");
        put_range(b, rc->a_min[c], rc->a[c], p->yu.div, dec);
        gm_sb_puts(b, ",");
        put_range(b, rc->r_min[c], rc->r[c], p->yu.div, dec);
    }
    gm_sb_puts(b, "\">");
    gm_scale x = xscale(), y = {p->ymin, p->ymax, bottom, top};
    gm_sb_puts(b, "<g class=\"yax0\">");
    gm_svg_grid_y(b, &x, &y, p->ystep, p->yu, decimals(p->ystep / p->yu.div) - 2);
    /* the ticks of a refitted axis, filled in by the page script */
    gm_sb_puts(b, "</g><g class=\"yax1\" visibility=\"hidden\">");
    for (int i = 0; i < ZOOM_TICKS; i++)
        gm_sb_printf(b,
                     "<line class=\"grid\" x1=\"%g\" x2=\"%g\" y1=\"0\" y2=\"0\"/><text "
                     "class=\"ax\" text-anchor=\"end\" x=\"%g\" y=\"0\"></text>",
                     REP_PX0, REP_PX1, REP_PX0 - 6);
    gm_sb_puts(b, "</g>");
    time_axis(b, p, bottom);
    if (!r->cols) {
        gm_sb_printf(b, "<text class=\"lbl\" x=\"%g\" y=\"%g\">no timeline in the results</text>",
                     REP_PX0 + 8, top + 20);
    }
    rep_zoom_open(b, top, bottom);
    gm_sb_puts(b, "<g class=\"crs\">");
    if (r->cols) {
        const rep_cols *rc = r->cols;
        path(b, "s-r area", rc->r, &y, 1, NULL);
        minmax_band(b, "s-a band", rc->a_min, rc->a, &y, "allocated, min to max per column");
        minmax_band(b, "s-q band", rc->q_min, rc->q, &y, "requested, min to max per column");
        path(b, "s-r", rc->r, &y, 0, "reserved (held from the driver), max per column");
        path(b, "s-a", rc->a, &y, 0, "allocated (live blocks, rounded), max per column");
        path(b, "s-q", rc->q, &y, 0, "requested (live tensor bytes), max per column");
        path(b, "s-q lo", rc->q_min, &y, 0, "requested (live tensor bytes), min per column");
    }
    gm_sb_puts(b, "</g>");
    oom_marks(b, p, json_object_get(r->m, "ooms"), -1, top, bottom);
    rep_zoom_close(b);
    rep_zoom_fine(b, p, r, top, bottom);
    fine_ooms(b, p, r, top, bottom);
    if (p->peak_live > 0) {
        snprintf(lbl, sizeof lbl, "limit: peak live %s",
                 gm_fmt_unit(p->peak_live, p->yu, 2, v, sizeof v));
        gm_sb_printf(b, "<g class=\"hl\" data-hv=\"%.6g\">", p->peak_live / p->yu.div);
        hline(b, "limit", gm_scale_px(&y, p->peak_live), lbl, 1);
        gm_sb_puts(b, "</g>");
    }
    if (r->usable > 0 && r->usable <= p->ymax) {
        snprintf(lbl, sizeof lbl, "usable capacity %s",
                 gm_fmt_unit(r->usable, p->yu, 2, v, sizeof v));
        gm_sb_printf(b, "<g class=\"hl\" data-hv=\"%.6g\">", r->usable / p->yu.div);
        hline(b, "cap", gm_scale_px(&y, r->usable), lbl, 0);
        gm_sb_puts(b, "</g>");
    }
    if (r->cols) {
        mem_ctx m = {r->cols, p->yu};
        tooltips(b, p, top, bottom, mem_text, &m);
    }
    cursor(b, top, bottom);
    gm_sb_puts(b, "</svg>");
}

/* ------------------------------------------------------- fragmentation */

static void unused_share(const rep_cols *c, double *out)
{
    for (int i = 0; i < REP_NCOL; i++)
        out[i] = c->r[i] > 0 && !isnan(c->a[i]) ? 1.0 - c->a[i] / c->r[i] : NAN;
}

void rep_chart_frag(gm_strbuf *b, const rep *p, size_t run)
{
    const rep_run *r = &p->run[run];
    const double H = 128, top = 8 + READOUT, bottom = H - 24;
    char id[32], lbl[512];
    double u[REP_NCOL];
    gm_unit pct = {"%", 0.01};
    snprintf(id, sizeof id, "frag-%zu", run);
    snprintf(lbl, sizeof lbl, "fragmentation over time, %s", r->label);
    svg_open(b, p, H, id, lbl, "%");
    gm_sb_puts(b, " data-names=\"external frag.|unallocated share\" data-v=\"");
    if (r->cols) {
        unused_share(r->cols, u);
        for (int c = 0; c < REP_NCOL; c++) {
            if (c) gm_sb_puts(b, " ");
            put_val(b, r->cols->f[c], 0.01, 1);
            gm_sb_puts(b, ",");
            put_val(b, u[c], 0.01, 1);
        }
    }
    gm_sb_puts(b, "\">");
    gm_scale x = xscale(), y = {0, 1, bottom, top};
    gm_svg_grid_y(b, &x, &y, 0.5, pct, 0);
    time_axis(b, p, bottom);
    rep_zoom_open(b, top, bottom);
    if (r->cols) {
        path(b, "s-f area", r->cols->f, &y, 1, NULL);
        path(b, "s-f", r->cols->f, &y, 0,
             "external fragmentation: 1 - largest free block / (reserved - allocated)");
        path(b, "s-u", u, &y, 0, "reserved but unallocated: 1 - allocated / reserved");
    }
    rep_zoom_close(b);
    cursor(b, top, bottom);
    gm_sb_puts(b, "</svg>");
}

/* ------------------------------------------------------------ tenants */

void rep_chart_tenants(gm_strbuf *b, const rep *p, size_t run)
{
    const rep_run *r = &p->run[run];
    const double band = 78, gap = 14, top = 4 + READOUT;
    double H = top + r->nt * (band + gap) + 20;
    char id[32], lbl[512], v[32];
    snprintf(id, sizeof id, "ten-%zu", run);
    snprintf(lbl, sizeof lbl, "reserved memory per tenant, %s", r->label);
    svg_open(b, p, H, id, lbl, p->yu_t.name);
    gm_sb_puts(b, " data-names=\"");
    for (size_t k = 0; k < r->nt; k++)
        gm_sb_printf(b, "%stenant %zu", k ? "|" : "", k);
    gm_sb_puts(b, "\" data-v=\"");
    int dec = decimals(p->ymax_t / p->yu_t.div);
    for (int c = 0; c < REP_NCOL; c++) {
        if (c) gm_sb_puts(b, " ");
        for (size_t k = 0; k < r->nt; k++) {
            if (k) gm_sb_puts(b, ",");
            put_val(b, r->t[k].cols ? r->t[k].cols->r[c] : NAN, p->yu_t.div, dec);
        }
    }
    gm_sb_puts(b, "\">");
    gm_scale x = xscale();
    for (size_t k = 0; k < r->nt; k++) {
        const rep_tenant *t = &r->t[k];
        double y0 = top + k * (band + gap), y1 = y0 + band;
        gm_scale y = {0, p->ymax_t, y1, y0 + 4};
        gm_sb_printf(b, "<rect class=\"band\" x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\"/>",
                     REP_PX0, y0, REP_PX1 - REP_PX0, band);
        gm_svg_grid_y(b, &x, &y, p->ymax_t / 2, p->yu_t, decimals(p->ymax_t / p->yu_t.div) - 1);
        rep_zoom_open(b, y0, y1);
        if (t->cols) {
            path(b, "s-r area", t->cols->r, &y, 1, NULL);
            minmax_band(b, "s-q band", t->cols->q_min, t->cols->q, &y, "requested, min to max");
            path(b, "s-r", t->cols->r, &y, 0, "reserved");
            path(b, "s-a", t->cols->a, &y, 0, "allocated");
            path(b, "s-q", t->cols->q, &y, 0, "requested");
        }
        rep_zoom_close(b);
        const char *trace = rep_str(t->j, "trace");
        const char *base = trace ? strrchr(trace, '/') : NULL;
        snprintf(lbl, sizeof lbl, "tenant %zu \xc2\xb7 %s%s", k,
                 base    ? base + 1
                 : trace ? trace
                         : "?",
                 rep_str(t->j, "status") && !strcmp(rep_str(t->j, "status"), "aborted")
                     ? " \xc2\xb7 aborted (OOM)"
                     : "");
        gm_sb_printf(b, "<text class=\"band-l\" x=\"%g\" y=\"%g\">", REP_PX0 + 6, y0 + 14);
        gm_sb_esc(b, lbl);
        gm_sb_puts(b, "</text>");
        double ab = rep_num(t->j, "abort_t_ns");
        if (!isnan(ab)) {
            gm_scale xt = {p->t0, p->t1, REP_PX0, REP_PX1};
            snprintf(lbl, sizeof lbl, "tenant %zu aborted at %s", k,
                     gm_fmt_unit(ab - p->t0, p->tu, 3, v, sizeof v));
            gm_sb_puts(b, "<line class=\"abort\" x1=\"");
            gm_svg_num(b, gm_scale_px(&xt, ab));
            gm_sb_puts(b, "\" x2=\"");
            gm_svg_num(b, gm_scale_px(&xt, ab));
            gm_sb_printf(b, "\" y1=\"%g\" y2=\"%g\"><title>", y0, y1);
            gm_sb_esc(b, lbl);
            gm_sb_puts(b, "</title></line>");
        }
        oom_marks(b, p, json_object_get(r->m, "ooms"), (int)k, y0 + 8, y1);
    }
    time_axis(b, p, H - 20);
    cursor(b, top, H - 20);
    gm_sb_puts(b, "</svg>");
}

/* ------------------------------------------------------------ overlay */

typedef struct ov_ctx {
    const rep *p;
} ov_ctx;

static void ov_text(gm_strbuf *b, const void *ctx, size_t c0, size_t c1)
{
    const rep *p = ((const ov_ctx *)ctx)->p;
    char v[32];
    gm_sb_puts(b, "max reserved:");
    for (size_t i = 0; i < p->n; i++) {
        const rep_run *r = &p->run[p->order[i]];
        gm_sb_puts(b, i ? ", " : " ");
        gm_sb_esc(b, r->label);
        gm_sb_printf(
            b, " %s",
            gm_fmt_unit(r->cols ? col_max(r->cols->r, c0, c1) : NAN, p->yu, 2, v, sizeof v));
    }
}

/* ---------------------------------------------------- size histogram */

/* A power-of-two edge, short: 0, 512, 1K, 64K, 2M, 1G (binary units). */
static void short_edge(double v, char *buf, size_t len)
{
    static const char *suf[] = {"", "K", "M", "G", "T", "P"};
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%.0f%s", v, suf[u]);
}

void rep_chart_sizes(gm_strbuf *b, json_t *stats)
{
    json_t *h = json_object_get(stats, "size_histogram");
    json_t *edges = json_object_get(h, "edges_bytes"), *na = json_object_get(h, "allocs"),
           *nb = json_object_get(h, "bytes");
    size_t n = json_array_size(na);
    if (n == 0 || json_array_size(edges) != n + 1 || json_array_size(nb) != n) {
        gm_sb_puts(b, "<p class=\"note\">No allocations in this trace.</p>");
        return;
    }
    double ta = 0, tb = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        ta += json_number_value(json_array_get(na, i));
        tb += json_number_value(json_array_get(nb, i));
    }
    for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, json_number_value(json_array_get(na, i)) / (ta > 0 ? ta : 1));
        mx = fmax(mx, json_number_value(json_array_get(nb, i)) / (tb > 0 ? tb : 1));
    }
    const double H = 230, top = 12, bottom = H - 40;
    double step, ytop = gm_nice_top(mx, 4, &step);
    gm_unit pct = {"%", 0.01};
    gm_sb_printf(b,
                 "<svg class=\"chart\" viewBox=\"0 0 %g %g\" role=\"img\" aria-label=\"allocation "
                 "sizes\">",
                 REP_W, H);
    gm_scale x = {0, (double)n, REP_PX0, REP_PX1}, y = {0, ytop, bottom, top};
    gm_svg_grid_y(b, &x, &y, step, pct, step < 0.01 ? 1 : 0);
    gm_sb_printf(b, "<line class=\"axis\" x1=\"%g\" x2=\"%g\" y1=\"%g\" y2=\"%g\"/>", REP_PX0,
                 REP_PX1, bottom, bottom);
    double bw = (REP_PX1 - REP_PX0) / (double)n;
    for (size_t i = 0; i < n; i++) {
        double ca = json_number_value(json_array_get(na, i)),
               cb = json_number_value(json_array_get(nb, i));
        double lo = json_number_value(json_array_get(edges, i)),
               hi = json_number_value(json_array_get(edges, i + 1));
        char e0[24], e1[24], pa[24], pb[24], bytes[32];
        gm_fmt_unit(lo, gm_unit_bytes(lo), lo >= 1024 ? 0 : 0, e0, sizeof e0);
        gm_fmt_unit(hi, gm_unit_bytes(hi), 0, e1, sizeof e1);
        double fa = ca / (ta > 0 ? ta : 1), fb = cb / (tb > 0 ? tb : 1);
        gm_sb_printf(
            b, "<g class=\"bar\"><title>[%s, %s): %.0f allocations (%s), %s requested (%s)</title>",
            e0, e1, ca, gm_fmt_pct(fa, pa, sizeof pa),
            gm_fmt_unit(cb, gm_unit_bytes(cb), 2, bytes, sizeof bytes),
            gm_fmt_pct(fb, pb, sizeof pb));
        double x0 = REP_PX0 + i * bw, w = bw * 0.4;
        gm_sb_puts(b, "<rect class=\"h-n\" x=\"");
        gm_svg_num(b, x0 + bw * 0.1);
        gm_sb_puts(b, "\" y=\"");
        gm_svg_num(b, gm_scale_px(&y, fa));
        gm_sb_puts(b, "\" width=\"");
        gm_svg_num(b, w);
        gm_sb_puts(b, "\" height=\"");
        gm_svg_num(b, bottom - gm_scale_px(&y, fa));
        gm_sb_puts(b, "\"/><rect class=\"h-b\" x=\"");
        gm_svg_num(b, x0 + bw * 0.5);
        gm_sb_puts(b, "\" y=\"");
        gm_svg_num(b, gm_scale_px(&y, fb));
        gm_sb_puts(b, "\" width=\"");
        gm_svg_num(b, w);
        gm_sb_puts(b, "\" height=\"");
        gm_svg_num(b, bottom - gm_scale_px(&y, fb));
        /* a transparent full-height rect makes small bars easy to hover */
        gm_sb_puts(b, "\"/><rect class=\"hit\" x=\"");
        gm_svg_num(b, x0);
        gm_sb_printf(b, "\" y=\"%g\" width=\"", top);
        gm_svg_num(b, bw);
        gm_sb_printf(b, "\" height=\"%g\"/></g>", bottom - top);
    }
    for (size_t i = 0; i <= n; i++) {
        char e[24];
        short_edge(json_number_value(json_array_get(edges, i)), e, sizeof e);
        double px = REP_PX0 + i * bw;
        gm_sb_puts(b, "<text class=\"ax\" text-anchor=\"middle\" x=\"");
        gm_svg_num(b, px);
        gm_sb_printf(b, "\" y=\"%g\">%s</text>", bottom + 14, e);
    }
    gm_sb_printf(b,
                 "<text class=\"ax\" text-anchor=\"middle\" x=\"%g\" y=\"%g\">requested size "
                 "(log2 bins; K, M, G = KiB, MiB, GiB)</text></svg>",
                 (REP_PX0 + REP_PX1) / 2, bottom + 32);
}

/* ------------------------------------------------ iterations and leak */

/* Live bytes at each iteration boundary (trace_stats.iterations, from
 * study/leak.c), warm-up points hollow, the fitted line over the points
 * the fit used, and the verdict in words. Nothing without boundaries.
 * Beyond ITER_MAX_POINTS boundaries, one min-max bar per bin of them. */
#define ITER_MAX_POINTS 400
void rep_chart_iterations(gm_strbuf *b, json_t *stats)
{
    json_t *it = json_object_get(stats, "iterations");
    json_t *pts = json_object_get(it, "boundaries");
    size_t n = json_array_size(pts);
    if (n < 2) return;
    double mx = 0;
    for (size_t k = 0; k < n; k++)
        mx = fmax(mx, json_number_value(json_object_get(json_array_get(pts, k), "live_bytes")));
    json_t *fit = json_object_get(it, "fit");
    double slope = json_number_value(json_object_get(fit, "slope_bytes_per_iteration")),
           icpt = json_number_value(json_object_get(fit, "intercept_bytes"));
    double f0 = json_number_value(json_object_get(fit, "first_iteration")),
           fn = json_number_value(json_object_get(fit, "iterations"));
    int has_fit = json_is_object(fit) && fn >= 2;
    if (has_fit) mx = fmax(mx, fmax(icpt + slope * f0, icpt + slope * (f0 + fn - 1)));
    const double H = 230, top = 12, bottom = H - 40;
    gm_unit u = gm_unit_bytes(mx); /* ticks at round numbers of the unit shown */
    double step, ytop = gm_nice_top(mx / u.div, 4, &step) * u.div;
    step *= u.div;
    const char *verdict = json_string_value(json_object_get(it, "verdict"));
    size_t warm = (size_t)json_number_value(json_object_get(it, "warmup_iterations"));
    gm_sb_printf(b,
                 "<svg class=\"chart iter\" id=\"iterations\" viewBox=\"0 0 %g %g\" role=\"img\" "
                 "aria-label=\"live bytes at each iteration boundary\">",
                 REP_W, H);
    gm_scale x = {-0.5, (double)n - 0.5, REP_PX0, REP_PX1}, y = {0, ytop, bottom, top};
    gm_svg_grid_y(b, &x, &y, step, u, decimals(ytop / u.div));
    gm_sb_printf(b, "<line class=\"axis\" x1=\"%g\" x2=\"%g\" y1=\"%g\" y2=\"%g\"/>", REP_PX0,
                 REP_PX1, bottom, bottom);
    if (has_fit) {
        double x0 = f0, x1 = f0 + fn - 1;
        gm_sb_puts(b, "<line class=\"fit\" x1=\"");
        gm_svg_num(b, gm_scale_px(&x, x0));
        gm_sb_puts(b, "\" y1=\"");
        gm_svg_num(b, gm_scale_px(&y, icpt + slope * x0));
        gm_sb_puts(b, "\" x2=\"");
        gm_svg_num(b, gm_scale_px(&x, x1));
        gm_sb_puts(b, "\" y2=\"");
        gm_svg_num(b, gm_scale_px(&y, icpt + slope * x1));
        gm_sb_puts(b, "\"/>");
    }
    size_t tick = n <= 20 ? 1 : (size_t)gm_nice_step((double)n, 10);
    /* a point per boundary; past ITER_MAX_POINTS (a 50 M-event trace has
     * 19 000), the warm-up ones and then one min-to-max bar per bin of
     * boundaries, so the page stays in its budget and a growth still shows */
    size_t nb = n > ITER_MAX_POINTS ? ITER_MAX_POINTS : n - (warm < n ? warm : n),
           w = warm < n ? warm : n, m = n - w;
    for (size_t k = 0; k < (n > ITER_MAX_POINTS ? w : n); k++) {
        double v = json_number_value(json_object_get(json_array_get(pts, k), "live_bytes"));
        char s[32];
        gm_sb_printf(b, "<circle class=\"%s\" r=\"3.5\" cx=\"", k < warm ? "pt warm" : "pt");
        gm_svg_num(b, gm_scale_px(&x, (double)k));
        gm_sb_puts(b, "\" cy=\"");
        gm_svg_num(b, gm_scale_px(&y, v));
        gm_sb_printf(b, "\"><title>iteration %zu%s: %s live</title></circle>", k,
                     k < warm ? " (warm-up)" : "", gm_fmt_unit(v, u, 2, s, sizeof s));
    }
    for (size_t i = 0; n > ITER_MAX_POINTS && i < nb; i++) {
        size_t k0 = w + i * m / nb, k1 = w + (i + 1) * m / nb;
        double lo = INFINITY, hi = -INFINITY;
        for (size_t k = k0; k < k1; k++) {
            double v = json_number_value(json_object_get(json_array_get(pts, k), "live_bytes"));
            lo = fmin(lo, v);
            hi = fmax(hi, v);
        }
        if (k1 <= k0) continue;
        char s[32], s2[32];
        double cx = gm_scale_px(&x, (double)(k0 + k1 - 1) / 2);
        gm_sb_puts(b, "<line class=\"pt rng\" x1=\"");
        gm_svg_num(b, cx);
        gm_sb_puts(b, "\" x2=\"");
        gm_svg_num(b, cx);
        gm_sb_puts(b, "\" y1=\"");
        gm_svg_num(b, gm_scale_px(&y, lo));
        gm_sb_puts(b, "\" y2=\"");
        gm_svg_num(b, gm_scale_px(&y, hi));
        gm_sb_printf(b, "\"><title>iterations %zu&ndash;%zu: %s &ndash; %s live</title></line>", k0,
                     k1 - 1, gm_fmt_unit(lo, u, 2, s, sizeof s),
                     gm_fmt_unit(hi, u, 2, s2, sizeof s2));
    }
    for (size_t k = 0; k < n; k += tick) {
        gm_sb_puts(b, "<text class=\"ax\" text-anchor=\"middle\" x=\"");
        gm_svg_num(b, gm_scale_px(&x, (double)k));
        gm_sb_printf(b, "\" y=\"%g\">%zu</text>", bottom + 14, k);
    }
    gm_sb_printf(b,
                 "<text class=\"ax\" text-anchor=\"middle\" x=\"%g\" y=\"%g\">iteration "
                 "boundary</text></svg>",
                 (REP_PX0 + REP_PX1) / 2, bottom + 32);
    /* the verdict in words, under the chart */
    char s1[48], s2[48];
    gm_sb_puts(b, "<p class=\"iter-verdict\"><b>");
    gm_sb_esc(b, verdict ? verdict : "unknown");
    gm_sb_puts(b, "</b>");
    if (has_fit) {
        gm_unit su = gm_unit_bytes(fabs(slope));
        gm_sb_printf(b, ": %s%s per iteration over iterations %.0f&ndash;%.0f (R&sup2; %s)",
                     slope < 0 ? "-" : "+", gm_fmt_unit(fabs(slope), su, 2, s1, sizeof s1), f0,
                     f0 + fn - 1,
                     gm_fmt_num(json_number_value(json_object_get(fit, "r2")), 3, s2, sizeof s2));
    }
    if (warm) gm_sb_printf(b, "; %zu warm-up iteration%s left out", warm, warm == 1 ? "" : "s");
    json_t *end = json_object_get(it, "growth_end_iteration");
    if (json_is_number(end))
        gm_sb_printf(b, "; growth stopped at iteration %.0f", json_number_value(end));
    json_t *ro = json_object_get(it, "runout_iteration");
    if (json_is_number(ro))
        gm_sb_printf(b, "; at this rate %s runs out at iteration %.0f",
                     gm_fmt_bytes_auto(json_number_value(json_object_get(it, "capacity_bytes")), s1,
                                       sizeof s1),
                     json_number_value(ro));
    gm_sb_puts(b, ".</p>");
}

/* ------------------------------------------------- allocations as bands */

typedef struct al_band {
    double t0, t1, size, off; /* timeline ns; bytes; offset in the stack */
    int cat, site, live_end;
} al_band;

static int al_overlap(const al_band *a, const al_band *b)
{
    return a->t0 < b->t1 && b->t0 < a->t1;
}

static int cmp_off(const void *x, const void *y)
{
    const al_band *a = *(al_band *const *)x, *b = *(al_band *const *)y;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* First fit, largest first (the bands come sorted by size): each band sits
 * at the lowest offset where no band alive at the same time is, so no two
 * overlap and the stack is about as high as the bands' peak. */
static void al_pack(al_band *v, size_t n)
{
    al_band **near = malloc((n ? n : 1) * sizeof *near);
    if (!near) return;
    for (size_t i = 0; i < n; i++) {
        size_t m = 0;
        for (size_t k = 0; k < i; k++)
            if (al_overlap(&v[i], &v[k])) near[m++] = &v[k];
        qsort(near, m, sizeof *near, cmp_off);
        double off = 0;
        for (size_t k = 0; k < m; k++) {
            if (near[k]->off >= off + v[i].size) break;
            off = fmax(off, near[k]->off + near[k]->size);
        }
        v[i].off = off;
    }
    free(near);
}

static void px2(gm_strbuf *b, double v)
{
    gm_sb_printf(b, "%.2f", v);
}

void rep_chart_allocs(gm_strbuf *b, const rep *p, json_t *top, double offset_ns, const char *id)
{
    json_t *rows = json_object_get(top, "rows"), *sites = json_object_get(top, "sites"),
           *rest = json_object_get(top, "rest_max_bytes");
    size_t n = json_array_size(rows);
    double tt0 = rep_num(top, "t0_ns") + offset_ns, tt1 = rep_num(top, "t1_ns") + offset_ns;
    al_band *v = calloc(n ? n : 1, sizeof *v);
    if (!v) return;
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(rows, i);
        double tf = json_number_value(json_array_get(r, 1));
        v[i].t0 = json_number_value(json_array_get(r, 0)) + offset_ns;
        v[i].live_end = tf < 0;
        v[i].t1 = tf < 0 ? tt1 : tf + offset_ns;
        if (v[i].t1 <= v[i].t0) v[i].t1 = v[i].t0 + 1; /* freed at once: still drawn */
        v[i].size = json_number_value(json_array_get(r, 2));
        v[i].cat = gm_category_parse(json_string_value(json_array_get(r, 3)));
        if (v[i].cat < 0) v[i].cat = 0;
        v[i].site = (int)json_integer_value(json_array_get(r, 4));
        if (!json_is_integer(json_array_get(r, 4))) v[i].site = -1;
    }
    al_pack(v, n);
    /* per column: the stack's ceiling, and the rest above it */
    double ceil_[REP_NCOL], hi[REP_NCOL], rs[REP_NCOL], ymax = 0;
    gm_scale xt = {p->t0, p->t1, REP_PX0, REP_PX1};
    for (int c = 0; c < REP_NCOL; c++) {
        ceil_[c] = 0;
        /* the rest's columns are over the trace's own range */
        double t = p->t0 + (p->t1 - p->t0) * (c + 0.5) / REP_NCOL;
        double f = tt1 > tt0 ? (t - tt0) / (tt1 - tt0) * REP_NCOL : 0;
        json_t *x = f >= 0 && f < REP_NCOL ? json_array_get(rest, (size_t)f) : NULL;
        rs[c] = x ? json_number_value(x) : NAN;
    }
    for (size_t i = 0; i < n; i++) {
        int c0 = (int)floor((v[i].t0 - p->t0) / (p->t1 - p->t0) * REP_NCOL);
        int c1 = (int)ceil((v[i].t1 - p->t0) / (p->t1 - p->t0) * REP_NCOL);
        for (int c = c0 < 0 ? 0 : c0; c < c1 && c < REP_NCOL; c++)
            ceil_[c] = fmax(ceil_[c], v[i].off + v[i].size);
    }
    for (int c = 0; c < REP_NCOL; c++) {
        hi[c] = ceil_[c] + (isnan(rs[c]) ? 0 : rs[c]);
        ymax = fmax(ymax, hi[c]);
    }
    gm_unit u = gm_unit_bytes(ymax > 0 ? ymax : 1);
    double step, ytop = gm_nice_top((ymax > 0 ? ymax : 1) / u.div, 5, &step) * u.div;
    step *= u.div;
    const double H = 300, top_px = 14 + READOUT, bottom = H - 26;
    svg_open(b, p, H, id, "live allocations over time, the largest as bands", u.name);
    gm_sb_puts(b, " data-names=\"the other allocations\" data-v=\"");
    int dec = decimals(ytop / u.div);
    for (int c = 0; c < REP_NCOL; c++) {
        if (c) gm_sb_puts(b, " ");
        put_val(b, rs[c], u.div, dec);
    }
    gm_sb_puts(b, "\">");
    gm_scale x = xscale(), y = {0, ytop, bottom, top_px};
    gm_svg_grid_y(b, &x, &y, step, u, decimals(step / u.div) - 2);
    time_axis(b, p, bottom);
    rep_zoom_open(b, top_px, bottom);
    centres cx = col_centres();
    gm_strbuf d;
    gm_sb_init(&d);
    gm_svg_band_d(&d, &x, &y, cx.x, ceil_, hi, REP_NCOL);
    if (d.len) {
        char nb[32];
        gm_sb_printf(b,
                     "<path class=\"al-rest\" d=\"%s\"><title>the other %s allocations, "
                     "max per column</title></path>",
                     gm_sb_str(&d),
                     gm_fmt_count(rep_num(top, "allocations") - (double)n, nb, sizeof nb));
    }
    gm_sb_free(&d);
    for (size_t i = 0; i < n; i++) {
        char s[32], a[32], f[32], l[32];
        const char *site =
            v[i].site >= 0 ? json_string_value(json_array_get(sites, (size_t)v[i].site)) : NULL;
        double x0 = gm_scale_px(&xt, v[i].t0), x1 = gm_scale_px(&xt, v[i].t1);
        double y0 = gm_scale_px(&y, v[i].off + v[i].size), y1 = gm_scale_px(&y, v[i].off);
        gm_sb_printf(b, "<rect class=\"ab k%d\" x=\"", v[i].cat);
        px2(b, x0);
        gm_sb_puts(b, "\" y=\"");
        px2(b, y0);
        gm_sb_puts(b, "\" width=\"");
        px2(b, fmax(x1 - x0, 0.05));
        gm_sb_puts(b, "\" height=\"");
        px2(b, fmax(y1 - y0, 0.05));
        gm_sb_printf(b, "\"><title>%s %s \xc2\xb7 ",
                     gm_fmt_unit(v[i].size, gm_unit_bytes(v[i].size), 2, s, sizeof s),
                     gm_category_name(v[i].cat));
        gm_sb_esc(b, site && *site ? site : "call site unknown");
        gm_sb_printf(b, " \xc2\xb7 allocated at %s, ",
                     gm_fmt_unit(v[i].t0 - p->t0, p->tu, 3, a, sizeof a));
        if (v[i].live_end)
            gm_sb_puts(b, "still live at the end");
        else
            gm_sb_printf(b, "freed at %s (lived %s)",
                         gm_fmt_unit(v[i].t1 - p->t0, p->tu, 3, f, sizeof f),
                         gm_fmt_time_auto(v[i].t1 - v[i].t0, l, sizeof l));
        gm_sb_puts(b, "</title></rect>");
    }
    rep_zoom_close(b);
    cursor(b, top_px, bottom);
    gm_sb_puts(b, "</svg>");
    free(v);
}

/* ---------------------------------------------- runs as small multiples */

/* Every run's reserved memory in its own strip, one above the other on the
 * same axes (time and the fitted memory axis), ranked order: lines that
 * would lie on top of each other in one chart (two policies that behave
 * alike) stay apart. Each strip also draws the pytorch baseline's reserved
 * line (grey, dashed) when it is not the baseline itself, the requested
 * bytes, the limit and the OOMs. */
void rep_chart_multiples(gm_strbuf *b, const rep *p)
{
    const double strip = 62, gap = 20, top = 4 + READOUT;
    const double H = top + p->n * (strip + gap) + 24;
    const rep_run *base = NULL;
    for (size_t i = 0; i < p->n; i++)
        if (p->run[i].policy && !strcmp(p->run[i].policy, "pytorch")) base = &p->run[i];
    double q[REP_NCOL];
    svg_open(b, p, H, "overlay", "reserved memory over time, one strip per run", p->yu.name);
    gm_sb_puts(b, " data-legend=\"ov-legend\" data-names=\"");
    for (size_t i = 0; i < p->n; i++) {
        if (i) gm_sb_puts(b, "|");
        put_name(b, p->run[p->order[i]].label);
    }
    gm_sb_puts(b, "|requested\" data-v=\"");
    for (int c = 0; c < REP_NCOL; c++) {
        q[c] = NAN;
        for (size_t i = 0; i < p->n; i++) {
            const rep_cols *rc = p->run[i].cols;
            if (rc && !isnan(rc->q[c]) && (isnan(q[c]) || rc->q[c] > q[c])) q[c] = rc->q[c];
        }
    }
    int dec = decimals(p->ymax / p->yu.div);
    for (int c = 0; c < REP_NCOL; c++) {
        if (c) gm_sb_puts(b, " ");
        for (size_t i = 0; i < p->n; i++) {
            const rep_cols *rc = p->run[p->order[i]].cols;
            put_val(b, rc ? rc->r[c] : NAN, p->yu.div, dec);
            gm_sb_puts(b, ",");
        }
        put_val(b, q[c], p->yu.div, dec);
    }
    gm_sb_puts(b, "\">");
    gm_scale x = xscale();
    char lbl[600], v[3][32];
    for (size_t i = 0; i < p->n; i++) {
        size_t k = p->order[i];
        const rep_run *r = &p->run[k];
        double y0 = top + i * (strip + gap) + gap, y1 = y0 + strip;
        gm_scale y = {p->ymin, p->ymax, y1, y0};
        gm_sb_printf(b, "<rect class=\"band\" x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\"/>",
                     REP_PX0, y0, REP_PX1 - REP_PX0, strip);
        gm_svg_grid_y(b, &x, &y, p->ymax - p->ymin, p->yu, decimals(p->ymax / p->yu.div));
        double pr = rep_num(r->m, "peak_reserved_bytes");
        int n =
            snprintf(lbl, sizeof lbl, "%s%s \xc2\xb7 peak reserved %s", r->label,
                     r->realizable ? "" : " (bound)", gm_fmt_unit(pr, p->yu, 2, v[0], sizeof v[0]));
        if (base && base != r && n > 0 && (size_t)n < sizeof lbl) {
            double d = pr - rep_num(base->m, "peak_reserved_bytes");
            snprintf(lbl + n, sizeof lbl - (size_t)n, ", %s%s against pytorch",
                     d < 0 ? "\xe2\x88\x92" : "+",
                     gm_fmt_unit(fabs(d), p->yu, 2, v[1], sizeof v[1]));
        }
        double ooms = rep_num(r->m, "oom_count");
        if (ooms > 0 && strlen(lbl) + 40 < sizeof lbl)
            snprintf(lbl + strlen(lbl), sizeof lbl - strlen(lbl), " \xc2\xb7 %s OOM%s",
                     gm_fmt_count(ooms, v[2], sizeof v[2]), ooms == 1 ? "" : "s");
        gm_sb_printf(b, "<text class=\"band-l\" x=\"%g\" y=\"%g\" style=\"fill:%s\">", REP_PX0 + 4,
                     y0 - 5, rep_color(r->color));
        gm_sb_esc(b, lbl);
        gm_sb_puts(b, "</text>");
        rep_zoom_open(b, y0, y1);
        if (r->cols) {
            gm_strbuf d;
            gm_sb_init(&d);
            centres cx = col_centres();
            gm_svg_area_d(&d, &x, &y, cx.x, r->cols->r, REP_NCOL);
            if (d.len)
                gm_sb_printf(b, "<path style=\"fill:%s;fill-opacity:.22\" d=\"%s\"/>",
                             rep_color(r->color), gm_sb_str(&d));
            gm_sb_free(&d);
            path(b, "s-q", r->cols->q, &y, 0, "requested (live tensor bytes), max per column");
            if (base && base != r && base->cols)
                path(b, "s-u", base->cols->r, &y, 0, "pytorch (the baseline): reserved");
            gm_sb_init(&d);
            gm_svg_line_d(&d, &x, &y, cx.x, r->cols->r, REP_NCOL);
            gm_sb_printf(b, "<path class=\"ov%s%s\" style=\"stroke:%s\" d=\"%s\"><title>",
                         (int)k == p->winner ? " win" : "", r->realizable ? "" : " bound",
                         rep_color(r->color), gm_sb_str(&d));
            gm_sb_esc(b, r->label);
            gm_sb_puts(b, r->realizable ? ": reserved" : ": reserved (bound; uses the future)");
            gm_sb_puts(b, "</title></path>");
            gm_sb_free(&d);
        }
        oom_marks(b, p, json_object_get(r->m, "ooms"), -1, y0, y1);
        rep_zoom_close(b);
        if (p->peak_live > 0) {
            gm_sb_printf(b, "<line class=\"limit\" x1=\"%g\" x2=\"%g\" y1=\"", REP_PX0, REP_PX1);
            gm_svg_num(b, gm_scale_px(&y, p->peak_live));
            gm_sb_puts(b, "\" y2=\"");
            gm_svg_num(b, gm_scale_px(&y, p->peak_live));
            gm_sb_puts(b, "\"/>");
        }
        if (r->usable > 0 && r->usable <= p->ymax) {
            gm_sb_printf(b, "<line class=\"cap\" x1=\"%g\" x2=\"%g\" y1=\"", REP_PX0, REP_PX1);
            gm_svg_num(b, gm_scale_px(&y, r->usable));
            gm_sb_puts(b, "\" y2=\"");
            gm_svg_num(b, gm_scale_px(&y, r->usable));
            gm_sb_puts(b, "\"/>");
        }
    }
    time_axis(b, p, H - 24);
    ov_ctx ctx = {p};
    tooltips(b, p, top, H - 24, ov_text, &ctx);
    cursor(b, top, H - 24);
    gm_sb_puts(b, "</svg>");
}
