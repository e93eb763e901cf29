/* cpu_xfmr.c — CPU kernels of the transformer ops of issue 26: RMSNormalization,
 * RotaryEmbedding, Attention and their backward ops. RMSNorm and RotaryEmbedding run
 * kernels/xfmr_geometry.h's element code, shared with the CUDA launchers
 * (cuda_xfmr.cu), one unit per OpenMP iteration, each unit's sums in its own fixed
 * order: the bits do not depend on the thread count and the CUDA host mode gives the
 * same ones. Attention runs its products through ot_cpu_sgemm (below), in float32 or,
 * with bfloat16 / float16 Q, K and V, on float32 copies of one head at a time. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/grad_kernels.h"
#include "kernels/cpu/cpu_lowp.h"    /* the low dtypes' converters, a head's rows at a time */
#include "kernels/cpu/cpu_philox.h"  /* ot_cpu_philox_uniforms: the absorbed Dropout's draws */
#include "kernels/cpu/cpu_vecmath.h" /* ot_cpu_dropout_select: its keep-and-scale */
#include "kernels/xfmr_geometry.h"

static ot_status f32_inputs(const ot_node *node, const ot_tensor *in, int first, int last, ot_error *err) {
    for (int k = first; k <= last && k < node->n_inputs; k++)
        if (ot_xfmr_input(node, in, k) && in[k].dtype != OT_F32)
            return ot_cpu_bad_dtype(node, "an input", in[k].dtype, err);
    return OT_OK;
}

static ot_status need_ws(const ot_node *node, const ot_kernel_ctx *ctx, size_t bytes, ot_error *err) {
    if (bytes && (!ctx->workspace || ctx->workspace_bytes < bytes))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): workspace missing", node->name, ot_op_name(node->op));
    return OT_OK;
}

/* ---- RMSNormalization ----------------------------------------------------------- */

ot_status ot_cpu_rms_norm(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    ot_rms_geom g;
    ot_status st = f32_inputs(node, in, 0, 1, err);
    if (!st) st = ot_rms_geometry(&g, node, &in[0].shape, ot_kernel_numel(&in[1]), err);
    if (st) return st;
    const float *x = in[0].data, *sc = in[1].data;
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (g.rows * g.cols >= OT_CPU_PAR_MIN && g.rows > 1)
    for (int64_t r = 0; r < g.rows; r++)
        ot_rms_row(&g, r, x, sc, y);
    return OT_OK;
}

size_t ot_cpu_rms_norm_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    return ot_rms_grad_workspace(node, &in[1].shape, ot_kernel_numel(&in[2]));
}

OT_GRAD_KERNEL(ot_cpu_rms_norm_grad) {
    ot_rms_geom g;
    ot_status st = f32_inputs(node, in, 0, 2, err);
    if (!st) st = ot_rms_geometry(&g, node, &in[1].shape, ot_kernel_numel(&in[2]), err);
    if (!st) st = need_ws(node, ctx, (size_t)(g.rows + g.cols) * sizeof(double), err);
    if (st) return st;
    const float *dy = in[0].data, *x = in[1].data, *sc = in[2].data;
    float *dx = ot_xfmr_output(node, out, 0);
    float *dsc = ot_xfmr_output(node, out, 1);
    double *inv = ctx->workspace, *col = inv + g.rows;
    int nt = ot_cpu_threads(ctx);
    bool par = g.rows * g.cols >= OT_CPU_PAR_MIN;
#pragma omp parallel num_threads(nt) if (par)
    {
#pragma omp for schedule(static)
        for (int64_t r = 0; r < g.rows; r++)
            ot_rms_grad_row(&g, r, dy, x, sc, dx, inv);
        if (dsc) {
#pragma omp for schedule(static)
            for (int64_t j = 0; j < g.cols; j++)
                ot_rms_grad_col(&g, j, dy, x, inv, col, dsc);
        }
    }
    if (dsc && !g.scale_step) ot_rms_grad_scalar(&g, col, dsc);
    return OT_OK;
}

