/* cpu_xfmr.c — CPU kernels of the transformer ops of issue 26: RMSNormalization,
 * RotaryEmbedding, Attention and their backward ops. The element code is
 * kernels/xfmr_geometry.h's, shared with the CUDA launchers (cuda_xfmr.cu); here it
 * runs one unit per OpenMP iteration, each unit's sums in its own fixed order, so the
 * bits do not depend on the thread count. */
#include <stdlib.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/grad_kernels.h"
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

/* The geometry and operands of an Attention (o = 0) or AttentionGrad (o = 1) node. */
static ot_status attn_nonpad_check(const ot_attn_geom *g, const ot_node *node, const ot_tensor *np, ot_error *err) {
    return ot_attn_check_nonpad(g, node, np->data, err);
}

static ot_status attn_setup(const ot_node *node, const ot_tensor *in, int o, ot_attn_geom *g, ot_attn_ptrs *a,
                            ot_error *err) {
    const ot_tensor *m = ot_xfmr_input(node, in, o + 3), *pk = ot_xfmr_input(node, in, o + 4);
    const ot_tensor *pv = ot_xfmr_input(node, in, o + 5), *np = ot_xfmr_input(node, in, o + 6);
    for (int k = 0; k <= o + 5 && k < node->n_inputs; k++) /* nonpad (o + 6) is int64 */
        if (ot_xfmr_input(node, in, k) && k != o + 3 && in[k].dtype != OT_F32)
            return ot_cpu_bad_dtype(node, "an input", in[k].dtype, err);
    ot_status st = ot_attn_geometry(g, node, &in[o].shape, &in[o + 1].shape, &in[o + 2].shape, m ? &m->shape : NULL,
                                    m ? m->dtype : OT_UNDEFINED, pk ? &pk->shape : NULL, pv ? &pv->shape : NULL,
                                    np ? &np->shape : NULL, err);
    if (!st && np && np->dtype != OT_I64) st = ot_cpu_bad_dtype(node, "nonpad_kv_seqlen", np->dtype, err);
    if (!st && np) st = attn_nonpad_check(g, node, np, err);
    if (st) return st;
    memset(a, 0, sizeof *a);
    a->q = in[o].data, a->k = in[o + 1].data, a->v = in[o + 2].data;
    a->mask = m ? m->data : NULL;
    a->pk = pk ? pk->data : NULL;
    a->pv = pv ? pv->data : NULL;
    a->nonpad = np ? np->data : NULL;
    return OT_OK;
}

size_t ot_cpu_attention_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    return ot_attn_workspace(node, in, false);
}

size_t ot_cpu_attention_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    return ot_attn_workspace(node, in, true);
}

ot_status ot_cpu_attention(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    ot_attn_geom g;
    ot_attn_ptrs a;
    ot_status st = attn_setup(node, in, 0, &g, &a, err);
    if (!st) st = need_ws(node, ctx, ot_attn_workspace(node, in, false), err);
    if (st) return st;
    a.y = out[0].data;
    a.prob = ctx->workspace;
    int64_t rows = g.B * g.Hq * g.Sq;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (rows * g.T * g.D >= OT_CPU_PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++)
        ot_attn_row(&g, &a, r);
    for (int p = 1; p <= 2 && p < node->n_outputs; p++) {
        if (!ot_xfmr_output(node, out, p)) continue;
        int64_t dsz = p == 1 ? g.D : g.Dv, n = g.B * g.Hkv * g.T * dsz;
        const float *past = p == 1 ? a.pk : a.pv, *cur = p == 1 ? a.k : a.v;
        int64_t sb = p == 1 ? g.k_sb : g.v_sb, sh = p == 1 ? g.k_sh : g.v_sh, ss = p == 1 ? g.k_ss : g.v_ss;
        for (int64_t e = 0; e < n; e++)
            ot_attn_present(&g, e, past, cur, sb, sh, ss, dsz, out[p].data);
    }
    return OT_OK;
}

OT_GRAD_KERNEL(ot_cpu_attention_grad) {
    ot_attn_geom g;
    ot_attn_ptrs a;
    ot_status st = in[0].dtype == OT_F32 ? OT_OK : ot_cpu_bad_dtype(node, "dY", in[0].dtype, err);
    if (!st) st = attn_setup(node, in, 1, &g, &a, err);
    if (!st) st = need_ws(node, ctx, ot_attn_workspace(node, in, true), err);
    if (st) return st;
    a.dy = in[0].data;
    a.dq = ot_xfmr_output(node, out, 0);
    a.dk = ot_xfmr_output(node, out, 1);
    a.dv = ot_xfmr_output(node, out, 2);
    a.prob = ctx->workspace;
    a.dscore = a.prob + g.B * g.Hq * g.Sq * g.T;
    int64_t rows = g.B * g.Hq * g.Sq, krows = g.B * g.Hkv * g.Skv;
    int nt = ot_cpu_threads(ctx);
    bool par = rows * g.T * g.D >= OT_CPU_PAR_MIN;
#pragma omp parallel num_threads(nt) if (par)
    {
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            ot_attn_grad_row(&g, &a, r);
        if (a.dk || a.dv) {
#pragma omp for schedule(static)
            for (int64_t u = 0; u < krows; u++)
                ot_attn_grad_kv(&g, &a, u);
        }
    }
    return OT_OK;
}
