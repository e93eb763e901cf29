/* fused_attn.c — attention that keeps no probabilities (issue 27, issue 28): finds the
 * scaled-dot-product pattern exporters write and replaces it by one internal
 * Attention node (ir/ops.def), whose gradient op recomputes the probabilities from Q
 * and K a head at a time. The plain graph keeps the Softmax output (float32, B x H x
 * S x T) for SoftmaxGrad, Dropout's mask and output for the second MatMul's gradient;
 * the fused node keeps only Q, K, V and the mask. Runs before autocast and autodiff,
 * as linear_ce.c does: autocast then puts the fused node on its low list, and the
 * gradient rule of Attention replaces the five nodes' rules.
 *
 * Pattern (torch.onnx.export of HF GPT-2, BERT, LLaMA; the dynamo exporter), read from
 * the Softmax outwards:
 *   MatMul(Q [B,H,S,D], K^T [B,H,D,T]) -> [Div(c) | Mul(c)] -> [Where(cond, s, fill) or
 *   masked_fill's Where(cond, fill, s)]
 *   -> [Add(s, M)] (either order of Where and Add) -> Softmax(axis -1) -> [Cast to
 *   float32] -> [Dropout] -> MatMul(P, V [B,H,T,Dv])
 * where c is a scalar constant, fill a scalar constant at most -1e30 (finfo.min or
 * -inf: such a score's probability is 0 either way), cond bool, M float32, both
 * broadcasting to the scores with a last dim of T. K^T made by a Transpose is read
 * through it (a Transpose of K's source is added when the perm does not already give
 * [B,H,T,D]). Every value between the first MatMul and the last must feed only the
 * next step; a Cast from float32 to float32 anywhere in the chain (GPT-2's .to(dtype))
 * is a view. Where and Add together become one float mask Where(cond, M, fill).
 *
 * Dropout: the fused node draws the same counter-based bits (Philox keyed by the
 * Dropout node's id, indexed by the element of [B,H,S,T]; its attribute rng_node),
 * so the kept probabilities and their gradients are those of the plain graph. */
#include "autodiff/autodiff.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

_Static_assert(OT_FUSED_ATTN_OFF == 0 && OT_FUSED_ATTN_AUTO == 1 && OT_FUSED_ATTN_ON == 2,
               "ot_off_auto_on_parse's order");

ot_status ot_fused_attn_parse(const char *opt, const char *s, ot_fused_attn_mode *out, ot_error *err) {
    int m = 0;
    ot_status st = ot_off_auto_on_parse(opt, s, &m, err);
    if (!st) *out = (ot_fused_attn_mode)m;
    return st;
}

typedef struct amatch {
    const char *why; /* why this Softmax was left alone */
    int nodes[12], n_nodes; /* the nodes the fused one replaces */
    int q, kt, v, y, cond, fmask, fill, dropout, kt_src;
    bool inverted; /* Where(cond, fill, s): masked_fill's form, cond marks the hidden scores */
    const int64_t *kt_perm; /* the Transpose making K^T, NULL: none */
    double scale;
    float ratio;
} amatch;

static bool no(amatch *m, const char *why) {
    m->why = why;
    return false;
}

static bool push(amatch *m, int node) {
    if (m->n_nodes >= (int)(sizeof m->nodes / sizeof m->nodes[0])) return false;
    m->nodes[m->n_nodes++] = node;
    return true;
}

/* v feeds exactly one node slot and is no graph output: the chain may swallow it. */
static bool inner(const ot_graph *g, int v) {
    return v >= 0 && g->values[v].n_consumers == 1 && !g->values[v].is_graph_output;
}

static const ot_node *producer(const ot_graph *g, int v) {
    return v >= 0 && g->values[v].producer >= 0 ? &g->nodes[g->values[v].producer] : NULL;
}

/* A one-element float constant's value. The dynamo exporter stores the attention
 * scale, the mask fill and Dropout's ratio as rank-0 float initializers, which the
 * importer reads as params: the param rule (params_rule.c) makes every rank-0 one a
 * constant ("scalar") unless --train names it, and the rewrite runs before that rule,
 * so a rank-0 param counts as a constant here (drop_orphan_scalars below). */
