/* cuda_blas.c — the heavy ops on vendor libraries: Gemm and MatMul through cuBLAS
 * (row-major via the operand swap: a row-major X is a column-major X^T, so
 * Y^T = op(B)^T op(A)^T; bfloat16 / float16 operands on tensor cores with float32
 * sums, and float32 on TF32 tensor cores with --tf32, through cublasGemmEx), and Conv, ConvGradInput, ConvGradWeight through cuDNN with
 * FMA math (no TF32) and deterministic algorithms, chosen once per node shape and
 * cached in the context; bfloat16 / float16 convolutions (X, W, Y of one dtype)
 * with tensor-core math and float32 compute, deterministic algorithms too. 1-D convolutions run as 2-D with a height of 1, 3-D ones
 * through cuDNN's Nd descriptors; pads cuDNN cannot express (begin != end where that
 * moves the windows: auto_pad SAME with an odd total, PyTorch's F.pad folded into
 * Conv) run on a zero-padded copy of X in the workspace (ot_cuda_pad_copy). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_common.h"
#include "kernels/pool_geometry.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/matmul_geometry.h"

/* True when every value fits cuBLAS's 32-bit int arguments. */
static bool fits_int(const int64_t *v, int n) {
    for (int i = 0; i < n; i++)
        if (v[i] < 0 || v[i] > INT_MAX) return false;
    return true;
}

