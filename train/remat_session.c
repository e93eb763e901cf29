/* session.c — the training graph of one step under a remat policy, planned and
 * optionally run once (see session.h). Used by `plan`, `verify` and the tests. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/remat_session.h"
#include "kernels/backend_select.h"
#include "exec/executor.h"
#include "plan/schedule.h"
#include "train/train.h"
#include "kernels/kernel.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ot_remat_session_free(ot_remat_session *s) {
    if (!s) return;
    ot_remat_rewrite_free(&s->rw);
    free(s->keep);
    ot_remat_analysis_free(&s->an);
    ot_remat_policy_free(&s->policy);
    if (s->ad_built) ot_autodiff_result_free(&s->ad);
    ot_backend_free(s->be);
    ot_model_free(s->model);
    free(s);
}

/* Binds the batch dim: axis 0 of the first data input. */
static ot_status bind_batch(ot_remat_session *s, int64_t want, ot_error *err) {
    ot_graph *g = s->g;
    if (s->n_model_inputs == 0) return ot_fail(err, OT_E_MODEL, "%s: the model has no data inputs", s->model->path);
    const ot_value *x = &g->values[g->inputs[0]];
    if (x->shape.rank < 1) return ot_fail(err, OT_E_MODEL, "model input '%s' has no batch axis", x->name);
    if (x->shape.dim[0] >= 0) {
        if (want > 0 && want != x->shape.dim[0])
            return ot_fail(err, OT_E_USAGE, "--batch-size %lld: model input '%s' has a fixed batch of %lld",
                           (long long)want, x->name, (long long)x->shape.dim[0]);
        s->batch = x->shape.dim[0];
        return OT_OK;
    }
    if (want <= 0)
        return ot_fail(err, OT_E_USAGE, "model input '%s' has a symbolic batch: give --batch-size N", x->name);
    if (x->shape.sym[0] < 0)
        return ot_fail(err, OT_E_SHAPE, "model input '%s': the batch axis is unknown and not symbolic", x->name);
    s->batch = want;
    return ot_graph_bind_dim(g, g->syms[x->shape.sym[0]], want, err);
}

/* Remat's measure: the planner with the session's backend (workspaces included). */
static ot_status measure(const ot_graph *g, void *user, ot_remat_measurement *m, ot_error *err) {
    return ot_remat_measure_planner(g, user, m, err);
}

ot_status ot_remat_session_new(const char *path, const ot_remat_session_options *o, ot_remat_session **out,
                               ot_error *err) {
    ot_status st = OT_OK;
    *out = NULL;
    ot_remat_session *s = calloc(1, sizeof *s);
    if (!s) return ot_fail(err, OT_E_MEMORY, "out of memory");
    s->label_value = -1;
    s->seed = o->seed;
    s->plan_only = o->plan_only;
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = o->plan_only};
    if ((st = ot_model_load(path, &io, &s->model, err))) goto fail;
    s->g = s->model->graph;
    s->n_model_inputs = s->g->n_inputs;
    if ((st = bind_batch(s, o->batch_size, err))) goto fail;
    if ((st = ot_loss_build(s->g, &o->loss, &s->loss_value, err))) goto fail;
    if (o->loss.kind != OT_LOSS_OUTPUT) s->label_value = s->g->inputs[s->g->n_inputs - 1];
    ot_autodiff_options ao = {.loss_value = s->loss_value};
    if ((st = ot_autodiff_build(s->g, &ao, &s->ad, err))) goto fail;
    s->ad_built = true;
    s->g->values[s->loss_value].is_graph_output = true; /* pinned: read after the run */
    if ((st = ot_graph_require_static(s->g, err))) goto fail;
    if (!(s->be = ot_backend_new_by_name(o->device ? o->device : "cpu", o->n_threads, err))) {
        st = err ? err->code : OT_E_DEVICE;
        goto fail;
    }
    if ((st = ot_remat_policy_parse(o->policy, &s->policy, err))) goto fail;
    if (s->policy.kind == OT_REMAT_AUTO) s->policy.budget_bytes = o->memory_budget;
    if ((st = ot_remat_analyze(s->g, &s->an, err))) goto fail;
    if (!(s->keep = ot_xcalloc((size_t)s->an.n_values, sizeof(bool)))) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory");
        goto fail;
    }
    double t0 = now_s();
    if ((st = ot_remat_choose(s->g, &s->an, &s->policy, measure, s->be, s->keep, err))) goto fail;
    s->choose_seconds = now_s() - t0;
    if ((st = ot_remat_apply(s->g, &s->an, s->keep, &s->rw, err))) goto fail;
    *out = s;
    return OT_OK;
