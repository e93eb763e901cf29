/* train.c — a training session (see train.h): the graph is built by
 * ot_train_build_graph (train/session.c) on a bound copy of the model's graph; here
 * the plan or the executor, the host buffers, the data checks and the accessors. The
 * loop itself is in train_loop.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend_select.h"
#include "kernels/kernel.h" /* ot_cpu_bf16_note */
#include "plan/schedule.h"
#include "train/kv_cache.h"
#include "train/session.h"
#include "train/train_dist.h"
#include "train/train_internal.h"

void ot_train_options_default(ot_train_options *o) {
    memset(o, 0, sizeof *o);
    o->loss.kind = OT_LOSS_CROSS_ENTROPY;
    o->loss.class_axis = -1;
    o->loss.has_ignore_index = true;
    o->loss.ignore_index = OT_DEFAULT_IGNORE_INDEX;
    ot_optim_config_default(&o->optim, OT_OPTIM_SGD);
    o->accum = 1;
}

/* Per-sample dtype and shape of every array against its (bound) graph input. */
ot_status ot_train_check_arrays(ot_train_session *s, ot_dataset *d, ot_error *err) {
    const ot_graph *g = s->g;
    for (int i = 0; i < d->n_arrays; i++) {
        ot_data_array *a = &d->arrays[i];
        const ot_value *v = &g->values[a->value_id];
        bool is_labels = a->value_id == s->label_value;
        if (is_labels && s->o.loss.kind == OT_LOSS_CROSS_ENTROPY) {
            ot_status st = ot_data_check_labels(a->t, a->path, s->n_classes, s->o.loss.has_ignore_index,
                                                s->o.loss.ignore_index, err);
            if (st) return st;
        }
        /* int32 class labels and token ids (HF tokenizers' numpy output) for an int64
         * input: widened once, so batches are int64 like the input */
        if (a->t->dtype == OT_I32 && v->dtype == OT_I64) {
            ot_status st = ot_data_widen_i32(&a->t, a->path, err);
            if (st) return st;
        }
        if (a->t->dtype != v->dtype) {
            const char *hint = a->t->dtype == OT_BF16 ? " (a <u2 or <V2 .npy is read as bfloat16 bits)"
                               : v->dtype == OT_F16   ? "; save it with a.astype(np.float16)"
                               : v->dtype == OT_BF16  ? "; give float32 data (rounded as read) or bfloat16 bits as a "
                                                        "uint16 .npy (docs/training.md)"
                                                      : "";
            return ot_fail(err, OT_E_DATA, "%s: %s data, but %s '%s' is %s%s", a->path, ot_dtype_name(a->t->dtype),
                           is_labels ? "the loss's labels input" : "model input", v->name, ot_dtype_name(v->dtype),
                           hint);
        }
        bool ok = a->t->shape.rank == v->shape.rank;
        for (int k = 1; ok && k < v->shape.rank; k++) ok = a->t->shape.dim[k] == v->shape.dim[k];
        if (!ok) {
            char want[160], got[160];
            ot_shape_str(g, &v->shape, want, sizeof want);
            ot_shape_str(NULL, &a->t->shape, got, sizeof got);
            return ot_fail(err, OT_E_DATA, "%s: shape %s does not fit %s '%s' %s (samples along axis 0, the rest must match)",
                           a->path, got, is_labels ? "the loss's labels input" : "model input", v->name, want);
        }
    }
    if (d->n_samples < s->B)
        return ot_fail(err, OT_E_DATA, "%s: %lld samples, fewer than one batch of %lld", d->arrays[0].path,
                       (long long)d->n_samples, (long long)s->B);
    return OT_OK;
}

/* The last step before the optimizer nodes; checks they all come last. With fused
 * updates (ot_graph.fuse_update) the last forward or loss step instead: the optimizer
 * nodes run among the backward ones, none before it. */
