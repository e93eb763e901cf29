/* workspace.c — what a device's workspace query is asked (see workspace.h), and
 * ot_plan_device_idle: whether a device asks any workspace of an order's nodes. Kept
 * apart from planner.c, which calls the query once per step. */
#include <stdlib.h>
#include <string.h>

#include "plan/planner.h"
#include "plan/workspace.h"

/* Dtype + shape descriptors (no data) of a node's inputs and outputs, for the
 * backend's workspace query. */
static void describe(const ot_graph *g, const int *ids, int n, ot_tensor *t) {
    for (int k = 0; k < n; k++) {
        memset(&t[k], 0, sizeof t[k]);
        int v = ids[k];
        if (v < 0 || v >= g->n_values) continue;
        t[k].dtype = g->values[v].dtype;
        t[k].shape = g->values[v].shape;
        int64_t ne = ot_shape_numel(&t[k].shape);
        t[k].nbytes = ne > 0 ? (size_t)ne * ot_dtype_size(t[k].dtype) : 0;
    }
}

size_t ot_plan_node_workspace(const ot_plan_device *dev, const ot_graph *g, const ot_node *nd, ot_tensor *tin,
                              ot_tensor *tout) {
    if (!dev || !dev->workspace_bytes) return 0;
    describe(g, nd->inputs, nd->n_inputs, tin);
    describe(g, nd->outputs, nd->n_outputs, tout);
    return dev->workspace_bytes(dev->ctx, nd, tin, tout);
}

bool ot_plan_device_idle(const ot_graph *g, const int *order, int n, const ot_plan_device *dev) {
    if (!dev || !dev->workspace_bytes) return true;
    int max_io = 1;
    for (int s = 0; s < n; s++) {
        const ot_node *nd = &g->nodes[order[s]];
        if (nd->n_inputs > max_io) max_io = nd->n_inputs;
        if (nd->n_outputs > max_io) max_io = nd->n_outputs;
    }
    ot_tensor *tin = calloc((size_t)max_io, sizeof *tin), *tout = calloc((size_t)max_io, sizeof *tout);
    bool idle = tin && tout;
    for (int s = 0; s < n && idle; s++) idle = ot_plan_node_workspace(dev, g, &g->nodes[order[s]], tin, tout) == 0;
    free(tin);
    free(tout);
    return idle;
}
