/* train_loop.c — running a training session (see train.h): the executor's hook at
 * phase ends (numerics, accumulation, clipping and step scalars between the backward
 * pass and the optimizer; the updated params after the optimizer), one micro-batch per
 * executor run, the step-by-step re-run that names the first bad node, and the loop
 * over steps and epochs (validation itself is in train_validate.c).
 *
 * No gradient is copied to the host on any backend: checks and norms read them where
 * they lie (in place on the CPU, ot_backend.scan_f32 elsewhere), and --accum sums the
 * micro-batch gradients into accumulators in the arena (ot_backend.accumulate_f32). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/grad_norm_sum.h" /* ot_grad_sum_sq_many */
#include "train/checkpoint.h"
#include "train/progress.h"
#include "train/session.h"
#include "train/train_check.h" /* gradients proved finite, the norm from the update */
#include "train/train_dist.h"
#include "train/train_internal.h"

/* ---- reading values where they lie -------------------------------------------- */
static ot_status copy_out(ot_train_session *s, void *host, const void *dev, size_t n, ot_error *err) {
    return s->be->copy_out(s->be, host, dev, n, err);
}

/* The n bytes at device address dev, readable on the host: in place on a backend
 * whose arena is host memory (the CPU), else copied into the session's scan buffer.
 * Float64 values off the host come here (scan_value), and the diagnosis's NaN-only scan (first_nan). */
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

/* The float32 or float64 value of nbytes at device address dev: with bad, its first
 * non-finite index (-1: none) and *x the element there; with ss (float32 only) the
 * sum of squares as ot_grad_sum_sq adds it. float32 goes through the backend's
 * scan_f32 where scan_on_device is set (a GPU; only a bad element is copied out),
 * else it is read in place (a pass for each of bad and ss); float64 through host_view. */
static ot_status scan_value(ot_train_session *s, const void *dev, ot_dtype dt, size_t nbytes, int64_t *bad, double *x,
                            double *ss, ot_error *err) {
    size_t n = nbytes / ot_dtype_size(dt);
    ot_status st;
    int64_t b = -1;
    double v = 0.0;
    if (ss) *ss = 0.0;
    if (dt == OT_F32 && s->scan_on_device) {
        float f = 0.0f;
        if ((st = s->be->scan_f32(s->be, dev, n, &b, ss, err))) return st;
        if (bad && b >= 0 && (st = copy_out(s, &f, (const float *)dev + b, sizeof f, err))) return st;
        v = f;
    } else {
        const void *h = NULL;
        if ((st = host_view(s, dev, nbytes, &h, err))) return st;
        if (bad) b = first_nonfinite(h, dt, (int64_t)n);
        if (b >= 0) v = dt == OT_F32 ? (double)((const float *)h)[b] : ((const double *)h)[b];
        if (ss && dt == OT_F32) *ss = ot_grad_sum_sq(h, n);
    }
    if (bad) *bad = b, *x = v;
    return OT_OK;
}

ot_status ot_train_add_accumulators(const ot_train_session *s, ot_graph *g, int *ids, ot_error *err) {
    /* One float32 accumulator per param gradient, of kind optimizer state: pinned in
     * that slab by the planner (it places such values even though no node reads
     * them), zero in the fresh arena, and zero again after every complete step. */
    for (int i = 0; i < s->ad.n_params; i++) {
        const ot_value *gv = &g->values[s->ad.grads[i]];
        if (gv->dtype != OT_F32)
            return ot_fail(err, OT_E_UNSUPPORTED, "--accum: the gradient '%s' is %s; only float32 gradients are accumulated",
                           vname(g, s->ad.grads[i]), ot_dtype_name(gv->dtype));
        char name[512];
        snprintf(name, sizeof name, "%.400s.accum", vname(g, s->ad.params[i]));
        ot_shape sh = gv->shape;
        if ((ids[i] = ot_graph_add_value_unique(g, name, OT_F32, &sh, OT_VK_OPT_STATE)) < 0)
            return ot_fail(err, OT_E_MEMORY, "out of memory adding the gradient accumulators");
    }
    return OT_OK;
}

ot_status ot_train_loop_prepare(ot_train_session *s, ot_error *err) {
    if (!s->be->host_memory && !s->be->scan_f32)
        return ot_fail(err, OT_E_UNSUPPORTED, "the %s backend can neither be read in place nor scan its own memory "
                       "(scan_f32): the training loop cannot check gradients there", s->be->name);
    s->scan_on_device = s->be->scan_f32 && (!s->be->host_memory || s->o.scan_on_device);
    if (!s->with_opt || (s->o.accum < 2 && !s->o.split_update)) return OT_OK;
    if (s->o.dist) return ot_train_dist_check(s, err); /* the ranks sum them instead (train_dist.c) */
    if (!s->be->accumulate_f32)
        return ot_fail(err, OT_E_UNSUPPORTED, "--accum %lld%s: the %s backend cannot sum gradients in its memory",
                       (long long)s->o.accum, s->o.split_update ? " (or the two-call step)" : "", s->be->name);
    if (!(s->accum_ids = calloc((size_t)s->ad.n_params + 1, sizeof *s->accum_ids)))
        return ot_fail(err, OT_E_MEMORY, "out of memory");
    return ot_train_add_accumulators(s, s->g, s->accum_ids, err);
}

