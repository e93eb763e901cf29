/* test_remat_optimal_mip.c — the two MIP solvers behind --remat optimal
 * (remat/optimal_cbc.c, remat/optimal_glpk.c) on small programmes whose optimum an
 * exhaustive search gives: a covering programme shaped like remat's own (binary
 * choices, continuous columns priced through r >= x rows, a running-sum budget row),
 * solved from scratch and from a start point; an infeasible one; and ot_mip_solve's
 * use of both (one first, the other for the rest, the settling one first next time).
 * Each solver the build lacks is skipped, saying so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat/optimal_mip.h"

#define N 14

typedef ot_status (*solve_fn)(const ot_mip *, double, const double *, double *, ot_mip_result *, ot_error *);

/* Item i: bytes freed w[i] when x_i = 1 (recomputed), cost c[i] through r_i >= x_i;
 * pairs (i, i+1) share a producer: r_i also pays for x_{i+1} at half its price. A
 * deterministic, irregular instance (no two subsets tie by accident). */
static void instance(double *w, double *c) {
    uint32_t s = 12345u;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        w[i] = 3 + (double)((s >> 16) % 41);
        s = s * 1103515245u + 12345u;
        c[i] = 7 + (double)((s >> 16) % 97) + 0.001 * i;
    }
}

/* The cost of a choice under the programme below. */
static double choice_cost(unsigned mask, const double *c) {
    double t = 0.0;
    for (int i = 0; i < N; i++) {
        bool on = mask >> i & 1u, next = i + 1 < N && (mask >> (i + 1) & 1u);
        if (on) t += c[i];
        else if (next && i % 2 == 0) t += 0.5 * c[i]; /* r_i >= 0.5 x_{i+1} */
    }
    return t;
}

/* min sum c_i r_i, r_i >= x_i, r_i >= 0.5 x_{i+1} (even i), S = sum w_i x_i >= need. */
static void build(ot_mip *m, double need, const double *w, const double *c) {
    int x[N], r[N];
    for (int i = 0; i < N; i++) {
        x[i] = ot_mip_add_col(m, 0.0, 0.0, 1.0, true);
        r[i] = ot_mip_add_col(m, c[i], 0.0, 1.0, false);
        assert_true(x[i] >= 0 && r[i] >= 0);
    }
    for (int i = 0; i < N; i++) {
        int row = ot_mip_add_row(m, 0.0, HUGE_VAL);
        assert_true(ot_mip_add_coef(m, row, r[i], 1.0) && ot_mip_add_coef(m, row, x[i], -1.0));
        if (i % 2 == 0 && i + 1 < N) {
            row = ot_mip_add_row(m, 0.0, HUGE_VAL);
            assert_true(ot_mip_add_coef(m, row, r[i], 1.0) && ot_mip_add_coef(m, row, x[i + 1], -0.5));
        }
    }
    int s = ot_mip_add_col(m, 0.0, need, HUGE_VAL, false); /* the running sum, bounded as the budget */
    int row = ot_mip_add_row(m, 0.0, 0.0);
    assert_true(ot_mip_add_coef(m, row, s, 1.0));
    for (int i = 0; i < N; i++) assert_true(ot_mip_add_coef(m, row, x[i], -w[i]));
}

/* The exhaustive optimum and one optimal mask; INFINITY when nothing covers need. */
static double brute(double need, const double *w, const double *c, unsigned *arg) {
    double best = INFINITY;
    for (unsigned mask = 0; mask < 1u << N; mask++) {
        double got = 0.0;
        for (int i = 0; i < N; i++) got += (mask >> i & 1u) ? w[i] : 0.0;
        double t = choice_cost(mask, c);
        if (got >= need && t < best) best = t, *arg = mask;
    }
    return best;
}

