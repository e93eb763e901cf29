/* cuda_nccl.h — private to kernels/cuda: the NCCL gradient sum of data-parallel
 * training (cuda_nccl.c), reached from the library through the module table
 * (cuda_module.h, nccl_*; NULL there when the module is built without NCCL). */
#ifndef OT_CUDA_NCCL_H
#define OT_CUDA_NCCL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "exec/backend.h"

#ifdef OT_HAVE_NCCL
ot_status ot_cuda_nccl_unique_id(void *id, size_t id_bytes, ot_error *err);
ot_status ot_cuda_nccl_comm_new(ot_backend *be, const void *id, int rank, int nranks, double timeout,
                                const volatile sig_atomic_t *stop, void **out, ot_error *err);
void ot_cuda_nccl_comm_free(void *comm);
ot_status ot_cuda_nccl_reduce_ordered(void *comm, const float *mine, float *acc, size_t n, bool first, ot_error *err);
ot_status ot_cuda_nccl_broadcast(void *comm, const float *send, float *recv, size_t n, ot_error *err);
ot_status ot_cuda_nccl_wait(void *comm, ot_error *err);
#endif

#endif