/* Elements of params[i]'s gradient. */
static size_t grad_elems(const ot_train_session *s, int i) { return s->grad_off[i + 1] - s->grad_off[i]; }

/* Gradient i's first non-finite index (-1: none; bad may be NULL) and, with ss, its
 * sum of squares, where it lies. The sums add up, param by param, to the global
 * norm's square exactly as ot_grad_global_norm does. Only float32 gradients are
 * checked (the optimizer trains float32 params only). */
ot_status ot_train_grad_scan(ot_train_session *s, int i, int64_t *bad, double *ss, ot_error *err) {
    int v = s->ad.grads[i];
    double x;
    if (bad) *bad = -1;
    if (ss) *ss = 0.0;
    if (s->g->values[v].dtype != OT_F32) return OT_OK;
    return scan_value(s, ot_executor_value_ptr(s->ex, v), OT_F32, grad_elems(s, i) * sizeof(float), bad, &x, ss, err);
}

/* Whether the boundary sums the gradients of this run read in place (not through
 * scan_f32): to check them, or for the norm of a step without accumulation. */
static bool sums_in_place(const ot_train_session *s) {
    if (s->scan_on_device || !s->be->host_memory) return false;
    bool clip = s->with_opt && s->o.optim.clip_grad_norm > 0;
    return !s->o.no_numerics_check || (s->o.accum == 1 && s->mode == MODE_TRAIN && (clip || s->o.record_grad_norm));
}

/* Which step writes each gradient: its producer, at or before the boundary. A view
 * (its memory written by another value's producer) or a gradient with no producer is
 * left to the boundary. A gradient is pinned, so nothing after its producer writes
 * its memory: every run recomputes every hot sum before the boundary reads it. */
static ot_status hot_build(ot_train_session *s, ot_error *err) {
    const ot_plan *p = ot_executor_plan(s->ex);
    int n = s->ad.n_params, *at = malloc(((size_t)n + 1) * sizeof *at);
    s->hot_step = calloc((size_t)p->n_steps + 2, sizeof *s->hot_step);
    s->hot_grads = malloc(((size_t)n + 1) * sizeof *s->hot_grads);
    s->hot_has = calloc((size_t)n + 1, sizeof *s->hot_has);
    s->hot_ss = calloc((size_t)n + 1, sizeof *s->hot_ss);
    if (!at || !s->hot_step || !s->hot_grads || !s->hot_has || !s->hot_ss) {
        free(at), free(s->hot_step), free(s->hot_grads), free(s->hot_has), free(s->hot_ss);
        s->hot_step = s->hot_grads = NULL, s->hot_has = NULL, s->hot_ss = NULL;
        return ot_fail(err, OT_E_MEMORY, "out of memory checking the gradients");
    }
    int *step_of = calloc((size_t)s->g->n_nodes + 1, sizeof *step_of);
    if (!step_of) {
        free(at);
        return ot_fail(err, OT_E_MEMORY, "out of memory checking the gradients");
    }
    for (int k = 0; k < s->g->n_nodes; k++) step_of[k] = -1;
    for (int k = 0; k <= s->boundary && k < p->n_steps; k++) step_of[p->order[k]] = k;
    for (int i = 0; i < n; i++) {
        int v = s->ad.grads[i], prod = s->g->values[v].producer;
        bool f32 = s->g->values[v].dtype == OT_F32 && ot_executor_value_ptr(s->ex, v);
        at[i] = f32 && prod >= 0 && p->values[v].alias_of < 0 && !p->values[v].external ? step_of[prod] : -1;
        if (at[i] >= 0) s->hot_step[at[i] + 1]++;
    }
    for (int k = 0; k < p->n_steps; k++) s->hot_step[k + 1] += s->hot_step[k];
    for (int i = 0, *fill = step_of; i < n; i++) /* step_of is done with: reuse it as the fill counts */
        if (at[i] >= 0) fill[at[i]] = 0;
    for (int i = 0; i < n; i++) {
        if (at[i] < 0) continue;
        s->hot_grads[s->hot_step[at[i]] + step_of[at[i]]++] = i;
        s->hot_has[i] = true;
    }
    free(at), free(step_of);
    return ot_train_check_build(s, err);
}

ot_status ot_train_after_step(void *user, ot_executor *ex, int step, ot_error *err) {
    (void)ex;
    ot_train_session *s = user;
    if (s->g->fuse_update) return ot_train_fused_after_step(s, step, err);
    if (step > s->boundary || !sums_in_place(s)) return OT_OK;
    ot_status st;
    if (!s->hot_step && (st = hot_build(s, err))) return st;
    bool prove = ot_train_check_may_prove(s);
    for (int a = s->hot_step[step]; a < s->hot_step[step + 1]; a++) {
        int i = s->hot_grads[a];
        /* proved finite from its GEMM's inputs: not read now (its sum comes from the update) */
        s->hot_proven[i] = prove && s->hot_gemm[i] >= 0 && ot_train_check_proves(s, i);
        s->hot_ss[i] = s->hot_proven[i] ? 0.0 : ot_grad_sum_sq(ot_executor_value_ptr(s->ex, s->ad.grads[i]), grad_elems(s, i));
    }
    return OT_OK;
}

