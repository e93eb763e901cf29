/* cuda_loss.cu — the losses on the GPU, the counterparts of cpu_reduce.c's
 * SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss and grad_loss.c (their
 * gradients, MseLoss, MseLossGrad, BceWithLogitsLoss, L1Loss and theirs), and the scratch the loss and LayerNormGrad
 * kernels ask the planner for. One warp per sample; totals over samples in one block
 * in a fixed tree (double), so results are repeatable; no atomics. */
#include <math.h>
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/loss_geometry.h"
#include "kernels/norm_geometry.h"

/* rows x cols view of X for a LayerNorm over axes [axis, rank). */
static bool ln_view(const ot_node *node, const ot_tensor *x, int64_t *rows, int64_t *cols) {
    return ot_layer_norm_view(node, &x->shape, rows, cols);
}

/* ---- losses ------------------------------------------------------------------------ */

/* scores [N, C, D...] flattened to D after the class axis (kernels/loss_geometry.h),
 * passed to the kernels by value */
typedef ot_loss_geometry loss_geom;

static ot_status loss_geom_init(loss_geom *g, const ot_node *node, const ot_shape *s, const ot_tensor *labels,
                                ot_error *err) {
    return ot_loss_geometry_init(g, node, s, labels, err);
}

size_t ot_cuda_reduce_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    loss_geom g{}; /* zeroed: GCC cannot see that a failed init is never read */
    switch (node->op) {
    case OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS:
    case OT_OP_NLL_LOSS:
        if (loss_geom_init(&g, node, &in[0].shape, &in[1], NULL) != OT_OK || g.reduction == 0) return 0;
        return (size_t)g.M * 2 * sizeof(double);
    case OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD:
    case OT_OP_NLL_LOSS_GRAD: return sizeof(double); /* the mean's denominator */
    case OT_OP_LAYER_NORM_GRAD: {
        int64_t rows, cols;
        if (!ln_view(node, &in[1], &rows, &cols)) return 0;
        return (size_t)rows * 2 * sizeof(double);
    }
    default: return 0;
    }
}

__device__ __forceinline__ int64_t load_label(const void *p, int i64, int64_t i) {
    return i64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}

/* One warp per sample; a label outside [0, C) gives NaN, which the training loop's
 * numerics check reports with the node's name (the CPU backend reports it here). */
__global__ void k_class_loss(const float *x, const void *lab, int i64, const float *w, float *y, float *lp, double *ws,
                             loss_geom g, int softmax) {
    int lane = threadIdx.x & 31;
    OT_CU_WARP_LOOP(i, g.M) {
        int64_t n = i / g.D, d = i % g.D, l = load_label(lab, i64, i);
        const float *xi = x + n * g.C * g.D + d;
        float mx = 0.0f, ls = 0.0f;
        if (softmax) {
            mx = -INFINITY;
            for (int64_t c = lane; c < g.C; c += 32) mx = fmaxf(mx, xi[c * g.D]);
            mx = ot_cu_warp_max(mx);
            if (mx == -INFINITY) mx = 0.0f;
            float sum = 0.0f;
            for (int64_t c = lane; c < g.C; c += 32) sum += expf(xi[c * g.D] - mx);
            sum = ot_cu_warp_sum(sum);
            ls = logf(sum);
            if (lp)
                for (int64_t c = lane; c < g.C; c += 32) lp[n * g.C * g.D + c * g.D + d] = (xi[c * g.D] - mx) - ls;
        }
        if (lane == 0) { /* every lane stays in the loop: the next item's shuffles need all 32 */
            double li = 0.0, wi = 0.0;
            if (!(g.has_ignore && l == g.ignore)) {
                if (l < 0 || l >= g.C) {
                    li = nan("");
                } else {
                    wi = w ? w[l] : 1.0;
                    li = -(double)((xi[l * g.D] - mx) - ls) * wi;
                }
            }
            if (g.reduction == 0) {
                y[i] = (float)li;
            } else {
                ws[2 * i] = li;
                ws[2 * i + 1] = wi;
            }
        }
    }
}

/* One block: the total over samples in a fixed tree. */
__global__ void k_loss_total(const double *ws, int64_t M, float *y, int mean) {
    __shared__ double sh[32];
    double sl = 0.0, sw = 0.0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) sl += ws[2 * i], sw += ws[2 * i + 1];
    sl = ot_cu_block_sum(sl, sh);
    sw = ot_cu_block_sum(sw, sh);
    /* no counted label: 0, as on the CPU (cpu_reduce.c) */
    if (threadIdx.x == 0) y[0] = (float)(mean ? (sw != 0.0 ? sl / sw : 0.0) : sl);
}