fail:
    ot_remat_session_free(s);
    return st;
}

ot_status ot_remat_session_plan(const ot_remat_session *s, ot_plan **plan, ot_error *err) {
    int *order = NULL, n = 0;
    *plan = NULL;
    ot_status st = ot_schedule_build(s->g, &order, &n, err);
    ot_plan_device dev = ot_backend_plan_device(s->be);
    if (st == OT_OK) st = ot_plan_build(s->g, order, n, &dev, plan, err);
    free(order);
    return st;
}

/* The graph input a data array feeds, or -1 with err set. */
static int array_target(const ot_remat_session *s, const ot_data_array *a, int *pos, ot_error *err) {
    const ot_graph *g = s->g;
    if (!strcmp(a->name, OT_DATA_LABELS) || !strcmp(a->name, "labels") || !strcmp(a->name, "targets")) {
        if (s->label_value >= 0) return s->label_value;
    }
    if (!a->name[0]) {
        if (*pos >= s->n_model_inputs) {
            ot_fail(err, OT_E_USAGE, "more --input files than model inputs (%d); '%s' is extra", s->n_model_inputs,
                    a->path ? a->path : "?");
            return -1;
        }
        return g->inputs[(*pos)++];
    }
    for (int k = 0; k < s->n_model_inputs; k++)
        if (!strcmp(g->values[g->inputs[k]].name, a->name)) return g->inputs[k];
    ot_fail(err, OT_E_USAGE, "--input %s=...: the model has no data input named '%s'", a->name, a->name);
    return -1;
}

ot_status ot_remat_session_step(ot_remat_session *s, const ot_dataset *data, ot_remat_step *r, ot_error *err) {
    ot_status st = OT_OK;
    ot_executor *ex = NULL;
    ot_tensor *batch = NULL;
    int64_t *idx = NULL;
    bool *fed = NULL;
    memset(r, 0, sizeof *r);
    ot_graph *g = s->g;
    if (s->plan_only)
        return ot_fail(err, OT_E_INTERNAL,
                       "%s: the remat session was built to plan only, without the weights: it cannot run a step",
                       s->model->path);
    if (data->n_samples < s->batch) {
        return ot_fail(err, OT_E_DATA, "batch %lld: the data has only %lld samples", (long long)s->batch,
                       (long long)data->n_samples);
    }
    ot_exec_options eo = {.n_threads = s->be->n_threads, .seed = s->seed, .step = 0};
    if ((st = ot_executor_new(g, s->be, &eo, &ex, err))) goto fail;
    idx = ot_xcalloc((size_t)s->batch, sizeof(int64_t));
    fed = ot_xcalloc((size_t)g->n_values, sizeof(bool));
    if (!idx || !fed) goto oom;
    for (int64_t i = 0; i < s->batch; i++) idx[i] = i;
    int pos = 0;
    for (int i = 0; i < data->n_arrays; i++) {
        int v = array_target(s, &data->arrays[i], &pos, err);
        if (v < 0) {
            st = err ? err->code : OT_E_USAGE;
            goto fail;
        }
        if ((st = ot_data_gather_new(data->arrays[i].t, idx, s->batch, &batch, err))) goto fail;
        st = ot_executor_set_input(ex, v, batch, err);
        ot_tensor_free(batch);
        batch = NULL;
        if (st) {
            ot_error_prefix(err, "%s: ", data->arrays[i].path ? data->arrays[i].path : data->arrays[i].name);
            goto fail;
        }
        fed[v] = true;
    }
    for (int k = 0; k < g->n_inputs; k++)
        if (!fed[g->inputs[k]]) {
            st = ot_fail(err, OT_E_USAGE, "no data for input '%s': give --input %s=FILE.npy%s",
                         g->values[g->inputs[k]].name, g->values[g->inputs[k]].name,
                         g->inputs[k] == s->label_value ? " (or --labels FILE.npy)" : "");
            goto fail;
        }
    double t0 = now_s();
    if ((st = ot_executor_run(ex, err))) goto fail;
    double t1 = now_s();
    if ((st = ot_step_results_collect(ex, g, &s->ad, s->loss_value, r, err))) goto fail;
    r->seconds = t1 - t0;
    goto done;
oom:
    st = ot_fail(err, OT_E_MEMORY, "out of memory running one step");
fail:
    ot_remat_step_free(r);
done:
    ot_executor_free(ex);
    ot_tensor_free(batch);
    free(idx);
    free(fed);
    return st;
}

