/* cuda_pool.cu — MaxPool (optional Indices), AveragePool, GlobalAveragePool and
 * their gradients on the GPU, the counterparts of cpu_pool.c and grad_pool.c with
 * the same window rules, the very code of kernels/pool_geometry.h (1-D to 3-D run as
 * 3-D; first maximum in window order, NaN wins; the AveragePool divisor). The gradients
 * gather: one thread per dX element visits the outputs whose windows cover it in
 * ascending output order, the order in which the CPU adds them, with no atomics. */
#include <math.h>
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/pool_geometry.h"

struct max_pool_op {
    const float *x;
    float *y;
    int64_t *idx;
    ot_window3 p;
    int col_major;
    __host__ __device__ void operator()(int64_t t) const {
        int64_t pl = t / p.out_sz, o = t % p.out_sz;
        float best;
        int64_t bi = ot_pool_window_argmax(&p, x + pl * p.in_sz, o, &best);
        y[t] = best;
        if (idx) idx[t] = ot_pool_window_index(&p, pl, bi, col_major);
    }
};

OT_CUDA_LAUNCHER(ot_cuda_max_pool) {
    (void)ctx;
    if (in[0].dtype != OT_F32) return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (MaxPool): float32 only", node->name);
    ot_window3 p;
    ot_status st = ot_pool_window_init(&p, node, &in[0], &out[0], err);
    if (st) return st;
    int64_t *idx = node->n_outputs > 1 && out[1].data ? (int64_t *)out[1].data : NULL;
    if (idx && out[1].dtype != OT_I64)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (MaxPool): Indices must be int64", node->name);
    int64_t n = p.planes * p.out_sz;
    if (n == 0) return OT_OK;
    return ot_cu_map(cx,
                     max_pool_op{(const float *)in[0].data, (float *)out[0].data, idx, p, p.col_major},
                     n, err);
}

struct avg_pool_op {
    const float *x;
    float *y;
    ot_window3 p;
    int include_pad;
    __host__ __device__ void operator()(int64_t t) const {
        int64_t pl = t / p.out_sz, o = t % p.out_sz;
        y[t] = ot_pool_window_mean(&p, x + pl * p.in_sz, o, include_pad);
    }
};

OT_CUDA_LAUNCHER(ot_cuda_average_pool) {
    (void)ctx;
    if (in[0].dtype != OT_F32)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (AveragePool): float32 only", node->name);
    ot_window3 p;
    ot_status st = ot_pool_window_init(&p, node, &in[0], &out[0], err);
    if (st) return st;
    int64_t n = p.planes * p.out_sz;
    if (n == 0) return OT_OK;
    return ot_cu_map(cx,
                     avg_pool_op{(const float *)in[0].data, (float *)out[0].data, p, p.include_pad},
                     n, err);
}

__global__ void k_gap(const float *x, float *y, int64_t planes, int64_t sz) {
    int lane = threadIdx.x & 31;
    OT_CU_WARP_LOOP(pl, planes) {
        double s = 0.0;
        for (int64_t i = lane; i < sz; i += 32) s += x[pl * sz + i];
        s = ot_cu_warp_sum(s);
        if (lane == 0) y[pl] = (float)(s / (double)sz);
    }
}

OT_CUDA_LAUNCHER(ot_cuda_global_average_pool) {
    (void)ctx;
    if (in[0].dtype != OT_F32)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (GlobalAveragePool): float32 only", node->name);
    if (in[0].shape.rank < 2) return ot_fail(err, OT_E_SHAPE, "node '%s' (GlobalAveragePool): rank < 2", node->name);
    int64_t planes = in[0].shape.dim[0] * in[0].shape.dim[1];
    int64_t sz = planes ? ot_kernel_numel(&in[0]) / planes : 0;
    if (ot_kernel_numel(&out[0]) != planes)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (GlobalAveragePool): output is not N x C x 1...", node->name);
    if (planes == 0) return OT_OK;
    k_gap<<<ot_cu_warp_blocks(planes), OT_CU_THREADS, 0, cx->stream>>>((const float *)in[0].data, (float *)out[0].data,
                                                                       planes, sz);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

/* Output positions along one dim whose window touches input position i, ascending:
 * o = (i + pb - a*d) / s for the taps a that divide exactly; a descending gives o
 * ascending. */
struct pool_grad_op {
    const float *dy, *x;
    float *dx;
    ot_window3 p;
    int is_max, include_pad;
    __host__ __device__ void operator()(int64_t t) const {
        int64_t pl = t / p.in_sz, ii = t % p.in_sz;
        int64_t i[3] = {ii / (p.in[2] * p.in[1]), (ii / p.in[2]) % p.in[1], ii % p.in[2]};
        const float *xp = x + pl * p.in_sz;
        const float *gp = dy + pl * p.out_sz;
        float acc = 0.0f;
        for (int64_t a = p.k[0] - 1; a >= 0; a--) {
            int64_t n0 = i[0] + p.pb[0] - a * p.d[0];
            if (n0 < 0 || n0 % p.s[0]) continue;
            int64_t o0 = n0 / p.s[0];
            if (o0 >= p.out[0]) continue;
            for (int64_t b = p.k[1] - 1; b >= 0; b--) {
                int64_t n1 = i[1] + p.pb[1] - b * p.d[1];
                if (n1 < 0 || n1 % p.s[1]) continue;
                int64_t o1 = n1 / p.s[1];
                if (o1 >= p.out[1]) continue;
                for (int64_t c = p.k[2] - 1; c >= 0; c--) {
                    int64_t n2 = i[2] + p.pb[2] - c * p.d[2];
                    if (n2 < 0 || n2 % p.s[2]) continue;
                    int64_t o2 = n2 / p.s[2];
                    if (o2 >= p.out[2]) continue;
                    int64_t o = (o0 * p.out[1] + o1) * p.out[2] + o2;
                    float g = gp[o];
                    if (is_max) {
                        float best;
                        if (ot_pool_window_argmax(&p, xp, o, &best) == ii) acc = ot_cu_fadd(acc, g);
                    } else {
                        int64_t div = ot_pool_window_divisor(&p, o, include_pad);
                        if (div > 0) acc = ot_cu_fadd(acc, ot_cu_fdiv(g, (float)div));
                    }
                }
            }
        }
        dx[t] = acc;
    }
};

OT_CUDA_LAUNCHER(ot_cuda_pool_grad) {
    (void)ctx;
    const ot_tensor *dy = &in[0], *x = &in[1];
    if (dy->dtype != OT_F32 || x->dtype != OT_F32)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): float32 only", node->name, node->op_type);
    ot_window3 p;
    ot_status st = ot_pool_window_init(&p, node, x, dy, err);
    if (st) return st;
    int64_t n = p.planes * p.in_sz;
    if (n == 0) return OT_OK;
    return ot_cu_map(cx,
                     pool_grad_op{(const float *)dy->data, (const float *)x->data, (float *)out[0].data, p,
                                  node->op == OT_OP_MAX_POOL_GRAD, p.include_pad},
                     n, err);
}
