/* cpu_elementwise.c — pointwise CPU kernels: the unary activations (Relu, Gelu,
 * Sigmoid, Clip, ...), the broadcasting binary arithmetic (Add, Sub, Mul, Div, Pow),
 * Equal, Where, variadic Sum and Expand. All broadcast multidirectionally as ONNX
 * defines, through ot_bcast, and may run in place (out aliases input 0). */
#include <math.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_vecmath.h" /* ot_cpu_select_u32, ot_cpu_erf_n, ot_cpu_arith_f32 */

/* Four floats (and four int masks) as one SSE register (GCC and Clang vector
 * extension): -O2 at the x86-64 baseline leaves the plain loops scalar. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

/* ---- unary ------------------------------------------------------------------ */

/* tanh as a rational function (odd degree-13 numerator over an even degree-6
 * denominator, clamped to +-7.9053, identity below |x| < 4e-4; the coefficients of
 * Eigen's float ptanh). Max relative error 4.1e-7 (~7 ulp) against double tanh over
 * all floats in [-12, 12], libm's tanhf 1.7e-7; but 4 lanes per step and no libm call:
 * tanhf (which calls expm1f) was 29% of chain48's training instructions. Scalar and
 * vector forms do the same IEEE operations in the same order: same bits anywhere. */
#define TANH_CLAMP 7.90531110763549805f
#define TANH_POLY(T, x2, x)                                                                              \
    T p = TANH_SPLAT(-2.76076847742355e-16f);                                                           \
    p = p * x2 + TANH_SPLAT(2.00018790482477e-13f);                                                     \
    p = p * x2 + TANH_SPLAT(-8.60467152213735e-11f);                                                    \
    p = p * x2 + TANH_SPLAT(5.12229709037114e-08f);                                                     \
    p = p * x2 + TANH_SPLAT(1.48572235717979e-05f);                                                     \
    p = p * x2 + TANH_SPLAT(6.37261928875436e-04f);                                                     \
    p = p * x2 + TANH_SPLAT(4.89352455891786e-03f);                                                     \
    p = p * x;                                                                                          \
    T q = TANH_SPLAT(1.19825839466702e-06f);                                                            \
    q = q * x2 + TANH_SPLAT(1.18534705686654e-04f);                                                     \
    q = q * x2 + TANH_SPLAT(2.26843463243900e-03f);                                                     \
    q = q * x2 + TANH_SPLAT(4.89352518554385e-03f);

static inline float tanh_rational(float a) {
#define TANH_SPLAT(c) (c)
    if (fabsf(a) < 4e-4f) return a;
    float x = a < -TANH_CLAMP ? -TANH_CLAMP : a;
    x = x > TANH_CLAMP ? TANH_CLAMP : x;
    float x2 = x * x;
    TANH_POLY(float, x2, x)
    return p / q;
#undef TANH_SPLAT
}

static void tanh_rows(const float *xin, float *y, int64_t n, int nt, bool par) {
    int64_t n4 = n / 4;
#define TANH_SPLAT(c) ((v4f){(c), (c), (c), (c)})
    const v4f lo = TANH_SPLAT(-TANH_CLAMP), hi = TANH_SPLAT(TANH_CLAMP), tiny = TANH_SPLAT(4e-4f);
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t q4 = 0; q4 < n4; q4++) {
        v4f a;
        memcpy(&a, xin + 4 * q4, sizeof a);
        v4i m = (v4i)(a < lo);
        v4f x = (v4f)(((v4i)lo & m) | ((v4i)a & ~m));
        m = (v4i)(x > hi);
        x = (v4f)(((v4i)hi & m) | ((v4i)x & ~m));
        v4f x2 = x * x;
        TANH_POLY(v4f, x2, x)
        v4f r = p / q;
        v4f ab = (v4f)((v4i)a & (v4i){0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff});
        m = (v4i)(ab < tiny);
        r = (v4f)(((v4i)a & m) | ((v4i)r & ~m));
        memcpy(y + 4 * q4, &r, sizeof r);
    }
