/* executor.c — schedule + plan + one arena, node by node on a backend (see
 * executor.h). Tensor descriptors for every step are built once at creation so a
 * run does no allocation at all. */
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "exec/executor.h"
#include "plan/schedule.h"

struct ot_executor {
    ot_graph *g;
    ot_backend *be;
    ot_exec_options opt;
    int *order;
    int n_steps;
    ot_plan *plan;
    char *base;      /* arena (device pointer) */
    void **ext;      /* per value: its external memory when bound (opt.bind), else NULL */
    size_t high_water;
    int high_water_step; /* the schedule step whose tensors first reached high_water; -1: none or a copy outside a step */
    int touching;        /* the step touch_step is measuring; -1 outside one */
    bool measured;   /* a whole run is done: every run touches the same arena bytes, so the next cannot raise high_water */
    /* per step: tensors of inputs then outputs in `tensors`, starting at tstart[s] */
    ot_tensor *tensors;
    int *tstart;
    int *rng_node;
    bool *views_only; /* per step: every output aliases its input (planner.h, Views): no kernel runs */
    bool *input_set; /* per value: fed since creation (graph inputs only) */
    bool *released;  /* per value: its host copy in g was freed (opt.release_host_data) */
    ot_tensor *scratch; /* the copies of one step's descriptors handed to a kernel */
    /* per step: how many consecutive steps from it run the same optimizer op (0 for
     * any other node), and every step's node and input descriptors, for a kernel that
     * updates such a run in one pass (kernel_ctx.h, run_len) */
    int *run_len;
    const ot_node **step_node;
    const ot_tensor **step_in;
    ot_update_check upd; /* what the optimizer kernels of this run reported (kernel_ctx.h) */
    void **node_state; /* per step: the kernel's slot across runs (kernel_ctx.h); NULL until first run */
    double *grad_ss;   /* per step: where optimizer kernels store gradient sums (kernel_ctx.h); the caller's, or NULL */
};

static const char *nname(const ot_node *nd) { return nd->name && *nd->name ? nd->name : "?"; }
static const char *vname(const ot_graph *g, int v) { return g->values[v].name ? g->values[v].name : "?"; }

static void touch(ot_executor *ex, const void *p, size_t n) {
    if (!p || n == 0) return;
    size_t end = (size_t)((const char *)p - ex->base) + n;
    if (end > ex->high_water) {
        ex->high_water = end;
        ex->high_water_step = ex->touching;
    }
}

/* Device address of value v: its arena slot, or the memory it (or, for a view, its
 * base) is bound to; NULL when not placed (or before the arena exists). */
static char *value_addr(const ot_executor *ex, int v) {
    if (!ex->base || v < 0 || v >= ex->g->n_values) return NULL;
    const ot_plan_value *pv = &ex->plan->values[v];
    if (pv->alias_of >= 0 && ex->plan->values[pv->alias_of].external)
        return ex->ext[pv->alias_of] ? (char *)ex->ext[pv->alias_of] + pv->alias_offset : NULL;
    if (pv->external) return ex->ext[v];
    return pv->offset >= 0 ? ex->base + pv->offset : NULL;
}

/* In memory outside the arena: bound, or a view of a bound value. */
static bool is_external(const ot_executor *ex, int v) {
    if (v < 0 || v >= ex->g->n_values) return false;
    const ot_plan_value *pv = &ex->plan->values[v];
    return pv->external || (pv->alias_of >= 0 && ex->plan->values[pv->alias_of].external);
}

/* A step whose outputs all alias their inputs has nothing to compute or copy. */
static bool views_only(const ot_executor *ex, const ot_node *nd) {
    int n = 0;
    for (int k = 0; k < nd->n_outputs; k++) {
        int o = nd->outputs[k];
        if (o < 0) continue;
        if (ex->plan->values[o].alias_of < 0) return false;
        n++;
    }
    return n > 0;
}

/* Descriptor of value v: dtype, shape, and its address (NULL when not placed). */
static void fill_tensor(ot_executor *ex, int v, ot_tensor *t) {
    memset(t, 0, sizeof *t);
    if (v < 0 || v >= ex->g->n_values) return;
    const ot_value *val = &ex->g->values[v];
    t->dtype = val->dtype;
    t->shape = val->shape;
    t->nbytes = ot_plan_value_bytes(ex->plan, v);
    t->data = value_addr(ex, v);
}

