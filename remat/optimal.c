/* optimal.c — `--remat optimal`: the keep set of least recompute FLOPs whose planned
 * peak fits a budget, as a mixed-integer programme solved exactly (CBC and GLPK,
 * through remat/optimal_mip.h), each solution then checked by the planner.
 *
 * Why not Checkmate's R/S/FREE matrices: they have a variable per (stage, node), n^2
 * for n nodes, which a free solver cannot branch over at a few thousand nodes. The
 * schedule here is fixed (plan/schedule.h places every clone just before its first
 * backward reader), so the only choice is remat's own: which forward values the
 * backward pass keeps. The programme, over the steps of the --remat none schedule:
 *   x_v in {0,1}  saved value v is recomputed (not kept)                 per saved value
 *   k_u in {0,1}  a value the backward pass does not read is kept for     per such value
 *                 the clones that read it (else they recompute it too)
 *   r_p in [0,1]  forward node p is cloned; cost FLOPs(p) (remat/cost.c)  per node
 *   r_prod(v) >= x_v;  r_prod(u) >= r_p - keep(u) for each candidate input u of p
 * which is exactly the rewrite's closure (ot_remat_mark_clones), so the objective is
 * the rewrite's extra FLOPs. Memory: bytes in use at step t are the none plan's
 * timeline T0(t), less b_v for a recomputed v between its last forward read and
 * its first backward read, plus b_u for a kept-for-clones u from its last forward
 * read to the clone that reads it. Views share their base's bytes: a base is freed
 * only when every view of it is (z_r <= x_v). Each term is an interval of steps, so
 * the constraint "in use <= budget at every step" needs one row per interval
 * boundary with a running sum S_i (S_i = S_{i-1} + terms starting - terms ending):
 * O(values) rows and coefficients, not O(values x steps).
 *
 * The model ignores the clones' own transients, in-place reuse and fragmentation,
 * and the arena's peak is the highest end offset, not the bytes in use. A big
 * workspace that fits no hole goes on top of the highest live block, so holes left
 * below it by best fit count in full: on resnet the ConvGradInput/ConvGradWeight
 * workspace (320 KiB of a 1015 KiB peak) puts the plain plan's peak 64 KiB above its
 * most bytes in use, and which plans leave such holes no linear model of bytes sees.
 * So every solution is planned (the measure). While its exact peak exceeds the
 * budget, the plan is excluded (a no-good cut over the choices that decide its
 * rewrite: no other plan is lost) and the programme solved again; once the
 * programme's optimum is no cheaper than the seed (auto's plan, which the planner
 * accepted), the seed is proven optimal. A rejected plan also shows where clones ran
 * earlier than the model placed them (a chain through recomputed saved values,
 * remat/optimal_chain.h): each such chain holds for every plan, so it becomes rows
 * and the programme is rebuilt with them (in the exact rounds). With the seed, every
 * round is exact, each with all the time left and the best bound so far as a floor
 * on the objective (solve_rounds, floor_row_add), until a solution is accepted or the
 * time runs out. Without it, after the exact rounds (NOGOOD_ROUNDS, more while time
 * is left), or once a solve runs out of time, rounds also lower the model's budget by
 * the excess where the plan peaks (up to MAX_ROUNDS): faster, not exact. Stats say by
 * how much the two peaks differ and how many rounds ran.
 *
 * Padding. Every row's budget is the budget less the none plan's pinned padding P
 * (planner.h: every pinned value starts on a 64-byte boundary, and those bytes are in
 * no timeline entry). That excludes no plan the planner accepts whose bytes in use
 * the model states exactly or understates: the rewrite changes no pinned value (it
 * clones forward nodes, whose outputs are transient, and rewires backward readers),
 * so every rewrite has the same pinned region and P; its transient blocks lie above
 * that region, so its peak is at least T(t) + P at every step t where one is live
 * (T: its true bytes in use), and a plan with peak <= budget has T(t) <= budget - P.
 * The rows can then cut such a plan only where the model's bytes at some step exceed
 * its T(t), the case in which the full budget's rows already can. On chain48 the
 * padding was the 140 of the 172 bytes by which the rejected permutations' peaks
 * exceed the model's. Where the padded programme is infeasible the rounds go on at
 * the full budget (the fallback), so the padding never turns a budget the old
 * programme met into no plan. model_budget leaves P out: it reports the tightening. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/planner.h"
#include "remat/optimal_model.h"
#include "remat/remat.h"
#include "remat/remat_internal.h"

#define MAX_ROUNDS 140
#define NEVER OT_OPT_NEVER

bool ot_remat_optimal_available(void) { return ot_mip_solver_available(); }

typedef ot_opt_model model;

/* Frees what build_model makes. */
static void model_clear(model *md) {
    free(md->step_of);
    free(md->first_bwd);
    free(md->last_fwd);
    free(md->root);
    free(md->reach);
    free(md->place);
    free(md->col);
    free(md->rcol);
    free(md->terms);
    free(md->bounds);
    free(md->s_col);
    free(md->t0max);
    ot_mip_free(&md->mip);
    md->step_of = md->first_bwd = md->last_fwd = md->root = md->reach = md->place = md->col = md->rcol = NULL;
    md->terms = NULL, md->bounds = md->s_col = NULL, md->t0max = NULL;
    md->n_terms = md->cap_terms = md->n_bounds = 0;
    memset(&md->mip, 0, sizeof md->mip);
}