/* ---- RotaryEmbedding (and its inverse, RotaryEmbeddingGrad) ---------------------- */

ot_status ot_cpu_rotary_embedding(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                                  ot_error *err) {
    ot_rope_geom g;
    const ot_tensor *pos = ot_xfmr_input(node, in, 3);
    ot_status st = f32_inputs(node, in, 0, 2, err);
    if (!st && pos && pos->dtype != OT_I64) st = ot_cpu_bad_dtype(node, "position_ids", pos->dtype, err);
    if (!st) st = ot_rope_geometry(&g, node, &in[0].shape, &in[1].shape, &in[2].shape, pos ? &pos->shape : NULL, err);
    const int64_t *pp = pos ? pos->data : NULL;
    if (!st) st = ot_rope_check_positions(&g, node, pp, err);
    if (st) return st;
    bool inverse = node->op == OT_OP_ROTARY_EMBEDDING_GRAD;
    const float *x = in[0].data, *c = in[1].data, *s = in[2].data;
    float *y = out[0].data;
    int64_t units = g.B * g.S * g.H;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (units * g.D >= OT_CPU_PAR_MIN && units > 1)
    for (int64_t u = 0; u < units; u++)
        ot_rope_unit(&g, u, x, c, s, pp, y, inverse);
    return OT_OK;
}

/* ---- Attention -------------------------------------------------------------------- */

static bool lowp(ot_dtype t) { return t == OT_BF16 || t == OT_F16; }

/* The operands of an Attention (o = 0) or AttentionGrad (o = 1: dY first) node as
 * stored: Q, K, V, the past key and value and dY (NULL when absent), all of dtype t,
 * float32 or bfloat16 / float16 (the mask bool or float32, nonpad int64, as ever). */
typedef struct attn_src {
    const void *q, *k, *v, *pk, *pv, *dy;
    ot_dtype t;
} attn_src;

static ot_status attn_setup(const ot_node *node, const ot_tensor *in, int o, ot_attn_geom *g, ot_attn_ptrs *a,
                            attn_src *src, ot_error *err) {
    const ot_tensor *m = ot_xfmr_input(node, in, o + 3), *pk = ot_xfmr_input(node, in, o + 4);
    const ot_tensor *pv = ot_xfmr_input(node, in, o + 5), *np = ot_xfmr_input(node, in, o + 6);
    ot_dtype t = in[o].dtype;
    if (t != OT_F32 && !lowp(t)) return ot_cpu_bad_dtype(node, "Q", t, err);
    for (int k = 0; k <= o + 5 && k < node->n_inputs; k++) /* nonpad (o + 6) is int64 */
        if (ot_xfmr_input(node, in, k) && k != o + 3 && in[k].dtype != t)
            return ot_cpu_bad_dtype(node, "an input (Q's dtype expected)", in[k].dtype, err);
    ot_status st = ot_attn_geometry_of(g, node, in, o, err);
    if (!st && np && np->dtype != OT_I64) st = ot_cpu_bad_dtype(node, "nonpad_kv_seqlen", np->dtype, err);
    if (!st && np) st = ot_attn_check_nonpad(g, node, np->data, err);
    if (st) return st;
    memset(a, 0, sizeof *a);
    *src = (attn_src){in[o].data, in[o + 1].data, in[o + 2].data, pk ? pk->data : NULL, pv ? pv->data : NULL,
                      o ? in[0].data : NULL, t};
    a->mask = m ? m->data : NULL;
    a->nonpad = np ? np->data : NULL;
    if (t == OT_F32) {
        a->q = src->q, a->k = src->k, a->v = src->v, a->pk = src->pk, a->pv = src->pv, a->dy = src->dy;
    }
    return OT_OK;
}

