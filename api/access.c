/* access.c — the public API over a session's state (include/onnxtrain.h): params by
 * name (the import's before the session is built, the executor's after), the plan's
 * report, verify (remat against none, as `onnxtrain verify`), checkpoints and the
 * tuned model. Every call goes through train/: nothing here trains. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "train/step_results.h"

/* ---- params ------------------------------------------------------------------- */

/* The graph params live in now and the i-th param or running statistic of it (-1:
 * none): the training graph's trained params then its state once built, else every
 * param and state value of the import. */
static const ot_graph *param_graph(const onnxtrain_session *s) { return s->ts ? ot_train_graph(s->ts) : s->m->graph; }

static int param_value(const onnxtrain_session *s, int i) {
    if (i < 0) return -1;
    if (s->ts) {
        const ot_autodiff_result *ad = ot_train_autodiff(s->ts);
        if (i < ad->n_params) return ad->params[i];
        return i - ad->n_params < ad->n_state ? ad->state_values[i - ad->n_params] : -1;
    }
    const ot_graph *g = s->m->graph;
    for (int v = 0; v < g->n_values; v++)
        if ((g->values[v].kind == OT_VK_PARAM || g->values[v].kind == OT_VK_STATE) && i-- == 0) return v;
    return -1;
}

static int param_count(const onnxtrain_session *s) {
    int n = 0;
    while (param_value(s, n) >= 0) n++;
    return n;
}

/* The value id of param `name`, or an error naming it; for reading, once built, any
 * initializer of the model file as well. */
static ot_status find_param(const onnxtrain_session *s, const char *fn, const char *name, bool for_write, int *v,
                            ot_error *err) {
    if (!name) return ot_fail(err, OT_E_USAGE, "%s: name is NULL", fn);
    int n = param_count(s);
    for (int i = 0; i < n; i++) {
        int id = param_value(s, i);
        const char *vn = param_graph(s)->values[id].name;
        if (vn && !strcmp(vn, name)) {
            *v = id;
            return OT_OK;
        }
    }
    /* a frozen initializer of the file (--freeze, LoRA's base weights) can be read too */
    const ot_graph *g = param_graph(s);
    int id = s->ts && !for_write ? ot_graph_find_value(g, name) : -1;
    if (id >= 0 && g->values[id].init_index >= 0) {
        *v = id;
        return OT_OK;
    }
    return ot_fail(err, OT_E_USAGE, "%s: no %s named '%s' (%d trained params and running statistics in the session: "
                   "onnxtrain_param_name lists them)", fn, for_write ? "param or running statistic" : "initializer",
                   name, n);
}

int onnxtrain_param_count(onnxtrain_session *s) {
    ot_error err = {0};
    ot_status st = api_enter(s, "onnxtrain_param_count", &err);
    if (st) return api_result(st, &err), -1;
    int n = param_count(s);
    api_leave(s);
    return n;
}

const char *onnxtrain_param_name(onnxtrain_session *s, int i) {
    ot_error err = {0};
    ot_status st = api_enter(s, "onnxtrain_param_name", &err);
    if (st) return api_result(st, &err), NULL;
    int v = param_value(s, i);
    const char *name = v >= 0 ? param_graph(s)->values[v].name : NULL;
    if (v < 0) api_result(ot_fail(&err, OT_E_USAGE, "onnxtrain_param_name: index %d out of range", i), &err);
    api_leave(s);
    return name;
}

onnxtrain_status onnxtrain_param_info(onnxtrain_session *s, const char *name, onnxtrain_dtype *dtype, int *rank,
                                      int64_t *shape) {
    ot_error err = {0};
    int v = -1;
    ot_status st = api_enter(s, "onnxtrain_param_info", &err);
    if (st) return api_result(st, &err);
    if (!(st = find_param(s, "onnxtrain_param_info", name, false, &v, &err))) {
        const ot_value *val = &param_graph(s)->values[v];
        if (dtype) *dtype = (onnxtrain_dtype)val->dtype;
        if (rank) *rank = val->shape.rank;
        for (int k = 0; shape && k < val->shape.rank; k++) shape[k] = val->shape.dim[k];
    }
    api_leave(s);
    return api_result(st, &err);
}

