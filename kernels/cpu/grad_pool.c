/* grad_pool.c — CPU kernels of MaxPoolGrad and AveragePoolGrad (dY, X) -> dX with
 * the forward pool's attributes. MaxPool's argmax is recomputed from X with the
 * forward kernel's rule (first maximum in window order; NaN wins); AveragePool's
 * divisor follows cpu_pool.c (count_include_pad=1: the whole kernel; otherwise the
 * window positions inside the input). One thread per (n, c) plane: no two threads touch one dX element. */
#include <math.h>

#include "kernels/cpu/grad_kernels.h"

typedef struct pool3 {
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    int64_t planes, in_sz, out_sz;
} pool3;

static ot_status pool_init(pool3 *p, const ot_node *node, const ot_tensor *x, const ot_tensor *dy, ot_error *err) {
    int n = 0;
    const int64_t *kernel = ot_node_attr_ints(node, "kernel_shape", &n);
    if (!kernel || n != x->shape.rank - 2)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): kernel_shape missing or of the wrong length", node->name,
                       node->op_type);
    ot_cpu_window w;
    ot_status st = ot_cpu_window_init(&w, node, &x->shape, &dy->shape, kernel, err);
    if (st) return st;
    int lead = 3 - w.nd;
    p->in_sz = p->out_sz = 1;
    for (int i = 0; i < 3; i++) {
        int j = i - lead;
        p->in[i] = j >= 0 ? w.in[j] : 1;
        p->out[i] = j >= 0 ? w.out[j] : 1;
        p->k[i] = j >= 0 ? w.k[j] : 1;
        p->s[i] = j >= 0 ? w.stride[j] : 1;
        p->d[i] = j >= 0 ? w.dil[j] : 1;
        p->pb[i] = j >= 0 ? w.pad_begin[j] : 0;
        p->pe[i] = j >= 0 ? w.pad_end[j] : 0;
        p->in_sz *= p->in[i];
        p->out_sz *= p->out[i];
    }
    p->planes = x->shape.dim[0] * x->shape.dim[1];
    return OT_OK;
}

OT_GRAD_KERNEL(ot_cpu_pool_grad) {
    const ot_tensor *dy = &in[0], *x = &in[1];
    if (dy->dtype != OT_F32 || x->dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", x->dtype, err);
    pool3 p;
    ot_status st = pool_init(&p, node, x, dy, err);
    if (st) return st;
    bool is_max = node->op == OT_OP_MAX_POOL_GRAD;
    bool include_pad = ot_node_attr_int(node, "count_include_pad", 0) != 0;
    const float *xs = x->data, *dys = dy->data;
    float *dx = out[0].data;
    memset(dx, 0, (size_t)ot_cpu_numel(&out[0]) * sizeof(float));
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (p.planes * p.out_sz * p.k[0] * p.k[1] * p.k[2] >= OT_CPU_PAR_MIN)
    for (int64_t pl = 0; pl < p.planes; pl++) {
        const float *xp = xs + pl * p.in_sz;
        float *dp = dx + pl * p.in_sz;
        for (int64_t o = 0; o < p.out_sz; o++) {
            int64_t oi[3] = {o / (p.out[2] * p.out[1]), (o / p.out[2]) % p.out[1], o % p.out[2]};
            float g = dys[pl * p.out_sz + o];
            if (is_max) {
                float best = -INFINITY;
                int64_t bi = -1;
                for (int64_t a = 0; a < p.k[0]; a++) {
                    int64_t i0 = oi[0] * p.s[0] - p.pb[0] + a * p.d[0];
                    if (i0 < 0 || i0 >= p.in[0]) continue;
                    for (int64_t b = 0; b < p.k[1]; b++) {
                        int64_t i1 = oi[1] * p.s[1] - p.pb[1] + b * p.d[1];
                        if (i1 < 0 || i1 >= p.in[1]) continue;
                        for (int64_t c = 0; c < p.k[2]; c++) {
                            int64_t i2 = oi[2] * p.s[2] - p.pb[2] + c * p.d[2];
                            if (i2 < 0 || i2 >= p.in[2]) continue;
                            int64_t ii = (i0 * p.in[1] + i1) * p.in[2] + i2;
                            float v = xp[ii];
                            if (bi < 0 || v > best || isnan(v)) {
                                best = v;
                                bi = ii;
                                if (isnan(v)) goto found;
                            }
                        }
                    }
                }
            found:
                if (bi >= 0) dp[bi] += g;
                continue;
            }
            /* Same divisor as the forward kernel (cpu_pool.c): the whole kernel with
             * count_include_pad=1, else the window positions inside the input. */
            int64_t cnt_in[3];
            for (int dd = 0; dd < 3; dd++) {
                cnt_in[dd] = 0;
                for (int64_t a = 0; a < p.k[dd]; a++) {
                    int64_t i = oi[dd] * p.s[dd] - p.pb[dd] + a * p.d[dd];
                    if (i >= 0 && i < p.in[dd]) cnt_in[dd]++;
                }
            }
            int64_t div = include_pad ? p.k[0] * p.k[1] * p.k[2] : cnt_in[0] * cnt_in[1] * cnt_in[2];
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
