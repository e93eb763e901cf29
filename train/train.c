/* train.c — building a training session (see train.h): binds the batch dim and the
 * data, appends loss, backward, remat and optimizer nodes, creates the executor. The
 * loop itself is in train_loop.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "remat/remat.h"
#include "kernels/backend_select.h"
#include "train/train_internal.h"
#include "train/train_memory.h"

void ot_train_options_default(ot_train_options *o) {
    memset(o, 0, sizeof *o);
    o->loss.kind = OT_LOSS_CROSS_ENTROPY;
    o->loss.class_axis = -1;
    ot_optim_config_default(&o->optim, OT_OPTIM_SGD);
    o->accum = 1;
}

/* ---- building the session ----------------------------------------------------- */

/* Binds each data array to a graph input (named, positional or the labels). */
static ot_status bind_arrays(ot_train_session *s, ot_dataset *d, const char *what, ot_error *err) {
    ot_graph *g = s->g;
    int pos = 0;
    for (int i = 0; i < d->n_arrays; i++) {
        ot_data_array *a = &d->arrays[i];
        if (!strcmp(a->name, OT_DATA_LABELS)) {
            if (s->label_value < 0)
                return ot_fail(err, OT_E_USAGE, "%s: labels given (%s) but --loss output takes no labels; pass the model's own label input as --input NAME=FILE",
                               what, a->path);
            a->value_id = s->label_value;
            continue;
        }
        int v = -1;
        if (!*a->name) {
            if (pos >= s->n_model_inputs)
                return ot_fail(err, OT_E_USAGE, "%s: more --input files than model inputs (%d); '%s' is extra", what,
                               s->n_model_inputs, a->path);
            v = g->inputs[pos++];
        } else {
            for (int k = 0; k < s->n_model_inputs; k++)
                if (!strcmp(vname(g, g->inputs[k]), a->name)) v = g->inputs[k];
            if (v < 0) {
                char names[512] = "";
                for (int k = 0; k < s->n_model_inputs; k++) {
                    size_t l = strlen(names);
                    snprintf(names + l, sizeof names - l, "%s'%s'", k ? ", " : "", vname(g, g->inputs[k]));
                }
                return ot_fail(err, OT_E_USAGE, "%s: --input %s=%s: the model has no input '%s' (its inputs: %s)", what,
                               a->name, a->path, a->name, names);
            }
        }
        for (int j = 0; j < i; j++)
            if (d->arrays[j].value_id == v)
                return ot_fail(err, OT_E_USAGE, "%s: input '%s' is given twice (%s and %s)", what, vname(g, v),
                               d->arrays[j].path, a->path);
        a->value_id = v;
    }
    for (int k = 0; k < s->n_model_inputs; k++) {
        int v = g->inputs[k];
        bool have = false;
        for (int i = 0; i < d->n_arrays; i++) have |= d->arrays[i].value_id == v;
        if (!have) return ot_fail(err, OT_E_USAGE, "%s: no data for model input '%s' (use --input %s=FILE.npy)", what, vname(g, v), vname(g, v));
    }
    if (s->label_value >= 0 && !ot_dataset_find(d, OT_DATA_LABELS))
        return ot_fail(err, OT_E_USAGE, "%s: --loss %s needs --labels FILE.npy", what,
                       s->o.loss.kind == OT_LOSS_MSE ? "mse" : "cross-entropy");
    return OT_OK;
}