static bool scalar_const(const ot_graph *g, int v, double *x) {
    if (v < 0) return false;
    const ot_value *val = &g->values[v];
    bool scalar_param = val->kind == OT_VK_PARAM && val->shape.rank == 0;
    if ((val->kind != OT_VK_CONSTANT && !scalar_param) || !val->data || ot_shape_numel(&val->shape) != 1)
        return false;
    if (val->dtype == OT_F32 && val->nbytes >= sizeof(float)) {
        float f;
        memcpy(&f, val->data, sizeof f);
        *x = f;
        return true;
    }
    if (val->dtype == OT_F64 && val->nbytes >= sizeof(double)) {
        memcpy(x, val->data, sizeof *x);
        return true;
    }
    return false;
}

static bool dim_same(const ot_shape *a, int i, const ot_shape *b, int j) {
    if (a->dim[i] >= 0) return a->dim[i] == b->dim[j];
    return a->sym[i] >= 0 && a->sym[i] == b->sym[j];
}

static bool dim_one(const ot_shape *s, int i) { return s->dim[i] == 1; }

/* A mask broadcasting to the scores [B,H,S,T] with last dim T. */
static bool mask_fits(const ot_graph *g, int v, const ot_shape *sc) {
    const ot_shape *m = &g->values[v].shape;
    if (m->rank < 1 || m->rank > 4 || !dim_same(m, m->rank - 1, sc, 3)) return false;
    for (int k = 1; k < m->rank; k++) {
        int md = m->rank - 1 - k, sd = 3 - k;
        if (!dim_one(m, md) && !dim_same(m, md, sc, sd)) return false;
    }
    return true;
}

/* Dropout's ratio and training flag as constants (attributes or opset-12 inputs). */
static bool dropout_ratio(const ot_graph *g, const ot_node *d, float *ratio, bool *training) {
    const ot_attr *r = ot_node_attr(d, "ratio"), *t = ot_node_attr(d, "training_mode");
    double x = 0.5;
    if (r && r->type == OT_ATTR_FLOAT) x = r->f;
    else if (d->n_inputs > 1 && d->inputs[1] >= 0 && !scalar_const(g, d->inputs[1], &x)) return false;
    *ratio = (float)x;
    *training = false;
    if (t && t->type == OT_ATTR_INT) *training = t->i != 0;
    else if (d->n_inputs > 2 && d->inputs[2] >= 0) {
        const ot_value *tv = &g->values[d->inputs[2]];
        if (tv->kind != OT_VK_CONSTANT || !tv->data || tv->nbytes < 1 || tv->dtype != OT_BOOL) return false;
        *training = ((const uint8_t *)tv->data)[0] != 0;
    }
    return true;
}

/* From the Softmax down: [Cast to float32], [Dropout], MatMul(P, V). */
static bool match_down(const ot_graph *g, const ot_node *sm, amatch *m) {
    int p = sm->outputs[0];
    for (;;) {
        if (!inner(g, p)) return no(m, "the probabilities are read by more than one node");
        const ot_node *c = &g->nodes[g->values[p].consumers[0]];
        if (c->op == OT_OP_CAST && g->values[c->outputs[0]].dtype == OT_F32) {
            push(m, c->id);
            p = c->outputs[0];
        } else if (c->op == OT_OP_DROPOUT && m->dropout < 0) {
            bool training;
            if (c->n_outputs > 1 && c->outputs[1] >= 0 &&
                (g->values[c->outputs[1]].n_consumers || g->values[c->outputs[1]].is_graph_output))
                return no(m, "the attention Dropout's mask is read");
            if (!dropout_ratio(g, c, &m->ratio, &training)) return no(m, "the Dropout's ratio or mode is not constant");
            if (!training) m->ratio = 0.0f;
            if (!(m->ratio >= 0.0f && m->ratio < 1.0f)) return no(m, "the Dropout's ratio is outside [0, 1)");
            if (m->ratio > 0.0f) m->dropout = c->id;
            push(m, c->id);
            p = c->outputs[0];
        } else if (c->op == OT_OP_MATMUL && c->inputs[0] == p) {
            push(m, c->id);
            m->v = c->inputs[1];
            m->y = c->outputs[0];
            return true;
        } else
            return no(m, "the probabilities do not feed a MatMul (P x V)");
    }
}

