/* grad_shape.c — gradient rules of data-movement ops (Reshape family, Identity,
 * Transpose, Concat, Split, Slice, Gather, Expand), of the reductions ReduceSum /
 * ReduceMean, and of Dropout (whose mask DropoutGrad regenerates from the forward
 * node's Philox key, see autodiff.h). */
#include "autodiff/grad_rules.h"

static ot_status fail_static(ot_grad_ctx *c, const ot_node *n, const char *what) {
    return ot_fail(c->err, OT_E_SHAPE, "autodiff: node '%s' (%s): its gradient needs %s; bind symbolic dims first",
                   n->name, n->op_type, what);
}

/* Element i of a constant int / float value (the opset-12 input forms that the
 * importer normally turns into attributes); false when not a constant. */
static bool const_elem(const ot_grad_ctx *c, int v, int i, double *out) {
    if (v < 0 || !c->g->values[v].data) return false;
    const ot_value *val = &c->g->values[v];
    size_t es = ot_dtype_size(val->dtype);
    if (es == 0 || (size_t)(i + 1) * es > val->nbytes) return false;
    const char *p = (const char *)val->data + (size_t)i * es;
    switch (val->dtype) {
    case OT_F32: *out = *(const float *)p; return true;
    case OT_F64: *out = *(const double *)p; return true;
    case OT_I64: *out = (double)*(const int64_t *)p; return true;
    case OT_I32: *out = *(const int32_t *)p; return true;
    case OT_BOOL:
    case OT_U8: *out = *(const uint8_t *)p; return true;
    default: return false;
    }
}

static ot_status grad_transpose(ot_grad_ctx *c, const ot_node *n, int dy) {
    int x = n->inputs[0];
    ot_shape xs = ot_gb_shape(c, x);
    if (xs.rank < 0) return fail_static(c, n, "a known rank");
    int cnt = 0;
    const int64_t *perm = ot_node_attr_ints(n, "perm", &cnt);
    int64_t inv[OT_MAX_RANK];
    for (int i = 0; i < xs.rank; i++) {
        int64_t p = perm && cnt == xs.rank ? perm[i] : xs.rank - 1 - i;
        if (p < 0) p += xs.rank;
        inv[p] = i;
    }
    int node = -1;
    int out = ot_gb_op_s(c, OT_OP_TRANSPOSE, &dy, 1, ot_gb_dtype(c, x), &xs, &node);
    ot_gb_set_ints(c, node, "perm", inv, xs.rank);
    ot_gb_add(c, x, out);
    return OT_OK;
}

static int norm_axis(int64_t a, int rank) { return (int)(a < 0 ? a + rank : a); }

static ot_status grad_concat(ot_grad_ctx *c, const ot_node *n, int dy) {
    ot_shape ys = ot_gb_shape(c, n->outputs[0]);
    if (ys.rank < 0) return fail_static(c, n, "a known rank");
    int axis = norm_axis(ot_node_attr_int(n, "axis", 0), ys.rank);
    int64_t split[256];
    int outs[256];
    if (n->n_inputs > 256) return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: Concat '%s' has over 256 inputs", n->name);
    for (int i = 0; i < n->n_inputs; i++) {
        ot_shape s = ot_gb_shape(c, n->inputs[i]);
        if (s.rank != ys.rank || s.dim[axis] < 0) return fail_static(c, n, "static sizes along the concat axis");
        split[i] = s.dim[axis];
        outs[i] = ot_gb_new(c, ot_gb_dtype(c, dy), &s);
    }
    int node = ot_gb_emit(c, OT_OP_SPLIT, &dy, 1, outs, n->n_inputs);
    ot_gb_set_int(c, node, "axis", axis);
    ot_gb_set_ints(c, node, "split", split, n->n_inputs);
    for (int i = 0; i < n->n_inputs; i++) ot_gb_add(c, n->inputs[i], outs[i]);
    return OT_OK;
}

