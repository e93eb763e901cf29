/* cuda_pointwise_math.cu — CUDA kernels of issue 13's pointwise ops, counterparts of
 * kernels/cpu/cpu_pointwise_math.c: comparisons and logic, IsNaN / IsInf, Abs .. Mish,
 * variadic Min / Max, Mod and the backward ops AbsGrad, HardSigmoidGrad, HardSwishGrad,
 * MishGrad, ModGrad, MaxGrad, MinGrad. Every element rule is a __host__ __device__
 * functor over kernels/pointwise_math.h (the CPU kernels' rules), run through
 * ot_cu_map, so these launchers have the host mode of cuda_internal.h and
 * tests/test_cuda.c compares the host run with the CPU kernels bit for bit. */
#include <math.h>
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/pointwise_math.h"

/* ---- comparisons and logic -------------------------------------------------------- */

enum { C_LT, C_GT, C_LE, C_GE, C_AND, C_OR, C_XOR };

template <typename T> struct compare_op {
    const T *a, *b;
    uint8_t *y;
    ot_cu_bcast bc;
    int op;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        T x = a[off[0]], z = b[off[1]];
        int r;
        switch (op) {
        case C_LT: r = x < z; break;
        case C_GT: r = x > z; break;
        case C_LE: r = x <= z; break;
        case C_GE: r = x >= z; break;
        case C_AND: r = (x != 0) & (z != 0); break;
        case C_OR: r = (x != 0) | (z != 0); break;
        default: r = (x != 0) ^ (z != 0); break;
        }
        y[i] = (uint8_t)r;
    }
};

template <typename T>
static ot_status launch_compare(ot_cuda_ctx *cx, const ot_tensor *in, ot_tensor *out, const ot_cu_bcast &bc, int op,
                                ot_error *err) {
    compare_op<T> f = {(const T *)in[0].data, (const T *)in[1].data, (uint8_t *)out[0].data, bc, op};
    return ot_cu_map(cx, f, ot_kernel_numel(&out[0]), err);
}

OT_CUDA_LAUNCHER(ot_cuda_compare) {
    (void)ctx;
    ot_cu_bcast bc;
    ot_status st = ot_cu_bcast_node(node, in, 2, &out[0], &bc, err);
    if (st) return st;
    if (in[0].dtype != in[1].dtype) return ot_cuda_bad_dtype(node, "mixed input dtypes, input 1", in[1].dtype, err);
    if (out[0].dtype != OT_BOOL) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    int op;
    switch (node->op) {
    case OT_OP_LESS: op = C_LT; break;
    case OT_OP_GREATER: op = C_GT; break;
    case OT_OP_LESS_OR_EQUAL: op = C_LE; break;
    case OT_OP_GREATER_OR_EQUAL: op = C_GE; break;
    case OT_OP_AND: op = C_AND; break;
    case OT_OP_OR: op = C_OR; break;
    case OT_OP_XOR: op = C_XOR; break;
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s routed to the CUDA comparison kernel", node->name,
                       node->op_type);
    }
    if ((op >= C_AND) != (in[0].dtype == OT_BOOL)) return ot_cuda_bad_dtype(node, "input 0", in[0].dtype, err);
    switch (in[0].dtype) {
    case OT_F32: return launch_compare<float>(cx, in, out, bc, op, err);
    case OT_I64: return launch_compare<int64_t>(cx, in, out, bc, op, err);
    case OT_I32: return launch_compare<int32_t>(cx, in, out, bc, op, err);
    case OT_BOOL: return launch_compare<uint8_t>(cx, in, out, bc, op, err);
    default: return ot_cuda_bad_dtype(node, "input 0", in[0].dtype, err);
    }
}

enum { P_NOT, P_NAN, P_INF };

struct predicate_op {
    const void *x;
    uint8_t *y;
    int op, neg, pos, f64;
    __host__ __device__ void operator()(int64_t i) const {
        if (op == P_NOT) {
            y[i] = !((const uint8_t *)x)[i];
            return;
        }
        double v = f64 ? ((const double *)x)[i] : (double)((const float *)x)[i];
        y[i] = op == P_NAN ? v != v : ((pos && v == INFINITY) || (neg && v == -INFINITY));
    }
};

