/* params_rule.c — which float initializers train: the one rule that pick_params
 * (autodiff.c) applies and `onnxtrain info` shows. An ONNX file carries no marker of
 * what was a parameter, and current exporters store scalars (Pow exponents, the
 * attention scale, eps), masks and folded tables as initializers; training those gives
 * NaN or meaningless steps. The rule only looks at shapes, at how each initializer is
 * consumed and at the dynamo exporter's record of each consumer's traced call (node
 * metadata, kept by the importer as ot_node.trace), never at its values, so `info` (which reads no weights) and `train`
 * always agree. docs/training.md "Which initializers train" documents it. */
#include "autodiff/autodiff.h"

#include <stdio.h>
#include <stdlib.h>

/* Input slots that take no gradient by default even when the tensor there is float. */
static const struct {
    ot_op op;
    int slot;
    const char *reason;
} nondiff_slots[] = {
    {OT_OP_POW, 1, "only Pow's exponent"},
    {OT_OP_WHERE, 0, "only Where's condition"},
    {OT_OP_CLIP, 1, "only Clip's bounds"},
    {OT_OP_CLIP, 2, "only Clip's bounds"},
    {OT_OP_DROPOUT, 1, "only Dropout's ratio"},
    {OT_OP_DROPOUT, 2, "only Dropout's training mode"},
    {OT_OP_PAD, 1, "only Pad's pads"},
    {OT_OP_PAD, 2, "only Pad's constant value"},
    {OT_OP_PAD, 3, "only Pad's axes"},
    {OT_OP_RANGE, 0, "only Range's bounds"},
    {OT_OP_RANGE, 1, "only Range's bounds"},
    {OT_OP_RANGE, 2, "only Range's bounds"},
    {OT_OP_RESHAPE, 1, "only shape inputs"},
    {OT_OP_EXPAND, 1, "only shape inputs"},
    {OT_OP_CONSTANT_OF_SHAPE, 0, "only shape inputs"},
    {OT_OP_TILE, 1, "only Tile's repeats"},
    {OT_OP_SLICE, 1, "only Slice's starts, ends, axes or steps"},
    {OT_OP_SLICE, 2, "only Slice's starts, ends, axes or steps"},
    {OT_OP_SLICE, 3, "only Slice's starts, ends, axes or steps"},
    {OT_OP_SLICE, 4, "only Slice's starts, ends, axes or steps"},
    {OT_OP_TRILU, 1, "only Trilu's k"},
    /* spatial ops (issue 26, ops batch 2) */
    {OT_OP_RESIZE, 1, "only Resize's roi, scales or sizes"},
    {OT_OP_RESIZE, 2, "only Resize's roi, scales or sizes"},
    {OT_OP_RESIZE, 3, "only Resize's roi, scales or sizes"},
    {OT_OP_UPSAMPLE, 1, "only Upsample's scales"},
    {OT_OP_UPSAMPLE, 2, "only Upsample's scales"},
    /* ops3 (issue 26): rotary caches and position ids, attention masks */
    {OT_OP_ROTARY_EMBEDDING, 1, "only RotaryEmbedding's cos/sin caches"},
    {OT_OP_ROTARY_EMBEDDING, 2, "only RotaryEmbedding's cos/sin caches"},
    {OT_OP_ROTARY_EMBEDDING, 3, "only RotaryEmbedding's position ids"},
    {OT_OP_ATTENTION, 3, "only Attention's mask"},
    {OT_OP_ATTENTION, 4, "only Attention's past key/value cache"},
    {OT_OP_ATTENTION, 5, "only Attention's past key/value cache"},
};

static const char *nondiff_slot(ot_op op, int slot) {
    for (size_t i = 0; i < sizeof nondiff_slots / sizeof nondiff_slots[0]; i++)
        if (nondiff_slots[i].op == op && nondiff_slots[i].slot == slot) return nondiff_slots[i].reason;
    return NULL;
}

static bool is_fwd(const ot_node *n) { return n->phase == OT_PHASE_FORWARD || n->phase == OT_PHASE_LOSS; }

/* Walks the forward nodes from the targets back: reach[v] when a target depends on v
 * at all, live[v] when it depends on v through float values and differentiable slots. */
