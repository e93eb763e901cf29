/* auto_polish.c — the second phase of `--remat auto --memory-budget` (after
 * remat/auto.c's seeds, orders and local searches): moves over every candidate value,
 * the ones the backward pass reads and the ones only clones read, from the best plan.
 *
 * The first phase decides saved values only, so a plan keeps either all or none of the
 * values that no backward node reads. `optimal` showed what that misses (issue 16):
 *   - resnet: keep a residual Add (read by no backward node) so that the Relu after it
 *     recomputes alone, instead of its whole BatchNorm chain: an exchange plus a keep
 *     (the frontier form of the exchanges);
 *   - mobilenet, mobilenet_v2: keep one expensive convolution output and recompute
 *     several cheap values to make room: no exchange of two values does it
 *     (add-and-repair);
 *   - transformers: keep the three Transposes that share one QKV MatMul, then make room
 *     (unclone-and-repair, with the repair below, which measures more than auto.c's;
 *     or push a kept projection down to its Transposes);
 *   - bert: recompute two GELU outputs with the non-read values of their chains, and
 *     keep four small LayerNorm outputs instead (drop-and-refill).
 * Every move is judged by the planner (ot_remat_search_try), as in the first phase,
 * and a plan is taken only when it fits and is cheaper, so auto never gets dearer. */
#include <stdlib.h>
#include <string.h>

#include "remat/auto_search.h"
#include "remat/remat_internal.h"

/* Moves tried per round, repair steps per move, and drops measured per step. */
#define ADD_TRIES 8
#define REPAIR_STEPS 16
#define REPAIR_MEASURE 4
/* Values a refill tries to keep again after its drop. */
#define REFILL_TRIES 12
/* Expensive clones an unclone round tries. */
#define UNCLONE_NODES 4

typedef struct repair_ctx {
    ot_remat_search *s;
    const int *vars;
    int n;
    bool *fixed; /* per index: added by the move, never dropped by its repair */
    bool *dud;   /* per index: dropping it did not lower the peak this move */
    int *index;  /* per value id: its index in vars, -1 if none */
    int evals;   /* planner runs left */
    bool ties;   /* the stepwise repair's last pass keeps drops that tied (repair_steps) */
    bool only_ties; /* repair runs that pass alone (the others already failed from this plan) */
    bool *held;  /* a->n_values of scratch for kept_bytes */
} repair_ctx;

/* ot_remat_kept_bytes(keep), and with cost its ot_remat_keep_cost, the same to the bit,
 * from the search's copy of the graph in one walk (ot_remat_search_cost): the moves below
 * price every candidate this way, and walking the graph's nodes for each took a tenth
 * of auto's time on gpt2. */
static int64_t kept_bytes(repair_ctx *r, const bool *keep, double *cost) {
    double c = ot_remat_search_cost(r->s, keep, NULL);
    if (cost) *cost = c;
    memset(r->held, 0, (size_t)r->s->a->n_values * sizeof(bool));
    return ot_remat_kept_bytes_marked(r->s->g, r->s->a, keep, r->s->walk_cloned, r->held);
}

/* Inserts c into the best REPAIR_MEASURE of cand (sorted, highest key first). */
static void top_insert(ot_remat_ranked *cand, int *nc, ot_remat_ranked c) {
    int at = *nc < REPAIR_MEASURE ? (*nc)++ : REPAIR_MEASURE;
    while (at > 0 && ot_remat_ranked_desc(&c, &cand[at - 1]) < 0) {
        if (at < REPAIR_MEASURE) cand[at] = cand[at - 1];
        at--;
    }
    if (at < REPAIR_MEASURE) cand[at] = c;
}

/* m is progress over than: a lower peak or, by_top, as high with fewer steps at it. */
static bool lower(ot_remat_measurement m, ot_remat_measurement than, bool by_top) {
    return m.peak < than.peak || (by_top && m.peak == than.peak && m.n_top < than.n_top);
}

/* Stepwise repair: from keep (the best plan plus the move's additions, which must beat
 * base), drops kept values until the peak fits: each step measures the REPAIR_MEASURE
 * drops of most kept bytes freed per FLOP added and takes the one of most progress; a
 * drop that makes none is not tried again in this move (peaks are not monotone: a
 * recomputed residual Add can raise it). Without ties, "none" means no more than the
 * step's pick; with ties, no progress over the step's start, so a drop that tied the
 * pick stays for the next step (tinygpt: four LayerNorm drops lower the peak alike and
 * two are needed; written off after the first, the repair stopped one short). Drops
 * that would cost base or more are never tried. */
