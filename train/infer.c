/* infer.c — batched forward passes over a bound copy of the imported graph, and a
 * second plan for a last partial batch that reads the first one's weights, with an
 * optional loss and its metrics (see infer.h). */
#include <stdlib.h>
#include <string.h>

#include "kernels/backend_select.h"
#include "train/infer.h"
#include "train/kv_cache.h"
#include "train/lowp_model.h"
#include "train/session.h"
#include "train/train.h" /* OT_DATA_LABELS */

struct ot_infer_session {
    ot_model *m;
    ot_infer_options o;
    ot_backend *be;
    ot_graph *g, *g_rest;       /* bound copies of m->graph: the full batches, the last one */
    ot_executor *ex, *ex_rest;
    ot_executor *last;          /* the executor of the last run */
    int64_t batch, n_full, rest;
    /* with o.loss: the loss value, its labels input and the model output it reads (ids
     * equal in both plans), host copies of the logits for accuracy, the sums */
    int loss_value, label_value, out_value, class_axis;
    const ot_data_array *labels;
    ot_tensor *logits, *logits_rest;
    ot_metrics metrics;
};

/* Data against the model's inputs: dtype, rank and every fixed dim past axis 0 (on
 * the graph as imported, before any work, then on the bound copy, where --bind may
 * have fixed more). */
static ot_status check_data(const ot_graph *g, const ot_dataset *d, ot_error *err) {
    for (int i = 0; i < d->n_arrays; i++) {
        const ot_data_array *a = &d->arrays[i];
        if (a->value_id < 0 || a->value_id >= g->n_values) continue; /* labels, before the loss exists */
        const ot_value *v = &g->values[a->value_id];
        const ot_tensor *t = a->t;
        char want[160], got[160];
        ot_shape_str(g, &v->shape, want, sizeof want);
        ot_shape_str(NULL, &t->shape, got, sizeof got);
        if (t->dtype != v->dtype)
            return ot_fail(err, OT_E_DATA, "input '%s' (%s): expected %s %s, got %s %s%s", v->name, a->path,
                           ot_dtype_name(v->dtype), want, ot_dtype_name(t->dtype), got,
                           v->dtype == OT_BF16 ? " (give bfloat16 bits as a uint16 .npy: docs/training.md)"
                           : v->dtype == OT_F16 ? " (save it with a.astype(np.float16))"
                                                : "");
        if (t->shape.rank < 1 || (v->shape.rank >= 0 && t->shape.rank != v->shape.rank))
            return ot_fail(err, OT_E_DATA, "input '%s' (%s): expected %s (samples along axis 0), got %s", v->name,
                           a->path, want, got);
        for (int k = 1; k < t->shape.rank; k++)
            if (v->shape.dim[k] >= 0 && v->shape.dim[k] != t->shape.dim[k])
                return ot_fail(err, OT_E_DATA, "input '%s' (%s): expected %s per batch, got %s (axis %d differs)",
                               v->name, a->path, want, got, k);
    }
    if (d->n_samples == 0)
        return ot_fail(err, OT_E_DATA, "input '%s' (%s) holds no samples", d->arrays[0].name, d->arrays[0].path);
    return OT_OK;
}

/* BatchNorm and Dropout in inference mode (training_mode 0), or as exported with
 * train_mode (Dropout off alone with no_dropout). */
static ot_status set_modes(const ot_infer_options *o, ot_graph *g, ot_error *err) {
    for (int i = 0; i < g->n_nodes; i++) {
        ot_node *n = &g->nodes[i];
        if (n->removed || (n->op != OT_OP_DROPOUT && n->op != OT_OP_BATCH_NORM)) continue;
        bool off = !o->train_mode || (n->op == OT_OP_DROPOUT && o->no_dropout);
        if (off && ot_node_set_attr_int(n, "training_mode", 0)) return ot_fail(err, OT_E_MEMORY, "out of memory");
    }
    return OT_OK;
}

/* The loss on a bound copy, as the training session builds it; the ids it sets are
 * the same for every copy of one import. */
