/* cpu_group_norm.c — CPU kernels of InstanceNormalization, GroupNormalization and
 * their backward op GroupNormGrad (issue 26). The row rules and the geometry live in
 * kernels/group_norm.h, shared with the CUDA backend: rows (and, backward, the scale /
 * bias elements) in parallel, each folded in a fixed order. */
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/grad_kernels.h"
#include "kernels/group_norm.h"

/* X, scale, B (forward) or dY, X, scale (backward) float32. */
static ot_status check_f32(const ot_node *node, const ot_tensor *in, ot_error *err) {
    for (int k = 0; k < 3; k++)
        if (in[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[k].dtype, err);
    return OT_OK;
}

ot_status ot_cpu_group_norm(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                            ot_error *err) {
    ot_status st = check_f32(node, in, err);
    if (st) return st;
    ot_gn_geom g;
    if ((st = ot_gn_geom_init(&g, node, &in[0].shape, ot_kernel_numel(&in[1]), ot_kernel_numel(&in[2]), err))) return st;
    if (out[0].dtype != OT_F32 || ot_kernel_numel(&out[0]) != ot_kernel_numel(&in[0]))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): Y must be float32 shaped like X", node->name, node->op_type);
    const float *x = in[0].data, *scale = in[1].data, *bias = in[2].data;
    float *y = out[0].data;
    int64_t rows = g.N * g.G;
    int nt = ot_cpu_threads(ctx);
    bool par = rows > 1 && rows * g.M >= OT_CPU_PAR_MIN;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t r = 0; r < rows; r++) ot_gn_forward_row(x, scale, bias, y, &g, r);
    return OT_OK;
}

/* GroupNormGrad (dY, X, scale) -> dX, dScale, dBias (each may be absent). */
OT_GRAD_KERNEL(ot_cpu_group_norm_grad) {
    ot_status st = check_f32(node, in, err);
    if (st) return st;
    ot_gn_geom g;
    if ((st = ot_gn_geom_init(&g, node, &in[1].shape, ot_kernel_numel(&in[2]), -1, err))) return st;
    if (ot_kernel_numel(&in[0]) != ot_kernel_numel(&in[1]))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): dY and X differ in size", node->name, node->op_type);
    const float *dy = in[0].data, *x = in[1].data, *scale = in[2].data;
    float *dx = node->n_outputs > 0 ? out[0].data : NULL;
    float *ds = node->n_outputs > 1 ? out[1].data : NULL, *db = node->n_outputs > 2 ? out[2].data : NULL;
    for (int k = 1; k < 3 && k < node->n_outputs; k++)
        if (out[k].data && ot_kernel_numel(&out[k]) != g.n_param)
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output %d must have %lld elements", node->name,
                           node->op_type, k, (long long)g.n_param);
    int64_t rows = g.N * g.G;
    int nt = ot_cpu_threads(ctx);
    bool par = rows * g.M >= OT_CPU_PAR_MIN;
    if (dx) {
#pragma omp parallel for schedule(static) num_threads(nt) if (par && rows > 1)
        for (int64_t r = 0; r < rows; r++) ot_gn_dx_row(dy, x, scale, dx, &g, r);
    }
    if (ds || db) {
#pragma omp parallel for schedule(static) num_threads(nt) if (par && g.n_param > 1)
        for (int64_t k = 0; k < g.n_param; k++) ot_gn_param_grad(dy, x, ds, db, &g, k);
    }
    return OT_OK;
}