#undef TANH_SPLAT
    for (int64_t i = 4 * n4; i < n; i++) y[i] = tanh_rational(xin[i]);
}

/* erf: ot_cpu_erf_n (cpu_vecmath.c: x * P(x^2) / Q(x^2) on x clamped to [-4, 4], 16
 * lanes with AVX-512, 4 without), in blocks so the threads split the array; each
 * element's bits are its own, whatever the split. */
#define ERF_BLOCK 4096
static void erf_rows(const float *xin, float *y, int64_t n, int nt, bool par) {
    int64_t blocks = (n + ERF_BLOCK - 1) / ERF_BLOCK;
#pragma omp parallel for schedule(static) num_threads(nt) if (par && blocks > 1)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t i0 = b * ERF_BLOCK;
        ot_cpu_erf_n(xin + i0, y + i0, n - i0 < ERF_BLOCK ? n - i0 : ERF_BLOCK);
    }
}

/* Clip to [lo, hi] 4 lanes at a time with the scalar rule's comparisons (a NaN fails
 * both and passes through), selected by bit masks; Relu is Clip(0, +inf) except
 * that it maps NaN and -0 to +0 like its scalar loop `x > 0 ? x : 0`. */
static void clip_rows(const float *x, float *y, int64_t n, float lo, float hi, bool relu, int nt, bool par) {
    int64_t n4 = n / 4;
    const v4f vlo = {lo, lo, lo, lo}, vhi = {hi, hi, hi, hi};
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t q = 0; q < n4; q++) {
        v4f v;
        memcpy(&v, x + 4 * q, sizeof v);
        if (relu) {
            v = (v4f)((v4i)v & (v4i)(v > (v4f){0.0f, 0.0f, 0.0f, 0.0f}));
        } else {
            v4i m = (v4i)(v < vlo);
            v = (v4f)(((v4i)vlo & m) | ((v4i)v & ~m));
            m = (v4i)(v > vhi);
            v = (v4f)(((v4i)vhi & m) | ((v4i)v & ~m));
        }
        memcpy(y + 4 * q, &v, sizeof v);
    }
    for (int64_t i = 4 * n4; i < n; i++) {
        float v = x[i];
        if (relu) {
            y[i] = v > 0.0f ? v : 0.0f;
        } else {
            v = v < lo ? lo : v;
            y[i] = v > hi ? hi : v;
        }
    }
}