static cudaDataType_t cu_type(ot_dtype t) {
    return t == OT_BF16 ? CUDA_R_16BF : t == OT_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* What a Gemm / MatMul of A, B of dtype ab into Y of dtype yt runs: float32
 * throughout, or bfloat16 / float16 A and B into float32 or their own dtype. */
bool ot_cuda_gemm_dtypes(ot_dtype ab, ot_dtype b, ot_dtype yt) {
    if (ab != b) return false;
    if (ab == OT_F32) return yt == OT_F32;
    return (ab == OT_BF16 || ab == OT_F16) && (yt == OT_F32 || yt == ab);
}

/* The GemmEx path: low-precision operands, or float32 ones on TF32 tensor cores. */
static bool gemm_ex(const ot_cuda_ctx *cx, ot_dtype ab) { return ab != OT_F32 || cx->tf32; }

/* Row-major C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C, lda/ldb the row lengths;
 * A and B of dtype ab, C of dtype ct. Float32 without --tf32 runs cublasSgemm (FMA,
 * as before issue 27); the rest cublasGemmEx with float32 compute
 * (CUBLAS_COMPUTE_32F: tensor cores for bfloat16 / float16 operands, float32 sums;
 * CUBLAS_COMPUTE_32F_FAST_TF32 for float32 with --tf32). Sizes past INT_MAX (a tall
 * GEMM of batch x rows, say) go through the 64-bit API rather than being truncated
 * by an (int) cast. */
static ot_status gemm_rm(ot_cuda_ctx *cx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                         const void *a, int64_t lda, const void *b, int64_t ldb, float beta, void *c, int64_t ldc,
                         ot_dtype ab, ot_dtype ct, ot_error *err) {
    const int64_t dims[6] = {M, N, K, lda, ldb, ldc};
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    bool small = fits_int(dims, 6);
    if (!gemm_ex(cx, ab)) {
        if (small)
            OT_CUBLAS_CHECK(cublasSgemm(cx->cublas, opb, opa, (int)N, (int)M, (int)K, &alpha, b, (int)ldb, a,
                                        (int)lda, &beta, c, (int)ldc));
        else
            OT_CUBLAS_CHECK(cublasSgemm_64(cx->cublas, opb, opa, N, M, K, &alpha, b, ldb, a, lda, &beta, c, ldc));
        return OT_OK;
    }
    cublasComputeType_t comp = ab == OT_F32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cudaDataType_t ty = cu_type(ab), cty = cu_type(ct);
    if (small)
        OT_CUBLAS_CHECK(cublasGemmEx(cx->cublas, opb, opa, (int)N, (int)M, (int)K, &alpha, b, ty, (int)ldb, a, ty,
                                     (int)lda, &beta, c, cty, (int)ldc, comp, CUBLAS_GEMM_DEFAULT));
    else
        OT_CUBLAS_CHECK(cublasGemmEx_64(cx->cublas, opb, opa, N, M, K, &alpha, b, ty, ldb, a, ty, lda, &beta, c, cty,
                                        ldc, comp, CUBLAS_GEMM_DEFAULT));
    return OT_OK;
}

ot_status ot_cuda_sgemm(ot_cuda_ctx *cx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a,
                        int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc, ot_error *err) {
    return gemm_rm(cx, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, OT_F32, OT_F32, err);
}

OT_CUDA_LAUNCHER(ot_cuda_gemm) {
    (void)ctx;
    ot_dtype ab = in[0].dtype, yt = out[0].dtype;
    if (!ot_cuda_gemm_dtypes(ab, in[1].dtype, yt))
        return ot_cuda_bad_dtype(node, in[1].dtype != ab ? "input 1" : "output", in[1].dtype != ab ? in[1].dtype : yt,
                                 err);
    bool has_c = node->n_inputs > 2 && in[2].data;
    if (has_c && in[2].dtype != OT_F32 && in[2].dtype != ab) return ot_cuda_bad_dtype(node, "input 2", in[2].dtype, err);
    ot_matmul_geometry g;
    ot_status st = ot_gemm_geometry_init(&g, node, &in[0], &in[1], &out[0], err);
    if (st) return st;
    has_c = has_c && g.beta != 0.0f;
    if (has_c && (st = ot_cuda_broadcast_scaled(cx, node, &in[2], &out[0], g.beta, err))) return st;
    if (g.M == 0 || g.N == 0) return OT_OK;
    if (g.K == 0) {
        if (!has_c)
            OT_CUDA_CHECK(cudaMemsetAsync(out[0].data, 0, (size_t)(g.M * g.N) * ot_dtype_size(yt), cx->stream));
        return OT_OK;
    }
    return gemm_rm(cx, g.ta, g.tb, g.M, g.N, g.K, g.alpha, in[0].data, in[0].shape.dim[1], in[1].data,
                   in[1].shape.dim[1], has_c ? 1.0f : 0.0f, out[0].data, g.N, ab, yt, err);
}

/* batch GEMMs of one shape, A and B each dense (strides M*K, K*N) or shared (stride 0) */
static ot_status gemm_strided(ot_cuda_ctx *cx, const ot_matmul_geometry *g, const void *a, bool a_shared,
                              const void *b, bool b_shared, void *y, ot_dtype ab, ot_dtype yt, ot_error *err) {
    int64_t M = g->M, N = g->N, K = g->K, batch = g->batch;
    const float one = 1.0f, zero = 0.0f;
    const int64_t dims[4] = {M, N, K, batch};
    long long sa = a_shared ? 0 : M * K, sb = b_shared ? 0 : K * N;
    if (!gemm_ex(cx, ab)) {
        if (fits_int(dims, 4))
            OT_CUBLAS_CHECK(cublasSgemmStridedBatched(cx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one,
                                                      b, (int)N, sb, a, (int)K, sa, &zero, y, (int)N, M * N, (int)batch));
        else
            OT_CUBLAS_CHECK(cublasSgemmStridedBatched_64(cx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, b, N, sb, a,
                                                         K, sa, &zero, y, N, M * N, batch));
        return OT_OK;
    }
    cublasComputeType_t comp = ab == OT_F32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cudaDataType_t ty = cu_type(ab), cty = cu_type(yt);
    if (fits_int(dims, 4))
        OT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(cx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, b,
                                                   ty, (int)N, sb, a, ty, (int)K, sa, &zero, y, cty, (int)N, M * N,
                                                   (int)batch, comp, CUBLAS_GEMM_DEFAULT));
    else
        OT_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(cx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, b, ty, N, sb,
                                                      a, ty, K, sa, &zero, y, cty, N, M * N, batch, comp,
                                                      CUBLAS_GEMM_DEFAULT));
    return OT_OK;
}

