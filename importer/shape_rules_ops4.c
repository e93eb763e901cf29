/* shape_rules_ops4.c — shape rules of ops batch 4 (issue 26): Einsum and EinsumGrad,
 * TopK, OneHot, Size, and the recurrent ops RNN, GRU, LSTM and RnnGrad. Declared in
 * shape_internal.h; the table is shape_rules.c's. */
#include <stdio.h>
#include <string.h>

#include "ir/einsum.h"
#include "shape_internal.h"

#define SHP(s, buf) ot_shape_str(c->g, (s), (buf), sizeof(buf))

/* Einsum: each output label's dim from the operands that have it. A letter's known
 * dims must agree; an ellipsis dim broadcasts (1 against n). */
ot_status ot_shape_rule_einsum(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    int ranks[OT_EIN_MAX_IN];
    const ot_value *x0 = ot_shape_input(c, n, 0);
    dt[0] = x0 ? x0->dtype : OT_UNDEFINED;
    if (n->n_inputs > OT_EIN_MAX_IN)
        return ot_shape_fail_model(c, n, "%d operands (at most %d)", n->n_inputs, OT_EIN_MAX_IN);
    for (int k = 0; k < n->n_inputs; k++) {
        const ot_value *x = ot_shape_input(c, n, k);
        if (!x) return ot_shape_fail_model(c, n, "operand %d is absent", k);
        if (x->shape.rank < 0) return OT_OK;
        ranks[k] = x->shape.rank;
    }
    const char *eq = ot_node_attr_string(n, "equation", NULL);
    ot_einsum e;
    char msg[160];
    if (!ot_einsum_parse(eq, n->n_inputs, ranks, &e, msg, sizeof msg))
        return ot_shape_fail_model(c, n, "equation \"%s\": %s", eq ? eq : "", msg);
    int64_t dim[OT_EIN_MAX_LABELS];
    int32_t sym[OT_EIN_MAX_LABELS];
    for (int l = 0; l < e.n_labels; l++)
        dim[l] = 1, sym[l] = -1;
    bool seen[OT_EIN_MAX_LABELS] = {false};
    for (int k = 0; k < n->n_inputs; k++) {
        const ot_shape *s = &ot_shape_input(c, n, k)->shape;
        for (int d = 0; d < s->rank; d++) {
            int l = e.label[k][d];
            int64_t v = s->dim[d];
            bool take = !seen[l] || (e.ellipsis[l] && dim[l] == 1);
            if (!take && v >= 0 && dim[l] >= 0 && v != dim[l] && !(e.ellipsis[l] && v == 1)) {
                char a[160];
                if (e.ellipsis[l])
                    return ot_shape_fail(c, n, "operand %d %s: the dims \"...\" stands for do not broadcast", k,
                                         SHP(s, a));
                return ot_shape_fail(c, n, "label '%c' is %lld in operand %d %s and %lld before", e.letter[l],
                                     (long long)v, k, SHP(s, a), (long long)dim[l]);
            }
            if (take || (dim[l] < 0 && v > 1)) dim[l] = v, sym[l] = s->sym[d];
            seen[l] = true;
        }
    }
    sh[0] = ot_shape_make(e.out_rank, NULL);
    for (int d = 0; d < e.out_rank; d++)
        sh[0].dim[d] = dim[e.out_label[d]], sh[0].sym[d] = sym[e.out_label[d]];
    return OT_OK;
}

/* EinsumGrad (dY, X_0 .. X_n-1) -> dX_index: typed and shaped like X_index. */
ot_status ot_shape_rule_einsum_grad(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    int64_t k = ot_node_attr_int(n, "index", 0);
    const ot_value *x = k >= 0 && k + 1 < n->n_inputs ? ot_shape_input(c, n, (int)k + 1) : NULL;
    if (!x) return ot_shape_fail_model(c, n, "index %lld names no operand", (long long)k);
    dt[0] = x->dtype;
    sh[0] = x->shape;
    return OT_OK;
}

