/* cpu_activation.c — CPU kernels of issue 26's pointwise ops: Elu, Selu, Celu,
 * ThresholdedRelu, Softsign, Sign, Floor, Ceil, Round (one input), PRelu (a slope
 * broadcast to X) and the backward ops EluGrad, ThresholdedReluGrad, SoftsignGrad and
 * PReluGrad. The element rules live in kernels/activation_math.h, shared with the CUDA
 * backend. Each output element is computed independently, so the thread count never
 * changes a result. */
#include <math.h>

#include "kernels/activation_math.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/grad_kernels.h"

/* Sign on integers (int64, int32): -1, 0, 1 in the input's dtype. */
static ot_status int_sign(const ot_node *node, const ot_tensor *in, ot_tensor *out, int64_t n, ot_error *err) {
    if (out[0].dtype != in[0].dtype) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    if (in[0].dtype == OT_I64) {
        const int64_t *x = in[0].data;
        int64_t *y = out[0].data;
        for (int64_t i = 0; i < n; i++) y[i] = ot_am_sign_i(x[i]);
    } else {
        const int32_t *x = in[0].data;
        int32_t *y = out[0].data;
        for (int64_t i = 0; i < n; i++) y[i] = (int32_t)ot_am_sign_i(x[i]);
    }
    return OT_OK;
}

ot_status ot_cpu_act_unary(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    int64_t n = ot_kernel_numel(&in[0]);
    ot_status st = ot_kernel_same_numel(node, &in[0], &out[0], err);
    if (st) return st;
    if (node->op == OT_OP_SIGN && (in[0].dtype == OT_I64 || in[0].dtype == OT_I32)) return int_sign(node, in, out, n, err);
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input 0", in[0].dtype, err);
    if (out[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    ot_op_params scratch;
    const ot_op_params *pp;
    st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    const ot_unary_params *u = &pp->u.unary;
    const float *x = in[0].data;
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = n >= OT_CPU_PAR_MIN;
    switch (node->op) {
    case OT_OP_ELU:
    case OT_OP_SELU:
    case OT_OP_CELU: {
        float nc = u->negcoef, pc = u->poscoef, is = u->input_scale;
        OT_CPU_X_Y_LOOP(x, y, n, ot_am_elu(v, nc, pc, is));
        break;
    }
    case OT_OP_THRESHOLDED_RELU: {
        float a = u->threshold;
        OT_CPU_X_Y_LOOP(x, y, n, ot_am_thresholded_relu(v, a));
        break;
    }
    case OT_OP_SOFTSIGN: OT_CPU_X_Y_LOOP(x, y, n, ot_am_softsign(v)); break;
    case OT_OP_SIGN: OT_CPU_X_Y_LOOP(x, y, n, ot_am_sign(v)); break;
    case OT_OP_FLOOR: OT_CPU_X_Y_LOOP(x, y, n, floorf(v)); break;
    case OT_OP_CEIL: OT_CPU_X_Y_LOOP(x, y, n, ceilf(v)); break;
    case OT_OP_ROUND: OT_CPU_X_Y_LOOP(x, y, n, ot_am_round(v)); break;
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s routed to the activation kernel", node->name,
                       node->op_type);
    }
    return OT_OK;
}

/* PRelu (X, slope) -> Y shaped like X, the slope broadcast to it. */
ot_status ot_cpu_prelu(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                       ot_error *err) {
    for (int k = 0; k < 2; k++)
        if (in[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[k].dtype, err);
    if (out[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    ot_bcast bc;
    ot_status st = ot_kernel_bcast(node, in, 2, &out[0], &bc, err);
    if (st) return st;
    const float *x = in[0].data, *s = in[1].data;
    float *y = out[0].data;
    int64_t sx = bc.stride[0][bc.rank - 1], ss = bc.stride[1][bc.rank - 1];
    int nt = ot_cpu_threads(ctx);
    bool par = bc.rows * bc.inner >= OT_CPU_PAR_MIN_CHEAP && bc.rows > 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t r = 0; r < bc.rows; r++) {
        int64_t off[OT_BCAST_MAX_IN];
        ot_bcast_row(&bc, r, off);
        for (int64_t i = 0; i < bc.inner; i++)
            y[r * bc.inner + i] = ot_am_prelu(x[off[0] + i * sx], s[off[1] + i * ss]);
    }
    return OT_OK;
}

/* ---- backward ----------------------------------------------------------------------- */

/* EluGrad, ThresholdedReluGrad, SoftsignGrad: (dY, X) -> dX. */
OT_GRAD_KERNEL(ot_cpu_act_ext_grad) {
    int64_t n;
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_kernel_grad_dy_x(node, in, out, ot_cpu_bad_dtype, &n, &scratch, &pp, err);
    if (st) return st;
    const float *dy = in[0].data, *x = in[1].data;
    float *dx = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = n >= OT_CPU_PAR_MIN;
    switch (node->op) {
    case OT_OP_ELU_GRAD: {
        float nc = pp->u.unary.negcoef, pc = pp->u.unary.poscoef, is = pp->u.unary.input_scale;
        OT_CPU_DY_X_LOOP(dy, x, dx, n, ot_am_elu_grad(g, v, nc, pc, is));
        break;
    }
    case OT_OP_THRESHOLDED_RELU_GRAD: {
        float a = pp->u.unary.threshold;
        OT_CPU_DY_X_LOOP(dy, x, dx, n, ot_am_thresholded_relu_grad(g, v, a));
        break;
    }
    case OT_OP_SOFTSIGN_GRAD:
        OT_CPU_DY_X_LOOP(dy, x, dx, n, ot_am_softsign_grad(g, v));
        break;
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s is not an activation gradient op", node->name,
                       node->op_type);
    }
    return OT_OK;
}

/* PReluGrad (dY, X, slope) -> shaped like dY: dX (index 0) or the slope's share per
 * element (index 1; the gradient rule reduces it to the slope's shape). */
OT_GRAD_KERNEL(ot_cpu_prelu_grad) {
    int which;
    ot_bcast bc;
    ot_status st = ot_prelu_grad_setup(node, in, &out[0], ot_cpu_bad_dtype, &which, &bc, err);
    if (st) return st;
    const float *g = in[0].data, *x = in[1].data, *s = in[2].data;
    float *o = out[0].data;
    int64_t s0 = bc.stride[0][bc.rank - 1], s1 = bc.stride[1][bc.rank - 1], s2 = bc.stride[2][bc.rank - 1];
    int nt = ot_cpu_threads(ctx);
    bool par = bc.rows * bc.inner >= OT_CPU_PAR_MIN_CHEAP && bc.rows > 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t r = 0; r < bc.rows; r++) {
        int64_t off[OT_BCAST_MAX_IN];
        ot_bcast_row(&bc, r, off);
        for (int64_t i = 0; i < bc.inner; i++)
            o[r * bc.inner + i] = ot_am_prelu_grad(g[off[0] + i * s0], x[off[1] + i * s1], s[off[2] + i * s2], which);
    }
    return OT_OK;
}