static float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
static float gelu_tanh(float x) {
    const float k = 0.79788456080286536f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
static float sigmoidf(float x) {
    /* split by sign so exp never overflows */
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

/* Reads an optional scalar bound of Clip from an input (opset >= 11 form). */
static bool clip_bound(const ot_tensor *t, float *v) {
    if (!t || !t->data || ot_kernel_numel(t) < 1) return false;
    double d;
    if (!ot_kernel_load_double(t->dtype, t->data, 0, &d)) return false;
    *v = (float)d;
    return true;
}

/* Clip on integers: bounds from the inputs when given (exact), else from the
 * normalised float attributes. */
static ot_status int_clip(const ot_node *node, const ot_act_params *ap, const ot_tensor *in, ot_tensor *out, int64_t n,
                          ot_error *err) {
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    if (node->n_inputs > 1 && in[1].data && ot_kernel_numel(&in[1]) > 0) ot_kernel_load_int(in[1].dtype, in[1].data, 0, &lo);
    else if (ap->has_min && isfinite(ap->min)) lo = (int64_t)ceil(ap->min);
    if (node->n_inputs > 2 && in[2].data && ot_kernel_numel(&in[2]) > 0) ot_kernel_load_int(in[2].dtype, in[2].data, 0, &hi);
    else if (ap->has_max && isfinite(ap->max)) hi = (int64_t)floor(ap->max);
    if (out[0].dtype != in[0].dtype) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        ot_kernel_load_int(in[0].dtype, in[0].data, i, &v);
        v = v < lo ? lo : v > hi ? hi : v;
        switch (in[0].dtype) {
        case OT_I64: ((int64_t *)out[0].data)[i] = v; break;
        case OT_I32: ((int32_t *)out[0].data)[i] = (int32_t)v; break;
        case OT_I8: ((int8_t *)out[0].data)[i] = (int8_t)v; break;
        default: ((uint8_t *)out[0].data)[i] = (uint8_t)v; break;
        }
    }
    return OT_OK;
}

ot_status ot_cpu_unary(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                       ot_error *err) {
    int64_t n = ot_kernel_numel(&in[0]);
    if (ot_kernel_numel(&out[0]) != n)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output has %lld elements, input %lld", node->name,
                       node->op_type, (long long)ot_kernel_numel(&out[0]), (long long)n);
    int nt = ot_cpu_threads(ctx);
    ot_op op = node->op;
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_act_params *ap = &pp->u.act; /* LeakyRelu, Clip, Gelu */
    if (op == OT_OP_NEG && in[0].dtype != OT_F32) {
        if (in[0].dtype == OT_I64) {
            const int64_t *x = in[0].data;
            int64_t *y = out[0].data;
            for (int64_t i = 0; i < n; i++) y[i] = -x[i];
            return OT_OK;
        }
        if (in[0].dtype == OT_I32) {
            const int32_t *x = in[0].data;
            int32_t *y = out[0].data;
            for (int64_t i = 0; i < n; i++) y[i] = -x[i];
            return OT_OK;
        }
    }
    if (op == OT_OP_CLIP && ot_kernel_is_int_dtype(in[0].dtype) && in[0].dtype != OT_BOOL)
        return int_clip(node, ap, in, out, n, err);
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input 0", in[0].dtype, err);
    const float *x = in[0].data;
    float *y = out[0].data;
    /* memory-bound rules (a compare or a sign) need more elements to repay a thread */
    bool cheap = op == OT_OP_NEG || op == OT_OP_RELU || op == OT_OP_LEAKY_RELU || op == OT_OP_CLIP;
    bool par = n >= (cheap ? OT_CPU_PAR_MIN_CHEAP : OT_CPU_PAR_MIN);
    switch (op) {
    case OT_OP_SQRT:
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]);
        break;
    case OT_OP_RECIPROCAL:
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) y[i] = 1.0f / x[i];
        break;
    case OT_OP_NEG:
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) y[i] = -x[i];
        break;
    case OT_OP_EXP:
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]);
        break;
    case OT_OP_LOG:
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]);
        break;
    case OT_OP_ERF:
        erf_rows(x, y, n, nt, par);
        break;
    case OT_OP_TANH:
        tanh_rows(x, y, n, nt, par);
        break;
    case OT_OP_SIGMOID:
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) y[i] = sigmoidf(x[i]);
        break;
    case OT_OP_RELU:
        clip_rows(x, y, n, 0.0f, INFINITY, true, nt, par);
        break;
    case OT_OP_LEAKY_RELU: {
        float a = ap->alpha;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) y[i] = x[i] >= 0.0f ? x[i] : a * x[i];
        break;
    }
    case OT_OP_CLIP: {
        float lo = -INFINITY, hi = INFINITY;
        if (ap->has_min) lo = ap->min;
        else if (node->n_inputs > 1) clip_bound(&in[1], &lo);
        if (ap->has_max) hi = ap->max;
        else if (node->n_inputs > 2) clip_bound(&in[2], &hi);
        clip_rows(x, y, n, lo, hi, false, nt, par);
        break;
    }
    case OT_OP_GELU: {
        if (ap->approximate == OT_GELU_TANH) {
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
            for (int64_t i = 0; i < n; i++) y[i] = gelu_tanh(x[i]);
        } else if (ap->approximate == OT_GELU_NONE) {
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
            for (int64_t i = 0; i < n; i++) y[i] = gelu_erf(x[i]);
        } else {
            return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (Gelu): approximate='%s' is not 'none' or 'tanh'",
                           node->name, ap->approximate_name);
        }
        break;
    }
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s routed to the unary kernel", node->name, node->op_type);
    }
    return OT_OK;
}