OT_CUDA_LAUNCHER(ot_cuda_matmul) {
    (void)ctx;
    ot_dtype ab = in[0].dtype, yt = out[0].dtype;
    if (!ot_cuda_gemm_dtypes(ab, in[1].dtype, yt))
        return ot_cuda_bad_dtype(node, in[1].dtype != ab ? "input 1" : "output", in[1].dtype != ab ? in[1].dtype : yt,
                                 err);
    ot_matmul_geometry g;
    ot_status st = ot_matmul_geometry_init(&g, node, &in[0], &in[1], &out[0], err);
    if (st) return st;
    int64_t M = g.M, N = g.N, K = g.K, batch = g.batch;
    size_t es = ot_dtype_size(ab), ys = ot_dtype_size(yt);
    const char *a = in[0].data, *b = in[1].data;
    char *y = out[0].data;
    if (batch * M * N == 0) return OT_OK;
    if (K == 0) {
        OT_CUDA_CHECK(cudaMemsetAsync(y, 0, (size_t)(batch * M * N) * ys, cx->stream));
        return OT_OK;
    }
    /* Each operand's batch is either dense (strides M*K apart) or shared (stride 0). */
    bool a_dense = true, a_shared = true, b_dense = true, b_shared = true;
    for (int d = 0; d < g.r; d++) {
        if (g.bdim[d] == 1) continue;
        if (g.sa[d] == 0) a_dense = false;
        else a_shared = false;
        if (g.sb[d] == 0) b_dense = false;
        else b_shared = false;
    }
    if (b_shared && a_dense) /* one tall GEMM */
        return gemm_rm(cx, false, false, batch * M, N, K, 1.0f, a, K, b, N, 0.0f, y, N, ab, yt, err);
    if ((a_dense || a_shared) && (b_dense || b_shared)) return gemm_strided(cx, &g, a, a_shared, b, b_shared, y, ab, yt, err);
    for (int64_t i = 0; i < batch; i++) { /* mixed broadcasting: one GEMM per batch */
        int64_t oa, ob;
        ot_matmul_batch_offsets(&g, i, &oa, &ob);
        st = gemm_rm(cx, false, false, M, N, K, 1.0f, a + (size_t)oa * es, K, b + (size_t)ob * es, N, 0.0f,
                     y + (size_t)(i * M * N) * ys, N, ab, yt, err);
        if (st) return st;
    }
    return OT_OK;
}

/* ---- cuDNN convolutions ------------------------------------------------------------- */

enum { CONV_FWD = 0, CONV_BWD_DATA = 1, CONV_BWD_FILTER = 2 };

/* cuDNN's view of a convolution: NC + 2 or 3 spatial dims (a 1-D convolution runs as
 * 2-D with H = 1). cuDNN pads both ends of a dim alike; pads it cannot express run on
 * an explicitly zero-padded copy of X (or of dX, cropped afterwards) in the workspace,
 * with cuDNN's own padding 0. */
typedef struct conv_geom {
    int nd, nsp;                 /* tensor rank (4 or 5) and spatial dims (2 or 3) */
    int64_t x[5], w[5], y[5];    /* the node's X, W, Y (1-D lifted) */
    int64_t xc[5];               /* X as cuDNN sees it: x, or x padded by pb + pe */
    int64_t pb[3], pe[3];        /* the node's begin / end pads per spatial dim */
    int pad[3], stride[3], dil[3], group; /* cuDNN's symmetric padding, strides, dilations */
    bool explicit_pad;
    ot_dtype dtype; /* of X, W and Y alike: float32, or bfloat16 / float16 (issue 27) */
} conv_geom;

/* Shapes of X, W, Y for the three ops: Conv (X, W[, B]) -> Y; ConvGradInput
 * (dY, W, X-like) -> dX; ConvGradWeight (dY, X, W-like) -> dW. */
