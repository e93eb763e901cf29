/* cpu_matmul.c — Gemm and MatMul on the CPU through ot_cpu_sgemm (OpenBLAS or oneDNN,
 * as kernels/cpu/gemm_select.c picks, on the context's threads); with bfloat16 or
 * float16 A and B (Y float32 or A's dtype) through ot_cpu_gemm_lowp
 * (kernels/cpu/gemm_lowp.c), float32 sums.
 *
 * Each GEMM library threads a call itself, so a batched MatMul either runs its GEMMs
 * one after another, each on all the threads, or (ot_gemm_batch_parallel: many small
 * ones) spreads them over the threads with one single-threaded GEMM each. A GEMM's
 * bits depend on its shape and thread count only, never on which thread runs it, so
 * the spread batches give the bits of the same GEMMs run one by one on one thread
 * (tests/test_gemm_select.c). */
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/gemm_lowp.h"
#include "kernels/cpu/gemm_select.h"
#include "kernels/half_float.h"
#include "kernels/matmul_geometry.h"

static ot_status mm_shape(const ot_node *node, const char *what, ot_error *err) {
    return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): %s", node->name, node->op_type, what);
}

static bool is_lowp(ot_dtype t) { return t == OT_BF16 || t == OT_F16; }

/* element i of a float32, float16 or bfloat16 buffer */
static float load_f(const void *p, ot_dtype t, int64_t i) {
    if (t == OT_BF16) return ot_hf_bf16_to_f32(((const uint16_t *)p)[i]);
    if (t == OT_F16) return ot_hf_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

static void store_f(void *p, ot_dtype t, int64_t i, float v) {
    if (t == OT_BF16) ((uint16_t *)p)[i] = ot_hf_f32_to_bf16(v);
    else if (t == OT_F16) ((uint16_t *)p)[i] = ot_hf_f32_to_f16(v);
    else ((float *)p)[i] = v;
}

/* Y = beta C broadcast to (M, N), in Y's dtype (a low-precision Y holds beta C
 * rounded, as the bias of PyTorch's autocast addmm is). */
static ot_status gemm_bias(const ot_node *node, const ot_tensor *c, ot_tensor *y, float beta, ot_error *err) {
    ot_bcast bc;
    const ot_shape *cs = &c->shape;
    if (!ot_bcast_init(&bc, &y->shape, &cs, 1)) return mm_shape(node, "C does not broadcast to (M, N)", err);
    int64_t sc = bc.stride[0][bc.rank - 1];
    for (int64_t r = 0; r < bc.rows; r++) {
        int64_t off;
        ot_bcast_row(&bc, r, &off);
        for (int64_t i = 0; i < bc.inner; i++)
            store_f(y->data, y->dtype, r * bc.inner + i, beta * load_f(c->data, c->dtype, off + i * sc));
    }
    return OT_OK;
}

/* Gemm with bfloat16 or float16 A and B: Y float32 or A's dtype, C float32 or A's. */
static ot_status gemm_lowp(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    ot_dtype t = in[0].dtype, yt = out[0].dtype;
    if (in[1].dtype != t) return ot_cpu_bad_dtype(node, "input 1 (with a low-precision input 0)", in[1].dtype, err);
    if (!ot_gemm_lowp_dtypes(t, yt)) return ot_cpu_bad_dtype(node, "output", yt, err);
    bool has_c = node->n_inputs > 2 && in[2].data;
    if (has_c && in[2].dtype != OT_F32 && in[2].dtype != t) return ot_cpu_bad_dtype(node, "input 2", in[2].dtype, err);
    ot_matmul_geometry mg;
    ot_status st = ot_gemm_geometry_init(&mg, node, &in[0], &in[1], &out[0], err);
    if (st) return st;
    has_c = has_c && mg.beta != 0.0f;
    if (has_c && (st = gemm_bias(node, &in[2], &out[0], mg.beta, err))) return st;
    if (mg.M == 0 || mg.N == 0) return OT_OK;
    if (mg.K == 0) {
        if (!has_c) memset(out[0].data, 0, (size_t)(mg.M * mg.N) * ot_dtype_size(yt));
        return OT_OK;
    }
    ot_gemm_lowp_args g = {.ta = mg.ta, .tb = mg.tb, .M = mg.M, .N = mg.N, .K = mg.K, .alpha = mg.alpha,
                           .beta = has_c ? 1.0f : 0.0f, .ab = t, .c = yt, .A = in[0].data, .B = in[1].data,
                           .C = out[0].data, .lda = in[0].shape.dim[1], .ldb = in[1].shape.dim[1], .ldc = mg.N};
    return ot_cpu_gemm_lowp(node, ctx, &g, err);
}

ot_status ot_cpu_gemm(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                      ot_error *err) {
    if (is_lowp(in[0].dtype)) return gemm_lowp(node, in, out, ctx, err);
    for (int k = 0; k < node->n_inputs && k < 3; k++)
        if (in[k].data && in[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "an input", in[k].dtype, err);
    if (out[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    const ot_shape *as = &in[0].shape, *bs = &in[1].shape;
    ot_matmul_geometry mg;
    ot_status st = ot_gemm_geometry_init(&mg, node, &in[0], &in[1], &out[0], err);
    if (st) return st;
    bool ta = mg.ta, tb = mg.tb;
    float alpha = mg.alpha, beta = mg.beta;
    int64_t M = mg.M, K = mg.K, N = mg.N;
    float *y = out[0].data;
    bool has_c = node->n_inputs > 2 && in[2].data;
    if (has_c && beta != 0.0f) {
        ot_bcast bc;
        const ot_shape *cs = &in[2].shape;
        if (!ot_bcast_init(&bc, &out[0].shape, &cs, 1)) return mm_shape(node, "C does not broadcast to (M, N)", err);
        const float *c = in[2].data;
        int64_t sc = bc.stride[0][bc.rank - 1];
        for (int64_t r = 0; r < bc.rows; r++) {
            int64_t off;
            ot_bcast_row(&bc, r, &off);
            for (int64_t i = 0; i < bc.inner; i++) y[r * bc.inner + i] = beta * c[off + i * sc];
        }
    }
    if (M == 0 || N == 0) return OT_OK;
    if (K == 0) {
        if (!(has_c && beta != 0.0f)) memset(y, 0, (size_t)(M * N) * sizeof(float));
        return OT_OK;
    }
    ot_cpu_sgemm(ctx, ta, tb, (int)M, (int)N, (int)K,
                alpha, in[0].data, (int)as->dim[1], in[1].data, (int)bs->dim[1], (has_c && beta != 0.0f) ? 1.0f : 0.0f,
                y, (int)N);
    return OT_OK;
}

/* Batch i of a MatMul: by ot_cpu_sgemm on ctx's threads, or with ctx NULL by impl on
 * the calling thread alone. */
static void mm_batch(const ot_matmul_geometry *mg, const float *a, const float *b, float *y, int64_t i,
                     const ot_kernel_ctx *ctx, ot_gemm_impl impl) {
    int64_t M = mg->M, K = mg->K, N = mg->N, oa, ob;
    ot_matmul_batch_offsets(mg, i, &oa, &ob);
    if (M == 1 && N == 1) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += (double)a[oa + k] * b[ob + k * N];
        y[i] = (float)s;
    } else if (ctx) {
        ot_cpu_sgemm(ctx, false, false, (int)M, (int)N, (int)K, 1.0f, a + oa, (int)K, b + ob, (int)N, 0.0f,
                     y + i * M * N, (int)N);
    } else {
        ot_gemm_run(impl, 1, false, false, (int)M, (int)N, (int)K, 1.0f, a + oa, (int)K, b + ob, (int)N, 0.0f,
                    y + i * M * N, (int)N);
    }
}

/* MatMul with numpy semantics: 1-D operands are promoted (and the added dim removed
 * from the result), leading batch dims broadcast. */
static bool matmul_tall(const ot_matmul_geometry *mg) {
    bool b_shared = true, a_dense = true;
    for (int d = 0; d < mg->r; d++) {
        if (mg->sb[d] != 0) b_shared = false;
        if (mg->sa[d] == 0 && mg->bdim[d] != 1) a_dense = false;
    }
    return b_shared && a_dense;
}

/* MatMul with bfloat16 or float16 operands: one tall GEMM when B is shared and A's
 * batches are contiguous, else one GEMM per batch (each of the same shape, so one
 * oneDNN primitive serves them all). */
static ot_status matmul_lowp(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                             ot_error *err) {
    ot_dtype t = in[0].dtype, yt = out[0].dtype;
    if (in[1].dtype != t) return ot_cpu_bad_dtype(node, "input 1 (with a low-precision input 0)", in[1].dtype, err);
    if (!ot_gemm_lowp_dtypes(t, yt)) return ot_cpu_bad_dtype(node, "output", yt, err);
    ot_matmul_geometry mg;
    ot_status st = ot_matmul_geometry_init(&mg, node, &in[0], &in[1], &out[0], err);
    if (st) return st;
    int64_t M = mg.M, K = mg.K, N = mg.N, batch = mg.batch;
    size_t ys = ot_dtype_size(yt);
    if (batch * M * N == 0) return OT_OK;
    if (K == 0) {
        memset(out[0].data, 0, (size_t)(batch * M * N) * ys);
        return OT_OK;
    }
    const char *a = in[0].data, *b = in[1].data;
    char *y = out[0].data;
    ot_gemm_lowp_args g = {.M = M, .N = N, .K = K, .alpha = 1.0f, .ab = t, .c = yt, .lda = K, .ldb = N, .ldc = N};
    if (matmul_tall(&mg)) {
        g.M = batch * M, g.A = a, g.B = b, g.C = y;
        return ot_cpu_gemm_lowp(node, ctx, &g, err);
    }
    for (int64_t i = 0; i < batch && !st; i++) {
        int64_t oa, ob;
        ot_matmul_batch_offsets(&mg, i, &oa, &ob);
        g.A = a + oa * 2, g.B = b + ob * 2, g.C = y + (size_t)(i * M * N) * ys;
        st = ot_cpu_gemm_lowp(node, ctx, &g, err);
    }
    return st;
}

size_t ot_cpu_matmul_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    /* a mixed pair asks none: the kernel then names the bad dtype (it checks after the
     * workspace) */
    if (!is_lowp(in[0].dtype) || in[1].dtype != in[0].dtype) return 0;
    ot_matmul_geometry mg;
    ot_status st = node->op == OT_OP_GEMM ? ot_gemm_geometry_init(&mg, node, &in[0], &in[1], &out[0], NULL)
                                          : ot_matmul_geometry_init(&mg, node, &in[0], &in[1], &out[0], NULL);
    if (st) return 0;
    int64_t M = node->op == OT_OP_MATMUL && matmul_tall(&mg) ? mg.batch * mg.M : mg.M;
    return ot_gemm_lowp_workspace(in[0].dtype, out[0].dtype, M, mg.N, mg.K);
}

ot_status ot_cpu_matmul(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                        ot_error *err) {
    if (is_lowp(in[0].dtype)) return matmul_lowp(node, in, out, ctx, err);
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input 0", in[0].dtype, err);
    if (in[1].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input 1", in[1].dtype, err);
    ot_matmul_geometry mg;
    ot_status st = ot_matmul_geometry_init(&mg, node, &in[0], &in[1], &out[0], err);
    if (st) return st;
    int64_t M = mg.M, K = mg.K, N = mg.N, batch = mg.batch;
    const float *a = in[0].data, *b = in[1].data;
    float *y = out[0].data;
    if (batch * M * N == 0) return OT_OK;
    if (K == 0) {
        memset(y, 0, (size_t)(batch * M * N) * sizeof(float));
        return OT_OK;
    }
    /* B shared by every batch and A's batches contiguous: one tall GEMM. */
    if (matmul_tall(&mg)) {
        ot_cpu_sgemm(ctx, false, false, (int)(batch * M), (int)N, (int)K, 1.0f, a, (int)K, b,
                    (int)N, 0.0f, y, (int)N);
        return OT_OK;
    }
    int nt = ot_cpu_threads(ctx);
    if (ot_gemm_batch_parallel(batch, (int)M, (int)N, (int)K, nt)) {
        ot_gemm_impl one = ot_gemm_select(false, false, (int)M, (int)N, (int)K, 1);
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t i = 0; i < batch; i++) mm_batch(&mg, a, b, y, i, NULL, one);
    } else {
        for (int64_t i = 0; i < batch; i++) mm_batch(&mg, a, b, y, i, ctx, OT_GEMM_OPENBLAS);
    }
    return OT_OK;
}
