/* timeline.c — the SVG pictures of remat: `plan --timeline FILE.svg`, bytes in use
 * along the schedule for one or more plans (e.g. --remat none and the chosen policy)
 * as step curves on one set of axes, with each plan's peak and the start of its
 * backward pass marked, so a user sees where the peak is and what remat removed (with
 * `bench --timeline`, also the measured arena high-water mark of a warmed run beside
 * each planned peak, and whether the two are equal, as the planner promises); and
 * `bench --svg FILE`, planned and measured peak against the median step time of each
 * measured configuration, the trade-off curve. Plain SVG, no dependencies; written
 * through ot_atomic_open (temporary name, fsync, rename). Everything drawn stays in
 * the canvas: the legend sits in its own band under the plot, where no line crosses it,
 * and the axes carry round ticks (1, 2 or 5 times a power of ten, in the unit shown). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/atomic_file.h"
#include "remat/remat.h"
#include "remat/timeline.h"

static const char *colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"};
#define N_COLORS (int)(sizeof colors / sizeof *colors)

/* The byte unit ticks are written in for axis maximum `max`. */
static double byte_unit(double max, const char **name) {
    if (max >= 1 << 30) return *name = "GiB", (double)(1 << 30);
    if (max >= 1 << 20) return *name = "MiB", (double)(1 << 20);
    if (max >= 1 << 10) return *name = "KiB", (double)(1 << 10);
    return *name = "B", 1.0;
}

static void human(double b, char *buf, size_t n) {
    const char *u;
    double unit = byte_unit(b, &u);
    snprintf(buf, n, unit == 1 ? "%.0f %s" : unit == 1024 ? "%.1f %s" : "%.2f %s", b / unit, u); /* as the CLI */
}

/* A round tick spacing (1, 2 or 5 x 10^k) giving about `want` intervals up to max. */
static double nice_step(double max, int want) {
    if (!(max > 0)) return 1;
    double raw = max / want, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else
            fputc(*s, f);
    }
}

/* The canvas: plot area [L, W-R] x [T, T+ph], the legend band below the x title. */
typedef struct canvas {
    double W, H, L, R, T, ph, pw, legend_y;
    double xmax, ymax; /* axis ends: the last round tick at or above the data */
    double xstep, ystep, yunit;
    const char *yunit_name;
} canvas;

static double cx(const canvas *c, double x) { return c->L + c->pw * x / c->xmax; }
static double cy(const canvas *c, double y) { return c->T + c->ph * (1.0 - y / c->ymax); }

static void canvas_init(canvas *c, double xdata, double ydata, int n_legend, bool xint) {
    c->W = 960, c->L = 90, c->R = 30, c->T = 40, c->ph = 330;
    c->pw = c->W - c->L - c->R;
    c->legend_y = c->T + c->ph + 48;
    c->H = c->legend_y + 18.0 * n_legend + 8;
    c->yunit = byte_unit(ydata, &c->yunit_name);
    c->ystep = nice_step(ydata / c->yunit, 5) * c->yunit;
    c->ymax = ceil(ydata / c->ystep) * c->ystep;
    if (c->ymax >= 1024 * c->yunit && c->yunit < (double)(1 << 30)) { /* 1000 KiB and up: in MiB */
        c->yunit = byte_unit(c->ymax, &c->yunit_name);
        c->ystep = nice_step(ydata / c->yunit, 5) * c->yunit;
        c->ymax = ceil(ydata / c->ystep) * c->ystep;
    }
    if (c->ymax <= 0) c->ymax = c->ystep;
    c->xstep = nice_step(xdata, 8);
    if (xint && c->xstep < 1) c->xstep = 1;
    c->xmax = ceil(xdata / c->xstep) * c->xstep;
    if (c->xmax <= 0) c->xmax = c->xstep;
}

/* Header, title, grid, both axes with their ticks, and the x title. */
static void draw_frame(FILE *f, const canvas *c, const char *title, const char *xtitle, double xscale,
                       const char *xfmt) {
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            c->W, c->H);
    fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"15\">", c->L);
    xml_text(f, title);
    fputs("</text>\n", f);
    for (double b = 0; b <= c->ymax * (1 + 1e-9); b += c->ystep) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", c->L, cy(c, b),
                c->W - c->R, cy(c, b));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g %s</text>\n", c->L - 6, cy(c, b) + 4,
                b / c->yunit, c->yunit_name);
    }
    for (double x = 0; x <= c->xmax * (1 + 1e-9); x += c->xstep) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", cx(c, x), c->T + c->ph,
                cx(c, x), c->T + c->ph + 5);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", cx(c, x), c->T + c->ph + 18);
        fprintf(f, xfmt, x * xscale);
        fputs("</text>\n", f);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", c->L, c->T + c->ph,
            c->W - c->R, c->T + c->ph);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", c->L, c->T, c->L,
            c->T + c->ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", c->L + c->pw / 2, c->T + c->ph + 36,
            xtitle);
}

