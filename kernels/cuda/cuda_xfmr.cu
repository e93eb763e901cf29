/* cuda_xfmr.cu — the transformer ops of issue 26 on the GPU, counterparts of
 * kernels/cpu/cpu_xfmr.c: RMSNormalization and RMSNormGrad, RotaryEmbedding and
 * RotaryEmbeddingGrad, Attention and AttentionGrad. The host checks the geometry with
 * the CPU's rules (kernels/xfmr_geometry.c); every kernel is one thread per unit (a
 * row, a column, a token's head, a query or key row) running xfmr_geometry.h's
 * element code through ot_cu_map, in the CPU's order and without atomics, so the
 * host mode gives the CPU's bits (Attention: the CPU's GEMMs round otherwise; within
 * float32 rounding) and the device differs only by its libm. All have a host mode.
 * Attention is a plain fused kernel (one thread per query row, no tiling): correct and
 * deterministic first; its probabilities live in the planned workspace. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
extern "C" {
#include "kernels/xfmr_geometry.h"
}

static ot_status f32_inputs(const ot_node *node, const ot_tensor *in, int first, int last, ot_error *err) {
    for (int k = first; k <= last && k < node->n_inputs; k++)
        if (ot_xfmr_input(node, in, k) && in[k].dtype != OT_F32)
            return ot_cuda_bad_dtype(node, "an input", in[k].dtype, err);
    return OT_OK;
}

static ot_status need_ws(const ot_node *node, const ot_kernel_ctx *ctx, size_t bytes, ot_error *err) {
    if (bytes && (!ctx->workspace || ctx->workspace_bytes < bytes))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): workspace missing", node->name, ot_op_name(node->op));
    return OT_OK;
}

/* ---- RMSNormalization ----------------------------------------------------------- */

struct rms_fwd_op {
    ot_rms_geom g;
    const float *x, *sc;
    float *y;
    __host__ __device__ void operator()(int64_t r) const { ot_rms_row(&g, r, x, sc, y); }
};
struct rms_row_op {
    ot_rms_geom g;
    const float *dy, *x, *sc;
    float *dx;
    double *inv;
    __host__ __device__ void operator()(int64_t r) const { ot_rms_grad_row(&g, r, dy, x, sc, dx, inv); }
};
struct rms_col_op {
    ot_rms_geom g;
    const float *dy, *x;
    const double *inv;
    double *col;
    float *dsc;
    __host__ __device__ void operator()(int64_t j) const { ot_rms_grad_col(&g, j, dy, x, inv, col, dsc); }
};
struct rms_scalar_op {
    ot_rms_geom g;
    const double *col;
    float *dsc;
    __host__ __device__ void operator()(int64_t) const { ot_rms_grad_scalar(&g, col, dsc); }
};

OT_CUDA_LAUNCHER(ot_cuda_rms_norm) {
    ot_rms_geom g;
    ot_status st = f32_inputs(node, in, 0, 1, err);
    if (!st) st = ot_rms_geometry(&g, node, &in[0].shape, ot_kernel_numel(&in[1]), err);
    if (st) return st;
    return ot_cu_map(cx, rms_fwd_op{g, (const float *)in[0].data, (const float *)in[1].data, (float *)out[0].data},
                     g.rows, err);
}

OT_CUDA_LAUNCHER(ot_cuda_rms_norm_grad) {
    ot_rms_geom g;
    ot_status st = f32_inputs(node, in, 0, 2, err);
    if (!st) st = ot_rms_geometry(&g, node, &in[1].shape, ot_kernel_numel(&in[2]), err);
    if (!st) st = need_ws(node, ctx, (size_t)(g.rows + g.cols) * sizeof(double), err);
    if (st) return st;
    const float *dy = (const float *)in[0].data, *x = (const float *)in[1].data, *sc = (const float *)in[2].data;
    float *dx = ot_xfmr_output(node, out, 0);
    float *dsc = ot_xfmr_output(node, out, 1);
    double *inv = (double *)ctx->workspace, *col = inv + g.rows;
    st = ot_cu_map(cx, rms_row_op{g, dy, x, sc, dx, inv}, g.rows, err);
    if (!st && dsc) st = ot_cu_map(cx, rms_col_op{g, dy, x, inv, col, dsc}, g.cols, err);
    if (!st && dsc && !g.scale_step) st = ot_cu_map(cx, rms_scalar_op{g, col, dsc}, 1, err);
    return st;
}

