/* grad_pointwise.c — CPU kernels of the pointwise backward ops: activation
 * derivatives (*Grad), DropoutGrad (mask regenerated with exec/rng.h's rule) and
 * the ZerosLike / OnesLike fills. */
#include <math.h>

#include "kernels/cpu/cpu_vecmath.h" /* ot_cpu_expf_n */
#include "kernels/cpu/cpu_lowp.h"    /* ot_cpu_dropout_select_any */
#include "kernels/cpu/cpu_philox.h" /* ot_cpu_philox_uniforms */
#include "kernels/cpu/grad_kernels.h"
#include "exec/rng.h"

static float gelu_grad(float x, bool tanh_approx) {
    if (tanh_approx) {
        const float k = 0.7978845608028654f, c = 0.044715f; /* sqrt(2/pi) */
        float u = k * (x + c * x * x * x);
        float t = tanhf(u);
        return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * c * x * x);
    }
    float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
    return cdf + x * pdf;
}

/* ClipGrad's bound: the normalised float attribute, else the optional scalar input. */
static float bound(const ot_node *node, const ot_tensor *in, int slot, bool has_attr, float attr, float dflt) {
    if (has_attr) return attr;
    double v;
    if (node->n_inputs > slot && in[slot].data && ot_kernel_numel(&in[slot]) == 1 &&
        ot_kernel_load_double(in[slot].dtype, in[slot].data, 0, &v))
        return (float)v;
    return dflt;
}

/* Four floats and four int masks as one SSE register (GCC and Clang vector extension). */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

/* dx[i] = lo < v[i] < hi ? dy[i] : 0 (a bound of -/+INFINITY never blocks, NaN passes
 * only then), four lanes per step through bit masks (dy's bits, or +0 as the plain
 * select's 0.0f): ReluGrad (lo 0, no hi) and ClipGrad (ReLU6). The plain loop stayed
 * a compare and a branch per element that mispredicted on every kink-side change:
 * ClipGrad was 14% of MobileNetV2's step (issue 14). */
#define PASS_BLOCK 4096
static void pass_inside(const float *dy, const float *v, float *dx, int64_t n, float lo, float hi, int nt, bool par) {
    const int32_t lo_open = lo == -INFINITY ? -1 : 0, hi_open = hi == INFINITY ? -1 : 0;
    const v4f lo4 = {lo, lo, lo, lo}, hi4 = {hi, hi, hi, hi};
    const v4i lo_o4 = {lo_open, lo_open, lo_open, lo_open}, hi_o4 = {hi_open, hi_open, hi_open, hi_open};
    int64_t blocks = (n + PASS_BLOCK - 1) / PASS_BLOCK;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t i = b * PASS_BLOCK, e = n - i < PASS_BLOCK ? n : i + PASS_BLOCK;
        for (; i + 4 <= e; i += 4) {
            v4f vv, g;
            memcpy(&vv, v + i, sizeof vv);
            memcpy(&g, dy + i, sizeof g);
            v4i m = ((v4i)(vv > lo4) | lo_o4) & ((v4i)(vv < hi4) | hi_o4);
            v4f r = (v4f)((v4i)g & m);
            memcpy(dx + i, &r, sizeof r);
        }
        for (; i < e; i++) dx[i] = (v[i] > lo || lo_open) && (v[i] < hi || hi_open) ? dy[i] : 0.0f;
    }
}