/* The low-precision kernels write outputs of Q's dtype: every present output checked. */
static ot_status lowp_outputs(const ot_node *node, const ot_tensor *out, int n, ot_dtype t, ot_error *err) {
    for (int k = 0; k < n && k < node->n_outputs; k++)
        if (ot_xfmr_output(node, (ot_tensor *)out, k) && out[k].dtype != t)
            return ot_cpu_bad_dtype(node, "an output (Q's dtype expected)", out[k].dtype, err);
    return OT_OK;
}

/* The CPU kernels run each head's products through ot_cpu_sgemm (the scores Q K^T, P V,
 * dP = dY V^T, dQ = dS K, dK = dS^T Q, dV = P^T dY) and the element code of
 * xfmr_geometry.h for what lies between (softcap, bias, softmax, dS), one head (one
 * key/value head in the backward, whose query heads add into dK and dV in order) per
 * OpenMP iteration: about as fast as the MatMul / Softmax graph it replaces, and
 * deterministic for a given thread count. The keys and values are two blocks, the past
 * then the new rows, so no concatenation is made. The CUDA kernels run the element
 * code alone (one thread per row): the two agree within float32 rounding, not bit for bit.
 *
 * With bfloat16 / float16 Q, K, V (issue 27) each head's operands are converted to
 * float32 in the node's workspace, the same head code runs on them, and its results
 * (Y; dQ, dK, dV) are rounded to nearest even into the outputs (cpu_lowp.h's
 * converters): the bits of the float32 kernel reading Casts of the inputs, its
 * outputs then rounded, without the whole tensors' float32 copies. */

