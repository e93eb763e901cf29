/* xfmr_geometry.c — the checks and shapes of RMSNormalization, RotaryEmbedding and
 * Attention (xfmr_geometry.h), once for both backends. */
#include "kernels/xfmr_geometry.h"

#include <math.h>

#include "kernels/kernel_common.h"

static ot_status params_of(const ot_node *node, ot_op_params *scratch, const ot_xfmr_params **xp, ot_error *err) {
    const ot_op_params *pp = NULL;
    ot_status st = ot_node_params(node, scratch, &pp, err);
    if (!st) *xp = &pp->u.xfmr;
    return st;
}

static ot_status bad(ot_error *err, ot_status code, const ot_node *node, const char *what) {
    return ot_fail(err, code, "node '%s' (%s): %s", node->name, ot_op_name(node->op), what);
}

const ot_tensor *ot_xfmr_input(const ot_node *node, const ot_tensor *in, int k) {
    if (k >= node->n_inputs) return NULL;
    /* a node built by hand (kernel tests) has no value ids: an absent input has no dtype */
    bool present = node->inputs ? node->inputs[k] >= 0 : in[k].dtype != OT_UNDEFINED;
    return present ? &in[k] : NULL;
}

float *ot_xfmr_output(const ot_node *node, ot_tensor *out, int k) {
    if (k >= node->n_outputs || (node->outputs && node->outputs[k] < 0)) return NULL;
    return (float *)out[k].data;
}

/* ---- RMSNormalization ----------------------------------------------------------- */

ot_status ot_rms_geometry(ot_rms_geom *g, const ot_node *node, const ot_shape *x, int64_t scale_numel, ot_error *err) {
    ot_op_params scratch;
    const ot_xfmr_params *xp = NULL;
    ot_status st = params_of(node, &scratch, &xp, err);
    if (st) return st;
    if (xp->stash_type != 1)
        return ot_fail(err, OT_E_UNSUPPORTED,
                       "node '%s' (%s): stash_type %d is not supported (only 1, float: the statistics are taken "
                       "in float or better)",
                       node->name, ot_op_name(node->op), xp->stash_type);
    int axis = ot_kernel_axis(xp->axis, x->rank);
    if (axis < 0)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): axis %d is out of range for rank %d", node->name,
                       ot_op_name(node->op), xp->axis, x->rank);
    g->rows = 1;
    g->cols = 1;
    for (int d = 0; d < x->rank; d++)
        *(d < axis ? &g->rows : &g->cols) *= x->dim[d];
    if (scale_numel != g->cols && scale_numel != 1)
        return ot_fail(err, OT_E_SHAPE,
                       "node '%s' (%s): scale has %lld elements; it must have the normalised dims' %lld or one",
                       node->name, ot_op_name(node->op), (long long)scale_numel, (long long)g->cols);
    if (!(xp->epsilon >= 0.0f)) return bad(err, OT_E_MODEL, node, "epsilon must be >= 0");
    g->scale_step = scale_numel == 1 && g->cols != 1 ? 0 : 1;
    g->eps = xp->epsilon;
    return OT_OK;
}

size_t ot_rms_grad_workspace(const ot_node *node, const ot_shape *x, int64_t scale_numel) {
    ot_rms_geom g;
    ot_error ignored;
    if (ot_rms_geometry(&g, node, x, scale_numel, &ignored)) return 0;
    return (size_t)(g.rows + g.cols) * sizeof(double);
}

/* ---- RotaryEmbedding -------------------------------------------------------------- */