static void check_solver(solve_fn solve, const char *name) {
    double w[N], c[N], total = 0.0;
    instance(w, c);
    for (int i = 0; i < N; i++) total += w[i];
    for (int k = 1; k <= 3; k++) {
        double need = total * k / 4.0;
        unsigned arg = 0, worst = (1u << N) - 1;
        double want = brute(need, w, c, &arg);
        ot_mip m = {0};
        build(&m, need, w, c);
        double *x = calloc((size_t)m.n_cols, sizeof(double)), *start = calloc((size_t)m.n_cols, sizeof(double));
        assert_non_null(x);
        assert_non_null(start);
        ot_mip_result r;
        ot_error err = {0};
        assert_int_equal(solve(&m, 30.0, NULL, x, &r, &err), OT_OK);
        assert_int_equal(r.status, OT_MIP_OPTIMAL);
        assert_true(fabs(r.obj - want) < 1e-6);
        assert_true(fabs(r.bound - r.obj) < 1e-6 && r.gap == 0.0);
        unsigned got = 0;
        for (int i = 0; i < N; i++) got |= (x[2 * i] > 0.5 ? 1u : 0u) << i;
        assert_true(fabs(choice_cost(got, c) - want) < 1e-6); /* the columns are the optimum's */
        /* From a poor start (recompute everything), the same optimum. */
        for (int i = 0; i < N; i++) start[2 * i] = worst >> i & 1u;
        assert_int_equal(solve(&m, 30.0, start, x, &r, &err), OT_OK);
        assert_int_equal(r.status, OT_MIP_OPTIMAL);
        assert_true(fabs(r.obj - want) < 1e-6);
        printf("%s: need %.1f: optimum %.3f (exhaustive %.3f)\n", name, need, r.obj, want);
        free(x), free(start);
        ot_mip_free(&m);
    }
    /* More than every item frees: proven infeasible. */
    ot_mip m = {0};
    build(&m, total + 1.0, w, c);
    double *x = calloc((size_t)m.n_cols, sizeof(double));
    ot_mip_result r;
    ot_error err = {0};
    assert_int_equal(solve(&m, 30.0, NULL, x, &r, &err), OT_OK);
    assert_int_equal(r.status, OT_MIP_INFEASIBLE);
    free(x);
    ot_mip_free(&m);
}

static void test_cbc(void **state) {
    (void)state;
    if (!ot_mip_cbc_available()) {
        printf("skipped: this build has no COIN-OR CBC (coinor-libcbc-dev)\n");
        return;
    }
    check_solver(ot_mip_solve_cbc, "CBC");
}

static void test_glpk(void **state) {
    (void)state;
    if (!ot_mip_glpk_available()) {
        printf("skipped: this build has no GLPK (libglpk-dev)\n");
        return;
    }
    check_solver(ot_mip_solve_glpk, "GLPK");
}

/* ot_mip_solve uses the solvers the build has, or refuses. */
static void test_choice(void **state) {
    (void)state;
    bool c = ot_mip_cbc_available(), g = ot_mip_glpk_available();
    const char *want = c && g ? "CBC+GLPK" : c ? "CBC" : g ? "GLPK" : "none";
    assert_string_equal(ot_mip_solver_name(), want);
    assert_int_equal(ot_mip_solver_available(), strcmp(want, "none") != 0);
    if (!ot_mip_solver_available()) {
        ot_mip_result r;
        ot_error err = {0};
        assert_int_equal(ot_mip_solve(NULL, 0.0, NULL, NULL, &r, &err), OT_E_UNSUPPORTED);
        return;
    }
    check_solver(ot_mip_solve, want);
}

/* ot_mip_solve_from: the solver that settles a programme is the one tried first next
 * time; from either order the optimum is the exhaustive one. */
static void test_prefer(void **state) {
    (void)state;
    if (!ot_mip_cbc_available() || !ot_mip_glpk_available()) {
        printf("skipped: this build lacks CBC or GLPK; nothing to choose between\n");
        return;
    }
    double w[N], c[N], total = 0.0;
    instance(w, c);
    for (int i = 0; i < N; i++) total += w[i];
    unsigned arg = 0;
    double want = brute(total / 2.0, w, c, &arg);
    ot_mip m = {0};
    build(&m, total / 2.0, w, c);
    double *x = calloc((size_t)m.n_cols, sizeof(double));
    assert_non_null(x);
    int order[] = {-1, OT_MIP_CBC, OT_MIP_GLPK};
    for (int k = 0; k < 3; k++) {
        int prefer = order[k];
        ot_mip_result r;
        ot_error err = {0};
        assert_int_equal(ot_mip_solve_from(&m, 30.0, NULL, &prefer, x, &r, &err), OT_OK);
        assert_int_equal(r.status, OT_MIP_OPTIMAL);
        assert_true(fabs(r.obj - want) < 1e-6);
        /* a programme this small settles in the first solver's slice */
        assert_int_equal(prefer, order[k] < 0 ? OT_MIP_GLPK : order[k]);
        assert_int_equal(r.solver, prefer);
    }
    free(x);
    ot_mip_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cbc),
        cmocka_unit_test(test_glpk),
        cmocka_unit_test(test_choice),
        cmocka_unit_test(test_prefer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
