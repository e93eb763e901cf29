/* cpu_pool.c — MaxPool (optional int64 Indices), AveragePool (count_include_pad)
 * and GlobalAveragePool on the CPU, for 1-D to 3-D spatial inputs (run as 3-D with
 * leading sizes of 1). Output sizes come from shape inference, so ceil_mode only
 * shows as windows that hang over the padded input; they are clipped. Parallel over
 * (image, channel) planes.
 *
 * AveragePool divisor: count_include_pad=0 counts the input positions in the window;
 * count_include_pad=1 counts the whole kernel, also where a ceil_mode window hangs
 * past the end pad (the ONNX reference pads the input that far). PyTorch never emits
 * count_include_pad=1: it exports an explicit Pad and count_include_pad=0, whose
 * divisor (positions inside the padded input) matches torch's own rule. */
#include <math.h>

#include "kernels/cpu/cpu_common.h"

/* The window as 3-D: dims of 1 prepended for 1-D and 2-D pools. */
typedef struct pool3 {
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    int64_t planes, in_sz, out_sz;
} pool3;

static ot_status pool_init(pool3 *p, const ot_node *node, const ot_tensor *x, const ot_tensor *y,
                           const int64_t *kernel, ot_error *err) {
    ot_cpu_window w;
    ot_status st = ot_cpu_window_init(&w, node, &x->shape, &y->shape, kernel, err);
    if (st) return st;
    if (y->shape.dim[0] != x->shape.dim[0] || y->shape.dim[1] != x->shape.dim[1])
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output N, C differ from the input's", node->name,
                       node->op_type);
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

static ot_status pool_kernel_attr(const ot_node *node, const ot_tensor *x, const int64_t **k, ot_error *err) {
    int n = 0;
    *k = ot_node_attr_ints(node, "kernel_shape", &n);
    if (!*k || n != x->shape.rank - 2)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): kernel_shape missing or of the wrong length", node->name,
                       node->op_type);
    return OT_OK;
}

ot_status ot_cpu_max_pool(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[0].dtype, err);
    const int64_t *kernel;
    pool3 p;
    ot_status st = pool_kernel_attr(node, &in[0], &kernel, err);
    if (!st) st = pool_init(&p, node, &in[0], &out[0], kernel, err);
    if (st) return st;
    int64_t *idx = node->n_outputs > 1 && out[1].data ? out[1].data : NULL;
    if (idx && out[1].dtype != OT_I64) return ot_cpu_bad_dtype(node, "Indices", out[1].dtype, err);
    /* storage_order 1: Indices count the spatial dims column-major (first dim fastest),
     * as ONNX Runtime does; the plane offset stays (n * C + c) * spatial size */
    bool col_major = ot_node_attr_int(node, "storage_order", 0) != 0;
    const float *x = in[0].data;
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = p.planes * p.out_sz * p.k[0] * p.k[1] * p.k[2] >= OT_CPU_PAR_MIN;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t pl = 0; pl < p.planes; pl++) {
        const float *xp = x + pl * p.in_sz;
        for (int64_t o = 0; o < p.out_sz; o++) {
            int64_t o2 = o % p.out[2], o1 = (o / p.out[2]) % p.out[1], o0 = o / (p.out[2] * p.out[1]);
            float best = -INFINITY;
            int64_t bi = -1;
            for (int64_t a = 0; a < p.k[0]; a++) {
                int64_t i0 = o0 * p.s[0] - p.pb[0] + a * p.d[0];
                if (i0 < 0 || i0 >= p.in[0]) continue;
                for (int64_t b = 0; b < p.k[1]; b++) {
                    int64_t i1 = o1 * p.s[1] - p.pb[1] + b * p.d[1];
                    if (i1 < 0 || i1 >= p.in[1]) continue;
                    for (int64_t c = 0; c < p.k[2]; c++) {
                        int64_t i2 = o2 * p.s[2] - p.pb[2] + c * p.d[2];
                        if (i2 < 0 || i2 >= p.in[2]) continue;
                        int64_t ii = (i0 * p.in[1] + i1) * p.in[2] + i2;
                        float v = xp[ii];
                        /* NaN propagates, as in PyTorch */
                        if (bi < 0 || v > best || isnan(v)) {
                            best = v;
                            bi = ii;
                            if (isnan(v)) goto done;
                        }
                    }
                }
            }
        done:
            y[pl * p.out_sz + o] = best;
            if (idx) {
                int64_t sp = bi;
                if (col_major && bi >= 0) {
                    int64_t i2 = bi % p.in[2], i1 = (bi / p.in[2]) % p.in[1], i0 = bi / (p.in[2] * p.in[1]);
                    /* leading size-1 dims of 1-D/2-D pools drop out: 2-D gives h + w * H */
                    sp = i0 + i1 * p.in[0] + i2 * p.in[0] * p.in[1];
                }
                idx[pl * p.out_sz + o] = bi < 0 ? -1 : pl * p.in_sz + sp;
            }
        }
    }
    return OT_OK;
}