static ot_status find_boundary(ot_train_session *s, ot_error *err) {
    const ot_plan *p = ot_executor_plan(s->ex);
    s->n_opt_steps = 0;
    for (int k = 0; k < p->n_steps; k++) s->n_opt_steps += s->g->nodes[p->order[k]].phase == OT_PHASE_OPTIMIZER;
    if (s->g->fuse_update) {
        int last = -1;
        for (int k = 0; k < p->n_steps; k++) {
            ot_phase ph = s->g->nodes[p->order[k]].phase;
            if (ph == OT_PHASE_FORWARD || ph == OT_PHASE_LOSS) last = k;
        }
        for (int k = 0; k <= last; k++)
            if (s->g->nodes[p->order[k]].phase == OT_PHASE_OPTIMIZER)
                return ot_fail(err, OT_E_INTERNAL, "schedule: optimizer node '%s' runs before the loss",
                               s->g->nodes[p->order[k]].name);
        s->boundary = last;
        return OT_OK;
    }
    int first_opt = p->n_steps;
    for (int k = 0; k < p->n_steps; k++)
        if (s->g->nodes[p->order[k]].phase == OT_PHASE_OPTIMIZER) {
            first_opt = k;
            break;
        }
    for (int k = first_opt; k < p->n_steps; k++)
        if (s->g->nodes[p->order[k]].phase != OT_PHASE_OPTIMIZER)
            return ot_fail(err, OT_E_INTERNAL, "schedule: node '%s' runs after the optimizer began",
                           s->g->nodes[p->order[k]].name);
    s->boundary = first_opt - 1;
    return OT_OK;
}

/* o.plan_only: the step's plan as the executor would make it, nothing allocated. */
static ot_status plan_only(ot_train_session *s, ot_error *err) {
    int *order = NULL, n = 0;
    ot_plan_device dev = ot_backend_plan_device(s->be);
    ot_plan_options popt = {.fit_target_bytes = (size_t)s->fit_target}; /* as the executor plans it */
    /* reuses the plan that judged the order */
    ot_status st = ot_schedule_plan_opts(s->g, &dev, s->fit_target > 0 ? &popt : NULL, NULL, &order, &n, &s->plan, err);
    free(order);
    return st;
}

/* Host buffers: one batch per array (no gradient has a host copy). */
static ot_status host_buffers(ot_train_session *s, const ot_dataset *data, ot_error *err) {
    ot_graph *g = s->g;
    s->n_batch = data->n_arrays;
    s->batch = calloc((size_t)s->n_batch, sizeof *s->batch);
    s->batch_value = calloc((size_t)s->n_batch, sizeof *s->batch_value);
    s->grad_off = calloc((size_t)s->ad.n_params + 1, sizeof *s->grad_off);
    if (!s->batch || !s->batch_value || !s->grad_off) goto oom;
    for (int i = 0; i < s->n_batch; i++) {
        s->batch_value[i] = data->arrays[i].value_id;
        ot_shape bs = data->arrays[i].t->shape;
        bs.dim[0] = s->B;
        if (!(s->batch[i] = ot_tensor_new(data->arrays[i].t->dtype, &bs))) goto oom;
    }
    for (int i = 0; i < s->ad.n_params; i++) {
        s->grad_off[i] = s->grad_elems;
        s->grad_elems += (size_t)ot_shape_numel(&g->values[s->ad.grads[i]].shape);
    }
    s->grad_off[s->ad.n_params] = s->grad_elems;
    return OT_OK;
oom:
    return ot_fail(err, OT_E_MEMORY, "out of memory setting up training");
}

/* The executor over the training graph, its hook at the phase ends, and
 * validation's executor with o.validation. */
static ot_status make_executor(ot_train_session *s, ot_error *err) {
    ot_exec_options eo = {.n_threads = s->o.n_threads,
                          .seed = s->o.seed,
                          .at_phase_end = ot_train_hook,
                          .after_step = ot_train_after_step,
                          .hook_user = s,
                          .release_host_data = !s->o.keep_host_weights,
                          .fit_target_bytes = s->fit_target > 0 ? (size_t)s->fit_target : 0};
    ot_status st = ot_executor_new(s->g, s->be, &eo, &s->ex, err);
    if (!st) st = find_boundary(s, err);
    if (!st && s->o.validation) st = ot_train_validation_prepare(s, err);
    return st;
}

static ot_status session_new(ot_model *m, const ot_train_options *o, ot_dataset *data, bool with_optimizer,
                             ot_train_session **out, int64_t *chunk_tried, ot_error *err);

