/* train_loop.c — running a training session (see train.h): the hook at the
 * backward/optimizer boundary (numerics, accumulation, clipping, step scalars), one
 * micro-batch per executor run, the NaN re-run that names the first bad node, and
 * the loop over steps and epochs (validation itself is in train_validate.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/checkpoint.h"
#include "train/progress.h"
#include "train/session.h"
#include "train/train_internal.h"

/* ---- the boundary hook -------------------------------------------------------- */

static ot_status copy_out(ot_train_session *s, void *host, const void *dev, size_t n, ot_error *err) {
    return s->be->copy_out(s->be, host, dev, n, err);
}

/* The n bytes at device address dev, readable on the host: in place on a backend
 * whose arena is host memory (the CPU), else copied into the session's scan buffer.
 * Scanning every output, param and gradient for NaN must not copy them on the CPU. */
static ot_status host_view(ot_train_session *s, const void *dev, size_t n, const void **view, ot_error *err) {
    if (s->be->host_memory) {
        *view = dev;
        return OT_OK;
    }
    if (n > s->scan_cap) {
        void *b = realloc(s->scan_buf, n);
        if (!b) return ot_fail(err, OT_E_MEMORY, "out of memory scanning for NaN");
        s->scan_buf = b;
        s->scan_cap = n;
    }
    *view = s->scan_buf;
    return copy_out(s, s->scan_buf, dev, n, err);
}

/* Index of the first non-finite float element, -1 if none. */
static int64_t first_nonfinite(const void *data, ot_dtype dt, int64_t n) {
    if (dt == OT_F32) {
        const float *f = data;
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(f[i])) return i;
    } else if (dt == OT_F64) {
        const double *f = data;
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(f[i])) return i;
    }
    return -1;
}

static ot_status scan_outputs(ot_train_session *s, int step, const ot_node *node, const ot_tensor *out,
                              ot_error *err) {
    for (int k = 0; k < node->n_outputs; k++) {
        const ot_tensor *t = &out[k];
        if (!t->data || (t->dtype != OT_F32 && t->dtype != OT_F64) || !t->nbytes) continue;
        const void *h = NULL;
        ot_status st = host_view(s, t->data, t->nbytes, &h, err);
        if (st) return st;
        int64_t i = first_nonfinite(h, t->dtype, (int64_t)(t->nbytes / ot_dtype_size(t->dtype)));
        if (i >= 0) {
            double v = t->dtype == OT_F32 ? (double)((const float *)h)[i] : ((const double *)h)[i];
            return ot_fail(err, OT_E_NUMERICS,
                           "training step %lld: node '%s' (%s, %s pass, schedule step %d) is the first to produce a "
                           "non-finite value: %s at index %lld of output '%s'. Lower --lr, add --clip-grad-norm, or check the data",
                           (long long)s->run_step, node->name, node->op_type ? node->op_type : ot_op_name(node->op),
                           ot_phase_name(node->phase), step, isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf", (long long)i,
                           vname(s->g, node->outputs[k]));
        }
    }
    return OT_OK;
}

static ot_status write_scalars(ot_train_session *s, double lr, double scale, bool apply, ot_error *err) {
    if (!s->with_opt) return OT_OK;
    double sc[OT_OPT_N_SCALARS] = {0};
    sc[OT_OPT_LR] = lr;
    sc[OT_OPT_GRAD_SCALE] = scale;
    sc[OT_OPT_STEP] = (double)s->opt_step;
    sc[OT_OPT_APPLY] = apply ? 1.0 : 0.0;
    return ot_executor_write(s->ex, s->og.scalars, sc, sizeof sc, err);
}