/* ---- binary arithmetic --------------------------------------------------------- */

/* Runs EXPR(a, b) over a broadcast pair; inner loop specialised on the strides. */
#define BCAST2_LOOP(TA, TB, TY, EXPR)                                                              \
    do {                                                                                           \
        const TA *pa = in[0].data;                                                                 \
        const TB *pb = in[1].data;                                                                 \
        TY *py = out[0].data;                                                                      \
        int64_t inner = bc.inner, sa = bc.stride[0][bc.rank - 1], sb = bc.stride[1][bc.rank - 1]; \
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (par)") for (int64_t r = 0;  \
                                                                                   r < bc.rows;    \
                                                                                   r++) {          \
            int64_t off[OT_BCAST_MAX_IN];                                                      \
            ot_bcast_row(&bc, r, off);                                                         \
            const TA *A = pa + off[0];                                                             \
            const TB *B = pb + off[1];                                                             \
            TY *Y = py + r * inner;                                                                \
            if (sa == 1 && sb == 1) {                                                              \
                for (int64_t i = 0; i < inner; i++) {                                              \
                    TA a = A[i];                                                                   \
                    TB b = B[i];                                                                   \
                    Y[i] = (TY)(EXPR);                                                             \
                }                                                                                  \
            } else if (sa == 1) {                                                                  \
                TB b = B[0];                                                                       \
                for (int64_t i = 0; i < inner; i++) {                                              \
                    TA a = A[i];                                                                   \
                    Y[i] = (TY)(EXPR);                                                             \
                }                                                                                  \
            } else if (sb == 1) {                                                                  \
                TA a = A[0];                                                                       \
                for (int64_t i = 0; i < inner; i++) {                                              \
                    TB b = B[i];                                                                   \
                    Y[i] = (TY)(EXPR);                                                             \
                }                                                                                  \
            } else {                                                                               \
                TA a = A[0];                                                                       \
                TB b = B[0];                                                                       \
                for (int64_t i = 0; i < inner; i++) Y[i] = (TY)(EXPR);                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Y = A op B over rows where A runs contiguously and B contiguously or as one value per
 * row: ot_cpu_arith_f32 (cpu_vecmath.c: 16 lanes with AVX-512, else 4), each lane the one
 * IEEE operation of the scalar loop, same bits. At -O2 and the x86-64 baseline the
 * BCAST2_LOOP loops stay scalar; the GELU chain's Div/Add/Mul were 16% of tinygpt's
 * forward instructions. Rows are cut into chunks of ARITH_CHUNK for the threads: an
 * operation on equal shapes, or with a scalar, is one row of every element (ot_bcast
 * merges the dims), which a loop over rows ran on one thread. */
#define ARITH_CHUNK 16384
static bool f32_arith_rows(ot_op op, const ot_bcast *bc, const ot_tensor *in, ot_tensor *out, int nt,
                           bool par) {
    if (in[1].dtype != OT_F32) return false;
    int64_t inner = bc->inner, sa = bc->stride[0][bc->rank - 1], sb = bc->stride[1][bc->rank - 1];
    if (sa != 1 || (sb != 1 && sb != 0)) return false;
    ot_cpu_arith_op ao;
    switch (op) {
    case OT_OP_ADD: ao = OT_CPU_ARITH_ADD; break;
    case OT_OP_SUB: ao = OT_CPU_ARITH_SUB; break;
    case OT_OP_MUL: ao = OT_CPU_ARITH_MUL; break;
    case OT_OP_DIV: ao = OT_CPU_ARITH_DIV; break;
    default: return false;
    }
    const float *pa = in[0].data, *pb = in[1].data;
    float *py = out[0].data;
    int64_t per_row = inner > ARITH_CHUNK ? (inner + ARITH_CHUNK - 1) / ARITH_CHUNK : 1;
    int64_t tasks = bc->rows * per_row, chunk = (inner + per_row - 1) / per_row;
    par = par || (tasks > 1 && bc->rows * inner >= OT_CPU_PAR_MIN_CHEAP);
#pragma omp parallel for schedule(static) num_threads(nt) if (par && tasks > 1)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t r = t / per_row, c0 = (t % per_row) * chunk;
        int64_t len = inner - c0 < chunk ? inner - c0 : chunk;
        int64_t off[OT_BCAST_MAX_IN];
        ot_bcast_row(bc, r, off);
        ot_cpu_arith_f32(ao, pa + off[0] + c0, pb + off[1] + (sb ? c0 : 0), sb == 1, py + r * inner + c0, len);
    }
    return true;
}

