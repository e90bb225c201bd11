/*
 * html_segmap.c - the allocator's state as segment maps (a result's
 * "segment_maps", reports/segmap.h) in a run's card.
 *
 * One row per segment, in address order (tenant by tenant), each drawn the
 * full width of the plot with its size written on the left: the blocks and
 * free gaps inside it are proportional to their bytes, so where a
 * segment's free space is, and how it is cut up, reads the same for a 2 MiB
 * small-pool segment as for a 1 GiB one. Blocks coloured by category (the
 * allocation bands' colours), free gaps white, runs of blocks too small to
 * draw merged into one grey item that says how many. Every item's
 * <title> says what it is; the page script writes the hovered one under
 * the map. An OOM map draws the failing request against the largest free
 * gap, the free bytes in total and the device's unreserved memory.
 */
#include <math.h>
#include <string.h>

#include "html_int.h"

#define ROW_H 10.0
#define ROW_PITCH 13.0

static void px1(gm_strbuf *b, double v)
{
    gm_sb_printf(b, "%.1f", v);
}

static const char *by(double v, char *buf, size_t len)
{
    return gm_fmt_bytes_auto(v, buf, len);
}

static void item_title(gm_strbuf *b, json_t *it, json_t *sites, const char *seg)
{
    char s[3][48];
    double bytes = json_number_value(json_array_get(it, 1));
    int kind = (int)json_integer_value(json_array_get(it, 2));
    gm_sb_puts(b, "<title>");
    if (kind == 0) {
        gm_sb_printf(b, "free gap %s \xc2\xb7 in ", by(bytes, s[0], sizeof s[0]));
        gm_sb_puts(b, seg);
    } else if (kind == 2) {
        gm_sb_printf(b, "%s small blocks and gaps too narrow to draw: %s allocated of %s",
                     gm_fmt_count(json_number_value(json_array_get(it, 3)), s[0], sizeof s[0]),
                     by(json_number_value(json_array_get(it, 4)), s[1], sizeof s[1]),
                     by(bytes, s[2], sizeof s[2]));
    } else {
        int cat = (int)json_integer_value(json_array_get(it, 3));
        json_int_t site = json_integer_value(json_array_get(it, 4));
        const char *name =
            site > 0 ? json_string_value(json_array_get(sites, (size_t)site - 1)) : NULL;
        gm_sb_printf(
            b, "%s block (%s requested) \xc2\xb7 %s \xc2\xb7 ", by(bytes, s[0], sizeof s[0]),
            by(json_number_value(json_array_get(it, 5)), s[1], sizeof s[1]), gm_category_name(cat));
        gm_sb_esc(b, name && *name ? name : "call site unknown");
    }
    gm_sb_puts(b, "</title>");
}

/* The failing request against what was free, on one scale. */
static void oom_bars(gm_strbuf *b, const rep_run *r, json_t *m)
{
    double req = rep_num(m, "request_block"), lf = rep_num(m, "pool_largest_free"),
           fr = rep_num(m, "tenant_free"), unres = r->usable - rep_num(m, "reserved");
    if (isnan(req)) req = rep_num(m, "request");
    if (isnan(unres) || unres < 0) unres = 0;
    struct {
        const char *what, *cls;
        double v;
    } bar[] = {{"request (its block)", "sq", req},
               {"largest free gap it could use", "sl", lf},
               {"free in its segments, in total", "sf", fr},
               {"device memory not reserved", "su", unres}};
    double mx = 1;
    for (int i = 0; i < 4; i++)
        if (bar[i].v > mx) mx = bar[i].v;
    gm_sb_printf(b,
                 "<svg class=\"chart sbars\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
                 "aria-label=\"the failing request against the free memory\">",
                 REP_W, 4 * 16.0 + 4);
    for (int i = 0; i < 4; i++) {
        char s[48];
        const double lx = 230;
        double y = 2 + i * 16.0, w = (REP_PX1 - lx - 80) * bar[i].v / mx;
        gm_sb_printf(b, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", lx - 6, y + 10,
                     bar[i].what);
        gm_sb_printf(b, "<rect class=\"%s\" x=\"%.0f\" y=\"%.1f\" width=\"", bar[i].cls, lx, y + 1);
        px1(b, fmax(w, 0.5));
        gm_sb_printf(b, "\" height=\"11\"><title>%s: %s</title></rect>", bar[i].what,
                     by(bar[i].v, s, sizeof s));
        gm_sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>", lx + 4 + fmax(w, 0.5), y + 10,
                     by(bar[i].v, s, sizeof s));
    }
    gm_sb_puts(b, "</svg>");
}

