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
#include <sys/wait.h>

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_remat_cli_tmp"

static int run(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd - 64, fmt, ap);
    va_end(ap);
    snprintf(cmd + n, sizeof cmd - (size_t)n, " >" TMP "/out.txt 2>&1");
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    fclose(f);
    return b;
}

static void expect_in(const char *path, const char *needle) {
    char *o = slurp(path);
    assert_non_null(o);
    if (!strstr(o, needle)) fail_msg("expected '%s' in %s:\n%s", needle, path, o);
    free(o);
}

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
    expect_in(TMP "/out.txt", "0 of 30 tensors differ");
    expect_in(TMP "/out.txt", "grad:blocks.0.attn.qkv.weight");
    assert_int_equal(run(BIN " verify " S "resnet.onnx --input " S "resnet/input.npy --labels " S
                             "resnet/labels.npy --remat all --json --threads 2"),
                     0);
    expect_in(TMP "/out.txt", "\"equal\": true");
    expect_in(TMP "/out.txt", "\"name\": \"state:block1.bn1.running_mean\"");
}

static void test_verify_usage(void **state) {
    (void)state;
    assert_int_equal(run(BIN " verify " S "mlp.onnx --input " S "mlp/input.npy --labels " S
                             "mlp/labels.npy --remat sometimes"),
                     2);
    expect_in(TMP "/out.txt", "sometimes");
    assert_int_equal(run(BIN " verify " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy"), 2);
    expect_in(TMP "/out.txt", "--remat");
    assert_int_equal(run(BIN " verify " S "mlp.onnx --input " S "mlp/input.npy --labels " S
                             "mlp/labels.npy --remat manual:no_such_value"),
                     2);
    expect_in(TMP "/out.txt", "no_such_value");
    assert_int_equal(run(BIN " verify --help"), 0);
    expect_in(TMP "/out.txt", "--memory-budget");
}

static void test_plan_outputs(void **state) {
    (void)state;
    remove(TMP "/g.dot");
    remove(TMP "/t.svg");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 8 --remat sqrt --dot " TMP "/g.dot --timeline " TMP
                             "/t.svg"),
                     0);
    expect_in(TMP "/out.txt", "--remat none: peak");
    expect_in(TMP "/out.txt", "--remat sqrt: peak");
    expect_in(TMP "/out.txt", "kept_activations");
    expect_in(TMP "/out.txt", " /blocks.0/attn/Softmax_output_0");
    expect_in(TMP "/out.txt", "; recomputed ");
    expect_in(TMP "/g.dot", "dashed");
    expect_in(TMP "/g.dot", ".recompute");
    expect_in(TMP "/t.svg", "<svg");
    expect_in(TMP "/t.svg", "--remat sqrt");
    assert_int_equal(run(BIN " plan " S "chain48.onnx --batch-size 16 --remat auto --memory-budget 480K --json"), 0);
    expect_in(TMP "/out.txt", "\"policy\": \"auto (budget 480.0 KiB)\"");
    expect_in(TMP "/out.txt", "\"segments\": [");
    expect_in(TMP "/out.txt", "\"kept_activations\"");
}

static void test_plan_budgets(void **state) {
    (void)state;
    assert_int_equal(run(BIN " plan " S "chain48.onnx --batch-size 64 --remat auto --memory-budget 100K"), 9);
    expect_in(TMP "/out.txt", "smallest planned peak is");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size auto --remat auto"), 2);
    expect_in(TMP "/out.txt", "--memory-budget");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size auto --memory-budget 4M --remat auto"), 0);
    expect_in(TMP "/out.txt", "(auto)");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 8 --remat every:0"), 2);
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx"), 2); /* symbolic batch needs --batch-size */
    expect_in(TMP "/out.txt", "--batch-size");
    assert_int_equal(run(BIN " plan --help"), 0);
    expect_in(TMP "/out.txt", "--timeline");
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