static void model_free(model *md) {
    model_clear(md);
    free(md->m0.order);
    free(md->m0.timeline);
    ot_opt_chains_free(&md->chains);
    ot_mip_free(&md->cuts);
    ot_plan_free(md->p0);
}

static bool is_var(const model *md, int v) { return v >= 0 && md->a->candidate[v] && !md->a->pinned[v]; }

/* Steps of the none plan, and per value its last forward and first backward reader. */
static void value_windows(model *md) {
    const ot_graph *g = md->g;
    const ot_remat_analysis *a = md->a;
    for (int id = 0; id < a->n_nodes; id++) md->step_of[id] = -1;
    for (int s = 0; s < md->m0.n_steps; s++)
        if (md->m0.order[s] >= 0 && md->m0.order[s] < a->n_nodes) md->step_of[md->m0.order[s]] = s;
    for (int v = 0; v < a->n_values; v++) {
        md->first_bwd[v] = NEVER;
        md->last_fwd[v] = -1;
        md->root[v] = v;
        if (!a->candidate[v]) continue;
        md->last_fwd[v] = md->step_of[g->values[v].producer];
        for (int c = 0; c < g->values[v].n_consumers; c++) {
            const ot_node *cn = &g->nodes[g->values[v].consumers[c]];
            int s = cn->id < a->n_nodes ? md->step_of[cn->id] : -1;
            if (cn->removed || s < 0) continue;
            if (cn->phase == OT_PHASE_BACKWARD) md->first_bwd[v] = s < md->first_bwd[v] ? s : md->first_bwd[v];
            else if (s > md->last_fwd[v]) md->last_fwd[v] = s;
        }
    }
    /* Views share their base's bytes (plan/views.h): one root per chain. */
    for (int p = 0; p < a->n_fwd; p++) {
        const ot_node *n = &g->nodes[a->fwd[p]];
        if (!ot_op_has(n->op, OT_T_VIEW) || n->n_inputs < 1 || n->n_outputs < 1) continue;
        int u = n->inputs[0], v = n->outputs[0];
        if (u >= 0 && v >= 0 && a->candidate[u] && a->candidate[v] &&
            ot_remat_value_bytes(g, u) == ot_remat_value_bytes(g, v))
            md->root[v] = md->root[u];
    }
    /* reach[p]: the earliest backward step at which a clone of p would run. */
    for (int p = a->n_fwd - 1; p >= 0; p--) {
        const ot_node *n = &g->nodes[a->fwd[p]];
        int r = NEVER;
        for (int o = 0; o < n->n_outputs; o++) {
            int w = n->outputs[o];
            if (w < 0 || !a->candidate[w]) continue;
            if (a->saved[w] && md->first_bwd[w] < r) r = md->first_bwd[w];
            for (int c = 0; c < g->values[w].n_consumers; c++) {
                int cid = g->values[w].consumers[c];
                if (cid < a->n_nodes && a->fwd_pos[cid] > p && md->reach[cid] < r) r = md->reach[cid];
            }
        }
        md->reach[a->fwd[p]] = r;
    }
    /* place[p]: where a clone of p runs when cloned: before the first backward read of
     * a saved output, or before the clone of a consumer of an unsaved output (which
     * exists only for such a chain). Through a saved output the chain is cut: whether
     * that output is recomputed too is a choice: the chains that a rejected plan
     * shows through such outputs become rows (remat/optimal_chain.h). */
    for (int p = a->n_fwd - 1; p >= 0; p--) {
        const ot_node *n = &g->nodes[a->fwd[p]];
        int r = NEVER;
        for (int o = 0; o < n->n_outputs; o++) {
            int w = n->outputs[o];
            if (w < 0 || !a->candidate[w]) continue;
            if (a->saved[w]) {
                if (md->first_bwd[w] < r) r = md->first_bwd[w];
                continue;
            }
            for (int c = 0; c < g->values[w].n_consumers; c++) {
                int cid = g->values[w].consumers[c];
                if (cid < a->n_nodes && a->fwd_pos[cid] > p && md->place[cid] < r) r = md->place[cid];
            }
        }
        md->place[a->fwd[p]] = r;
    }
}

/* Columns x/k per value, r per node, and the closure rows between them. Every plan's
 * point has r integral (its closure: 1 exactly where it clones), so r may be declared
 * integer without losing a plan; where r costs FLOPs it is, for the branching: the LP
 * clones a dear Gemm by halves, and CBC, branching on x/k alone, proved nothing on the
 * zoo's bert at 272,160 bytes in 45-60 s (bound 214,976, auto's 246,272) nor HiGHS in
 * 220 s (216,244), while with r integer CBC closes it in 10-15 s: every plan there
 * needs a dear Gemm's clone, and branching on those splits the programme into parts
 * whose relaxations are tight. Zero-cost r (views) stay continuous. */