static ot_status repair_steps(repair_ctx *r, bool *keep, double base, bool by_top, bool ties, ot_error *err) {
    ot_remat_search *s = r->s;
    ot_remat_measurement cur = {0};
    double cost = 0.0;
    memset(r->dud, 0, (size_t)r->n * sizeof(bool));
    ot_status st = ot_remat_search_measure(s, keep, &cur, &cost, err);
    r->evals--;
    for (int step = 0; step < REPAIR_STEPS && st == OT_OK && cur.peak > s->budget && r->evals > 0; step++) {
        ot_remat_ranked cand[REPAIR_MEASURE];
        int nc = 0;
        int64_t kb = kept_bytes(r, keep, NULL);
        for (int j = 0; j < r->n; j++) {
            int v = r->vars[j];
            if (!keep[v] || r->fixed[j] || r->dud[j]) continue;
            keep[v] = false;
            double c = 0.0;
            int64_t b = kept_bytes(r, keep, &c);
            keep[v] = true;
            if (c >= 0.0 && c < base && b <= kb)
                top_insert(cand, &nc, (ot_remat_ranked){j, (double)(kb - b + 1) / (1.0 + c - cost)});
        }
        if (nc == 0) break;
        int pick = -1;
        ot_remat_measurement best = cur;
        double pick_cost = cost;
        for (int k = 0; k < nc && st == OT_OK; k++) {
            ot_remat_measurement m = {0};
            double ck = 0.0;
            int v = r->vars[cand[k].v];
            keep[v] = false;
            st = ot_remat_search_measure(s, keep, &m, &ck, err);
            r->evals--;
            keep[v] = true;
            bool progress = lower(m, best, by_top);
            if (progress) best = m, pick = cand[k].v, pick_cost = ck;
            if (ties ? !lower(m, cur, by_top) : !progress) r->dud[cand[k].v] = true;
        }
        if (pick >= 0) {
            keep[r->vars[pick]] = false;
            cur = best;
            cost = pick_cost;
        }
    }
    return st;
}

/* Sets keep to start less the first k drops of order. */
static void drop_prefix(const repair_ctx *r, bool *keep, const bool *start, const ot_remat_ranked *order, int k) {
    memcpy(keep, start, (size_t)r->s->a->n_values * sizeof(bool));
    for (int i = 0; i < k; i++) keep[r->vars[order[i].v]] = false;
}

/* A drop of the fill order (bulk_repair's fine order): FLOPs added per kept byte freed,
 * and the bytes. */
typedef struct fine_drop {
    int j;
    double price;
    int64_t bytes;
} fine_drop;

/* Least FLOPs per byte first; at the same price, fewer bytes first; then by index. */
static int fine_cmp(const void *x, const void *y) {
    const fine_drop *a = x, *b = y;
    if (a->price != b->price) return a->price < b->price ? -1 : 1;
    if (a->bytes != b->bytes) return a->bytes < b->bytes ? -1 : 1;
    return a->j - b->j;
}

/* Bulk repair: ranks every allowed drop once (kept bytes freed per FLOP added, each
 * alone), takes the longest prefix still cheaper than base, and when it fits bisects
 * for the shortest prefix that does (log n planner runs where the stepwise repair
 * needs one step per drop: an added convolution output can take dozens). fine: by
 * FLOPs per byte, the smaller drop first at the same price (ot_remat_fill_search). */
