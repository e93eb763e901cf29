/* train_validate.c — validation of a training session in inference mode (see
 * train.h), as PyTorch's model.eval() evaluates: BatchNorm normalises with the running
 * statistics the training has been updating, Dropout is the identity, nothing is
 * updated and no gradient is computed.
 *
 * The training graph cannot do this: its BatchNorm nodes are in training mode (batch
 * statistics) and its Dropout nodes draw masks, and one executor runs its whole
 * schedule, backward included. So the forward and loss nodes the loss depends on are
 * copied once into a graph of their own, with training_mode 0 on BatchNorm and
 * Dropout, and planned by a second executor on the same backend. Value ids are kept
 * (every value of the training graph has its twin, unused ones unplaced), so data
 * arrays, params, running statistics, the loss and the model output need no mapping.
 *
 * The second executor holds no copy of the params, running statistics or constants:
 * they are bound (ot_exec_options.bind) to the training arena's slots and read in
 * place, so every pass sees the values the training has reached without copying, and
 * the validation arena holds only one batch's inputs, activations, workspace and
 * outputs. Sharing is safe because the validation graph never writes them: no copied
 * node produces a param, state or constant (BatchNorm's running-stat outputs are
 * separate values, dropped here), and the planner and executor refuse a write to an
 * external value. Training and validation never run at the same time.
 *
 * The loss, accuracy and perplexity are summed over the batches by train/metrics.h,
 * which `eval --labels` uses too.
 *
 * The plan can be made before the training executor exists (and before remat), so
 * that --memory-budget covers the training step and validation together (train.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/schedule.h"
#include "train/metrics.h"
#include "train/train_internal.h"

/* ---- the inference graph -------------------------------------------------------- */

static bool is_fwd(const ot_node *n) {
    return !n->removed && n->orig_node < 0 && (n->phase == OT_PHASE_FORWARD || n->phase == OT_PHASE_LOSS);
}

/* BatchNorm's running-stat outputs and Dropout's mask mean nothing in inference mode:
 * dropped (absent optional output) unless a copied node reads them. */
static bool drop_output(const ot_node *n, int slot, const bool *read, int v, const bool *is_out) {
    if (slot == 0 || v < 0) return false;
    if (n->op != OT_OP_BATCH_NORM && n->op != OT_OP_DROPOUT) return false;
    return !read[v] && !is_out[v];
}

/* Builds s->val_g from the training graph, and s->val_shared: the values it reads that
 * carry data (params, state, constants), which it will read from the training arena.
 * Forward and loss nodes are final once the loss and backward exist: remat adds
 * clones and rewires backward readers only, the optimizer adds its own nodes. */
