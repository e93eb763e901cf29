/* cuda_reduce.cu — reductions and normalisation on the GPU, the counterparts of
 * the ReduceMean / ReduceSum of cpu_reduce.c, cpu_norm.c (Softmax, LayerNorm,
 * BatchNorm; Dropout is in cuda_pointwise_grad.cu), grad_reduce.c and grad_norm.c (the
 * losses are in cuda_loss.cu). Sums run in
 * double like the CPU's, reduced by one warp or block per output in a fixed tree,
 * so results are repeatable run to run (they differ from the CPU's sequential
 * order only by rounding). Nothing uses atomics.
 *
 * Issue 27: Softmax, LogSoftmax, LayerNormalization, BatchNormalization and their
 * gradients also run on bfloat16 / float16 data (X, Y, dY, dX in one low dtype), the
 * same kernels templated on the storage type (cuda_device.cuh): every element is loaded
 * to float, the statistics and sums are the float32 kernels' (float or double, the same
 * fixed trees), and each output is rounded once. A norm's scale, bias and statistics
 * are small and may be float32 or the data's dtype (a float32 master weight read
 * through a Cast, BatchNorm's float32 running statistics): they are read and written
 * by their own dtype (ot_cu_ldt / ot_cu_stt). */
#include <math.h>
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/norm_geometry.h"
#include "kernels/reduce_geometry.h"

/* ---- generic reduction: kept dims enumerate the output, reduced dims are summed ---- */

struct red_geom {
    int nk, nr;
    int64_t kdim[OT_MAX_RANK], kst[OT_MAX_RANK], rdim[OT_MAX_RANK], rst[OT_MAX_RANK];
    int64_t n_out, n_red;
    double div;
};

__global__ void k_reduce(const float *x, float *y, red_geom g) {
    int lane = threadIdx.x & 31;
    OT_CU_WARP_LOOP(o, g.n_out) {
        int64_t base = 0, q = o;
        for (int k = g.nk - 1; k >= 0; k--) {
            base += (q % g.kdim[k]) * g.kst[k];
            q /= g.kdim[k];
        }
        double a = 0.0;
        for (int64_t j = lane; j < g.n_red; j += 32) {
            int64_t off = base, r = j;
            for (int k = g.nr - 1; k >= 0; k--) {
                off += (r % g.rdim[k]) * g.rst[k];
                r /= g.rdim[k];
            }
            a += x[off];
        }
        a = ot_cu_warp_sum(a);
        if (lane == 0) y[o] = (float)(a / g.div);
    }
}