static void walk_back(const ot_graph *g, const int *order, int n_order, bool *reach, bool *live) {
    for (int k = n_order - 1; k >= 0; k--) {
        const ot_node *n = &g->nodes[order[k]];
        if (!is_fwd(n)) continue;
        bool any_reach = false, any_live = false;
        for (int i = 0; i < n->n_outputs; i++) {
            int o = n->outputs[i];
            if (o < 0) continue;
            any_reach |= reach[o];
            any_live |= live[o] && ot_dtype_is_float(g->values[o].dtype);
        }
        for (int i = 0; i < n->n_inputs; i++) {
            int v = n->inputs[i];
            if (v < 0) continue;
            if (any_reach) reach[v] = true;
            if (any_live && ot_dtype_is_float(g->values[v].dtype) && !nondiff_slot(n->op, i)) live[v] = true;
        }
    }
}

/* Why v, used on the way to a target but not differentiably, stays constant. */
static const char *why_not_live(const ot_graph *g, int v) {
    const ot_value *val = &g->values[v];
    const char *only = NULL;
    for (int c = 0; c < val->n_consumers; c++) {
        const ot_node *n = &g->nodes[val->consumers[c]];
        if (n->removed || !is_fwd(n)) continue;
        for (int i = 0; i < n->n_inputs; i++) {
            if (n->inputs[i] != v) continue;
            const char *r = nondiff_slot(n->op, i);
            if (!r) return "no differentiable path to the loss";
            if (only && only != r) return "only inputs that take no gradient (exponents, conditions, bounds, shapes)";
            only = r;
        }
    }
    return only ? only : "no differentiable path to the loss";
}

/* The InstanceNormalization of a traced group_norm (ot_trace): its scale and bias
 * inputs are the exporter's ones and zeros per group, shared by every GroupNorm of that
 * group count (a diffusers UNet's, Wav2Vec2's feature encoder's); the GroupNorm's own
 * weight and bias are the Mul / Add after it. Training them would add parameters
 * PyTorch's model does not have, tied across all those layers. */
static bool group_norm_constant(const ot_node *n) {
    return n->trace == OT_TRACE_GROUP_NORM && n->op == OT_OP_INSTANCE_NORM;
}

/* The value the layers read for initializer v: v itself, or the output of the one
 * Cast that reads it, the float32 master weight of a float16/bfloat16 model read in the
 * model's dtype (train/lowp_model.c), whose readers decide as v's would. */
static int layer_value(const ot_graph *g, int v) {
    const ot_value *val = &g->values[v];
    if (val->n_consumers != 1) return v;
    const ot_node *n = &g->nodes[val->consumers[0]];
    return !n->removed && is_fwd(n) && n->op == OT_OP_CAST && n->n_outputs == 1 && n->outputs[0] >= 0 ? n->outputs[0]
                                                                                                       : v;
}

/* A file from PyTorch's dynamo exporter records on every node the call it was traced
 * from (ot_node.trace). An initializer read only by traced calls none of which reads a
 * parameter was computed by the exporter's optimizer from buffers, lifted constants or
 * shapes (rotary cos/sin, position rows at the traced length, a relative-position
 * bias): a folded table, constant. A reader without a record (another exporter, or a
 * node the importer made) leaves the decision to the rest of the rule. */
static bool folded_table(const ot_graph *g, int v) {
    const ot_value *val = &g->values[v];
    bool traced = false;
    for (int c = 0; c < val->n_consumers; c++) {
        const ot_node *n = &g->nodes[val->consumers[c]];
        if (n->removed || !is_fwd(n)) continue;
        if (n->trace != OT_TRACE_NO_PARAM && !group_norm_constant(n)) return false;
        traced = true;
    }
    return traced;
}

