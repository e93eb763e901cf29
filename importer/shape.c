/* shape.c — the shape-inference driver: walks live nodes in topological order, asks
 * the per-op rule (shape_rules*.c) for each node's output dtypes and shapes, merges
 * them with what the model declared, tracks small integer "shape data" so symbolic
 * dims survive Shape -> Gather -> Concat -> Reshape, and folds constant nodes
 * (fold.c). Also binding of symbolic dims (--bind batch=8) and the check that every
 * shape is static before a plan is made.
 *
 * Folding choice: a node producing a graph output is never folded, so every graph
 * output stays produced by a node (the executor and exporter can rely on that). */
#include "shape_internal.h"
#include "size_limits.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *ot_shape_node_label(const ot_node *n) { return (n->name && n->name[0]) ? n->name : n->op_type; }

ot_status ot_shape_fail(ot_shape_ctx *c, const ot_node *n, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ot_fail(c->err, OT_E_SHAPE, "node '%s' (%s): %s", ot_shape_node_label(n), n->op_type, msg);
}

ot_status ot_shape_fail_model(ot_shape_ctx *c, const ot_node *n, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ot_fail(c->err, OT_E_MODEL, "node '%s' (%s): %s", ot_shape_node_label(n), n->op_type, msg);
}

ot_status ot_shape_axis(ot_shape_ctx *c, const ot_node *n, int64_t axis, int rank, bool inclusive, const ot_shape *of,
                        int *out) {
    int64_t hi = inclusive ? rank : rank - 1;
    if (axis >= -(int64_t)rank && axis <= hi) {
        *out = (int)(axis < 0 ? axis + rank : axis);
        return OT_OK;
    }
    char a[160];
    return ot_shape_fail_model(c, n, "axis %lld is out of range for %s: expected %lld .. %lld", (long long)axis,
                               ot_shape_str(c->g, of, a, sizeof a), -(long long)rank, (long long)hi);
}

const ot_value *ot_shape_input(const ot_shape_ctx *c, const ot_node *n, int i) {
    if (i < 0 || i >= n->n_inputs || n->inputs[i] < 0) return NULL;
    return &c->g->values[n->inputs[i]];
}

const ot_shape *ot_shape_ivals(ot_shape_ctx *c, int vid) {
    if (vid < 0 || vid >= c->n_ivals) return NULL;
    ot_shape *iv = &c->ivals[vid];
    if (iv->rank >= 0) return iv;
    const ot_value *v = &c->g->values[vid];
    if (!v->data || v->kind != OT_VK_CONSTANT) return NULL; /* params and state change */
    if (v->dtype != OT_I64 && v->dtype != OT_I32 && v->dtype != OT_BOOL) return NULL;
    if (!ot_shape_is_static(&v->shape) || v->shape.rank > 1) return NULL;
    int64_t count = ot_shape_numel(&v->shape);
    size_t es = ot_dtype_size(v->dtype);
    if (count > OT_MAX_RANK || v->nbytes < (size_t)count * es) return NULL;
    ot_shape s = ot_shape_make((int)count, NULL);
    for (int j = 0; j < count; j++) {
        int64_t x;
        if (v->dtype == OT_I64) {
            memcpy(&x, (const char *)v->data + (size_t)j * 8, 8);
        } else if (v->dtype == OT_BOOL) {
            x = ((const uint8_t *)v->data)[j] != 0;
        } else {
            int32_t y;
            memcpy(&y, (const char *)v->data + (size_t)j * 4, 4);
            x = y;
        }
        s.dim[j] = x;
        s.sym[j] = x < 0 ? OT_IVAL_CONST : -1;
    }
    *iv = s;
    return iv;
}

/* Bound symbols become plain numbers; the sym id is kept so a reader can still tell
 * which dims came from "batch". */