/* --chunked-loss under --memory-budget without --chunked-loss-rows: the largest chunk
 * whose step fits the budget, halving from the default (ot_linear_ce_default_chunk)
 * down to one row. The choice depends only on the options and the model, so verify,
 * recompute and --resume make the same one, and the plan records it. */
ot_status ot_train_session_new(ot_model *m, const ot_train_options *o, ot_dataset *data, bool with_optimizer,
                               ot_train_session **out, ot_error *err) {
    int64_t tried = 0;
    ot_status st = session_new(m, o, data, with_optimizer, out, &tried, err);
    if (st != OT_E_MEMORY || !o->memory_budget || o->chunked_loss == OT_CHUNKED_LOSS_OFF || o->chunked_loss_rows)
        return st;
    ot_train_options smaller = *o;
    for (int64_t rows = tried / 2; rows >= 1 && st == OT_E_MEMORY; rows /= 2) {
        smaller.chunked_loss_rows = rows;
        st = session_new(m, &smaller, data, with_optimizer, out, &tried, err);
    }
    return st;
}

/* One session build; *chunk_tried gets the chunk the fused loss used (0: none). */
static ot_status session_new(ot_model *m, const ot_train_options *o, ot_dataset *data, bool with_optimizer,
                             ot_train_session **out, int64_t *chunk_tried, ot_error *err) {
    ot_status st = OT_OK;
    *out = NULL;
    ot_train_session *s = calloc(1, sizeof *s);
    if (!s) return ot_fail(err, OT_E_MEMORY, "out of memory");
    s->m = m;
    s->o = *o;
    s->ls_state = -1;
    if (s->o.accum < 1) s->o.accum = 1;
    s->with_opt = with_optimizer;
    s->label_value = -1;
    s->out_value = -1;
    s->n_model_inputs = m->graph->n_inputs;
    /* m->graph stays as imported: the session binds and extends its own copy */
    if (!(s->g = ot_session_borrow(m->graph, !s->o.plan_only))) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory copying the graph of %s", m->path ? m->path : "the model");
        goto fail;
    }
    st = ot_train_build_graph(s, data, err);
    *chunk_tried = s->lce.applied ? s->lce.chunk_rows : 0;
    if (st) goto fail;
    if (s->o.plan_only) {
        if ((st = plan_only(s, err))) goto fail;
        *out = s;
        return OT_OK;
    }
    /* Both graphs are done growing (remat's measurements doubled the session's node
     * array, 0.9 KB an entry): their spare capacity would stay resident all run. */
    ot_graph_shrink(s->g);
    ot_graph_shrink(m->graph);
    if ((st = make_executor(s, err))) goto fail;
    if ((st = host_buffers(s, data, err))) goto fail;
    *out = s;
    return OT_OK;
fail:
    /* Nothing has run: the arena holds the weights as loaded. Copy back the host
     * copies the executor released, so the model is as the caller gave it. */
    if (s->ex && !s->o.keep_host_weights) (void)ot_executor_sync_to_graph(s->ex, NULL);
    ot_train_session_free(s);
    return st;
}

void ot_train_session_free(ot_train_session *s) {
    if (!s) return;
    ot_train_validation_free(s); /* its executor uses s->be */
    ot_train_dist_free(s);       /* so may its device buffers */
    ot_executor_free(s->ex);
    ot_plan_free(s->plan);
    if (s->g) ot_session_give_back(s->m->graph, s->g);
    ot_graph_free(s->g);
    free(s->keep);
    if (s->an_built) ot_remat_analysis_free(&s->an);
    if (s->pol_parsed) ot_remat_policy_free(&s->pol);
    ot_backend_free(s->be);
    if (s->ad_built) ot_autodiff_result_free(&s->ad);
    ot_optim_graph_free(&s->og);
    for (int i = 0; i < s->n_batch; i++) ot_tensor_free(s->batch[i]);
    free(s->batch);
    free(s->batch_value);
    free(s->grad_off);
    free(s->accum_ids);
    free(s->scan_buf);
    free(s->hot_step), free(s->hot_grads), free(s->hot_has), free(s->hot_ss);
    free(s->hot_gemm), free(s->opt_at), free(s->hot_proven), free(s->opt_ss);
    free(s->fuse_check_at), free(s->fuse_ss), free(s->fuse_param_at);
    ot_lora_result_free(&s->lora);
    ot_autocast_result_free(&s->ac);
    free(s->lora_train);
    free(s);
}

