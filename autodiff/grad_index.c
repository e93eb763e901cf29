/* grad_index.c — gradient rules of the layout and indexing ops of issue 13.
 *   Pad:            dX = PadGrad(dY, X, pads [, axes]) with the Pad's mode: the crop
 *                   of dY, plus the mirrored / border / wrapped contributions
 *   Tile:           dX = TileGrad(dY, X): dY summed over the tiles
 *   Trilu:          dX = Trilu(dY [, k]), the same triangle
 *   GatherElements: dData = GatherElementsGrad(dY, indices, data), a scatter-add
 *   CumSum:         dX = CumSum(dY, axis) in the other direction, as exclusive as
 *                   the forward (sum over the outputs each input reached)
 *   ScatterND / ScatterElements (reduction none): dData = the same scatter of zeros
 *                   into dY (the overwritten positions get nothing), dUpdates = the
 *                   matching gather of dY (GatherND / GatherElements); reduction add:
 *                   dData = dY. Other reductions have no rule here. With repeated
 *                   indices under none (undefined in ONNX; the kernels keep the last
 *                   update) every update still gets its gathered dY, as with
 *                   PyTorch's scatter.
 *   Resize / Upsample (issue 26): dX = ResizeGrad(dY, X, roi, scales, sizes), the
 *                   adjoint of the interpolation; Upsample's implied transform
 *                   (asymmetric, floor) is written on the backward node
 *   DepthToSpace / SpaceToDepth (issue 26): dX = the other op on dY with the same
 *                   blocksize and mode (a permutation's inverse)
 *   GatherND (batch_dims 0): dData = ScatterND(ZerosLike(data), indices, dY, add),
 *                   repeated index tuples adding up in order
 * Pad's constant_value, Tile's repeats, Trilu's k and CumSum's axis are integer or
 * scalar operands that get no gradient. */
#include <string.h>

#include "autodiff/grad_rules.h"

static int input_or_absent(const ot_node *n, int k) { return k < n->n_inputs ? n->inputs[k] : -1; }

static void set_reduction(ot_grad_ctx *c, int node, const char *r) {
    if (node >= 0 && ot_node_set_attr_string(&c->g->nodes[node], "reduction", r)) c->oom = true;
}

static ot_status grad_scatter(ot_grad_ctx *c, const ot_node *n, int dy) {
    int data = n->inputs[0], idx = n->inputs[1], upd = n->inputs[2];
    const char *red = ot_node_attr_string(n, "reduction", "none");
    bool add = strcmp(red, "add") == 0, elements = n->op == OT_OP_SCATTER_ELEMENTS;
    if (!add && strcmp(red, "none") != 0)
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s' (%s): no gradient for reduction '%s'", n->name,
                       n->op_type, red);
    if (ot_gb_needs(c, data)) {
        if (add) {
            ot_gb_add(c, data, dy);
        } else {
            int node = -1, in[3] = {dy, idx, ot_gb_op(c, OT_OP_ZEROS_LIKE, &upd, 1, upd)};
            ot_shape ds = ot_gb_shape(c, data);
            int out = ot_gb_op_s(c, n->op, in, 3, ot_gb_dtype(c, data), &ds, &node);
            ot_gb_copy_attrs(c, node, n);
            ot_gb_add(c, data, out);
        }
    }
    if (ot_gb_needs(c, upd)) {
        int node = -1, in[2] = {dy, idx};
        ot_shape us = ot_gb_shape(c, upd);
        int out = ot_gb_op_s(c, elements ? OT_OP_GATHER_ELEMENTS : OT_OP_GATHER_ND, in, 2, ot_gb_dtype(c, upd), &us, &node);
        if (elements) ot_gb_set_int(c, node, "axis", ot_node_attr_int(n, "axis", 0));
        ot_gb_add(c, upd, out);
    }
    return OT_OK;
}