ot_status ot_rope_geometry(ot_rope_geom *g, const ot_node *node, const ot_shape *x, const ot_shape *cos_s,
                           const ot_shape *sin_s, const ot_shape *pos, ot_error *err) {
    char msg[200];
    ot_op_params scratch;
    const ot_xfmr_params *xp = NULL;
    ot_status st = params_of(node, &scratch, &xp, err);
    if (st) return st;
    if (x->rank == 4) {
        g->B = x->dim[0], g->H = x->dim[1], g->S = x->dim[2], g->D = x->dim[3];
        if (xp->num_heads && xp->num_heads != g->H)
            return bad(err, OT_E_SHAPE, node, "num_heads differs from the input's head dim (dim 1)");
        g->sh = g->S * g->D, g->ss = g->D, g->sb = g->H * g->S * g->D;
    } else if (x->rank == 3) {
        if (xp->num_heads <= 0) return bad(err, OT_E_MODEL, node, "a 3-D input needs num_heads > 0");
        g->B = x->dim[0], g->S = x->dim[1], g->H = xp->num_heads;
        if (x->dim[2] % g->H)
            return bad(err, OT_E_SHAPE, node, "the hidden size (dim 2) is not a multiple of num_heads");
        g->D = x->dim[2] / g->H;
        g->sh = g->D, g->ss = x->dim[2], g->sb = g->S * x->dim[2];
    } else {
        return bad(err, OT_E_SHAPE, node,
                   "the input must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head]");
    }
    int64_t rot = xp->rotary_dim ? xp->rotary_dim : g->D;
    if (rot < 0 || rot > g->D || rot % 2) {
        snprintf(msg, sizeof msg, "rotary_embedding_dim %lld must be even and at most the head size %lld",
                 (long long)rot, (long long)g->D);
        return bad(err, OT_E_MODEL, node, msg);
    }
    g->half = rot / 2;
    g->interleaved = xp->interleaved;
    g->has_pos = pos != NULL;
    if (!ot_shape_equal(cos_s, sin_s)) return bad(err, OT_E_SHAPE, node, "cos_cache and sin_cache differ in shape");
    int cr = cos_s->rank;
    if (cr < 2 || cos_s->dim[cr - 1] != g->half) {
        snprintf(msg, sizeof msg, "the caches' last dim must be rotary_embedding_dim / 2 = %lld", (long long)g->half);
        return bad(err, OT_E_SHAPE, node, msg);
    }
    if (g->has_pos) {
        if (pos->rank != 2 || pos->dim[0] != g->B || pos->dim[1] != g->S)
            return bad(err, OT_E_SHAPE, node, "position_ids must be [batch, seq]");
        if (cr != 2) return bad(err, OT_E_SHAPE, node, "with position_ids the caches must be [max_position, dim / 2]");
        g->cache_rows = cos_s->dim[0];
    } else {
        if (cr != 3 || cos_s->dim[0] != g->B || cos_s->dim[1] != g->S)
            return bad(err, OT_E_SHAPE, node, "without position_ids the caches must be [batch, seq, dim / 2]");
        g->cache_rows = g->B * g->S;
    }
    return OT_OK;
}

ot_status ot_rope_check_positions(const ot_rope_geom *g, const ot_node *node, const int64_t *pos, ot_error *err) {
    for (int64_t i = 0; g->has_pos && i < g->B * g->S; i++)
        if (pos[i] < 0 || pos[i] >= g->cache_rows)
            return ot_fail(err, OT_E_MODEL, "node '%s' (%s): position id %lld is outside the caches' %lld rows",
                           node->name, ot_op_name(node->op), (long long)pos[i], (long long)g->cache_rows);
    return OT_OK;
}

/* ---- Attention -------------------------------------------------------------------- */

/* Heads, positions, head size and strides of one operand: 4-D [B, H, S, d] or 3-D
 * [B, S, H * d] with H from the attribute. */
static bool attn_operand(const ot_shape *s, int64_t heads, int64_t *H, int64_t *S, int64_t *d, int64_t *sb, int64_t *sh,
                         int64_t *ss) {
    if (s->rank == 4) {
        *H = s->dim[1], *S = s->dim[2], *d = s->dim[3];
        *sb = s->dim[1] * s->dim[2] * s->dim[3], *sh = s->dim[2] * s->dim[3], *ss = s->dim[3];
        return heads == 0 || heads == *H;
    }
    if (heads <= 0 || s->dim[2] % heads) return false;
    *H = heads, *S = s->dim[1], *d = s->dim[2] / heads;
    *sb = s->dim[1] * s->dim[2], *ss = s->dim[2], *sh = *d;
    return true;
}

