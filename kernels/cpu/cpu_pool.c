/* cpu_pool.c — MaxPool (optional int64 Indices), AveragePool (count_include_pad)
 * and GlobalAveragePool on the CPU, for 1-D to 3-D spatial inputs (run as 3-D with
 * leading sizes of 1). The window, the argmax and the AveragePool divisor follow
 * kernels/pool_geometry.h, shared with grad_pool.c and the CUDA kernels. Parallel
 * over (image, channel) planes. */
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/pool_fast.h" /* ot_cpu_pool_argmax2d */
#include "kernels/pool_geometry.h"

ot_status ot_cpu_max_pool(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[0].dtype, err);
    ot_window3 p;
    ot_status st = ot_pool_window_init(&p, node, &in[0], &out[0], err);
    if (st) return st;
    int64_t *idx = node->n_outputs > 1 && out[1].data ? out[1].data : NULL;
    if (idx && out[1].dtype != OT_I64) return ot_cpu_bad_dtype(node, "Indices", out[1].dtype, err);
    /* storage_order 1: Indices count the spatial dims column-major (first dim fastest),
     * as ONNX Runtime does; the plane offset stays (n * C + c) * spatial size */
    bool col_major = p.col_major;
    const float *x = in[0].data;
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = p.planes * p.out_sz * p.k[0] * p.k[1] * p.k[2] >= OT_CPU_PAR_MIN;
    bool plain = ot_cpu_pool_plain2d(&p);
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t pl = 0; pl < p.planes; pl++) {
        const float *xp = x + pl * p.in_sz;
        for (int64_t o = 0; o < p.out_sz; o++) {
            float *yo = &y[pl * p.out_sz + o];
            int64_t bi = plain ? ot_cpu_pool_argmax2d(&p, xp, o / p.out[2], o % p.out[2], yo)
                               : ot_pool_window_argmax(&p, xp, o, yo);
            if (idx) idx[pl * p.out_sz + o] = ot_pool_window_index(&p, pl, bi, col_major);
        }
    }
    return OT_OK;
}

ot_status ot_cpu_average_pool(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                              ot_error *err) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[0].dtype, err);
    ot_window3 p;
    ot_status st = ot_pool_window_init(&p, node, &in[0], &out[0], err);
    if (st) return st;
    bool include_pad = p.include_pad;
    const float *x = in[0].data;
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = p.planes * p.out_sz * p.k[0] * p.k[1] * p.k[2] >= OT_CPU_PAR_MIN;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t pl = 0; pl < p.planes; pl++) {
        const float *xp = x + pl * p.in_sz;
        for (int64_t o = 0; o < p.out_sz; o++) y[pl * p.out_sz + o] = ot_pool_window_mean(&p, xp, o, include_pad);
    }
    return OT_OK;
}

ot_status ot_cpu_global_average_pool(const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                     const ot_kernel_ctx *ctx, ot_error *err) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[0].dtype, err);
    if (in[0].shape.rank < 2) return ot_fail(err, OT_E_SHAPE, "node '%s' (GlobalAveragePool): rank < 2", node->name);
    int64_t planes = in[0].shape.dim[0] * in[0].shape.dim[1], sz = ot_kernel_numel(&in[0]) / (planes ? planes : 1);
    if (ot_kernel_numel(&out[0]) != planes)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (GlobalAveragePool): output is not N x C x 1...", node->name);
    const float *x = in[0].data;
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = planes * sz >= OT_CPU_PAR_MIN;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t pl = 0; pl < planes; pl++) {
        double s = 0.0;
        for (int64_t i = 0; i < sz; i++) s += x[pl * sz + i];
        y[pl] = (float)(s / (double)sz);
    }
    return OT_OK;
}