/* The bindings against the plan (the one source of sizes): every bound value the
 * graph reads is external memory of exactly its planned size. */
static ot_status check_bindings(ot_executor *ex, const ot_exec_binding *b, int n, ot_error *err) {
    ot_status st = OT_OK;
    bool *seen = calloc((size_t)ex->g->n_values + 1, sizeof *seen);
    if (!seen) return ot_fail(err, OT_E_MEMORY, "executor: out of memory");
    for (int k = 0; k < n && !st; k++) {
        int v = b[k].value_id;
        const ot_plan_value *pv = &ex->plan->values[v];
        if (seen[v])
            st = ot_fail(err, OT_E_USAGE, "executor: value '%s' is bound to external memory twice", vname(ex->g, v));
        else if (pv->external && (b[k].nbytes != pv->nbytes || (pv->nbytes && !b[k].data)))
            st = ot_fail(err, OT_E_USAGE, "executor: value '%s' is bound to %zu bytes at %p, but it needs %zu",
                         vname(ex->g, v), b[k].nbytes, b[k].data, pv->nbytes);
        seen[v] = true;
        if (pv->external) ex->ext[v] = b[k].data;
    }
    free(seen);
    return st;
}

static void append(char *buf, size_t cap, size_t *len, const char *s) {
    size_t n = strlen(s);
    if (*len + n + 1 > cap) return;
    memcpy(buf + *len, s, n + 1);
    *len += n;
}

/* Checks every scheduled node against the backend; lists all unsupported ones. */
static ot_status check_support(ot_executor *ex, ot_error *err) {
    int bad = 0;
    char list[900] = "";
    size_t len = 0;
    int shown = 0;
    for (int s = 0; s < ex->n_steps; s++) {
        const ot_node *nd = &ex->g->nodes[ex->order[s]];
        ot_tensor *t = &ex->tensors[ex->tstart[s]];
        if (ex->views_only[s]) continue; /* runs no kernel */
        if (nd->op != OT_OP_UNKNOWN && ex->be->supports(ex->be, nd, t, t + nd->n_inputs)) continue;
        bad++;
        char item[200];
        const char *dt = "";
        if (nd->n_inputs > 0 && t[0].dtype != OT_UNDEFINED) dt = ot_dtype_name(t[0].dtype);
        snprintf(item, sizeof item, "%s'%s' (%s%s%s)", bad > 1 ? ", " : "", nname(nd),
                 nd->op_type ? nd->op_type : ot_op_name(nd->op), *dt ? " on " : "", dt);
        if (len + strlen(item) + 32 < sizeof list) {
            append(list, sizeof list, &len, item);
            shown++;
        }
    }
    if (!bad) return OT_OK;
    if (shown < bad) {
        char more[48];
        snprintf(more, sizeof more, ", and %d more", bad - shown);
        append(list, sizeof list, &len, more);
    }
    return ot_fail(err, OT_E_UNSUPPORTED, "the %s backend has no kernel for %d node%s: %s", ex->be->name, bad,
                   bad == 1 ? "" : "s", list);
}

/* Runs of optimizer nodes: consecutive steps with one optimizer op (SgdStep, ...),
 * none of them a view or with a workspace, on a backend whose tensors are host
 * memory (a device's CPU-only fallback copies one node's tensors to the host, not
 * its run's: there the descriptors would point at device memory). Only nodes the
 * optimizer appends run there, after every read of the params they update, each on
 * its own param and state, so running a run's updates in one pass at its first step
 * reads and writes what the steps one by one would. */