static size_t value_bytes(const ot_value *val) {
    int64_t n = ot_shape_numel(&val->shape);
    return n < 0 ? 0 : (size_t)n * ot_dtype_size(val->dtype);
}

onnxtrain_status onnxtrain_param_read(onnxtrain_session *s, const char *name, void *dst, size_t dst_bytes) {
    ot_error err = {0};
    const char *fn = "onnxtrain_param_read";
    int v = -1;
    ot_status st = api_enter(s, fn, &err);
    if (st) return api_result(st, &err);
    if (!(st = find_param(s, fn, name, false, &v, &err))) {
        const ot_value *val = &param_graph(s)->values[v];
        size_t need = value_bytes(val);
        if (!dst) st = ot_fail(&err, OT_E_USAGE, "%s: dst is NULL", fn);
        else if (dst_bytes < need)
            st = ot_fail(&err, OT_E_USAGE, "%s: dst_bytes %zu, '%s' needs %zu", fn, dst_bytes, name, need);
        else if (!s->ts) {
            if (!val->data || val->nbytes != need)
                st = ot_fail(&err, OT_E_INTERNAL, "%s: '%s' holds no data in the model", fn, name);
            else memcpy(dst, val->data, need);
        } else {
            ot_tensor *t = NULL;
            if (!(st = ot_train_get_value(s->ts, v, &t, &err))) memcpy(dst, t->data, need < t->nbytes ? need : t->nbytes);
            ot_tensor_free(t);
        }
    }
    api_leave(s);
    return api_result(st, &err);
}

onnxtrain_status onnxtrain_param_write(onnxtrain_session *s, const char *name, const void *src, size_t nbytes) {
    ot_error err = {0};
    const char *fn = "onnxtrain_param_write";
    int v = -1;
    ot_status st = api_enter(s, fn, &err);
    if (st) return api_result(st, &err);
    if (!(st = find_param(s, fn, name, true, &v, &err))) {
        ot_value *val = &((ot_graph *)param_graph(s))->values[v];
        size_t need = value_bytes(val);
        if (!src) st = ot_fail(&err, OT_E_USAGE, "%s: src is NULL", fn);
        else if (nbytes != need)
            st = ot_fail(&err, OT_E_USAGE, "%s: nbytes %zu, '%s' holds %zu", fn, nbytes, name, need);
        else if (s->ts) st = ot_train_set_value(s->ts, v, src, nbytes, &err);
        else if (!val->data || val->nbytes != need)
            st = ot_fail(&err, OT_E_INTERNAL, "%s: '%s' holds no data in the model", fn, name);
        else memcpy(val->data, src, need);
    }
    api_leave(s);
    return api_result(st, &err);
}

/* ---- plan --------------------------------------------------------------------- */

void onnxtrain_plan_report_init(onnxtrain_plan_report *r) {
    if (!r) return;
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;
}

const char *onnxtrain_memory_category_name(int i) {
    return i >= 0 && i < OT_MEM_COUNT ? ot_mem_category_name((ot_mem_category)i) : NULL;
}

_Static_assert(ONNXTRAIN_MEM_CATEGORIES == OT_MEM_COUNT, "the public category count is the planner's");

