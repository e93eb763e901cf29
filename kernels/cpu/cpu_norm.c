/* cpu_norm.c — normalisation-like CPU kernels: Softmax / LogSoftmax (opset 13
 * axis semantics, or opset < 13 2-D coercion when "legacy_2d" is 1),
 * BatchNormalization (inference, and training: running variance updated with the
 * population variance as ONNX says, or the unbiased one as PyTorch does when the
 * importer sets int attribute "unbiased_running_var"),
 * LayerNormalization (optional Mean / InvStdDev) and Dropout (Philox mask, see
 * exec/rng.h). Statistics accumulate in double, in a fixed order. */
#include <math.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_lowp.h" /* the bfloat16 / float16 runs of BatchNormalization and Dropout */
#include "kernels/norm_geometry.h"
#include "kernels/cpu/cpu_vecmath.h" /* ot_cpu_expf_n, ot_cpu_max_f32 */
#include "kernels/cpu/cpu_philox.h" /* ot_cpu_philox_uniforms */
#include "exec/rng.h"

/* Softmax over n <= SM_LINES contiguous lines (inner = 1, attention's last axis),
 * each with the rule of one line at a time below: the running max (ot_cpu_max_f32),
 * x - max, expf (ot_cpu_expf_n: expf's bits), one float sum in order, times 1/sum.
 * The lines' sums run side by side, independent chains instead of one waiting on the
 * adder; called with n = SM_LINES where it is, so the lane loops unroll. y may be x. */
#define SM_LINES 4

static inline __attribute__((always_inline)) void softmax_lines(const float *x, float *y, int64_t len, int n) {
    float sum[SM_LINES];
    for (int k = 0; k < n; k++) {
        const float *xl = x + k * len;
        float *yl = y + k * len;
        float mx = ot_cpu_max_f32(xl, len);
        if (mx == -INFINITY) mx = 0.0f; /* all -inf: avoid inf - inf */
        for (int64_t j = 0; j < len; j++) yl[j] = xl[j] - mx;
        ot_cpu_expf_n(yl, yl, len);
        sum[k] = 0.0f;
    }
    if (n == SM_LINES) { /* four chains in registers */
        const float *y0 = y, *y1 = y + len, *y2 = y + 2 * len, *y3 = y + 3 * len;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (int64_t j = 0; j < len; j++) s0 += y0[j], s1 += y1[j], s2 += y2[j], s3 += y3[j];
        sum[0] = s0, sum[1] = s1, sum[2] = s2, sum[3] = s3;
    } else {
        for (int k = 0; k < n; k++)
            for (int64_t j = 0; j < len; j++) sum[k] += y[k * len + j];
    }
    for (int k = 0; k < n; k++) {
        float inv = 1.0f / sum[k], *yl = y + k * len;
        for (int64_t j = 0; j < len; j++) yl[j] *= inv;
    }
}

