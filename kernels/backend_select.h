/* backend_select.h — open a backend by name ("cpu", "cuda", "cuda:N"), so the CLI
 * and the training loop need not know which backends were built; and the only way
 * into the CUDA backend, which is a separate module (libonnxtrain_cuda.so) loaded with
 * dlopen the first time something asks for it. A CPU run never loads it, and so never
 * maps the CUDA runtime, cuBLAS or cuDNN.
 *
 * Where the module is looked for, in order:
 *   1. $ONNXTRAIN_CUDA_MODULE, when set: that file and nothing else;
 *   2. the folder of the running executable (/proc/self/exe), then its parent folder
 *      (the build tree's tests/ executables find the module one level up);
 *   3. the dynamic loader's search path (LD_LIBRARY_PATH, RUNPATH, ld.so.cache).
 * Once loaded the module stays loaded until the process exits. */
#ifndef OT_BACKEND_SELECT_H
#define OT_BACKEND_SELECT_H

#include <stdbool.h>
#include <stddef.h>

#include "exec/backend.h"

/* threads: kernel threads for the CPU backend (0 = OpenMP's default; ignored by
 * CUDA). NULL on failure: OT_E_USAGE for a malformed name, OT_E_DEVICE when CUDA was
 * not built in, the CUDA module cannot be loaded, or the GPU cannot be opened. */
ot_backend *ot_backend_new_by_name(const char *spec, int threads, ot_error *err);

/* The CUDA backend module's table (kernels/cuda/cuda_module.h), loading the module
 * if needed. NULL with OT_E_DEVICE and a message that says what to do when CUDA was
 * not built in, the module is missing, the libraries it needs cannot be loaded, or it
 * comes from another build. Needs no GPU. */
typedef struct ot_cuda_module ot_cuda_module;
const ot_cuda_module *ot_cuda_module_load(ot_error *err);

/* True when the CUDA module loads and at least one GPU is usable; otherwise false
 * with the reason (the loader's message, or e.g. "cudaGetDeviceCount: CUDA driver
 * version is insufficient ...") in `reason`. Any failure counts as "no GPU". */
bool ot_cuda_available(char *reason, size_t reason_len);

/* Free and total bytes of a CUDA backend's GPU (cudaMemGetInfo), for `--remat auto`
 * without --memory-budget. be must come from ot_backend_new_by_name("cuda[:N]"):
 * OT_E_USAGE for any other backend; OT_E_DEVICE without CUDA. */
ot_status ot_backend_cuda_mem_info(ot_backend *be, size_t *free_bytes, size_t *total_bytes, ot_error *err);

#endif