static void apply_bound_syms(ot_graph *g) {
    for (int i = 0; i < g->n_values; i++) {
        ot_shape *s = &g->values[i].shape;
        for (int d = 0; d < s->rank; d++)
            if (s->dim[d] < 0 && s->sym[d] >= 0 && s->sym[d] < g->n_syms && g->sym_values[s->sym[d]] >= 0)
                s->dim[d] = g->sym_values[s->sym[d]];
    }
}

/* Combines the inferred shape with the one already on the value (declared in the
 * model's value_info, or found by an earlier pass): inferred facts win, declared
 * facts fill what inference could not know, known dims that disagree are an error. */
static ot_status merge_output(ot_shape_ctx *c, const ot_node *n, int vid, ot_dtype dt, const ot_shape *inf) {
    ot_value *v = &c->g->values[vid];
    if (dt != OT_UNDEFINED) v->dtype = dt;
    if (inf->rank < 0) return OT_OK;
    ot_shape old = v->shape, out = *inf;
    char a[160], b[160];
    if (old.rank >= 0 && old.rank != inf->rank)
        return ot_shape_fail(c, n, "output '%s': inferred shape %s but the model declares %s", v->name,
                             ot_shape_str(c->g, inf, a, sizeof a), ot_shape_str(c->g, &old, b, sizeof b));
    for (int d = 0; old.rank >= 0 && d < out.rank; d++) {
        if (out.dim[d] >= 0) {
            if (old.dim[d] >= 0 && old.dim[d] != out.dim[d])
                return ot_shape_fail(c, n, "output '%s': inferred shape %s but the model declares %s", v->name,
                                     ot_shape_str(c->g, inf, a, sizeof a), ot_shape_str(c->g, &old, b, sizeof b));
            if (out.sym[d] < 0) out.sym[d] = old.sym[d];
        } else if (old.dim[d] >= 0) {
            out.dim[d] = old.dim[d];
            if (out.sym[d] < 0) out.sym[d] = old.sym[d];
        } else if (out.sym[d] < 0) {
            out.sym[d] = old.sym[d];
        }
    }
    v->shape = out;
    return OT_OK;
}

static bool writes_graph_output(const ot_graph *g, const ot_node *n) {
    for (int o = 0; o < n->n_outputs; o++) {
        int v = n->outputs[o];
        if (v < 0) continue;
        if (g->values[v].is_graph_output) return true;
        for (int i = 0; i < g->n_outputs; i++)
            if (g->outputs[i] == v) return true;
    }
    return false;
}

