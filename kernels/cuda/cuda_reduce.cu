/* cuda_reduce.cu — reductions and normalisation on the GPU, the counterparts of
 * the ReduceMean / ReduceSum of cpu_reduce.c, cpu_norm.c (Softmax, LayerNorm,
 * BatchNorm; Dropout is in cuda_pointwise_grad.cu), grad_reduce.c and grad_norm.c (the
 * losses are in cuda_loss.cu). Sums run in
 * double like the CPU's, reduced by one warp or block per output in a fixed tree,
 * so results are repeatable run to run (they differ from the CPU's sequential
 * order only by rounding). Nothing uses atomics. */
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

__global__ void k_softmax(const float *x, float *y, sm_geom g, int logsm) {
    int lane = threadIdx.x & 31;
    OT_CU_WARP_LOOP(l, g.lines) {
        int64_t o = l / g.inner, i = l % g.inner;
        const float *xl = x + o * g.len * g.inner + i;
        float *yl = y + o * g.len * g.inner + i;
        float mx = -INFINITY;
        for (int64_t k = lane; k < g.len; k += 32) mx = fmaxf(mx, xl[k * g.inner]);
        mx = ot_cu_warp_max(mx);
        if (mx == -INFINITY) mx = 0.0f;
        float sum = 0.0f;
        for (int64_t k = lane; k < g.len; k += 32) sum += expf(xl[k * g.inner] - mx);
        sum = ot_cu_warp_sum(sum);
        if (logsm) {
            float ls = logf(sum);
            for (int64_t k = lane; k < g.len; k += 32) yl[k * g.inner] = (xl[k * g.inner] - mx) - ls;
        } else {
            float inv = 1.0f / sum;
            for (int64_t k = lane; k < g.len; k += 32) yl[k * g.inner] = expf(xl[k * g.inner] - mx) * inv;
        }
    }
}

OT_CUDA_LAUNCHER(ot_cuda_softmax) {
    (void)ctx;
    if (in[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "input", in[0].dtype, err);
    if (ot_kernel_numel(&out[0]) != ot_kernel_numel(&in[0]))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output size differs from input", node->name, node->op_type);
    bool logsm = node->op == OT_OP_LOG_SOFTMAX;
    if (in[0].shape.rank == 0) {
        float v = logsm ? 0.0f : 1.0f;
        OT_CUDA_CHECK(cudaMemcpyAsync(out[0].data, &v, 4, cudaMemcpyHostToDevice, cx->stream));
        OT_CUDA_CHECK(cudaStreamSynchronize(cx->stream));
        return OT_OK;
    }
    sm_geom g;
    ot_status st = softmax_geom(node, &in[0].shape, &g, err);
    if (st || g.lines * g.len == 0) return st;
    k_softmax<<<ot_cu_warp_blocks(g.lines), OT_CU_THREADS, 0, cx->stream>>>((const float *)in[0].data,
                                                                            (float *)out[0].data, g, logsm);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

__global__ void k_softmax_grad(const float *dy, const float *y, float *dx, sm_geom g, int logsm) {
    int lane = threadIdx.x & 31;
    OT_CU_WARP_LOOP(l, g.lines) {
        int64_t o = l / g.inner, i = l % g.inner, base = o * g.len * g.inner + i;
        double dot = 0.0;
        for (int64_t k = lane; k < g.len; k += 32) {
            int64_t j = base + k * g.inner;
            dot += logsm ? (double)dy[j] : (double)dy[j] * y[j];
        }
        dot = ot_cu_warp_sum(dot);
        for (int64_t k = lane; k < g.len; k += 32) {
            int64_t j = base + k * g.inner;
            dx[j] = logsm ? (float)(dy[j] - exp((double)y[j]) * dot) : (float)(y[j] * (dy[j] - dot));
        }
    }
}

OT_CUDA_LAUNCHER(ot_cuda_softmax_grad) {
    (void)ctx;
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32) return ot_cuda_bad_dtype(node, "input", in[1].dtype, err);
    if (in[1].shape.rank == 0) {
        OT_CUDA_CHECK(cudaMemsetAsync(out[0].data, 0, 4, cx->stream));
        return OT_OK;
    }
    sm_geom g;
    ot_status st = softmax_geom(node, &in[1].shape, &g, err);
    if (st || g.lines * g.len == 0) return st;
    k_softmax_grad<<<ot_cu_warp_blocks(g.lines), OT_CU_THREADS, 0, cx->stream>>>(
        (const float *)in[0].data, (const float *)in[1].data, (float *)out[0].data, g,
        node->op == OT_OP_LOG_SOFTMAX_GRAD);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

/* ---- LayerNormalization ---------------------------------------------------------- */

__global__ void k_layer_norm(const float *x, const float *scale, const float *bias, float *y, float *om, float *oi,
                             int64_t rows, int64_t cols, int64_t ss, int64_t sb, float eps) {
    __shared__ double sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        double acc = 0.0;
        for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) acc += xr[i];
        acc = ot_cu_block_sum(acc, sh);
        double mean = cols ? acc / (double)cols : 0.0, sq = 0.0;
        for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
            double d = xr[i] - mean;
            sq += d * d;
        }
        sq = ot_cu_block_sum(sq, sh);
        float inv = (float)(1.0 / sqrt((cols ? sq / (double)cols : 0.0) + (double)eps));
        float m = (float)mean;
        for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
            float v = __fmul_rn(__fmul_rn(xr[i] - m, inv), scale[i * ss]);
            yr[i] = bias ? v + bias[i * sb] : v;
        }
        if (threadIdx.x == 0) {
            if (om) om[r] = m;
            if (oi) oi[r] = inv;
        }
    }
}

