/* cpu_linear_ce.c — CPU kernels of the chunked cross-entropy (issue 28):
 * LinearCrossEntropy (H, W, labels [, bias]) -> mean loss, and LinearCrossEntropyGrad
 * (dLoss, H, W, labels [, bias]) -> dH, dW [, dBias]. Both walk the rows a chunk at a
 * time through one chunk x V block of workspace: logits = H_c·W (+ bias), then the
 * loss of each row, or, backward, the logits' gradient in place and from it dH_c =
 * dlogits·Wᵀ and dW += H_cᵀ·dlogits. The chunks run in row order and each row's
 * arithmetic is SoftmaxCrossEntropyLoss's and its gradient's on the rows layout
 * (cpu_reduce.c, grad_loss.c), so the result does not depend on the thread count; dW
 * and dBias are sums over chunks, so their last bits depend on the chunk size, which
 * the plan fixes (the node's chunk_rows). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_vecmath.h" /* ot_cpu_expf_n, ot_cpu_max_f32, ot_cpu_exp_diff_f64, ot_cpu_div_scale_f64 */
#include "kernels/cpu/grad_kernels.h"
#include "kernels/linear_ce_geometry.h"

size_t ot_cpu_linear_ce_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    return ot_linear_ce_workspace_bytes(node, in);
}

/* Labels in [0, V) or the ignored one; the count of labels that count. */
static ot_status check_labels(const ot_node *node, const ot_linear_ce_geometry *g, const ot_tensor *lab,
                              int64_t *counted, ot_error *err) {
    if (lab->dtype != OT_I64 && lab->dtype != OT_I32) return ot_cpu_bad_dtype(node, "labels", lab->dtype, err);
    *counted = 0;
    for (int64_t i = 0; i < g->rows; i++) {
        int64_t l;
        ot_kernel_load_int(lab->dtype, lab->data, i, &l);
        if (g->has_ignore && l == g->ignore) continue;
        if (l < 0 || l >= g->V)
            return ot_fail(err, OT_E_DATA, "node '%s' (%s): label %lld at %lld outside [0, %lld)", node->name,
                           node->op_type, (long long)l, (long long)i, (long long)g->V);
        ++*counted;
    }
    return OT_OK;
}

/* logits[m, V] = H rows r0 .. r0 + m - 1 times W, plus the bias as the Add after a
 * MatMul adds it (after the product, not folded into the GEMM's accumulation). */
static void chunk_logits(const ot_kernel_ctx *ctx, const ot_linear_ce_geometry *g, const float *H, const float *W,
                         const float *bias, int64_t r0, int64_t m, float *logits) {
    int D = (int)g->D, V = (int)g->V;
    ot_cpu_sgemm(ctx, false, g->trans_w, (int)m, V, D, 1.0f, H + r0 * g->D, D, W, g->trans_w ? D : V, 0.0f, logits, V);
    if (!bias) return;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (m * g->V >= OT_CPU_PAR_MIN && m > 1)
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < g->V; c++)
            logits[r * g->V + c] += bias[c];
}

/* -log softmax(x)[label] of one row of C logits, with the loss kernel's rows-layout
 * arithmetic: float max, exps 256 at a time summed in order, float log. */
static double row_loss(const float *x, int64_t C, int64_t lab) {
    float mx = ot_cpu_max_f32(x, C), sum = 0.0f, e[256];
    if (mx == -INFINITY) mx = 0.0f;
    for (int64_t c0 = 0; c0 < C; c0 += 256) {
        int64_t m = C - c0 < 256 ? C - c0 : 256;
        for (int64_t c = 0; c < m; c++)
            e[c] = x[c0 + c] - mx;
        ot_cpu_expf_n(e, e, m);
        for (int64_t c = 0; c < m; c++)
            sum += e[c];
    }
    return -(double)((x[lab] - mx) - logf(sum));
}

ot_status ot_cpu_linear_ce(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    ot_linear_ce_geometry g;
    ot_status st = ot_linear_ce_geometry_init(&g, node, in, err);
    int64_t counted = 0;
    if (!st) st = check_labels(node, &g, &in[2], &counted, err);
    if (st) return st;
    size_t need = ot_linear_ce_workspace_bytes(node, in);
    if (!ctx->workspace || ctx->workspace_bytes < need)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): workspace smaller than ot_cpu_workspace_bytes", node->name,
                       node->op_type);
    float *logits = ctx->workspace;
    double *li = (double *)((char *)ctx->workspace + ot_linear_ce_doubles_offset(&g));
    const float *bias = g.has_bias ? in[3].data : NULL;
    int nt = ot_cpu_threads(ctx);
    double sl = 0.0, sw = 0.0;
    for (int64_t r0 = 0; r0 < g.rows; r0 += g.chunk) {
        int64_t m = g.rows - r0 < g.chunk ? g.rows - r0 : g.chunk;
        chunk_logits(ctx, &g, in[0].data, in[1].data, bias, r0, m, logits);
#pragma omp parallel for schedule(static) num_threads(nt) if (m * g.V >= OT_CPU_PAR_MIN && m > 1)
        for (int64_t r = 0; r < m; r++) {
            int64_t l;
            ot_kernel_load_int(in[2].dtype, in[2].data, r0 + r, &l);
            bool ig = g.has_ignore && l == g.ignore;
            li[2 * r] = ig ? 0.0 : row_loss(logits + r * g.V, g.V, l);
            li[2 * r + 1] = ig ? 0.0 : 1.0;
        }
        for (int64_t r = 0; r < m; r++)
            sl += li[2 * r], sw += li[2 * r + 1]; /* in row order, as the loss kernel */
    }
    /* every label ignored: 0, as SoftmaxCrossEntropyLoss gives (docs/bad-input.md) */
    *(float *)out[0].data = (float)(sw != 0.0 ? sl / sw : 0.0);
    return OT_OK;
}

