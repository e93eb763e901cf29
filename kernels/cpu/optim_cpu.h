/* optim_cpu.h — the optimizer update maths on host floats (one function per
 * optimizer, element-wise, so any thread count gives the same bits) and the CPU
 * kernels of the SgdStep / AdamStep nodes built by train/optim.c. Each line of
 * maths follows torch.optim's single-tensor implementation (PyTorch 1.13) in the
 * same order and precision, so updates match torch.optim to the last bit or two. */
#ifndef OT_OPTIM_CPU_H
#define OT_OPTIM_CPU_H

#include "kernels/kernel.h"

/* SGD (dampening 0): d = g*grad_scale + wd*p; buf = momentum*buf + d;
 * d = nesterov ? d + momentum*buf : buf; p -= lr*d. buf may be NULL when momentum is 0.
 * A zero buffer on the first step gives torch's "buf = clone(d)" exactly. Returns
 * whether every value written (p, buf) is finite. */
bool ot_sgd_update(float *p, const float *g, float *buf, size_t n, double lr, float grad_scale,
                   float momentum, float weight_decay, bool nesterov, int n_threads);

/* Adam / AdamW (no amsgrad), step >= 1:
 * Scalars (1-beta, beta^step, 1-lr*wd) are computed in double from the shortest
 * decimal of each float hyper-parameter, as Python computes them from the user's value.
 * decoupled: p *= 1 - lr*wd; else d = g*grad_scale + wd*p.
 * m = b1*m + (1-b1)*d; v = b2*v + (1-b2)*d*d;
 * p -= (lr / (1-b1^step)) * m / (sqrt(v) / sqrt(1-b2^step) + eps).
 * Returns whether every value written (p, m, v) is finite. */
bool ot_adam_update(float *p, const float *g, float *m, float *v, size_t n, double lr, float grad_scale,
                    float beta1, float beta2, float eps, float weight_decay, bool decoupled, int64_t step,
                    int n_threads);

/* Kernels: inputs (param, grad [, momentum [, scalars]]) / (param, grad, m, v
 * [, scalars]), float32 of the param's shape plus the float64[4] scalars (lr, grad
 * scale, step, apply: train/optim.h); no outputs; param and state are updated in
 * place. Hyper-parameters come from the node's attributes; without the scalars input
 * lr / grad scale / step come from ctx->opt_*. */
ot_status ot_cpu_sgd_step(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err);
ot_status ot_cpu_adam_step(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err);

#endif
