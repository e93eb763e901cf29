/* cuda_elementwise.cu — pointwise CUDA kernels, the counterparts of
 * kernels/cpu/cpu_elementwise.c and the Cast / view copies of cpu_shape_ops.c.
 * Broadcasting uses ot_bcast (kernels/kernel_common.h), computed on the host. The
 * activation gradients, Dropout and the fills are in cuda_pointwise_grad.cu, the
 * optimizer steps in cuda_optim.cu.
 *
 * The unary, binary, Equal and Cast kernels are functors run
 * through ot_cu_map, so they also have the host mode of cuda_internal.h (cx NULL): each
 * element rule below is written once, as __host__ __device__ code, after the CPU
 * kernel's rule (same comparisons, same NaN and bound behaviour, same integer
 * wrapping), and tests/test_cuda.c compares the host run with the CPU kernels.
 *
 * Issue 27: the float unary ops, Add / Sub / Mul / Div and Sum also run on bfloat16 and
 * float16 tensors (__nv_bfloat16, __half: every operand and the output of one dtype),
 * the same rules templated on the storage type (cuda_device.cuh's ot_cu_ld / ot_cu_st):
 * float32 math, the float32 kernel's bits on the rounded inputs, rounded once. */
#include <math.h>
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/half_float.h"

static bool is_int_arith(ot_dtype t) { return t == OT_I64 || t == OT_I32 || t == OT_I8 || t == OT_U8; }

/* ---- unary ------------------------------------------------------------------- */

enum { U_SQRT, U_RECIP, U_NEG, U_EXP, U_LOG, U_ERF, U_TANH, U_SIGMOID, U_RELU, U_LEAKY, U_CLIP, U_GELU, U_GELU_TANH };

__host__ __device__ __forceinline__ float sigmoid_f(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

template <typename T> struct unary_fp {
    const T *x;
    T *y;
    int op;
    float a, b;
    __host__ __device__ void operator()(int64_t i) const {
        float v = ot_cu_ld(x[i]), r;
        switch (op) {
        case U_SQRT: r = sqrtf(v); break;
        case U_RECIP: r = 1.0f / v; break;
        case U_NEG: r = -v; break;
        case U_EXP: r = expf(v); break;
        case U_LOG: r = logf(v); break;
        case U_ERF: r = erff(v); break;
        case U_TANH: r = tanhf(v); break;
        case U_SIGMOID: r = sigmoid_f(v); break;
        case U_RELU: r = v > 0.0f ? v : 0.0f; break; /* NaN and -0 give +0, as the CPU's */
        case U_LEAKY: r = v >= 0.0f ? v : a * v; break;
        case U_CLIP: v = v < a ? a : v; r = v > b ? b : v; break; /* NaN fails both: passes through */
        case U_GELU: r = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); break;
        default: {
            const float k = 0.79788456080286536f;
            r = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
        }
        }
        ot_cu_st(&y[i], r);
    }
};

/* Neg on integers wraps (computed unsigned, so INT_MIN has no undefined behaviour). */
template <typename T, typename U> struct neg_int {
    const T *x;
    T *y;
    __host__ __device__ void operator()(int64_t i) const { y[i] = (T)(U)((U)0 - (U)x[i]); }
};

/* Clip on integers, cpu_elementwise.c's int_clip: in int64, then narrowed. */
template <typename T> struct clip_int {
    const T *x;
    T *y;
    int64_t lo, hi;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t v = (int64_t)x[i];
        v = v < lo ? lo : v > hi ? hi : v;
        y[i] = (T)v;
    }
};

/* Clip bound: the normalised float attribute, else the optional scalar input. */
static ot_status clip_bound(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, int slot, bool has_attr,
                            float attr, float *v, ot_error *err) {
    if (has_attr) {
        *v = attr;
        return OT_OK;
    }
    if (node->n_inputs > slot && in[slot].data && ot_kernel_numel(&in[slot]) >= 1 && ot_cu_loadable(in[slot].dtype)) {
        double d;
        ot_status st = ot_cuda_read_double(cx, &in[slot], &d, err);
        if (st) return st;
        *v = (float)d;
    }
    return OT_OK;
}

