/* dist.c — the MPI transport of data-parallel training (see dist.h): start and end,
 * and the three collectives the loop uses, each waited for by polling non-blocking
 * requests so that a hung peer, an MPI error or a stop signal ends the wait with a
 * status naming the rank instead of a hang. Built without MPI (no OT_HAVE_MPI) only
 * the one-process forms remain, and a launcher with more than one rank is refused. */
#include "train/dist.h"
#include "train/progress.h" /* ot_now_seconds */

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef OT_HAVE_MPI
#include <mpi.h>
#endif

struct ot_dist {
    int rank, size, local_rank;
    bool plan_only; /* ot_dist_for_plan: no communicator */
    char device[32]; /* ot_dist_rank_device's "cuda:<local rank>" */
    double timeout, comm_seconds;
    volatile sig_atomic_t *stop;
#ifdef OT_HAVE_MPI
    MPI_Comm comm;
    float *rbuf; /* rank 0: one chunk per other rank for ot_dist_reduce_ordered */
    size_t rcap;
#endif
};

bool ot_dist_available(void) {
#ifdef OT_HAVE_MPI
    return true;
#else
    return false;
#endif
}

int ot_dist_launched_size(void) {
    /* Open MPI, MPICH/Hydra and Slurm's PMI, MVAPICH */
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            long n = strtol(v, NULL, 10);
            return n > 0 && n < (1L << 24) ? (int)n : 1;
        }
    }
    return 0; /* no launcher */
}

int ot_dist_rank(const ot_dist *d) { return d ? d->rank : 0; }
int ot_dist_local_rank(const ot_dist *d) { return d ? d->local_rank : 0; }

const char *ot_dist_rank_device(ot_dist *d, const char *device) {
    if (!d || !device || strcmp(device, "cuda") != 0) return device;
    snprintf(d->device, sizeof d->device, "cuda:%d", d->local_rank);
    return d->device;
}
int ot_dist_size(const ot_dist *d) { return d ? d->size : 1; }
double ot_dist_comm_seconds(const ot_dist *d) { return d ? d->comm_seconds : 0.0; }
void ot_dist_add_seconds(ot_dist *d, double seconds) {
    if (d) d->comm_seconds += seconds;
}
double ot_dist_timeout(const ot_dist *d) { return d ? d->timeout : OT_DIST_DEFAULT_TIMEOUT; }
const volatile sig_atomic_t *ot_dist_stop_flag(const ot_dist *d) { return d ? d->stop : NULL; }

ot_status ot_dist_for_plan(int ranks, ot_dist **out, ot_error *err) {
    *out = NULL;
    if (ranks < 1 || ranks > (1 << 24)) return ot_fail(err, OT_E_USAGE, "--ranks %d: give 1 to 16777216", ranks);
    ot_dist *d = calloc(1, sizeof *d);
    if (!d) return ot_fail(err, OT_E_MEMORY, "out of memory");
    d->size = ranks;
    d->plan_only = true;
    d->timeout = OT_DIST_DEFAULT_TIMEOUT;
    *out = d;
    return OT_OK;
}

static ot_status refuse_plan_only(const char *what, ot_error *err) {
    return ot_fail(err, OT_E_INTERNAL, "%s: a rank count made for planning (plan --ranks) cannot communicate", what);
}

/* ot_dist_sum_wait's arithmetic: buf = ((+0 + g_0) + g_1) + ... in rank order, this
 * rank's g in buf, the others' in slots (ot_dist_sum_start's layout). In blocks, so
 * that each rank's addend is one vectorised pass over a block in cache; each element
 * still gets its adds in rank order, one IEEE single add each. */
static void ordered_add(int me, int size, float *buf, const float *slots, size_t n) {
    enum { BLK = 512 };
    float acc[BLK];
    for (size_t o = 0; o < n; o += BLK) {
        size_t m = n - o < BLK ? n - o : BLK;
        for (int r = 0; r < size; r++) {
            const float *src = (r == me ? buf : slots + (size_t)(r < me ? r : r - 1) * n) + o;
            if (r == 0)
                for (size_t i = 0; i < m; i++) acc[i] = 0.0f + src[i]; /* +0 first: -0.0 becomes +0.0, as in --accum */
            else
                for (size_t i = 0; i < m; i++) acc[i] += src[i];
        }
        memcpy(buf + o, acc, m * sizeof *acc);
    }
}