/* Every gradient's sum of squares (0 for one not float32), read in place: with hot,
 * those ot_train_after_step took as each gradient was written, the rest (all without
 * hot: the accumulated sums) in one pass (ot_grad_sum_sq_many: the sums are
 * grad_scan's to the bit); or NULL in *ss where the gradients are not read in place
 * (then grad_scan, per gradient). A sum is finite exactly when its gradient is, so
 * the sums are the check. */
static ot_status grads_sum_sq(ot_train_session *s, bool hot, double **ss, ot_error *err) {
    *ss = NULL;
    if (s->scan_on_device || !s->be->host_memory) return OT_OK;
    hot = hot && s->hot_has;
    int n = s->ad.n_params, c = 0;
    double *out = calloc((size_t)n + 1, sizeof *out), *part = calloc((size_t)n + 1, sizeof *part);
    const float **g = calloc((size_t)n + 1, sizeof *g);
    size_t *cnt = calloc((size_t)n + 1, sizeof *cnt);
    int *idx = calloc((size_t)n + 1, sizeof *idx);
    if (!out || !part || !g || !cnt || !idx) {
        free(out), free(part), free(g), free(cnt), free(idx);
        return ot_fail(err, OT_E_MEMORY, "out of memory checking the gradients");
    }
    for (int i = 0; i < n; i++) {
        if (hot && s->hot_has[i]) {
            out[i] = s->hot_ss[i];
            continue;
        }
        const float *p = s->g->values[s->ad.grads[i]].dtype == OT_F32 ? ot_executor_value_ptr(s->ex, s->ad.grads[i]) : NULL;
        if (p) g[c] = p, cnt[c] = grad_elems(s, i), idx[c++] = i;
    }
    ot_grad_sum_sq_many(g, cnt, c, part, s->o.n_threads);
    for (int a = 0; a < c; a++) out[idx[a]] = part[a];
    free(part), free(g), free(cnt), free(idx);
    *ss = out;
    return OT_OK;
}

/* Gradient i checked and its sum of squares, from the one pass (all) when there was
 * one, else grad_scan's; a non-finite sum finds its first bad index. */
static ot_status grad_checked(ot_train_session *s, int i, const double *all, int64_t *bad, double *ss, ot_error *err) {
    if (!all) return ot_train_grad_scan(s, i, bad, ss, err);
    *ss = all[i];
    *bad = -1;
    if (isfinite(all[i])) return OT_OK;
    return ot_train_grad_scan(s, i, bad, NULL, err);
}

/* ---- the hook between the backward pass and the optimizer ---------------------- */

ot_status ot_train_write_scalars(ot_train_session *s, double lr, double scale, bool apply, ot_error *err) {
    if (!s->with_opt) return OT_OK;
    double sc[OT_OPT_N_SCALARS] = {0};
    sc[OT_OPT_LR] = lr;
    sc[OT_OPT_GRAD_SCALE] = scale;
    sc[OT_OPT_STEP] = (double)(s->opt_step - s->ls_skipped); /* Adam's t, as torch: a skipped step is not counted */
    sc[OT_OPT_APPLY] = apply ? 1.0 : 0.0;
    return ot_executor_write(s->ex, s->og.scalars, sc, sizeof sc, err);
}

/* --accum in the arena, the float adds the host loop did: a micro-batch before the
 * last adds each gradient into its accumulator (acc += g); the last one folds the
 * accumulator into the gradient the optimizer reads (g += acc, the same sum as
 * acc + g) and zeroes it for the next step. */
static ot_status accumulate(ot_train_session *s, bool last, ot_error *err) {
    if (s->o.dist) return ot_train_dist_end_micro(s, last, err); /* the same sum over the ranks */
    for (int i = 0; i < s->ad.n_params; i++) {
        float *g = ot_executor_value_ptr(s->ex, s->ad.grads[i]), *acc = ot_executor_value_ptr(s->ex, s->accum_ids[i]);
        ot_status st = last ? s->be->accumulate_f32(s->be, g, acc, grad_elems(s, i), true, err)
                            : s->be->accumulate_f32(s->be, acc, g, grad_elems(s, i), false, err);
        if (st) return st;
    }
    return OT_OK;
}

static ot_status read_loss(ot_train_session *s, ot_error *err) {
    ot_status st;
    const void *lp = ot_executor_value_ptr(s->ex, s->loss_value);
    if (s->g->values[s->loss_value].dtype == OT_F64) return copy_out(s, &s->last_loss, lp, sizeof s->last_loss, err);
    float l32 = 0;
    if ((st = copy_out(s, &l32, lp, sizeof l32, err))) return st;
    s->last_loss = l32;
    return OT_OK;
}