static ot_status build_graph(ot_train_session *s, ot_error *err) {
    const ot_graph *g = s->g;
    int nv = g->n_values, nn = g->n_nodes;
    ot_status st = OT_OK;
    bool *need = calloc((size_t)nn + 1, sizeof *need);
    bool *read = calloc((size_t)nv + 1, sizeof *read);   /* read by a copied node */
    bool *used = calloc((size_t)nv + 1, sizeof *used);   /* placed in the validation graph */
    bool *is_out = calloc((size_t)nv + 1, sizeof *is_out);
    int *stack = malloc(((size_t)nv + 1) * sizeof *stack);
    int *outs = NULL;
    ot_graph *vg = NULL;
    s->n_val_shared = 0;
    s->val_shared = malloc(((size_t)nv + 1) * sizeof *s->val_shared);
    if (!need || !read || !used || !is_out || !stack || !s->val_shared) goto oom;

    /* The nodes the loss and the model output depend on, walking back from them. */
    int top = 0, roots[2] = {s->loss_value, s->out_value};
    for (int k = 0; k < 2; k++)
        if (roots[k] >= 0 && !is_out[roots[k]]) {
            is_out[roots[k]] = true;
            stack[top++] = roots[k];
        }
    bool *seen = used; /* reused as the walk's visited set, reset below */
    while (top > 0) {
        int v = stack[--top];
        if (seen[v]) continue;
        seen[v] = true;
        int p = g->values[v].producer;
        if (p < 0 || !is_fwd(&g->nodes[p]) || need[p]) continue;
        need[p] = true;
        const ot_node *n = &g->nodes[p];
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] >= 0 && !seen[n->inputs[i]]) stack[top++] = n->inputs[i];
    }
    memset(used, 0, (size_t)nv * sizeof *used);
    for (int id = 0; id < nn; id++) {
        if (!need[id]) continue;
        const ot_node *n = &g->nodes[id];
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] >= 0) read[n->inputs[i]] = used[n->inputs[i]] = true;
    }

    if (!(vg = ot_graph_new(g->name ? g->name : "validation"))) goto oom;
    vg->opset = g->opset;
    for (int k = 0; k < g->n_syms; k++) {
        int id = ot_graph_add_sym(vg, g->syms[k]);
        if (id != k) goto oom; /* symbol names are unique, so ids match */
        vg->sym_values[k] = g->sym_values[k];
    }
    for (int id = 0; id < nn; id++) {
        if (!need[id]) continue;
        const ot_node *n = &g->nodes[id];
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0 && !drop_output(n, k, read, n->outputs[k], is_out)) used[n->outputs[k]] = true;
    }
    for (int v = 0; v < nv; v++) {
        const ot_value *src = &g->values[v];
        /* Unused twins are plain activations: the planner places none of them (an
         * unused param or optimizer-state value would otherwise take arena space). */
        ot_value_kind kind = used[v] ? src->kind : OT_VK_ACTIVATION;
        if (ot_graph_add_value(vg, src->name, src->dtype, &src->shape, kind) != v) goto oom;
        bool has_data = src->data || src->kind == OT_VK_PARAM || src->kind == OT_VK_STATE;
        if (used[v] && has_data && src->producer < 0 && src->kind != OT_VK_INPUT) s->val_shared[s->n_val_shared++] = v;
    }
    int max_out = 1;
    for (int id = 0; id < nn; id++)
        if (need[id] && g->nodes[id].n_outputs > max_out) max_out = g->nodes[id].n_outputs;
    if (!(outs = malloc((size_t)max_out * sizeof *outs))) goto oom;
    for (int id = 0; id < nn; id++) {
        if (!need[id]) continue;
        const ot_node *n = &g->nodes[id];
        for (int k = 0; k < n->n_outputs; k++) outs[k] = drop_output(n, k, read, n->outputs[k], is_out) ? -1 : n->outputs[k];
        int nid = ot_graph_add_node(vg, n->op, n->name, n->inputs, n->n_inputs, outs, n->n_outputs, n->phase);
        if (nid < 0) goto oom;
        ot_node *c = &vg->nodes[nid];
        if (ot_node_copy_attrs(c, n)) goto oom;
        if (n->op_type && strcmp(c->op_type, n->op_type)) { /* keep the name errors show */
            char *t = strdup(n->op_type);
            if (!t) goto oom;
            free(c->op_type);
            c->op_type = t;
        }
        if ((n->op == OT_OP_BATCH_NORM || n->op == OT_OP_DROPOUT) && ot_node_set_attr_int(c, "training_mode", 0))
            goto oom;
        if (n->op == OT_OP_ATTENTION) ot_node_remove_attr(c, "dropout_ratio"); /* --fused-attention's Dropout: off */
    }
    for (int k = 0; k < g->n_inputs; k++) {
        int v = g->inputs[k];
        if (!used[v]) continue;
        int *ni = realloc(vg->inputs, (size_t)(vg->n_inputs + 1) * sizeof *ni);
        if (!ni) goto oom;
        vg->inputs = ni;
        vg->inputs[vg->n_inputs++] = v;
    }
    for (int k = 0; k < 2; k++) {
        int v = roots[k];
        if (v < 0 || (k == 1 && v == roots[0])) continue;
        int *no = realloc(vg->outputs, (size_t)(vg->n_outputs + 1) * sizeof *no);
        if (!no) goto oom;
        vg->outputs = no;
        vg->outputs[vg->n_outputs++] = v;
        vg->values[v].is_graph_output = true; /* pinned: read after every batch */
    }
    s->val_g = vg;
    vg = NULL;
    goto done;