/* Per-sample dtype and shape of every array against its (bound) graph input. */
static ot_status check_arrays(ot_train_session *s, ot_dataset *d, ot_error *err) {
    const ot_graph *g = s->g;
    for (int i = 0; i < d->n_arrays; i++) {
        ot_data_array *a = &d->arrays[i];
        const ot_value *v = &g->values[a->value_id];
        bool is_labels = a->value_id == s->label_value;
        if (is_labels && s->o.loss.kind == OT_LOSS_CROSS_ENTROPY) {
            ot_status st = ot_data_check_labels(a->t, a->path, s->n_classes, s->o.loss.has_ignore_index,
                                                s->o.loss.ignore_index, err);
            if (st) return st;
            if (a->t->dtype == OT_I32) { /* widen once, so batches are int64 like the input */
                ot_tensor *w = ot_tensor_new(OT_I64, &a->t->shape);
                if (!w) return ot_fail(err, OT_E_MEMORY, "out of memory widening %s", a->path);
                int64_t n = ot_shape_numel(&a->t->shape);
                for (int64_t k = 0; k < n; k++) ((int64_t *)w->data)[k] = ((const int32_t *)a->t->data)[k];
                ot_tensor_free(a->t);
                a->t = w;
            }
        }
        if (a->t->dtype != v->dtype)
            return ot_fail(err, OT_E_DATA, "%s: %s data, but %s '%s' is %s", a->path, ot_dtype_name(a->t->dtype),
                           is_labels ? "the loss's labels input" : "model input", v->name, ot_dtype_name(v->dtype));
        bool ok = a->t->shape.rank == v->shape.rank;
        for (int k = 1; ok && k < v->shape.rank; k++) ok = a->t->shape.dim[k] == v->shape.dim[k];
        if (!ok) {
            char want[160], got[160];
            ot_shape_str(g, &v->shape, want, sizeof want);
            ot_shape_str(NULL, &a->t->shape, got, sizeof got);
            return ot_fail(err, OT_E_DATA, "%s: shape %s does not fit %s '%s' %s (samples along axis 0, the rest must match)",
                           a->path, got, is_labels ? "the loss's labels input" : "model input", v->name, want);
        }
    }
    if (d->n_samples < s->B)
        return ot_fail(err, OT_E_DATA, "%s: %lld samples, fewer than one batch of %lld", d->arrays[0].path,
                       (long long)d->n_samples, (long long)s->B);
    return OT_OK;
}

/* Binds the batch dim (axis 0 of the first model input) and the user's --bind specs. */
static ot_status bind_batch(ot_train_session *s, const ot_dataset *d, bool grad_mode, ot_error *err) {
    ot_graph *g = s->g;
    ot_status st;
    for (int i = 0; i < s->o.n_bind; i++)
        if ((st = ot_graph_bind_dims_from_string(g, s->o.bind[i], err))) return st;
    if (s->n_model_inputs == 0) return ot_fail(err, OT_E_MODEL, "the model has no data inputs");
    const ot_value *x = &g->values[g->inputs[0]];
    if (x->shape.rank < 1) return ot_fail(err, OT_E_MODEL, "model input '%s' has no batch axis", x->name);
    if (x->shape.dim[0] >= 0) {
        if (s->o.batch_size && s->o.batch_size != x->shape.dim[0])
            return ot_fail(err, OT_E_SHAPE, "--batch-size %lld: the model has a fixed batch of %lld (input '%s')",
                           (long long)s->o.batch_size, (long long)x->shape.dim[0], x->name);
        s->B = x->shape.dim[0];
        return OT_OK;
    }
    int64_t n = d->n_samples;
    s->B = s->o.batch_size ? s->o.batch_size : grad_mode ? n : (n < 32 ? n : 32);
    if (s->B < 1 || s->B > n)
        return ot_fail(err, OT_E_DATA, "--batch-size %lld: the data has %lld samples", (long long)s->B, (long long)n);
    if (x->shape.sym[0] < 0)
        return ot_fail(err, OT_E_SHAPE, "model input '%s': the batch axis is unknown and not symbolic; cannot bind it", x->name);
    return ot_graph_bind_dim(g, g->syms[x->shape.sym[0]], s->B, err);
}

/* Remat's memory simulator: the planner's peak of the training graph as it stands
 * (ot_remat_measure_planner), plus the optimizer state still to be added (pinned,
 * fixed in size), so a --memory-budget is checked against the whole step. */
typedef struct remat_measure_user {
    ot_backend *be;
    int64_t opt_bytes;
} remat_measure_user;

static int64_t align_plan(int64_t b) { return (b + OT_PLAN_ALIGN - 1) / OT_PLAN_ALIGN * OT_PLAN_ALIGN; }

