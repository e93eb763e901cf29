/* test_remat_optimal.c — `--remat optimal` as a user runs it, on every sample: within a
 * budget three quarters of the way from the least planned peak (`all`) to the plain one
 * (`none`), `plan` proves the plan optimal under the solver's model (gap 0) and the
 * planner's peak fits; `verify` finds the gradients, loss and state bitwise equal to
 * --remat none (chain48's proof needs CBC). Budgets come from the samples' own
 * plans, so the test follows the planner. On resnet the planner rejects the 15 cheapest plans of the model for
 * fragmentation alone (its convolution gradients' workspace fits no hole below the
 * live blocks, remat/optimal.c), so the proof there rests on the rounds' exact
 * no-good cuts. Skips, saying so, when the build has no MIP solver (CBC or GLPK). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_run.h"
#include "remat/optimal_mip.h"
#include "remat/remat.h"
#include "remat_check.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_remat_optimal_tmp"
#define OUT TMP "/out.txt"
#define run(...) cli_run(OUT, __VA_ARGS__)
/* Wall-clock limits: the proofs take about a second of CPU; the margin is for a
 * loaded machine. chain48 only needs a plan (see test_samples). */
#define LIMIT_PROVE "--remat-time-limit 60 --threads 2"
#define LIMIT_PLAN "--remat-time-limit 4 --threads 2"

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    return 0;
}

/* The n-th (0-based) "key": NUMBER in the last output, as a double and as a count. */
#define json_real(key, nth) cli_json_nth(OUT, key, nth)
#define json_number(key, nth) ((long long)cli_json_nth(OUT, key, nth))

/* The model's data arguments: input and labels of the sample. */
static void data_args(const char *name, char *buf, size_t n) {
    snprintf(buf, n, S "%s.onnx --input " S "%s/input.npy --labels " S "%s/labels.npy", name, name, name);
}

/* A sample at the budget three quarters of the way from the least planned peak
 * (`all`) to the plain one: optimal's plan fits, is no dearer than auto's (which seeds
 * the solve), is bitwise equal to none under verify, and when must_prove the solve
 * closed its gap. (In "peak_bytes" order a plan's own figure comes first, then its
 * "plan" object's: the policy's plan is the third.) */
static void check_sample(const char *name, bool must_prove) {
    char d[1024];
    data_args(name, d, sizeof d);
    assert_int_equal(run(BIN " plan %s --remat all --json", d), 0);
    long long none = json_number("\"peak_bytes\": ", 0), all = json_number("\"peak_bytes\": ", 2);
    assert_true(all < none);
    long long budget = all + (none - all) * 3 / 4;
    const char *limit = must_prove ? LIMIT_PROVE : LIMIT_PLAN;
    assert_int_equal(run(BIN " plan %s --remat optimal --memory-budget %lld %s --json", d, budget, limit), 0);
    if (must_prove) cli_expect_in(OUT, "\"optimal\": {\"proven\": true, \"gap\": 0,");
    assert_true(json_real("\"gap\": ", 0) < 1.0); /* a solution with a bound */
    long long planned = json_number("\"planner_peak_bytes\": ", 0);
    assert_true(planned <= budget);
    assert_int_equal(json_number("\"peak_bytes\": ", 2), planned); /* the plan reported is the one checked */
    double extra = json_real("\"extra_flops\": ", 1), auto_extra = json_real("\"auto_extra_flops\": ", 0);
    assert_true(extra > 0.0);                           /* the budget needs recomputation */
    assert_true(auto_extra < 0.0 || extra <= auto_extra); /* auto's plan seeds the solve */
    assert_int_equal(run(BIN " verify %s --remat optimal --memory-budget %lld %s --json", d, budget, limit), 0);
    cli_expect_in(OUT, "\"equal\": true");
    cli_expect_in(OUT, "\"n_different\": 0");
}

static void test_samples(void **state) {
    (void)state;
    if (rc_skip_without_mip()) return;
    /* chain48 (48 identical Gemm + Tanh layers): GLPK alone does not close the gap
     * within the test's time limit (3-15% left after 10 s), CBC's root cuts do (0.1 s,
     * docs/remat.md); without CBC the plan is checked there, not the proof. */
    static const char *samples[] = {"mlp", "resnet", "mobilenet", "tinygpt", "chain48"};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
        check_sample(samples[i], strcmp(samples[i], "chain48") || ot_mip_cbc_available());
}

/* auto against optimal where auto used to lose (issue 16: resnet at half the way from
 * the least peak to the plain one, 1.2x optimal's FLOPs; mobilenet at a quarter, 1.8x;
 * tinygpt at half, 1.19x: its repair wrote off drops that tied the step's best):
 * at a quarter and at half the way, wherever optimal proves its plan, auto's costs at
 * most 5% more. At the least peak itself (`all`'s) auto finds a plan. */