static ot_status build_runs(ot_executor *ex, ot_error *err) {
    int n = ex->n_steps;
    ex->run_len = calloc((size_t)n + 1, sizeof *ex->run_len);
    ex->step_node = calloc((size_t)n + 1, sizeof *ex->step_node);
    ex->step_in = calloc((size_t)n + 1, sizeof *ex->step_in);
    if (!ex->run_len || !ex->step_node || !ex->step_in) return ot_fail(err, OT_E_MEMORY, "executor: out of memory");
    for (int s = n - 1; s >= 0; s--) {
        const ot_node *nd = &ex->g->nodes[ex->order[s]];
        ex->step_node[s] = nd;
        ex->step_in[s] = &ex->tensors[ex->tstart[s]];
        if (!ex->be->host_memory || !ot_op_has(nd->op, OT_T_OPTIMIZER) || ex->views_only[s] || ex->plan->ws_offset[s] >= 0)
            continue;
        bool same = s + 1 < n && ex->run_len[s + 1] > 0 && ex->g->nodes[ex->order[s + 1]].op == nd->op;
        ex->run_len[s] = same ? ex->run_len[s + 1] + 1 : 1;
    }
    return OT_OK;
}

/* A creation that fails after freeing some host copies puts them back from the
 * arena (where they were loaded unchanged), so a failed ot_executor_new leaves g as
 * it found it. Best effort: without memory a value stays without data. */
static void restore_released(ot_executor *ex) {
    if (!ex->released || !ex->base) return;
    for (int v = 0; v < ex->g->n_values; v++) {
        if (!ex->released[v]) continue;
        ot_value *val = &ex->g->values[v];
        size_t n = ex->plan->values[v].nbytes;
        void *buf = malloc(n ? n : 1);
        ot_error ignored = {0};
        if (!buf) continue;
        if (ex->be->copy_out(ex->be, buf, ex->base + ex->plan->values[v].offset, n, &ignored)) {
            free(buf);
            continue;
        }
        val->data = buf;
        ex->released[v] = false;
    }
}

/* The order and the plan, with the planner options the executor's options give
 * (no_inplace, the bound values, the target). With a target the order is judged
 * under it, as remat's measure judged the plan it accepted (remat/auto.c); without
 * one, as always. */
static ot_status schedule_and_plan(ot_executor *ex, const int *ext_ids, int n_bind, ot_error *err) {
    ot_plan_options popt = {.no_inplace = ex->opt.no_inplace, .external = ext_ids, .n_external = n_bind,
                            .fit_target_bytes = ex->opt.fit_target_bytes};
    ot_plan_device dev = ot_backend_plan_device(ex->be);
    ot_status st;
    if (ex->opt.fit_target_bytes) {
        ot_plan_options topt = {.fit_target_bytes = ex->opt.fit_target_bytes};
        ot_plan *judged = NULL;
        st = ot_schedule_plan_opts(ex->g, &dev, &topt, NULL, &ex->order, &ex->n_steps, &judged, err);
        ot_plan_free(judged);
    } else
        st = ot_schedule_build(ex->g, &ex->order, &ex->n_steps, err);
    if (st) return st;
    return ot_plan_build_opts(ex->g, ex->order, ex->n_steps, &dev, &popt, &ex->plan, err);
}

