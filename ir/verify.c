/* verify.c — structural checks of an IR graph (single producer, consistent consumer
 * lists, arity from ops.def, acyclic, dtypes that agree) and topological ordering.
 * Passes call ot_graph_verify after they rewrite the graph; messages name the node
 * or value so a user can find it in the model. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static const char *node_label(const ot_node *n) { return (n->name && n->name[0]) ? n->name : n->op_type; }

int ot_graph_topo_order(const ot_graph *g, int *order, int *cycle_node) {
    /* Kahn's algorithm over live nodes; ties broken by node id so the order is stable. */
    int *indeg = ot_xcalloc((size_t)g->n_nodes, sizeof(int));
    int *queue = ot_xcalloc((size_t)g->n_nodes, sizeof(int));
    if (!indeg || !queue) {
        free(indeg);
        free(queue);
        return -1;
    }
    int live = 0;
    for (int id = 0; id < g->n_nodes; id++) {
        const ot_node *n = &g->nodes[id];
        if (n->removed) continue;
        live++;
        for (int i = 0; i < n->n_inputs; i++) {
            int v = n->inputs[i];
            if (v >= 0 && g->values[v].producer >= 0 && !g->nodes[g->values[v].producer].removed) indeg[id]++;
        }
    }
    int head = 0, tail = 0, count = 0;
    for (int id = 0; id < g->n_nodes; id++)
        if (!g->nodes[id].removed && indeg[id] == 0) queue[tail++] = id;
    while (head < tail) {
        int id = queue[head++];
        order[count++] = id;
        const ot_node *n = &g->nodes[id];
        for (int o = 0; o < n->n_outputs; o++) {
            int v = n->outputs[o];
            if (v < 0) continue;
            const ot_value *val = &g->values[v];
            for (int c = 0; c < val->n_consumers; c++) {
                int cn = val->consumers[c];
                if (!g->nodes[cn].removed && --indeg[cn] == 0) queue[tail++] = cn;
            }
        }
    }
    if (count < live) {
        if (cycle_node) {
            *cycle_node = -1;
            for (int id = 0; id < g->n_nodes; id++)
                if (!g->nodes[id].removed && indeg[id] > 0) {
                    *cycle_node = id;
                    break;
                }
        }
        count = -1;
    }
    free(indeg);
    free(queue);
    return count;
}

