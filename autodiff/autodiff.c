/* autodiff.c — the autodiff driver: picks the params (--freeze/--train patterns), finds
 * the nodes on a param→loss path, seeds d(loss) with OnesLike, walks the forward
 * nodes in reverse topological order calling each op's rule (grad_table.c), sums
 * gradient contributions, and pins the param gradients and BatchNorm state updates
 * as graph outputs. Also the builder helpers the rules share (grad_rules.h). */
#include "autodiff/grad_rules.h"

#include <stdlib.h>
#include <string.h>

#include "ir/name_pattern.h"

/* ---- builder helpers ------------------------------------------------------- */

int ot_gb_new(ot_grad_ctx *c, ot_dtype dt, const ot_shape *s) {
    char name[64];
    /* The id in the name keeps names unique without a linear search per value. */
    snprintf(name, sizeof name, "grad.%d", c->g->n_values);
    int v = ot_graph_add_value(c->g, name, dt, s, OT_VK_ACTIVATION);
    if (v < 0) c->oom = true;
    return v;
}

int ot_gb_emit(ot_grad_ctx *c, ot_op op, const int *in, int n_in, const int *out, int n_out) {
    char name[512];
    snprintf(name, sizeof name, "%s/grad/%s.%d", c->fwd && c->fwd->name[0] ? c->fwd->name : "autodiff",
             ot_op_name(op), c->g->n_nodes);
    int id = ot_graph_add_node(c->g, op, name, in, n_in, out, n_out, OT_PHASE_BACKWARD);
    if (id < 0) c->oom = true;
    return id;
}

/* Attribute setters on a node just emitted; a failed emission (id < 0) is already
 * recorded in c->oom, so they only skip. */
void ot_gb_set_int(ot_grad_ctx *c, int node_id, const char *name, int64_t v) {
    if (node_id >= 0 && ot_node_set_attr_int(&c->g->nodes[node_id], name, v)) c->oom = true;
}
void ot_gb_set_float(ot_grad_ctx *c, int node_id, const char *name, float v) {
    if (node_id >= 0 && ot_node_set_attr_float(&c->g->nodes[node_id], name, v)) c->oom = true;
}
void ot_gb_set_ints(ot_grad_ctx *c, int node_id, const char *name, const int64_t *v, int n) {
    if (node_id >= 0 && ot_node_set_attr_ints(&c->g->nodes[node_id], name, v, n)) c->oom = true;
}
void ot_gb_set_string(ot_grad_ctx *c, int node_id, const char *name, const char *v) {
    if (node_id >= 0 && ot_node_set_attr_string(&c->g->nodes[node_id], name, v)) c->oom = true;
}
void ot_gb_copy_attrs(ot_grad_ctx *c, int node_id, const ot_node *src) {
    if (node_id >= 0 && ot_node_copy_attrs(&c->g->nodes[node_id], src)) c->oom = true;
}

int ot_gb_op_s(ot_grad_ctx *c, ot_op op, const int *in, int n_in, ot_dtype dt, const ot_shape *s, int *node_out) {
    int v = ot_gb_new(c, dt, s);
    int id = v >= 0 ? ot_gb_emit(c, op, in, n_in, &v, 1) : -1;
    if (node_out) *node_out = id;
    return id >= 0 ? v : -1;
}

int ot_gb_op(ot_grad_ctx *c, ot_op op, const int *in, int n_in, int like) {
    ot_shape s = ot_gb_shape(c, like);
    return ot_gb_op_s(c, op, in, n_in, ot_gb_dtype(c, like), &s, NULL);
}

int ot_gb_const_f32(ot_grad_ctx *c, float x) {
    char name[64];
    snprintf(name, sizeof name, "grad.const.%d", c->g->n_values);
    ot_shape s = ot_shape_make(0, NULL);
    int v = ot_graph_add_value(c->g, name, OT_F32, &s, OT_VK_CONSTANT);
    if (v < 0 || ot_value_set_data(&c->g->values[v], &x, sizeof x)) {
        c->oom = true;
        return -1;
    }
    return v;
}

