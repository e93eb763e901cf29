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
    int n;
    const int64_t *strides = ot_node_attr_ints(node, "strides", &n);
    if (strides && n != nd) strides = NULL;
    const int64_t *dil = ot_node_attr_ints(node, "dilations", &n);
    if (dil && n != nd) dil = NULL;
    const int64_t *pads = ot_node_attr_ints(node, "pads", &n);
    if (pads && n != 2 * nd) pads = NULL;
    const char *auto_pad = ot_node_attr_string(node, "auto_pad", "NOTSET");
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
        if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
            int64_t total = (w->out[i] - 1) * w->stride[i] + span - w->in[i];
            if (total < 0) total = 0;
            int64_t small = total / 2;
            w->pad_begin[i] = strcmp(auto_pad, "SAME_UPPER") == 0 ? small : total - small;
            w->pad_end[i] = total - w->pad_begin[i];
        } else if (strcmp(auto_pad, "VALID") == 0) {
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
    int n = 0;
    const int64_t *kernel = ot_node_attr_ints(node, "kernel_shape", &n);
    if (!kernel || n != x->shape.rank - 2)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): kernel_shape missing or of the wrong length", node->name,
                       node->op_type);
    ot_window w;
    ot_status st = ot_window_init(&w, node, &x->shape, &y->shape, kernel, err);
    if (st) return st;
    if (y->shape.dim[0] != x->shape.dim[0] || y->shape.dim[1] != x->shape.dim[1])
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output N, C differ from the input's", node->name,
                       node->op_type);
    ot_window3_lift(p, &w);
    p->planes = x->shape.dim[0] * x->shape.dim[1];
    return OT_OK;
}