#ifndef OT_HAVE_MPI

ot_status ot_dist_init(volatile sig_atomic_t *stop, ot_dist **out, ot_error *err) {
    (void)stop;
    *out = NULL;
    int n = ot_dist_launched_size();
    if (n > 1)
        return ot_fail(err, OT_E_UNSUPPORTED, "started as one of %d ranks (mpirun or srun), but this onnxtrain was "
                       "built without MPI: every rank would train its own copy. Install Open MPI (libopenmpi-dev) "
                       "and rebuild, or run one process", n);
    return OT_OK;
}

void ot_dist_finalize(ot_dist *d) { free(d); }
void ot_dist_abort(ot_dist *d, int code) { (void)d, (void)code; }

#else /* OT_HAVE_MPI */

static ot_status read_timeout(double *t, ot_error *err) {
    *t = OT_DIST_DEFAULT_TIMEOUT;
    const char *v = getenv("ONNXTRAIN_DIST_TIMEOUT");
    if (!v || !*v) return OT_OK;
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || !end || *end || !(x > 0) || x > 1e9)
        return ot_fail(err, OT_E_USAGE, "ONNXTRAIN_DIST_TIMEOUT='%s': give seconds, a number above 0", v);
    *t = x;
    return OT_OK;
}

static ot_status mpi_fail(const ot_dist *d, int rc, const char *call, const char *what, ot_error *err) {
    char s[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, s, &len);
    return ot_fail(err, OT_E_PEER, "rank %d of %d: %s (%s) failed: %s", d->rank, d->size, call, what, s);
}

ot_status ot_dist_init(volatile sig_atomic_t *stop, ot_dist **out, ot_error *err) {
    *out = NULL;
    if (ot_dist_launched_size() == 0) return OT_OK; /* a plain run: MPI stays untouched */
    double timeout;
    ot_status st = read_timeout(&timeout, err);
    if (st) return st;
    ot_dist *d = calloc(1, sizeof *d);
    if (!d) return ot_fail(err, OT_E_MEMORY, "out of memory");
    int provided = 0, rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
        free(d);
        return ot_fail(err, OT_E_PEER, "MPI_Init failed (error %d): is this process started by mpirun?", rc);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &d->comm);
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    MPI_Comm local;
    if (MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
        MPI_Comm_rank(local, &d->local_rank);
        MPI_Comm_free(&local);
    }
    d->timeout = timeout;
    d->stop = stop;
    *out = d;
    return OT_OK;
}

void ot_dist_finalize(ot_dist *d) {
    if (!d) return;
    if (d->plan_only) {
        free(d);
        return;
    }
    MPI_Comm_free(&d->comm);
    MPI_Finalize();
    free(d->rbuf);
    free(d);
}

void ot_dist_abort(ot_dist *d, int code) {
    if (!d || d->size < 2 || d->plan_only) return;
    MPI_Abort(d->comm, code ? code : 1);
}

/* Waits for n requests; peer[k] is the rank request k waits for (-1: any of the
 * others) and names it when the wait cannot end. Polls without sleeping at first
 * (a message that is about to arrive costs no latency), then sleeps up to 1 ms
 * between polls so that a long wait leaves the cores to the ranks still computing. */