static void conv_shapes(const ot_node *node, const ot_tensor *in, const ot_tensor *out, const ot_shape **x,
                        const ot_shape **w, const ot_shape **y) {
    if (node->op == OT_OP_CONV) {
        *x = &in[0].shape, *w = &in[1].shape, *y = &out[0].shape;
    } else if (node->op == OT_OP_CONV_GRAD_INPUT || node->op == OT_OP_CONV_TRANSPOSE) {
        *y = &in[0].shape, *w = &in[1].shape, *x = &out[0].shape;
    } else {
        *y = &in[0].shape, *x = &in[1].shape, *w = &out[0].shape;
    }
}

static ot_status conv_geom_init(conv_geom *g, const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                                ot_error *err) {
    const ot_shape *xs, *ws, *ys;
    conv_shapes(node, in, out, &xs, &ws, &ys);
    memset(g, 0, sizeof *g);
    int r = xs->rank;
    if (r < 3 || r > 5 || ws->rank != r || ys->rank != r)
        return ot_fail(err, OT_E_UNSUPPORTED,
                       "node '%s' (%s): the CUDA backend runs 1-D, 2-D and 3-D convolutions only (X has rank %d)",
                       node->name, node->op_type, r);
    ot_window win;
    ot_status st = ot_window_init(&win, node, xs, ys, &ws->dim[2], err);
    if (st) return st;
    int lift = r == 3; /* 1-D: a leading spatial dim of 1 */
    g->nsp = r - 2 + lift;
    g->nd = g->nsp + 2;
    for (int i = 0; i < 2; i++) {
        g->x[i] = xs->dim[i];
        g->w[i] = ws->dim[i];
        g->y[i] = ys->dim[i];
    }
    for (int s = 0; s < g->nsp; s++) {
        int j = s - lift; /* the node's spatial dim; -1 for the lifted one */
        g->x[2 + s] = j >= 0 ? xs->dim[2 + j] : 1;
        g->w[2 + s] = j >= 0 ? ws->dim[2 + j] : 1;
        g->y[2 + s] = j >= 0 ? ys->dim[2 + j] : 1;
        g->pb[s] = j >= 0 ? win.pad_begin[j] : 0;
        g->pe[s] = j >= 0 ? win.pad_end[j] : 0;
        g->stride[s] = j >= 0 ? (int)win.stride[j] : 1;
        g->dil[s] = j >= 0 ? (int)win.dil[j] : 1;
    }
    g->group = win.group;
    g->dtype = in[0].dtype;
    if (g->group < 1 || g->x[1] % g->group || g->w[0] % g->group || g->w[1] * g->group != g->x[1] ||
        g->y[1] != g->w[0] || g->y[0] != g->x[0])
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): channels of X, W, Y and group do not agree", node->name,
                       node->op_type);
    /* Symmetric padding by the begin pads places the windows where the node does
     * whenever it yields the same output size (the end pad is then either the same
     * or never reached); otherwise X is padded explicitly. */
    for (int s = 0; s < g->nsp; s++) {
        int64_t span = (g->w[2 + s] - 1) * g->dil[s] + 1, padded = g->x[2 + s] + 2 * g->pb[s];
        if (padded < span || (padded - span) / g->stride[s] + 1 != g->y[2 + s]) g->explicit_pad = true;
    }
    /* the zero-pad copy (ot_cuda_pad_copy) moves float32 only */
    if (g->explicit_pad && g->dtype != OT_F32)
        return ot_fail(err, OT_E_UNSUPPORTED,
                       "node '%s' (%s): the CUDA backend runs %s convolutions with pads cuDNN can express only "
                       "(the same at both ends of a dim)",
                       node->name, node->op_type, ot_dtype_name(g->dtype));
    memcpy(g->xc, g->x, sizeof g->x);
    for (int s = 0; s < g->nsp; s++) {
        if (g->explicit_pad) g->xc[2 + s] = g->x[2 + s] + g->pb[s] + g->pe[s];
        g->pad[s] = g->explicit_pad ? 0 : (int)g->pb[s];
    }
    /* cuDNN's descriptors take int dims and strides: a tensor of 2^31 elements or
     * more would be described wrongly, so supports() refuses it (the executor then
     * names the node) instead of the kernel reading past its buffer */
    const int64_t *ts[3] = {g->xc, g->w, g->y};
    for (int k = 0; k < 3; k++) {
        int64_t n = 1;
        for (int i = 0; i < g->nd; i++) n *= ts[k][i];
        if (n > INT_MAX)
            return ot_fail(err, OT_E_UNSUPPORTED,
                           "node '%s' (%s): a tensor of %lld elements is past cuDNN's 32-bit sizes", node->name,
                           node->op_type, (long long)n);
    }
    return OT_OK;
}