/* red[d]: dim d of `xs` is summed. */
static ot_status launch_reduce(ot_cuda_ctx *cx, const ot_shape *xs, const bool *red, const float *x, float *y,
                               bool mean, ot_error *err) {
    red_geom g;
    memset(&g, 0, sizeof g);
    int64_t st[OT_MAX_RANK], acc = 1;
    for (int d = xs->rank - 1; d >= 0; d--) st[d] = acc, acc *= xs->dim[d];
    g.n_out = g.n_red = 1;
    for (int d = 0; d < xs->rank; d++) {
        if (xs->dim[d] == 1) continue;
        if (red[d]) {
            g.rdim[g.nr] = xs->dim[d];
            g.rst[g.nr++] = st[d];
            g.n_red *= xs->dim[d];
        } else {
            g.kdim[g.nk] = xs->dim[d];
            g.kst[g.nk++] = st[d];
            g.n_out *= xs->dim[d];
        }
    }
    if (acc == 0) g.n_red = 0;
    g.div = mean ? (double)g.n_red : 1.0;
    if (g.n_out == 0) return OT_OK;
    k_reduce<<<ot_cu_warp_blocks(g.n_out), OT_CU_THREADS, 0, cx->stream>>>(x, y, g);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

OT_CUDA_LAUNCHER(ot_cuda_reduce) {
    (void)ctx;
    if (in[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "input", in[0].dtype, err);
    const ot_shape *s = &in[0].shape;
    int r = s->rank, na = 0;
    const int64_t *axes;
    ot_status ast = ot_reduce_attr_axes(node, &axes, &na, err);
    if (ast) return ast;
    int64_t in_axes[OT_MAX_RANK];
    if ((!axes || na == 0) && node->n_inputs > 1 && in[1].data && ot_kernel_numel(&in[1]) > 0) {
        ot_status st = ot_cuda_read_ints(cx, &in[1], in_axes, OT_MAX_RANK, &na, err);
        if (st) return st;
        axes = in_axes;
    }
    bool red[OT_MAX_RANK] = {0}, noop;
    if ((ast = ot_reduce_dims(node, axes, na, r, red, &noop, err))) return ast;
    if (noop) {
        int64_t n = ot_kernel_numel(&in[0]);
        if (ot_kernel_numel(&out[0]) != n)
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): no-op output differs in size", node->name, node->op_type);
        if (n && out[0].data != in[0].data)
            OT_CUDA_CHECK(cudaMemcpyAsync(out[0].data, in[0].data, (size_t)n * 4, cudaMemcpyDeviceToDevice, cx->stream));
        return OT_OK;
    }
    int64_t n_out = 1;
    for (int d = 0; d < r; d++)
        if (!red[d]) n_out *= s->dim[d];
    if (ot_kernel_numel(&out[0]) != n_out)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output size differs from the reduced shape", node->name,
                       node->op_type);
    return launch_reduce(cx, s, red, (const float *)in[0].data, (float *)out[0].data, node->op == OT_OP_REDUCE_MEAN,
                         err);
}

