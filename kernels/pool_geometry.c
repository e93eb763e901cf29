/* pool_geometry.c — resolving a pool node's window (see pool_geometry.h), for the CPU
 * kernels and the CUDA host code alike. */
#include "kernels/pool_geometry.h"

#include "kernels/cpu/cpu_common.h"

void ot_window3_lift(ot_window3 *p, const ot_cpu_window *w) {
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
    ot_cpu_window w;
    ot_status st = ot_cpu_window_init(&w, node, &x->shape, &y->shape, kernel, err);
    if (st) return st;
    if (y->shape.dim[0] != x->shape.dim[0] || y->shape.dim[1] != x->shape.dim[1])
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output N, C differ from the input's", node->name,
                       node->op_type);
    ot_window3_lift(p, &w);
    p->planes = x->shape.dim[0] * x->shape.dim[1];
    return OT_OK;
}
