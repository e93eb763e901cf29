/* optim.h — optimizers for the training loop: configuration (SGD with momentum and
 * Nesterov, Adam, AdamW, weight decay, global-norm clipping), learning-rate schedules
 * defined as PyTorch defines them, and the pass that appends the update to the
 * training graph as IR nodes (SgdStep / AdamStep, phase OT_PHASE_OPTIMIZER) with
 * their optimizer-state values (OT_VK_OPT_STATE), so the planner lays params, grads
 * and state out as slabs and the backend runs the step like any other node.
 *
 * Per-step scalars (scheduled lr, clip × 1/accum factor, step count) reach the
 * kernels through ot_kernel_ctx (opt_lr, opt_grad_scale, opt_step). The element-wise
 * update maths is in kernels/cpu/optim_cpu.h; CPU kernels and tests share it. */
#ifndef OT_OPTIM_H
#define OT_OPTIM_H

#include "ir.h"
#include "kernels/kernel.h" /* ot_grad_sum_sq */

typedef enum ot_optim_kind {
    OT_OPTIM_SGD = 0,
    OT_OPTIM_ADAM,  /* torch.optim.Adam: weight decay is L2 added to the gradient */
    OT_OPTIM_ADAMW, /* torch.optim.AdamW: decoupled decay p *= 1 - lr*wd */
} ot_optim_kind;

typedef enum ot_schedule_kind {
    OT_SCHED_CONSTANT = 0,
    /* factor(s) = (s+1)/W for s < W, then 1.
     * PyTorch: LambdaLR(opt, lambda s: min(1.0, (s + 1) / W)) */
    OT_SCHED_WARMUP,
    /* warm-up as above, then factor(s) = (1 + cos(pi * (s-W) / (T-W))) / 2 for W <= s < T.
     * With W = 0 this is CosineAnnealingLR(opt, T_max=T, eta_min=0). */
    OT_SCHED_COSINE,
} ot_schedule_kind;

typedef struct ot_optim_config {
    ot_optim_kind kind;
    double lr;           /* default 0.01 (SGD) / 0.001 (Adam, AdamW): see ot_optim_default_lr */
    double momentum;     /* SGD; 0 = plain SGD (no state) */
    bool nesterov;       /* SGD; needs momentum > 0 */
    double weight_decay; /* SGD, Adam: L2 on the gradient; AdamW: decoupled. Default 0 (AdamW 0.01) */
    double beta1, beta2, eps; /* Adam/AdamW: 0.9, 0.999, 1e-8 */
    /* AdamW in HuggingFace's form (transformers' old AdamW; ONNX Runtime's artifacts,
     * AdamWOptimizer adam_mode 1): eps is added to sqrt(v) before the bias correction
     * (eps / sqrt(1 - beta2^t) in torch's form) and the decay multiplies the updated
     * param. The public API's optimizer "adamw-hf". */
    bool eps_hf;
    double clip_grad_norm;    /* max global L2 norm; 0 = no clipping */
    ot_schedule_kind schedule;
    int64_t warmup_steps; /* W */
    int64_t total_steps;  /* T: optimizer steps of the whole run (cosine) */
} ot_optim_config;

/* Fills c with PyTorch's defaults for `kind` (lr 0.01 for SGD, 0.001 for Adam/AdamW,
 * AdamW weight decay 0.01), constant schedule, no clipping. */
void ot_optim_config_default(ot_optim_config *c, ot_optim_kind kind);

/* The optimizer of a run that names none (the CLI without --optimizer): AdamW, as
 * most PyTorch and HF recipes, with torch.optim.AdamW's betas, eps and weight decay
 * but lr 3e-3 instead of its 1e-3. SGD at 0.01 (the old default) barely moves the
 * samples' loss in the bare form's 5 epochs (tinygpt 4.35 -> 4.30); AdamW at 1e-3
 * lowers mobilenet's by a fifth only; at 3e-3 every sample that can learn loses at
 * least half (docs/training.md, Defaults). With --optimizer NAME, the kind's own
 * defaults apply (ot_optim_config_default). */
#define OT_OPTIM_DEFAULT_KIND OT_OPTIM_ADAMW
#define OT_OPTIM_DEFAULT_LR 3e-3
ot_status ot_optim_kind_parse(const char *s, ot_optim_kind *out, ot_error *err);
ot_status ot_schedule_kind_parse(const char *s, ot_schedule_kind *out, ot_error *err);
const char *ot_optim_kind_name(ot_optim_kind k);
const char *ot_schedule_kind_name(ot_schedule_kind k);
/* Rejects negative or non-finite hyper-parameters, Nesterov without momentum, betas
 * outside [0,1), cosine with total_steps <= warmup_steps. OT_E_USAGE. */
ot_status ot_optim_config_check(const ot_optim_config *c, ot_error *err);

/* The learning rate of optimizer step `step` (0-based), in double as PyTorch's
 * schedulers compute it. */
double ot_optim_lr_at(const ot_optim_config *c, int64_t step);

/* Global L2 norm of a list of float gradients, as torch.nn.utils.clip_grad_norm_
 * defines it (sqrt of the sum of the squared per-tensor norms). Accumulated in double
 * in a fixed order (tensor by tensor, each in ot_grad_sum_sq's block-and-lane order),
 * so it is deterministic. */
double ot_grad_global_norm(const float *const *grads, const size_t *counts, int n);
/* clip_grad_norm_'s factor: min(1, max_norm / (total_norm + 1e-6)); 1 when max_norm is 0. */
float ot_clip_scale(double total_norm, double max_norm);

/* ---- the optimizer as IR ---------------------------------------------------- */

/* Layout of the per-step scalars value (float64[4], kind OT_VK_OPT_STATE) that every
 * step node reads as its last input. The executor builds each kernel's ot_kernel_ctx
 * itself and has no way to pass per-step values, so the training loop writes them
 * into this pinned value (ot_executor_write) before the optimizer nodes run; kernels
 * fall back to ctx->opt_* when the input is absent. apply = 0 turns the step into a
 * no-op (gradient-accumulation micro-batches that do not step). */
enum { OT_OPT_LR = 0, OT_OPT_GRAD_SCALE = 1, OT_OPT_STEP = 2, OT_OPT_APPLY = 3, OT_OPT_N_SCALARS = 4 };

typedef struct ot_optim_graph {
    int n_params;
    int *step_nodes;  /* node id of the SgdStep / AdamStep of params[i] */
    int n_state;
    int *state;       /* OT_VK_OPT_STATE values, params order (m then v for Adam) */
    int scalars;      /* the float64[4] per-step scalars value */
} ot_optim_graph;

/* Appends one SgdStep (param, grad, momentum|-1, scalars) or AdamStep (param, grad, m,
 * v, scalars) node per param, phase OT_PHASE_OPTIMIZER, with hyper-parameters as
 * attributes (momentum, nesterov, weight_decay; beta1, beta2, epsilon, weight_decay,
 * decoupled) and optimizer-state values named "<param>.<momentum|exp_avg|exp_avg_sq>"
 * (no host data: the planned arena starts zero-filled, which is torch's initial
 * state). The step nodes update param and state in place and have no outputs, so
 * the schedule runs them after every forward and backward node. */
ot_status ot_optim_build(ot_graph *g, const ot_optim_config *c, const int *params, const int *grads,
                         int n_params, ot_optim_graph *out, ot_error *err);
void ot_optim_graph_free(ot_optim_graph *og);

#endif