static unsigned row_blocks(int64_t rows) { return (unsigned)(rows < 65535 ? (rows < 1 ? 1 : rows) : 65535); }

OT_CUDA_LAUNCHER(ot_cuda_layer_norm) {
    (void)ctx;
    for (int k = 0; k < node->n_inputs; k++)
        if (in[k].data && in[k].dtype != OT_F32) return ot_cuda_bad_dtype(node, "an input", in[k].dtype, err);
    ot_layer_norm_args la;
    ot_status pst = ot_layer_norm_args_init(&la, node, in, out, err);
    if (pst) return pst;
    int64_t rows = la.rows, cols = la.cols;
    float eps = la.eps;
    const float *bias = la.has_bias ? (const float *)in[2].data : NULL;
    float *om = node->n_outputs > 1 && out[1].data ? (float *)out[1].data : NULL;
    float *oi = node->n_outputs > 2 && out[2].data ? (float *)out[2].data : NULL;
    if (rows * cols == 0) return OT_OK;
    k_layer_norm<<<row_blocks(rows), OT_CU_THREADS, 0, cx->stream>>>((const float *)in[0].data,
                                                                     (const float *)in[1].data, bias,
                                                                     (float *)out[0].data, om, oi, rows, cols,
                                                                     la.scale_step, la.bias_step, eps);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

/* Per row: statistics into stat (mean, 1/std as double) and dX. */
__global__ void k_layer_norm_grad_rows(const float *dy, const float *x, const float *sc, float *dx, double *stat,
                                       int64_t rows, int64_t cols, double eps) {
    __shared__ double sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * cols, *dr = dy + r * cols;
        double mean = 0.0, var = 0.0;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) mean += xr[j];
        mean = ot_cu_block_sum(mean, sh) / (double)cols;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) var += (xr[j] - mean) * (xr[j] - mean);
        var = ot_cu_block_sum(var, sh) / (double)cols;
        double inv = 1.0 / sqrt(var + eps);
        if (threadIdx.x == 0) {
            stat[2 * r] = mean;
            stat[2 * r + 1] = inv;
        }
        if (!dx) continue;
        double mg = 0.0, mgx = 0.0;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            double g = (double)dr[j] * sc[j];
            mg += g;
            mgx += g * (xr[j] - mean) * inv;
        }
        mg = ot_cu_block_sum(mg, sh) / (double)cols;
        mgx = ot_cu_block_sum(mgx, sh) / (double)cols;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            double xh = (xr[j] - mean) * inv;
            dx[r * cols + j] = (float)(inv * ((double)dr[j] * sc[j] - mg - xh * mgx));
        }
    }
}

