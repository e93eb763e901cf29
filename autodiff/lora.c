/* lora.c — the LoRA rewrite of a forward graph (see lora.h): which weights get
 * adapters, and the adapter nodes y = x·W + s·((x·A)·B) after every MatMul or Gemm
 * that reads one. The rule reads shapes, attributes and consumers only, never tensor
 * data, so `info --lora` (which reads no weights) lists what `train --lora` adapts. */
#include "autodiff/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/name_pattern.h"

#define LORA_MAX_RANK 65536

ot_status ot_lora_parse(const char *text, ot_lora_options *o, ot_error *err) {
    char *end = NULL;
    long long r = strtoll(text, &end, 10);
    if (end == text || (*end && *end != ':') || r < 1 || r > LORA_MAX_RANK)
        return ot_fail(err, OT_E_USAGE, "--lora '%s': expected RANK[:ALPHA] with RANK between 1 and %d", text,
                       LORA_MAX_RANK);
    double alpha = 0;
    if (*end == ':') {
        const char *a = end + 1;
        alpha = strtod(a, &end);
        if (end == a || *end || !isfinite(alpha) || alpha <= 0)
            return ot_fail(err, OT_E_USAGE, "--lora '%s': ALPHA must be a finite number > 0", text);
    }
    o->rank = r;
    o->alpha = alpha;
    return OT_OK;
}

double ot_lora_scale(const ot_lora_options *o) {
    return o->rank > 0 ? (o->alpha > 0 ? o->alpha : (double)o->rank) / (double)o->rank : 0.0;
}

static bool is_fwd(const ot_node *n) { return !n->removed && n->phase == OT_PHASE_FORWARD; }

static bool is_initializer(const ot_graph *g, int v) {
    return v >= 0 && g->values[v].producer < 0 &&
           (g->values[v].kind == OT_VK_PARAM || g->values[v].kind == OT_VK_CONSTANT);
}

/* One MatMul/Gemm reading W as its weight: *transposed when it multiplies by W^T
 * (W stored [out, in]); `through_t` when W reaches it through a swapping Transpose.
 * NULL when it qualifies, else why not. */
static const char *weight_reader(const ot_graph *g, const ot_node *n, int slot, bool through_t, bool *transposed) {
    if (slot != 1) return "read as a MatMul/Gemm's first input";
    if (is_initializer(g, n->inputs[0])) return "multiplied by another initializer";
    if (n->op == OT_OP_MATMUL) {
        if (g->values[n->inputs[0]].shape.rank < 2) return "read by a MatMul of a 1-D input";
        *transposed = through_t;
        return NULL;
    }
    if (n->op == OT_OP_GEMM) {
        if (ot_node_attr_int(n, "transA", 0) != 0) return "read by a Gemm with transA";
        *transposed = through_t != (ot_node_attr_int(n, "transB", 0) != 0);
        return NULL;
    }
    return NULL; /* not reached: callers pass MatMul and Gemm only */
}

static bool swaps_axes(const ot_node *t) {
    int np = 0;
    const int64_t *perm = ot_node_attr_ints(t, "perm", &np);
    return !perm || (np == 2 && perm[0] == 1 && perm[1] == 0);
}

/* Calls visit(node) for every MatMul/Gemm reading W, directly or through a
 * Transpose; returns why W is not eligible (NULL: it is). *head: one of them feeds a
 * graph output. */
typedef void (*reader_fn)(void *user, int node, bool transposed);

/* Scratch for the head test: per value, seen; a stack of value ids. */
typedef struct head_scratch {
    int out;     /* the output the loss reads, -1: none */
    bool *seen;  /* n_values entries */
    int *stack;  /* n_values entries */
} head_scratch;

typedef struct walk {
    const ot_graph *g;
    int n_readers;
    bool *transposed, *head;
    head_scratch *hs; /* NULL: no head test */
    reader_fn visit;
    void *user;
} walk;

/* The head test: the loss's output depends on reader r's output through forward
 * nodes none of which is a MatMul or Gemm. */
static bool feeds_output(const ot_graph *g, const ot_node *r, head_scratch *hs) {
    if (!hs || hs->out < 0) return false;
    memset(hs->seen, 0, (size_t)g->n_values * sizeof *hs->seen);
    int n = 0;
    hs->stack[n++] = r->outputs[0];
    hs->seen[r->outputs[0]] = true;
    while (n > 0) {
        int v = hs->stack[--n];
        if (v == hs->out) return true;
        const ot_value *val = &g->values[v];
        for (int c = 0; c < val->n_consumers; c++) {
            const ot_node *m = &g->nodes[val->consumers[c]];
            if (!is_fwd(m) || m->op == OT_OP_MATMUL || m->op == OT_OP_GEMM) continue;
            for (int k = 0; k < m->n_outputs; k++) {
                int o = m->outputs[k];
                if (o < 0 || hs->seen[o]) continue;
                hs->seen[o] = true;
                hs->stack[n++] = o;
            }
        }
    }
    return false;
}

