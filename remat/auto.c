/* auto.c — plans chosen by measurement: `--remat auto --memory-budget`, the `all`
 * policy (the segmentation with the least planned peak), and the planner adapter
 * that is remat's only memory model.
 *
 * Auto searches keep sets of the general DAG, judging each by the exact peak the
 * planner gives for the rewritten graph (apply, measure, undo) and by its recompute
 * FLOPs (remat/cost.c):
 *   1. seeds: none, selective, sqrt, every:K for a ladder of K (Chen segments) and
 *      tapered segmentations (long segments early, short ones near the loss);
 *   2. two greedy orders over the saved values — bytes freed per FLOP recomputed,
 *      and FLOPs alone (a cost threshold) — each bisected on its prefix length for
 *      the shortest prefix whose peak fits;
 *   3. when nothing fits yet, the least-peak search that `all` uses (segment plans,
 *      then local search on (peak, steps at the top, cost));
 *   4. local search from the cheapest fitting plan: keep or recompute one saved
 *      value, or move a kept one to its neighbour, while the peak fits and the
 *      cost drops (first improvement, bounded planner runs);
 *   5. on graphs of up to 400 candidates, moves over every candidate, read by the
 *      backward pass or not, with repairs that make room (remat/auto_polish.c);
 *   6. unclone moves on every clone, cheap ones too (remat/auto_unclone.c), and flips;
 *   7. exchanges that keep no more bytes, each that does not fit repaired by a shift
 *      of one kept value to its neighbour (remat/auto_shift.c), and flips;
 *   8. on graphs of up to 400 candidates, add moves repaired by drops of least FLOPs
 *      per byte, the smaller first at the same price (add-and-fill, auto_polish.c);
 *   9. on those graphs, steps 1-8 once more under a budget one byte below the plan's
 *      peak (ot_remat_auto), the cheaper plan kept.
 * When no seed fits, `all`'s own search (ot_remat_least_memory) is the last try, so
 * that every budget `all` meets, auto meets too.
 * Peaks are not monotone in general (best fit, in place), so bisection only steers
 * the search; a plan is accepted only when its own measured peak fits. On chains of
 * up to 30 nodes this matches an exhaustive search (tests/test_remat.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "remat/remat.h"
#include "remat/remat_internal.h"
#include "remat/auto_search.h"
#include "exec/backend.h"
#include "plan/planner.h"
#include "plan/schedule.h"

/* The schedule and bytes in use per step, for a measure that asked for them. */
static ot_status copy_timeline(const ot_plan *plan, ot_remat_measurement *m, ot_error *err) {
    m->n_steps = plan->n_steps;
    m->order = ot_xcalloc((size_t)plan->n_steps + 1, sizeof(int));
    m->timeline = ot_xcalloc((size_t)plan->n_steps + 1, sizeof(size_t));
    if (!m->order || !m->timeline) {
        free(m->order);
        free(m->timeline);
        m->order = NULL;
        m->timeline = NULL;
        return ot_fail(err, OT_E_MEMORY, "remat: out of memory for a timeline of %d steps", plan->n_steps);
    }
    memcpy(m->order, plan->order, (size_t)plan->n_steps * sizeof(int));
    memcpy(m->timeline, plan->timeline, (size_t)plan->n_steps * sizeof(size_t));
    m->pinned_padding = plan->pinned_padding;
    return OT_OK;
}

ot_status ot_remat_measure_planner(const ot_graph *g, void *user, ot_remat_measurement *m, ot_error *err) {
    int *order = NULL, n = 0;
    ot_plan *plan = NULL;
    ot_plan_device dev = ot_backend_plan_device((ot_backend *)user);
    /* reuses the judging plan; with a scratch, the order and plan live in it; the
     * target judges the two orders too, as the session's executor does */
    ot_plan_options popt = {.fit_target_bytes = m->fit_target > 0 ? (size_t)m->fit_target : 0};
    const ot_plan_options *po = m->fit_target > 0 ? &popt : NULL;
    bool over = false;
    ot_status st = m->limit > 0 && !m->want_timeline && !m->want_plan
                       ? ot_schedule_plan_limit(g, &dev, po, m->scratch, (size_t)m->limit, &order, &n, &plan, &over, err)
                       : ot_schedule_plan_opts(g, &dev, po, m->scratch, &order, &n, &plan, err);
    m->exceeded = st == OT_OK && over;
    if (m->exceeded) {
        m->peak = m->limit + 1;
        m->n_top = 0;
    } else if (st == OT_OK) {
        size_t top = 0;
        m->peak = (int64_t)ot_plan_peak_bytes(plan);
        if (m->want_timeline) st = copy_timeline(plan, m, err);
        m->n_top = 0;
        for (int i = 0; i < plan->n_steps; i++) top = plan->timeline[i] > top ? plan->timeline[i] : top;
        for (int i = 0; i < plan->n_steps; i++) m->n_top += plan->timeline[i] == top;
    }
    if (st == OT_OK && m->want_plan && !m->scratch) { /* the caller's now */
        m->plan = plan;
        plan = NULL;
    }
    if (!m->scratch) {
        ot_plan_free(plan);
        free(order);
    }
    return st;
}

