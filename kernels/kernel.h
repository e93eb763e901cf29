/* kernel.h — what a kernel sees: a node (op + its typed params, ir/op_params.h,
 * resolved once; kernels never parse attributes by name), its input and output
 * tensors with static shapes and data pointers already placed by the planner, and a
 * small context (threads, RNG key). Shared by the CPU and CUDA backends, with the two
 * op-table queries tests walk (ot_cpu_has_kernel, ot_cuda_op_status); the backend
 * interface that the executor calls is in exec/backend.h. */
#ifndef OT_KERNEL_H
#define OT_KERNEL_H

#include "ir.h"
#include "exec/kernel_ctx.h"

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

/* True when the CPU op table (kernels/cpu/cpu_ops.c) has a kernel for op, whatever
 * the dtypes; false for OT_OP_UNKNOWN and out-of-range values. */
bool ot_cpu_has_kernel(ot_op op);

/* What the CUDA backend's op table (kernels/cuda/cuda_ops.def) says of an op:
 * a CUDA kernel, an explicit "CPU only" (the CUDA backend runs the CPU kernel on
 * host copies), or nothing. Answered by onnxtrain_lib itself (kernels/cuda_op_status.c),
 * so it needs neither a GPU nor the CUDA module. */
typedef enum ot_cuda_op_kind { OT_CUDA_MISSING = 0, OT_CUDA_KERNEL, OT_CUDA_CPU_ONLY } ot_cuda_op_kind;
ot_cuda_op_kind ot_cuda_op_status(ot_op op);

/* NULL when the CPU multiplies bfloat16 natively (AVX512-BF16 or AMX, as oneDNN
 * reports); else the line to say once at start of a run with bfloat16 GEMMs or
 * convolutions on the CPU: oneDNN emulates them (correct, slower). */
const char *ot_cpu_bf16_note(void);

/* ot_fold_eval_fn (ir/ir.h) over the CPU kernels: one thread, its own workspace.
 * Importers get it injected through ot_import_options.fold_eval. */
ot_status ot_cpu_fold_eval(const ot_node *node, int rng_node, const ot_tensor *in, ot_tensor *out, ot_error *err);

/* One tensor's part of the global gradient norm: the sum of squares in double, in
 * the fixed block-and-lane order of kernels/cpu/grad_norm_sum.h, the same bits on
 * every CPU (the CPU backend's scan and the training loop share it, so the norm is
 * the same whichever computes it). */
double ot_grad_sum_sq(const float *g, size_t n);

#endif
