/* session.c — the pieces every command builds its plans from (see session.h): data
 * to inputs, the batch, binding dims on a borrowed copy of the imported graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autodiff/fold_linear.h" /* weight Transposes into the GEMM */
#include "kernels/backend_select.h"
#include "plan/schedule.h"
#include "train/dist.h"
#include "train/kv_cache.h"
#include "train/session.h"
#include "train/train_internal.h"
#include "train/train_memory.h"

static const char *name_of(const ot_graph *g, int v) {
    return v >= 0 && g->values[v].name ? g->values[v].name : "?";
}

/* The graph input array a feeds (by name, or the next unnamed model input), -1 with
 * err set when there is none. */
static int array_input(const ot_graph *g, int n_model_inputs, const ot_data_array *a, int *pos, const char *what,
                       ot_error *err) {
    if (!*a->name) {
        if (*pos >= n_model_inputs) {
            ot_fail(err, OT_E_USAGE, "%s: more --input files than model inputs (%d); '%s' is extra", what,
                    n_model_inputs, a->path);
            return -1;
        }
        return g->inputs[(*pos)++];
    }
    for (int k = 0; k < n_model_inputs; k++)
        if (!strcmp(name_of(g, g->inputs[k]), a->name)) return g->inputs[k];
    char names[512] = "";
    for (int k = 0; k < n_model_inputs; k++) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s'%s'", k ? ", " : "", name_of(g, g->inputs[k]));
    }
    ot_fail(err, OT_E_USAGE, "%s: --input %s=%s: the model has no input '%s' (its inputs: %s)", what, a->name,
            a->path, a->name, names);
    return -1;
}

ot_status ot_session_map_data(const ot_graph *g, int n_model_inputs, int label_value, const char *loss,
                              ot_dataset *d, const char *what, ot_error *err) {
    int pos = 0;
    for (int i = 0; i < d->n_arrays; i++) d->arrays[i].value_id = -1;
    for (int i = 0; i < d->n_arrays; i++) {
        ot_data_array *a = &d->arrays[i];
        int v = -1;
        if (!strcmp(a->name, OT_DATA_LABELS)) {
            if (label_value == OT_SESSION_LABELS_LATER) continue;
            if (label_value < 0)
                return ot_fail(err, OT_E_USAGE, "%s: labels given (%s) but --loss output takes no labels; pass the model's own label input as --input NAME=FILE",
                               what, a->path);
            v = label_value;
        } else if ((v = array_input(g, n_model_inputs, a, &pos, what, err)) < 0) {
            return err ? err->code : OT_E_USAGE;
        }
        for (int j = 0; j < i; j++)
            if (d->arrays[j].value_id == v)
                return ot_fail(err, OT_E_USAGE, "%s: input '%s' is given twice (%s and %s)", what, name_of(g, v),
                               d->arrays[j].path, a->path);
        a->value_id = v;
    }
    /* every input without data at once; KV-cache inputs take their defaults later */
    char missing[512] = "";
    int n_missing = 0, first = -1;
    for (int k = 0; k < n_model_inputs; k++) {
        int v = g->inputs[k];
        bool have = false;
        for (int i = 0; i < d->n_arrays; i++) have |= d->arrays[i].value_id == v;
        if (have || ot_kv_role_of(g, n_model_inputs, v) != OT_KV_NONE) continue;
        size_t l = strlen(missing);
        snprintf(missing + l, sizeof missing - l, "%s'%s'", n_missing ? ", " : "", name_of(g, v));
        if (n_missing++ == 0) first = v;
    }
    if (n_missing == 1)
        return ot_fail(err, OT_E_USAGE, "%s: no data for input '%s' (use --input %s=FILE.npy)", what,
                       name_of(g, first), name_of(g, first));
    if (n_missing > 1)
        return ot_fail(err, OT_E_USAGE, "%s: no data for %d inputs: %s (use --input NAME=FILE.npy for each)", what,
                       n_missing, missing);
    if (label_value >= 0 && !ot_dataset_find(d, OT_DATA_LABELS))
        return ot_fail(err, OT_E_USAGE, "%s: --loss %s needs --labels FILE.npy", what, loss ? loss : "cross-entropy");
    return OT_OK;
}