typedef ot_remat_search search;

/* Segment plans: every:K for K on a ladder from 1 to n_art (from `all`-like to
 * none), and tapered segmentations (first segment T units, each next one unit less)
 * for T on a ladder. */
ot_status ot_remat_try_segment_ladder(search *s, bool *keep, ot_error *err) {
    const ot_remat_analysis *a = s->a;
    int last = -1;
    for (double k = 1.0; k <= (double)a->n_art + 0.5; k *= 1.25) {
        int K = (int)lround(k);
        if (K == last) continue;
        last = K;
        ot_remat_policy p = {.kind = OT_REMAT_EVERY, .every_k = K};
        ot_status st = ot_remat_policy_keep(s->g, a, &p, keep, err);
        if (st == OT_OK) st = ot_remat_search_try(s, keep, NULL, NULL, err);
        if (st != OT_OK) return st;
    }
    double unit = ot_remat_saved_unit(a);
    double n_units = unit > 0.0 ? (double)a->saved_bytes / unit : 0.0;
    last = -1;
    for (double t = 2.0; t <= 2.0 * sqrt(2.0 * n_units) + 1.0; t *= 1.15) {
        int T = (int)lround(t);
        if (T == last) continue;
        last = T;
        for (int v = 0; v < a->n_values; v++) keep[v] = a->pinned[v];
        ot_remat_segment_keep(s->g, a, T * unit, -unit, keep);
        ot_status st = ot_remat_search_try(s, keep, NULL, NULL, err);
        if (st != OT_OK) return st;
    }
    return OT_OK;
}

typedef ot_remat_ranked ranked;

int ot_remat_ranked_desc(const void *x, const void *y) {
    const ranked *a = x, *b = y;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return a->v - b->v;
}

/* keep = none minus the first k entries of order; with chains, the candidates the
 * backward pass does not read are not kept either (a clone recomputes them rather
 * than holding them), so that the longest prefix is the least-memory plan. */
void ot_remat_prefix_keep(const search *s, const ranked *order, int k, bool chains, bool *keep) {
    const ot_remat_analysis *a = s->a;
    for (int v = 0; v < a->n_values; v++) keep[v] = a->candidate[v] && (!chains || a->saved[v] || a->pinned[v]);
    for (int i = 0; i < k; i++) keep[order[i].v] = false;
}

/* Bisects the prefix length of a drop order for the shortest prefix that fits. */
static ot_status bisect_order(search *s, const ranked *order, int n, bool chains, bool *keep, ot_error *err) {
    int lo = 0, hi = n; /* invariant (assumed): prefix hi fits if anything does */
    bool fits = false;
    ot_remat_prefix_keep(s, order, hi, chains, keep);
    ot_status st = ot_remat_search_fits(s, keep, &fits, err);
    if (st != OT_OK || !fits) return st;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        ot_remat_prefix_keep(s, order, mid, chains, keep);
        st = ot_remat_search_fits(s, keep, &fits, err);
        if (st != OT_OK) return st;
        if (fits) hi = mid;
        else lo = mid;
    }
    return OT_OK;
}

/* Lexicographic score of a plan: plans within the cost cap first (no cap but for
 * auto without a budget), fitting plans by (cost, peak), the others after them by
 * (peak, cost). Lower is better. */
static bool better(const search *s, ot_remat_measurement m, double c, ot_remat_measurement cur, double cur_c) {
    if ((c <= s->cost_cap) != (cur_c <= s->cost_cap)) return c <= s->cost_cap;
    bool fit = s->budget >= 0 && m.peak <= s->budget, cur_fit = s->budget >= 0 && cur.peak <= s->budget;
    if (fit != cur_fit) return fit;
    if (fit) return c < cur_c || (c == cur_c && m.peak < cur.peak);
    if (m.peak != cur.peak) return m.peak < cur.peak;
    if (m.n_top != cur.n_top) return m.n_top < cur.n_top;
    return c < cur_c;
}

/* Local search from `keep` over the saved values (vars, in forward order): flip one
 * (keep <-> recompute) or shift a kept one to its neighbour; first improvement
 * wins, until no move improves or max_evals planner runs are spent. Finds the
 * uneven checkpoint spacings (longer segments early in the network, where the
 * backward pass has freed more) that no fixed segmentation gives. */
