/* dropout_pattern.c — Dropout as PyTorch's dynamo exporter lowers it (torch's
 * bernoulli_ path, nn.Dropout(inplace=True) in torchvision's classifiers):
 *
 *     u = RandomUniformLike(like x)   keep = Less(u, p)   m = Cast(keep, float)
 *     y = Mul(x, Div(m, p))                       (p: the keep probability, a constant)
 *
 * (without its optimizer: p as CastLike(constant, u), and CastLike(keep, a float
 * tensor) for the Cast)
 * becomes Dropout(x, ratio = 1 - p, training_mode = 1) writing y. The two compute the
 * same thing in training (a Bernoulli(p) mask scaled by 1/p; onnxtrain draws the mask
 * from Dropout's Philox key), but only Dropout has a mode: `eval`, validation and
 * `--no-dropout` turn it off (train/infer.c), as model.eval() does in PyTorch, while
 * the lowered form would keep dropping at inference. The chain that only fed the
 * RandomUniformLike (Shape -> Expand) goes too. Anything that differs from the pattern
 * (another reader of u, keep or m, p not one known constant in both places, another
 * range than [0, 1)) is left as it is: RandomUniformLike is an op of its own. */
#include <stdio.h>
#include <string.h>

#include "import_internal.h"

static bool live_op(const ot_graph *g, int node, ot_op op) {
    return node >= 0 && !g->nodes[node].removed && g->nodes[node].op == op;
}

/* The one consumer of v, or -1 when v has none, several, or is a graph output. A
 * CastLike reading v only for its dtype (input 1: p cast like u) does not count. */
static int only_consumer(const ot_graph *g, int v) {
    const ot_value *val = &g->values[v];
    if (val->is_graph_output) return -1;
    int found = -1;
    for (int c = 0; c < val->n_consumers; c++) {
        const ot_node *n = &g->nodes[val->consumers[c]];
        if (n->op == OT_OP_CAST_LIKE && n->inputs[0] != v) continue;
        if (found >= 0 && found != val->consumers[c]) return -1;
        found = val->consumers[c];
    }
    return found;
}

/* A one-element float32 constant's value, also through CastLike(constant, float32). */
static bool const_f32(const ot_graph *g, int v, float *out) {
    if (v < 0) return false;
    const ot_value *val = &g->values[v];
    int p = val->producer;
    if (p >= 0 && live_op(g, p, OT_OP_CAST_LIKE) && val->dtype == OT_F32) return const_f32(g, g->nodes[p].inputs[0], out);
    if (!val->data || val->producer >= 0 || val->dtype != OT_F32 || val->nbytes != sizeof(float)) return false;
    memcpy(out, val->data, sizeof(float));
    return true;
}

/* Removes node and then, walking up, every producer left with no reader. */
static void remove_dead(ot_graph *g, int node) {
    if (node < 0 || g->nodes[node].removed) return;
    for (int o = 0; o < g->nodes[node].n_outputs; o++) {
        int v = g->nodes[node].outputs[o];
        if (v >= 0 && (g->values[v].n_consumers > 0 || g->values[v].is_graph_output)) return;
    }
    int n_in = g->nodes[node].n_inputs;
    int ins[16];
    for (int i = 0; i < n_in && i < 16; i++) ins[i] = g->nodes[node].inputs[i];
    ot_graph_remove_node(g, node);
    for (int i = 0; i < n_in && i < 16; i++)
        if (ins[i] >= 0) remove_dead(g, g->values[ins[i]].producer);
}

/* Matches the pattern from RandomUniformLike node r; true with the Div and Mul nodes,
 * x and p. */
static bool match(const ot_graph *g, int r, int *div_out, int *mul, int *x, float *p) {
    const ot_node *rn = &g->nodes[r];
    if (ot_node_attr_float(rn, "low", 0.0f) != 0.0f || ot_node_attr_float(rn, "high", 1.0f) != 1.0f) return false;
    int less = only_consumer(g, rn->outputs[0]);
    if (!live_op(g, less, OT_OP_LESS) || g->nodes[less].inputs[0] != rn->outputs[0]) return false;
    if (!const_f32(g, g->nodes[less].inputs[1], p) || !(*p > 0.0f && *p <= 1.0f)) return false;
    int cast = only_consumer(g, g->nodes[less].outputs[0]);
    bool to_f32 = live_op(g, cast, OT_OP_CAST) ? ot_node_attr_int(&g->nodes[cast], "to", 0) == OT_F32
                  : live_op(g, cast, OT_OP_CAST_LIKE) && g->nodes[cast].inputs[0] == g->nodes[less].outputs[0]
                      ? g->values[g->nodes[cast].outputs[0]].dtype == OT_F32
                      : false;
    if (!to_f32) return false;
    int div = only_consumer(g, g->nodes[cast].outputs[0]);
    float q;
    if (!live_op(g, div, OT_OP_DIV) || g->nodes[div].inputs[0] != g->nodes[cast].outputs[0] ||
        !const_f32(g, g->nodes[div].inputs[1], &q) || q != *p)
        return false;
    *div_out = div;
    *mul = only_consumer(g, g->nodes[div].outputs[0]);
    if (!live_op(g, *mul, OT_OP_MUL)) return false;
    const ot_node *mn = &g->nodes[*mul];
    int scale = g->nodes[div].outputs[0];
    *x = mn->inputs[0] == scale ? mn->inputs[1] : mn->inputs[0];
    if (*x == scale || g->values[*x].dtype != OT_F32) return false;
    /* the mask must be exactly x's shape (no broadcast in the Mul) */
    const ot_shape *xs = &g->values[*x].shape, *us = &g->values[rn->outputs[0]].shape;
    if (xs->rank < 0 || xs->rank != us->rank) return false;
    for (int i = 0; i < xs->rank; i++)
        if (xs->dim[i] != us->dim[i] || xs->sym[i] != us->sym[i] || (xs->dim[i] < 0 && xs->sym[i] < 0)) return false;
    return true;
}

ot_status ot_imp_fuse_dropout(ot_graph *g, ot_error *err) {
    int n0 = g->n_nodes;
    for (int r = 0; r < n0; r++) {
        if (!live_op(g, r, OT_OP_RANDOM_UNIFORM_LIKE)) continue;
        int div, mul, x;
        float p;
        if (!match(g, r, &div, &mul, &x, &p)) continue;
        int y = g->nodes[mul].outputs[0];
        char name[300];
        snprintf(name, sizeof name, "%s", g->nodes[mul].name ? g->nodes[mul].name : "dropout");
        ot_graph_remove_node(g, mul); /* the Dropout below writes y */
        int d = ot_graph_add_node(g, OT_OP_DROPOUT, name, &x, 1, &y, 1, OT_PHASE_FORWARD);
        if (d < 0 || ot_node_set_attr_float(&g->nodes[d], "ratio", 1.0f - p) ||
            ot_node_set_attr_int(&g->nodes[d], "training_mode", 1))
            return ot_fail(err, OT_E_MEMORY, "out of memory");
        /* the scale Div has no reader now: it, the Cast, the Less, the draw and what
         * only fed the draw (Shape -> Expand) go */
        remove_dead(g, div);
    }
    return OT_OK;
}
