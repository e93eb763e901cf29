/* train_dist.c — data-parallel training in the loop (see train_dist.h): the options
 * of a distributed session, which micro-batches a rank runs, and the work at the end
 * of each of them: losses, the gradient sum in micro-batch order, and the BatchNorm
 * running statistics replayed in micro-batch order.
 *
 * Why the running statistics can be replayed bitwise: in training mode a BatchNorm
 * normalises by the batch's statistics, and its running-statistic outputs are
 * new = momentum * old + (1 - momentum) * batch_stat, rounded as float after each
 * multiply and the add (both backends: kernels/cpu/cpu_norm.c, cuda_reduce.cu). A
 * rank runs its micro-batch with old = -0.0, so its outputs are the batch terms
 * t = (1 - momentum) * batch_stat exactly: momentum * -0.0 is -0.0 for any momentum
 * >= 0, and -0.0 + t is t for every t, +0.0 and -0.0 included (with +0.0, a t of -0.0
 * would come back as +0.0). Its forward and backward are unchanged (nothing else
 * reads the running statistics in training mode). Every rank then applies
 * new = momentum * old + t for the group's t in micro-batch order: the same float
 * operations --accum N performs one micro-batch after another. */
#include <stdlib.h>
#include <string.h>

#include "train/train_dist.h"

typedef struct ot_train_dist {
    int n, rank;
    ot_train_dist_nccl nccl; /* on GPUs with NCCL: the gradient sum on the device */
    float *send, *acc; /* otherwise grad_elems each: this rank's gradients packed; the sum */
    double *losses;    /* n: the current group's losses, rank order */
    /* running statistics: state i is floats [state_off[i], state_off[i+1]) */
    size_t *state_off, state_elems;
    float *mom;           /* per state: its BatchNorm's momentum */
    float *stats, *terms; /* state_elems: the statistics; this rank's batch terms */
    float *all_terms;     /* n x state_elems */
    float *neg_zeros; /* state_elems of -0.0f: the running statistics while a rank runs */
    /* --fuse-update: per param its sum in flight; the params with one, in start order */
    ot_dist_sum *sums;
    int *flying, n_flying;
} ot_train_dist;

ot_status ot_dist_train_options(ot_dist *d, ot_train_options *o, bool batch_auto, ot_error *err) {
    int n = ot_dist_size(d);
    if (n < 2) return OT_OK;
    if (o->batch_size <= 0 && !batch_auto)
        return ot_fail(err, OT_E_USAGE, "%d ranks: give --batch-size B, the global batch (each rank takes B/%d of "
                       "every step's batch)", n, n);
    if (!batch_auto && o->batch_size % n)
        return ot_fail(err, OT_E_USAGE, "--batch-size %lld is not divisible by the %d ranks: each rank takes an "
                       "equal share of the global batch", (long long)o->batch_size, n);
    int64_t k = o->accum > 0 ? o->accum : 1;
    if (k > INT64_MAX / n) return ot_fail(err, OT_E_USAGE, "--accum %lld x %d ranks overflows", (long long)k, n);
    if (!batch_auto) o->batch_size /= n;
    o->accum = k * n;
    o->device = ot_dist_rank_device(d, o->device);
    o->dist = d;
    return OT_OK;
}

ot_status ot_train_dist_check(const ot_train_session *s, ot_error *err) {
    for (int i = 0; i < s->ad.n_params; i++) {
        const ot_value *gv = &s->g->values[s->ad.grads[i]];
        if (gv->dtype != OT_F32)
            return ot_fail(err, OT_E_UNSUPPORTED, "data parallel: the gradient '%s' is %s; only float32 gradients are "
                           "summed over the ranks", vname(s->g, s->ad.grads[i]), ot_dtype_name(gv->dtype));
    }
    return OT_OK;
}

int ot_train_dist_size(const ot_train_session *s) { return s->o.dist ? ot_dist_size(s->o.dist) : 1; }

