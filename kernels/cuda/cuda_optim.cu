/* cuda_optim.cu — the SgdStep / AdamStep kernels, the counterparts of optim_cpu.c:
 * the same operation order, fmaf where the CPU (and ATen) fuse, and explicitly
 * rounded products and sums (__fmul_rn, __fadd_rn) everywhere else so nvcc cannot
 * contract them into FMAs the CPU does not do. The per-step scalars are read on the
 * device, so a step never waits for the host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"

/* ---- optimizer steps ----------------------------------------------------------------- */

/* The float64[4] scalars (lr, grad scale, step, apply) are read on the device so a
 * step never waits for the host; without that input the context's values are used. */
struct opt_scalars {
    double lr;
    float grad_scale;
    int64_t step;
};

__device__ __forceinline__ bool scalars_from(const double *s, opt_scalars dflt, opt_scalars *o) {
    *o = dflt;
    if (!s) return true;
    o->lr = s[0];
    o->grad_scale = (float)s[1];
    o->step = (int64_t)s[2];
    return s[3] != 0.0;
}

__global__ void k_sgd(float *p, const float *g, float *buf, int64_t n, const double *sc, opt_scalars dflt,
                      float momentum, float weight_decay, int nesterov) {
    opt_scalars s;
    if (!scalars_from(sc, dflt, &s)) return;
    const float neg_lr = (float)-s.lr;
    OT_CU_LOOP(i, n) {
        float d = g[i];
        if (s.grad_scale != 1.0f) d = __fmul_rn(d, s.grad_scale);
        if (weight_decay != 0.0f) d = fmaf(weight_decay, p[i], d);
        if (momentum != 0.0f && buf) {
            float b = __fadd_rn(__fmul_rn(buf[i], momentum), d);
            buf[i] = b;
            d = nesterov ? fmaf(momentum, b, d) : b;
        }
        p[i] = fmaf(neg_lr, d, p[i]);
    }
}

/* b1, b2, wd: the user's doubles (recovered on the host as optim_cpu.c does). */
__global__ void k_adam(float *p, const float *g, float *m, float *v, int64_t n, const double *sc, opt_scalars dflt,
                       double b1, double b2, float beta1, float beta2, float eps, float weight_decay, double wd_user,
                       int decoupled) {
    opt_scalars s;
    if (!scalars_from(sc, dflt, &s)) return;
    const double bc1 = 1.0 - pow(b1, (double)s.step);
    const double bc2 = 1.0 - pow(b2, (double)s.step);
    const float neg_step_size = (float)(-(s.lr / bc1));
    const float bc2_sqrt = (float)sqrt(bc2);
    const float one_m_b1 = (float)(1.0 - b1);
    const float one_m_b2 = (float)(1.0 - b2);
    const float decay = (float)(1.0 - s.lr * wd_user);
    OT_CU_LOOP(i, n) {
        float d = g[i];
        if (s.grad_scale != 1.0f) d = __fmul_rn(d, s.grad_scale);
        float pi = p[i];
        if (weight_decay != 0.0f) {
            if (decoupled) pi = __fmul_rn(pi, decay);
            else d = fmaf(weight_decay, pi, d);
        }
        float mi = fmaf(one_m_b1, d, __fmul_rn(m[i], beta1));
        float vi = fmaf(__fmul_rn(one_m_b2, d), d, __fmul_rn(v[i], beta2));
        m[i] = mi;
        v[i] = vi;
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(neg_step_size, mi), denom));
    }
}

/* Same as optim_cpu.c's user_double: the shortest decimal that reads back as f. */
static double user_double(float f) {
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) return strtod(buf, NULL);
    }
    return (double)f;
}

static ot_status opt_check(const ot_node *node, const ot_tensor *in, int n, int scal_slot, const double **sc,
                           ot_error *err) {
    for (int k = 0; k < n; k++) {
        if (in[k].dtype != OT_F32 || !in[k].data)
            return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): input %d must be float32 (got %s)",
                           node->name ? node->name : "?", ot_op_name(node->op), k, ot_dtype_name(in[k].dtype));
        if (ot_cu_numel(&in[k]) != ot_cu_numel(&in[0]))
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): input %d has %lld elements, the param %lld",
                           node->name ? node->name : "?", ot_op_name(node->op), k, (long long)ot_cu_numel(&in[k]),
                           (long long)ot_cu_numel(&in[0]));
    }
    *sc = NULL;
    if (node->n_inputs > scal_slot && in[scal_slot].data) {
        if (in[scal_slot].dtype != OT_F64 || ot_cu_numel(&in[scal_slot]) < 4)
            return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): input %d must be the float64[4] optimizer scalars",
                           node->name ? node->name : "?", ot_op_name(node->op), scal_slot);
        *sc = (const double *)in[scal_slot].data;
    }
    return OT_OK;
}

static opt_scalars ctx_scalars(const ot_kernel_ctx *ctx) {
    opt_scalars s;
    s.lr = ctx->opt_lr;
    s.grad_scale = ctx->opt_grad_scale != 0.0f ? ctx->opt_grad_scale : 1.0f;
    s.step = ctx->opt_step;
    return s;
}

OT_CUDA_KERNEL(ot_cuda_sgd_step) {
    (void)out;
    bool has_buf = node->n_inputs >= 3 && in[2].data;
    const double *sc;
    ot_status st = opt_check(node, in, has_buf ? 3 : 2, 3, &sc, err);
    if (st) return st;
    float momentum = ot_node_attr_float(node, "momentum", 0.0f);
    if (momentum != 0.0f && !has_buf)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (SgdStep): momentum %g without a momentum buffer input",
                       node->name ? node->name : "?", (double)momentum);
    int64_t n = ot_cu_numel(&in[0]);
    if (n == 0) return OT_OK;
    k_sgd<<<ot_cu_blocks(n), OT_CU_THREADS, 0, cx->stream>>>(
        (float *)in[0].data, (const float *)in[1].data, has_buf ? (float *)in[2].data : NULL, n, sc, ctx_scalars(ctx),
        momentum, ot_node_attr_float(node, "weight_decay", 0.0f), ot_node_attr_int(node, "nesterov", 0) != 0);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

OT_CUDA_KERNEL(ot_cuda_adam_step) {
    (void)out;
    const double *sc;
    ot_status st = opt_check(node, in, 4, 4, &sc, err);
    if (st) return st;
    opt_scalars dflt = ctx_scalars(ctx);
    if (!sc && dflt.step < 1)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (AdamStep): step count %lld, must be >= 1",
                       node->name ? node->name : "?", (long long)dflt.step);
    int64_t n = ot_cu_numel(&in[0]);
    if (n == 0) return OT_OK;
    float beta1 = ot_node_attr_float(node, "beta1", 0.9f), beta2 = ot_node_attr_float(node, "beta2", 0.999f);
    float wd = ot_node_attr_float(node, "weight_decay", 0.0f);
    k_adam<<<ot_cu_blocks(n), OT_CU_THREADS, 0, cx->stream>>>(
        (float *)in[0].data, (const float *)in[1].data, (float *)in[2].data, (float *)in[3].data, n, sc, dflt,
        user_double(beta1), user_double(beta2), beta1, beta2, ot_node_attr_float(node, "epsilon", 1e-8f), wd,
        user_double(wd), ot_node_attr_int(node, "decoupled", 0) != 0);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}
