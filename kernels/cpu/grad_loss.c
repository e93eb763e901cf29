/* grad_loss.c — CPU kernels of the loss gradients (SoftmaxCrossEntropyLossGrad,
 * NegativeLogLikelihoodLossGrad: inputs (dLoss, scores [N, C, d...], labels [N, d...]
 * [, weight [C]]) with the forward node's reduction / ignore_index), of the
 * mean-squared-error pair MseLoss / MseLossGrad, and of BceWithLogitsLoss and L1Loss
 * with their gradients. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu_vecmath.h" /* ot_cpu_max_f32, ot_cpu_exp_diff_f64, ot_cpu_div_scale_f64 */
#include "kernels/cpu/grad_kernels.h"
#include "kernels/loss_geometry.h"

/* Positions d one task handles side by side: with classes on axis 1 and D > 1 (a
 * [B, T, V] output transposed to [B, V, T] by the loss builder), 16 neighbouring d are
 * one cache line of a class row, where one position at a time touches one float per
 * line. Each lane takes its max and sum over the classes in the same order and with the
 * same double operations as one position at a time: the same bits. */
#define OT_CE_LANES 16

typedef struct {
    const ot_tensor *lab;
    const float *xs, *dls, *ws;
    float *dx;
    int64_t C, D, ignore;
    int mode;
    bool has_ig, softmax;
    double denom;
} ce_grad_args;

/* dX of positions (n, d0 .. d0 + lanes - 1). */
static void ce_grad_lanes(const ce_grad_args *a, int64_t n, int64_t d0, int lanes) {
    int64_t C = a->C, D = a->D;
    const float *xr = a->xs + n * C * D + d0;
    float *dr = a->dx + n * C * D + d0;
    int64_t l[OT_CE_LANES];
    double g[OT_CE_LANES], mx[OT_CE_LANES], s[OT_CE_LANES];
    bool skip[OT_CE_LANES];
    for (int k = 0; k < lanes; k++) {
        int64_t i = n * D + d0 + k;
        ot_kernel_load_int(a->lab->dtype, a->lab->data, i, &l[k]);
        skip[k] = a->has_ig && l[k] == a->ignore;
        g[k] = skip[k] ? 0.0 : (a->ws ? a->ws[l[k]] : 1.0);
        g[k] *= a->mode == 0 ? a->dls[i] : a->dls[0];
        if (a->mode == 2) g[k] = a->denom > 0.0 ? g[k] / a->denom : 0.0;
    }
    if (!a->softmax) { /* NLL: d/dx of -x[label] */
        for (int64_t c = 0; c < C; c++)
            for (int k = 0; k < lanes; k++) dr[c * D + k] = (!skip[k] && c == l[k]) ? (float)-g[k] : 0.0f;
        return;
    }
    for (int k = 0; k < lanes; k++) mx[k] = -INFINITY, s[k] = 0.0;
    /* fmax(mx, x) without the call: mx starts at -inf and never becomes NaN, a NaN x
     * leaves it, and on a tie x is taken, as glibc's maxsd-based fmax does */
    for (int64_t c = 0; c < C; c++)
        for (int k = 0; k < lanes; k++) {
            double x = xr[c * D + k];
            mx[k] = mx[k] > x || x != x ? mx[k] : x;
        }
    for (int64_t c = 0; c < C; c++)
        for (int k = 0; k < lanes; k++) s[k] += exp(xr[c * D + k] - mx[k]);
    for (int64_t c = 0; c < C; c++)
        for (int k = 0; k < lanes; k++) {
            double p = exp(xr[c * D + k] - mx[k]) / s[k];
            dr[c * D + k] = (float)(g[k] * (p - (c == l[k] ? 1.0 : 0.0)));
        }
}

/* The rows case (D == 1: a language model's [B*T, V] logits, autodiff/loss_rows.c)
 * takes exp(x - max) once per element instead of once for the sum and again for p:
 * the exps of row r are kept as doubles in dX's rows r and r+1 (2 C floats are C
 * doubles), and row r's dX, written in ascending c, overwrites only exps already read
 * (float c lies in double c/2). So the row after it must not have been written yet:
 * each thread walks its own rows in order, and its last row, whose next row is
 * another thread's, takes exp twice, as D > 1 does. Every value is the same exp of
 * the same argument, summed in the same order and divided by the same sum: the same
 * bits. The bytes go through memcpy, which may alias floats and doubles. */