static ot_status add_loss(ot_infer_session *s, ot_graph *g, ot_error *err) {
    const ot_loss_options *l = s->o.loss;
    int loss = -1;
    ot_status st = ot_loss_build(g, l, &loss, err);
    if (st) return st;
    g->values[loss].is_graph_output = true; /* pinned: read after every batch */
    int label = l->kind == OT_LOSS_OUTPUT ? -1 : g->inputs[g->n_inputs - 1];
    int out = l->output_name ? ot_graph_find_value(g, l->output_name) : g->n_outputs > 0 ? g->outputs[0] : -1;
    if (s->g && (loss != s->loss_value || label != s->label_value || out != s->out_value))
        return ot_fail(err, OT_E_INTERNAL, "eval: the last batch's loss differs from the first's");
    s->loss_value = loss;
    s->label_value = label;
    s->out_value = out;
    if (l->kind == OT_LOSS_CROSS_ENTROPY && out >= 0) {
        const ot_shape *ls = &g->values[out].shape;
        s->class_axis = l->class_axis < 0 ? ls->rank + l->class_axis : l->class_axis;
    }
    return OT_OK;
}

/* The labels against the loss's input (after the first plan's loss): class labels in
 * range and widened to int64 as training takes them; the metrics set up. */
static ot_status map_labels(ot_infer_session *s, ot_dataset *d, ot_error *err) {
    const ot_loss_options *l = s->o.loss;
    ot_data_array *a = (ot_data_array *)ot_dataset_find(d, OT_DATA_LABELS);
    if (l->kind == OT_LOSS_OUTPUT && a)
        return ot_fail(err, OT_E_USAGE, "labels given (%s) but --loss output takes no labels", a->path);
    if (l->kind != OT_LOSS_OUTPUT && !a)
        return ot_fail(err, OT_E_USAGE, "--loss %s needs --labels FILE.npy",
                       ot_loss_kind_name(l->kind));
    const ot_value *ov = s->out_value >= 0 ? &s->g->values[s->out_value] : NULL;
    bool f32 = ov && ov->dtype == OT_F32;
    if (a) {
        a->value_id = s->label_value;
        if (l->kind == OT_LOSS_CROSS_ENTROPY && ov) {
            ot_status st = ot_data_check_labels(a->t, a->path, ov->shape.dim[s->class_axis], l->has_ignore_index,
                                                l->ignore_index, err);
            if (st) return st;
            /* int64 like the loss's input, as train widens them */
            if (a->t->dtype == OT_I32 && (st = ot_data_widen_i32(&a->t, a->path, err))) return st;
        }
        s->labels = a;
    }
    ot_metrics_init(&s->metrics, l, s->class_axis, a ? a->t->shape.rank : 0, f32);
    if (s->metrics.accuracy && !(s->logits = ot_tensor_new(OT_F32, &ov->shape)))
        return ot_fail(err, OT_E_MEMORY, "out of memory");
    return OT_OK;
}

static bool backend_supports(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    ot_backend *be = ctx;
    return be->supports(be, node, in, out);
}

/* --precision: the same rewrite as training's, before the loss. */
static ot_status apply_precision(ot_infer_session *s, ot_graph *g, ot_error *err) {
    if (s->o.precision == OT_PRECISION_FP32) return OT_OK;
    if (!s->be && !(s->be = ot_backend_new_by_name(s->o.device ? s->o.device : "cpu", s->o.n_threads, err)))
        return err ? err->code : OT_E_DEVICE;
    ot_autocast_result r;
    ot_status st = ot_autocast_apply(g, ot_precision_dtype(s->o.precision), backend_supports, s->be, &r, err);
    ot_autocast_result_free(&r);
    return st;
}

/* A bound copy of the import at `batch` (want; 0: the default), modes set; with
 * weights it borrows them (the full batches' plan), else it reads another's. */
static ot_status bound_copy(ot_infer_session *s, const ot_dataset *d, int64_t want, bool weights, ot_graph **out,
                            int64_t *batch, ot_error *err) {
    ot_graph *g = ot_session_borrow(s->m->graph, weights);
    if (!g) return ot_fail(err, OT_E_MEMORY, "out of memory copying the graph");
    int64_t n = d->n_samples, dflt = n < 32 ? n : 32;
    ot_status st = ot_session_bind(g, g->n_inputs, s->o.bind, s->o.n_bind, d, want, dflt, -1, batch, err);
    for (int k = 0; !st && k < g->n_inputs; k++) {
        const ot_value *v = &g->values[g->inputs[k]];
        if (v->shape.rank >= 1 && v->shape.dim[0] == *batch) continue;
        char shape[160];
        ot_shape_str(g, &v->shape, shape, sizeof shape);
        st = ot_fail(err, OT_E_DATA, "input '%s': its axis 0 is not the batch dim of '%s' (shape %s with batch %lld)",
                     v->name, g->values[g->inputs[0]].name, shape, (long long)*batch);
    }
    if (!st) st = set_modes(&s->o, g, err);
    if (!st) st = apply_precision(s, g, err);
    if (!st && s->o.loss) st = add_loss(s, g, err);
    if (!st && ot_lowp_model_dtype(g) != OT_F32) { /* a float16 / bfloat16 model (train/lowp_model.c) */
        if (!s->be && !(s->be = ot_backend_new_by_name(s->o.device ? s->o.device : "cpu", s->o.n_threads, err)))
            st = err ? err->code : OT_E_DEVICE;
        else if (ot_lowp_legalize_infer(g, backend_supports, s->be) < 0)
            st = ot_fail(err, OT_E_MEMORY, "out of memory adding casts for the model's dtype");
    }
    if (!st) st = ot_graph_require_static(g, err);
    if (st) {
        ot_session_give_back(s->m->graph, g);
        ot_graph_free(g);
        return st;
    }
    *out = g;
    return OT_OK;
}

