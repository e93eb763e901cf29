/* test_train_cli.c — `onnxtrain train` and `onnxtrain grad` as a user runs them
 * (the built binary): exit codes of bad input, no output file overwritten on
 * failure, the tuned model and report written on success, gradient dumps with
 * index.json, and --help naming every option. */
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
#include "train/npy.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_train_cli_tmp"
#define MLP_DATA " --input " S "mlp/input.npy"
/* Output of the last run goes to TMP/out.txt. */
#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)
#define expect_output(needle) cli_expect_in(TMP "/out.txt", needle)

static void write_sentinel(const char *path) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("sentinel", f);
    fclose(f);
}

static void expect_sentinel(const char *path) {
    char *b = cli_slurp(path);
    assert_non_null(b);
    assert_string_equal(b, "sentinel");
    free(b);
}

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0777);
    return 0;
}

/* Labels out of range, of the wrong dtype and shape: exit 8, message names the file;
 * the existing output file is untouched. */
static void test_bad_labels_exit_8(void **state) {
    (void)state;
    ot_error err = {0};
    ot_tensor *l = NULL;
    assert_int_equal(ot_npy_read(S "mlp/labels.npy", &l, &err), OT_OK);
    ((int64_t *)l->data)[5] = 42;
    assert_int_equal(ot_npy_write(TMP "/bad_range.npy", l, &err), OT_OK);
    ot_tensor_free(l);
    int64_t n = 7;
    ot_shape s1 = ot_shape_make(1, &n);
    ot_tensor *f = ot_tensor_new(OT_F32, &s1);
    assert_int_equal(ot_npy_write(TMP "/bad_dtype.npy", f, &err), OT_OK);
    ot_tensor_free(f);
    int64_t d2[2] = {7, 3};
    ot_shape s2 = ot_shape_make(2, d2);
    ot_tensor *w = ot_tensor_new(OT_I64, &s2);
    assert_int_equal(ot_npy_write(TMP "/bad_shape.npy", w, &err), OT_OK);
    ot_tensor_free(w);

    write_sentinel(TMP "/tuned.onnx");
    assert_int_equal(run(BIN " train " S "mlp.onnx" MLP_DATA " --labels " TMP "/bad_range.npy -o " TMP "/tuned.onnx"), 8);
    expect_output("bad_range.npy: label 42 at index 5");
    expect_sentinel(TMP "/tuned.onnx");
    assert_int_equal(run(BIN " train " S "mlp.onnx" MLP_DATA " --labels " TMP "/bad_dtype.npy -o " TMP "/tuned.onnx"), 8);
    expect_output("bad_dtype.npy");
    assert_int_equal(run(BIN " train " S "mlp.onnx" MLP_DATA " --labels " TMP "/bad_shape.npy -o " TMP "/tuned.onnx"), 8);
    expect_output("bad_shape.npy");
    expect_sentinel(TMP "/tuned.onnx");
    assert_int_equal(run(BIN " grad " S "mlp.onnx" MLP_DATA " --labels " TMP "/bad_range.npy --dump-grads " TMP "/g_bad"), 8);
    struct stat st;
    assert_int_not_equal(stat(TMP "/g_bad", &st), 0); /* nothing written */
}

