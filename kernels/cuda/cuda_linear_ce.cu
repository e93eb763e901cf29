/* cuda_linear_ce.cu — the chunked cross-entropy on the GPU (issue 28), the counterpart
 * of cpu/cpu_linear_ce.c: per chunk of rows, the logits by cuBLAS into the workspace,
 * the bias added after the product, one warp per row for its loss or, backward, its
 * gradient in place (the arithmetic of cuda_loss.cu's class-loss kernels), then dH and
 * dW (beta 1 after the first chunk) by cuBLAS and dBias by one thread per class over
 * the chunk's rows in order. Totals are kept on the device in the workspace and added
 * chunk by chunk in a fixed tree: repeatable, no atomics, no host round trip. */
#include <math.h>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/linear_ce_geometry.h"

typedef ot_linear_ce_geometry lce_geom;

__device__ __forceinline__ int64_t lce_label(const void *p, int i64, int64_t i) {
    return i64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}

__global__ void k_lce_bias(float *logits, const float *bias, int64_t m, int64_t V) {
    OT_CU_LOOP(i, m * V) logits[i] += bias[i % V];
}

/* One warp per row of the chunk: (loss, counted) into rl; a label outside [0, V)
 * gives NaN, which the numerics check reports with the node's name. */
__global__ void k_lce_rows(const float *logits, const void *lab, int i64, int64_t r0, int64_t m, lce_geom g,
                           double *rl) {
    int lane = threadIdx.x & 31;
    OT_CU_WARP_LOOP(r, m) {
        const float *x = logits + r * g.V;
        int64_t l = lce_label(lab, i64, r0 + r);
        float mx = -INFINITY;
        for (int64_t c = lane; c < g.V; c += 32)
            mx = fmaxf(mx, x[c]);
        mx = ot_cu_warp_max(mx);
        if (mx == -INFINITY) mx = 0.0f;
        float sum = 0.0f;
        for (int64_t c = lane; c < g.V; c += 32)
            sum += expf(x[c] - mx);
        sum = ot_cu_warp_sum(sum);
        if (lane == 0) {
            bool ig = g.has_ignore && l == g.ignore;
            double li = ig ? 0.0 : (l < 0 || l >= g.V) ? nan("") : -(double)((x[l] - mx) - logf(sum));
            rl[2 * r] = li;
            rl[2 * r + 1] = ig ? 0.0 : 1.0;
        }
    }
}

/* One block: the chunk's totals added to the running ones (tot[0], tot[1]); last
 * writes the mean into y. */
__global__ void k_lce_total(const double *rl, int64_t m, double *tot, int first, int last, float *y) {
    __shared__ double sh[32];
    double sl = 0.0, sw = 0.0;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x)
        sl += rl[2 * i], sw += rl[2 * i + 1];
    sl = ot_cu_block_sum(sl, sh);
    sw = ot_cu_block_sum(sw, sh);
    if (threadIdx.x == 0) {
        tot[0] = (first ? 0.0 : tot[0]) + sl;
        tot[1] = (first ? 0.0 : tot[1]) + sw;
        if (last) y[0] = (float)(tot[1] != 0.0 ? tot[0] / tot[1] : 0.0); /* none counted: 0, as the CPU */
    }
}

/* The mean's denominator: labels that count. */
__global__ void k_lce_count(const void *lab, int i64, lce_geom g, double *out) {
    __shared__ double sh[32];
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < g.rows; i += blockDim.x) {
        int64_t l = lce_label(lab, i64, i);
        if (!(g.has_ignore && l == g.ignore)) s += 1.0;
    }
    s = ot_cu_block_sum(s, sh);
    if (threadIdx.x == 0) out[0] = s;
}

