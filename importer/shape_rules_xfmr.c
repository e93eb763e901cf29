/* shape_rules_xfmr.c — shape rules of the transformer ops of issue 26:
 * RMSNormalization and RotaryEmbedding (Y like X), Attention (Y, present_key,
 * present_value from the 3-D or 4-D operands and the past) and AttentionGrad (dQ, dK,
 * dV like Q, K, V). What needs data (position ids in range) is the kernels'. */
#include "shape_internal.h"

static const ot_value *in_value(ot_shape_ctx *c, const ot_node *n, int i) {
    return i < n->n_inputs && n->inputs[i] >= 0 ? ot_shape_input(c, n, i) : NULL;
}

static ot_shape shape_or_unknown(const ot_value *v) { return v ? v->shape : ot_shape_unknown(); }

/* RMSNormalization: Y like X; the axis in range, a static scale of the normalised
 * dims' size or one element. */
ot_status ot_shape_rule_rms_norm(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *xv = in_value(c, n, 0), *sv = in_value(c, n, 1);
    ot_shape X = shape_or_unknown(xv);
    dt[0] = xv ? xv->dtype : OT_UNDEFINED;
    sh[0] = X;
    if (X.rank < 0) return OT_OK;
    int ax;
    ot_status rc = ot_shape_axis(c, n, ot_node_attr_int(n, "axis", -1), X.rank, false, &X, &ax);
    if (rc) return rc;
    int64_t cols = 1;
    bool zero = false, unknown = false;
    for (int d = ax; d < X.rank; d++) zero |= X.dim[d] == 0, unknown |= X.dim[d] < 0;
    for (int d = ax; d < X.rank && !zero && !unknown; d++) /* 0 x (past int64) is no overflow */
        if (!ot_i64_mul(cols, X.dim[d], &cols))
            return ot_shape_fail(c, n, "the normalised dims of X (from axis %d) multiply past int64", ax);
    if (unknown) cols = -1;
    else if (zero) cols = 0;
    int64_t ns = sv ? ot_shape_numel(&sv->shape) : -1;
    if (cols >= 0 && ns >= 0 && ns != cols && ns != 1)
        return ot_shape_fail(c, n, "scale '%s' has %lld elements; the normalised dims have %lld", sv->name,
                             (long long)ns, (long long)cols);
    return OT_OK;
}

/* RotaryEmbedding (and its gradient, input 0 being dY): like input 0, 3-D or 4-D. */
ot_status ot_shape_rule_rotary(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *xv = in_value(c, n, 0);
    ot_shape X = shape_or_unknown(xv);
    dt[0] = xv ? xv->dtype : OT_UNDEFINED;
    sh[0] = X;
    if (X.rank >= 0 && X.rank != 3 && X.rank != 4)
        return ot_shape_fail(c, n,
                             "the input has rank %d; it must be 3-D [batch, seq, hidden] or 4-D "
                             "[batch, heads, seq, head_size]",
                             X.rank);
    if (X.rank == 3 && ot_node_attr_int(n, "num_heads", 0) <= 0)
        return ot_shape_fail_model(c, n, "a 3-D input needs the attribute num_heads > 0");
    return OT_OK;
}

/* dims of a 3-D [B, S, H * d] or 4-D [B, H, S, d] operand: heads, positions, head
 * size (-1 where unknown, sym carried for S). */
static void attn_dims(const ot_shape *s, int64_t heads_attr, int64_t *H, int64_t *S, int32_t *S_sym, int64_t *d) {
    *H = *S = *d = -1;
    *S_sym = -1;
    if (s->rank == 4) {
        *H = s->dim[1], *S = s->dim[2], *S_sym = s->sym[2], *d = s->dim[3];
    } else if (s->rank == 3) {
        *H = heads_attr > 0 ? heads_attr : -1;
        *S = s->dim[1], *S_sym = s->sym[1];
        if (s->dim[2] >= 0 && *H > 0 && s->dim[2] % *H == 0) *d = s->dim[2] / *H;
    }
}