/* The mask's strides against [B, Hq, Sq, *]: right-aligned, dims of 1 broadcast. */
static ot_status attn_mask_geom(ot_attn_geom *g, const ot_node *node, const ot_shape *m, ot_error *err) {
    if (m->rank < 1 || m->rank > 4) return bad(err, OT_E_SHAPE, node, "attn_mask must have rank 1 to 4");
    int64_t want[3] = {g->B, g->Hq, g->Sq}, *stride[3] = {&g->m_sb, &g->m_sh, &g->m_sq};
    g->m_len = m->dim[m->rank - 1];
    if (g->m_len > g->T) return bad(err, OT_E_SHAPE, node, "attn_mask's last dim is longer than past + new keys");
    int64_t st = g->m_len;
    for (int k = 2; k >= 0; k--) {
        int md = m->rank - 1 - (3 - k); /* the mask's dim that lines up with want[k] */
        *stride[k] = 0;
        if (md < 0) continue;
        if (m->dim[md] != 1 && m->dim[md] != want[k])
            return bad(err, OT_E_SHAPE, node, "attn_mask does not broadcast to [batch, heads, q_seq, total_seq]");
        if (m->dim[md] != 1) *stride[k] = st;
        st *= m->dim[md];
    }
    return OT_OK;
}

ot_status ot_attn_geometry(ot_attn_geom *g, const ot_node *node, const ot_shape *q, const ot_shape *k,
                           const ot_shape *v, const ot_shape *mask, ot_dtype mask_dt, const ot_shape *pk,
                           const ot_shape *pv, const ot_shape *nonpad, ot_error *err) {
    ot_op_params scratch;
    const ot_xfmr_params *xp = NULL;
    ot_status st = params_of(node, &scratch, &xp, err);
    if (st) return st;
    if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
        return bad(err, OT_E_SHAPE, node, "Q, K and V must all be 3-D or all 4-D");
    if (q->rank == 3 && (xp->q_num_heads <= 0 || xp->kv_num_heads <= 0))
        return bad(err, OT_E_MODEL, node, "3-D inputs need q_num_heads and kv_num_heads > 0");
    int64_t Hk, Hv, Sv, Dk;
    if (!attn_operand(q, xp->q_num_heads, &g->Hq, &g->Sq, &g->D, &g->q_sb, &g->q_sh, &g->q_ss) ||
        !attn_operand(k, xp->kv_num_heads, &Hk, &g->Skv, &Dk, &g->k_sb, &g->k_sh, &g->k_ss) ||
        !attn_operand(v, xp->kv_num_heads, &Hv, &Sv, &g->Dv, &g->v_sb, &g->v_sh, &g->v_ss))
        return bad(err, OT_E_SHAPE, node,
                   "a hidden size is not a multiple of its head count (or the heads differ "
                   "from q_num_heads / kv_num_heads)");
    g->B = q->dim[0];
    if (k->dim[0] != g->B || v->dim[0] != g->B) return bad(err, OT_E_SHAPE, node, "Q, K and V differ in batch");
    if (Hk != Hv || Sv != g->Skv) return bad(err, OT_E_SHAPE, node, "K and V differ in heads or sequence length");
    if (Dk != g->D) return bad(err, OT_E_SHAPE, node, "Q and K differ in head size");
    g->Hkv = Hk;
    if (g->Hkv <= 0 || g->Hq % g->Hkv) return bad(err, OT_E_SHAPE, node, "q heads must be a multiple of kv heads");
    g->P = 0;
    if ((pk != NULL) != (pv != NULL)) return bad(err, OT_E_MODEL, node, "past_key and past_value come together");
    if (pk) {
        if (pk->rank != 4 || pv->rank != 4 || pk->dim[0] != g->B || pk->dim[1] != g->Hkv || pk->dim[3] != g->D ||
            pv->dim[0] != g->B || pv->dim[1] != g->Hkv || pv->dim[2] != pk->dim[2] || pv->dim[3] != g->Dv)
            return bad(err, OT_E_SHAPE, node, "past_key / past_value must be [batch, kv_heads, past, head size]");
        g->P = pk->dim[2];
    }
    g->T = g->P + g->Skv;
    g->y_sb = q->rank == 4 ? g->Hq * g->Sq * g->Dv : g->Sq * g->Hq * g->Dv;
    g->y_sh = q->rank == 4 ? g->Sq * g->Dv : g->Dv;
    g->y_ss = q->rank == 4 ? g->Dv : g->Hq * g->Dv;
    g->mask_kind = OT_ATTN_MASK_NONE;
    g->m_sb = g->m_sh = g->m_sq = 0;
    g->m_len = g->T;
    if (mask) {
        if (mask_dt == OT_BOOL)
            g->mask_kind = OT_ATTN_MASK_BOOL;
        else if (mask_dt == OT_F32)
            g->mask_kind = OT_ATTN_MASK_FLOAT;
        else
            return bad(err, OT_E_UNSUPPORTED, node, "attn_mask must be bool or float32");
        st = attn_mask_geom(g, node, mask, err);
        if (st) return st;
    }
    g->scale = xp->has_scale ? xp->scale : (float)(1.0 / sqrt((double)(g->D > 0 ? g->D : 1)));
    g->softcap = xp->softcap;
    g->dropout = xp->dropout_ratio;
    if (!(g->dropout >= 0.0f && g->dropout < 1.0f)) return bad(err, OT_E_MODEL, node, "dropout_ratio outside [0, 1)");
    if (!(g->softcap >= 0.0f) || !isfinite(g->scale))
        return bad(err, OT_E_MODEL, node, "softcap < 0 or scale not finite");
    g->causal = xp->is_causal;
    g->has_nonpad = nonpad != NULL;
    if (nonpad && pk) return bad(err, OT_E_MODEL, node, "nonpad_kv_seqlen cannot be combined with past_key");
    if (nonpad && (nonpad->rank != 1 || nonpad->dim[0] != g->B))
        return bad(err, OT_E_SHAPE, node, "nonpad_kv_seqlen must be [batch]");
    return OT_OK;
}