static int slot_of(const ot_node *n, int v) {
    int s = 0;
    while (s < n->n_inputs && n->inputs[s] != v) s++;
    return s;
}

/* One MatMul/Gemm r reading src (W, or its Transpose when through_t). */
static const char *reader(walk *w, const ot_node *r, int src, bool through_t) {
    if (r->op != OT_OP_MATMUL && r->op != OT_OP_GEMM)
        return through_t ? "transposed for an op other than MatMul or Gemm"
                         : "read by an op other than MatMul, Gemm or Transpose";
    bool tr = false;
    const char *why = weight_reader(w->g, r, slot_of(r, src), through_t, &tr);
    if (why) return why;
    if (w->n_readers > 0 && tr != *w->transposed) return "read both as [in, out] and as [out, in]";
    *w->transposed = tr;
    w->n_readers++;
    *w->head |= feeds_output(w->g, r, w->hs);
    if (w->visit) w->visit(w->user, r->id, tr);
    return NULL;
}

static const char *walk_readers(const ot_graph *g, int v, bool *transposed, bool *head, head_scratch *hs,
                                reader_fn visit, void *user) {
    walk w = {.g = g, .transposed = transposed, .head = head, .hs = hs, .visit = visit, .user = user};
    const ot_value *val = &g->values[v];
    *head = false;
    for (int c = 0; c < val->n_consumers; c++) {
        const ot_node *n = &g->nodes[val->consumers[c]];
        if (!is_fwd(n)) continue;
        const char *why = NULL;
        if (n->op == OT_OP_GATHER) return "read by Gather (an embedding)";
        if (n->op != OT_OP_TRANSPOSE) {
            if ((why = reader(&w, n, v, false))) return why;
            continue;
        }
        if (!swaps_axes(n)) return "read by a Transpose that does not swap its two axes";
        const ot_value *tv = &g->values[n->outputs[0]];
        for (int k = 0; k < tv->n_consumers; k++) {
            const ot_node *r = &g->nodes[tv->consumers[k]];
            if (is_fwd(r) && (why = reader(&w, r, n->outputs[0], true))) return why;
        }
    }
    return w.n_readers ? NULL : "read by no MatMul or Gemm";
}

static const char *eligible(const ot_graph *g, int v, head_scratch *hs, bool *head) {
    const ot_value *val = &g->values[v];
    bool tr = false;
    *head = false;
    if (val->kind != OT_VK_PARAM || !ot_dtype_is_float(val->dtype)) return "not a param";
    if (val->dtype != OT_F32 || val->shape.rank != 2) return "not float32 of rank 2";
    if (strlen(val->name) > 400) return "name too long";
    return walk_readers(g, v, &tr, head, hs, NULL, NULL);
}

ot_status ot_lora_targets(const ot_graph *g, const ot_lora_options *o, const char **why, ot_error *err) {
    bool *hit = ot_xcalloc((size_t)o->n_targets + 1, sizeof *hit);
    ot_name_pattern *pat = ot_xcalloc((size_t)o->n_targets + 1, sizeof *pat);
    head_scratch hs = {.out = o->output ? ot_graph_find_value(g, o->output) : g->n_outputs > 0 ? g->outputs[0] : -1,
                       .seen = ot_xcalloc((size_t)g->n_values + 1, sizeof(bool)),
                       .stack = ot_xcalloc((size_t)g->n_values + 1, sizeof(int))};
    ot_status st = OT_OK;
    int compiled = 0, n = 0;
    if (!hit || !pat || !hs.seen || !hs.stack) {
        st = ot_fail(err, OT_E_MEMORY, "lora: out of memory");
        goto done;
    }
    for (; compiled < o->n_targets; compiled++)
        if ((st = ot_name_pattern_compile(&pat[compiled], "--lora-target", o->targets[compiled], err))) goto done;
    for (int v = 0; v < g->n_values; v++) {
        bool head = false;
        why[v] = eligible(g, v, &hs, &head);
        if (why[v]) continue;
        if (o->n_targets == 0) {
            if (head) why[v] = "the head (the output reaches the loss through no other MatMul or Gemm; --lora-target adapts it)";
        } else {
            bool any = false;
            for (int i = 0; i < o->n_targets; i++)
                if (ot_name_pattern_match(&pat[i], g->values[v].name)) any = hit[i] = true;
            if (!any) why[v] = "not matched";
        }
        n += why[v] == NULL;
    }
    for (int i = 0; i < o->n_targets && !st; i++)
        if (!hit[i])
            st = ot_name_pattern_no_match(&pat[i], "--lora-target",
                                          "weight that can take an adapter (2-D float32 params read by MatMul or Gemm)",
                                          "; `onnxtrain info --lora R` lists them", err);
    if (!st && n == 0)
        st = ot_fail(err, OT_E_USAGE, "--lora: the model has no weight that takes an adapter by default (2-D float32 "
                                      "params read only by MatMul or Gemm, the head excepted); name one with "
                                      "--lora-target");
done:
    for (int i = 0; i < compiled; i++) ot_name_pattern_free(&pat[i]);
    free(pat);
    free(hit);
    free(hs.seen);
    free(hs.stack);
    return st;
}

