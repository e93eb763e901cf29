/* ref_eval.c — the test-only reference evaluator (see ref_eval.h). */
#include "ref_eval.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"

ot_ref_env *ot_ref_new(const ot_graph *g) {
    ot_ref_env *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->g = g;
    e->vals = calloc((size_t)g->n_values + 1, sizeof(ot_tensor));
    e->fed = calloc((size_t)g->n_values + 1, sizeof(bool));
    e->n_threads = 2;
    if (!e->vals || !e->fed) {
        ot_ref_free(e);
        return NULL;
    }
    return e;
}

static void drop(ot_ref_env *e, int v) {
    free(e->vals[v].data);
    memset(&e->vals[v], 0, sizeof e->vals[v]);
}

void ot_ref_free(ot_ref_env *e) {
    if (!e) return;
    if (e->vals)
        for (int v = 0; v < e->g->n_values; v++) free(e->vals[v].data);
    free(e->vals);
    free(e->fed);
    free(e);
}

static ot_status alloc_value(ot_ref_env *e, int v, ot_error *err) {
    const ot_value *val = &e->g->values[v];
    if (!ot_shape_is_static(&val->shape))
        return ot_fail(err, OT_E_SHAPE, "ref_eval: value '%s' has no static shape", val->name);
    size_t n = (size_t)ot_shape_numel(&val->shape) * ot_dtype_size(val->dtype);
    drop(e, v);
    e->vals[v].dtype = val->dtype;
    e->vals[v].shape = val->shape;
    e->vals[v].nbytes = n;
    e->vals[v].data = calloc(1, n ? n : 1);
    if (!e->vals[v].data) return ot_fail(err, OT_E_MEMORY, "ref_eval: out of memory");
    return OT_OK;
}

ot_status ot_ref_feed(ot_ref_env *e, int v, const void *data, size_t nbytes, ot_error *err) {
    ot_status st = alloc_value(e, v, err);
    if (st) return st;
    if (nbytes != e->vals[v].nbytes)
        return ot_fail(err, OT_E_DATA, "ref_eval: value '%s' takes %zu bytes, fed %zu", e->g->values[v].name,
                       e->vals[v].nbytes, nbytes);
    memcpy(e->vals[v].data, data, nbytes);
    e->fed[v] = true;
    return OT_OK;
}

ot_status ot_ref_run(ot_ref_env *e, bool forward_only, ot_error *err) {
    const ot_graph *g = e->g;
    ot_status st = OT_OK;
    int *order = calloc((size_t)g->n_nodes + 1, sizeof(int));
    ot_tensor *in = NULL, *out = NULL;
    void *ws = NULL;
    if (!order) return ot_fail(err, OT_E_MEMORY, "ref_eval: out of memory");
    for (int v = 0; v < g->n_values; v++) {
        if (e->fed[v]) continue;
        if (g->values[v].data) {
            if ((st = alloc_value(e, v, err))) goto fail;
            size_t n = g->values[v].nbytes < e->vals[v].nbytes ? g->values[v].nbytes : e->vals[v].nbytes;
            memcpy(e->vals[v].data, g->values[v].data, n);
        } else {
            drop(e, v);
        }
    }
    int n = ot_graph_topo_order(g, order, NULL);
    if (n < 0) {
        st = ot_fail(err, OT_E_MODEL, "ref_eval: cycle");
        goto fail;
    }
    for (int k = 0; k < n; k++) {
        const ot_node *node = &g->nodes[order[k]];
        if (forward_only && node->phase == OT_PHASE_BACKWARD) continue;
        in = calloc((size_t)node->n_inputs + 1, sizeof(ot_tensor));
        out = calloc((size_t)node->n_outputs + 1, sizeof(ot_tensor));
        if (!in || !out) {
            st = ot_fail(err, OT_E_MEMORY, "ref_eval: out of memory");
            goto fail;
        }
        for (int i = 0; i < node->n_inputs; i++) {
            int v = node->inputs[i];
            if (v < 0) continue;
            if (!e->vals[v].data) {
                st = ot_fail(err, OT_E_INTERNAL, "ref_eval: node '%s' reads '%s', which has no data", node->name,
                             g->values[v].name);
                goto fail;
            }
            in[i] = e->vals[v];
        }
        for (int i = 0; i < node->n_outputs; i++) {
            int v = node->outputs[i];
            if (v < 0) continue;
            if ((st = alloc_value(e, v, err))) goto fail;
            out[i] = e->vals[v];
        }
        size_t wsb = ot_cpu_workspace_bytes(node, in, out);
        ws = wsb ? calloc(1, wsb) : NULL;
        ot_kernel_ctx ctx = {.n_threads = e->n_threads, .seed = e->seed, .step = e->step,
                             .workspace = ws, .workspace_bytes = wsb};
        /* the executor's contract from autodiff.h */
        ctx.rng_node = (int)ot_node_attr_int(node, "rng_node", node->orig_node >= 0 ? node->orig_node : node->id);
        st = ot_cpu_run_node(node, in, out, &ctx, err);
        free(ws);
        ws = NULL;
        free(in);
        free(out);
        in = out = NULL;
        if (st) goto fail;
    }
fail:
    free(ws);
    free(in);
    free(out);
    free(order);
    return st;
}

const float *ot_ref_f32(const ot_ref_env *e, int v) {
    if (v < 0 || v >= e->g->n_values || e->vals[v].dtype != OT_F32) return NULL;
    return e->vals[v].data;
}