/* Per column: dScale and dBias summed over rows in row order. */
__global__ void k_layer_norm_grad_cols(const float *dy, const float *x, const double *stat, float *dsc, float *db,
                                       int64_t rows, int64_t cols) {
    OT_CU_LOOP(j, cols) {
        double a = 0.0, b = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            double g = dy[r * cols + j];
            a += g * (x[r * cols + j] - stat[2 * r]) * stat[2 * r + 1];
            b += g;
        }
        if (dsc) dsc[j] = (float)a;
        if (db) db[j] = (float)b;
    }
}

static bool ln_view(const ot_node *node, const ot_tensor *x, int64_t *rows, int64_t *cols) {
    return ot_layer_norm_view(node, &x->shape, rows, cols);
}

OT_CUDA_LAUNCHER(ot_cuda_layer_norm_grad) {
    const ot_tensor *x = &in[1];
    if (in[0].dtype != OT_F32 || x->dtype != OT_F32 || in[2].dtype != OT_F32)
        return ot_cuda_bad_dtype(node, "input", x->dtype, err);
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
    float *dx = (float *)out[0].data;
    float *dsc = node->n_outputs > 1 ? (float *)out[1].data : NULL, *db = node->n_outputs > 2 ? (float *)out[2].data : NULL;
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_norm_params *np = &pp->u.norm;
    double eps = np->epsilon;
    k_layer_norm_grad_rows<<<row_blocks(rows), OT_CU_THREADS, 0, cx->stream>>>(
        (const float *)in[0].data, (const float *)x->data, (const float *)in[2].data, dx, stat, rows, cols, eps);
    OT_CUDA_LAUNCHED();
    if (dsc || db) {
        k_layer_norm_grad_cols<<<ot_cu_blocks(cols), OT_CU_THREADS, 0, cx->stream>>>(
            (const float *)in[0].data, (const float *)x->data, stat, dsc, db, rows, cols);
        OT_CUDA_LAUNCHED();
    }
    return OT_OK;
}

/* ---- BatchNormalization: one block per channel ----------------------------------- */

__global__ void k_batch_norm(const float *x, const float *scale, const float *bias, const float *rmean,
                             const float *rvar, float *y, float *om, float *ov, int64_t N, int64_t C, int64_t S,
                             int training, int unbiased_stats, float eps, float mom) {
    __shared__ double sh[32];
    int64_t cnt = N * S;
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        double mean, var;
        float rm = rmean[c], rv = rvar[c], sc = scale[c], bi = bias[c];
        if (training) {
            double acc = 0.0;
            for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) acc += x[((t / S) * C + c) * S + t % S];
            acc = ot_cu_block_sum(acc, sh);
            mean = cnt ? acc / (double)cnt : 0.0;
            double sq = 0.0;
            for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) {
                double d = x[((t / S) * C + c) * S + t % S] - mean;
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
            y[j] = __fadd_rn(__fmul_rn(x[j], a), b);
        }
        __syncthreads(); /* running stats may alias inputs 3 and 4: every thread has read them */
        if (threadIdx.x == 0) {
            if (training) {
                double unb = (unbiased_stats && cnt > 1) ? var * (double)cnt / (double)(cnt - 1) : var;
                if (om) om[c] = __fadd_rn(__fmul_rn(mom, rm), __fmul_rn(1.0f - mom, (float)mean));
                if (ov) ov[c] = __fadd_rn(__fmul_rn(mom, rv), __fmul_rn(1.0f - mom, (float)unb));
            } else {
                if (om) om[c] = rm;
                if (ov) ov[c] = rv;
            }
        }
    }
}