/* From the Softmax up: [Add mask] [Where mask] (either order), [scale], MatMul(Q, K^T). */
static bool match_up(const ot_graph *g, const ot_node *sm, amatch *m) {
    int s = sm->inputs[0], add_m = -1;
    bool scaled = false;
    const ot_shape *sc = &g->values[s].shape;
    for (;;) {
        const ot_node *p = producer(g, s);
        if (!p || !inner(g, s)) return no(m, "the scores are read elsewhere or not computed");
        if (p->op == OT_OP_MATMUL) {
            push(m, p->id);
            m->q = p->inputs[0];
            m->kt = p->inputs[1];
            break;
        }
        if (p->op == OT_OP_CAST && g->values[p->inputs[0]].dtype == OT_F32) { /* GPT-2's .to(dtype) */
            s = p->inputs[0];
        } else if (p->op == OT_OP_ADD && !scaled && add_m < 0) {
            int k = producer(g, p->inputs[0]) && ot_shape_equal(&g->values[p->inputs[0]].shape, sc) ? 0 : 1;
            add_m = p->inputs[1 - k];
            if (g->values[add_m].dtype != OT_F32 || !mask_fits(g, add_m, sc))
                return no(m, "the added mask does not broadcast to the scores");
            s = p->inputs[k];
        } else if (p->op == OT_OP_WHERE && !scaled && m->cond < 0) {
            double fill;
            m->inverted = scalar_const(g, p->inputs[1], &fill); /* masked_fill(mask, -inf) */
            if (!scalar_const(g, p->inputs[m->inverted ? 1 : 2], &fill) || !(fill <= -1e30))
                return no(m, "a Where over the scores whose fill is not a constant <= -1e30");
            m->cond = p->inputs[0];
            m->fill = p->inputs[m->inverted ? 1 : 2];
            if (g->values[m->cond].dtype != OT_BOOL || !mask_fits(g, m->cond, sc))
                return no(m, "the Where's condition does not broadcast to the scores");
            s = p->inputs[m->inverted ? 2 : 1];
        } else if ((p->op == OT_OP_DIV || p->op == OT_OP_MUL) && !scaled) {
            double c;
            int k = p->op == OT_OP_MUL && scalar_const(g, p->inputs[0], &c) ? 1 : 0;
            if (!scalar_const(g, p->inputs[1 - k], &c) || !(c != 0.0) || !isfinite(c))
                return no(m, "the scores are scaled by something other than a constant");
            m->scale *= p->op == OT_OP_DIV ? 1.0 / c : c;
            scaled = true;
            s = p->inputs[k];
        } else
            return no(m, "the scores are not MatMul -> [scale] -> [Where / Add mask] -> Softmax");
        push(m, p->id);
    }
    if (add_m >= 0 && m->cond >= 0) m->fmask = add_m; /* combined below */
    else if (add_m >= 0) m->fmask = add_m;
    return true;
}

/* Q [B,H,S,D], K^T [B,H,D,T], V [B,H,T,Dv]: same batch and heads, float32. */
static bool operands_fit(const ot_graph *g, amatch *m, const ot_shape *sc) {
    const ot_shape *q = &g->values[m->q].shape, *kt = &g->values[m->kt].shape, *v = &g->values[m->v].shape;
    if (q->rank != 4 || kt->rank != 4 || v->rank != 4) return no(m, "Q, K^T and V are not all 4-D [batch, heads, ..]");
    for (int d = 0; d < 2; d++)
        if (!dim_same(q, d, kt, d) || !dim_same(q, d, v, d) || !dim_same(q, d, sc, d))
            return no(m, "Q, K^T and V differ in batch or heads (broadcast heads are left alone)");
    if (!dim_same(kt, 3, v, 2)) return no(m, "K^T's and V's key counts differ");
    if (g->values[m->q].dtype != OT_F32 || g->values[m->kt].dtype != OT_F32 || g->values[m->v].dtype != OT_F32)
        return no(m, "Q, K^T or V is not float32");
    const ot_node *t = producer(g, m->kt);
    if (t && t->op == OT_OP_TRANSPOSE && inner(g, m->kt)) {
        int n = 0;
        const int64_t *perm = ot_node_attr_ints(t, "perm", &n);
        if (perm && n == 4) {
            m->kt_perm = perm;
            m->kt_src = t->inputs[0];
            push(m, t->id);
        }
    }
    return true;
}

