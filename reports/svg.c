/* svg.c - see svg.h. */
#include "svg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double gm_scale_px(const gm_scale *s, double v)
{
    if (s->d1 == s->d0) return s->p0;
    return s->p0 + (v - s->d0) * (s->p1 - s->p0) / (s->d1 - s->d0);
}

gm_unit gm_unit_bytes(double max_bytes)
{
    static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double div = 1;
    int u = 0;
    while (u < 4 && max_bytes >= div * 1024.0) {
        div *= 1024.0;
        u++;
    }
    return (gm_unit){names[u], div};
}

gm_unit gm_unit_time(double span_ns)
{
    if (span_ns >= 2e9) return (gm_unit){"s", 1e9};
    if (span_ns >= 2e6) return (gm_unit){"ms", 1e6};
    if (span_ns >= 2e3) return (gm_unit){"us", 1e3};
    return (gm_unit){"ns", 1};
}

char *gm_fmt_num(double v, int dec, char *buf, size_t len)
{
    if (isnan(v)) {
        snprintf(buf, len, "\xe2\x80\x94"); /* — */
        return buf;
    }
    if (dec < 0) dec = 0;
    snprintf(buf, len, "%.*f", dec, v);
    char *dot = strchr(buf, '.');
    if (dot) {
        char *e = buf + strlen(buf) - 1;
        while (e > dot && *e == '0')
            *e-- = '\0';
        if (e == dot) *e = '\0';
    }
    if (!strcmp(buf, "-0")) snprintf(buf, len, "0");
    return buf;
}

char *gm_fmt_count(double v, char *buf, size_t len)
{
    char raw[48];
    if (isnan(v) || fabs(v) >= 1e18) return gm_fmt_num(v, 0, buf, len);
    snprintf(raw, sizeof raw, "%.0f", v);
    const char *d = raw + (raw[0] == '-');
    size_t nd = strlen(d), o = 0;
    if (raw[0] == '-' && o + 1 < len) buf[o++] = '-';
    for (size_t i = 0; i < nd && o + 1 < len; i++) {
        if (i && (nd - i) % 3 == 0 && o + 2 < len) buf[o++] = ',';
        buf[o++] = d[i];
    }
    buf[o] = '\0';
    if (!strcmp(buf, "-0")) snprintf(buf, len, "0");
    return buf;
}

char *gm_fmt_unit(double v, gm_unit u, int dec, char *buf, size_t len)
{
    if (isnan(v)) return gm_fmt_num(v, 0, buf, len);
    snprintf(buf, len, "%.*f %s", dec, v / u.div, u.name);
    return buf;
}

char *gm_fmt_pct(double ratio, char *buf, size_t len)
{
    if (isnan(ratio)) return gm_fmt_num(ratio, 0, buf, len);
    snprintf(buf, len, "%.1f %%", ratio * 100.0);
    return buf;
}

char *gm_fmt_bytes_auto(double bytes, char *buf, size_t len)
{
    gm_unit u = gm_unit_bytes(bytes);
    return gm_fmt_unit(bytes, u, u.div == 1 ? 0 : 2, buf, len);
}

char *gm_fmt_time_auto(double ns, char *buf, size_t len)
{
    gm_unit u = gm_unit_time(ns);
    char num[48];
    if (isnan(ns)) return gm_fmt_num(ns, 0, buf, len);
    snprintf(buf, len, "%s %s", gm_fmt_num(ns / u.div, 3, num, sizeof num), u.name);
    return buf;
}

double gm_nice_step(double span, int n)
{
    if (!(span > 0) || n < 1) return 1;
    double raw = span / n;
    double mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    double nice = f <= 1.0 ? 1 : f <= 2.0 ? 2 : f <= 5.0 ? 5 : 10;
    return nice * mag;
}

double gm_nice_top(double max, int n, double *step)
{
    if (!(max > 0)) {
        *step = 1;
        return 1;
    }
    *step = gm_nice_step(max, n);
    double top = ceil(max / *step - 1e-9) * *step;
    return top > 0 ? top : *step;
}