OT_CUDA_LAUNCHER(ot_cuda_batch_norm) {
    (void)ctx;
    for (int k = 0; k < 5; k++)
        if (in[k].dtype != OT_F32) return ot_cuda_bad_dtype(node, "an input", in[k].dtype, err);
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
    float *om = node->n_outputs > 1 && out[1].data ? (float *)out[1].data : NULL;
    float *ov = node->n_outputs > 2 && out[2].data ? (float *)out[2].data : NULL;
    k_batch_norm<<<row_blocks(C), OT_CU_THREADS, 0, cx->stream>>>(
        (const float *)in[0].data, (const float *)in[1].data, (const float *)in[2].data, (const float *)in[3].data,
        (const float *)in[4].data, (float *)out[0].data, om, ov, N, C, S,
        np->training_mode, np->unbiased_running_var, np->epsilon, np->momentum);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

__global__ void k_batch_norm_grad(const float *dy, const float *xs, const float *sc, const float *rm, const float *rv,
                                  float *dx, float *dsc, float *db, int64_t N, int64_t C, int64_t S, int train,
                                  double eps) {
    __shared__ double sh[32];
    int64_t cnt = N * S;
    double M = (double)cnt;
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        double mean = 0.0, var = 0.0;
        if (train) {
            for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) mean += xs[((t / S) * C + c) * S + t % S];
            mean = ot_cu_block_sum(mean, sh) / M;
            for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) {
                double d = xs[((t / S) * C + c) * S + t % S] - mean;
                var += d * d;
            }
            var = ot_cu_block_sum(var, sh) / M;
        } else {
            mean = rm[c];
            var = rv[c];
        }
        double inv = 1.0 / sqrt(var + eps), sdy = 0.0, sdyx = 0.0;
        for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) {
            int64_t j = ((t / S) * C + c) * S + t % S;
            sdy += dy[j];
            sdyx += dy[j] * (xs[j] - mean) * inv;
        }
        sdy = ot_cu_block_sum(sdy, sh);
        sdyx = ot_cu_block_sum(sdyx, sh);
        if (threadIdx.x == 0) {
            if (db) db[c] = (float)sdy;
            if (dsc) dsc[c] = (float)sdyx;
        }
        if (!dx) continue;
        double k = sc[c] * inv;
        for (int64_t t = threadIdx.x; t < cnt; t += blockDim.x) {
            int64_t j = ((t / S) * C + c) * S + t % S;
            if (train) {
                double xh = (xs[j] - mean) * inv;
                dx[j] = (float)(k * (dy[j] - sdy / M - xh * sdyx / M));
            } else {
                dx[j] = (float)(k * dy[j]);
            }
        }
    }
}

OT_CUDA_LAUNCHER(ot_cuda_batch_norm_grad) {
    (void)ctx;
    const ot_tensor *x = &in[1];
    if (in[0].dtype != OT_F32 || x->dtype != OT_F32 || in[2].dtype != OT_F32)
        return ot_cuda_bad_dtype(node, "input", x->dtype, err);
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
    k_batch_norm_grad<<<row_blocks(C), OT_CU_THREADS, 0, cx->stream>>>(
        (const float *)in[0].data, (const float *)x->data, (const float *)in[2].data,
        train ? NULL : (const float *)in[3].data, train ? NULL : (const float *)in[4].data, (float *)out[0].data,
        node->n_outputs > 1 ? (float *)out[1].data : NULL, node->n_outputs > 2 ? (float *)out[2].data : NULL, N, C, S,
        train, (double)np->epsilon);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}