/* A legend entry i in the band under the plot: a swatch, then the text (escaped). */
static void legend_entry(FILE *f, const canvas *c, int i, const char *color, const char *text) {
    double y = c->legend_y + 18.0 * i;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", c->L, y - 10, color);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", c->L + 18, y);
    xml_text(f, text);
    fputs("</text>\n", f);
}

static ot_status open_svg(const char *path, ot_atomic_file **af, const char *what, ot_error *err) {
    ot_status st = ot_atomic_open(path, af, err);
    if (st && err) ot_error_prefix(err, "%s ", what);
    return st;
}

static ot_status commit_svg(ot_atomic_file *af, const char *what, ot_error *err) {
    fputs("</svg>\n", ot_atomic_stream(af));
    ot_status st = ot_atomic_commit(af, err);
    if (st && err) ot_error_prefix(err, "%s ", what);
    return st;
}

/* The hollow diamond of a measured high-water mark, and its legend line. */
static void draw_measured(FILE *f, const canvas *c, const ot_timeline_curve *p, int legend_i, const char *col) {
    double x = p->measured_step >= 0 ? (cx(c, p->measured_step) + cx(c, p->measured_step + 1)) / 2 : c->W - c->R;
    double y = cy(c, (double)p->measured_peak);
    fprintf(f,
            "<path class=\"measured\" data-measured-bytes=\"%zu\" data-measured-step=\"%d\" "
            "d=\"M%.2f,%.1f l7,7 l-7,7 l-7,-7 z\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n",
            p->measured_peak, p->measured_step, x, y - 7, col);
    char hm[32], hp[32], at[64], text[512];
    human((double)p->measured_peak, hm, sizeof hm);
    human((double)p->peak_bytes, hp, sizeof hp);
    if (p->measured_step < 0)
        snprintf(at, sizeof at, "step unknown (diamond at the right edge)");
    else
        snprintf(at, sizeof at, "first reached at step %d%s (diamond)", p->measured_step,
                 p->measured_step == p->peak_step ? " as planned" : "");
    if (p->measured_peak == p->peak_bytes)
        snprintf(text, sizeof text, "    measured: arena high-water %s, %s; equals the planned peak", hm, at);
    else
        snprintf(text, sizeof text, "    measured: arena high-water %s, %s; differs from the planned %s", hm, at, hp);
    legend_entry(f, c, legend_i, col, text);
}

ot_status ot_timeline_curves_svg(const char *path, const ot_timeline_curve *curves, int n, const char *title,
                                 ot_error *err) {
    int max_steps = 1, n_legend = n, n_measured = 0, n_equal = 0;
    double max_bytes = 1;
    for (int i = 0; i < n; i++) {
        const ot_timeline_curve *p = &curves[i];
        if (p->n_steps > max_steps) max_steps = p->n_steps;
        max_bytes = fmax(max_bytes, (double)p->peak_bytes);
        if (p->measured) {
            max_bytes = fmax(max_bytes, (double)p->measured_peak);
            n_legend++, n_measured++;
            n_equal += p->measured_peak == p->peak_bytes;
        }
        for (int s = 0; s < p->n_steps; s++)
            max_bytes = fmax(max_bytes, (double)p->timeline[s]);
    }
    canvas c;
    canvas_init(&c, max_steps, max_bytes, n_legend, true);
    ot_atomic_file *af;
    ot_status st = open_svg(path, &af, "timeline", err);
    if (st) return st;
    FILE *f = ot_atomic_stream(af);
    char full[512];
    snprintf(full, sizeof full, "%s%s", title ? title : "memory in use along the schedule",
             !n_measured              ? ""
             : n_equal == n_measured ? ": measured peak = planned peak, for every plan"
                                     : ": a measured peak differs from its plan (see the legend)");
    draw_frame(f, &c, full, "schedule step", 1, "%.0f");
    for (int i = 0, li = 0; i < n; i++) {
        const ot_timeline_curve *p = &curves[i];
        const char *col = colors[i % N_COLORS];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", col);
        for (int s = 0; s < p->n_steps; s++)
            fprintf(f, "%.2f,%.1f %.2f,%.1f ", cx(&c, s), cy(&c, (double)p->timeline[s]), cx(&c, s + 1),
                    cy(&c, (double)p->timeline[s]));
        fputs("\"/>\n", f);
        /* the arena size (peak), across the plot only: the legend is below it */
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"6,4\"/>\n",
                c.L, cy(&c, (double)p->peak_bytes), c.W - c.R, cy(&c, (double)p->peak_bytes), col);
        if (p->backward_step < p->n_steps)
            fprintf(f,
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"2,3\"/>\n",
                    cx(&c, p->backward_step), c.T, cx(&c, p->backward_step), c.T + c.ph, col);
        if (p->peak_step >= 0 && p->peak_step < p->n_steps) {
            /* the peak step itself, drawn as a bar of its exact width and height: a
             * one-step spike among thousands still reaches its marker; above it, up to
             * the arena's end, the alignment padding and any gap between blocks */
            double x0 = cx(&c, p->peak_step), x1 = cx(&c, p->peak_step + 1);
            double y = cy(&c, (double)p->timeline[p->peak_step]), yp = cy(&c, (double)p->peak_bytes);
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" opacity=\"0.5\"/>\n", x0,
                    y, x1 - x0 > 0.5 ? x1 - x0 : 0.5, c.T + c.ph - y, col);
            if (yp < y - 0.5)
                fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"%s\"/>\n", (x0 + x1) / 2, y,
                        (x0 + x1) / 2, yp, col);
            fprintf(f, "<circle cx=\"%.2f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", (x0 + x1) / 2, y, col);
        }
        char hb[32], text[512];
        human((double)p->peak_bytes, hb, sizeof hb);
        snprintf(text, sizeof text,
                 "%s: %speak %s (dashed) first reached at step %d (dot), backward from step %d (dotted)", p->label,
                 p->measured ? "planned " : "", hb, p->peak_step, p->backward_step);
        legend_entry(f, &c, li++, col, text);
        if (p->measured) draw_measured(f, &c, p, li++, col);
    }
    return commit_svg(af, "timeline", err);
}

