/* optimal_relax.c — widens `--remat optimal`'s memory rows just enough to admit a plan
 * the planner accepted (auto's, the seed), so that the programme's lower bound is a
 * bound over that plan too.
 *
 * Why: the bound a solve proves holds for the plans the programme admits. The memory
 * rows are meant to understate or state exactly every accepted plan's bytes in use
 * (optimal.c's header), but that argument holds for plans whose steps run as the model
 * assumes (each clone just before its first backward reader, in the plain order, the
 * certain holes and the pinned padding): where the model overstates an accepted
 * plan's bytes, the programme excludes that plan, and its bound can lie above it.
 * (Issue 28's bounds above accepted plans came from the tightened rounds, which
 * optimal.c no longer takes a bound from, and from auto's plan as a point that kept
 * values for clones that never run, up to 896,497 bytes over at one step: that point
 * is fixed in keep_point. This is the guard for the rest.)
 * So after the rounds, the seed's own integer choices are fixed and an LP finds the
 * least excess over the budget at each interval (a slack per interval, their sum
 * minimised); when there is any, optimal.c raises each interval's budget by its slack
 * and solves once more for the bound: the seed fits that widened programme, its bound
 * is at most the seed's cost, and it holds for every plan the rows admitted plus the
 * seed. */
#include <math.h>
#include <stdlib.h>

#include "remat/optimal_model.h"

/* The LP: md's columns (integer ones fixed at start, the running sums unbounded above),
 * md's rows, and per interval a slack sigma_i >= 0 with S_i - sigma_i <= the interval's
 * budget. Returns the column of sigma_0 (the others follow), or -1 when out of memory. */
static int relax_lp(const ot_opt_model *md, int64_t budget, const double *start, ot_mip *lp) {
    const ot_mip *m = &md->mip;
    bool *is_s = calloc((size_t)m->n_cols + 1, sizeof(bool));
    if (!is_s) return -1;
    for (int i = 0; i < md->n_bounds; i++) is_s[md->s_col[i]] = true;
    bool ok = true;
    for (int j = 0; j < m->n_cols && ok; j++) {
        double lo = m->col_int[j] ? round(start[j]) : m->col_lo[j];
        double hi = m->col_int[j] ? round(start[j]) : is_s[j] ? HUGE_VAL : m->col_hi[j];
        ok = ot_mip_add_col(lp, 0.0, lo, hi, false) >= 0;
    }
    free(is_s);
    for (int i = 0; i < m->n_rows && ok; i++) ok = ot_mip_add_row(lp, m->row_lo[i], m->row_hi[i]) >= 0;
    for (int k = 0; k < m->nnz && ok; k++) ok = ot_mip_add_coef(lp, m->ri[k], m->ci[k], m->v[k]);
    int first = lp->n_cols;
    for (int i = 0; i < md->n_bounds && ok; i++) {
        double hi = ((double)budget - md->pad) / md->unit - md->t0max[i];
        int sig = ot_mip_add_col(lp, 1.0, 0.0, HUGE_VAL, false), row = ot_mip_add_row(lp, -HUGE_VAL, hi);
        ok = sig >= 0 && row >= 0 && ot_mip_add_coef(lp, row, md->s_col[i], 1.0) &&
             ot_mip_add_coef(lp, row, sig, -1.0);
    }
    return ok ? first : -1;
}

ot_status ot_opt_seed_relax(const ot_opt_model *md, int64_t budget, const double *start, double *relax,
                            bool *outside, ot_error *err) {
    for (int i = 0; i < md->n_bounds; i++) relax[i] = 0.0;
    *outside = false;
    ot_mip lp = {0};
    double *x = NULL;
    ot_status st = OT_OK;
    int first = relax_lp(md, budget, start, &lp);
    if (first < 0 || !(x = calloc((size_t)lp.n_cols + 1, sizeof(double)))) {
        st = ot_opt_oom(err);
        goto done;
    }
    ot_mip_result r;
    /* an LP (no integer column): the time is a guard, not a budget */
    if ((st = ot_mip_solve(&lp, 60.0, NULL, x, &r, err))) goto done;
    if (r.status != OT_MIP_OPTIMAL) { /* a row that is no memory row excludes the seed */
        *outside = true;
        goto done;
    }
    for (int i = 0; i < md->n_bounds; i++) {
        double s = x[first + i];
        /* in bytes, with a byte's margin against the solver's tolerances */
        if (s > 1e-9) relax[i] = s * md->unit + 1.0;
    }
done:
    ot_mip_free(&lp);
    free(x);
    return st;
}