static void map_summary(gm_strbuf *b, const rep *p, const rep_run *r, json_t *m, size_t ooms)
{
    char v[6][48];
    const char *kind = rep_str(m, "kind");
    double t = rep_num(m, "t_ns") - p->t0, res = rep_num(m, "reserved"),
           al = rep_num(m, "allocated"), lf = rep_num(m, "largest_free"), fr = res - al;
    gm_sb_puts(b, "<summary>");
    if (kind && !strcmp(kind, "peak"))
        gm_sb_printf(b, "At the peak of reserved memory (%s, t = %s)",
                     by(rep_num(m, "peak_reserved"), v[0], sizeof v[0]),
                     gm_fmt_unit(t, p->tu, 3, v[1], sizeof v[1]));
    else if (kind && !strcmp(kind, "at") && json_is_true(json_object_get(m, "after_end")))
        gm_sb_printf(b, "At the end, t = %s (--segments-at %s is after the last event)",
                     gm_fmt_unit(t, p->tu, 3, v[1], sizeof v[1]),
                     gm_fmt_time_auto(rep_num(m, "asked_ns") - p->t0, v[2], sizeof v[2]));
    else if (kind && !strcmp(kind, "at"))
        gm_sb_printf(b, "At t = %s (--segments-at)", gm_fmt_unit(t, p->tu, 3, v[1], sizeof v[1]));
    else {
        double req = rep_num(m, "request"), blk = rep_num(m, "request_block"),
               tl = rep_num(m, "pool_largest_free"), tf = rep_num(m, "tenant_free");
        if (isnan(blk)) blk = req;
        gm_sb_printf(b, "OOM %zu at t = %s: <span class=\"oomv\">request %s", ooms,
                     gm_fmt_unit(t, p->tu, 3, v[0], sizeof v[0]), by(req, v[1], sizeof v[1]));
        if (blk != req) gm_sb_printf(b, " (block %s)", by(blk, v[2], sizeof v[2]));
        gm_sb_printf(b, " %s largest free gap %s; %s free in total</span>",
                     blk > tl ? "&gt;" : "\xe2\x89\xa4", by(tl, v[3], sizeof v[3]),
                     by(tf, v[4], sizeof v[4]));
        if (r->nt > 1) gm_sb_printf(b, " (tenant %.0f)", rep_num(m, "tenant"));
    }
    gm_sb_printf(b,
                 "</summary><p class=\"note\">%s reserved in %s segments, %s allocated; "
                 "largest free gap %s of %s free",
                 by(res, v[0], sizeof v[0]),
                 gm_fmt_count(rep_num(m, "segments"), v[1], sizeof v[1]), by(al, v[2], sizeof v[2]),
                 by(lf, v[3], sizeof v[3]), by(fr, v[4], sizeof v[4]));
    if (fr > 0) gm_sb_printf(b, " (external fragmentation %.1f %%)", 100 * (1 - lf / fr));
    if (kind && !strcmp(kind, "oom")) {
        const char *site = rep_str(m, "site"), *pool = rep_str(m, "request_pool");
        gm_sb_printf(b, "; the request: %s, ", gm_category_name((int)rep_num(m, "category")));
        gm_sb_esc(b, site && *site ? site : "call site unknown");
        gm_sb_printf(b,
                     ", from the %s pool, where the largest free gap on its stream is %s "
                     "(%s free there; largest anywhere %s)",
                     pool ? pool : "?", by(rep_num(m, "pool_largest_free"), v[0], sizeof v[0]),
                     by(rep_num(m, "pool_free"), v[1], sizeof v[1]),
                     by(rep_num(m, "tenant_largest_free"), v[2], sizeof v[2]));
        if (!(rep_num(m, "request_block") > rep_num(m, "pool_largest_free")))
            gm_sb_puts(b, "; a gap that large was there, but the model's rules did not let this "
                          "request use it (e.g. with max_split_size_mb an oversize block is not "
                          "split for a smaller request)");
    }
    double hid = rep_num(m, "hidden_segments");
    if (hid > 0)
        gm_sb_printf(b, ". The %s largest segments are drawn; %s more hold %s (%s allocated)",
                     gm_fmt_count(rep_num(m, "segments") - hid, v[0], sizeof v[0]),
                     gm_fmt_count(hid, v[1], sizeof v[1]),
                     by(rep_num(m, "hidden_bytes"), v[2], sizeof v[2]),
                     by(rep_num(m, "hidden_allocated"), v[3], sizeof v[3]));
    gm_sb_puts(b, ".</p>");
}

