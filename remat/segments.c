/* segments.c — what remat needs to know about a training graph before choosing:
 * the forward order, which forward values the backward pass reads (saved), which
 * are read by the loss (pinned), which depend on data at all, and the articulation
 * values of the forward graph — the cut points Chen et al. segments end at.
 *
 * An articulation value v (produced at forward position p) is one that every later
 * forward computation depends on through v alone: no other data-dependent value
 * produced at or before p is read after p. Params, constants, data inputs and values
 * computed from params only are always available, so they do not break a cut. On a
 * residual net the cuts are the block outputs (x + f(x)); on a transformer the
 * residual stream between sub-blocks; on a chain every activation. Because every
 * forward node is an ancestor or a descendant of a true cut, the cuts found do not
 * depend on which topological order the schedule picked. */
#include <stdlib.h>
#include <string.h>

#include "autodiff/autocast.h"
#include "remat/remat.h"
#include "plan/schedule.h"

void ot_remat_analysis_free(ot_remat_analysis *a) {
    if (!a) return;
    free(a->fwd);
    free(a->fwd_pos);
    free(a->candidate);
    free(a->saved);
    free(a->pinned);
    free(a->is_static);
    free(a->art);
    free(a->segment);
    free(a->node_flops);
    free(a->bwd_node);
    memset(a, 0, sizeof *a);
}

static bool live_producer(const ot_graph *g, int v, ot_phase phase) {
    int p = g->values[v].producer;
    return p >= 0 && !g->nodes[p].removed && g->nodes[p].phase == phase;
}

/* A cast that --precision made again for the backward pass (autodiff/autocast.h:
 * a recompute clone of a forward Cast named OT_AUTOCAST_AGAIN, made before any
 * policy): to remat it is a backward reader like any other, whose input a policy
 * keeps or recomputes. */
static bool precision_recast(const ot_graph *g, int id) {
    const ot_node *n = &g->nodes[id];
    size_t l = n->name ? strlen(n->name) : 0, k = strlen(OT_AUTOCAST_AGAIN);
    return n->phase == OT_PHASE_RECOMPUTE && n->op == OT_OP_CAST && l > k && !strcmp(n->name + l - k, OT_AUTOCAST_AGAIN) &&
           n->orig_node >= 0 &&
           n->orig_node < g->n_nodes && g->nodes[n->orig_node].phase == OT_PHASE_FORWARD &&
           g->nodes[n->orig_node].op == OT_OP_CAST;
}

