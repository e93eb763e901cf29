/* cpu_reduce.c — reductions and losses on the CPU: ReduceMean / ReduceSum (ints
 * attribute "axes", keepdims, noop_with_empty_axes), SoftmaxCrossEntropyLoss and
 * NegativeLogLikelihoodLoss (reduction none/sum/mean, ignore_index, optional class
 * weights, class axis 1 with trailing dims, optional log_prob output). Every sum
 * runs in double in a fixed order, so results do not depend on the thread count. */
#include <math.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_vecmath.h" /* ot_cpu_expf_n, ot_cpu_max_f32 */
#include "kernels/loss_geometry.h"
#include "kernels/reduce_geometry.h"

/* ---- ReduceMean / ReduceSum -------------------------------------------------------- */

#define RED_BLOCK 256

ot_status ot_cpu_reduce(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                        ot_error *err) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[0].dtype, err);
    const ot_shape *s = &in[0].shape;
    int r = s->rank, na = 0;
    const int64_t *axes;
    ot_status st = ot_reduce_attr_axes(node, &axes, &na, err);
    if (st) return st;
    int64_t in_axes[OT_MAX_RANK];
    if ((!axes || na == 0) && node->n_inputs > 1 && in[1].data && ot_kernel_numel(&in[1]) <= OT_MAX_RANK) {
        na = (int)ot_kernel_numel(&in[1]);
        for (int i = 0; i < na; i++) ot_kernel_load_int(in[1].dtype, in[1].data, i, &in_axes[i]);
        axes = in_axes;
    }
    bool red[OT_MAX_RANK] = {0}, noop;
    if ((st = ot_reduce_dims(node, axes, na, r, red, &noop, err))) return st;
    if (noop) {
        if (ot_kernel_numel(&out[0]) != ot_kernel_numel(&in[0]))
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): no-op output differs in size", node->name, node->op_type);
        if (out[0].data != in[0].data) memmove(out[0].data, in[0].data, (size_t)ot_kernel_numel(&in[0]) * 4);
        return OT_OK;
    }
    /* merge adjacent dims of the same kind (size-1 dims are dropped) */
    int64_t dim[OT_MAX_RANK];
    bool kind[OT_MAX_RANK];
    int nd = 0;
    int64_t n_out = 1, n_red = 1;
    for (int d = 0; d < r; d++) {
        if (red[d]) n_red *= s->dim[d];
        else n_out *= s->dim[d];
        if (s->dim[d] == 1) continue;
        if (nd > 0 && kind[nd - 1] == red[d]) {
            dim[nd - 1] *= s->dim[d];
        } else {
            dim[nd] = s->dim[d];
            kind[nd] = red[d];
            nd++;
        }
    }
    if (ot_kernel_numel(&out[0]) != n_out)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output size differs from the reduced shape", node->name,
                       node->op_type);
    bool mean = node->op == OT_OP_REDUCE_MEAN;
    double div = mean ? (double)n_red : 1.0;
    const float *x = in[0].data;
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = n_out * n_red >= OT_CPU_PAR_MIN;
    /* fast path: [K1][R][K2] */
    int64_t K1 = 1, R = 1, K2 = 1;
    bool simple = true;
    {
        int i = 0;
        if (i < nd && !kind[i]) K1 = dim[i++];
        if (i < nd && kind[i]) R = dim[i++];
        if (i < nd && !kind[i]) K2 = dim[i++];
        if (i < nd) simple = false;
    }
    if (simple) {
        int64_t nblk = (K2 + RED_BLOCK - 1) / RED_BLOCK, tasks = K1 * nblk;
#pragma omp parallel for schedule(static) num_threads(nt) if (par && tasks > 1)
        for (int64_t t = 0; t < tasks; t++) {
            int64_t k1 = t / nblk, k2a = (t % nblk) * RED_BLOCK;
            int64_t len = K2 - k2a < RED_BLOCK ? K2 - k2a : RED_BLOCK;
            double acc[RED_BLOCK];
            for (int64_t j = 0; j < len; j++) acc[j] = 0.0;
            const float *xb = x + k1 * R * K2 + k2a;
            if (len == 1) {
                double a = 0.0;
                for (int64_t q = 0; q < R; q++) a += xb[q * K2];
                acc[0] = a;
            } else {
                for (int64_t q = 0; q < R; q++)
                    for (int64_t j = 0; j < len; j++) acc[j] += xb[q * K2 + j];
            }
            for (int64_t j = 0; j < len; j++) y[k1 * K2 + k2a + j] = (float)(acc[j] / div);
        }
        return OT_OK;
    }
    /* general: for each output element walk the reduced dims in row-major order */
    int64_t instr[OT_MAX_RANK], acc = 1;
    for (int d = nd - 1; d >= 0; d--) instr[d] = acc, acc *= dim[d];
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t o = 0; o < n_out; o++) {
        int64_t base = 0, q = o;
        for (int d = nd - 1; d >= 0; d--) {
            if (kind[d]) continue;
            base += (q % dim[d]) * instr[d];
            q /= dim[d];
        }
        double a = 0.0;
        for (int64_t k = 0; k < n_red; k++) {
            int64_t off = base, qq = k;
            for (int d = nd - 1; d >= 0; d--) {
                if (!kind[d]) continue;
                off += (qq % dim[d]) * instr[d];
                qq /= dim[d];
            }
            a += x[off];
        }
        y[o] = (float)(a / div);
    }
    return OT_OK;
}

