/* optim_cpu.c — CPU kernels of the optimizer nodes (SgdStep, AdamStep) and the update
 * maths they share with the tests. Operation order mirrors torch.optim's
 * single-tensor code (PyTorch 1.13) so results agree to rounding; every element is
 * independent, so the OpenMP split never changes the bits. "x + alpha*y" is an fmaf
 * because that is what ATen's add/addcmul kernels compile to on x86-64 (AVX2 builds,
 * vec::fmadd); other products are rounded separately, as in torch. ISO C mode
 * (-std=c11 implies -ffp-contract=off) keeps the compiler from fusing anything else. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cpu/optim_cpu.h"
#include "kernels/kernel_common.h"

/* Hyper-parameters travel as float attributes, but torch.optim computes its scalars
 * (1 - beta, beta^step) from the user's Python double. The shortest decimal that
 * reads back as the same float is what the user typed (for up to 7 significant
 * digits), so parsing it as a double recovers that double. */
static double user_double(float f) {
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) return strtod(buf, NULL);
    }
    return (double)f;
}

void ot_sgd_update(float *p, const float *g, float *buf, size_t n, double lr, float grad_scale,
                   float momentum, float weight_decay, bool nesterov, int n_threads) {
    const float neg_lr = (float)-lr;
    const long long nn = (long long)n;
#pragma omp parallel for schedule(static) num_threads(n_threads > 0 ? n_threads : omp_get_max_threads()) if (nn > 65536)
    for (long long i = 0; i < nn; i++) {
        float d = g[i];
        if (grad_scale != 1.0f) d = d * grad_scale;
        if (weight_decay != 0.0f) d = fmaf(weight_decay, p[i], d);
        if (momentum != 0.0f && buf) {
            float b = buf[i] * momentum + d; /* dampening 0: alpha 1 - 0 */
            buf[i] = b;
            d = nesterov ? fmaf(momentum, b, d) : b;
        }
        p[i] = fmaf(neg_lr, d, p[i]);
    }
}

void ot_adam_update(float *p, const float *g, float *m, float *v, size_t n, double lr, float grad_scale,
                    float beta1, float beta2, float eps, float weight_decay, bool decoupled, int64_t step,
                    int n_threads) {
    /* Python computes these scalars in double; PyTorch casts them to float when they
     * meet a float tensor. */
    const double b1 = user_double(beta1), b2 = user_double(beta2);
    const double bc1 = 1.0 - pow(b1, (double)step);
    const double bc2 = 1.0 - pow(b2, (double)step);
    const float neg_step_size = (float)(-((double)lr / bc1));
    const float bc2_sqrt = (float)sqrt(bc2);
    const float one_m_b1 = (float)(1.0 - b1);
    const float one_m_b2 = (float)(1.0 - b2);
    const float decay = (float)(1.0 - lr * user_double(weight_decay));
    const long long nn = (long long)n;
#pragma omp parallel for schedule(static) num_threads(n_threads > 0 ? n_threads : omp_get_max_threads()) if (nn > 65536)
    for (long long i = 0; i < nn; i++) {
        float d = g[i];
        if (grad_scale != 1.0f) d = d * grad_scale;
        float pi = p[i];
        if (weight_decay != 0.0f) {
            if (decoupled)
                pi = pi * decay;
            else
                d = fmaf(weight_decay, pi, d);
        }
        float mi = fmaf(one_m_b1, d, m[i] * beta1);
        float vi = fmaf(one_m_b2 * d, d, v[i] * beta2);
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = pi + neg_step_size * mi / denom;
    }
}

static ot_status check_same(const ot_node *node, const ot_tensor *in, int n, ot_error *err) {
    for (int k = 0; k < n; k++) {
        if (in[k].dtype != OT_F32 || !in[k].data)
            return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): input %d must be float32 (got %s)",
                           node->name ? node->name : "?", ot_op_name(node->op), k, ot_dtype_name(in[k].dtype));
        if (ot_kernel_numel(&in[k]) != ot_kernel_numel(&in[0]))
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): input %d has %lld elements, the param %lld",
                           node->name ? node->name : "?", ot_op_name(node->op), k,
                           (long long)ot_kernel_numel(&in[k]), (long long)ot_kernel_numel(&in[0]));
    }
    return OT_OK;
}

/* The per-step scalars: from the float64[4] input when the node has one (the
 * training graph always does, see train/optim.h), else from ctx. A zero grad scale
 * in a zero-initialised context means "no scaling" rather than "scale by zero". */
typedef struct step_scalars {
    double lr;
    float grad_scale;
    int64_t step;
    bool apply;
} step_scalars;

static ot_status scalars_of(const ot_node *node, const ot_tensor *in, int slot, const ot_kernel_ctx *ctx,
                            step_scalars *s, ot_error *err) {
    s->lr = ctx->opt_lr;
    s->grad_scale = ctx->opt_grad_scale != 0.0f ? ctx->opt_grad_scale : 1.0f;
    s->step = ctx->opt_step;
    s->apply = true;
    if (node->n_inputs <= slot || !in[slot].data) return OT_OK;
    if (in[slot].dtype != OT_F64 || ot_kernel_numel(&in[slot]) < 4)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): input %d must be the float64[4] optimizer scalars",
                       node->name ? node->name : "?", ot_op_name(node->op), slot);
    const double *d = (const double *)in[slot].data;
    s->lr = d[0];
    s->grad_scale = (float)d[1];
    s->step = (int64_t)d[2];
    s->apply = d[3] != 0.0;
    return OT_OK;
}

ot_status ot_cpu_sgd_step(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    (void)out;
    step_scalars sc;
    ot_status st = scalars_of(node, in, 3, ctx, &sc, err);
    if (st || !sc.apply) return st;
    bool has_buf = node->n_inputs >= 3 && in[2].data;
    if ((st = check_same(node, in, 2, err)) || (has_buf && (st = check_same(node, in, 3, err)))) return st;
    ot_op_params scratch;
    const ot_op_params *pp;
    if ((st = ot_node_params(node, &scratch, &pp, err))) return st;
    const ot_optim_params *op_ = &pp->u.optim;
    float momentum = op_->momentum;
    if (momentum != 0.0f && !has_buf)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (SgdStep): momentum %g without a momentum buffer input",
                       node->name ? node->name : "?", (double)momentum);
    ot_sgd_update((float *)in[0].data, (const float *)in[1].data, has_buf ? (float *)in[2].data : NULL,
                  (size_t)ot_kernel_numel(&in[0]), sc.lr, sc.grad_scale, momentum,
                  op_->weight_decay, op_->nesterov, ctx->n_threads);
    return OT_OK;
}

ot_status ot_cpu_adam_step(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    (void)out;
    step_scalars sc;
    ot_status st = scalars_of(node, in, 4, ctx, &sc, err);
    if (st || !sc.apply) return st;
    if ((st = check_same(node, in, 4, err))) return st;
    ot_op_params scratch;
    const ot_op_params *pp;
    if ((st = ot_node_params(node, &scratch, &pp, err))) return st;
    const ot_optim_params *op_ = &pp->u.optim;
    if (sc.step < 1)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (AdamStep): step count %lld, must be >= 1",
                       node->name ? node->name : "?", (long long)sc.step);
    ot_adam_update((float *)in[0].data, (const float *)in[1].data, (float *)in[2].data, (float *)in[3].data,
                   (size_t)ot_kernel_numel(&in[0]), sc.lr, sc.grad_scale,
                   op_->beta1, op_->beta2, op_->epsilon, op_->weight_decay, op_->decoupled, sc.step, ctx->n_threads);
    return OT_OK;
}
