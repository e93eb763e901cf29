/* timeline.c — `plan --timeline FILE.svg`: bytes in use along the schedule for one
 * or more plans (e.g. --remat none and the chosen policy) as step curves on one set
 * of axes, with each plan's peak and the start of its backward pass marked, so a
 * user sees where the peak is and what remat removed. Plain SVG, no dependencies;
 * written through ot_atomic_open (temporary name, fsync, rename). */
#include <stdio.h>

#include "ir/atomic_file.h"
#include "remat/remat.h"
#include "remat/timeline.h"

static const char *colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"};

static void human(double b, char *buf, size_t n) {
    if (b >= 1 << 30) snprintf(buf, n, "%.2f GiB", b / (1 << 30));
    else if (b >= 1 << 20) snprintf(buf, n, "%.2f MiB", b / (1 << 20));
    else if (b >= 1 << 10) snprintf(buf, n, "%.1f KiB", b / (1 << 10));
    else snprintf(buf, n, "%.0f B", b);
}

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

ot_status ot_remat_timeline_svg(const char *path, const ot_plan *const *plans, const char *const *labels, int n,
                                const char *title, ot_error *err) {
    const double W = 960, H = 420, L = 90, R = 20, T = 40, Bm = 50;
    int max_steps = 1;
    double max_bytes = 1;
    for (int i = 0; i < n; i++) {
        if (plans[i]->n_steps > max_steps) max_steps = plans[i]->n_steps;
        if ((double)plans[i]->peak_bytes > max_bytes) max_bytes = (double)plans[i]->peak_bytes;
        for (int s = 0; s < plans[i]->n_steps; s++)
            if ((double)plans[i]->timeline[s] > max_bytes) max_bytes = (double)plans[i]->timeline[s];
    }
    max_bytes *= 1.05;
    ot_atomic_file *af;
    ot_status st = ot_atomic_open(path, &af, err);
    if (st) {
        if (err) ot_error_prefix(err, "timeline ");
        return st;
    }
    FILE *f = ot_atomic_stream(af);
    double pw = W - L - R, ph = H - T - Bm;
#define X(step) (L + pw * (double)(step) / (double)max_steps)
#define Y(bytes) (T + ph * (1.0 - (double)(bytes) / max_bytes))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"15\">", L);
    xml_text(f, title ? title : "memory in use along the schedule");
    fputs("</text>\n", f);
    /* axes and grid */
    for (int k = 0; k <= 4; k++) {
        double b = max_bytes * k / 4.0;
        char hb[32];
        human(b, hb, sizeof hb);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, Y(b), W - R, Y(b));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", L - 6, Y(b) + 4, hb);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", L, T + ph, W - R, T + ph);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", L, T, L, T + ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">schedule step (%d steps max)</text>\n", L + pw / 2,
            H - 12, max_steps);
    for (int i = 0; i < n; i++) {
        const ot_plan *p = plans[i];
        const char *c = colors[i % 5];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", c);
        for (int s = 0; s < p->n_steps; s++)
            fprintf(f, "%.1f,%.1f %.1f,%.1f ", X(s), Y(p->timeline[s]), X(s + 1), Y(p->timeline[s]));
        fputs("\"/>\n", f);
        /* the arena size (peak) and where the backward pass starts */
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"6,4\"/>\n", L,
                Y(p->peak_bytes), W - R, Y(p->peak_bytes), c);
        if (p->backward_step < p->n_steps)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"2,3\"/>\n",
                    X(p->backward_step), T, X(p->backward_step), T + ph, c);
        if (p->peak_step >= 0)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", X(p->peak_step + 0.5),
                    Y(p->timeline[p->peak_step]), c);
        char hb[32];
        human((double)p->peak_bytes, hb, sizeof hb);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", W - R - 300,
                T + 6 + 18.0 * i, c);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", W - R - 282, T + 16 + 18.0 * i);
        xml_text(f, labels[i]);
        fprintf(f, ": peak %s (dashed), backward from step %d (dotted)</text>\n", hb, p->backward_step);
    }
#undef X
#undef Y
    fputs("</svg>\n", f);
    if ((st = ot_atomic_commit(af, err)) && err) ot_error_prefix(err, "timeline ");
    return st;
}