ot_status ot_train_check_data(ot_train_session *s, ot_dataset *data, const char *what, ot_error *err) {
    ot_status st = ot_session_map_data(s->g, s->n_model_inputs, s->label_value,
                                       ot_loss_kind_name(s->o.loss.kind), data, what, err);
    /* a KV-cache decoder's cache inputs: the defaults the training data took */
    if (!st) st = ot_kv_add_defaults(s->g, s->n_model_inputs, data, NULL, 0, err);
    if (!st) st = ot_train_check_arrays(s, data, err);
    if (st || s->o.plan_only) return st; /* a plan holds no host batches to share */
    /* batches reuse the training data's host buffers, array by array */
    if (data->n_arrays != s->n_batch)
        return ot_fail(err, OT_E_USAGE, "%s: %d arrays, the training data has %d", what, data->n_arrays, s->n_batch);
    for (int i = 0; i < data->n_arrays; i++)
        if (data->arrays[i].value_id != s->batch_value[i])
            return ot_fail(err, OT_E_USAGE, "%s: give the arrays in the same order as the training data (%s feeds '%s', expected '%s')",
                           what, data->arrays[i].path, vname(s->g, data->arrays[i].value_id), vname(s->g, s->batch_value[i]));
    return OT_OK;
}

int64_t ot_train_batch_size(const ot_train_session *s) { return s->B; }
const ot_plan *ot_train_plan(const ot_train_session *s) { return s->ex ? ot_executor_plan(s->ex) : s->plan; }
const ot_autodiff_result *ot_train_autodiff(const ot_train_session *s) { return &s->ad; }
const ot_autocast_result *ot_train_autocast(const ot_train_session *s) { return &s->ac; }

/* Whether a GEMM or convolution of the step reads bfloat16 (issue 27). */
static bool has_bf16_compute(const ot_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const ot_node *n = &g->nodes[i];
        bool heavy = n->op == OT_OP_MATMUL || n->op == OT_OP_GEMM || n->op == OT_OP_CONV ||
                     n->op == OT_OP_CONV_GRAD_INPUT || n->op == OT_OP_CONV_GRAD_WEIGHT || n->op == OT_OP_CONV_TRANSPOSE;
        if (heavy && n->n_inputs > 0 && n->inputs[0] >= 0 && g->values[n->inputs[0]].dtype == OT_BF16) return true;
    }
    return false;
}

void ot_train_print_constants_note(const ot_train_session *s, FILE *f) {
    if (*s->kv_note) fprintf(f, "%s\n", s->kv_note);
    if (*s->lowp_note) fprintf(f, "%s\n", s->lowp_note);
    const char *bf16 = s->be && s->be->host_memory && has_bf16_compute(s->g) ? ot_cpu_bf16_note() : NULL;
    if (bf16) fprintf(f, "note: %s\n", bf16);
    if (s->ac.low == OT_BF16 || s->ac.low == OT_F16) { /* said once: what --precision bought on this device */
        const char *dt = s->ac.low == OT_BF16 ? "bf16" : "fp16";
        fprintf(f, "precision %s on %s: %d nodes run in %s, %d casts", dt, s->be && s->be->name ? s->be->name : "cpu",
                s->ac.n_low, dt, s->ac.n_casts);
        if (s->ac.n_low_list_fallback)
            fprintf(f, "; %d MatMul/Gemm/Conv/Attention nodes have no %s kernel here and run in float32 (`onnxtrain "
                       "info MODEL --precision %s` lists them)", s->ac.n_low_list_fallback, dt, dt);
        fputc('\n', f);
    }
    if (s->ad_built && s->ad.legacy_pattern)
        fprintf(f, "note: %s '%s' matches no param as a glob, so it was read as a regular expression (the syntax before "
                "globs were the default): write %s 're:%s' to say so\n", s->ad.legacy_option, s->ad.legacy_pattern,
                s->ad.legacy_option, s->ad.legacy_pattern);
    if (!s->ad_built || s->ad.n_rule_constant == 0) return;
    long long elems = 0;
    for (int i = 0; i < s->ad.n_params; i++) elems += ot_shape_numel(&s->g->values[s->ad.params[i]].shape);
    fprintf(f, "training %d params (%lld values); %d float initializers kept constant: see `onnxtrain info`\n",
            s->ad.n_params, elems, s->ad.n_rule_constant);
}
ot_graph *ot_train_graph(ot_train_session *s) { return s->g; }
ot_backend *ot_train_backend(const ot_train_session *s) { return s->be; }
void ot_train_return_weights(ot_train_session *s) {
    if (s->ex && s->o.keep_host_weights) ot_session_give_back(s->m->graph, s->g);
}
size_t ot_train_high_water(const ot_train_session *s) { return s->ex ? ot_executor_high_water(s->ex) : 0; }
int ot_train_high_water_step(const ot_train_session *s) { return s->ex ? ot_executor_high_water_step(s->ex) : -1; }
const ot_optim_config *ot_train_optim(const ot_train_session *s) { return &s->o.optim; }