ot_status ot_shape_infer(ot_graph *g, ot_error *err) {
    ot_shape_ctx c = {g, err, NULL, 0};
    int *order = NULL;
    ot_dtype *dt = NULL;
    ot_shape *sh = NULL;
    ot_status st = OT_OK;
    apply_bound_syms(g);
    /* Declared or bound dims too large to multiply out safely are refused first. */
    st = ot_imp_check_value_sizes(g, err);
    if (st) goto fail;
    int max_out = 1;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].n_outputs > max_out) max_out = g->nodes[i].n_outputs;
    c.n_ivals = g->n_values;
    c.ivals = ot_xcalloc((size_t)g->n_values, sizeof *c.ivals);
    order = ot_xcalloc((size_t)g->n_nodes, sizeof *order);
    dt = ot_xcalloc((size_t)max_out, sizeof *dt);
    sh = ot_xcalloc((size_t)max_out, sizeof *sh);
    if (!c.ivals || !order || !dt || !sh) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory in shape inference of graph '%s'", g->name);
        goto fail;
    }
    for (int i = 0; i < g->n_values; i++) c.ivals[i] = ot_shape_unknown();
    int cyc = -1;
    int count = ot_graph_topo_order(g, order, &cyc);
    if (count < 0) {
        st = ot_fail(err, OT_E_MODEL, "shape inference: graph has a cycle through node '%s'",
                     cyc >= 0 ? ot_shape_node_label(&g->nodes[cyc]) : "?");
        goto fail;
    }
    for (int k = 0; k < count; k++) {
        int id = order[k];
        const ot_node *n = &g->nodes[id];
        if (n->removed || n->op == OT_OP_UNKNOWN) continue; /* unknown ops keep declared shapes */
        for (int o = 0; o < n->n_outputs; o++) {
            dt[o] = OT_UNDEFINED;
            sh[o] = ot_shape_unknown();
        }
        st = ot_shape_rule(&c, n, dt, sh);
        if (st) goto fail;
        /* attributes the kernels refuse (Celu's alpha 0, ...) refused here too, so that
         * `info` says what `train` would (check_bad_ops.py); after the rule, whose
         * messages about shapes and axes are the more specific */
        ot_op_params scratch;
        const ot_op_params *pp = NULL;
        st = ot_node_params(n, &scratch, &pp, err);
        if (st) goto fail;
        for (int o = 0; o < n->n_outputs; o++) {
            if (n->outputs[o] < 0) continue;
            st = merge_output(&c, n, n->outputs[o], dt[o], &sh[o]);
            if (st) goto fail;
            const ot_value *ov = &g->values[n->outputs[o]];
            if (ot_imp_shape_too_large(&ov->shape, ov->dtype)) {
                char b[160];
                st = ot_shape_fail(&c, n, "output '%s' would have shape %s, over the limit of %llu bytes per tensor",
                                   ov->name, ot_shape_str(g, &ov->shape, b, sizeof b),
                                   (unsigned long long)OT_MAX_VALUE_BYTES);
                goto fail;
            }
        }
        st = ot_shape_propagate_ivals(&c, n);
        if (st) goto fail;
        if (!writes_graph_output(g, n)) {
            bool folded = false;
            st = ot_fold_node(g, id, &folded, err);
            if (st) goto fail;
            /* the folded data is exact: drop partial shape data so readers use it */
            for (int o = 0; folded && o < g->nodes[id].n_outputs; o++)
                if (g->nodes[id].outputs[o] >= 0) c.ivals[g->nodes[id].outputs[o]] = ot_shape_unknown();
        }
    }
fail:
    free(c.ivals);
    free(order);
    free(dt);
    free(sh);
    return st;
}

/* "batch, seq" or "none" into buf. */
static const char *sym_list(const ot_graph *g, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < g->n_syms && len + 1 < n; i++) {
        len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "", g->syms[i]);
    }
    if (!buf[0]) snprintf(buf, n, "none");
    return buf;
}

ot_status ot_graph_bind_dim(ot_graph *g, const char *sym, int64_t value, ot_error *err) {
    char list[512];
    int s = sym ? ot_graph_find_sym(g, sym) : -1;
    if (s < 0)
        return ot_fail(err, OT_E_SHAPE, "graph '%s' has no symbolic dim named '%s' (its symbolic dims: %s)", g->name,
                       sym ? sym : "(null)", sym_list(g, list, sizeof list));
    if (value < 0)
        return ot_fail(err, OT_E_SHAPE, "symbolic dim '%s' cannot be bound to %lld: give a size >= 0", sym,
                       (long long)value);
    /* Folded constants already hold the old value, so a symbol binds once. */
    if (g->sym_values[s] >= 0 && g->sym_values[s] != value)
        return ot_fail(err, OT_E_SHAPE, "symbolic dim '%s' is already bound to %lld; cannot rebind it to %lld", sym,
                       (long long)g->sym_values[s], (long long)value);
    g->sym_values[s] = value;
    apply_bound_syms(g);
    return ot_shape_infer(g, err);
}