static ot_status wait_requests(ot_dist *d, int n, MPI_Request *rq, const int *peer, const char *what, ot_error *err) {
    double t0 = ot_now_seconds();
    long polls = 0, nap_us = 20;
    for (int k = 0; k < n;) {
        int done = 0, rc = MPI_Test(&rq[k], &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "MPI_Test", what, err);
        if (done) {
            k++;
            continue;
        }
        char who[48];
        if (peer[k] >= 0) snprintf(who, sizeof who, "rank %d", peer[k]);
        else if (d->size == 2) snprintf(who, sizeof who, "rank %d", 1 - d->rank); /* "the others" is one */
        else snprintf(who, sizeof who, "the other ranks");
        if (d->stop && *d->stop)
            return ot_fail(err, OT_E_PEER, "rank %d of %d: stopped by signal %d while waiting for %s (%s); under "
                           "mpirun this means another rank ended: see its message", d->rank, d->size, (int)*d->stop,
                           who, what);
        double waited = ot_now_seconds() - t0;
        if (waited > d->timeout)
            return ot_fail(err, OT_E_PEER, "rank %d of %d: waited %.0f s for %s (%s): it has died or hangs "
                           "(ONNXTRAIN_DIST_TIMEOUT=%g)", d->rank, d->size, waited, who, what, d->timeout);
        if (++polls > 2000) {
            struct timespec ts = {0, nap_us * 1000};
            nanosleep(&ts, NULL);
            if (nap_us < 1000) nap_us *= 2;
        }
    }
    return OT_OK;
}

/* MPI counts are int: buffers go in chunks of at most this many elements. */
#define CHUNK ((size_t)1 << 26)

static ot_status reduce_chunk(ot_dist *d, const float *mine, float *acc, size_t n, bool first, const char *what,
                              ot_error *err) {
    ot_status st = OT_OK;
    if (d->rank != 0) {
        MPI_Request rq;
        int rc = MPI_Isend(mine, (int)n, MPI_FLOAT, 0, 0, d->comm, &rq), to = 0;
        if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "MPI_Isend", what, err);
        return wait_requests(d, 1, &rq, &to, what, err);
    }
    int others = d->size - 1;
    MPI_Request *rq = calloc((size_t)others + 1, sizeof *rq);
    if (!rq) return ot_fail(err, OT_E_MEMORY, "out of memory");
    for (int r = 1; r <= others && !st; r++) {
        int rc = MPI_Irecv(d->rbuf + (size_t)(r - 1) * n, (int)n, MPI_FLOAT, r, 0, d->comm, &rq[r - 1]);
        if (rc != MPI_SUCCESS) {
            for (int k = 0; k < r - 1; k++) MPI_Cancel(&rq[k]);
            st = mpi_fail(d, rc, "MPI_Irecv", what, err);
        }
    }
    /* rank 0's own addend first, then each rank's as it is its turn: the adds of
     * --accum's micro-batches 0, 1, 2, ... (acc starts at +0, as the accumulator does) */
    for (size_t i = 0; !st && i < n; i++) acc[i] = (first ? 0.0f : acc[i]) + mine[i];
    for (int r = 1; r <= others && !st; r++) {
        if ((st = wait_requests(d, 1, &rq[r - 1], &r, what, err))) break;
        const float *src = d->rbuf + (size_t)(r - 1) * n;
        for (size_t i = 0; i < n; i++) acc[i] += src[i];
    }
    free(rq);
    return st;
}

ot_status ot_dist_reduce_ordered(ot_dist *d, const float *mine, float *acc, size_t n, bool first, const char *what,
                                 ot_error *err) {
    if (d->plan_only) return refuse_plan_only(what, err);
    double t0 = ot_now_seconds();
    ot_status st = OT_OK;
    size_t chunk = n < CHUNK ? n : CHUNK;
    if (d->rank == 0 && d->size > 1 && (size_t)(d->size - 1) * chunk > d->rcap) {
        float *b = realloc(d->rbuf, (size_t)(d->size - 1) * chunk * sizeof *b);
        if (!b) return ot_fail(err, OT_E_MEMORY, "out of memory for the gradients of %d ranks", d->size - 1);
        d->rbuf = b;
        d->rcap = (size_t)(d->size - 1) * chunk;
    }
    for (size_t o = 0; o < n && !st; o += chunk) {
        size_t m = n - o < chunk ? n - o : chunk;
        st = reduce_chunk(d, mine + o, acc + o, m, first, what, err);
    }
    d->comm_seconds += ot_now_seconds() - t0;
    return st;
}

/* The tag of ot_dist_sum's messages (reduce_chunk uses 0, allgather 1). */
#define TAG_SUM 2

void ot_dist_sum_drop(ot_dist_sum *h) {
    MPI_Request *rq = h->rq;
    for (int k = 0; k < h->n_rq; k++)
        if (rq[k] != MPI_REQUEST_NULL) {
            MPI_Cancel(&rq[k]);
            MPI_Request_free(&rq[k]);
        }
    free(h->rq);
    free(h->peer);
    memset(h, 0, sizeof *h);
}

