/* backend_cuda.c — the CUDA backend's vtable (exec/backend.h): the context
 * (device, stream, cuBLAS / cuDNN handles, cuDNN algorithm cache; no globals), the
 * arena (one cudaMalloc, zero-filled), copies, node dispatch through the op table
 * (cuda_ops.c, from cuda_ops.def) and synchronisation. The table's CPU_ONLY ops
 * (Shape, Range, Constant, ConstantOfShape: folded at import, tiny when they remain)
 * run the CPU kernel on host copies of their inputs. It also holds the module's one
 * exported symbol, ot_cuda_module_v3 (kernels/cuda/cuda_module.h): this folder is
 * built into libonnxtrain_cuda.so, which kernels/backend_select.c loads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_common.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_module.h"
#include "kernels/cuda/cuda_nccl.h"

ot_status ot_cuda_fail(ot_error *err, const char *file, int line, const char *call, const char *what) {
    const char *base = strrchr(file, '/');
    return ot_fail(err, OT_E_DEVICE, "%s:%d: %s failed: %s", base ? base + 1 : file, line, call, what);
}

ot_status ot_cuda_bad_dtype(const ot_node *node, const char *what, ot_dtype t, ot_error *err) {
    return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): the CUDA kernel does not support %s of dtype %s",
                   node->name ? node->name : "?", node->op_type ? node->op_type : ot_op_name(node->op), what,
                   ot_dtype_name(t));
}

const char *ot_cublas_status_text(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
    }
}

/* cx NULL (the host mode of cuda_internal.h): t->data is host memory. */
static ot_status copy_small(ot_cuda_ctx *cx, void *host, const void *src, size_t n, ot_error *err) {
    if (!cx) {
        memcpy(host, src, n);
        return OT_OK;
    }
    OT_CUDA_CHECK(cudaMemcpyAsync(host, src, n, cudaMemcpyDeviceToHost, cx->stream));
    OT_CUDA_CHECK(cudaStreamSynchronize(cx->stream));
    return OT_OK;
}

ot_status ot_cuda_read_ints(ot_cuda_ctx *cx, const ot_tensor *t, int64_t *v, int max, int *n, ot_error *err) {
    int64_t c = ot_kernel_numel(t);
    size_t es = ot_dtype_size(t->dtype);
    if (!t->data || c > max || !ot_kernel_is_int_dtype(t->dtype))
        return ot_fail(err, OT_E_MODEL, "cuda backend: expected an integer tensor of at most %d elements", max);
    unsigned char host[OT_MAX_RANK * 8 * 8];
    if ((size_t)c * es > sizeof host) return ot_fail(err, OT_E_MODEL, "cuda backend: integer tensor too long");
    if (c > 0) {
        ot_status st = copy_small(cx, host, t->data, (size_t)c * es, err);
        if (st) return st;
    }
    for (int64_t i = 0; i < c; i++) ot_kernel_load_int(t->dtype, host, i, &v[i]);
    *n = (int)c;
    return OT_OK;
}

ot_status ot_cuda_read_double(ot_cuda_ctx *cx, const ot_tensor *t, double *v, ot_error *err) {
    size_t es = ot_dtype_size(t->dtype);
    unsigned char host[16];
    if (!t->data || ot_kernel_numel(t) < 1 || es == 0 || es > sizeof host)
        return ot_fail(err, OT_E_MODEL, "cuda backend: expected a numeric scalar tensor");
    ot_status st = copy_small(cx, host, t->data, es, err);
    if (st) return st;
    if (!ot_kernel_load_double(t->dtype, host, 0, v))
        return ot_fail(err, OT_E_MODEL, "cuda backend: scalar of dtype %s is not numeric", ot_dtype_name(t->dtype));
    return OT_OK;
}

/* ---- dispatch -------------------------------------------------------------------- */

