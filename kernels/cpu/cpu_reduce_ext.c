/* cpu_reduce_ext.c — CPU kernels of issue 26's reductions: ReduceMax, ReduceMin,
 * ReduceProd, ReduceL1, ReduceL2, ReduceLogSumExp, ReduceSumSquare (float32, and int64 /
 * int32 for Max and Min, forward only; the axes
 * attribute, or the opset-18 axes input; keepdims and noop_with_empty_axes), ArgMax
 * and ArgMin (float32, int64, int32 in; int64 indices out) and ReduceGrad, their
 * backward op. The element rules and the geometry live in kernels/reduce_ext.h, shared
 * with the CUDA backend; each output element (each group, backward) is computed by one
 * thread in a fixed order, so the thread count never changes a result. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/grad_kernels.h"
#include "kernels/reduce_ext.h"
#include "kernels/reduce_geometry.h"

/* The CPU's reader for ot_reduce_ext_dims: the axes input is host data (at most max
 * values, which ot_reduce_ext_dims has checked). */
static ot_status read_ints(void *user, const ot_tensor *t, int64_t *v, int max, int *n, ot_error *err) {
    (void)user, (void)max, (void)err;
    *n = (int)ot_kernel_numel(t);
    for (int i = 0; i < *n; i++)
        ot_kernel_load_int(t->dtype, t->data, i, &v[i]);
    return OT_OK;
}

ot_status ot_cpu_reduce_ext(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                            ot_error *err) {
    int mode;
    ot_status st = ot_reduce_ext_mode(node, &mode, err);
    if (st) return st;
    ot_dtype t = in[0].dtype;
    bool ints = (t == OT_I64 || t == OT_I32) && (mode == OT_RMODE_MAX || mode == OT_RMODE_MIN);
    if (t != OT_F32 && !ints) return ot_cpu_bad_dtype(node, "input", t, err);
    if (out[0].dtype != t) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    bool red[OT_MAX_RANK] = {0}, noop;
    if ((st = ot_reduce_ext_dims(node, in, 1, &in[0].shape, read_ints, NULL, red, &noop, err))) return st;
    if (noop) { /* noop_with_empty_axes without axes: Y is X */
        if (ot_kernel_numel(&out[0]) != ot_kernel_numel(&in[0]))
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): no-op output differs in size", node->name, node->op_type);
        if (out[0].data != in[0].data)
            memmove(out[0].data, in[0].data, (size_t)ot_kernel_numel(&in[0]) * ot_dtype_size(t));
        return OT_OK;
    }
    ot_rx_geom g;
    ot_rx_init(&g, &in[0].shape, red);
    if (ot_kernel_numel(&out[0]) != g.n_out)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output size differs from the reduced shape", node->name,
                       node->op_type);
    int nt = ot_cpu_threads(ctx), is_max = mode == OT_RMODE_MAX;
    bool par = g.n_out > 1 && g.n_out * g.n_red >= OT_CPU_PAR_MIN;
    if (t == OT_I64) {
        for (int64_t o = 0; o < g.n_out; o++) ((int64_t *)out[0].data)[o] = ot_rx_extremum_i64(in[0].data, &g, o, is_max);
        return OT_OK;
    }
    if (t == OT_I32) {
        for (int64_t o = 0; o < g.n_out; o++) ((int32_t *)out[0].data)[o] = ot_rx_extremum_i32(in[0].data, &g, o, is_max);
        return OT_OK;
    }
    const float *x = in[0].data;
    float *y = out[0].data;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t o = 0; o < g.n_out; o++) y[o] = ot_rx_reduce(x, &g, o, mode);
    return OT_OK;
}

/* ArgMax / ArgMin: one axis; the output's size is the same with or without keepdims. */
ot_status ot_cpu_arg_reduce(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                            ot_error *err) {
    ot_rx_geom g;
    int is_max, last;
    ot_status st = ot_reduce_arg_geom(node, in, out, ot_cpu_bad_dtype, &g, &is_max, &last, err);
    if (st) return st;
    ot_dtype t = in[0].dtype;
    int64_t *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = g.n_out > 1 && g.n_out * g.n_red >= OT_CPU_PAR_MIN;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t o = 0; o < g.n_out; o++) {
        int64_t base = ot_rx_base(&g, o);
        y[o] = t == OT_F32   ? ot_rx_arg_f(in[0].data, &g, base, is_max, last)
               : t == OT_I64 ? ot_rx_arg_i64(in[0].data, &g, base, is_max, last)
                             : ot_rx_arg_i32(in[0].data, &g, base, is_max, last);
    }
    return OT_OK;
}

/* ReduceGrad (dY, X, Y) -> dX shaped like X; axes from its attribute (the gradient rule
 * writes them out). One task per group: its figures, then its elements. */
OT_GRAD_KERNEL(ot_cpu_reduce_grad) {
    for (int k = 0; k < 3; k++)
        if (in[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[k].dtype, err);
    int mode;
    ot_status st = ot_reduce_ext_mode(node, &mode, err);
    if (st) return st;
    bool red[OT_MAX_RANK] = {0}, noop;
    if ((st = ot_reduce_ext_dims(node, in, -1, &in[1].shape, read_ints, NULL, red, &noop, err))) return st;
    ot_rx_geom g;
    if (noop) {
        for (int d = 0; d < in[1].shape.rank; d++) red[d] = false;
    }
    ot_rx_init(&g, &in[1].shape, red);
    if (ot_kernel_numel(&in[0]) != g.n_out || ot_kernel_numel(&in[2]) != g.n_out || ot_kernel_numel(&out[0]) != g.n_in)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): dY, Y or dX does not fit X's reduction", node->name,
                       node->op_type);
    const float *dy = in[0].data, *x = in[1].data, *y = in[2].data;
    float *dx = out[0].data;
    if (noop) { /* Y was X: dX is dY */
        if (dx != dy) memmove(dx, dy, (size_t)g.n_in * 4);
        return OT_OK;
    }
    int nt = ot_cpu_threads(ctx);
    bool par = g.n_out > 1 && g.n_in >= OT_CPU_PAR_MIN;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t o = 0; o < g.n_out; o++) {
        double a[2];
        ot_rx_grad_aux(x, y, &g, o, mode, a);
        int64_t base = ot_rx_base(&g, o);
        for (int64_t j = 0; j < g.n_red; j++) {
            int64_t i = base + ot_rx_off(&g, j);
            dx[i] = ot_rx_grad(dy[o], x[i], y[o], a, mode);
        }
    }
    return OT_OK;
}