ot_status ot_remat_search_flips(search *s, bool *keep, const int *vars, int n_vars, int max_evals, ot_error *err) {
    ot_remat_measurement cur = {0};
    double cur_c = 0.0;
    ot_status st = ot_remat_search_measure(s, keep, &cur, &cur_c, err);
    bool improved = true;
    while (st == OT_OK && improved && max_evals > 0) {
        improved = false;
        for (int mv = 0; mv < 3 * n_vars && max_evals > 0; mv++) {
            int i = mv / 3, kind = mv % 3, j = kind == 1 ? i - 1 : i + 1;
            int v = vars[i];
            if (kind > 0) { /* shift a kept value to a dropped neighbour */
                if (!keep[v] || j < 0 || j >= n_vars || keep[vars[j]]) continue;
                keep[v] = false;
                keep[vars[j]] = true;
            } else {
                keep[v] = !keep[v];
            }
            /* Fitting already: only moves that lower the cost can win; skip the planner. */
            bool cur_fit = s->budget >= 0 && cur.peak <= s->budget;
            double c_est = cur_fit ? ot_remat_search_cost(s, keep, NULL) : 0.0;
            ot_remat_measurement m = {0};
            double c = 0.0;
            bool won = false;
            if (!cur_fit || c_est < cur_c) {
                /* fitting, m wins only by fitting: its peak matters only against the budget */
                st = ot_remat_search_measure_fit(s, keep, cur_fit, &m, &c, err);
                max_evals--;
                if (st != OT_OK) break;
                won = better(s, m, c, cur, cur_c);
            }
            if (won) {
                cur = m;
                cur_c = c;
                improved = true;
            } else if (kind > 0) {
                keep[v] = true;
                keep[vars[j]] = false;
            } else {
                keep[v] = !keep[v];
            }
        }
    }
    return st;
}

int ot_remat_search_vars(const ot_graph *g, const ot_remat_analysis *a, bool unread_too, int *vars) {
    int n = 0;
    for (int p = 0; p < a->n_fwd; p++) {
        const ot_node *nd = &g->nodes[a->fwd[p]];
        for (int o = 0; o < nd->n_outputs; o++) {
            int v = nd->outputs[o];
            if (v >= 0 && a->candidate[v] && (unread_too || a->saved[v]) && !a->pinned[v]) vars[n++] = v;
        }
    }
    return n;
}

/* Planner runs a local search may spend: generous on small graphs, bounded on big
 * ones (a 5,000-node graph plans in ~15 ms: 200 runs stay within seconds). */
int ot_remat_eval_cap(int n_vars) { return n_vars <= 64 ? 40 * n_vars + 200 : 200; }

/* The least-peak search shared by `all` and by auto when its seeds do not fit:
 * segment plans, then a local search on (peak, cost). */
static ot_status min_peak_search(search *s, bool *keep, int *vars, ot_error *err) {
    const ot_remat_analysis *a = s->a;
    int64_t saved_budget = s->budget;
    s->budget = -1; /* nothing fits: the score is (peak, cost) */
    ot_remat_policy p = {.kind = OT_REMAT_SQRT};
    ot_status st = ot_remat_policy_keep(s->g, a, &p, keep, err);
    if (st == OT_OK) st = ot_remat_search_try(s, keep, NULL, NULL, err);
    if (st == OT_OK) st = ot_remat_try_segment_ladder(s, keep, err);
    if (st == OT_OK) {
        int n = ot_remat_search_vars(s->g, a, false, vars);
        memcpy(keep, s->min_keep, (size_t)a->n_values * sizeof(bool));
        st = ot_remat_search_flips(s, keep, vars, n, ot_remat_eval_cap(n), err);
        memcpy(keep, s->min_keep, (size_t)a->n_values * sizeof(bool));
    }
    s->budget = saved_budget;
    return st;
}

double ot_remat_search_cost(search *s, const bool *keep, int *n_clones) {
    const ot_remat_analysis *a = s->a;
    bool *cloned = s->walk_cloned;
    int *stack = s->walk_stack, nc = 0;
    memset(cloned, 0, (size_t)a->n_nodes * sizeof(bool));
    for (int root = 0; root < a->n_values; root++) { /* ot_remat_mark_clones, on the copy */
        if (!a->saved[root] || keep[root]) continue;
        int sp = 0, p = s->walk_prod[root];
        if (cloned[p]) continue;
        cloned[p] = true;
        nc++;
        stack[sp++] = p;
        while (sp > 0) {
            int id = stack[--sp];
            for (int k = s->walk_start[id]; k < s->walk_start[id + 1]; k++) {
                int u = s->walk_in[k];
                if (keep[u] || cloned[s->walk_prod[u]]) continue;
                cloned[s->walk_prod[u]] = true;
                nc++;
                stack[sp++] = s->walk_prod[u];
            }
        }
    }
    if (n_clones) *n_clones = nc;
    double cost = 0.0;
    for (int id = 0; id < a->n_nodes; id++)
        if (cloned[id]) cost += a->node_flops[id];
    return cost;
}

