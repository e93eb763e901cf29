/* grad_index.c — gradient rules of the layout and indexing ops of issue 13.
 *   Pad:            dX = PadGrad(dY, X, pads [, axes]) with the Pad's mode: the crop
 *                   of dY, plus the mirrored / border / wrapped contributions
 *   Tile:           dX = TileGrad(dY, X): dY summed over the tiles
 *   Trilu:          dX = Trilu(dY [, k]), the same triangle
 *   GatherElements: dData = GatherElementsGrad(dY, indices, data), a scatter-add
 *   CumSum:         dX = CumSum(dY, axis) in the other direction, as exclusive as
 *                   the forward (sum over the outputs each input reached)
 * Pad's constant_value, Tile's repeats, Trilu's k and CumSum's axis are integer or
 * scalar operands that get no gradient. */
#include "autodiff/grad_rules.h"

static int input_or_absent(const ot_node *n, int k) { return k < n->n_inputs ? n->inputs[k] : -1; }

ot_status ot_grad_index(ot_grad_ctx *c, const ot_node *n, const int *dy) {
    int x = n->inputs[0];
    if (!ot_gb_needs(c, x) || dy[0] < 0) return OT_OK;
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
