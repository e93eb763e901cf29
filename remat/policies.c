/* policies.c — the remat policies as text (parse / print) and as keep sets, plus the
 * two figures every keep set is judged by without running anything: the FLOPs it
 * adds (the clones it implies) and the activation bytes it holds across the
 * forward/backward boundary. */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "remat/remat.h"
#include "remat/remat_internal.h"

void ot_remat_policy_free(ot_remat_policy *p) {
    if (!p) return;
    for (int i = 0; i < p->n_globs; i++) free(p->globs[i]);
    free(p->globs);
    p->globs = NULL;
    p->n_globs = 0;
}

static ot_status parse_globs(const char *list, ot_remat_policy *p, ot_error *err) {
    int n = 1;
    for (const char *s = list; *s; s++) n += *s == ',';
    p->globs = ot_xcalloc((size_t)n, sizeof(char *));
    if (!p->globs) return ot_fail(err, OT_E_MEMORY, "remat: out of memory parsing manual:%s", list);
    const char *s = list;
    for (;;) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 0) return ot_fail(err, OT_E_USAGE, "--remat manual:%s: empty name in the list", list);
        char *name = malloc(len + 1);
        if (!name) return ot_fail(err, OT_E_MEMORY, "remat: out of memory parsing manual:%s", list);
        memcpy(name, s, len);
        name[len] = '\0';
        p->globs[p->n_globs++] = name;
        if (!e) break;
        s = e + 1;
    }
    return OT_OK;
}

ot_status ot_remat_policy_parse(const char *text, ot_remat_policy *p, ot_error *err) {
    memset(p, 0, sizeof *p);
    if (!text) text = "none";
    if (!strcmp(text, "none")) p->kind = OT_REMAT_NONE;
    else if (!strcmp(text, "all")) p->kind = OT_REMAT_ALL;
    else if (!strcmp(text, "sqrt")) p->kind = OT_REMAT_SQRT;
    else if (!strcmp(text, "selective")) p->kind = OT_REMAT_SELECTIVE;
    else if (!strcmp(text, "auto")) p->kind = OT_REMAT_AUTO;
    else if (!strcmp(text, "optimal")) p->kind = OT_REMAT_OPTIMAL;
    else if (!strncmp(text, "every:", 6)) {
        char *end = NULL;
        errno = 0;
        long k = strtol(text + 6, &end, 10);
        if (errno || end == text + 6 || *end || k < 1 || k > 1000000)
            return ot_fail(err, OT_E_USAGE, "--remat %s: K must be a whole number >= 1 (e.g. every:4)", text);
        p->kind = OT_REMAT_EVERY;
        p->every_k = (int)k;
    } else if (!strncmp(text, "manual:", 7)) {
        p->kind = OT_REMAT_MANUAL;
        ot_status st = parse_globs(text + 7, p, err);
        if (st != OT_OK) {
            ot_remat_policy_free(p);
            return st;
        }
    } else {
        return ot_fail(err, OT_E_USAGE,
                       "--remat '%s': expected none, all, sqrt, every:K, selective, manual:NAME,..., auto or optimal",
                       text);
    }
    return OT_OK;
}

const char *ot_remat_policy_str(const ot_remat_policy *p, char *buf, size_t n) {
    static const char *names[] = {"none", "all", "sqrt", "every", "selective", "manual", "auto", "optimal"};
    if (p->kind == OT_REMAT_EVERY) {
        snprintf(buf, n, "every:%d", p->every_k);
    } else if (p->kind == OT_REMAT_MANUAL) {
        size_t used = (size_t)snprintf(buf, n, "manual:");
        for (int i = 0; i < p->n_globs && used < n; i++)
            used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "," : "", p->globs[i]);
    } else {
        snprintf(buf, n, "%s", names[p->kind]);
    }
    return buf;
}

ot_status ot_parse_size(const char *text, int64_t *bytes, ot_error *err) {
    char *end = NULL;
    errno = 0;
    double x = text ? strtod(text, &end) : 0.0;
    if (!text || end == text || errno || !(x >= 0.0))
        return ot_fail(err, OT_E_USAGE, "size '%s': expected a number of bytes with an optional K, M, G or T suffix",
                       text ? text : "");
    double mul = 1.0;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024.0; end++; break;
    case 'G': mul = 1024.0 * 1024.0 * 1024.0; end++; break;
    case 'T': mul = 1024.0 * 1024.0 * 1024.0 * 1024.0; end++; break;
    default: break;
    }
    if (mul > 1.0 && (*end == 'i' || *end == 'I')) end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end)
        return ot_fail(err, OT_E_USAGE, "size '%s': unexpected '%s' (use e.g. 512M, 2G, 1.5GiB or 4096)", text, end);
    double v = x * mul;
    if (v > 9.0e18) return ot_fail(err, OT_E_USAGE, "size '%s' is too large", text);
    *bytes = (int64_t)llround(v);
    return OT_OK;
}