/* Integer division truncating toward zero like C and ONNX Runtime; a zero divisor
 * is reported rather than trapping. */
static ot_status int_div(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_bcast *b,
                         ot_error *err) {
    for (int64_t r = 0; r < b->rows; r++) {
        int64_t off[OT_BCAST_MAX_IN];
        ot_bcast_row(b, r, off);
        for (int64_t i = 0; i < b->inner; i++) {
            int64_t ia = off[0] + i * b->stride[0][b->rank - 1], ib = off[1] + i * b->stride[1][b->rank - 1];
            int64_t a, d;
            ot_kernel_load_int(in[0].dtype, in[0].data, ia, &a);
            ot_kernel_load_int(in[1].dtype, in[1].data, ib, &d);
            if (d == 0)
                return ot_fail(err, OT_E_DATA, "node '%s' (Div): integer division by zero", node->name);
            int64_t q = d == -1 ? (int64_t)(0 - (uint64_t)a) : a / d; /* INT64_MIN / -1 wraps */
            int64_t o = r * b->inner + i;
            switch (out->dtype) {
            case OT_I64: ((int64_t *)out->data)[o] = q; break;
            case OT_I32: ((int32_t *)out->data)[o] = (int32_t)q; break;
            case OT_I8: ((int8_t *)out->data)[o] = (int8_t)q; break;
            default: ((uint8_t *)out->data)[o] = (uint8_t)q; break;
            }
        }
    }
    return OT_OK;
}

/* Pow with an integer base: the result keeps the base's dtype. Integer exponents
 * use exact repeated squaring (wrapping); float exponents go through double. */
static ot_status int_pow(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_bcast *b,
                         ot_error *err) {
    for (int64_t r = 0; r < b->rows; r++) {
        int64_t off[OT_BCAST_MAX_IN];
        ot_bcast_row(b, r, off);
        for (int64_t i = 0; i < b->inner; i++) {
            int64_t ia = off[0] + i * b->stride[0][b->rank - 1], ib = off[1] + i * b->stride[1][b->rank - 1], a, e;
            ot_kernel_load_int(in[0].dtype, in[0].data, ia, &a);
            int64_t v;
            if (in[1].dtype == OT_F32) {
                v = (int64_t)pow((double)a, (double)((const float *)in[1].data)[ib]);
            } else {
                ot_kernel_load_int(in[1].dtype, in[1].data, ib, &e);
                if (e < 0) {
                    v = a == 1 ? 1 : a == -1 ? ((e & 1) ? -1 : 1) : 0;
                } else {
                    uint64_t base = (uint64_t)a, res = 1;
                    for (; e > 0; e >>= 1, base *= base)
                        if (e & 1) res *= base;
                    v = (int64_t)res;
                }
            }
            if (out->dtype == OT_I64) ((int64_t *)out->data)[r * b->inner + i] = v;
            else ((int32_t *)out->data)[r * b->inner + i] = (int32_t)v;
        }
    }
    (void)node;
    (void)err;
    return OT_OK;
}