/* A scalar of any numeric dtype with known data (K, depth); false when not known. */
static bool known_scalar(ot_shape_ctx *c, const ot_node *n, int slot, double *v) {
    const ot_value *x = ot_shape_input(c, n, slot);
    if (!x) return false;
    if (x->data && ot_shape_numel(&x->shape) == 1) {
        switch (x->dtype) {
        case OT_I64: {
            int64_t y;
            memcpy(&y, x->data, 8);
            *v = (double)y;
            return true;
        }
        case OT_I32: {
            int32_t y;
            memcpy(&y, x->data, 4);
            *v = y;
            return true;
        }
        case OT_F32: {
            float y;
            memcpy(&y, x->data, 4);
            *v = y;
            return true;
        }
        case OT_F64: {
            double y;
            memcpy(&y, x->data, 8);
            *v = y;
            return true;
        }
        default: return false;
        }
    }
    int64_t iv;
    if (ot_shape_known_ints(c, n, slot, &iv, 1) == 1) {
        *v = (double)iv;
        return true;
    }
    return false;
}

/* TopK (X, K) -> Values like X with K on the axis, Indices (int64) of that shape. */
ot_status ot_shape_rule_top_k(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *x = ot_shape_input(c, n, 0);
    dt[0] = x ? x->dtype : OT_UNDEFINED;
    dt[1] = OT_I64;
    ot_shape X = x ? x->shape : ot_shape_unknown();
    if (X.rank < 0) return OT_OK;
    int ax;
    ot_status st = ot_shape_axis(c, n, ot_node_attr_int(n, "axis", -1), X.rank, false, &X, &ax);
    if (st) return st;
    sh[0] = X;
    sh[0].sym[ax] = -1;
    double k;
    if (!known_scalar(c, n, 1, &k)) {
        sh[0].dim[ax] = -1;
    } else {
        char a[160];
        /* the range first: converting a double past int64 (1e30) is undefined */
        if (k >= 9.2e18)
            return ot_shape_fail(c, n, "K = %g is past int64 (axis %d of %s)", k, ax, SHP(&X, a));
        if (!(k >= 0) || k != (double)(int64_t)k || (X.dim[ax] >= 0 && k > (double)X.dim[ax]))
            return ot_shape_fail(c, n, "K = %g outside [0, %lld], axis %d of %s", k, (long long)X.dim[ax], ax,
                                 SHP(&X, a));
        sh[0].dim[ax] = (int64_t)k;
        if (X.dim[ax] == (int64_t)k) sh[0].sym[ax] = X.sym[ax];
    }
    sh[1] = sh[0];
    return OT_OK;
}

/* OneHot (indices, depth, values) -> the indices' shape with depth inserted at axis,
 * typed like values. */
ot_status ot_shape_rule_one_hot(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *iv = ot_shape_input(c, n, 0), *vv = ot_shape_input(c, n, 2);
    dt[0] = vv ? vv->dtype : OT_UNDEFINED;
    if (vv && vv->shape.rank >= 0 && ot_shape_numel(&vv->shape) >= 0 && ot_shape_numel(&vv->shape) != 2)
        return ot_shape_fail(c, n, "values must hold 2 elements (off, on), not %lld",
                             (long long)ot_shape_numel(&vv->shape));
    ot_shape I = iv ? iv->shape : ot_shape_unknown();
    if (I.rank < 0) return OT_OK;
    if (I.rank + 1 > OT_MAX_RANK) return ot_shape_fail(c, n, "the output would have more than %d dims", OT_MAX_RANK);
    int ax;
    ot_status st = ot_shape_axis(c, n, ot_node_attr_int(n, "axis", -1), I.rank + 1, false, &I, &ax);
    if (st) return st;
    double depth;
    int64_t dd = -1;
    if (known_scalar(c, n, 1, &depth)) {
        if (!(depth >= 1 && depth <= 9.0e15))
            return ot_shape_fail_model(c, n, "depth %g is not a positive count", depth);
        dd = (int64_t)depth;
    }
    sh[0] = ot_shape_make(I.rank + 1, NULL);
    for (int d = 0, s = 0; d < I.rank + 1; d++) {
        if (d == ax) {
            sh[0].dim[d] = dd, sh[0].sym[d] = -1;
            continue;
        }
        sh[0].dim[d] = I.dim[s], sh[0].sym[d] = I.sym[s];
        s++;
    }
    return OT_OK;
}