int ot_gb_const_i64(ot_grad_ctx *c, const int64_t *x, int n) {
    char name[64];
    snprintf(name, sizeof name, "grad.const.%d", c->g->n_values);
    int64_t d = n;
    ot_shape s = ot_shape_make(1, &d);
    int v = ot_graph_add_value(c->g, name, OT_I64, &s, OT_VK_CONSTANT);
    if (v < 0 || ot_value_set_data(&c->g->values[v], x, (size_t)n * sizeof(int64_t))) {
        c->oom = true;
        return -1;
    }
    return v;
}

ot_shape ot_gb_shape(const ot_grad_ctx *c, int v) { return v >= 0 ? c->g->values[v].shape : ot_shape_unknown(); }
ot_dtype ot_gb_dtype(const ot_grad_ctx *c, int v) { return v >= 0 ? c->g->values[v].dtype : OT_UNDEFINED; }

ot_status ot_gb_reshape_like(ot_grad_ctx *c, int x, int like, int *out) {
    ot_shape s = ot_gb_shape(c, like);
    if (s.rank < 0)
        return ot_fail(c->err, OT_E_SHAPE, "autodiff: node '%s': value '%s' has unknown rank; run shape inference first",
                       c->fwd->name, c->g->values[like].name);
    int64_t dims[OT_MAX_RANK];
    int unknown = 0;
    for (int i = 0; i < s.rank; i++) {
        dims[i] = s.dim[i];
        if (dims[i] < 0) {
            dims[i] = -1;
            unknown++;
        }
    }
    if (unknown > 1)
        return ot_fail(c->err, OT_E_SHAPE,
                       "autodiff: node '%s': value '%s' has %d unknown dims; its gradient needs a reshape with at "
                       "most one; bind the symbolic dims first",
                       c->fwd->name, c->g->values[like].name, unknown);
    int k = ot_gb_const_i64(c, dims, s.rank);
    int in[2] = {x, k};
    *out = ot_gb_op_s(c, OT_OP_RESHAPE, in, 2, ot_gb_dtype(c, x), &s, NULL);
    return OT_OK;
}

bool ot_gb_needs(const ot_grad_ctx *c, int v) {
    return v >= 0 && v < c->n_needs && c->needs[v] && ot_dtype_is_float(c->g->values[v].dtype);
}

void ot_gb_add(ot_grad_ctx *c, int v, int grad) {
    if (!ot_gb_needs(c, v) || grad < 0) return;
    if (c->n_contrib[v] == c->cap_contrib[v]) {
        int cap = c->cap_contrib[v] ? 2 * c->cap_contrib[v] : 2;
        int *p = realloc(c->contrib[v], (size_t)cap * sizeof(int));
        if (!p) {
            c->oom = true;
            return;
        }
        c->contrib[v] = p;
        c->cap_contrib[v] = cap;
    }
    c->contrib[v][c->n_contrib[v]++] = grad;
}

void ot_gb_add_like(ot_grad_ctx *c, int v, int grad, const ot_shape *grad_shape) {
    if (!ot_gb_needs(c, v) || grad < 0) return;
    ot_shape vs = ot_gb_shape(c, v);
    if (vs.rank >= 0 && ot_shape_equal(&vs, grad_shape)) {
        ot_gb_add(c, v, grad);
        return;
    }
    int in[2] = {grad, v};
    ot_gb_add(c, v, ot_gb_op(c, OT_OP_REDUCE_TO_LIKE, in, 2, v));
}

int ot_gb_dy_or_zeros(ot_grad_ctx *c, int dy, int fwd_value) {
    if (dy >= 0) return dy;
    return ot_gb_op(c, OT_OP_ZEROS_LIKE, &fwd_value, 1, fwd_value);
}

/* ---- driver ---------------------------------------------------------------- */

