/* backend.h — the one interface between the executor and a device: allocate the
 * arena, copy tensors in and out, run a node, report scratch needs and support,
 * synchronise. The CPU backend (kernels/cpu/backend_cpu.c) implements it now, the
 * CUDA backend later; nothing outside kernels/ knows which one runs.
 *
 * Pointers handed out by arena_alloc are device pointers: only the backend may
 * dereference them. The executor does pointer arithmetic on them (base + offset)
 * and passes tensors whose `data` points into the arena to run_node. */
#ifndef OT_BACKEND_H
#define OT_BACKEND_H

#include "ir.h"
#include "exec/kernel_ctx.h"
#include "plan/planner.h"

typedef struct ot_backend ot_backend;

struct ot_backend {
    const char *name; /* "cpu", "cuda:0" */
    /* Allocates `bytes` of device memory, 64-byte aligned and zero-filled, in ONE
     * allocation (the planner's arena). bytes may be 0 (a valid, unique pointer). */
    ot_status (*arena_alloc)(ot_backend *be, size_t bytes, void **base, ot_error *err);
    void (*arena_free)(ot_backend *be, void *base);
    /* Host → device and device → host copies of n bytes. */
    ot_status (*copy_in)(ot_backend *be, void *dst, const void *src_host, size_t n, ot_error *err);
    ot_status (*copy_out)(ot_backend *be, void *dst_host, const void *src, size_t n, ot_error *err);
    /* Runs one node. `in`/`out` follow kernels/kernel.h (absent optional slots have
     * data == NULL); ctx->workspace points at the node's planned scratch. */
    ot_status (*run_node)(ot_backend *be, const ot_graph *g, const ot_node *node, const ot_tensor *in,
                          ot_tensor *out, const ot_kernel_ctx *ctx, ot_error *err);
    /* Scratch bytes the node needs; tensors carry dtype and shape only (data unused). */
    size_t (*workspace_bytes)(ot_backend *be, const ot_node *node, const ot_tensor *in, const ot_tensor *out);
    bool (*supports)(ot_backend *be, const ot_node *node, const ot_tensor *in, const ot_tensor *out);
    /* Waits for queued work; turns asynchronous device errors into a status. */
    ot_status (*synchronize)(ot_backend *be, ot_error *err);
    void (*destroy)(ot_backend *be);
    int n_threads; /* default thread count for kernels (0: the library's default) */
    /* Arena addresses are host pointers (the CPU backend): callers may read and write
     * values in place instead of through copy_out / copy_in. */
    bool host_memory;
    /* Optional (NULL: callers copy the values out and scan them on the host): scans n
     * float32 values at device address data without copying them. *first_bad: index
     * of the first non-finite one, -1 if none. sum_sq (may be NULL): the sum of their
     * squares in double (the CPU: in ot_grad_sum_sq's fixed order, as
     * ot_grad_global_norm; a GPU: in a fixed order of its own). The training loop's
     * NaN checks and gradient norm use it, so a GPU step does not copy every gradient
     * and param to the host. */
    ot_status (*scan_f32)(ot_backend *be, const void *data, size_t n, int64_t *first_bad, double *sum_sq,
                          ot_error *err);
    /* Optional (NULL: the training loop refuses --accum above 1 on this backend):
     * dst[i] += src[i] for n float32 values at device addresses dst and src, one IEEE
     * single rounding per element (no contraction), then src[i] = 0 when clear_src.
     * Gradient accumulation uses it to sum micro-batch gradients into accumulators in
     * the arena and to fold them back into the gradients for the step, so no gradient
     * goes through the host; the CPU's and a GPU's sums are bitwise the same (but for
     * the sign and payload of a NaN, which IEEE leaves to the hardware). */
    ot_status (*accumulate_f32)(ot_backend *be, float *dst, float *src, size_t n, bool clear_src, ot_error *err);
    /* Optional (NULL: its kernels keep no node state): frees what a kernel stored in
     * ot_kernel_ctx.node_state; the executor calls it once per non-NULL slot when it
     * is destroyed, before the backend is. */
    void (*free_node_state)(ot_backend *be, void *state);
    /* float32 GEMMs may run on TF32 tensor cores (--tf32, off by default: 10-bit
     * significands in the products, results about 1e-3 from float32's). A GPU
     * backend reads it before each node; the CPU has no TF32 and ignores it. */
    bool tf32;
    void *impl;    /* backend-private state */
};

/* The CPU backend over kernels/cpu (OpenBLAS + OpenMP). n_threads 0 = OpenMP's default. */
ot_backend *ot_backend_cpu_new(int n_threads, ot_error *err);
/* The planner's view of be (workspace sizes); be may be NULL (no workspace). */
ot_plan_device ot_backend_plan_device(ot_backend *be);
/* Calls be->destroy; NULL is fine. */
void ot_backend_free(ot_backend *be);

#endif