ot_status ot_cpu_softmax(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                         ot_error *err) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[0].dtype, err);
    const ot_shape *s = &in[0].shape;
    int r = s->rank;
    if (ot_kernel_numel(&out[0]) != ot_kernel_numel(&in[0]))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output size differs from input", node->name, node->op_type);
    if (r == 0) {
        ((float *)out[0].data)[0] = node->op == OT_OP_LOG_SOFTMAX ? 0.0f : 1.0f;
        return OT_OK;
    }
    ot_softmax_geometry g;
    ot_status st = ot_softmax_geometry_init(&g, node, s, err);
    if (st) return st;
    int64_t len = g.len, inner = g.inner;
    bool logsm = node->op == OT_OP_LOG_SOFTMAX;
    const float *x = in[0].data;
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
    int64_t lines = g.lines;
    bool par = lines * len >= OT_CPU_PAR_MIN && lines > 1;
    if (!logsm && inner == 1) {
        int64_t groups = (lines + SM_LINES - 1) / SM_LINES;
#pragma omp parallel for schedule(static) num_threads(nt) if (par && groups > 1)
        for (int64_t t = 0; t < groups; t++) {
            int64_t l0 = t * SM_LINES;
            int n = (int)(lines - l0 < SM_LINES ? lines - l0 : SM_LINES);
            if (n == SM_LINES) softmax_lines(x + l0 * len, y + l0 * len, len, SM_LINES);
            else softmax_lines(x + l0 * len, y + l0 * len, len, n);
        }
        return OT_OK;
    }
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t l = 0; l < lines; l++) {
        int64_t o = l / inner, i = l % inner;
        const float *xl = x + o * len * inner + i;
        float *yl = y + o * len * inner + i;
        float mx = -INFINITY;
        for (int64_t k = 0; k < len; k++) mx = xl[k * inner] > mx ? xl[k * inner] : mx;
        if (mx == -INFINITY) mx = 0.0f; /* all -inf: avoid inf - inf */
        float sum = 0.0f;
        if (logsm) {
            for (int64_t k = 0; k < len; k++) sum += expf(xl[k * inner] - mx);
            /* (x - max) - log(sum), not x - (max + log(sum)): the latter loses the
             * small term when max is large */
            float ls = logf(sum);
            for (int64_t k = 0; k < len; k++) yl[k * inner] = (xl[k * inner] - mx) - ls;
        } else {
            for (int64_t k = 0; k < len; k++) {
                float e = expf(xl[k * inner] - mx);
                yl[k * inner] = e;
                sum += e;
            }
            float inv = 1.0f / sum;
            for (int64_t k = 0; k < len; k++) yl[k * inner] *= inv;
        }
    }
    return OT_OK;
}

/* Four floats as one SSE register (GCC and Clang vector extension). */
typedef float v4f __attribute__((vector_size(16)));

/* X and Y of BatchNormalization are float32, or bfloat16 / float16 (issue 27: the
 * activations between a ResNet's convolutions stay low) with float32 scale, bias and
 * statistics: the float32 math below on X's exact float32 values, Y rounded to
 * nearest even. bn_channel is always inlined with a constant t, so the float32
 * instance is the plain loop over the planes. */
typedef struct bn_args {
    const void *x;
    void *y;
    const float *scale, *bias, *rmean, *rvar;
    float *om, *ov;
    int64_t N, C, sz;
    float eps, mom;
    bool training, unbiased_stats;
} bn_args;

/* The float32 rule on one run of x: element i adds to sum i % 4 (len a multiple of 4
 * except at a plane's end, so a run split in such pieces adds in the plane's order). */
static inline __attribute__((always_inline)) void bn_sum(const float *x, int64_t len, double *s4) {
    int64_t i = 0;
    for (; i + 4 <= len; i += 4)
        for (int k = 0; k < 4; k++) s4[k] += x[i + k];
    for (; i < len; i++) s4[i & 3] += x[i];
}
static inline __attribute__((always_inline)) void bn_sqsum(const float *x, int64_t len, double mean, double *q4) {
    int64_t i = 0;
    for (; i + 4 <= len; i += 4)
        for (int k = 0; k < 4; k++) {
            double d = x[i + k] - mean;
            q4[k] += d * d;
        }
    for (; i < len; i++) {
        double d = x[i] - mean;
        q4[i & 3] += d * d;
    }
}
/* y = x * a + b, 4 lanes per step (the plain loop stays scalar at -O2): per lane the
 * same multiply and add. y may alias x (in place); each lane reads its x before
 * writing its y. */
static inline __attribute__((always_inline)) void bn_affine(const float *x, float *y, int64_t len, float a, float b) {
    const v4f a4 = {a, a, a, a}, b4 = {b, b, b, b};
    int64_t i = 0;
    for (; i + 4 <= len; i += 4) {
        v4f xv;
        memcpy(&xv, x + i, sizeof xv);
        xv = xv * a4 + b4;
        memcpy(y + i, &xv, sizeof xv);
    }
    for (; i < len; i++) y[i] = x[i] * a + b;
}

