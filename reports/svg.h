/*
 * svg.h - the drawing primitives of the HTML report: number formatting,
 * units humans read, "nice" axis ticks, linear scales, line/area paths and
 * gridded axes, and max- (min-) preserving downsampling of a timeline.
 *
 * Everything writes into a gm_strbuf. Coordinates are printed with one
 * decimal (a tenth of a pixel is below what a screen shows, and it keeps a
 * 500-point path near 6 KB). Values that are NaN are "no sample": a line
 * breaks there instead of dropping to zero.
 */
#ifndef GM_SVG_H
#define GM_SVG_H

#include <stddef.h>

#include "base/strbuf.h"

/* Linear map from data [d0, d1] to pixels [p0, p1] (p1 < p0 for a y axis). */
typedef struct gm_scale {
    double d0, d1, p0, p1;
} gm_scale;

double gm_scale_px(const gm_scale *s, double v);

/* A unit for a whole axis or table column: value / div, then the name. */
typedef struct gm_unit {
    const char *name; /* "GiB", "ms", ...                     */
    double div;       /* bytes (or ns) per unit                */
} gm_unit;

/* The unit that shows max_bytes as 1..1023 of it (B, KiB, MiB, GiB, TiB). */
gm_unit gm_unit_bytes(double max_bytes);
/* The unit for a time span: ns, us, ms or s (so the span reads 1..999+). */
gm_unit gm_unit_time(double span_ns);

/* v with at most dec decimals, trailing zeros dropped: 12.5, 3, -0.25;
 * NaN gives the em dash. Returns buf. */
char *gm_fmt_num(double v, int dec, char *buf, size_t len);
/* A count with thousands separators: 10384396 -> "10,384,396"; NaN -> —. */
char *gm_fmt_count(double v, char *buf, size_t len);
/* v / u.div with exactly dec decimals and the unit: "4.82 GiB". */
char *gm_fmt_unit(double v, gm_unit u, int dec, char *buf, size_t len);
/* A ratio as a percentage with one decimal: 0.1108 -> "11.1 %". */
char *gm_fmt_pct(double ratio, char *buf, size_t len);
/* Bytes in their own unit, for one-off figures: "0 B", "512.00 MiB". */
char *gm_fmt_bytes_auto(double bytes, char *buf, size_t len);
/* A time in the unit that suits it, 3 decimals at most: "150 ms", "1.5 s". */
char *gm_fmt_time_auto(double ns, char *buf, size_t len);

/* A step of 1, 2 or 5 x 10^k such that about n steps cover span (> 0). */
double gm_nice_step(double span, int n);
/* The axis top for [0, max] with about n ticks: a multiple of the step.
 * Writes the step (in data units) to *step. max <= 0 gives 1. */
double gm_nice_top(double max, int n, double *step);

/* One coordinate, one decimal, no trailing ".0". */
void gm_svg_num(gm_strbuf *b, double v);

/* Path data ("M x y L x y ...") of the points (xs[i], ys[i]); a NaN y
 * breaks the line. Writes nothing when no point is drawable. */
void gm_svg_line_d(gm_strbuf *b, const gm_scale *x, const gm_scale *y, const double *xs,
                   const double *ys, size_t n);
/* Closed path data of the area under the points down to y->d0; NaN ys
 * are drawn as y->d0. */
void gm_svg_area_d(gm_strbuf *b, const gm_scale *x, const gm_scale *y, const double *xs,
                   const double *ys, size_t n);

/* Closed path data of the band between lo[i] and hi[i] (a min-max band):
 * along hi left to right, back along lo. A point where either is NaN
 * splits the band into separate pieces. */
void gm_svg_band_d(gm_strbuf *b, const gm_scale *x, const gm_scale *y, const double *xs,
                   const double *lo, const double *hi, size_t n);

/* Horizontal grid lines and labels at 0, step, 2 step... up to y->d1, in
 * unit u (labels left of x->p0). */
void gm_svg_grid_y(gm_strbuf *b, const gm_scale *x, const gm_scale *y, double step, gm_unit u,
                   int dec);
/* Vertical ticks and labels at multiples of step within [x->d0, x->d1],
 * measured from origin, in unit u (labels below y->p0). */
void gm_svg_grid_x(gm_strbuf *b, const gm_scale *x, const gm_scale *y, double origin, double step,
                   gm_unit u);

/*
 * Max-preserving downsampling onto a pixel grid: bucket i covers
 * [t[i], t[i] + width) and holds v[i] (a maximum over the bucket). Column c
 * of ncol equal columns over [t0, t1) gets the largest v of the buckets
 * that overlap it, NaN values ignored; NaN where no bucket does (before a
 * tenant starts, after it ends). Peaks are never lost, so a 1024-bucket
 * timeline drawn on 400 columns still touches its true maximum.
 */
void gm_resample_max(const double *t, const double *v, size_t n, double width, double t0, double t1,
                     double *col, size_t ncol);
/* The same with minima (v[i] a minimum over its bucket): troughs are kept. */
void gm_resample_min(const double *t, const double *v, size_t n, double width, double t0, double t1,
                     double *col, size_t ncol);

#endif
