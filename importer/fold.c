/* fold.c — constant folding during shape inference: a node whose inputs are all
 * constants (never params or state), a Constant, or a Shape of a static shape, is
 * computed once at import time with the graph's injected evaluator (g->fold_eval: the
 * CPU kernels) and replaced by its constant outputs. This is what turns PyTorch's Shape -> Gather -> Unsqueeze -> Concat ->
 * Reshape chains into static Reshapes once symbolic dims are bound. */
#include "shape_internal.h"

#include <stdlib.h>
#include <string.h>

/* Folded results above this many elements stay computed at run time: big constants
 * would cost memory and export size for nothing. */
#define OT_FOLD_MAX_ELEMS (1 << 20)

static bool foldable_op(const ot_node *n) {
    if (n->op == OT_OP_UNKNOWN || n->n_outputs < 1) return false;
    return !ot_op_has(n->op, OT_T_RANDOM | OT_T_STATEFUL | OT_T_OPTIMIZER | OT_T_INTERNAL);
}

static bool outputs_small_static(const ot_graph *g, const ot_node *n) {
    for (int o = 0; o < n->n_outputs; o++) {
        int v = n->outputs[o];
        if (v < 0) continue;
        const ot_value *val = &g->values[v];
        int64_t numel = ot_shape_numel(&val->shape);
        if (numel < 0 || numel > OT_FOLD_MAX_ELEMS || !ot_dtype_supported(val->dtype)) return false;
    }
    return true;
}

/* Writes the Constant node's attribute value as raw bytes of the output's dtype. */
static ot_status constant_bytes(const ot_node *n, const ot_value *out, void *dst, size_t nbytes, bool *ok) {
    const ot_attr *a = NULL;
    *ok = false;
    if ((a = ot_node_attr(n, "value")) && a->type == OT_ATTR_TENSOR && a->t) {
        if (a->t->nbytes != nbytes || a->t->dtype != out->dtype) return OT_OK;
        memcpy(dst, a->t->data, nbytes);
    } else if ((a = ot_node_attr(n, "value_float")) && a->type == OT_ATTR_FLOAT && nbytes == sizeof(float)) {
        memcpy(dst, &a->f, sizeof(float));
    } else if ((a = ot_node_attr(n, "value_int")) && a->type == OT_ATTR_INT && nbytes == sizeof(int64_t)) {
        memcpy(dst, &a->i, sizeof(int64_t));
    } else if ((a = ot_node_attr(n, "value_floats")) && a->type == OT_ATTR_FLOATS &&
               nbytes == (size_t)a->n * sizeof(float)) {
        if (nbytes) memcpy(dst, a->floats, nbytes);
    } else if ((a = ot_node_attr(n, "value_ints")) && a->type == OT_ATTR_INTS &&
               nbytes == (size_t)a->n * sizeof(int64_t)) {
        if (nbytes) memcpy(dst, a->ints, nbytes);
    } else {
        return OT_OK;
    }
    *ok = true;
    return OT_OK;
}

/* Shape's output: dims [start, end) of the (static) input shape. */
static bool shape_bytes(const ot_graph *g, const ot_node *n, int64_t *dst, int64_t count) {
    const ot_value *x = n->n_inputs > 0 && n->inputs[0] >= 0 ? &g->values[n->inputs[0]] : NULL;
    if (!x || !ot_shape_is_static(&x->shape)) return false;
    int64_t r = x->shape.rank;
    int64_t s = ot_node_attr_int(n, "start", 0), e = ot_node_attr_int(n, "end", r);
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = s < 0 ? 0 : (s > r ? r : s);
    e = e < 0 ? 0 : (e > r ? r : e);
    if (e - s != count && !(e <= s && count == 0)) return false;
    for (int64_t i = 0; i < count; i++) dst[i] = x->shape.dim[s + i];
    return true;
}

static bool inputs_constant(const ot_graph *g, const ot_node *n) {
    for (int i = 0; i < n->n_inputs; i++) {
        int v = n->inputs[i];
        if (v < 0) continue;
        const ot_value *val = &g->values[v];
        if (val->kind != OT_VK_CONSTANT || !val->data || !ot_shape_is_static(&val->shape)) return false;
        if (val->nbytes != (size_t)ot_shape_numel(&val->shape) * ot_dtype_size(val->dtype)) return false;
    }
    return true;
}

/* Frees the data of n's inputs that folding left unread: intermediate results of a folded
 * chain (the 4 MB causal-mask slices of each GPT-2 block once the batch is bound) would
 * otherwise stay in memory for nothing. Only values nothing can read again qualify: no
 * consumer and no producer, not a graph output, and not an initializer (the exporter
 * writes those from their data); a Constant node's value is written from the proto. */