ot_status ot_cpu_average_pool(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                              ot_error *err) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[0].dtype, err);
    const int64_t *kernel;
    pool3 p;
    ot_status st = pool_kernel_attr(node, &in[0], &kernel, err);
    if (!st) st = pool_init(&p, node, &in[0], &out[0], kernel, err);
    if (st) return st;
    bool include_pad = ot_node_attr_int(node, "count_include_pad", 0) != 0;
    const float *x = in[0].data;
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = p.planes * p.out_sz * p.k[0] * p.k[1] * p.k[2] >= OT_CPU_PAR_MIN;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t pl = 0; pl < p.planes; pl++) {
        const float *xp = x + pl * p.in_sz;
        for (int64_t o = 0; o < p.out_sz; o++) {
            int64_t oi[3] = {o / (p.out[2] * p.out[1]), (o / p.out[2]) % p.out[1], o % p.out[2]};
            /* per dim: window positions inside the input */
            int64_t cnt_in[3];
            for (int dd = 0; dd < 3; dd++) {
                cnt_in[dd] = 0;
                for (int64_t a = 0; a < p.k[dd]; a++) {
                    int64_t i = oi[dd] * p.s[dd] - p.pb[dd] + a * p.d[dd];
                    if (i >= 0 && i < p.in[dd]) cnt_in[dd]++;
                }
            }
            float s = 0.0f;
            for (int64_t a = 0; a < p.k[0]; a++) {
                int64_t i0 = oi[0] * p.s[0] - p.pb[0] + a * p.d[0];
                if (i0 < 0 || i0 >= p.in[0]) continue;
                for (int64_t b = 0; b < p.k[1]; b++) {
                    int64_t i1 = oi[1] * p.s[1] - p.pb[1] + b * p.d[1];
                    if (i1 < 0 || i1 >= p.in[1]) continue;
                    for (int64_t c = 0; c < p.k[2]; c++) {
                        int64_t i2 = oi[2] * p.s[2] - p.pb[2] + c * p.d[2];
                        if (i2 < 0 || i2 >= p.in[2]) continue;
                        s += xp[(i0 * p.in[1] + i1) * p.in[2] + i2];
                    }
                }
            }
            int64_t div = include_pad ? p.k[0] * p.k[1] * p.k[2] : cnt_in[0] * cnt_in[1] * cnt_in[2];
            y[pl * p.out_sz + o] = div > 0 ? s / (float)div : 0.0f;
        }
    }
    return OT_OK;
}

ot_status ot_cpu_global_average_pool(const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                     const ot_kernel_ctx *ctx, ot_error *err) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[0].dtype, err);
    if (in[0].shape.rank < 2) return ot_fail(err, OT_E_SHAPE, "node '%s' (GlobalAveragePool): rank < 2", node->name);
    int64_t planes = in[0].shape.dim[0] * in[0].shape.dim[1], sz = ot_cpu_numel(&in[0]) / (planes ? planes : 1);
    if (ot_cpu_numel(&out[0]) != planes)
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