ot_status ot_executor_new(ot_graph *g, ot_backend *be, const ot_exec_options *opt, ot_executor **out,
                          ot_error *err) {
    ot_status st = OT_OK;
    *out = NULL;
    if ((st = ot_graph_resolve_params(g, err))) return st; /* after every pass that adds or copies nodes */
    ot_executor *ex = calloc(1, sizeof *ex);
    if (!ex) return ot_fail(err, OT_E_MEMORY, "executor: out of memory");
    ex->g = g;
    ex->be = be;
    ex->high_water_step = ex->touching = -1;
    if (opt) ex->opt = *opt;
    const ot_exec_binding *bind = ex->opt.bind;
    int n_bind = bind ? ex->opt.n_bind : 0;
    ex->opt.bind = NULL; /* the caller's array need not outlive this call */
    ex->opt.n_bind = 0;
    int *ext_ids = malloc(sizeof(int) * (size_t)(n_bind + 1));
    ex->ext = calloc((size_t)g->n_values + 1, sizeof *ex->ext);
    if (!ext_ids || !ex->ext) {
        free(ext_ids);
        goto oom;
    }
    for (int k = 0; k < n_bind; k++) ext_ids[k] = bind[k].value_id;
    st = schedule_and_plan(ex, ext_ids, n_bind, err);
    free(ext_ids);
    if (st || (st = check_bindings(ex, bind, n_bind, err))) goto fail;

    int n_t = 0;
    ex->tstart = malloc(sizeof(int) * (size_t)(ex->n_steps + 1));
    ex->rng_node = malloc(sizeof(int) * (size_t)(ex->n_steps + 1));
    ex->input_set = calloc((size_t)g->n_values + 1, sizeof(bool));
    ex->released = calloc((size_t)g->n_values + 1, sizeof(bool));
    ex->views_only = calloc((size_t)ex->n_steps + 1, sizeof(bool));
    ex->node_state = calloc((size_t)ex->n_steps + 1, sizeof(void *));
    if (!ex->tstart || !ex->rng_node || !ex->input_set || !ex->released || !ex->views_only || !ex->node_state) goto oom;
    for (int s = 0; s < ex->n_steps; s++) {
        const ot_node *nd = &g->nodes[ex->order[s]];
        ex->views_only[s] = views_only(ex, nd);
        ex->tstart[s] = n_t;
        n_t += nd->n_inputs + nd->n_outputs;
        int rng = nd->orig_node >= 0 ? nd->orig_node : nd->id;
        ex->rng_node[s] = (int)ot_node_attr_int(nd, "rng_node", rng);
    }
    ex->tstart[ex->n_steps] = n_t;
    ex->tensors = calloc((size_t)n_t + 1, sizeof(ot_tensor));
    ex->scratch = calloc((size_t)n_t + 1, sizeof(ot_tensor));
    if (!ex->tensors || !ex->scratch) goto oom;
    /* Descriptors without data first: the support check needs only dtypes and shapes. */
    for (int s = 0; s < ex->n_steps; s++) {
        const ot_node *nd = &g->nodes[ex->order[s]];
        ot_tensor *t = &ex->tensors[ex->tstart[s]];
        for (int k = 0; k < nd->n_inputs; k++) fill_tensor(ex, nd->inputs[k], &t[k]);
        for (int k = 0; k < nd->n_outputs; k++) fill_tensor(ex, nd->outputs[k], &t[nd->n_inputs + k]);
    }
    if ((st = check_support(ex, err))) goto fail;

    void *base = NULL;
    if ((st = be->arena_alloc(be, ot_plan_peak_bytes(ex->plan), &base, err))) goto fail;
    ex->base = base;
    for (int s = 0; s < ex->n_steps; s++) {
        const ot_node *nd = &g->nodes[ex->order[s]];
        ot_tensor *t = &ex->tensors[ex->tstart[s]];
        for (int k = 0; k < nd->n_inputs; k++) fill_tensor(ex, nd->inputs[k], &t[k]);
        for (int k = 0; k < nd->n_outputs; k++) fill_tensor(ex, nd->outputs[k], &t[nd->n_inputs + k]);
    }
    if ((st = build_runs(ex, err))) goto fail;

    /* Load everything that carries data: params, state, constants. */
    bool any_released = false;
    for (int v = 0; v < g->n_values; v++) {
        const ot_value *val = &g->values[v];
        const ot_plan_value *pv = &ex->plan->values[v];
        if (pv->offset < 0 || !pv->pinned || pv->external) continue; /* external: its owner's data */
        bool needs_data = val->kind == OT_VK_PARAM || val->kind == OT_VK_STATE || val->kind == OT_VK_CONSTANT ||
                          (val->producer < 0 && val->data);
        if (!needs_data) continue;
        if (!val->data && pv->nbytes > 0) {
            st = ot_fail(err, OT_E_MODEL, "executor: %s '%s' has no data", ot_value_kind_name(val->kind), vname(g, v));
            goto fail;
        }
        if (val->nbytes != pv->nbytes) {
            st = ot_fail(err, OT_E_MODEL, "executor: %s '%s' holds %zu bytes but its dtype and shape need %zu",
                         ot_value_kind_name(val->kind), vname(g, v), val->nbytes, pv->nbytes);
            goto fail;
        }
        if (pv->nbytes == 0) continue;
        if ((st = be->copy_in(be, ex->base + pv->offset, val->data, pv->nbytes, err))) goto fail;
        touch(ex, ex->base + pv->offset, pv->nbytes);
        if (ex->opt.release_host_data && (val->kind == OT_VK_PARAM || val->kind == OT_VK_STATE)) {
            /* One at a time, right after its copy: with an arena whose pages appear
             * as they are first written (the CPU backend's), the load then never
             * holds a weight twice. nbytes stays: sync_to_graph sizes by the plan. */
            ot_value *w = &g->values[v];
            free(w->data);
            w->data = NULL;
            ex->released[v] = true;
            any_released = true;
        }
    }
#ifdef __GLIBC__
    /* glibc raises its mmap threshold as blocks are freed, so many weights (up to
     * 32 MiB each) were allocated from the heap, and freeing them leaves their pages
     * resident until something reuses them. Hand them back now. */
    if (any_released) malloc_trim(0);
#endif
    *out = ex;
    return OT_OK;
oom:
    st = ot_fail(err, OT_E_MEMORY, "executor: out of memory");
fail:
    restore_released(ex);
    ot_executor_free(ex);
    return st;
}