/* ---- losses ------------------------------------------------------------------------- */

/* scores [N, C, D...] flattened to D after the class axis (kernels/loss_geometry.h) */
typedef ot_loss_geometry loss_geom;

static ot_status loss_geom_init(loss_geom *g, const ot_node *node, const ot_tensor *in, ot_error *err) {
    return ot_loss_geometry_init(g, node, &in[0].shape, &in[1], err);
}

size_t ot_cpu_loss_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    loss_geom g;
    if (loss_geom_init(&g, node, in, NULL) != OT_OK || g.reduction == 0) return 0;
    return (size_t)(g.N * g.D) * 2 * sizeof(double);
}

/* Positions d one task handles side by side: with classes on axis 1 and D > 1 (a
 * [B, T, V] output transposed to [B, V, T] by the loss builder), 16 neighbouring d are
 * one cache line of a class row, where one position at a time reads one float per line.
 * Each lane keeps its own max, sum and log-sum, taken over the classes in the same order
 * and with the same float operations as one position at a time: the same bits. */
#define OT_LOSS_LANES 16

/* Loss terms of positions (n, d0 .. d0 + lanes - 1): into y (reduction 'none') or the
 * workspace's (loss, weight) pairs; the log-probabilities into lp when asked for. */
static void loss_lanes(const loss_geom *g, const ot_tensor *in, const float *w, float *lp, float *y, double *ws,
                       bool softmax, int64_t n, int64_t d0, int lanes) {
    int64_t C = g->C, D = g->D;
    const float *x = (const float *)in[0].data + n * C * D + d0;
    float mx[OT_LOSS_LANES], ls[OT_LOSS_LANES], sum[OT_LOSS_LANES];
    for (int k = 0; k < lanes; k++) mx[k] = 0.0f, ls[k] = 0.0f;
    if (softmax) {
        /* log p = (x - max) - log(sum exp(x - max)), same rounding as LogSoftmax */
        for (int k = 0; k < lanes; k++) mx[k] = -INFINITY, sum[k] = 0.0f;
        if (D == 1) mx[0] = ot_cpu_max_f32(x, C);
        else
            for (int64_t c = 0; c < C; c++)
                for (int k = 0; k < lanes; k++) mx[k] = x[c * D + k] > mx[k] ? x[c * D + k] : mx[k];
        for (int k = 0; k < lanes; k++)
            if (mx[k] == -INFINITY) mx[k] = 0.0f;
        if (D == 1) { /* classes last: the exps 256 at a time (cpu_vecmath.h, expf's bits), summed in order */
            float e[256];
            for (int64_t c0 = 0; c0 < C; c0 += 256) {
                int64_t m = C - c0 < 256 ? C - c0 : 256;
                for (int64_t c = 0; c < m; c++) e[c] = x[c0 + c] - mx[0];
                ot_cpu_expf_n(e, e, m);
                for (int64_t c = 0; c < m; c++) sum[0] += e[c];
            }
        } else {
            for (int64_t c = 0; c < C; c++)
                for (int k = 0; k < lanes; k++) sum[k] += expf(x[c * D + k] - mx[k]);
        }
        for (int k = 0; k < lanes; k++) ls[k] = logf(sum[k]);
        if (lp) {
            float *lr = lp + n * C * D + d0;
            for (int64_t c = 0; c < C; c++)
                for (int k = 0; k < lanes; k++) lr[c * D + k] = (x[c * D + k] - mx[k]) - ls[k];
        }
    }
    for (int k = 0; k < lanes; k++) {
        int64_t i = n * D + d0 + k, lab;
        ot_kernel_load_int(in[1].dtype, in[1].data, i, &lab);
        double li = 0.0, wi = 0.0;
        if (!(g->has_ignore && lab == g->ignore)) {
            wi = w ? w[lab] : 1.0;
            li = -(double)((x[lab * D + k] - mx[k]) - ls[k]) * wi;
        }
        if (g->reduction == 0) {
            y[i] = (float)li;
        } else {
            ws[2 * i] = li;
            ws[2 * i + 1] = wi;
        }
    }
}