/* Size (X) -> int64 scalar. */
ot_status ot_shape_rule_size(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    (void)c;
    (void)n;
    dt[0] = OT_I64;
    sh[0] = ot_shape_make(0, NULL);
    return OT_OK;
}

/* ---- recurrent ops (issue 26) ---- */
/* The dims W [D, G, I], R [D, G, H] and sequence_lens [B] share with X and each other
 * (G = gates x H, checked by the caller): a contradiction here is an error at import,
 * not only once a kernel reads the tensors (check_bad_ops.py). -1 (unknown) matches. */
static ot_status rnn_check_dims(ot_shape_ctx *c, const ot_node *n, int64_t D, int64_t I, int64_t GH, int64_t B) {
    char a[160];
    static const char *names[2] = {"W", "R"};
    for (int k = 0; k < 2; k++) {
        const ot_value *v = ot_shape_input(c, n, k + 1);
        if (!v || v->shape.rank != 3) continue;
        const int64_t *d = v->shape.dim, last = k ? d[2] : I;
        if ((d[0] >= 0 && d[0] != D) || (GH >= 0 && d[1] >= 0 && d[1] != GH) ||
            (last >= 0 && d[2] >= 0 && d[2] != last))
            return ot_shape_fail(c, n, "%s %s is not [%lld, %lld, %lld] (directions, gates x hidden size, %s)",
                                 names[k], SHP(&v->shape, a), (long long)D, (long long)GH, (long long)last,
                                 k ? "hidden size" : "X's input size");
    }
    const ot_value *sl = n->n_inputs > 4 ? ot_shape_input(c, n, 4) : NULL;
    if (sl && sl->shape.rank >= 0 &&
        (sl->shape.rank != 1 || (B >= 0 && sl->shape.dim[0] >= 0 && sl->shape.dim[0] != B)))
        return ot_shape_fail(c, n, "sequence_lens %s is not [%lld] (one length per batch entry)",
                             SHP(&sl->shape, a), (long long)B);
    return OT_OK;
}

/* What the kernels refuse (kernels/rnn_geometry.c), refused at import so that info
 * agrees; called after the shape checks, whose messages are the more specific. */