/* Integer Clip bounds in the CPU's order: the input when given (exact, first
 * element, when it is an integer tensor), else the float attribute rounded inward. */
static ot_status clip_int_bound(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, int slot, bool has_attr,
                                float attr, bool upper, int64_t *v, ot_error *err) {
    if (node->n_inputs > slot && in[slot].data && ot_kernel_numel(&in[slot]) > 0) {
        if (!ot_kernel_is_int_dtype(in[slot].dtype)) return OT_OK; /* the CPU's load fails: no bound */
        int n = 0;
        int64_t first[1];
        ot_tensor one = in[slot];
        one.shape = ot_shape_make(0, NULL); /* read the first element only */
        ot_status st = ot_cuda_read_ints(cx, &one, first, 1, &n, err);
        if (st) return st;
        *v = first[0];
    } else if (has_attr && isfinite(attr)) {
        *v = upper ? (int64_t)floor(attr) : (int64_t)ceil(attr);
    }
    return OT_OK;
}

template <typename T>
static ot_status launch_clip_int(ot_cuda_ctx *cx, const ot_node *node, const ot_act_params *ap, const ot_tensor *in,
                                 ot_tensor *out, int64_t n, ot_error *err) {
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    ot_status st = clip_int_bound(cx, node, in, 1, ap->has_min, ap->min, false, &lo, err);
    if (!st) st = clip_int_bound(cx, node, in, 2, ap->has_max, ap->max, true, &hi, err);
    if (st) return st;
    return ot_cu_map(cx, clip_int<T>{(const T *)in[0].data, (T *)out[0].data, lo, hi}, n, err);
}

OT_CUDA_LAUNCHER(ot_cuda_unary) {
    int64_t n = ot_kernel_numel(&in[0]);
    if (ot_kernel_numel(&out[0]) != n)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output has %lld elements, input %lld", node->name,
                       node->op_type, (long long)ot_kernel_numel(&out[0]), (long long)n);
    ot_dtype t = in[0].dtype;
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_act_params *ap = &pp->u.act; /* LeakyRelu, Clip, Gelu */
    if (node->op == OT_OP_NEG && t == OT_I64)
        return ot_cu_map(cx, neg_int<int64_t, uint64_t>{(const int64_t *)in[0].data, (int64_t *)out[0].data}, n, err);
    if (node->op == OT_OP_NEG && t == OT_I32)
        return ot_cu_map(cx, neg_int<int32_t, uint32_t>{(const int32_t *)in[0].data, (int32_t *)out[0].data}, n, err);
    if (node->op == OT_OP_CLIP && is_int_arith(t)) {
        if (out[0].dtype != t) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
        switch (t) {
        case OT_I64: return launch_clip_int<int64_t>(cx, node, ap, in, out, n, err);
        case OT_I32: return launch_clip_int<int32_t>(cx, node, ap, in, out, n, err);
        case OT_I8: return launch_clip_int<int8_t>(cx, node, ap, in, out, n, err);
        default: return launch_clip_int<uint8_t>(cx, node, ap, in, out, n, err);
        }
    }
    if (!ot_cu_float_dtype(t)) return ot_cuda_bad_dtype(node, "input 0", t, err);
    if (out[0].dtype != t) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    int op;
    float a = 0.0f, b = 0.0f;
    switch (node->op) {
    case OT_OP_SQRT: op = U_SQRT; break;
    case OT_OP_RECIPROCAL: op = U_RECIP; break;
    case OT_OP_NEG: op = U_NEG; break;
    case OT_OP_EXP: op = U_EXP; break;
    case OT_OP_LOG: op = U_LOG; break;
    case OT_OP_ERF: op = U_ERF; break;
    case OT_OP_TANH: op = U_TANH; break;
    case OT_OP_SIGMOID: op = U_SIGMOID; break;
    case OT_OP_RELU: op = U_RELU; break;
    case OT_OP_LEAKY_RELU: op = U_LEAKY; a = ap->alpha; break;
    case OT_OP_CLIP: {
        op = U_CLIP;
        a = -INFINITY;
        b = INFINITY;
        ot_status st = clip_bound(cx, node, in, 1, ap->has_min, ap->min, &a, err);
        if (!st) st = clip_bound(cx, node, in, 2, ap->has_max, ap->max, &b, err);
        if (st) return st;
        break;
    }
    case OT_OP_GELU: {
        if (ap->approximate == OT_GELU_TANH) op = U_GELU_TANH;
        else if (ap->approximate == OT_GELU_NONE) op = U_GELU;
        else
            return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (Gelu): approximate='%s' is not 'none' or 'tanh'",
                           node->name, ap->approximate_name);
        break;
    }
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s routed to the CUDA unary kernel", node->name, node->op_type);
    }