/* ReduceToLike (dY, like) -> dX: sum dY over the axes broadcasting added. */
OT_CUDA_LAUNCHER(ot_cuda_reduce_to_like) {
    (void)ctx;
    if (in[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "dY", in[0].dtype, err);
    const ot_shape *ys = &in[0].shape, *os = &out[0].shape;
    int r = ys->rank;
    if (os->rank > r)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (ReduceToLike): output does not broadcast to dY", node->name);
    bool red[OT_MAX_RANK];
    for (int d = 0; d < r; d++) {
        int sd = d - (r - os->rank);
        int64_t n = sd >= 0 ? os->dim[sd] : 1;
        if (n != ys->dim[d] && n != 1)
            return ot_fail(err, OT_E_SHAPE, "node '%s' (ReduceToLike): output does not broadcast to dY", node->name);
        red[d] = n == 1 && ys->dim[d] != 1;
    }
    return launch_reduce(cx, ys, red, (const float *)in[0].data, (float *)out[0].data, false, err);
}

/* ---- Softmax / LogSoftmax and their gradients: one warp per line ------------------ */

/* The kernels' copy of ot_softmax_geometry (kernels/norm_geometry.h). */
struct sm_geom {
    int64_t lines, len, inner;
};

static ot_status softmax_geom(const ot_node *node, const ot_shape *s, sm_geom *g, ot_error *err) {
    ot_softmax_geometry sg;
    ot_status st = ot_softmax_geometry_init(&sg, node, s, err);
    if (st) return st;
    g->lines = sg.lines;
    g->len = sg.len;
    g->inner = sg.inner;
    return OT_OK;
}

template <typename T> __global__ void k_softmax(const T *x, T *y, sm_geom g, int logsm) {
    int lane = threadIdx.x & 31;
    OT_CU_WARP_LOOP(l, g.lines) {
        int64_t o = l / g.inner, i = l % g.inner;
        const T *xl = x + o * g.len * g.inner + i;
        T *yl = y + o * g.len * g.inner + i;
        float mx = -INFINITY;
        for (int64_t k = lane; k < g.len; k += 32) mx = fmaxf(mx, ot_cu_ld(xl[k * g.inner]));
        mx = ot_cu_warp_max(mx);
        if (mx == -INFINITY) mx = 0.0f;
        float sum = 0.0f;
        for (int64_t k = lane; k < g.len; k += 32) sum += expf(ot_cu_ld(xl[k * g.inner]) - mx);
        sum = ot_cu_warp_sum(sum);
        if (logsm) {
            float ls = logf(sum);
            for (int64_t k = lane; k < g.len; k += 32) ot_cu_st(&yl[k * g.inner], (ot_cu_ld(xl[k * g.inner]) - mx) - ls);
        } else {
            float inv = 1.0f / sum;
            for (int64_t k = lane; k < g.len; k += 32)
                ot_cu_st(&yl[k * g.inner], expf(ot_cu_ld(xl[k * g.inner]) - mx) * inv);
        }
    }
}

/* A rank-0 (one-element) result v stored in dtype t, synchronously (the value lives on
 * the host stack). */
static ot_status store_scalar(ot_cuda_ctx *cx, void *dst, ot_dtype t, float v, ot_error *err) {
    unsigned char b[4];
    ot_cu_stt(t, b, 0, v);
    OT_CUDA_CHECK(cudaMemcpyAsync(dst, b, ot_dtype_size(t), cudaMemcpyHostToDevice, cx->stream));
    OT_CUDA_CHECK(cudaStreamSynchronize(cx->stream));
    return OT_OK;
}

template <typename T>
static ot_status launch_softmax(ot_cuda_ctx *cx, const ot_tensor *in, ot_tensor *out, const sm_geom &g, int logsm,
                                ot_error *err) {
    k_softmax<T><<<ot_cu_warp_blocks(g.lines), OT_CU_THREADS, 0, cx->stream>>>((const T *)in[0].data,
                                                                               (T *)out[0].data, g, logsm);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

OT_CUDA_LAUNCHER(ot_cuda_softmax) {
    (void)ctx;
    ot_dtype t = in[0].dtype;
    if (!ot_cu_float_dtype(t)) return ot_cuda_bad_dtype(node, "input", t, err);
    if (out[0].dtype != t) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    if (ot_kernel_numel(&out[0]) != ot_kernel_numel(&in[0]))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output size differs from input", node->name, node->op_type);
    bool logsm = node->op == OT_OP_LOG_SOFTMAX;
    if (in[0].shape.rank == 0) return store_scalar(cx, out[0].data, t, logsm ? 0.0f : 1.0f, err);
    sm_geom g;
    ot_status st = softmax_geom(node, &in[0].shape, &g, err);
    if (st || g.lines * g.len == 0) return st;
#define SOFTMAX(T) launch_softmax<T>(cx, in, out, g, logsm, err)
    OT_CU_BY_FLOAT(t, "input", SOFTMAX)
#undef SOFTMAX
}

template <typename T> __global__ void k_softmax_grad(const T *dy, const T *y, T *dx, sm_geom g, int logsm) {
    int lane = threadIdx.x & 31;
    OT_CU_WARP_LOOP(l, g.lines) {
        int64_t o = l / g.inner, i = l % g.inner, base = o * g.len * g.inner + i;
        double dot = 0.0;
        for (int64_t k = lane; k < g.len; k += 32) {
            int64_t j = base + k * g.inner;
            float gy = ot_cu_ld(dy[j]), yv = ot_cu_ld(y[j]);
            dot += logsm ? (double)gy : (double)gy * yv;
        }
        dot = ot_cu_warp_sum(dot);
        for (int64_t k = lane; k < g.len; k += 32) {
            int64_t j = base + k * g.inner;
            float gy = ot_cu_ld(dy[j]), yv = ot_cu_ld(y[j]);
            ot_cu_st(&dx[j], logsm ? (float)(gy - exp((double)yv) * dot) : (float)(yv * (gy - dot)));
        }
    }
}

template <typename T>
static ot_status launch_softmax_grad(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                     const sm_geom &g, ot_error *err) {
    k_softmax_grad<T><<<ot_cu_warp_blocks(g.lines), OT_CU_THREADS, 0, cx->stream>>>(
        (const T *)in[0].data, (const T *)in[1].data, (T *)out[0].data, g, node->op == OT_OP_LOG_SOFTMAX_GRAD);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

OT_CUDA_LAUNCHER(ot_cuda_softmax_grad) {
    (void)ctx;
    ot_dtype t = in[0].dtype;
    if (!ot_cu_float_dtype(t)) return ot_cuda_bad_dtype(node, "dY", t, err);
    if (in[1].dtype != t || out[0].dtype != t) return ot_cuda_bad_dtype(node, "mixed dtypes, Y", in[1].dtype, err);
    if (in[1].shape.rank == 0) {
        OT_CUDA_CHECK(cudaMemsetAsync(out[0].data, 0, ot_dtype_size(t), cx->stream));
        return OT_OK;
    }
    sm_geom g;
    ot_status st = softmax_geom(node, &in[1].shape, &g, err);
    if (st || g.lines * g.len == 0) return st;
#define SOFTMAX_GRAD(T) launch_softmax_grad<T>(cx, node, in, out, g, err)
    OT_CU_BY_FLOAT(t, "dY", SOFTMAX_GRAD)
#undef SOFTMAX_GRAD
}

/* ---- LayerNormalization ---------------------------------------------------------- */

/* The dtypes of a norm's small tensors (ot_dtype values): scale, bias, the running or
 * saved statistics read, and the statistics written. */
struct norm_types {
    int sc, b, rm, rv, om, ov;
};

template <typename T>
__global__ void k_layer_norm(const T *x, const void *scale, const void *bias, T *y, void *om, void *oi, int64_t rows,
                             int64_t cols, int64_t ss, int64_t sb, float eps, norm_types nt) {
    __shared__ double sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * cols;
        T *yr = y + r * cols;
        double acc = 0.0;
        for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) acc += ot_cu_ld(xr[i]);
        acc = ot_cu_block_sum(acc, sh);
        double mean = cols ? acc / (double)cols : 0.0, sq = 0.0;
        for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
            double d = ot_cu_ld(xr[i]) - mean;
            sq += d * d;
        }
        sq = ot_cu_block_sum(sq, sh);
        float inv = (float)(1.0 / sqrt((cols ? sq / (double)cols : 0.0) + (double)eps));
        float m = (float)mean;
        for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
            float v = __fmul_rn(__fmul_rn(ot_cu_ld(xr[i]) - m, inv), ot_cu_ldt(nt.sc, scale, i * ss));
            ot_cu_st(&yr[i], bias ? v + ot_cu_ldt(nt.b, bias, i * sb) : v);
        }
        if (threadIdx.x == 0) {
            if (om) ot_cu_stt(nt.om, om, r, m);
            if (oi) ot_cu_stt(nt.ov, oi, r, inv);
        }
    }
}