/* The search's copy of what the clone walk reads (see ot_remat_search). */
static bool walk_init(search *s) {
    const ot_graph *g = s->g;
    const ot_remat_analysis *a = s->a;
    int n_in = 0;
    for (int id = 0; id < a->n_nodes; id++) n_in += g->nodes[id].n_inputs;
    s->walk_prod = ot_xcalloc((size_t)a->n_values + 1, sizeof(int));
    s->walk_start = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(int));
    s->walk_in = ot_xcalloc((size_t)n_in + 1, sizeof(int));
    s->walk_stack = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(int));
    s->walk_cloned = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(bool));
    s->memo_key = ot_xcalloc((size_t)a->n_values + 1, sizeof(bool));
    if (!s->walk_prod || !s->walk_start || !s->walk_in || !s->walk_stack || !s->walk_cloned || !s->memo_key)
        return false;
    for (int v = 0; v < a->n_values; v++) s->walk_prod[v] = g->values[v].producer;
    n_in = 0;
    for (int id = 0; id < a->n_nodes; id++) {
        s->walk_start[id] = n_in;
        const ot_node *n = &g->nodes[id];
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] >= 0 && a->candidate[n->inputs[i]]) s->walk_in[n_in++] = n->inputs[i];
    }
    s->walk_start[a->n_nodes] = n_in;
    return true;
}

void ot_remat_search_free(search *s) {
    free(s->best);
    free(s->min_keep);
    ot_plan_scratch_free(s->scratch);
    ot_remat_rewrite_buf_free(&s->rw_buf);
    ot_remat_memo_free(&s->own_memo);
    free(s->walk_prod);
    free(s->walk_start);
    free(s->walk_in);
    free(s->walk_stack);
    free(s->walk_cloned);
    free(s->memo_key);
}

ot_status ot_remat_search_init(search *s, ot_graph *g, const ot_remat_analysis *a, int64_t budget,
                             ot_remat_measure_fn measure, void *user, ot_remat_auto_stats *stats, ot_error *err) {
    memset(stats, 0, sizeof *stats);
    *s = (search){.g = g, .a = a, .measure = measure, .user = user, .budget = budget, .stats = stats,
                  .cost_cap = HUGE_VAL, .fit_target = budget > 0 ? budget : 0};
    s->best = ot_xcalloc((size_t)a->n_values, sizeof(bool));
    s->min_keep = ot_xcalloc((size_t)a->n_values, sizeof(bool));
    s->scratch = ot_plan_scratch_new();
    ot_remat_memo_init(&s->own_memo, a->n_values);
    s->memo = &s->own_memo;
    if (!s->best || !s->min_keep || !s->scratch || !walk_init(s))
        return ot_fail(err, OT_E_MEMORY, "remat: out of memory for %d values", a->n_values);
    /* The graph between the measurements' rewrites, for their schedules (plan/sched_base.h);
     * without it (out of memory, a graph the schedule refuses) each reads the whole graph. */
    ot_error ignored = {0};
    ot_schedule_base_set(s->scratch, g, &ignored);
    return OT_OK;
}

ot_status ot_remat_least_memory(ot_graph *g, const ot_remat_analysis *a, ot_remat_measure_fn measure, void *user,
                                bool *keep_out, int64_t *peak, ot_error *err) {
    ot_remat_auto_stats stats;
    search s;
    int nv = a->n_values;
    bool *keep = ot_xcalloc((size_t)nv, sizeof(bool));
    int *vars = ot_xcalloc((size_t)nv, sizeof(int));
    ot_status st = ot_remat_search_init(&s, g, a, -1, measure, user, &stats, err);
    if (st == OT_OK && (!keep || !vars)) st = ot_fail(err, OT_E_MEMORY, "remat: out of memory for %d values", nv);
    if (st == OT_OK) st = min_peak_search(&s, keep, vars, err);
    if (st == OT_OK) { /* then the cheapest plan at that peak */
        s.budget = stats.min_peak;
        memcpy(keep, s.min_keep, (size_t)nv * sizeof(bool));
        int n = ot_remat_search_vars(g, a, false, vars);
        st = ot_remat_search_flips(&s, keep, vars, n, ot_remat_eval_cap(n), err);
    }
    if (st == OT_OK) {
        memcpy(keep_out, s.have_best ? s.best : s.min_keep, (size_t)nv * sizeof(bool));
        if (peak) *peak = s.have_best ? s.best_peak : stats.min_peak;
    }
    free(keep);
    free(vars);
    ot_remat_search_free(&s);
    return st;
}

/* FLOPs of recomputing saved value v from the other saved values, params and inputs:
 * its producer and, back through its inputs, every candidate the backward pass does
 * not read. Freeing a value whose input is such a candidate (a Transpose of a view of
 * a MatMul) frees nothing unless that chain is recomputed too. stamp/stack: scratch,
 * stamp[node] == tag marks a visited node. */
