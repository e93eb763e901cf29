/* cuda_optim.cu — the SgdStep / AdamStep kernels, the counterparts of optim_cpu.c:
 * the same operation order, fmaf where the CPU (and ATen) fuse, and explicitly
 * rounded products and sums (__fmul_rn, __fadd_rn) everywhere else so nvcc cannot
 * contract them into FMAs the CPU does not do. The per-step scalars are read on the
 * device, so a step never waits for the host. Both rules have the host mode of
 * cuda_internal.h (cx NULL: host pointers, the same element code). */
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

__host__ __device__ __forceinline__ bool scalars_from(const double *s, opt_scalars dflt, opt_scalars *o) {
    *o = dflt;
    if (!s) return true;
    o->lr = s[0];
    o->grad_scale = (float)s[1];
    o->step = (int64_t)s[2];
    return s[3] != 0.0;
}

/* Functors for ot_cu_map_prepared, so the update rules also run in host mode (tests
 * compare them with optim_cpu.c bit for bit). Every product and sum the CPU rounds
 * separately goes through ot_cu_fmul / ot_cu_fadd: plain `buf * momentum + d` would be
 * fused into one FMA by nvcc and differ from the CPU in the last bit. */
struct sgd_op {
    float *p;
    const float *g;
    float *buf;
    const double *sc;
    opt_scalars dflt;
    float momentum, weight_decay;
    int nesterov;
    struct prep {
        float neg_lr, grad_scale;
    };
    __host__ __device__ bool prepare(prep *q) const {
        opt_scalars s;
        if (!scalars_from(sc, dflt, &s)) return false; /* the APPLY flag is off */
        q->neg_lr = (float)-s.lr;
        q->grad_scale = s.grad_scale;
        return true;
    }
    __host__ __device__ void operator()(const prep &q, int64_t i) const {
        float d = g[i];
        if (q.grad_scale != 1.0f) d = ot_cu_fmul(d, q.grad_scale);
        if (weight_decay != 0.0f) d = fmaf(weight_decay, p[i], d);
        if (momentum != 0.0f && buf) {
            float b = ot_cu_fadd(ot_cu_fmul(buf[i], momentum), d);
            buf[i] = b;
            d = nesterov ? fmaf(momentum, b, d) : b;
        }
        p[i] = fmaf(q.neg_lr, d, p[i]);
    }
};

/* b1, b2, wd_user: the user's doubles (recovered on the host as optim_cpu.c does).
 * The bias corrections use the device's double pow, which CUDA documents to 2 ulp
 * (glibc's is correctly rounded): the float scalars derived from them can differ from
 * the CPU's only when a double lands within 2 ulp of a float rounding boundary. */