/* OT_CUDA_LAUNCHED as an expression, for the launches written as macros */
static ot_status launched(ot_error *err) {
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

static unsigned row_blocks(int64_t rows) { return (unsigned)(rows < 65535 ? (rows < 1 ? 1 : rows) : 65535); }

/* X and Y in dtype t (float32, bfloat16, float16); every other tensor the node has in
 * float32 or t. */
static ot_status check_norm_dtypes(const ot_node *node, const ot_tensor *in, const ot_tensor *out, ot_dtype t,
                                   ot_error *err) {
    if (!ot_cu_float_dtype(t)) return ot_cuda_bad_dtype(node, "input 0", t, err);
    if (out[0].dtype != t) return ot_cuda_bad_dtype(node, "output 0", out[0].dtype, err);
    for (int k = 1; k < node->n_inputs; k++)
        if (in[k].data && in[k].dtype != t && in[k].dtype != OT_F32) return ot_cuda_bad_dtype(node, "an input", in[k].dtype, err);
    for (int k = 1; k < node->n_outputs; k++)
        if (out[k].data && out[k].dtype != t && out[k].dtype != OT_F32)
            return ot_cuda_bad_dtype(node, "an output", out[k].dtype, err);
    return OT_OK;
}

static int dtype_of(const ot_tensor *ts, int n, int k) {
    return k < n && ts[k].data ? (int)ts[k].dtype : (int)OT_F32;
}

OT_CUDA_LAUNCHER(ot_cuda_layer_norm) {
    (void)ctx;
    ot_dtype t = in[0].dtype;
    ot_status pst = check_norm_dtypes(node, in, out, t, err);
    if (pst) return pst;
    ot_layer_norm_args la;
    if ((pst = ot_layer_norm_args_init(&la, node, in, out, err))) return pst;
    int64_t rows = la.rows, cols = la.cols;
    float eps = la.eps;
    const void *bias = la.has_bias ? in[2].data : NULL;
    void *om = node->n_outputs > 1 && out[1].data ? out[1].data : NULL;
    void *oi = node->n_outputs > 2 && out[2].data ? out[2].data : NULL;
    norm_types nt = {dtype_of(in, node->n_inputs, 1), dtype_of(in, node->n_inputs, 2), 0, 0,
                     dtype_of(out, node->n_outputs, 1), dtype_of(out, node->n_outputs, 2)};
    if (rows * cols == 0) return OT_OK;
#define LAYER_NORM(T)                                                                                              \
    (k_layer_norm<T><<<row_blocks(rows), OT_CU_THREADS, 0, cx->stream>>>((const T *)in[0].data, in[1].data, bias,   \
                                                                         (T *)out[0].data, om, oi, rows, cols,      \
                                                                         la.scale_step, la.bias_step, eps, nt),     \
     launched(err))
    OT_CU_BY_FLOAT(t, "input 0", LAYER_NORM)
#undef LAYER_NORM
}

/* Per row: statistics into stat (mean, 1/std as double) and dX. */
template <typename T>
__global__ void k_layer_norm_grad_rows(const T *dy, const T *x, const void *sc, T *dx, double *stat, int64_t rows,
                                       int64_t cols, double eps, int sct) {
    __shared__ double sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * cols, *dr = dy + r * cols;
        double mean = 0.0, var = 0.0;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) mean += ot_cu_ld(xr[j]);
        mean = ot_cu_block_sum(mean, sh) / (double)cols;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            var += (ot_cu_ld(xr[j]) - mean) * (ot_cu_ld(xr[j]) - mean);
        var = ot_cu_block_sum(var, sh) / (double)cols;
        double inv = 1.0 / sqrt(var + eps);
        if (threadIdx.x == 0) {
            stat[2 * r] = mean;
            stat[2 * r + 1] = inv;
        }
        if (!dx) continue;
        double mg = 0.0, mgx = 0.0;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            double g = (double)ot_cu_ld(dr[j]) * ot_cu_ldt(sct, sc, j);
            mg += g;
            mgx += g * (ot_cu_ld(xr[j]) - mean) * inv;
        }
        mg = ot_cu_block_sum(mg, sh) / (double)cols;
        mgx = ot_cu_block_sum(mgx, sh) / (double)cols;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            double xh = (ot_cu_ld(xr[j]) - mean) * inv;
            ot_cu_st(&dx[r * cols + j],
                     (float)(inv * ((double)ot_cu_ld(dr[j]) * ot_cu_ldt(sct, sc, j) - mg - xh * mgx)));
        }
    }
}