OT_CUDA_LAUNCHER(ot_cuda_predicate) {
    (void)ctx;
    ot_status st = ot_kernel_same_numel(node, &in[0], &out[0], err);
    if (st) return st;
    if (out[0].dtype != OT_BOOL) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    int op = node->op == OT_OP_NOT ? P_NOT : node->op == OT_OP_IS_NAN ? P_NAN : P_INF;
    ot_dtype t = in[0].dtype; /* IsNaN / IsInf: float64 too (PyTorch casts before IsInf) */
    if (op == P_NOT ? t != OT_BOOL : (t != OT_F32 && t != OT_F64)) return ot_cuda_bad_dtype(node, "input 0", t, err);
    int neg = 0, pos = 0;
    if (op == P_INF) {
        ot_op_params scratch;
        const ot_op_params *pp;
        st = ot_node_params(node, &scratch, &pp, err);
        if (st) return st;
        neg = pp->u.math.detect_negative;
        pos = pp->u.math.detect_positive;
    }
    return ot_cu_map(cx, predicate_op{in[0].data, (uint8_t *)out[0].data, op, neg, pos, t == OT_F64}, ot_kernel_numel(&in[0]), err);
}

/* ---- unary maths ------------------------------------------------------------------- */

enum { M_ABS, M_SIN, M_COS, M_HARD_SIGMOID, M_HARD_SWISH, M_SOFTPLUS, M_MISH };

struct math_unary_rule {
    int op;
    float a, b;
    __host__ __device__ float operator()(float v) const {
        float r;
        switch (op) {
        case M_ABS: r = fabsf(v); break;
        case M_SIN: r = sinf(v); break;
        case M_COS: r = cosf(v); break;
        case M_HARD_SIGMOID: r = ot_pm_hard_sigmoid(v, a, b); break;
        case M_HARD_SWISH: r = ot_pm_hard_swish(v); break;
        case M_SOFTPLUS: r = ot_pm_softplus(v); break;
        default: r = ot_pm_mish(v); break;
        }
        return r;
    }
};

/* Abs on integers wraps at the minimum (computed unsigned), as the CPU's. */
template <typename T, typename U> struct abs_int_op {
    const T *x;
    T *y;
    __host__ __device__ void operator()(int64_t i) const { y[i] = x[i] < 0 ? (T)((U)0 - (U)x[i]) : x[i]; }
};

OT_CUDA_LAUNCHER(ot_cuda_math_unary) {
    (void)ctx;
    ot_status st = ot_kernel_same_numel(node, &in[0], &out[0], err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&in[0]);
    ot_dtype t = in[0].dtype;
    if (node->op == OT_OP_ABS && (t == OT_I64 || t == OT_I32)) {
        if (out[0].dtype != t) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
        if (t == OT_I64)
            return ot_cu_map(cx, abs_int_op<int64_t, uint64_t>{(const int64_t *)in[0].data, (int64_t *)out[0].data}, n,
                             err);
        return ot_cu_map(cx, abs_int_op<int32_t, uint32_t>{(const int32_t *)in[0].data, (int32_t *)out[0].data}, n, err);
    }
    if (t != OT_F32) return ot_cuda_bad_dtype(node, "input 0", t, err);
    int op;
    float a = 0.0f, b = 0.0f;
    switch (node->op) {
    case OT_OP_ABS: op = M_ABS; break;
    case OT_OP_SIN: op = M_SIN; break;
    case OT_OP_COS: op = M_COS; break;
    case OT_OP_HARD_SIGMOID: {
        ot_op_params scratch;
        const ot_op_params *pp;
        st = ot_node_params(node, &scratch, &pp, err);
        if (st) return st;
        op = M_HARD_SIGMOID;
        a = pp->u.math.alpha;
        b = pp->u.math.beta;
        break;
    }
    case OT_OP_HARD_SWISH: op = M_HARD_SWISH; break;
    case OT_OP_SOFTPLUS: op = M_SOFTPLUS; break;
    case OT_OP_MISH: op = M_MISH; break;
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s routed to the CUDA pointwise maths kernel", node->name,
                       node->op_type);
    }
    return ot_cu_map_x_y(cx, in, out, math_unary_rule{op, a, b}, n, err);
}

/* ---- Min, Max ------------------------------------------------------------------------ */

/* o = x (first) or o = rule(o, x), broadcast; inputs folded in input order as the CPU. */
template <typename T> struct minmax_step_op {
    const T *x;
    T *o;
    ot_cu_bcast bc;
    int first, is_max;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        T b = x[off[0]];
        if (first) {
            o[i] = b;
            return;
        }
        T a = o[i];
        o[i] = is_max ? (a >= b ? a : b) : (a <= b ? a : b);
    }
};

