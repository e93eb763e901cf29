/* report_svg.c — the training report's loss curve as SVG, and the reader of a JSON
 * report for it (report_svg.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/atomic_file.h"
#include "ir/input_file.h"
#include "train/report_svg.h"

/* canvas and plot area, in pixels */
enum { W = 800, H = 440, L = 78, R = 718, T = 44, B = 384 };

/* Round ticks: a step of 1, 2 or 5 times a power of ten giving about `want` ticks, and
 * the range widened to whole steps. */
static double nice_step(double lo, double hi, int want) {
    double raw = (hi - lo) / want;
    if (!(raw > 0)) raw = fabs(hi) > 0 ? fabs(hi) / want : 1.0;
    double mag = pow(10.0, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0) * mag;
}

typedef struct axis {
    double lo, hi, step;
} axis;

static axis make_axis(double lo, double hi, int want, bool from_zero) {
    if (from_zero && lo > 0) lo = 0;
    if (!(hi > lo)) hi = lo + (lo != 0 ? fabs(lo) * 0.1 : 1.0);
    axis a;
    a.step = nice_step(lo, hi, want);
    a.lo = floor(lo / a.step + 1e-9) * a.step;
    a.hi = ceil(hi / a.step - 1e-9) * a.step;
    if (!(a.hi > a.lo)) a.hi = a.lo + a.step;
    return a;
}

static double px(const axis *a, double v, double p0, double p1) {
    return p0 + (v - a->lo) / (a->hi - a->lo) * (p1 - p0);
}

/* A tick label: %g of the value rounded to the step (no 0.30000000000000004). */
static void tick_text(double v, double step, char *buf, size_t n) {
    if (fabs(v) < step * 1e-6) v = 0;
    snprintf(buf, n, "%.12g", round(v / step) * step); /* 2000000, not 2e+06 */
}