/* ---- the rewrite ----------------------------------------------------------------- */

typedef struct rewrite {
    ot_graph *g;
    const ot_lora_adapter *ad;
    double scale;
    ot_status st;
    ot_error *err;
} rewrite;

static int add_param(ot_graph *g, const char *base, const char *suffix, int64_t d0, int64_t d1, ot_value_kind kind) {
    char name[512];
    snprintf(name, sizeof name, "%s%s", base, suffix);
    int64_t dims[2] = {d0, d1};
    ot_shape s = ot_shape_make(2, dims);
    int v = ot_graph_add_value(g, name, OT_F32, &s, kind);
    if (v < 0) return -1;
    size_t nb = (size_t)(d0 * d1) * sizeof(float);
    void *zero = calloc(nb ? nb : 1, 1);
    int rc = zero ? ot_value_set_data(&g->values[v], zero, nb) : -1;
    free(zero);
    return rc ? -1 : v;
}

/* After reader `node` (y = x·W): y_base = x·W, y = y_base + s·((x·A)·B). */
static void add_branch(rewrite *rw, int node) {
    if (rw->st) return;
    ot_graph *g = rw->g;
    const ot_node *n = &g->nodes[node];
    int x = n->inputs[0], y = n->outputs[0];
    double s = rw->scale * (n->op == OT_OP_GEMM ? ot_node_attr_float(n, "alpha", 1.0f) : 1.0);
    char nm[512], base[512];
    snprintf(base, sizeof base, "%.400s", n->name && *n->name ? n->name : g->values[y].name);
    ot_shape xs = g->values[x].shape, ys = g->values[y].shape;
    if (!ot_shape_is_static(&xs) || !ot_shape_is_static(&ys)) {
        rw->st = ot_fail(rw->err, OT_E_SHAPE, "lora: node '%s' has shapes that are not static; bind the dims first", base);
        return;
    }
    ot_shape xas = xs;
    xas.dim[xas.rank - 1] = g->values[rw->ad->a].shape.dim[1];
    ot_shape scalar = ot_shape_make(0, NULL);
    snprintf(nm, sizeof nm, "%.400s/lora_xa", base);
    int xa = ot_graph_add_value_unique(g, nm, OT_F32, &xas, OT_VK_ACTIVATION);
    snprintf(nm, sizeof nm, "%.400s/lora_xab", base);
    int xab = ot_graph_add_value_unique(g, nm, OT_F32, &ys, OT_VK_ACTIVATION);
    snprintf(nm, sizeof nm, "%.400s/lora_scaled", base);
    int sc = ot_graph_add_value_unique(g, nm, OT_F32, &ys, OT_VK_ACTIVATION);
    snprintf(nm, sizeof nm, "%.400s/lora_scale", base);
    int k = ot_graph_add_value_unique(g, nm, OT_F32, &scalar, OT_VK_CONSTANT);
    snprintf(nm, sizeof nm, "%.400s/lora_base", base);
    int yb = ot_graph_add_value_unique(g, nm, OT_F32, &ys, OT_VK_ACTIVATION);
    float kf = (float)s;
    if (xa < 0 || xab < 0 || sc < 0 || k < 0 || yb < 0 || ot_value_set_data(&g->values[k], &kf, sizeof kf)) goto oom;
    /* the reader now writes y_base; y keeps its id, name and readers */
    g->nodes[node].outputs[0] = yb;
    g->values[yb].producer = node;
    int in1[2] = {x, rw->ad->a}, in2[2] = {xa, rw->ad->b}, in3[2] = {xab, k}, in4[2] = {yb, sc};
    snprintf(nm, sizeof nm, "%.400s/lora_A", base);
    if (ot_graph_add_node(g, OT_OP_MATMUL, nm, in1, 2, &xa, 1, OT_PHASE_FORWARD) < 0) goto oom;
    snprintf(nm, sizeof nm, "%.400s/lora_B", base);
    if (ot_graph_add_node(g, OT_OP_MATMUL, nm, in2, 2, &xab, 1, OT_PHASE_FORWARD) < 0) goto oom;
    snprintf(nm, sizeof nm, "%.400s/lora_mul", base);
    if (ot_graph_add_node(g, OT_OP_MUL, nm, in3, 2, &sc, 1, OT_PHASE_FORWARD) < 0) goto oom;
    snprintf(nm, sizeof nm, "%.400s/lora_add", base);
    if (ot_graph_add_node(g, OT_OP_ADD, nm, in4, 2, &y, 1, OT_PHASE_FORWARD) < 0) goto oom;
    return;
oom:
    rw->st = ot_fail(rw->err, OT_E_MEMORY, "lora: out of memory adding the adapter of '%s'", base);
}