#define UNARY(T) ot_cu_map(cx, unary_fp<T>{(const T *)in[0].data, (T *)out[0].data, op, a, b}, n, err)
    OT_CU_BY_FLOAT(t, "input 0", UNARY)
#undef UNARY
}

/* ---- binary ------------------------------------------------------------------ */

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_EQ };

/* Add, Sub, Mul, float Div, float Pow and Equal; integers are computed in the
 * unsigned type U, so they wrap like the CPU kernel without undefined behaviour. */
template <typename TA, typename TB, typename TY, typename U> struct binary_op {
    const TA *a;
    const TB *b;
    TY *y;
    ot_cu_bcast bc;
    int op;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        TA x = a[off[0]];
        TB z = b[off[1]];
        TY r;
        switch (op) {
        case B_ADD: r = (TY)((U)x + (U)z); break;
        case B_SUB: r = (TY)((U)x - (U)z); break;
        case B_MUL: r = (TY)((U)x * (U)z); break;
        case B_DIV: r = (TY)((U)x / (U)z); break; /* floats only: integers use int_div_op */
        case B_EQ: r = (TY)(x == z); break;
        default: r = (TY)(z == (TB)2 ? (float)x * (float)x : powf((float)x, (float)z)); break;
        }
        y[i] = r;
    }
};

/* Add, Sub, Mul, Div on bfloat16 / float16 (T): float32 math as binary_op<float>, one
 * rounding of the float32 result. */
template <typename T> struct binary_low_op {
    const T *a, *b;
    T *y;
    ot_cu_bcast bc;
    int op;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        float x = ot_cu_ld(a[off[0]]), z = ot_cu_ld(b[off[1]]), r;
        switch (op) {
        case B_ADD: r = x + z; break;
        case B_SUB: r = x - z; break;
        case B_MUL: r = x * z; break;
        default: r = x / z; break;
        }
        ot_cu_st(&y[i], r);
    }
};

/* Integer Div as cpu_elementwise.c's int_div: truncation toward zero in int64,
 * INT64_MIN / -1 wraps, the quotient narrowed to T. A zero divisor cannot be reported
 * from inside a kernel: it writes 0 and raises *zero, which the launcher reads back. */
template <typename T> struct int_div_op {
    const T *a, *b;
    T *y;
    ot_cu_bcast bc;
    int *zero;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        int64_t x = (int64_t)a[off[0]], d = (int64_t)b[off[1]];
        if (d == 0) {
            *zero = 1; /* every writer stores the same value: no atomic needed */
            y[i] = 0;
            return;
        }
        int64_t q = d == -1 ? (int64_t)(0 - (uint64_t)x) : x / d;
        y[i] = (T)q;
    }
};

/* Pow with an integer base, cpu_elementwise.c's int_pow: the result keeps the base's
 * dtype; integer exponents by exact repeated squaring (wrapping), negative ones give
 * 0 except for bases 1 and -1; float exponents through double pow. */
