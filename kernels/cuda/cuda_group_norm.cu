/* cuda_group_norm.cu — CUDA kernels of InstanceNormalization, GroupNormalization and
 * GroupNormGrad (issue 26), counterparts of kernels/cpu/cpu_group_norm.c: one thread per
 * row (and per scale / bias element backward) runs the row rules of
 * kernels/group_norm.h through ot_cu_map, so these launchers have the host mode of
 * cuda_internal.h and give the CPU's bits there. A row per thread is slow for long rows
 * (a block per row, as LayerNorm's, would be the next step, at the price of the CPU's
 * summation order). */
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/group_norm.h"

static ot_status check_f32(const ot_node *node, const ot_tensor *in, ot_error *err) {
    for (int k = 0; k < 3; k++)
        if (in[k].dtype != OT_F32) return ot_cuda_bad_dtype(node, "input", in[k].dtype, err);
    return OT_OK;
}

struct gn_forward_op {
    const float *x, *scale, *bias;
    float *y;
    ot_gn_geom g;
    __host__ __device__ void operator()(int64_t r) const { ot_gn_forward_row(x, scale, bias, y, &g, r); }
};

OT_CUDA_LAUNCHER(ot_cuda_group_norm) {
    (void)ctx;
    ot_status st = check_f32(node, in, err);
    if (st) return st;
    gn_forward_op f;
    if ((st = ot_gn_geom_init(&f.g, node, &in[0].shape, ot_kernel_numel(&in[1]), ot_kernel_numel(&in[2]), err)))
        return st;
    if (out[0].dtype != OT_F32 || ot_kernel_numel(&out[0]) != ot_kernel_numel(&in[0]))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): Y must be float32 shaped like X", node->name, node->op_type);
    f.x = (const float *)in[0].data;
    f.scale = (const float *)in[1].data;
    f.bias = (const float *)in[2].data;
    f.y = (float *)out[0].data;
    return ot_cu_map(cx, f, f.g.N * f.g.G, err);
}

struct gn_dx_op {
    const float *dy, *x, *scale;
    float *dx;
    ot_gn_geom g;
    __host__ __device__ void operator()(int64_t r) const { ot_gn_dx_row(dy, x, scale, dx, &g, r); }
};

struct gn_param_op {
    const float *dy, *x;
    float *ds, *db;
    ot_gn_geom g;
    __host__ __device__ void operator()(int64_t k) const { ot_gn_param_grad(dy, x, ds, db, &g, k); }
};

OT_CUDA_LAUNCHER(ot_cuda_group_norm_grad) {
    (void)ctx;
    ot_status st = check_f32(node, in, err);
    if (st) return st;
    ot_gn_geom g;
    if ((st = ot_gn_geom_init(&g, node, &in[1].shape, ot_kernel_numel(&in[2]), -1, err))) return st;
    if (ot_kernel_numel(&in[0]) != ot_kernel_numel(&in[1]))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): dY and X differ in size", node->name, node->op_type);
    float *dx = node->n_outputs > 0 ? (float *)out[0].data : NULL;
    float *ds = node->n_outputs > 1 ? (float *)out[1].data : NULL, *db = node->n_outputs > 2 ? (float *)out[2].data : NULL;
    for (int k = 1; k < 3 && k < node->n_outputs; k++)
        if (out[k].data && ot_kernel_numel(&out[k]) != g.n_param)
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output %d must have %lld elements", node->name,
                           node->op_type, k, (long long)g.n_param);
    const float *dy = (const float *)in[0].data, *x = (const float *)in[1].data;
    if (dx) {
        gn_dx_op f = {dy, x, (const float *)in[2].data, dx, g};
        if ((st = ot_cu_map(cx, f, g.N * g.G, err))) return st;
    }
    if (ds || db) {
        gn_param_op p = {dy, x, ds, db, g};
        if ((st = ot_cu_map(cx, p, g.n_param, err))) return st;
    }
    return OT_OK;
}