/* Shape-only ops: inputs copied to the host, the CPU kernel, outputs copied back. */
static ot_status run_on_host(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, ot_tensor *out,
                             const ot_kernel_ctx *ctx, ot_error *err) {
    ot_status st = OT_OK;
    int ni = node->n_inputs, no = node->n_outputs;
    ot_tensor *hin = calloc((size_t)(ni + no) + 1, sizeof *hin);
    ot_tensor *hout = hin + ni;
    if (!hin) return ot_fail(err, OT_E_MEMORY, "cuda backend: out of memory");
    for (int k = 0; k < ni; k++) {
        hin[k] = in[k];
        hin[k].data = NULL;
        size_t nb = (size_t)ot_kernel_numel(&in[k]) * ot_dtype_size(in[k].dtype);
        /* Shape and Size read the shape only */
        if (!in[k].data || node->op == OT_OP_SHAPE || node->op == OT_OP_SIZE) continue;
        if (!(hin[k].data = malloc(nb ? nb : 1))) goto oom;
        if (nb) {
            cudaError_t e = cudaMemcpyAsync(hin[k].data, in[k].data, nb, cudaMemcpyDeviceToHost, cx->stream);
            if (e == cudaSuccess) e = cudaStreamSynchronize(cx->stream);
            if (e != cudaSuccess) {
                st = ot_cuda_fail(err, __FILE__, __LINE__, "cudaMemcpyAsync(D2H)", cudaGetErrorString(e));
                goto fail;
            }
        }
    }
    for (int k = 0; k < no; k++) {
        hout[k] = out[k];
        hout[k].data = NULL;
        size_t nb = (size_t)ot_kernel_numel(&out[k]) * ot_dtype_size(out[k].dtype);
        if (!out[k].data) continue;
        if (!(hout[k].data = calloc(1, nb ? nb : 1))) goto oom;
    }
    ot_kernel_ctx hctx = *ctx;
    hctx.workspace = NULL;
    hctx.workspace_bytes = 0;
    if ((st = ot_cpu_run_node(node, hin, hout, &hctx, err))) goto fail;
    for (int k = 0; k < no; k++) {
        size_t nb = (size_t)ot_kernel_numel(&out[k]) * ot_dtype_size(out[k].dtype);
        if (!out[k].data || !nb) continue;
        cudaError_t e = cudaMemcpyAsync(out[k].data, hout[k].data, nb, cudaMemcpyHostToDevice, cx->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(cx->stream); /* host buffers are freed below */
        if (e != cudaSuccess) {
            st = ot_cuda_fail(err, __FILE__, __LINE__, "cudaMemcpyAsync(H2D)", cudaGetErrorString(e));
            goto fail;
        }
    }
    goto done;
oom:
    st = ot_fail(err, OT_E_MEMORY, "cuda backend: out of memory staging node '%s'", node->name);
fail:
done:
    for (int k = 0; k < ni + no; k++) free(hin[k].data);
    free(hin);
    return st;
}

static ot_status cuda_run_node(ot_backend *be, const ot_graph *g, const ot_node *node, const ot_tensor *in,
                               ot_tensor *out, const ot_kernel_ctx *ctx, ot_error *err) {
    (void)g;
    ot_cuda_ctx *cx = be->impl;
    ot_kernel_ctx dflt;
    memset(&dflt, 0, sizeof dflt);
    if (!ctx) ctx = &dflt;
    const char *opname = node->op_type && node->op_type[0] ? node->op_type : ot_op_name(node->op);
    if (node->op <= OT_OP_UNKNOWN || node->op >= OT_OP_COUNT)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s': no CUDA kernel for %s", node->name, opname);
    /* the calling thread may not be the one that opened the device (cuda:N, N > 0) */
    OT_CUDA_CHECK(cudaSetDevice(cx->device));
    const ot_op_info *info = ot_op_get(node->op);
    if (node->n_inputs < info->min_inputs || (info->max_inputs >= 0 && node->n_inputs > info->max_inputs) ||
        node->n_outputs < info->min_outputs || (info->max_outputs >= 0 && node->n_outputs > info->max_outputs))
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): %d inputs / %d outputs outside the op's arity", node->name,
                       opname, node->n_inputs, node->n_outputs);
    const ot_cuda_op_row *row = ot_cuda_op_row_of(node->op);
    if (row && row->status == OT_CUDA_CPU_ONLY) return run_on_host(cx, node, in, out, ctx, err);
    ot_cuda_kernel_fn fn = row ? row->run : NULL;
    if (!fn) return ot_fail(err, OT_E_UNSUPPORTED, "node '%s': no CUDA kernel for %s", node->name, opname);
    for (int k = 0; k < info->min_inputs; k++)
        if (!in[k].data && ot_kernel_numel(&in[k]) > 0)
            return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): required input %d has no data", node->name, opname, k);
    if (node->n_outputs > 0 && !out[0].data && ot_kernel_numel(&out[0]) > 0)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): output 0 has no buffer", node->name, opname);
    snprintf(cx->last_node, sizeof cx->last_node, "'%s' (%s)", node->name ? node->name : "?", opname);
    cx->tf32 = be->tf32;
    ot_status st = fn(cx, node, in, out, ctx, err);
    if (st == OT_OK && cx->sync_each) {
        /* a kernel's fault surfaces at the next synchronisation: here, the node's */
        cudaError_t e = cudaStreamSynchronize(cx->stream);
        if (e == cudaSuccess) e = cudaGetLastError();
        if (e != cudaSuccess)
            return ot_fail(err, OT_E_DEVICE, "%s: node '%s' (%s) failed on the GPU: %s (%s)", cx->name, node->name,
                           opname, cudaGetErrorName(e), cudaGetErrorString(e));
    }
    return st;
}