static void test_usage_errors_exit_2(void **state) {
    (void)state;
    write_sentinel(TMP "/tuned.onnx");
    assert_int_equal(run(BIN " train " S "mlp.onnx" MLP_DATA " --labels " S "mlp/labels.npy --freeze '^nothing$' -o " TMP "/tuned.onnx"), 2);
    expect_output("nothing");
    assert_int_equal(run(BIN " train " S "mlp.onnx" MLP_DATA " --labels " S "mlp/labels.npy --optimizer lbfgs -o " TMP "/tuned.onnx"), 2);
    expect_output("lbfgs");
    assert_int_equal(run(BIN " train " S "mlp.onnx" MLP_DATA " --labels " S "mlp/labels.npy"), 2);
    expect_output("-o");
    assert_int_equal(run(BIN " train " S "mlp.onnx" MLP_DATA " --labels " S "mlp/labels.npy --lr -1 -o " TMP "/tuned.onnx"), 2);
    assert_int_equal(run(BIN " train " S "mlp.onnx" MLP_DATA " --labels " S "mlp/labels.npy --nesterov -o " TMP "/tuned.onnx"), 2);
    expect_output("momentum");
    assert_int_equal(run(BIN " train " S "mlp.onnx" MLP_DATA " --labels " S "mlp/labels.npy --report-grad-norm -o " TMP "/tuned.onnx"), 2);
    expect_output("give --report FILE.json too");
    expect_sentinel(TMP "/tuned.onnx");
}

/* --loss output on a model whose output is not a scalar: exit 5 naming the output. */
static void test_loss_output_not_scalar(void **state) {
    (void)state;
    int rc = run(BIN " grad " S "mlp.onnx" MLP_DATA " --loss output");
    assert_int_equal(rc, 5);
    expect_output("logits");
}

static void test_nan_exit_10(void **state) {
    (void)state;
    write_sentinel(TMP "/tuned.onnx");
    assert_int_equal(run(BIN " train " S "mlp.onnx" MLP_DATA " --labels " S "mlp/labels.npy --optimizer sgd --lr 1e38 --steps 4 -o " TMP "/tuned.onnx"), 10);
    expect_output("step 2");
    expect_output("first to produce");
    expect_sentinel(TMP "/tuned.onnx");
    /* a NaN in the data is named by file and sample */
    ot_error err = {0};
    ot_tensor *x = NULL;
    assert_int_equal(ot_npy_read(S "mlp/input.npy", &x, &err), OT_OK);
    ((float *)x->data)[4 * 64 + 3] = NAN;
    assert_int_equal(ot_npy_write(TMP "/nan_input.npy", x, &err), OT_OK);
    ot_tensor_free(x);
    assert_int_equal(run(BIN " train " S "mlp.onnx --input " TMP "/nan_input.npy --labels " S "mlp/labels.npy --no-shuffle --batch-size 3 --steps 3 -o " TMP "/tuned.onnx"), 10);
    expect_output("nan_input.npy holds a non-finite value in sample 4");
    expect_sentinel(TMP "/tuned.onnx");
}

/* tinygpt with every label -100 (issue 28): not 0/0 = NaN blamed on the causal mask,
 * but a warning naming the step, loss 0, the model written. */
static void test_all_labels_ignored_warns(void **state) {
    (void)state;
    ot_error err = {0};
    ot_tensor *l = NULL;
    assert_int_equal(ot_npy_read(S "tinygpt/labels.npy", &l, &err), OT_OK);
    for (int64_t i = 0; i < (int64_t)(l->nbytes / sizeof(int64_t)); i++) ((int64_t *)l->data)[i] = -100;
    assert_int_equal(ot_npy_write(TMP "/ignored.npy", l, &err), OT_OK);
    ot_tensor_free(l);
    assert_int_equal(run(BIN " train " S "tinygpt_nodrop.onnx --input " S "tinygpt/input.npy --labels " TMP
                         "/ignored.npy --batch-size 7 --steps 2 --quiet -o " TMP "/tuned.onnx"),
                     0);
    expect_output("warning: training step 2, micro-batch 1 of 1: every label is the ignore index -100");
    expect_output("loss 0.0000 -> 0.0000");
}