ot_status ot_param_rule(const ot_graph *g, const int *targets, int n_targets, const char **reason, ot_error *err) {
    int nv = g->n_values;
    int *order = ot_xcalloc((size_t)g->n_nodes + 1, sizeof(int));
    bool *reach = ot_xcalloc((size_t)nv + 1, sizeof(bool));
    bool *live = ot_xcalloc((size_t)nv + 1, sizeof(bool));
    ot_status st = OT_OK;
    if (!order || !reach || !live) {
        st = ot_fail(err, OT_E_MEMORY, "autodiff: out of memory while classifying initializers");
        goto done;
    }
    int n_order = ot_graph_topo_order(g, order, NULL);
    if (n_order < 0) {
        st = ot_fail(err, OT_E_MODEL, "autodiff: graph '%s' has a cycle", g->name);
        goto done;
    }
    for (int i = 0; i < n_targets; i++)
        if (targets[i] >= 0 && targets[i] < nv) reach[targets[i]] = live[targets[i]] = true;
    walk_back(g, order, n_order, reach, live);
    for (int v = 0; v < nv; v++) {
        const ot_value *val = &g->values[v];
        reason[v] = NULL;
        if (val->kind != OT_VK_PARAM || !ot_dtype_is_float(val->dtype)) continue;
        if (val->shape.rank == 0)
            reason[v] = "scalar";
        else if (reach[v] && !live[v])
            reason[v] = why_not_live(g, v);
        else if (reach[v] && folded_table(g, layer_value(g, v)))
            reason[v] = g->values[layer_value(g, v)].n_consumers &&
                                group_norm_constant(&g->nodes[g->values[layer_value(g, v)].consumers[0]])
                            ? "no PyTorch parameter: the scale / bias of the InstanceNormalization the exporter "
                              "wrote for a GroupNorm (its weight and bias are the Mul / Add after it)"
                            : "no PyTorch parameter: its readers' traced calls read none (a folded table, a buffer "
                              "or a constant)";
        /* Unused on the way to the loss: a param with a zero gradient, as it always was. */
    }
done:
    free(order);
    free(reach);
    free(live);
    return st;
}

/* The layer kind (plural) of node n reading a tensor in `slot` as a layer's own
 * parameter: a norm's scale or bias, a Gemm's or Conv's weight or bias, a MatMul's
 * weight, a rank-1 operand of Add (a Linear's bias, once the dynamo exporter has split
 * the Linear); NULL otherwise. A genuinely tied tensor (an embedding read by Gather
 * and, transposed, by the output projection) reads in none of these twice. */
static const char *layer_slot(const ot_graph *g, const ot_node *n, int slot, int v) {
    switch (n->op) {
    case OT_OP_LAYER_NORM: return slot == 1 || slot == 2 ? "LayerNorms" : NULL;
    case OT_OP_RMS_NORM: return slot == 1 ? "RMSNorms" : NULL;
    case OT_OP_BATCH_NORM: return slot == 1 || slot == 2 ? "BatchNorms" : NULL;
    case OT_OP_GEMM: return slot == 1 || slot == 2 ? "Gemms" : NULL;
    case OT_OP_CONV: return slot == 1 || slot == 2 ? "Convs" : NULL;
    case OT_OP_CONV_TRANSPOSE: return slot == 1 || slot == 2 ? "ConvTransposes" : NULL;
    case OT_OP_MATMUL: return slot == 1 ? "MatMuls" : NULL;
    case OT_OP_ADD: return g->values[v].shape.rank == 1 ? "bias Adds" : NULL;
    default: return NULL;
    }
}

int ot_param_layer_sharing(const ot_graph *g, int v, char *what, size_t cap) {
    enum { KINDS = 6 };
    const char *kind[KINDS] = {0};
    int count[KINDS] = {0}, n_kinds = 0, total = 0;
    v = layer_value(g, v);
    const ot_value *val = &g->values[v];
    for (int c = 0; c < val->n_consumers; c++) {
        const ot_node *n = &g->nodes[val->consumers[c]];
        if (n->removed || !is_fwd(n)) continue;
        /* One node may read v in several slots (scale and bias) or appear twice in
         * the consumer list: count it once. */
        bool seen = false;
        for (int d = 0; d < c && !seen; d++) seen = val->consumers[d] == val->consumers[c];
        const char *k = NULL;
        for (int i = 0; i < n->n_inputs && !seen && !k; i++)
            if (n->inputs[i] == v) k = layer_slot(g, n, i, v);
        if (!k) continue;
        int j = 0;
        while (j < n_kinds && kind[j] != k) j++;
        if (j == n_kinds && n_kinds < KINDS) kind[n_kinds++] = k;
        if (j < n_kinds) count[j]++, total++;
    }
    if (what && cap) {
        if (n_kinds <= 1) {
            snprintf(what, cap, "%s", n_kinds ? kind[0] : "layers");
        } else {
            size_t len = (size_t)snprintf(what, cap, "layers (");
            for (int j = 0; j < n_kinds && len < cap; j++)
                len += (size_t)snprintf(what + len, cap - len, "%s%d %s", j ? ", " : "", count[j], kind[j]);
            if (len < cap) snprintf(what + len, cap - len, ")");
        }
    }
    return total;
}