/* ---- supports / workspace: the op table's (cuda_ops.c) ---------------------------- */

static bool cuda_supports(ot_backend *be, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)be;
    return ot_cuda_supports_node(node, in, out);
}

static size_t cuda_workspace_bytes(ot_backend *be, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    return ot_cuda_node_workspace(be->impl, node, in, out);
}

/* ---- memory ------------------------------------------------------------------------- */

static ot_status cuda_arena_alloc(ot_backend *be, size_t bytes, void **base, ot_error *err) {
    ot_cuda_ctx *cx = be->impl;
    size_t n = bytes ? bytes : 256; /* 0 bytes still gets a unique block */
    void *p = NULL;
    OT_CUDA_CHECK(cudaSetDevice(cx->device));
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        size_t free_b = 0, total = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total);
        return ot_fail(err, OT_E_MEMORY,
                       "%s: cannot allocate an arena of %zu bytes (%.1f MiB; %.1f MiB free of %.1f MiB): %s; lower the "
                       "batch size or use --remat with --memory-budget",
                       cx->name, bytes, (double)bytes / 1048576.0, (double)free_b / 1048576.0,
                       (double)total / 1048576.0, cudaGetErrorString(e));
    }
    /* cudaMalloc is 256-byte aligned (the contract asks for 64); zero-filled so
     * gradient accumulators and optimizer state start at 0 */
    e = cudaMemsetAsync(p, 0, n, cx->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cx->stream);
    if (e != cudaSuccess) {
        cudaFree(p);
        return ot_cuda_fail(err, __FILE__, __LINE__, "cudaMemsetAsync(arena)", cudaGetErrorString(e));
    }
    *base = p;
    return OT_OK;
}

static void cuda_arena_free(ot_backend *be, void *base) {
    ot_cuda_ctx *cx = be->impl;
    if (!base) return;
    cudaSetDevice(cx->device);
    cudaStreamSynchronize(cx->stream);
    cudaFree(base);
}

static ot_status cuda_synchronize(ot_backend *be, ot_error *err);

static ot_status cuda_copy_in(ot_backend *be, void *dst, const void *src, size_t n, ot_error *err) {
    ot_cuda_ctx *cx = be->impl;
    if (!n) return OT_OK;
    OT_CUDA_CHECK(cudaSetDevice(cx->device));
    /* synchronous: the caller may free or reuse the host buffer on return */
    OT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, cx->stream));
    OT_CUDA_CHECK(cudaStreamSynchronize(cx->stream));
    return OT_OK;
}