bool ot_cuda_conv_dtype(ot_dtype t) { return t == OT_F32 || t == OT_BF16 || t == OT_F16; }

bool ot_cuda_conv_supported(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    conv_geom g;
    return conv_geom_init(&g, node, in, out, NULL) == OT_OK;
}

/* Workspace bytes in front of cuDNN's: the padded X (or dX), 256-byte aligned. */
static size_t conv_pad_bytes(const conv_geom *g) {
    if (!g->explicit_pad) return 0;
    size_t n = sizeof(float);
    for (int i = 0; i < g->nd; i++) n *= (size_t)g->xc[i];
    return (n + 255) / 256 * 256;
}

typedef struct conv_desc {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
} conv_desc;

static void conv_desc_free(conv_desc *d) {
    if (d->x) cudnnDestroyTensorDescriptor(d->x);
    if (d->y) cudnnDestroyTensorDescriptor(d->y);
    if (d->w) cudnnDestroyFilterDescriptor(d->w);
    if (d->c) cudnnDestroyConvolutionDescriptor(d->c);
    memset(d, 0, sizeof *d);
}

static cudnnDataType_t dnn_type(ot_dtype t) {
    return t == OT_BF16 ? CUDNN_DATA_BFLOAT16 : t == OT_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

/* A packed NC(D)HW tensor descriptor of rank nd (4: the 4d call, 5: Nd). */
static cudnnStatus_t tensor_desc(cudnnTensorDescriptor_t t, int nd, const int64_t *dims, ot_dtype dt) {
    if (nd == 4)
        return cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, dnn_type(dt), (int)dims[0], (int)dims[1],
                                          (int)dims[2], (int)dims[3]);
    int d[5], st[5], acc = 1;
    for (int i = nd - 1; i >= 0; i--) d[i] = (int)dims[i], st[i] = acc, acc *= d[i];
    return cudnnSetTensorNdDescriptor(t, dnn_type(dt), nd, d, st);
}