/* The value K [B,H,T,D]: K^T's Transpose source when its perm gives that, else a new
 * Transpose (of the source, or of K^T). -1 on allocation failure. */
static int make_k(ot_graph *g, const amatch *m, const char *base) {
    static const int swap[4] = {0, 1, 3, 2};
    int64_t perm[4];
    int src = m->kt_perm ? m->kt_src : m->kt;
    bool ident = true;
    for (int k = 0; k < 4; k++) {
        perm[k] = m->kt_perm ? m->kt_perm[swap[k]] : swap[k];
        ident = ident && perm[k] == k;
    }
    if (ident) return src;
    const ot_shape *ss = &g->values[src].shape;
    ot_shape ks = *ss;
    for (int k = 0; k < 4; k++)
        ks.dim[k] = ss->dim[perm[k]], ks.sym[k] = ss->sym[perm[k]];
    char name[512];
    snprintf(name, sizeof name, "%s/K", base);
    int kv = ot_graph_add_value_unique(g, name, OT_F32, &ks, OT_VK_ACTIVATION);
    if (kv < 0) return -1;
    int n = ot_graph_add_node(g, OT_OP_TRANSPOSE, name, &src, 1, &kv, 1, OT_PHASE_FORWARD);
    if (n < 0 || ot_node_set_attr_ints(&g->nodes[n], "perm", perm, 4)) return -1;
    return kv;
}

/* masked_fill's condition alone: Not(cond), the scores kept; -1 on failure. */
static int make_keep_mask(ot_graph *g, const amatch *m, const char *base) {
    char name[512];
    snprintf(name, sizeof name, "%s/keep", base);
    int kv = ot_graph_add_value_unique(g, name, OT_BOOL, &g->values[m->cond].shape, OT_VK_ACTIVATION);
    if (kv < 0 || ot_graph_add_node(g, OT_OP_NOT, name, &m->cond, 1, &kv, 1, OT_PHASE_FORWARD) < 0) return -1;
    return kv;
}

/* Where and Add together: Where(cond, M, fill) (masked_fill's form: Where(cond, fill,
 * M)), broadcast over both; -1 on failure. */
static int make_float_mask(ot_graph *g, const amatch *m, const char *base) {
    const ot_shape *a = &g->values[m->cond].shape, *b = &g->values[m->fmask].shape;
    ot_shape s = a->rank >= b->rank ? *a : *b;
    const ot_shape *o = a->rank >= b->rank ? b : a;
    for (int k = 1; k <= o->rank; k++) {
        int sd = s.rank - k, od = o->rank - k;
        if (dim_one(&s, sd)) s.dim[sd] = o->dim[od], s.sym[sd] = o->sym[od];
    }
    char name[512];
    snprintf(name, sizeof name, "%s/mask", base);
    int mv = ot_graph_add_value_unique(g, name, OT_F32, &s, OT_VK_ACTIVATION);
    int in[3] = {m->cond, m->inverted ? m->fill : m->fmask, m->inverted ? m->fmask : m->fill};
    if (mv < 0 || ot_graph_add_node(g, OT_OP_WHERE, name, in, 3, &mv, 1, OT_PHASE_FORWARD) < 0) return -1;
    return mv;
}

static bool matches(const ot_graph *g, const ot_node *sm, amatch *m) {
    memset(m, 0, sizeof *m);
    m->cond = m->fmask = m->fill = m->dropout = m->kt_src = -1;
    m->scale = 1.0;
    if (sm->n_inputs < 1 || sm->inputs[0] < 0) return no(m, "no input");
    const ot_value *x = &g->values[sm->inputs[0]];
    int64_t axis = ot_node_attr_int(sm, "axis", g->opset >= 13 ? -1 : 1);
    if (x->shape.rank != 4 || (axis != -1 && axis != 3)) return no(m, "not a Softmax over the last axis of 4-D scores");
    if (x->dtype != OT_F32) return no(m, "the scores are not float32");
    push(m, sm->id);
    return match_up(g, sm, m) && match_down(g, sm, m) && operands_fit(g, m, &x->shape);
}