static ot_status grad_split(ot_grad_ctx *c, const ot_node *n, const int *dy) {
    int x = n->inputs[0];
    ot_shape xs = ot_gb_shape(c, x);
    if (xs.rank < 0) return fail_static(c, n, "a known rank");
    int parts[256];
    if (n->n_outputs > 256) return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: Split '%s' has over 256 outputs", n->name);
    for (int i = 0; i < n->n_outputs; i++) parts[i] = ot_gb_dy_or_zeros(c, dy[i], n->outputs[i]);
    int node = -1;
    int out = ot_gb_op_s(c, OT_OP_CONCAT, parts, n->n_outputs, ot_gb_dtype(c, x), &xs, &node);
    ot_gb_set_int(c, node, "axis", norm_axis(ot_node_attr_int(n, "axis", 0), xs.rank));
    ot_gb_add(c, x, out);
    return OT_OK;
}

static ot_status grad_reduce(ot_grad_ctx *c, const ot_node *n, int dy) {
    int x = n->inputs[0];
    ot_shape xs = ot_gb_shape(c, x);
    if (xs.rank < 0) return fail_static(c, n, "a known rank");
    int cnt = 0;
    const int64_t *axes = ot_node_attr_ints(n, "axes", &cnt);
    int64_t in_axes[OT_MAX_RANK];
    if (cnt == 0 && n->n_inputs > 1 && n->inputs[1] >= 0) { /* opset-18 axes input, if constant */
        const ot_value *av = &c->g->values[n->inputs[1]];
        int na = av->data ? (int)(av->nbytes / ot_dtype_size(av->dtype)) : -1;
        double v;
        if (na < 0 || na > OT_MAX_RANK)
            return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: %s '%s': axes must be constant", n->op_type, n->name);
        for (int i = 0; i < na && const_elem(c, n->inputs[1], i, &v); i++) in_axes[cnt++] = (int64_t)v;
        axes = in_axes;
    }
    bool keep = ot_node_attr_int(n, "keepdims", 1) != 0;
    if (cnt == 0 && ot_node_attr_int(n, "noop_with_empty_axes", 0)) { /* identity */
        ot_gb_add(c, x, dy);
        return OT_OK;
    }
    bool red[OT_MAX_RANK] = {false};
    for (int i = 0; i < xs.rank; i++) red[i] = cnt == 0;
    for (int i = 0; i < cnt; i++) red[norm_axis(axes[i], xs.rank)] = true;
    int64_t count = 1;
    for (int i = 0; i < xs.rank; i++)
        if (red[i]) count = count >= 0 && xs.dim[i] >= 0 ? count * xs.dim[i] : -1;
    int d = dy;
    if (!keep) { /* put the reduced axes back as 1 so ExpandLike broadcasts them */
        ot_shape ks = xs;
        int64_t ax[OT_MAX_RANK];
        int na = 0;
        for (int i = 0; i < xs.rank; i++)
            if (red[i]) {
                ks.dim[i] = 1;
                ks.sym[i] = -1;
                ax[na++] = i;
            }
        int node = -1;
        d = ot_gb_op_s(c, OT_OP_UNSQUEEZE, &d, 1, ot_gb_dtype(c, x), &ks, &node);
        ot_gb_set_ints(c, node, "axes", ax, na);
    }
    int in[2] = {d, x};
    int e = ot_gb_op(c, OT_OP_EXPAND_LIKE, in, 2, x);
    if (n->op == OT_OP_REDUCE_MEAN) {
        if (count < 0) return fail_static(c, n, "static sizes of the reduced axes");
        int m[2] = {e, ot_gb_const_f32(c, 1.0f / (float)count)};
        e = ot_gb_op(c, OT_OP_MUL, m, 2, x);
    }
    ot_gb_add(c, x, e);
    return OT_OK;
}

