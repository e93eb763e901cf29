/* test_bench_cli.c — the measurement of what remat costs (train/measure.h) and the
 * commands that print it: the statistics helper on fixed inputs; `onnxtrain bench`'s
 * table, --json structure, --svg and argument errors; verify's summary and time line;
 * --memory-budget 0 refused by every command that takes it; -o with --external-data
 * never replacing a data file onnxtrain did not write; bench --timeline's measured
 * marks, equal to the JSON's measured peaks, and the picture of a mark that differs. No assertion on a time: only
 * that the figures are there, finite, and consistent with one another. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_run.h"
#include "remat/timeline.h"
#include "train/measure.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_bench_cli_tmp"
#define OUT TMP "/out.txt"
#define run(...) cli_run(OUT, __VA_ARGS__)
#define MLP_DATA " --input " S "mlp/input.npy --labels " S "mlp/labels.npy"

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    return 0;
}

static void test_stats(void **state) {
    (void)state;
    ot_stats s;
    const double odd[] = {5, 1, 4, 2, 3}; /* sorted 1..5 */
    ot_stats_of(odd, 5, &s);
    assert_int_equal(s.n, 5);
    assert_true(s.median == 3 && s.q1 == 2 && s.q3 == 4 && s.min == 1 && s.max == 5);
    const double even[] = {10, 40, 20, 30}; /* numpy: percentile 25 = 17.5, 50 = 25, 75 = 32.5 */
    ot_stats_of(even, 4, &s);
    assert_true(s.median == 25 && s.q1 == 17.5 && s.q3 == 32.5 && s.min == 10 && s.max == 40);
    const double one[] = {7};
    ot_stats_of(one, 1, &s);
    assert_true(s.median == 7 && s.q1 == 7 && s.q3 == 7);
    ot_stats_of(one, 0, &s);
    assert_int_equal(s.n, 0);
    assert_true(isnan(s.median) && isnan(s.q1) && isnan(s.max));
}

/* Every configuration's stats are ordered (min <= q1 <= median <= q3 <= max) and the
 * baseline's ratio is exactly 1 in every round. */
static void test_bench_json(void **state) {
    (void)state;
    remove(TMP "/b.svg");
    assert_int_equal(run(BIN " bench " S "tinygpt.onnx --remat sqrt,none,auto --memory-budget 600K,700K "
                             "--steps 3 --threads 2 --optimizer sgd --json --svg " TMP "/b.svg"),
                     0);
    cli_expect_in(OUT, "\"data\": \"synthetic\"");
    cli_expect_in(OUT, "\"steps\": 3, \"warmup_steps\": 1");
    cli_expect_in(OUT, "\"remat\": \"none\", \"memory_budget\": 0");
    cli_expect_in(OUT, "\"remat\": \"sqrt\", \"memory_budget\": 0");
    cli_expect_in(OUT, "\"remat\": \"auto\", \"memory_budget\": 614400");
    cli_expect_in(OUT, "\"remat\": \"auto\", \"memory_budget\": 716800");
    cli_expect_in(OUT, "\"busy\": ");
    cli_expect_in(OUT, "\"ratio_vs_none\": {\"median\": 1, \"q1\": 1, \"q3\": 1, \"min\": 1, \"max\": 1}");
    for (int c = 0; c < 4; c++) {
        double med = cli_json_nth(OUT, "\"wall_seconds\": {\"median\": ", c);
        double planned = cli_json_nth(OUT, "\"planned_peak_bytes\": ", c);
        double measured = cli_json_nth(OUT, "\"measured_peak_bytes\": ", c);
        assert_true(med > 0 && isfinite(med));
        assert_true(planned > 0 && measured == planned); /* the executor allocates the plan exactly */
    }
    double p_none = cli_json_nth(OUT, "\"planned_peak_bytes\": ", 0);
    assert_true(cli_json_nth(OUT, "\"planned_peak_bytes\": ", 2) <= 614400);
    assert_true(cli_json_nth(OUT, "\"planned_peak_bytes\": ", 1) < p_none);
    cli_expect_in(TMP "/b.svg", "<svg");
    cli_expect_in(TMP "/b.svg", "tinygpt.onnx: peak memory against time per training step");
    cli_expect_in(TMP "/b.svg", "auto @ 600.0 KiB");
    char *svg = cli_slurp(TMP "/b.svg");
    assert_non_null(svg);
    assert_null(strstr(svg, OT_SOURCE_DIR)); /* the title holds the file name only */
    free(svg);
}