/* Per column: dScale and dBias summed over rows in row order. */
template <typename T>
__global__ void k_layer_norm_grad_cols(const T *dy, const T *x, const double *stat, void *dsc, void *db, int64_t rows,
                                       int64_t cols, int dsct, int dbt) {
    OT_CU_LOOP(j, cols) {
        double a = 0.0, b = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            double g = ot_cu_ld(dy[r * cols + j]);
            a += g * (ot_cu_ld(x[r * cols + j]) - stat[2 * r]) * stat[2 * r + 1];
            b += g;
        }
        if (dsc) ot_cu_stt(dsct, dsc, j, (float)a);
        if (db) ot_cu_stt(dbt, db, j, (float)b);
    }
}

template <typename T>
static ot_status launch_layer_norm_grad(ot_cuda_ctx *cx, const ot_tensor *in, void *dx, void *dsc, void *db,
                                        double *stat, int64_t rows, int64_t cols, double eps, norm_types nt,
                                        ot_error *err) {
    k_layer_norm_grad_rows<T><<<row_blocks(rows), OT_CU_THREADS, 0, cx->stream>>>(
        (const T *)in[0].data, (const T *)in[1].data, in[2].data, (T *)dx, stat, rows, cols, eps, nt.sc);
    OT_CUDA_LAUNCHED();
    if (dsc || db) {
        k_layer_norm_grad_cols<T><<<ot_cu_blocks(cols), OT_CU_THREADS, 0, cx->stream>>>(
            (const T *)in[0].data, (const T *)in[1].data, stat, dsc, db, rows, cols, nt.om, nt.ov);
        OT_CUDA_LAUNCHED();
    }
    return OT_OK;
}