/* Kernels' per-node state goes back through the backend that made it. */
static void free_node_states(ot_executor *ex) {
    if (!ex->node_state) return;
    for (int s = 0; s < ex->n_steps; s++)
        if (ex->node_state[s] && ex->be->free_node_state) ex->be->free_node_state(ex->be, ex->node_state[s]);
    free(ex->node_state);
}

void ot_executor_free(ot_executor *ex) {
    if (!ex) return;
    if (ex->base) ex->be->arena_free(ex->be, ex->base);
    ot_plan_free(ex->plan);
    free(ex->ext);
    free(ex->order);
    free(ex->tensors);
    free(ex->tstart);
    free(ex->rng_node);
    free(ex->views_only);
    free(ex->input_set);
    free(ex->released);
    free(ex->scratch);
    free(ex->run_len);
    free(ex->step_node);
    free(ex->step_in);
    free_node_states(ex);
    free(ex);
}

static bool is_graph_input(const ot_graph *g, int v) {
    if (g->values[v].kind == OT_VK_INPUT) return true;
    for (int k = 0; k < g->n_inputs; k++)
        if (g->inputs[k] == v) return true;
    return false;
}

ot_status ot_executor_set_input(ot_executor *ex, int v, const ot_tensor *t, ot_error *err) {
    const ot_graph *g = ex->g;
    if (v < 0 || v >= g->n_values || !is_graph_input(g, v))
        return ot_fail(err, OT_E_USAGE, "executor: value %d is not a graph input", v);
    const ot_value *val = &g->values[v];
    const ot_plan_value *pv = &ex->plan->values[v];
    if (pv->external)
        return ot_fail(err, OT_E_USAGE, "executor: input '%s' is bound to external memory; its owner writes it", vname(g, v));
    if (pv->offset < 0) return ot_fail(err, OT_E_INTERNAL, "executor: input '%s' was not placed", vname(g, v));
    if (t->dtype != val->dtype || !ot_shape_equal(&t->shape, &val->shape) || t->shape.rank != val->shape.rank) {
        char want[160], got[160];
        ot_shape_str(g, &val->shape, want, sizeof want);
        ot_shape_str(NULL, &t->shape, got, sizeof got);
        return ot_fail(err, OT_E_DATA, "input '%s': expected %s %s, got %s %s", vname(g, v), ot_dtype_name(val->dtype),
                       want, ot_dtype_name(t->dtype), got);
    }
    if (t->nbytes < pv->nbytes || (pv->nbytes && !t->data))
        return ot_fail(err, OT_E_DATA, "input '%s': tensor holds %zu bytes, expected %zu", vname(g, v), t->nbytes,
                       pv->nbytes);
    if (pv->nbytes) {
        ot_status st = ex->be->copy_in(ex->be, ex->base + pv->offset, t->data, pv->nbytes, err);
        if (st) return st;
        touch(ex, ex->base + pv->offset, pv->nbytes);
    }
    ex->input_set[v] = true;
    return OT_OK;
}