void gm_svg_num(gm_strbuf *b, double v)
{
    char buf[48];
    gm_sb_puts(b, gm_fmt_num(v, 1, buf, sizeof buf));
}

/* Path coordinates are written in tenths of a pixel: the first point of a
 * run absolute ("M12.3 45"), the rest relative to the previous *rounded*
 * point ("l2.2-3.4", "h2.1" when flat), so rounding never accumulates and a
 * 400-point line takes ~3.5 KB instead of ~5. */
static long tenths(double v)
{
    return lround(v * 10.0);
}

static void put_tenths(gm_strbuf *b, long v)
{
    if (v % 10 == 0)
        gm_sb_printf(b, "%ld", v / 10);
    else
        gm_sb_printf(b, "%s%ld.%ld", v < 0 ? "-" : "", labs(v) / 10, labs(v) % 10);
}

typedef struct pen {
    long x, y;
    int down;
} pen;

static void pen_to(gm_strbuf *b, pen *p, double x, double y, int move)
{
    long X = tenths(x), Y = tenths(y);
    if (move || !p->down) {
        gm_sb_putn(b, "M", 1);
        put_tenths(b, X);
        gm_sb_putn(b, " ", 1);
        put_tenths(b, Y);
    } else if (Y == p->y) {
        gm_sb_putn(b, "h", 1);
        put_tenths(b, X - p->x);
    } else {
        gm_sb_putn(b, "l", 1);
        put_tenths(b, X - p->x);
        if (Y - p->y >= 0) gm_sb_putn(b, " ", 1);
        put_tenths(b, Y - p->y);
    }
    p->x = X;
    p->y = Y;
    p->down = 1;
}

void gm_svg_line_d(gm_strbuf *b, const gm_scale *x, const gm_scale *y, const double *xs,
                   const double *ys, size_t n)
{
    pen p = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        if (isnan(ys[i])) {
            p.down = 0;
            continue;
        }
        pen_to(b, &p, gm_scale_px(x, xs[i]), gm_scale_px(y, ys[i]), 0);
    }
}

void gm_svg_area_d(gm_strbuf *b, const gm_scale *x, const gm_scale *y, const double *xs,
                   const double *ys, size_t n)
{
    if (n == 0) return;
    pen p = {0, 0, 0};
    double base = gm_scale_px(y, y->d0);
    pen_to(b, &p, gm_scale_px(x, xs[0]), base, 1);
    for (size_t i = 0; i < n; i++)
        pen_to(b, &p, gm_scale_px(x, xs[i]), isnan(ys[i]) ? base : gm_scale_px(y, ys[i]), 0);
    pen_to(b, &p, gm_scale_px(x, xs[n - 1]), base, 0);
    gm_sb_putn(b, "Z", 1);
}