double ot_remat_closure_flops(const ot_graph *g, const ot_remat_analysis *a, int v, int *stamp, int tag, int *stack) {
    double f = 0.0;
    int sp = 0;
    stack[sp++] = g->values[v].producer;
    stamp[g->values[v].producer] = tag;
    while (sp > 0) {
        const ot_node *n = &g->nodes[stack[--sp]];
        f += a->node_flops[n->id];
        for (int i = 0; i < n->n_inputs; i++) {
            int u = n->inputs[i];
            if (u < 0 || !a->candidate[u] || a->saved[u] || a->pinned[u]) continue;
            int p = g->values[u].producer;
            if (stamp[p] != tag) {
                stamp[p] = tag;
                stack[sp++] = p;
            }
        }
    }
    return f;
}

static ot_status closure_orders(search *s, const int *vars, int n, ranked *order, bool *keep, ot_error *err) {
    const ot_remat_analysis *a = s->a;
    int *stamp = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(int)), *stack = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(int));
    double *cf = ot_xcalloc((size_t)n + 1, sizeof(double));
    ot_status st = OT_OK;
    if (!stamp || !stack || !cf) st = ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d values", n);
    for (int i = 0; i < n && !st; i++) {
        cf[i] = ot_remat_closure_flops(s->g, a, vars[i], stamp, i + 1, stack);
        order[i] = (ranked){vars[i], (double)ot_remat_value_bytes(s->g, vars[i]) / (1.0 + cf[i])};
    }
    if (!st) {
        qsort(order, (size_t)n, sizeof(ranked), ot_remat_ranked_desc);
        st = bisect_order(s, order, n, true, keep, err);
    }
    for (int i = 0; i < n && !st; i++) order[i] = (ranked){vars[i], -cf[i]};
    if (!st) {
        qsort(order, (size_t)n, sizeof(ranked), ot_remat_ranked_desc);
        st = bisect_order(s, order, n, true, keep, err);
    }
    free(stamp);
    free(stack);
    free(cf);
    return st;
}


typedef struct swap {
    double cost;
    int keep_v, drop_v;
} swap;

static int swap_cmp(const void *x, const void *y) {
    const swap *a = x, *b = y;
    if (a->cost != b->cost) return a->cost < b->cost ? -1 : 1;
    if (a->keep_v != b->keep_v) return a->keep_v - b->keep_v;
    return a->drop_v - b->drop_v;
}

/* Keeps the inputs of v's producer that the backward pass does not read (so that a
 * recomputed v costs its producer alone, as in a Relu after a residual Add). */
int ot_remat_frontier_keep(const ot_graph *g, const ot_remat_analysis *a, bool *keep, int v, int *undo) {
    const ot_node *n = &g->nodes[g->values[v].producer];
    int k = 0;
    for (int i = 0; i < n->n_inputs && k < OT_REMAT_FRONTIER_MAX; i++) {
        int u = n->inputs[i];
        if (u < 0 || !a->candidate[u] || a->saved[u] || a->pinned[u] || keep[u]) continue;
        keep[u] = true;
        undo[k++] = u;
    }
    return k;
}

/* Exchange search from the best plan: keep one recomputed value and recompute one
 * kept one instead, cheapest exchange first, while the peak fits (first fitting
 * improvement wins, then again). Finds what single flips cannot: keeping the output
 * of a matmul chain and recomputing a cheap LayerNorm or residual Add in its place,
 * each flip alone either over the budget or dearer. With frontier, each exchange also
 * comes in a second form that keeps the dropped value's inputs (ot_remat_frontier_keep). */