/* Names the adapters will take must be free, so that OT_LORA_TRAIN_PATTERN trains
 * exactly them. */
static ot_status check_names(const ot_graph *g, ot_error *err) {
    for (int v = 0; v < g->n_values; v++) {
        const char *nm = g->values[v].name;
        size_t l = nm ? strlen(nm) : 0;
        if (l >= 7 && (!strcmp(nm + l - 7, ".lora_A") || !strcmp(nm + l - 7, ".lora_B")))
            return ot_fail(err, OT_E_MODEL, "lora: the model already has a value named '%s'; adapters take such names",
                           nm);
    }
    return OT_OK;
}

/* walk_readers' visitor: counts the readers (ids NULL), then records them. */
typedef struct id_list {
    int *ids;
    int n;
} id_list;

static void record(void *user, int node, bool transposed) {
    (void)transposed;
    id_list *l = user;
    if (l->ids) l->ids[l->n] = node;
    l->n++;
}

static ot_status add_adapters(ot_graph *g, ot_lora_result *res, int w, ot_error *err) {
    bool tr = false, head = false;
    (void)walk_readers(g, w, &tr, &head, NULL, NULL, NULL);
    ot_lora_adapter *ad = &res->v[res->n];
    const char *name = g->values[w].name;
    int64_t d0 = g->values[w].shape.dim[0], d1 = g->values[w].shape.dim[1];
    *ad = (ot_lora_adapter){.base = w, .in = tr ? d1 : d0, .out = tr ? d0 : d1, .transposed = tr};
    char base[512];
    snprintf(base, sizeof base, "%s", name);
    if ((ad->a = add_param(g, base, ".lora_A", ad->in, res->rank, OT_VK_PARAM)) < 0 ||
        (ad->b = add_param(g, base, ".lora_B", res->rank, ad->out, OT_VK_PARAM)) < 0)
        return ot_fail(err, OT_E_MEMORY, "lora: out of memory adding the adapters of '%s'", base);
    res->n++;
    /* readers are collected first: the rewrite adds nodes and values as it goes */
    id_list l = {0};
    (void)walk_readers(g, w, &tr, &head, NULL, record, &l);
    if (!(l.ids = ot_xcalloc((size_t)l.n + 1, sizeof(int)))) return ot_fail(err, OT_E_MEMORY, "lora: out of memory");
    l.n = 0;
    (void)walk_readers(g, w, &tr, &head, NULL, record, &l);
    rewrite rw = {.g = g, .ad = ad, .scale = res->scale, .err = err};
    for (int i = 0; i < l.n && !rw.st; i++) {
        bool dup = false; /* a node reading W twice gets one adapter per output, once */
        for (int j = 0; j < i; j++) dup |= l.ids[j] == l.ids[i];
        if (!dup) add_branch(&rw, l.ids[i]);
    }
    free(l.ids);
    return rw.st;
}

ot_status ot_lora_apply(ot_graph *g, const ot_lora_options *o, ot_lora_result *res, ot_error *err) {
    memset(res, 0, sizeof *res);
    res->rank = o->rank;
    res->alpha = o->alpha > 0 ? o->alpha : (double)o->rank;
    res->scale = ot_lora_scale(o);
    int nv = g->n_values;
    const char **why = ot_xcalloc((size_t)nv + 1, sizeof *why);
    ot_status st = why ? OT_OK : ot_fail(err, OT_E_MEMORY, "lora: out of memory");
    if (!st) st = check_names(g, err);
    if (!st) st = ot_lora_targets(g, o, why, err);
    int n = 0;
    for (int v = 0; !st && v < nv; v++) n += why[v] == NULL;
    if (!st && !(res->v = ot_xcalloc((size_t)n + 1, sizeof *res->v)))
        st = ot_fail(err, OT_E_MEMORY, "lora: out of memory");
    for (int v = 0; !st && v < nv; v++)
        if (!why[v]) st = add_adapters(g, res, v, err);
    free(why);
    if (!st && ot_graph_relink(g)) st = ot_fail(err, OT_E_MEMORY, "lora: out of memory");
    return st;
}

void ot_lora_result_free(ot_lora_result *r) {
    free(r->v);
    memset(r, 0, sizeof *r);
}
