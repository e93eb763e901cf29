/* cuda_reduce_ext.cu — CUDA kernels of issue 26's reductions, counterparts of
 * kernels/cpu/cpu_reduce_ext.c: ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
 * ReduceLogSumExp, ReduceSumSquare, ArgMax, ArgMin and ReduceGrad. One thread folds
 * one output element (one group, backward) over its reduced elements in the CPU's
 * order, through the element rules of kernels/reduce_ext.h run by ot_cu_map: the
 * launchers have the host mode of cuda_internal.h, and tests/test_cuda.c compares the
 * host run with the CPU kernels bit for bit. These ops are rare in the models trained
 * here; a reduction over very long groups would want a warp per group (as ReduceSum's
 * k_reduce in cuda_reduce.cu), at the price of the CPU's summation order. */
#include <math.h>
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/reduce_ext.h"
#include "kernels/reduce_geometry.h"

/* CUDA's reader for ot_reduce_ext_dims: a copy back from the device (user: the
 * context; host memory in host mode). */
static ot_status read_ints(void *user, const ot_tensor *t, int64_t *v, int max, int *n, ot_error *err) {
    return ot_cuda_read_ints((ot_cuda_ctx *)user, t, v, max, n, err);
}

struct reduce_op {
    const float *x;
    float *y;
    ot_rx_geom g;
    int mode;
    __host__ __device__ void operator()(int64_t o) const { y[o] = ot_rx_reduce(x, &g, o, mode); }
};

template <typename T> struct int_extremum_op {
    const T *x;
    T *y;
    ot_rx_geom g;
    int is_max;
    __host__ __device__ void operator()(int64_t o) const;
};
template <> __host__ __device__ void int_extremum_op<int64_t>::operator()(int64_t o) const {
    y[o] = ot_rx_extremum_i64(x, &g, o, is_max);
}
template <> __host__ __device__ void int_extremum_op<int32_t>::operator()(int64_t o) const {
    y[o] = ot_rx_extremum_i32(x, &g, o, is_max);
}

template <typename T>
static ot_status launch_int_extremum(ot_cuda_ctx *cx, const ot_tensor *in, ot_tensor *out, const ot_rx_geom &g,
                                     int is_max, ot_error *err) {
    int_extremum_op<T> f;
    memset(&f, 0, sizeof f);
    f.x = (const T *)in[0].data;
    f.y = (T *)out[0].data;
    f.g = g;
    f.is_max = is_max;
    return ot_cu_map(cx, f, g.n_out, err);
}

OT_CUDA_LAUNCHER(ot_cuda_reduce_ext) {
    (void)ctx;
    int mode;
    ot_status st = ot_reduce_ext_mode(node, &mode, err);
    if (st) return st;
    ot_dtype t = in[0].dtype;
    bool ints = (t == OT_I64 || t == OT_I32) && (mode == OT_RMODE_MAX || mode == OT_RMODE_MIN);
    if (t != OT_F32 && !ints) return ot_cuda_bad_dtype(node, "input", t, err);
    if (out[0].dtype != t) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    bool red[OT_MAX_RANK] = {0}, noop;
    if ((st = ot_reduce_ext_dims(node, in, 1, &in[0].shape, read_ints, cx, red, &noop, err))) return st;
    if (noop) {
        if (ot_kernel_numel(&out[0]) != ot_kernel_numel(&in[0]))
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): no-op output differs in size", node->name, node->op_type);
        return ot_cu_copy(cx, out[0].data, in[0].data, (size_t)ot_kernel_numel(&in[0]) * ot_dtype_size(t), err);
    }
    reduce_op f;
    memset(&f, 0, sizeof f);
    ot_rx_init(&f.g, &in[0].shape, red);
    if (ot_kernel_numel(&out[0]) != f.g.n_out)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output size differs from the reduced shape", node->name,
                       node->op_type);
    if (t == OT_I64) return launch_int_extremum<int64_t>(cx, in, out, f.g, mode == OT_RMODE_MAX, err);
    if (t == OT_I32) return launch_int_extremum<int32_t>(cx, in, out, f.g, mode == OT_RMODE_MAX, err);
    f.x = (const float *)in[0].data;
    f.y = (float *)out[0].data;
    f.mode = mode;
    return ot_cu_map(cx, f, f.g.n_out, err);
}

