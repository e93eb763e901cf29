/* cuda_select.cu — TopK and OneHot on the GPU (ops batch 4, issue 26), counterparts
 * of kernels/cpu/cpu_select.c through kernels/select_geometry.h's element code: TopK
 * one thread per row (its picks in the CPU's order), OneHot one thread per output
 * element; both with the host mode of cuda_internal.h. Size runs on the host (a
 * CPU_ONLY row: it reads a shape). */
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/select_geometry.h"

struct top_k_op {
    ot_topk_geom g;
    const float *x;
    float *y;
    int64_t *yi;
    __host__ __device__ void operator()(int64_t r) const { ot_topk_row(&g, x, y, yi, r); }
};

OT_CUDA_LAUNCHER(ot_cuda_top_k) {
    (void)ctx;
    if (in[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "input 0", in[0].dtype, err);
    if (out[1].dtype != OT_I64) return ot_cuda_bad_dtype(node, "output 1", out[1].dtype, err);
    int64_t k;
    int nk = 0;
    ot_status st = ot_cuda_read_ints(cx, &in[1], &k, 1, &nk, err);
    if (st) return st;
    if (nk != 1) return ot_fail(err, OT_E_MODEL, "node '%s' (%s): K must be one integer", node->name, node->op_type);
    top_k_op f;
    memset(&f, 0, sizeof f);
    if ((st = ot_topk_geometry(node, &in[0].shape, k, &out[0].shape, &out[1].shape, &f.g, err))) return st;
    f.x = (const float *)in[0].data;
    f.y = (float *)out[0].data;
    f.yi = (int64_t *)out[1].data;
    return ot_cu_map(cx, f, f.g.outer * f.g.inner, err);
}

template <typename T, typename V> struct one_hot_op {
    ot_onehot_geom g;
    const T *idx;
    const V *vals;
    V *y;
    __host__ __device__ void operator()(int64_t e) const {
        int64_t i = ot_onehot_index((double)idx[ot_onehot_index_of(&g, e)]);
        y[e] = vals[ot_onehot_is_on(&g, i, e) ? 1 : 0];
    }
};

template <typename T, typename V>
static ot_status launch_one_hot(ot_cuda_ctx *cx, const ot_onehot_geom &g, const ot_tensor *in, ot_tensor *out,
                                ot_error *err) {
    one_hot_op<T, V> f;
    memset(&f, 0, sizeof f);
    f.g = g;
    f.idx = (const T *)in[0].data;
    f.vals = (const V *)in[2].data;
    f.y = (V *)out[0].data;
    return ot_cu_map(cx, f, ot_kernel_numel(&out[0]), err);
}

template <typename T>
static ot_status one_hot_values(ot_cuda_ctx *cx, const ot_onehot_geom &g, const ot_tensor *in, ot_tensor *out,
                                ot_error *err) {
    switch (out[0].dtype) {
    case OT_F32: return launch_one_hot<T, float>(cx, g, in, out, err);
    case OT_I64: return launch_one_hot<T, int64_t>(cx, g, in, out, err);
    default: return launch_one_hot<T, int32_t>(cx, g, in, out, err);
    }
}

OT_CUDA_LAUNCHER(ot_cuda_one_hot) {
    (void)ctx;
    ot_dtype it = in[0].dtype, vt = out[0].dtype;
    if (it != OT_I64 && it != OT_I32 && it != OT_F32) return ot_cuda_bad_dtype(node, "indices", it, err);
    if ((vt != OT_F32 && vt != OT_I64 && vt != OT_I32) || in[2].dtype != vt)
        return ot_cuda_bad_dtype(node, "values", in[2].dtype, err);
    if (ot_kernel_numel(&in[2]) != 2)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): values must be [off, on]", node->name, node->op_type);
    double depth;
    ot_status st = ot_cuda_read_double(cx, &in[1], &depth, err);
    if (st) return st;
    if (ot_kernel_numel(&in[1]) != 1 || !(depth >= 1 && depth <= 9.0e15))
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): depth %g is not a positive count", node->name, node->op_type,
                       depth);
    ot_onehot_geom g;
    if ((st = ot_onehot_geometry(node, &in[0].shape, (int64_t)depth, &out[0].shape, &g, err))) return st;
    if (it == OT_I64) return one_hot_values<int64_t>(cx, g, in, out, err);
    if (it == OT_I32) return one_hot_values<int32_t>(cx, g, in, out, err);
    return one_hot_values<float>(cx, g, in, out, err);
}