/* The last partial batch's executor: its params and state are bound to the main
 * executor's copy of the value of the same id, so no second copy of the weights. */
static ot_status rest_executor(ot_infer_session *s, ot_error *err) {
    const ot_graph *g = s->g_rest;
    ot_exec_options eo = {.n_threads = s->o.n_threads, .seed = s->o.seed};
    ot_exec_binding *bind = calloc((size_t)g->n_values + 1, sizeof *bind);
    if (!bind) return ot_fail(err, OT_E_MEMORY, "out of memory");
    for (int v = 0; v < g->n_values; v++) {
        const ot_value *val = &g->values[v];
        if (val->kind != OT_VK_PARAM && val->kind != OT_VK_STATE) continue;
        void *p = ot_executor_value_ptr(s->ex, v);
        if (!p || s->g->values[v].nbytes != val->nbytes) continue; /* not read by the plan */
        bind[eo.n_bind++] = (ot_exec_binding){.value_id = v, .data = p, .nbytes = val->nbytes};
    }
    eo.bind = bind;
    ot_status st = ot_executor_new(s->g_rest, s->be, &eo, &s->ex_rest, err);
    free(bind);
    return st;
}

ot_status ot_infer_session_new(ot_model *m, const ot_infer_options *o, ot_dataset *data, ot_infer_session **out,
                               ot_error *err) {
    *out = NULL;
    const ot_graph *g0 = m->graph;
    if (g0->n_inputs == 0) return ot_fail(err, OT_E_MODEL, "%s: the model has no data inputs", m->path);
    if (data->n_arrays == 0) return ot_fail(err, OT_E_USAGE, "no input data: pass --input FILE.npy");
    ot_status st = ot_session_map_data(g0, g0->n_inputs, o->loss ? OT_SESSION_LABELS_LATER : -1, NULL, data, "data", err);
    /* int32 token ids (HF tokenizers' numpy output) for an int64 input: widened once
     * (labels are mapped, and widened, with the loss: map_labels) */
    for (int i = 0; i < data->n_arrays && !st; i++)
        if (data->arrays[i].value_id >= 0 && data->arrays[i].t->dtype == OT_I32 &&
            g0->values[data->arrays[i].value_id].dtype == OT_I64)
            st = ot_data_widen_i32(&data->arrays[i].t, data->arrays[i].path, err);
    if (!st) st = check_data(g0, data, err);
    if (st) return st;
    ot_infer_session *s = calloc(1, sizeof *s);
    if (!s) return ot_fail(err, OT_E_MEMORY, "out of memory");
    s->m = m;
    s->o = *o;
    int64_t count = data->n_samples, want = o->batch_size;
    const ot_value *x = &g0->values[g0->inputs[0]];
    bool fixed = x->shape.rank >= 1 && x->shape.dim[0] >= 0;
    if (!fixed && want > count) want = count;
    s->loss_value = s->label_value = s->out_value = -1;
    if ((st = bound_copy(s, data, want, true, &s->g, &s->batch, err))) goto fail;
    /* a KV-cache decoder's cache inputs without data: HF's defaults (train/kv_cache.h) */
    if ((st = ot_kv_add_defaults(s->g, s->g->n_inputs, data, NULL, 0, err))) goto fail;
    if (o->loss && (st = map_labels(s, data, err))) goto fail;
    if ((st = check_data(s->g, data, err))) goto fail; /* against what --bind fixed too (and the labels) */
    s->n_full = count / s->batch;
    s->rest = count % s->batch;
    if (s->rest && s->g->values[s->g->inputs[0]].shape.sym[0] < 0) {
        st = ot_fail(err, OT_E_DATA, "input '%s' (%s): the model has a fixed batch of %lld, the data has %lld samples (not a multiple)",
                     x->name, data->arrays[0].path, (long long)s->batch, (long long)count);
        goto fail;
    }
    if (!s->be && !(s->be = ot_backend_new_by_name(o->device ? o->device : "cpu", o->n_threads, err))) {
        st = err ? err->code : OT_E_DEVICE;
        goto fail;
    }
    s->be->tf32 = o->tf32;
    /* Nothing reads the model's weights after this (eval writes no model): the
     * executor's arena keeps the only copy. */
    ot_exec_options eo = {.n_threads = o->n_threads, .seed = o->seed, .release_host_data = true};
    if ((st = ot_executor_new(s->g, s->be, &eo, &s->ex, err))) goto fail;
    if (s->rest) {
        int64_t b = 0;
        if ((st = bound_copy(s, data, s->rest, false, &s->g_rest, &b, err))) goto fail;
        if ((st = rest_executor(s, err))) goto fail;
        if (s->logits && !(s->logits_rest = ot_tensor_new(OT_F32, &s->g_rest->values[s->out_value].shape))) {
            st = ot_fail(err, OT_E_MEMORY, "out of memory");
            goto fail;
        }
    }
    *out = s;
    return OT_OK;
fail:
    ot_infer_session_free(s);
    return st;
}