/* The strip position [p0, p1) (bytes from the first drawn segment's start)
 * as rects on the wrapped rows: one per row it touches. */
typedef struct strip {
    gm_strbuf *b;
    double rb, x0, w; /* bytes per row, plot left, plot width */
} strip;

static void strip_rect(const strip *st, double p0, double p1, const char *cls, json_t *it,
                       json_t *sites, const char *seg_title, const char *fill)
{
    for (double a = p0; a < p1;) {
        double row = floor(a / st->rb), end = fmin(p1, (row + 1) * st->rb);
        double x = st->x0 + (a - row * st->rb) / st->rb * st->w;
        gm_sb_printf(st->b, "<rect class=\"%s\"%s x=\"", cls, fill);
        px1(st->b, x);
        gm_sb_printf(st->b, "\" y=\"%.0f\" width=\"", 2 + row * ROW_PITCH);
        px1(st->b, fmax((end - a) / st->rb * st->w, 0.3));
        gm_sb_printf(st->b, "\" height=\"%.0f\">", ROW_H);
        if (it) item_title(st->b, it, sites, seg_title);
        gm_sb_puts(st->b, "</rect>");
        a = end;
    }
}

static void map_svg(gm_strbuf *b, const rep_run *r, json_t *m, const char *id)
{
    json_t *segs = json_object_get(m, "rows"), *sites = json_object_get(m, "sites");
    size_t ns = json_array_size(segs);
    if (!ns) {
        gm_sb_puts(b, "<p class=\"note\">No segment: nothing was reserved.</p>");
        return;
    }
    double total = 0, rb = rep_num(m, "row_bytes");
    size_t i;
    json_t *g;
    json_array_foreach(segs, i, g) total += rep_num(g, "extent");
    if (!(rb > 0)) rb = total > 0 ? total : 1;
    size_t nrows = (size_t)ceil(total / rb);
    if (!nrows) nrows = 1;
    double h = nrows * ROW_PITCH + 4;
    strip st = {b, rb, REP_PX0, REP_PX1 - REP_PX0};
    gm_sb_printf(b,
                 "<svg class=\"chart segmap\" id=\"%s\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
                 "aria-label=\"segment map: the segments in address order, wrapped into rows, "
                 "with their blocks and free gaps\">",
                 id, REP_W, h);
    char hatch[96];
    snprintf(hatch, sizeof hatch, " fill=\"url(#%s-hx)\"", id);
    gm_sb_printf(b,
                 "<defs><pattern id=\"%s-hx\" width=\"4\" height=\"4\" "
                 "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
                 "<rect width=\"4\" height=\"4\" fill=\"#e4e7eb\"/>"
                 "<rect width=\"2\" height=\"4\" fill=\"#616e7c\"/></pattern></defs>",
                 id);
    gm_unit u = gm_unit_bytes(total);
    for (size_t k = 0; k < nrows; k++) { /* each row's start in the strip */
        char s[48];
        gm_sb_printf(b, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", REP_PX0 - 4,
                     2 + k * ROW_PITCH + ROW_H - 1, gm_fmt_unit(k * rb, u, 2, s, sizeof s));
    }
    double pos = 0;
    gm_strbuf sep, title;
    gm_sb_init(&sep);
    gm_sb_init(&title);
    json_array_foreach(segs, i, g)
    {
        char s[4][48];
        double ext = rep_num(g, "extent");
        const char *pool = rep_str(g, "pool");
        int small = pool && !strcmp(pool, "small"),
            exp = json_is_true(json_object_get(g, "expandable"));
        title.len = 0;
        gm_sb_printf(&title, "segment 0x%llx", (unsigned long long)rep_num(g, "addr"));
        if (r->nt > 1) gm_sb_printf(&title, " of tenant %.0f", rep_num(g, "tenant"));
        gm_sb_printf(&title, ": %s, %s pool%s, %s allocated, largest free gap %s",
                     by(rep_num(g, "size"), s[0], sizeof s[0]), small ? "small" : "large",
                     exp ? ", expandable (mapped bytes)" : "",
                     by(rep_num(g, "allocated"), s[1], sizeof s[1]),
                     by(rep_num(g, "largest_free"), s[2], sizeof s[2]));
        size_t k;
        json_t *it;
        json_array_foreach(json_object_get(g, "items"), k, it)
        {
            double off = json_number_value(json_array_get(it, 0)),
                   sz = json_number_value(json_array_get(it, 1));
            int kind = (int)json_integer_value(json_array_get(it, 2));
            int cat = kind == 1 ? (int)json_integer_value(json_array_get(it, 3)) : 0;
            char cls[16];
            if (cat < 0 || cat >= GM_CAT_COUNT) cat = 0;
            snprintf(cls, sizeof cls, kind == 1 ? "sb k%d" : kind == 2 ? "sb sx" : "sb sg", cat);
            strip_rect(&st, pos + off, pos + off + sz, cls, it, sites, gm_sb_str(&title),
                       kind == 2 ? hatch : "");
        }
        /* where the segment starts: a tick across its row */
        double row = floor(pos / rb), x = REP_PX0 + (pos - row * rb) / rb * st.w;
        gm_sb_printf(&sep, "<path class=\"ss\" d=\"M%.1f %.0fv%.0f\"/>", x, 1 + row * ROW_PITCH,
                     ROW_H + 2);
        pos += ext;
    }
    gm_sb_puts(b, gm_sb_str(&sep));
    if (sep.failed || title.failed) b->failed = 1;
    gm_sb_free(&sep);
    gm_sb_free(&title);
    gm_sb_puts(b, "</svg>");
}