static ot_status remat_measure(const ot_graph *g, void *user, ot_remat_measurement *m, ot_error *err) {
    const remat_measure_user *mu = user;
    ot_status st = ot_remat_measure_planner(g, mu->be, m, err);
    if (!st) m->peak += mu->opt_bytes;
    return st;
}

static double mib(int64_t b) { return (double)b / 1048576.0; }

/* What the budget is called in messages. */
static const char *budget_name(const ot_train_session *s) {
    return s->budget_from_device ? "the GPU's free memory less a margin," : "--memory-budget";
}

/* auto's budget is what the training step may take: the whole budget less the
 * validation plan's arena, which lives next to the training arena for the run. */
static ot_status auto_budget(ot_train_session *s, int64_t budget, bool from_device, int64_t *train_budget,
                             ot_error *err) {
    s->budget = budget;
    s->budget_from_device = from_device;
    s->val_in_budget = s->val_g != NULL;
    if (budget > s->val_peak) {
        *train_budget = budget - s->val_peak;
        return OT_OK;
    }
    return ot_fail(err, OT_E_MEMORY,
                   "%s %lld bytes (%.1f MiB) cannot even hold the validation plan, which needs %lld bytes "
                   "(%.1f MiB) for one batch in inference mode, before any training step; raise the budget or lower "
                   "--batch-size",
                   budget_name(s), (long long)budget, mib(budget), (long long)s->val_peak, mib(s->val_peak));
}

static ot_status apply_remat(ot_train_session *s, ot_error *err) {
    const char *text = s->o.remat;
    if (!text || !strcmp(text, "none")) return OT_OK;
    ot_remat_policy pol = {0};
    ot_remat_analysis an = {0};
    ot_remat_rewrite rw = {0};
    bool *keep = NULL;
    ot_status st = ot_remat_policy_parse(text, &pol, err);
    if (st) return st;
    if (s->o.memory_budget && pol.kind == OT_REMAT_AUTO &&
        (st = auto_budget(s, s->o.memory_budget, false, &pol.budget_bytes, err)))
        goto done;
    /* auto on a GPU without --memory-budget: the device's free memory less a safety
     * margin (10%, at least 256 MiB, for the CUDA context, cuBLAS and cuDNN). */
    if (!s->o.memory_budget && pol.kind == OT_REMAT_AUTO && s->be->name && !strncmp(s->be->name, "cuda", 4)) {
        size_t free_b = 0, total_b = 0;
        if ((st = ot_backend_cuda_mem_info(s->be, &free_b, &total_b, err))) goto done;
        size_t margin = free_b / 10 > ((size_t)256 << 20) ? free_b / 10 : ((size_t)256 << 20);
        if (free_b <= margin) {
            st = ot_fail(err, OT_E_MEMORY, "remat auto: the GPU has only %zu bytes free; nothing fits", free_b);
            goto done;
        }
        if ((st = auto_budget(s, (int64_t)(free_b - margin), true, &pol.budget_bytes, err))) goto done;
    }
    if ((st = ot_remat_analyze(s->g, &an, err))) goto done;
    keep = calloc((size_t)an.n_values + 1, sizeof *keep);
    if (!keep) {
        st = ot_fail(err, OT_E_MEMORY, "remat: out of memory");
        goto done;
    }
    remat_measure_user mu = {.be = s->be};
    /* Exactly what the optimizer nodes will add to the plan: per param 0, 1 or 2
     * state values and the step scalars, each in its own 64-byte aligned slot of the
     * pinned region, which moves every transient block up by that much. */
    int per = !s->with_opt ? 0 : s->o.optim.kind != OT_OPTIM_SGD ? 2 : s->o.optim.momentum != 0 ? 1 : 0;
    if (s->with_opt && s->o.accum > 1) per++; /* the gradient accumulator (ot_train_loop_prepare) */
    for (int i = 0; i < s->ad.n_params; i++) mu.opt_bytes += per * align_plan(ot_remat_value_bytes(s->g, s->ad.params[i]));
    if (s->with_opt) mu.opt_bytes += align_plan((int64_t)(OT_OPT_N_SCALARS * sizeof(double)));
    /* Measure the plain step first, so the run can report what remat saved. */
    ot_remat_measurement before = {0}, after = {0};
    bool *keep_all = calloc((size_t)an.n_values + 1, sizeof *keep_all);
    if (!keep_all) {
        st = ot_fail(err, OT_E_MEMORY, "remat: out of memory");
        goto done;
    }
    for (int v = 0; v < an.n_values; v++) keep_all[v] = true;
    s->remat.kept_none = ot_remat_kept_bytes(s->g, &an, keep_all);
    free(keep_all);
    s->remat.step_flops = ot_remat_step_flops(s->g);
    if ((st = remat_measure(s->g, &mu, &before, err))) goto done;
    if (pol.kind == OT_REMAT_AUTO && pol.budget_bytes > 0) {
        /* as ot_remat_choose does, keeping the stats for a message that counts validation */
        ot_remat_auto_stats stats = {0};
        st = ot_remat_auto(s->g, &an, pol.budget_bytes, remat_measure, &mu, keep, &stats, err);
        if (st == OT_E_MEMORY && s->val_peak > 0 && stats.n_measured > 0 && stats.min_peak > pol.budget_bytes) {
            int64_t need = stats.min_peak + s->val_peak;
            st = ot_fail(err, OT_E_MEMORY,
                         "%s %lld bytes (%.1f MiB) cannot hold a training step and validation: the validation plan "
                         "needs %lld bytes (%.1f MiB) and the smallest training step %lld bytes (%.1f MiB, --remat "
                         "all), %lld bytes (%.1f MiB) together; %s or lower --batch-size",
                         budget_name(s), (long long)s->budget, mib(s->budget), (long long)s->val_peak,
                         mib(s->val_peak), (long long)stats.min_peak, mib(stats.min_peak), (long long)need, mib(need),
                         s->budget_from_device ? "free GPU memory" : "raise --memory-budget to at least that");
        }
    } else {
        st = ot_remat_choose(s->g, &an, &pol, remat_measure, &mu, keep, err);
    }
    if (!st) st = ot_remat_apply(s->g, &an, keep, &rw, err);
    if (!st && !(st = remat_measure(s->g, &mu, &after, err))) {
        s->remat.applied = true;
        s->remat.peak_none = before.peak;
        s->remat.peak = after.peak;
        s->remat.kept = rw.kept_bytes;
        s->remat.extra_flops = rw.extra_flops;
        s->remat.n_clones = rw.n_clones;
    }
    ot_remat_rewrite_free(&rw);
done:
    free(keep);
    ot_remat_analysis_free(&an);
    ot_remat_policy_free(&pol);
    return st;
}