static ot_status loss_run(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err, bool softmax) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "scores", in[0].dtype, err);
    if (in[1].dtype != OT_I64 && in[1].dtype != OT_I32) return ot_cpu_bad_dtype(node, "labels", in[1].dtype, err);
    const float *w = node->n_inputs > 2 && in[2].data ? in[2].data : NULL;
    if (w && in[2].dtype != OT_F32) return ot_cpu_bad_dtype(node, "weights", in[2].dtype, err);
    loss_geom g;
    ot_status st = loss_geom_init(&g, node, in, err);
    if (st) return st;
    if (w && ot_kernel_numel(&in[2]) != g.C)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): weights must have C=%lld elements", node->name, node->op_type,
                       (long long)g.C);
    int64_t M = g.N * g.D;
    for (int64_t i = 0; i < M; i++) {
        int64_t lab;
        ot_kernel_load_int(in[1].dtype, in[1].data, i, &lab);
        if (g.has_ignore && lab == g.ignore) continue;
        if (lab < 0 || lab >= g.C)
            return ot_fail(err, OT_E_DATA, "node '%s' (%s): label %lld at %lld outside [0, %lld)", node->name,
                           node->op_type, (long long)lab, (long long)i, (long long)g.C);
    }
    if (out[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    if (ot_kernel_numel(&out[0]) != (g.reduction == 0 ? M : 1))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): loss output has the wrong size", node->name, node->op_type);
    float *lp = softmax && node->n_outputs > 1 && out[1].data ? out[1].data : NULL;
    if (lp && ot_kernel_numel(&out[1]) != ot_kernel_numel(&in[0]))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): log_prob must be shaped like scores", node->name, node->op_type);
    double *ws = g.reduction ? ctx->workspace : NULL;
    if (g.reduction && (!ws || ctx->workspace_bytes < (size_t)M * 2 * sizeof(double)))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): workspace smaller than ot_cpu_workspace_bytes", node->name,
                       node->op_type);
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = M * g.C >= OT_CPU_PAR_MIN && M > 1;
    int64_t nb = (g.D + OT_LOSS_LANES - 1) / OT_LOSS_LANES, tasks = g.N * nb;
#pragma omp parallel for schedule(static) num_threads(nt) if (par && tasks > 1)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t d0 = t % nb * OT_LOSS_LANES;
        int lanes = (int)(g.D - d0 < OT_LOSS_LANES ? g.D - d0 : OT_LOSS_LANES);
        loss_lanes(&g, in, w, lp, y, ws, softmax, t / nb, d0, lanes);
    }
    if (g.reduction) {
        double sl = 0.0, sw = 0.0;
        for (int64_t i = 0; i < M; i++) sl += ws[2 * i], sw += ws[2 * i + 1];
        /* mean over no counted label (every one the ignore index): 0, not PyTorch's 0/0
         * NaN, as the gradient kernels give zero (docs/bad-input.md) */
        y[0] = (float)(g.reduction == 2 ? (sw != 0.0 ? sl / sw : 0.0) : sl);
    }
    return OT_OK;
}

ot_status ot_cpu_softmax_ce_loss(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                                 ot_error *err) {
    return loss_run(node, in, out, ctx, err, true);
}

ot_status ot_cpu_nll_loss(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    return loss_run(node, in, out, ctx, err, false);
}