ot_status ot_session_batch(const ot_graph *g, int64_t want, int64_t dflt, int64_t n_samples, int64_t *batch,
                           ot_error *err) {
    if (g->n_inputs == 0) return ot_fail(err, OT_E_MODEL, "the model has no data inputs");
    const ot_value *x = &g->values[g->inputs[0]];
    if (x->shape.rank < 1) return ot_fail(err, OT_E_MODEL, "model input '%s' has no batch axis", x->name);
    if (x->shape.dim[0] >= 0) {
        if (want && want != x->shape.dim[0])
            return ot_fail(err, OT_E_USAGE, "--batch-size %lld: the model has a fixed batch of %lld (input '%s')",
                           (long long)want, (long long)x->shape.dim[0], x->name);
        *batch = x->shape.dim[0];
        return OT_OK;
    }
    int64_t b = want ? want : dflt;
    if (n_samples < 0 && b < 1)
        return ot_fail(err, OT_E_USAGE, "model input '%s' has a symbolic batch: give --batch-size N", x->name);
    if (n_samples >= 0 && (b < 1 || b > n_samples))
        return ot_fail(err, OT_E_DATA, "--batch-size %lld: the data has %lld samples", (long long)b,
                       (long long)n_samples);
    if (x->shape.sym[0] < 0)
        return ot_fail(err, OT_E_SHAPE, "model input '%s': the batch axis is unknown and not symbolic; cannot bind it",
                       x->name);
    *batch = b;
    return OT_OK;
}

static bool is_model_input(const ot_graph *g, int n_model_inputs, int v) {
    for (int k = 0; k < n_model_inputs; k++)
        if (g->inputs[k] == v) return true;
    return false;
}

/* The first derived symbol a --bind spec ("NAME=SIZE[,NAME=SIZE]") names, -1 if none. */
static int derived_in_spec(const ot_graph *g, const bool *derived, const char *spec) {
    for (int s = 0; s < g->n_syms; s++) {
        size_t n = strlen(g->syms[s]);
        for (const char *p = spec; derived[s] && p; p = strchr(p, ','), p = p ? p + 1 : NULL)
            if (!strncmp(p, g->syms[s], n) && p[n] == '=') return s;
    }
    return -1;
}

ot_status ot_session_bind(ot_graph *g, int n_model_inputs, const char *const *bind, int n_bind, const ot_dataset *d,
                          int64_t want, int64_t dflt, int64_t n_samples, int64_t *batch, ot_error *err) {
    ot_status st;
    bool *derived = ot_xcalloc((size_t)g->n_syms + 1, sizeof *derived);
    if (!derived) return ot_fail(err, OT_E_MEMORY, "out of memory");
    if ((st = ot_kv_derived_syms(g, n_model_inputs, derived, err))) goto fail;
    for (int i = 0; i < n_bind; i++) {
        int sym = derived_in_spec(g, derived, bind[i]);
        if (sym >= 0) {
            st = ot_fail(err, OT_E_USAGE,
                         "--bind %s: the model computes '%s' from its other dims (e.g. past + sequence length), so it "
                         "is never bound on its own: bind those, or give the data that fixes them",
                         bind[i], g->syms[sym]);
            goto fail;
        }
        if ((st = ot_graph_bind_dims_from_string(g, bind[i], err))) goto fail;
    }
    /* symbolic dims past axis 0 come from the data (every input must agree: the
     * second one that disagrees fails to bind, naming the dim) */
    for (int i = 0; d && i < d->n_arrays; i++) {
        int v = d->arrays[i].value_id;
        if (v < 0 || !is_model_input(g, n_model_inputs, v)) continue;
        const ot_shape *s = &g->values[v].shape;
        const ot_tensor *t = d->arrays[i].t;
        for (int k = 1; k < s->rank && k < t->shape.rank; k++) {
            int sym = s->sym[k];
            if (s->dim[k] >= 0 || sym < 0 || g->sym_values[sym] >= 0 || derived[sym]) continue;
            if ((st = ot_graph_bind_dim(g, g->syms[sym], t->shape.dim[k], err))) goto fail;
        }
    }
    /* a KV cache without data is empty: its past length 0 */
    for (int k = 0; k < n_model_inputs; k++) {
        int v = g->inputs[k], a = ot_kv_role_of(g, n_model_inputs, v) == OT_KV_PAST ? ot_kv_past_axis(g, v) : -1;
        int sym = a >= 0 ? g->values[v].shape.sym[a] : -1;
        if (sym >= 0 && g->sym_values[sym] < 0 && (st = ot_graph_bind_dim(g, g->syms[sym], 0, err))) goto fail;
    }
    if ((st = ot_session_batch(g, want, dflt, n_samples, batch, err))) goto fail;
    /* the batch: the first input's axis 0, then any other input naming it otherwise */
    for (int k = 0; k < n_model_inputs; k++) {
        const ot_shape *s = &g->values[g->inputs[k]].shape;
        int sym = s->rank >= 1 && s->dim[0] < 0 ? s->sym[0] : -1;
        if (sym < 0 || g->sym_values[sym] >= 0) continue;
        if ((st = ot_graph_bind_dim(g, g->syms[sym], *batch, err))) goto fail;
    }
    /* what the graph derives (total_sequence_length = past + sequence) last; a mask
     * length the graph leaves free (a dynamo export's) is past + sequence too */
    st = ot_kv_bind_derived(g, n_model_inputs, derived, err);
    if (!st) st = ot_kv_bind_mask(g, n_model_inputs, d, err);
fail:
    free(derived);
    return st;
}