onnxtrain_status onnxtrain_plan(onnxtrain_session *s, onnxtrain_plan_report *r) {
    ot_error err = {0};
    const char *fn = "onnxtrain_plan";
    ot_status st = api_enter(s, fn, &err);
    if (st) return api_result(st, &err);
    if (!r || r->struct_size < sizeof *r)
        st = ot_fail(&err, OT_E_USAGE, "%s: report is NULL or not initialised (onnxtrain_plan_report_init)", fn);
    else if (!s->ts)
        st = ot_fail(&err, OT_E_USAGE, "%s: the session is not built yet: call onnxtrain_prepare (or a step) with a "
                     "batch first", fn);
    if (!st) {
        const ot_plan *p = ot_train_plan(s->ts);
        const ot_autodiff_result *ad = ot_train_autodiff(s->ts);
        const ot_train_remat_summary *rs = ot_train_remat_info(s->ts);
        onnxtrain_plan_report out;
        onnxtrain_plan_report_init(&out);
        out.batch_size = ot_train_batch_size(s->ts);
        out.accum = s->o.accum;
        out.n_params = ad->n_params;
        for (int i = 0; i < ad->n_params; i++)
            out.param_elements += ot_shape_numel(&ot_train_graph(s->ts)->values[ad->params[i]].shape);
        out.peak_bytes = ot_plan_peak_bytes(p);
        out.peak_without_remat = rs->applied ? (uint64_t)rs->peak_none : out.peak_bytes;
        for (int c = 0; c < OT_MEM_COUNT; c++) {
            out.at_peak[c] = p->at_peak[c];
            out.total[c] = p->total[c];
        }
        *r = out;
    }
    api_leave(s);
    return api_result(st, &err);
}

/* ---- verify ------------------------------------------------------------------- */

/* One step under `policy` on the import's weights (borrowed and given back, so the
 * other step starts from the same ones), as `onnxtrain verify` runs it. */
static ot_status verify_step(onnxtrain_session *s, api_batch *b, const char *policy, ot_step_results *r,
                             ot_error *err) {
    ot_train_options o;
    ot_status st = api_train_options(s, b, &o, err);
    if (st) return st;
    o.remat = policy;
    if (!strcmp(policy, "none")) o.memory_budget = 0; /* the budget is the policy's, not the reference's */
    o.keep_host_weights = true;
    o.no_numerics_check = true; /* a NaN is compared like any other bits */
    o.fuse_update = false;      /* the gradients are read after the step (a fused one is freed at its update) */
    o.stream_save = false;
    ot_train_session *ts = NULL;
    if (!(st = ot_train_session_new(s->m, &o, &b->d, true, &ts, err))) st = ot_train_step_results(ts, &b->d, r, err);
    ot_train_session_free(ts);
    return st;
}

onnxtrain_status onnxtrain_verify(onnxtrain_session *s, const onnxtrain_tensor *inputs, int n_inputs,
                                  const onnxtrain_tensor *labels, int *n_different) {
    ot_error err = {0};
    const char *fn = "onnxtrain_verify";
    api_batch b = {0};
    ot_step_results r0 = {0}, r1 = {0};
    ot_status st = api_enter(s, fn, &err);
    if (st) return api_result(st, &err);
    const char *policy = s->o.remat ? s->o.remat : "none";
    if (s->ts)
        st = ot_fail(&err, OT_E_USAGE, "%s: the session is built (a step, eval or prepare ran): verify runs on the "
                     "weights as loaded, before any of them", fn);
    if (!st && (st = api_batch_make(inputs, n_inputs, labels, &b, &err))) ot_error_prefix(&err, "%s: ", fn);
    if (!st) st = verify_step(s, &b, "none", &r0, &err);
    if (!st) st = verify_step(s, &b, policy, &r1, &err);
    if (!st && r0.n != r1.n) st = ot_fail(&err, OT_E_INTERNAL, "%s: %d results without remat, %d with", fn, r0.n, r1.n);
    if (!st) {
        int n_diff = 0;
        const char *first = NULL;
        for (int i = 0; i < r0.n; i++) {
            bool eq = false;
            ot_tensor_bitwise_diff(r0.tensors[i], r1.tensors[i], &eq);
            if (!eq && !n_diff++) first = r0.names[i];
        }
        if (n_different) *n_different = n_diff;
        if (n_diff)
            st = ot_fail(&err, OT_E_MISMATCH, "%s: %d of %d tensors differ between remat none and %s (first: %s)", fn,
                         n_diff, r0.n, policy, first);
    }
    ot_step_results_free(&r0);
    ot_step_results_free(&r1);
    api_batch_free(&b);
    api_leave(s);
    return api_result(st, &err);
}

