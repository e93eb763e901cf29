/* test_remat_optimal_bound.c — `--remat optimal`'s report is honest (issue 28 item 3):
 * its bound is a lower bound on the recompute FLOPs of every plan the planner accepts,
 * so never above the plan it returns nor above auto's plan (which the planner
 * accepted); "proven" is the bound meeting the plan, and the gap is (plan - bound) /
 * plan, never 0 unless proven. Before, a round that lowered the programme's budget
 * (after the exact rounds) made the bound, and the zoo's GPT-2 reported auto's plan of
 * 121,856 FLOPs with a bound of 275,641 and "gap 0".
 *
 * Checked on the samples at budgets a quarter, half and three quarters of the way from
 * the least planned peak (`all`) to the plain one, with the planner's measure, and
 * with a measure that rejects every plan of few clones, so that the programme's
 * cheapest plans are rejected round after round and the rounds go on to tighten the
 * budget (the rounds whose bounds used to be reported). Also the rows auto used to
 * lose: wherever optimal proves its plan, auto's costs at most 5% more.
 * Skips, saying so, when the build has no MIP solver (CBC or GLPK). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "remat_check.h"

/* The planner's measure; with min_clones > 0, a plan of fewer recompute nodes is
 * "rejected": its peak is reported a byte above `reject_above`. */
typedef struct picky {
    ot_backend *be;
    int min_clones;
    int64_t reject_above;
} picky;

static ot_status measure_picky(const ot_graph *g, void *user, ot_remat_measurement *m, ot_error *err) {
    picky *p = user;
    ot_status st = ot_remat_measure_planner(g, p->be, m, err);
    int clones = 0;
    for (int i = 0; i < g->n_nodes; i++) clones += !g->nodes[i].removed && g->nodes[i].phase == OT_PHASE_RECOMPUTE;
    if (!st && clones > 0 && clones < p->min_clones && m->peak <= p->reject_above) m->peak = p->reject_above + 1;
    return st;
}

/* The report's invariants for a solve that returned a plan within budget. */
static void check_report(const char *what, int64_t budget, const ot_remat_optimal_stats *st) {
    print_message("%s at %lld: plan %.0f, bound %.0f, gap %.4g, %s, %d rounds, auto %.0f\n", what, (long long)budget,
                  st->cost, st->bound, st->gap, st->proven ? "proven" : "open", st->rounds, st->auto_cost);
    assert_true(st->planner_peak <= budget);
    assert_true(st->bound >= 0.0);
    assert_true(st->bound <= st->cost * (1.0 + 1e-9) + 0.5); /* a lower bound: never above an accepted plan */
    if (st->auto_cost >= 0.0) assert_true(st->bound <= st->auto_cost * (1.0 + 1e-9) + 0.5);
    assert_int_equal(st->proven, st->bound >= st->cost * (1.0 - 1e-9) - 0.5);
    double gap = st->cost > 0.0 ? (st->cost - st->bound) / st->cost : 0.0;
    if (st->proven) assert_true(st->gap == 0.0);
    else assert_true(fabs(st->gap - gap) < 1e-9 && st->gap > 0.0);
    if (st->auto_cost >= 0.0) assert_true(st->cost <= st->auto_cost + 1e-6); /* auto's plan seeds the solve */
}

static void check_sample(const char *name, const int *quarters, int n_quarters, double limit) {
    char path[1024];
    snprintf(path, sizeof path, "%s/samples/%s.onnx", OT_SOURCE_DIR, name);
    rc_search rs;
    rc_search_open(&rs, path);
    ot_remat_session *s = rs.s;
    bool *keep = rs.keep;
    ot_error err = {0};
    for (int q = 0; q < n_quarters; q++) {
        int64_t budget = rs.least + (rs.plain - rs.least) * quarters[q] / 4;
        ot_remat_optimal_stats st;
        picky plain = {.be = s->be};
        assert_int_equal(ot_remat_optimal(s->g, &s->an, budget, limit, measure_picky, &plain, keep, &st, &err), OT_OK);
        check_report(name, budget, &st);
        if (st.proven && st.auto_cost >= 0.0) assert_true(st.auto_cost <= 1.05 * st.cost + 1e-6);
        /* The picky measure: every plan of fewer clones than the plain answer's
         * rejected, so the programme's cheapest are rejected one by one. */
        ot_remat_rewrite rw;
        assert_int_equal(ot_remat_apply(s->g, &s->an, keep, &rw, &err), OT_OK);
        picky strict = {.be = s->be, .min_clones = rw.n_clones + 1, .reject_above = budget};
        ot_remat_undo(s->g, &rw);
        ot_status r = ot_remat_optimal(s->g, &s->an, budget, limit, measure_picky, &strict, keep, &st, &err);
        assert_true(r == OT_OK || r == OT_E_MEMORY); /* maybe no plan has that many clones */
        if (r == OT_OK) check_report("  picky", budget, &st);
    }
    rc_search_close(&rs);
}