ot_status ot_train_host_grads(ot_train_session *s, ot_error *err) {
    if (!s->grad_ptr && !(s->grad_ptr = calloc((size_t)s->ad.n_params + 1, sizeof *s->grad_ptr)))
        return ot_fail(err, OT_E_MEMORY, "out of memory");
    bool host_copy = !s->grads_in_place && !(s->scan_on_device && s->o.accum == 1);
    if (host_copy && !s->grad_host && !(s->grad_host = calloc(s->grad_elems + 1, sizeof(float))))
        return ot_fail(err, OT_E_MEMORY, "out of memory for the host copy of the gradients");
    if (s->o.accum > 1 && !s->acc_host && !(s->acc_host = calloc(s->grad_elems + 1, sizeof(float))))
        return ot_fail(err, OT_E_MEMORY, "out of memory for the accumulated gradients");
    return OT_OK;
}

/* Frees the host scratch of the loop (gradients, the NaN scan buffer): between runs
 * nothing is in it (the accumulator is zero after a complete step). */
static void drop_host_scratch(ot_train_session *s) {
    free(s->grad_host);
    free(s->acc_host);
    free(s->grad_ptr);
    free(s->scan_buf);
    s->grad_host = s->acc_host = NULL;
    s->grad_ptr = NULL;
    s->scan_buf = NULL;
    s->scan_cap = 0;
}

/* Points grad_ptr[i] at params[i]'s gradient as floats on the host: the arena itself
 * when grads_in_place (CPU), else a copy in grad_host. */
static ot_status read_grads(ot_train_session *s, ot_error *err) {
    for (int i = 0; i < s->ad.n_params; i++) {
        int v = s->ad.grads[i];
        if (s->grads_in_place) {
            s->grad_ptr[i] = ot_executor_value_ptr(s->ex, v);
            continue;
        }
        s->grad_ptr[i] = s->grad_host + s->grad_off[i];
        size_t n = (s->grad_off[i + 1] - s->grad_off[i]) * sizeof(float);
        if (s->g->values[v].dtype != OT_F32) continue;
        ot_status st = copy_out(s, s->grad_host + s->grad_off[i], ot_executor_value_ptr(s->ex, v), n, err);
        if (st) return st;
    }
    return OT_OK;
}

/* Gradient i's first non-finite index (-1: none) and, with ss, its sum of squares:
 * through the backend where it lies (scan_on_device, when nothing is accumulated on
 * the host), else from grad_ptr[i]. The sums add up, param by param, to the global
 * norm's square exactly as ot_grad_global_norm does. */
static ot_status grad_scan(ot_train_session *s, int i, int64_t *bad, double *ss, ot_error *err) {
    size_t n = s->grad_off[i + 1] - s->grad_off[i];
    if (s->scan_on_device && s->o.accum == 1)
        return s->be->scan_f32(s->be, ot_executor_value_ptr(s->ex, s->ad.grads[i]), n, bad, ss, err);
    *bad = first_nonfinite(s->grad_ptr[i], OT_F32, (int64_t)n);
    if (ss) *ss = ot_grad_sum_sq(s->grad_ptr[i], n);
    return OT_OK;
}

