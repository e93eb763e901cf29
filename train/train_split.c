/* train_split.c — a training step in two calls, as ONNX Runtime's on-device training
 * API takes it (Module(...) runs forward and backward, Optimizer.step() updates,
 * lazy_reset_grad() starts the next sum afresh): the public API's onnxtrain_backward,
 * onnxtrain_optimizer_step and onnxtrain_zero_grad (include/onnxtrain.h).
 *
 * Built with ot_train_options.split_update, the session has one float32 accumulator
 * per param gradient (those --accum uses, ot_train_loop_prepare). A backward run
 * stops at the boundary with the optimizer nodes told not to apply (as --accum's
 * early micro-batches) and adds the gradients into the accumulators, or copies them
 * there after a reset, so the sum of calls is exact and one call gives its gradients
 * bit for bit. The update copies the sums into the gradients and runs the optimizer
 * nodes alone (the steps after the boundary): they read only params, gradients,
 * their state and the step scalars, all pinned, so nothing else need be run again. */
#include <math.h>
#include <stdlib.h>

#include "train/train_internal.h"

ot_status ot_train_split_boundary(ot_train_session *s, ot_error *err) {
    for (int i = 0; i < s->ad.n_params; i++) {
        int g = s->ad.grads[i], acc = s->accum_ids[i];
        size_t n = s->grad_off[i + 1] - s->grad_off[i];
        ot_status st = s->split_have_grads
                           ? s->be->accumulate_f32(s->be, ot_executor_value_ptr(s->ex, acc),
                                                   ot_executor_value_ptr(s->ex, g), n, false, err)
                           : ot_executor_copy_value(s->ex, acc, g, err);
        if (st) return st;
    }
    s->split_have_grads = true;
    return ot_train_write_scalars(s, 0, 1, false, err);
}

ot_status ot_train_backward(ot_train_session *s, const ot_dataset *data, double *loss, ot_error *err) {
    if (!s->ex || !s->with_opt || !s->o.split_update || !s->accum_ids)
        return ot_fail(err, OT_E_INTERNAL, "ot_train_backward needs a session built with split_update");
    if (data->n_samples != s->B)
        return ot_fail(err, OT_E_DATA, "a backward call takes exactly the %lld samples the session was built for, not %lld",
                       (long long)s->B, (long long)data->n_samples);
    int64_t *idx = malloc((size_t)s->B * sizeof *idx);
    if (!idx) return ot_fail(err, OT_E_MEMORY, "out of memory");
    for (int64_t i = 0; i < s->B; i++) idx[i] = i;
    s->micro = 0;
    s->run_step = s->split_calls + 1;
    ot_status st = ot_train_feed(s, data, idx, s->B, err);
    free(idx);
    /* Dropout masks keyed by the call, not the update: each call draws new ones */
    if (!st) st = ot_train_run_once(s, MODE_TRAIN, (uint64_t)s->split_calls, err);
    if (st) return st;
    s->split_calls++;
    if (loss) *loss = s->last_loss;
    return OT_OK;
}

void ot_train_zero_grad(ot_train_session *s) { s->split_have_grads = false; }

ot_status ot_train_optimizer_update(ot_train_session *s, int64_t step, double lr, ot_error *err) {
    if (!s->ex || !s->with_opt || !s->o.split_update || !s->accum_ids)
        return ot_fail(err, OT_E_INTERNAL, "ot_train_optimizer_update needs a session built with split_update");
    if (s->split_calls == 0) return ot_fail(err, OT_E_USAGE, "no gradients yet: run a backward call before the update");
    if (!isfinite(lr)) return ot_fail(err, OT_E_USAGE, "learning rate %g is not finite", lr);
    ot_status st = OT_OK;
    for (int i = 0; i < s->ad.n_params && !st; i++) st = ot_executor_copy_value(s->ex, s->ad.grads[i], s->accum_ids[i], err);
    s->opt_step = step + 1;
    s->run_step = step + 1;
    s->lr = lr;
    if (!st) st = ot_train_write_scalars(s, lr, 1, true, err);
    const ot_plan *p = ot_executor_plan(s->ex);
    int first = s->boundary + 1;
    if (!st && first < p->n_steps) st = ot_executor_run_steps(s->ex, first, p->n_steps - first, err);
    for (int k = first; !st && !s->o.no_numerics_check && k < p->n_steps; k++)
        st = ot_train_check_update(s, k, &s->g->nodes[p->order[k]], err);
    return st;
}