static ot_status bulk_repair(repair_ctx *r, bool *keep, double base, bool fine, bool *fits, ot_error *err) {
    ot_remat_search *s = r->s;
    const ot_remat_analysis *a = s->a;
    size_t nb = (size_t)a->n_values * sizeof(bool);
    bool *start = ot_xcalloc((size_t)a->n_values + 1, sizeof(bool));
    ot_remat_ranked *order = ot_xcalloc((size_t)r->n + 1, sizeof(ot_remat_ranked));
    fine_drop *f = ot_xcalloc((size_t)r->n + 1, sizeof(fine_drop));
    if (!start || !order || !f) {
        free(start), free(order), free(f);
        return ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d values", r->n);
    }
    memcpy(start, keep, nb);
    double c0 = 0.0;
    int64_t kb = kept_bytes(r, keep, &c0);
    int m = 0;
    for (int j = 0; j < r->n; j++) {
        int v = r->vars[j];
        if (!keep[v] || r->fixed[j]) continue;
        keep[v] = false;
        double c = 0.0;
        int64_t b = kept_bytes(r, keep, &c);
        keep[v] = true;
        if (c >= 0.0 && c < base && b < kb) {
            f[m] = (fine_drop){j, (c - c0) / (double)(kb - b), kb - b};
            order[m++] = (ot_remat_ranked){j, (double)(kb - b) / (1.0 + c - c0)};
        }
    }
    if (!fine) {
        qsort(order, (size_t)m, sizeof(ot_remat_ranked), ot_remat_ranked_desc);
    } else {
        qsort(f, (size_t)m, sizeof(fine_drop), fine_cmp);
        for (int i = 0; i < m; i++) order[i] = (ot_remat_ranked){f[i].j, (double)(m - i)};
    }
    int lo = 0, hi = m; /* the longest prefix below base: costs grow with the prefix */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        drop_prefix(r, keep, start, order, mid);
        if (ot_remat_search_cost(s, keep, NULL) < base) lo = mid;
        else hi = mid - 1;
    }
    ot_status st = OT_OK;
    *fits = false;
    if (lo > 0) {
        drop_prefix(r, keep, start, order, lo);
        st = ot_remat_search_fits(s, keep, fits, err);
        r->evals--;
    }
    for (int l = 0, h = lo; *fits && st == OT_OK && h - l > 1 && r->evals > 0;) { /* shortest fitting prefix */
        int mid = l + (h - l) / 2;
        bool mid_fits = false;
        drop_prefix(r, keep, start, order, mid);
        st = ot_remat_search_fits(s, keep, &mid_fits, err);
        r->evals--;
        if (mid_fits) h = mid;
        else l = mid;
    }
    memcpy(keep, start, nb);
    free(start);
    free(order);
    free(f);
    return st;
}

/* Makes a move's keep set fit again, cheaper than base if it can: the bulk repair,
 * then the stepwise one by peak alone and, when that found nothing, by peak and steps
 * at the top (a tie at the peak hides progress elsewhere), then by peak with ties kept
 * (tried last, so that every move the first two win is won as before). Every fitting keep set it
 * measures is recorded as best when cheaper; keep ends as it started. */
static ot_status repair(repair_ctx *r, bool *keep, double base, ot_error *err) {
    size_t nb = (size_t)r->s->a->n_values * sizeof(bool);
    bool fits = false;
    ot_status st = r->only_ties ? OT_OK : bulk_repair(r, keep, base, false, &fits, err);
    if (st != OT_OK || fits) return st;
    bool *start = ot_xcalloc((size_t)r->s->a->n_values + 1, sizeof(bool));
    if (!start) return ot_fail(err, OT_E_MEMORY, "remat auto: out of memory");
    memcpy(start, keep, nb);
    if (!r->only_ties) st = repair_steps(r, keep, base, false, false, err);
    if (st == OT_OK && !r->only_ties && r->s->best_cost >= base) {
        memcpy(keep, start, nb);
        st = repair_steps(r, keep, base, true, false, err);
    }
    if (st == OT_OK && r->ties && r->s->best_cost >= base) {
        memcpy(keep, start, nb);
        st = repair_steps(r, keep, base, false, true, err);
    }
    memcpy(keep, start, nb);
    free(start);
    return st;
}

/* Pushes kept value vars[i] down: keeps the outputs of its forward readers that are
 * candidates instead (the three Transposes of a QKV projection rather than the
 * projection, whose clones would copy it three times), marking them fixed. Returns how
 * many it kept; 0 leaves keep as it was. */
static int push_down(repair_ctx *r, bool *keep, int i) {
    const ot_graph *g = r->s->g;
    const ot_remat_analysis *a = r->s->a;
    const ot_value *u = &g->values[r->vars[i]];
    int added = 0;
    for (int k = 0; k < u->n_consumers; k++) {
        const ot_node *c = &g->nodes[u->consumers[k]];
        if (a->fwd_pos[c->id] < 0) continue;
        for (int o = 0; o < c->n_outputs; o++) {
            int w = c->outputs[o];
            if (w < 0 || r->index[w] < 0 || keep[w]) continue;
            keep[w] = true;
            r->fixed[r->index[w]] = true;
            added++;
        }
    }
    if (added > 0) keep[r->vars[i]] = false;
    return added;
}

