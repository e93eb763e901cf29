/* train_check.c — the NaN/Inf check of a gradient without reading it (issue 14: the
 * check under 3% of a step). Most param gradients come out of one GEMM
 * (dW = dY^T X): when every element of its two inputs is finite and their magnitudes
 * bound every output below FLT_MAX, the output is finite, so the check reads the
 * inputs, K (M + N) floats, instead of the M N of the gradient (16 x 512 twice
 * against 512 x 512 in chain48). The gradient norm is taken only where something
 * reads it (record_grad_norm: --report-grad-norm); then, for a proved gradient, the
 * optimizer kernel takes its sum of squares during the update, which reads the
 * gradient anyway (exec/kernel_ctx.h, grad_ss), and the norm is added up after the
 * step in param order: the same bits as the sums taken before the update.
 * ot_train_inf_intended tells the diagnosis (train_loop.c) which Infs a mask meant.
 *
 * The check still decides before any update: a gradient not proved (a non-finite or
 * huge input, another producer) is summed as before (train_loop.c), and a non-finite
 * sum stops the step before the optimizer with the same message and diagnosis. Where
 * the norm is needed before the update (clipping, accumulation, ranks) nothing is
 * proved and the loop runs as before. */
#include "train/train_check.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/grad_norm_sum.h" /* ot_f32_max_abs_bits, ot_grad_sum_sq */

#define CHECK_INF_BITS 0x7f800000u
/* Contraction lengths the bound below covers: K u <= 2^-4 for u = 2^-24. */
#define CHECK_MAX_K (1u << 20)

/* Whether node nd can prove its output finite from its inputs: a Gemm of two
 * float32 inputs (no C) or a MatMul of two rank-2 float32 inputs, writing the rank-2
 * gradient gv. */
static bool gemm_like(const ot_graph *g, const ot_node *nd, int gv) {
    if (g->values[gv].shape.rank != 2 || nd->n_outputs < 1 || nd->outputs[0] != gv || nd->n_inputs < 2) return false;
    int a = nd->inputs[0], b = nd->inputs[1];
    if (a < 0 || b < 0 || g->values[a].dtype != OT_F32 || g->values[b].dtype != OT_F32) return false;
    if (nd->op == OT_OP_GEMM) return nd->n_inputs == 2 || nd->inputs[2] < 0;
    return nd->op == OT_OP_MATMUL && nd->n_inputs == 2 && g->values[a].shape.rank == 2 && g->values[b].shape.rank == 2;
}

ot_status ot_train_check_build(ot_train_session *s, ot_error *err) {
    const ot_plan *p = ot_executor_plan(s->ex);
    int n = s->ad.n_params;
    s->hot_gemm = malloc(((size_t)n + 1) * sizeof *s->hot_gemm);
    s->opt_at = malloc(((size_t)n + 1) * sizeof *s->opt_at);
    s->hot_proven = calloc((size_t)n + 1, sizeof *s->hot_proven);
    s->opt_ss = calloc((size_t)p->n_steps + 1, sizeof *s->opt_ss);
    if (!s->hot_gemm || !s->opt_at || !s->hot_proven || !s->opt_ss) {
        free(s->hot_gemm), free(s->opt_at), free(s->hot_proven), free(s->opt_ss);
        s->hot_gemm = s->opt_at = NULL, s->hot_proven = NULL, s->opt_ss = NULL;
        return ot_fail(err, OT_E_MEMORY, "out of memory checking the gradients");
    }
    int *param_of = malloc(((size_t)s->g->n_values + 1) * sizeof *param_of); /* gradient value -> param */
    if (!param_of) return ot_fail(err, OT_E_MEMORY, "out of memory checking the gradients");
    for (int v = 0; v < s->g->n_values; v++) param_of[v] = -1;
    for (int i = 0; i < n; i++) {
        int v = s->ad.grads[i], prod = s->g->values[v].producer;
        s->hot_gemm[i] = s->hot_has[i] && gemm_like(s->g, &s->g->nodes[prod], v) ? prod : -1;
        s->opt_at[i] = -1;
        param_of[v] = i;
    }
    for (int k = s->boundary + 1; k < p->n_steps; k++) { /* the optimizer node reading the gradient as input 1 */
        const ot_node *nd = &s->g->nodes[p->order[k]];
        int v = nd->n_inputs > 1 ? nd->inputs[1] : -1;
        if (nd->phase == OT_PHASE_OPTIMIZER && v >= 0 && param_of[v] >= 0) s->opt_at[param_of[v]] = k;
    }
    free(param_of);
    return OT_OK;
}