static ot_status rnn_check_supported(ot_shape_ctx *c, const ot_node *n) {
    ot_op_params scratch;
    const ot_op_params *pp = NULL;
    ot_status st = ot_node_params(n, &scratch, &pp, c->err);
    if (st) return st;
    const ot_attr *acts = ot_node_attr(n, "activations");
    if (pp->u.rnn.bad_activations && acts && acts->type == OT_ATTR_STRINGS) {
        char list[160] = "";
        for (int k = 0; k < acts->n; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", acts->strings[k]);
        return ot_fail(c->err, OT_E_UNSUPPORTED,
                       "node '%s' (%s): activations [%s] are not supported (ONNX's defaults only: RNN Tanh or Relu; "
                       "GRU Sigmoid, Tanh; LSTM Sigmoid, Tanh, Tanh)",
                       ot_shape_node_label(n), n->op_type, list);
    }
    if (pp->u.rnn.has_clip || pp->u.rnn.input_forget)
        return ot_fail(c->err, OT_E_UNSUPPORTED, "node '%s' (%s): %s is not supported", ot_shape_node_label(n),
                       n->op_type, pp->u.rnn.has_clip ? "the clip attribute" : "input_forget = 1");
    return OT_OK;
}

/* RNN, GRU, LSTM: Y [T, D, B, H] (layout 1: [B, T, D, H]); Y_h and Y_c [D, B, H]
 * (layout 1: [B, D, H]); H from R's last dim (hidden_size must agree), D from the
 * direction. */
ot_status ot_shape_rule_rnn(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *x = ot_shape_input(c, n, 0), *r = ot_shape_input(c, n, 2);
    for (int o = 0; o < n->n_outputs; o++)
        dt[o] = x ? x->dtype : OT_UNDEFINED;
    const char *dir = ot_node_attr_string(n, "direction", "forward");
    int64_t D = !strcmp(dir, "bidirectional") ? 2 : (!strcmp(dir, "forward") || !strcmp(dir, "reverse")) ? 1 : 0;
    if (!D) return ot_shape_fail_model(c, n, "direction '%s' (forward, reverse or bidirectional)", dir);
    int64_t hs = ot_node_attr_int(n, "hidden_size", -1), layout = ot_node_attr_int(n, "layout", 0);
    if (layout != 0 && layout != 1) return ot_shape_fail_model(c, n, "layout %lld (0 or 1)", (long long)layout);
    if (!x || !r || x->shape.rank < 0 || r->shape.rank < 0) return OT_OK;
    char a[160];
    if (x->shape.rank != 3) return ot_shape_fail(c, n, "X %s is not 3-D", SHP(&x->shape, a));
    if (r->shape.rank != 3) return ot_shape_fail(c, n, "R %s is not 3-D", SHP(&r->shape, a));
    int64_t H = r->shape.dim[2];
    if (hs >= 0 && H >= 0 && hs != H)
        return ot_shape_fail(c, n, "hidden_size %lld, but R %s", (long long)hs, SHP(&r->shape, a));
    if (hs < 1 && H == 0) return ot_shape_fail(c, n, "hidden size 0");
    if (hs > 0) H = hs;
    /* W [D, gates x H, I]: the product checked, a hidden_size of 2^62 overflows it */
    const ot_value *w = ot_shape_input(c, n, 1);
    int64_t gates = n->op == OT_OP_LSTM ? 4 : n->op == OT_OP_GRU ? 3 : 1, GH;
    if (H >= 0 && !ot_i64_mul(gates, H, &GH))
        return ot_shape_fail(c, n, "%lld gates of hidden size %lld overflow int64", (long long)gates, (long long)H);
    if (H >= 0 && w && w->shape.rank == 3 && w->shape.dim[1] >= 0 && w->shape.dim[1] != GH)
        return ot_shape_fail(c, n, "W %s must hold %lld gates of hidden size %lld (%lld) on dim 1",
                             SHP(&w->shape, a), (long long)gates, (long long)H, (long long)GH);
    int ti = layout ? 1 : 0, bi = layout ? 0 : 1;
    int64_t T = x->shape.dim[ti], B = x->shape.dim[bi];
    ot_status st = rnn_check_dims(c, n, D, x->shape.dim[2], H >= 0 ? GH : -1, B);
    if (st == OT_OK) st = rnn_check_supported(c, n);
    if (st != OT_OK) return st;
    int32_t ts = x->shape.sym[ti], bs = x->shape.sym[bi];
    if (n->n_outputs > 0) {
        sh[0] = ot_shape_make(4, NULL);
        int64_t dims[4] = {T, D, B, H}, ldims[4] = {B, T, D, H};
        int32_t syms[4] = {ts, -1, bs, -1}, lsyms[4] = {bs, ts, -1, -1};
        for (int d = 0; d < 4; d++)
            sh[0].dim[d] = layout ? ldims[d] : dims[d], sh[0].sym[d] = layout ? lsyms[d] : syms[d];
    }
    for (int o = 1; o < n->n_outputs; o++) {
        sh[o] = ot_shape_make(3, NULL);
        int64_t dims[3] = {D, B, H}, ldims[3] = {B, D, H};
        int32_t syms[3] = {-1, bs, -1}, lsyms[3] = {bs, -1, -1};
        for (int d = 0; d < 3; d++)
            sh[o].dim[d] = layout ? ldims[d] : dims[d], sh[o].sym[d] = layout ? lsyms[d] : syms[d];
    }
    return OT_OK;
}

/* RnnGrad: output k typed and shaped like input 3 + k (X, W, R, B, initial_h,
 * initial_c, P; sequence_lens, input 7, has no gradient: output 4 is input 8's). */
ot_status ot_shape_rule_rnn_grad(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    static const int like[7] = {3, 4, 5, 6, 8, 9, 10};
    for (int o = 0; o < n->n_outputs && o < 7; o++) {
        const ot_value *v = ot_shape_input(c, n, like[o]);
        dt[o] = v ? v->dtype : OT_F32;
        sh[o] = v ? v->shape : ot_shape_unknown();
    }
    return OT_OK;
}