static bool ln_view(const ot_node *node, const ot_tensor *x, int64_t *rows, int64_t *cols) {
    return ot_layer_norm_view(node, &x->shape, rows, cols);
}

OT_CUDA_LAUNCHER(ot_cuda_layer_norm_grad) {
    const ot_tensor *x = &in[1];
    ot_dtype t = in[0].dtype;
    if (!ot_cu_float_dtype(t) || x->dtype != t) return ot_cuda_bad_dtype(node, "dY or X", x->dtype, err);
    if (in[2].dtype != t && in[2].dtype != OT_F32) return ot_cuda_bad_dtype(node, "scale", in[2].dtype, err);
    for (int k = 0; k < node->n_outputs; k++)
        if (out[k].data && out[k].dtype != t && !(k && out[k].dtype == OT_F32))
            return ot_cuda_bad_dtype(node, "an output", out[k].dtype, err);
    int64_t rows, cols;
    if (!ln_view(node, x, &rows, &cols))
        return ot_fail(err, OT_E_MODEL, "node '%s' (LayerNormGrad): axis out of range", node->name);
    if (ot_kernel_numel(&in[2]) != cols)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (LayerNormGrad): scale must cover the normalised axes",
                       node->name);
    double *stat = (double *)ctx->workspace;
    if (!stat || ctx->workspace_bytes < (size_t)rows * 2 * sizeof(double))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (LayerNormGrad): workspace missing", node->name);
    if (rows * cols == 0) return OT_OK;
    void *dx = out[0].data;
    void *dsc = node->n_outputs > 1 ? out[1].data : NULL, *db = node->n_outputs > 2 ? out[2].data : NULL;
    /* scale's dtype, then dScale's and dBias's */
    norm_types nt = {(int)in[2].dtype, 0, 0, 0, dtype_of(out, node->n_outputs, 1), dtype_of(out, node->n_outputs, 2)};
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_norm_params *np = &pp->u.norm;
    double eps = np->epsilon;
#define LN_GRAD(T) launch_layer_norm_grad<T>(cx, in, dx, dsc, db, stat, rows, cols, eps, nt, err)
    OT_CU_BY_FLOAT(t, "dY", LN_GRAD)
#undef LN_GRAD
}

/* ---- BatchNormalization: one block per channel ----------------------------------- */