static ot_status cuda_copy_out(ot_backend *be, void *dst, const void *src, size_t n, ot_error *err) {
    ot_cuda_ctx *cx = be->impl;
    if (!n) return OT_OK;
    OT_CUDA_CHECK(cudaSetDevice(cx->device));
    OT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, cx->stream));
    /* the copy is queued behind every node run so far: a fault of one of them shows
     * here first, so say so rather than blame the copy */
    return cuda_synchronize(be, err);
}

static ot_status cuda_synchronize(ot_backend *be, ot_error *err) {
    ot_cuda_ctx *cx = be->impl;
    OT_CUDA_CHECK(cudaSetDevice(cx->device));
    cudaError_t e = cudaStreamSynchronize(cx->stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    /* an asynchronous fault of any node queued since the last synchronisation: name
     * the last one and say how to find the culprit */
    if (e != cudaSuccess)
        return ot_fail(err, OT_E_DEVICE,
                       "%s: a GPU kernel failed: %s (%s); the last node queued was %s; rerun with "
                       "ONNXTRAIN_CUDA_SYNC=1 to name the node that failed",
                       cx->name, cudaGetErrorName(e), cudaGetErrorString(e), cx->last_node[0] ? cx->last_node : "none");
    return OT_OK;
}

static void ctx_free(ot_cuda_ctx *cx) {
    if (!cx) return;
    if (cx->stream) {
        cudaSetDevice(cx->device);
        cudaStreamSynchronize(cx->stream);
    }
    if (cx->scan_sums) cudaFree(cx->scan_sums);
    if (cx->scan_bad) cudaFree(cx->scan_bad);
    if (cx->cudnn) cudnnDestroy(cx->cudnn);
    if (cx->cublas) cublasDestroy(cx->cublas);
    if (cx->stream) cudaStreamDestroy(cx->stream);
    free(cx->algos);
    free(cx);
}

static ot_status cuda_scan_f32(ot_backend *be, const void *data, size_t n, int64_t *first_bad, double *sum_sq,
                               ot_error *err) {
    return ot_cuda_scan_f32(be->impl, data, n, first_bad, sum_sq, err);
}

static ot_status cuda_accumulate_f32(ot_backend *be, float *dst, float *src, size_t n, bool clear_src,
                                     ot_error *err) {
    return ot_cuda_accumulate_f32(be->impl, dst, src, n, clear_src, err);
}

/* The accumulation's element code on the host (no context), for tests. */
static ot_status cuda_accumulate_host(float *dst, float *src, size_t n, bool clear_src, ot_error *err) {
    return ot_cuda_accumulate_f32(NULL, dst, src, n, clear_src, err);
}

static void cuda_destroy(ot_backend *be) {
    if (!be) return;
    ctx_free(be->impl);
    free(be);
}

static ot_status cuda_mem_info(ot_backend *be, size_t *free_bytes, size_t *total_bytes, ot_error *err) {
    if (!be || be->destroy != cuda_destroy)
        return ot_fail(err, OT_E_USAGE, "ot_backend_cuda_mem_info: not a CUDA backend");
    ot_cuda_ctx *cx = be->impl;
    OT_CUDA_CHECK(cudaSetDevice(cx->device));
    OT_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
    return OT_OK;
}

static bool cuda_available(char *reason, size_t reason_len) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        if (reason) snprintf(reason, reason_len, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return false;
    }
    if (count < 1) {
        if (reason) snprintf(reason, reason_len, "cudaGetDeviceCount: 0 devices");
        return false;
    }
    if (reason && reason_len) reason[0] = '\0';
    return true;
}

