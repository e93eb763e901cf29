/* train_scale.c — dynamic loss scaling for float16 training, as torch.amp.GradScaler
 * (train.h, ot_loss_scale_options): the seed of the backward pass is multiplied by a
 * scalar value the loop writes before every run (autodiff.h, loss_scale), so the
 * float16 gradients of the backward pass hold S times the true ones and small ones do
 * not flush to zero; the float32 master gradients are divided by S through the
 * optimizer's grad scale (exact: S is a power of two with the default factors). A step
 * whose gradients hold an Inf or NaN while the loss is finite overflowed: the
 * optimizer skips it (apply 0) and S is multiplied by backoff; growth_interval clean
 * steps in a row multiply it by growth. A non-finite loss is no overflow: it still
 * stops the run naming the node (train_loop.c).
 *
 * The scaler's state (scale, clean steps in a row, steps skipped) lives in a float64[3]
 * optimizer-state value, "loss_scaler", that nothing reads: it is in the arena only so
 * that checkpoints save and restore it like the Adam moments, keeping --resume bitwise. */
#include <math.h>
#include <string.h>

#include "train/train_internal.h"

enum { LS_SCALE = 0, LS_CLEAN = 1, LS_SKIPPED = 2, LS_N = 3 };

ot_status ot_train_scale_check(const ot_train_session *s, ot_error *err) {
    const ot_loss_scale_options *o = &s->o.loss_scale;
    bool fp16 = s->o.precision == OT_PRECISION_FP16 || s->lowp == OT_F16; /* --precision fp16 or an fp16 model */
    if (o->mode != OT_LOSS_SCALE_DYNAMIC && (o->mode != OT_LOSS_SCALE_DEFAULT || !fp16)) return OT_OK;
    double init = o->init > 0 ? o->init : 65536.0, growth = o->growth > 0 ? o->growth : 2.0;
    double backoff = o->backoff > 0 ? o->backoff : 0.5;
    if (!(isfinite(init) && init > 0) || init > 3.0e38)
        return ot_fail(err, OT_E_USAGE, "--loss-scale-init %g: must be a positive number below float32's largest", init);
    if (!(isfinite(growth) && growth >= 1.0))
        return ot_fail(err, OT_E_USAGE, "--loss-scale-growth %g: must be at least 1", growth);
    if (!(isfinite(backoff) && backoff > 0 && backoff < 1.0))
        return ot_fail(err, OT_E_USAGE, "--loss-scale-backoff %g: must be between 0 and 1", backoff);
    if (o->growth_interval < 0)
        return ot_fail(err, OT_E_USAGE, "--loss-scale-growth-interval %lld: must be positive", (long long)o->growth_interval);
    if (!s->with_opt) return OT_OK; /* grad, verify: the true gradients, unscaled */
    if (s->o.fuse_update)
        return ot_fail(err, OT_E_USAGE,
                       "--fuse-update with fp16 loss scaling: a fused update runs as soon as its own gradient is "
                       "ready, before an overflow in a later gradient could skip the step; pass --loss-scale off or "
                       "drop --fuse-update");
    if (s->o.split_update)
        return ot_fail(err, OT_E_USAGE,
                       "fp16 loss scaling with the two-call step (onnxtrain_backward / split_step): pass "
                       "loss_scale off, or use the one-call step");
    if (s->o.dist)
        return ot_fail(err, OT_E_USAGE,
                       "fp16 loss scaling over MPI ranks: the ranks would have to agree on each skipped step; pass "
                       "--loss-scale off for a data-parallel run");
    return OT_OK;
}

bool ot_train_scale_wanted(const ot_train_session *s) {
    const ot_loss_scale_options *o = &s->o.loss_scale;
    return s->with_opt && (o->mode == OT_LOSS_SCALE_DYNAMIC ||
                           (o->mode == OT_LOSS_SCALE_DEFAULT &&
                            (s->o.precision == OT_PRECISION_FP16 || s->lowp == OT_F16)));
}

ot_status ot_train_scale_prepare(ot_train_session *s, ot_error *err) {
    s->ls_state = -1;
    if (s->ad.loss_scale_value < 0) return OT_OK;
    const ot_loss_scale_options *o = &s->o.loss_scale;
    s->ls_scale = o->init > 0 ? o->init : 65536.0;
    s->ls_growth = o->growth > 0 ? o->growth : 2.0;
    s->ls_backoff = o->backoff > 0 ? o->backoff : 0.5;
    s->ls_interval = o->growth_interval > 0 ? o->growth_interval : 2000;
    int64_t n = LS_N;
    ot_shape sh = ot_shape_make(1, &n);
    s->ls_state = ot_graph_add_value_unique(s->g, "loss_scaler", OT_F64, &sh, OT_VK_OPT_STATE);
    if (s->ls_state < 0) return ot_fail(err, OT_E_MEMORY, "out of memory adding the loss scaler");
    return OT_OK;
}

/* Before a run: the seed's multiplier, in the loss's dtype. */
ot_status ot_train_scale_write(ot_train_session *s, ot_error *err) {
    int v = s->ad.loss_scale_value;
    if (v < 0) return OT_OK;
    if (s->g->values[v].dtype == OT_F64) return ot_executor_write(s->ex, v, &s->ls_scale, sizeof s->ls_scale, err);
    float f = (float)s->ls_scale;
    return ot_executor_write(s->ex, v, &f, sizeof f, err);
}

/* After an optimizer step (applied or skipped): GradScaler.update's arithmetic, and
 * the state into the arena for the next checkpoint. */
ot_status ot_train_scale_update(ot_train_session *s, ot_error *err) {
    if (s->ls_state < 0) return OT_OK;
    if (s->ls_overflow) {
        s->ls_scale *= s->ls_backoff;
        s->ls_clean = 0;
        s->ls_skipped++;
    } else if (++s->ls_clean >= s->ls_interval) {
        double grown = s->ls_scale * s->ls_growth;
        if (grown <= 3.0e38) s->ls_scale = grown; /* as GradScaler: never beyond float32's range */
        s->ls_clean = 0;
    }
    double st[LS_N] = {[LS_SCALE] = s->ls_scale, [LS_CLEAN] = (double)s->ls_clean, [LS_SKIPPED] = (double)s->ls_skipped};
    return ot_executor_write(s->ex, s->ls_state, st, sizeof st, err);
}

/* After a checkpoint was restored into the arena: the scaler's state from it. */
ot_status ot_train_scale_restored(ot_train_session *s, const char *path, ot_error *err) {
    if (s->ls_state < 0) return OT_OK;
    ot_tensor *t = NULL;
    ot_status st = ot_executor_get(s->ex, s->ls_state, &t, err);
    if (st) return st;
    double v[LS_N];
    memcpy(v, t->data, sizeof v);
    ot_tensor_free(t);
    if (!(isfinite(v[LS_SCALE]) && v[LS_SCALE] > 0) || v[LS_CLEAN] < 0 || v[LS_SKIPPED] < 0)
        return ot_fail(err, OT_E_DATA, "%s: the loss scaler's state (scale %g) is not a valid one", path, v[LS_SCALE]);
    s->ls_scale = v[LS_SCALE];
    s->ls_clean = (int64_t)v[LS_CLEAN];
    s->ls_skipped = (int64_t)v[LS_SKIPPED];
    return OT_OK;
}

void ot_train_loss_scale_state(const ot_train_session *s, ot_train_result *r) {
    r->loss_scaling = s->ls_state >= 0;
    r->skipped_steps = s->ls_skipped;
    r->loss_scale = r->loss_scaling ? s->ls_scale : 0.0;
}