static ot_status boundary(ot_train_session *s, ot_error *err) {
    ot_status st;
    bool train = s->mode == MODE_TRAIN;
    bool scaling = train && s->ls_state >= 0; /* an overflow skips the step (train_scale.c) */
    bool check = !s->o.no_numerics_check || scaling;
    if ((st = read_loss(s, err))) return st;
    double lossf = s->last_loss;
    if (check && !isfinite(lossf)) {
        s->nonfinite = true;
        return ot_fail(err, OT_E_NUMERICS, "training step %lld: the loss is %s", (long long)s->run_step,
                       isnan(lossf) ? "NaN" : "Inf");
    }
    int64_t K = s->o.accum;
    if (s->g->fuse_update) { /* no update has run: each gradient is checked before its own */
        s->last_norm = NAN;
        if (train && s->o.dist && (st = ot_train_dist_fused_boundary(s, err))) return st; /* K = N ranks: 1/N */
        return train ? ot_train_write_scalars(s, s->lr, 1.0 / (double)K, true, err) : OT_OK;
    }
    bool last_micro = !train || ot_train_dist_last_micro(s);
    bool clip = s->with_opt && s->o.optim.clip_grad_norm > 0;
    bool want_norm = train && (clip || s->o.record_grad_norm); /* for the update, or asked for the history */
    /* Without accumulation the norm is of these very gradients: one pass checks them
     * and sums their squares. With it, the norm waits for the sum of the K. */
    bool norm_now = K == 1 && train && want_norm;
    double total = 0.0, *all = NULL;
    if ((check || norm_now) && (st = grads_sum_sq(s, true, &all, err))) return st;
    for (int i = 0; (check || norm_now) && i < s->ad.n_params; i++) {
        int64_t bad = -1;
        double ss = 0.0;
        if ((st = grad_checked(s, i, all, &bad, &ss, err))) break;
        if (check && bad >= 0 && scaling) { /* the loss was finite: an overflow of the scaled gradients */
            s->ls_overflow = true;
            break;
        }
        if (check && bad >= 0) {
            s->nonfinite = true;
            st = ot_fail(err, OT_E_NUMERICS, "training step %lld: the gradient of '%s' is not finite at index %lld",
                         (long long)s->run_step, vname(s->g, s->ad.params[i]), (long long)bad);
            break;
        }
        total += norm_now ? ss : 0.0;
    }
    /* With gradients proved finite (train_check.c) the norm is added up after the
     * update, from the sums the optimizer kernels take on the way. */
    bool deferred = !st && norm_now && all && !s->ls_overflow && ot_train_check_defer_norm(s, all);
    free(all);
    all = NULL;
    if (st) return st;
    if (!train) return OT_OK;
    if (s->o.split_update) return ot_train_split_boundary(s, err); /* onnxtrain_backward: no update now */
    if (!last_micro) {
        if ((st = accumulate(s, false, err))) return st;
        return ot_train_write_scalars(s, 0, 1, false, err);
    }
    if (K > 1) { /* the step uses the sum of the K micro-batch gradients, scaled by 1/K below */
        if ((st = accumulate(s, true, err))) return st;
        if (want_norm && (st = grads_sum_sq(s, false, &all, err))) return st;
        for (int i = 0; want_norm && i < s->ad.n_params; i++) {
            double ss;
            if (all) ss = all[i];
            else if ((st = ot_train_grad_scan(s, i, NULL, &ss, err))) return st;
            total += ss;
        }
        free(all);
    }
    if (scaling && s->ls_overflow) { /* skipped: nothing changes, the accumulators were zeroed above */
        s->last_norm = NAN;
        return ot_train_write_scalars(s, s->lr, 1.0, false, err);
    }
    /* the gradients hold S times the true ones: S divides out here (exact for a power of two) */
    double unscale = scaling ? 1.0 / s->ls_scale : 1.0, scale = unscale / (double)K;
    s->last_norm = want_norm && !deferred ? sqrt(total) / (double)K * unscale : NAN;
    if (clip) scale = (double)((float)scale * ot_clip_scale(s->last_norm, s->o.optim.clip_grad_norm));
    return ot_train_write_scalars(s, s->lr, scale, true, err);
}

/* After the optimizer nodes of an applied step: the param and optimizer state that
 * the node at schedule step `step` updated in place must still be finite (a huge --lr
 * overflows here, after every gradient was finite). The step node has no outputs to
 * scan, so read its inputs. */