oom:
    st = ot_fail(err, OT_E_MEMORY, "out of memory building the validation graph");
done:
    ot_graph_free(vg);
    free(need);
    free(read);
    free(used);
    free(is_out);
    free(stack);
    free(outs);
    return st;
}

/* Schedules and plans s->val_g with the shared values external: what its arena will
 * be, before any executor exists. */
static ot_status plan_graph(ot_train_session *s, ot_error *err) {
    int *order = NULL, n = 0;
    ot_plan *plan = NULL;
    ot_plan_options po = {.external = s->val_shared, .n_external = s->n_val_shared};
    ot_status st = ot_schedule_build(s->val_g, &order, &n, err);
    ot_plan_device dev = ot_backend_plan_device(s->be);
    if (!st) st = ot_plan_build_opts(s->val_g, order, n, &dev, &po, &plan, err);
    if (!st) s->val_peak = (int64_t)ot_plan_peak_bytes(plan);
    ot_plan_free(plan);
    free(order);
    return st;
}

ot_status ot_train_validation_plan_ahead(ot_train_session *s, ot_error *err) {
    if (s->val_g) return OT_OK;
    ot_status st = build_graph(s, err);
    if (!st) st = ot_graph_require_static(s->val_g, err);
    if (!st) st = plan_graph(s, err);
    if (st) {
        ot_error_prefix(err, "validation: ");
        ot_train_validation_free(s);
    }
    return st;
}

/* The validation executor, its shared values bound to the training arena's slots. */
static ot_status new_executor(ot_train_session *s, ot_error *err) {
    const ot_plan *tp = ot_executor_plan(s->ex);
    ot_exec_binding *b = calloc((size_t)s->n_val_shared + 1, sizeof *b);
    if (!b) return ot_fail(err, OT_E_MEMORY, "out of memory");
    ot_status st = OT_OK;
    for (int i = 0; i < s->n_val_shared && !st; i++) {
        int v = s->val_shared[i];
        b[i] = (ot_exec_binding){.value_id = v, .data = ot_executor_value_ptr(s->ex, v), .nbytes = ot_plan_value_bytes(tp, v)};
        if (!b[i].data) /* every value a forward node reads is placed in the training plan */
            st = ot_fail(err, OT_E_INTERNAL, "'%s' is not in the training arena", vname(s->g, v));
    }
    ot_exec_options eo = {.n_threads = s->o.n_threads, .seed = s->o.seed, .bind = b, .n_bind = s->n_val_shared};
    if (!st) st = ot_executor_new(s->val_g, s->be, &eo, &s->val_ex, err);
    free(b);
    if (st) return st;
    size_t peak = ot_plan_peak_bytes(ot_executor_plan(s->val_ex));
    if ((int64_t)peak != s->val_peak) /* the budget was checked against s->val_peak */
        return ot_fail(err, OT_E_INTERNAL, "the validation plan's peak is %zu bytes, %lld when it was planned ahead", peak,
                       (long long)s->val_peak);
    return OT_OK;
}

ot_status ot_train_validation_prepare(ot_train_session *s, ot_error *err) {
    if (s->val_ex) return OT_OK;
    ot_status st = ot_train_validation_plan_ahead(s, err);
    if (st) return st;
    st = new_executor(s, err);
    if (!st && s->o.loss.kind == OT_LOSS_CROSS_ENTROPY && s->out_value >= 0) {
        const ot_value *ov = &s->g->values[s->out_value];
        if (ov->dtype != OT_F32)
            st = ot_fail(err, OT_E_UNSUPPORTED, "validation accuracy: output '%s' is %s; only float32 logits are supported",
                         ov->name, ot_dtype_name(ov->dtype));
        else if (!(s->val_out = ot_tensor_new(ov->dtype, &ov->shape)))
            st = ot_fail(err, OT_E_MEMORY, "out of memory");
    }
    if (st) {
        ot_error_prefix(err, "validation: ");
        ot_train_validation_free(s);
    }
    return st;
}