ot_status ot_executor_set_input_by_name(ot_executor *ex, const char *name, const ot_tensor *t, ot_error *err) {
    int v = ot_graph_find_value(ex->g, name);
    if (v < 0 || !is_graph_input(ex->g, v)) return ot_fail(err, OT_E_USAGE, "executor: the model has no input named '%s'", name);
    return ot_executor_set_input(ex, v, t, err);
}

static ot_status check_inputs_set(const ot_executor *ex, ot_error *err) {
    const ot_graph *g = ex->g;
    for (int v = 0; v < g->n_values; v++)
        if (ex->plan->values[v].offset >= 0 && g->values[v].kind == OT_VK_INPUT && g->values[v].producer < 0 &&
            !ex->input_set[v])
            return ot_fail(err, OT_E_DATA, "input '%s' was not set before the run", vname(g, v));
    return OT_OK;
}

/* Measures step s's arena use (its workspace and tensors). */
static void touch_step(ot_executor *ex, int s) {
    const ot_node *nd = &ex->g->nodes[ex->order[s]];
    const ot_tensor *t = &ex->tensors[ex->tstart[s]];
    ex->touching = s;
    if (ex->plan->ws_offset[s] >= 0) touch(ex, ex->base + ex->plan->ws_offset[s], ex->plan->ws_bytes[s]);
    for (int k = 0; k < nd->n_inputs + nd->n_outputs; k++) { /* external memory is not the arena's: not measured */
        int v = k < nd->n_inputs ? nd->inputs[k] : nd->outputs[k - nd->n_inputs];
        if (!is_external(ex, v)) touch(ex, t[k].data, t[k].nbytes);
    }
    ex->touching = -1;
}

/* Runs schedule step s on the backend; *done: the steps from s that its kernel ran
 * (more than 1 only with runs, for a run of optimizer nodes: kernel_ctx.h). */
static ot_status run_step(ot_executor *ex, int s, bool runs, int *done, ot_error *err) {
    const ot_node *nd = &ex->g->nodes[ex->order[s]];
    *done = 1;
    if (!ex->measured) touch_step(ex, s);
    /* A view's output already is its input's bytes: no kernel, on every backend. */
    if (ex->views_only[s]) return OT_OK;
    /* Kernels get copies so a misbehaving kernel cannot corrupt the descriptors. */
    ot_tensor *scratch = ex->scratch;
    int nt = ex->tstart[s + 1] - ex->tstart[s];
    memcpy(scratch, &ex->tensors[ex->tstart[s]], sizeof(ot_tensor) * (size_t)nt);
    ot_kernel_ctx ctx = {.n_threads = ex->opt.n_threads > 0 ? ex->opt.n_threads : ex->be->n_threads,
                         .seed = ex->opt.seed, .step = ex->opt.step, .rng_node = ex->rng_node[s],
                         .workspace = NULL, .workspace_bytes = 0, .update_check = &ex->upd,
                         .grad_ss = ex->grad_ss ? ex->grad_ss + s : NULL};
    if (ex->plan->ws_offset[s] >= 0) {
        ctx.workspace = ex->base + ex->plan->ws_offset[s];
        ctx.workspace_bytes = ex->plan->ws_bytes[s];
    }
    if (ex->node_state) ctx.node_state = &ex->node_state[s];
    if (runs && ex->run_len[s] > 1) {
        ctx.run_len = ex->run_len[s];
        ctx.run_nodes = &ex->step_node[s];
        ctx.run_in = &ex->step_in[s];
        ctx.run_done = done;
    }
    ot_status st = ex->be->run_node(ex->be, ex->g, nd, scratch, scratch + nd->n_inputs, &ctx, err);
    if (*done < 1 || *done > (ctx.run_len > 1 ? ctx.run_len : 1)) *done = 1; /* a kernel that wrote nonsense: its node only */
    if (st) {
        /* Kernel messages usually name the node already; name it once. */
        char quoted[300];
        snprintf(quoted, sizeof quoted, "'%s'", nname(nd));
        const char *op = nd->op_type ? nd->op_type : ot_op_name(nd->op);
        if (err && strstr(err->msg, quoted) && strstr(err->msg, op)) ot_error_prefix(err, "step %d: ", s);
        else ot_error_prefix(err, "step %d, node '%s' (%s): ", s, nname(nd), op);
    }
    return st;
}