OT_GRAD_KERNEL(ot_cpu_act_grad) {
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[1].dtype, err);
    int64_t n = ot_kernel_numel(&out[0]);
    if (ot_kernel_numel(&in[0]) != n || ot_kernel_numel(&in[1]) != n)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): dY, the forward value and dX differ in size", node->name,
                       node->op_type);
    const float *dy = in[0].data, *v = in[1].data;
    float *dx = out[0].data;
    int nt = ot_cpu_threads(ctx);
    /* A compare or a few multiplies per element is memory-bound, as the forward
     * element ops (cpu_elementwise.c): only 128 Ki elements repay waking a thread.
     * ErfGrad's and GeluGrad's expf/erff/tanhf keep the compute-bound grain. */
    bool cheap = node->op != OT_OP_ERF_GRAD && node->op != OT_OP_GELU_GRAD;
    bool par = n >= (cheap ? OT_CPU_PAR_MIN_CHEAP : OT_CPU_PAR_MIN);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_act_params *ap = &pp->u.act; /* LeakyReluGrad, GeluGrad, ClipGrad */
    switch (node->op) {
    case OT_OP_RELU_GRAD: /* v > 0 ? dy : 0 */
        pass_inside(dy, v, dx, n, 0.0f, INFINITY, nt, par);
        break;
    case OT_OP_LEAKY_RELU_GRAD: {
        float a = ap->alpha;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) dx[i] = v[i] >= 0.0f ? dy[i] : a * dy[i];
        break;
    }
    case OT_OP_SIGMOID_GRAD:
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * v[i] * (1.0f - v[i]);
        break;
    case OT_OP_TANH_GRAD:
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (1.0f - v[i] * v[i]);
        break;
    case OT_OP_ERF_GRAD: { /* the exps 256 at a time (cpu_vecmath.h, expf's bits) */
        int64_t blocks = (n + 255) / 256;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t b = 0; b < blocks; b++) {
            int64_t i0 = b * 256, m = n - i0 < 256 ? n - i0 : 256;
            float e[256];
            for (int64_t k = 0; k < m; k++) e[k] = -v[i0 + k] * v[i0 + k];
            ot_cpu_expf_n(e, e, m);
            for (int64_t k = 0; k < m; k++) dx[i0 + k] = dy[i0 + k] * 1.1283791670955126f * e[k];
        }
        break;
    }
    case OT_OP_GELU_GRAD: {
        bool th = ap->approximate == OT_GELU_TANH;
        if (ap->approximate == OT_GELU_OTHER)
            return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (GeluGrad): approximate='%s' is not 'none' or 'tanh'",
                           node->name, ap->approximate_name);
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * gelu_grad(v[i], th);
        break;
    }
    case OT_OP_CLIP_GRAD: {
        /* strictly inside (min, max), as PyTorch's hardtanh / ReLU6 backward: exported
         * CNNs get Clip from nn.ReLU6 / nn.Hardtanh, whose gradient at x == bound is 0
         * (and so is ReluGrad's at 0, which Clip(0, inf) must agree with). An absent
         * (infinite) bound never blocks. */
        float lo = bound(node, in, 2, ap->has_min, ap->min, -INFINITY),
              hi = bound(node, in, 3, ap->has_max, ap->max, INFINITY);
        pass_inside(dy, v, dx, n, lo, hi, nt, par);
        break;
    }
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s is not a pointwise gradient op", node->name,
                       node->op_type);
    }
    return OT_OK;
}

OT_GRAD_KERNEL(ot_cpu_dropout_grad) {
    ot_dtype t = in[0].dtype; /* float32, or bfloat16 / float16 dY and dX (issue 27) */
    if (t != OT_F32 && t != OT_BF16 && t != OT_F16) return ot_cpu_bad_dtype(node, "dY", t, err);
    if (out[0].dtype != t) return ot_cpu_bad_dtype(node, "dX", out[0].dtype, err);
    int64_t n = ot_kernel_numel(&out[0]);
    if (ot_kernel_numel(&in[0]) != n)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (DropoutGrad): dY and dX differ in size", node->name);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    float ratio = pp->u.dropout.ratio;
    const char *dy = in[0].data;
    char *dx = out[0].data;
    size_t es = ot_dtype_size(t);
    /* The attribute names the forward Dropout; ctx->rng_node carries the same id
     * when the executor follows autodiff.h's contract. */
    uint32_t key = (uint32_t)(pp->u.dropout.has_rng_node ? pp->u.dropout.rng_node : ctx->rng_node);
    float scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
    int nt = ot_cpu_threads(ctx);
    /* The mask is redrawn in blocks through ot_cpu_philox_uniforms: the uniforms of
     * ot_dropout_keep, 8 Philox blocks at a time on AVX2 (bench/NOTES.md). */
    int64_t blocks = (n + 255) / 256;
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t i0 = b * 256, len = n - i0 < 256 ? n - i0 : 256;
        float u[256];
        ot_cpu_philox_uniforms(ctx->seed, ctx->step, key, (uint64_t)i0, len, u);
        ot_cpu_dropout_select_any(t, u, ratio, dy + i0 * es, scale, dx + i0 * es, NULL, len);
    }
    return OT_OK;
}

OT_GRAD_KERNEL(ot_cpu_fill_like) {
    int64_t n = ot_kernel_numel(&out[0]);
    if (node->op == OT_OP_ZEROS_LIKE) {
        memset(out[0].data, 0, (size_t)n * ot_dtype_size(out[0].dtype));
        return OT_OK;
    }
    if (out[0].dtype == OT_F32) {
        float *y = out[0].data;
        for (int64_t i = 0; i < n; i++) y[i] = 1.0f;
    } else if (out[0].dtype == OT_F64) {
        double *y = out[0].data;
        for (int64_t i = 0; i < n; i++) y[i] = 1.0;
    } else {
        return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    }
    (void)in;
    (void)ctx;
    return OT_OK;
}
