/* grad_loss.c — CPU kernels of the loss gradients (SoftmaxCrossEntropyLossGrad,
 * NegativeLogLikelihoodLossGrad: inputs (dLoss, scores [N, C, d...], labels [N, d...]
 * [, weight [C]]) with the forward node's reduction / ignore_index) and of the
 * mean-squared-error pair MseLoss / MseLossGrad. */
#include <math.h>

#include "kernels/cpu/grad_kernels.h"
#include "kernels/loss_geometry.h"

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
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (N * C * D >= OT_CPU_PAR_MIN)
    for (int64_t i = 0; i < N * D; i++) {
        int64_t n = i / D, d = i % D, l;
        ot_kernel_load_int(lab->dtype, lab->data, i, &l);
        const float *xr = xs + n * C * D + d;
        float *dr = dx + n * C * D + d;
        bool skip = has_ig && l == ignore;
        double g = skip ? 0.0 : (ws ? ws[l] : 1.0);
        g *= mode == 0 ? dls[i] : dls[0];
        if (mode == 2) g = denom > 0.0 ? g / denom : 0.0;
        if (!softmax) { /* NLL: d/dx of -x[label] */
            for (int64_t c = 0; c < C; c++) dr[c * D] = (!skip && c == l) ? (float)-g : 0.0f;
            continue;
        }
        double mx = -INFINITY, s = 0.0;
        for (int64_t c = 0; c < C; c++) mx = fmax(mx, xr[c * D]);
        for (int64_t c = 0; c < C; c++) s += exp(xr[c * D] - mx);
        for (int64_t c = 0; c < C; c++) {
            double p = exp(xr[c * D] - mx) / s;
            dr[c * D] = (float)(g * (p - (c == l ? 1.0 : 0.0)));
        }
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