ot_status ot_cpu_binary(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                        ot_error *err) {
    ot_bcast bc;
    ot_status st = ot_kernel_bcast(node, in, 2, &out[0], &bc, err);
    if (st) return st;
    int nt = ot_cpu_threads(ctx);
    int64_t grain = node->op == OT_OP_POW ? OT_CPU_PAR_MIN : OT_CPU_PAR_MIN_CHEAP;
    bool par = bc.rows * bc.inner >= grain && bc.rows > 1;
    ot_dtype ta = in[0].dtype, tb = in[1].dtype;
    if (node->op == OT_OP_POW) {
        if ((ta == OT_I64 || ta == OT_I32) && (tb == OT_F32 || tb == OT_I64 || tb == OT_I32))
            return int_pow(node, in, out, &bc, err);
        if (ta != OT_F32) return ot_cpu_bad_dtype(node, "input 0", ta, err);
        if (tb == OT_F32) BCAST2_LOOP(float, float, float, (b == 2.0f ? a * a : powf(a, b)));
        else if (tb == OT_I64) BCAST2_LOOP(float, int64_t, float, (b == 2 ? a * a : powf(a, (float)b)));
        else if (tb == OT_I32) BCAST2_LOOP(float, int32_t, float, (b == 2 ? a * a : powf(a, (float)b)));
        else return ot_cpu_bad_dtype(node, "input 1", tb, err);
        return OT_OK;
    }
    if (ta != tb) return ot_cpu_bad_dtype(node, "mixed input dtypes, input 1", tb, err);
    if (ta == OT_F32 && f32_arith_rows(node->op, &bc, in, out, nt, par)) return OT_OK;
    if (ta == OT_F32) {
        switch (node->op) {
        case OT_OP_ADD: BCAST2_LOOP(float, float, float, a + b); break;
        case OT_OP_SUB: BCAST2_LOOP(float, float, float, a - b); break;
        case OT_OP_MUL: BCAST2_LOOP(float, float, float, a * b); break;
        case OT_OP_DIV: BCAST2_LOOP(float, float, float, a / b); break;
        default: goto bad_op;
        }
    } else if (ot_kernel_is_int_dtype(ta) && ta != OT_BOOL) {
        /* integers wrap like ONNX Runtime: computed unsigned (no signed-overflow UB) */
        if (node->op == OT_OP_DIV) return int_div(node, in, out, &bc, err);
#define INT_ARITH(T, U)                                                                    \
    switch (node->op) {                                                                    \
    case OT_OP_ADD: BCAST2_LOOP(T, T, T, (U)a + (U)b); break;                              \
    case OT_OP_SUB: BCAST2_LOOP(T, T, T, (U)a - (U)b); break;                              \
    case OT_OP_MUL: BCAST2_LOOP(T, T, T, (U)a * (U)b); break;                              \
    default: goto bad_op;                                                                  \
    }
        if (ta == OT_I64) INT_ARITH(int64_t, uint64_t)
        else if (ta == OT_I32) INT_ARITH(int32_t, uint32_t)
        else if (ta == OT_I8) INT_ARITH(int8_t, uint32_t)
        else INT_ARITH(uint8_t, uint32_t)
#undef INT_ARITH
    } else {
        return ot_cpu_bad_dtype(node, "input 0", ta, err);
    }
    return OT_OK;
bad_op:
    return ot_fail(err, OT_E_INTERNAL, "node '%s': %s routed to the binary kernel", node->name, node->op_type);
}

ot_status ot_cpu_equal(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                       ot_error *err) {
    ot_bcast bc;
    ot_status st = ot_kernel_bcast(node, in, 2, &out[0], &bc, err);
    if (st) return st;
    int nt = ot_cpu_threads(ctx);
    bool par = bc.rows * bc.inner >= OT_CPU_PAR_MIN_CHEAP && bc.rows > 1;
    if (in[0].dtype != in[1].dtype) return ot_cpu_bad_dtype(node, "mixed input dtypes, input 1", in[1].dtype, err);
    switch (in[0].dtype) {
    case OT_F32: BCAST2_LOOP(float, float, uint8_t, a == b); break;
    case OT_I64: BCAST2_LOOP(int64_t, int64_t, uint8_t, a == b); break;
    case OT_I32: BCAST2_LOOP(int32_t, int32_t, uint8_t, a == b); break;
    case OT_BOOL:
    case OT_U8: BCAST2_LOOP(uint8_t, uint8_t, uint8_t, a == b); break;
    case OT_I8: BCAST2_LOOP(int8_t, int8_t, uint8_t, a == b); break;
    default: return ot_cpu_bad_dtype(node, "input 0", in[0].dtype, err);
    }
    return OT_OK;
}