template <typename T, typename TE> struct int_pow_op {
    const T *a;
    const TE *b;
    T *y;
    ot_cu_bcast bc;
    int float_exp;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        int64_t x = (int64_t)a[off[0]], v;
        if (float_exp) {
            v = (int64_t)pow((double)x, (double)b[off[1]]);
        } else {
            int64_t e = (int64_t)b[off[1]];
            if (e < 0) {
                v = x == 1 ? 1 : x == -1 ? ((e & 1) ? -1 : 1) : 0;
            } else {
                uint64_t base = (uint64_t)x, res = 1;
                for (; e > 0; e >>= 1, base *= base)
                    if (e & 1) res *= base;
                v = (int64_t)res;
            }
        }
        y[i] = (T)v;
    }
};

template <typename TA, typename TB, typename TY, typename U>
static ot_status launch_binary(ot_cuda_ctx *cx, const ot_tensor *in, ot_tensor *out, const ot_cu_bcast &bc, int op,
                               ot_error *err) {
    binary_op<TA, TB, TY, U> f = {(const TA *)in[0].data, (const TB *)in[1].data, (TY *)out[0].data, bc, op};
    return ot_cu_map(cx, f, ot_kernel_numel(&out[0]), err);
}

/* A zero divisor is reported through the workspace flag of ot_cu_map_zero_flag. */
template <typename T>
static ot_status launch_int_div(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                const ot_cu_bcast &bc, const ot_kernel_ctx *ctx, ot_error *err) {
    int_div_op<T> f = {(const T *)in[0].data, (const T *)in[1].data, (T *)out[0].data, bc, NULL};
    return ot_cu_map_zero_flag(cx, node, ctx, f, ot_kernel_numel(&out[0]), "Div", "division", err);
}

template <typename T, typename TE>
static ot_status launch_int_pow(ot_cuda_ctx *cx, const ot_tensor *in, ot_tensor *out, const ot_cu_bcast &bc,
                                ot_error *err) {
    int_pow_op<T, TE> f = {(const T *)in[0].data, (const TE *)in[1].data, (T *)out[0].data, bc,
                           in[1].dtype == OT_F32};
    return ot_cu_map(cx, f, ot_kernel_numel(&out[0]), err);
}

template <typename T>
static ot_status launch_int_pow_base(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                     const ot_cu_bcast &bc, ot_error *err) {
    switch (in[1].dtype) {
    case OT_F32: return launch_int_pow<T, float>(cx, in, out, bc, err);
    case OT_I64: return launch_int_pow<T, int64_t>(cx, in, out, bc, err);
    case OT_I32: return launch_int_pow<T, int32_t>(cx, in, out, bc, err);
    default: return ot_cuda_bad_dtype(node, "input 1", in[1].dtype, err);
    }
}

