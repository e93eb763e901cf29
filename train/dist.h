/* dist.h — data-parallel training over MPI: starting and ending the distributed run,
 * what a rank is, and the few collectives the training loop needs, each in a fixed
 * order so that N ranks compute bitwise what one process computes with --accum N
 * (docs/training.md, "Data parallel").
 *
 * The run is distributed only when a launcher started the process (mpirun, srun:
 * OMPI_COMM_WORLD_SIZE, PMI_SIZE or MV2_COMM_WORLD_SIZE in the environment); a plain
 * `onnxtrain train` never initialises MPI, so one process behaves exactly as a build
 * without MPI. A build without MPI refuses to run under a launcher with more than
 * one rank instead of silently training N copies.
 *
 * Every collective waits with non-blocking MPI calls polled in a loop, so a wait
 * ends with an ot_status (OT_E_PEER naming the rank waited for) when a peer hangs
 * past the timeout or when the stop flag (SIGINT/SIGTERM: Open MPI sends SIGTERM to
 * every survivor when a rank dies) is raised. The communicator returns MPI errors
 * (MPI_ERRORS_RETURN) instead of aborting inside the library. */
#ifndef OT_DIST_H
#define OT_DIST_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "ir.h"

typedef struct ot_dist ot_dist;

/* Seconds a rank waits for another in one collective before OT_E_PEER (default;
 * ONNXTRAIN_DIST_TIMEOUT=SECONDS overrides it). A dead rank is noticed sooner:
 * mpirun ends the job within seconds. */
#define OT_DIST_DEFAULT_TIMEOUT 600.0

/* Whether this build has MPI (OT_HAVE_MPI). */
bool ot_dist_available(void);
/* The rank count a launcher gave this process (1 without one), from the environment. */
int ot_dist_launched_size(void);

/* Starts the distributed run when a launcher started this process: MPI_Init, rank,
 * size. *out is NULL when no launcher did (one process, MPI untouched). Without MPI
 * in the build and a launcher size above 1: OT_E_UNSUPPORTED saying so. The stop
 * flag (may be NULL) ends any wait when it becomes non-zero. */
ot_status ot_dist_init(volatile sig_atomic_t *stop, ot_dist **out, ot_error *err);
/* A rank count for planning only (`plan --ranks N`): ot_dist_train_options and the
 * session plan each rank's step as an N-rank run does, with no MPI at all; its
 * collectives refuse (OT_E_INTERNAL). Free with ot_dist_finalize. */
ot_status ot_dist_for_plan(int ranks, ot_dist **out, ot_error *err);
/* Ends the run: MPI_Finalize after a success. NULL does nothing. */
void ot_dist_finalize(ot_dist *d);
/* After a failure on this rank: MPI_Abort with code (mpirun ends every other rank
 * and exits with it); returns only when d is NULL or has one rank. */
void ot_dist_abort(ot_dist *d, int code);

int ot_dist_rank(const ot_dist *d); /* 0 for NULL */
/* This rank's index among the ranks on its host (MPI_COMM_TYPE_SHARED); 0 for NULL. */
int ot_dist_local_rank(const ot_dist *d);
/* The device a rank runs on: "cuda" (no index) becomes "cuda:<local rank>", one GPU
 * per rank on each host; anything else is returned as given (cuda:N puts every rank
 * on GPU N). The string lives as long as d. */
const char *ot_dist_rank_device(ot_dist *d, const char *device);
int ot_dist_size(const ot_dist *d); /* 1 for NULL */
/* Seconds this rank spent in collectives so far (waiting included); add_seconds
 * counts those of a transport outside this file (NCCL). */
double ot_dist_comm_seconds(const ot_dist *d);
void ot_dist_add_seconds(ot_dist *d, double seconds);
/* The wait limit (ONNXTRAIN_DIST_TIMEOUT) and the stop flag every wait watches, for
 * a transport outside this file (NCCL). */
double ot_dist_timeout(const ot_dist *d);
const volatile sig_atomic_t *ot_dist_stop_flag(const ot_dist *d);

/* The training session's options for a run over d's ranks (train_dist.c; d may be
 * NULL or have one rank: nothing changes): the global batch o->batch_size
 * (required, divisible by the rank count N) becomes the per-rank batch B/N, o->accum
 * K becomes K x N (the micro-batches of the one process this run equals), o->dist
 * is set, "cuda" becomes this rank's GPU (ot_dist_rank_device). OT_E_USAGE naming
 * the numbers otherwise. batch_auto (--batch-size auto): o->batch_size is left as
 * it is, for the caller to set to the per-rank batch it finds. */
struct ot_train_options;
ot_status ot_dist_train_options(ot_dist *d, struct ot_train_options *o, bool batch_auto, ot_error *err);

/* The ordered sum of one float32 buffer over the ranks, as --accum adds micro-batch
 * gradients: rank 0 sets acc[i] = acc[i] + mine[i] (acc = +0 first when `first`),
 * then acc[i] += buffer of rank 1, of rank 2, ... in rank order; the other ranks send
 * mine and leave acc alone. n elements; what names the buffer in messages. */
ot_status ot_dist_reduce_ordered(ot_dist *d, const float *mine, float *acc, size_t n, bool first, const char *what,
                                 ot_error *err);
/* The same ordered sum, non-blocking, for a gradient that is complete while the
 * backward pass goes on (--fuse-update, train/train_fuse.c). Every rank sends its n
 * floats in buf to every other and receives theirs into slots ((size - 1) x n floats:
 * rank r's in slot r, or r - 1 above this rank); ot_dist_sum_wait then sets, on every
 * rank, buf[i] = ((+0 + g_0[i]) + g_1[i]) + ... + g_{size-1}[i] in rank order: the
 * float adds of --accum N and of ot_dist_reduce_ordered, bitwise. One exchange instead
 * of a gather and a broadcast: no rank waits for rank 0 to finish adding, at the cost
 * of (size - 1) x n floats sent per rank (2 x (size - 1) / size x n would be the least),
 * which is equal at two ranks. buf and slots are the caller's until the wait returns
 * or ot_dist_sum_drop. Sums started in the same order on every rank are matched in
 * that order (MPI's order of messages between two ranks). */
typedef struct ot_dist_sum {
    float *buf, *slots;
    size_t n;
    int n_rq;   /* requests in flight: sends, then receives */
    void *rq;   /* MPI_Request[n_rq] */
    int *peer;  /* the rank each request waits for */
} ot_dist_sum;
ot_status ot_dist_sum_start(ot_dist *d, float *buf, float *slots, size_t n, ot_dist_sum *h, const char *what,
                            ot_error *err);
/* Lets the transfers of h progress without waiting (MPI moves a large message only
 * inside its calls): *done when every transfer has ended. */
ot_status ot_dist_sum_poll(ot_dist *d, ot_dist_sum *h, bool *done, const char *what, ot_error *err);
/* Waits for h's transfers and forms the sum in buf (above); h is then empty. */
ot_status ot_dist_sum_wait(ot_dist *d, ot_dist_sum *h, const char *what, ot_error *err);
/* After a failure: cancels what is in flight and empties h. */
void ot_dist_sum_drop(ot_dist_sum *h);

/* Rank 0's n floats into buf on every rank. */
ot_status ot_dist_broadcast_f32(ot_dist *d, float *buf, size_t n, const char *what, ot_error *err);
/* Every rank's n bytes, rank order, into all (size x n bytes) on every rank. */
ot_status ot_dist_allgather(ot_dist *d, const void *mine, size_t n, void *all, const char *what, ot_error *err);

#endif
