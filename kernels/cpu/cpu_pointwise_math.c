/* cpu_pointwise_math.c — CPU kernels of issue 13's pointwise ops: the comparisons
 * (Less, Greater, LessOrEqual, GreaterOrEqual) and logic (Not, And, Or, Xor), IsNaN and
 * IsInf, the unary maths (Abs, Sin, Cos, HardSigmoid, HardSwish, Softplus, Mish), the
 * variadic Min / Max, Mod, and their backward ops (AbsGrad, HardSigmoidGrad,
 * HardSwishGrad, MishGrad, ModGrad, MaxGrad, MinGrad). The element rules live in
 * kernels/pointwise_math.h, shared with the CUDA backend. Broadcasting goes through
 * ot_bcast; each output element is computed independently, so the thread count never
 * changes a result. */
#include <math.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/grad_kernels.h"
#include "kernels/pointwise_math.h"

/* Runs EXPR(a, b) into Y over a broadcast pair; rows in parallel. */
#define PAIR_LOOP(TA, TB, TY, EXPR)                                                                        \
    do {                                                                                                   \
        const TA *pa = in[0].data;                                                                         \
        const TB *pb = in[1].data;                                                                         \
        TY *py = out[0].data;                                                                              \
        int64_t sa = bc.stride[0][bc.rank - 1], sb = bc.stride[1][bc.rank - 1];                            \
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (par)") for (int64_t r = 0;          \
                                                                                   r < bc.rows; r++) {     \
            int64_t off[OT_BCAST_MAX_IN];                                                                  \
            ot_bcast_row(&bc, r, off);                                                                     \
            for (int64_t i = 0; i < bc.inner; i++) {                                                       \
                TA a = pa[off[0] + i * sa];                                                                \
                TB b = pb[off[1] + i * sb];                                                                \
                py[r * bc.inner + i] = (TY)(EXPR);                                                         \
            }                                                                                              \
        }                                                                                                  \
    } while (0)

/* ---- comparisons and logic -------------------------------------------------------- */

#define COMPARE(T)                                                                    \
    switch (node->op) {                                                               \
    case OT_OP_LESS: PAIR_LOOP(T, T, uint8_t, a < b); break;                          \
    case OT_OP_GREATER: PAIR_LOOP(T, T, uint8_t, a > b); break;                       \
    case OT_OP_LESS_OR_EQUAL: PAIR_LOOP(T, T, uint8_t, a <= b); break;                \
    case OT_OP_GREATER_OR_EQUAL: PAIR_LOOP(T, T, uint8_t, a >= b); break;             \
    case OT_OP_AND: PAIR_LOOP(T, T, uint8_t, (a != 0) & (b != 0)); break;             \
    case OT_OP_OR: PAIR_LOOP(T, T, uint8_t, (a != 0) | (b != 0)); break;              \
    case OT_OP_XOR: PAIR_LOOP(T, T, uint8_t, (a != 0) ^ (b != 0)); break;             \
    default: goto bad_op;                                                             \
    }

/* Less, Greater, LessOrEqual, GreaterOrEqual (float32, int64, int32) and And, Or, Xor
 * (bool): a bool output, both inputs of one dtype. */
ot_status ot_cpu_compare(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                         ot_error *err) {
    ot_bcast bc;
    ot_status st = ot_kernel_bcast(node, in, 2, &out[0], &bc, err);
    if (st) return st;
    if (in[0].dtype != in[1].dtype) return ot_cpu_bad_dtype(node, "mixed input dtypes, input 1", in[1].dtype, err);
    if (out[0].dtype != OT_BOOL) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    bool logic = node->op == OT_OP_AND || node->op == OT_OP_OR || node->op == OT_OP_XOR;
    if (logic != (in[0].dtype == OT_BOOL)) return ot_cpu_bad_dtype(node, "input 0", in[0].dtype, err);
    int nt = ot_cpu_threads(ctx);
    bool par = bc.rows * bc.inner >= OT_CPU_PAR_MIN_CHEAP && bc.rows > 1;
    switch (in[0].dtype) {
    case OT_F32: COMPARE(float) break;
    case OT_I64: COMPARE(int64_t) break;
    case OT_I32: COMPARE(int32_t) break;
    case OT_BOOL: COMPARE(uint8_t) break;
    default: return ot_cpu_bad_dtype(node, "input 0", in[0].dtype, err);
    }
    return OT_OK;
bad_op:
    return ot_fail(err, OT_E_INTERNAL, "node '%s': %s routed to the comparison kernel", node->name, node->op_type);
}
#undef COMPARE

/* Not (bool), IsNaN and IsInf (float32, float64): a bool output shaped like the input. */
ot_status ot_cpu_predicate(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    ot_status st = ot_kernel_same_numel(node, &in[0], &out[0], err);
    if (st) return st;
    if (out[0].dtype != OT_BOOL) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    int64_t n = ot_kernel_numel(&in[0]);
    uint8_t *y = out[0].data;
    if (node->op == OT_OP_NOT) {
        if (in[0].dtype != OT_BOOL) return ot_cpu_bad_dtype(node, "input 0", in[0].dtype, err);
        const uint8_t *x = in[0].data;
        for (int64_t i = 0; i < n; i++) y[i] = !x[i];
        return OT_OK;
    }
    /* float64 too: PyTorch 1.13 exports torch.isinf as Cast(to double) -> IsInf */
    ot_dtype t = in[0].dtype;
    if (t != OT_F32 && t != OT_F64) return ot_cpu_bad_dtype(node, "input 0", t, err);
    const float *xf = in[0].data;
    const double *xd = in[0].data;
    if (node->op == OT_OP_IS_NAN) {
        for (int64_t i = 0; i < n; i++) y[i] = t == OT_F32 ? xf[i] != xf[i] : xd[i] != xd[i];
        return OT_OK;
    }
    ot_op_params scratch;
    const ot_op_params *pp;
    st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    bool neg = pp->u.math.detect_negative, pos = pp->u.math.detect_positive;
    (void)ctx;
    for (int64_t i = 0; i < n; i++) {
        double v = t == OT_F32 ? xf[i] : xd[i];
        y[i] = (pos && v == INFINITY) || (neg && v == -INFINITY);
    }
    return OT_OK;
}

/* ---- unary maths ------------------------------------------------------------------- */

/* Abs on integers wraps at the minimum, like ONNX Runtime (computed unsigned). */
static ot_status int_abs(const ot_node *node, const ot_tensor *in, ot_tensor *out, int64_t n, ot_error *err) {
    if (out[0].dtype != in[0].dtype) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    if (in[0].dtype == OT_I64) {
        const int64_t *x = in[0].data;
        int64_t *y = out[0].data;
        for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0 ? (int64_t)(0 - (uint64_t)x[i]) : x[i];
        return OT_OK;
    }
    const int32_t *x = in[0].data;
    int32_t *y = out[0].data;
    for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0 ? (int32_t)(0 - (uint32_t)x[i]) : x[i];
    return OT_OK;
}

ot_status ot_cpu_math_unary(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                            ot_error *err) {
    ot_status st = ot_kernel_same_numel(node, &in[0], &out[0], err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&in[0]);
    if (node->op == OT_OP_ABS && (in[0].dtype == OT_I64 || in[0].dtype == OT_I32)) return int_abs(node, in, out, n, err);
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input 0", in[0].dtype, err);
    ot_op_params scratch;
    const ot_op_params *pp;
    st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    const float *x = in[0].data;
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = n >= OT_CPU_PAR_MIN;
    switch (node->op) {
    case OT_OP_ABS:
        OT_CPU_X_Y_LOOP(x, y, n, fabsf(v));
        break;
    case OT_OP_SIN:
        OT_CPU_X_Y_LOOP(x, y, n, sinf(v));
        break;
    case OT_OP_COS:
        OT_CPU_X_Y_LOOP(x, y, n, cosf(v));
        break;
    case OT_OP_HARD_SIGMOID: {
        float a = pp->u.math.alpha, b = pp->u.math.beta;
        OT_CPU_X_Y_LOOP(x, y, n, ot_pm_hard_sigmoid(v, a, b));
        break;
    }
    case OT_OP_HARD_SWISH:
        OT_CPU_X_Y_LOOP(x, y, n, ot_pm_hard_swish(v));
        break;
    case OT_OP_SOFTPLUS:
        OT_CPU_X_Y_LOOP(x, y, n, ot_pm_softplus(v));
        break;
    case OT_OP_MISH:
        OT_CPU_X_Y_LOOP(x, y, n, ot_pm_mish(v));
        break;
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s routed to the pointwise maths kernel", node->name,
                       node->op_type);
    }
    return OT_OK;
}

