/* split.c — the public API's step in two calls, for ONNX Runtime's training API
 * (python/onnxtrain/training): onnxtrain_backward sums gradients over calls,
 * onnxtrain_optimizer_step updates from the sum, onnxtrain_zero_grad starts the next
 * sum afresh, and the learning rate those updates use is the caller's to set
 * (train/train_split.c does the work). */
#include <math.h>

#include "api/api_internal.h"
#include "train/optim.h"

onnxtrain_status onnxtrain_backward(onnxtrain_session *s, const onnxtrain_tensor *inputs, int n_inputs,
                                    const onnxtrain_tensor *labels, double *loss) {
    ot_error err = {0};
    api_batch b = {0};
    const char *fn = "onnxtrain_backward";
    ot_status st = api_enter(s, fn, &err);
    if (st) return api_result(st, &err);
    if (s->ts && !s->o.split_update)
        st = ot_fail(&err, OT_E_USAGE,
                     "%s: the session was built for whole steps (onnxtrain_prepare or onnxtrain_train_step came "
                     "first); open another session for the two-call step",
                     fn);
    else if (s->o.accum != 1)
        st = ot_fail(&err, OT_E_USAGE, "%s: options.accum is %lld; the two-call step sums over calls instead (use 1)",
                     fn, (long long)s->o.accum);
    if (!st && (st = api_batch_make(inputs, n_inputs, labels, &b, &err))) ot_error_prefix(&err, "%s: ", fn);
    if (!st) {
        s->o.split_update = true; /* before the build: it adds the gradient sums */
        st = api_build(s, &b, true, fn, &err);
        if (!s->ts) s->o.split_update = false;
    }
    double l = NAN;
    if (!st) {
        if ((st = ot_train_backward(s->ts, &b.d, &l, &err))) ot_error_prefix(&err, "%s: ", fn);
        else if (loss) *loss = l;
    }
    api_batch_free(&b);
    api_leave(s);
    return api_result(st, &err);
}

onnxtrain_status onnxtrain_zero_grad(onnxtrain_session *s) {
    ot_error err = {0};
    ot_status st = api_enter(s, "onnxtrain_zero_grad", &err);
    if (st) return api_result(st, &err);
    if (s->ts && s->o.split_update) ot_train_zero_grad(s->ts);
    api_leave(s);
    return ONNXTRAIN_OK;
}

/* The rate of the next update: the caller's, else the schedule's at that step. */
static double next_lr(const onnxtrain_session *s) {
    return s->has_lr ? s->lr : ot_optim_lr_at(s->ts ? ot_train_optim(s->ts) : &s->o.optim, s->step);
}

onnxtrain_status onnxtrain_optimizer_step(onnxtrain_session *s) {
    ot_error err = {0};
    const char *fn = "onnxtrain_optimizer_step";
    ot_status st = api_enter(s, fn, &err);
    if (st) return api_result(st, &err);
    if (!s->ts || !s->o.split_update)
        st = ot_fail(&err, OT_E_USAGE, "%s: no gradients: call onnxtrain_backward first", fn);
    else if (!(st = ot_train_optimizer_update(s->ts, s->step, next_lr(s), &err)))
        s->step++;
    else
        ot_error_prefix(&err, "%s: ", fn);
    api_leave(s);
    return api_result(st, &err);
}

onnxtrain_status onnxtrain_set_learning_rate(onnxtrain_session *s, double lr) {
    ot_error err = {0};
    ot_status st = api_enter(s, "onnxtrain_set_learning_rate", &err);
    if (st) return api_result(st, &err);
    if (isnan(lr)) s->has_lr = false;
    else if (!isfinite(lr) || lr < 0)
        st = ot_fail(&err, OT_E_USAGE, "onnxtrain_set_learning_rate: lr %g: must be finite and >= 0 (NaN: the schedule's)", lr);
    else s->has_lr = true, s->lr = lr;
    api_leave(s);
    return api_result(st, &err);
}

onnxtrain_status onnxtrain_learning_rate(onnxtrain_session *s, double *lr) {
    ot_error err = {0};
    ot_status st = api_enter(s, "onnxtrain_learning_rate", &err);
    if (st) return api_result(st, &err);
    if (!lr) st = ot_fail(&err, OT_E_USAGE, "onnxtrain_learning_rate: lr is NULL");
    else *lr = next_lr(s);
    api_leave(s);
    return api_result(st, &err);
}

onnxtrain_status onnxtrain_loss_scale(onnxtrain_session *s, double *scale, int64_t *skipped) {
    ot_error err = {0};
    ot_status st = api_enter(s, "onnxtrain_loss_scale", &err);
    if (st) return api_result(st, &err);
    ot_train_result r = {0};
    if (s->ts) ot_train_loss_scale_state(s->ts, &r);
    if (scale) *scale = r.loss_scale;
    if (skipped) *skipped = r.skipped_steps;
    api_leave(s);
    return api_result(st, &err);
}