static ot_status ctx_open(ot_cuda_ctx *cx, int device, ot_error *err) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return ot_fail(err, OT_E_DEVICE, "cuda:%d: no CUDA GPU found (cudaGetDeviceCount: %s)", device,
                       cudaGetErrorString(e));
    if (device < 0 || device >= count)
        return ot_fail(err, OT_E_DEVICE, "cuda:%d: no such GPU (%d found; use cuda:0 to cuda:%d)", device, count,
                       count - 1);
    OT_CUDA_CHECK(cudaSetDevice(device));
    OT_CUDA_CHECK(cudaStreamCreateWithFlags(&cx->stream, cudaStreamNonBlocking));
    OT_CUBLAS_CHECK(cublasCreate(&cx->cublas));
    OT_CUBLAS_CHECK(cublasSetStream(cx->cublas, cx->stream));
    /* full float32 (no TF32): results must follow the CPU within 1e-5 */
    OT_CUBLAS_CHECK(cublasSetMathMode(cx->cublas, CUBLAS_PEDANTIC_MATH));
    OT_CUDNN_CHECK(cudnnCreate(&cx->cudnn));
    OT_CUDNN_CHECK(cudnnSetStream(cx->cudnn, cx->stream));
    OT_CUDA_CHECK(cudaMalloc((void **)&cx->scan_sums, OT_CUDA_SCAN_BLOCKS * sizeof(double)));
    OT_CUDA_CHECK(cudaMalloc((void **)&cx->scan_bad, OT_CUDA_SCAN_BLOCKS * sizeof(long long)));
    const char *sync = getenv("ONNXTRAIN_CUDA_SYNC");
    cx->sync_each = sync && sync[0] && strcmp(sync, "0") != 0;
    return OT_OK;
}

static ot_backend *cuda_backend_new(int device, ot_error *err) {
    ot_backend *be = calloc(1, sizeof *be);
    ot_cuda_ctx *cx = calloc(1, sizeof *cx);
    if (!be || !cx) {
        free(be);
        free(cx);
        ot_fail(err, OT_E_MEMORY, "cuda backend: out of memory");
        return NULL;
    }
    cx->device = device;
    snprintf(cx->name, sizeof cx->name, "cuda:%d", device);
    if (ot_cuda_check_op_table(err) != OT_OK || ctx_open(cx, device, err) != OT_OK) {
        ctx_free(cx);
        free(be);
        return NULL;
    }
    be->name = cx->name;
    be->arena_alloc = cuda_arena_alloc;
    be->arena_free = cuda_arena_free;
    be->copy_in = cuda_copy_in;
    be->copy_out = cuda_copy_out;
    be->run_node = cuda_run_node;
    be->workspace_bytes = cuda_workspace_bytes;
    be->supports = cuda_supports;
    be->synchronize = cuda_synchronize;
    be->destroy = cuda_destroy;
    be->scan_f32 = cuda_scan_f32;
    be->accumulate_f32 = cuda_accumulate_f32;
    be->impl = cx;
    return be;
}

/* ---- the module's entry point ------------------------------------------------------- */