OT_CUDA_LAUNCHER(ot_cuda_binary) {
    ot_cu_bcast bc;
    ot_status st = ot_cu_bcast_node(node, in, 2, &out[0], &bc, err);
    if (st) return st;
    ot_dtype ta = in[0].dtype, tb = in[1].dtype;
    int op = node->op == OT_OP_ADD ? B_ADD : node->op == OT_OP_SUB ? B_SUB : node->op == OT_OP_MUL ? B_MUL
             : node->op == OT_OP_DIV ? B_DIV : B_POW;
    if (op == B_POW) {
        if ((ta == OT_I64 || ta == OT_I32) && out[0].dtype != ta) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
        if (ta == OT_I64) return launch_int_pow_base<int64_t>(cx, node, in, out, bc, err);
        if (ta == OT_I32) return launch_int_pow_base<int32_t>(cx, node, in, out, bc, err);
        if (ta != OT_F32) return ot_cuda_bad_dtype(node, "input 0", ta, err);
        if (tb == OT_F32) return launch_binary<float, float, float, float>(cx, in, out, bc, op, err);
        if (tb == OT_I64) return launch_binary<float, int64_t, float, float>(cx, in, out, bc, op, err);
        if (tb == OT_I32) return launch_binary<float, int32_t, float, float>(cx, in, out, bc, op, err);
        return ot_cuda_bad_dtype(node, "input 1", tb, err);
    }
    if (ta != tb) return ot_cuda_bad_dtype(node, "mixed input dtypes, input 1", tb, err);
    if (ta == OT_F32) return launch_binary<float, float, float, float>(cx, in, out, bc, op, err);
    if (ot_cu_low_dtype(ta)) {
        if (out[0].dtype != ta) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
        int64_t n = ot_kernel_numel(&out[0]);
        if (ta == OT_BF16)
            return ot_cu_map(cx, binary_low_op<__nv_bfloat16>{(const __nv_bfloat16 *)in[0].data,
                                                              (const __nv_bfloat16 *)in[1].data,
                                                              (__nv_bfloat16 *)out[0].data, bc, op},
                             n, err);
        return ot_cu_map(cx, binary_low_op<__half>{(const __half *)in[0].data, (const __half *)in[1].data,
                                                   (__half *)out[0].data, bc, op},
                         n, err);
    }
    if (op == B_DIV) {
        switch (ta) {
        case OT_I64: return launch_int_div<int64_t>(cx, node, in, out, bc, ctx, err);
        case OT_I32: return launch_int_div<int32_t>(cx, node, in, out, bc, ctx, err);
        case OT_I8: return launch_int_div<int8_t>(cx, node, in, out, bc, ctx, err);
        case OT_U8: return launch_int_div<uint8_t>(cx, node, in, out, bc, ctx, err);
        default: return ot_cuda_bad_dtype(node, "input 0", ta, err);
        }
    }
    /* integers wrap like the CPU kernel: computed unsigned */
    switch (ta) {
    case OT_I64: return launch_binary<int64_t, int64_t, int64_t, uint64_t>(cx, in, out, bc, op, err);
    case OT_I32: return launch_binary<int32_t, int32_t, int32_t, uint32_t>(cx, in, out, bc, op, err);
    case OT_I8: return launch_binary<int8_t, int8_t, int8_t, uint32_t>(cx, in, out, bc, op, err);
    case OT_U8: return launch_binary<uint8_t, uint8_t, uint8_t, uint32_t>(cx, in, out, bc, op, err);
    default: return ot_cuda_bad_dtype(node, "input 0", ta, err);
    }
}

size_t ot_cuda_pointwise_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    if (node->op == OT_OP_DIV && node->n_inputs > 0 && is_int_arith(in[0].dtype)) return sizeof(int64_t);
    return 0;
}

OT_CUDA_LAUNCHER(ot_cuda_equal) {
    ot_cu_bcast bc;
    ot_status st = ot_cu_bcast_node(node, in, 2, &out[0], &bc, err);
    if (st) return st;
    if (in[0].dtype != in[1].dtype) return ot_cuda_bad_dtype(node, "mixed input dtypes, input 1", in[1].dtype, err);
    switch (in[0].dtype) {
    case OT_F32: return launch_binary<float, float, uint8_t, float>(cx, in, out, bc, B_EQ, err);
    case OT_I64: return launch_binary<int64_t, int64_t, uint8_t, int64_t>(cx, in, out, bc, B_EQ, err);
    case OT_I32: return launch_binary<int32_t, int32_t, uint8_t, int32_t>(cx, in, out, bc, B_EQ, err);
    case OT_BOOL:
    case OT_U8: return launch_binary<uint8_t, uint8_t, uint8_t, uint32_t>(cx, in, out, bc, B_EQ, err);
    case OT_I8: return launch_binary<int8_t, int8_t, uint8_t, int32_t>(cx, in, out, bc, B_EQ, err);
    default: return ot_cuda_bad_dtype(node, "input 0", in[0].dtype, err);
    }
}

/* ---- Where, Expand, Sum ------------------------------------------------------ */

template <typename T> struct where_op {
    const uint8_t *c;
    const T *x, *y;
    T *o;
    ot_cu_bcast bc;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        o[i] = c[off[0]] ? x[off[1]] : y[off[2]];
    }
};

template <typename T> struct bcast_copy_op {
    const T *x;
    T *o;
    ot_cu_bcast bc;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        o[i] = x[off[0]];
    }
};