ot_status ot_graph_bind_dims_from_string(ot_graph *g, const char *spec, ot_error *err) {
    if (!spec) return ot_fail(err, OT_E_USAGE, "--bind: expected NAME=SIZE[,NAME=SIZE...]");
    const char *p = spec;
    while (*p) {
        while (*p == ',' || isspace((unsigned char)*p)) p++;
        if (!*p) break;
        const char *start = p;
        while (*p && *p != '=' && *p != ',') p++;
        const char *name_end = p;
        while (name_end > start && isspace((unsigned char)name_end[-1])) name_end--;
        if (*p != '=' || name_end == start)
            return ot_fail(err, OT_E_USAGE, "--bind '%s': expected NAME=SIZE[,NAME=SIZE...] near '%s'", spec, start);
        char name[256];
        size_t len = (size_t)(name_end - start);
        if (len >= sizeof name) return ot_fail(err, OT_E_USAGE, "--bind '%s': dim name too long", spec);
        memcpy(name, start, len);
        name[len] = 0;
        p++;
        char *end = NULL;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0) return ot_fail(err, OT_E_USAGE, "--bind '%s': size of '%s' is not a number >= 0", spec, name);
        p = end;
        while (isspace((unsigned char)*p)) p++;
        if (*p && *p != ',') return ot_fail(err, OT_E_USAGE, "--bind '%s': unexpected '%s' after the size of '%s'", spec, p, name);
        ot_status st = ot_graph_bind_dim(g, name, (int64_t)v, err);
        if (st) return st;
    }
    return OT_OK;
}

/* A value matters for planning when a live node reads or writes it or it is a graph
 * input or output (constants orphaned by folding do not). */
static bool value_live(const ot_graph *g, const ot_value *v) {
    if (v->is_graph_output || v->kind == OT_VK_INPUT) return true;
    if (v->producer >= 0 && !g->nodes[v->producer].removed) return true;
    for (int c = 0; c < v->n_consumers; c++)
        if (!g->nodes[v->consumers[c]].removed) return true;
    return false;
}

/* Unbound symbols that some live value still depends on ("none" when no symbol is
 * to blame); symbols only named in the model's declared shapes are left out. */
static const char *blocking_syms(const ot_graph *g, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int s = 0; s < g->n_syms && len + 1 < n; s++) {
        if (g->sym_values[s] >= 0) continue;
        bool used = false;
        for (int i = 0; i < g->n_values && !used; i++) {
            const ot_value *v = &g->values[i];
            for (int d = 0; d < v->shape.rank && !used; d++) used = v->shape.dim[d] < 0 && v->shape.sym[d] == s;
            if (used) used = value_live(g, v);
        }
        if (used) len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "", g->syms[s]);
    }
    if (!buf[0]) snprintf(buf, n, "none");
    return buf;
}

ot_status ot_graph_require_static(const ot_graph *g, ot_error *err) {
    char list[512], buf[160];
    for (int i = 0; i < g->n_values; i++) {
        const ot_value *v = &g->values[i];
        if (!value_live(g, v) || ot_shape_is_static(&v->shape)) continue;
        bool symbolic = false;
        for (int d = 0; d < v->shape.rank; d++) symbolic |= v->shape.dim[d] < 0 && v->shape.sym[d] >= 0;
        if (symbolic)
            return ot_fail(err, OT_E_SHAPE,
                           "value '%s' has shape %s, which is not static: bind its symbolic dims (--bind NAME=SIZE; "
                           "unbound: %s)",
                           v->name, ot_shape_str(g, &v->shape, buf, sizeof buf), blocking_syms(g, list, sizeof list));
        return ot_fail(err, OT_E_SHAPE,
                       "value '%s' has shape %s, which shape inference could not determine (produced by %s%s%s); "
                       "unbound symbolic dims it may depend on: %s",
                       v->name, ot_shape_str(g, &v->shape, buf, sizeof buf),
                       v->producer >= 0 ? "node '" : "", v->producer >= 0 ? ot_shape_node_label(&g->nodes[v->producer]) : "no node",
                       v->producer >= 0 ? "'" : "", blocking_syms(g, list, sizeof list));
    }
    return ot_imp_check_value_sizes(g, err);
}
