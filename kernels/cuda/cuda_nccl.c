/* cuda_nccl.c — the data-parallel gradient sum between GPUs through NCCL
 * (cuda_module.h, nccl_*; used by train/train_dist.c). NCCL's own all-reduce adds in
 * an order it picks at run time (ring or tree), so it would not be bitwise one
 * process with --accum N; instead every rank sends its gradient to rank 0 (ncclSend /
 * ncclRecv), rank 0 adds them in rank order with the backend's accumulate kernel
 * (the very adds of --accum), and ncclBroadcast sends the sum back. Everything is
 * queued on the backend's stream; nccl_wait polls it with a timeout and the stop
 * flag, so a dead or hung peer ends in OT_E_PEER, not a hang (the communicator is
 * aborted then). Without OT_HAVE_NCCL this file defines nothing and the module's
 * table holds NULL for these functions.
 *
 * libnccl (over 200 MB) is opened with dlopen by the first nccl_unique_id or
 * nccl_comm_new, not linked: a single-GPU run maps none of it, and a machine without
 * it runs everything else (a data-parallel run there says it is missing). */
#ifdef OT_HAVE_NCCL

#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_nccl.h"

typedef struct ot_nccl {
    ncclComm_t comm;
    ot_cuda_ctx *cx;
    int rank, n;
    float *scratch; /* rank 0: one peer's gradient at a time */
    size_t cap;
    double timeout;
    const volatile sig_atomic_t *stop;
} ot_nccl;

/* The NCCL entry points, resolved once per process (the library stays loaded): like
 * the module itself, a process-wide handle, written once under pthread_once. */
typedef struct nccl_api {
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    const char *(*GetErrorString)(ncclResult_t);
    char error[512];
} nccl_api;

static nccl_api api_;
static pthread_once_t api_once_ = PTHREAD_ONCE_INIT;

static void api_load(void) {
    /* the loader's path first, then the library found at configure time */
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
#ifdef OT_NCCL_LIBRARY_PATH
    if (!h) h = dlopen(OT_NCCL_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!h) {
        snprintf(api_.error, sizeof api_.error, "libnccl.so.2 does not load (%s): install NCCL, or run the ranks "
                 "with ONNXTRAIN_NCCL=0 to sum through host memory over MPI", dlerror());
        return;
    }
#define SYM(f) (*(void **)&api_.f = dlsym(h, "nccl" #f))
    bool ok = SYM(GetUniqueId) && SYM(CommInitRank) && SYM(CommDestroy) && SYM(CommAbort) && SYM(CommGetAsyncError) &&
              SYM(Send) && SYM(Recv) && SYM(Broadcast) && SYM(GetErrorString);
#undef SYM
    if (!ok) {
        snprintf(api_.error, sizeof api_.error, "libnccl.so.2 lacks an entry point onnxtrain needs (NCCL >= 2.7)");
        api_.GetUniqueId = NULL;
    }
}