/* When the last contribution is a GatherGrad's fresh scatter (an embedding's, whose
 * weight is tied to a head that contributed first), the GatherGrad is re-emitted with
 * the Sum of the others as its base and accumulates onto it: the planner hands it
 * base's block, so no second [V, D] buffer and no Sum. Sum adds left to right, so
 * Sum(a, .., s) is Sum(a, ..) + s, which the GatherGrad's kernel computes bitwise (see
 * kernels/cpu/grad_layout.c). Returns the gradient, or -1 when the pattern is absent. */
static int gather_onto_base(ot_grad_ctx *c, int v) {
    int n = c->n_contrib[v], s = c->contrib[v][n - 1];
    ot_graph *g = c->g;
    if (c->separate_scatter || s < 0) return -1;
    const ot_value *sv = &g->values[s];
    int id = sv->producer;
    if (id < 0 || sv->n_consumers != 0 || sv->is_graph_output || sv->dtype != OT_F32) return -1;
    const ot_node *gg = &g->nodes[id];
    if (gg->op != OT_OP_GATHER_GRAD || gg->n_inputs != 3 || gg->n_outputs != 1) return -1;
    for (int k = 0; k < n - 1; k++) {
        ot_shape cs = ot_gb_shape(c, c->contrib[v][k]);
        if (ot_gb_dtype(c, c->contrib[v][k]) != OT_F32 || !ot_shape_equal(&cs, &sv->shape)) return -1;
    }
    int base = n == 2 ? c->contrib[v][0] : ot_gb_op(c, OT_OP_SUM, c->contrib[v], n - 1, s);
    if (base < 0) return -1;
    int in[4] = {gg->inputs[0], gg->inputs[1], gg->inputs[2], base};
    ot_graph_remove_node(g, id); /* s loses its producer; the new node takes it over */
    int node = ot_gb_emit(c, OT_OP_GATHER_GRAD, in, 4, &s, 1);
    if (node < 0) return -1;
    ot_gb_copy_attrs(c, node, &g->nodes[id]);
    return s;
}

/* The summed gradient of v (emitting one Sum over all contributions in the order
 * they were added, or a GatherGrad onto the others), or -1 when none reached it. */
static int finalize(ot_grad_ctx *c, int v) {
    if (v < 0 || v >= c->n_needs || c->n_contrib[v] == 0) return -1;
    if (c->n_contrib[v] == 1) return c->contrib[v][0];
    int s = gather_onto_base(c, v);
    if (s < 0) s = ot_gb_op(c, OT_OP_SUM, c->contrib[v], c->n_contrib[v], v);
    if (s < 0) return -1;
    c->contrib[v][0] = s;
    c->n_contrib[v] = 1;
    return s;
}

/* The trained params: ot_param_rule decides by default, --train / --freeze patterns win. */
/* Whether pattern p matches a float param's name. */
static bool any_param(const ot_graph *g, const ot_name_pattern *p) {
    for (int v = 0; v < g->n_values; v++) {
        const ot_value *val = &g->values[v];
        if (val->kind == OT_VK_PARAM && ot_dtype_is_float(val->dtype) && ot_name_pattern_match(p, val->name)) return true;
    }
    return false;
}