bool ot_train_dist_owns(const ot_train_session *s, int64_t k) {
    return k % ot_train_dist_size(s) == ot_dist_rank(s->o.dist);
}

bool ot_train_dist_last_micro(const ot_train_session *s) { return s->micro + ot_train_dist_size(s) >= s->o.accum; }

void ot_train_dist_free(ot_train_session *s) {
    ot_train_dist *t = s->dist;
    if (!t) return;
    ot_train_dist_nccl_close(s, &t->nccl);
    free(t->send);
    free(t->acc);
    free(t->losses);
    free(t->state_off);
    free(t->mom);
    free(t->stats);
    free(t->terms);
    free(t->all_terms);
    free(t->neg_zeros);
    for (int i = 0; t->sums && i < s->ad.n_params; i++) ot_dist_sum_drop(&t->sums[i]);
    free(t->sums);
    free(t->flying);
    free(t);
    s->dist = NULL;
}

/* The momentum of the BatchNorm that updates state i; OT_E_UNSUPPORTED for a state
 * update of any other kind (its replay would not be known). */
static ot_status state_momentum(const ot_train_session *s, int i, float *mom, ot_error *err) {
    int v = s->ad.state_updates[i], p = s->g->values[v].producer;
    const ot_node *node = p >= 0 ? &s->g->nodes[p] : NULL;
    if (!node || node->op != OT_OP_BATCH_NORM || s->g->values[v].dtype != OT_F32)
        return ot_fail(err, OT_E_UNSUPPORTED, "data parallel: the state update '%s' is not a float32 BatchNormalization "
                       "running statistic: its updates cannot be replayed in micro-batch order", vname(s->g, v));
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (!st) *mom = pp->u.norm.momentum;
    return st;
}

/* The buffers, made at the first micro-batch (the gradient sizes are known once the
 * executor exists). */
static ot_status ensure(ot_train_session *s, ot_train_dist **out, ot_error *err) {
    if ((*out = s->dist)) return OT_OK;
    ot_train_dist *t = calloc(1, sizeof *t);
    if (!t) return ot_fail(err, OT_E_MEMORY, "out of memory");
    s->dist = t;
    t->n = ot_train_dist_size(s);
    t->rank = ot_dist_rank(s->o.dist);
    int ns = s->ad.n_state;
    ot_status st = ot_train_dist_nccl_open(s, &t->nccl, err);
    if (st) return st;
    bool host_sum = !t->nccl.m && !s->g->fuse_update; /* fused: each gradient's sum in its own block */
    t->send = host_sum ? malloc((s->grad_elems + 1) * sizeof *t->send) : NULL;
    t->acc = host_sum ? calloc(s->grad_elems + 1, sizeof *t->acc) : NULL;
    t->losses = calloc((size_t)t->n, sizeof *t->losses);
    t->state_off = calloc((size_t)ns + 1, sizeof *t->state_off);
    t->mom = calloc((size_t)ns + 1, sizeof *t->mom);
    if (s->g->fuse_update) {
        t->sums = calloc((size_t)s->ad.n_params + 1, sizeof *t->sums);
        t->flying = calloc((size_t)s->ad.n_params + 1, sizeof *t->flying);
        if (!t->sums || !t->flying) goto oom;
    }
    if ((host_sum && (!t->send || !t->acc)) || !t->losses || !t->state_off || !t->mom) goto oom;
    for (int i = 0; i < ns; i++) {
        if ((st = state_momentum(s, i, &t->mom[i], err))) return st;
        t->state_off[i + 1] = t->state_off[i] + (size_t)ot_shape_numel(&s->g->values[s->ad.state_values[i]].shape);
    }
    t->state_elems = t->state_off[ns];
    size_t se = t->state_elems + 1;
    t->stats = malloc(se * sizeof *t->stats);
    t->terms = malloc(se * sizeof *t->terms);
    t->all_terms = malloc((size_t)t->n * se * sizeof *t->all_terms);
    t->neg_zeros = malloc(se * sizeof *t->neg_zeros);
    if (!t->stats || !t->terms || !t->all_terms || !t->neg_zeros) goto oom;
    for (size_t c = 0; c < se; c++) t->neg_zeros[c] = -0.0f;
    *out = t;
    return OT_OK;
oom:
    return ot_fail(err, OT_E_MEMORY, "out of memory for the buffers of a %d-rank run", t->n);
}