/* A node's phase as hooks see it: recompute clones belong to the backward pass. */
static ot_phase hook_phase(const ot_node *nd) {
    return nd->phase == OT_PHASE_RECOMPUTE ? OT_PHASE_BACKWARD : nd->phase;
}

ot_status ot_executor_run(ot_executor *ex, ot_error *err) {
    const ot_graph *g = ex->g;
    ot_status st = check_inputs_set(ex, err);
    if (st) return st;
    ex->upd = (ot_update_check){0};
    for (int s = 0, ran = 0; s < ex->n_steps; s++) {
        if (s < ran) { /* updated already, by the kernel of its run's first step */
            if (!ex->measured) touch_step(ex, s);
        } else {
            int done = 1;
            if ((st = run_step(ex, s, true, &done, err))) return st;
            ran = s + done;
        }
        if (ex->opt.after_step && (st = ex->opt.after_step(ex->opt.hook_user, ex, s, err))) return st;
        if (!ex->opt.at_phase_end) continue;
        ot_exec_boundary b = {.step = s, .ended = hook_phase(&g->nodes[ex->order[s]]), .end = s + 1 == ex->n_steps};
        b.next = b.end ? b.ended : hook_phase(&g->nodes[ex->order[s + 1]]);
        if ((b.end || b.next != b.ended) && (st = ex->opt.at_phase_end(ex->opt.hook_user, ex, &b, err))) return st;
    }
    if ((st = ex->be->synchronize(ex->be, err))) return st;
    ex->measured = true;
    return OT_OK;
}

ot_status ot_executor_run_steps(ot_executor *ex, int first, int count, ot_error *err) {
    if (first < 0 || count < 0 || first > ex->n_steps - count)
        return ot_fail(err, OT_E_USAGE, "executor: steps %d..%d are outside the schedule's %d", first,
                       first + count - 1, ex->n_steps);
    ot_status st = check_inputs_set(ex, err);
    int done;
    for (int s = first; !st && s < first + count; s++) st = run_step(ex, s, false, &done, err);
    return st ? st : ex->be->synchronize(ex->be, err);
}

static ot_status check_pinned(const ot_executor *ex, int v, ot_error *err) {
    if (v < 0 || v >= ex->g->n_values) return ot_fail(err, OT_E_USAGE, "executor: value id %d out of range", v);
    const ot_plan_value *pv = &ex->plan->values[v];
    if (pv->offset < 0 && !pv->external && pv->alias_of < 0) /* a view of an external value has no offset */
        return ot_fail(err, OT_E_USAGE, "executor: value '%s' is not used by the graph", vname(ex->g, v));
    if (!pv->pinned)
        return ot_fail(err, OT_E_USAGE, "executor: value '%s' is transient (its memory is reused during a run); only inputs, outputs, params, gradients and state can be read", vname(ex->g, v));
    return OT_OK;
}

ot_status ot_executor_get(ot_executor *ex, int v, ot_tensor **copy_out, ot_error *err) {
    *copy_out = NULL;
    ot_status st = check_pinned(ex, v, err);
    if (st) return st;
    const ot_value *val = &ex->g->values[v];
    ot_tensor *t = ot_tensor_new(val->dtype, &val->shape);
    if (!t) return ot_fail(err, OT_E_MEMORY, "executor: out of memory copying '%s'", vname(ex->g, v));
    size_t n = ex->plan->values[v].nbytes;
    if (n && (st = ex->be->copy_out(ex->be, t->data, value_addr(ex, v), n, err))) {
        ot_tensor_free(t);
        return st;
    }
    *copy_out = t;
    return OT_OK;
}