/* Moves elements by size class so every bit pattern survives. */
#define BY_ELEM_SIZE(es, MACRO)                                    \
    switch (es) {                                                  \
    case 1: return MACRO(uint8_t);                                 \
    case 2: return MACRO(uint16_t);                                \
    case 4: return MACRO(uint32_t);                                \
    case 8: return MACRO(uint64_t);                                \
    default: return ot_cuda_bad_dtype(node, "data", in[0].dtype, err);     \
    }

OT_CUDA_LAUNCHER(ot_cuda_where) {
    (void)ctx;
    if (in[0].dtype != OT_BOOL) return ot_cuda_bad_dtype(node, "condition", in[0].dtype, err);
    if (in[1].dtype != in[2].dtype || in[1].dtype != out[0].dtype)
        return ot_cuda_bad_dtype(node, "mixed X/Y dtypes, Y", in[2].dtype, err);
    ot_cu_bcast bc;
    ot_status st = ot_cu_bcast_node(node, in, 3, &out[0], &bc, err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&out[0]);
    size_t es = ot_dtype_size(in[1].dtype);
#define WHERE(T)                                                                                                    \
    ot_cu_map(cx, where_op<T>{(const uint8_t *)in[0].data, (const T *)in[1].data, (const T *)in[2].data,            \
                              (T *)out[0].data, bc},                                                                \
              n, err)
    BY_ELEM_SIZE(es, WHERE)
#undef WHERE
}

OT_CUDA_LAUNCHER(ot_cuda_expand) {
    (void)ctx;
    if (in[0].dtype != out[0].dtype) return ot_cuda_bad_dtype(node, "input 0", in[0].dtype, err);
    ot_cu_bcast bc;
    ot_status st = ot_cu_bcast_node(node, in, 1, &out[0], &bc, err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&out[0]);
    size_t es = ot_dtype_size(in[0].dtype);
#define EXPAND(T) ot_cu_map(cx, bcast_copy_op<T>{(const T *)in[0].data, (T *)out[0].data, bc}, n, err)
    BY_ELEM_SIZE(es, EXPAND)
#undef EXPAND
}

/* ExpandLike (dY, like) -> dY broadcast to like's shape: the same copy. */
OT_CUDA_LAUNCHER(ot_cuda_expand_like) {
    (void)ctx;
    if (in[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "dY", in[0].dtype, err);
    ot_cu_bcast bc;
    ot_status st = ot_cu_bcast_node(node, in, 1, &out[0], &bc, err);
    if (st) return st;
    return ot_cu_map(cx, bcast_copy_op<uint32_t>{(const uint32_t *)in[0].data, (uint32_t *)out[0].data, bc},
                     ot_kernel_numel(&out[0]), err);
}

struct scaled_bcast_op {
    const float *c;
    float *y;
    ot_cu_bcast bc;
    float beta;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        y[i] = beta * c[off[0]];
    }
};

/* the same with C and Y each float32, float16 or bfloat16 (issue 27: a low-precision
 * Gemm's bias; Y holds beta C rounded, as on the CPU) */
struct scaled_bcast_lp_op {
    const void *c;
    void *y;
    ot_cu_bcast bc;
    float beta;
    ot_dtype ct, yt;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        float v = ct == OT_BF16  ? ot_hf_bf16_to_f32(((const uint16_t *)c)[off[0]])
                  : ct == OT_F16 ? ot_hf_f16_to_f32(((const uint16_t *)c)[off[0]])
                                 : ((const float *)c)[off[0]];
        v = beta * v;
        if (yt == OT_BF16) ((uint16_t *)y)[i] = ot_hf_f32_to_bf16(v);
        else if (yt == OT_F16) ((uint16_t *)y)[i] = ot_hf_f32_to_f16(v);
        else ((float *)y)[i] = v;
    }
};

ot_status ot_cuda_broadcast_scaled(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *c, ot_tensor *out, float beta,
                                   ot_error *err) {
    ot_cu_bcast bc;
    ot_status st = ot_cu_bcast_node(node, c, 1, out, &bc, err);
    if (st) return st;
    if (c->dtype != OT_F32 || out->dtype != OT_F32)
        return ot_cu_map(cx, scaled_bcast_lp_op{c->data, out->data, bc, beta, c->dtype, out->dtype},
                         ot_kernel_numel(out), err);
    return ot_cu_map(cx, scaled_bcast_op{(const float *)c->data, (float *)out->data, bc, beta}, ot_kernel_numel(out), err);
}