void gm_svg_band_d(gm_strbuf *b, const gm_scale *x, const gm_scale *y, const double *xs,
                   const double *lo, const double *hi, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (isnan(lo[i]) || isnan(hi[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && !isnan(lo[j]) && !isnan(hi[j]))
            j++;
        pen p = {0, 0, 0};
        for (size_t k = i; k < j; k++)
            pen_to(b, &p, gm_scale_px(x, xs[k]), gm_scale_px(y, hi[k]), 0);
        for (size_t k = j; k-- > i;)
            pen_to(b, &p, gm_scale_px(x, xs[k]), gm_scale_px(y, lo[k]), 0);
        gm_sb_putn(b, "Z", 1);
        i = j;
    }
}

void gm_svg_grid_y(gm_strbuf *b, const gm_scale *x, const gm_scale *y, double step, gm_unit u,
                   int dec)
{
    char num[48];
    if (!(step > 0)) return;
    for (int i = 0;; i++) {
        double v = y->d0 + i * step;
        if (v > y->d1 + step * 1e-6 || i > 100) break;
        double py = gm_scale_px(y, v);
        gm_sb_puts(b, "<line class=\"grid\" x1=\"");
        gm_svg_num(b, x->p0);
        gm_sb_puts(b, "\" x2=\"");
        gm_svg_num(b, x->p1);
        gm_sb_puts(b, "\" y1=\"");
        gm_svg_num(b, py);
        gm_sb_puts(b, "\" y2=\"");
        gm_svg_num(b, py);
        gm_sb_puts(b, "\"/><text class=\"ax\" text-anchor=\"end\" x=\"");
        gm_svg_num(b, x->p0 - 6);
        gm_sb_puts(b, "\" y=\"");
        gm_svg_num(b, py + 3.5);
        gm_sb_printf(b, "\">%s%s%s</text>", gm_fmt_num(v / u.div, dec, num, sizeof num),
                     u.name[0] ? " " : "", u.name);
    }
}

void gm_svg_grid_x(gm_strbuf *b, const gm_scale *x, const gm_scale *y, double origin, double step,
                   gm_unit u)
{
    char num[48];
    if (!(step > 0)) return;
    double first = origin + ceil((x->d0 - origin) / step - 1e-9) * step;
    for (int i = 0; i < 200; i++) {
        double v = first + i * step;
        if (v > x->d1 + step * 1e-6) break;
        double px = gm_scale_px(x, v);
        gm_sb_puts(b, "<line class=\"tick\" x1=\"");
        gm_svg_num(b, px);
        gm_sb_puts(b, "\" x2=\"");
        gm_svg_num(b, px);
        gm_sb_puts(b, "\" y1=\"");
        gm_svg_num(b, y->p0);
        gm_sb_puts(b, "\" y2=\"");
        gm_svg_num(b, y->p0 + 4);
        /* a label at the right edge ends there instead of running past it */
        int edge = px > x->p1 - 24;
        gm_sb_printf(b, "\"/><text class=\"ax\" text-anchor=\"%s\" x=\"", edge ? "end" : "middle");
        gm_svg_num(b, edge ? x->p1 : px);
        gm_sb_puts(b, "\" y=\"");
        gm_svg_num(b, y->p0 + 15);
        gm_sb_printf(b, "\">%s %s</text>", gm_fmt_num((v - origin) / u.div, 3, num, sizeof num),
                     u.name);
    }
}

/* Column c gets the extreme (sign = +1: max, -1: min) of the v of the
 * buckets that overlap it. */
static void resample(const double *t, const double *v, size_t n, double width, double t0, double t1,
                     double *col, size_t ncol, double sign)
{
    for (size_t c = 0; c < ncol; c++)
        col[c] = NAN;
    if (!(t1 > t0) || ncol == 0) return;
    double cw = (t1 - t0) / (double)ncol;
    for (size_t i = 0; i < n; i++) {
        if (isnan(v[i])) continue;
        double a = (t[i] - t0) / cw, b = (t[i] + width - t0) / cw;
        if (b <= 0 || a >= (double)ncol) continue;
        size_t c0 = a <= 0 ? 0 : (size_t)a;
        /* a bucket ending exactly on a column edge does not touch the next */
        size_t c1 = b >= (double)ncol ? ncol - 1 : (size_t)ceil(b) - 1;
        if (c1 < c0) c1 = c0;
        for (size_t c = c0; c <= c1; c++)
            if (isnan(col[c]) || sign * v[i] > sign * col[c]) col[c] = v[i];
    }
}

void gm_resample_max(const double *t, const double *v, size_t n, double width, double t0, double t1,
                     double *col, size_t ncol)
{
    resample(t, v, n, width, t0, t1, col, ncol, 1.0);
}

void gm_resample_min(const double *t, const double *v, size_t n, double width, double t0, double t1,
                     double *col, size_t ncol)
{
    resample(t, v, n, width, t0, t1, col, ncol, -1.0);
}