/* Applies move mv to keep (from the best plan) and marks what it kept fixed: i >= 0
 * keeps vars[i], -1 - i pushes kept vars[i] down. Returns false when it changes nothing. */
static bool apply_move(repair_ctx *r, bool *keep, int mv) {
    memcpy(keep, r->s->best, (size_t)r->s->a->n_values * sizeof(bool));
    memset(r->fixed, 0, (size_t)r->n * sizeof(bool));
    if (mv < 0) return push_down(r, keep, -1 - mv) > 0;
    keep[r->vars[mv]] = true;
    r->fixed[mv] = true;
    return true;
}

/* Add-and-repair: keep one recomputed value, or push one kept value down, the moves
 * that save most first, then repair; again from the new best while a move wins. fill:
 * the bulk repair's fine order alone (ot_remat_fill_search). */
static ot_status add_moves(repair_ctx *r, bool *keep, bool fill, ot_error *err) {
    ot_remat_search *s = r->s;
    ot_remat_ranked *moves = ot_xcalloc((size_t)r->n + 1, sizeof(ot_remat_ranked));
    if (!moves) return ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d values", r->n);
    ot_status st = OT_OK;
    bool improved = s->have_best;
    while (st == OT_OK && improved && r->evals > 0) {
        improved = false;
        double base = s->best_cost;
        int m = 0;
        for (int i = 0; i < r->n; i++) {
            int mv = s->best[r->vars[i]] ? -1 - i : i;
            if (!apply_move(r, keep, mv)) continue;
            double c = ot_remat_search_cost(s, keep, NULL);
            if (c >= 0.0 && c < base) moves[m++] = (ot_remat_ranked){mv, base - c};
        }
        qsort(moves, (size_t)m, sizeof(ot_remat_ranked), ot_remat_ranked_desc);
        for (int t = 0; t < m && t < ADD_TRIES && st == OT_OK && !improved && r->evals > 0; t++) {
            bool fits = false;
            apply_move(r, keep, moves[t].v);
            st = fill ? bulk_repair(r, keep, base, true, &fits, err) : repair(r, keep, base, err);
            improved = s->best_cost < base;
        }
    }
    free(moves);
    return st;
}

/* Recomputes v with its whole chain: v and, back through its producer's inputs, every
 * kept candidate the backward pass does not read (kept only for clones, they would
 * hold as many bytes as v). stack: a->n_values room. */
static void drop_chain(const ot_remat_search *s, bool *keep, int v, int *stack) {
    const ot_graph *g = s->g;
    const ot_remat_analysis *a = s->a;
    int sp = 0;
    keep[v] = false;
    stack[sp++] = v;
    while (sp > 0) {
        const ot_node *n = &g->nodes[g->values[stack[--sp]].producer];
        for (int i = 0; i < n->n_inputs; i++) {
            int u = n->inputs[i];
            if (u < 0 || !keep[u] || !a->candidate[u] || a->saved[u] || a->pinned[u]) continue;
            keep[u] = false;
            stack[sp++] = u;
        }
    }
}

/* Drop-and-refill: recompute one kept value (those freeing most kept bytes first), then
 * keep recomputed values again, most FLOPs saved per byte first, each one that still
 * fits (the mirror of add-and-repair: two large GELU outputs out, four small
 * LayerNorm outputs in). */
