/* linear_ce.c — cross-entropy without the full logits (issue 28): finds the head
 * MatMul/Gemm (+ bias) that feeds the mean cross-entropy the loss builder attached
 * and replaces head and loss by one LinearCrossEntropy node, which computes the loss
 * (and its gradient op the gradients) a chunk of rows at a time, so that one chunk of
 * logits, never the whole [rows, V], exists at once (Liger's fused linear
 * cross-entropy, Apple's Cut Cross-Entropy). Runs before autodiff: the gradient rule
 * of the fused op then replaces the head's and the loss's, and remat and the planner
 * see only the fused pair.
 *
 * Patterns, as exporters write them: MatMul(H, W [D, V]); MatMul(H, Transpose(W [V,
 * D])) (nn.Linear, a tied embedding); Gemm(H, W, [bias], transB); Add(MatMul(..),
 * bias [V]) in either order; any Reshape/Flatten/Squeeze/Unsqueeze/Identity between
 * the head and the loss; the loss SoftmaxCrossEntropyLoss or
 * NegativeLogLikelihoodLoss(LogSoftmax), mean, without class weights; a Cast to the
 * dtype the logits already have (LLaMA's logits.float()) counts as a view. Every value
 * between head and loss must feed only the next step of the chain.
 *
 * Under --precision bf16/fp16 the autocast pass has already made the head a low GEMM:
 * MatMul(Cast(H), Transpose(Cast(W))) and a Cast up of its logits. The fused node then
 * reads the float32 H and W those Casts read (the head runs in float32, a chunk at a
 * time), and a Cast left with no reader is removed: the low copies are not made. */
#include "autodiff/autodiff.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static bool is_view(ot_op op) {
    return op == OT_OP_RESHAPE || op == OT_OP_FLATTEN || op == OT_OP_SQUEEZE || op == OT_OP_UNSQUEEZE ||
           op == OT_OP_IDENTITY;
}

static bool skip(ot_linear_ce_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool skip(ot_linear_ce_result *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
    return false;
}

/* The node producing v when v exists and feeds exactly one node slot; else NULL. */
static const ot_node *only_producer(const ot_graph *g, int v) {
    if (v < 0 || g->values[v].producer < 0 || g->values[v].n_consumers != 1) return NULL;
    return &g->nodes[g->values[v].producer];
}

static bool is_output_of_graph(const ot_graph *g, int v) {
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v) return true;
    return false;
}

typedef struct match {
    int loss_node, h, w, bias, labels;
    bool trans_w;
    int low_casts[3]; /* autocast's Casts the head read through, removed once unread */
    int n_low_casts;
    int drop[OT_MAX_RANK * 2 + 8]; /* nodes replaced by the fused one */
    int n_drop;
    int logits; /* the head's output, dropped from g->outputs when listed there */
} match;

static bool push(match *m, int node) {
    if (m->n_drop >= (int)(sizeof m->drop / sizeof m->drop[0])) return false;
    m->drop[m->n_drop++] = node;
    return true;
}

/* v's float32 source when v is a Cast of a float32 value down to bf16/fp16 (autocast's
 * copy of a GEMM operand), noted in m; else v. */
static int float32_source(const ot_graph *g, int v, match *m) {
    const ot_node *c = v >= 0 && g->values[v].producer >= 0 ? &g->nodes[g->values[v].producer] : NULL;
    if (!c || c->op != OT_OP_CAST || c->inputs[0] < 0 || g->values[c->inputs[0]].dtype != OT_F32 ||
        (g->values[v].dtype != OT_BF16 && g->values[v].dtype != OT_F16) || is_output_of_graph(g, v) ||
        m->n_low_casts >= (int)(sizeof m->low_casts / sizeof m->low_casts[0]))
        return v;
    m->low_casts[m->n_low_casts++] = c->id;
    return c->inputs[0];
}

/* A 1-D float [V] value, as the bias of a head of V classes. */
static bool bias_fits(const ot_graph *g, int b, int64_t V) {
    const ot_value *bv = &g->values[b];
    return bv->dtype == OT_F32 && bv->shape.rank == 1 && bv->shape.dim[0] == V;
}

