/* cuda_pointwise_grad.cu — the pointwise backward CUDA kernels, counterparts of
 * kernels/cpu/grad_pointwise.c: the activation gradients, Dropout and DropoutGrad
 * (Philox4x32-10 with exec/rng.h's layout, so masks are bitwise the CPU's, and the
 * gradient redraws the forward mask) and the ZerosLike / OnesLike fills. Each element
 * rule is a __host__ __device__ functor run through ot_cu_map, so these kernels have
 * the host mode of cuda_internal.h, and tests/test_cuda.c compares the host run with
 * the CPU kernels. The activation gradients, Dropout and DropoutGrad also run on
 * bfloat16 / float16 tensors (issue 27; every float tensor of the node in one dtype),
 * templated on the storage type: float32 math, rounded once (cuda_device.cuh). */
#include <math.h>
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/cuda/cuda_philox.cuh"

/* ---- activation gradients ------------------------------------------------------ */

enum { G_RELU, G_LEAKY, G_SIGMOID, G_TANH, G_ERF, G_GELU, G_GELU_TANH, G_CLIP };

template <typename T> struct act_grad_op {
    const T *dy, *v;
    T *dx;
    int op;
    float a, b;
    __host__ __device__ void operator()(int64_t i) const {
        float g = ot_cu_ld(dy[i]), x = ot_cu_ld(v[i]), r;
        switch (op) {
        case G_RELU: r = x > 0.0f ? g : 0.0f; break; /* 0 at x == 0, as the CPU and PyTorch */
        case G_LEAKY: r = x >= 0.0f ? g : a * g; break;
        case G_SIGMOID: r = g * x * (1.0f - x); break;
        case G_TANH: r = g * (1.0f - x * x); break;
        case G_ERF: r = g * 1.1283791670955126f * expf(-x * x); break;
        case G_GELU: {
            float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
            float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
            r = g * (cdf + x * pdf);
            break;
        }
        case G_GELU_TANH: {
            const float k = 0.7978845608028654f, c = 0.044715f;
            float u = k * (x + c * x * x * x);
            float t = tanhf(u);
            r = g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * c * x * x));
            break;
        }
        default:
            /* grad_pointwise.c's rule: strictly inside (min, max), as PyTorch's
             * hardtanh / ReLU6 backward (0 at x == bound, like ReluGrad at 0); an
             * infinite (absent) bound never blocks, so NaN passes only when both are */
            r = (x > a || a == -INFINITY) && (x < b || b == INFINITY) ? g : 0.0f;
            break;
        }
        ot_cu_st(&dx[i], r);
    }
};

/* ClipGrad's bounds as grad_pointwise.c reads them: the float attribute, else a
 * one-element input (inputs 2 and 3: dY and X come first), else no bound. */
static ot_status clip_grad_bound(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, int slot, bool has_attr,
                                 float attr, float *v, ot_error *err) {
    if (has_attr) {
        *v = attr;
        return OT_OK;
    }
    if (node->n_inputs > slot && in[slot].data && ot_kernel_numel(&in[slot]) == 1 && ot_cu_loadable(in[slot].dtype)) {
        double d;
        ot_status st = ot_cuda_read_double(cx, &in[slot], &d, err);
        if (st) return st;
        *v = (float)d;
    }
    return OT_OK;
}

OT_CUDA_LAUNCHER(ot_cuda_act_grad) {
    ot_dtype t = in[0].dtype;
    if (!ot_cu_float_dtype(t)) return ot_cuda_bad_dtype(node, "dY", t, err);
    if (in[1].dtype != t || out[0].dtype != t) return ot_cuda_bad_dtype(node, "mixed dtypes, the forward value", in[1].dtype, err);
    int64_t n = ot_kernel_numel(&out[0]);
    if (ot_kernel_numel(&in[0]) != n || ot_kernel_numel(&in[1]) != n)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): dY, the forward value and dX differ in size", node->name,
                       node->op_type);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_act_params *ap = &pp->u.act; /* LeakyReluGrad, GeluGrad, ClipGrad */
    int op;
    float a = 0.0f, b = 0.0f;
    switch (node->op) {
    case OT_OP_RELU_GRAD: op = G_RELU; break;
    case OT_OP_LEAKY_RELU_GRAD: op = G_LEAKY; a = ap->alpha; break;
    case OT_OP_SIGMOID_GRAD: op = G_SIGMOID; break;
    case OT_OP_TANH_GRAD: op = G_TANH; break;
    case OT_OP_ERF_GRAD: op = G_ERF; break;
    case OT_OP_GELU_GRAD: {
        if (ap->approximate == OT_GELU_TANH) op = G_GELU_TANH;
        else if (ap->approximate == OT_GELU_NONE) op = G_GELU;
        else
            return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (GeluGrad): approximate='%s' is not 'none' or 'tanh'",
                           node->name, ap->approximate_name);
        break;
    }
    case OT_OP_CLIP_GRAD: {
        op = G_CLIP;
        a = -INFINITY;
        b = INFINITY;
        ot_status st = clip_grad_bound(cx, node, in, 2, ap->has_min, ap->min, &a, err);
        if (!st) st = clip_grad_bound(cx, node, in, 3, ap->has_max, ap->max, &b, err);
        if (st) return st;
        break;
    }
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s is not a pointwise gradient op", node->name, node->op_type);
    }
#define ACT_GRAD(T) \
    ot_cu_map(cx, act_grad_op<T>{(const T *)in[0].data, (const T *)in[1].data, (T *)out[0].data, op, a, b}, n, err)
    OT_CU_BY_FLOAT(t, "dY", ACT_GRAD)