/* Planned peak of the model at batch b under o's policy; *fits false when auto says
 * the budget cannot be met. */
static ot_status probe(const char *path, const ot_remat_session_options *o, int64_t b, int64_t budget, bool *fits,
                       int64_t *peak, ot_error *err) {
    ot_remat_session_options po = *o;
    po.batch_size = b;
    po.plan_only = true;
    ot_remat_session *s = NULL;
    ot_plan *plan = NULL;
    *fits = false;
    ot_status st = ot_remat_session_new(path, &po, &s, err);
    if (st == OT_E_MEMORY && o->policy && !strcmp(o->policy, "auto")) return OT_OK; /* auto: does not fit */
    if (st == OT_OK) st = ot_remat_session_plan(s, &plan, err);
    if (st == OT_OK) {
        *peak = (int64_t)ot_plan_peak_bytes(plan);
        *fits = *peak <= budget;
    }
    ot_plan_free(plan);
    ot_remat_session_free(s);
    return st;
}

ot_status ot_remat_find_batch(const char *path, const ot_remat_session_options *o, int64_t budget, int64_t max_batch,
                              int64_t *batch, ot_error *err) {
    bool fits = false;
    int64_t peak = -1;
    ot_model *m = NULL;
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = true}; /* only its input's shape is read */
    ot_status st = ot_model_load(path, &io, &m, err);
    if (st) return st;
    const ot_graph *g = m->graph;
    int64_t fixed = g->n_inputs > 0 && g->values[g->inputs[0]].shape.rank > 0 ? g->values[g->inputs[0]].shape.dim[0] : -1;
    ot_model_free(m);
    if (fixed >= 0) { /* nothing to choose: check the model's own batch */
        if ((st = probe(path, o, 0, budget, &fits, &peak, err))) return st;
        if (!fits && peak < 0) { /* auto found nothing: state the least peak */
            ot_remat_session_options po = *o;
            po.policy = "all";
            (void)probe(path, &po, 0, budget, &fits, &peak, NULL);
            fits = false;
        }
        if (!fits)
            return ot_fail(err, OT_E_MEMORY,
                           "--batch-size auto: the model's fixed batch of %lld does not fit --memory-budget %lld bytes "
                           "(planned peak %lld bytes)",
                           (long long)fixed, (long long)budget, (long long)peak);
        *batch = fixed;
        return OT_OK;
    }
    st = probe(path, o, 1, budget, &fits, &peak, err);
    if (st) return st;
    if (!fits) {
        if (peak < 0) {
            ot_remat_session_options po = *o;
            po.policy = "all";
            (void)probe(path, &po, 1, budget, &fits, &peak, NULL);
            fits = false;
        }
        return ot_fail(err, OT_E_MEMORY,
                       "--batch-size auto: even batch 1 does not fit --memory-budget %lld bytes (its planned peak is "
                       "%lld bytes)",
                       (long long)budget, (long long)peak);
    }
    int64_t lo = 1, hi = -1; /* lo fits; hi does not (or -1: not found yet) */
    while (hi < 0) {
        int64_t b = lo * 2 > max_batch ? max_batch : lo * 2;
        if (b == lo) break;
        if ((st = probe(path, o, b, budget, &fits, &peak, err))) return st;
        if (fits) lo = b;
        else hi = b;
    }
    while (hi > 0 && hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((st = probe(path, o, mid, budget, &fits, &peak, err))) return st;
        if (fits) lo = mid;
        else hi = mid;
    }
    *batch = lo;
    return OT_OK;
}