ot_status ot_dist_sum_start(ot_dist *d, float *buf, float *slots, size_t n, ot_dist_sum *h, const char *what,
                            ot_error *err) {
    memset(h, 0, sizeof *h);
    if (d->plan_only) return refuse_plan_only(what, err);
    h->buf = buf, h->slots = slots, h->n = n;
    if (d->size < 2 || n == 0) return OT_OK;
    double t0 = ot_now_seconds();
    size_t cnt = 2 * (size_t)(d->size - 1) * ((n + CHUNK - 1) / CHUNK);
    if (cnt > INT_MAX) return ot_fail(err, OT_E_UNSUPPORTED, "%s: %zu floats over %d ranks: too many messages", what, n, d->size);
    MPI_Request *rq = malloc(cnt * sizeof *rq);
    h->rq = rq;
    h->peer = malloc(cnt * sizeof *h->peer);
    if (!rq || !h->peer) {
        ot_dist_sum_drop(h);
        return ot_fail(err, OT_E_MEMORY, "out of memory");
    }
    ot_status st = OT_OK;
    for (int r = 0; r < d->size && !st; r++) {
        if (r == d->rank) continue;
        float *slot = slots + (size_t)(r < d->rank ? r : r - 1) * n;
        for (size_t o = 0; o < n && !st; o += CHUNK) {
            int m = (int)(n - o < CHUNK ? n - o : CHUNK), rc = MPI_Isend(buf + o, m, MPI_FLOAT, r, TAG_SUM, d->comm, &rq[h->n_rq]);
            if (rc == MPI_SUCCESS) {
                h->peer[h->n_rq++] = r;
                rc = MPI_Irecv(slot + o, m, MPI_FLOAT, r, TAG_SUM, d->comm, &rq[h->n_rq]);
                if (rc == MPI_SUCCESS) h->peer[h->n_rq++] = r;
            }
            if (rc != MPI_SUCCESS) st = mpi_fail(d, rc, "MPI_Isend/MPI_Irecv", what, err);
        }
    }
    if (st) ot_dist_sum_drop(h);
    d->comm_seconds += ot_now_seconds() - t0;
    return st;
}

ot_status ot_dist_sum_poll(ot_dist *d, ot_dist_sum *h, bool *done, const char *what, ot_error *err) {
    *done = true;
    if (h->n_rq == 0) return OT_OK;
    double t0 = ot_now_seconds();
    int flag = 0, rc = MPI_Testall(h->n_rq, h->rq, &flag, MPI_STATUSES_IGNORE);
    d->comm_seconds += ot_now_seconds() - t0;
    if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "MPI_Testall", what, err);
    *done = flag != 0;
    return OT_OK;
}

ot_status ot_dist_sum_wait(ot_dist *d, ot_dist_sum *h, const char *what, ot_error *err) {
    double t0 = ot_now_seconds();
    ot_status st = h->n_rq ? wait_requests(d, h->n_rq, h->rq, h->peer, what, err) : OT_OK;
    if (st) {
        ot_dist_sum_drop(h);
        return st;
    }
    ordered_add(d->rank, d->size, h->buf, h->slots, h->n);
    ot_dist_sum_drop(h); /* every request has ended: nothing to cancel */
    d->comm_seconds += ot_now_seconds() - t0;
    return OT_OK;
}

ot_status ot_dist_broadcast_f32(ot_dist *d, float *buf, size_t n, const char *what, ot_error *err) {
    if (d->plan_only) return refuse_plan_only(what, err);
    double t0 = ot_now_seconds();
    ot_status st = OT_OK;
    for (size_t o = 0; o < n && !st; o += CHUNK) {
        size_t m = n - o < CHUNK ? n - o : CHUNK;
        MPI_Request rq;
        int rc = MPI_Ibcast(buf + o, (int)m, MPI_FLOAT, 0, d->comm, &rq), from = d->rank == 0 ? -1 : 0;
        st = rc != MPI_SUCCESS ? mpi_fail(d, rc, "MPI_Ibcast", what, err) : wait_requests(d, 1, &rq, &from, what, err);
    }
    d->comm_seconds += ot_now_seconds() - t0;
    return st;
}