static void ce_grad_row(const ce_grad_args *a, int64_t r, bool spare_next) {
    int64_t C = a->C;
    if (!spare_next) {
        ce_grad_lanes(a, r, 0, 1);
        return;
    }
    const float *xr = a->xs + r * C;
    float *dr = a->dx + r * C;
    unsigned char *ek = (unsigned char *)dr;
    int64_t l;
    ot_kernel_load_int(a->lab->dtype, a->lab->data, r, &l);
    bool skip = a->has_ig && l == a->ignore;
    double g = skip ? 0.0 : (a->ws ? a->ws[l] : 1.0);
    g *= a->mode == 0 ? a->dls[r] : a->dls[0];
    if (a->mode == 2) g = a->denom > 0.0 ? g / a->denom : 0.0;
    /* ce_grad_lanes's max takes the last of equal values, ot_cpu_max_f32 the first:
     * the same but for the sign of a zero max, which the plain loop then decides */
    double mx = ot_cpu_max_f32(xr, C), s = 0.0;
    if (mx == 0.0) {
        mx = -INFINITY;
        for (int64_t c = 0; c < C; c++) {
            double x = xr[c];
            mx = mx > x || x != x ? mx : x; /* as ce_grad_lanes */
        }
    }
    for (int64_t c0 = 0; c0 < C; c0 += 256) { /* the exps 256 at a time (cpu_vecmath.h), summed in order */
        int64_t m = C - c0 < 256 ? C - c0 : 256;
        double e[256];
        ot_cpu_exp_diff_f64(xr + c0, mx, e, m);
        for (int64_t c = 0; c < m; c++) s += e[c];
        memcpy(ek + 8 * c0, e, (size_t)m * sizeof(double));
    }
    /* g * (p - [c == l]) 256 at a time: e / s - 0.0 is e / s, so only the label's
     * element takes the - 1.0. A chunk's floats overwrite only exps of this chunk,
     * copied out first, and of earlier ones. */
    for (int64_t c0 = 0; c0 < C; c0 += 256) {
        int64_t m = C - c0 < 256 ? C - c0 : 256;
        double e[256];
        float v[256];
        memcpy(e, ek + 8 * c0, (size_t)m * sizeof(double));
        ot_cpu_div_scale_f64(e, s, g, v, m);
        if (l >= c0 && l < c0 + m) v[l - c0] = (float)(g * (e[l - c0] / s - 1.0));
        memcpy(ek + 4 * c0, v, (size_t)m * sizeof(float));
    }
}

/* ce_grad_row over rows [0, N) on nt threads, each taking one contiguous run. */
static void ce_grad_rows(const ce_grad_args *a, int64_t N, int nt, bool par) {
#pragma omp parallel num_threads(nt) if (par)
    {
        int T = omp_get_num_threads(), t = omp_get_thread_num();
        int64_t r0 = N * t / T, r1 = N * (t + 1) / T;
        for (int64_t r = r0; r < r1; r++) ce_grad_row(a, r, r + 1 < r1);
    }
}

OT_GRAD_KERNEL(ot_cpu_class_loss_grad) {
    const ot_tensor *dl = &in[0], *x = &in[1], *lab = &in[2];
    const ot_tensor *w = node->n_inputs > 3 && in[3].data ? &in[3] : NULL;
    if (x->dtype != OT_F32 || dl->dtype != OT_F32) return ot_cpu_bad_dtype(node, "scores", x->dtype, err);
    if (!ot_kernel_is_int_dtype(lab->dtype)) return ot_cpu_bad_dtype(node, "labels", lab->dtype, err);
    if (w && w->dtype != OT_F32) return ot_cpu_bad_dtype(node, "weight", w->dtype, err);
    /* the forward kernels' geometry (kernels/loss_geometry.h), as on CUDA */
    ot_loss_geometry lg;
    ot_status st = ot_loss_geometry_init(&lg, node, &x->shape, lab, err);
    if (st) return st;
    int64_t N = lg.N, C = lg.C, D = lg.D;
    int mode = lg.reduction;
    if (mode == 0 && ot_kernel_numel(dl) != N * D)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): reduction 'none' needs dLoss shaped like labels", node->name,
                       node->op_type);
    bool has_ig = lg.has_ignore;
    int64_t ignore = lg.ignore;
    const float *xs = x->data, *dls = dl->data, *ws = w ? w->data : NULL;
    float *dx = out[0].data;
    bool softmax = node->op == OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD;
    /* The mean's denominator: total weight of the samples not ignored (sequential,
     * so the same on every thread count). */
    double denom = 0.0;
    for (int64_t i = 0; i < N * D; i++) {
        int64_t l;
        ot_kernel_load_int(lab->dtype, lab->data, i, &l);
        if (has_ig && l == ignore) continue;
        if (l < 0 || l >= C)
            return ot_fail(err, OT_E_DATA, "node '%s' (%s): label %lld at position %lld is outside [0, %lld)",
                           node->name, node->op_type, (long long)l, (long long)i, (long long)C);
        denom += ws ? ws[l] : 1.0;
    }
    ce_grad_args ga = {.lab = lab, .xs = xs, .dls = dls, .ws = ws, .dx = dx, .C = C, .D = D, .mode = mode,
                       .has_ig = has_ig, .ignore = ignore, .denom = denom, .softmax = softmax};
    int nt = ot_cpu_threads(ctx);
    bool par = N * C * D >= OT_CPU_PAR_MIN;
    /* dX must not overlap the scores for ce_grad_row to keep exps in it */
    uintptr_t xa = (uintptr_t)xs, da = (uintptr_t)dx, bytes = (uintptr_t)(N * C) * sizeof(float);
    if (softmax && D == 1 && (da + bytes <= xa || xa + bytes <= da)) {
        ce_grad_rows(&ga, N, nt, par && N > 1);
        return OT_OK;
    }
    int64_t nb = (D + OT_CE_LANES - 1) / OT_CE_LANES, tasks = N * nb;