ot_status ot_remat_search_swaps(search *s, bool *keep, const int *vars, int n, int max_evals, bool frontier, ot_error *err) {
    const ot_remat_analysis *a = s->a;
    size_t nb = (size_t)a->n_values * sizeof(bool);
    swap *sw = ot_xcalloc(2 * (size_t)n * (size_t)n + 1, sizeof(swap));
    if (!sw) return ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d exchanges", n * n);
    ot_status st = OT_OK;
    bool improved = s->have_best;
    int undo[OT_REMAT_FRONTIER_MAX];
    while (st == OT_OK && improved && max_evals > 0) {
        improved = false;
        memcpy(keep, s->best, nb);
        double cur = s->best_cost;
        int m = 0;
        for (int i = 0; i < n; i++) {
            if (keep[vars[i]]) continue;
            for (int j = 0; j < n; j++) {
                if (!keep[vars[j]]) continue;
                keep[vars[i]] = true, keep[vars[j]] = false;
                double c = ot_remat_search_cost(s, keep, NULL);
                if (c >= 0.0 && c < cur) sw[m++] = (swap){c, vars[i], vars[j]};
                if (frontier) {
                    int k = ot_remat_frontier_keep(s->g, a, keep, vars[j], undo);
                    if (k > 0) {
                        c = ot_remat_search_cost(s, keep, NULL);
                        if (c >= 0.0 && c < cur) sw[m++] = (swap){c, vars[i], -1 - vars[j]};
                    }
                    for (int t = 0; t < k; t++) keep[undo[t]] = false;
                }
                keep[vars[i]] = false, keep[vars[j]] = true;
            }
        }
        qsort(sw, (size_t)m, sizeof(swap), swap_cmp);
        for (int k = 0; k < m && max_evals > 0 && !improved; k++) {
            int dv = sw[k].drop_v < 0 ? -1 - sw[k].drop_v : sw[k].drop_v, nu = 0;
            keep[sw[k].keep_v] = true, keep[dv] = false;
            if (sw[k].drop_v < 0) nu = ot_remat_frontier_keep(s->g, a, keep, dv, undo);
            double before = s->best_cost;
            st = ot_remat_search_try(s, keep, NULL, NULL, err);
            max_evals--;
            if (st != OT_OK) break;
            improved = s->best_cost < before;
            for (int t = 0; t < nu; t++) keep[undo[t]] = false;
            keep[sw[k].keep_v] = false, keep[dv] = true;
        }
    }
    free(sw);
    return st;
}

/* Add-and-fill (auto_polish.c), then flips from what it found. */
static ot_status fill_stage(search *s, bool *keep, int *vars, ot_error *err) {
    double before = s->best_cost;
    ot_status st = ot_remat_fill_search(s, keep, vars, err);
    if (st != OT_OK || s->best_cost >= before) return st;
    int n = ot_remat_search_vars(s->g, s->a, false, vars);
    memcpy(keep, s->best, (size_t)s->a->n_values * sizeof(bool));
    return ot_remat_search_flips(s, keep, vars, n, ot_remat_eval_cap(n), err);
}

/* Steps 1-8 of the file comment under budget: the plan into keep_out, stats filled.
 * target: the budget the plans will run under (ot_remat_measurement.fit_target), which
 * step 9's search below the first plan's peak keeps. */