/* The head at value v (the logits, views walked off): MatMul, Gemm or Add(MatMul, bias). */
static bool match_head(const ot_graph *g, int v, int64_t V, match *m, const int *outs_ok, ot_linear_ce_result *r) {
    const ot_node *p = &g->nodes[g->values[v].producer];
    if (p->op == OT_OP_ADD) {
        int b = -1, x = -1;
        for (int k = 0; k < 2; k++) {
            const ot_value *xv = &g->values[p->inputs[k]];
            if (xv->producer >= 0 && g->nodes[xv->producer].op == OT_OP_MATMUL && xv->n_consumers == 1 &&
                bias_fits(g, p->inputs[1 - k], V))
                x = p->inputs[k], b = p->inputs[1 - k];
        }
        if (x < 0) return skip(r, "the head is an Add that is not MatMul + a [%lld] bias", (long long)V);
        if (is_output_of_graph(g, x) && x != outs_ok[0])
            return skip(r, "'%s' is a model output that the chunked loss would not compute", g->values[x].name);
        m->bias = b;
        if (!push(m, p->id)) return skip(r, "the chain from head to loss is too long");
        p = &g->nodes[g->values[x].producer];
    }
    if (p->op == OT_OP_GEMM) {
        if (ot_node_attr_int(p, "transA", 0) || ot_node_attr_float(p, "alpha", 1.0f) != 1.0f ||
            ot_node_attr_float(p, "beta", 1.0f) != 1.0f)
            return skip(r, "the head Gemm '%s' has transA, alpha or beta", p->name);
        if (p->n_inputs > 2 && p->inputs[2] >= 0) {
            if (m->bias >= 0 || !bias_fits(g, p->inputs[2], V))
                return skip(r, "the head Gemm '%s' has a bias that is not [%lld]", p->name, (long long)V);
            m->bias = p->inputs[2];
        }
        m->trans_w = ot_node_attr_int(p, "transB", 0) != 0;
    } else if (p->op != OT_OP_MATMUL) {
        return skip(r, "the logits come from %s '%s', not a MatMul/Gemm head", p->op_type, p->name);
    }
    m->h = float32_source(g, p->inputs[0], m);
    m->w = p->inputs[1];
    if (!push(m, p->id)) return skip(r, "the chain from head to loss is too long");
    const ot_node *t = only_producer(g, m->w);
    int np = 0;
    const int64_t *perm = t && t->op == OT_OP_TRANSPOSE ? ot_node_attr_ints(t, "perm", &np) : NULL;
    if (t && t->op == OT_OP_TRANSPOSE && (!perm || (np == 2 && perm[0] == 1 && perm[1] == 0)) &&
        !is_output_of_graph(g, m->w)) { /* nn.Linear's (or a tied embedding's) Transpose */
        m->w = t->inputs[0];
        m->trans_w = !m->trans_w;
        if (!push(m, t->id)) return skip(r, "the chain from head to loss is too long");
    }
    m->w = float32_source(g, m->w, m);
    const ot_value *hv = &g->values[m->h], *wv = &g->values[m->w];
    if (hv->dtype != OT_F32 || wv->dtype != OT_F32)
        return skip(r, "the head is %s, not float32", ot_dtype_name(hv->dtype != OT_F32 ? hv->dtype : wv->dtype));
    if (wv->shape.rank != 2 || wv->shape.dim[m->trans_w ? 0 : 1] != V)
        return skip(r, "the head's weight '%s' is not a 2-D matrix of %lld classes", wv->name, (long long)V);
    if (hv->shape.rank < 1 || hv->shape.dim[hv->shape.rank - 1] != wv->shape.dim[m->trans_w ? 1 : 0])
        return skip(r, "the head's input '%s' does not match its weight", hv->name);
    return true;
}