static ot_status choice_columns(model *md, ot_error *err) {
    const ot_graph *g = md->g;
    const ot_remat_analysis *a = md->a;
    ot_mip *mp = &md->mip;
    for (int v = 0; v < a->n_values; v++) md->col[v] = -1;
    for (int id = 0; id < a->n_nodes; id++) md->rcol[id] = -1;
    for (int p = 0; p < a->n_fwd; p++) {
        const ot_node *n = &g->nodes[a->fwd[p]];
        if (md->reach[n->id] == NEVER) continue; /* no clone of it would ever be read */
        for (int o = 0; o < n->n_outputs; o++) {
            int v = n->outputs[o];
            if (!is_var(md, v)) continue;
            if ((md->col[v] = ot_mip_add_col(mp, 0.0, 0.0, 1.0, true)) < 0) return ot_opt_oom(err);
            double f = a->node_flops[n->id]; /* r integer where it costs: see above */
            if (md->rcol[n->id] < 0 && (md->rcol[n->id] = ot_mip_add_col(mp, f, 0.0, 1.0, f > 0.0)) < 0)
                return ot_opt_oom(err);
        }
    }
    for (int p = 0; p < a->n_fwd; p++) {
        const ot_node *n = &g->nodes[a->fwd[p]];
        int rp = md->rcol[n->id];
        if (rp < 0) continue;
        for (int o = 0; o < n->n_outputs; o++) { /* r_p >= x_v */
            int v = n->outputs[o];
            if (!is_var(md, v) || !a->saved[v]) continue;
            int row = ot_mip_add_row(mp, 0.0, HUGE_VAL);
            if (row < 0 || !ot_mip_add_coef(mp, row, rp, 1.0) || !ot_mip_add_coef(mp, row, md->col[v], -1.0))
                return ot_opt_oom(err);
        }
        for (int i = 0; i < n->n_inputs; i++) { /* r_prod(u) >= r_p - keep(u) */
            int u = n->inputs[i];
            if (!is_var(md, u) || md->col[u] < 0) continue;
            int ru = md->rcol[g->values[u].producer];
            bool saved = a->saved[u]; /* keep = 1 - x_u, or k_u */
            int row = ot_mip_add_row(mp, saved ? -1.0 : 0.0, HUGE_VAL);
            if (row < 0 || !ot_mip_add_coef(mp, row, ru, 1.0) || !ot_mip_add_coef(mp, row, rp, -1.0) ||
                !ot_mip_add_coef(mp, row, md->col[u], saved ? -1.0 : 1.0))
                return ot_opt_oom(err);
        }
    }
    return OT_OK;
}

/* The model's bytes in use at its worst interval for a solution x. */
static int64_t model_peak(const model *md, const double *x) {
    double worst = 0.0;
    for (int i = 0; i < md->n_bounds; i++) {
        double s = md->t0max[i] + x[md->s_col[i]];
        if (s > worst) worst = s;
    }
    return (int64_t)llround(worst * md->unit);
}

static void solution_keep(const model *md, const double *x, bool *keep) {
    const ot_remat_analysis *a = md->a;
    for (int v = 0; v < a->n_values; v++) {
        keep[v] = a->candidate[v]; /* no column: kept (pinned, or no clone reads it) */
        if (md->col[v] < 0) continue;
        bool on = x[md->col[v]] > 0.5;
        keep[v] = a->saved[v] ? !on : on;
    }
}

static double gcd_whole(double a, double b) {
    while (b > 0.0) {
        double t = fmod(a, b);
        a = b, b = t;
    }
    return a;
}

/* The row objective >= the bound so far (set_floor sets its lower side per round),
 * and the objective's grain. Why the row: from one exact round to the next the
 * programme only loses points (a no-good cut removes one rewrite the planner
 * rejected; a chain's rows state bytes that every plan has), so the best bound proved
 * so far bounds the next round's programme too. Given as a row, a solve starts from
 * that bound instead of proving it again, and closes as soon as it finds a point at
 * it: the zoo's gpt2 at 433,152 bytes had many points at its optimum, 22,528 FLOPs,
 * each a no-good round, and the first round's proof took the whole time. Why the
 * grain: a plan's cost is a sum of its clones' FLOPs (the r columns' coefficients,
 * whole numbers), so a bound b on every plan's cost is one on the next multiple of
 * their gcd too (lift_bound). */
static ot_status floor_row_add(model *md, ot_error *err) {
    ot_mip *mp = &md->mip;
    double g = 0.0;
    bool whole = true;
    if ((md->floor_row = ot_mip_add_row(mp, -HUGE_VAL, HUGE_VAL)) < 0) return ot_opt_oom(err);
    for (int j = 0; j < mp->n_cols; j++) {
        double c = mp->obj[j];
        if (c == 0.0) continue;
        if (!ot_mip_add_coef(mp, md->floor_row, j, c)) return ot_opt_oom(err);
        whole &= c > 0.0 && c < 4.0e15 && c == floor(c);
        if (whole) g = gcd_whole(c, g);
    }
    md->grain = whole ? g : 0.0;
    return OT_OK;
}

/* A solver's bound on the plans' costs, to the next multiple of the grain; the
 * solver's bound is trusted to a millionth (its tolerances), never rounded up past
 * that. A bound just above a multiple (22,528.0001: the solver's tolerance) goes to
 * that multiple, so that the floor row never lies above the points at the bound. */
static double lift_bound(const model *md, double b) {
    if (md->grain < 1.0 || b <= 0.0) return b;
    return ceil((b - 1e-6 * b - 1e-3) / md->grain) * md->grain;
}