static void esc(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

/* One curve as a polyline; with more steps than pixels, each pixel column draws its
 * lowest and highest value, so no spike disappears. */
static void polyline(FILE *f, const double *v, int64_t n, const axis *ax, const axis *ay, const char *style) {
    fprintf(f, "<polyline fill=\"none\" %s points=\"", style);
    int64_t cols = R - L;
    if (n <= 2 * cols) {
        for (int64_t i = 0; i < n; i++)
            if (isfinite(v[i])) fprintf(f, "%.1f,%.1f ", px(ax, (double)(i + 1), L, R), px(ay, v[i], B, T));
    } else {
        for (int64_t c = 0; c < cols; c++) {
            int64_t i0 = c * n / cols, i1 = (c + 1) * n / cols;
            double lo = INFINITY, hi = -INFINITY;
            for (int64_t i = i0; i < i1; i++)
                if (isfinite(v[i])) {
                    if (v[i] < lo) lo = v[i];
                    if (v[i] > hi) hi = v[i];
                }
            if (!isfinite(lo)) continue;
            double x = px(ax, (double)(i1), L, R);
            fprintf(f, "%.1f,%.1f %.1f,%.1f ", x, px(ay, lo, B, T), x, px(ay, hi, B, T));
        }
    }
    fputs("\"/>\n", f);
}

static void range(const double *v, int64_t n, double *lo, double *hi) {
    for (int64_t i = 0; i < n; i++)
        if (isfinite(v[i])) {
            if (v[i] < *lo) *lo = v[i];
            if (v[i] > *hi) *hi = v[i];
        }
}

void ot_report_svg(FILE *f, const ot_report_curves *c) {
    double lo = INFINITY, hi = -INFINITY, lr_lo = INFINITY, lr_hi = -INFINITY;
    range(c->loss, c->n_steps, &lo, &hi);
    range(c->val_loss, c->n_val, &lo, &hi);
    if (c->lr) range(c->lr, c->n_steps, &lr_lo, &lr_hi);
    if (!isfinite(lo)) lo = 0, hi = 1;
    bool has_lr = isfinite(lr_hi) && lr_hi > 0;
    axis ax = make_axis(0, (double)(c->n_steps > 0 ? c->n_steps : 1), 8, true);
    axis ay = make_axis(lo, hi, 6, false), alr = make_axis(0, has_lr ? lr_hi : 1, 6, true);
    const char *title = c->title ? strrchr(c->title, '/') : NULL;
    title = title ? title + 1 : c->title ? c->title : "";
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
            W, H, W, H, W, H);
    fputs("<text x=\"400\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">training loss: ", f);
    esc(f, title);
    fprintf(f, " (%lld steps)</text>\n", (long long)c->n_steps);
    /* grid and ticks */
    char t[32];
    for (double v = ax.lo; v <= ax.hi + ax.step * 1e-6; v += ax.step) {
        double x = px(&ax, v, L, R);
        tick_text(v, ax.step, t, sizeof t);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e4e4e4\"/>"
                "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                x, T, x, B, x, B + 16, t);
    }
    for (double v = ay.lo; v <= ay.hi + ay.step * 1e-6; v += ay.step) {
        double y = px(&ay, v, B, T);
        tick_text(v, ay.step, t, sizeof t);
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                L, y, R, y, L - 6, y + 4, t);
    }
    if (has_lr)
        for (double v = alr.lo; v <= alr.hi + alr.step * 1e-6; v += alr.step) {
            tick_text(v, alr.step, t, sizeof t);
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" fill=\"#777\">%s</text>\n", R + 6, px(&alr, v, B, T) + 4, t);
        }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n", L, T, R - L,
            B - T);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n", (L + R) / 2, B + 36);
    fprintf(f, "<text x=\"18\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 18 %d)\">loss</text>\n",
            (T + B) / 2, (T + B) / 2);
    if (has_lr)
        fprintf(f,
                "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#777\" transform=\"rotate(90 %d %d)\">"
                "learning rate</text>\n",
                W - 12, (T + B) / 2, W - 12, (T + B) / 2);
    /* curves */
    if (has_lr) polyline(f, c->lr, c->n_steps, &ax, &alr, "stroke=\"#999\" stroke-dasharray=\"5 3\"");
    polyline(f, c->loss, c->n_steps, &ax, &ay, "stroke=\"#1f77b4\" stroke-width=\"1.5\"");
    if (c->n_val > 0) {
        fputs("<polyline fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\" points=\"", f);
        for (int k = 0; k < c->n_val; k++)
            if (isfinite(c->val_loss[k]))
                fprintf(f, "%.1f,%.1f ", px(&ax, (double)c->val_step[k], L, R), px(&ay, c->val_loss[k], B, T));
        fputs("\"/>\n", f);
        for (int k = 0; k < c->n_val; k++)
            if (isfinite(c->val_loss[k]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#d62728\"/>\n",
                        px(&ax, (double)c->val_step[k], L, R), px(&ay, c->val_loss[k], B, T));
    }
    /* legend: inside the plot area, top right */
    int rows = 1 + (c->n_val > 0) + has_lr, lw = 150, lx = R - lw - 8, ly = T + 8;
    fprintf(
        f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"white\" fill-opacity=\"0.9\" stroke=\"#bbb\"/>\n",
        lx, ly, lw, rows * 18 + 8);
    const char *names[3] = {"training loss", "validation loss", "learning rate (right)"};
    const char *styles[3] = {"stroke=\"#1f77b4\" stroke-width=\"2\"", "stroke=\"#d62728\" stroke-width=\"2\"",
                             "stroke=\"#999\" stroke-dasharray=\"5 3\""};
    bool show[3] = {true, c->n_val > 0, has_lr};
    for (int k = 0, row = 0; k < 3; k++) {
        if (!show[k]) continue;
        int y = ly + 16 + row * 18;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" %s/><text x=\"%d\" y=\"%d\">%s</text>\n", lx + 8,
                y - 4, lx + 32, y - 4, styles[k], lx + 38, y, names[k]);
        row++;
    }
    fputs("</svg>\n", f);
}

ot_status ot_report_svg_write(const char *path, const ot_report_curves *c, ot_error *err) {
    ot_atomic_file *af;
    ot_status st = ot_atomic_open(path, &af, err);
    if (st) return st;
    ot_report_svg(ot_atomic_stream(af), c);
    return ot_atomic_commit(af, err);
}

char *ot_report_svg_path(const char *report_path) {
    size_t n = strlen(report_path);
    char *p = malloc(n + 5);
    if (!p) return NULL;
    memcpy(p, report_path, n + 1);
    if (n > 5 && !strcmp(p + n - 5, ".json"))
        strcpy(p + n - 5, ".svg");
    else
        strcpy(p + n, ".svg");
    return p;
}

/* ---- reading a report back --------------------------------------------------------- */

/* Where `"key": ` (array: `"key": [`, the "[" included) first occurs: in the report
 * `train` writes, the top-level key ("lr" is also the optimizer's number, never an
 * array; "model" comes first). */
static const char *find_key(const char *js, const char *key, bool array) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": %s", key, array ? "[" : "");
    const char *p = strstr(js, pat);
    return p ? p + strlen(pat) - (array ? 1 : 0) : NULL;
}