/* ---- RotaryEmbedding (and RotaryEmbeddingGrad, its inverse) ---------------------- */

struct rope_op {
    ot_rope_geom g;
    const float *x, *c, *s;
    const int64_t *pos;
    float *y;
    bool inverse;
    __host__ __device__ void operator()(int64_t u) const { ot_rope_unit(&g, u, x, c, s, pos, y, inverse); }
};

OT_CUDA_LAUNCHER(ot_cuda_rotary_embedding) {
    ot_rope_geom g;
    const ot_tensor *pos = ot_xfmr_input(node, in, 3);
    ot_status st = f32_inputs(node, in, 0, 2, err);
    if (!st && pos && pos->dtype != OT_I64) st = ot_cuda_bad_dtype(node, "position_ids", pos->dtype, err);
    if (!st) st = ot_rope_geometry(&g, node, &in[0].shape, &in[1].shape, &in[2].shape, pos ? &pos->shape : NULL, err);
    if (st) return st;
    if (pos) {
        /* the ids are checked on the host: an id past the caches is the model's error,
         * never a read out of bounds */
        int64_t n = g.B * g.S;
        int got = 0;
        int64_t *host = (int64_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
        if (!host) return ot_fail(err, OT_E_MEMORY, "node '%s': out of host memory", node->name);
        st = ot_cuda_read_ints(cx, pos, host, (int)n, &got, err);
        if (!st) st = ot_rope_check_positions(&g, node, host, err);
        free(host);
        if (st) return st;
    }
    rope_op op{g,
               (const float *)in[0].data,
               (const float *)in[1].data,
               (const float *)in[2].data,
               pos ? (const int64_t *)pos->data : NULL,
               (float *)out[0].data,
               node->op == OT_OP_ROTARY_EMBEDDING_GRAD};
    return ot_cu_map(cx, op, g.B * g.S * g.H, err);
}

/* ---- Attention -------------------------------------------------------------------- */

struct attn_row_op {
    ot_attn_geom g;
    ot_attn_ptrs a;
    __host__ __device__ void operator()(int64_t r) const { ot_attn_row(&g, &a, r); }
};
struct attn_grad_row_op {
    ot_attn_geom g;
    ot_attn_ptrs a;
    __host__ __device__ void operator()(int64_t r) const { ot_attn_grad_row(&g, &a, r); }
};
struct attn_grad_kv_op {
    ot_attn_geom g;
    ot_attn_ptrs a;
    __host__ __device__ void operator()(int64_t u) const { ot_attn_grad_kv(&g, &a, u); }
};
struct attn_present_op {
    ot_attn_geom g;
    const float *past, *cur;
    int64_t sb, sh, ss, dsz;
    float *out;
    __host__ __device__ void operator()(int64_t e) const { ot_attn_present(&g, e, past, cur, sb, sh, ss, dsz, out); }
};

/* The geometry and operands of an Attention (o = 0) or AttentionGrad (o = 1) node. */
/* nonpad_kv_seqlen read to the host and checked: a length past the keys is the
 * model's error, never a read out of bounds. */
static ot_status attn_nonpad_check(ot_cuda_ctx *cx, const ot_attn_geom *g, const ot_node *node, const ot_tensor *np,
                                   ot_error *err) {
    int64_t *host = (int64_t *)malloc((size_t)(g->B > 0 ? g->B : 1) * sizeof(int64_t));
    if (!host) return ot_fail(err, OT_E_MEMORY, "node '%s': out of host memory", node->name);
    int got = 0;
    ot_status st = ot_cuda_read_ints(cx, np, host, (int)g->B, &got, err);
    if (!st) st = ot_attn_check_nonpad(g, node, host, err);
    free(host);
    return st;
}

static ot_status attn_setup(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, int o, ot_attn_geom *g,
                            ot_attn_ptrs *a, ot_error *err) {
    const ot_tensor *m = ot_xfmr_input(node, in, o + 3), *pk = ot_xfmr_input(node, in, o + 4);
    const ot_tensor *pv = ot_xfmr_input(node, in, o + 5), *np = ot_xfmr_input(node, in, o + 6);
    for (int k = 0; k <= o + 5 && k < node->n_inputs; k++) /* nonpad (o + 6) is int64 */
        if (ot_xfmr_input(node, in, k) && k != o + 3 && in[k].dtype != OT_F32)
            return ot_cuda_bad_dtype(node, "an input", in[k].dtype, err);
    ot_status st = ot_attn_geometry_of(g, node, in, o, err);
    if (!st && np && np->dtype != OT_I64) st = ot_cuda_bad_dtype(node, "nonpad_kv_seqlen", np->dtype, err);
    if (!st && np) st = attn_nonpad_check(cx, g, node, np, err);
    if (!st && g->dropout > 0.0f)
        st = ot_fail(err, OT_E_UNSUPPORTED,
                     "node '%s' (%s): the attention Dropout --fused-attention absorbed runs on the CPU only; on "
                     "CUDA use --fused-attention off (or a model without attention dropout)",
                     node->name, ot_op_name(node->op));
    if (st) return st;
    memset(a, 0, sizeof *a);
    a->q = (const float *)in[o].data, a->k = (const float *)in[o + 1].data, a->v = (const float *)in[o + 2].data;
    a->mask = m ? m->data : NULL;
    a->pk = pk ? (const float *)pk->data : NULL;
    a->pv = pv ? (const float *)pv->data : NULL;
    a->nonpad = np ? (const int64_t *)np->data : NULL;
    return OT_OK;
}

OT_CUDA_LAUNCHER(ot_cuda_attention) {
    ot_attn_geom g;
    ot_attn_ptrs a;
    ot_status st = attn_setup(cx, node, in, 0, &g, &a, err);
    if (!st) st = need_ws(node, ctx, ot_attn_workspace(node, in, false), err);
    if (st) return st;
    a.y = (float *)out[0].data;
    a.prob = (float *)ctx->workspace;
    st = ot_cu_map(cx, attn_row_op{g, a}, g.B * g.Hq * g.Sq, err);
    for (int p = 1; !st && p <= 2 && p < node->n_outputs; p++) {
        if (!ot_xfmr_output(node, out, p)) continue;
        attn_present_op op{g,
                           p == 1 ? a.pk : a.pv,
                           p == 1 ? a.k : a.v,
                           p == 1 ? g.k_sb : g.v_sb,
                           p == 1 ? g.k_sh : g.v_sh,
                           p == 1 ? g.k_ss : g.v_ss,
                           p == 1 ? g.D : g.Dv,
                           (float *)out[p].data};
        st = ot_cu_map(cx, op, g.B * g.Hkv * g.T * op.dsz, err);
    }
    return st;
}

OT_CUDA_LAUNCHER(ot_cuda_attention_grad) {
    ot_attn_geom g;
    ot_attn_ptrs a;
    ot_status st = in[0].dtype == OT_F32 ? OT_OK : ot_cuda_bad_dtype(node, "dY", in[0].dtype, err);
    if (!st) st = attn_setup(cx, node, in, 1, &g, &a, err);
    if (!st) st = need_ws(node, ctx, ot_attn_workspace(node, in, true), err);
    if (st) return st;
    a.dy = (const float *)in[0].data;
    a.dq = ot_xfmr_output(node, out, 0);
    a.dk = ot_xfmr_output(node, out, 1);
    a.dv = ot_xfmr_output(node, out, 2);
    a.prob = (float *)ctx->workspace;
    a.dscore = a.prob + g.B * g.Hq * g.Sq * g.T;
    st = ot_cu_map(cx, attn_grad_row_op{g, a}, g.B * g.Hq * g.Sq, err);
    if (!st && (a.dk || a.dv)) st = ot_cu_map(cx, attn_grad_kv_op{g, a}, g.B * g.Hkv * g.Skv, err);
    return st;
}