/* Megatron-style selective recompute: outputs of these ops are cheap to redo. */
static bool cheap_op(ot_op op) {
    return op == OT_OP_DROPOUT ||
           ot_op_has(op, OT_T_ELEMENTWISE | OT_T_NORM | OT_T_VIEW | OT_T_LAYOUT);
}

double ot_remat_saved_unit(const ot_remat_analysis *a) {
    int n_saved = 0;
    for (int v = 0; v < a->n_values; v++) n_saved += a->saved[v];
    return n_saved ? (double)a->saved_bytes / n_saved : 0.0;
}

void ot_remat_segment_keep(const ot_graph *g, const ot_remat_analysis *a, double first, double step, bool *keep) {
    double acc = 0.0, seg = first, unit = ot_remat_saved_unit(a);
    int next_art = 0;
    for (int pos = 0; pos < a->n_fwd; pos++) {
        const ot_node *n = &g->nodes[a->fwd[pos]];
        for (int o = 0; o < n->n_outputs; o++) {
            int v = n->outputs[o];
            if (v >= 0 && a->saved[v]) acc += (double)ot_remat_value_bytes(g, v);
        }
        while (next_art < a->n_art && g->values[a->art[next_art]].producer == a->fwd[pos]) {
            if (acc >= seg && acc > 0.0) {
                keep[a->art[next_art]] = true;
                acc = 0.0;
                seg = seg + step > unit ? seg + step : unit;
            }
            next_art++;
        }
    }
}

static void keep_pinned(const ot_remat_analysis *a, bool *keep) {
    for (int v = 0; v < a->n_values; v++)
        if (a->pinned[v]) keep[v] = true;
}

ot_status ot_remat_policy_keep(const ot_graph *g, const ot_remat_analysis *a, const ot_remat_policy *p,
                               bool *keep, ot_error *err) {
    memset(keep, 0, (size_t)a->n_values * sizeof(bool));
    switch (p->kind) {
    case OT_REMAT_NONE:
        for (int v = 0; v < a->n_values; v++) keep[v] = a->candidate[v];
        return OT_OK;
    case OT_REMAT_ALL:
        for (int i = 0; i < a->n_art; i++) keep[a->art[i]] = true;
        break;
    case OT_REMAT_EVERY: {
        /* Count only cuts the backward pass reads (a layer's output, not the Gemm
         * before its activation), so every:2 means every second layer or block. */
        int n_saved_art = 0, k = 0;
        for (int i = 0; i < a->n_art; i++) n_saved_art += a->saved[a->art[i]];
        for (int i = 0; i < a->n_art; i++) {
            if (n_saved_art && !a->saved[a->art[i]]) continue;
            if (++k % p->every_k == 0) keep[a->art[i]] = true;
        }
        break;
    }
    case OT_REMAT_SQRT: {
        /* Chen et al.: n saved units in segments of sqrt(n) units; here units are
         * bytes, with the mean saved value as one unit. */
        double unit = ot_remat_saved_unit(a);
        ot_remat_segment_keep(g, a, sqrt((double)a->saved_bytes * unit), 0.0, keep);
        break;
    }
    case OT_REMAT_OPTIMAL:
        return ot_fail(err, p->budget_bytes > 0 ? OT_E_INTERNAL : OT_E_USAGE,
                       p->budget_bytes > 0 ? "remat: optimal is chosen by ot_remat_optimal"
                                           : "--remat optimal needs --memory-budget SIZE: the least recompute "
                                             "cost is for a budget");
    case OT_REMAT_AUTO: /* every plan of auto's is measured: ot_remat_choose */
        return ot_fail(err, OT_E_INTERNAL, "remat: auto is chosen by ot_remat_auto or ot_remat_auto_modest");
    case OT_REMAT_SELECTIVE:
        for (int v = 0; v < a->n_values; v++)
            if (a->candidate[v] && !cheap_op(g->nodes[g->values[v].producer].op)) keep[v] = true;
        break;
    case OT_REMAT_MANUAL:
        for (int i = 0; i < p->n_globs; i++) {
            bool hit = false;
            for (int v = 0; v < a->n_values; v++)
                if (a->candidate[v] && fnmatch(p->globs[i], g->values[v].name, 0) == 0) keep[v] = hit = true;
            if (!hit)
                return ot_fail(err, OT_E_USAGE,
                               "--remat manual: '%s' matches no forward activation of '%s' (see `onnxtrain plan "
                               "--remat none` for their names)",
                               p->globs[i], g->name);
        }
        return OT_OK; /* exactly these: no pinned values added */
    }
    keep_pinned(a, keep);
    return OT_OK;
}

