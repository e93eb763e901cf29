/* train_fuse.c — the training loop's side of --fuse-update (ot_train_options.fuse_update,
 * ot_graph.fuse_update): the check of each gradient just before its own update, the
 * gradient norm from the sums taken there, over MPI ranks the start of each gradient's
 * sum when it is complete and the wait before its update (train_dist.h), and the
 * results verify compares (params and optimizer state after N steps, fused against
 * unfused). The schedule and the plan of a fused step are plan/'s (schedule.h,
 * planner.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_dist.h"
#include "train/train_internal.h"

/* --fuse-update: per param, the step after which its gradient is checked (the last
 * one before its update that is not itself an update: see train_internal.h; over MPI
 * ranks the step that completes it, where its sum starts), and per step the param an
 * update there updates. */
static ot_status fuse_build(ot_train_session *s, ot_error *err) {
    const ot_plan *p = ot_executor_plan(s->ex);
    int n = s->ad.n_params;
    s->fuse_check_at = malloc(((size_t)n + 1) * sizeof *s->fuse_check_at);
    s->fuse_ss = calloc((size_t)n + 1, sizeof *s->fuse_ss);
    s->fuse_param_at = malloc(((size_t)p->n_steps + 1) * sizeof *s->fuse_param_at);
    if (!s->fuse_check_at || !s->fuse_ss || !s->fuse_param_at) {
        free(s->fuse_check_at), free(s->fuse_ss), free(s->fuse_param_at);
        s->fuse_check_at = NULL, s->fuse_ss = NULL, s->fuse_param_at = NULL;
        return ot_fail(err, OT_E_MEMORY, "out of memory checking the gradients");
    }
    bool dist = ot_train_dist_size(s) > 1;
    for (int i = 0; i < n; i++) s->fuse_check_at[i] = dist ? p->values[s->ad.grads[i]].def_step : -1;
    for (int k = 0; k < p->n_steps; k++) {
        const ot_node *nd = &s->g->nodes[p->order[k]];
        s->fuse_param_at[k] = -1;
        if (nd->phase != OT_PHASE_OPTIMIZER || nd->n_inputs < 2) continue;
        int at = k - 1;
        while (at >= 0 && s->g->nodes[p->order[at]].phase == OT_PHASE_OPTIMIZER) at--;
        for (int i = 0; i < n; i++) {
            if (nd->inputs[0] != s->ad.params[i] || nd->inputs[1] != s->ad.grads[i]) continue;
            if (!dist) s->fuse_check_at[i] = at;
            s->fuse_param_at[k] = i;
        }
    }
    for (int i = 0; dist && i < n; i++)
        if (s->fuse_check_at[i] < 0)
            return ot_fail(err, OT_E_INTERNAL, "the gradient of '%s' has no step that completes it",
                           vname(s->g, s->ad.params[i]));
    return OT_OK;
}

/* How many params the fused updates before schedule step `step` have updated. */
static int fused_updated_before(const ot_train_session *s, int step) {
    const ot_plan *p = ot_executor_plan(s->ex);
    int n = 0;
    for (int k = s->boundary + 1; k < step && k < p->n_steps; k++)
        n += s->g->nodes[p->order[k]].phase == OT_PHASE_OPTIMIZER;
    return n;
}

/* Over MPI ranks, after step `step`: the sums in flight progress, and before a run of
 * updates (the executor may run it as one kernel, exec/executor.c) the sum of each
 * gradient it reads is waited for; with --report-grad-norm, the sum's squares are
 * taken then, as the unfused run takes them from the summed gradients. */
static ot_status dist_after_step(ot_train_session *s, int step, ot_error *err) {
    const ot_plan *p = ot_executor_plan(s->ex);
    ot_status st = ot_train_dist_sum_poll(s, err);
    if (st || s->g->nodes[p->order[step]].phase == OT_PHASE_OPTIMIZER) return st; /* in a run: waited before it */
    for (int k = step + 1; !st && k < p->n_steps && s->g->nodes[p->order[k]].phase == OT_PHASE_OPTIMIZER; k++) {
        int i = s->fuse_param_at[k];
        if (i < 0) continue;
        st = ot_train_dist_sum_wait(s, i, err);
        if (!st && s->o.record_grad_norm) st = ot_train_grad_scan(s, i, NULL, &s->fuse_ss[i], err);
    }
    return st;
}

/* --fuse-update: each gradient checked (and its sum of squares taken, for
 * --report-grad-norm) after the step named by fuse_check_at, before its own update;
 * over MPI ranks its sum starts there (dist_after_step waits for it). A bad one stops
 * the run there. When no update of the step has run yet, the weights are the step's and the usual diagnosis re-runs it (nonfinite). Otherwise the updates
 * that ran stay, so the weights are no step's (fused_partial) and no re-run can start
 * from the step's weights; the message says so and how to name the node. */