/* ---- checkpoints and the tuned model ------------------------------------------ */

onnxtrain_status onnxtrain_checkpoint_save(onnxtrain_session *s, const char *path) {
    ot_error err = {0};
    const char *fn = "onnxtrain_checkpoint_save";
    ot_status st = api_enter(s, fn, &err);
    if (st) return api_result(st, &err);
    if (!path || !path[0]) st = ot_fail(&err, OT_E_USAGE, "%s: path is NULL or empty", fn);
    else if (!s->ts) st = ot_fail(&err, OT_E_USAGE, "%s: the session is not built yet: nothing trained to save", fn);
    if (!st) {
        /* the settings record a step's sample count (accum x batch): what the API feeds */
        ot_dataset d = {.n_samples = ot_train_batch_size(s->ts) * s->o.accum};
        ot_checkpoint c = {0};
        if (!(st = ot_train_checkpoint_capture(s->ts, &d, s->step, &c, &err))) st = ot_checkpoint_write(&c, path, &err);
        ot_checkpoint_free(&c);
    }
    api_leave(s);
    return api_result(st, &err);
}

onnxtrain_status onnxtrain_checkpoint_load(onnxtrain_session *s, const char *path) {
    ot_error err = {0};
    const char *fn = "onnxtrain_checkpoint_load";
    ot_status st = api_enter(s, fn, &err);
    if (st) return api_result(st, &err);
    ot_checkpoint c = {0};
    char chosen[4096] = "";
    if (!path || !path[0]) st = ot_fail(&err, OT_E_USAGE, "%s: path is NULL or empty", fn);
    if (!st) st = ot_checkpoint_load_latest(path, &c, chosen, sizeof chosen, NULL, &err);
    if (!st && s->ts) {
        ot_dataset d = {.n_samples = ot_train_batch_size(s->ts) * s->o.accum};
        if (!(st = ot_train_checkpoint_restore(s->ts, &d, &c, chosen, &err))) s->step = c.step;
        ot_checkpoint_free(&c);
    } else if (!st) { /* restored when the session is built for the first batch */
        ot_checkpoint_free(&s->resume);
        s->resume = c;
        s->has_resume = true;
        snprintf(s->resume_path, sizeof s->resume_path, "%s", chosen);
    }
    api_leave(s);
    return api_result(st, &err);
}

onnxtrain_status onnxtrain_save_adapters(onnxtrain_session *s, const char *path) {
    ot_error err = {0};
    const char *fn = "onnxtrain_save_adapters";
    ot_status st = api_enter(s, fn, &err);
    if (st) return api_result(st, &err);
    if (!path || !path[0]) st = ot_fail(&err, OT_E_USAGE, "%s: path is NULL or empty", fn);
    else if (!s->ts) st = ot_fail(&err, OT_E_USAGE, "%s: the session is not built yet (train a step first)", fn);
    else st = ot_train_save_adapters(s->ts, path, &err);
    api_leave(s);
    return api_result(st, &err);
}

onnxtrain_status onnxtrain_save_model(onnxtrain_session *s, const char *path, int external_data) {
    ot_error err = {0};
    const char *fn = "onnxtrain_save_model";
    ot_status st = api_enter(s, fn, &err);
    if (st) return api_result(st, &err);
    if (!path || !path[0]) st = ot_fail(&err, OT_E_USAGE, "%s: path is NULL or empty", fn);
    else if (s->ts) st = ot_train_save_model(s->ts, path, external_data != 0, &err);
    else {
        ot_export_options eo = {.external_data = external_data != 0};
        st = ot_model_save_ex(s->m, path, &eo, &err);
    }
    api_leave(s);
    return api_result(st, &err);
}
