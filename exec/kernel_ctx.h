/* kernel_ctx.h — the small context every kernel call gets (threads, the Philox key,
 * the planned workspace, the optimizer's per-step scalars, a test switch): whatever a
 * kernel's behaviour depends on beyond its node and tensors, so kernels need no
 * globals. It lives in exec/ because the backend interface (exec/backend.h) passes
 * it, and kernels/ sits above exec/. */
#ifndef OT_KERNEL_CTX_H
#define OT_KERNEL_CTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where the optimizer kernels report on the values they updated in place, so that the
 * training loop's check of the updated params needs no pass of its own: a kernel that
 * checked what it wrote adds 1 to `checked`, and sets `nonfinite` when a value it wrote
 * is NaN or Inf. A kernel that does not report leaves both alone; the loop then scans
 * the updated values itself (train/train_loop.c). The executor resets it every run. */
typedef struct ot_update_check {
    int checked;
    bool nonfinite;
} ot_update_check;

typedef struct ot_kernel_ctx {
    int n_threads;       /* CPU threads (OpenMP and OpenBLAS); results are bitwise repeatable for a fixed count */
    uint64_t seed;       /* run seed */
    uint64_t step;       /* training step (part of the Philox key) */
    int rng_node;        /* original node id (recompute clones pass the node they copy) */
    void *workspace;     /* scratch of ot_cpu_workspace_bytes() bytes, planned by the planner */
    size_t workspace_bytes;
    /* Per-step optimizer scalars read by SgdStep / AdamStep (train/optim.h): the
     * scheduled learning rate, the factor every gradient is multiplied by first
     * (global-norm clip × 1/accumulation), and the 1-based step count for Adam's bias
     * correction. Zero-initialised contexts are fine for every other op. */
    double opt_lr;
    float opt_grad_scale;
    int64_t opt_step;
    /* Tests only: ConvGradInput / ConvGradWeight skip their fast paths (1x1,
     * depthwise, hoisted im2col / col2im ranges) and run the plain GEMM +
     * per-element im2col / col2im path, so a test can compare the two. */
    bool conv_grad_general;
    /* Tests and bench only: Conv and its gradients never run on oneDNN
     * (kernels/cpu/conv_dnnl.c), so a test can compare the two. */
    bool no_dnnl;
    ot_update_check *update_check; /* NULL: nobody asks (tests, folding) */
    /* NULL: nobody asks. Else an optimizer kernel that applies its update may store
     * the sum of squares of the gradient it read (ot_grad_sum_sq's bits) in
     * grad_ss[j] for the j-th node it updated (j = 0: this one; j < *run_done with a
     * run), taken on the way through the update, so that the training loop's
     * gradient norm needs no pass of its own (train/train_check.c). The caller marks
     * the slots it wants with a NaN; a kernel fills only those and leaves the others
     * alone, and one that does not store leaves every slot alone. */
    double *grad_ss;
    /* A run of optimizer nodes (exec/executor.c): when run_len > 1 this node is the
     * first of run_len consecutive schedule steps of the same op, and run_nodes[j] /
     * run_in[j] are step j's node and input descriptors (j = 0: this node). A kernel
     * that updates the whole run in one pass (one OpenMP team over every param, not
     * one per param: issue 14) stores run_len in *run_done and the executor runs no
     * kernel for the others; one that leaves *run_done at 1 updated this node only.
     * Every element's update is the same, so the bits do not change. */
    int run_len;
    const struct ot_node *const *run_nodes;
    const struct ot_tensor *const *run_in;
    int *run_done;
    /* This node's slot that lasts across runs (one per schedule step of an executor;
     * NULL where nothing lasts: folding, tests calling a kernel directly). A kernel may
     * keep what is costly to build once per node here (oneDNN primitives,
     * kernels/cpu/conv_dnnl.c); it owns what it stores, and the executor hands a
     * non-NULL *node_state to the backend's free_node_state when it is destroyed.
     * What a kernel keeps must not change its results: it stands for work the kernel
     * could redo on every call. */
    void **node_state;
} ot_kernel_ctx;

#endif