static size_t state_bytes(const ot_train_dist *t, int i) { return (t->state_off[i + 1] - t->state_off[i]) * sizeof(float); }

ot_status ot_train_dist_begin_micro(ot_train_session *s, ot_error *err) {
    ot_train_dist *t;
    ot_status st = s->o.dist && s->ad.n_state ? ensure(s, &t, err) : OT_OK;
    for (int i = 0; !st && s->o.dist && i < s->ad.n_state; i++) {
        void *p = ot_executor_value_ptr(s->ex, s->ad.state_values[i]);
        st = s->be->copy_out(s->be, t->stats + t->state_off[i], p, state_bytes(t, i), err);
        if (!st) st = ot_executor_write(s->ex, s->ad.state_values[i], t->neg_zeros, state_bytes(t, i), err);
    }
    return st;
}

/* The group's batch terms from every rank, applied in rank (micro-batch) order. */
static ot_status replay_stats(ot_train_session *s, ot_train_dist *t, ot_error *err) {
    ot_status st = OT_OK;
    for (int i = 0; !st && i < s->ad.n_state; i++)
        st = s->be->copy_out(s->be, t->terms + t->state_off[i], ot_executor_value_ptr(s->ex, s->ad.state_updates[i]),
                             state_bytes(t, i), err);
    if (!st) st = ot_dist_allgather(s->o.dist, t->terms, t->state_elems * sizeof(float), t->all_terms,
                                    "BatchNorm running statistics", err);
    for (int r = 0; !st && r < t->n; r++) {
        const float *tr = t->all_terms + (size_t)r * t->state_elems;
        for (int i = 0; i < s->ad.n_state; i++) {
            float mom = t->mom[i];
            for (size_t c = t->state_off[i]; c < t->state_off[i + 1]; c++) t->stats[c] = mom * t->stats[c] + tr[c];
        }
    }
    for (int i = 0; !st && i < s->ad.n_state; i++)
        st = ot_executor_write(s->ex, s->ad.state_updates[i], t->stats + t->state_off[i], state_bytes(t, i), err);
    return st;
}

static ot_status host_sum(ot_train_session *s, ot_train_dist *t, bool first, bool last, ot_error *err);

ot_status ot_train_dist_end_micro(ot_train_session *s, bool last, ot_error *err) {
    ot_train_dist *t;
    ot_status st = ensure(s, &t, err);
    if (st) return st;
    st = ot_dist_allgather(s->o.dist, &s->last_loss, sizeof(double), t->losses, "the losses", err);
    bool first = s->micro < t->n;
    if (!st && t->nccl.m) st = ot_train_dist_nccl_sum(s, &t->nccl, first, last, err);
    else if (!st) st = host_sum(s, t, first, last, err);
    if (!st && s->ad.n_state) st = replay_stats(s, t, err);
    if (st) ot_error_prefix(err, "training step %lld: ", (long long)s->run_step);
    return st;
}

/* The ordered sum through host memory and MPI: gradients copied out (in place on the
 * CPU, where copy_out is a memcpy), summed on rank 0, the sum broadcast and copied in. */
static ot_status host_sum(ot_train_session *s, ot_train_dist *t, bool first, bool last, ot_error *err) {
    ot_status st = OT_OK;
    for (int i = 0; !st && i < s->ad.n_params; i++)
        st = s->be->copy_out(s->be, t->send + s->grad_off[i], ot_executor_value_ptr(s->ex, s->ad.grads[i]),
                             (s->grad_off[i + 1] - s->grad_off[i]) * sizeof(float), err);
    if (!st) st = ot_dist_reduce_ordered(s->o.dist, t->send, t->acc, s->grad_elems, first, "the gradients", err);
    if (!st && last) st = ot_dist_broadcast_f32(s->o.dist, t->acc, s->grad_elems, "the summed gradients", err);
    for (int i = 0; !st && last && i < s->ad.n_params; i++)
        st = s->be->copy_in(s->be, ot_executor_value_ptr(s->ex, s->ad.grads[i]), t->acc + s->grad_off[i],
                            (s->grad_off[i + 1] - s->grad_off[i]) * sizeof(float), err);
    return st;
}