ot_status ot_dist_allgather(ot_dist *d, const void *mine, size_t n, void *all, const char *what, ot_error *err) {
    if (d->plan_only) return refuse_plan_only(what, err);
    if (n > (size_t)1 << 30 || n * (size_t)d->size > (size_t)1 << 30)
        return ot_fail(err, OT_E_INTERNAL, "ot_dist_allgather: %zu bytes per rank", n);
    /* Gathered on rank 0 by point-to-point receives and broadcast back, not with
     * MPI_Iallgather: a wait then knows which rank it waits for and can name it. */
    double t0 = ot_now_seconds();
    ot_status st = OT_OK;
    int rc, root = 0, any = -1;
    MPI_Request rq;
    if (d->rank != 0) {
        rc = MPI_Isend(mine, (int)n, MPI_BYTE, 0, 1, d->comm, &rq);
        st = rc != MPI_SUCCESS ? mpi_fail(d, rc, "MPI_Isend", what, err) : wait_requests(d, 1, &rq, &root, what, err);
    } else {
        memmove(all, mine, n);
        for (int r = 1; r < d->size && !st; r++) {
            rc = MPI_Irecv((char *)all + (size_t)r * n, (int)n, MPI_BYTE, r, 1, d->comm, &rq);
            st = rc != MPI_SUCCESS ? mpi_fail(d, rc, "MPI_Irecv", what, err) : wait_requests(d, 1, &rq, &r, what, err);
        }
    }
    if (!st) {
        rc = MPI_Ibcast(all, (int)(n * (size_t)d->size), MPI_BYTE, 0, d->comm, &rq);
        st = rc != MPI_SUCCESS ? mpi_fail(d, rc, "MPI_Ibcast", what, err)
                               : wait_requests(d, 1, &rq, d->rank == 0 ? &any : &root, what, err);
    }
    d->comm_seconds += ot_now_seconds() - t0;
    return st;
}

#endif /* OT_HAVE_MPI */

#ifndef OT_HAVE_MPI
/* One process: the same sums and copies, no transport. */
ot_status ot_dist_reduce_ordered(ot_dist *d, const float *mine, float *acc, size_t n, bool first, const char *what,
                                 ot_error *err) {
    if (d && d->plan_only) return refuse_plan_only(what, err);
    for (size_t i = 0; i < n; i++) acc[i] = (first ? 0.0f : acc[i]) + mine[i];
    return OT_OK;
}

ot_status ot_dist_sum_start(ot_dist *d, float *buf, float *slots, size_t n, ot_dist_sum *h, const char *what,
                            ot_error *err) {
    memset(h, 0, sizeof *h);
    if (d && d->plan_only) return refuse_plan_only(what, err);
    h->buf = buf, h->slots = slots, h->n = n;
    return OT_OK;
}

ot_status ot_dist_sum_poll(ot_dist *d, ot_dist_sum *h, bool *done, const char *what, ot_error *err) {
    (void)d, (void)h, (void)what, (void)err;
    *done = true;
    return OT_OK;
}

ot_status ot_dist_sum_wait(ot_dist *d, ot_dist_sum *h, const char *what, ot_error *err) {
    (void)what, (void)err;
    ordered_add(0, 1, h->buf, h->slots, h->n); /* one process: the sum of one addend, +0 first */
    (void)d;
    memset(h, 0, sizeof *h);
    return OT_OK;
}

void ot_dist_sum_drop(ot_dist_sum *h) { memset(h, 0, sizeof *h); }

ot_status ot_dist_broadcast_f32(ot_dist *d, float *buf, size_t n, const char *what, ot_error *err) {
    (void)buf, (void)n;
    return d && d->plan_only ? refuse_plan_only(what, err) : OT_OK;
}

ot_status ot_dist_allgather(ot_dist *d, const void *mine, size_t n, void *all, const char *what, ot_error *err) {
    if (d && d->plan_only) return refuse_plan_only(what, err);
    memmove(all, mine, n);
    return OT_OK;
}
#endif