/* Low-precision planes go through float32 runs of BN_RUN elements on the stack
 * (widened and rounded to nearest even by cpu_lowp.c's vector converters, the scalar
 * rule's bits), so every element sees the float32 instance's operations in its order;
 * it replaces a scalar widening and rounding per element (5.8% of ResNet-18's bf16
 * step, bench/results_precision.md). */
#define BN_RUN 2048
enum { BN_SUM, BN_SQSUM, BN_AFFINE };

static inline __attribute__((always_inline)) void bn_plane(const bn_args *ba, ot_dtype t, int64_t o, int pass,
                                                           double mean, float a, float b, double *acc) {
    const int64_t sz = ba->sz;
    if (t == OT_F32) {
        const float *x = (const float *)ba->x + o;
        if (pass == BN_SUM) bn_sum(x, sz, acc);
        else if (pass == BN_SQSUM) bn_sqsum(x, sz, mean, acc);
        else bn_affine(x, (float *)ba->y + o, sz, a, b);
        return;
    }
    float buf[BN_RUN];
    for (int64_t r = 0; r < sz; r += BN_RUN) {
        int64_t len = sz - r < BN_RUN ? sz - r : BN_RUN;
        ot_cpu_lowp_to_f32_serial(t, (const uint16_t *)ba->x + o + r, buf, len);
        if (pass == BN_SUM) {
            bn_sum(buf, len, acc);
        } else if (pass == BN_SQSUM) {
            bn_sqsum(buf, len, mean, acc);
        } else {
            bn_affine(buf, buf, len, a, b);
            ot_cpu_lowp_from_f32_serial(t, buf, (uint16_t *)ba->y + o + r, len);
        }
    }
}

static inline __attribute__((always_inline)) void bn_channel(const bn_args *ba, ot_dtype t, int64_t c) {
    const int64_t N = ba->N, C = ba->C, sz = ba->sz, cnt = N * sz;
    double mean, var;
    if (ba->training) {
        /* Four partial sums (element i goes to sum i % 4 of its plane), added up
         * in a fixed order at the end: one dependent add chain per element was the
         * bottleneck (bench/NOTES.md). Still independent of the thread count. */
        double s4[4] = {0.0, 0.0, 0.0, 0.0};
        for (int64_t n = 0; n < N; n++) bn_plane(ba, t, (n * C + c) * sz, BN_SUM, 0.0, 0.0f, 0.0f, s4);
        mean = cnt ? ((s4[0] + s4[1]) + (s4[2] + s4[3])) / (double)cnt : 0.0;
        double q4[4] = {0.0, 0.0, 0.0, 0.0};
        for (int64_t n = 0; n < N; n++) bn_plane(ba, t, (n * C + c) * sz, BN_SQSUM, mean, 0.0f, 0.0f, q4);
        var = cnt ? ((q4[0] + q4[1]) + (q4[2] + q4[3])) / (double)cnt : 0.0;
    } else {
        mean = ba->rmean[c];
        var = ba->rvar[c];
    }
    float inv = (float)(1.0 / sqrt(var + (double)ba->eps));
    float a = ba->scale[c] * inv, b = ba->bias[c] - (float)mean * a;
    /* running stats are read before written: outputs may alias inputs 3 and 4 */
    float rm = ba->rmean[c], rv = ba->rvar[c];
    for (int64_t n = 0; n < N; n++) bn_plane(ba, t, (n * C + c) * sz, BN_AFFINE, 0.0, a, b, NULL);
    if (ba->training) {
        /* ONNX: population variance; PyTorch-exported models (importer sets the
         * attribute): unbiased, as torch.nn.BatchNorm updates it. */
        double unbiased = (ba->unbiased_stats && cnt > 1) ? var * (double)cnt / (double)(cnt - 1) : var;
        if (ba->om) ba->om[c] = ba->mom * rm + (1.0f - ba->mom) * (float)mean;
        if (ba->ov) ba->ov[c] = ba->mom * rv + (1.0f - ba->mom) * (float)unbiased;
    } else {
        if (ba->om) ba->om[c] = rm;
        if (ba->ov) ba->ov[c] = rv;
    }
}