/* The last step before the optimizer nodes; checks they all come last. */
static ot_status find_boundary(ot_train_session *s, ot_error *err) {
    const ot_plan *p = ot_executor_plan(s->ex);
    int first_opt = p->n_steps;
    for (int k = 0; k < p->n_steps; k++)
        if (s->g->nodes[p->order[k]].phase == OT_PHASE_OPTIMIZER) {
            first_opt = k;
            break;
        }
    for (int k = first_opt; k < p->n_steps; k++)
        if (s->g->nodes[p->order[k]].phase != OT_PHASE_OPTIMIZER)
            return ot_fail(err, OT_E_INTERNAL, "schedule: node '%s' runs after the optimizer began",
                           s->g->nodes[p->order[k]].name);
    s->boundary = first_opt - 1;
    return OT_OK;
}

ot_status ot_train_session_new(ot_model *m, const ot_train_options *o, ot_dataset *data, bool with_optimizer,
                               ot_train_session **out, ot_error *err) {
    ot_status st = OT_OK;
    *out = NULL;
    ot_train_session *s = calloc(1, sizeof *s);
    if (!s) return ot_fail(err, OT_E_MEMORY, "out of memory");
    s->m = m;
    s->g = m->graph;
    s->o = *o;
    if (s->o.accum < 1) s->o.accum = 1;
    s->with_opt = with_optimizer;
    s->label_value = -1;
    s->out_value = -1;
    ot_graph *g = s->g;
    s->n_model_inputs = g->n_inputs;
    if (data->n_arrays == 0) {
        st = ot_fail(err, OT_E_USAGE, "no input data: pass --input FILE.npy");
        goto fail;
    }
    if ((st = bind_batch(s, data, !with_optimizer, err))) goto fail;

    /* the loss */
    if ((st = ot_loss_build(g, &s->o.loss, &s->loss_value, err))) goto fail;
    if (s->o.loss.kind != OT_LOSS_OUTPUT) s->label_value = g->inputs[g->n_inputs - 1];
    if (s->o.loss.output_name)
        s->out_value = ot_graph_find_value(g, s->o.loss.output_name);
    else if (g->n_outputs > 0)
        s->out_value = g->outputs[0];
    if (s->o.loss.kind == OT_LOSS_CROSS_ENTROPY && s->out_value >= 0) {
        const ot_shape *ls = &g->values[s->out_value].shape;
        s->class_axis = s->o.loss.class_axis < 0 ? ls->rank + s->o.loss.class_axis : s->o.loss.class_axis;
        s->n_classes = ls->dim[s->class_axis];
    }
    if ((st = bind_arrays(s, data, "data", err))) goto fail;
    if ((st = check_arrays(s, data, err))) goto fail;

    /* the backward pass */
    ot_autodiff_options ao = {.loss_value = s->loss_value,
                              .freeze = s->o.freeze,
                              .n_freeze = s->o.n_freeze,
                              .train = s->o.train,
                              .n_train = s->o.n_train};
    if ((st = ot_autodiff_build(g, &ao, &s->ad, err))) goto fail;
    s->ad_built = true;
    if (s->ad.n_params == 0) {
        st = ot_fail(err, OT_E_USAGE, "nothing to train: every parameter is frozen (check --freeze / --train)");
        goto fail;
    }
    g->values[s->loss_value].is_graph_output = true; /* pinned: read after every run */
    if (s->out_value >= 0) g->values[s->out_value].is_graph_output = true;
    s->be = ot_backend_new_by_name(s->o.device ? s->o.device : "cpu", s->o.n_threads, err);
    if (!s->be) {
        st = err ? err->code : OT_E_DEVICE;
        goto fail;
    }
    /* validation's plan first: the budget that remat and the check below work to
     * must hold it too */
    if (s->o.validation && (st = ot_train_validation_plan_ahead(s, err))) goto fail;
    if ((st = apply_remat(s, err))) goto fail;

    if (with_optimizer) {
        if (s->o.optim.schedule == OT_SCHED_COSINE && s->o.optim.total_steps == 0)
            s->o.optim.total_steps = ot_train_total_steps(s, data);
        if ((st = ot_optim_config_check(&s->o.optim, err))) goto fail;
        if ((st = ot_optim_build(g, &s->o.optim, s->ad.params, s->ad.grads, s->ad.n_params, &s->og, err))) goto fail;
    }
    if ((st = ot_train_loop_prepare(s, err))) goto fail;
    if ((st = ot_graph_require_static(g, err))) goto fail;
    if (s->o.memory_budget && !s->budget) { /* a fixed policy: checked, not searched */
        s->budget = s->o.memory_budget;
        s->val_in_budget = s->val_g != NULL;
    }
    if ((st = ot_train_check_budget(g, s->be, s->o.remat, s->o.memory_budget, s->val_peak, err))) goto fail;
    ot_exec_options eo = {.n_threads = s->o.n_threads,
                          .seed = s->o.seed,
                          .at_phase_end = ot_train_hook,
                          .hook_user = s,
                          .release_host_data = !s->o.keep_host_weights};
    if ((st = ot_executor_new(g, s->be, &eo, &s->ex, err))) goto fail;
    if ((st = find_boundary(s, err))) goto fail;
    if (s->o.validation && (st = ot_train_validation_prepare(s, err))) goto fail;

    /* host buffers: one batch per array */
    s->n_batch = data->n_arrays;
    s->batch = calloc((size_t)s->n_batch, sizeof *s->batch);
    s->batch_value = calloc((size_t)s->n_batch, sizeof *s->batch_value);
    s->grad_off = calloc((size_t)s->ad.n_params + 1, sizeof *s->grad_off);
    if (!s->batch || !s->batch_value || !s->grad_off) goto oom;
    for (int i = 0; i < s->n_batch; i++) {
        s->batch_value[i] = data->arrays[i].value_id;
        ot_shape bs = data->arrays[i].t->shape;
        bs.dim[0] = s->B;
        if (!(s->batch[i] = ot_tensor_new(data->arrays[i].t->dtype, &bs))) goto oom;
    }
    for (int i = 0; i < s->ad.n_params; i++) {
        s->grad_off[i] = s->grad_elems;
        s->grad_elems += (size_t)ot_shape_numel(&g->values[s->ad.grads[i]].shape);
    }
    s->grad_off[s->ad.n_params] = s->grad_elems;
    *out = s;
    return OT_OK;
oom:
    st = ot_fail(err, OT_E_MEMORY, "out of memory setting up training");
fail:
    /* Nothing has run: the arena holds the weights as loaded. Copy back the host
     * copies the executor released, so the model is as the caller gave it. */
    if (s->ex && !s->o.keep_host_weights) (void)ot_executor_sync_to_graph(s->ex, NULL);
    ot_train_session_free(s);
    return st;
}