/* C = alpha op(A) op(B) + beta C, for any of M, N, K zero (K zero: C = beta C). */
static void gemm(const ot_kernel_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        for (int64_t r = 0; r < M && beta == 0.0f; r++)
            memset(C + r * ldc, 0, (size_t)N * sizeof(float));
        return;
    }
    ot_cpu_sgemm(ctx, ta, tb, (int)M, (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* The key (or value) blocks of (b, hk): the past's rows (leading dim the head size)
 * and the new ones. */
typedef struct kv_blocks {
    const float *past, *cur;
    int64_t ld_cur;
} kv_blocks;

static kv_blocks blocks_of(const ot_attn_geom *g, const float *past, const float *cur, int64_t sb, int64_t sh,
                           int64_t ss, int64_t d, int64_t b, int64_t hk) {
    kv_blocks k = {past ? past + (b * g->Hkv + hk) * g->P * d : NULL, cur + b * sb + hk * sh, ss};
    return k;
}

/* One query head's operands and results with their leading dims: Q_h, the key and
 * value blocks of its group, Y_h (forward) or dY_h (backward), and dQ_h and the
 * group's dK, dV (NULL: not needed). In the tensors (float32) or in float32 scratch. */
typedef struct head_io {
    const float *q, *dy;
    int64_t ldq, ldy;
    kv_blocks k, v;
    float *y, *dq, *dk, *dv;
    int64_t lddq, lddk, lddv;
} head_io;

/* Head (b, h) of float32 tensors. */
static head_io tensor_io(const ot_attn_geom *g, const ot_attn_ptrs *a, int64_t b, int64_t h) {
    int64_t hk = h / (g->Hq / g->Hkv), yo = b * g->y_sb + h * g->y_sh, qo = b * g->q_sb + h * g->q_sh;
    head_io io = {.q = a->q + qo, .ldq = g->q_ss, .ldy = g->y_ss, .lddq = g->q_ss, .lddk = g->k_ss, .lddv = g->v_ss};
    io.k = blocks_of(g, a->pk, a->k, g->k_sb, g->k_sh, g->k_ss, g->D, b, hk);
    io.v = blocks_of(g, a->pv, a->v, g->v_sb, g->v_sh, g->v_ss, g->Dv, b, hk);
    if (a->y) io.y = a->y + yo;
    if (a->dy) io.dy = a->dy + yo;
    if (a->dq) io.dq = a->dq + qo;
    if (a->dk) io.dk = a->dk + b * g->k_sb + hk * g->k_sh;
    if (a->dv) io.dv = a->dv + b * g->v_sb + hk * g->v_sh;
    return io;
}

/* s (Sq x T) = scale Q_h K^T. */
static void head_scores(const ot_kernel_ctx *c1, const ot_attn_geom *g, const head_io *io, float *s) {
    if (g->P) gemm(c1, false, true, g->Sq, g->P, g->D, g->scale, io->q, io->ldq, io->k.past, g->D, 0.0f, s, g->T);
    gemm(c1, false, true, g->Sq, g->Skv, g->D, g->scale, io->q, io->ldq, io->k.cur, io->k.ld_cur, 0.0f, s + g->P, g->T);
}

/* out (Sq x n, ldo) = s (Sq x T) times the T rows of (b, hk)'s blocks (past, then new). */
static void times_blocks(const ot_kernel_ctx *c1, const ot_attn_geom *g, const float *s, kv_blocks v, int64_t n,
                         float *out, int64_t ldo) {
    if (g->P) gemm(c1, false, false, g->Sq, n, g->P, 1.0f, s, g->T, v.past, n, 0.0f, out, ldo);
    gemm(c1, false, false, g->Sq, n, g->Skv, 1.0f, s + g->P, g->T, v.cur, v.ld_cur, g->P ? 1.0f : 0.0f, out, ldo);
}

/* The heads (forward) or key/value groups (backward) in flight at once: the workspace
 * holds their score blocks only, never every head's (issue 28: at GPT-2 small's batch
 * 8 all heads' probabilities are 24 MiB a layer, three times that in the backward).
 * Each head's products and element code are the same whatever the chunk, so results
 * do not depend on it; 16 keeps 16 threads busy. */
#define ATTN_CHUNK 16

/* Floats rounded up to 64 bytes, so each piece of a unit's scratch starts aligned. */
static int64_t al16(int64_t n) { return (n + 15) / 16 * 16; }

/* A low-precision unit's float32 scratch before its score blocks: Q_h, K, V, Y_h
 * (forward); Q_h, dY_h, K, V, dQ_h, dK, dV (backward). */
static int64_t lowp_copies(const ot_attn_geom *g, bool grad) {
    int64_t n = al16(g->Sq * g->D) + al16(g->T * g->D) + al16(g->T * g->Dv) + al16(g->Sq * g->Dv);
    return grad ? n + al16(g->Sq * g->D) + al16(g->Skv * g->D) + al16(g->Skv * g->Dv) : n;
}

/* The units in flight at once and each one's floats: the score blocks (P; in the
 * backward P, dP then dS, and the raw scores), and the float32 copies of a
 * low-precision node. */
static int64_t attn_units(const ot_node *node, const ot_tensor *in, bool grad, int64_t *per_unit) {
    ot_attn_geom g;
    ot_error ignored;
    if (ot_attn_geometry_of(&g, node, in, grad ? 1 : 0, &ignored)) return 0;
    int64_t units = grad ? g.B * g.Hkv : g.B * g.Hq;
    *per_unit = g.Sq * g.T * (grad ? 3 : 1) + (lowp(in[grad ? 1 : 0].dtype) ? lowp_copies(&g, grad) : 0);
    return units < ATTN_CHUNK ? units : ATTN_CHUNK;
}

/* Attention: P of ATTN_CHUNK heads (and their float32 copies). */
size_t ot_cpu_attention_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    int64_t per = 0, n = attn_units(node, in, false, &per);
    return (size_t)(n * per) * sizeof(float);
}

/* AttentionGrad: P, dP (then dS) and the raw scores of one head per key/value group,
 * ATTN_CHUNK groups at once (a group's query heads run in order), and their copies. */
size_t ot_cpu_attention_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    int64_t per = 0, n = attn_units(node, in, true, &per);
    return (size_t)(n * per) * sizeof(float);
}

static ot_status need_unit_ws(const ot_node *node, const ot_kernel_ctx *ctx, const ot_tensor *in, bool grad,
                              int64_t *per, ot_error *err) {
    int64_t n = attn_units(node, in, grad, per);
    return need_ws(node, ctx, (size_t)(n * *per) * sizeof(float), err);
}