static void drop_dead_inputs(ot_graph *g, const ot_node *n) {
    for (int i = 0; i < n->n_inputs; i++) {
        int v = n->inputs[i];
        if (v < 0) continue;
        ot_value *val = &g->values[v];
        if (val->kind != OT_VK_CONSTANT || val->init_index >= 0 || val->n_consumers || val->producer >= 0 ||
            val->is_graph_output)
            continue;
        bool listed = false;
        for (int k = 0; k < g->n_outputs && !listed; k++) listed = g->outputs[k] == v;
        if (listed) continue;
        free(val->data);
        val->data = NULL;
        val->nbytes = 0;
    }
}

ot_status ot_fold_node(ot_graph *g, int id, bool *folded, ot_error *err) {
    ot_node *n = &g->nodes[id];
    ot_tensor *in = NULL, *out = NULL;
    ot_status st = OT_OK;
    *folded = false;
    if (n->removed || !foldable_op(n) || !outputs_small_static(g, n)) return OT_OK;
    bool is_meta = n->op == OT_OP_CONSTANT || n->op == OT_OP_SHAPE || n->op == OT_OP_SIZE;
    if (!is_meta && (!g->fold_eval || !inputs_constant(g, n))) return OT_OK;
    in = ot_xcalloc((size_t)n->n_inputs, sizeof *in);
    out = ot_xcalloc((size_t)n->n_outputs, sizeof *out);
    if (!in || !out) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory folding node '%s'", ot_shape_node_label(n));
        goto fail;
    }
    for (int o = 0; o < n->n_outputs; o++) {
        if (n->outputs[o] < 0) continue;
        const ot_value *v = &g->values[n->outputs[o]];
        out[o].dtype = v->dtype;
        out[o].shape = v->shape;
        out[o].nbytes = (size_t)ot_shape_numel(&v->shape) * ot_dtype_size(v->dtype);
        out[o].data = calloc(1, out[o].nbytes ? out[o].nbytes : 1);
        if (!out[o].data) {
            st = ot_fail(err, OT_E_MEMORY, "out of memory folding node '%s'", ot_shape_node_label(n));
            goto fail;
        }
    }
    bool ok = false;
    if (n->op == OT_OP_CONSTANT) {
        if (n->outputs[0] >= 0) constant_bytes(n, &g->values[n->outputs[0]], out[0].data, out[0].nbytes, &ok);
    } else if (n->op == OT_OP_SHAPE) {
        ok = out[0].dtype == OT_I64 &&
             shape_bytes(g, n, out[0].data, (int64_t)(out[0].nbytes / sizeof(int64_t)));
    } else if (n->op == OT_OP_SIZE) { /* ops batch 4 (issue 26): a static input's count */
        const ot_value *x = n->inputs[0] >= 0 ? &g->values[n->inputs[0]] : NULL;
        ok = out[0].dtype == OT_I64 && out[0].nbytes == sizeof(int64_t) && x && ot_shape_is_static(&x->shape);
        if (ok) *(int64_t *)out[0].data = ot_shape_numel(&x->shape);
    } else {
        for (int i = 0; i < n->n_inputs; i++) {
            if (n->inputs[i] < 0) continue; /* absent: data NULL, dtype undefined */
            const ot_value *v = &g->values[n->inputs[i]];
            in[i].dtype = v->dtype;
            in[i].shape = v->shape;
            in[i].data = v->data;
            in[i].nbytes = v->nbytes;
        }
        /* Any evaluator failure leaves the node in place: unsupported ops are still
         * being written, and bad constant data (an index out of range) fails at run
         * time with the executor's message, which names the node the same way. */
        ot_error kerr = {0};
        if (ot_node_resolve_params(n, &n->params, &kerr)) goto fail; /* bad attributes: left to the executor */
        ot_status est = g->fold_eval(n, id, in, out, &kerr);
        if (est == OT_E_MEMORY) {
            st = ot_fail(err, OT_E_MEMORY, "out of memory folding node '%s'", ot_shape_node_label(n));
            goto fail;
        }
        ok = est == OT_OK;
    }
    if (!ok) goto fail; /* not foldable now: stays a node, st is OT_OK */
    /* The values take the kernel's buffers rather than copies. */
    for (int o = 0; o < n->n_outputs; o++) {
        if (n->outputs[o] < 0) continue;
        ot_value *v = &g->values[n->outputs[o]];
        free(v->data);
        v->data = out[o].data;
        v->nbytes = out[o].nbytes;
        out[o].data = NULL;
        v->kind = OT_VK_CONSTANT;
    }
    ot_graph_remove_node(g, id);
    drop_dead_inputs(g, n);
    *folded = true;
fail:
    for (int o = 0; out && o < n->n_outputs; o++) free(out[o].data);
    free(out);
    free(in);
    return st;
}
