/* grad_reduce.c — CPU kernels of the broadcasting backward ops ReduceToLike (sum
 * over broadcast axes, right-aligned like ONNX broadcasting) and ExpandLike, and of
 * SoftmaxGrad / LogSoftmaxGrad. */
#include <math.h>

#include "kernels/cpu/grad_kernels.h"
#include "kernels/norm_geometry.h"

/* Strides of `small` aligned on the right against the rank-r shape `big`, 0 where
 * small has size 1 or no dim. False when small does not broadcast to big. */
static bool aligned_strides(const ot_shape *big, const ot_shape *small, int64_t *st) {
    int r = big->rank;
    if (small->rank > r) return false;
    int64_t acc = 1;
    for (int d = r - 1; d >= 0; d--) {
        int sd = d - (r - small->rank);
        int64_t n = sd >= 0 ? small->dim[sd] : 1;
        if (n != big->dim[d] && n != 1) return false;
        st[d] = n == 1 ? 0 : acc;
        acc *= n;
    }
    return true;
}

/* dx[k] = sum over rows j of dy[j * stride + k] for k < len, each column in row order
 * into a double; called with len = 256 where it is, a trip count the vectoriser takes
 * whole (each lane one column's adds: the same bits). */
static inline __attribute__((always_inline)) void column_sums(const float *dy, float *dx, int64_t rows,
                                                              int64_t stride, int64_t len) {
    double cacc[256];
    for (int64_t k = 0; k < len; k++) cacc[k] = 0.0;
    for (int64_t j = 0; j < rows; j++) {
        const float *row = dy + j * stride;
        for (int64_t k = 0; k < len; k++) cacc[k] += row[k];
    }
    for (int64_t k = 0; k < len; k++) dx[k] = (float)cacc[k];
}

OT_GRAD_KERNEL(ot_cpu_reduce_to_like) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "dY", in[0].dtype, err);
    const ot_shape *ys = &in[0].shape;
    int r = ys->rank;
    int64_t ost[OT_MAX_RANK];
    if (!aligned_strides(ys, &out[0].shape, ost))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (ReduceToLike): output does not broadcast to dY", node->name);
    /* Split dY's dims into kept (output stride != 0) and reduced ones; each output
     * element sums its reduced sub-block in row-major order. */
    int64_t ist[OT_MAX_RANK], acc = 1;
    for (int d = r - 1; d >= 0; d--) {
        ist[d] = acc;
        acc *= ys->dim[d];
    }
    int kd[OT_MAX_RANK], rd[OT_MAX_RANK], nk = 0, nr = 0;
    int64_t red = 1;
    for (int d = 0; d < r; d++) {
        if (ost[d] != 0 || ys->dim[d] == 1) kd[nk++] = d;
        else {
            rd[nr++] = d;
            red *= ys->dim[d];
        }
    }
    int64_t n_out = ot_kernel_numel(&out[0]);
    const float *dy = in[0].data;
    float *dx = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = n_out > 1 && n_out * red >= OT_CPU_PAR_MIN;
    /* Fast path, the bias-gradient case: every reduced dim precedes every kept one, so
     * dY is [red, n_out] row-major and output o sums column o over the rows in order,
     * exactly the order of the general loop below (same bits), but row by row into
     * double accumulators instead of a division and a modulo per element. */
    bool leading = n_out * red == ot_kernel_numel(&in[0]);
    for (int k = 0; k < nr && leading; k++)
        for (int q = 0; q < nk; q++)
            if (ys->dim[kd[q]] != 1 && kd[q] < rd[k]) leading = false;
    if (leading) {
        int64_t chunks = (n_out + 255) / 256;
#pragma omp parallel for schedule(static) num_threads(nt) if (par && chunks > 1)
        for (int64_t ch = 0; ch < chunks; ch++) {
            int64_t c0 = ch * 256, len = n_out - c0 < 256 ? n_out - c0 : 256;
            if (len == 256) column_sums(dy + c0, dx + c0, red, n_out, 256);
            else column_sums(dy + c0, dx + c0, red, n_out, len);
        }
        return OT_OK;
    }
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t o = 0; o < n_out; o++) {
        /* kept dims in order enumerate the output in row-major order */
        int64_t rem = o, base = 0;
        for (int k = nk - 1; k >= 0; k--) {
            int d = kd[k];
            int64_t c = rem % ys->dim[d];
            rem /= ys->dim[d];
            base += c * ist[d];
        }
        double s = 0.0;
        for (int64_t j = 0; j < red; j++) {
            int64_t rj = j, off = base;
            for (int k = nr - 1; k >= 0; k--) {
                int d = rd[k];
                off += (rj % ys->dim[d]) * ist[d];
                rj /= ys->dim[d];
            }
            s += dy[off];
        }
        dx[o] = (float)s;
    }
    return OT_OK;
}