/* One warp per row: g (p - onehot) in place over the logits, softmax in double. */
__global__ void k_lce_grad_rows(float *x0, const float *dls, const void *lab, int i64, int64_t r0, int64_t m,
                                lce_geom g, const double *count) {
    int lane = threadIdx.x & 31;
    OT_CU_WARP_LOOP(r, m) {
        float *x = x0 + r * g.V;
        int64_t l = lce_label(lab, i64, r0 + r);
        bool skip = g.has_ignore && l == g.ignore, bad = !skip && (l < 0 || l >= g.V);
        double gg = skip || count[0] <= 0.0 ? 0.0 : (double)dls[0] / count[0];
        if (bad) gg = nan("");
        double mx = -INFINITY, s = 0.0;
        for (int64_t c = lane; c < g.V; c += 32)
            mx = fmax(mx, (double)x[c]);
        for (int o = 16; o > 0; o >>= 1)
            mx = fmax(mx, __shfl_down_sync(0xffffffffu, mx, o));
        mx = __shfl_sync(0xffffffffu, mx, 0);
        for (int64_t c = lane; c < g.V; c += 32)
            s += exp(x[c] - mx);
        s = ot_cu_warp_sum(s);
        for (int64_t c = lane; c < g.V; c += 32) {
            double p = exp(x[c] - mx) / s;
            x[c] = (float)(gg * (p - (c == l ? 1.0 : 0.0)));
        }
    }
}

/* dBias[c] (+)= the chunk's rows of column c, in row order. */
__global__ void k_lce_dbias(const float *dl, int64_t m, int64_t V, int first, float *db) {
    OT_CU_LOOP(c, V) {
        float s = first ? 0.0f : db[c];
        for (int64_t r = 0; r < m; r++)
            s += dl[r * V + c];
        db[c] = s;
    }
}

static ot_status setup(const ot_node *node, const ot_tensor *in, const ot_kernel_ctx *ctx, lce_geom *g, float **logits,
                       double **rl, ot_error *err) {
    ot_status st = ot_linear_ce_geometry_init(g, node, in, err);
    if (st) return st;
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32) return ot_cuda_bad_dtype(node, "H or W", in[1].dtype, err);
    if (in[2].dtype != OT_I64 && in[2].dtype != OT_I32) return ot_cuda_bad_dtype(node, "labels", in[2].dtype, err);
    size_t fl = ot_linear_ce_doubles_offset(g);
    if (!ctx->workspace || ctx->workspace_bytes < fl + (size_t)(g->chunk * 2 + 2) * sizeof(double))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): workspace smaller than the backend asked for", node->name,
                       node->op_type);
    *logits = (float *)ctx->workspace;
    *rl = (double *)((char *)ctx->workspace + fl);
    return OT_OK;
}