/* The floor row's lower side: bound (0: none). Only where the objective has a grain:
 * the bound is then a multiple of it (lift_bound), the cost of a point at the bound,
 * which the row admits with equality. A floor below the bound by a margin would leave
 * the solvers proving that nothing lies within the margin: GLPK spent a whole round's
 * time so on gpt2 at a point it had found at once. */
static void set_floor(model *md, double bound) {
    md->mip.row_lo[md->floor_row] = bound > 0.0 && md->grain >= 1.0 ? bound : -HUGE_VAL;
}

static ot_status build_model(model *md, ot_error *err) {
    const ot_remat_analysis *a = md->a;
    int nv = a->n_values, nn = a->n_nodes;
    md->step_of = malloc((size_t)nn * sizeof(int));
    md->reach = malloc((size_t)nn * sizeof(int));
    md->place = malloc((size_t)nn * sizeof(int));
    md->rcol = malloc((size_t)nn * sizeof(int));
    md->first_bwd = malloc((size_t)nv * sizeof(int));
    md->last_fwd = malloc((size_t)nv * sizeof(int));
    md->root = malloc((size_t)nv * sizeof(int));
    md->col = malloc((size_t)nv * sizeof(int));
    if (!md->step_of || !md->reach || !md->place || !md->rcol || !md->first_bwd || !md->last_fwd || !md->root || !md->col)
        return ot_opt_oom(err);
    for (int id = 0; id < nn; id++) md->reach[id] = md->place[id] = NEVER;
    md->unit = ot_remat_saved_unit(a);
    if (md->unit < 1.0) md->unit = 1.0;
    value_windows(md);
    ot_status st = choice_columns(md, err);
    if (!st) st = ot_opt_memory_terms(md, err);
    if (!st) st = ot_opt_hole_terms(md, err);
    if (!st) st = ot_opt_budget_rows(md, err);
    if (!st) st = floor_row_add(md, err);
    return st;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Plans keep (apply, measure, undo): its exact peak, its extra FLOPs, and the step
 * of the none schedule where its bytes in use are highest (a clone counts as the
 * original node that runs next). */
static ot_status plan_keep(model *md, ot_graph *g, const bool *keep, ot_remat_measure_fn measure, void *user,
                           int64_t *peak, double *cost, int *top_step, ot_error *err) {
    ot_remat_rewrite rw;
    ot_status st = ot_remat_apply(g, md->a, keep, &rw, err);
    if (st) return st;
    ot_remat_measurement m = {.want_timeline = true, .fit_target = md->fit_target};
    *cost = rw.extra_flops;
    st = measure(g, user, &m, err);
    *peak = m.peak;
    *top_step = -1;
    if (!st && m.timeline) {
        int top = 0;
        for (int s = 0; s < m.n_steps; s++)
            if (m.timeline[s] > m.timeline[top]) top = s;
        for (int s = top; s < m.n_steps && *top_step < 0; s++)
            if (m.order[s] < md->a->n_nodes) *top_step = md->step_of[m.order[s]];
    }
    free(m.order);
    free(m.timeline);
    ot_remat_undo(g, &rw);
    return st;
}

/* The rounds' arrays: a solution, the seed's point, and per interval the bytes the
 * tightening rounds cut and those the seed's widening adds (optimal_relax.c). */
typedef struct round_arrays {
    double *x, *start, *cut, *relax;
} round_arrays;

static void round_arrays_free(round_arrays *ra) {
    free(ra->x), free(ra->start), free(ra->cut), free(ra->relax);
    memset(ra, 0, sizeof *ra);
}

/* Sets every S_i's bound: the model budget less what the rounds cut there, plus what
 * the seed needs there (bytes). */
static void set_budget(model *md, int64_t budget, const round_arrays *ra) {
    for (int i = 0; i < md->n_bounds; i++)
        md->mip.col_hi[md->s_col[i]] =
            ((double)budget - md->pad - ra->cut[i] + ra->relax[i]) / md->unit - md->t0max[i];
}

/* The interval holding step s. */
static int interval_at(const model *md, int s) {
    int lo = 0, hi = md->n_bounds - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (md->bounds[mid] <= s) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static ot_status no_plan(int64_t budget, int rounds, ot_error *err) {
    return ot_fail(err, OT_E_MEMORY,
                   "memory budget %lld bytes (%.1f MiB) cannot be met by --remat optimal: under its memory model no "
                   "keep set fits (after %d round%s of tightening to the planner's peaks); --remat all gives the "
                   "least peak; raise --memory-budget or lower --batch-size",
                   (long long)budget, (double)budget / 1048576.0, rounds, rounds == 1 ? "" : "s");
}

/* The heuristic's plan (auto's, the planner's peak within budget), offered to every
 * solve as its first incumbent and kept as the answer when no solution the planner
 * accepts is cheaper. */
typedef struct seed {
    bool *keep; /* NULL: none */
    double cost;
    int64_t peak;
} seed;

/* The seed as the answer: stats say so. */
static void take_seed(const model *md, const seed *sd, bool *keep, ot_remat_optimal_stats *stats) {
    memcpy(keep, sd->keep, (size_t)md->a->n_values * sizeof(bool));
    stats->heuristic = true;
    stats->cost = sd->cost;
    stats->planner_peak = sd->peak;
    stats->model_peak = 0;
}

/* The report against the bound of the exact rounds (the only ones whose programme
 * excludes no plan the planner accepts: a tightened budget may): proven when that
 * bound meets the plan's cost, the gap (cost - bound) / cost, never hidden. A bound
 * above the plan would say the programme excluded an accepted plan (a bug,
 * tests/test_remat_optimal_bound.c): it is reported as it is, a negative gap. */
static void finish_stats(ot_remat_optimal_stats *stats, double exact_bound) {
    double c = stats->cost;
    stats->bound = exact_bound;
    stats->proven = exact_bound >= c * (1.0 - 1e-9) - 0.5;
    stats->gap = stats->proven ? 0.0 : c > 0.0 ? (c - exact_bound) / c : 0.0;
}

/* Without a seed (auto found no plan within the budget), rounds that only exclude the
 * rejected plan before the budget is tightened too: NOGOOD_ROUNDS, and more up to
 * MORE_NOGOOD_ROUNDS while they have taken less than half of the time limit, and
 * none after a solve that ran out of its time. There the tightening's purpose is any
 * plan at all. On the samples, plans that the planner rejects for fragmentation alone
 * take up to 15 exact rounds (resnet) before the cheapest accepted one; mobilenet at
 * its least peak (731,328 bytes) needs 89 once the chains state its bytes in use.
 * With a seed every round is exact (see solve_rounds), up to MAX_EXACT_ROUNDS. */
#define NOGOOD_ROUNDS 24
#define MORE_NOGOOD_ROUNDS 120
#define MAX_EXACT_ROUNDS 4000
/* With a seed, the share of the time (less seed_bound's reserve) that the exact rounds
 * may take; tightening rounds then look for an accepted plan cheaper than the seed
 * in the rest. The zoo's llama at 361,568 bytes: exact rounds alone for all 60 s kept
 * auto's 37,888 FLOPs (12 rounds, none accepted), where a tightened round had found
 * 35,840 after two exact ones. */
#define EXACT_SHARE 0.75

/* A no-good cut on the plan x gives: the binaries that decide its rewrite may not all
 * take their values in x again, sum_{x_j=1} (1 - x_j) + sum_{x_j=0} x_j >= 1. They are
 * every x (the saved values' keep) and the k of each value that one of the plan's
 * clones reads; the other k change nothing (ot_remat_mark_clones consults only those),
 * so a cut over every binary would exclude one of many equal rewrites per round. */
static ot_status exclude_solution(model *md, const double *x, const bool *keep, ot_error *err) {
    const ot_graph *g = md->g;
    const ot_remat_analysis *a = md->a;
    ot_mip *mp = &md->mip;
    bool *cloned = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(bool));
    bool *on = ot_xcalloc((size_t)mp->n_cols + 1, sizeof(bool));
    int *stack = ot_xcalloc(ot_remat_stack_room(g, a), sizeof(int));
    ot_status st = OT_OK;
    if (!cloned || !on || !stack) {
        st = ot_opt_oom(err);
        goto done;
    }
    ot_remat_mark_clones(g, a, keep, cloned, stack);
    for (int v = 0; v < a->n_values; v++) {
        if (md->col[v] < 0) continue;
        bool read = a->saved[v];
        for (int c = 0; c < g->values[v].n_consumers && !read; c++) {
            int cid = g->values[v].consumers[c];
            read = cid < a->n_nodes && cloned[cid];
        }
        on[md->col[v]] = read;
    }
    int ones = 0, row = -1, kept = -1;
    for (int j = 0; j < mp->n_cols; j++) ones += on[j] && x[j] > 0.5;
    if ((row = ot_mip_add_row(mp, 1.0 - ones, HUGE_VAL)) < 0 || (kept = ot_mip_add_row(&md->cuts, 1.0 - ones, HUGE_VAL)) < 0)
        st = ot_opt_oom(err);
    for (int j = 0; j < mp->n_cols && !st; j++)
        if (on[j] && (!ot_mip_add_coef(mp, row, j, x[j] > 0.5 ? -1.0 : 1.0) ||
                      !ot_mip_add_coef(&md->cuts, kept, j, x[j] > 0.5 ? -1.0 : 1.0)))
            st = ot_opt_oom(err);
done:
    free(cloned), free(on), free(stack);
    return st;
}

/* The programme again, with the chains found so far, and the cuts made so far. */
static ot_status model_rebuild(model *md, ot_error *err) {
    model_clear(md);
    ot_status st = build_model(md, err);
    const ot_mip *c = &md->cuts;
    int first = md->mip.n_rows;
    for (int i = 0; i < c->n_rows && !st; i++)
        if (ot_mip_add_row(&md->mip, c->row_lo[i], c->row_hi[i]) < 0) st = ot_opt_oom(err);
    for (int k = 0; k < c->nnz && !st; k++)
        if (!ot_mip_add_coef(&md->mip, first + c->ri[k], c->ci[k], c->v[k])) st = ot_opt_oom(err);
    return st;
}

/* The rounds' arrays for the programme as it now stands (anew after a rebuild: the
 * cut is still all 0 then, the exact rounds cut nothing). */
static ot_status round_arrays_make(model *md, const seed *sd, round_arrays *ra, ot_error *err) {
    round_arrays_free(ra);
    ra->x = calloc((size_t)md->mip.n_cols + 1, sizeof(double));
    ra->start = calloc((size_t)md->mip.n_cols + 1, sizeof(double));
    ra->cut = calloc((size_t)md->n_bounds + 1, sizeof(double));
    ra->relax = calloc((size_t)md->n_bounds + 1, sizeof(double));
    if (!ra->x || !ra->start || !ra->cut || !ra->relax) return ot_opt_oom(err);
    return sd->keep ? ot_opt_keep_point(md, sd->keep, ra->start, err) : OT_OK;
}

/* The chains a rejected plan shows (optimal_chain.h); when there are new ones, the
 * programme is rebuilt with them and the rounds' arrays are made anew. */
static ot_status add_chains(model *md, const bool *keep, const seed *sd, round_arrays *ra, ot_error *err) {
    ot_opt_chain_view vw = {md->g, md->a, md->first_bwd, md->last_fwd, md->root, md->col, md->place, NEVER};
    int added = 0;
    ot_status st = ot_opt_chains_find(&vw, keep, &md->chains, &added, err);
    if (st || !added) return st;
    if ((st = model_rebuild(md, err))) return st;
    return round_arrays_make(md, sd, ra, err);
}

/* The bound, when the programme excludes the seed (auto's plan, which the planner
 * accepted): the exact rounds' bound then says nothing about that plan, nor about the
 * others the model overstates like it. The programme widened just enough to admit the
 * seed (optimal_relax.c), with every no-good cut (each excludes a plan the planner
 * rejected), no tightening and no floor at first (the widened programme has more
 * points than the rounds' one), gives a bound over every plan the programme admitted
 * and the seed; it gets what is left of the time limit, at least a tenth of it
 * (solve_rounds keeps that back). Its rounds are exact rounds like the first ones: a
 * solution the planner rejects is excluded by its no-good cut and the widened
 * programme solved again, its best bound the floor, until the bound meets the plan
 * (proven), a solution is accepted (optimal over the widened rows: cheaper than the
 * plan, it is the answer) or the time is spent. Before, one solve, whose solution the
 * planner might reject (the gpt4_d128 at a quarter: 0.6% open, now a cheaper
 * plan proven). The rounds that found the plan search the programme unwidened: widened,
 * it admits plans the planner rejects in the widened intervals, and the search ran into
 * the tightening instead of proving (tinygpt with adamw at 3/4 of the way: 128 rounds).
 * *bound is left alone when the programme admits the seed. */
static ot_status seed_bound(model *md, ot_graph *g, const seed *sd, int64_t budget, double time_left, double limit,
                            ot_remat_measure_fn measure, void *user, round_arrays *ra, int *prefer, double *bound,
                            bool *keep, ot_remat_optimal_stats *stats, ot_error *err) {
    bool outside = false, wider = false;
    set_floor(md, 0.0);
    ot_status st = ot_opt_seed_relax(md, budget, ra->start, ra->relax, &outside, err);
    for (int i = 0; i < md->n_bounds && !st; i++) wider |= ra->relax[i] > 0.0;
    if (st || (!outside && !wider)) return st;
    *bound = 0.0;
    if (outside) return OT_OK; /* no widening of the memory rows admits it: no bound */
    memset(ra->cut, 0, (size_t)md->n_bounds * sizeof(double));
    set_budget(md, budget, ra);
    double t0 = now_s(), slot = time_left > limit / 10.0 ? time_left : limit / 10.0, cost = 0.0;
    bool *mine = ot_xcalloc((size_t)md->a->n_values + 1, sizeof(bool));
    int64_t peak = 0;
    int top = -1;
    for (st = mine ? OT_OK : ot_opt_oom(err); !st;) {
        ot_mip_result r;
        set_floor(md, *bound);
        double left = slot - (now_s() - t0);
        if ((st = ot_mip_solve_from(&md->mip, left > 0.05 ? left : 0.05, ra->start, prefer, ra->x, &r, err))) break;
        stats->rounds++;
        if (r.status != OT_MIP_OPTIMAL && r.status != OT_MIP_FEASIBLE) break;
        if (lift_bound(md, r.bound) > *bound) *bound = lift_bound(md, r.bound);
        if (*bound >= stats->cost * (1.0 - 1e-9) - 0.5 || r.status != OT_MIP_OPTIMAL) break; /* proven, or no time */
        solution_keep(md, ra->x, mine);
        if ((st = plan_keep(md, g, mine, measure, user, &peak, &cost, &top, err))) break;
        stats->n_measured++;
        if (peak <= budget) { /* optimal over the widened rows, so cheaper than the plan */
            memcpy(keep, mine, (size_t)md->a->n_values * sizeof(bool));
            stats->cost = cost, stats->planner_peak = peak, stats->heuristic = false;
            stats->model_peak = model_peak(md, ra->x);
            break;
        }
        if (now_s() - t0 >= slot) break;
        st = exclude_solution(md, ra->x, mine, err);
    }
    free(mine);
    return st;
}

/* The time the rounds keep back for seed_bound's solve: a tenth of the limit when the
 * programme as built must widen to admit the seed (an LP says so, quickly). */
static ot_status seed_reserve(model *md, const seed *sd, int64_t budget, double limit, const round_arrays *ra,
                              double *reserve, ot_error *err) {
    *reserve = 0.0;
    if (!sd->keep) return OT_OK;
    double *relax = calloc((size_t)md->n_bounds + 1, sizeof(double));
    bool outside = false, wider = false;
    if (!relax) return ot_opt_oom(err);
    set_floor(md, 0.0);
    ot_status st = ot_opt_seed_relax(md, budget, ra->start, relax, &outside, err);
    for (int i = 0; i < md->n_bounds && !st; i++) wider |= relax[i] > 0.0;
    if (!st && !outside && wider) *reserve = limit / 10.0;
    free(relax);
    return st;
}

/* The rounds' failure: the time or the rounds ran out before the planner accepted a
 * solution (solve_rounds then takes the seed when there is one). */
static ot_status rounds_out(const ot_remat_optimal_stats *stats, int64_t peak, int64_t budget, ot_error *err) {
    return ot_fail(err, OT_E_MEMORY,
                   "--remat optimal: after %d rounds the planner's peak %lld bytes still exceeds the budget %lld "
                   "(the solver's model said %lld); raise --memory-budget or use --remat auto",
                   stats->rounds, (long long)peak, (long long)budget, (long long)stats->model_peak);
}

/* The solve-check-exclude loop over a built model; keep gets the accepted plan.
 * With a seed (auto's plan) the rounds are exact for EXACT_SHARE of the time: a
 * rejected solution is excluded by its no-good cut alone, so each round's programme
 * holds every plan the planner accepts that the first one held, and every round's
 * bound (a solve cut short by its time included) bounds them all; the best so far is
 * the next round's floor. Each exact round gets all of that share that is left: a
 * round's proof carries over through the floor, while a round cut short adds only a
 * plan to exclude. The first accepted solution of a closed solve is optimal. Before,
 * a round had half of what was left and the first solve that ran out of it ended the
 * exact rounds, so the zoo's rows ran 3-10 rounds in 60 s and proved nothing. The
 * rest of the time (less seed_bound's reserve) goes to tightening rounds, as without
 * a seed after NOGOOD_ROUNDS: they may find a plan cheaper than the seed, and their
 * bounds are not used. */
static ot_status solve_rounds(model *md, ot_graph *g, int64_t budget, double limit, ot_remat_measure_fn measure,
                              void *user, const seed *sd, bool *keep, ot_remat_optimal_stats *stats, ot_error *err) {
    round_arrays ra = {0};
    double t0 = now_s(), exact_bound = 0.0, reserve = 0.0;
    bool exact = true;
    int prefer = -1, cap = sd->keep ? MAX_EXACT_ROUNDS : MAX_ROUNDS; /* the solver that closed the last solve */
    ot_status st = round_arrays_make(md, sd, &ra, err);
    if (!st) st = seed_reserve(md, sd, budget, limit, &ra, &reserve, err);
    while (!st) {
        set_budget(md, budget, &ra);
        set_floor(md, exact ? exact_bound : 0.0);
        ot_mip_result r;
        double left = limit - reserve - (now_s() - t0), exact_left = (limit - reserve) * EXACT_SHARE - (now_s() - t0);
        double slot = sd->keep && exact ? exact_left : stats->rounds + 1 >= cap ? left : left / 2.0;
        if ((st = ot_mip_solve_from(&md->mip, slot > 0.05 ? slot : 0.05, sd->keep ? ra.start : NULL, &prefer, ra.x,
                                    &r, err)))
            break;
        stats->rounds++;
        if (r.status == OT_MIP_INFEASIBLE && md->pad > 0.0) { /* the fallback: the full budget */
            md->pad = 0.0;
            continue;
        }
        if (r.status == OT_MIP_INFEASIBLE || r.status == OT_MIP_NO_SOLUTION) {
            st = r.status == OT_MIP_INFEASIBLE ? no_plan(budget, stats->rounds, err)
                                                : ot_fail(err, OT_E_MEMORY,
                                                          "--remat optimal: no plan within %lld bytes found in the "
                                                          "time limit (%.1f s); raise --remat-time-limit",
                                                          (long long)budget, limit);
            break;
        }
        if (exact && lift_bound(md, r.bound) > exact_bound) exact_bound = lift_bound(md, r.bound);
        bool seed_proven = exact && sd->keep && exact_bound >= sd->cost * (1.0 - 1e-9) - 0.5;
        solution_keep(md, ra.x, keep);
        int64_t peak = 0;
        double cost = 0.0;
        int top = -1;
        if ((st = plan_keep(md, g, keep, measure, user, &peak, &cost, &top, err))) break;
        stats->n_measured++;
        stats->planner_peak = peak;
        stats->model_peak = model_peak(md, ra.x);
        stats->cost = cost;
        double most = 0.0;
        for (int i = 0; i < md->n_bounds; i++) most = ra.cut[i] > most ? ra.cut[i] : most;
        stats->model_budget = budget - (int64_t)most;
        if (peak <= budget || seed_proven) {
            if (sd->keep && (peak > budget || sd->cost < cost)) take_seed(md, sd, keep, stats);
            break;
        }
        if (stats->rounds >= cap || now_s() - t0 >= limit - reserve) {
            st = rounds_out(stats, peak, budget, err);
            break;
        }
        /* An exact round excludes just this plan: no other plan is lost. Without a
         * seed, after NOGOOD_ROUNDS or a solve that ran into its time, a round also
         * tightens where the plan's bytes in use peak (all of it when that is
         * unknown): faster, but it may exclude plans that would fit, so those
         * rounds' bounds prove nothing. */
        if ((st = exclude_solution(md, ra.x, keep, err))) break;
        if (sd->keep)
            exact &= now_s() - t0 < (limit - reserve) * EXACT_SHARE;
        else
            exact &= r.status == OT_MIP_OPTIMAL && stats->rounds < MORE_NOGOOD_ROUNDS &&
                     (stats->rounds < NOGOOD_ROUNDS || now_s() - t0 < limit / 2.0);
        /* The chains it shows hold for every plan: rows, and the round stays exact
         * (the rebuilt programme has fewer points, so the floor still holds). Only
         * in exact rounds: a rebuild would lose the tightening's intervals, and on
         * tinygpt, whose solves run into their time, adding chains in every round left
         * wider gaps (657,344 bytes: 53% against 21%). */
        if (exact) {
            st = add_chains(md, keep, sd, &ra, err);
            continue;
        }
        double over = (double)(peak - budget) + md->unit / 16.0;
        if (top < 0)
            for (int i = 0; i < md->n_bounds; i++) ra.cut[i] += over;
        else
            ra.cut[interval_at(md, top)] += over;
    }
    if (st == OT_E_MEMORY && sd->keep) { /* nothing the planner accepts: the heuristic's plan */
        take_seed(md, sd, keep, stats);
        st = OT_OK;
    }
    if (!st && sd->keep)
        st = seed_bound(md, g, sd, budget, limit - (now_s() - t0), limit, measure, user, &ra, &prefer, &exact_bound,
                        keep, stats, err);
    if (!st) finish_stats(stats, exact_bound);
    round_arrays_free(&ra);
    stats->seconds = now_s() - t0;
    return st;
}

/* auto's plan for the budget, when it finds one (a budget it cannot meet is no error
 * here: the programme may still find a plan). */
static ot_status seed_auto(ot_graph *g, const ot_remat_analysis *a, int64_t budget, ot_remat_measure_fn measure,
                           void *user, seed *sd, ot_remat_optimal_stats *stats, ot_error *err) {
    ot_remat_auto_stats as;
    ot_error e2;
    double t0 = now_s();
    if (!(sd->keep = ot_xcalloc((size_t)a->n_values + 1, sizeof(bool)))) return ot_opt_oom(err);
    ot_status st = ot_remat_auto(g, a, budget, measure, user, sd->keep, &as, &e2);
    stats->n_measured += as.n_measured;
    stats->auto_seconds = now_s() - t0;
    if (st == OT_E_MEMORY) {
        free(sd->keep);
        sd->keep = NULL;
        return OT_OK;
    }
    if (st) {
        *err = e2;
        return st;
    }
    sd->cost = as.cost;
    sd->peak = as.peak;
    stats->auto_cost = as.cost;
    return OT_OK;
}

ot_status ot_remat_optimal(ot_graph *g, const ot_remat_analysis *a, int64_t budget, double time_limit_s,
                           ot_remat_measure_fn measure, void *user, bool *keep, ot_remat_optimal_stats *stats,
                           ot_error *err) {
    ot_remat_optimal_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    stats->auto_cost = -1.0;
    if (!ot_remat_optimal_available()) {
        ot_mip_result r;
        return ot_mip_solve(NULL, 0.0, NULL, NULL, &r, err); /* the refusal naming the package */
    }
    if (time_limit_s <= 0.0) time_limit_s = OT_REMAT_OPTIMAL_TIME_LIMIT;
    model md = {.g = g, .a = a, .fit_target = budget}; /* the none plan (m0) is measured without it */
    md.m0.want_timeline = true;
    md.m0.want_plan = true; /* for the holes (optimal_hole.c); a test's measure gives none */
    for (int v = 0; v < a->n_values; v++) keep[v] = a->candidate[v];
    ot_status st = measure(g, user, &md.m0, err);
    md.p0 = md.m0.plan;
    stats->n_measured = 1;
    if (!st && (!md.m0.timeline || !md.m0.order))
        st = ot_fail(err, OT_E_INTERNAL, "remat optimal: the memory measure gives no timeline");
    if (!st && md.m0.peak <= budget) { /* none fits: nothing to recompute */
        stats->proven = true;
        stats->planner_peak = md.m0.peak;
        stats->model_budget = budget;
        for (size_t s = 0; s < (size_t)md.m0.n_steps; s++)
            if ((int64_t)md.m0.timeline[s] > stats->model_peak) stats->model_peak = (int64_t)md.m0.timeline[s];
        goto done;
    }
    if (!st) st = build_model(&md, err);
    md.pad = (double)md.m0.pinned_padding;
    seed sd = {0};
    if (!st) st = seed_auto(g, a, budget, measure, user, &sd, stats, err);
    if (!st) {
        stats->n_columns = md.mip.n_cols;
        stats->n_rows = md.mip.n_rows;
        for (int j = 0; j < md.mip.n_cols; j++) stats->n_binaries += md.mip.col_int[j];
        st = solve_rounds(&md, g, budget, time_limit_s, measure, user, &sd, keep, stats, err);
    }
    free(sd.keep);
done:
    model_free(&md);
    return st;
}
