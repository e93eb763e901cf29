/* test_remat_cli.c — `onnxtrain plan` and `onnxtrain verify` as a user runs them (the
 * built binary): outputs, --json, --dot, --timeline, --batch-size auto, and the exit
 * codes of bad policies and infeasible budgets. */
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

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_remat_cli_tmp"
#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    return 0;
}

static void test_verify_ok(void **state) {
    (void)state;
    assert_int_equal(run(BIN " verify " S "tinygpt.onnx --input " S "tinygpt/input.npy --labels " S
                             "tinygpt/labels.npy --remat sqrt --seed 5 --threads 2"),
                     0);
    cli_expect_in(TMP "/out.txt", "0 of 30 tensors differ");
    cli_expect_in(TMP "/out.txt", "grad:blocks.0.attn.qkv.weight");
    assert_int_equal(run(BIN " verify " S "resnet.onnx --input " S "resnet/input.npy --labels " S
                             "resnet/labels.npy --remat all --json --threads 2"),
                     0);
    cli_expect_in(TMP "/out.txt", "\"equal\": true");
    cli_expect_in(TMP "/out.txt", "\"name\": \"state:block1.bn1.running_mean\"");
}

static void test_verify_usage(void **state) {
    (void)state;
    assert_int_equal(run(BIN " verify " S "mlp.onnx --input " S "mlp/input.npy --labels " S
                             "mlp/labels.npy --remat sometimes"),
                     2);
    cli_expect_in(TMP "/out.txt", "sometimes");
    assert_int_equal(run(BIN " verify " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy"), 2);
    cli_expect_in(TMP "/out.txt", "--remat");
    assert_int_equal(run(BIN " verify " S "mlp.onnx --input " S "mlp/input.npy --labels " S
                             "mlp/labels.npy --remat manual:no_such_value"),
                     2);
    cli_expect_in(TMP "/out.txt", "no_such_value");
    assert_int_equal(run(BIN " verify --help"), 0);
    cli_expect_in(TMP "/out.txt", "--memory-budget");
}

static void test_plan_outputs(void **state) {
    (void)state;
    remove(TMP "/g.dot");
    remove(TMP "/t.svg");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 8 --remat sqrt --dot " TMP "/g.dot --timeline " TMP
                             "/t.svg"),
                     0);
    cli_expect_in(TMP "/out.txt", "--remat none: peak");
    cli_expect_in(TMP "/out.txt", "--remat sqrt: peak");
    cli_expect_in(TMP "/out.txt", "kept_activations");
    cli_expect_in(TMP "/out.txt", " /blocks.0/attn/Softmax_output_0");
    cli_expect_in(TMP "/out.txt", "; recomputed ");
    cli_expect_in(TMP "/g.dot", "dashed");
    cli_expect_in(TMP "/g.dot", ".recompute");
    cli_expect_in(TMP "/t.svg", "<svg");
    cli_expect_in(TMP "/t.svg", "--remat sqrt");
    assert_int_equal(run(BIN " plan " S "chain48.onnx --batch-size 16 --remat auto --memory-budget 480K --json"), 0);
    cli_expect_in(TMP "/out.txt", "\"policy\": \"auto (budget 480.0 KiB)\"");
    cli_expect_in(TMP "/out.txt", "\"segments\": [");
    cli_expect_in(TMP "/out.txt", "\"kept_activations\"");
}

static void test_plan_budgets(void **state) {
    (void)state;
    assert_int_equal(run(BIN " plan " S "chain48.onnx --batch-size 64 --remat auto --memory-budget 100K"), 9);
    cli_expect_in(TMP "/out.txt", "smallest planned peak is");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size auto --remat auto"), 2);
    cli_expect_in(TMP "/out.txt", "--memory-budget");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size auto --memory-budget 4M --remat auto"), 0);
    cli_expect_in(TMP "/out.txt", "(auto)");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 8 --remat every:0"), 2);
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx"), 2); /* symbolic batch needs --batch-size */
    cli_expect_in(TMP "/out.txt", "--batch-size");
    assert_int_equal(run(BIN " plan --help"), 0);
    cli_expect_in(TMP "/out.txt", "--timeline");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_ok),
        cmocka_unit_test(test_verify_usage),
        cmocka_unit_test(test_plan_outputs),
        cmocka_unit_test(test_plan_budgets),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