/* ---- Where, Expand: any dtype, moved by element size ---------------------------- */

ot_status ot_cpu_where(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                       ot_error *err) {
    if (in[0].dtype != OT_BOOL) return ot_cpu_bad_dtype(node, "condition", in[0].dtype, err);
    if (in[1].dtype != in[2].dtype || in[1].dtype != out[0].dtype)
        return ot_cpu_bad_dtype(node, "mixed X/Y dtypes, Y", in[2].dtype, err);
    size_t es = ot_dtype_size(in[1].dtype);
    if (!es) return ot_cpu_bad_dtype(node, "X", in[1].dtype, err);
    ot_bcast bc;
    ot_status st = ot_kernel_bcast(node, in, 3, &out[0], &bc, err);
    if (st) return st;
    int nt = ot_cpu_threads(ctx);
    bool par = bc.rows * bc.inner >= OT_CPU_PAR_MIN_CHEAP && bc.rows > 1;
    const uint8_t *c = in[0].data;
    const char *x = in[1].data, *yv = in[2].data;
    char *o = out[0].data;
    int64_t s0 = bc.stride[0][bc.rank - 1], s1 = bc.stride[1][bc.rank - 1], s2 = bc.stride[2][bc.rank - 1];
    if (es == 4) {
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t r = 0; r < bc.rows; r++) {
            int64_t off[OT_BCAST_MAX_IN];
            ot_bcast_row(&bc, r, off);
            /* 4-byte payloads copied as integers so every bit pattern survives */
            const uint32_t *X = (const uint32_t *)x + off[1], *Y = (const uint32_t *)yv + off[2];
            uint32_t *O = (uint32_t *)o + r * bc.inner;
            if (s0 == 1 && (s1 | 1) == 1 && (s2 | 1) == 1) /* a causal mask's Where, 16 at a time */
                ot_cpu_select_u32(c + off[0], X, s1 == 1, Y, s2 == 1, O, bc.inner);
            else
                for (int64_t i = 0; i < bc.inner; i++) O[i] = c[off[0] + i * s0] ? X[i * s1] : Y[i * s2];
        }
        return OT_OK;
    }
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t r = 0; r < bc.rows; r++) {
        int64_t off[OT_BCAST_MAX_IN];
        ot_bcast_row(&bc, r, off);
        for (int64_t i = 0; i < bc.inner; i++) {
            const char *src = c[off[0] + i * s0] ? x + (size_t)(off[1] + i * s1) * es : yv + (size_t)(off[2] + i * s2) * es;
            memcpy(o + (size_t)(r * bc.inner + i) * es, src, es);
        }
    }
    return OT_OK;
}