ot_status ot_train_dist_fused_boundary(ot_train_session *s, ot_error *err) {
    ot_train_dist *t;
    ot_status st = ensure(s, &t, err);
    if (!st) st = ot_dist_allgather(s->o.dist, &s->last_loss, sizeof(double), t->losses, "the losses", err);
    if (!st && s->ad.n_state) st = replay_stats(s, t, err);
    if (st) ot_error_prefix(err, "training step %lld: ", (long long)s->run_step);
    return st;
}

ot_status ot_train_dist_sum_start(ot_train_session *s, int i, int step, ot_error *err) {
    ot_train_dist *t;
    ot_status st = ensure(s, &t, err);
    if (st) return st;
    int v = s->ad.grads[i];
    size_t n = s->grad_off[i + 1] - s->grad_off[i];
    const ot_plan_value *pv = &ot_executor_plan(s->ex)->values[v];
    float *g = ot_executor_value_ptr(s->ex, v);
    if (!g || !s->be->host_memory || pv->recv_offset < 0 || pv->offset < 0 ||
        pv->recv_bytes != n * sizeof(float) * (size_t)(t->n - 1))
        return ot_fail(err, OT_E_INTERNAL, "gradient '%s': no receive slots for a sum over %d ranks in its block",
                       vname(s->g, v), t->n);
    float *slots = (float *)((char *)g + (pv->recv_offset - pv->offset)); /* their block, in the same arena */
    ot_executor_note_write(s->ex, step, slots, pv->recv_bytes); /* MPI writes them: the measured peak counts them */
    st = ot_dist_sum_start(s->o.dist, g, slots, n, &t->sums[i], vname(s->g, v), err);
    if (!st) t->flying[t->n_flying++] = i;
    if (st) ot_error_prefix(err, "training step %lld: ", (long long)s->run_step);
    return st;
}

ot_status ot_train_dist_sum_poll(ot_train_session *s, ot_error *err) {
    ot_train_dist *t = s->dist;
    for (int k = 0; t && k < t->n_flying; k++) { /* a finished one stays listed: its wait forms the sum */
        int i = t->flying[k];
        bool done = false;
        if (ot_dist_sum_poll(s->o.dist, &t->sums[i], &done, vname(s->g, s->ad.grads[i]), err))
            return ot_error_prefix(err, "training step %lld: ", (long long)s->run_step);
    }
    return OT_OK;
}

ot_status ot_train_dist_sum_wait(ot_train_session *s, int i, ot_error *err) {
    ot_train_dist *t = s->dist;
    int k = 0;
    while (t && k < t->n_flying && t->flying[k] != i) k++;
    if (!t || k == t->n_flying)
        return ot_fail(err, OT_E_INTERNAL, "the update of '%s' runs before its gradient's sum over the ranks started",
                       vname(s->g, s->ad.params[i]));
    memmove(&t->flying[k], &t->flying[k + 1], (size_t)(t->n_flying - k - 1) * sizeof *t->flying);
    t->n_flying--;
    ot_status st = ot_dist_sum_wait(s->o.dist, &t->sums[i], vname(s->g, s->ad.grads[i]), err);
    if (st) ot_error_prefix(err, "training step %lld: ", (long long)s->run_step);
    return st;
}

double ot_train_dist_add_losses(const ot_train_session *s, double sum) {
    if (!s->dist || !s->o.dist) return sum + s->last_loss;
    for (int r = 0; r < s->dist->n; r++) sum += s->dist->losses[r];
    return sum;
}