static bool is_weight(const ot_value *v) { return v->kind == OT_VK_PARAM || v->kind == OT_VK_STATE; }

/* A rank-0 float initializer: a param to the importer, a constant to the param rule
 * (params_rule.c, "scalar") unless --train names it. Its bytes go with a borrow
 * without weights too (copied), so a plan-only build reads the attention scale and
 * mask fill that --fused-attention takes as constants, as `train`'s build does. */
static bool scalar_param(const ot_value *v) { return v->kind == OT_VK_PARAM && v->shape.rank == 0; }

ot_graph *ot_session_borrow(ot_graph *g, bool weights) {
    ot_graph *c = ot_graph_clone(g, false);
    if (!c) return NULL;
    for (int v = 0; v < g->n_values; v++) {
        ot_value *src = &g->values[v], *dst = &c->values[v];
        if (!src->data || (!weights && is_weight(src) && !scalar_param(src))) continue;
        if (!is_weight(src) || !weights) {
            if (ot_value_set_data(dst, src->data, src->nbytes)) {
                ot_session_give_back(g, c);
                ot_graph_free(c);
                return NULL;
            }
            continue;
        }
        dst->data = src->data;
        src->data = NULL;
    }
    return c;
}

void ot_session_give_back(ot_graph *g, ot_graph *copy) {
    if (!copy) return;
    for (int v = 0; v < g->n_values && v < copy->n_values; v++) {
        ot_value *home = &g->values[v];
        if (!is_weight(home) || home->data) continue;
        ot_value *c = &copy->values[v];
        if (c->data && c->dtype == OT_F32 && (home->dtype == OT_F16 || home->dtype == OT_BF16)) {
            /* a float32 master weight of a low model (train/lowp_model.c): rounded
             * back to the model's dtype; if that buffer cannot be had, the master
             * stays with the copy and the model keeps no data for it */
            void *h = malloc(home->nbytes ? home->nbytes : 1);
            if (!h) continue;
            ot_lowp_narrow(home->dtype, c->data, h, home->nbytes / 2);
            free(c->data);
            c->data = NULL;
            home->data = h;
            continue;
        }
        home->data = copy->values[v].data;
        copy->values[v].data = NULL;
    }
}

/* ---- the training graph (ot_train_session_new) ---------------------------------- */

/* Remat's measure: the planner's peak of the training step as it will run, the
 * optimizer nodes included: they are appended to the graph being measured (state
 * values, step scalars, --accum's accumulators and whatever transient the update
 * takes are then planned, not estimated) and removed again, so --memory-budget and `plan` see what `train`
 * allocates. Remat measures the session's own graph with a candidate rewrite applied;
 * the optimizer nodes go on top the same way and come off as remat's own clones do
 * (ot_remat_undo from the counts before them: consumer lists are restored in order). */
typedef struct step_measure {
    ot_backend *be;
    ot_train_session *s;
} step_measure;