ot_status ot_grad_index(ot_grad_ctx *c, const ot_node *n, const int *dy) {
    int x = n->inputs[0];
    if (dy[0] < 0) return OT_OK;
    if (n->op == OT_OP_SCATTER_ND || n->op == OT_OP_SCATTER_ELEMENTS) return grad_scatter(c, n, dy[0]);
    if (!ot_gb_needs(c, x)) return OT_OK;
    ot_shape xs = ot_gb_shape(c, x);
    ot_dtype xt = ot_gb_dtype(c, x);
    int node = -1, out = -1;
    switch (n->op) {
    case OT_OP_PAD: {
        int axes = input_or_absent(n, 3);
        int in[4] = {dy[0], x, n->inputs[1], axes};
        out = ot_gb_op_s(c, OT_OP_PAD_GRAD, in, axes >= 0 ? 4 : 3, xt, &xs, &node);
        break;
    }
    case OT_OP_TILE: {
        int in[2] = {dy[0], x};
        out = ot_gb_op_s(c, OT_OP_TILE_GRAD, in, 2, xt, &xs, &node);
        break;
    }
    case OT_OP_TRILU: {
        int k = input_or_absent(n, 1);
        int in[2] = {dy[0], k};
        out = ot_gb_op_s(c, OT_OP_TRILU, in, k >= 0 ? 2 : 1, xt, &xs, &node);
        break;
    }
    case OT_OP_GATHER_ELEMENTS: {
        int in[3] = {dy[0], n->inputs[1], x};
        out = ot_gb_op_s(c, OT_OP_GATHER_ELEMENTS_GRAD, in, 3, xt, &xs, &node);
        break;
    }
    case OT_OP_GATHER_ND: {
        if (ot_node_attr_int(n, "batch_dims", 0) != 0)
            return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s' (GatherND): no gradient with batch_dims != 0",
                           n->name);
        int in[3] = {ot_gb_op(c, OT_OP_ZEROS_LIKE, &x, 1, x), n->inputs[1], dy[0]};
        out = ot_gb_op_s(c, OT_OP_SCATTER_ND, in, 3, xt, &xs, &node);
        set_reduction(c, node, "add");
        ot_gb_add(c, x, out);
        return OT_OK;
    }
    case OT_OP_RESIZE:
    case OT_OP_UPSAMPLE: {
        int in[5] = {dy[0], x, input_or_absent(n, 1), input_or_absent(n, 2), input_or_absent(n, 3)};
        out = ot_gb_op_s(c, OT_OP_RESIZE_GRAD, in, n->n_inputs + 1, xt, &xs, &node);
        ot_gb_copy_attrs(c, node, n);
        if (n->op == OT_OP_UPSAMPLE && node >= 0 &&
            (ot_node_set_attr_string(&c->g->nodes[node], "coordinate_transformation_mode", "asymmetric") ||
             ot_node_set_attr_string(&c->g->nodes[node], "nearest_mode", "floor")))
            c->oom = true;
        ot_gb_add(c, x, out);
        return OT_OK;
    }
    case OT_OP_DEPTH_TO_SPACE:
    case OT_OP_SPACE_TO_DEPTH: {
        ot_op inv = n->op == OT_OP_DEPTH_TO_SPACE ? OT_OP_SPACE_TO_DEPTH : OT_OP_DEPTH_TO_SPACE;
        out = ot_gb_op_s(c, inv, dy, 1, xt, &xs, &node);
        break;
    }
    case OT_OP_CUMSUM: {
        int in[2] = {dy[0], n->inputs[1]};
        out = ot_gb_op_s(c, OT_OP_CUMSUM, in, 2, xt, &xs, &node);
        ot_gb_copy_attrs(c, node, n);
        ot_gb_set_int(c, node, "reverse", ot_node_attr_int(n, "reverse", 0) ? 0 : 1);
        ot_gb_add(c, x, out);
        return OT_OK;
    }
    default:
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s': no gradient rule for %s", n->name,
                       n->op_type);
    }
    ot_gb_copy_attrs(c, node, n);
    ot_gb_add(c, x, out);
    return OT_OK;
}