static const nccl_api *api(ot_error *err) {
    pthread_once(&api_once_, api_load);
    if (!api_.GetUniqueId) {
        ot_fail(err, OT_E_DEVICE, "%s", api_.error);
        return NULL;
    }
    return &api_;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static ot_status nccl_fail(const ot_nccl *c, ncclResult_t r, const char *call, ot_error *err) {
    return ot_fail(err, OT_E_PEER, "rank %d of %d: %s failed: %s", c ? c->rank : -1, c ? c->n : 0, call,
                   api_.GetErrorString(r));
}

#define NCCL_CHECK(c, call)                                                                                           \
    do {                                                                                                              \
        ncclResult_t r_ = (call);                                                                                     \
        if (r_ != ncclSuccess) return nccl_fail((c), r_, #call, err);                                                 \
    } while (0)

ot_status ot_cuda_nccl_unique_id(void *id, size_t id_bytes, ot_error *err) {
    ncclUniqueId u;
    if (!api(err)) return OT_E_DEVICE;
    if (id_bytes < sizeof u)
        return ot_fail(err, OT_E_INTERNAL, "NCCL unique id: %zu bytes given, %zu needed", id_bytes, sizeof u);
    NCCL_CHECK(NULL, api_.GetUniqueId(&u));
    memcpy(id, &u, sizeof u);
    return OT_OK;
}

ot_status ot_cuda_nccl_comm_new(ot_backend *be, const void *id, int rank, int nranks, double timeout,
                                const volatile sig_atomic_t *stop, void **out, ot_error *err) {
    *out = NULL;
    if (!api(err)) return OT_E_DEVICE;
    ot_nccl *c = calloc(1, sizeof *c);
    if (!c) return ot_fail(err, OT_E_MEMORY, "out of memory");
    c->cx = be->impl;
    c->rank = rank;
    c->n = nranks;
    c->timeout = timeout;
    c->stop = stop;
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    cudaError_t ce = cudaSetDevice(c->cx->device);
    ncclResult_t r = ce == cudaSuccess ? api_.CommInitRank(&c->comm, nranks, u, rank) : ncclUnhandledCudaError;
    if (r != ncclSuccess) {
        ot_status st = nccl_fail(c, r, "ncclCommInitRank", err);
        free(c);
        return st;
    }
    *out = c;
    return OT_OK;
}

void ot_cuda_nccl_comm_free(void *comm) {
    ot_nccl *c = comm;
    if (!c) return;
    if (c->comm) api_.CommDestroy(c->comm);
    cudaFree(c->scratch);
    free(c);
}

ot_status ot_cuda_nccl_reduce_ordered(void *comm, const float *mine, float *acc, size_t n, bool first, ot_error *err) {
    ot_nccl *c = comm;
    cudaStream_t st = c->cx->stream;
    if (c->rank != 0) {
        NCCL_CHECK(c, api_.Send(mine, n, ncclFloat, 0, c->comm, st));
        return OT_OK;
    }
    if (n > c->cap) {
        cudaFree(c->scratch);
        c->scratch = NULL;
        c->cap = 0;
        OT_CUDA_CHECK(cudaMalloc((void **)&c->scratch, n * sizeof(float)));
        c->cap = n;
    }
    ot_status s;
    /* acc = +0 + mine, then + rank 1's, + rank 2's, ...: --accum's adds, in its order */
    if (first) OT_CUDA_CHECK(cudaMemsetAsync(acc, 0, n * sizeof(float), st));
    if ((s = ot_cuda_accumulate_f32(c->cx, acc, (float *)mine, n, false, err))) return s;
    for (int r = 1; r < c->n; r++) {
        NCCL_CHECK(c, api_.Recv(c->scratch, n, ncclFloat, r, c->comm, st));
        if ((s = ot_cuda_accumulate_f32(c->cx, acc, c->scratch, n, false, err))) return s;
    }
    return OT_OK;
}

ot_status ot_cuda_nccl_broadcast(void *comm, const float *send, float *recv, size_t n, ot_error *err) {
    ot_nccl *c = comm;
    NCCL_CHECK(c, api_.Broadcast(send, recv, n, ncclFloat, 0, c->comm, c->cx->stream));
    return OT_OK;
}

ot_status ot_cuda_nccl_wait(void *comm, ot_error *err) {
    ot_nccl *c = comm;
    double t0 = now_s();
    for (long polls = 0;; polls++) {
        cudaError_t q = cudaStreamQuery(c->cx->stream);
        if (q == cudaSuccess) return OT_OK;
        if (q != cudaErrorNotReady) OT_CUDA_CHECK(q);
        ncclResult_t async = ncclSuccess;
        NCCL_CHECK(c, api_.CommGetAsyncError(c->comm, &async));
        const char *why = async != ncclSuccess ? api_.GetErrorString(async)
                          : c->stop && *c->stop ? "stopped by a signal"
                          : now_s() - t0 > c->timeout ? "timed out (ONNXTRAIN_DIST_TIMEOUT)"
                                                      : NULL;
        if (why) {
            api_.CommAbort(c->comm); /* ends the queued operations; the communicator is gone */
            c->comm = NULL;
            return ot_fail(err, OT_E_PEER, "rank %d of %d: NCCL gradient sum %s after %.0f s: another rank died, "
                           "hangs or stopped", c->rank, c->n, why, now_s() - t0);
        }
        if (polls > 2000) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
}

#endif /* OT_HAVE_NCCL */