/* A number or null (NaN) at *p; false on anything else. */
static bool read_num(const char **p, double *v) {
    while (**p == ' ' || **p == '\n')
        (*p)++;
    if (!strncmp(*p, "null", 4)) {
        *v = NAN;
        *p += 4;
        return true;
    }
    char *end;
    *v = strtod(*p, &end);
    if (end == *p) return false;
    *p = end;
    return true;
}

/* A JSON array of numbers (null as NaN) into a fresh array. */
static ot_status read_array(const char *path, const char *js, const char *key, double **out, int64_t *n,
                            ot_error *err) {
    const char *p = find_key(js, key, true);
    if (!p || *p != '[')
        return ot_fail(err, OT_E_PARSE, "%s: no \"%s\" array: not a report of `onnxtrain train --report`", path, key);
    p++;
    int64_t cap = 64, k = 0;
    double *v = malloc((size_t)cap * sizeof *v);
    for (;;) {
        while (*p == ' ' || *p == '\n')
            p++;
        if (!v || *p == ']') break;
        if (k == cap) {
            double *nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!nv) free(v);
            if (!(v = nv)) break;
        }
        if (!read_num(&p, &v[k])) {
            free(v);
            return ot_fail(err, OT_E_PARSE, "%s: \"%s\"[%lld] is not a number", path, key, (long long)k);
        }
        k++;
        while (*p == ' ')
            p++;
        if (*p == ',') p++;
    }
    if (!v) return ot_fail(err, OT_E_MEMORY, "out of memory reading %s", path);
    *out = v;
    *n = k;
    return OT_OK;
}

/* "epochs": [{"epoch": 1, "step": 32, "val_loss": 3.1, ...}, ...]: the validated ones. */
static ot_status read_epochs(const char *path, const char *js, ot_report_curves *c, ot_error *err) {
    const char *p = find_key(js, "epochs", true);
    if (!p || *p != '[') return ot_fail(err, OT_E_PARSE, "%s: no \"epochs\" array", path);
    const char *end = strchr(p, ']');
    int n = 0;
    for (const char *q = p; q && q < end; q = strchr(q + 1, '{'))
        n += *q == '{';
    c->val_step = calloc((size_t)n + 1, sizeof *c->val_step);
    c->val_loss = calloc((size_t)n + 1, sizeof *c->val_loss);
    if (!c->val_step || !c->val_loss) return ot_fail(err, OT_E_MEMORY, "out of memory reading %s", path);
    for (const char *q = strchr(p, '{'); q && q < end; q = strchr(q + 1, '{')) {
        const char *s = strstr(q, "\"step\": "), *l = strstr(q, "\"val_loss\": ");
        double step, loss;
        if (!s || !l || s > end || l > end)
            return ot_fail(err, OT_E_PARSE, "%s: an epoch without \"step\" or \"val_loss\"", path);
        s += 8;
        l += 12;
        if (!read_num(&s, &step) || !read_num(&l, &loss))
            return ot_fail(err, OT_E_PARSE, "%s: a bad epoch entry", path);
        if (isfinite(loss)) {
            c->val_step[c->n_val] = (int64_t)step;
            c->val_loss[c->n_val++] = loss;
        }
    }
    return OT_OK;
}

ot_status ot_report_read_curves(const char *path, ot_report_curves *c, ot_error *err) {
    memset(c, 0, sizeof *c);
    uint8_t *buf = NULL;
    size_t len = 0;
    ot_status st = ot_input_read_all(path, NULL, (uint64_t)1 << 32, &buf, &len, err);
    if (st) return st;
    const char *js = (const char *)buf;
    const char *m = find_key(js, "model", false);
    if (m && *m == '"') { /* the model's path as written (escapes are rare in a path: kept as they are) */
        const char *e = m + 1;
        while (*e && (*e != '"' || e[-1] == '\\'))
            e++;
        c->title = strndup(m + 1, (size_t)(e - m - 1));
    }
    int64_t n_lr = 0;
    st = read_array(path, js, "loss", &c->loss, &c->n_steps, err);
    if (!st) st = read_array(path, js, "lr", &c->lr, &n_lr, err);
    if (!st && n_lr != c->n_steps)
        st = ot_fail(err, OT_E_PARSE, "%s: %lld losses but %lld learning rates", path, (long long)c->n_steps,
                     (long long)n_lr);
    if (!st) st = read_epochs(path, js, c, err);
    free(buf);
    if (st) ot_report_curves_free(c);
    return st;
}

void ot_report_curves_free(ot_report_curves *c) {
    free(c->title);
    free(c->loss);
    free(c->lr);
    free(c->val_step);
    free(c->val_loss);
    memset(c, 0, sizeof *c);
}