bool ot_train_loss_flat(const ot_train_result *r, double *first, double *last) {
    int64_t n = r->n_steps - r->first_step, k = n / 5 > 0 ? n / 5 : 1;
    if (n < 2) return false;
    double a = 0, b = 0;
    for (int64_t i = 0; i < k; i++) {
        a += r->loss[r->first_step + i];
        b += r->loss[r->n_steps - k + i];
    }
    *first = a / (double)k;
    *last = b / (double)k;
    /* a loss of 0 (micro-batches whose every label is ignored) has nothing to fall from */
    return *first != 0.0 && !(*last < 0.99 * *first);
}

/* Whether a BatchNormalization node of the step normalises by batch statistics. */
static bool has_training_batchnorm(const ot_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const ot_node *n = &g->nodes[i];
        if (!n->removed && n->op == OT_OP_BATCH_NORM && ot_node_attr_int(n, "training_mode", 0)) return true;
    }
    return false;
}

int64_t ot_train_partial_batch(const ot_train_session *s, int64_t n_samples, const char **dropped_why) {
    const char *why = NULL;
    int64_t tail = s->B > 0 && n_samples > s->B ? n_samples % s->B : 0;
    if (tail == 0) why = NULL;
    else if (s->o.drop_last) why = "--drop-last";
    else if (s->o.loss.kind != OT_LOSS_CROSS_ENTROPY)
        why = "a partial batch runs padded to the planned batch, and only cross-entropy can leave the padding out of "
              "the loss";
    else if (!s->o.loss.has_ignore_index) why = "--ignore-index none leaves no label value to mark the padding with";
    else if (has_training_batchnorm(s->g))
        why = "a partial batch runs padded to the planned batch, and BatchNormalization's batch statistics would "
              "include the padding";
    if (dropped_why) *dropped_why = why;
    return why ? 0 : tail;
}

int64_t ot_train_batches_per_epoch(const ot_train_session *s, int64_t n_samples) {
    return ot_batches_per_epoch(n_samples, s->B, ot_train_partial_batch(s, n_samples, NULL) == 0);
}

int64_t ot_train_total_steps(const ot_train_session *s, const ot_dataset *data) {
    if (s->o.steps > 0) return s->o.steps;
    int64_t per_epoch = ot_train_batches_per_epoch(s, data->n_samples);
    int64_t epochs = s->o.epochs > 0 ? s->o.epochs : 1;
    return epochs * per_epoch / (s->o.accum > 0 ? s->o.accum : 1);
}

const ot_train_remat_summary *ot_train_remat_info(const ot_train_session *s) { return &s->remat; }
const ot_linear_ce_result *ot_train_chunked_loss(const ot_train_session *s) { return &s->lce; }
const ot_fused_attn_result *ot_train_fused_attention(const ot_train_session *s) { return &s->fattn; }

const ot_remat_analysis *ot_train_remat_analysis(const ot_train_session *s, const bool **keep) {
    if (keep) *keep = s->an_built ? s->keep : NULL;
    return s->an_built ? &s->an : NULL;
}