/* Matches the loss node producing loss_value back to its head. */
static bool match_all(const ot_graph *g, int loss_value, int out_value, match *m, ot_linear_ce_result *r) {
    int ln = g->values[loss_value].producer;
    if (ln < 0) return skip(r, "the loss is a model output, not a cross-entropy the loss builder attached");
    const ot_node *L = &g->nodes[ln];
    m->loss_node = ln;
    push(m, ln);
    int scores = L->inputs[0];
    bool nll = L->op == OT_OP_NLL_LOSS;
    if (L->op != OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS && !nll) return skip(r, "the loss is not cross-entropy");
    if ((L->n_inputs > 2 && L->inputs[2] >= 0) || (L->n_outputs > 1 && L->outputs[1] >= 0))
        return skip(r, "the loss has class weights or a log_prob output");
    if (strcmp(ot_node_attr_string(L, "reduction", "mean"), "mean") != 0)
        return skip(r, "the loss's reduction is not mean");
    const ot_shape *ss = &g->values[scores].shape;
    if (ss->rank != 2 || ss->dim[0] < 0 || ss->dim[1] < 0)
        return skip(r, "the loss's scores are not [rows, classes] with known dims (classes not on the last axis)");
    int64_t V = ss->dim[1], rows = ss->dim[0];
    m->labels = L->inputs[1];
    if (ot_shape_numel(&g->values[m->labels].shape) != rows) return skip(r, "the labels are not one per row");
    if (nll) { /* NLL(LogSoftmax(x, last axis)) is SoftmaxCrossEntropy(x) */
        const ot_node *s = only_producer(g, scores);
        int64_t ax = s ? ot_node_attr_int(s, "axis", -1) : 0;
        if (!s || s->op != OT_OP_LOG_SOFTMAX || (ax != -1 && ax != 1))
            return skip(r, "the NegativeLogLikelihoodLoss does not read a LogSoftmax over the classes");
        push(m, s->id);
        scores = s->inputs[0];
    }
    int v = scores, outs_ok[1] = {out_value};
    while (true) {
        if (g->values[v].n_consumers != 1)
            return skip(r, "'%s' (the logits) is read by %d nodes besides the loss", g->values[v].name,
                        g->values[v].n_consumers - 1);
        if (is_output_of_graph(g, v) && v != out_value)
            return skip(r, "'%s' is a model output that the chunked loss would not compute", g->values[v].name);
        if (g->values[v].producer < 0) return skip(r, "the logits '%s' are an input", g->values[v].name);
        const ot_node *p = &g->nodes[g->values[v].producer];
        /* a Cast to the dtype it already has (LLaMA's logits.float()) moves nothing either */
        bool same_cast =
            p->op == OT_OP_CAST && p->inputs[0] >= 0 && g->values[p->inputs[0]].dtype == g->values[v].dtype;
        /* and autocast's Cast up of a low head's logits: the fused node computes them in float32 */
        bool cast_up = p->op == OT_OP_CAST && p->inputs[0] >= 0 && g->values[v].dtype == OT_F32 &&
                       (g->values[p->inputs[0]].dtype == OT_BF16 || g->values[p->inputs[0]].dtype == OT_F16);
        if (!is_view(p->op) && !same_cast && !cast_up) break;
        if (!push(m, p->id)) return skip(r, "the chain from head to loss is too long");
        v = p->inputs[0];
    }
    const ot_shape *ls = &g->values[v].shape;
    if (ls->rank < 1 || ls->dim[ls->rank - 1] != V || ot_shape_numel(ls) != rows * V)
        return skip(r, "the views between head and loss move the classes off the last axis");
    m->logits = v;
    r->rows = rows;
    r->vocab = V;
    return match_head(g, v, V, m, outs_ok, r);
}

ot_status ot_off_auto_on_parse(const char *opt, const char *s, int *out, ot_error *err) {
    if (strcmp(s, "off") == 0)
        *out = 0;
    else if (strcmp(s, "auto") == 0)
        *out = 1;
    else if (strcmp(s, "on") == 0)
        *out = 2;
    else
        return ot_fail(err, OT_E_USAGE, "%s '%s': expected off, on or auto", opt, s);
    return OT_OK;
}

_Static_assert(OT_CHUNKED_LOSS_OFF == 0 && OT_CHUNKED_LOSS_AUTO == 1 && OT_CHUNKED_LOSS_ON == 2,
               "ot_off_auto_on_parse's order");

ot_status ot_chunked_loss_parse(const char *opt, const char *s, ot_chunked_loss_mode *out, ot_error *err) {
    int m = 0;
    ot_status st = ot_off_auto_on_parse(opt, s, &m, err);
    if (!st) *out = (ot_chunked_loss_mode)m;
    return st;
}