ot_status ot_remat_analyze(const ot_graph *g, ot_remat_analysis *a, ot_error *err) {
    ot_status st = OT_OK;
    int *order = NULL, n_order = 0, *last_use = NULL;
    memset(a, 0, sizeof *a);
    int nv = g->n_values, nn = g->n_nodes;
    a->n_values = nv;
    a->n_nodes = nn;
    st = ot_schedule_build(g, &order, &n_order, err);
    if (st != OT_OK) goto fail;
    a->fwd = ot_xcalloc((size_t)nn, sizeof(int));
    a->fwd_pos = ot_xcalloc((size_t)nn, sizeof(int));
    a->candidate = ot_xcalloc((size_t)nv, sizeof(bool));
    a->saved = ot_xcalloc((size_t)nv, sizeof(bool));
    a->pinned = ot_xcalloc((size_t)nv, sizeof(bool));
    a->is_static = ot_xcalloc((size_t)nv, sizeof(bool));
    a->art = ot_xcalloc((size_t)nv, sizeof(int));
    a->segment = ot_xcalloc((size_t)nv, sizeof(int));
    a->node_flops = ot_xcalloc((size_t)nn, sizeof(double));
    a->bwd_node = ot_xcalloc((size_t)nn + 1, sizeof(bool));
    last_use = ot_xcalloc((size_t)nv, sizeof(int));
    if (!a->fwd || !a->fwd_pos || !a->candidate || !a->saved || !a->pinned || !a->is_static || !a->art ||
        !a->segment || !a->node_flops || !a->bwd_node || !last_use) {
        st = ot_fail(err, OT_E_MEMORY, "remat: out of memory analysing graph '%s'", g->name);
        goto fail;
    }
    for (int id = 0; id < nn; id++) {
        a->fwd_pos[id] = -1;
        a->bwd_node[id] = g->nodes[id].phase == OT_PHASE_BACKWARD || precision_recast(g, id);
        if (!g->nodes[id].removed) a->node_flops[id] = ot_remat_node_flops(g, &g->nodes[id]);
    }
    a->step_flops = ot_remat_step_flops(g);
    for (int i = 0; i < n_order; i++) {
        const ot_node *n = &g->nodes[order[i]];
        if (n->phase == OT_PHASE_RECOMPUTE && !precision_recast(g, order[i])) {
            st = ot_fail(err, OT_E_USAGE, "remat: graph '%s' was already rewritten (node '%s' is a clone)",
                         g->name, n->name);
            goto fail;
        }
        if (n->phase != OT_PHASE_FORWARD) continue;
        a->fwd_pos[order[i]] = a->n_fwd;
        a->fwd[a->n_fwd++] = order[i];
    }

    /* Static (data-independent) values: inputs are data; anything computed from data is. */
    for (int v = 0; v < nv; v++) {
        ot_value_kind k = g->values[v].kind;
        a->is_static[v] = k == OT_VK_PARAM || k == OT_VK_CONSTANT || k == OT_VK_STATE;
        a->segment[v] = -1;
    }
    for (int p = 0; p < a->n_fwd; p++) {
        const ot_node *n = &g->nodes[a->fwd[p]];
        bool st_in = true;
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] >= 0 && !a->is_static[n->inputs[i]]) st_in = false;
        for (int o = 0; o < n->n_outputs; o++)
            if (n->outputs[o] >= 0) a->is_static[n->outputs[o]] = st_in;
    }

    /* Candidates, saved and pinned values; last forward use of each. */
    for (int v = 0; v < nv; v++) {
        const ot_value *val = &g->values[v];
        if (val->kind != OT_VK_ACTIVATION || !live_producer(g, v, OT_PHASE_FORWARD)) continue;
        const ot_node *prod = &g->nodes[val->producer];
        if (prod->op == OT_OP_UNKNOWN || ot_op_has(prod->op, OT_T_SHAPE)) continue;
        a->candidate[v] = true;
        a->pinned[v] = val->is_graph_output;
        last_use[v] = a->fwd_pos[val->producer];
        for (int c = 0; c < val->n_consumers; c++) {
            const ot_node *cn = &g->nodes[val->consumers[c]];
            if (cn->removed) continue;
            if (cn->phase == OT_PHASE_BACKWARD || precision_recast(g, cn->id)) a->saved[v] = true;
            if (cn->phase == OT_PHASE_LOSS || cn->phase == OT_PHASE_OPTIMIZER) {
                a->pinned[v] = true;
                last_use[v] = a->n_fwd;
            }
            if (cn->phase == OT_PHASE_FORWARD && a->fwd_pos[cn->id] > last_use[v]) last_use[v] = a->fwd_pos[cn->id];
        }
        if (a->saved[v]) a->saved_bytes += ot_remat_value_bytes(g, v);
    }

    /* The sweep: reach = furthest forward use of any data value produced so far. */
    int reach = -1;
    for (int p = 0; p < a->n_fwd; p++) {
        const ot_node *n = &g->nodes[a->fwd[p]];
        int live_out = -1, n_live_out = 0;
        for (int o = 0; o < n->n_outputs; o++) {
            int v = n->outputs[o];
            if (v < 0 || !a->candidate[v] || a->is_static[v] || last_use[v] <= p) continue;
            live_out = v;
            n_live_out++;
        }
        bool data_node = false;
        for (int o = 0; o < n->n_outputs; o++) {
            int v = n->outputs[o];
            if (v < 0 || a->is_static[v]) continue;
            data_node = true;
            if (a->candidate[v] && a->segment[v] < 0) a->segment[v] = a->n_art;
        }
        if (data_node && n_live_out == 1 && reach <= p) a->art[a->n_art++] = live_out;
        for (int o = 0; o < n->n_outputs; o++) {
            int v = n->outputs[o];
            if (v >= 0 && a->candidate[v] && !a->is_static[v] && last_use[v] > reach) reach = last_use[v];
        }
    }
    /* Static candidates belong to the segment of their first data-dependent consumer;
     * 0 is as good as any for reporting. */
    for (int v = 0; v < nv; v++)
        if (a->candidate[v] && a->segment[v] < 0) a->segment[v] = 0;
fail:
    free(order);
    free(last_use);
    if (st != OT_OK) ot_remat_analysis_free(a);
    return st;
}
