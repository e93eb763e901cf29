/* grad_pool.c — CPU kernels of MaxPoolGrad and AveragePoolGrad (dY, X) -> dX with
 * the forward pool's attributes. The window, MaxPool's argmax (recomputed from X) and
 * AveragePool's divisor are the forward kernel's, from kernels/pool_geometry.h. One
 * thread per (n, c) plane: no two threads touch one dX element. */
#include "kernels/cpu/grad_kernels.h"
#include "kernels/cpu/pool_fast.h" /* ot_cpu_pool_argmax2d */
#include "kernels/pool_geometry.h"

OT_GRAD_KERNEL(ot_cpu_pool_grad) {
    const ot_tensor *dy = &in[0], *x = &in[1];
    if (dy->dtype != OT_F32 || x->dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", x->dtype, err);
    ot_window3 p;
    ot_status st = ot_pool_window_init(&p, node, x, dy, err);
    if (st) return st;
    bool is_max = node->op == OT_OP_MAX_POOL_GRAD;
    bool include_pad = p.include_pad;
    const float *xs = x->data, *dys = dy->data;
    float *dx = out[0].data;
    memset(dx, 0, (size_t)ot_kernel_numel(&out[0]) * sizeof(float));
    int nt = ot_cpu_threads(ctx);
    bool plain = ot_cpu_pool_plain2d(&p);
#pragma omp parallel for schedule(static) num_threads(nt) if (p.planes * p.out_sz * p.k[0] * p.k[1] * p.k[2] >= OT_CPU_PAR_MIN)
    for (int64_t pl = 0; pl < p.planes; pl++) {
        const float *xp = xs + pl * p.in_sz;
        float *dp = dx + pl * p.in_sz;
        for (int64_t o = 0; o < p.out_sz; o++) {
            int64_t oi[3] = {o / (p.out[2] * p.out[1]), (o / p.out[2]) % p.out[1], o % p.out[2]};
            float g = dys[pl * p.out_sz + o];
            if (is_max) {
                float best;
                int64_t bi = plain ? ot_cpu_pool_argmax2d(&p, xp, oi[1], oi[2], &best)
                                   : ot_pool_window_argmax(&p, xp, o, &best);
                if (bi >= 0) dp[bi] += g;
                continue;
            }
            int64_t div = ot_pool_window_divisor(&p, o, include_pad);
            if (div <= 0) continue;
            float share = g / (float)div;
            for (int64_t a = 0; a < p.k[0]; a++) {
                int64_t i0 = oi[0] * p.s[0] - p.pb[0] + a * p.d[0];
                if (i0 < 0 || i0 >= p.in[0]) continue;
                for (int64_t b = 0; b < p.k[1]; b++) {
                    int64_t i1 = oi[1] * p.s[1] - p.pb[1] + b * p.d[1];
                    if (i1 < 0 || i1 >= p.in[1]) continue;
                    for (int64_t c = 0; c < p.k[2]; c++) {
                        int64_t i2 = oi[2] * p.s[2] - p.pb[2] + c * p.d[2];
                        if (i2 < 0 || i2 >= p.in[2]) continue;
                        dp[(i0 * p.in[1] + i1) * p.in[2] + i2] += share;
                    }
                }
            }
        }
    }
    return OT_OK;
}