int64_t ot_linear_ce_default_chunk(int64_t rows, int64_t vocab) {
    /* the largest power of two whose chunk of logits stays within 16 MiB: big enough
     * that each chunk's GEMM reads the weight for many rows at once */
    int64_t c = 1;
    while (c * 2 * vocab * (int64_t)sizeof(float) <= ((int64_t)16 << 20))
        c *= 2;
    return c < rows ? c : rows;
}

ot_status ot_linear_ce_rewrite(ot_graph *g, int loss_value, int out_value, const ot_linear_ce_options *o,
                               ot_linear_ce_result *r, ot_error *err) {
    memset(r, 0, sizeof *r);
    if (o->mode == OT_CHUNKED_LOSS_OFF) {
        skip(r, "--chunked-loss off");
        return OT_OK;
    }
    if (o->keep_logits) {
        skip(r, "%s reads the logits", o->keep_logits);
        return OT_OK;
    }
    match m = {.bias = -1, .h = -1, .w = -1, .logits = -1};
    if (loss_value < 0 || !match_all(g, loss_value, out_value, &m, r)) return OT_OK;
    int64_t chunk = o->chunk_rows > 0 ? o->chunk_rows : ot_linear_ce_default_chunk(r->rows, r->vocab);
    if (chunk > r->rows) chunk = r->rows;
    r->chunk_rows = chunk;
    r->logits_bytes = (size_t)(r->rows * r->vocab) * sizeof(float);
    if (o->mode == OT_CHUNKED_LOSS_AUTO && chunk >= r->rows) {
        skip(r, "one chunk of %lld rows holds all %lld rows of logits: nothing to save", (long long)chunk,
             (long long)r->rows);
        return OT_OK;
    }
    const ot_node *L = &g->nodes[m.loss_node];
    bool has_ig = ot_node_attr(L, "ignore_index") != NULL;
    int64_t ig = ot_node_attr_int(L, "ignore_index", 0);
    char name[512];
    snprintf(name, sizeof name, "%s/linear_cross_entropy", L->name);
    for (int k = 0; k < m.n_drop; k++) { /* their outputs, the logits among them, are no model outputs now */
        const ot_node *d = &g->nodes[m.drop[k]];
        for (int j = 0; j < d->n_outputs; j++)
            if (d->outputs[j] >= 0 && d->outputs[j] != loss_value) g->values[d->outputs[j]].is_graph_output = false;
        ot_graph_remove_node(g, m.drop[k]);
    }
    int in[4] = {m.h, m.w, m.labels, m.bias};
    int n =
        ot_graph_add_node(g, OT_OP_LINEAR_CROSS_ENTROPY, name, in, m.bias >= 0 ? 4 : 3, &loss_value, 1, OT_PHASE_LOSS);
    if (n < 0 || ot_node_set_attr_int(&g->nodes[n], "chunk_rows", chunk) ||
        ot_node_set_attr_int(&g->nodes[n], "trans_w", m.trans_w) ||
        (has_ig && ot_node_set_attr_int(&g->nodes[n], "ignore_index", ig)))
        return ot_fail(err, OT_E_MEMORY, "chunked cross-entropy: out of memory");
    /* the logits no longer exist: no model output to read */
    int k = 0;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] != m.logits && g->outputs[i] != out_value) g->outputs[k++] = g->outputs[i];
    g->n_outputs = k;
    for (int c = 0; c < m.n_low_casts; c++) { /* a low copy only the head read is not made */
        const ot_node *cn = &g->nodes[m.low_casts[c]];
        if (!cn->removed && g->values[cn->outputs[0]].n_consumers == 0 &&
            !is_output_of_graph(g, cn->outputs[0]))
            ot_graph_remove_node(g, m.low_casts[c]);
    }
    r->applied = true;
    r->node = n;
    r->has_bias = m.bias >= 0;
    r->trans_w = m.trans_w;
    snprintf(r->why, sizeof r->why, "'%s' x '%s'%s%s -> loss in chunks of %lld of %lld rows x %lld classes",
             g->values[m.h].name, g->values[m.w].name, m.trans_w ? "^T" : "", m.bias >= 0 ? " + bias" : "",
             (long long)chunk, (long long)r->rows, (long long)r->vocab);
    if (m.n_low_casts) { /* said, as the precision line counted the head low */
        size_t len = strlen(r->why);
        snprintf(r->why + len, sizeof r->why - len, ", the head in float32");
    }
    return OT_OK;
}
