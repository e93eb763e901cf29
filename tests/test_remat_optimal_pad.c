/* test_remat_optimal_pad.c — --remat optimal's use of the planner's pinned padding
 * (plan/planner.h, Padding; remat/optimal.c): on the mlp sample's training graph, at a
 * budget three quarters of the way from the least peak (`all`) to the plain one, the
 * programme's budget rows are the budget less the plain plan's pinned padding (a
 * solution the programme returns has its model peak within that), the plan fits, and
 * when the padding makes the programme infeasible (a measure that reports a padding
 * as large as the budget) the full-budget fallback still finds a plan, as cheap.
 * Skips, saying so, when the build has no MIP solver (CBC or GLPK). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "remat_check.h"

/* The product's measure, but the timeline comes with a padding of `pad` bytes. */
typedef struct inflated {
    ot_backend *be;
    size_t pad;
} inflated;

static ot_status measure_inflated(const ot_graph *g, void *user, ot_remat_measurement *m, ot_error *err) {
    inflated *in = user;
    ot_status st = ot_remat_measure_planner(g, in->be, m, err);
    if (!st && m->want_timeline) m->pinned_padding = in->pad;
    return st;
}

static void test_padding(void **state) {
    (void)state;
    if (rc_skip_without_mip()) return;
    char path[1024];
    snprintf(path, sizeof path, "%s/samples/mlp.onnx", OT_SOURCE_DIR);
    rc_search rs;
    rc_search_open(&rs, path);
    ot_remat_session *s = rs.s;
    bool *keep = rs.keep;
    ot_error err = {0};
    ot_remat_measurement m0 = {.want_timeline = true};
    assert_int_equal(ot_remat_measure_planner(s->g, s->be, &m0, &err), OT_OK);
    free(m0.order);
    free(m0.timeline);
    assert_true(m0.pinned_padding > 0); /* mlp's pinned values are not all multiples of 64 bytes */
    assert_int_equal(m0.peak, rs.plain);
    int64_t budget = rs.least + (rs.plain - rs.least) * 3 / 4;
    assert_true(budget < rs.plain);

    ot_remat_optimal_stats st;
    assert_int_equal(ot_remat_optimal(s->g, &s->an, budget, 30.0, ot_remat_measure_planner, s->be, keep, &st, &err),
                     OT_OK);
    assert_true(st.planner_peak <= budget);
    assert_true(st.cost > 0.0);
    if (!st.heuristic) assert_true(st.model_peak <= st.model_budget - (int64_t)m0.pinned_padding);

    inflated in = {.be = s->be, .pad = (size_t)budget};
    ot_remat_optimal_stats st2;
    assert_int_equal(ot_remat_optimal(s->g, &s->an, budget, 30.0, measure_inflated, &in, keep, &st2, &err), OT_OK);
    assert_true(st2.planner_peak <= budget);
    assert_true(st2.rounds >= 2); /* the infeasible padded solve, then the full budget */
    assert_true(st2.cost <= st.cost + 1e-6);
    rc_search_close(&rs);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_padding)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
