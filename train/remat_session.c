/* remat_session.c — a training step's graph under a remat policy, as a view over a
 * plan-only training session, and its steps as runnable sessions over the same
 * import (see remat_session.h). */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"
#include "plan/schedule.h"
#include "train/remat_session.h"
#include "train/train.h"

/* The training options of o under o's policy (a budget only for auto, which searches
 * within it: a fixed policy is planned as it is). */
static void train_options(const ot_remat_session_options *o, ot_train_options *to) {
    ot_train_options_default(to);
    to->loss = o->loss;
    to->batch_size = o->batch_size;
    to->seed = o->seed;
    to->n_threads = o->n_threads;
    to->device = o->device;
    to->remat = o->policy;
    to->memory_budget = o->policy && !strcmp(o->policy, "auto") ? o->memory_budget : 0;
}

void ot_remat_session_free(ot_remat_session *s) {
    if (!s) return;
    ot_remat_policy_free(&s->policy);
    ot_train_session_free(s->ts);
    ot_model_free(s->model);
    free(s);
}

ot_status ot_remat_session_new(const char *path, const ot_remat_session_options *o, ot_remat_session **out,
                               ot_error *err) {
    *out = NULL;
    ot_remat_session *s = calloc(1, sizeof *s);
    if (!s) return ot_fail(err, OT_E_MEMORY, "out of memory");
    s->o = *o;
    s->seed = o->seed;
    s->plan_only = o->plan_only;
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = o->plan_only};
    ot_status st = ot_model_load(path, &io, &s->model, err);
    if (st) goto fail;
    ot_train_options to;
    train_options(o, &to);
    to.plan_only = true;
    if ((st = ot_train_session_new(s->model, &to, NULL, false, &s->ts, err))) goto fail;
    if ((st = ot_remat_policy_parse(o->policy, &s->policy, err))) goto fail;
    if (s->policy.kind == OT_REMAT_AUTO) s->policy.budget_bytes = o->memory_budget;
    s->g = ot_train_graph(s->ts);
    s->batch = ot_train_batch_size(s->ts);
    s->be = ot_train_backend(s->ts);
    const ot_remat_analysis *an = ot_train_remat_analysis(s->ts, &s->keep);
    if (an) s->an = *an;
    const ot_train_remat_summary *rs = ot_train_remat_info(s->ts);
    s->rw.n_clones = rs->n_clones;
    s->rw.extra_flops = rs->extra_flops;
    s->rw.kept_bytes = rs->applied ? rs->kept : rs->kept_none;
    s->choose_seconds = ot_train_remat_choose_seconds(s->ts);
    *out = s;
    return OT_OK;
fail:
    ot_remat_session_free(s);
    return st;
}

ot_status ot_remat_session_plan(const ot_remat_session *s, ot_plan **plan, ot_error *err) {
    int *order = NULL, n = 0;
    *plan = NULL;
    ot_plan_device dev = ot_backend_plan_device(s->be);
    int64_t target = ot_train_fit_target(s->ts); /* as the session's measure and executor plan it */
    ot_plan_options popt = {.fit_target_bytes = target > 0 ? (size_t)target : 0};
    /* reuses the plan that judged the order */
    ot_status st = ot_schedule_plan_opts(s->g, &dev, target > 0 ? &popt : NULL, NULL, &order, &n, plan, err);
    free(order);
    return st;
}

ot_status ot_remat_session_step(ot_remat_session *s, ot_dataset *data, ot_remat_step *r, ot_error *err) {
    memset(r, 0, sizeof *r);
    if (s->plan_only)
        return ot_fail(err, OT_E_INTERNAL,
                       "%s: the remat session was built to plan only, without the weights: it cannot run a step",
                       s->model->path);
    if (data->n_samples < s->batch)
        return ot_fail(err, OT_E_DATA, "batch %lld: the data has only %lld samples", (long long)s->batch,
                       (long long)data->n_samples);
    ot_train_options to;
    train_options(&s->o, &to);
    to.batch_size = s->batch;
    to.seed = s->seed;
    to.keep_host_weights = true; /* the model keeps its weights for the next step */
    to.no_numerics_check = true; /* a NaN is a result like any other */
    ot_train_session *ts = NULL;
    ot_status st = ot_train_session_new(s->model, &to, data, false, &ts, err);
    if (!st) st = ot_train_step_results(ts, data, r, err);
    ot_train_session_free(ts);
    return st;
}