static ot_status conv_desc_make(conv_desc *d, const conv_geom *g, ot_error *err) {
    memset(d, 0, sizeof *d);
    OT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->x));
    OT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->y));
    OT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d->w));
    OT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d->c));
    OT_CUDNN_CHECK(tensor_desc(d->x, g->nd, g->xc, g->dtype));
    OT_CUDNN_CHECK(tensor_desc(d->y, g->nd, g->y, g->dtype));
    /* float32 compute for every dtype (cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16 configs) */
    if (g->nd == 4) {
        OT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(d->w, dnn_type(g->dtype), CUDNN_TENSOR_NCHW, (int)g->w[0],
                                                  (int)g->w[1], (int)g->w[2], (int)g->w[3]));
        OT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d->c, g->pad[0], g->pad[1], g->stride[0], g->stride[1],
                                                       g->dil[0], g->dil[1], CUDNN_CROSS_CORRELATION,
                                                       CUDNN_DATA_FLOAT));
    } else {
        int wd[5];
        for (int i = 0; i < g->nd; i++) wd[i] = (int)g->w[i];
        OT_CUDNN_CHECK(cudnnSetFilterNdDescriptor(d->w, dnn_type(g->dtype), CUDNN_TENSOR_NCHW, g->nd, wd));
        OT_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(d->c, g->nsp, g->pad, g->stride, g->dil,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    }
    OT_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d->c, g->group));
    /* float32: FMA only, TF32 tensor cores would put results 1e-3 away from the CPU's;
     * bfloat16 / float16: tensor cores, float32 sums */
    OT_CUDNN_CHECK(cudnnSetConvolutionMathType(d->c, g->dtype == OT_F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
    return OT_OK;
}

static int conv_kind(ot_op op) {
    return op == OT_OP_CONV                                              ? CONV_FWD
           : op == OT_OP_CONV_GRAD_INPUT || op == OT_OP_CONV_TRANSPOSE ? CONV_BWD_DATA
                                                                       : CONV_BWD_FILTER;
}

/* The cache key: what cuDNN is asked, so the padded X's shape, not the node's. */
static void conv_key(const conv_geom *g, int kind, int64_t *key) {
    int k = 0;
    memset(key, 0, sizeof(int64_t) * 40);
    key[k++] = kind + 1;
    key[k++] = g->nd;
    for (int i = 0; i < g->nd; i++) key[k++] = g->xc[i], key[k++] = g->w[i], key[k++] = g->y[i];
    for (int i = 0; i < g->nsp; i++) key[k++] = g->pad[i], key[k++] = g->stride[i], key[k++] = g->dil[i];
    key[k++] = g->group;
    key[k++] = g->dtype; /* at most 28 of the 40 slots */
}

static bool fma_math(cudnnMathType_t m) { return m == CUDNN_DEFAULT_MATH || m == CUDNN_FMA_MATH; }

/* float32: FMA only; bfloat16 / float16: tensor cores too */
static bool math_ok(cudnnMathType_t m, bool lowp) { return fma_math(m) || (lowp && m == CUDNN_TENSOR_OP_MATH); }

/* Picks the first deterministic algorithm of the allowed math in cuDNN's heuristic
 * order (chosen once per geometry and kept: no run-time choice that changes bits). */
static ot_status conv_choose(ot_cuda_ctx *cx, const conv_desc *d, int kind, bool lowp, int *algo, size_t *ws,
                             ot_error *err) {
    enum { MAXP = 16 };
    int n = 0;
    *algo = -1;
    if (kind == CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[MAXP];
        OT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(cx->cudnn, d->x, d->w, d->c, d->y, MAXP, &n, p));
        for (int i = 0; i < n && *algo < 0; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS && p[i].determinism == CUDNN_DETERMINISTIC && math_ok(p[i].mathType, lowp))
                *algo = (int)p[i].algo;
        if (*algo < 0) *algo = (int)CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM; /* deterministic, no workspace */
        OT_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(cx->cudnn, d->x, d->w, d->c, d->y,
                                                               (cudnnConvolutionFwdAlgo_t)*algo, ws));
    } else if (kind == CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[MAXP];
        OT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(cx->cudnn, d->w, d->y, d->c, d->x, MAXP, &n, p));
        for (int i = 0; i < n && *algo < 0; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS && p[i].determinism == CUDNN_DETERMINISTIC && math_ok(p[i].mathType, lowp))
                *algo = (int)p[i].algo;
        if (*algo < 0) *algo = (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
        OT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(cx->cudnn, d->w, d->y, d->c, d->x,
                                                                    (cudnnConvolutionBwdDataAlgo_t)*algo, ws));
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[MAXP];
        OT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(cx->cudnn, d->x, d->y, d->c, d->w, MAXP, &n, p));
        for (int i = 0; i < n && *algo < 0; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS && p[i].determinism == CUDNN_DETERMINISTIC && math_ok(p[i].mathType, lowp))
                *algo = (int)p[i].algo;
        if (*algo < 0) *algo = (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
        OT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(cx->cudnn, d->x, d->y, d->c, d->w,
                                                                      (cudnnConvolutionBwdFilterAlgo_t)*algo, ws));
    }
    return OT_OK;
}

