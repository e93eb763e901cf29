/* cuda_activation.cu — CUDA kernels of issue 26's pointwise ops, counterparts of
 * kernels/cpu/cpu_activation.c: Elu, Selu, Celu, ThresholdedRelu, Softsign, Sign,
 * Floor, Ceil, Round, PRelu and the backward ops EluGrad, ThresholdedReluGrad,
 * SoftsignGrad and PReluGrad. Every element rule is a __host__ __device__ functor over
 * kernels/activation_math.h (the CPU kernels' rules), run through ot_cu_map, so these
 * launchers have the host mode of cuda_internal.h and tests/test_cuda.c compares the
 * host run with the CPU kernels bit for bit. */
#include <math.h>

#include "kernels/activation_math.h"
#include "kernels/cuda/cuda_device.cuh"

/* ---- forward ---------------------------------------------------------------------- */

enum { A_ELU, A_THRESHOLDED_RELU, A_SOFTSIGN, A_SIGN, A_FLOOR, A_CEIL, A_ROUND };

struct act_unary_rule {
    int op;
    float nc, pc, is, th;
    __host__ __device__ float operator()(float v) const {
        float r;
        switch (op) {
        case A_ELU: r = ot_am_elu(v, nc, pc, is); break;
        case A_THRESHOLDED_RELU: r = ot_am_thresholded_relu(v, th); break;
        case A_SOFTSIGN: r = ot_am_softsign(v); break;
        case A_SIGN: r = ot_am_sign(v); break;
        case A_FLOOR: r = floorf(v); break;
        case A_CEIL: r = ceilf(v); break;
        default: r = ot_am_round(v); break;
        }
        return r;
    }
};

template <typename T> struct sign_int_op {
    const T *x;
    T *y;
    __host__ __device__ void operator()(int64_t i) const { y[i] = (T)ot_am_sign_i((int64_t)x[i]); }
};

OT_CUDA_LAUNCHER(ot_cuda_act_unary) {
    (void)ctx;
    int64_t n = ot_kernel_numel(&in[0]);
    ot_status st = ot_kernel_same_numel(node, &in[0], &out[0], err);
    if (st) return st;
    ot_dtype t = in[0].dtype;
    if (node->op == OT_OP_SIGN && (t == OT_I64 || t == OT_I32)) {
        if (out[0].dtype != t) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
        if (t == OT_I64)
            return ot_cu_map(cx, sign_int_op<int64_t>{(const int64_t *)in[0].data, (int64_t *)out[0].data}, n, err);
        return ot_cu_map(cx, sign_int_op<int32_t>{(const int32_t *)in[0].data, (int32_t *)out[0].data}, n, err);
    }
    if (t != OT_F32) return ot_cuda_bad_dtype(node, "input 0", t, err);
    if (out[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    ot_op_params scratch;
    const ot_op_params *pp;
    st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    int op;
    switch (node->op) {
    case OT_OP_ELU:
    case OT_OP_SELU:
    case OT_OP_CELU: op = A_ELU; break;
    case OT_OP_THRESHOLDED_RELU: op = A_THRESHOLDED_RELU; break;
    case OT_OP_SOFTSIGN: op = A_SOFTSIGN; break;
    case OT_OP_SIGN: op = A_SIGN; break;
    case OT_OP_FLOOR: op = A_FLOOR; break;
    case OT_OP_CEIL: op = A_CEIL; break;
    case OT_OP_ROUND: op = A_ROUND; break;
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s routed to the CUDA activation kernel", node->name,
                       node->op_type);
    }
    const ot_unary_params *u = &pp->u.unary;
    return ot_cu_map_x_y(cx, in, out, act_unary_rule{op, u->negcoef, u->poscoef, u->input_scale, u->threshold}, n, err);
}

struct prelu_op {
    const float *x, *s;
    float *y;
    ot_cu_bcast bc;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        y[i] = ot_am_prelu(x[off[0]], s[off[1]]);
    }
};

OT_CUDA_LAUNCHER(ot_cuda_prelu) {
    (void)ctx;
    for (int k = 0; k < 2; k++)
        if (in[k].dtype != OT_F32) return ot_cuda_bad_dtype(node, "input", in[k].dtype, err);
    if (out[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    ot_cu_bcast bc;
    ot_status st = ot_cu_bcast_node(node, in, 2, &out[0], &bc, err);
    if (st) return st;
    prelu_op f = {(const float *)in[0].data, (const float *)in[1].data, (float *)out[0].data, bc};
    return ot_cu_map(cx, f, ot_kernel_numel(&out[0]), err);
}

/* ---- backward --------------------------------------------------------------------- */

enum { AG_ELU, AG_THRESHOLDED_RELU, AG_SOFTSIGN };

struct act_grad_rule {
    int op;
    float nc, pc, is, th;
    __host__ __device__ float operator()(float g, float v) const {
        float r;
        switch (op) {
        case AG_ELU: r = ot_am_elu_grad(g, v, nc, pc, is); break;
        case AG_THRESHOLDED_RELU: r = ot_am_thresholded_relu_grad(g, v, th); break;
        default: r = ot_am_softsign_grad(g, v); break;
        }
        return r;
    }
};

OT_CUDA_LAUNCHER(ot_cuda_act_ext_grad) {
    (void)ctx;
    int64_t n;
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_kernel_grad_dy_x(node, in, out, ot_cuda_bad_dtype, &n, &scratch, &pp, err);
    if (st) return st;
    int op;
    switch (node->op) {
    case OT_OP_ELU_GRAD: op = AG_ELU; break;
    case OT_OP_THRESHOLDED_RELU_GRAD: op = AG_THRESHOLDED_RELU; break;
    case OT_OP_SOFTSIGN_GRAD: op = AG_SOFTSIGN; break;
    default:
        return ot_fail(err, OT_E_INTERNAL, "node '%s': %s is not an activation gradient op", node->name,
                       node->op_type);
    }
    const ot_unary_params *u = &pp->u.unary;
    return ot_cu_map_dy_x(cx, in, out, act_grad_rule{op, u->negcoef, u->poscoef, u->input_scale, u->threshold}, n, err);
}

struct prelu_grad_op {
    const float *g, *x, *s;
    float *o;
    ot_cu_bcast bc;
    int which;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off[OT_BCAST_MAX_IN];
        ot_cu_bcast_off(bc, i, off);
        o[i] = ot_am_prelu_grad(g[off[0]], x[off[1]], s[off[2]], which);
    }
};

OT_CUDA_LAUNCHER(ot_cuda_prelu_grad) {
    (void)ctx;
    int which;
    ot_bcast c;
    ot_status st = ot_prelu_grad_setup(node, in, &out[0], ot_cuda_bad_dtype, &which, &c, err);
    if (st) return st;
    ot_cu_bcast bc = ot_cu_bcast_from(&c);
    prelu_grad_op f = {(const float *)in[0].data, (const float *)in[1].data, (const float *)in[2].data,
                       (float *)out[0].data, bc, which};
    return ot_cu_map(cx, f, ot_kernel_numel(&out[0]), err);
}