/* o = x (first) or o += x, broadcast; inputs added one at a time, in input order,
 * like the CPU kernel, so the rounding is the same. */
struct sum_step_op {
    const float *x;
    float *o;
    ot_cu_bcast bc;
    int first;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        o[i] = first ? x[off[0]] : o[i] + x[off[0]];
    }
};

/* Sum of up to OT_CUDA_SUM_LOW_MAX bfloat16 / float16 inputs of the output's shape (a
 * gradient sum): added in input order in float32, as the float32 kernel does on the
 * rounded inputs, and rounded once. */
template <typename T> struct sum_low_op {
    const T *x[OT_CUDA_SUM_LOW_MAX];
    int n_in;
    T *o;
    __host__ __device__ void operator()(int64_t i) const {
        float acc = ot_cu_ld(x[0][i]);
        for (int k = 1; k < n_in; k++) acc = acc + ot_cu_ld(x[k][i]);
        ot_cu_st(&o[i], acc);
    }
};

template <typename T>
static ot_status launch_sum_low(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                ot_error *err) {
    sum_low_op<T> f;
    memset(&f, 0, sizeof f);
    int64_t n = ot_kernel_numel(&out[0]);
    if (node->n_inputs < 1 || node->n_inputs > OT_CUDA_SUM_LOW_MAX)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (Sum): %d low-precision inputs (the CUDA kernel takes 1 to %d)",
                       node->name, node->n_inputs, OT_CUDA_SUM_LOW_MAX);
    for (int k = 0; k < node->n_inputs; k++) {
        if (in[k].dtype != out[0].dtype) return ot_cuda_bad_dtype(node, "mixed input dtypes, an input", in[k].dtype, err);
        if (ot_kernel_numel(&in[k]) != n)
            return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (Sum): a low-precision input broadcasts", node->name);
        f.x[k] = (const T *)in[k].data;
    }
    f.n_in = node->n_inputs;
    f.o = (T *)out[0].data;
    return ot_cu_map(cx, f, n, err);
}

OT_CUDA_LAUNCHER(ot_cuda_sum) {
    (void)ctx;
    if (out[0].dtype == OT_BF16) return launch_sum_low<__nv_bfloat16>(cx, node, in, out, err);
    if (out[0].dtype == OT_F16) return launch_sum_low<__half>(cx, node, in, out, err);
    for (int k = 0; k < node->n_inputs; k++)
        if (in[k].dtype != OT_F32) return ot_cuda_bad_dtype(node, "input", in[k].dtype, err);
    int64_t n = ot_kernel_numel(&out[0]);
    if (n == 0) return OT_OK;
    for (int k = 0; k < node->n_inputs; k++) {
        ot_cu_bcast bc;
        ot_status st = ot_cu_bcast_node(node, &in[k], 1, &out[0], &bc, err);
        if (st) return st;
        if (k == 0 && in[0].data == out[0].data) continue;
        st = ot_cu_map(cx, sum_step_op{(const float *)in[k].data, (float *)out[0].data, bc, k == 0}, n, err);
        if (st) return st;
    }
    return OT_OK;
}

/* ---- views ------------------------------------------------------------------- */

OT_CUDA_LAUNCHER(ot_cuda_copy_view) {
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || in[0].dtype != out[0].dtype) return ot_cuda_bad_dtype(node, "input 0", in[0].dtype, err);
    int64_t n = ot_kernel_numel(&in[0]);
    if (n != ot_kernel_numel(&out[0]))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output element count differs from the input's", node->name,
                       node->op_type);
    return ot_cu_copy(cx, out[0].data, in[0].data, (size_t)n * es, err);
}

/* ---- Cast ---------------------------------------------------------------------- */