static ot_status refill_moves(repair_ctx *r, bool *keep, ot_error *err) {
    ot_remat_search *s = r->s;
    const ot_remat_analysis *a = s->a;
    size_t nb = (size_t)a->n_values * sizeof(bool);
    ot_remat_ranked *drops = ot_xcalloc((size_t)r->n + 1, sizeof(ot_remat_ranked));
    ot_remat_ranked *adds = ot_xcalloc((size_t)r->n + 1, sizeof(ot_remat_ranked));
    int *stack = ot_xcalloc((size_t)a->n_values + 1, sizeof(int));
    ot_status st = OT_OK;
    if (!drops || !adds || !stack) st = ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d values", r->n);
    bool improved = s->have_best;
    while (st == OT_OK && improved && r->evals > 0) {
        improved = false;
        double base = s->best_cost;
        memcpy(keep, s->best, nb);
        int64_t kb = kept_bytes(r, keep, NULL);
        int m = 0;
        for (int j = 0; j < r->n; j++) {
            int v = r->vars[j];
            if (!keep[v] || !a->saved[v]) continue;
            drop_chain(s, keep, v, stack);
            int64_t b = kept_bytes(r, keep, NULL);
            memcpy(keep, s->best, nb);
            if (b < kb) drops[m++] = (ot_remat_ranked){j, (double)(kb - b)};
        }
        qsort(drops, (size_t)m, sizeof(ot_remat_ranked), ot_remat_ranked_desc);
        for (int t = 0; t < m && t < ADD_TRIES && st == OT_OK && !improved && r->evals > 0; t++) {
            memcpy(keep, s->best, nb);
            drop_chain(s, keep, r->vars[drops[t].v], stack);
            double c0 = 0.0;
            int64_t kb0 = kept_bytes(r, keep, &c0);
            int na = 0;
            for (int i = 0; i < r->n; i++) {
                int v = r->vars[i];
                if (keep[v] || i == drops[t].v) continue;
                keep[v] = true;
                double c = 0.0;
                int64_t b = kept_bytes(r, keep, &c);
                keep[v] = false;
                if (c >= 0.0 && c < c0) adds[na++] = (ot_remat_ranked){i, (c0 - c) / (1.0 + (double)(b > kb0 ? b - kb0 : 0))};
            }
            qsort(adds, (size_t)na, sizeof(ot_remat_ranked), ot_remat_ranked_desc);
            for (int k = 0; k < na && k < REFILL_TRIES && st == OT_OK && r->evals > 0; k++) {
                int v = r->vars[adds[k].v];
                bool fits = false;
                keep[v] = true;
                st = ot_remat_search_fits(s, keep, &fits, err);
                r->evals--;
                if (!fits) keep[v] = false;
            }
            improved = s->best_cost < base;
        }
    }
    free(drops);
    free(adds);
    free(stack);
    return st;
}

/* Unclone-and-repair: for the best plan's most expensive clones, keep every
 * recomputed value whose chain clones it, then repair. */
static ot_status unclone_moves(repair_ctx *r, bool *keep, ot_error *err) {
    ot_remat_search *s = r->s;
    const ot_remat_analysis *a = s->a;
    size_t nb = (size_t)a->n_values * sizeof(bool);
    int *stamp = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(int)), *stack = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(int));
    bool *cloned = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(bool));
    int *mstack = ot_xcalloc(ot_remat_stack_room(s->g, a), sizeof(int));
    ot_remat_ranked *top = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(ot_remat_ranked));
    ot_status st = OT_OK;
    if (!stamp || !stack || !cloned || !mstack || !top)
        st = ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d nodes", a->n_nodes);
    int tag = 0;
    bool improved = s->have_best;
    while (st == OT_OK && improved && r->evals > 0) {
        improved = false;
        int m = ot_remat_costly_clones(s, cloned, mstack, top);
        for (int k = 0; k < m && k < UNCLONE_NODES && st == OT_OK && !improved && r->evals > 0; k++) {
            double base = s->best_cost;
            memcpy(keep, s->best, nb);
            int n_kept = 0;
            for (int i = 0; i < r->n; i++) {
                int v = r->vars[i];
                r->fixed[i] = !keep[v] && ot_remat_chain_reaches(s->g, a, s->best, v, top[k].v, stamp, ++tag, stack);
                if (r->fixed[i]) keep[v] = true, n_kept++;
            }
            if (n_kept == 0 || ot_remat_search_cost(s, keep, NULL) >= base) continue;
            st = repair(r, keep, base, err);
            improved = s->best_cost < base;
        }
    }
    free(stamp), free(stack), free(cloned), free(mstack), free(top);
    return st;
}

/* One round of the second phase from the best plan: flips, exchanges, add-and-repair,
 * unclone-and-repair, drop-and-refill, each with its own planner runs. repairs_only:
 * add-and-repair alone, with the ties pass of the repair alone (the rest, all
 * deterministic, already found nothing from this plan; unclone-and-repair with ties
 * won no sample or zoo row and cost tinygpt at 1,093,072 bytes 5.85 G instructions
 * against 5.04 G). */