void ot_infer_session_free(ot_infer_session *s) {
    if (!s) return;
    ot_executor_free(s->ex_rest);
    ot_executor_free(s->ex);
    ot_backend_free(s->be);
    if (s->g) ot_session_give_back(s->m->graph, s->g);
    ot_graph_free(s->g);
    ot_graph_free(s->g_rest);
    ot_tensor_free(s->logits);
    ot_tensor_free(s->logits_rest);
    free(s);
}

int64_t ot_infer_batch_size(const ot_infer_session *s) { return s->batch; }
int64_t ot_infer_full_batches(const ot_infer_session *s) { return s->n_full; }
int64_t ot_infer_last_batch(const ot_infer_session *s) { return s->rest; }
const ot_graph *ot_infer_graph(const ot_infer_session *s) { return s->g; }
const ot_plan *ot_infer_plan(const ot_infer_session *s) { return ot_executor_plan(s->ex); }
size_t ot_infer_high_water(const ot_infer_session *s) { return ot_executor_high_water(s->ex); }

ot_status ot_infer_run(ot_infer_session *s, const ot_dataset *data, int64_t start, int64_t n, ot_error *err) {
    ot_executor *ex = n == s->batch ? s->ex : n == s->rest ? s->ex_rest : NULL;
    if (!ex) return ot_fail(err, OT_E_INTERNAL, "eval: no plan for a batch of %lld", (long long)n);
    for (int k = 0; k < data->n_arrays; k++) {
        const ot_data_array *a = &data->arrays[k];
        ot_tensor view = *a->t;
        size_t row = a->t->nbytes / (size_t)a->t->shape.dim[0];
        view.shape.dim[0] = n;
        view.data = (unsigned char *)a->t->data + (size_t)start * row;
        view.nbytes = (size_t)n * row;
        ot_status st = ot_executor_set_input(ex, a->value_id, &view, err);
        if (st) return st;
    }
    s->last = ex;
    ot_status st = ot_executor_run(ex, err);
    if (st || !s->o.loss) return st;
    const int64_t *labels = NULL;
    if (s->labels) {
        const ot_tensor *t = s->labels->t;
        labels = (const int64_t *)t->data + start * (ot_shape_numel(&t->shape) / t->shape.dim[0]);
    }
    bool loss64 = s->g->values[s->loss_value].dtype == OT_F64;
    const void *out = s->out_value >= 0 ? ot_executor_value_ptr(ex, s->out_value) : NULL;
    return ot_metrics_add_batch(&s->metrics, s->be, ot_executor_value_ptr(ex, s->loss_value), loss64, n, out,
                                ex == s->ex ? s->logits : s->logits_rest, labels, err);
}

bool ot_infer_metrics(const ot_infer_session *s, ot_metrics_result *r) {
    if (!s->o.loss) return false;
    ot_metrics_get(&s->metrics, r);
    return true;
}

ot_status ot_infer_get_output(ot_infer_session *s, int k, ot_tensor **out, ot_error *err) {
    if (!s->last || k < 0 || k >= s->g->n_outputs)
        return ot_fail(err, OT_E_INTERNAL, "eval: output %d of no run", k);
    return ot_executor_get(s->last, s->g->outputs[k], out, err);
}