template <typename T> struct arg_op {
    const T *x;
    int64_t *y;
    ot_rx_geom g;
    int is_max, last;
    __host__ __device__ void operator()(int64_t o) const;
};
template <> __host__ __device__ void arg_op<float>::operator()(int64_t o) const {
    y[o] = ot_rx_arg_f(x, &g, ot_rx_base(&g, o), is_max, last);
}
template <> __host__ __device__ void arg_op<int64_t>::operator()(int64_t o) const {
    y[o] = ot_rx_arg_i64(x, &g, ot_rx_base(&g, o), is_max, last);
}
template <> __host__ __device__ void arg_op<int32_t>::operator()(int64_t o) const {
    y[o] = ot_rx_arg_i32(x, &g, ot_rx_base(&g, o), is_max, last);
}

template <typename T>
static ot_status launch_arg(ot_cuda_ctx *cx, const ot_tensor *in, ot_tensor *out, const ot_rx_geom &g, int is_max,
                            int last, ot_error *err) {
    arg_op<T> f;
    memset(&f, 0, sizeof f);
    f.x = (const T *)in[0].data;
    f.y = (int64_t *)out[0].data;
    f.g = g;
    f.is_max = is_max;
    f.last = last;
    return ot_cu_map(cx, f, g.n_out, err);
}

OT_CUDA_LAUNCHER(ot_cuda_arg_reduce) {
    (void)ctx;
    ot_rx_geom g;
    int is_max, last;
    ot_status st = ot_reduce_arg_geom(node, in, out, ot_cuda_bad_dtype, &g, &is_max, &last, err);
    if (st) return st;
    ot_dtype t = in[0].dtype;
    if (t == OT_F32) return launch_arg<float>(cx, in, out, g, is_max, last, err);
    if (t == OT_I64) return launch_arg<int64_t>(cx, in, out, g, is_max, last, err);
    return launch_arg<int32_t>(cx, in, out, g, is_max, last, err);
}

/* ReduceGrad: the groups' figures into the workspace, then one thread per element. */
struct grad_aux_op {
    const float *x, *y;
    double *aux;
    ot_rx_geom g;
    int mode;
    __host__ __device__ void operator()(int64_t o) const { ot_rx_grad_aux(x, y, &g, o, mode, aux + 2 * o); }
};

struct grad_op {
    const float *dy, *x, *y;
    const double *aux;
    float *dx;
    ot_rx_geom g;
    int mode;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t o = ot_rx_out_of(&g, i);
        dx[i] = ot_rx_grad(dy[o], x[i], y[o], aux + 2 * o, mode);
    }
};

size_t ot_cuda_reduce_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    if (node->n_inputs < 1) return 0;
    return (size_t)ot_kernel_numel(&in[0]) * 2 * sizeof(double);
}

OT_CUDA_LAUNCHER(ot_cuda_reduce_grad) {
    for (int k = 0; k < 3; k++)
        if (in[k].dtype != OT_F32) return ot_cuda_bad_dtype(node, "input", in[k].dtype, err);
    int mode;
    ot_status st = ot_reduce_ext_mode(node, &mode, err);
    if (st) return st;
    bool red[OT_MAX_RANK] = {0}, noop;
    if ((st = ot_reduce_ext_dims(node, in, -1, &in[1].shape, read_ints, cx, red, &noop, err))) return st;
    if (noop)
        for (int d = 0; d < in[1].shape.rank; d++) red[d] = false;
    grad_op f;
    memset(&f, 0, sizeof f);
    ot_rx_init(&f.g, &in[1].shape, red);
    if (ot_kernel_numel(&in[0]) != f.g.n_out || ot_kernel_numel(&in[2]) != f.g.n_out ||
        ot_kernel_numel(&out[0]) != f.g.n_in)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): dY, Y or dX does not fit X's reduction", node->name,
                       node->op_type);
    if (noop) return ot_cu_copy(cx, out[0].data, in[0].data, (size_t)f.g.n_in * 4, err);
    if (f.g.n_in == 0) return OT_OK;
    size_t need = (size_t)f.g.n_out * 2 * sizeof(double);
    if (!ctx->workspace || ctx->workspace_bytes < need)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): workspace smaller than the backend asked for", node->name,
                       node->op_type);
    grad_aux_op a;
    memset(&a, 0, sizeof a);
    a.x = (const float *)in[1].data;
    a.y = (const float *)in[2].data;
    a.aux = (double *)ctx->workspace;
    a.g = f.g;
    a.mode = mode;
    if ((st = ot_cu_map(cx, a, f.g.n_out, err))) return st;
    f.dy = (const float *)in[0].data;
    f.x = a.x;
    f.y = a.y;
    f.aux = a.aux;
    f.dx = (float *)out[0].data;
    f.mode = mode;
    return ot_cu_map(cx, f, f.g.n_in, err);
}