/* ---- Min, Max (variadic) ---------------------------------------------------------- */

/* Folds the inputs into the output one at a time, in input order, as Sum does. */
#define MINMAX_STEP(T, RULE)                                                                              \
    do {                                                                                                  \
        const T *x = in[k].data;                                                                          \
        T *o = out[0].data;                                                                               \
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (par)") for (int64_t r = 0;         \
                                                                                   r < bc.rows; r++) {    \
            int64_t off[OT_BCAST_MAX_IN];                                                                 \
            ot_bcast_row(&bc, r, off);                                                                    \
            T *O = o + r * bc.inner;                                                                      \
            const T *X = x + off[0];                                                                      \
            for (int64_t i = 0; i < bc.inner; i++) {                                                      \
                T b = X[i * s0];                                                                          \
                if (k == 0) {                                                                             \
                    O[i] = b;                                                                             \
                } else {                                                                                  \
                    T a = O[i];                                                                           \
                    O[i] = RULE;                                                                          \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
    } while (0)

ot_status ot_cpu_minmax(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                        ot_error *err) {
    ot_dtype t = in[0].dtype;
    if (t != OT_F32 && t != OT_I64 && t != OT_I32) return ot_cpu_bad_dtype(node, "input 0", t, err);
    for (int k = 0; k < node->n_inputs; k++)
        if (in[k].dtype != t) return ot_cpu_bad_dtype(node, "mixed input dtypes, input", in[k].dtype, err);
    if (out[0].dtype != t) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    bool mx = node->op == OT_OP_MAX;
    int nt = ot_cpu_threads(ctx);
    for (int k = 0; k < node->n_inputs; k++) {
        ot_bcast bc;
        ot_status st = ot_kernel_bcast(node, &in[k], 1, &out[0], &bc, err);
        if (st) return st;
        bool par = bc.rows * bc.inner >= OT_CPU_PAR_MIN_CHEAP && bc.rows > 1;
        int64_t s0 = bc.stride[0][bc.rank - 1];
        if (t == OT_F32) {
            if (mx) MINMAX_STEP(float, ot_pm_max_f(a, b));
            else MINMAX_STEP(float, ot_pm_min_f(a, b));
        } else if (t == OT_I64) {
            if (mx) MINMAX_STEP(int64_t, a >= b ? a : b);
            else MINMAX_STEP(int64_t, a <= b ? a : b);
        } else {
            if (mx) MINMAX_STEP(int32_t, a >= b ? a : b);
            else MINMAX_STEP(int32_t, a <= b ? a : b);
        }
    }
    return OT_OK;
}
#undef MINMAX_STEP