template <typename T>
__global__ void k_batch_norm(const T *x, const void *scale, const void *bias, const void *rmean, const void *rvar, T *y,
                             void *om, void *ov, int64_t N, int64_t C, int64_t S, int training, int unbiased_stats,
                             float eps, float mom, norm_types nt) {
    __shared__ double sh[32];
    int64_t cnt = N * S;
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        double mean, var;
        float rm = ot_cu_ldt(nt.rm, rmean, c), rv = ot_cu_ldt(nt.rv, rvar, c), sc = ot_cu_ldt(nt.sc, scale, c),
              bi = ot_cu_ldt(nt.b, bias, c);
        if (training) {
            double acc = 0.0;
            for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) acc += ot_cu_ld(x[((t / S) * C + c) * S + t % S]);
            acc = ot_cu_block_sum(acc, sh);
            mean = cnt ? acc / (double)cnt : 0.0;
            double sq = 0.0;
            for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) {
                double d = ot_cu_ld(x[((t / S) * C + c) * S + t % S]) - mean;
                sq += d * d;
            }
            sq = ot_cu_block_sum(sq, sh);
            var = cnt ? sq / (double)cnt : 0.0;
        } else {
            mean = rm;
            var = rv;
        }
        float inv = (float)(1.0 / sqrt(var + (double)eps));
        float a = __fmul_rn(sc, inv), b = bi - __fmul_rn((float)mean, a);
        for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) {
            int64_t j = ((t / S) * C + c) * S + t % S;
            ot_cu_st(&y[j], __fadd_rn(__fmul_rn(ot_cu_ld(x[j]), a), b));
        }
        __syncthreads(); /* running stats may alias inputs 3 and 4: every thread has read them */
        if (threadIdx.x == 0) {
            if (training) {
                double unb = (unbiased_stats && cnt > 1) ? var * (double)cnt / (double)(cnt - 1) : var;
                if (om) ot_cu_stt(nt.om, om, c, __fadd_rn(__fmul_rn(mom, rm), __fmul_rn(1.0f - mom, (float)mean)));
                if (ov) ot_cu_stt(nt.ov, ov, c, __fadd_rn(__fmul_rn(mom, rv), __fmul_rn(1.0f - mom, (float)unb)));
            } else {
                if (om) ot_cu_stt(nt.om, om, c, rm);
                if (ov) ot_cu_stt(nt.ov, ov, c, rv);
            }
        }
    }
}

OT_CUDA_LAUNCHER(ot_cuda_batch_norm) {
    (void)ctx;
    ot_dtype dt = in[0].dtype;
    if (node->n_inputs < 5) return ot_fail(err, OT_E_MODEL, "node '%s' (BatchNormalization): 5 inputs expected", node->name);
    ot_status cst = check_norm_dtypes(node, in, out, dt, err);
    if (cst) return cst;
    const ot_shape *s = &in[0].shape;
    if (s->rank < 2) return ot_fail(err, OT_E_SHAPE, "node '%s' (BatchNormalization): rank < 2", node->name);
    int64_t N, C, S;
    ot_batch_norm_dims(s, &N, &C, &S);
    for (int k = 1; k < 5; k++)
        if (ot_kernel_numel(&in[k]) != C)
            return ot_fail(err, OT_E_SHAPE, "node '%s' (BatchNormalization): input %d is not of length C=%lld",
                           node->name, k, (long long)C);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_norm_params *np = &pp->u.norm;
    if (C == 0) return OT_OK;
    void *om = node->n_outputs > 1 && out[1].data ? out[1].data : NULL;
    void *ov = node->n_outputs > 2 && out[2].data ? out[2].data : NULL;
    norm_types nt = {(int)in[1].dtype, (int)in[2].dtype, (int)in[3].dtype, (int)in[4].dtype,
                     dtype_of(out, node->n_outputs, 1), dtype_of(out, node->n_outputs, 2)};
#define BATCH_NORM(T)                                                                                                \
    (k_batch_norm<T><<<row_blocks(C), OT_CU_THREADS, 0, cx->stream>>>(                                               \
         (const T *)in[0].data, in[1].data, in[2].data, in[3].data, in[4].data, (T *)out[0].data, om, ov, N, C, S,   \
         np->training_mode, np->unbiased_running_var, np->epsilon, np->momentum, nt),                                \
     launched(err))
    OT_CU_BY_FLOAT(dt, "input 0", BATCH_NORM)
#undef BATCH_NORM
}