ot_status ot_executor_write(ot_executor *ex, int v, const void *host, size_t nbytes, ot_error *err) {
    ot_status st = check_pinned(ex, v, err);
    if (st) return st;
    const ot_plan_value *pv = &ex->plan->values[v];
    if (pv->external)
        return ot_fail(err, OT_E_USAGE, "executor: value '%s' is bound to external memory, which this executor only reads", vname(ex->g, v));
    if (nbytes != pv->nbytes)
        return ot_fail(err, OT_E_DATA, "executor: writing %zu bytes into '%s', which holds %zu", nbytes, vname(ex->g, v), pv->nbytes);
    if (!nbytes) return OT_OK;
    st = ex->be->copy_in(ex->be, ex->base + pv->offset, host, nbytes, err);
    if (!st) touch(ex, ex->base + pv->offset, nbytes);
    return st;
}

ot_status ot_executor_copy_value(ot_executor *ex, int dst, int src, ot_error *err) {
    ot_status st;
    if ((st = check_pinned(ex, dst, err)) || (st = check_pinned(ex, src, err))) return st;
    size_t n = ex->plan->values[src].nbytes;
    if (n != ex->plan->values[dst].nbytes)
        return ot_fail(err, OT_E_DATA, "executor: cannot copy '%s' (%zu bytes) into '%s' (%zu bytes)", vname(ex->g, src), n,
                       vname(ex->g, dst), ex->plan->values[dst].nbytes);
    if (!n) return OT_OK;
    /* Through the host: the interface has no device-to-device copy, and this runs once
     * per step on small tensors (running statistics). */
    void *tmp = malloc(n);
    if (!tmp) return ot_fail(err, OT_E_MEMORY, "executor: out of memory");
    st = ex->be->copy_out(ex->be, tmp, value_addr(ex, src), n, err);
    if (!st) st = ot_executor_write(ex, dst, tmp, n, err);
    free(tmp);
    return st;
}

ot_status ot_executor_sync_to_graph(ot_executor *ex, ot_error *err) {
    ot_graph *g = ex->g;
    for (int v = 0; v < g->n_values; v++) {
        ot_value *val = &g->values[v];
        const ot_plan_value *pv = &ex->plan->values[v];
        if ((val->kind != OT_VK_PARAM && val->kind != OT_VK_STATE) || (pv->offset < 0 && !pv->external)) continue;
        if (val->nbytes != pv->nbytes || !val->data) {
            void *buf = calloc(1, pv->nbytes ? pv->nbytes : 1);
            if (!buf) return ot_fail(err, OT_E_MEMORY, "executor: out of memory");
            free(val->data);
            val->data = buf;
            val->nbytes = pv->nbytes;
        }
        if (pv->nbytes) {
            ot_status st = ex->be->copy_out(ex->be, val->data, value_addr(ex, v), pv->nbytes, err);
            if (st) return st;
        }
        ex->released[v] = false;
    }
    return OT_OK;
}

void *ot_executor_value_ptr(ot_executor *ex, int v) { return value_addr(ex, v); }

void *ot_executor_slab(ot_executor *ex, ot_mem_category c, size_t *nbytes) {
    if (c < 0 || c > OT_MEM_IO) {
        if (nbytes) *nbytes = 0;
        return NULL;
    }
    if (nbytes) *nbytes = ex->plan->slab_bytes[c];
    return ex->base + ex->plan->slab_offset[c];
}

void ot_executor_set_step(ot_executor *ex, uint64_t step) { ex->opt.step = step; }
void ot_executor_set_seed(ot_executor *ex, uint64_t seed) { ex->opt.seed = seed; }
const ot_plan *ot_executor_plan(const ot_executor *ex) { return ex->plan; }
const ot_graph *ot_executor_graph(const ot_executor *ex) { return ex->g; }
ot_backend *ot_executor_backend(const ot_executor *ex) { return ex->be; }
size_t ot_executor_high_water(const ot_executor *ex) { return ex->high_water; }
void ot_executor_note_write(ot_executor *ex, int step, const void *p, size_t n) {
    ex->touching = step;
    touch(ex, p, n);
    ex->touching = -1;
}
int ot_executor_high_water_step(const ot_executor *ex) { return ex->high_water_step; }

const ot_update_check *ot_executor_update_check(const ot_executor *ex) { return &ex->upd; }

void ot_executor_set_grad_ss(ot_executor *ex, double *per_step) { ex->grad_ss = per_step; }