static ot_status pick_params(ot_graph *g, const ot_autodiff_options *opt, ot_autodiff_result *res, ot_error *err) {
    ot_status st = OT_OK;
    int np = opt->n_freeze + opt->n_train;
    ot_name_pattern *pat = ot_xcalloc((size_t)np + 1, sizeof *pat);
    bool *hit = ot_xcalloc((size_t)np + 1, sizeof(bool));
    const char **reason = NULL; /* ot_param_rule's verdict per value */
    int compiled = 0;
    if (!pat || !hit) {
        st = ot_fail(err, OT_E_MEMORY, "autodiff: out of memory");
        goto fail;
    }
    for (int i = 0; i < np; i++, compiled++) {
        const char *text = i < opt->n_freeze ? opt->freeze[i] : opt->train[i - opt->n_freeze];
        if ((st = ot_name_pattern_compile(&pat[i], i < opt->n_freeze ? "--freeze" : "--train", text, err))) goto fail;
    }
    res->params = ot_xcalloc((size_t)g->n_values, sizeof(int));
    reason = ot_xcalloc((size_t)g->n_values + 1, sizeof(const char *));
    if (!res->params || !reason) {
        st = ot_fail(err, OT_E_MEMORY, "autodiff: out of memory");
        goto fail;
    }
    if ((st = ot_param_rule(g, &opt->loss_value, 1, reason, err))) goto fail;
    /* Old scripts: a glob that matches no param is read as the regex it was before
     * globs were the default, when that matches one; the result names it (a note). */
    for (int i = 0; i < np; i++) {
        if (pat[i].is_regex || any_param(g, &pat[i])) continue;
        if (!ot_name_pattern_as_regex(&pat[i])) continue;
        if (!any_param(g, &pat[i])) {
            ot_name_pattern_as_glob(&pat[i]);
        } else if (!res->legacy_pattern) {
            res->legacy_pattern = pat[i].text;
            res->legacy_option = i < opt->n_freeze ? "--freeze" : "--train";
        }
    }
    /* Decide first, change kinds only when every pattern matched something, so a
     * usage error leaves the graph as it was. */
    for (int v = 0; v < g->n_values; v++) {
        const ot_value *val = &g->values[v];
        if (val->kind != OT_VK_PARAM || !ot_dtype_is_float(val->dtype)) continue;
        bool frozen = false, trained = opt->n_train == 0 && !reason[v];
        for (int i = 0; i < np; i++) {
            if (!ot_name_pattern_match(&pat[i], val->name)) continue;
            hit[i] = true;
            if (i < opt->n_freeze) frozen = true;
            else trained = true;
        }
        if (!frozen && trained) res->params[res->n_params++] = v;
        else if (reason[v] && !trained) res->n_rule_constant++;
    }
    for (int i = 0; i < np; i++)
        if (!hit[i]) {
            st = ot_name_pattern_no_match(&pat[i], i < opt->n_freeze ? "--freeze" : "--train", "parameter",
                                          "; list them with `onnxtrain info`", err);
            res->n_params = 0;
            goto fail;
        }
    /* Frozen params and integer initializers become constants: never trained. */
    for (int v = 0, k = 0; v < g->n_values; v++) {
        if (k < res->n_params && res->params[k] == v) {
            k++;
            continue;
        }
        if (g->values[v].kind == OT_VK_PARAM) g->values[v].kind = OT_VK_CONSTANT;
    }
fail:
    for (int i = 0; i < compiled && pat; i++) ot_name_pattern_free(&pat[i]);
    free(pat);
    free(hit);
    free(reason);
    return st;
}

/* Undoes a failed build: drops the nodes and values added after the first nn / nv
 * and the graph outputs after the first n_out, so the caller's graph is unchanged
 * (apart from value kinds: BatchNorm statistics are state either way). */
static void rollback(ot_graph *g, int nv, int nn, int n_out) {
    for (int id = g->n_nodes - 1; id >= nn; id--) {
        ot_node *n = &g->nodes[id];
        ot_graph_remove_node(g, id);
        for (int i = 0; i < n->n_attrs; i++) ot_attr_free(&n->attrs[i]);
        free(n->attrs);
        free(n->inputs);
        free(n->outputs);
        free(n->name);
        free(n->op_type);
        free(n->domain);
    }
    g->n_nodes = nn;
    for (int i = n_out; i < g->n_outputs; i++) g->values[g->outputs[i]].is_graph_output = false;
    if (g->n_outputs > n_out) g->n_outputs = n_out;
    for (int v = g->n_values - 1; v >= nv; v--) {
        ot_value *val = &g->values[v];
        free(val->name);
        free(val->consumers);
        free(val->data);
        free(val->doc);
    }
    g->n_values = nv;
}