void rep_segmaps(gm_strbuf *b, const rep *p, size_t run)
{
    const rep_run *r = &p->run[run];
    json_t *sm = json_object_get(r->j, "segment_maps");
    if (!json_is_object(sm)) return;
    json_t *maps = json_object_get(sm, "maps");
    const char *skipped = rep_str(sm, "skipped");
    gm_sb_puts(b, "<h4>The allocator's segments</h4>");
    if (!json_array_size(maps)) {
        gm_sb_puts(b, "<p class=\"note\">No segment map: ");
        gm_sb_esc(b, skipped ? skipped : "nothing was reserved");
        gm_sb_puts(b, ".</p>");
        return;
    }
    gm_sb_puts(b, "<p class=\"note\">The segments (cudaMalloc'd ranges) in address order, one "
                  "after another as one strip of bytes wrapped into rows (the left says where "
                  "each row starts; a dark tick where a segment starts): blocks coloured by "
                  "category, free gaps white, runs of blocks too small to draw grey. Widths are "
                  "proportional to bytes everywhere. Hover a block for its size, category and "
                  "call site, a gap for its segment. The fragmentation over time is the chart "
                  "above.</p>");
    int seen[GM_CAT_COUNT] = {0};
    size_t i, ooms = 0;
    json_t *m;
    json_array_foreach(maps, i, m)
    {
        size_t k, q;
        json_t *g, *it;
        json_array_foreach(json_object_get(m, "rows"), k, g) json_array_foreach(
            json_object_get(g, "items"), q, it) if (json_integer_value(json_array_get(it, 2)) == 1)
        {
            json_int_t c = json_integer_value(json_array_get(it, 3));
            seen[c >= 0 && c < GM_CAT_COUNT ? c : 0] = 1;
        }
    }
    static const char *const cat_colors[] = {"#9aa5b1", "#4c78a8", "#72b7b2", "#eeca3b",
                                             "#f58518", "#54a24b", "#e45756", "#b279a2"};
    gm_sb_puts(b, "<div class=\"legend\">");
    for (int c = 0; c < GM_CAT_COUNT; c++)
        if (seen[c])
            gm_sb_printf(b, "<span><i class=\"key fill\" style=\"background:%s\"></i>%s</span>",
                         cat_colors[c], gm_category_name(c));
    gm_sb_puts(b, "<span><i class=\"key fill\" style=\"background:#fff;border:1px solid "
                  "#cbd2d9\"></i>free gap</span><span><i class=\"key fill\" "
                  "style=\"background:#9aa5b1;opacity:.7\"></i>merged small blocks "
                  "(hatched)</span></div>");
    json_array_foreach(maps, i, m)
    {
        char id[48];
        const char *kind = rep_str(m, "kind");
        int oom = kind && !strcmp(kind, "oom");
        ooms += oom;
        snprintf(id, sizeof id, "segmap-%zu-%zu", run, i);
        gm_sb_printf(b, "<details class=\"segm\"%s>", p->n == 1 ? " open" : "");
        map_summary(b, p, r, m, ooms);
        if (oom) oom_bars(b, r, m);
        map_svg(b, r, m, id);
        gm_sb_printf(b, "<p class=\"al-tip\" id=\"%s-tip\" aria-live=\"polite\"></p></details>",
                     id);
    }
    double total = rep_num(sm, "ooms_total");
    if (total > (double)ooms && ooms) {
        char v[32];
        gm_sb_printf(b, "<p class=\"note\">%s more OOMs after these (no map).</p>",
                     gm_fmt_count(total - (double)ooms, v, sizeof v));
    }
}