size_t ot_remat_stack_room(const ot_graph *g, const ot_remat_analysis *a) {
    (void)g; /* ot_remat_mark_clones pushes each node at most once */
    return (size_t)a->n_nodes + 1;
}

/* Depth-first over producers, a node marked when it is pushed, so the stack holds
 * each node at most once (ot_remat_stack_room needs no scan of the graph, which auto
 * asks for at every cost estimate) and the closure is the same as marking on pop. */
int ot_remat_mark_clones(const ot_graph *g, const ot_remat_analysis *a, const bool *keep, bool *cloned, int *stack) {
    int n_clones = 0;
    for (int root = 0; root < a->n_values; root++) {
        if (!a->saved[root] || keep[root]) continue;
        int sp = 0, p = g->values[root].producer;
        if (cloned[p]) continue;
        cloned[p] = true;
        n_clones++;
        stack[sp++] = p;
        while (sp > 0) {
            const ot_node *n = &g->nodes[stack[--sp]];
            for (int i = 0; i < n->n_inputs; i++) {
                int u = n->inputs[i];
                if (u < 0 || !a->candidate[u] || keep[u]) continue;
                int q = g->values[u].producer;
                if (cloned[q]) continue;
                cloned[q] = true;
                n_clones++;
                stack[sp++] = q;
            }
        }
    }
    return n_clones;
}

double ot_remat_keep_cost(const ot_graph *g, const ot_remat_analysis *a, const bool *keep, int *n_clones) {
    bool *cloned = ot_xcalloc((size_t)a->n_nodes, sizeof(bool));
    int *stack = ot_xcalloc(ot_remat_stack_room(g, a), sizeof(int));
    double cost = -1.0;
    if (!cloned || !stack) goto done;
    int nc = ot_remat_mark_clones(g, a, keep, cloned, stack);
    if (n_clones) *n_clones = nc;
    cost = 0.0;
    for (int id = 0; id < a->n_nodes; id++)
        if (cloned[id]) cost += a->node_flops[id];
done:
    free(cloned);
    free(stack);
    return cost;
}

int64_t ot_remat_kept_bytes_marked(const ot_graph *g, const ot_remat_analysis *a, const bool *keep,
                                   const bool *cloned, bool *held) {
    for (int v = 0; v < a->n_values; v++)
        if (a->saved[v] && keep[v]) held[v] = true;
    for (int id = 0; id < a->n_nodes; id++) {
        if (!cloned[id]) continue;
        const ot_node *n = &g->nodes[id];
        for (int i = 0; i < n->n_inputs; i++) {
            int u = n->inputs[i];
            if (u >= 0 && a->candidate[u] && keep[u]) held[u] = true;
        }
    }
    int64_t bytes = 0;
    for (int v = 0; v < a->n_values; v++)
        if (held[v]) bytes += ot_remat_value_bytes(g, v);
    return bytes;
}

int64_t ot_remat_kept_bytes(const ot_graph *g, const ot_remat_analysis *a, const bool *keep) {
    bool *cloned = ot_xcalloc((size_t)a->n_nodes, sizeof(bool));
    bool *held = ot_xcalloc((size_t)a->n_values, sizeof(bool));
    int *stack = ot_xcalloc(ot_remat_stack_room(g, a), sizeof(int));
    int64_t bytes = -1;
    if (cloned && held && stack) {
        ot_remat_mark_clones(g, a, keep, cloned, stack);
        bytes = ot_remat_kept_bytes_marked(g, a, keep, cloned, held);
    }
    free(cloned);
    free(held);
    free(stack);
    return bytes;
}
