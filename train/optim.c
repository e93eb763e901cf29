/* optim.c — optimizer configuration, learning-rate schedules, global gradient norm,
 * and the pass that appends SgdStep / AdamStep nodes (with their optimizer-state
 * values) to the training graph. The update maths lives in kernels/cpu/optim_cpu.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/optim.h"

void ot_optim_config_default(ot_optim_config *c, ot_optim_kind kind) {
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->lr = kind == OT_OPTIM_SGD ? 0.01 : 0.001;
    c->weight_decay = kind == OT_OPTIM_ADAMW ? 0.01 : 0.0;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->eps = 1e-8;
    c->schedule = OT_SCHED_CONSTANT;
}

static const char *const optim_names[] = {"sgd", "adam", "adamw"};
static const char *const sched_names[] = {"constant", "warmup", "cosine"};

const char *ot_optim_kind_name(ot_optim_kind k) {
    return (unsigned)k < 3 ? optim_names[k] : "?";
}
const char *ot_schedule_kind_name(ot_schedule_kind k) {
    return (unsigned)k < 3 ? sched_names[k] : "?";
}

ot_status ot_optim_kind_parse(const char *s, ot_optim_kind *out, ot_error *err) {
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, optim_names[i])) {
            *out = (ot_optim_kind)i;
            return OT_OK;
        }
    return ot_fail(err, OT_E_USAGE, "--optimizer '%s': expected sgd, adam or adamw", s ? s : "");
}

ot_status ot_schedule_kind_parse(const char *s, ot_schedule_kind *out, ot_error *err) {
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, sched_names[i])) {
            *out = (ot_schedule_kind)i;
            return OT_OK;
        }
    return ot_fail(err, OT_E_USAGE, "--schedule '%s': expected constant, warmup or cosine", s ? s : "");
}

static bool finite_nonneg(double x) {
    return isfinite(x) && x >= 0.0;
}

ot_status ot_optim_config_check(const ot_optim_config *c, ot_error *err) {
    if (!(isfinite(c->lr) && c->lr > 0.0)) return ot_fail(err, OT_E_USAGE, "--lr %g: must be a positive number", c->lr);
    if (!finite_nonneg(c->momentum)) return ot_fail(err, OT_E_USAGE, "--momentum %g: must be >= 0", c->momentum);
    if (!finite_nonneg(c->weight_decay))
        return ot_fail(err, OT_E_USAGE, "--weight-decay %g: must be >= 0", c->weight_decay);
    if (!finite_nonneg(c->clip_grad_norm))
        return ot_fail(err, OT_E_USAGE, "--clip-grad-norm %g: must be > 0 (or 0 for no clipping)", c->clip_grad_norm);
    if (c->kind != OT_OPTIM_SGD && c->nesterov)
        return ot_fail(err, OT_E_USAGE, "--nesterov applies to --optimizer sgd only (with --momentum > 0)");
    if (c->kind == OT_OPTIM_SGD && c->nesterov && c->momentum <= 0.0)
        return ot_fail(err, OT_E_USAGE, "--nesterov needs --momentum > 0 (as torch.optim.SGD)");
    if (c->kind != OT_OPTIM_SGD && c->momentum != 0.0)
        return ot_fail(err, OT_E_USAGE, "--momentum applies to --optimizer sgd only (Adam's is --beta1)");
    if (!(c->beta1 >= 0.0 && c->beta1 < 1.0) || !(c->beta2 >= 0.0 && c->beta2 < 1.0))
        return ot_fail(err, OT_E_USAGE, "betas (%g, %g): each must be in [0, 1)", c->beta1, c->beta2);
    if (!(isfinite(c->eps) && c->eps > 0.0)) return ot_fail(err, OT_E_USAGE, "eps %g: must be > 0", c->eps);
    if (c->warmup_steps < 0) return ot_fail(err, OT_E_USAGE, "--warmup-steps %lld: must be >= 0", (long long)c->warmup_steps);
    if (c->schedule == OT_SCHED_WARMUP && c->warmup_steps == 0)
        return ot_fail(err, OT_E_USAGE, "--schedule warmup needs --warmup-steps N (N > 0)");
    if (c->schedule == OT_SCHED_COSINE && c->total_steps <= c->warmup_steps)
        return ot_fail(err, OT_E_USAGE, "--schedule cosine: %lld optimizer steps, not more than the %lld warm-up steps",
                       (long long)c->total_steps, (long long)c->warmup_steps);
    return OT_OK;
}

double ot_optim_lr_at(const ot_optim_config *c, int64_t step) {
    double f = 1.0;
    int64_t w = c->warmup_steps;
    if (c->schedule != OT_SCHED_CONSTANT && step < w) {
        f = (double)(step + 1) / (double)w;
    } else if (c->schedule == OT_SCHED_COSINE) {
        double span = (double)(c->total_steps - w);
        double t = (double)(step - w);
        if (t > span) t = span;
        f = 0.5 * (1.0 + cos(M_PI * t / span));
    }
    return c->lr * f;
}

double ot_grad_global_norm(const float *const *grads, const size_t *counts, int n) {
    double total = 0.0;
    for (int k = 0; k < n; k++) total += ot_grad_sum_sq(grads[k], counts[k]);
    return sqrt(total);
}

float ot_clip_scale(double total_norm, double max_norm) {
    if (max_norm <= 0.0) return 1.0f;
    /* torch 1.13: clip_coef = max_norm / (total_norm + 1e-6), clamped to 1.0, as float */
    float coef = (float)max_norm / ((float)total_norm + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}