static void test_train_writes_model_and_report(void **state) {
    (void)state;
    remove(TMP "/tuned.onnx");
    assert_int_equal(run(BIN " train " S "mlp.onnx" MLP_DATA " --labels " S "mlp/labels.npy --val-input " S
                         "mlp/input.npy --val-labels " S "mlp/labels.npy --optimizer adam --lr 0.01 --batch-size 3 "
                         "--epochs 3 --seed 5 --threads 2 --report " TMP "/report.json -o " TMP "/tuned.onnx"),
                     0);
    expect_output("planned peak memory");
    expect_output("val loss");
    expect_output("accuracy");
    char *r = cli_slurp(TMP "/report.json");
    assert_non_null(r);
    assert_non_null(strstr(r, "\"loss\": ["));
    assert_non_null(strstr(r, "\"step_seconds\": ["));
    assert_non_null(strstr(r, "\"planned_peak\""));
    assert_non_null(strstr(r, "\"steps\": 9")); /* 7 samples in batches of 3: 3, 3 and 1 per epoch, x 3 */
    assert_non_null(strstr(r, "\"grad_norm\": [null, null")); /* not asked for: not computed */
    free(r);
    assert_int_equal(run(BIN " train " S "mlp.onnx" MLP_DATA " --labels " S "mlp/labels.npy --steps 2 --threads 2 "
                         "--report-grad-norm --report " TMP "/report.json -o " TMP "/tuned2.onnx"), 0);
    r = cli_slurp(TMP "/report.json");
    assert_non_null(r);
    char *g = strstr(r, "\"grad_norm\": [");
    assert_non_null(g);
    assert_true(strtod(g + strlen("\"grad_norm\": ["), NULL) > 0); /* a number, not null */
    free(r);
    /* the tuned model trains further from where it stopped: it loads and has a lower loss */
    assert_int_equal(run(BIN " grad " TMP "/tuned.onnx" MLP_DATA " --labels " S "mlp/labels.npy --json"), 0);
    char *o = cli_slurp(TMP "/out.txt");
    double loss = 0;
    char *p = strstr(o, "\"loss\": ");
    assert_non_null(p);
    loss = strtod(p + 8, NULL);
    assert_true(loss < 2.3476748); /* the untrained model's loss (ref_loss.npy) */
    free(o);
}

static void test_grad_dump(void **state) {
    (void)state;
    assert_int_equal(run(BIN " grad " S "mlp.onnx" MLP_DATA " --labels " S "mlp/labels.npy --freeze '^fc1' --dump-grads " TMP "/g"), 0);
    expect_output("loss 2.347");
    char *idx = cli_slurp(TMP "/g/index.json");
    assert_non_null(idx);
    assert_non_null(strstr(idx, "\"fc2.weight\": \"fc2.weight.npy\""));
    assert_null(strstr(idx, "fc1")); /* frozen */
    free(idx);
    ot_tensor *t = NULL;
    ot_error err = {0};
    assert_int_equal(ot_npy_read(TMP "/g/fc3.bias.npy", &t, &err), OT_OK);
    assert_int_equal(t->shape.rank, 1);
    assert_int_equal(t->shape.dim[0], 10);
    ot_tensor_free(t);
}

static void test_help_lists_options(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train --help"), 0);
    const char *opts[] = {"--optimizer", "--lr", "--momentum", "--nesterov", "--weight-decay", "--clip-grad-norm",
                          "--schedule", "--warmup-steps", "--accum", "--steps", "--epochs", "--batch-size", "--seed",
                          "--threads", "--val-input", "--val-labels", "--report", "--remat", "--memory-budget",
                          "--log-every", "--quiet", "--freeze", "--train", "--loss", "--class-axis", "--ignore-index"};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) expect_output(opts[i]);
    assert_int_equal(run(BIN " grad --help"), 0);
    expect_output("--dump-grads");
    expect_output("index.json");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_labels_exit_8),   cmocka_unit_test(test_usage_errors_exit_2),
        cmocka_unit_test(test_loss_output_not_scalar), cmocka_unit_test(test_nan_exit_10),
        cmocka_unit_test(test_all_labels_ignored_warns),
        cmocka_unit_test(test_train_writes_model_and_report), cmocka_unit_test(test_grad_dump),
        cmocka_unit_test(test_help_lists_options),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