static int pin_output(ot_graph *g, int v) {
    if (g->values[v].is_graph_output) return 0;
    int *p = realloc(g->outputs, (size_t)(g->n_outputs + 1) * sizeof(int));
    if (!p) return -1;
    g->outputs = p;
    g->outputs[g->n_outputs++] = v;
    g->values[v].is_graph_output = true;
    return 0;
}

/* Names the final gradient of value `of` "<name>_grad" (once) and pins it. */
static int publish_grad(ot_graph *g, int grad, int of) {
    ot_value *gv = &g->values[grad];
    if (gv->kind != OT_VK_GRADIENT && gv->producer >= 0 && g->nodes[gv->producer].phase == OT_PHASE_BACKWARD) {
        char base[512];
        snprintf(base, sizeof base, "%s_grad", g->values[of].name);
        char name[560];
        snprintf(name, sizeof name, "%s", base);
        for (int k = 1; ot_graph_find_value(g, name) >= 0; k++) snprintf(name, sizeof name, "%s_%d", base, k);
        char *s = ot_strdup(name);
        if (!s) return -1;
        free(g->values[grad].name);
        g->values[grad].name = s;
        g->values[grad].kind = OT_VK_GRADIENT;
    }
    return pin_output(g, grad);
}

void ot_autodiff_result_free(ot_autodiff_result *res) {
    if (!res) return;
    free(res->params);
    free(res->grads);
    free(res->wrt_grads);
    free(res->state_values);
    free(res->state_updates);
    memset(res, 0, sizeof *res);
}

static ot_status autodiff_oom(ot_error *err) {
    return ot_fail(err, OT_E_MEMORY, "autodiff: out of memory while building the backward graph");
}

/* c->needs[v]: v depends on a param (or a wrt value) through float data, and the loss
 * depends on v. reach is scratch of g->n_values bools. */
static ot_status mark_needs(ot_grad_ctx *c, const int *order, int n_order, const ot_autodiff_options *opt,
                            const ot_autodiff_result *res, bool *reach, ot_error *err) {
    ot_graph *g = c->g;
    int nv = c->n_needs;
    for (int i = 0; i < res->n_params; i++) c->needs[res->params[i]] = true;
    for (int i = 0; i < opt->n_wrt; i++) {
        int v = opt->wrt[i];
        if (v < 0 || v >= nv || !ot_dtype_is_float(g->values[v].dtype))
            return ot_fail(err, OT_E_USAGE, "autodiff: requested gradient of value %d, which is not a float value", v);
        c->needs[v] = true;
    }
    for (int k = 0; k < n_order; k++) {
        const ot_node *n = &g->nodes[order[k]];
        if (n->phase != OT_PHASE_FORWARD && n->phase != OT_PHASE_LOSS) continue;
        bool any = false;
        for (int i = 0; i < n->n_inputs; i++) any |= n->inputs[i] >= 0 && ot_gb_needs(c, n->inputs[i]);
        if (!any) continue;
        for (int i = 0; i < n->n_outputs; i++)
            if (n->outputs[i] >= 0 && ot_dtype_is_float(g->values[n->outputs[i]].dtype)) c->needs[n->outputs[i]] = true;
    }
    /* Backward: values the loss depends on. */
    reach[opt->loss_value] = true;
    for (int k = n_order - 1; k >= 0; k--) {
        const ot_node *n = &g->nodes[order[k]];
        bool any = false;
        for (int i = 0; i < n->n_outputs; i++) any |= n->outputs[i] >= 0 && reach[n->outputs[i]];
        if (!any) continue;
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] >= 0) reach[n->inputs[i]] = true;
    }
    for (int v = 0; v < nv; v++) c->needs[v] = c->needs[v] && reach[v];
    return OT_OK;
}