/* float: NaN propagates (ot_pm_max_f / ot_pm_min_f) */
template <> struct minmax_step_op<float> {
    const float *x;
    float *o;
    ot_cu_bcast bc;
    int first, is_max;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        float b = x[off[0]];
        o[i] = first ? b : is_max ? ot_pm_max_f(o[i], b) : ot_pm_min_f(o[i], b);
    }
};

template <typename T>
static ot_status launch_minmax(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, ot_tensor *out,
                               ot_error *err) {
    int64_t n = ot_kernel_numel(&out[0]);
    if (n == 0) return OT_OK;
    for (int k = 0; k < node->n_inputs; k++) {
        ot_cu_bcast bc;
        ot_status st = ot_cu_bcast_node(node, &in[k], 1, &out[0], &bc, err);
        if (st) return st;
        minmax_step_op<T> f = {(const T *)in[k].data, (T *)out[0].data, bc, k == 0, node->op == OT_OP_MAX};
        st = ot_cu_map(cx, f, n, err);
        if (st) return st;
    }
    return OT_OK;
}

OT_CUDA_LAUNCHER(ot_cuda_minmax) {
    (void)ctx;
    ot_dtype t = in[0].dtype;
    for (int k = 0; k < node->n_inputs; k++)
        if (in[k].dtype != t) return ot_cuda_bad_dtype(node, "mixed input dtypes, input", in[k].dtype, err);
    if (out[0].dtype != t) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    switch (t) {
    case OT_F32: return launch_minmax<float>(cx, node, in, out, err);
    case OT_I64: return launch_minmax<int64_t>(cx, node, in, out, err);
    case OT_I32: return launch_minmax<int32_t>(cx, node, in, out, err);
    default: return ot_cuda_bad_dtype(node, "input 0", t, err);
    }
}

/* ---- Mod --------------------------------------------------------------------------------- */

struct fmod_op {
    const float *a, *b;
    float *y;
    ot_cu_bcast bc;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        y[i] = fmodf(a[off[0]], b[off[1]]);
    }
};

/* Integer Mod; a zero divisor writes 0 and raises *zero (read back by the launcher),
 * as integer Div does in cuda_elementwise.cu. */
template <typename T> struct int_mod_op {
    const T *a, *b;
    T *y;
    ot_cu_bcast bc;
    int fmod;
    int *zero;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        int64_t d = (int64_t)b[off[1]];
        if (d == 0) {
            *zero = 1; /* every writer stores the same value: no atomic needed */
            y[i] = 0;
            return;
        }
        y[i] = (T)ot_pm_mod_i((int64_t)a[off[0]], d, fmod);
    }
};

template <typename T>
static ot_status launch_int_mod(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                const ot_cu_bcast &bc, bool fmod, const ot_kernel_ctx *ctx, ot_error *err) {
    int_mod_op<T> f = {(const T *)in[0].data, (const T *)in[1].data, (T *)out[0].data, bc, fmod, NULL};
    return ot_cu_map_zero_flag(cx, node, ctx, f, ot_kernel_numel(&out[0]), "Mod", "modulo", err);
}

OT_CUDA_LAUNCHER(ot_cuda_mod) {
    ot_cu_bcast bc;
    ot_status st = ot_cu_bcast_node(node, in, 2, &out[0], &bc, err);
    if (st) return st;
    ot_dtype t = in[0].dtype;
    if (in[1].dtype != t) return ot_cuda_bad_dtype(node, "mixed input dtypes, input 1", in[1].dtype, err);
    if (out[0].dtype != t) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    ot_op_params scratch;
    const ot_op_params *pp;
    st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    bool fmod = pp->u.math.fmod;
    if (t == OT_I64) return launch_int_mod<int64_t>(cx, node, in, out, bc, fmod, ctx, err);
    if (t == OT_I32) return launch_int_mod<int32_t>(cx, node, in, out, bc, fmod, ctx, err);
    if (t != OT_F32) return ot_cuda_bad_dtype(node, "input 0", t, err);
    if (!fmod)
        return ot_fail(err, OT_E_MODEL, "node '%s' (Mod): a float32 Mod needs fmod = 1 (the ONNX spec)", node->name);
    return ot_cu_map(cx, fmod_op{(const float *)in[0].data, (const float *)in[1].data, (float *)out[0].data, bc},
                     ot_kernel_numel(&out[0]), err);
}