OT_CUDA_LAUNCHER(ot_cuda_class_loss) {
    bool softmax = node->op == OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS;
    if (in[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "scores", in[0].dtype, err);
    if (in[1].dtype != OT_I64 && in[1].dtype != OT_I32) return ot_cuda_bad_dtype(node, "labels", in[1].dtype, err);
    const float *w = node->n_inputs > 2 && in[2].data ? (const float *)in[2].data : NULL;
    if (w && in[2].dtype != OT_F32) return ot_cuda_bad_dtype(node, "weights", in[2].dtype, err);
    loss_geom g;
    ot_status st = loss_geom_init(&g, node, &in[0].shape, &in[1], err);
    if (st) return st;
    if (w && ot_kernel_numel(&in[2]) != g.C)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): weights must have C=%lld elements", node->name, node->op_type,
                       (long long)g.C);
    if (out[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    if (ot_kernel_numel(&out[0]) != (g.reduction == 0 ? g.M : 1))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): loss output has the wrong size", node->name, node->op_type);
    float *lp = softmax && node->n_outputs > 1 && out[1].data ? (float *)out[1].data : NULL;
    double *ws = g.reduction ? (double *)ctx->workspace : NULL;
    if (g.reduction && (!ws || ctx->workspace_bytes < (size_t)g.M * 2 * sizeof(double)))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): workspace smaller than the backend asked for", node->name,
                       node->op_type);
    if (g.M > 0) {
        k_class_loss<<<ot_cu_warp_blocks(g.M), OT_CU_THREADS, 0, cx->stream>>>(
            (const float *)in[0].data, in[1].data, in[1].dtype == OT_I64, w, (float *)out[0].data, lp, ws, g, softmax);
        OT_CUDA_LAUNCHED();
    }
    if (g.reduction) {
        k_loss_total<<<1, OT_CU_THREADS, 0, cx->stream>>>(ws, g.M, (float *)out[0].data, g.reduction == 2);
        OT_CUDA_LAUNCHED();
    }
    return OT_OK;
}

__global__ void k_loss_denom(const void *lab, int i64, const float *w, int64_t M, int has_ig, int64_t ignore,
                             int64_t C, double *out) {
    __shared__ double sh[32];
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
        int64_t l = load_label(lab, i64, i);
        if ((has_ig && l == ignore) || l < 0 || l >= C) continue;
        s += w ? w[l] : 1.0;
    }
    s = ot_cu_block_sum(s, sh);
    if (threadIdx.x == 0) out[0] = s;
}

__global__ void k_class_loss_grad(const float *dls, const float *xs, const void *lab, int i64, const float *ws,
                                  float *dx, const double *denom, loss_geom g, int softmax) {
    int lane = threadIdx.x & 31;
    OT_CU_WARP_LOOP(i, g.M) {
        int64_t n = i / g.D, d = i % g.D, l = load_label(lab, i64, i);
        const float *xr = xs + n * g.C * g.D + d;
        float *dr = dx + n * g.C * g.D + d;
        bool skip = g.has_ignore && l == g.ignore;
        bool bad = !skip && (l < 0 || l >= g.C);
        double gg = skip || bad ? 0.0 : (ws ? ws[l] : 1.0);
        gg *= g.reduction == 0 ? dls[i] : dls[0];
        if (g.reduction == 2) gg = denom[0] > 0.0 ? gg / denom[0] : 0.0;
        if (bad) gg = nan("");
        if (!softmax) {
            for (int64_t c = lane; c < g.C; c += 32) dr[c * g.D] = (!skip && c == l) ? (float)-gg : 0.0f;
            continue;
        }
        double mx = -INFINITY, s = 0.0;
        for (int64_t c = lane; c < g.C; c += 32) mx = fmax(mx, (double)xr[c * g.D]);
        for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_down_sync(0xffffffffu, mx, o));
        mx = __shfl_sync(0xffffffffu, mx, 0);
        for (int64_t c = lane; c < g.C; c += 32) s += exp(xr[c * g.D] - mx);
        s = ot_cu_warp_sum(s);
        for (int64_t c = lane; c < g.C; c += 32) {
            double p = exp(xr[c * g.D] - mx) / s;
            dr[c * g.D] = (float)(gg * (p - (c == l ? 1.0 : 0.0)));
        }
    }
}

OT_CUDA_LAUNCHER(ot_cuda_class_loss_grad) {
    const ot_tensor *dl = &in[0], *x = &in[1], *lab = &in[2];
    const float *w = node->n_inputs > 3 && in[3].data ? (const float *)in[3].data : NULL;
    if (x->dtype != OT_F32 || dl->dtype != OT_F32) return ot_cuda_bad_dtype(node, "scores", x->dtype, err);
    if (lab->dtype != OT_I64 && lab->dtype != OT_I32) return ot_cuda_bad_dtype(node, "labels", lab->dtype, err);
    if (w && in[3].dtype != OT_F32) return ot_cuda_bad_dtype(node, "weight", in[3].dtype, err);
    loss_geom g;
    ot_status st = loss_geom_init(&g, node, &x->shape, lab, err);
    if (st) return st;
    if (g.reduction == 0 && ot_kernel_numel(dl) != g.M)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): reduction 'none' needs dLoss shaped like labels", node->name,
                       node->op_type);
    double *denom = (double *)ctx->workspace;
    if (!denom || ctx->workspace_bytes < sizeof(double))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): workspace missing", node->name, node->op_type);
    if (g.M == 0) return OT_OK;
    int i64 = lab->dtype == OT_I64;
    k_loss_denom<<<1, OT_CU_THREADS, 0, cx->stream>>>(lab->data, i64, w, g.M, g.has_ignore, g.ignore, g.C, denom);
    OT_CUDA_LAUNCHED();
    k_class_loss_grad<<<ot_cu_warp_blocks(g.M), OT_CU_THREADS, 0, cx->stream>>>(
        (const float *)dl->data, (const float *)x->data, lab->data, i64, w, (float *)out[0].data, denom, g,
        node->op == OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

__global__ void k_mse(const float *x, const float *t, int64_t n, float *y) {
    __shared__ double sh[32];
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        double d = (double)x[i] - t[i];
        s += d * d;
    }
    s = ot_cu_block_sum(s, sh);
    if (threadIdx.x == 0) y[0] = n > 0 ? (float)(s / (double)n) : 0.0f;
}