static void test_bench_table(void **state) {
    (void)state;
    assert_int_equal(
        run(BIN " bench " S "mlp.onnx --remat all,manual:/Relu_output_0,logits --steps 2 --threads 1" MLP_DATA), 0);
    cli_expect_in(OUT, "step ms median [IQR]");
    cli_expect_in(OUT, "x none median [IQR]");
    cli_expect_in(OUT, "\nnone ");
    cli_expect_in(OUT, "\nall ");
    cli_expect_in(OUT, "\nmanual:/Relu_output_0,logits ");
    cli_expect_in(OUT, "2 rounds after one warm-up step per configuration, interleaved");
    assert_int_equal(run(BIN " bench --help"), 0);
    cli_expect_in(OUT, "--memory-budget S1,S2");
    cli_expect_in(OUT, "--steps N");
}

/* bench --timeline: per configuration a measured mark whose bytes and step are the
 * JSON's measured peak and step (and, the planner being exact, the planned ones), and
 * a title saying that they coincide. */
static void test_bench_timeline(void **state) {
    (void)state;
    remove(TMP "/t.svg");
    assert_int_equal(run(BIN " bench " S "tinygpt.onnx --remat sqrt,all --steps 1 --threads 1 --optimizer sgd "
                             "--json --timeline " TMP "/t.svg"),
                     0);
    cli_expect_in(TMP "/t.svg", "measured peak = planned peak, for every plan");
    cli_expect_in(TMP "/t.svg", "sqrt: planned peak ");
    cli_expect_in(TMP "/t.svg", "; equals the planned peak");
    for (int c = 0; c < 3; c++) {
        double measured = cli_json_nth(OUT, "\"measured_peak_bytes\": ", c);
        double mstep = cli_json_nth(OUT, "\"measured_peak_step\": ", c);
        assert_true(measured > 0);
        assert_true(measured == cli_json_nth(OUT, "\"planned_peak_bytes\": ", c));
        assert_true(mstep >= 0 && mstep == cli_json_nth(OUT, "\"planned_peak_step\": ", c));
        assert_true(measured == cli_json_nth(TMP "/t.svg", "data-measured-bytes=\"", c));
        assert_true(mstep == cli_json_nth(TMP "/t.svg", "data-measured-step=\"", c));
    }
    char *svg = cli_slurp(TMP "/t.svg");
    assert_non_null(svg);
    int marks = 0;
    for (const char *p = svg; (p = strstr(p, "class=\"measured\"")); p++)
        marks++;
    assert_int_equal(marks, 3); /* none, sqrt, all */
    free(svg);
    assert_int_equal(run(BIN " bench " S "mlp.onnx --remat sqrt --svg " TMP "/x.svg --timeline " TMP "/x.svg"), 2);
    cli_expect_in(OUT, "--svg '" TMP "/x.svg' and --timeline '" TMP "/x.svg' name the same file");
    assert_int_equal(run(BIN " bench --help"), 0);
    cli_expect_in(OUT, "--timeline FILE.svg");
}

/* A measured mark that is not the plan's says so, in its legend line and the title;
 * one whose step is unknown sits at the right edge. */
static void test_timeline_differs(void **state) {
    (void)state;
    const size_t tl[4] = {100, 300, 200, 50};
    ot_timeline_curve cv[2] = {
        {.label = "a", .timeline = tl, .n_steps = 4, .peak_step = 1, .backward_step = 2, .peak_bytes = 320,
         .measured = true, .measured_peak = 320, .measured_step = 1},
        {.label = "b", .timeline = tl, .n_steps = 4, .peak_step = 1, .backward_step = 2, .peak_bytes = 320,
         .measured = true, .measured_peak = 400, .measured_step = -1},
    };
    ot_error err = {0};
    assert_int_equal(ot_timeline_curves_svg(TMP "/d.svg", cv, 2, NULL, &err), OT_OK);
    cli_expect_in(TMP "/d.svg", "a measured peak differs from its plan");
    cli_expect_in(TMP "/d.svg", "first reached at step 1 as planned (diamond); equals the planned peak");
    cli_expect_in(TMP "/d.svg", "arena high-water 400 B, step unknown (diamond at the right edge); differs from the planned 320 B");
    cli_expect_in(TMP "/d.svg", "data-measured-bytes=\"400\" data-measured-step=\"-1\"");
    assert_int_equal(ot_timeline_curves_svg(TMP "/d.svg", cv, 1, "t", &err), OT_OK);
    cli_expect_in(TMP "/d.svg", "t: measured peak = planned peak, for every plan");
}

static void test_bench_usage(void **state) {
    (void)state;
    assert_int_equal(run(BIN " bench " S "mlp.onnx"), 2);
    cli_expect_in(OUT, "missing --remat");
    assert_int_equal(run(BIN " bench " S "mlp.onnx --remat sqrt,sometimes"), 2);
    cli_expect_in(OUT, "sometimes");
    assert_int_equal(run(BIN " bench " S "mlp.onnx --remat none"), 2);
    cli_expect_in(OUT, "nothing to measure");
    assert_int_equal(run(BIN " bench " S "mlp.onnx --remat sqrt --memory-budget 1M"), 2);
    cli_expect_in(OUT, "applies to auto and optimal");
    assert_int_equal(run(BIN " bench " S "mlp.onnx --remat auto --memory-budget 1M,0"), 2);
    cli_expect_in(OUT, "--memory-budget '0'");
    assert_int_equal(run(BIN " bench " S "mlp.onnx --remat sqrt --steps 0"), 2);
    cli_expect_in(OUT, "--steps 0");
    assert_int_equal(run(BIN " bench " S "mlp.onnx --remat auto --memory-budget 1K"), 9); /* infeasible: memory */
}