ot_status ot_cpu_batch_norm(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                            ot_error *err) {
    ot_dtype t = in[0].dtype;
    if (t != OT_F32 && t != OT_BF16 && t != OT_F16) return ot_cpu_bad_dtype(node, "input X", t, err);
    if (out[0].dtype != t) return ot_cpu_bad_dtype(node, "output Y", out[0].dtype, err);
    for (int k = 1; k < 5; k++)
        if (in[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "an input", in[k].dtype, err);
    for (int k = 1; k < node->n_outputs && k < 3; k++)
        if (out[k].data && out[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "a running statistic", out[k].dtype, err);
    const ot_shape *s = &in[0].shape;
    if (s->rank < 2) return ot_fail(err, OT_E_SHAPE, "node '%s' (BatchNormalization): rank < 2", node->name);
    int64_t N, C, sz;
    ot_batch_norm_dims(s, &N, &C, &sz);
    for (int k = 1; k < 5; k++)
        if (ot_kernel_numel(&in[k]) != C)
            return ot_fail(err, OT_E_SHAPE, "node '%s' (BatchNormalization): input %d is not of length C=%lld",
                           node->name, k, (long long)C);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_norm_params *np = &pp->u.norm;
    bn_args ba = {.x = in[0].data, .y = out[0].data, .scale = in[1].data, .bias = in[2].data,
                  .rmean = in[3].data, .rvar = in[4].data,
                  .om = node->n_outputs > 1 && out[1].data ? out[1].data : NULL,
                  .ov = node->n_outputs > 2 && out[2].data ? out[2].data : NULL,
                  .N = N, .C = C, .sz = sz, .eps = np->epsilon, .mom = np->momentum,
                  .training = np->training_mode, .unbiased_stats = np->unbiased_running_var};
    int nt = ot_cpu_threads(ctx);
    bool par = N * C * sz >= OT_CPU_PAR_MIN && C > 1;
    if (t == OT_F32) {
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t c = 0; c < C; c++) bn_channel(&ba, OT_F32, c);
    } else if (t == OT_BF16) {
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t c = 0; c < C; c++) bn_channel(&ba, OT_BF16, c);
    } else {
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t c = 0; c < C; c++) bn_channel(&ba, OT_F16, c);
    }
    return OT_OK;
}

ot_status ot_cpu_layer_norm(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                            ot_error *err) {
    for (int k = 0; k < node->n_inputs; k++)
        if (in[k].data && in[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "an input", in[k].dtype, err);
    ot_layer_norm_args la;
    ot_status pst = ot_layer_norm_args_init(&la, node, in, out, err);
    if (pst) return pst;
    int64_t rows = la.rows, cols = la.cols, ss = la.scale_step, sb = la.bias_step;
    float eps = la.eps;
    const float *x = in[0].data, *scale = in[1].data;
    const float *bias = la.has_bias ? in[2].data : NULL;
    float *y = out[0].data;
    float *om = node->n_outputs > 1 && out[1].data ? out[1].data : NULL;
    float *oi = node->n_outputs > 2 && out[2].data ? out[2].data : NULL;
    int nt = ot_cpu_threads(ctx);
    bool par = rows * cols >= OT_CPU_PAR_MIN && rows > 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        /* four partial sums in a fixed order, as in BatchNormalization above */
        double s4[4] = {0.0, 0.0, 0.0, 0.0}, q4[4] = {0.0, 0.0, 0.0, 0.0};
        int64_t i4 = cols - cols % 4;
        for (int64_t i = 0; i < i4; i += 4)
            for (int k = 0; k < 4; k++) s4[k] += xr[i + k];
        for (int64_t i = i4; i < cols; i++) s4[i & 3] += xr[i];
        double mean = cols ? ((s4[0] + s4[1]) + (s4[2] + s4[3])) / (double)cols : 0.0;
        for (int64_t i = 0; i < i4; i += 4)
            for (int k = 0; k < 4; k++) {
                double d = xr[i + k] - mean;
                q4[k] += d * d;
            }
        for (int64_t i = i4; i < cols; i++) {
            double d = xr[i] - mean;
            q4[i & 3] += d * d;
        }
        double sq = (q4[0] + q4[1]) + (q4[2] + q4[3]);
        float inv = (float)(1.0 / sqrt((cols ? sq / (double)cols : 0.0) + (double)eps));
        float m = (float)mean;
        for (int64_t i = 0; i < cols; i++) {
            float v = (xr[i] - m) * inv * scale[i * ss];
            yr[i] = bias ? v + bias[i * sb] : v;
        }
        if (om) om[r] = m;
        if (oi) oi[r] = inv;
    }
    return OT_OK;
}