static ot_status measure_step(const ot_graph *g, void *user, ot_remat_measurement *m, ot_error *err) {
    const step_measure *sm = user;
    ot_train_session *s = sm->s;
    if (!s->with_opt) return ot_remat_measure_planner(g, sm->be, m, err);
    if (g != s->g) return ot_fail(err, OT_E_INTERNAL, "remat measured a graph that is not the session's");
    ot_remat_rewrite tail = {.n_nodes0 = s->g->n_nodes, .n_values0 = s->g->n_values};
    ot_optim_graph og = {0};
    ot_status st = ot_optim_build(s->g, &s->o.optim, s->ad.params, s->ad.grads, s->ad.n_params, &og, err);
    int *accum = NULL;
    if (!st && (s->o.accum > 1 || s->o.split_update) && !s->o.dist) { /* --accum's gradient accumulators, as ot_train_loop_prepare adds them */
        if (!(accum = calloc((size_t)s->ad.n_params + 1, sizeof *accum)))
            st = ot_fail(err, OT_E_MEMORY, "out of memory");
        else
            st = ot_train_add_accumulators(s, s->g, accum, err);
    }
    free(accum);
    /* appended only (no node writes a value of the graph before them): a search's
     * declared rewrite (plan/schedule.h) still describes the graph */
    if (!st) ot_schedule_base_grown(m->scratch, s->g);
    if (!st) st = ot_remat_measure_planner(s->g, sm->be, m, err);
    ot_optim_graph_free(&og);
    ot_remat_undo(s->g, &tail);
    return st;
}

static double mib(int64_t b) { return (double)b / 1048576.0; }

/* What the budget is called in messages. */
static const char *budget_name(const ot_train_session *s) {
    return s->budget_from_device ? "the GPU's free memory less a margin," : "--memory-budget";
}

/* auto's budget is what the training step may take: the whole budget less the
 * validation plan's arena, which lives next to the training arena for the run. */
static ot_status auto_budget(ot_train_session *s, int64_t budget, bool from_device, int64_t *train_budget,
                             ot_error *err) {
    s->budget = budget;
    s->budget_from_device = from_device;
    s->val_in_budget = s->val_g != NULL;
    if (budget > s->val_peak) {
        *train_budget = budget - s->val_peak;
        return OT_OK;
    }
    return ot_fail(err, OT_E_MEMORY,
                   "%s %lld bytes (%.1f MiB) cannot even hold the validation plan, which needs %lld bytes "
                   "(%.1f MiB) for one batch in inference mode, before any training step; raise the budget or lower "
                   "--batch-size",
                   budget_name(s), (long long)budget, mib(budget), (long long)s->val_peak, mib(s->val_peak));
}

/* auto on a GPU without --memory-budget: the device's free memory less a safety
 * margin (10%, at least 256 MiB, for the CUDA context, cuBLAS and cuDNN). */
static ot_status device_budget(ot_train_session *s, int64_t *train_budget, ot_error *err) {
    size_t free_b = 0, total_b = 0;
    ot_status st = ot_backend_cuda_mem_info(s->be, &free_b, &total_b, err);
    if (st) return st;
    size_t margin = free_b / 10 > ((size_t)256 << 20) ? free_b / 10 : ((size_t)256 << 20);
    if (free_b <= margin)
        return ot_fail(err, OT_E_MEMORY, "remat auto: the GPU has only %zu bytes free; nothing fits", free_b);
    return auto_budget(s, (int64_t)(free_b - margin), true, train_budget, err);
}

/* auto within a budget, as ot_remat_choose does, keeping the stats for a message
 * that counts validation. */
static ot_status auto_within(ot_train_session *s, step_measure *mu, ot_error *err) {
    ot_remat_auto_stats stats = {0};
    ot_status st = ot_remat_auto(s->g, &s->an, s->pol.budget_bytes, measure_step, mu, s->keep, &stats, err);
    if (st == OT_E_MEMORY && s->val_peak > 0 && stats.n_measured > 0 && stats.min_peak > s->pol.budget_bytes) {
        int64_t need = stats.min_peak + s->val_peak;
        st = ot_fail(err, OT_E_MEMORY,
                     "%s %lld bytes (%.1f MiB) cannot hold a training step and validation: the validation plan "
                     "needs %lld bytes (%.1f MiB) and the smallest training step %lld bytes (%.1f MiB, --remat "
                     "all), %lld bytes (%.1f MiB) together; %s or lower --batch-size",
                     budget_name(s), (long long)s->budget, mib(s->budget), (long long)s->val_peak, mib(s->val_peak),
                     (long long)stats.min_peak, mib(stats.min_peak), (long long)need, mib(need),
                     s->budget_from_device ? "free GPU memory" : "raise --memory-budget to at least that");
    }
    return st;
}