/* BatchNorm in training mode: its new running stats are copied back each step. */
static void collect_state_updates(ot_graph *g, const int *order, int n_order, ot_autodiff_result *res) {
    for (int k = 0; k < n_order; k++) {
        const ot_node *n = &g->nodes[order[k]];
        if (n->op != OT_OP_BATCH_NORM || !ot_node_attr_int(n, "training_mode", 0)) continue;
        for (int j = 1; j <= 2 && j < n->n_outputs; j++) {
            int sv = n->inputs[2 + j], uv = n->outputs[j];
            if (sv < 0 || uv < 0) continue;
            g->values[sv].kind = OT_VK_STATE;
            res->state_values[res->n_state] = sv;
            res->state_updates[res->n_state++] = uv;
        }
    }
}

/* The forward nodes in reverse topological order, one gradient rule each. */
static ot_status run_rules(ot_grad_ctx *c, const int *order, int n_order, ot_error *err) {
    for (int k = n_order - 1; k >= 0; k--) {
        ot_node fwd = c->g->nodes[order[k]]; /* shallow copy: the node array may move */
        if (fwd.phase != OT_PHASE_FORWARD && fwd.phase != OT_PHASE_LOSS) continue;
        bool in_needs = false;
        for (int i = 0; i < fwd.n_inputs; i++) in_needs |= ot_gb_needs(c, fwd.inputs[i]);
        if (!in_needs) continue;
        int dy[64];
        bool any = false;
        if (fwd.n_outputs > 64)
            return ot_fail(err, OT_E_UNSUPPORTED, "autodiff: node '%s' has more than 64 outputs", fwd.name);
        for (int i = 0; i < fwd.n_outputs; i++) {
            dy[i] = ot_gb_needs(c, fwd.outputs[i]) ? finalize(c, fwd.outputs[i]) : -1;
            any |= dy[i] >= 0;
        }
        if (!any) continue;
        ot_grad_rule_fn rule = ot_grad_rule_of(fwd.op);
        if (!rule)
            return ot_fail(err, OT_E_UNSUPPORTED,
                           "autodiff: node '%s' (%s) lies between a parameter and the loss but has no gradient rule",
                           fwd.name, fwd.op_type);
        c->fwd = &fwd;
        ot_status st = rule(c, &fwd, dy);
        c->fwd = NULL;
        if (st) return st;
        if (c->oom) return autodiff_oom(err);
    }
    return OT_OK;
}

/* The final gradient of value v (ZerosLike when none reaches it), named and pinned. */
static int publish_final(ot_grad_ctx *c, int v) {
    int gr = finalize(c, v);
    if (gr < 0) gr = ot_gb_op(c, OT_OP_ZEROS_LIKE, &v, 1, v);
    if (c->oom || publish_grad(c->g, gr, v)) return -1;
    return gr;
}

static ot_status publish_results(ot_grad_ctx *c, const ot_autodiff_options *opt, ot_autodiff_result *res,
                                 ot_error *err) {
    for (int i = 0; i < res->n_params; i++)
        if ((res->grads[i] = publish_final(c, res->params[i])) < 0) return autodiff_oom(err);
    res->n_wrt = opt->n_wrt;
    for (int i = 0; i < opt->n_wrt; i++)
        if ((res->wrt_grads[i] = publish_final(c, opt->wrt[i])) < 0) return autodiff_oom(err);
    for (int i = 0; i < res->n_state; i++)
        if (pin_output(c->g, res->state_updates[i])) return autodiff_oom(err);
    return OT_OK;
}

/* BatchNorm running statistics are state even when the importer saw plain float
 * initializers: they are updated by the forward pass, never trained. */
static void mark_batchnorm_state(ot_graph *g) {
    for (int id = 0; id < g->n_nodes; id++) {
        const ot_node *n = &g->nodes[id];
        if (n->removed || n->op != OT_OP_BATCH_NORM) continue;
        for (int i = 3; i < 5 && i < n->n_inputs; i++)
            if (n->inputs[i] >= 0 && g->values[n->inputs[i]].kind == OT_VK_PARAM)
                g->values[n->inputs[i]].kind = OT_VK_STATE;
    }
}

