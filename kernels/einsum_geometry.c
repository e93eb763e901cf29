/* einsum_geometry.c — the host half of kernels/einsum_geometry.h: operands, label
 * sizes and strides of an Einsum or EinsumGrad node. */
#include "kernels/einsum_geometry.h"

#include <string.h>

#include "kernels/kernel_common.h"

/* Label sizes from an operand (labels lab, shape s): an ellipsis label may broadcast
 * from 1, a letter may not. */
static ot_status add_sizes(const ot_node *node, const ot_einsum *e, ot_ein_geom *g, const int8_t *lab,
                           const ot_shape *s, ot_error *err) {
    for (int d = s->rank - 1; d >= 0; d--) {
        int l = lab[d];
        int64_t dim = s->dim[d];
        if (g->size[l] < 0 || (g->size[l] == 1 && e->ellipsis[l])) {
            g->size[l] = dim;
        } else if (dim != g->size[l] && !(dim == 1 && e->ellipsis[l])) {
            if (e->ellipsis[l])
                return ot_fail(err, OT_E_SHAPE,
                               "node '%s' (%s): the dims \"...\" stands for do not broadcast (%lld and %lld)",
                               node->name, node->op_type, (long long)dim, (long long)g->size[l]);
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): label '%c' is %lld in one operand and %lld in another",
                           node->name, node->op_type, e->letter[l], (long long)dim, (long long)g->size[l]);
        }
    }
    return OT_OK;
}

/* Operand k's strides per label, once every size is known (0 where it broadcasts). */
static void add_strides(ot_ein_geom *g, int k, const int8_t *lab, const ot_shape *s) {
    int64_t stride = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        int l = lab[d];
        if (!(s->dim[d] == 1 && g->size[l] != 1)) g->stride[k][l] += stride;
        stride *= s->dim[d];
    }
}

ot_status ot_ein_geometry(const ot_node *node, const ot_tensor *in, const ot_tensor *out, ot_ein_geom *g,
                          ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    bool grad = node->op == OT_OP_EINSUM_GRAD;
    if (grad && in[0].dtype != out[0].dtype)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): dY's dtype differs from the output's", node->name,
                       node->op_type);
    int first = grad ? 1 : 0, n_x = node->n_inputs - first;
    int ranks[OT_EIN_MAX_IN];
    if (n_x < 1 || n_x > OT_EIN_MAX_IN)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): %d operands (1 to %d)", node->name, node->op_type, n_x,
                       OT_EIN_MAX_IN);
    for (int k = 0; k < n_x; k++) {
        if (in[first + k].dtype != out[0].dtype || (out[0].dtype != OT_F32 && out[0].dtype != OT_F64))
            return ot_fail(err, OT_E_UNSUPPORTED,
                           "node '%s' (%s): operand %d is not float32 or float64 like the output", node->name,
                           node->op_type, k);
        ranks[k] = in[first + k].shape.rank;
    }
    ot_einsum e;
    char msg[160];
    if (!ot_einsum_parse(pp->u.einsum.equation, n_x, ranks, &e, msg, sizeof msg))
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): equation \"%s\": %s", node->name, node->op_type,
                       pp->u.einsum.equation ? pp->u.einsum.equation : "", msg);
    int idx = pp->u.einsum.index;
    if (grad && (idx < 0 || idx >= n_x))
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): index %d out of range for %d operands", node->name,
                       node->op_type, idx, n_x);
    memset(g, 0, sizeof *g);
    g->n_labels = e.n_labels;
    for (int l = 0; l < e.n_labels; l++)
        g->size[l] = -1;
    const int8_t *olab = grad ? e.label[idx] : e.out_label;
    int orank = grad ? e.rank[idx] : e.out_rank;
    if (out[0].shape.rank != orank)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output rank %d, the equation gives %d", node->name,
                       node->op_type, out[0].shape.rank, orank);
    if (grad) {
        if (in[0].shape.rank != e.out_rank)
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): dY has rank %d, the equation's output %d", node->name,
                           node->op_type, in[0].shape.rank, e.out_rank);
        g->input[g->n_ops++] = 0;
    }
    for (int k = 0; k < n_x; k++)
        if (!grad || k != idx) g->input[g->n_ops++] = first + k;
    const int8_t *labs[OT_EIN_MAX_IN];
    for (int j = 0; j < g->n_ops; j++) {
        labs[j] = g->input[j] < first ? e.out_label : e.label[g->input[j] - first];
        if ((st = add_sizes(node, &e, g, labs[j], &in[g->input[j]].shape, err))) return st;
    }
    g->out_rank = orank;
    g->n_out = 1;
    for (int d = 0; d < orank; d++) {
        int l = olab[d];
        int64_t dim = out[0].shape.dim[d];
        g->out_label[d] = (int8_t)l;
        g->out_dim[d] = dim;
        g->n_out *= dim;
        if (g->size[l] < 0) g->size[l] = dim; /* a label only the output has (EinsumGrad) */
        if (dim != g->size[l] && !(grad && dim == 1 && e.ellipsis[l]))
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output dim %d is %lld, label '%c' is %lld", node->name,
                           node->op_type, d, (long long)dim, e.letter[l], (long long)g->size[l]);
    }
    for (int l = 0; l < e.n_labels; l++)
        if (g->size[l] < 0) g->size[l] = 1; /* an ellipsis dim no operand reaches */
    for (int j = 0; j < g->n_ops; j++)
        add_strides(g, j, labs[j], &in[g->input[j]].shape);
    return OT_OK;
}