/* Analyses the training graph and keeps it for the report (`plan` lists the kept
 * and recomputed values): with policy none only when planning. */
static ot_status analyze(ot_train_session *s, ot_error *err) {
    ot_status st = ot_remat_analyze(s->g, &s->an, err);
    if (st) return st;
    s->an_built = true;
    if (!(s->keep = ot_xcalloc((size_t)s->an.n_values + 1, sizeof *s->keep)))
        return ot_fail(err, OT_E_MEMORY, "remat: out of memory");
    return OT_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ot_status ot_train_apply_remat(ot_train_session *s, ot_error *err) {
    const char *text = s->o.remat ? s->o.remat : "none";
    ot_status st = ot_remat_policy_parse(text, &s->pol, err);
    if (st) return st;
    s->pol_parsed = true;
    s->remat.step_flops = ot_remat_step_flops(s->g);
    /* what the step's plans aim at: the budget less validation's arena (auto_budget's
     * figure); a GPU's own budget for auto below */
    int64_t aim = s->o.memory_budget ? s->o.memory_budget : s->o.plan_target;
    s->fit_target = aim > s->val_peak ? aim - s->val_peak : 0;
    if (s->pol.kind == OT_REMAT_NONE) {
        if (!s->o.plan_only) return OT_OK;
        if ((st = analyze(s, err))) return st;
        for (int v = 0; v < s->an.n_values; v++) s->keep[v] = true;
        s->remat.kept_none = ot_remat_kept_bytes(s->g, &s->an, s->keep);
        return OT_OK;
    }
    bool budgeted = s->pol.kind == OT_REMAT_AUTO || s->pol.kind == OT_REMAT_OPTIMAL;
    s->pol.time_limit_s = s->o.remat_time_limit;
    if (s->o.memory_budget && budgeted &&
        (st = auto_budget(s, s->o.memory_budget, false, &s->pol.budget_bytes, err)))
        return st;
    if (!s->o.memory_budget && budgeted && s->be->name && !strncmp(s->be->name, "cuda", 4) &&
        (st = device_budget(s, &s->pol.budget_bytes, err)))
        return st;
    if (budgeted && s->pol.budget_bytes > 0) s->fit_target = s->pol.budget_bytes;
    if ((st = analyze(s, err))) return st;
    step_measure mu = {.be = s->be, .s = s};
    /* Measure the plain step first, so the run can report what remat saved. */
    ot_remat_measurement before = {.fit_target = s->fit_target}, after = {.fit_target = s->fit_target};
    for (int v = 0; v < s->an.n_values; v++) s->keep[v] = true;
    s->remat.kept_none = ot_remat_kept_bytes(s->g, &s->an, s->keep);
    if ((st = measure_step(s->g, &mu, &before, err))) return st;
    double t0 = now_s();
    if (s->pol.kind == OT_REMAT_AUTO && s->pol.budget_bytes > 0) st = auto_within(s, &mu, err);
    else if (s->pol.kind == OT_REMAT_OPTIMAL && s->pol.budget_bytes > 0) {
        s->have_ostats = true;
        st = ot_remat_optimal(s->g, &s->an, s->pol.budget_bytes, s->pol.time_limit_s, measure_step, &mu, s->keep,
                              &s->ostats, err);
    }
    else if (s->pol.kind == OT_REMAT_AUTO) { /* no budget: the least peak at modest recompute */
        ot_remat_auto_stats as = {0};
        st = ot_remat_auto_modest(s->g, &s->an, measure_step, &mu, s->keep, &as, err);
        s->remat.modest = true;
        s->remat.no_gain = as.no_gain;
        s->remat.modest_cap = as.cost_cap;
    } else
        st = ot_remat_choose(s->g, &s->an, &s->pol, measure_step, &mu, s->keep, err);
    s->choose_seconds = now_s() - t0;
    ot_remat_rewrite rw = {0};
    if (!st) st = ot_remat_apply(s->g, &s->an, s->keep, &rw, err);
    if (!st && !(st = measure_step(s->g, &mu, &after, err))) {
        s->remat.applied = true;
        s->remat.peak_none = before.peak;
        s->remat.peak = after.peak;
        s->remat.kept = rw.kept_bytes;
        s->remat.extra_flops = rw.extra_flops;
        s->remat.n_clones = rw.n_clones;
    }
    ot_remat_rewrite_free(&rw);
    /* Only `plan` reads the analysis and the keep set after this (its report); a run
     * would carry them, one entry per value and node, resident through every step. */
    if (!s->o.plan_only) {
        ot_remat_analysis_free(&s->an);
        s->an_built = false;
        free(s->keep);
        s->keep = NULL;
    }
    return st;
}

int64_t ot_train_fit_target(const ot_train_session *s) { return s->fit_target; }

const struct ot_remat_optimal_stats *ot_train_remat_optimal(const ot_train_session *s) {
    return s->have_ostats ? &s->ostats : NULL;
}

static const char *loss_name(const ot_train_session *s) {
    return ot_loss_kind_name(s->o.loss.kind);
}

static bool backend_supports(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    ot_backend *be = ctx;
    return be->supports(be, node, in, out);
}

/* --precision: the forward graph rewritten for the backend's low-precision kernels,
 * before the loss (which then reads float32 outputs) and the backward pass; a model
 * exported in float16 or bfloat16 gets its float32 master weights here. */
static bool has_low_params(const ot_graph *g) {
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind == OT_VK_PARAM && (g->values[v].dtype == OT_F16 || g->values[v].dtype == OT_BF16))
            return true;
    return false;
}