OT_GRAD_KERNEL(ot_cpu_expand_like) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "dY", in[0].dtype, err);
    const ot_shape *os = &out[0].shape;
    int r = os->rank;
    int64_t st[OT_MAX_RANK];
    if (!aligned_strides(os, &in[0].shape, st))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (ExpandLike): dY does not broadcast to the output", node->name);
    int64_t n = ot_kernel_numel(&out[0]);
    const float *dy = in[0].data;
    float *dx = out[0].data;
    int64_t inner = r > 0 ? os->dim[r - 1] : 1, rows = inner > 0 ? n / inner : 0;
    int64_t sin = r > 0 ? st[r - 1] : 0;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN)
    for (int64_t row = 0; row < rows; row++) {
        int64_t rem = row, off = 0;
        for (int d = r - 2; d >= 0; d--) {
            off += (rem % os->dim[d]) * st[d];
            rem /= os->dim[d];
        }
        float *o = dx + row * inner;
        for (int64_t i = 0; i < inner; i++) o[i] = dy[off + i * sin];
    }
    return OT_OK;
}

/* Softmax over contiguous lines (inner = 1, attention's last axis): SMG_LINES lines
 * side by side, each line's dot product one chain of double adds in order, as one
 * line at a time (which waits on the adder's latency); called with n = SMG_LINES
 * where it is, so the lane loops unroll. Same operations, same order: same bits. */
#define SMG_LINES 4

static inline __attribute__((always_inline)) void softmax_grad_lines(const float *dy, const float *y, float *dx,
                                                                     int64_t a, int n) {
    double dot[SMG_LINES];
    for (int k = 0; k < n; k++) dot[k] = 0.0;
    for (int64_t j = 0; j < a; j++)
        for (int k = 0; k < n; k++) dot[k] += (double)dy[k * a + j] * y[k * a + j];
    for (int k = 0; k < n; k++)
        for (int64_t j = 0; j < a; j++) dx[k * a + j] = (float)(y[k * a + j] * (dy[k * a + j] - dot[k]));
}

OT_GRAD_KERNEL(ot_cpu_softmax_grad) {
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[1].dtype, err);
    const ot_shape *s = &in[1].shape;
    /* legacy_2d (opset < 13, set by the importer): softmax over the flattened
     * trailing dims [axis, rank), default axis 1, as the forward kernel does */
    if (s->rank == 0) { /* softmax of a scalar is constant */
        *(float *)out[0].data = 0.0f;
        return OT_OK;
    }
    ot_softmax_geometry g;
    ot_status st = ot_softmax_geometry_init(&g, node, s, err);
    if (st) return st;
    int64_t outer = g.outer, a = g.len, inner = g.inner;
    const float *dy = in[0].data, *y = in[1].data;
    float *dx = out[0].data;
    bool log_sm = node->op == OT_OP_LOG_SOFTMAX_GRAD;
    int nt = ot_cpu_threads(ctx);
    if (!log_sm && inner == 1) {
        int64_t groups = (outer + SMG_LINES - 1) / SMG_LINES;
#pragma omp parallel for schedule(static) num_threads(nt) if (outer * a >= OT_CPU_PAR_MIN)
        for (int64_t t = 0; t < groups; t++) {
            int64_t l0 = t * SMG_LINES;
            int n = (int)(outer - l0 < SMG_LINES ? outer - l0 : SMG_LINES);
            if (n == SMG_LINES) softmax_grad_lines(dy + l0 * a, y + l0 * a, dx + l0 * a, a, SMG_LINES);
            else softmax_grad_lines(dy + l0 * a, y + l0 * a, dx + l0 * a, a, n);
        }
        return OT_OK;
    }
#pragma omp parallel for schedule(static) num_threads(nt) if (outer * a * inner >= OT_CPU_PAR_MIN)
    for (int64_t oi = 0; oi < outer * inner; oi++) {
        int64_t o = oi / inner, i = oi % inner, base = o * a * inner + i;
        double dot = 0.0;
        for (int64_t k = 0; k < a; k++) {
            int64_t j = base + k * inner;
            dot += log_sm ? dy[j] : (double)dy[j] * y[j];
        }
        for (int64_t k = 0; k < a; k++) {
            int64_t j = base + k * inner;
            /* softmax: y (dy - <dy, y>) ; log-softmax: dy - exp(y) sum(dy) */
            dx[j] = log_sm ? (float)(dy[j] - exp(y[j]) * dot) : (float)(y[j] * (dy[j] - dot));
        }
    }
    return OT_OK;
}