/* Dropout runs in blocks: the uniforms of a block come in bulk (cpu_philox.c). */
#define DROP_BLOCK 256

ot_status ot_cpu_dropout(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                         ot_error *err) {
    ot_dtype t = in[0].dtype; /* float32, or bfloat16 / float16 in and out (issue 27) */
    if (t != OT_F32 && t != OT_BF16 && t != OT_F16) return ot_cpu_bad_dtype(node, "input", t, err);
    if (out[0].dtype != t) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    int64_t n = ot_kernel_numel(&in[0]);
    if (ot_kernel_numel(&out[0]) != n)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (Dropout): output size differs from input", node->name);
    /* attributes are the normalised form; fall back to the opset-12 inputs */
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_dropout_params *dp = &pp->u.dropout;
    float ratio = 0.5f;
    double dv;
    if (dp->has_ratio) ratio = dp->ratio;
    else if (node->n_inputs > 1 && in[1].data && ot_kernel_load_double(in[1].dtype, in[1].data, 0, &dv)) ratio = (float)dv;
    bool training = false;
    int64_t iv;
    if (dp->has_training_mode) training = dp->training_mode;
    else if (node->n_inputs > 2 && in[2].data && ot_kernel_load_int(in[2].dtype, in[2].data, 0, &iv)) training = iv != 0;
    if (ratio < 0.0f || ratio > 1.0f)
        return ot_fail(err, OT_E_MODEL, "node '%s' (Dropout): ratio %g outside [0, 1]", node->name, (double)ratio);
    const char *x = in[0].data;
    char *y = out[0].data;
    size_t es = ot_dtype_size(t);
    uint8_t *mask = node->n_outputs > 1 && out[1].data ? out[1].data : NULL;
    if (mask && out[1].dtype != OT_BOOL) return ot_cpu_bad_dtype(node, "mask", out[1].dtype, err);
    if (!training || ratio == 0.0f) {
        if (y != x) memmove(y, x, (size_t)n * es);
        if (mask) memset(mask, 1, (size_t)n);
        return OT_OK;
    }
    float scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
    uint64_t seed = ctx->seed, step = ctx->step;
    uint32_t nid = (uint32_t)ctx->rng_node;
    int nt = ot_cpu_threads(ctx);
    bool par = n >= OT_CPU_PAR_MIN / 4;
    /* The draws of a block come 8 lanes wide where the CPU has AVX2; the masks are
     * those of ot_dropout_keep, bit for bit. */
    int64_t blocks = (n + DROP_BLOCK - 1) / DROP_BLOCK;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t i0 = b * DROP_BLOCK, len = n - i0 < DROP_BLOCK ? n - i0 : DROP_BLOCK;
        float u[DROP_BLOCK];
        ot_cpu_philox_uniforms(seed, step, nid, (uint64_t)i0, len, u);
        ot_cpu_dropout_select_any(t, u, ratio, x + i0 * es, scale, y + i0 * es, mask ? mask + i0 : NULL, len);
    }
    return OT_OK;
}
