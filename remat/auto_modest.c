/* auto_modest.c — `--remat auto` without a budget: the least peak the planner measures
 * among plans of modest recompute (at most OT_REMAT_AUTO_MODEST of the step's FLOPs),
 * never a plan whose peak exceeds --remat none's.
 *
 * Why not selective, as before: selective can raise the peak (mlp, chain48, tinygpt
 * with --lora 4: a recomputed pointwise output lands beside the gradients at the
 * backward pass's peak), and nothing told the user. Here every candidate is measured
 * by the planner (the search of remat/auto.c with a cost cap instead of a budget):
 *   1. the policy plans none, selective, sqrt and the segment ladders, those within
 *      the cap (a dearer plan is not even planned);
 *   2. auto's four greedy drop orders (bytes per FLOP and FLOPs, of a value's producer
 *      and of its recompute chain), each at the longest prefix within the cap (the
 *      cost grows with the prefix, so that length is a bisection on cost alone) and
 *      at shorter ones on a ladder, peaks not being monotone;
 *   3. local search from the least-peak plan on (peak, steps at the top, cost), within
 *      the cap;
 *   4. the cheapest plan at that peak: local search and exchanges (auto's moves) under
 *      it as a budget. Not auto's whole budgeted search: it found the same peaks on every
 *      sample and on the zoo's five CI models, a little cheaper (tinygpt 3.4% of the
 *      step against 3.6%), but took up to 5 s more on mobilenet_v3_small, at every
 *      `train` start (this is the default policy).
 * When the least peak is not below none's, the plan is none (stats->no_gain). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "remat/auto_search.h"
#include "remat/remat.h"

typedef ot_remat_search search;
typedef ot_remat_ranked ranked;

/* The longest prefix of order within the cap, then shorter ones (2/3 each time). */
static ot_status capped_prefixes(search *s, const ranked *order, int n, bool chains, bool *keep, ot_error *err) {
    int lo = 0, hi = n; /* lo: within the cap (the empty prefix is none, cost 0) */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        ot_remat_prefix_keep(s, order, mid, chains, keep);
        if (ot_remat_search_cost(s, keep, NULL) <= s->cost_cap)
            lo = mid;
        else
            hi = mid - 1;
    }
    for (int k = lo; k > 0; k = k * 2 / 3) {
        ot_remat_prefix_keep(s, order, k, chains, keep);
        ot_status st = ot_remat_search_try(s, keep, NULL, NULL, err);
        if (st != OT_OK) return st;
    }
    return OT_OK;
}

/* Step 2 of the file comment: the four orders over the saved values vars[0..n). */
static ot_status greedy_orders(search *s, const int *vars, int n, ranked *order, bool *keep, ot_error *err) {
    const ot_remat_analysis *a = s->a;
    const ot_graph *g = s->g;
    int *stamp = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(int)),
        *stack = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(int));
    double *cf = ot_xcalloc((size_t)n + 1, sizeof(double));
    ot_status st = OT_OK;
    if (!stamp || !stack || !cf) st = ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d values", n);
    for (int i = 0; i < n && !st; i++)
        cf[i] = ot_remat_closure_flops(g, a, vars[i], stamp, i + 1, stack);
    for (int pass = 0; pass < 4 && !st; pass++) {
        bool chains = pass >= 2, by_bytes = pass % 2 == 0;
        for (int i = 0; i < n; i++) {
            double f = chains ? cf[i] : a->node_flops[g->values[vars[i]].producer];
            order[i] = (ranked){vars[i], by_bytes ? (double)ot_remat_value_bytes(g, vars[i]) / (1.0 + f) : -f};
        }
        qsort(order, (size_t)n, sizeof(ranked), ot_remat_ranked_desc);
        st = capped_prefixes(s, order, n, chains, keep, err);
    }
    free(stamp);
    free(stack);
    free(cf);
    return st;
}

/* Steps 1-4 of the file comment; the plan into keep_out (none's when it is not lower). */
static ot_status modest_search(search *s, bool *keep, int *vars, ranked *order, bool *keep_out, ot_error *err) {
    const ot_remat_analysis *a = s->a;
    ot_remat_auto_stats *stats = s->stats;
    size_t nb = (size_t)a->n_values * sizeof(bool);
    int64_t none_peak = 0;
    ot_remat_policy p = {.kind = OT_REMAT_NONE};
    ot_status st = ot_remat_policy_keep(s->g, a, &p, keep, err);
    if (!st) st = ot_remat_search_try(s, keep, &none_peak, NULL, err);
    memcpy(keep_out, keep, nb); /* none, unless something peaks lower */
    static const ot_remat_kind seeds[] = {OT_REMAT_SELECTIVE, OT_REMAT_SQRT};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0] && !st; i++) {
        p.kind = seeds[i];
        st = ot_remat_policy_keep(s->g, a, &p, keep, err);
        if (!st) st = ot_remat_search_try(s, keep, NULL, NULL, err);
    }
    if (!st) st = ot_remat_try_segment_ladder(s, keep, err);
    int n = ot_remat_search_vars(s->g, a, false, vars);
    if (!st) st = greedy_orders(s, vars, n, order, keep, err);
    if (!st) { /* 3: the least peak, locally */
        memcpy(keep, s->min_keep, nb);
        st = ot_remat_search_flips(s, keep, vars, n, ot_remat_eval_cap(n), err);
    }
    stats->none_peak = none_peak;
    if (st || stats->min_peak >= none_peak) {
        stats->no_gain = !st;
        stats->peak = none_peak;
        return st;
    }
    s->budget = stats->min_peak; /* 4: the cheapest plan at that peak */
    memcpy(keep, s->min_keep, nb);
    st = ot_remat_search_flips(s, keep, vars, n, ot_remat_eval_cap(n), err);
    /* exchanges, then flips, while either makes it cheaper */
    for (int round = 0; round < 4 && !st && n <= OT_REMAT_SWAP_MAX_VARS; round++) {
        double before = s->best_cost;
        st = ot_remat_search_swaps(s, keep, vars, n, ot_remat_eval_cap(n), true, err);
        if (st || s->best_cost >= before) break;
        memcpy(keep, s->best, nb);
        st = ot_remat_search_flips(s, keep, vars, n, ot_remat_eval_cap(n), err);
    }
    if (st) return st;
    memcpy(keep_out, s->have_best ? s->best : s->min_keep, nb);
    stats->peak = s->have_best ? s->best_peak : stats->min_peak;
    stats->cost = s->have_best ? s->best_cost : 0.0;
    return OT_OK;
}

ot_status ot_remat_auto_modest(ot_graph *g, const ot_remat_analysis *a, ot_remat_measure_fn measure, void *user,
                               bool *keep_out, ot_remat_auto_stats *stats, ot_error *err) {
    ot_remat_auto_stats local;
    if (!stats) stats = &local;
    search s;
    int nv = a->n_values;
    bool *keep = ot_xcalloc((size_t)nv + 1, sizeof(bool));
    int *vars = ot_xcalloc((size_t)nv + 1, sizeof(int));
    ranked *order = ot_xcalloc((size_t)nv + 1, sizeof(ranked));
    ot_status st = ot_remat_search_init(&s, g, a, -1, measure, user, stats, err);
    if (!st && (!keep || !vars || !order))
        st = ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d values", nv);
    s.cost_cap = OT_REMAT_AUTO_MODEST * a->step_flops;
    stats->cost_cap = s.cost_cap;
    if (!st) st = modest_search(&s, keep, vars, order, keep_out, err);
    free(keep);
    free(vars);
    free(order);
    ot_remat_search_free(&s);
    return st;
}