static ot_status auto_search(ot_graph *g, const ot_remat_analysis *a, int64_t budget, int64_t target,
                             ot_remat_measure_fn measure, void *user, ot_remat_memo *memo, bool *keep_out,
                             ot_remat_auto_stats *stats,
                             ot_error *err) {
    int nv = a->n_values;
    search s;
    bool *keep = ot_xcalloc((size_t)nv, sizeof(bool));
    int *vars = ot_xcalloc((size_t)nv, sizeof(int));
    ranked *order = ot_xcalloc((size_t)nv, sizeof(ranked));
    ot_status st = ot_remat_search_init(&s, g, a, budget, measure, user, stats, err);
    s.fit_target = target;
    if (st != OT_OK) goto fail;
    s.memo = memo;
    if (!keep || !order || !vars) {
        st = ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d values", nv);
        goto fail;
    }
    static const ot_remat_kind seeds[] = {OT_REMAT_NONE, OT_REMAT_SELECTIVE, OT_REMAT_SQRT};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        ot_remat_policy p = {.kind = seeds[i]};
        st = ot_remat_policy_keep(g, a, &p, keep, err);
        if (st == OT_OK) st = ot_remat_search_try(&s, keep, NULL, NULL, err);
        if (st != OT_OK) goto fail;
        if (i == 0 && s.have_best) goto done; /* nothing to recompute: none fits */
    }
    st = ot_remat_try_segment_ladder(&s, keep, err);
    if (st != OT_OK) goto fail;

    /* Greedy orders over the saved values, bisected: bytes per FLOP, then FLOPs. */
    int n = ot_remat_search_vars(g, a, false, vars);
    for (int i = 0; i < n; i++) {
        double f = a->node_flops[g->values[vars[i]].producer];
        order[i] = (ranked){vars[i], (double)ot_remat_value_bytes(g, vars[i]) / (1.0 + f)};
    }
    qsort(order, (size_t)n, sizeof(ranked), ot_remat_ranked_desc);
    st = bisect_order(&s, order, n, false, keep, err);
    if (st != OT_OK) goto fail;
    for (int i = 0; i < n; i++) order[i].key = -a->node_flops[g->values[order[i].v].producer];
    qsort(order, (size_t)n, sizeof(ranked), ot_remat_ranked_desc);
    st = bisect_order(&s, order, n, false, keep, err);
    if (st != OT_OK) goto fail;
    /* The same two orders by what freeing a value really costs: its producer chain
     * back to saved values (closure_flops), not its producer alone. */
    st = closure_orders(&s, vars, n, order, keep, err);
    if (st != OT_OK) goto fail;

    if (!s.have_best) { /* tight budget: the least-peak search, which `all` also uses */
        st = min_peak_search(&s, keep, vars, err);
        if (st == OT_OK) st = ot_remat_search_try(&s, keep, NULL, NULL, err);
        if (st != OT_OK) goto fail;
    }
    if (!s.have_best) { /* still none: `all`'s own plan, whose cheapest-at-the-peak stage can go lower */
        st = ot_remat_least_memory(g, a, measure, user, keep, NULL, err);
        if (st == OT_OK) st = ot_remat_search_try(&s, keep, NULL, NULL, err);
        if (st != OT_OK) goto fail;
    }
    if (!s.have_best) {
        st = ot_fail(err, OT_E_MEMORY,
                     "memory budget %lld bytes (%.1f MiB) cannot be met: the smallest planned peak is %lld bytes "
                     "(%.1f MiB, --remat all); raise --memory-budget to at least that or lower --batch-size",
                     (long long)budget, (double)budget / 1048576.0, (long long)stats->min_peak,
                     (double)stats->min_peak / 1048576.0);
        goto fail;
    }
    memcpy(keep, s.best, (size_t)nv * sizeof(bool));
    n = ot_remat_search_vars(g, a, false, vars);
    st = ot_remat_search_flips(&s, keep, vars, n, ot_remat_eval_cap(n), err);
    /* exchanges, then flips again from what they found, while either lowers the cost */
    for (int round = 0; round < 4 && st == OT_OK && n <= OT_REMAT_SWAP_MAX_VARS; round++) {
        double before = s.best_cost;
        st = ot_remat_search_swaps(&s, keep, vars, n, ot_remat_eval_cap(n), false, err);
        if (st == OT_OK) st = ot_remat_unclone_search(&s, keep, vars, n, false, err);
        if (st != OT_OK || s.best_cost >= before) break;
        memcpy(keep, s.best, (size_t)nv * sizeof(bool));
        st = ot_remat_search_flips(&s, keep, vars, n, ot_remat_eval_cap(n), err);
    }
    if (st != OT_OK) goto fail;
    /* then the same and larger moves over every candidate (auto_polish.c) */
    if (st == OT_OK) st = ot_remat_auto_polish(&s, keep, vars, err);
    /* last, unclone moves on cheap clones too, then flips, while they win: after the
     * rest, so that every plan the steps before reach is reached as before */
    n = ot_remat_search_vars(g, a, false, vars);
    for (int round = 0; round < 4 && st == OT_OK && n <= OT_REMAT_SWAP_MAX_VARS; round++) {
        double before = s.best_cost;
        st = ot_remat_unclone_search(&s, keep, vars, n, true, err);
        if (st != OT_OK || s.best_cost >= before) break;
        memcpy(keep, s.best, (size_t)nv * sizeof(bool));
        st = ot_remat_search_flips(&s, keep, vars, n, ot_remat_eval_cap(n), err);
    }
    /* then exchanges whose peak a shift of one kept value brings back (auto_shift.c) */
    if (st == OT_OK && n <= OT_REMAT_SWAP_MAX_VARS) st = ot_remat_shift_search(&s, keep, vars, n, err);
    if (st == OT_OK) st = fill_stage(&s, keep, vars, err);
    if (st != OT_OK) goto fail;
done:
    memcpy(keep_out, s.best, (size_t)nv * sizeof(bool));
    stats->peak = s.best_peak;
    stats->cost = s.best_cost;
fail:
    free(keep);
    free(order);
    free(vars);
    ot_remat_search_free(&s);
    return st;
}

/* The last stages again from keep (the plan of auto's second search, made under a
 * budget below the first plan's peak), under the real budget: flips, exchanges and
 * shifts (auto_shift.c), add-and-fill (auto_polish.c). The second search never saw the
 * room between its budget and the real one (llama at 361,472 bytes: its plan, 36,896
 * FLOPs at 359,872 bytes, plus two exchanges and a flip that fit only above 359,871:
 * 33,792, optimal's). Replaces keep and stats' cost and peak only with a cheaper plan
 * that fits. */
