/* loss.c — loss builders: appends cross-entropy (SoftmaxCrossEntropyLoss with a new
 * int64 "labels" input), mean squared error, BCE-with-logits or L1 (MseLoss,
 * BceWithLogitsLoss, L1Loss with a new float "targets" input shaped like the output)
 * or "use this scalar output as the loss" to an imported forward graph. */
#include "autodiff/autodiff.h"
#include "autodiff/loss_rows.h" /* classes last: [rows, C] instead of a Transpose */

#include <stdlib.h>
#include <string.h>

ot_status ot_loss_kind_parse(const char *s, ot_loss_kind *out, ot_error *err) {
    if (strcmp(s, "cross-entropy") == 0) *out = OT_LOSS_CROSS_ENTROPY;
    else if (strcmp(s, "mse") == 0) *out = OT_LOSS_MSE;
    else if (strcmp(s, "bce") == 0) *out = OT_LOSS_BCE_LOGITS;
    else if (strcmp(s, "l1") == 0) *out = OT_LOSS_L1;
    else if (strcmp(s, "output") == 0) *out = OT_LOSS_OUTPUT;
    else return ot_fail(err, OT_E_USAGE, "unknown loss '%s'; use cross-entropy, mse, bce, l1 or output", s);
    return OT_OK;
}

const char *ot_loss_kind_name(ot_loss_kind k) {
    switch (k) {
    case OT_LOSS_CROSS_ENTROPY: return "cross-entropy";
    case OT_LOSS_MSE: return "mse";
    case OT_LOSS_BCE_LOGITS: return "bce";
    case OT_LOSS_L1: return "l1";
    case OT_LOSS_OUTPUT: return "output";
    }
    return "?";
}

static int add_input(ot_graph *g, const char *base, ot_dtype dt, const ot_shape *s) {
    int v = ot_graph_add_value_unique(g, base, dt, s, OT_VK_INPUT);
    if (v < 0) return -1;
    int *p = realloc(g->inputs, (size_t)(g->n_inputs + 1) * sizeof(int));
    if (!p) return -1;
    g->inputs = p;
    g->inputs[g->n_inputs++] = v;
    return v;
}

/* A loss over (output, a new "targets" input shaped like it): MSE, BCE, L1. */
static ot_status elementwise_loss(ot_graph *g, ot_op op, ot_loss_kind kind, int out, int *loss, ot_error *err) {
    ot_shape s = g->values[out].shape;
    int targets = add_input(g, "targets", g->values[out].dtype, &s);
    ot_shape scalar = ot_shape_make(0, NULL);
    *loss = ot_graph_add_value_unique(g, "loss", OT_F32, &scalar, OT_VK_ACTIVATION);
    char name[64];
    snprintf(name, sizeof name, "loss/%s", ot_loss_kind_name(kind));
    int in[2] = {out, targets};
    if (targets < 0 || *loss < 0 || ot_graph_add_node(g, op, name, in, 2, loss, 1, OT_PHASE_LOSS) < 0)
        return ot_fail(err, OT_E_MEMORY, "%s loss: out of memory", ot_loss_kind_name(kind));
    return OT_OK;
}