/* The cached choice for this geometry, choosing it on first use. */
static ot_status conv_lookup(ot_cuda_ctx *cx, const conv_geom *g, const conv_desc *d, int kind,
                             const ot_cuda_conv_algo **out, ot_error *err) {
    int64_t key[40];
    conv_key(g, kind, key);
    for (int i = 0; i < cx->n_algos; i++)
        if (memcmp(cx->algos[i].key, key, sizeof key) == 0) {
            *out = &cx->algos[i];
            return OT_OK;
        }
    if (cx->n_algos == cx->cap_algos) {
        int cap = cx->cap_algos ? 2 * cx->cap_algos : 16;
        ot_cuda_conv_algo *p = realloc(cx->algos, (size_t)cap * sizeof *p);
        if (!p) return ot_fail(err, OT_E_MEMORY, "cuda backend: out of memory (cuDNN algorithm cache)");
        cx->algos = p;
        cx->cap_algos = cap;
    }
    ot_cuda_conv_algo *a = &cx->algos[cx->n_algos];
    memcpy(a->key, key, sizeof key);
    ot_status st = conv_choose(cx, d, kind, g->dtype != OT_F32, &a->algo, &a->ws_bytes, err);
    if (st) return st;
    cx->n_algos++;
    *out = a;
    return OT_OK;
}

ot_status ot_cuda_conv_workspace(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                                 size_t *bytes, ot_error *err) {
    conv_geom g;
    conv_desc d;
    const ot_cuda_conv_algo *a = NULL;
    *bytes = 0;
    ot_status st = conv_geom_init(&g, node, in, out, err);
    if (st) return st;
    if ((st = conv_desc_make(&d, &g, err)) == OT_OK && (st = conv_lookup(cx, &g, &d, conv_kind(node->op), &a, err)) == OT_OK)
        *bytes = conv_pad_bytes(&g) + a->ws_bytes;
    conv_desc_free(&d);
    return st;
}