static ot_status auto_finish(ot_graph *g, const ot_remat_analysis *a, int64_t budget, ot_remat_measure_fn measure,
                             void *user, ot_remat_memo *memo, bool *keep, ot_remat_auto_stats *stats, ot_error *err) {
    ot_remat_auto_stats local;
    search s;
    int nv = a->n_values;
    bool *work = ot_xcalloc((size_t)nv + 1, sizeof(bool));
    int *vars = ot_xcalloc((size_t)nv + 1, sizeof(int));
    ot_status st = ot_remat_search_init(&s, g, a, budget, measure, user, &local, err);
    s.memo = memo;
    if (st == OT_OK && (!work || !vars)) st = ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d values", nv);
    if (st == OT_OK) {
        memcpy(work, keep, (size_t)nv * sizeof(bool));
        st = ot_remat_search_try(&s, work, NULL, NULL, err);
    }
    int n = st == OT_OK ? ot_remat_search_vars(g, a, false, vars) : 0;
    if (st == OT_OK && s.have_best) st = ot_remat_search_flips(&s, work, vars, n, ot_remat_eval_cap(n), err);
    if (st == OT_OK && n <= OT_REMAT_SWAP_MAX_VARS) st = ot_remat_shift_search(&s, work, vars, n, err);
    if (st == OT_OK) st = fill_stage(&s, work, vars, err);
    if (st == OT_OK && s.have_best && s.best_cost < stats->cost) {
        memcpy(keep, s.best, (size_t)nv * sizeof(bool));
        stats->cost = s.best_cost;
        stats->peak = s.best_peak;
    }
    stats->n_measured += local.n_measured;
    stats->n_reused += local.n_reused;
    free(work);
    free(vars);
    ot_remat_search_free(&s);
    return st;
}

/* The search is local and its path depends on the budget: on tinygpt (issue 16, 821,696
 * bytes) it ends at a plan that fits with 448 bytes to spare, 1,311,232 FLOPs, from
 * which no move fits and is cheaper, while the same search under a budget just below that
 * plan's peak passes elsewhere and ends at 729,600. So, on the graphs the polish runs on
 * (the small ones, where a search takes a fraction of a second), auto searches once more
 * under the first plan's peak less one byte (every plan that fits that fits the budget)
 * and keeps the cheaper plan; the first plan is never given up for a dearer one. */
ot_status ot_remat_auto(ot_graph *g, const ot_remat_analysis *a, int64_t budget, ot_remat_measure_fn measure,
                        void *user, bool *keep_out, ot_remat_auto_stats *stats, ot_error *err) {
    ot_remat_auto_stats local;
    if (!stats) stats = &local;
    /* all three searches': a measurement does not depend on the search's budget, and
     * the three plan under one target (the budget, ot_remat_measurement.fit_target) */
    ot_remat_memo memo;
    ot_remat_memo_init(&memo, a->n_values);
    bool *keep = NULL;
    int *vars = NULL;
    ot_status st = auto_search(g, a, budget, budget, measure, user, &memo, keep_out, stats, err);
    if (st != OT_OK || stats->cost <= 0.0) goto done;
    vars = ot_xcalloc((size_t)a->n_values + 1, sizeof(int));
    keep = ot_xcalloc((size_t)a->n_values + 1, sizeof(bool));
    if (!vars || !keep) {
        st = ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d values", a->n_values);
        goto done;
    }
    if (ot_remat_search_vars(g, a, true, vars) <= OT_REMAT_POLISH_MAX_VARS) {
        ot_remat_auto_stats again = {0};
        ot_error e2 = {0};
        st = auto_search(g, a, stats->peak - 1, budget, measure, user, &memo, keep, &again, &e2);
        stats->n_measured += again.n_measured;
        stats->n_reused += again.n_reused;
        if (st == OT_OK && again.cost < stats->cost) {
            memcpy(keep_out, keep, (size_t)a->n_values * sizeof(bool));
            stats->peak = again.peak;
            stats->cost = again.cost;
            st = auto_finish(g, a, budget, measure, user, &memo, keep_out, stats, &e2);
        }
        if (st == OT_E_MEMORY) st = OT_OK; /* nothing fits below the first plan's peak: it stays */
        else if (st != OT_OK && err) *err = e2;
    }
done:
    free(vars);
    free(keep);
    ot_remat_memo_free(&memo);
    return st;
}

ot_status ot_remat_choose(ot_graph *g, const ot_remat_analysis *a, const ot_remat_policy *p,
                          ot_remat_measure_fn measure, void *user, bool *keep, ot_error *err) {
    if (p->kind == OT_REMAT_ALL && measure) return ot_remat_least_memory(g, a, measure, user, keep, NULL, err);
    if (p->kind == OT_REMAT_OPTIMAL && p->budget_bytes > 0) {
        if (!measure) return ot_fail(err, OT_E_INTERNAL, "remat optimal: no memory measure given");
        return ot_remat_optimal(g, a, p->budget_bytes, p->time_limit_s, measure, user, keep, NULL, err);
    }
    if (p->kind == OT_REMAT_AUTO) {
        if (!measure) return ot_fail(err, OT_E_INTERNAL, "remat auto: no memory measure given");
        if (p->budget_bytes <= 0) return ot_remat_auto_modest(g, a, measure, user, keep, NULL, err);
        return ot_remat_auto(g, a, p->budget_bytes, measure, user, keep, NULL, err);
    }
    return ot_remat_policy_keep(g, a, p, keep, err);
}