static void test_verify_summary(void **state) {
    (void)state;
    assert_int_equal(run(BIN " verify " S "mlp.onnx --remat all --time-steps 2 --threads 1" MLP_DATA), 0);
    cli_expect_in(OUT, "bitwise equal, 0 of ");
    cli_expect_in(OUT, "time per training step, median [IQR] of 2 interleaved steps after a warm-up");
    cli_expect_in(OUT, " KiB (none) -> ");
    char *txt = cli_slurp(OUT);
    assert_non_null(txt);
    assert_null(strstr(txt, "grad:")); /* no table of equal tensors without -v */
    assert_null(strstr(txt, " bytes (none)"));
    free(txt);
    assert_int_equal(run(BIN " verify " S "mlp.onnx --remat all --time-steps 0 -v" MLP_DATA), 0);
    cli_expect_in(OUT, "grad:");
    cli_expect_in(OUT, "time: not measured (--time-steps 0)");
    assert_int_equal(run(BIN " verify " S "mlp.onnx --remat all --time-steps 2 --json" MLP_DATA), 0);
    cli_expect_in(OUT, "\"timing\": {\"method\": ");
    cli_expect_in(OUT, "\"seconds_none\": ");
    cli_expect_in(OUT, "\"equal\": true");
    assert_int_equal(run(BIN " verify " S "mlp.onnx --remat all --time-steps -1" MLP_DATA), 2);
}

/* --memory-budget 0 is refused, by name, by every command that takes it. */
static void test_budget_zero(void **state) {
    (void)state;
    static const char *const cmds[] = {"train", "plan", "verify", "grad", "bench"};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        assert_int_equal(
            run(BIN " %s " S "mlp.onnx --remat auto --memory-budget 0 -o " TMP "/z.onnx" MLP_DATA, cmds[i]), 2);
        cli_expect_in(OUT, "--memory-budget '0'");
    }
    assert_int_equal(run("cd " TMP " && " BIN " " S "mlp.onnx --memory-budget 0B"), 2); /* the bare form */
    cli_expect_in(OUT, "--memory-budget '0B'");
}

/* -o out.onnx --external-data next to an out.onnx.data onnxtrain did not write. */
static void test_external_data_collision(void **state) {
    (void)state;
    remove(TMP "/ext.onnx");
    FILE *f = fopen(TMP "/ext.onnx.data", "w");
    assert_non_null(f);
    fputs("the user's own file\n", f);
    fclose(f);
    assert_int_equal(run(BIN " train " S "mlp.onnx --steps 1 -o " TMP "/ext.onnx --external-data" MLP_DATA), 2);
    cli_expect_in(OUT, "ext.onnx.data: writing the model");
    cli_expect_in(OUT, "move or remove it");
    cli_expect_in(TMP "/ext.onnx.data", "the user's own file"); /* untouched */
    struct stat sb;
    assert_int_not_equal(stat(TMP "/ext.onnx", &sb), 0);
    /* without it, the model and its data are written; a second run replaces its own data */
    remove(TMP "/ext.onnx.data");
    assert_int_equal(run(BIN " train " S "mlp.onnx --steps 1 -o " TMP "/ext.onnx --external-data" MLP_DATA), 0);
    assert_int_equal(stat(TMP "/ext.onnx.data", &sb), 0);
    assert_int_equal(run(BIN " train " S "mlp.onnx --steps 2 -o " TMP "/ext.onnx --external-data" MLP_DATA), 0);
    /* a model that reads other data does not make the file its own */
    remove(TMP "/ext.onnx");
    assert_int_equal(run(BIN " train " S "mlp.onnx --steps 1 -o " TMP "/ext.onnx" MLP_DATA), 0);
    assert_int_equal(run(BIN " train " S "mlp.onnx --steps 1 -o " TMP "/ext.onnx --external-data" MLP_DATA), 2);
    cli_expect_in(OUT, "not the external data of the model at");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_bench_json),
        cmocka_unit_test(test_bench_table),
        cmocka_unit_test(test_bench_timeline),
        cmocka_unit_test(test_timeline_differs),
        cmocka_unit_test(test_bench_usage),
        cmocka_unit_test(test_verify_summary),
        cmocka_unit_test(test_budget_zero),
        cmocka_unit_test(test_external_data_collision),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