#pragma omp parallel for schedule(static) num_threads(nt) if (N * C * D >= OT_CPU_PAR_MIN && tasks > 1)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t d0 = t % nb * OT_CE_LANES;
        int lanes = (int)(D - d0 < OT_CE_LANES ? D - d0 : OT_CE_LANES);
        ce_grad_lanes(&ga, t / nb, d0, lanes);
    }
    return OT_OK;
}

OT_GRAD_KERNEL(ot_cpu_mse_loss) {
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[1].dtype, err);
    int64_t n = ot_kernel_numel(&in[0]);
    if (ot_kernel_numel(&in[1]) != n)
        return ot_fail(err, OT_E_DATA, "node '%s' (MseLoss): targets have %lld elements, the output %lld", node->name,
                       (long long)ot_kernel_numel(&in[1]), (long long)n);
    const float *x = in[0].data, *t = in[1].data;
    double s = 0.0; /* sequential: the loss is bitwise independent of the thread count */
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i] - t[i];
        s += d * d;
    }
    *(float *)out[0].data = n > 0 ? (float)(s / (double)n) : 0.0f;
    (void)ctx;
    return OT_OK;
}

OT_GRAD_KERNEL(ot_cpu_mse_loss_grad) {
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32 || in[2].dtype != OT_F32)
        return ot_cpu_bad_dtype(node, "input", in[1].dtype, err);
    int64_t n = ot_kernel_numel(&in[1]);
    if (ot_kernel_numel(&in[2]) != n || ot_kernel_numel(&out[0]) != n)
        return ot_fail(err, OT_E_DATA, "node '%s' (MseLossGrad): X, target and dX differ in size", node->name);
    const float *x = in[1].data, *t = in[2].data;
    float *dx = out[0].data;
    float g = n > 0 ? 2.0f * *(const float *)in[0].data / (float)n : 0.0f;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] = g * (x[i] - t[i]);
    return OT_OK;
}

/* BceWithLogitsLoss's term in the stable form torch uses: no exp of a positive number. */
static double bce_term(double x, double y) { return (x > 0 ? x : 0) - x * y + log1p(exp(-fabs(x))); }

/* The sigmoid without overflow for either sign (expf of a non-positive argument only). */
static float sigmoid_f32(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

/* BceWithLogitsLoss / L1Loss: the mean over every element, summed in double in order
 * (the loss is bitwise independent of the thread count, as MseLoss's). */
OT_GRAD_KERNEL(ot_cpu_elementwise_loss) {
    (void)ctx;
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[1].dtype, err);
    ot_status st = ot_loss_pair_check(node, &in[0], &in[1], NULL, err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&in[0]);
    const float *x = in[0].data, *t = in[1].data;
    bool bce = node->op == OT_OP_BCE_LOGITS_LOSS;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += bce ? bce_term(x[i], t[i]) : fabs((double)x[i] - t[i]);
    *(float *)out[0].data = n > 0 ? (float)(s / (double)n) : 0.0f;
    return OT_OK;
}

/* (dLoss, X, target) -> dX = dL/N (sigmoid(x) - y) or dL/N sign(x - y), 0 where x = y. */
OT_GRAD_KERNEL(ot_cpu_elementwise_loss_grad) {
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32 || in[2].dtype != OT_F32)
        return ot_cpu_bad_dtype(node, "input", in[1].dtype, err);
    ot_status st = ot_loss_pair_check(node, &in[1], &in[2], &out[0], err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&in[1]);
    const float *x = in[1].data, *t = in[2].data;
    float *dx = out[0].data;
    float g = n > 0 ? *(const float *)in[0].data / (float)n : 0.0f;
    int nt = ot_cpu_threads(ctx);
    if (node->op == OT_OP_BCE_LOGITS_LOSS_GRAD) {
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dx[i] = g * (sigmoid_f32(x[i]) - t[i]);
    } else {
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dx[i] = x[i] > t[i] ? g : x[i] < t[i] ? -g : 0.0f;
    }
    return OT_OK;
}