void ot_train_session_free(ot_train_session *s) {
    if (!s) return;
    ot_train_validation_free(s); /* its executor uses s->be */
    ot_executor_free(s->ex);
    ot_backend_free(s->be);
    if (s->ad_built) ot_autodiff_result_free(&s->ad);
    ot_optim_graph_free(&s->og);
    for (int i = 0; i < s->n_batch; i++) ot_tensor_free(s->batch[i]);
    free(s->batch);
    free(s->batch_value);
    free(s->grad_off);
    free(s->accum_ids);
    free(s->scan_buf);
    free(s);
}

ot_status ot_train_check_data(ot_train_session *s, ot_dataset *data, const char *what, ot_error *err) {
    ot_status st = bind_arrays(s, data, what, err);
    if (!st) st = check_arrays(s, data, err);
    if (st) return st;
    /* batches reuse the training data's host buffers, array by array */
    if (data->n_arrays != s->n_batch)
        return ot_fail(err, OT_E_USAGE, "%s: %d arrays, the training data has %d", what, data->n_arrays, s->n_batch);
    for (int i = 0; i < data->n_arrays; i++)
        if (data->arrays[i].value_id != s->batch_value[i])
            return ot_fail(err, OT_E_USAGE, "%s: give the arrays in the same order as the training data (%s feeds '%s', expected '%s')",
                           what, data->arrays[i].path, vname(s->g, data->arrays[i].value_id), vname(s->g, s->batch_value[i]));
    return OT_OK;
}