/* attn_mask: bool or float, rank 1 to 4, broadcastable to [B, Hq, Sq, *], its last
 * dim at most past + new keys (a shorter one is padded as masked). Known dims only. */
static ot_status attn_mask_check(ot_shape_ctx *c, const ot_node *n, const ot_value *m, int64_t B, int64_t Hq,
                                 int64_t Sq, int64_t total) {
    if (!m) return OT_OK;
    if (m->dtype != OT_BOOL && m->dtype != OT_F32 && m->dtype != OT_UNDEFINED)
        return ot_fail(c->err, OT_E_UNSUPPORTED,
                       "node '%s' (Attention): attn_mask '%s' is %s; it must be bool or float32", n->name, m->name,
                       ot_dtype_name(m->dtype));
    const ot_shape *s = &m->shape;
    if (s->rank < 0) return OT_OK;
    if (s->rank < 1 || s->rank > 4)
        return ot_shape_fail(c, n, "attn_mask '%s' has rank %d; it must have rank 1 to 4", m->name, s->rank);
    int64_t last = s->dim[s->rank - 1];
    if (last >= 0 && total >= 0 && last > total)
        return ot_shape_fail(c, n, "attn_mask '%s' covers %lld keys but there are %lld (past + new)", m->name,
                             (long long)last, (long long)total);
    int64_t want[3] = {B, Hq, Sq};
    for (int k = 0; k < 3; k++) {
        int d = s->rank - 4 + k;
        if (d < 0 || s->dim[d] < 0 || want[k] < 0) continue;
        if (s->dim[d] != 1 && s->dim[d] != want[k])
            return ot_shape_fail(c, n,
                                 "attn_mask '%s' dim %d is %lld; it must be 1 or %lld ([batch, heads, q_seq, keys])",
                                 m->name, d, (long long)s->dim[d], (long long)want[k]);
    }
    return OT_OK;
}

/* Attention: Y [B, Hq, Sq, Dv] (4-D) or [B, Sq, Hq * Dv] (3-D); present_key / value
 * [B, Hkv, past + Skv, D / Dv]. qk_matmul_output is refused; nonpad_kv_seqlen (Attention-24)
 * needs int64 and no past. */