static ot_status cross_entropy(ot_graph *g, const ot_loss_options *opt, int out, int *loss, ot_error *err) {
    ot_shape s = g->values[out].shape;
    const char *name = g->values[out].name;
    if (s.rank < 2)
        return ot_fail(err, OT_E_MODEL,
                       "cross-entropy loss: output '%s' must have rank >= 2 ([batch, ..., classes]); its shape is "
                       "unknown or 1-D",
                       name);
    int k = opt->class_axis < 0 ? s.rank + opt->class_axis : opt->class_axis;
    if (k < 0 || k >= s.rank)
        return ot_fail(err, OT_E_USAGE, "cross-entropy loss: class axis %d is out of range for output '%s' of rank %d",
                       opt->class_axis, name, s.rank);
    /* SoftmaxCrossEntropyLoss wants classes on axis 1: move them there. */
    int64_t perm[OT_MAX_RANK];
    int np = 0;
    for (int i = 0; i < s.rank; i++)
        if (i != k) perm[np++] = i;
    memmove(&perm[2], &perm[1], (size_t)(np - 1) * sizeof(int64_t));
    perm[1] = k;
    ot_shape ls = {.rank = s.rank - 1}, ts = {.rank = s.rank};
    for (int i = 0, j = 0; i < s.rank; i++) {
        ts.dim[i] = s.dim[perm[i]];
        ts.sym[i] = s.sym[perm[i]];
        if (i != 1) {
            ls.dim[j] = s.dim[perm[i]];
            ls.sym[j++] = s.sym[perm[i]];
        }
    }
    int scores = out;
    bool rows = ot_loss_rows_fit(&s, k);
    if (k != 1 && !rows) {
        char base[512];
        snprintf(base, sizeof base, "%s_classes_on_axis1", name);
        scores = ot_graph_add_value_unique(g, base, g->values[out].dtype, &ts, OT_VK_ACTIVATION);
        if (scores < 0) goto oom;
        int t = ot_graph_add_node(g, OT_OP_TRANSPOSE, "loss/transpose", &out, 1, &scores, 1, OT_PHASE_LOSS);
        if (t < 0 || ot_node_set_attr_ints(&g->nodes[t], "perm", perm, s.rank)) goto oom;
    }
    int labels = add_input(g, "labels", OT_I64, &ls);
    ot_shape scalar = ot_shape_make(0, NULL);
    *loss = ot_graph_add_value_unique(g, "loss", OT_F32, &scalar, OT_VK_ACTIVATION);
    if (labels < 0 || *loss < 0) goto oom;
    int in[2] = {scores, labels};
    if (rows && ot_loss_rows_flatten(g, out, labels, &in[0], &in[1])) goto oom;
    int n = ot_graph_add_node(g, OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS, "loss/cross_entropy", in, 2, loss, 1, OT_PHASE_LOSS);
    if (n < 0 || ot_node_set_attr_string(&g->nodes[n], "reduction", "mean")) goto oom;
    if (opt->has_ignore_index && ot_node_set_attr_int(&g->nodes[n], "ignore_index", opt->ignore_index)) goto oom;
    return OT_OK;
oom:
    return ot_fail(err, OT_E_MEMORY, "cross-entropy loss: out of memory");
}

ot_status ot_loss_build(ot_graph *g, const ot_loss_options *opt, int *loss_value, ot_error *err) {
    *loss_value = -1;
    int out = -1;
    if (opt->output_name) {
        for (int i = 0; i < g->n_outputs; i++)
            if (strcmp(g->values[g->outputs[i]].name, opt->output_name) == 0) out = g->outputs[i];
        if (out < 0) return ot_fail(err, OT_E_USAGE, "loss: the model has no output named '%s'", opt->output_name);
    } else {
        if (g->n_outputs == 0) return ot_fail(err, OT_E_MODEL, "loss: the model has no outputs");
        out = g->outputs[0];
    }
    const ot_value *ov = &g->values[out];
    if (!ot_dtype_is_float(ov->dtype))
        return ot_fail(err, OT_E_MODEL, "loss: output '%s' is %s, not floating point", ov->name,
                       ot_dtype_name(ov->dtype));
    switch (opt->kind) {
    case OT_LOSS_CROSS_ENTROPY: return cross_entropy(g, opt, out, loss_value, err);
    case OT_LOSS_MSE: return elementwise_loss(g, OT_OP_MSE_LOSS, OT_LOSS_MSE, out, loss_value, err);
    case OT_LOSS_BCE_LOGITS: return elementwise_loss(g, OT_OP_BCE_LOGITS_LOSS, OT_LOSS_BCE_LOGITS, out, loss_value, err);
    case OT_LOSS_L1: return elementwise_loss(g, OT_OP_L1_LOSS, OT_LOSS_L1, out, loss_value, err);
    case OT_LOSS_OUTPUT:
        if (ov->shape.rank < 0 || ot_shape_numel(&ov->shape) != 1)
            return ot_fail(err, OT_E_MODEL,
                           "loss 'output': model output '%s' must be a scalar float (one element); pick another "
                           "with --loss-output or use cross-entropy / mse",
                           ov->name);
        *loss_value = out;
        return OT_OK;
    }
    return ot_fail(err, OT_E_USAGE, "loss: unknown loss kind %d", (int)opt->kind);
}
