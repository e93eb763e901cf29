/* kernel.h — what a kernel sees: a node (op + attributes), its input and output
 * tensors with static shapes and data pointers already placed by the planner, and a
 * small context (threads, RNG key). Shared by the CPU and CUDA backends; the backend
 * interface that the executor calls is in runtime/backend.h. */
#ifndef OT_KERNEL_H
#define OT_KERNEL_H

#include "ir.h"

typedef struct ot_kernel_ctx {
    int n_threads;       /* OpenMP threads on the CPU; results are bitwise repeatable for a fixed count */
    uint64_t seed;       /* run seed */
    uint64_t step;       /* training step (part of the Philox key) */
    int rng_node;        /* original node id (recompute clones pass the node they copy) */
    void *workspace;     /* scratch of ot_cpu_workspace_bytes() bytes, planned by the planner */
    size_t workspace_bytes;
    /* Per-step optimizer scalars read by SgdStep / AdamStep (runtime/optim.h): the
     * scheduled learning rate, the factor every gradient is multiplied by first
     * (global-norm clip × 1/accumulation), and the 1-based step count for Adam's bias
     * correction. Zero-initialised contexts are fine for every other op. */
    double opt_lr;
    float opt_grad_scale;
    int64_t opt_step;
} ot_kernel_ctx;

/* Runs one node on host memory. `in` has node->n_inputs entries (absent optional
 * inputs: data == NULL, dtype OT_UNDEFINED); `out` has node->n_outputs entries with
 * dtype, shape and data (allocated by the caller, sizes from shape inference; absent
 * optional outputs: data == NULL). Never allocates tensor memory of its own beyond
 * ctx->workspace. Returns OT_E_UNSUPPORTED naming the node for an op or dtype it lacks. */
ot_status ot_cpu_run_node(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err);

/* Scratch bytes the CPU kernel of this node needs (e.g. im2col), given the tensors'
 * dtypes and shapes (data pointers unused). 0 for most ops. */
size_t ot_cpu_workspace_bytes(const ot_node *node, const ot_tensor *in, const ot_tensor *out);

/* True when the CPU backend has a kernel for this op with these dtypes. */
bool ot_cpu_supports(const ot_node *node, const ot_tensor *in, const ot_tensor *out);

#endif