size_t ot_cuda_mod_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    if (node->n_inputs > 0 && (in[0].dtype == OT_I64 || in[0].dtype == OT_I32)) return sizeof(int64_t);
    return 0;
}

/* ---- backward --------------------------------------------------------------------------- */

enum { G_ABS, G_HARD_SIGMOID, G_HARD_SWISH, G_MISH };

struct math_grad_rule {
    int op;
    float a, b;
    __host__ __device__ float operator()(float g, float v) const {
        float r;
        switch (op) {
        case G_ABS: r = ot_pm_abs_grad(g, v); break;
        case G_HARD_SIGMOID: r = ot_pm_hard_sigmoid_grad(g, v, a, b); break;
        case G_HARD_SWISH: r = ot_pm_hard_swish_grad(g, v); break;
        default: r = ot_pm_mish_grad(g, v); break;
        }
        return r;
    }
};

OT_CUDA_LAUNCHER(ot_cuda_math_grad) {
    (void)ctx;
    int64_t n;
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_kernel_grad_dy_x(node, in, out, ot_cuda_bad_dtype, &n, &scratch, &pp, err);
    if (st) return st;
    int op;
    switch (node->op) {
    case OT_OP_ABS_GRAD: op = G_ABS; break;
    case OT_OP_HARD_SIGMOID_GRAD: op = G_HARD_SIGMOID; break;
    case OT_OP_HARD_SWISH_GRAD: op = G_HARD_SWISH; break;
    case OT_OP_MISH_GRAD: op = G_MISH; break;
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s is not a pointwise maths gradient op", node->name,
                       node->op_type);
    }
    return ot_cu_map_dy_x(cx, in, out, math_grad_rule{op, pp->u.math.alpha, pp->u.math.beta}, n, err);
}

struct mod_grad_op {
    const float *g, *a, *b;
    float *o;
    ot_cu_bcast bc;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        o[i] = ot_pm_mod_grad_b(g[off[0]], a[off[1]], b[off[2]]);
    }
};

OT_CUDA_LAUNCHER(ot_cuda_mod_grad) {
    (void)ctx;
    for (int k = 0; k < 3; k++)
        if (in[k].dtype != OT_F32) return ot_cuda_bad_dtype(node, "input", in[k].dtype, err);
    ot_cu_bcast bc;
    ot_status st = ot_cu_bcast_node(node, in, 3, &out[0], &bc, err);
    if (st) return st;
    mod_grad_op f = {(const float *)in[0].data, (const float *)in[1].data, (const float *)in[2].data,
                     (float *)out[0].data, bc};
    return ot_cu_map(cx, f, ot_kernel_numel(&out[0]), err);
}

/* MaxGrad / MinGrad: each forward input broadcast to dY's shape by its own
 * descriptor (one input each: OT_BCAST_MAX_IN is smaller than the inputs read). */
struct minmax_grad_op {
    const float *g, *y;
    const float *x[OT_MINMAX_GRAD_MAX_IN];
    ot_cu_bcast bx[OT_MINMAX_GRAD_MAX_IN];
    float *o;
    int nx, k, is_max;
    __host__ __device__ void operator()(int64_t i) const {
        int ties = 0;
        float xk = 0.0f;
        for (int j = 0; j < nx; j++) {
            int64_t off[OT_BCAST_MAX_IN];
            ot_cu_bcast_off(bx[j], i, off);
            float v = x[j][off[0]];
            ties += v == y[i];
            if (j == k) xk = v;
        }
        o[i] = ot_pm_minmax_grad(g[i], xk, y[i], ties, is_max);
    }
};

OT_CUDA_LAUNCHER(ot_cuda_minmax_grad) {
    (void)ctx;
    minmax_grad_op f;
    memset(&f, 0, sizeof f);
    int nx;
    int64_t n;
    ot_status st = ot_kernel_minmax_grad_check(node, in, out, ot_cuda_bad_dtype, &nx, &f.k, &n, err);
    if (st) return st;
    for (int j = 0; j < nx; j++) {
        st = ot_cu_bcast_node(node, &in[2 + j], 1, &out[0], &f.bx[j], err);
        if (st) return st;
        f.x[j] = (const float *)in[2 + j].data;
    }
    f.g = (const float *)in[0].data;
    f.y = (const float *)in[1].data;
    f.o = (float *)out[0].data;
    f.nx = nx;
    f.is_max = node->op == OT_OP_MAX_GRAD;
    return ot_cu_map(cx, f, n, err);
}
