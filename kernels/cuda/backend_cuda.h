/* backend_cuda.h — the CUDA backend's public functions, for callers that include this
 * header (runtime/train.c). The backend itself is the module libonnxtrain_cuda.so,
 * loaded on demand; everything outside kernels/cuda reaches it through the loader in
 * kernels/backend_select.h, which declares ot_cuda_available and
 * ot_backend_cuda_mem_info (both usable with or without CUDA built in). The module's
 * own interface is kernels/cuda/cuda_module.h. New code should include
 * kernels/backend_select.h directly. */
#ifndef OT_BACKEND_CUDA_H
#define OT_BACKEND_CUDA_H

#include "kernels/backend_select.h"

#endif
