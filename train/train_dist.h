/* train_dist.h — the training loop's side of data-parallel training (train_dist.c):
 * which micro-batches a rank runs, and the work at each of its micro-batch ends that
 * makes N ranks bitwise equal to one process with --accum N. Private to train/, as
 * train_internal.h.
 *
 * A distributed session is built with the single-process equivalent of its options
 * (ot_dist_train_options, train/dist.h): micro-batch B/N, accum K x N. Its micro-batches are those
 * of that one process; rank r runs micro-batch k of a step when k mod N == r, so the
 * N micro-batches k = qN .. qN+N-1 (group q) run at once, one per rank, each with the
 * batch and the Dropout key (seed, step x K x N + k) the one process gives it. At the
 * end of each group every rank has: the group's N losses (added in micro-batch
 * order, as the loop adds them), the gradient sum rank 0 formed in micro-batch order
 * (after the last group: broadcast into every rank's gradients), and the BatchNorm
 * running statistics after the N updates, each applied in micro-batch order. */
#ifndef OT_TRAIN_DIST_H
#define OT_TRAIN_DIST_H

#include "train/dist.h"
#include "train/train_internal.h"

/* The device side of the gradient sum on GPUs (train_dist_nccl.c): m NULL when it is
 * not in use (a CPU run, a module without NCCL, ONNXTRAIN_NCCL=0). */
typedef struct ot_train_dist_nccl {
    const struct ot_cuda_module *m;
    void *comm;
    float *acc; /* grad_elems device floats: rank 0's ordered sum */
} ot_train_dist_nccl;
/* Opens the NCCL communicator over the run's ranks when it can be used (every rank
 * calls it at the same point: the id goes over MPI). */
ot_status ot_train_dist_nccl_open(ot_train_session *s, ot_train_dist_nccl *out, ot_error *err);
void ot_train_dist_nccl_close(ot_train_session *s, ot_train_dist_nccl *c);
/* The ordered sum of this group's gradients into c->acc on rank 0; with last, its
 * broadcast into every rank's gradients. Waits for it. */
ot_status ot_train_dist_nccl_sum(ot_train_session *s, ot_train_dist_nccl *c, bool first, bool last, ot_error *err);

/* When the session is built (ot_train_loop_prepare): every gradient is float32, as
 * the ranks sum them on the host (OT_E_UNSUPPORTED naming one that is not). */
ot_status ot_train_dist_check(const ot_train_session *s, ot_error *err);
/* The rank count of the session's run (1 without one). */
int ot_train_dist_size(const ot_train_session *s);
/* Whether this rank runs micro-batch k (0..accum-1) of a step. */
bool ot_train_dist_owns(const ot_train_session *s, int64_t k);
/* Whether micro-batch s->micro is in the step's last group (without a distributed
 * run: is the step's last). */
bool ot_train_dist_last_micro(const ot_train_session *s);
/* Before this rank's micro-batch: the running statistics in the arena are set to
 * -0.0, so that the BatchNorm nodes' updates are their batch terms alone. */
ot_status ot_train_dist_begin_micro(ot_train_session *s, ot_error *err);
/* At the boundary of this rank's micro-batch (loss and own gradients checked):
 * the group's losses, the ordered gradient sum (last: into every rank's gradients),
 * the running statistics after the group's updates (into the update values that the
 * run copies into the state). */
ot_status ot_train_dist_end_micro(ot_train_session *s, bool last, ot_error *err);
/* --fuse-update over the ranks (train_fuse.c; the session's accum is the rank count):
 * at the boundary, the losses and the running statistics as end_micro makes them;
 * the gradient sums go per param, below. */
ot_status ot_train_dist_fused_boundary(ot_train_session *s, ot_error *err);
/* Gradient i is complete after schedule step `step`: its sum over the ranks starts,
 * non-blocking, from its block into its receive slots (plan/planner.h, Receive slots). */
ot_status ot_train_dist_sum_start(ot_train_session *s, int i, int step, ot_error *err);
/* Lets every sum in flight progress (after each schedule step: MPI moves a large
 * message only inside its calls). */
ot_status ot_train_dist_sum_poll(ot_train_session *s, ot_error *err);
/* Just before gradient i's update: waits for its sum, which then is in the gradient,
 * bitwise what --accum N's accumulator holds. */
ot_status ot_train_dist_sum_wait(ot_train_session *s, int i, ot_error *err);

/* sum plus the group's losses in micro-batch order (sum + this rank's loss without
 * a distributed run). */
double ot_train_dist_add_losses(const ot_train_session *s, double sum);
/* Frees the session's distributed buffers. */
void ot_train_dist_free(ot_train_session *s);

#endif