/* Replaces the matched nodes by Attention(Q, K, V [, mask]) -> y. */
static ot_status fuse(ot_graph *g, int sm_id, const amatch *m, ot_error *err) {
    char base[400];
    snprintf(base, sizeof base, "%s/fused_attention", g->nodes[sm_id].name);
    for (int k = 0; k < m->n_nodes; k++)
        ot_graph_remove_node(g, m->nodes[k]);
    int k = make_k(g, m, base), mask = m->fmask;
    if (m->cond >= 0)
        mask = m->fmask >= 0 ? make_float_mask(g, m, base) : m->inverted ? make_keep_mask(g, m, base) : m->cond;
    int in[4] = {m->q, k, m->v, mask}, n = -1;
    if (k >= 0 && (m->cond < 0 || mask >= 0))
        n = ot_graph_add_node(g, OT_OP_ATTENTION, base, in, mask >= 0 ? 4 : 3, &m->y, 1, OT_PHASE_FORWARD);
    if (n < 0 || ot_node_set_attr_float(&g->nodes[n], "scale", (float)m->scale) ||
        (m->dropout >= 0 && (ot_node_set_attr_float(&g->nodes[n], "dropout_ratio", m->ratio) ||
                             ot_node_set_attr_int(&g->nodes[n], "rng_node", m->dropout))))
        return ot_fail(err, OT_E_MEMORY, "--fused-attention: out of memory");
    return OT_OK;
}

/* The rank-0 params the fused nodes took as their scale, fill or ratio and that
 * nothing reads any more: constants, as the importer's normalize makes unread params,
 * so `--train` naming one is told it matches no parameter rather than training a
 * value the fused node holds as an attribute. */
static void drop_orphan_scalars(ot_graph *g) {
    for (int v = 0; v < g->n_values; v++) {
        ot_value *val = &g->values[v];
        if (val->kind == OT_VK_PARAM && val->shape.rank == 0 && val->n_consumers == 0 && !val->is_graph_output)
            val->kind = OT_VK_CONSTANT;
    }
}

ot_status ot_fused_attn_rewrite(ot_graph *g, ot_fused_attn_mode mode, ot_fused_attn_result *r, ot_error *err) {
    memset(r, 0, sizeof *r);
    if (mode == OT_FUSED_ATTN_OFF) {
        snprintf(r->why, sizeof r->why, "--fused-attention off");
        return OT_OK;
    }
    const char *first_why = NULL;
    int n_nodes = g->n_nodes; /* the nodes added below are no Softmax */
    for (int i = 0; i < n_nodes; i++) {
        const ot_node *sm = &g->nodes[i];
        if (sm->removed || sm->op != OT_OP_SOFTMAX) continue;
        amatch m;
        if (!matches(g, sm, &m)) {
            r->n_skipped++;
            if (!first_why) {
                snprintf(r->first_skip, sizeof r->first_skip, "'%s': %s", sm->name, m.why);
                first_why = r->first_skip;
            }
            continue;
        }
        const ot_shape *sc = &g->values[sm->inputs[0]].shape, *q = &g->values[m.q].shape;
        /* auto: only where the scores per head outnumber Q's elements (T > D), so that
         * keeping Q, K, V instead of P saves memory */
        if (mode == OT_FUSED_ATTN_AUTO && !(sc->dim[3] > q->dim[3] && q->dim[3] > 0)) {
            r->n_skipped++;
            if (!first_why) {
                snprintf(r->first_skip, sizeof r->first_skip, "'%s': keys (%lld) not more than the head size", sm->name,
                         (long long)sc->dim[3]);
                first_why = r->first_skip;
            }
            continue;
        }
        int64_t numel = ot_shape_numel(sc);
        if (numel > 0) r->prob_bytes += (size_t)numel * sizeof(float);
        if (m.dropout >= 0) r->n_dropout++;
        ot_status st = fuse(g, i, &m, err);
        if (st) return st;
        r->n_fused++;
    }
    if (r->n_fused) drop_orphan_scalars(g);
    if (r->n_fused)
        snprintf(r->why, sizeof r->why, "%d attention block%s fused (%d with dropout drawn in the fused op)",
                 r->n_fused, r->n_fused == 1 ? "" : "s", r->n_dropout);
    else
        snprintf(r->why, sizeof r->why, "no attention pattern matched (%d Softmax node%s)", r->n_skipped,
                 r->n_skipped == 1 ? "" : "s");
    return OT_OK;
}