/* ---- the optimizer as IR ---------------------------------------------------- */

void ot_optim_graph_free(ot_optim_graph *og) {
    if (!og) return;
    free(og->step_nodes);
    free(og->state);
    memset(og, 0, sizeof *og);
}

/* An optimizer-state value shaped like the param (zero in the fresh arena). */
static int add_state(ot_graph *g, int param, const char *suffix, ot_optim_graph *og) {
    char name[512];
    snprintf(name, sizeof name, "%.400s.%s", g->values[param].name ? g->values[param].name : "param", suffix);
    ot_shape s = g->values[param].shape;
    int id = ot_graph_add_value_unique(g, name, OT_F32, &s, OT_VK_OPT_STATE);
    if (id < 0) return -1;
    og->state[og->n_state++] = id;
    return id;
}

ot_status ot_optim_build(ot_graph *g, const ot_optim_config *c, const int *params, const int *grads,
                         int n_params, ot_optim_graph *out, ot_error *err) {
    ot_status st = OT_OK;
    ot_optim_graph og = {0};
    og.step_nodes = ot_xcalloc((size_t)(n_params ? n_params : 1), sizeof(int));
    og.state = ot_xcalloc((size_t)(2 * n_params + 1), sizeof(int));
    if (!og.step_nodes || !og.state) {
        st = ot_fail(err, OT_E_MEMORY, "optimizer: out of memory");
        goto fail;
    }
    int64_t ns = OT_OPT_N_SCALARS;
    ot_shape ss = ot_shape_make(1, &ns);
    og.scalars = ot_graph_add_value_unique(g, "optimizer.scalars", OT_F64, &ss, OT_VK_OPT_STATE);
    if (og.scalars < 0) goto oom;
    for (int k = 0; k < n_params; k++) {
        const ot_value *p = &g->values[params[k]];
        if (p->dtype != OT_F32 || !ot_shape_is_static(&p->shape)) {
            st = ot_fail(err, OT_E_UNSUPPORTED, "optimizer: param '%s' is %s%s; only static float32 params are trained",
                         p->name, ot_dtype_name(p->dtype), ot_shape_is_static(&p->shape) ? "" : " with a dynamic shape");
            goto fail;
        }
        int ins[5] = {params[k], grads[k], -1, -1, -1};
        int n_in;
        ot_op op = OT_OP_SGD_STEP;
        if (c->kind == OT_OPTIM_SGD) {
            if (c->momentum != 0.0 && (ins[2] = add_state(g, params[k], "momentum", &og)) < 0) goto oom;
            ins[3] = og.scalars;
            n_in = 4;
        } else {
            op = OT_OP_ADAM_STEP;
            if ((ins[2] = add_state(g, params[k], "exp_avg", &og)) < 0) goto oom;
            if ((ins[3] = add_state(g, params[k], "exp_avg_sq", &og)) < 0) goto oom;
            ins[4] = og.scalars;
            n_in = 5;
        }
        char name[512];
        snprintf(name, sizeof name, "%.400s/%s", g->values[params[k]].name, ot_op_name(op));
        int nid = ot_graph_add_node(g, op, name, ins, n_in, NULL, 0, OT_PHASE_OPTIMIZER);
        if (nid < 0) goto oom;
        ot_node *n = &g->nodes[nid];
        int rc = 0;
        if (op == OT_OP_SGD_STEP) {
            rc |= ot_node_set_attr_float(n, "momentum", (float)c->momentum);
            rc |= ot_node_set_attr_int(n, "nesterov", c->nesterov ? 1 : 0);
            rc |= ot_node_set_attr_float(n, "weight_decay", (float)c->weight_decay);
        } else {
            rc |= ot_node_set_attr_float(n, "beta1", (float)c->beta1);
            rc |= ot_node_set_attr_float(n, "beta2", (float)c->beta2);
            rc |= ot_node_set_attr_float(n, "epsilon", (float)c->eps);
            rc |= ot_node_set_attr_float(n, "weight_decay", (float)c->weight_decay);
            rc |= ot_node_set_attr_int(n, "decoupled", c->kind == OT_OPTIM_ADAMW ? 1 : 0);
            if (c->eps_hf) rc |= ot_node_set_attr_int(n, "eps_hf", 1);
        }
        if (rc) goto oom;
        og.step_nodes[og.n_params++] = nid;
    }
    *out = og;
    return OT_OK;
oom:
    st = ot_fail(err, OT_E_MEMORY, "optimizer: out of memory while adding the update nodes");
fail:
    ot_optim_graph_free(&og);
    return st;
}