/* ---- float32 <-> the low dtype, a head's rows at a time ------------------------------ */

/* rows x cols values at leading dim ld into (from) a packed float32 block, on the
 * calling thread: these run inside the kernels' parallel loops. */
static void rows_to_f32(ot_dtype t, const void *src, int64_t ld, int64_t rows, int64_t cols, float *dst) {
    const uint16_t *s = src;
    if (ld == cols) {
        ot_cpu_lowp_to_f32_serial(t, s, dst, rows * cols);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        ot_cpu_lowp_to_f32_serial(t, s + r * ld, dst + r * cols, cols);
}

static void rows_from_f32(ot_dtype t, const float *src, int64_t rows, int64_t cols, void *dst, int64_t ld) {
    uint16_t *d = dst;
    if (ld == cols) {
        ot_cpu_lowp_from_f32_serial(t, src, d, rows * cols);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        ot_cpu_lowp_from_f32_serial(t, src + r * cols, d + r * ld, cols);
}

/* The key (or value) blocks of (b, hk) converted into f (T x d, packed): past, new. */
static kv_blocks lowp_blocks(const ot_attn_geom *g, ot_dtype t, const void *past, const void *cur, int64_t sb,
                             int64_t sh, int64_t ss, int64_t d, int64_t b, int64_t hk, float *f) {
    if (g->P) rows_to_f32(t, (const uint16_t *)past + (b * g->Hkv + hk) * g->P * d, d, g->P, d, f);
    rows_to_f32(t, (const uint16_t *)cur + b * sb + hk * sh, ss, g->Skv, d, f + g->P * d);
    kv_blocks k = {g->P ? f : NULL, f + g->P * d, d};
    return k;
}

/* ---- forward ---------------------------------------------------------------------- */

/* The Dropout --fused-attention absorbed, on one row of P (forward; backward before
 * dV) or of dP (backward): Dropout's keep-and-scale with the Dropout node's uniforms
 * (ctx->rng_node is its id) for elements e0 .. e0 + T of [B, H, Sq, T], the tensor
 * the Dropout read, so the mask is the plain graph's, bit for bit. */
#define ATTN_DROP_BLOCK 256
static void drop_row(const ot_attn_geom *g, const ot_kernel_ctx *ctx, int64_t e0, float *row) {
    float ratio = g->dropout, scale = 1.0f / (1.0f - ratio), u[ATTN_DROP_BLOCK];
    for (int64_t j0 = 0; j0 < g->T; j0 += ATTN_DROP_BLOCK) {
        int64_t len = g->T - j0 < ATTN_DROP_BLOCK ? g->T - j0 : ATTN_DROP_BLOCK;
        ot_cpu_philox_uniforms(ctx->seed, ctx->step, (uint32_t)ctx->rng_node, (uint64_t)(e0 + j0), len, u);
        ot_cpu_dropout_select(u, ratio, row + j0, scale, row + j0, NULL, len);
    }
}

/* Head (b, h): its probabilities in s (Sq x T), then Y_h. */
static void forward_head(const ot_kernel_ctx *c1, const ot_attn_geom *g, const ot_attn_ptrs *a, int64_t b,
                         int64_t h, const head_io *io, float *s) {
    int64_t bh = b * g->Hq + h;
    head_scores(c1, g, io, s);
    for (int64_t i = 0; i < g->Sq; i++) {
        ot_attn_finish_row(g, a, b, h, i, s + i * g->T);
        if (g->dropout > 0.0f) drop_row(g, c1, (bh * g->Sq + i) * g->T, s + i * g->T);
    }
    times_blocks(c1, g, s, io->v, g->Dv, io->y, io->ldy);
}

/* Head (b, h) of low-precision tensors through float32 copies in ws; Y_h rounded. */
static void forward_head_lowp(const ot_kernel_ctx *c1, const ot_attn_geom *g, const ot_attn_ptrs *a,
                              const attn_src *src, void *y, int64_t b, int64_t h, float *ws) {
    int64_t hk = h / (g->Hq / g->Hkv);
    float *qf = ws, *kf = qf + al16(g->Sq * g->D), *vf = kf + al16(g->T * g->D), *yf = vf + al16(g->T * g->Dv);
    float *s = yf + al16(g->Sq * g->Dv);
    rows_to_f32(src->t, (const uint16_t *)src->q + b * g->q_sb + h * g->q_sh, g->q_ss, g->Sq, g->D, qf);
    head_io io = {.q = qf, .ldq = g->D, .y = yf, .ldy = g->Dv};
    io.k = lowp_blocks(g, src->t, src->pk, src->k, g->k_sb, g->k_sh, g->k_ss, g->D, b, hk, kf);
    io.v = lowp_blocks(g, src->t, src->pv, src->v, g->v_sb, g->v_sh, g->v_ss, g->Dv, b, hk, vf);
    forward_head(c1, g, a, b, h, &io, s);
    rows_from_f32(src->t, yf, g->Sq, g->Dv, (uint16_t *)y + b * g->y_sb + h * g->y_sh, g->y_ss);
}

/* present_key / present_value (outputs 1, 2): the past's rows then the new ones. */
static void attn_presents(const ot_node *node, ot_tensor *out, const ot_attn_geom *g, const attn_src *src) {
    for (int p = 1; p <= 2 && p < node->n_outputs; p++) {
        void *dst = ot_xfmr_output(node, out, p);
        if (!dst) continue;
        int64_t dsz = p == 1 ? g->D : g->Dv, n = g->B * g->Hkv * g->T * dsz;
        const void *past = p == 1 ? src->pk : src->pv, *cur = p == 1 ? src->k : src->v;
        int64_t sb = p == 1 ? g->k_sb : g->v_sb, sh = p == 1 ? g->k_sh : g->v_sh, ss = p == 1 ? g->k_ss : g->v_ss;
        if (src->t == OT_F32) {
            for (int64_t e = 0; e < n; e++)
                ot_attn_present(g, e, past, cur, sb, sh, ss, dsz, dst);
            continue;
        }
        /* a low dtype's rows as they are: what rounding their float32 copies gives */
        for (int64_t r = 0; r < g->B * g->Hkv * g->T; r++) {
            int64_t t = r % g->T, bh = r / g->T, b = bh / g->Hkv, hk = bh % g->Hkv;
            const uint16_t *row = t < g->P ? (const uint16_t *)past + (bh * g->P + t) * dsz
                                           : (const uint16_t *)cur + b * sb + hk * sh + (t - g->P) * ss;
            memcpy((uint16_t *)dst + r * dsz, row, (size_t)dsz * sizeof(uint16_t));
        }
    }
}

ot_status ot_cpu_attention(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    ot_attn_geom g;
    ot_attn_ptrs a;
    attn_src src;
    int64_t per = 0;
    ot_status st = attn_setup(node, in, 0, &g, &a, &src, err);
    if (!st && src.t != OT_F32) st = lowp_outputs(node, out, 3, src.t, err);
    if (!st) st = need_unit_ws(node, ctx, in, false, &per, err);
    if (st) return st;
    bool low = src.t != OT_F32;
    a.y = low ? NULL : out[0].data;
    float *ws = ctx->workspace;
    int64_t heads = g.B * g.Hq;
    int nt = ot_cpu_threads(ctx);
    bool par = heads * g.Sq * g.T * g.D >= OT_CPU_PAR_MIN && heads > 1;
    for (int64_t c0 = 0; c0 < heads; c0 += ATTN_CHUNK) {
        int64_t cn = heads - c0 < ATTN_CHUNK ? heads - c0 : ATTN_CHUNK;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t k = 0; k < cn; k++) {
            int64_t bh = c0 + k, b = bh / g.Hq, h = bh % g.Hq;
            if (low) {
                forward_head_lowp(ctx, &g, &a, &src, out[0].data, b, h, ws + k * per);
            } else {
                head_io io = tensor_io(&g, &a, b, h);
                forward_head(ctx, &g, &a, b, h, &io, ws + k * per);
            }
        }
    }
    attn_presents(node, out, &g, &src);
    return OT_OK;
}

/* ---- backward --------------------------------------------------------------------- */

/* One query head h of key/value group (b, hk): P, dS, dQ_h, and its part of dK, dV
 * (beta 0 for the group's first head, then 1: the heads add in order); ws: the
 * group's P, dS and raw scores, Sq x T each. */
static void grad_head(const ot_kernel_ctx *c1, const ot_attn_geom *g, const ot_attn_ptrs *a, int64_t b, int64_t h,
                      bool first, const head_io *io, float *ws) {
    int64_t bh = b * g->Hq + h, n = g->Sq * g->T;
    float *p = ws, *ds = ws + n, *raw = ws + 2 * n;
    head_scores(c1, g, io, raw);
    memcpy(p, raw, (size_t)n * sizeof(float));
    for (int64_t i = 0; i < g->Sq; i++)
        ot_attn_finish_row(g, a, b, h, i, p + i * g->T);
    /* dP = dY_h V^T */
    if (g->P) gemm(c1, false, true, g->Sq, g->P, g->Dv, 1.0f, io->dy, io->ldy, io->v.past, g->Dv, 0.0f, ds, g->T);
    gemm(c1, false, true, g->Sq, g->Skv, g->Dv, 1.0f, io->dy, io->ldy, io->v.cur, io->v.ld_cur, 0.0f, ds + g->P, g->T);
    for (int64_t i = 0; i < g->Sq; i++) {
        float *pr = p + i * g->T, *dr = ds + i * g->T;
        const float *rr = raw + i * g->T;
        int64_t e0 = (bh * g->Sq + i) * g->T;
        if (g->dropout > 0.0f) drop_row(g, c1, e0, dr); /* dP of the softmax: DropoutGrad's */
        double rowdot = 0.0;
        for (int64_t j = 0; j < g->T; j++)
            rowdot = xf_dadd(rowdot, xf_dmul(pr[j], dr[j]));
        for (int64_t j = 0; j < g->T; j++)
            dr[j] = ot_attn_dscore(g, pr[j], dr[j], rowdot, rr[j]);
        if (g->dropout > 0.0f) drop_row(g, c1, e0, pr); /* the P that V met, for dV */
    }
    if (io->dq) times_blocks(c1, g, ds, io->k, g->D, io->dq, io->lddq);
    float beta = first ? 0.0f : 1.0f;
    if (io->dk)
        gemm(c1, true, false, g->Skv, g->D, g->Sq, 1.0f, ds + g->P, g->T, io->q, io->ldq, beta, io->dk, io->lddk);
    if (io->dv)
        gemm(c1, true, false, g->Skv, g->Dv, g->Sq, 1.0f, p + g->P, g->T, io->dy, io->ldy, beta, io->dv, io->lddv);
}

/* The low-precision gradients of one kernel call (NULL: not needed). */
typedef struct grad_dst {
    void *dq, *dk, *dv;
} grad_dst;

/* Key/value group (b, hk) of low-precision tensors: K, V converted once, each query
 * head's Q_h and dY_h in turn, dQ_h rounded after its head, dK and dV (summed over
 * the group's heads in float32, as the float32 kernel sums them) after the last. */
static void grad_group_lowp(const ot_kernel_ctx *c1, const ot_attn_geom *g, const ot_attn_ptrs *a,
                            const attn_src *src, const grad_dst *d, int64_t b, int64_t hk, float *ws) {
    ot_dtype t = src->t;
    float *qf = ws, *dyf = qf + al16(g->Sq * g->D), *kf = dyf + al16(g->Sq * g->Dv), *vf = kf + al16(g->T * g->D);
    float *dqf = vf + al16(g->T * g->Dv), *dkf = dqf + al16(g->Sq * g->D), *dvf = dkf + al16(g->Skv * g->D);
    float *s = dvf + al16(g->Skv * g->Dv);
    head_io io = {.q = qf, .dy = dyf, .ldq = g->D, .ldy = g->Dv, .lddq = g->D, .lddk = g->D, .lddv = g->Dv};
    io.k = lowp_blocks(g, t, src->pk, src->k, g->k_sb, g->k_sh, g->k_ss, g->D, b, hk, kf);
    io.v = lowp_blocks(g, t, src->pv, src->v, g->v_sb, g->v_sh, g->v_ss, g->Dv, b, hk, vf);
    io.dq = d->dq ? dqf : NULL, io.dk = d->dk ? dkf : NULL, io.dv = d->dv ? dvf : NULL;
    int64_t grp = g->Hq / g->Hkv;
    for (int64_t h = hk * grp; h < (hk + 1) * grp; h++) {
        int64_t qo = b * g->q_sb + h * g->q_sh;
        rows_to_f32(t, (const uint16_t *)src->q + qo, g->q_ss, g->Sq, g->D, qf);
        rows_to_f32(t, (const uint16_t *)src->dy + b * g->y_sb + h * g->y_sh, g->y_ss, g->Sq, g->Dv, dyf);
        grad_head(c1, g, a, b, h, h == hk * grp, &io, s);
        if (d->dq) rows_from_f32(t, dqf, g->Sq, g->D, (uint16_t *)d->dq + qo, g->q_ss);
    }
    if (d->dk) rows_from_f32(t, dkf, g->Skv, g->D, (uint16_t *)d->dk + b * g->k_sb + hk * g->k_sh, g->k_ss);
    if (d->dv) rows_from_f32(t, dvf, g->Skv, g->Dv, (uint16_t *)d->dv + b * g->v_sb + hk * g->v_sh, g->v_ss);
}

OT_GRAD_KERNEL(ot_cpu_attention_grad) {
    ot_attn_geom g;
    ot_attn_ptrs a;
    attn_src src;
    int64_t per = 0;
    ot_status st = in[0].dtype == in[1].dtype ? OT_OK : ot_cpu_bad_dtype(node, "dY (Q's dtype expected)", in[0].dtype, err);
    if (!st) st = attn_setup(node, in, 1, &g, &a, &src, err);
    if (!st && src.t != OT_F32) st = lowp_outputs(node, out, 3, src.t, err);
    if (!st) st = need_unit_ws(node, ctx, in, true, &per, err);
    if (st) return st;
    bool low = src.t != OT_F32;
    float *ws = ctx->workspace;
    grad_dst d = {ot_xfmr_output(node, out, 0), ot_xfmr_output(node, out, 1), ot_xfmr_output(node, out, 2)};
    if (!low) a.dq = d.dq, a.dk = d.dk, a.dv = d.dv;
    int64_t groups = g.B * g.Hkv, grp = g.Hq / g.Hkv;
    int nt = ot_cpu_threads(ctx);
    bool par = groups * g.Sq * g.T * g.D >= OT_CPU_PAR_MIN && groups > 1;
    for (int64_t c0 = 0; c0 < groups; c0 += ATTN_CHUNK) {
        int64_t cn = groups - c0 < ATTN_CHUNK ? groups - c0 : ATTN_CHUNK;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t k = 0; k < cn; k++) {
            int64_t u = c0 + k, b = u / g.Hkv, hk = u % g.Hkv;
            if (low) {
                grad_group_lowp(ctx, &g, &a, &src, &d, b, hk, ws + k * per);
                continue;
            }
            for (int64_t h = hk * grp; h < (hk + 1) * grp; h++) {
                head_io io = tensor_io(&g, &a, b, h);
                grad_head(ctx, &g, &a, b, h, h == hk * grp, &io, ws + k * per);
            }
        }
    }
    return OT_OK;
}
