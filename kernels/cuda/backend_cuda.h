/* backend_cuda.h — the CUDA backend behind runtime/backend.h: one cudaMalloc arena,
 * cuBLAS for Gemm/MatMul, cuDNN (deterministic algorithms, FMA math) for Conv and its
 * gradients, own kernels (the .cu files of kernels/cuda) for every other op, all on one explicit
 * stream. Built only when CMake finds the CUDA Toolkit and cuDNN (OT_HAVE_CUDA). */
#ifndef OT_BACKEND_CUDA_H
#define OT_BACKEND_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens GPU `device` (0-based): stream, cuBLAS and cuDNN handles in a context owned
 * by the backend. NULL with OT_E_DEVICE when there is no such GPU or a CUDA call
 * fails (the message names the call, the file and the line). */
ot_backend *ot_backend_cuda_new(int device, ot_error *err);

/* Free and total bytes of the backend's GPU (cudaMemGetInfo), for `--remat auto`
 * without --memory-budget: the budget is the free memory less a safety margin.
 * be must come from ot_backend_cuda_new. */
ot_status ot_backend_cuda_mem_info(ot_backend *be, size_t *free_bytes, size_t *total_bytes, ot_error *err);

/* True when at least one CUDA GPU is usable; otherwise false with the reason (e.g.
 * "cudaGetDeviceCount: CUDA driver version is insufficient ...") in `reason`. Any
 * failure counts as "no GPU". */
bool ot_cuda_available(char *reason, size_t reason_len);

#ifdef __cplusplus
}
#endif

#endif