static ot_status boundary(ot_train_session *s, ot_error *err) {
    ot_status st;
    bool check = !s->o.no_numerics_check;
    double lossf = 0;
    const void *lp = ot_executor_value_ptr(s->ex, s->loss_value);
    if (s->g->values[s->loss_value].dtype == OT_F64) {
        if ((st = copy_out(s, &lossf, lp, sizeof lossf, err))) return st;
    } else {
        float l32 = 0;
        if ((st = copy_out(s, &l32, lp, sizeof l32, err))) return st;
        lossf = l32;
    }
    s->last_loss = lossf;
    if (check && !isfinite(lossf)) {
        s->nonfinite = true;
        return ot_fail(err, OT_E_NUMERICS, "training step %lld: the loss is %s", (long long)s->run_step,
                       isnan(lossf) ? "NaN" : "Inf");
    }
    int64_t K = s->o.accum;
    bool train = s->mode == MODE_TRAIN;
    bool last_micro = !train || s->micro == K - 1;
    bool clip = s->with_opt && s->o.optim.clip_grad_norm > 0;
    bool need_host = check || (train && (clip || K > 1));
    bool on_device = s->scan_on_device && K == 1; /* the gradients are never copied */
    if (need_host && !on_device && ((st = ot_train_host_grads(s, err)) || (st = read_grads(s, err)))) return st;
    /* Without accumulation the norm is of these very gradients: one pass checks them
     * and sums their squares. With it, the norm waits for the sum of the K. */
    bool norm_now = K == 1 && train && need_host;
    double total = 0.0;
    for (int i = 0; (check || norm_now) && i < s->ad.n_params; i++) {
        int64_t bad = -1;
        double ss = 0.0;
        if ((st = grad_scan(s, i, &bad, norm_now ? &ss : NULL, err))) return st;
        if (check && bad >= 0) {
            s->nonfinite = true;
            return ot_fail(err, OT_E_NUMERICS, "training step %lld: the gradient of '%s' is not finite at index %lld",
                           (long long)s->run_step, vname(s->g, s->ad.params[i]), (long long)bad);
        }
        total += ss;
    }
    if (!train) return OT_OK;
    if (!last_micro) {
        for (int i = 0; i < s->ad.n_params; i++) {
            float *acc = s->acc_host + s->grad_off[i];
            const float *gi = s->grad_ptr[i];
            for (size_t j = 0, n = s->grad_off[i + 1] - s->grad_off[i]; j < n; j++) acc[j] += gi[j];
        }
        return write_scalars(s, 0, 1, false, err);
    }
    if (K > 1) {
        /* the step uses the sum of the K micro-batch gradients, scaled by 1/K below;
         * in place in the arena when grads_in_place, else written back */
        for (int i = 0; i < s->ad.n_params; i++) {
            float *acc = s->acc_host + s->grad_off[i], *gi = s->grad_ptr[i];
            size_t n = s->grad_off[i + 1] - s->grad_off[i];
            for (size_t j = 0; j < n; j++) {
                gi[j] += acc[j];
                acc[j] = 0.0f;
            }
            if (!s->grads_in_place &&
                (st = ot_executor_write(s->ex, s->ad.grads[i], gi, n * sizeof(float), err)))
                return st;
            total += ot_grad_sum_sq(gi, n);
        }
    }
    double scale = 1.0 / (double)K;
    s->last_norm = need_host ? sqrt(total) / (double)K : NAN;
    if (clip) scale = (double)((float)scale * ot_clip_scale(s->last_norm, s->o.optim.clip_grad_norm));
    return write_scalars(s, s->lr, scale, true, err);
}

/* After an optimizer node of an applied step: the param and optimizer state it
 * updated in place must still be finite (a huge --lr overflows here, after every
 * gradient was finite). The step node has no outputs to scan, so read its inputs. */