struct adam_op {
    float *p;
    const float *g;
    float *m, *v;
    const double *sc;
    opt_scalars dflt;
    double b1, b2, wd_user;
    float beta1, beta2, eps, weight_decay;
    int decoupled;
    int hf; /* eps_hf (train/optim.h), as optim_cpu.c: eps / bc2_sqrt, decay after the update */
    struct prep {
        float neg_step_size, bc2_sqrt, one_m_b1, one_m_b2, decay, grad_scale, eps;
    };
    __host__ __device__ bool prepare(prep *q) const {
        opt_scalars s;
        /* a step count below 1 (bc1 = 0, an infinite step size) is refused by the CPU
         * kernel; a kernel cannot fail, so it leaves the params as they are */
        if (!scalars_from(sc, dflt, &s) || s.step < 1) return false;
        const double bc1 = 1.0 - pow(b1, (double)s.step);
        const double bc2 = 1.0 - pow(b2, (double)s.step);
        q->neg_step_size = (float)(-(s.lr / bc1));
        q->bc2_sqrt = (float)sqrt(bc2);
        q->one_m_b1 = (float)(1.0 - b1);
        q->one_m_b2 = (float)(1.0 - b2);
        /* optim_cpu.c rounds lr * wd before the subtraction; nvcc would fuse it */
        q->decay = (float)(1.0 - ot_cu_dmul(s.lr, wd_user));
        q->grad_scale = s.grad_scale;
        q->eps = hf ? ot_cu_fdiv(eps, q->bc2_sqrt) : eps;
        return true;
    }
    __host__ __device__ void operator()(const prep &q, int64_t i) const {
        float d = g[i];
        if (q.grad_scale != 1.0f) d = ot_cu_fmul(d, q.grad_scale);
        float pi = p[i];
        if (weight_decay != 0.0f) {
            if (decoupled && !hf) pi = ot_cu_fmul(pi, q.decay);
            else d = fmaf(weight_decay, pi, d);
        }
        float mi = fmaf(q.one_m_b1, d, ot_cu_fmul(m[i], beta1));
        float vi = fmaf(ot_cu_fmul(q.one_m_b2, d), d, ot_cu_fmul(v[i], beta2));
        m[i] = mi;
        v[i] = vi;
        float denom = ot_cu_fadd(ot_cu_fdiv(ot_cu_fsqrt(vi), q.bc2_sqrt), q.eps);
        float r = ot_cu_fadd(pi, ot_cu_fdiv(ot_cu_fmul(q.neg_step_size, mi), denom));
        p[i] = hf && decoupled && weight_decay != 0.0f ? ot_cu_fmul(r, q.decay) : r;
    }
};

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
        if (ot_kernel_numel(&in[k]) != ot_kernel_numel(&in[0]))
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): input %d has %lld elements, the param %lld",
                           node->name ? node->name : "?", ot_op_name(node->op), k, (long long)ot_kernel_numel(&in[k]),
                           (long long)ot_kernel_numel(&in[0]));
    }
    *sc = NULL;
    if (node->n_inputs > scal_slot && in[scal_slot].data) {
        if (in[scal_slot].dtype != OT_F64 || ot_kernel_numel(&in[scal_slot]) < 4)
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

OT_CUDA_LAUNCHER(ot_cuda_sgd_step) {
    (void)out;
    bool has_buf = node->n_inputs >= 3 && in[2].data;
    const double *sc;
    ot_status st = opt_check(node, in, has_buf ? 3 : 2, 3, &sc, err);
    if (st) return st;
    ot_op_params scratch;
    const ot_op_params *pp;
    if ((st = ot_node_params(node, &scratch, &pp, err))) return st;
    const ot_optim_params *op_ = &pp->u.optim;
    float momentum = op_->momentum;
    if (momentum != 0.0f && !has_buf)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (SgdStep): momentum %g without a momentum buffer input",
                       node->name ? node->name : "?", (double)momentum);
    int64_t n = ot_kernel_numel(&in[0]);
    if (n == 0) return OT_OK;
    sgd_op op = {(float *)in[0].data, (const float *)in[1].data, has_buf ? (float *)in[2].data : NULL, sc,
                 ctx_scalars(ctx), momentum, op_->weight_decay, op_->nesterov};
    return ot_cu_map_prepared(cx, op, n, err);
}

OT_CUDA_LAUNCHER(ot_cuda_adam_step) {
    (void)out;
    const double *sc;
    ot_status st = opt_check(node, in, 4, 4, &sc, err);
    if (st) return st;
    ot_op_params scratch;
    const ot_op_params *pp;
    if ((st = ot_node_params(node, &scratch, &pp, err))) return st;
    const ot_optim_params *op_ = &pp->u.optim;
    opt_scalars dflt = ctx_scalars(ctx);
    if (!sc && dflt.step < 1)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (AdamStep): step count %lld, must be >= 1",
                       node->name ? node->name : "?", (long long)dflt.step);
    int64_t n = ot_kernel_numel(&in[0]);
    if (n == 0) return OT_OK;
    float beta1 = op_->beta1, beta2 = op_->beta2;
    float wd = op_->weight_decay;
    adam_op op = {(float *)in[0].data, (const float *)in[1].data, (float *)in[2].data, (float *)in[3].data, sc, dflt,
                  user_double(beta1), user_double(beta2), user_double(wd), beta1, beta2,
                  op_->epsilon, wd, op_->decoupled, op_->eps_hf};
    return ot_cu_map_prepared(cx, op, n, err);
}