OT_CUDA_LAUNCHER(ot_cuda_mse_loss) {
    (void)ctx;
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32) return ot_cuda_bad_dtype(node, "input", in[1].dtype, err);
    int64_t n = ot_kernel_numel(&in[0]);
    if (ot_kernel_numel(&in[1]) != n)
        return ot_fail(err, OT_E_DATA, "node '%s' (MseLoss): targets have %lld elements, the output %lld", node->name,
                       (long long)ot_kernel_numel(&in[1]), (long long)n);
    k_mse<<<1, 1024, 0, cx->stream>>>((const float *)in[0].data, (const float *)in[1].data, n, (float *)out[0].data);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

/* dX = 2 dL / n * (x - t), grad_loss.c's rounding (dL read on the device, per
 * element: a kernel never waits for the host); host mode as cuda_internal.h says. */
struct mse_grad_op {
    const float *dl, *x, *t;
    float *dx;
    int64_t n;
    __host__ __device__ void operator()(int64_t i) const {
        float g = 2.0f * dl[0] / (float)n;
        dx[i] = g * (x[i] - t[i]);
    }
};

OT_CUDA_LAUNCHER(ot_cuda_mse_loss_grad) {
    (void)ctx;
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32 || in[2].dtype != OT_F32)
        return ot_cuda_bad_dtype(node, "input", in[1].dtype, err);
    int64_t n = ot_kernel_numel(&in[1]);
    if (ot_kernel_numel(&in[2]) != n || ot_kernel_numel(&out[0]) != n)
        return ot_fail(err, OT_E_DATA, "node '%s' (MseLossGrad): X, target and dX differ in size", node->name);
    return ot_cu_map(cx, mse_grad_op{(const float *)in[0].data, (const float *)in[1].data, (const float *)in[2].data,
                                     (float *)out[0].data, n},
                     n, err);
}

/* ---- BceWithLogitsLoss and L1Loss (grad_loss.c's CPU reference: the same formulas) ---- */

__device__ double ot_cu_bce_term(double x, double y) { return (x > 0 ? x : 0) - x * y + log1p(exp(-fabs(x))); }

__global__ void k_elementwise_loss(const float *x, const float *t, int64_t n, int bce, float *y) {
    __shared__ double sh[32];
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        s += bce ? ot_cu_bce_term(x[i], t[i]) : fabs((double)x[i] - t[i]);
    s = ot_cu_block_sum(s, sh);
    if (threadIdx.x == 0) y[0] = n > 0 ? (float)(s / (double)n) : 0.0f;
}

OT_CUDA_LAUNCHER(ot_cuda_elementwise_loss) {
    (void)ctx;
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32) return ot_cuda_bad_dtype(node, "input", in[1].dtype, err);
    ot_status st = ot_loss_pair_check(node, &in[0], &in[1], NULL, err);
    if (st) return st;
    k_elementwise_loss<<<1, 1024, 0, cx->stream>>>((const float *)in[0].data, (const float *)in[1].data,
                                                   ot_kernel_numel(&in[0]), node->op == OT_OP_BCE_LOGITS_LOSS,
                                                   (float *)out[0].data);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

/* dL read on the device per element, as mse_grad_op. */
struct elementwise_loss_grad_op {
    const float *dl, *x, *t;
    float *dx;
    int64_t n;
    int bce;
    __host__ __device__ void operator()(int64_t i) const {
        float g = dl[0] / (float)n, xi = x[i], ti = t[i];
        if (bce) {
            float e = expf(xi >= 0 ? -xi : xi), s = xi >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
            dx[i] = g * (s - ti);
        } else {
            dx[i] = xi > ti ? g : xi < ti ? -g : 0.0f;
        }
    }
};

OT_CUDA_LAUNCHER(ot_cuda_elementwise_loss_grad) {
    (void)ctx;
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32 || in[2].dtype != OT_F32)
        return ot_cuda_bad_dtype(node, "input", in[1].dtype, err);
    ot_status st = ot_loss_pair_check(node, &in[1], &in[2], &out[0], err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&in[1]);
    return ot_cu_map(cx,
                     elementwise_loss_grad_op{(const float *)in[0].data, (const float *)in[1].data,
                                              (const float *)in[2].data, (float *)out[0].data, n,
                                              node->op == OT_OP_BCE_LOGITS_LOSS_GRAD},
                     n, err);
}