static ot_status polish_round(repair_ctx *r, bool *keep, bool repairs_only, ot_error *err) {
    ot_remat_search *s = r->s;
    int n = r->n;
    ot_status st = OT_OK;
    r->only_ties = repairs_only;
    if (!repairs_only) {
        r->evals = ot_remat_eval_cap(n);
        memcpy(keep, s->best, (size_t)s->a->n_values * sizeof(bool));
        st = ot_remat_search_flips(s, keep, r->vars, n, r->evals, err);
        if (st == OT_OK) st = ot_remat_search_swaps(s, keep, r->vars, n, r->evals, true, err);
    }
    r->evals = 2 * ot_remat_eval_cap(n);
    if (st == OT_OK) st = add_moves(r, keep, false, err);
    r->evals = ot_remat_eval_cap(n);
    if (st == OT_OK && !repairs_only) st = unclone_moves(r, keep, err);
    r->evals = ot_remat_eval_cap(n);
    if (st == OT_OK && !repairs_only) st = refill_moves(r, keep, err);
    return st;
}

/* The moves' context over every candidate (vars: a->n_values room, filled here);
 * free with ctx_free. */
static ot_status ctx_init(repair_ctx *r, ot_remat_search *s, int *vars, int n, ot_error *err) {
    const ot_remat_analysis *a = s->a;
    *r = (repair_ctx){s, vars, n, ot_xcalloc((size_t)n + 1, sizeof(bool)), ot_xcalloc((size_t)n + 1, sizeof(bool)),
                      ot_xcalloc((size_t)a->n_values + 1, sizeof(int)), 0, false, false,
                      ot_xcalloc((size_t)a->n_values + 1, sizeof(bool))};
    if (!r->fixed || !r->dud || !r->index || !r->held)
        return ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d values", n);
    for (int v = 0; v < a->n_values; v++) r->index[v] = -1;
    for (int i = 0; i < n; i++) r->index[vars[i]] = i;
    return OT_OK;
}

static void ctx_free(repair_ctx *r) {
    free(r->fixed);
    free(r->dud);
    free(r->index);
    free(r->held);
}

/* Add-and-fill (remat/auto.c's last stage): the add moves, each repaired by the bulk
 * repair in its fine order. Of drops at the same FLOPs per byte, the bulk repair's
 * ratio (bytes over 1 + FLOPs) puts the larger first, so its prefix overshoots the
 * bytes a move needs by up to a large value's worth; the fine order fills with the
 * smaller ones (mobilenet_v2, batch 8, at half its range, 34,419,776 bytes: auto kept
 * features.2's first BatchNormalization output recomputed at 4,028,416 FLOPs;
 * keeping it and dropping BatchNormalization outputs of 1.25 FLOPs per byte, small
 * first, 3,855,872; optimal 3,745,792). After every other stage, so that each plan
 * those reach is reached as before. */
ot_status ot_remat_fill_search(ot_remat_search *s, bool *keep, int *vars, ot_error *err) {
    int n = ot_remat_search_vars(s->g, s->a, true, vars);
    if (!s->have_best || n > OT_REMAT_POLISH_MAX_VARS) return OT_OK;
    repair_ctx r;
    ot_status st = ctx_init(&r, s, vars, n, err);
    r.evals = 2 * ot_remat_eval_cap(n);
    if (st == OT_OK) st = add_moves(&r, keep, true, err);
    ctx_free(&r);
    return st;
}

ot_status ot_remat_auto_polish(ot_remat_search *s, bool *keep, int *vars, ot_error *err) {
    int n = ot_remat_search_vars(s->g, s->a, true, vars);
    if (!s->have_best || n > OT_REMAT_POLISH_MAX_VARS) return OT_OK;
    repair_ctx r;
    ot_status st = ctx_init(&r, s, vars, n, err);
    /* Rounds until one wins nothing (at most 4); then, from that plan, at most 2 whose
     * repair also keeps the drops that tie (r.ties): after the first rounds, not in
     * them, so that every plan those reach is reached as before and the later rounds
     * can only lower it (interleaved, they won tinygpt's row but lost mobilenet_v2 a
     * plan elsewhere: the search is local). */
    bool stalled = false; /* the last round won nothing */
    for (int pass = 0; pass < 2 && st == OT_OK; pass++) {
        r.ties = pass == 1;
        for (int round = 0; round < (r.ties ? 2 : 4) && st == OT_OK; round++) {
            double before = s->best_cost;
            st = polish_round(&r, keep, r.ties && round == 0 && stalled, err);
            stalled = s->best_cost >= before;
            if (stalled) break;
        }
    }
    ctx_free(&r);
    return st;
}