ot_status ot_train_fused_after_step(ot_train_session *s, int step, ot_error *err) {
    bool check = !s->o.no_numerics_check, dist = ot_train_dist_size(s) > 1;
    if (s->mode != MODE_TRAIN || (!check && !s->o.record_grad_norm && !dist)) return OT_OK;
    ot_status st;
    if (!s->fuse_check_at && (st = fuse_build(s, err))) return st;
    for (int i = 0; i < s->ad.n_params; i++) {
        if (s->fuse_check_at[i] != step) continue;
        int64_t bad = -1;
        double ss = 0.0;
        if ((check || (s->o.record_grad_norm && !dist)) &&
            (st = ot_train_grad_scan(s, i, check ? &bad : NULL, dist ? &ss : &s->fuse_ss[i], err)))
            return st;
        if (bad < 0) {
            if (dist && (st = ot_train_dist_sum_start(s, i, step, err))) return st;
            continue;
        }
        int done = fused_updated_before(s, step + 1);
        if (done == 0) { /* no update ran: the weights are the step's, so the diagnosis can re-run it */
            s->nonfinite = true;
            return ot_fail(err, OT_E_NUMERICS, "training step %lld: the gradient of '%s' is not finite at index %lld",
                           (long long)s->run_step, vname(s->g, s->ad.params[i]), (long long)bad);
        }
        s->fused_partial = true;
        return ot_fail(err, OT_E_NUMERICS,
                       "training step %lld: the gradient of '%s' is not finite at index %lld; with --fuse-update %d "
                       "of %d params were already updated in this step, so the run stops and writes nothing (the "
                       "last checkpoint is as it was). Run from that checkpoint without --fuse-update to name the "
                       "node that first made a non-finite value; lower --lr or check the data",
                       (long long)s->run_step, vname(s->g, s->ad.params[i]), (long long)bad, done, s->n_opt_steps);
    }
    return dist ? dist_after_step(s, step, err) : OT_OK;
}

void ot_train_fused_norm(ot_train_session *s) {
    if (s->mode != MODE_TRAIN || !s->o.record_grad_norm || !s->fuse_ss) return;
    double total = 0.0; /* the sums taken before each update, added in param order as the boundary does */
    for (int i = 0; i < s->ad.n_params; i++) total += s->fuse_ss[i];
    s->last_norm = sqrt(total) / (double)s->o.accum; /* over N ranks the sum of N, as the unfused step divides */
}

ot_status ot_train_params_results(ot_train_session *s, const ot_dataset *data, int64_t n_steps, ot_step_results *r,
                                  ot_error *err) {
    memset(r, 0, sizeof *r);
    if (!s->ex || !s->with_opt) return ot_fail(err, OT_E_INTERNAL, "ot_train_params_results needs a session that runs the optimizer");
    ot_status st = OT_OK;
    double loss = 0.0, sum = 0.0;
    for (int64_t k = 0; k < n_steps && !st; k++) {
        st = ot_train_step_once(s, data, k, &loss, err);
        sum += loss;
    }
    if (st) return st;
    int n = 1 + s->ad.n_params + s->og.n_state;
    r->names = ot_xcalloc((size_t)n, sizeof(char *));
    r->tensors = ot_xcalloc((size_t)n, sizeof(ot_tensor *));
    if (!r->names || !r->tensors) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory copying the params");
        goto fail;
    }
    r->loss = sum;
    r->planned_peak = ot_plan_peak_bytes(ot_executor_plan(s->ex));
    r->measured_peak = ot_executor_high_water(s->ex);
    ot_tensor *t = NULL;
    if (!(t = ot_tensor_new(OT_F64, &(ot_shape){.rank = 0}))) goto oom;
    memcpy(t->data, &sum, sizeof sum); /* the losses of the N steps, summed in order */
    r->names[r->n] = ot_strdup("losses");
    r->tensors[r->n++] = t;
    if (!r->names[0]) goto oom;
    for (int i = 0; i < s->ad.n_params + s->og.n_state; i++) {
        int v = i < s->ad.n_params ? s->ad.params[i] : s->og.state[i - s->ad.n_params];
        if ((st = ot_executor_get(s->ex, v, &t, err))) goto fail;
        size_t len = strlen(vname(s->g, v)) + 8;
        char *nm = malloc(len);
        if (!nm) {
            ot_tensor_free(t);
            goto oom;
        }
        snprintf(nm, len, "%s:%s", i < s->ad.n_params ? "param" : "state", vname(s->g, v));
        r->names[r->n] = nm;
        r->tensors[r->n++] = t;
    }
    return OT_OK;
oom:
    st = ot_fail(err, OT_E_MEMORY, "out of memory copying the params");
fail:
    ot_step_results_free(r);
    return st;
}
