/* cuda_module.h — the contract between onnxtrain_lib and the CUDA backend module
 * (libonnxtrain_cuda.so, built from kernels/cuda and opened with dlopen by
 * kernels/backend_select.c only when a run asks for --device cuda). The module exports
 * exactly one symbol, OT_CUDA_MODULE_ENTRY: a function returning a table of function
 * pointers. Plain C without CUDA headers, so the loader and the tests can include it
 * on any machine.
 *
 * The module carries its own (hidden) copy of the library code it calls: ot_fail, the
 * op table, the CPU kernels of the shape-only ops. Structs cross the boundary both ways
 * (nodes, tensors, the backend vtable, errors), so a module from another build must be
 * refused before anything else is called: `abi` is bumped by hand (with the entry
 * point's name) when the table changes; `layout` is computed by both sides from the
 * struct sizes and the op table, so it changes by itself when ir.h or ops.def do. */
#ifndef OT_CUDA_MODULE_H
#define OT_CUDA_MODULE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/backend.h"
#include "kernels/kernel.h" /* ot_cuda_op_kind */

#ifdef __cplusplus
extern "C" {
#endif

#define OT_CUDA_MODULE_ABI 3
#define OT_CUDA_MODULE_ENTRY "ot_cuda_module_v3"
#define OT_CUDA_MODULE_FILE "libonnxtrain_cuda.so"
/* Environment variable naming the module file; when set, only that file is tried. */
#define OT_CUDA_MODULE_ENV "ONNXTRAIN_CUDA_MODULE"

typedef struct ot_cuda_module {
    uint32_t abi; /* OT_CUDA_MODULE_ABI of the module's build; checked first */
    /* ot_cuda_module_layout() as the module computes it (with its own op table) */
    uint32_t (*layout)(void);
    /* exec/backend.h's CUDA backend on GPU `device`; NULL with OT_E_DEVICE when there
     * is no such GPU or a CUDA call fails (the message names the call). */
    ot_backend *(*backend_new)(int device, ot_error *err);
    /* Free and total bytes of the backend's GPU (cudaMemGetInfo); be must come from
     * backend_new, else OT_E_USAGE. */
    ot_status (*mem_info)(ot_backend *be, size_t *free_bytes, size_t *total_bytes, ot_error *err);
    /* True when a CUDA GPU is usable; otherwise false with the reason. */
    bool (*available)(char *reason, size_t reason_len);

    /* Host-side pieces, for tests/test_cuda.c on machines without a GPU. */
    /* The backend's supports() (dtypes, shapes and attributes only). */
    bool (*supports_node)(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
    /* True when the convolution geometry runs on cuDNN (directly or through the
     * explicit zero-pad path). */
    bool (*conv_supported)(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
    /* Workspace bytes of the node (those that need no cuDNN handle). */
    size_t (*workspace_bytes)(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
    /* The Dropout generator of the kernels, run on the host. */
    float (*philox_uniform)(uint64_t seed, uint64_t step, uint32_t node, uint64_t index);
    /* Runs the element code of a kernel that has a host mode (the pointwise,
     * layout, pooling, Dropout and optimizer kernels: kernels/cuda/cuda_internal.h
     * lists them) on the host over host tensors: the very per-element functions the
     * GPU runs, so tests can compare them with the CPU kernels without a GPU.
     * OT_E_UNSUPPORTED for other ops. */
    ot_status (*pointwise_host)(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                                ot_error *err);
    /* ot_backend.accumulate_f32's element code on the host over host floats. */
    ot_status (*accumulate_host)(float *dst, float *src, size_t n, bool clear_src, ot_error *err);
    /* What the module's op table holds for op (a launcher: OT_CUDA_KERNEL; the
     * host-copy path: OT_CUDA_CPU_ONLY), for tests to compare with the library's
     * ot_cuda_op_status (kernels/kernel.h). Since ABI 2. */
    ot_cuda_op_kind (*op_status)(ot_op op);

    /* Data-parallel training between GPUs through NCCL (kernels/cuda/cuda_nccl.c,
     * train/train_dist.c). All NULL when the module was built without NCCL. Since
     * ABI 3. The communicator spans the ranks of an MPI run: rank 0 makes the id
     * (OT_NCCL_ID_BYTES), every rank passes it to nccl_comm_new with its GPU's
     * backend (from backend_new). reduce_ordered and broadcast queue work on that
     * backend's stream over device floats; nccl_wait waits for it (timeout seconds,
     * or the stop flag: OT_E_PEER, the communicator aborted). reduce_ordered: on
     * rank 0 acc = (first ? +0 : acc) + mine, then + each other rank's mine in rank
     * order (the backend's accumulate adds); other ranks send mine. broadcast:
     * rank 0's send into every rank's recv. */
    ot_status (*nccl_unique_id)(void *id, size_t id_bytes, ot_error *err);
    ot_status (*nccl_comm_new)(ot_backend *be, const void *id, int rank, int nranks, double timeout,
                               const volatile sig_atomic_t *stop, void **comm, ot_error *err);
    void (*nccl_comm_free)(void *comm);
    ot_status (*nccl_reduce_ordered)(void *comm, const float *mine, float *acc, size_t n, bool first, ot_error *err);
    ot_status (*nccl_broadcast)(void *comm, const float *send, float *recv, size_t n, ot_error *err);
    ot_status (*nccl_wait)(void *comm, ot_error *err);
} ot_cuda_module;

/* Bytes of an NCCL unique id (NCCL_UNIQUE_ID_BYTES). */
#define OT_NCCL_ID_BYTES 128

typedef const ot_cuda_module *(*ot_cuda_module_entry_fn)(void);

/* A fingerprint of everything both sides must agree on: the sizes of the structs that
 * cross the boundary and the op table (names in enum order). Each side evaluates it
 * with its own copy of ir.h and of the op table. FNV-1a, 32 bits. */
static inline uint32_t ot_cuda_module_mix(uint32_t h, const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

static inline uint32_t ot_cuda_module_layout(void) {
    const uint64_t sizes[] = {sizeof(ot_backend), sizeof(ot_tensor),      sizeof(ot_shape),      sizeof(ot_node),
                              sizeof(ot_attr),    sizeof(ot_error),       sizeof(ot_kernel_ctx), sizeof(ot_graph),
                              sizeof(ot_value),   sizeof(ot_cuda_module), OT_MAX_RANK,           OT_OP_COUNT};
    uint32_t h = ot_cuda_module_mix(2166136261u, sizes, sizeof sizes);
    for (int op = 0; op < (int)OT_OP_COUNT; op++) {
        const char *name = ot_op_name((ot_op)op);
        if (name) {
            size_t n = 0;
            while (name[n])
                n++;
            h = ot_cuda_module_mix(h, name, n + 1);
        }
    }
    return h;
}

#ifdef __cplusplus
}
#endif

#endif