/* The planner's measure, but every rewrite that recomputes anything at a cost of at
 * most `cheap` FLOPs is "rejected": its peak is reported a byte above `budget`. */
typedef struct reject_cheap {
    ot_backend *be;
    const ot_remat_analysis *an;
    double cheap;
    int64_t budget;
    int rejected; /* how many such plans were measured */
} reject_cheap;

static ot_status measure_reject_cheap(const ot_graph *g, void *user, ot_remat_measurement *m, ot_error *err) {
    reject_cheap *r = user;
    ot_status st = ot_remat_measure_planner(g, r->be, m, err);
    double f = rc_clone_flops(g, r->an, NULL);
    if (!st && f > 0.0 && f <= r->cheap + 0.5) {
        r->rejected++;
        m->peak = r->budget + 1;
    }
    return st;
}

/* The exact rounds go on past rejected optima (issue 28): with every plan at the
 * programme's proven optimum rejected by the measure (auto's too), the rounds exclude
 * them one by one and a later round's plan, dearer, is accepted and proven (the bound
 * meets it). */
static void check_second_round(const char *name, int quarter, double limit) {
    char path[1024];
    snprintf(path, sizeof path, "%s/samples/%s.onnx", OT_SOURCE_DIR, name);
    rc_search rs;
    rc_search_open(&rs, path);
    ot_remat_session *s = rs.s;
    bool *keep = rs.keep;
    ot_error err = {0};
    int64_t budget = rs.least + (rs.plain - rs.least) * quarter / 4;
    ot_remat_optimal_stats st;
    picky plain = {.be = s->be};
    assert_int_equal(ot_remat_optimal(s->g, &s->an, budget, limit, measure_picky, &plain, keep, &st, &err), OT_OK);
    check_report(name, budget, &st);
    assert_true(st.proven && st.cost > 0.0);
    reject_cheap rj = {.be = s->be, .an = &s->an, .cheap = st.cost, .budget = budget};
    assert_int_equal(ot_remat_optimal(s->g, &s->an, budget, limit, measure_reject_cheap, &rj, keep, &st, &err), OT_OK);
    check_report("  optimum rejected", budget, &st);
    assert_true(rj.rejected >= 1);
    assert_true(st.rounds >= 2);
    assert_true(st.proven);
    assert_true(st.cost > rj.cheap + 0.5);
    assert_true(st.planner_peak <= budget);
    ot_remat_rewrite rw; /* the answer is a plan the measure accepts */
    assert_int_equal(ot_remat_apply(s->g, &s->an, keep, &rw, &err), OT_OK);
    assert_true(rc_clone_flops(s->g, &s->an, NULL) > rj.cheap + 0.5);
    ot_remat_undo(s->g, &rw);
    rc_search_close(&rs);
}

static void test_bound(void **state) {
    (void)state;
    if (rc_skip_without_mip()) return;
    static const int all3[] = {1, 2, 3};
    check_sample("mlp", all3, 3, 5.0);
    check_sample("resnet", all3, 3, 5.0);
    check_sample("mobilenet", all3, 3, 5.0);
    static const int quarter[] = {1};
    check_sample("tinygpt", quarter, 1, 2.0); /* open within the limit: the gap must be honest */
}

static void test_second_round(void **state) {
    (void)state;
    if (rc_skip_without_mip()) return;
    check_second_round("resnet", 2, 5.0);
    check_second_round("mobilenet", 1, 5.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bound), cmocka_unit_test(test_second_round)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