/* logits = H rows r0 .. r0 + m - 1 times W (+ bias after the product). */
static ot_status chunk_logits(ot_cuda_ctx *cx, const lce_geom *g, const float *H, const float *W, const float *bias,
                              int64_t r0, int64_t m, float *logits, ot_error *err) {
    ot_status st = ot_cuda_sgemm(cx, false, g->trans_w, m, g->V, g->D, 1.0f, H + r0 * g->D, g->D, W,
                                 g->trans_w ? g->D : g->V, 0.0f, logits, g->V, err);
    if (st || !bias) return st;
    k_lce_bias<<<ot_cu_blocks(m * g->V), OT_CU_THREADS, 0, cx->stream>>>(logits, bias, m, g->V);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

OT_CUDA_LAUNCHER(ot_cuda_linear_ce) {
    lce_geom g;
    float *logits;
    double *rl;
    ot_status st = setup(node, in, ctx, &g, &logits, &rl, err);
    if (st) return st;
    const float *bias = g.has_bias ? (const float *)in[3].data : NULL;
    double *tot = rl + 2 * g.chunk;
    if (g.rows == 0) { /* no row counted: 0, as the CPU */
        OT_CUDA_CHECK(cudaMemsetAsync(out[0].data, 0, sizeof(float), cx->stream));
        return OT_OK;
    }
    for (int64_t r0 = 0; r0 < g.rows; r0 += g.chunk) {
        int64_t m = g.rows - r0 < g.chunk ? g.rows - r0 : g.chunk;
        if ((st = chunk_logits(cx, &g, (const float *)in[0].data, (const float *)in[1].data, bias, r0, m, logits, err)))
            return st;
        k_lce_rows<<<ot_cu_warp_blocks(m), OT_CU_THREADS, 0, cx->stream>>>(logits, in[2].data, in[2].dtype == OT_I64,
                                                                           r0, m, g, rl);
        OT_CUDA_LAUNCHED();
        k_lce_total<<<1, OT_CU_THREADS, 0, cx->stream>>>(rl, m, tot, r0 == 0, r0 + m >= g.rows, (float *)out[0].data);
        OT_CUDA_LAUNCHED();
    }
    return OT_OK;
}

OT_CUDA_LAUNCHER(ot_cuda_linear_ce_grad) {
    lce_geom g;
    float *dl;
    double *rl;
    ot_status st = setup(node, in + 1, ctx, &g, &dl, &rl, err);
    if (st) return st;
    if (in[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "dLoss", in[0].dtype, err);
    float *dH = (float *)ot_linear_ce_grad_out(node, out, 0);
    float *dW = (float *)ot_linear_ce_grad_out(node, out, 1);
    float *dB = g.has_bias ? (float *)ot_linear_ce_grad_out(node, out, 2) : NULL;
    const float *H = (const float *)in[1].data, *W = (const float *)in[2].data;
    const float *bias = g.has_bias ? (const float *)in[4].data : NULL;
    int i64 = in[3].dtype == OT_I64;
    if (g.rows == 0) { /* no rows: zero gradients, as the CPU */
        if (dW) OT_CUDA_CHECK(cudaMemsetAsync(dW, 0, (size_t)(g.D * g.V) * sizeof(float), cx->stream));
        if (dB) OT_CUDA_CHECK(cudaMemsetAsync(dB, 0, (size_t)g.V * sizeof(float), cx->stream));
        return OT_OK;
    }
    k_lce_count<<<1, OT_CU_THREADS, 0, cx->stream>>>(in[3].data, i64, g, rl);
    OT_CUDA_LAUNCHED();
    for (int64_t r0 = 0; r0 < g.rows; r0 += g.chunk) {
        int64_t m = g.rows - r0 < g.chunk ? g.rows - r0 : g.chunk;
        if ((st = chunk_logits(cx, &g, H, W, bias, r0, m, dl, err))) return st;
        k_lce_grad_rows<<<ot_cu_warp_blocks(m), OT_CU_THREADS, 0, cx->stream>>>(dl, (const float *)in[0].data,
                                                                                in[3].data, i64, r0, m, g, rl);
        OT_CUDA_LAUNCHED();
        if (dH && (st = ot_cuda_sgemm(cx, false, !g.trans_w, m, g.D, g.V, 1.0f, dl, g.V, W, g.trans_w ? g.D : g.V, 0.0f,
                                      dH + r0 * g.D, g.D, err)))
            return st;
        float beta = r0 == 0 ? 0.0f : 1.0f;
        if (dW && !g.trans_w)
            st = ot_cuda_sgemm(cx, true, false, g.D, g.V, m, 1.0f, H + r0 * g.D, g.D, dl, g.V, beta, dW, g.V, err);
        else if (dW)
            st = ot_cuda_sgemm(cx, true, false, g.V, g.D, m, 1.0f, dl, g.V, H + r0 * g.D, g.D, beta, dW, g.D, err);
        if (st) return st;
        if (dB) {
            k_lce_dbias<<<ot_cu_blocks(g.V), OT_CU_THREADS, 0, cx->stream>>>(dl, m, g.V, r0 == 0, dB);
            OT_CUDA_LAUNCHED();
        }
    }
    return OT_OK;
}