ot_status ot_shape_rule_attention(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *np = in_value(c, n, 6);
    if (np && np->dtype != OT_I64 && np->dtype != OT_UNDEFINED)
        return ot_fail(c->err, OT_E_MODEL, "node '%s' (Attention): nonpad_kv_seqlen '%s' must be int64", n->name,
                       np->name);
    if (np && in_value(c, n, 4))
        return ot_fail(c->err, OT_E_MODEL,
                       "node '%s' (Attention): nonpad_kv_seqlen cannot be combined with past_key / past_value",
                       n->name);
    if (n->n_outputs > 3 && n->outputs[3] >= 0)
        return ot_fail(
            c->err, OT_E_UNSUPPORTED,
            "node '%s' (Attention): the qk_matmul_output output is not supported (training reads Y, present_key and "
            "present_value only); drop it from the node",
            ot_shape_node_label(n));
    ot_shape Q = shape_or_unknown(in_value(c, n, 0)), K = shape_or_unknown(in_value(c, n, 1));
    ot_shape V = shape_or_unknown(in_value(c, n, 2));
    const ot_value *pk = in_value(c, n, 4);
    ot_dtype t = in_value(c, n, 0) ? in_value(c, n, 0)->dtype : OT_UNDEFINED;
    for (int o = 0; o < n->n_outputs; o++)
        dt[o] = t;
    if (Q.rank < 0 || K.rank < 0 || V.rank < 0) return OT_OK;
    if (Q.rank != K.rank || Q.rank != V.rank || (Q.rank != 3 && Q.rank != 4))
        return ot_shape_fail(c, n, "Q, K and V have ranks %d, %d, %d; they must all be 3-D or all 4-D", Q.rank, K.rank,
                             V.rank);
    int64_t qh = ot_node_attr_int(n, "q_num_heads", 0), kvh = ot_node_attr_int(n, "kv_num_heads", 0);
    if (Q.rank == 3 && (qh <= 0 || kvh <= 0))
        return ot_shape_fail_model(c, n, "3-D Q, K and V need the attributes q_num_heads and kv_num_heads > 0");
    int64_t Hq, Sq, Dq, Hk, Sk, Dk, Hv, Sv, Dv;
    int32_t sq_sym, sk_sym, sv_sym;
    attn_dims(&Q, qh, &Hq, &Sq, &sq_sym, &Dq);
    attn_dims(&K, kvh, &Hk, &Sk, &sk_sym, &Dk);
    attn_dims(&V, kvh, &Hv, &Sv, &sv_sym, &Dv);
    if (Q.rank == 3 &&
        ((Q.dim[2] >= 0 && Q.dim[2] % qh) || (K.dim[2] >= 0 && K.dim[2] % kvh) || (V.dim[2] >= 0 && V.dim[2] % kvh)))
        return ot_shape_fail(c, n, "a hidden size is not a multiple of q_num_heads / kv_num_heads");
    if (Hq > 0 && Hk > 0 && Hq % Hk)
        return ot_shape_fail(c, n, "%lld query heads are not a multiple of %lld key/value heads", (long long)Hq,
                             (long long)Hk);
    if (Dq >= 0 && Dk >= 0 && Dq != Dk)
        return ot_shape_fail(c, n, "Q's head size %lld differs from K's %lld", (long long)Dq, (long long)Dk);
    ot_shape Y = Q;
    if (Q.rank == 4) {
        Y.dim[3] = Dv, Y.sym[3] = -1;
    } else {
        int64_t hid = -1;
        if (Dv >= 0 && !ot_i64_mul(qh, Dv, &hid)) return ot_shape_fail(c, n, "q_num_heads %lld x head size %lld overflows int64", (long long)qh, (long long)Dv);
        Y.dim[2] = hid, Y.sym[2] = -1;
    }
    sh[0] = Y;
    /* present: the past's length plus the new keys' */
    ot_shape P = shape_or_unknown(pk);
    int64_t total = Sk;
    int32_t total_sym = sk_sym;
    if (pk) {
        int64_t past = P.rank == 4 ? P.dim[2] : -1;
        total_sym = past == 0 ? sk_sym : -1;
        if (past < 0 || Sk < 0)
            total = -1;
        else if (!ot_i64_add(past, Sk, &total))
            return ot_shape_fail(c, n, "past %lld + new keys %lld overflow int64", (long long)past, (long long)Sk);
    }
    ot_status rc = attn_mask_check(c, n, in_value(c, n, 3), Q.dim[0], Hq, Sq, total);
    if (rc) return rc;
    for (int o = 1; o <= 2 && o < n->n_outputs; o++) {
        ot_shape s = ot_shape_make(4, NULL);
        s.dim[0] = Q.dim[0], s.sym[0] = Q.sym[0];
        s.dim[1] = Hk, s.sym[1] = -1;
        s.dim[2] = total, s.sym[2] = total_sym;
        s.dim[3] = o == 1 ? Dk : Dv, s.sym[3] = -1;
        sh[o] = s;
    }
    return OT_OK;
}

/* AttentionGrad (dY, Q, K, V, ...): dQ, dK, dV like Q, K, V. */
ot_status ot_shape_rule_attention_grad(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    for (int o = 0; o < 3 && o < n->n_outputs; o++) {
        const ot_value *v = in_value(c, n, o + 1);
        dt[o] = v ? v->dtype : OT_UNDEFINED;
        sh[o] = shape_or_unknown(v);
    }
    return OT_OK;
}