ot_status ot_autodiff_build(ot_graph *g, const ot_autodiff_options *opt, ot_autodiff_result *res, ot_error *err) {
    ot_status st = OT_OK;
    memset(res, 0, sizeof *res);
    res->seed_node = -1;
    res->loss_scale_value = -1;
    int nv = g->n_values, nn = g->n_nodes, n_out = g->n_outputs;
    ot_grad_ctx c = {.g = g, .err = err, .n_needs = nv, .separate_scatter = opt->separate_scatter};
    int *order = NULL;
    bool *reach = NULL;
    int loss = opt->loss_value;
    if (loss < 0 || loss >= nv)
        return ot_fail(err, OT_E_USAGE, "autodiff: loss value id %d is not a value of graph '%s'", loss, g->name);
    const ot_value *lv = &g->values[loss];
    if (!ot_dtype_is_float(lv->dtype) || lv->shape.rank < 0 || ot_shape_numel(&lv->shape) != 1)
        return ot_fail(err, OT_E_USAGE, "autodiff: loss '%s' must be a scalar float (it is %s)", lv->name,
                       ot_dtype_name(lv->dtype));
    mark_batchnorm_state(g);
    if ((st = pick_params(g, opt, res, err)) != OT_OK) goto fail;

    c.needs = ot_xcalloc((size_t)nv, sizeof(bool));
    reach = ot_xcalloc((size_t)nv, sizeof(bool));
    c.contrib = ot_xcalloc((size_t)nv, sizeof(int *));
    c.n_contrib = ot_xcalloc((size_t)nv, sizeof(int));
    c.cap_contrib = ot_xcalloc((size_t)nv, sizeof(int));
    order = ot_xcalloc((size_t)nn + 1, sizeof(int));
    res->grads = ot_xcalloc((size_t)res->n_params + 1, sizeof(int));
    res->wrt_grads = ot_xcalloc((size_t)opt->n_wrt + 1, sizeof(int));
    res->state_values = ot_xcalloc((size_t)nn * 2 + 1, sizeof(int));
    res->state_updates = ot_xcalloc((size_t)nn * 2 + 1, sizeof(int));
    if (!c.needs || !reach || !c.contrib || !c.n_contrib || !c.cap_contrib || !order || !res->grads ||
        !res->wrt_grads || !res->state_values || !res->state_updates) {
        st = ot_fail(err, OT_E_MEMORY, "autodiff: out of memory");
        goto fail;
    }
    int n_order = ot_graph_topo_order(g, order, NULL);
    if (n_order < 0) {
        st = ot_fail(err, OT_E_MODEL, "autodiff: graph '%s' has a cycle", g->name);
        goto fail;
    }
    if ((st = mark_needs(&c, order, n_order, opt, res, reach, err))) goto fail;
    collect_state_updates(g, order, n_order, res);

    ot_shape ls = lv->shape;
    int seed = ot_gb_op_s(&c, OT_OP_ONES_LIKE, &loss, 1, g->values[loss].dtype, &ls, &res->seed_node);
    if (opt->loss_scale && seed >= 0) { /* seed x S: a value the loop writes, not a constant */
        int sv = ot_graph_add_value_unique(g, "loss_scale", g->values[loss].dtype, &ls, OT_VK_OPT_STATE);
        int in[2] = {seed, sv};
        if (sv < 0) c.oom = true;
        else seed = ot_gb_op(&c, OT_OP_MUL, in, 2, seed);
        res->loss_scale_value = sv;
    }
    ot_gb_add(&c, loss, seed);
    if (c.oom) st = autodiff_oom(err);
    if (!st) st = run_rules(&c, order, n_order, err);
    if (!st) st = publish_results(&c, opt, res, err);
    if (!st) goto done;
fail:
    ot_autodiff_result_free(res);
    rollback(g, nv, nn, n_out);
done:
    if (c.contrib)
        for (int v = 0; v < nv; v++) free(c.contrib[v]);
    free(c.contrib);
    free(c.n_contrib);
    free(c.cap_contrib);
    free(c.needs);
    free(reach);
    free(order);
    return st;
}
