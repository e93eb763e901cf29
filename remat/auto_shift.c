/* auto_shift.c — auto's exchange-and-shift moves (the last stage of remat/auto.c):
 * an exchange that does not hold more kept bytes and is cheaper, but whose peak no
 * longer fits, made to fit by moving one kept value to its neighbour in forward order.
 *
 * The planner's peak is an arena's size, not a sum of live bytes: an exchange of two
 * values of the same size moves lifetimes, so the placement, so the peak. Issue 28's
 * llama row (the zoo's llama, batch 4, SGD, 315,104 bytes): auto ended at 98,816 extra
 * FLOPs; `optimal` proves 91,648. Its plan is auto's with two exchanges of equal bytes:
 * keep layer 0's attention output (Reshape_7, which auto recomputed through its
 * attention MatMul) instead of the final norm's Pow output (85,504 FLOPs, but the arena
 * rises to 318,784 bytes), and keep a product of layer 1's MLP instead of its Sigmoid
 * output, dearer alone (104,960) but it brings the arena back to 314,944. No exchange
 * search takes the first step (it does not fit), no repair the second (the repairs only
 * drop values: every single drop that fits costs 102,912 or more). Here the Pow exchange
 * is the second cheapest of those that keep no more bytes, and the shift of the kept
 * Sigmoid output to its neighbour (the SiLU product) fits: 91,648, optimal's cost. The
 * chain form: recomputing a K Transpose frees nothing while the Expand its clone reads
 * stays kept (llama at 361,472 bytes). Every plan is measured by the planner and taken
 * only when it fits and is cheaper, so the stage never makes auto dearer. */
#include <stdlib.h>
#include <string.h>

#include "remat/auto_search.h"
#include "remat/remat_internal.h"

/* Exchanges tried per round, and shifts measured per exchange. */
#define SHIFT_EXCHANGES 8
#define SHIFT_TRIES 12

typedef struct lateral {
    double cost;
    int add, drop; /* indices into vars: keep vars[add], recompute vars[drop] */
    bool chain;    /* recompute the kept unread values of vars[drop]'s chain too */
} lateral;

static int lateral_cmp(const void *x, const void *y) {
    const lateral *a = x, *b = y;
    if (a->cost != b->cost) return a->cost < b->cost ? -1 : 1;
    if (a->add != b->add) return a->add - b->add;
    if (a->drop != b->drop) return a->drop - b->drop;
    return (int)a->chain - (int)b->chain;
}

typedef struct shift_ctx {
    ot_remat_search *s;
    const int *vars;
    int n;
    bool *held; /* a->n_values of scratch for the kept bytes */
    lateral *moves;
    int *undo, *stack, *stamp; /* a->n_values each: what chain_drop unkept, its walk and marks */
    int tag;
} shift_ctx;

/* Price and kept bytes of keep (the clones stay marked in s->walk_cloned). */
static double price(shift_ctx *c, const bool *keep, int64_t *bytes) {
    double cost = ot_remat_search_cost(c->s, keep, NULL);
    memset(c->held, 0, (size_t)c->s->a->n_values * sizeof(bool));
    *bytes = ot_remat_kept_bytes_marked(c->s->g, c->s->a, keep, c->s->walk_cloned, c->held);
    return cost;
}

/* Recomputes v with the kept values its chain reaches that no backward node reads
 * (kept only for clones: they free nothing while v's clone reads them), back through
 * unread values, kept or not, to saved or pinned ones; their ids go to c->undo.
 * Returns how many it unkept. */
static int chain_drop(shift_ctx *c, bool *keep, int v) {
    const ot_graph *g = c->s->g;
    const ot_remat_analysis *a = c->s->a;
    int sp = 0, k = 0, tag = ++c->tag;
    c->stack[sp++] = v;
    while (sp > 0) {
        const ot_node *n = &g->nodes[g->values[c->stack[--sp]].producer];
        for (int i = 0; i < n->n_inputs; i++) {
            int u = n->inputs[i];
            if (u < 0 || !a->candidate[u] || a->saved[u] || a->pinned[u] || c->stamp[u] == tag) continue;
            c->stamp[u] = tag;
            if (keep[u]) keep[u] = false, c->undo[k++] = u;
            c->stack[sp++] = u;
        }
    }
    return k;
}

/* Applies (undo false) or undoes exchange e on keep; applying fills c->undo, which
 * the undo reads (*n_undo). */
static void exchange(shift_ctx *c, bool *keep, lateral e, bool undo, int *n_undo) {
    keep[c->vars[e.add]] = !undo, keep[c->vars[e.drop]] = undo;
    if (undo) {
        for (int k = 0; k < *n_undo; k++)
            keep[c->undo[k]] = true;
    } else {
        *n_undo = e.chain ? chain_drop(c, keep, c->vars[e.drop]) : 0;
    }
}

/* Appends to c->moves the exchange e when it is cheaper than base and keeps no more
 * than kb bytes; keep is left as it was. */
