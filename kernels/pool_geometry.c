/* pool_geometry.c — resolving a conv or pool node's window (see pool_geometry.h), for
 * the CPU kernels and the CUDA host code alike. */
#include "kernels/pool_geometry.h"

#include <string.h>

ot_status ot_window_init(ot_window *w, const ot_node *node, const ot_shape *x, const ot_shape *y,
                         const int64_t *kernel, ot_error *err) {
    memset(w, 0, sizeof *w);
    int nd = x->rank - 2;
    if (nd < 1 || nd > 3 || y->rank != x->rank)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): CPU kernel handles 1-D to 3-D spatial inputs, got rank %d",
                       node->name, node->op_type, x->rank);
    w->nd = nd;
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    const ot_window_params *wp = &pp->u.window;
    /* a list of the wrong length counts as absent */
    const int64_t *strides = wp->n_strides == nd ? wp->strides : NULL;
    const int64_t *dil = wp->n_dilations == nd ? wp->dilations : NULL;
    const int64_t *pads = wp->n_pads == 2 * nd ? wp->pads : NULL;
    ot_auto_pad auto_pad = wp->auto_pad;
    w->group = wp->group;
    for (int i = 0; i < nd; i++) {
        w->in[i] = x->dim[2 + i];
        w->out[i] = y->dim[2 + i];
        w->k[i] = kernel[i];
        w->stride[i] = strides ? strides[i] : 1;
        w->dil[i] = dil ? dil[i] : 1;
        if (w->k[i] < 1 || w->stride[i] < 1 || w->dil[i] < 1)
            return ot_fail(err, OT_E_MODEL, "node '%s' (%s): kernel, strides and dilations must be positive",
                           node->name, node->op_type);
        int64_t span = (w->k[i] - 1) * w->dil[i] + 1;
        if (node->op == OT_OP_CONV_TRANSPOSE) {
            /* x is the transpose's output, y its input (ir/op_params.h) */
            ot_conv_transpose_pads(wp, nd, i, w->out[i], w->k[i], w->in[i], &w->pad_begin[i], &w->pad_end[i]);
            if (w->pad_begin[i] < 0)
                return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): output_shape needs a negative begin pad",
                               node->name, node->op_type);
        } else if (auto_pad == OT_AUTO_PAD_SAME_UPPER || auto_pad == OT_AUTO_PAD_SAME_LOWER) {
            int64_t total = (w->out[i] - 1) * w->stride[i] + span - w->in[i];
            if (total < 0) total = 0;
            int64_t small = total / 2;
            w->pad_begin[i] = auto_pad == OT_AUTO_PAD_SAME_UPPER ? small : total - small;
            w->pad_end[i] = total - w->pad_begin[i];
        } else if (auto_pad == OT_AUTO_PAD_VALID) {
            w->pad_begin[i] = w->pad_end[i] = 0;
        } else {
            w->pad_begin[i] = pads ? pads[i] : 0;
            w->pad_end[i] = pads ? pads[nd + i] : 0;
        }
    }
    return OT_OK;
}

void ot_window3_lift(ot_window3 *p, const ot_window *w) {
    int lead = 3 - w->nd;
    p->in_sz = p->out_sz = 1;
    for (int i = 0; i < 3; i++) {
        int j = i - lead;
        p->in[i] = j >= 0 ? w->in[j] : 1;
        p->out[i] = j >= 0 ? w->out[j] : 1;
        p->k[i] = j >= 0 ? w->k[j] : 1;
        p->s[i] = j >= 0 ? w->stride[j] : 1;
        p->d[i] = j >= 0 ? w->dil[j] : 1;
        p->pb[i] = j >= 0 ? w->pad_begin[j] : 0;
        p->pe[i] = j >= 0 ? w->pad_end[j] : 0;
        p->in_sz *= p->in[i];
        p->out_sz *= p->out[i];
    }
}

ot_status ot_pool_window_init(ot_window3 *p, const ot_node *node, const ot_tensor *x, const ot_tensor *y,
                              ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    const ot_window_params *wp = &pp->u.window;
    if (wp->n_kernel < 0 || wp->n_kernel != x->shape.rank - 2)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): kernel_shape missing or of the wrong length", node->name,
                       node->op_type);
    ot_window w;
    if ((st = ot_window_init(&w, node, &x->shape, &y->shape, wp->kernel, err))) return st;
    if (y->shape.dim[0] != x->shape.dim[0] || y->shape.dim[1] != x->shape.dim[1])
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output N, C differ from the input's", node->name,
                       node->op_type);
    ot_window3_lift(p, &w);
    p->planes = x->shape.dim[0] * x->shape.dim[1];
    p->include_pad = wp->count_include_pad;
    p->col_major = wp->storage_order;
    return OT_OK;
}