static ot_status apply_precision(ot_train_session *s, const ot_dataset *data, ot_error *err) {
    if (s->o.precision == OT_PRECISION_FP32 && !has_low_params(s->g)) return OT_OK;
    if (!s->be && !(s->be = ot_backend_new_by_name(s->o.device ? s->o.device : "cpu", s->o.n_threads, err)))
        return err ? err->code : OT_E_DEVICE;
    ot_autocast_supports_fn fn = s->o.precision_supports ? s->o.precision_supports : backend_supports;
    ot_status st = ot_train_lowp_model(s, data, fn, s->o.precision_supports ? s->o.precision_ctx : s->be, err);
    /* a low model already computes in its own dtype (--precision may only name it) */
    if (st || s->lowp != OT_F32 || s->o.precision == OT_PRECISION_FP32) return st;
    if (s->o.precision_supports)
        return ot_autocast_apply(s->g, ot_precision_dtype(s->o.precision), s->o.precision_supports,
                                 s->o.precision_ctx, &s->ac, err);
    return ot_autocast_apply(s->g, ot_precision_dtype(s->o.precision), backend_supports, s->be, &s->ac, err);
}

/* The loss, its labels input and the model output feeding it. */
static ot_status build_loss(ot_train_session *s, ot_error *err) {
    ot_graph *g = s->g;
    ot_status st = ot_loss_build(g, &s->o.loss, &s->loss_value, err);
    if (st) return st;
    if (s->o.loss.kind != OT_LOSS_OUTPUT) s->label_value = g->inputs[g->n_inputs - 1];
    if (s->o.loss.output_name) s->out_value = ot_graph_find_value(g, s->o.loss.output_name);
    else if (g->n_outputs > 0) s->out_value = g->outputs[0];
    if (s->o.loss.kind == OT_LOSS_CROSS_ENTROPY && s->out_value >= 0) {
        const ot_shape *ls = &g->values[s->out_value].shape;
        s->class_axis = s->o.loss.class_axis < 0 ? ls->rank + s->o.loss.class_axis : s->o.loss.class_axis;
        s->n_classes = ls->dim[s->class_axis];
    }
    return OT_OK;
}

/* --chunked-loss: the head and the cross-entropy as one LinearCrossEntropy node, before
 * autodiff so that its gradient rule replaces theirs. The logits then never exist:
 * validation's accuracy, which reads them, keeps the plain graph. */
static ot_status fuse_loss(ot_train_session *s, ot_error *err) {
    if (s->o.loss.kind != OT_LOSS_CROSS_ENTROPY) {
        snprintf(s->lce.why, sizeof s->lce.why, "the loss is not cross-entropy");
        return OT_OK;
    }
    ot_linear_ce_options lo = {.mode = s->o.chunked_loss,
                               .chunk_rows = s->o.chunked_loss_rows,
                               .keep_logits = s->o.validation ? "validation (its accuracy)" : NULL};
    ot_status st = ot_linear_ce_rewrite(s->g, s->loss_value, s->out_value, &lo, &s->lce, err);
    if (!st && s->lce.applied) s->out_value = -1; /* no logits to pin or read */
    return st;
}