#undef ACT_GRAD
}

/* ---- Dropout --------------------------------------------------------------------- */

float ot_cuda_philox_uniform_host(uint64_t seed, uint64_t step, uint32_t node, uint64_t index) {
    return philox_uniform(seed, step, node, index);
}

/* y[i] = x[i] * scale where element i's uniform is >= ratio (exec/rng.h's
 * ot_dropout_keep), else 0; the mask when asked. The index is the element's int64
 * position as uint64: all 64 bits go into the counter, as on the CPU. */
template <typename T> struct dropout_op {
    const T *x;
    T *y;
    uint8_t *mask;
    uint64_t seed, step;
    uint32_t nid;
    float ratio, scale;
    __host__ __device__ void operator()(int64_t i) const {
        bool keep = philox_uniform(seed, step, nid, (uint64_t)i) >= ratio;
        ot_cu_st(&y[i], keep ? ot_cu_ld(x[i]) * scale : 0.0f);
        if (mask) mask[i] = keep;
    }
};

template <typename T> struct fill_op {
    T *p;
    T v;
    __host__ __device__ void operator()(int64_t i) const { p[i] = v; }
};

OT_CUDA_LAUNCHER(ot_cuda_dropout) {
    ot_dtype t = in[0].dtype;
    if (!ot_cu_float_dtype(t)) return ot_cuda_bad_dtype(node, "input", t, err);
    if (out[0].dtype != t) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    int64_t n = ot_kernel_numel(&in[0]);
    if (ot_kernel_numel(&out[0]) != n)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (Dropout): output size differs from input", node->name);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    const ot_dropout_params *dp = &pp->u.dropout;
    float ratio = 0.5f;
    if (dp->has_ratio) {
        ratio = dp->ratio;
    } else if (node->n_inputs > 1 && in[1].data && ot_cu_loadable(in[1].dtype)) {
        double d; /* the CPU ignores a ratio of a dtype it cannot load (0.5 stays) */
        if ((st = ot_cuda_read_double(cx, &in[1], &d, err))) return st;
        ratio = (float)d;
    }
    bool training = false;
    if (dp->has_training_mode) {
        training = dp->training_mode;
    } else if (node->n_inputs > 2 && in[2].data && ot_kernel_is_int_dtype(in[2].dtype)) {
        double d; /* the CPU reads it as an integer (bool included) */
        if ((st = ot_cuda_read_double(cx, &in[2], &d, err))) return st;
        training = d != 0.0;
    }
    if (ratio < 0.0f || ratio > 1.0f)
        return ot_fail(err, OT_E_MODEL, "node '%s' (Dropout): ratio %g outside [0, 1]", node->name, (double)ratio);
    uint8_t *mask = node->n_outputs > 1 && out[1].data ? (uint8_t *)out[1].data : NULL;
    if (mask && out[1].dtype != OT_BOOL) return ot_cuda_bad_dtype(node, "mask", out[1].dtype, err);
    if (n == 0) return OT_OK;
    if (!training || ratio == 0.0f) {
        if ((st = ot_cu_copy(cx, out[0].data, in[0].data, (size_t)n * ot_dtype_size(t), err))) return st;
        return mask ? ot_cu_map(cx, fill_op<uint8_t>{mask, 1}, n, err) : OT_OK;
    }
    float scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
#define DROPOUT(T)                                                                                         \
    ot_cu_map(cx,                                                                                          \
              dropout_op<T>{(const T *)in[0].data, (T *)out[0].data, mask, ctx->seed, ctx->step,           \
                            (uint32_t)ctx->rng_node, ratio, scale},                                        \
              n, err)
    OT_CU_BY_FLOAT(t, "input", DROPOUT)
#undef DROPOUT
}

OT_CUDA_LAUNCHER(ot_cuda_dropout_grad) {
    ot_dtype t = in[0].dtype;
    if (!ot_cu_float_dtype(t)) return ot_cuda_bad_dtype(node, "dY", t, err);
    if (out[0].dtype != t) return ot_cuda_bad_dtype(node, "dX", out[0].dtype, err);
    int64_t n = ot_kernel_numel(&out[0]);
    if (ot_kernel_numel(&in[0]) != n)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (DropoutGrad): dY and dX differ in size", node->name);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    float ratio = pp->u.dropout.ratio;
    uint32_t key = (uint32_t)(pp->u.dropout.has_rng_node ? pp->u.dropout.rng_node : ctx->rng_node);
    float scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
#define DROPOUT_GRAD(T)                                                                                   \
    ot_cu_map(cx, dropout_op<T>{(const T *)in[0].data, (T *)out[0].data, NULL, ctx->seed, ctx->step, key, ratio, scale}, \
              n, err)
    OT_CU_BY_FLOAT(t, "dY", DROPOUT_GRAD)
#undef DROPOUT_GRAD
}

/* ---- fills ------------------------------------------------------------------------ */

OT_CUDA_LAUNCHER(ot_cuda_fill_like) {
    (void)ctx;
    (void)in;
    int64_t n = ot_kernel_numel(&out[0]);
    if (node->op == OT_OP_ZEROS_LIKE) return ot_cu_zero(cx, out[0].data, (size_t)n * ot_dtype_size(out[0].dtype), err);
    if (out[0].dtype == OT_F32) return ot_cu_map(cx, fill_op<float>{(float *)out[0].data, 1.0f}, n, err);
    if (out[0].dtype == OT_F64) return ot_cu_map(cx, fill_op<double>{(double *)out[0].data, 1.0}, n, err);
    return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
}