bool ot_train_check_may_prove(const ot_train_session *s) {
    return s->hot_gemm && !s->g->fuse_update && !s->o.no_numerics_check && s->with_opt && s->mode == MODE_TRAIN &&
           s->o.accum == 1 && !s->o.split_update && !(s->o.optim.clip_grad_norm > 0) && !s->o.dist;
}

/* Whether [p, p + n) and [q, q + m) (floats) share memory. */
static bool overlap(const float *p, size_t n, const float *q, size_t m) { return p < q + m && q < p + n; }

/* The bound: a computed sum of K products, each of magnitude at most P, in any order
 * and blocking, with or without FMA, stays below K P (1 + u)^(K + 1) < 1.07 K P for
 * K <= 2^20, and alpha's scaling (of the sum, or of A or B first) rounds once more,
 * so with |alpha| K max|A| max|B|, |alpha| max|A| and |alpha| max|B| at most
 * FLT_MAX / 4 no partial result overflows; finite operands that never overflow make
 * no NaN (that needs a NaN, Inf - Inf or 0 x Inf). The CPU's GEMMs never read their
 * output when beta is 0 (kernels/cpu/gemm_select.c), and an output that shares
 * memory with an input is not proved. */
bool ot_train_check_proves(ot_train_session *s, int i) {
    const ot_node *nd = &s->g->nodes[s->hot_gemm[i]];
    const ot_plan *p = ot_executor_plan(s->ex);
    int gv = s->ad.grads[i], a = nd->inputs[0], b = nd->inputs[1];
    const float *pa = ot_executor_value_ptr(s->ex, a), *pb = ot_executor_value_ptr(s->ex, b);
    const float *py = ot_executor_value_ptr(s->ex, gv);
    size_t na = ot_plan_value_bytes(p, a) / sizeof(float), nb = ot_plan_value_bytes(p, b) / sizeof(float);
    size_t ny = ot_plan_value_bytes(p, gv) / sizeof(float);
    int64_t rows = s->g->values[gv].shape.dim[0];
    if (!pa || !pb || !py || rows <= 0 || ny % (size_t)rows || na % (size_t)rows) return false;
    size_t K = na / (size_t)rows, cols = ny / (size_t)rows; /* op(A) is rows x K, op(B) K x cols */
    if (K == 0 || K > CHECK_MAX_K || nb != K * cols || overlap(py, ny, pa, na) || overlap(py, ny, pb, nb)) return false;
    uint32_t ba = ot_f32_max_abs_bits(pa, na), bb = ba < CHECK_INF_BITS ? ot_f32_max_abs_bits(pb, nb) : ba;
    if (ba >= CHECK_INF_BITS || bb >= CHECK_INF_BITS) return false;
    float ma, mb;
    memcpy(&ma, &ba, sizeof ma), memcpy(&mb, &bb, sizeof mb);
    double alpha = nd->op == OT_OP_GEMM ? fabs((double)ot_node_attr_float(nd, "alpha", 1.0f)) : 1.0;
    const double lim = (double)FLT_MAX / 4;
    return alpha * (double)K * (double)ma * (double)mb <= lim && alpha * (double)ma <= lim && alpha * (double)mb <= lim;
}