/* The backward pass over the params left after --freeze / --train. */
static ot_status build_backward(ot_train_session *s, ot_error *err) {
    ot_autodiff_options ao = {.loss_value = s->loss_value,
                              .freeze = s->o.freeze,
                              .n_freeze = s->o.n_freeze,
                              .train = s->lora.n ? s->lora_train : s->o.train,
                              .n_train = s->o.n_train + (s->lora.n ? 1 : 0),
                              .separate_scatter = s->o.separate_scatter, .loss_scale = ot_train_scale_wanted(s)};
    ot_status st = ot_train_scale_check(s, err);
    if (!st) st = ot_autodiff_build(s->g, &ao, &s->ad, err);
    if (st) return st;
    s->ad_built = true;
    if ((st = ot_train_scale_prepare(s, err))) return st;
    ot_dtype low = s->lowp != OT_F32 ? s->lowp : s->ac.low; /* a low model's, or --precision's */
    if (ot_autocast_recast_backward(s->g, &s->ac) < 0 ||
        ((s->ac.cls || s->lowp != OT_F32) && ot_autocast_legalize_backward(s->g, low, 0,
                                                    s->o.precision_supports ? s->o.precision_supports : backend_supports,
                                                    s->o.precision_supports ? s->o.precision_ctx : s->be) < 0))
        return ot_fail(err, OT_E_MEMORY, "--precision: out of memory adding the backward pass's casts");
    if (s->ad.n_params == 0 && s->ad.n_rule_constant > 0)
        return ot_fail(err, OT_E_USAGE,
                       "nothing to train: every parameter is frozen or kept constant by the rule (%d float "
                       "initializers; `onnxtrain info` lists them, --train REGEX trains one)",
                       s->ad.n_rule_constant);
    if (s->ad.n_params == 0)
        return ot_fail(err, OT_E_USAGE, "nothing to train: every parameter is frozen (check --freeze / --train)");
    s->g->values[s->loss_value].is_graph_output = true; /* pinned: read after every run */
    if (s->out_value >= 0) s->g->values[s->out_value].is_graph_output = true;
    return OT_OK;
}

/* --fuse-update needs nothing that waits for the whole gradient before any update. */
static ot_status fuse_check(const ot_train_session *s, ot_error *err) {
    if (s->o.optim.clip_grad_norm > 0)
        return ot_fail(err, OT_E_USAGE,
                       "--fuse-update with --clip-grad-norm %g: clipping scales every gradient by the global norm, "
                       "known only once the last gradient is, and a fused update runs before that; drop one of them",
                       s->o.optim.clip_grad_norm);
    int ranks = s->o.dist ? ot_dist_size(s->o.dist) : 1; /* over N ranks accum is K x N (ot_dist_train_options) */
    if (s->o.accum > ranks)
        return ot_fail(err, OT_E_USAGE,
                       "--fuse-update with --accum %lld: the micro-batch gradients are summed in accumulators that "
                       "live for the whole step, so fusing would save nothing but the last micro-batch's; drop one "
                       "of them", (long long)(s->o.accum / ranks));
    if (ranks > 1 && s->be && !s->be->host_memory)
        return ot_fail(err, OT_E_UNSUPPORTED,
                       "--fuse-update over %d MPI ranks on '%s': the per-gradient sums over the ranks are built for "
                       "the CPU backend only; drop --fuse-update (the sum then runs after the backward pass, through "
                       "NCCL where the build has it)", ranks, s->be->name);
    if (s->o.split_update)
        return ot_fail(err, OT_E_USAGE,
                       "fuse_update with the two-call step (split_step, onnxtrain_backward): the gradients are summed "
                       "over backward calls and applied by a later optimizer step, so no update can run inside the "
                       "backward pass; drop one of them");
    return OT_OK;
}

/* --fuse-update, before remat (its measure plans the fused step): autodiff publishes
 * each param's gradient as a graph output, pinned for readers after the run; fused,
 * nothing reads it after its update, so it becomes a transient (plan/planner.h). */