static ot_status check_update(ot_train_session *s, int step, const ot_node *node, ot_error *err) {
    for (int k = 0; k + 1 < node->n_inputs; k++) {
        int v = node->inputs[k];
        if (k == 1 || v < 0 || s->g->values[v].dtype != OT_F32) continue; /* input 1 is the gradient */
        const ot_value *val = &s->g->values[v];
        size_t nb = (size_t)ot_shape_numel(&val->shape) * sizeof(float);
        const void *dev = ot_executor_value_ptr(s->ex, v), *h = NULL;
        int64_t i = -1;
        float x = 0.0f;
        ot_status st;
        if (s->scan_on_device) { /* scanned where it lies; only a bad element is copied out */
            if ((st = s->be->scan_f32(s->be, dev, nb / sizeof(float), &i, NULL, err))) return st;
            if (i >= 0 && (st = copy_out(s, &x, (const float *)dev + i, sizeof x, err))) return st;
        } else {
            if ((st = host_view(s, dev, nb, &h, err))) return st;
            i = first_nonfinite(h, OT_F32, (int64_t)(nb / sizeof(float)));
            if (i >= 0) x = ((const float *)h)[i];
        }
        if (i >= 0) {
            return ot_fail(err, OT_E_NUMERICS,
                           "training step %lld: node '%s' (%s, %s pass, schedule step %d) made %s '%s' non-finite: %s "
                           "at index %lld (the gradients were finite). Lower --lr or add --clip-grad-norm",
                           (long long)s->run_step, node->name, node->op_type ? node->op_type : ot_op_name(node->op),
                           ot_phase_name(node->phase), step, val->kind == OT_VK_PARAM ? "param" : "optimizer state",
                           vname(s->g, v), isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf", (long long)i);
        }
    }
    return OT_OK;
}

ot_status ot_train_hook(void *user, ot_executor *ex, int step, const ot_node *node, const ot_tensor *out, ot_error *err) {
    (void)ex;
    ot_train_session *s = user;
    if (step > s->boundary && s->mode == MODE_TRAIN && !s->o.no_numerics_check && s->micro == s->o.accum - 1 &&
        node->phase == OT_PHASE_OPTIMIZER)
        return check_update(s, step, node, err);
    if (s->mode == MODE_SCAN) {
        ot_status st = scan_outputs(s, step, node, out, err);
        if (st) return st;
        if (step == s->boundary) /* nothing found; stop before the optimizer anyway */
            return ot_fail(err, OT_E_NUMERICS, "training step %lld: a non-finite loss or gradient that the re-run did not reproduce",
                           (long long)s->run_step);
        return OT_OK;
    }
    if (step != s->boundary) return OT_OK;
    return boundary(s, err);
}

/* ---- running micro-batches ---------------------------------------------------- */

static ot_status feed(ot_train_session *s, const ot_dataset *d, const int64_t *idx, ot_error *err) {
    s->cur_data = d;
    s->cur_idx = idx;
    for (int i = 0; i < d->n_arrays; i++) {
        ot_data_gather(d->arrays[i].t, idx, s->B, s->batch[i]->data);
        ot_status st = ot_executor_set_input(s->ex, d->arrays[i].value_id, s->batch[i], err);
        if (st) return ot_error_prefix(err, "%s: ", d->arrays[i].path);
    }
    return OT_OK;
}

/* One executor run in `mode`; on a non-finite loss/gradient re-runs it scanning every
 * node so that the error names the first node at fault. */
static ot_status run_once(ot_train_session *s, int mode, uint64_t rng_step, ot_error *err) {
    s->mode = mode;
    s->nonfinite = false;
    ot_executor_set_step(s->ex, rng_step);
    ot_status st = ot_executor_run(s->ex, err);
    if (st == OT_E_NUMERICS && s->nonfinite) {
        /* NaN/Inf in the data itself is the user's to fix: name the file and sample */
        for (int i = 0; s->cur_data && i < s->cur_data->n_arrays && i < s->n_batch; i++) {
            const ot_tensor *b = s->batch[i];
            int64_t n = ot_shape_numel(&b->shape), bad = first_nonfinite(b->data, b->dtype, n);
            if (bad >= 0)
                return ot_fail(err, OT_E_NUMERICS, "training step %lld: %s holds a non-finite value in sample %lld (flat index %lld of the batch)",
                               (long long)s->run_step, s->cur_data->arrays[i].path,
                               (long long)s->cur_idx[bad / (n / s->B)], (long long)bad);
        }
        ot_error first = *err;
        s->mode = MODE_SCAN;
        st = ot_executor_run(s->ex, err);
        if (st == OT_OK) *err = first, st = first.code; /* cannot happen: the boundary stops it */
        s->mode = mode;
        return st;
    }
    if (st) return st;
    if (mode == MODE_TRAIN)
        for (int i = 0; i < s->ad.n_state; i++)
            if ((st = ot_executor_copy_value(s->ex, s->ad.state_values[i], s->ad.state_updates[i], err))) return st;
    return OT_OK;
}

ot_status ot_train_grad_once(ot_train_session *s, const ot_dataset *data, double *loss, ot_error *err) {
    int64_t *idx = malloc((size_t)s->B * sizeof *idx);
    if (!idx) return ot_fail(err, OT_E_MEMORY, "out of memory");
    for (int64_t i = 0; i < s->B; i++) idx[i] = i;
    s->run_step = 1;
    ot_status st = feed(s, data, idx, err);
    free(idx);
    if (!st) st = run_once(s, MODE_GRAD, 0, err);
    if (!st) *loss = s->last_loss;
    return st;
}

ot_status ot_train_get_grad(ot_train_session *s, int i, ot_tensor **out, ot_error *err) {
    if (i < 0 || i >= s->ad.n_params) return ot_fail(err, OT_E_INTERNAL, "param index %d out of range", i);
    return ot_executor_get(s->ex, s->ad.grads[i], out, err);
}

void ot_train_result_free(ot_train_result *r) {
    free(r->loss);
    free(r->lr);
    free(r->step_seconds);
    free(r->grad_norm);
    free(r->epochs);
    memset(r, 0, sizeof *r);
}

/* Writes a checkpoint of the state after `steps_done` steps into the checkpoint folder. */
static ot_status save_checkpoint(ot_train_session *s, const ot_dataset *data, int64_t steps_done, ot_train_result *r,
                                 ot_error *err) {
    ot_checkpoint c = {0};
    ot_status st = ot_train_checkpoint_capture(s, data, steps_done, &c, err);
    if (!st)
        st = ot_checkpoint_save_dir(&c, s->o.checkpoint_dir, s->o.keep_checkpoints, r->last_checkpoint,
                                    sizeof r->last_checkpoint, err);
    ot_checkpoint_free(&c);
    return st;
}

ot_status ot_train_run(ot_train_session *s, const ot_dataset *data, const ot_dataset *val,
                       const ot_train_observer *obs, ot_train_result *r, ot_error *err) {
    ot_status st = OT_OK;
    ot_batcher bt = {0};
    memset(r, 0, sizeof *r);
    if (!s->with_opt) return ot_fail(err, OT_E_INTERNAL, "ot_train_run on a session built without an optimizer");
    int64_t K = s->o.accum, T = ot_train_total_steps(s, data);
    if ((st = ot_batcher_init(&bt, data->n_samples, s->B, !s->o.no_shuffle, s->o.seed, err))) return st;
    int64_t per_epoch = ot_batcher_per_epoch(&bt);
    if (T < 1) {
        st = ot_fail(err, OT_E_DATA, "%lld samples make %lld batches of %lld per epoch: not enough for one step of %lld micro-batches; use more --epochs or --steps",
                     (long long)data->n_samples, (long long)per_epoch, (long long)s->B, (long long)K);
        goto done;
    }
    r->batch_size = s->B;
    r->accum = K;
    r->samples_per_epoch = per_epoch * s->B;
    r->loss = calloc((size_t)T, sizeof(double));
    r->lr = calloc((size_t)T, sizeof(double));
    r->step_seconds = calloc((size_t)T, sizeof(double));
    r->grad_norm = calloc((size_t)T, sizeof(double));
    int64_t max_epochs = (T * K + per_epoch - 1) / per_epoch + 1;
    r->epochs = calloc((size_t)max_epochs, sizeof *r->epochs);
    if (!r->loss || !r->lr || !r->step_seconds || !r->grad_norm || !r->epochs) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory for the loss history");
        goto done;
    }
    r->planned_peak = ot_plan_peak_bytes(ot_executor_plan(s->ex));
    if (val) { /* planned before the first step: a validation plan that cannot be made fails early */
        if ((st = ot_train_validation_prepare(s, err))) goto done;
        r->val_planned_peak = ot_plan_peak_bytes(ot_train_validation_plan(s));
    }
    int64_t start = 0;
    if (s->o.resume) {
        const char *rp = s->o.resume_path ? s->o.resume_path : "checkpoint";
        if ((st = ot_train_checkpoint_restore(s, data, s->o.resume, rp, err))) goto done;
        start = s->o.resume->step;
        if (start >= T) {
            st = ot_fail(err, OT_E_USAGE, "%s: the checkpoint is at step %lld and this run has %lld steps: nothing left "
                         "to do (raise --steps or --epochs to train further)", rp, (long long)start, (long long)T);
            goto done;
        }
        for (int64_t k = 0; k < start; k++) r->loss[k] = r->lr[k] = r->grad_norm[k] = NAN;
    }
    r->first_step = start;
    double t0 = ot_now_seconds();
    for (int64_t step = start; step < T; step++) {
        double ts = ot_now_seconds(), loss_sum = 0;
        s->opt_step = step + 1;
        s->run_step = step + 1;
        s->lr = ot_optim_lr_at(&s->o.optim, step);
        int64_t epoch = 0;
        for (int64_t k = 0; k < K; k++) {
            int64_t mb = step * K + k;
            const int64_t *idx = ot_batcher_batch(&bt, mb, &epoch);
            s->micro = k;
            if ((st = feed(s, data, idx, err)) || (st = run_once(s, MODE_TRAIN, (uint64_t)mb, err))) goto done;
            loss_sum += s->last_loss;
        }
        r->loss[step] = loss_sum / (double)K;
        r->lr[step] = s->lr;
        r->grad_norm[step] = s->last_norm;
        r->step_seconds[step] = ot_now_seconds() - ts;
        r->n_steps = step + 1;
        double el = ot_now_seconds() - t0;
        if (obs && obs->on_step)
            obs->on_step(obs->user, step + 1, T, r->loss[step], s->lr,
                         el > 0 ? (double)((step + 1 - start) * K * s->B) / el : 0.0);
        /* Validate when this step completed an epoch (a step of K micro-batches may
         * straddle the boundary: the check runs after it), and after the last step. */
        int64_t done_before = (step * K) / per_epoch, done_after = ((step + 1) * K) / per_epoch;
        if (done_after > done_before || step + 1 == T) {
            ot_train_epoch_stats *e = &r->epochs[r->n_epochs];
            e->epoch = done_after > done_before ? done_after - 1 : epoch;
            e->step = step + 1;
            e->val_loss = e->val_accuracy = NAN;
            if (val && (st = ot_train_validate(s, val, e, err))) goto done;
            r->n_epochs++;
            if (obs && obs->on_epoch) obs->on_epoch(obs->user, e);
        }
        /* A stop request (SIGINT/SIGTERM in the CLI) is honoured here, between steps,
         * so the checkpoint holds a whole step and resuming loses nothing. */
        bool stop = s->o.stop && *s->o.stop && step + 1 < T;
        bool periodic = s->o.checkpoint_every > 0 && (step + 1) % s->o.checkpoint_every == 0;
        if ((stop || periodic) && s->o.checkpoint_dir && (st = save_checkpoint(s, data, step + 1, r, err))) goto done;
        if (stop) {
            r->interrupted = true;
            break;
        }
    }
    r->total_seconds = ot_now_seconds() - t0;
    r->measured_peak = ot_executor_high_water(s->ex);
    if (val) r->val_measured_peak = ot_executor_high_water(s->val_ex);
    /* The host copies of the weights come back in place of the loop's scratch, which
     * is as large (a float per param), rather than next to it. */
    drop_host_scratch(s);
    st = ot_executor_sync_to_graph(s->ex, err);
    if (!st) ot_session_give_back(s->m->graph, s->g); /* the trained weights go home to the model */
done:
    ot_batcher_free(&bt);
    return st;
}