double ot_train_remat_choose_seconds(const ot_train_session *s) { return s->choose_seconds; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ot_status ot_train_step_results(ot_train_session *s, const ot_dataset *data, ot_step_results *r, ot_error *err) {
    memset(r, 0, sizeof *r);
    if (!s->ex) return ot_fail(err, OT_E_INTERNAL, "the session was built to plan only: it cannot run a step");
    ot_status st;
    if (s->with_opt) { /* lr 0, apply 0: the optimizer nodes leave everything as it is */
        double sc[OT_OPT_N_SCALARS] = {0};
        if ((st = ot_executor_write(s->ex, s->og.scalars, sc, sizeof sc, err))) return st;
    }
    double loss = 0, t0 = now_s();
    if ((st = ot_train_grad_once(s, data, &loss, err))) return st;
    double t1 = now_s();
    if ((st = ot_step_results_collect(s->ex, s->g, &s->ad, s->loss_value, r, err))) return st;
    r->seconds = t1 - t0;
    return OT_OK;
}

ot_status ot_train_get_state_update(ot_train_session *s, int i, ot_tensor **out, ot_error *err) {
    if (i < 0 || i >= s->ad.n_state) return ot_fail(err, OT_E_INTERNAL, "state index %d out of range", i);
    if (!s->ex) return ot_fail(err, OT_E_INTERNAL, "the session was built to plan only: nothing has run");
    return ot_executor_get(s->ex, s->ad.state_updates[i], out, err);
}

void ot_train_memory_info(const ot_train_session *s, ot_train_memory_summary *out) {
    *out = (ot_train_memory_summary){.budget = s->budget,
                                     .budget_from_device = s->budget_from_device,
                                     .train_peak = ot_train_plan(s) ? (int64_t)ot_plan_peak_bytes(ot_train_plan(s)) : 0,
                                     .val_peak = s->val_peak,
                                     .val_in_budget = s->val_in_budget};
}

/* ---- the tuned model, from the arena ------------------------------------------------ */

/* A value's bytes where they lie: on the CPU the arena itself, or the session graph's
 * host copy of a value the executor does not hold. NULL: read through copy_out. */
const void *ot_train_arena_host_ptr(void *user, int v) {
    ot_train_session *s = user;
    /* the arena first: a host copy kept (keep_host_weights) holds the weights as loaded */
    if (ot_train_lowp_dtype(s, v) != OT_F32) return NULL; /* a master weight, rounded as read */
    const void *p = ot_executor_value_ptr(s->ex, v);
    if (p) return s->be->host_memory ? p : NULL;
    return s->g->values[v].data;
}

ot_status ot_train_arena_read(void *user, int v, uint64_t offset, void *dst, size_t n, ot_error *err) {
    ot_train_session *s = user;
    const char *p = ot_executor_value_ptr(s->ex, v);
    if (!p || offset + n > ot_executor_plan(s->ex)->values[v].nbytes)
        return ot_fail(err, OT_E_INTERNAL, "'%s' is not held by the training executor: nothing to write",
                       vname(s->g, v));
    return s->be->copy_out(s->be, dst, p + offset, n, err);
}

/* The streamed save's read: a low model's master weights in the model's dtype. */
static ot_status save_read(void *user, int v, uint64_t offset, void *dst, size_t n, ot_error *err) {
    ot_train_session *s = user;
    if (ot_train_lowp_dtype(s, v) != OT_F32) return ot_train_lowp_read(s, v, offset, dst, n, err);
    return ot_train_arena_read(user, v, offset, dst, n, err);
}

ot_status ot_train_save_model(ot_train_session *s, const char *path, bool external_data, ot_error *err) {
    if (!s->ex) return ot_fail(err, OT_E_INTERNAL, "the session was built to plan only: it holds no weights");
    if (s->lora.n) return ot_train_lora_save_merged(s, path, external_data, err);
    ot_export_source src = {.host_ptr = ot_train_arena_host_ptr, .read = save_read, .user = s};
    ot_export_options eo = {.external_data = external_data, .source = &src};
    return ot_model_save_ex(s->m, path, &eo, err);
}