/* float16 / bfloat16 conversions: kernels/half_float.h, the CPU backend's too. */
/* Cast through double (floats) or int64 (integers), as cpu_shape_ops.c does:
 * float -> int truncates toward zero, NaN gives 0, out of range saturates; anything
 * -> float16 / bfloat16 goes through float first. */
__host__ __device__ __forceinline__ bool is_float_t(int t) {
    return t == OT_F32 || t == OT_F64 || t == OT_F16 || t == OT_BF16;
}
__host__ __device__ __forceinline__ double load_d(int t, const void *p, int64_t i) {
    switch (t) {
    case OT_F32: return ((const float *)p)[i];
    case OT_F64: return ((const double *)p)[i];
    case OT_F16: return ot_hf_f16_to_f32(((const uint16_t *)p)[i]);
    default: return ot_hf_bf16_to_f32(((const uint16_t *)p)[i]);
    }
}
__host__ __device__ __forceinline__ int64_t load_i(int t, const void *p, int64_t i) {
    switch (t) {
    case OT_I64: return ((const int64_t *)p)[i];
    case OT_I32: return ((const int32_t *)p)[i];
    case OT_I8: return ((const int8_t *)p)[i];
    case OT_U8: return ((const uint8_t *)p)[i];
    default: return ((const uint8_t *)p)[i] != 0;
    }
}
__host__ __device__ __forceinline__ void store_i(int t, void *p, int64_t i, int64_t v) {
    switch (t) {
    case OT_F32: ((float *)p)[i] = (float)v; break;
    case OT_F64: ((double *)p)[i] = (double)v; break;
    case OT_F16: ((uint16_t *)p)[i] = ot_hf_f32_to_f16((float)v); break;
    case OT_BF16: ((uint16_t *)p)[i] = ot_hf_f32_to_bf16((float)v); break;
    case OT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case OT_I64: ((int64_t *)p)[i] = v; break;
    case OT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case OT_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    default: ((uint8_t *)p)[i] = (uint8_t)v; break;
    }
}
__host__ __device__ __forceinline__ void store_d(int t, void *p, int64_t i, double v) {
    switch (t) {
    case OT_F32: ((float *)p)[i] = (float)v; break;
    case OT_F64: ((double *)p)[i] = v; break;
    case OT_F16: ((uint16_t *)p)[i] = ot_hf_f32_to_f16((float)v); break;
    case OT_BF16: ((uint16_t *)p)[i] = ot_hf_f32_to_bf16((float)v); break;
    case OT_BOOL: ((uint8_t *)p)[i] = v != 0.0; break;
    default: {
        int64_t iv = isnan(v) ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX
                                 : v <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)v;
        store_i(t, p, i, iv);
    }
    }
}

struct cast_op {
    int ts, td;
    const void *x;
    void *y;
    __host__ __device__ void operator()(int64_t i) const {
        if (is_float_t(ts)) store_d(td, y, i, load_d(ts, x, i));
        else store_i(td, y, i, load_i(ts, x, i));
    }
};

static bool cast_ok(ot_dtype t) {
    return t == OT_F32 || t == OT_F64 || t == OT_F16 || t == OT_BF16 || t == OT_I64 || t == OT_I32 || t == OT_I8 ||
           t == OT_U8 || t == OT_BOOL;
}

OT_CUDA_LAUNCHER(ot_cuda_cast) {
    ot_dtype ts = in[0].dtype, td = out[0].dtype;
    if (!cast_ok(ts)) return ot_cuda_bad_dtype(node, "input", ts, err);
    if (!cast_ok(td)) return ot_cuda_bad_dtype(node, "output", td, err);
    int64_t n = ot_kernel_numel(&in[0]);
    if (n != ot_kernel_numel(&out[0]))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (Cast): output element count differs", node->name);
    if (n == 0) return OT_OK;
    if (ts == td) return ot_cu_copy(cx, out[0].data, in[0].data, (size_t)n * ot_dtype_size(ts), err);
    return ot_cu_map(cx, cast_op{(int)ts, (int)td, in[0].data, out[0].data}, n, err);
}