void ot_train_validation_free(ot_train_session *s) {
    ot_executor_free(s->val_ex);
    ot_graph_free(s->val_g);
    free(s->val_shared);
    ot_tensor_free(s->val_out);
    s->val_ex = NULL;
    s->val_g = NULL;
    s->val_shared = NULL;
    s->val_out = NULL;
    s->n_val_shared = 0;
    s->val_peak = 0;
}

const ot_plan *ot_train_validation_plan(const ot_train_session *s) {
    return s->val_ex ? ot_executor_plan(s->val_ex) : NULL;
}

/* ---- a validation pass ---------------------------------------------------------- */

ot_status ot_train_validate(ot_train_session *s, const ot_dataset *val, ot_train_epoch_stats *e, ot_error *err) {
    ot_status st = ot_train_validation_prepare(s, err);
    if (st) return st;
    int64_t nb = val->n_samples / s->B;
    /* The partial batch at the end runs padded, its padding's labels ignored, where
     * that is exact: cross-entropy with an ignore index (inference mode normalises by
     * the running statistics, so samples do not mix). Otherwise it is left out. */
    int64_t tail = val->n_samples % s->B;
    if (s->o.loss.kind != OT_LOSS_CROSS_ENTROPY || !s->o.loss.has_ignore_index) tail = 0;
    const ot_data_array *lab = ot_dataset_find(val, OT_DATA_LABELS);
    int lab_i = lab ? (int)(lab - val->arrays) : -1;
    const void *loss_ptr = ot_executor_value_ptr(s->val_ex, s->loss_value);
    bool loss64 = s->g->values[s->loss_value].dtype == OT_F64;
    const void *out_ptr = s->val_out ? ot_executor_value_ptr(s->val_ex, s->out_value) : NULL;
    ot_metrics m;
    ot_metrics_init(&m, &s->o.loss, s->class_axis, lab ? lab->t->shape.rank : 0, s->val_out != NULL);
    for (int64_t b = 0; b < nb + (tail > 0); b++) {
        /* batches in file order: rows b*B .. b*B+B-1, gathered into the session's host
         * batch buffers (ot_train_check_data made their arrays match) */
        int64_t n = b < nb ? s->B : tail;
        for (int i = 0; i < val->n_arrays; i++) {
            const ot_tensor *t = val->arrays[i].t;
            size_t row = t->nbytes / (size_t)t->shape.dim[0];
            char *dst = s->batch[i]->data;
            memcpy(dst, (const char *)t->data + (size_t)(b * s->B) * row, (size_t)n * row);
            for (int64_t r = n; r < s->B; r++) { /* padding: the first sample, its labels ignored */
                if (val->arrays[i].value_id != s->label_value) memcpy(dst + (size_t)r * row, dst, row);
                else
                    for (size_t k = 0; k < row / sizeof(int64_t); k++)
                        ((int64_t *)(dst + (size_t)r * row))[k] = s->o.loss.ignore_index;
            }
            if ((st = ot_executor_set_input(s->val_ex, val->arrays[i].value_id, s->batch[i], err)))
                return ot_error_prefix(err, "%s: ", val->arrays[i].path);
        }
        if ((st = ot_executor_run(s->val_ex, err))) return ot_error_prefix(err, "validation: ");
        /* weighted by the samples it holds: the partial batch counts its own */
        if ((st = ot_metrics_add_batch(&m, s->be, loss_ptr, loss64, n, out_ptr, s->val_out,
                                       lab_i >= 0 ? s->batch[lab_i]->data : NULL, err)))
            return st;
    }
    ot_metrics_result mr;
    ot_metrics_get(&m, &mr);
    e->val_loss = mr.loss;
    e->val_accuracy = mr.accuracy;
    e->val_perplexity = mr.perplexity;
    e->val_samples = nb * s->B + tail;
    return OT_OK;
}