int64_t ot_train_batch_size(const ot_train_session *s) { return s->B; }
const ot_plan *ot_train_plan(const ot_train_session *s) { return ot_executor_plan(s->ex); }
const ot_autodiff_result *ot_train_autodiff(const ot_train_session *s) { return &s->ad; }
ot_graph *ot_train_graph(ot_train_session *s) { return s->g; }
const ot_optim_config *ot_train_optim(const ot_train_session *s) { return &s->o.optim; }

int64_t ot_train_total_steps(const ot_train_session *s, const ot_dataset *data) {
    if (s->o.steps > 0) return s->o.steps;
    int64_t per_epoch = s->B > 0 ? data->n_samples / s->B : 0;
    int64_t epochs = s->o.epochs > 0 ? s->o.epochs : 1;
    return epochs * per_epoch / (s->o.accum > 0 ? s->o.accum : 1);
}

const ot_train_remat_summary *ot_train_remat_info(const ot_train_session *s) { return &s->remat; }

void ot_train_memory_info(const ot_train_session *s, ot_train_memory_summary *out) {
    *out = (ot_train_memory_summary){.budget = s->budget,
                                     .budget_from_device = s->budget_from_device,
                                     .train_peak = s->ex ? (int64_t)ot_plan_peak_bytes(ot_executor_plan(s->ex)) : 0,
                                     .val_peak = s->val_peak,
                                     .val_in_budget = s->val_in_budget};
}