static int consider(shift_ctx *c, bool *keep, lateral e, double base, int64_t kb, int m) {
    int64_t b = 0;
    int nu = 0;
    exchange(c, keep, e, false, &nu);
    if (e.chain && nu == 0) { /* the same as the plain form */
        exchange(c, keep, e, true, &nu);
        return m;
    }
    e.cost = price(c, keep, &b);
    exchange(c, keep, e, true, &nu);
    if (e.cost < base && b <= kb) c->moves[m++] = e;
    return m;
}

/* From keep (an exchange's plan that does not fit), the shifts of one kept value to a
 * recomputed neighbour, cheapest first, that keep no more than kb bytes and cost less
 * than base; measured until one fits (ot_remat_search_try records it as best). ex is
 * the exchange, whose two values stay as it set them. */
static ot_status shift_repair(shift_ctx *c, bool *keep, lateral ex, double base, int64_t kb, ot_error *err) {
    ot_remat_search *s = c->s;
    lateral *sh = c->moves + 2 * (size_t)c->n * (size_t)c->n; /* after the exchanges' room */
    int m = 0;
    for (int i = 0; i < c->n; i++) {
        if (!keep[c->vars[i]] || i == ex.add) continue;
        for (int j = i - 1; j <= i + 1; j += 2) {
            if (j < 0 || j >= c->n || j == ex.drop || keep[c->vars[j]]) continue;
            int64_t b = 0;
            keep[c->vars[j]] = true, keep[c->vars[i]] = false;
            double cost = price(c, keep, &b);
            keep[c->vars[j]] = false, keep[c->vars[i]] = true;
            if (cost < base && b <= kb) sh[m++] = (lateral){cost, j, i, false};
        }
    }
    qsort(sh, (size_t)m, sizeof(lateral), lateral_cmp);
    ot_status st = OT_OK;
    for (int k = 0; k < m && k < SHIFT_TRIES && st == OT_OK && s->best_cost >= base; k++) {
        keep[c->vars[sh[k].add]] = true, keep[c->vars[sh[k].drop]] = false;
        st = ot_remat_search_try(s, keep, NULL, NULL, err);
        keep[c->vars[sh[k].add]] = false, keep[c->vars[sh[k].drop]] = true;
    }
    return st;
}

/* One round from the best plan: the cheapest exchanges that keep no more bytes, each
 * measured, and shift-repaired when it does not fit. */
static ot_status shift_round(shift_ctx *c, bool *keep, ot_error *err) {
    ot_remat_search *s = c->s;
    size_t nb = (size_t)s->a->n_values * sizeof(bool);
    memcpy(keep, s->best, nb);
    double base = s->best_cost;
    int64_t kb = 0;
    price(c, keep, &kb);
    int m = 0;
    for (int i = 0; i < c->n; i++) {
        if (keep[c->vars[i]]) continue;
        for (int j = 0; j < c->n; j++) {
            if (!keep[c->vars[j]]) continue;
            m = consider(c, keep, (lateral){0.0, i, j, false}, base, kb, m);
            m = consider(c, keep, (lateral){0.0, i, j, true}, base, kb, m);
        }
    }
    qsort(c->moves, (size_t)m, sizeof(lateral), lateral_cmp);
    ot_status st = OT_OK;
    for (int t = 0; t < m && t < SHIFT_EXCHANGES && st == OT_OK && s->best_cost >= base; t++) {
        lateral ex = c->moves[t];
        bool fits = false;
        int nu = 0;
        exchange(c, keep, ex, false, &nu);
        st = ot_remat_search_fits(s, keep, &fits, err);
        if (st == OT_OK && !fits) st = shift_repair(c, keep, ex, base, kb, err);
        exchange(c, keep, ex, true, &nu);
    }
    return st;
}

ot_status ot_remat_shift_search(ot_remat_search *s, bool *keep, const int *vars, int n, ot_error *err) {
    if (!s->have_best || n < 2) return OT_OK;
    /* 2 n n exchanges (plain and chain forms), then up to 2 n shifts */
    size_t nv = (size_t)s->a->n_values + 1;
    shift_ctx c = {.s = s, .vars = vars, .n = n};
    c.held = ot_xcalloc(nv, sizeof(bool));
    c.moves = ot_xcalloc(2 * (size_t)n * (size_t)n + 2 * (size_t)n + 1, sizeof(lateral));
    c.undo = ot_xcalloc(nv, sizeof(int));
    c.stack = ot_xcalloc(nv, sizeof(int));
    c.stamp = ot_xcalloc(nv, sizeof(int));
    ot_status st = OT_OK;
    if (!c.held || !c.moves || !c.undo || !c.stack || !c.stamp)
        st = ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d exchanges", n * n);
    for (int round = 0; round < 4 && st == OT_OK; round++) {
        double before = s->best_cost;
        st = shift_round(&c, keep, err);
        if (st != OT_OK || s->best_cost >= before) break;
        memcpy(keep, s->best, (size_t)s->a->n_values * sizeof(bool));
        st = ot_remat_search_flips(s, keep, vars, n, ot_remat_eval_cap(n), err);
    }
    free(c.held);
    free(c.moves);
    free(c.undo);
    free(c.stack);
    free(c.stamp);
    return st;
}