static ot_status grad_dropout(ot_grad_ctx *c, const ot_node *n, int dy) {
    int x = n->inputs[0];
    double v;
    float ratio = ot_node_attr_float(n, "ratio", 0.5f);
    if (!ot_node_attr(n, "ratio") && n->n_inputs > 1 && const_elem(c, n->inputs[1], 0, &v)) ratio = (float)v;
    bool training = ot_node_attr_int(n, "training_mode", 0) != 0;
    if (!ot_node_attr(n, "training_mode") && n->n_inputs > 2) {
        if (const_elem(c, n->inputs[2], 0, &v)) training = v != 0.0;
        else if (n->inputs[2] >= 0)
            return ot_fail(c->err, OT_E_UNSUPPORTED,
                           "autodiff: Dropout '%s': training_mode is a runtime input; it must be a constant", n->name);
    }
    if (!training || ratio == 0.0f) {
        ot_gb_add(c, x, dy);
        return OT_OK;
    }
    /* DropoutGrad redraws the mask and reads only dY; its second operand gives dX's
     * shape, which dY has. X there would be a saved value no kernel reads: kept by
     * every plan, and recomputed under remat with the producer chain behind it (GPT-2's
     * mlp.2 GEMM per block under sqrt, bench/NOTES.md). */
    int in[2] = {dy, dy}, node = -1;
    ot_shape xs = ot_gb_shape(c, x);
    int out = ot_gb_op_s(c, OT_OP_DROPOUT_GRAD, in, 2, ot_gb_dtype(c, x), &xs, &node);
    ot_gb_copy_attrs(c, node, n);
    ot_gb_set_float(c, node, "ratio", ratio);
    ot_gb_set_int(c, node, "training_mode", 1);
    ot_gb_set_int(c, node, "rng_node", n->id);
    ot_gb_add(c, x, out);
    return OT_OK;
}

ot_status ot_grad_shape(ot_grad_ctx *c, const ot_node *n, const int *dy) {
    int x = n->inputs[0];
    switch (n->op) {
    case OT_OP_IDENTITY: ot_gb_add(c, x, dy[0]); return OT_OK;
    case OT_OP_FLATTEN:
    case OT_OP_RESHAPE:
    case OT_OP_SQUEEZE:
    case OT_OP_UNSQUEEZE: {
        if (!ot_gb_needs(c, x)) return OT_OK;
        int out = -1;
        ot_status st = ot_gb_reshape_like(c, dy[0], x, &out);
        if (st == OT_OK) ot_gb_add(c, x, out);
        return st;
    }
    case OT_OP_TRANSPOSE: return grad_transpose(c, n, dy[0]);
    case OT_OP_CONCAT: return grad_concat(c, n, dy[0]);
    case OT_OP_SPLIT: return grad_split(c, n, dy);
    case OT_OP_SLICE: {
        int in[6] = {dy[0], x, -1, -1, -1, -1};
        for (int i = 1; i < n->n_inputs && i < 5; i++) in[i + 1] = n->inputs[i];
        int node = -1;
        ot_shape xs = ot_gb_shape(c, x);
        int out = ot_gb_op_s(c, OT_OP_SLICE_GRAD, in, n->n_inputs + 1, ot_gb_dtype(c, x), &xs, &node);
        ot_gb_copy_attrs(c, node, n);
        ot_gb_add(c, x, out);
        return OT_OK;
    }
    case OT_OP_GATHER: {
        int in[3] = {dy[0], n->inputs[1], x}, node = -1;
        ot_shape xs = ot_gb_shape(c, x);
        int out = ot_gb_op_s(c, OT_OP_GATHER_GRAD, in, 3, ot_gb_dtype(c, x), &xs, &node);
        ot_gb_copy_attrs(c, node, n);
        ot_gb_add(c, x, out);
        return OT_OK;
    }
    case OT_OP_EXPAND: {
        ot_shape ys = ot_gb_shape(c, n->outputs[0]);
        ot_gb_add_like(c, x, dy[0], &ys);
        return OT_OK;
    }
    case OT_OP_REDUCE_MEAN:
    case OT_OP_REDUCE_SUM: return grad_reduce(c, n, dy[0]);
    case OT_OP_DROPOUT: return grad_dropout(c, n, dy[0]);
    default:
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s': no gradient rule for %s", n->name,
                       n->op_type);
    }
}
