/* train_dist_nccl.c — the gradient sum of a data-parallel run on GPUs through NCCL
 * (kernels/cuda/cuda_nccl.c, reached through the CUDA module's table): the same
 * order as the host path of train_dist.c (rank 0 adds rank 0's, rank 1's, ...
 * gradients into an accumulator that starts at +0, then broadcasts the sum into
 * every rank's gradients), on the device, without a copy through host memory.
 *
 * Used when the session runs on a CUDA backend, the module was built with NCCL and
 * ONNXTRAIN_NCCL is not 0; otherwise the host path runs (the same bits: the device's
 * accumulate and the host's are both one IEEE single add per element). The losses
 * and the BatchNorm batch terms, a few values per micro-batch, still go over MPI. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend_select.h"
#include "kernels/cuda/cuda_module.h"
#include "train/progress.h" /* ot_now_seconds */
#include "train/train_dist.h"

ot_status ot_train_dist_nccl_open(ot_train_session *s, ot_train_dist_nccl *out, ot_error *err) {
    memset(out, 0, sizeof *out);
    const char *env = getenv("ONNXTRAIN_NCCL");
    if (s->be->host_memory || (env && !strcmp(env, "0"))) return OT_OK;
    ot_error quiet = {0};
    const ot_cuda_module *m = ot_cuda_module_load(&quiet);
    if (!m || !m->nccl_comm_new) return OT_OK; /* no NCCL in this build: the host path */
    ot_dist *d = s->o.dist;
    int n = ot_dist_size(d), rank = ot_dist_rank(d);
    char id[OT_NCCL_ID_BYTES] = {0};
    char *all = calloc((size_t)n, sizeof id);
    if (!all) return ot_fail(err, OT_E_MEMORY, "out of memory");
    ot_status st = rank == 0 ? m->nccl_unique_id(id, sizeof id, err) : OT_OK;
    /* every rank takes part in the gather (a failed rank 0 aborts the run instead) */
    if (!st) st = ot_dist_allgather(d, id, sizeof id, all, "the NCCL id", err);
    if (!st) st = m->nccl_comm_new(s->be, all, rank, n, ot_dist_timeout(d), ot_dist_stop_flag(d), &out->comm, err);
    free(all);
    if (!st) st = s->be->arena_alloc(s->be, s->grad_elems * sizeof(float), (void **)&out->acc, err);
    if (st) {
        ot_train_dist_nccl_close(s, out);
        return ot_error_prefix(err, "NCCL: ");
    }
    out->m = m;
    return OT_OK;
}

void ot_train_dist_nccl_close(ot_train_session *s, ot_train_dist_nccl *c) {
    const ot_cuda_module *m = c->m;
    ot_error quiet = {0};
    if (!m && c->comm) m = ot_cuda_module_load(&quiet);
    if (m && c->comm) m->nccl_comm_free(c->comm);
    if (c->acc) s->be->arena_free(s->be, c->acc);
    memset(c, 0, sizeof *c);
}

ot_status ot_train_dist_nccl_sum(ot_train_session *s, ot_train_dist_nccl *c, bool first, bool last, ot_error *err) {
    const ot_cuda_module *m = c->m;
    double t0 = ot_now_seconds();
    ot_status st = OT_OK;
    for (int i = 0; !st && i < s->ad.n_params; i++)
        st = m->nccl_reduce_ordered(c->comm, ot_executor_value_ptr(s->ex, s->ad.grads[i]), c->acc + s->grad_off[i],
                                    s->grad_off[i + 1] - s->grad_off[i], first, err);
    for (int i = 0; !st && last && i < s->ad.n_params; i++)
        st = m->nccl_broadcast(c->comm, c->acc + s->grad_off[i], ot_executor_value_ptr(s->ex, s->ad.grads[i]),
                               s->grad_off[i + 1] - s->grad_off[i], err);
    if (!st) st = m->nccl_wait(c->comm, err);
    ot_dist_add_seconds(s->o.dist, ot_now_seconds() - t0);
    return st;
}