template <typename T>
__global__ void k_batch_norm_grad(const T *dy, const T *xs, const void *sc, const void *rm, const void *rv, T *dx,
                                  void *dsc, void *db, int64_t N, int64_t C, int64_t S, int train, double eps,
                                  norm_types nt) {
    __shared__ double sh[32];
    int64_t cnt = N * S;
    double M = (double)cnt;
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        double mean = 0.0, var = 0.0;
        if (train) {
            for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) mean += ot_cu_ld(xs[((t / S) * C + c) * S + t % S]);
            mean = ot_cu_block_sum(mean, sh) / M;
            for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) {
                double d = ot_cu_ld(xs[((t / S) * C + c) * S + t % S]) - mean;
                var += d * d;
            }
            var = ot_cu_block_sum(var, sh) / M;
        } else {
            mean = ot_cu_ldt(nt.rm, rm, c);
            var = ot_cu_ldt(nt.rv, rv, c);
        }
        double inv = 1.0 / sqrt(var + eps), sdy = 0.0, sdyx = 0.0;
        for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) {
            int64_t j = ((t / S) * C + c) * S + t % S;
            float g = ot_cu_ld(dy[j]);
            sdy += g;
            sdyx += g * (ot_cu_ld(xs[j]) - mean) * inv;
        }
        sdy = ot_cu_block_sum(sdy, sh);
        sdyx = ot_cu_block_sum(sdyx, sh);
        if (threadIdx.x == 0) {
            if (db) ot_cu_stt(nt.ov, db, c, (float)sdy);
            if (dsc) ot_cu_stt(nt.om, dsc, c, (float)sdyx);
        }
        if (!dx) continue;
        double k = ot_cu_ldt(nt.sc, sc, c) * inv;
        for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) {
            int64_t j = ((t / S) * C + c) * S + t % S;
            float g = ot_cu_ld(dy[j]);
            if (train) {
                double xh = (ot_cu_ld(xs[j]) - mean) * inv;
                ot_cu_st(&dx[j], (float)(k * (g - sdy / M - xh * sdyx / M)));
            } else {
                ot_cu_st(&dx[j], (float)(k * g));
            }
        }
    }
}

OT_CUDA_LAUNCHER(ot_cuda_batch_norm_grad) {
    (void)ctx;
    const ot_tensor *x = &in[1];
    ot_dtype dt = in[0].dtype;
    if (!ot_cu_float_dtype(dt) || x->dtype != dt) return ot_cuda_bad_dtype(node, "dY or X", x->dtype, err);
    ot_status cst = check_norm_dtypes(node, in, out, dt, err);
    if (cst) return cst;
    if (x->shape.rank < 2) return ot_fail(err, OT_E_SHAPE, "node '%s' (BatchNormGrad): X rank < 2", node->name);
    int64_t N = x->shape.dim[0], C = x->shape.dim[1], S = N * C > 0 ? ot_kernel_numel(x) / (N * C) : 0;
    if (ot_kernel_numel(&in[2]) != C)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (BatchNormGrad): scale must have C elements", node->name);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_norm_params *np = &pp->u.norm;
    bool train = np->training_mode || node->n_inputs < 5 || !in[3].data || !in[4].data;
    if (C == 0) return OT_OK;
    /* scale, -, the running statistics, then dScale's and dBias's dtypes */
    norm_types nt = {(int)in[2].dtype, 0, train ? 0 : (int)in[3].dtype, train ? 0 : (int)in[4].dtype,
                     dtype_of(out, node->n_outputs, 1), dtype_of(out, node->n_outputs, 2)};
#define BN_GRAD(T)                                                                                                  \
    (k_batch_norm_grad<T><<<row_blocks(C), OT_CU_THREADS, 0, cx->stream>>>(                                         \
         (const T *)in[0].data, (const T *)x->data, in[2].data, train ? NULL : in[3].data, train ? NULL : in[4].data, \
         (T *)out[0].data, node->n_outputs > 1 ? out[1].data : NULL, node->n_outputs > 2 ? out[2].data : NULL, N, C, S, \
         train, (double)np->epsilon, nt),                                                                           \
     launched(err))
    OT_CU_BY_FLOAT(dt, "dY", BN_GRAD)
#undef BN_GRAD
}