static ot_status conv_run(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, ot_tensor *out,
                          const ot_kernel_ctx *ctx, ot_error *err) {
    for (int k = 0; k < node->n_inputs && k < 2; k++)
        if (in[k].dtype != in[0].dtype || !ot_cuda_conv_dtype(in[0].dtype))
            return ot_cuda_bad_dtype(node, "an input", in[k].dtype, err);
    if (out[0].dtype != in[0].dtype) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    conv_geom g;
    conv_desc d;
    cudnnTensorDescriptor_t bd = NULL, xd = NULL;
    const ot_cuda_conv_algo *a = NULL;
    ot_status st = conv_geom_init(&g, node, in, out, err);
    if (st) return st;
    if (ot_kernel_numel(&out[0]) == 0) return OT_OK;
    int kind = conv_kind(node->op);
    if ((st = conv_desc_make(&d, &g, err)) || (st = conv_lookup(cx, &g, &d, kind, &a, err))) goto fail;
    size_t pad_bytes = conv_pad_bytes(&g);
    if (pad_bytes + a->ws_bytes > 0 && (!ctx->workspace || ctx->workspace_bytes < pad_bytes + a->ws_bytes)) {
        st = ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): needs %zu bytes of workspace, given %zu", node->name,
                     node->op_type, pad_bytes + a->ws_bytes, ctx->workspace_bytes);
        goto fail;
    }
    /* explicit padding: [padded X or dX][cuDNN's workspace] */
    float *xpad = pad_bytes ? (float *)ctx->workspace : NULL;
    void *cws = a->ws_bytes ? (char *)ctx->workspace + pad_bytes : NULL;
    int64_t begin[5] = {0, 0, g.pb[0], g.pb[1], g.pb[2]};
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t cs;
    if (kind == CONV_FWD) {
        const void *xin = in[0].data;
        if (xpad) {
            if ((st = ot_cuda_pad_copy(cx, node, in[0].data, xpad, g.nd, g.x, g.xc, begin, false, err))) goto fail;
            xin = xpad;
        }
        cs = cudnnConvolutionForward(cx->cudnn, &one, d.x, xin, d.w, in[1].data, d.c,
                                     (cudnnConvolutionFwdAlgo_t)a->algo, cws, a->ws_bytes, &zero, d.y, out[0].data);
        if (cs == CUDNN_STATUS_SUCCESS && node->n_inputs > 2 && in[2].data) {
            if (ot_kernel_numel(&in[2]) != g.w[0]) {
                st = ot_fail(err, OT_E_SHAPE, "node '%s' (Conv): bias length differs from output channels", node->name);
                goto fail;
            }
            if (in[2].dtype != g.dtype) {
                st = ot_cuda_bad_dtype(node, "bias (not X's dtype)", in[2].dtype, err);
                goto fail;
            }
            int64_t bdims[5] = {1, g.w[0], 1, 1, 1};
            cs = cudnnCreateTensorDescriptor(&bd);
            if (cs == CUDNN_STATUS_SUCCESS) cs = tensor_desc(bd, g.nd, bdims, g.dtype);
            if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnAddTensor(cx->cudnn, &one, bd, in[2].data, &one, d.y, out[0].data);
        }
    } else if (kind == CONV_BWD_DATA) {
        cs = cudnnConvolutionBackwardData(cx->cudnn, &one, d.w, in[1].data, d.y, in[0].data, d.c,
                                          (cudnnConvolutionBwdDataAlgo_t)a->algo, cws, a->ws_bytes, &zero, d.x,
                                          xpad ? (void *)xpad : out[0].data);
        /* the gradient of the padding itself is dropped */
        if (cs == CUDNN_STATUS_SUCCESS && xpad &&
            (st = ot_cuda_pad_copy(cx, node, xpad, out[0].data, g.nd, g.x, g.xc, begin, true, err)))
            goto fail;
        /* ConvTranspose's bias (issue 26), per output channel */
        if (cs == CUDNN_STATUS_SUCCESS && node->op == OT_OP_CONV_TRANSPOSE && node->n_inputs > 2 && in[2].data) {
            if (ot_kernel_numel(&in[2]) != g.x[1]) {
                st = ot_fail(err, OT_E_SHAPE, "node '%s' (ConvTranspose): bias length differs from output channels",
                             node->name);
                goto fail;
            }
            if (in[2].dtype != g.dtype) {
                st = ot_cuda_bad_dtype(node, "bias (not X's dtype)", in[2].dtype, err);
                goto fail;
            }
            int64_t bdims[5] = {1, g.x[1], 1, 1, 1};
            cs = cudnnCreateTensorDescriptor(&bd);
            if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnCreateTensorDescriptor(&xd);
            if (cs == CUDNN_STATUS_SUCCESS) cs = tensor_desc(bd, g.nd, bdims, g.dtype);
            if (cs == CUDNN_STATUS_SUCCESS) cs = tensor_desc(xd, g.nd, g.x, g.dtype);
            if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnAddTensor(cx->cudnn, &one, bd, in[2].data, &one, xd, out[0].data);
        }
    } else {
        const void *xin = in[1].data;
        if (xpad) {
            if ((st = ot_cuda_pad_copy(cx, node, in[1].data, xpad, g.nd, g.x, g.xc, begin, false, err))) goto fail;
            xin = xpad;
        }
        cs = cudnnConvolutionBackwardFilter(cx->cudnn, &one, d.x, xin, d.y, in[0].data, d.c,
                                            (cudnnConvolutionBwdFilterAlgo_t)a->algo, cws, a->ws_bytes, &zero, d.w,
                                            out[0].data);
    }
    if (cs != CUDNN_STATUS_SUCCESS)
        st = ot_fail(err, OT_E_DEVICE, "node '%s' (%s): cuDNN convolution (algorithm %d) failed: %s", node->name,
                     node->op_type, a->algo, cudnnGetErrorString(cs));
fail:
    if (bd) cudnnDestroyTensorDescriptor(bd);
    if (xd) cudnnDestroyTensorDescriptor(xd);
    conv_desc_free(&d);
    return st;
}

OT_CUDA_LAUNCHER(ot_cuda_conv) { return conv_run(cx, node, in, out, ctx, err); }
OT_CUDA_LAUNCHER(ot_cuda_conv_grad_input) { return conv_run(cx, node, in, out, ctx, err); }
OT_CUDA_LAUNCHER(ot_cuda_conv_grad_weight) { return conv_run(cx, node, in, out, ctx, err); }
/* issue 26: cuDNN's backward data of the convolution whose input is Y, plus the bias */
OT_CUDA_LAUNCHER(ot_cuda_conv_transpose) { return conv_run(cx, node, in, out, ctx, err); }