bool ot_train_check_defer_norm(ot_train_session *s, const double *ss) {
    ot_executor_set_grad_ss(s->ex, NULL);
    s->norm_pending = false;
    if (!ot_train_check_may_prove(s)) return false;
    bool any = false;
    for (int i = 0; i < s->ad.n_params && !any; i++) any = s->hot_proven[i];
    if (!any) return false;
    const ot_plan *p = ot_executor_plan(s->ex);
    for (int i = 0; i < s->ad.n_params; i++) s->hot_ss[i] = ss[i];
    /* NaN marks the slots whose sums are wanted (the proved gradients', the others are
     * known); a slot no kernel fills reads as "not taken" */
    for (int k = 0; k < p->n_steps; k++) s->opt_ss[k] = 0.0;
    for (int i = 0; i < s->ad.n_params; i++)
        if (s->hot_proven[i] && s->opt_at[i] >= 0) s->opt_ss[s->opt_at[i]] = NAN;
    ot_executor_set_grad_ss(s->ex, s->opt_ss);
    s->norm_pending = true;
    return true;
}

void ot_train_check_finish(ot_train_session *s) {
    if (!s->norm_pending) return;
    s->norm_pending = false;
    ot_executor_set_grad_ss(s->ex, NULL);
    double total = 0.0;
    for (int i = 0; i < s->ad.n_params; i++) {
        double ss = s->hot_ss[i];
        if (s->hot_proven[i]) {
            int k = s->opt_at[i];
            ss = k >= 0 ? s->opt_ss[k] : NAN;
            if (!isfinite(ss)) /* not taken by the kernel (or, impossibly, not finite): the pass of its own */
                ss = ot_grad_sum_sq(ot_executor_value_ptr(s->ex, s->ad.grads[i]),
                                    s->grad_off[i + 1] - s->grad_off[i]);
        }
        total += ss;
    }
    s->last_norm = sqrt(total) / 1.0; /* the boundary's sqrt(total) / K, K = 1 */
}

/* Whether an infinity in value v is intended (docs/bad-input.md, "Which value is
 * named"): a causal or padding mask writes -Inf on purpose (Where, a masked Add) for a
 * Softmax, a max or a comparison to consume. It is intended when every reader is such
 * an op, or passes it on unchanged (views, layout, Add/Sub, Cast) to a value that is
 * itself intended; an Inf that reaches anything else, the loss, a graph output or a
 * value nothing reads is named at the first node that made it. NaN is never intended.
 * depth bounds the walk (a deeper chain counts as unintended: it is named). */
bool ot_train_inf_intended(const ot_graph *g, int v, int depth) {
    const ot_value *val = &g->values[v];
    if (val->n_consumers == 0 || depth > 32) return false;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v) return false;
    for (int k = 0; k < val->n_consumers; k++) {
        const ot_node *c = &g->nodes[val->consumers[k]];
        switch (c->op) {
        case OT_OP_SOFTMAX: case OT_OP_LOG_SOFTMAX: case OT_OP_WHERE: case OT_OP_MAX: case OT_OP_MIN:
        case OT_OP_REDUCE_MAX: case OT_OP_REDUCE_MIN: case OT_OP_MAX_GRAD: case OT_OP_MIN_GRAD: case OT_OP_EQUAL:
        case OT_OP_LESS: case OT_OP_GREATER: case OT_OP_LESS_OR_EQUAL: case OT_OP_GREATER_OR_EQUAL:
            continue; /* consumes an infinity as intended */
        case OT_OP_ADD: case OT_OP_SUB: case OT_OP_RESHAPE: case OT_OP_TRANSPOSE: case OT_OP_SQUEEZE:
        case OT_OP_UNSQUEEZE: case OT_OP_CONCAT: case OT_OP_SLICE: case OT_OP_EXPAND: case OT_OP_IDENTITY:
        case OT_OP_CAST:
            for (int o = 0; o < c->n_outputs; o++)
                if (c->outputs[o] >= 0 && !ot_train_inf_intended(g, c->outputs[o], depth + 1)) return false;
            continue; /* passes it on */
        default: return false;
        }
    }
    return true;
}