/* ---- Mod ------------------------------------------------------------------------------ */

/* Integer Mod through int64; a zero divisor is reported rather than trapping. */
static ot_status int_mod(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_bcast *b, bool fmod,
                         ot_error *err) {
    for (int64_t r = 0; r < b->rows; r++) {
        int64_t off[OT_BCAST_MAX_IN];
        ot_bcast_row(b, r, off);
        for (int64_t i = 0; i < b->inner; i++) {
            int64_t x, d;
            ot_kernel_load_int(in[0].dtype, in[0].data, off[0] + i * b->stride[0][b->rank - 1], &x);
            ot_kernel_load_int(in[1].dtype, in[1].data, off[1] + i * b->stride[1][b->rank - 1], &d);
            if (d == 0) return ot_fail(err, OT_E_DATA, "node '%s' (Mod): integer modulo by zero", node->name);
            int64_t v = ot_pm_mod_i(x, d, fmod);
            if (out->dtype == OT_I64) ((int64_t *)out->data)[r * b->inner + i] = v;
            else ((int32_t *)out->data)[r * b->inner + i] = (int32_t)v;
        }
    }
    return OT_OK;
}

ot_status ot_cpu_mod(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                     ot_error *err) {
    ot_bcast bc;
    ot_status st = ot_kernel_bcast(node, in, 2, &out[0], &bc, err);
    if (st) return st;
    ot_dtype t = in[0].dtype;
    if (in[1].dtype != t) return ot_cpu_bad_dtype(node, "mixed input dtypes, input 1", in[1].dtype, err);
    if (out[0].dtype != t) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    ot_op_params scratch;
    const ot_op_params *pp;
    st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    bool fmod = pp->u.math.fmod;
    if (t == OT_I64 || t == OT_I32) return int_mod(node, in, out, &bc, fmod, err);
    if (t != OT_F32) return ot_cpu_bad_dtype(node, "input 0", t, err);
    if (!fmod)
        return ot_fail(err, OT_E_MODEL, "node '%s' (Mod): a float32 Mod needs fmod = 1 (the ONNX spec)", node->name);
    int nt = ot_cpu_threads(ctx);
    bool par = bc.rows * bc.inner >= OT_CPU_PAR_MIN && bc.rows > 1;
    PAIR_LOOP(float, float, float, fmodf(a, b));
    return OT_OK;
}