bool ot_cuda_has_host_mode(ot_cuda_kernel_fn fn) {
    static const ot_cuda_kernel_fn with[] = {
        ot_cuda_unary,       ot_cuda_binary,      ot_cuda_equal,      ot_cuda_where,       ot_cuda_sum,
        ot_cuda_expand,      ot_cuda_expand_like, ot_cuda_cast,       ot_cuda_copy_view,   ot_cuda_act_grad,
        ot_cuda_dropout,     ot_cuda_dropout_grad, ot_cuda_fill_like, ot_cuda_transpose,   ot_cuda_concat,
        ot_cuda_split,       ot_cuda_slice,       ot_cuda_slice_grad, ot_cuda_gather,      ot_cuda_gather_grad,
        ot_cuda_max_pool,    ot_cuda_average_pool, ot_cuda_pool_grad, ot_cuda_mse_loss_grad, ot_cuda_elementwise_loss_grad, ot_cuda_sgd_step,
        ot_cuda_adam_step,
        /* issue 13: comparison, logic and pointwise math */
        ot_cuda_compare,     ot_cuda_predicate,   ot_cuda_math_unary, ot_cuda_minmax,      ot_cuda_mod,
        ot_cuda_math_grad,   ot_cuda_mod_grad,    ot_cuda_minmax_grad,
        /* layout and indexing (issue 13) */
        ot_cuda_pad, ot_cuda_tile, ot_cuda_trilu, ot_cuda_gather_elements, ot_cuda_cumsum, ot_cuda_pad_grad,
        ot_cuda_gather_elements_grad, ot_cuda_scatter_nd, ot_cuda_scatter_elements, ot_cuda_gather_nd,
        /* random sources (issue 13) */
        ot_cuda_random_uniform,
        /* ops batch 1 (issue 26) */
        ot_cuda_act_unary, ot_cuda_prelu, ot_cuda_act_ext_grad, ot_cuda_prelu_grad,
        ot_cuda_reduce_ext, ot_cuda_arg_reduce, ot_cuda_reduce_grad, ot_cuda_group_norm, ot_cuda_group_norm_grad,
        /* spatial ops (issue 26, ops batch 2) */
        ot_cuda_resize, ot_cuda_resize_grad, ot_cuda_depth_space,
        /* ops3 (issue 26): transformer ops */
        ot_cuda_rms_norm, ot_cuda_rms_norm_grad, ot_cuda_rotary_embedding, ot_cuda_attention, ot_cuda_attention_grad,
        /* ops batch 4 (issue 26) */
        ot_cuda_einsum, ot_cuda_top_k, ot_cuda_one_hot,
        /* recurrent ops (issue 26) */
        ot_cuda_rnn, ot_cuda_rnn_grad,
    };
    for (size_t i = 0; fn && i < sizeof with / sizeof with[0]; i++)
        if (with[i] == fn) return true;
    return false;
}

/* The kernels with a host mode run their element code on the host when given no
 * context (cuda_internal.h); anything else is OT_E_UNSUPPORTED. */
static ot_status cuda_pointwise_host(const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                     const ot_kernel_ctx *ctx, ot_error *err) {
    ot_kernel_ctx dflt;
    memset(&dflt, 0, sizeof dflt);
    const ot_cuda_op_row *row = ot_cuda_op_row_of(node->op);
    ot_cuda_kernel_fn fn = row ? row->run : NULL;
    if (!ot_cuda_has_host_mode(fn))
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): no host mode for this CUDA kernel", node->name,
                       ot_op_name(node->op));
    return fn(NULL, node, in, out, ctx ? ctx : &dflt, err);
}

static uint32_t module_layout(void) { return ot_cuda_module_layout(); }

static const ot_cuda_module MODULE = {
    .abi = OT_CUDA_MODULE_ABI,
    .layout = module_layout,
    .backend_new = cuda_backend_new,
    .mem_info = cuda_mem_info,
    .available = cuda_available,
    .supports_node = ot_cuda_supports_node,
    .conv_supported = ot_cuda_conv_supported,
    .workspace_bytes = ot_cuda_host_workspace,
    .philox_uniform = ot_cuda_philox_uniform_host,
    .pointwise_host = cuda_pointwise_host,
    .accumulate_host = cuda_accumulate_host,
    .op_status = ot_cuda_module_op_status,
#ifdef OT_HAVE_NCCL
    .nccl_unique_id = ot_cuda_nccl_unique_id,
    .nccl_comm_new = ot_cuda_nccl_comm_new,
    .nccl_comm_free = ot_cuda_nccl_comm_free,
    .nccl_reduce_ordered = ot_cuda_nccl_reduce_ordered,
    .nccl_broadcast = ot_cuda_nccl_broadcast,
    .nccl_wait = ot_cuda_nccl_wait,
#endif
};

/* The one symbol the module exports (cuda_module.map hides everything else). */
const ot_cuda_module *ot_cuda_module_v3(void);
const ot_cuda_module *ot_cuda_module_v3(void) { return &MODULE; }
