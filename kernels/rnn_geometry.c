/* rnn_geometry.c — the host half of kernels/rnn_geometry.h: dims, attributes and
 * workspace of RNN, GRU, LSTM and RnnGrad nodes. */
#include "kernels/rnn_geometry.h"

#include <string.h>

#include "kernels/kernel_common.h"

void ot_rnn_forward_inputs(const ot_node *node, const ot_tensor *in, ot_tensor *in8) {
    memset(in8, 0, 8 * sizeof *in8);
    int first = node->op == OT_OP_RNN_GRAD ? 3 : 0;
    int n = node->n_inputs - first < 8 ? node->n_inputs - first : 8;
    for (int k = 0; k < n; k++)
        in8[k] = in[first + k];
}

static bool present(const ot_tensor *t) { return t->dtype != OT_UNDEFINED; }

/* t is [d0, d1, d2] (rank 3) or [d0, d1] (rank 2, d2 < 0) */
static bool dims_are(const ot_tensor *t, int64_t d0, int64_t d1, int64_t d2) {
    const ot_shape *s = &t->shape;
    if (d2 < 0) return s->rank == 2 && s->dim[0] == d0 && s->dim[1] == d1;
    return s->rank == 3 && s->dim[0] == d0 && s->dim[1] == d1 && s->dim[2] == d2;
}

ot_status ot_rnn_geometry(const ot_node *node, const ot_tensor *in8, ot_rnn_geom *g, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    const ot_rnn_params *rp = &pp->u.rnn;
    const char *nm = node->name, *op = node->op_type;
    memset(g, 0, sizeof *g);
    if (rp->cell == OT_OP_UNKNOWN) return ot_fail(err, OT_E_MODEL, "node '%s' (%s): no recurrent cell", nm, op);
    if (rp->dirs == 0)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): direction '%s' (forward, reverse or bidirectional)", nm, op,
                       rp->direction);
    if (rp->bad_activations)
        return ot_fail(err, OT_E_UNSUPPORTED,
                       "node '%s' (%s): only ONNX's default activations are supported (RNN: Tanh or Relu; GRU: "
                       "Sigmoid, Tanh; LSTM: Sigmoid, Tanh, Tanh)",
                       nm, op);
    if (rp->has_clip)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): the clip attribute is not supported", nm, op);
    if (rp->input_forget)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): input_forget = 1 is not supported", nm, op);
    g->cell = rp->cell == OT_OP_RNN ? OT_RNN_CELL_RNN : rp->cell == OT_OP_GRU ? OT_RNN_CELL_GRU : OT_RNN_CELL_LSTM;
    g->G = g->cell == OT_RNN_CELL_RNN ? 1 : g->cell == OT_RNN_CELL_GRU ? 3 : 4;
    g->relu = rp->relu;
    g->lbr = rp->lbr;
    g->dirs = rp->dirs;
    g->reverse = rp->reverse;
    g->layout1 = rp->layout1;
    const ot_tensor *x = &in8[0], *w = &in8[1], *r = &in8[2];
    for (int k = 0; k < 8; k++)
        if (present(&in8[k]) && in8[k].dtype != (k == 4 ? OT_I32 : OT_F32))
            return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): input %d is %s, not %s", nm, op, k,
                           ot_dtype_name(in8[k].dtype), k == 4 ? "int32" : "float32");
    if (!present(x) || !present(w) || !present(r) || x->shape.rank != 3 || w->shape.rank != 3)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): X and W must be 3-D", nm, op);
    g->T = x->shape.dim[g->layout1 ? 1 : 0];
    g->B = x->shape.dim[g->layout1 ? 0 : 1];
    g->I = x->shape.dim[2];
    int64_t GH = w->shape.dim[1];
    if (GH % g->G)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): W's dim 1 (%lld) is not %d gates", nm, op, (long long)GH,
                       g->G);
    g->H = GH / g->G;
    if (rp->hidden_size >= 0 && rp->hidden_size != g->H)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): hidden_size %d, but W holds %lld gates of %lld", nm, op,
                       rp->hidden_size, (long long)g->G, (long long)g->H);
    int64_t D = g->dirs, H = g->H, B = g->B;
    if (!dims_are(w, D, GH, g->I))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): W is not [%lld, %lld, %lld]", nm, op, (long long)D,
                       (long long)GH, (long long)g->I);
    if (!dims_are(r, D, GH, H))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): R is not [%lld, %lld, %lld]", nm, op, (long long)D,
                       (long long)GH, (long long)H);
    g->has_b = present(&in8[3]);
    if (g->has_b && !dims_are(&in8[3], D, 2 * GH, -1))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): B is not [%lld, %lld]", nm, op, (long long)D,
                       (long long)(2 * GH));
    g->has_seq = present(&in8[4]);
    if (g->has_seq && !(in8[4].shape.rank == 1 && in8[4].shape.dim[0] == B))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): sequence_lens is not [%lld]", nm, op, (long long)B);
    for (int k = 5; k <= 6; k++) {
        bool h = present(&in8[k]);
        if (k == 5)
            g->has_h0 = h;
        else
            g->has_c0 = h;
        if (h && !(g->layout1 ? dims_are(&in8[k], B, D, H) : dims_are(&in8[k], D, B, H)))
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): %s is not shaped like Y_h", nm, op,
                           k == 5 ? "initial_h" : "initial_c");
    }
    g->has_p = present(&in8[7]);
    if (g->has_p && !dims_are(&in8[7], D, 3 * H, -1))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): P is not [%lld, %lld]", nm, op, (long long)D,
                       (long long)(3 * H));
    if (g->cell != OT_RNN_CELL_LSTM && (g->has_c0 || g->has_p))
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): initial_c and P are LSTM's", nm, op);
    if (g->T < 1 || B < 0 || H < 1)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): an empty sequence or hidden size", nm, op);
    g->ws_seq = 0; /* set by ot_rnn_workspace_bytes's caller through ot_rnn_set_ws */
    return OT_OK;
}

static int64_t ws_seq(const ot_rnn_geom *g, bool grad) {
    int64_t T = grad ? g->T : 1, H = g->H, GH = g->G * g->H;
    int64_t n = 2 * (T + 1) * H + T * GH + T * H + 4 * H + GH;
    if (grad) n += 2 * T * GH + 3 * H;
    return n;
}

size_t ot_rnn_workspace_bytes(const ot_rnn_geom *g, bool grad) {
    return (size_t)(g->dirs * g->B * ws_seq(g, grad)) * sizeof(float);
}

void ot_rnn_set_ws(ot_rnn_geom *g, bool grad) { g->ws_seq = ws_seq(g, grad); }

ot_status ot_rnn_check_lens(const ot_node *node, const ot_rnn_geom *g, const int32_t *seq, ot_error *err) {
    for (int64_t b = 0; seq && b < g->B; b++)
        if (seq[b] < 0 || seq[b] > g->T)
            return ot_fail(err, OT_E_MODEL, "node '%s' (%s): sequence_lens[%lld] = %d outside [0, %lld], the sequence",
                           node->name, node->op_type, (long long)b, (int)seq[b], (long long)g->T);
    return OT_OK;
}
