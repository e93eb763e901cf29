/* backend_cpu.c — the CPU backend: the ot_backend vtable (exec/backend.h) over the
 * host kernels of kernels/cpu (ot_cpu_run_node and friends from kernels/kernel.h).
 * Device memory is host memory, so copies are memcpy and synchronise is a no-op. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"
#include "exec/backend.h"
#include "kernels/cpu/conv_dnnl.h"

#define CPU_ARENA_ALIGN 64

static ot_status cpu_arena_alloc(ot_backend *be, size_t bytes, void **base, ot_error *err) {
    (void)be;
    /* A multiple of the alignment; 0 bytes still gets a unique block. */
    size_t rounded = (bytes + CPU_ARENA_ALIGN - 1) / CPU_ARENA_ALIGN * CPU_ARENA_ALIGN;
    if (rounded == 0) rounded = CPU_ARENA_ALIGN;
    if (rounded < bytes || rounded > SIZE_MAX - CPU_ARENA_ALIGN)
        return ot_fail(err, OT_E_MEMORY, "cpu backend: arena of %zu bytes is too large", bytes);
    /* Zero-filled so gradient accumulators and optimizer state start at 0 and runs
     * are bitwise repeatable. calloc rather than aligned_alloc + memset: a large
     * block then comes from the kernel as zero pages that become resident only when
     * first written, so the executor can load the weights slot by slot while their
     * host copies are freed (ot_exec_options.release_host_data) without the whole
     * arena being resident next to those copies first. calloc takes no alignment:
     * the block is over-allocated by one alignment unit, and its start is kept in the
     * word just below the aligned base (malloc's blocks are at least 8-aligned, so
     * base - block <= CPU_ARENA_ALIGN). */
    char *block = calloc(1, rounded + CPU_ARENA_ALIGN);
    if (!block)
        return ot_fail(err, OT_E_MEMORY, "cpu backend: cannot allocate an arena of %zu bytes (%.1f MiB)", bytes,
                       (double)bytes / (1024.0 * 1024.0));
    uintptr_t at = ((uintptr_t)block + sizeof block + CPU_ARENA_ALIGN - 1) & ~(uintptr_t)(CPU_ARENA_ALIGN - 1);
    char *p = (char *)at;
    memcpy(p - sizeof block, &block, sizeof block);
    *base = p;
    return OT_OK;
}

static void cpu_arena_free(ot_backend *be, void *base) {
    (void)be;
    if (!base) return;
    char *block;
    memcpy(&block, (char *)base - sizeof block, sizeof block);
    free(block);
}

static ot_status cpu_copy(ot_backend *be, void *dst, const void *src, size_t n, ot_error *err) {
    (void)be;
    (void)err;
    if (n) memmove(dst, src, n);
    return OT_OK;
}

static ot_status cpu_run_node(ot_backend *be, const ot_graph *g, const ot_node *node, const ot_tensor *in,
                              ot_tensor *out, const ot_kernel_ctx *ctx, ot_error *err) {
    (void)be;
    (void)g;
    return ot_cpu_run_node(node, in, out, ctx, err);
}

static size_t cpu_workspace_bytes(ot_backend *be, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)be;
    return ot_cpu_workspace_bytes(node, in, out);
}

/* Kernel states (oneDNN's convolutions, conv_dnnl.c; low-precision GEMMs,
 * gemm_lowp.c) start with their own free function (ot_cpu_node_state). */
static void cpu_free_node_state(ot_backend *be, void *state) {
    (void)be;
    if (state) ((ot_cpu_node_state *)state)->free(state);
}

static bool cpu_supports(ot_backend *be, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)be;
    return ot_cpu_supports(node, in, out);
}

static ot_status cpu_synchronize(ot_backend *be, ot_error *err) {
    (void)be;
    (void)err;
    return OT_OK;
}

static void cpu_destroy(ot_backend *be) { free(be); }

/* The host loop the training loop would run after a copy (same order, same bits):
 * the loop uses the arena in place on the CPU, so this serves tests that drive the
 * device-side path (ot_train_options.scan_on_device) on the CPU. */
static ot_status cpu_scan_f32(ot_backend *be, const void *data, size_t n, int64_t *first_bad, double *sum_sq,
                              ot_error *err) {
    (void)be;
    (void)err;
    const float *x = data;
    *first_bad = -1;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            *first_bad = (int64_t)i;
            break;
        }
    if (sum_sq) *sum_sq = ot_grad_sum_sq(x, n);
    return OT_OK;
}

/* Gradient accumulation in the arena (exec/backend.h): the float adds the training
 * loop did on its host copies, element by element, so --accum's sums keep their bits. */
static ot_status cpu_accumulate_f32(ot_backend *be, float *dst, float *src, size_t n, bool clear_src,
                                    ot_error *err) {
    (void)be;
    (void)err;
    if (!clear_src) {
        for (size_t i = 0; i < n; i++) dst[i] += src[i];
        return OT_OK;
    }
    for (size_t i = 0; i < n; i++) { /* one pass: the accumulator is read once */
        dst[i] += src[i];
        src[i] = 0.0f;
    }
    return OT_OK;
}

ot_backend *ot_backend_cpu_new(int n_threads, ot_error *err) {
    if (n_threads < 0) {
        ot_fail(err, OT_E_USAGE, "cpu backend: thread count %d is negative", n_threads);
        return NULL;
    }
    ot_backend *be = calloc(1, sizeof *be);
    if (!be) {
        ot_fail(err, OT_E_MEMORY, "cpu backend: out of memory");
        return NULL;
    }
    be->name = "cpu";
    be->host_memory = true;
    be->scan_f32 = cpu_scan_f32;
    be->accumulate_f32 = cpu_accumulate_f32;
    be->arena_alloc = cpu_arena_alloc;
    be->arena_free = cpu_arena_free;
    be->copy_in = cpu_copy;
    be->copy_out = cpu_copy;
    be->run_node = cpu_run_node;
    be->workspace_bytes = cpu_workspace_bytes;
    be->supports = cpu_supports;
    be->free_node_state = cpu_free_node_state;
    be->synchronize = cpu_synchronize;
    be->destroy = cpu_destroy;
    be->n_threads = n_threads;
    return be;
}

ot_status ot_cpu_fold_eval(const ot_node *node, int rng_node, const ot_tensor *in, ot_tensor *out, ot_error *err) {
    ot_kernel_ctx kctx = {0};
    kctx.n_threads = 1;
    kctx.rng_node = rng_node;
    kctx.workspace_bytes = ot_cpu_workspace_bytes(node, in, out);
    void *workspace = NULL;
    if (kctx.workspace_bytes) {
        workspace = malloc(kctx.workspace_bytes);
        if (!workspace) return ot_fail(err, OT_E_MEMORY, "out of memory folding node '%s'", node->name);
        kctx.workspace = workspace;
    }
    ot_status st = ot_cpu_run_node(node, in, out, &kctx, err);
    free(workspace);
    return st;
}