ot_status ot_attn_check_nonpad(const ot_attn_geom *g, const ot_node *node, const int64_t *nonpad, ot_error *err) {
    for (int64_t b = 0; g->has_nonpad && b < g->B; b++)
        if (nonpad[b] < 0 || nonpad[b] > g->T)
            return ot_fail(err, OT_E_MODEL, "node '%s' (%s): nonpad_kv_seqlen %lld is outside 0 .. %lld (the keys)",
                           node->name, ot_op_name(node->op), (long long)nonpad[b], (long long)g->T);
    return OT_OK;
}

ot_status ot_attn_geometry_of(ot_attn_geom *g, const ot_node *node, const ot_tensor *in, int o, ot_error *err) {
    const ot_tensor *m = ot_xfmr_input(node, in, o + 3), *pk = ot_xfmr_input(node, in, o + 4);
    const ot_tensor *pv = ot_xfmr_input(node, in, o + 5), *np = ot_xfmr_input(node, in, o + 6);
    return ot_attn_geometry(g, node, &in[o].shape, &in[o + 1].shape, &in[o + 2].shape, m ? &m->shape : NULL,
                            m ? m->dtype : OT_UNDEFINED, pk ? &pk->shape : NULL, pv ? &pv->shape : NULL,
                            np ? &np->shape : NULL, err);
}

size_t ot_attn_workspace(const ot_node *node, const ot_tensor *in, bool grad) {
    ot_attn_geom g;
    ot_error ignored;
    if (ot_attn_geometry_of(&g, node, in, grad ? 1 : 0, &ignored)) /* AttentionGrad: dY first */
        return 0;
    return (size_t)(g.B * g.Hq * g.Sq * g.T) * sizeof(float) * (grad ? 2 : 1);
}
