/* test_remat_optimal.c — `--remat optimal` as a user runs it, on every sample: within a
 * budget halfway between the least planned peak (`all`) and the plain one (`none`),
 * `plan` proves the plan optimal under the solver's model (gap 0) and the planner's
 * peak fits; `verify` finds the gradients, loss and state bitwise equal to --remat
 * none. Budgets come from the samples' own plans, so the test follows the planner.
 * Skips, saying so, when the build has no MIP solver (GLPK). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_run.h"
#include "remat/remat.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_remat_optimal_tmp"
#define OUT TMP "/out.txt"
#define run(...) cli_run(OUT, __VA_ARGS__)
#define LIMIT "--remat-time-limit 20 --threads 2"

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    return 0;
}

/* The n-th (0-based) "key": NUMBER in the last output. */
static long long json_number(const char *key, int nth) {
    char *text = cli_slurp(OUT);
    assert_non_null(text);
    const char *p = text;
    long long v = -1;
    for (int i = 0; i <= nth && p; i++) {
        p = strstr(p, key);
        if (p && i < nth) p += strlen(key);
    }
    if (p) v = strtoll(p + strlen(key), NULL, 10);
    free(text);
    assert_true(v >= 0);
    return v;
}

/* The model's data arguments: input and labels of the sample. */
static void data_args(const char *name, char *buf, size_t n) {
    snprintf(buf, n, S "%s.onnx --input " S "%s/input.npy --labels " S "%s/labels.npy", name, name, name);
}

static void check_sample(const char *name) {
    char d[1024];
    data_args(name, d, sizeof d);
    assert_int_equal(run(BIN " plan %s --remat all --json", d), 0);
    long long none = json_number("\"peak_bytes\": ", 0), all = json_number("\"peak_bytes\": ", 1);
    long long budget = all + (none - all) / 2;
    assert_int_equal(run(BIN " plan %s --remat optimal --memory-budget %lld " LIMIT " --json", d, budget), 0);
    cli_expect_in(OUT, "\"optimal\": {\"proven\": true, \"gap\": 0,");
    long long planned = json_number("\"planner_peak_bytes\": ", 0);
    assert_true(planned <= budget);
    assert_int_equal(json_number("\"peak_bytes\": ", 1), planned); /* the plan reported is the one checked */
    assert_int_equal(run(BIN " verify %s --remat optimal --memory-budget %lld " LIMIT " --json", d, budget), 0);
    cli_expect_in(OUT, "\"equal\": true");
    cli_expect_in(OUT, "\"n_different\": 0");
}

static void test_samples(void **state) {
    (void)state;
    if (!ot_remat_optimal_available()) {
        printf("skipped: this build has no MIP solver (GLPK), --remat optimal is unavailable\n");
        return;
    }
    static const char *samples[] = {"mlp", "chain48", "resnet", "mobilenet", "tinygpt"};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) check_sample(samples[i]);
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
        cmocka_unit_test(test_samples),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