static void test_auto_near_optimal(void **state) {
    (void)state;
    if (rc_skip_without_mip()) return;
    static const char *samples[] = {"resnet", "mobilenet", "tinygpt"};
    int proven = 0;
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        char d[1024];
        data_args(samples[i], d, sizeof d);
        assert_int_equal(run(BIN " plan %s --remat all --json", d), 0);
        long long none = json_number("\"peak_bytes\": ", 0), all = json_number("\"peak_bytes\": ", 2);
        assert_int_equal(run(BIN " plan %s --remat auto --memory-budget %lld --json", d, all), 0);
        for (int q = 1; q <= 2; q++) {
            long long budget = all + (none - all) * q / 4;
            assert_int_equal(run(BIN " plan %s --remat optimal --memory-budget %lld %s --json", d, budget, LIMIT_PROVE), 0);
            double extra = json_real("\"extra_flops\": ", 1), auto_extra = json_real("\"auto_extra_flops\": ", 0);
            char *text = cli_slurp(OUT);
            assert_non_null(text);
            bool closed = strstr(text, "\"proven\": true") != NULL;
            free(text);
            print_message("%s at %lld bytes: auto %.0f, optimal %.0f%s\n", samples[i], budget, auto_extra, extra,
                          closed ? " (proven)" : "");
            assert_true(auto_extra >= 0.0);
            if (!closed) continue;
            proven++;
            assert_true(auto_extra <= 1.05 * extra + 1e-9);
        }
    }
    assert_true(proven > 0);
}

/* The solver layer alone: a small 0/1 knapsack (minimise the weight left out, i.e.
 * maximise the value packed, under a capacity), against every subset. */
static void test_mip_knapsack(void **state) {
    (void)state;
    if (!ot_mip_solver_available()) {
        printf("skipped: no MIP solver in this build\n");
        return;
    }
    static const double value[] = {6, 5, 8, 9, 6, 7, 3}, weight[] = {2, 3, 6, 7, 5, 9, 4};
    const int n = 7;
    const double cap = 16;
    ot_mip m = {0};
    int row = ot_mip_add_row(&m, -HUGE_VAL, cap);
    for (int j = 0; j < n; j++) {
        assert_int_equal(ot_mip_add_col(&m, -value[j], 0.0, 1.0, true), j);
        assert_true(ot_mip_add_coef(&m, row, j, weight[j]));
    }
    double x[7], best = 0;
    ot_mip_result r;
    ot_error err = {0};
    double start[7] = {1, 0, 0, 0, 0, 0, 0}; /* a feasible incumbent to start from */
    assert_int_equal(ot_mip_solve(&m, 10.0, start, x, &r, &err), OT_OK);
    for (int mask = 0; mask < 1 << n; mask++) {
        double v = 0, w = 0;
        for (int j = 0; j < n; j++)
            if (mask >> j & 1) v += value[j], w += weight[j];
        if (w <= cap && v > best) best = v;
    }
    assert_int_equal(r.status, OT_MIP_OPTIMAL);
    assert_true(fabs(-r.obj - best) < 1e-6);
    assert_true(r.gap == 0.0);
    double w = 0;
    for (int j = 0; j < n; j++) w += weight[j] * x[j];
    assert_true(w <= cap + 1e-9);
    /* an infeasible row: nothing fits below -1 */
    ot_mip_add_row(&m, -HUGE_VAL, -1.0);
    assert_true(ot_mip_add_coef(&m, 1, 0, 1.0));
    assert_int_equal(ot_mip_solve(&m, 10.0, NULL, x, &r, &err), OT_OK);
    assert_int_equal(r.status, OT_MIP_INFEASIBLE);
    ot_mip_free(&m);
}

static void test_usage(void **state) {
    (void)state;
    char d[1024];
    data_args("mlp", d, sizeof d);
    if (!ot_remat_optimal_available()) {
        assert_int_equal(run(BIN " plan %s --remat optimal --memory-budget 1M", d), 6);
        cli_expect_in(OUT, "libglpk-dev");
        return;
    }
    assert_int_equal(run(BIN " plan %s --remat optimal", d), 2); /* no budget */
    cli_expect_in(OUT, "--memory-budget");
    assert_int_equal(run(BIN " plan %s --remat optimal --memory-budget 1K", d), 9); /* below any plan */
    cli_expect_in(OUT, "cannot be met");
    assert_int_equal(run(BIN " plan %s --remat optimal --memory-budget 1M --remat-time-limit 0", d), 2);
    cli_expect_in(OUT, "--remat-time-limit");
    assert_int_equal(run(BIN " plan --help"), 0);
    cli_expect_in(OUT, "--remat-time-limit");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mip_knapsack),
        cmocka_unit_test(test_samples),
        cmocka_unit_test(test_auto_near_optimal),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