ot_status ot_graph_verify(const ot_graph *g, ot_error *err) {
    int *producers = ot_xcalloc((size_t)g->n_values, sizeof(int));
    int *order = ot_xcalloc((size_t)g->n_nodes, sizeof(int));
    ot_status st = OT_OK;
    if (!producers || !order) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory verifying graph");
        goto done;
    }
    for (int i = 0; i < g->n_values; i++) producers[i] = -1;
    for (int id = 0; id < g->n_nodes; id++) {
        const ot_node *n = &g->nodes[id];
        if (n->removed) continue;
        const ot_op_info *info = ot_op_get(n->op);
        if (n->op != OT_OP_UNKNOWN) {
            if (n->n_inputs < info->min_inputs || (info->max_inputs >= 0 && n->n_inputs > info->max_inputs)) {
                st = ot_fail(err, OT_E_MODEL, "node '%s' (%s): %d inputs, op takes %d to %d", node_label(n),
                             n->op_type, n->n_inputs, info->min_inputs, info->max_inputs);
                goto done;
            }
            if (n->n_outputs < info->min_outputs || (info->max_outputs >= 0 && n->n_outputs > info->max_outputs)) {
                st = ot_fail(err, OT_E_MODEL, "node '%s' (%s): %d outputs, op gives %d to %d", node_label(n),
                             n->op_type, n->n_outputs, info->min_outputs, info->max_outputs);
                goto done;
            }
        }
        for (int i = 0; i < n->n_inputs; i++) {
            int v = n->inputs[i];
            if (v < -1 || v >= g->n_values) {
                st = ot_fail(err, OT_E_INTERNAL, "node '%s': input %d has bad value id %d", node_label(n), i, v);
                goto done;
            }
            if (v < 0) continue;
            const ot_value *val = &g->values[v];
            bool listed = false;
            for (int c = 0; c < val->n_consumers; c++) listed |= val->consumers[c] == id;
            if (!listed) {
                st = ot_fail(err, OT_E_INTERNAL, "value '%s' does not list its consumer '%s'", val->name,
                             node_label(n));
                goto done;
            }
            bool has_source = val->producer >= 0 || val->kind == OT_VK_INPUT || val->kind == OT_VK_PARAM ||
                              val->kind == OT_VK_STATE || val->kind == OT_VK_CONSTANT ||
                              val->kind == OT_VK_OPT_STATE;
            if (!has_source) {
                st = ot_fail(err, OT_E_MODEL,
                             "node '%s' (%s) reads '%s', which no node produces and is neither a graph input "
                             "nor an initializer",
                             node_label(n), n->op_type, val->name);
                goto done;
            }
        }
        for (int o = 0; o < n->n_outputs; o++) {
            int v = n->outputs[o];
            if (v < 0) continue;
            if (v >= g->n_values) {
                st = ot_fail(err, OT_E_INTERNAL, "node '%s': output %d has bad value id %d", node_label(n), o, v);
                goto done;
            }
            const ot_value *val = &g->values[v];
            if (producers[v] >= 0) {
                st = ot_fail(err, OT_E_MODEL, "value '%s' is produced by two nodes: '%s' and '%s'", val->name,
                             node_label(&g->nodes[producers[v]]), node_label(n));
                goto done;
            }
            if (val->kind == OT_VK_INPUT || val->kind == OT_VK_PARAM || val->kind == OT_VK_CONSTANT) {
                st = ot_fail(err, OT_E_MODEL, "node '%s' writes '%s', which is a graph input or initializer",
                             node_label(n), val->name);
                goto done;
            }
            producers[v] = id;
        }
        /* Elementwise ops with several float inputs must agree on dtype (Where's
         * condition and Cast are the exceptions). */
        if (ot_op_has(n->op, OT_T_ELEMENTWISE) && n->op != OT_OP_WHERE && n->op != OT_OP_CAST &&
            !ot_op_has(n->op, OT_T_INTERNAL) && n->n_inputs >= 2) {
            ot_dtype t0 = n->inputs[0] >= 0 ? g->values[n->inputs[0]].dtype : OT_UNDEFINED;
            for (int i = 1; i < n->n_inputs; i++) {
                ot_dtype ti = n->inputs[i] >= 0 ? g->values[n->inputs[i]].dtype : OT_UNDEFINED;
                if (t0 && ti && t0 != ti && n->op != OT_OP_POW) {
                    st = ot_fail(err, OT_E_MODEL, "node '%s' (%s): input dtypes differ (%s '%s' vs %s '%s')",
                                 node_label(n), n->op_type, ot_dtype_name(t0), g->values[n->inputs[0]].name,
                                 ot_dtype_name(ti), g->values[n->inputs[i]].name);
                    goto done;
                }
            }
        }
    }
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].producer != producers[v] &&
            !(producers[v] < 0 && g->values[v].producer >= 0 && g->nodes[g->values[v].producer].removed)) {
            st = ot_fail(err, OT_E_INTERNAL, "value '%s': producer link out of date", g->values[v].name);
            goto done;
        }
    for (int i = 0; i < g->n_outputs; i++) {
        const ot_value *val = &g->values[g->outputs[i]];
        if (val->producer < 0 && val->kind == OT_VK_ACTIVATION) {
            st = ot_fail(err, OT_E_MODEL, "graph output '%s' is produced by no node", val->name);
            goto done;
        }
    }
    int cyc = -1;
    if (ot_graph_topo_order(g, order, &cyc) < 0) {
        st = ot_fail(err, OT_E_MODEL, "graph has a cycle through node '%s'",
                     cyc >= 0 ? node_label(&g->nodes[cyc]) : "?");
        goto done;
    }
done:
    free(producers);
    free(order);
    return st;
}