/* One row's gradient g (p - onehot(l)) in place over its logits, with the softmax in
 * double as SoftmaxCrossEntropyLossGrad takes it. */
static void row_grad(float *x, int64_t C, int64_t l, double g) {
    double mx = -INFINITY, s = 0.0;
    for (int64_t c = 0; c < C; c++) {
        double v = x[c];
        mx = mx > v || v != v ? mx : v;
    }
    for (int64_t c0 = 0; c0 < C; c0 += 256) {
        int64_t m = C - c0 < 256 ? C - c0 : 256;
        double e[256];
        ot_cpu_exp_diff_f64(x + c0, mx, e, m);
        for (int64_t c = 0; c < m; c++)
            s += e[c];
    }
    for (int64_t c0 = 0; c0 < C; c0 += 256) {
        int64_t m = C - c0 < 256 ? C - c0 : 256;
        double e[256];
        ot_cpu_exp_diff_f64(x + c0, mx, e, m);
        ot_cpu_div_scale_f64(e, s, g, x + c0, m);
        if (l >= c0 && l < c0 + m) x[l] = (float)(g * (e[l - c0] / s - 1.0));
    }
}

ot_status ot_cpu_linear_ce_grad(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                                ot_error *err) {
    ot_linear_ce_geometry g;
    ot_status st = ot_linear_ce_geometry_init(&g, node, in + 1, err);
    int64_t counted = 0;
    if (!st) st = check_labels(node, &g, &in[3], &counted, err);
    if (st) return st;
    size_t need = ot_linear_ce_workspace_bytes(node, in);
    if (!ctx->workspace || ctx->workspace_bytes < need)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): workspace smaller than ot_cpu_workspace_bytes", node->name,
                       node->op_type);
    float *dH = ot_linear_ce_grad_out(node, out, 0);
    float *dW = ot_linear_ce_grad_out(node, out, 1);
    float *dB = g.has_bias ? ot_linear_ce_grad_out(node, out, 2) : NULL;
    const float *H = in[1].data, *W = in[2].data, *bias = g.has_bias ? in[4].data : NULL;
    /* the mean's gradient per counted row; none counted: zero, as the loss is 0 */
    double scale = counted > 0 ? (double)*(const float *)in[0].data / (double)counted : 0.0;
    float *dl = ctx->workspace;
    int nt = ot_cpu_threads(ctx);
    int D = (int)g.D, V = (int)g.V;
    if (dB) memset(dB, 0, (size_t)g.V * sizeof(float));
    if (dW && g.rows == 0) memset(dW, 0, (size_t)(g.D * g.V) * sizeof(float));
    for (int64_t r0 = 0; r0 < g.rows; r0 += g.chunk) {
        int64_t m = g.rows - r0 < g.chunk ? g.rows - r0 : g.chunk;
        chunk_logits(ctx, &g, H, W, bias, r0, m, dl);
#pragma omp parallel for schedule(static) num_threads(nt) if (m * g.V >= OT_CPU_PAR_MIN && m > 1)
        for (int64_t r = 0; r < m; r++) {
            int64_t l;
            ot_kernel_load_int(in[3].dtype, in[3].data, r0 + r, &l);
            if (g.has_ignore && l == g.ignore)
                memset(dl + r * g.V, 0, (size_t)g.V * sizeof(float));
            else
                row_grad(dl + r * g.V, g.V, l, scale);
        }
        if (dH) /* dH_c = dl · Wᵀ (W [D, V]) or dl · W (W [V, D]) */
            ot_cpu_sgemm(ctx, false, !g.trans_w, (int)m, D, V, 1.0f, dl, V, W, g.trans_w ? D : V, 0.0f, dH + r0 * g.D,
                         D);
        float beta = r0 == 0 ? 0.0f : 1.0f;
        if (dW && !g.trans_w) /* dW [D, V] += H_cᵀ · dl */
            ot_cpu_sgemm(ctx, true, false, D, V, (int)m, 1.0f, H + r0 * g.D, D, dl, V, beta, dW, V);
        else if (dW) /* dW [V, D] += dlᵀ · H_c */
            ot_cpu_sgemm(ctx, true, false, V, D, (int)m, 1.0f, dl, V, H + r0 * g.D, D, beta, dW, D);
        if (dB) {
#pragma omp parallel for schedule(static) num_threads(nt) if (g.V >= OT_CPU_PAR_MIN)
            for (int64_t c = 0; c < g.V; c++)
                for (int64_t r = 0; r < m; r++)
                    dB[c] += dl[r * g.V + c];
        }
    }
    return OT_OK;
}