ot_status ot_train_check_update(ot_train_session *s, int step, const ot_node *node, ot_error *err) {
    for (int k = 0; k + 1 < node->n_inputs; k++) {
        int v = node->inputs[k];
        if (k == 1 || v < 0 || s->g->values[v].dtype != OT_F32) continue; /* input 1 is the gradient */
        const ot_value *val = &s->g->values[v];
        size_t nb = (size_t)ot_shape_numel(&val->shape) * sizeof(float);
        int64_t i = -1;
        double x = 0.0;
        ot_status st = scan_value(s, ot_executor_value_ptr(s->ex, v), OT_F32, nb, &i, &x, NULL, err);
        if (st) return st;
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

/* Every optimizer node in schedule order: the first whose update is not finite is
 * named, the node at which the old per-node check stopped (each node updates only
 * its own param and state, so the nodes after it change nothing it reads). When every
 * node's kernel checked what it wrote (the CPU's, exec/kernel_ctx.h) and found it
 * finite, there is nothing to scan; otherwise the scan finds and names the node. */
static ot_status check_updates(ot_train_session *s, ot_error *err) {
    const ot_plan *p = ot_executor_plan(s->ex);
    const ot_update_check *u = ot_executor_update_check(s->ex);
    if (u->checked == s->n_opt_steps && !u->nonfinite) return OT_OK;
    for (int k = s->boundary + 1; k < p->n_steps; k++) {
        if (s->g->nodes[p->order[k]].phase != OT_PHASE_OPTIMIZER) continue; /* fused: backward nodes between */
        ot_status st = ot_train_check_update(s, k, &s->g->nodes[p->order[k]], err);
        if (st) return st;
    }
    return OT_OK;
}

ot_status ot_train_hook(void *user, ot_executor *ex, const ot_exec_boundary *b, ot_error *err) {
    (void)ex;
    ot_train_session *s = user;
    if (b->step == s->boundary) return boundary(s, err); /* before the optimizer, or the end without one */
    bool fused = s->g->fuse_update;
    if (b->end && fused) ot_train_fused_norm(s);
    if (b->end && (fused || b->ended == OT_PHASE_OPTIMIZER) && s->mode == MODE_TRAIN && !s->o.no_numerics_check &&
        ot_train_dist_last_micro(s))
        return check_updates(s, err);
    return OT_OK;
}

/* ---- naming the first bad node ------------------------------------------------ */

/* The first NaN of the value of nbytes at dev (its Infs intended), read on the host. */
static ot_status first_nan(ot_train_session *s, const void *dev, ot_dtype dt, size_t nbytes, int64_t *bad,
                           double *x, ot_error *err) {
    const void *h = NULL;
    ot_status st = host_view(s, dev, nbytes, &h, err);
    if (st) return st;
    int64_t n = (int64_t)(nbytes / ot_dtype_size(dt));
    *bad = -1;
    for (int64_t i = 0; i < n && *bad < 0; i++) {
        double v = dt == OT_F32 ? (double)((const float *)h)[i] : ((const double *)h)[i];
        if (isnan(v)) *bad = i, *x = v;
    }
    return OT_OK;
}

/* The outputs of the node at schedule step `step`, just run. */
static ot_status scan_outputs(ot_train_session *s, int step, const ot_node *node, ot_error *err) {
    const ot_plan *p = ot_executor_plan(s->ex);
    for (int k = 0; k < node->n_outputs; k++) {
        int v = node->outputs[k];
        if (v < 0) continue;
        ot_dtype dt = s->g->values[v].dtype;
        size_t nb = ot_plan_value_bytes(p, v);
        const void *dev = ot_executor_value_ptr(s->ex, v);
        if (!dev || (dt != OT_F32 && dt != OT_F64) || !nb) continue;
        int64_t i = -1;
        double x = 0.0;
        ot_status st = ot_train_inf_intended(s->g, v, 0) ? first_nan(s, dev, dt, nb, &i, &x, err)
                                                       : scan_value(s, dev, dt, nb, &i, &x, NULL, err);
        if (st) return st;
        if (i >= 0)
            return ot_fail(err, OT_E_NUMERICS,
                           "training step %lld: node '%s' (%s, %s pass, schedule step %d) is the first to produce a "
                           "non-finite value: %s at index %lld of output '%s'. Lower --lr, add --clip-grad-norm, or check the data",
                           (long long)s->run_step, node->name, node->op_type ? node->op_type : ot_op_name(node->op),
                           ot_phase_name(node->phase), step, isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf", (long long)i,
                           vname(s->g, v));
    }
    return OT_OK;
}

/* After a non-finite loss or gradient at the boundary: the same micro-batch again
 * (same inputs, RNG step and params; running statistics are only copied back after
 * a successful run), one step at a time up to the boundary, scanning each node's
 * outputs before a later node can reuse their memory. The first bad output names
 * its node and phase; the optimizer never runs. */
static ot_status diagnose(ot_train_session *s, ot_error *err) {
    const ot_plan *p = ot_executor_plan(s->ex);
    /* fused (train_fuse.c: only when no update ran): the backward nodes lie among the
     * updates, which are skipped */
    int last = s->g->fuse_update ? p->n_steps - 1 : s->boundary;
    for (int k = 0; k <= last; k++) {
        if (s->g->nodes[p->order[k]].phase == OT_PHASE_OPTIMIZER) continue;
        ot_status st = ot_executor_run_steps(s->ex, k, 1, err);
        if (!st) st = scan_outputs(s, k, &s->g->nodes[p->order[k]], err);
        if (st) return st;
    }
    return ot_fail(err, OT_E_NUMERICS, "training step %lld: a non-finite loss or gradient that the re-run did not reproduce",
                   (long long)s->run_step);
}

/* ---- running micro-batches ---------------------------------------------------- */

/* Rows n..B-1 of a kept partial batch (ot_train_partial_batch): copies of its first
 * sample, whose labels are all the ignore index, so they change neither the loss (a
 * mean over the labels not ignored) nor any gradient, and the plan stays the full
 * batch's. */
static void pad_batch(const ot_train_session *s, const ot_data_array *a, ot_tensor *t, const int64_t *idx, int64_t n) {
    size_t row = t->nbytes / (size_t)s->B;
    char *dst = t->data;
    for (int64_t r = n; r < s->B; r++) {
        if (a->value_id == s->label_value) {
            int64_t *lab = (int64_t *)(dst + (size_t)r * row); /* labels are int64 (widened at the check) */
            for (size_t k = 0; k < row / sizeof *lab; k++) lab[k] = s->o.loss.ignore_index;
        } else {
            ot_data_gather(a->t, idx, 1, dst + (size_t)r * row);
        }
    }
}

/* Feeds the n samples idx[0..n) (n <= B; below B only for a kept partial batch). */
ot_status ot_train_feed(ot_train_session *s, const ot_dataset *d, const int64_t *idx, int64_t n, ot_error *err) {
    s->cur_data = d;
    s->cur_idx = idx;
    for (int i = 0; i < d->n_arrays; i++) {
        ot_data_gather(d->arrays[i].t, idx, n, s->batch[i]->data);
        if (n < s->B) pad_batch(s, &d->arrays[i], s->batch[i], idx, n);
        ot_status st = ot_executor_set_input(s->ex, d->arrays[i].value_id, s->batch[i], err);
        if (st) return ot_error_prefix(err, "%s: ", d->arrays[i].path);
    }
    return OT_OK;
}

/* One executor run in `mode`; on a non-finite loss/gradient re-runs it step by step
 * (diagnose) so that the error names the first node at fault. */
ot_status ot_train_run_once(ot_train_session *s, int mode, uint64_t rng_step, ot_error *err) {
    if (s->fused_partial)
        return ot_fail(err, OT_E_USAGE, "this session's params were partly updated by a --fuse-update step that "
                       "stopped at a non-finite gradient: start a new session from the model or the last checkpoint");
    s->mode = mode;
    s->nonfinite = false;
    s->norm_pending = false;
    ot_executor_set_grad_ss(s->ex, NULL);
    ot_executor_set_step(s->ex, rng_step);
    ot_status st = ot_train_scale_write(s, err);
    if (!st) st = ot_executor_run(s->ex, err);
    if (!st) ot_train_check_finish(s);
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
        return diagnose(s, err);
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
    ot_status st = ot_train_feed(s, data, idx, s->B, err);
    free(idx);
    if (!st) st = ot_train_run_once(s, MODE_GRAD, 0, err);
    if (!st) *loss = s->last_loss;
    return st;
}

ot_status ot_train_step_once(ot_train_session *s, const ot_dataset *data, int64_t step, double *loss, ot_error *err) {
    if (!s->ex || !s->with_opt) return ot_fail(err, OT_E_INTERNAL, "ot_train_step_once needs a session with an optimizer that runs");
    if (data->n_samples < 1) return ot_fail(err, OT_E_DATA, "no samples to run a step on");
    int64_t K = s->o.accum, *idx = malloc((size_t)s->B * sizeof *idx);
    if (!idx) return ot_fail(err, OT_E_MEMORY, "out of memory");
    ot_status st = OT_OK;
    double loss_sum = 0;
    s->opt_step = step + 1;
    s->run_step = step + 1;
    s->lr = ot_optim_lr_at(&s->o.optim, step);
    s->ls_overflow = false;
    for (int64_t k = 0; k < K && !st; k++) {
        int64_t mb = step * K + k;
        for (int64_t i = 0; i < s->B; i++) idx[i] = (mb * s->B + i) % data->n_samples; /* no shuffling: the same cost */
        s->micro = k;
        if (!ot_train_dist_owns(s, k)) continue;
        if (!(st = ot_train_feed(s, data, idx, s->B, err)) && !(st = ot_train_dist_begin_micro(s, err)))
            st = ot_train_run_once(s, MODE_TRAIN, (uint64_t)mb, err);
        if (!st) loss_sum = ot_train_dist_add_losses(s, loss_sum);
    }
    free(idx);
    if (!st) st = ot_train_scale_update(s, err);
    if (!st && loss) *loss = loss_sum / (double)K;
    return st;
}

ot_status ot_train_get_grad(ot_train_session *s, int i, ot_tensor **out, ot_error *err) {
    if (i < 0 || i >= s->ad.n_params) return ot_fail(err, OT_E_INTERNAL, "param index %d out of range", i);
    return ot_executor_get(s->ex, s->ad.grads[i], out, err);
}

ot_status ot_train_get_value(ot_train_session *s, int v, ot_tensor **out, ot_error *err) {
    if (!s->ex) return ot_fail(err, OT_E_INTERNAL, "the session was built to plan only: it holds no values");
    if (v < 0 || v >= s->g->n_values) return ot_fail(err, OT_E_INTERNAL, "value id %d out of range", v);
    return ot_executor_get(s->ex, v, out, err);
}

ot_status ot_train_set_value(ot_train_session *s, int v, const void *data, size_t nbytes, ot_error *err) {
    if (!s->ex) return ot_fail(err, OT_E_INTERNAL, "the session was built to plan only: it holds no values");
    if (v < 0 || v >= s->g->n_values) return ot_fail(err, OT_E_INTERNAL, "value id %d out of range", v);
    ot_value_kind k = s->g->values[v].kind;
    if (k != OT_VK_PARAM && k != OT_VK_STATE)
        return ot_fail(err, OT_E_USAGE, "'%s' is not a param or running statistic", vname(s->g, v));
    return ot_executor_write(s->ex, v, data, nbytes, err);
}

void ot_train_result_free(ot_train_result *r) {
    free(r->loss);
    free(r->lr);
    free(r->step_seconds);
    free(r->grad_norm);
    free(r->epochs);
    memset(r, 0, sizeof *r);
}

/* Writes a checkpoint of the state after `steps_done` steps into the checkpoint folder
 * (in a data-parallel run rank 0 writes the one checkpoint). */
static ot_status save_checkpoint(ot_train_session *s, const ot_dataset *data, int64_t steps_done, ot_train_result *r,
                                 ot_error *err) {
    if (ot_dist_rank(s->o.dist) != 0) return OT_OK;
    ot_checkpoint c = {0};
    ot_status st = ot_train_checkpoint_capture(s, data, steps_done, &c, err);
    if (!st)
        st = ot_checkpoint_save_dir(&c, s->o.checkpoint_dir, s->o.keep_checkpoints, r->last_checkpoint,
                                    sizeof r->last_checkpoint, err);
    ot_checkpoint_free(&c);
    return st;
}

/* The observer's view of optimizer step `step` (0-based), whose last micro-batch was in
 * epoch `epoch` (0-based) of per_epoch micro-batches. */
static void notify_step(const ot_train_observer *obs, const ot_train_session *s, double loss, int64_t step, int64_t T,
                        int64_t epoch, int64_t per_epoch, double samples_per_s) {
    if (!obs || !obs->on_step) return;
    int64_t K = s->o.accum;
    ot_train_step_info si = {.step = step + 1, .total = T, .epoch = epoch + 1,
                             .n_epochs = (T * K + per_epoch - 1) / per_epoch, .loss = loss, .lr = s->lr,
                             .samples_per_s = samples_per_s, .skipped = s->ls_state >= 0 && s->ls_overflow,
                             .skipped_total = s->ls_skipped, .loss_scale = s->ls_state >= 0 ? s->ls_scale : 0.0};
    obs->on_step(obs->user, &si);
}

/* Whether the micro-batch just fed has no counted label (cross-entropy with every
 * label the ignore index): its loss is defined as 0 and its gradients are zero (the
 * loss kernels), where PyTorch's mean gives 0/0 = NaN. Labels are int64 here. */
static bool labels_all_ignored(const ot_train_session *s, const ot_dataset *d) {
    if (s->o.loss.kind != OT_LOSS_CROSS_ENTROPY || !s->o.loss.has_ignore_index) return false;
    for (int i = 0; i < d->n_arrays; i++) {
        if (d->arrays[i].value_id != s->label_value || s->batch[i]->dtype != OT_I64) continue;
        const int64_t *lab = s->batch[i]->data;
        size_t n = s->batch[i]->nbytes / sizeof *lab;
        for (size_t k = 0; k < n; k++)
            if (lab[k] != s->o.loss.ignore_index) return false;
        return n > 0;
    }
    return false;
}

static void warn_all_ignored(const ot_train_observer *obs, const ot_train_session *s, int64_t step, int64_t k) {
    if (!obs || !obs->on_warning) return;
    char msg[320];
    snprintf(msg, sizeof msg,
             "training step %lld, micro-batch %lld of %lld: every label is the ignore index %lld; its loss counts "
             "as 0 and its gradients are zero (0 tokens; PyTorch's mean would give NaN)",
             (long long)step + 1, (long long)k + 1, (long long)s->o.accum, (long long)s->o.loss.ignore_index);
    obs->on_warning(obs->user, msg);
}

/* The K micro-batches of optimizer step `step` (this rank's share of them): their
 * summed loss into *loss_sum, the samples of all of them added to *seen, the epoch of
 * the last in *epoch. */
static ot_status run_micro_batches(ot_train_session *s, ot_batcher *bt, const ot_dataset *data, int64_t step,
                                   const ot_train_observer *obs, double *loss_sum, int64_t *seen, int64_t *epoch,
                                   ot_error *err) {
    int64_t K = s->o.accum;
    for (int64_t k = 0; k < K; k++) {
        int64_t mb = step * K + k, n = 0;
        const int64_t *idx = ot_batcher_batch(bt, mb, epoch, &n);
        if (!idx)
            return ot_fail(err, OT_E_INTERNAL, "training step %lld: micro-batch %lld is outside the data",
                           (long long)step + 1, (long long)mb);
        s->micro = k;
        *seen += n; /* every rank's share: the run's samples per second */
        if (!ot_train_dist_owns(s, k)) continue; /* another rank's share of the step */
        ot_status st = ot_train_feed(s, data, idx, n, err);
        if (!st && labels_all_ignored(s, data)) warn_all_ignored(obs, s, step, k);
        if (!st) st = ot_train_dist_begin_micro(s, err);
        if (!st) st = ot_train_run_once(s, MODE_TRAIN, (uint64_t)mb, err);
        if (st) return st;
        *loss_sum = ot_train_dist_add_losses(s, *loss_sum);
    }
    return OT_OK;
}

ot_status ot_train_run(ot_train_session *s, const ot_dataset *data, const ot_dataset *val,
                       const ot_train_observer *obs, ot_train_result *r, ot_error *err) {
    ot_status st = OT_OK;
    ot_batcher bt = {0};
    memset(r, 0, sizeof *r);
    if (!s->with_opt) return ot_fail(err, OT_E_INTERNAL, "ot_train_run on a session built without an optimizer");
    int64_t K = s->o.accum, T = ot_train_total_steps(s, data);
    bool drop_last = ot_train_partial_batch(s, data->n_samples, NULL) == 0;
    if ((st = ot_batcher_init(&bt, data->n_samples, s->B, !s->o.no_shuffle, drop_last, s->o.seed, err))) return st;
    int64_t per_epoch = ot_batcher_per_epoch(&bt);
    if (T < 1) {
        st = ot_fail(err, OT_E_DATA, "%lld samples make %lld batches of %lld per epoch: not enough for one step of %lld micro-batches; use more --epochs or --steps",
                     (long long)data->n_samples, (long long)per_epoch, (long long)s->B, (long long)K);
        goto done;
    }
    /* Micro-batch numbers (step * K + k) and sample counts (x B) must fit int64; the
     * CLI bounds each option, this holds for every caller. */
    int64_t n_micro, n_seen;
    if (__builtin_mul_overflow(T, K, &n_micro) || __builtin_mul_overflow(n_micro, s->B, &n_seen)) {
        st = ot_fail(err, OT_E_USAGE, "%lld steps x %lld micro-batches x %lld samples do not fit a 64-bit count; lower "
                     "--steps, --epochs or --accum", (long long)T, (long long)K, (long long)s->B);
        goto done;
    }
    r->batch_size = s->B;
    r->accum = K;
    r->samples_per_epoch = drop_last ? per_epoch * s->B : data->n_samples;
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
    ot_train_rss_begin(r); /* the steps' own peak RSS, beside the plan's */
    double t0 = ot_now_seconds();
    int64_t seen = 0; /* samples run since t0 (a kept partial batch counts its own) */
    for (int64_t step = start; step < T; step++) {
        double ts = ot_now_seconds(), loss_sum = 0;
        s->opt_step = step + 1;
        s->run_step = step + 1;
        s->lr = ot_optim_lr_at(&s->o.optim, step);
        int64_t epoch = 0;
        s->ls_overflow = false;
        if ((st = run_micro_batches(s, &bt, data, step, obs, &loss_sum, &seen, &epoch, err)) ||
            (st = ot_train_scale_update(s, err)))
            goto done;
        r->loss[step] = loss_sum / (double)K;
        r->lr[step] = s->lr;
        r->grad_norm[step] = s->last_norm;
        r->step_seconds[step] = ot_now_seconds() - ts;
        r->n_steps = step + 1;
        double el = ot_now_seconds() - t0;
        notify_step(obs, s, r->loss[step], step, T, epoch, per_epoch, el > 0 ? (double)seen / el : 0.0);
        /* Validate when this step completed an epoch (a step of K micro-batches may
         * straddle the boundary: the check runs after it), and after the last step. */
        int64_t done_before = (step * K) / per_epoch, done_after = ((step + 1) * K) / per_epoch;
        if (done_after > done_before || step + 1 == T) {
            ot_train_epoch_stats *e = &r->epochs[r->n_epochs];
            e->epoch = done_after > done_before ? done_after - 1 : epoch;
            e->step = step + 1;
            e->val_loss = e->val_accuracy = e->val_perplexity = NAN;
            if (val && (st = ot_train_validate(s, val, e, err))) goto done;
            r->n_epochs++;
            if (obs && obs->on_epoch) obs->on_epoch(obs->user, e);
        }
        /* A stop request (SIGINT/SIGTERM in the CLI) is honoured here, between steps,
         * so the checkpoint holds a whole step and resuming loses nothing. */
        bool stop = s->o.stop && *s->o.stop && step + 1 < T;
        /* with checkpoints on, the final state too (28 steps every 10: 10, 20 and 28) */
        bool periodic = s->o.checkpoint_every > 0 && ((step + 1) % s->o.checkpoint_every == 0 || step + 1 == T);
        if ((stop || periodic) && s->o.checkpoint_dir && (st = save_checkpoint(s, data, step + 1, r, err))) goto done;
        if (stop) {
            r->interrupted = true;
            break;
        }
    }
    r->total_seconds = ot_now_seconds() - t0;
    ot_train_rss_end(r);
    ot_train_loss_scale_state(s, r);
    r->measured_peak = ot_executor_high_water(s->ex);
    if (val) r->val_measured_peak = ot_executor_high_water(s->val_ex);
    /* The host copies of the weights come back; the scan buffer (float64 values off
     * the host only) is not needed any more. */
    free(s->scan_buf);
    s->scan_buf = NULL, s->scan_cap = 0;
    if (s->o.stream_save) goto done; /* ot_train_save_model reads them from the arena */
    st = ot_executor_sync_to_graph(s->ex, err);
    if (!st) ot_session_give_back(s->m->graph, s->g); /* the trained weights go home to the model */
done:
    ot_batcher_free(&bt);
    return st;
}