ot_status ot_cpu_expand(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                        ot_error *err) {
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || in[0].dtype != out[0].dtype) return ot_cpu_bad_dtype(node, "input 0", in[0].dtype, err);
    ot_bcast bc;
    ot_status st = ot_kernel_bcast(node, in, 1, &out[0], &bc, err);
    if (st) return st;
    int nt = ot_cpu_threads(ctx);
    bool par = bc.rows * bc.inner >= OT_CPU_PAR_MIN_CHEAP && bc.rows > 1;
    const char *x = in[0].data;
    char *o = out[0].data;
    int64_t s0 = bc.stride[0][bc.rank - 1];
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t r = 0; r < bc.rows; r++) {
        int64_t off[OT_BCAST_MAX_IN];
        ot_bcast_row(&bc, r, off);
        char *O = o + (size_t)(r * bc.inner) * es;
        if (s0 == 1) {
            memcpy(O, x + (size_t)off[0] * es, (size_t)bc.inner * es);
        } else if (es == 4) { /* broadcast along the row: a fill */
            uint32_t v;
            memcpy(&v, x + (size_t)off[0] * es, 4);
            for (int64_t i = 0; i < bc.inner; i++) ((uint32_t *)O)[i] = v;
        } else if (es == 8) {
            uint64_t v;
            memcpy(&v, x + (size_t)off[0] * es, 8);
            for (int64_t i = 0; i < bc.inner; i++) ((uint64_t *)O)[i] = v;
        } else {
            for (int64_t i = 0; i < bc.inner; i++) memcpy(O + (size_t)i * es, x + (size_t)off[0] * es, es);
        }
    }
    return OT_OK;
}

/* ---- Sum (variadic) ------------------------------------------------------------ */

/* Adds inputs one at a time in input order into the output so the summation order
 * is fixed; input 0 may alias the output (in place). */
/* Sum of inputs all shaped like the output (gradient contributions): one pass, each
 * element ((x0 + x1) + x2) + ..., the order of the input-by-input passes below, four
 * lanes at a time. Every input is read at an element before the output is written
 * there, so the output may alias any input. False when an input broadcasts. */
#define SUM_MAX_FUSED 8
static bool sum_same_shape(const ot_node *node, const ot_tensor *in, ot_tensor *out, int nt) {
    int m = node->n_inputs;
    int64_t n = ot_kernel_numel(&out[0]);
    if (m < 2 || m > SUM_MAX_FUSED) return false;
    const float *xs[SUM_MAX_FUSED];
    for (int k = 0; k < m; k++) {
        if (!ot_shape_equal(&in[k].shape, &out[0].shape)) return false;
        xs[k] = in[k].data;
    }
    float *o = out[0].data;
    int64_t blocks = (n + 1023) / 1024;
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN_CHEAP && blocks > 1)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t i = b * 1024, end = n - i < 1024 ? n : i + 1024;
        for (; i + 4 <= end; i += 4) {
            v4f acc, v;
            memcpy(&acc, xs[0] + i, sizeof acc);
            for (int k = 1; k < m; k++) {
                memcpy(&v, xs[k] + i, sizeof v);
                acc = acc + v;
            }
            memcpy(o + i, &acc, sizeof acc);
        }
        for (; i < end; i++) {
            float acc = xs[0][i];
            for (int k = 1; k < m; k++) acc += xs[k][i];
            o[i] = acc;
        }
    }
    return true;
}

ot_status ot_cpu_sum(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                     ot_error *err) {
    int nt = ot_cpu_threads(ctx);
    for (int k = 0; k < node->n_inputs; k++)
        if (in[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[k].dtype, err);
    if (sum_same_shape(node, in, out, nt)) return OT_OK;
    for (int k = 0; k < node->n_inputs; k++) {
        ot_bcast bc;
        ot_status st = ot_kernel_bcast(node, &in[k], 1, &out[0], &bc, err);
        if (st) return st;
        bool par = bc.rows * bc.inner >= OT_CPU_PAR_MIN_CHEAP && bc.rows > 1;
        const float *x = in[k].data;
        float *o = out[0].data;
        int64_t s0 = bc.stride[0][bc.rank - 1];
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t r = 0; r < bc.rows; r++) {
            int64_t off[OT_BCAST_MAX_IN];
            ot_bcast_row(&bc, r, off);
            float *O = o + r * bc.inner;
            const float *X = x + off[0];
            if (k == 0) {
                if (O != X)
                    for (int64_t i = 0; i < bc.inner; i++) O[i] = X[i * s0];
            } else {
                for (int64_t i = 0; i < bc.inner; i++) O[i] += X[i * s0];
            }
        }
    }
    return OT_OK;
}