ot_status ot_remat_timeline_svg(const char *path, const ot_plan *const *plans, const char *const *labels, int n,
                                const char *title, ot_error *err) {
    ot_timeline_curve cv[8];
    if (n < 0 || n > (int)(sizeof cv / sizeof *cv))
        return ot_fail(err, OT_E_INTERNAL, "timeline: %d plans (at most %d)", n, (int)(sizeof cv / sizeof *cv));
    for (int i = 0; i < n; i++)
        cv[i] = (ot_timeline_curve){.label = labels[i],
                                    .timeline = plans[i]->timeline,
                                    .n_steps = plans[i]->n_steps,
                                    .peak_step = plans[i]->peak_step,
                                    .backward_step = plans[i]->backward_step,
                                    .peak_bytes = plans[i]->peak_bytes};
    return ot_timeline_curves_svg(path, cv, n, title, err);
}

ot_status ot_timeline_tradeoff_svg(const char *path, const char *model, const ot_timeline_point *pts, int n, bool busy,
                                   ot_error *err) {
    double max_s = 1e-9, max_b = 1;
    for (int i = 0; i < n; i++) {
        max_s = fmax(max_s, fmax(pts[i].seconds, pts[i].q3));
        max_b = fmax(max_b, fmax(pts[i].planned, pts[i].measured));
    }
    canvas c;
    canvas_init(&c, max_s * 1e3 * 1.05, max_b * 1.05, n + (busy ? 1 : 0), false);
    c.xmax /= 1e3, c.xstep /= 1e3; /* the axis is in seconds, its ticks in ms */
    ot_atomic_file *af;
    ot_status st = open_svg(path, &af, "--svg", err);
    if (st) return st;
    FILE *f = ot_atomic_stream(af);
    const char *base = strrchr(model, '/');
    char title[512];
    snprintf(title, sizeof title, "%s: peak memory against time per training step (hollow: planned, filled: measured)",
             base ? base + 1 : model);
    draw_frame(f, &c, title, "median time per step, ms (bar: interquartile range)", 1e3, "%g");
    for (int i = 0; i < n; i++) {
        const ot_timeline_point *p = &pts[i];
        const char *col = colors[i % N_COLORS];
        double x = cx(&c, p->seconds);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                cx(&c, p->q1), cy(&c, p->measured), cx(&c, p->q3), cy(&c, p->measured), col);
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", x,
                cy(&c, p->planned), col);
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", x, cy(&c, p->measured), col);
        char hp[32], hm[32], text[512];
        human(p->planned, hp, sizeof hp);
        human(p->measured, hm, sizeof hm);
        snprintf(text, sizeof text, "%s: %.3f ms [%.3f..%.3f], peak planned %s, measured %s", p->label,
                 p->seconds * 1e3, p->q1 * 1e3, p->q3 * 1e3, hp, hm);
        legend_entry(f, &c, i, col, text);
    }
    if (busy)
        legend_entry(f, &c, n, "#000",
                     "the machine was busy (load above the CPUs left free): the times are unreliable");
    return commit_svg(af, "--svg", err);
}