static void unpin_gradients(ot_train_session *s) {
    ot_graph *g = s->g;
    for (int i = 0; i < s->ad.n_params; i++) g->values[s->ad.grads[i]].is_graph_output = false;
    int n = 0;
    for (int k = 0; k < g->n_outputs; k++)
        if (g->values[g->outputs[k]].is_graph_output) g->outputs[n++] = g->outputs[k];
    g->n_outputs = n;
    g->fuse_update = true;
    g->sum_ranks = s->o.dist ? ot_dist_size(s->o.dist) : 1; /* each gradient's block holds the others' (planner.h) */
}

ot_status ot_train_build_graph(ot_train_session *s, ot_dataset *data, ot_error *err) {
    ot_graph *g = s->g;
    bool have_data = data && data->n_arrays > 0;
    if (!have_data && !s->o.plan_only) return ot_fail(err, OT_E_USAGE, "no input data: pass --input FILE.npy");
    int64_t n = have_data ? data->n_samples : -1;
    ot_status st;
    if (have_data && (st = ot_session_map_data(g, s->n_model_inputs, OT_SESSION_LABELS_LATER, NULL, data, "data", err)))
        return st;
    int64_t dflt = n < 0 ? 0 : !s->with_opt || s->o.whole_batch ? n : n < 32 ? n : 32;
    if ((st = ot_session_bind(g, s->n_model_inputs, s->o.bind, s->o.n_bind, have_data ? data : NULL, s->o.batch_size,
                              dflt, n, &s->B, err)))
        return st;
    if ((st = ot_train_lora_prepare(s, err))) return st;
    /* --fused-attention before autocast, which then puts the fused node on its low list */
    if ((st = ot_fused_attn_rewrite(g, s->o.fused_attention, &s->fattn, err))) return st;
    if ((st = apply_precision(s, have_data ? data : NULL, err))) return st;
    if ((st = build_loss(s, err))) return st;
    if (have_data) {
        if ((st = ot_kv_add_defaults(g, s->n_model_inputs, data, s->kv_note, sizeof s->kv_note, err))) return st;
        if ((st = ot_session_map_data(g, s->n_model_inputs, s->label_value, loss_name(s), data, "data", err)))
            return st;
        if ((st = ot_train_check_arrays(s, data, err))) return st;
    }
    if ((st = fuse_loss(s, err)) || (st = build_backward(s, err))) return st;
    if (!s->be && !(s->be = ot_backend_new_by_name(s->o.device ? s->o.device : "cpu", s->o.n_threads, err)))
        return err ? err->code : OT_E_DEVICE;
    s->be->tf32 = s->o.tf32;
    /* nn.Linear's weight Transpose as the GEMM's transB (same bits with OpenBLAS; on
     * CUDA the graph stays as exported, whose cuBLAS results it would change) */
    if ((!s->o.device || strcmp(s->o.device, "cpu") == 0) && ot_fold_linear_transposes(g) < 0)
        return ot_fail(err, OT_E_MEMORY, "out of memory folding weight transposes");
    /* validation's plan first: the budget that remat and the check below work to
     * must hold it too */
    if (s->o.validation && (st = ot_train_validation_plan_ahead(s, err))) return st;
    if (s->with_opt) { /* before remat, whose measure plans the optimizer nodes */
        if (s->o.optim.schedule == OT_SCHED_COSINE && s->o.optim.total_steps == 0)
            s->o.optim.total_steps = have_data ? ot_train_total_steps(s, data) : s->o.steps > 0 ? s->o.steps : 1;
        if ((st = ot_optim_config_check(&s->o.optim, err))) return st;
        if (s->o.fuse_update && (st = fuse_check(s, err))) return st;
        if (s->o.fuse_update) unpin_gradients(s);
    }
    if ((st = ot_train_apply_remat(s, err))) return st;
    if (s->with_opt &&
        (st = ot_optim_build(g, &s->o.optim, s->ad.params, s->ad.grads, s->ad.n_params, &s->og, err)))
        return st;
    if ((st = ot_train_loop_prepare(s, err))) return st;
    if ((st = ot_graph_require_static(g, err))) return st;
    if (s->o.memory_budget && !s->budget) { /* a fixed policy: checked, not searched */
        s->budget = s->o.memory_budget;
        s->val_in_budget = s->val_g != NULL;
    }
    return ot_train_check_budget(g, s->be, s->o.remat, s->o.memory_budget, s->val_peak, err);
}