/* ---- backward ----------------------------------------------------------------------- */

/* AbsGrad, HardSigmoidGrad, HardSwishGrad, MishGrad: (dY, X) -> dX. */
OT_GRAD_KERNEL(ot_cpu_math_grad) {
    int64_t n;
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_kernel_grad_dy_x(node, in, out, ot_cpu_bad_dtype, &n, &scratch, &pp, err);
    if (st) return st;
    const float *dy = in[0].data, *x = in[1].data;
    float *dx = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = n >= OT_CPU_PAR_MIN;
    switch (node->op) {
    case OT_OP_ABS_GRAD:
        OT_CPU_DY_X_LOOP(dy, x, dx, n, ot_pm_abs_grad(g, v));
        break;
    case OT_OP_HARD_SIGMOID_GRAD: {
        float a = pp->u.math.alpha, b = pp->u.math.beta;
        OT_CPU_DY_X_LOOP(dy, x, dx, n, ot_pm_hard_sigmoid_grad(g, v, a, b));
        break;
    }
    case OT_OP_HARD_SWISH_GRAD:
        OT_CPU_DY_X_LOOP(dy, x, dx, n, ot_pm_hard_swish_grad(g, v));
        break;
    case OT_OP_MISH_GRAD:
        OT_CPU_DY_X_LOOP(dy, x, dx, n, ot_pm_mish_grad(g, v));
        break;
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s is not a pointwise maths gradient op", node->name,
                       node->op_type);
    }
    return OT_OK;
}

/* ModGrad (dY, A, B) -> -dY * trunc(A / B), shaped like dY (A and B broadcast to it). */
OT_GRAD_KERNEL(ot_cpu_mod_grad) {
    for (int k = 0; k < 3; k++)
        if (in[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[k].dtype, err);
    ot_bcast bc;
    ot_status st = ot_kernel_bcast(node, in, 3, &out[0], &bc, err);
    if (st) return st;
    const float *g = in[0].data, *a = in[1].data, *b = in[2].data;
    float *o = out[0].data;
    int64_t s0 = bc.stride[0][bc.rank - 1], s1 = bc.stride[1][bc.rank - 1], s2 = bc.stride[2][bc.rank - 1];
    int nt = ot_cpu_threads(ctx);
    bool par = bc.rows * bc.inner >= OT_CPU_PAR_MIN && bc.rows > 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t r = 0; r < bc.rows; r++) {
        int64_t off[OT_BCAST_MAX_IN];
        ot_bcast_row(&bc, r, off);
        for (int64_t i = 0; i < bc.inner; i++)
            o[r * bc.inner + i] = ot_pm_mod_grad_b(g[off[0] + i * s0], a[off[1] + i * s1], b[off[2] + i * s2]);
    }
    return OT_OK;
}

/* The element offset of output element i in an input broadcast by b (one input). */
static int64_t bcast_offset(const ot_bcast *b, int64_t i) {
    int64_t off[OT_BCAST_MAX_IN];
    ot_bcast_row(b, i / b->inner, off);
    return off[0] + (i % b->inner) * b->stride[0][b->rank - 1];
}

/* MaxGrad / MinGrad (dY, Y, X_0 .. X_n-1) -> dX_k shaped like dY. */
OT_GRAD_KERNEL(ot_cpu_minmax_grad) {
    int nx, k;
    int64_t n;
    ot_status st = ot_kernel_minmax_grad_check(node, in, out, ot_cpu_bad_dtype, &nx, &k, &n, err);
    if (st) return st;
    ot_bcast bx[OT_MINMAX_GRAD_MAX_IN];
    for (int j = 0; j < nx; j++) {
        st = ot_kernel_bcast(node, &in[2 + j], 1, &out[0], &bx[j], err);
        if (st) return st;
    }
    const float *g = in[0].data, *y = in[1].data;
    float *o = out[0].data;
    int is_max = node->op == OT_OP_MAX_GRAD;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        int ties = 0;
        float xk = 0.0f;
        for (int j = 0; j < nx; j++) {
            float v = ((const float *)in[2 + j].data)[bcast_offset(&bx[j], i)];
            ties += v == y[i];
            if (j == k) xk = v;
        }
        o[i] = ot_pm_minmax_grad(g[i], xk, y[i], ties, is_max);
    }
    return OT_OK;
}
