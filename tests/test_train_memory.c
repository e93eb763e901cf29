/* test_train_memory.c — `onnxtrain train` when the step does not fit: a memory
 * budget that the chosen remat policy cannot meet, one that no plan can meet, and an
 * arena allocation that fails (address-space limit) all stop before training with the
 * bytes needed and a remat policy or batch size that would fit — and the advice is
 * checked by following it. */
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

#include "cli_run.h"
#include "train/npy.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_train_memory_tmp"

/* Runs a shell command, its output in TMP/out.txt. */
#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* chain48-shaped data: x [n,32] float, labels [n] in 0..9. */
static void write_chain_data(const char *x_path, const char *y_path, int64_t n) {
    ot_error err = {0};
    int64_t xd[2] = {n, 32};
    ot_shape xs = ot_shape_make(2, xd), ys = ot_shape_make(1, &n);
    ot_tensor *x = ot_tensor_new(OT_F32, &xs), *y = ot_tensor_new(OT_I64, &ys);
    assert_non_null(x);
    assert_non_null(y);
    uint64_t r = 12345;
    for (int64_t i = 0; i < n * 32; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        ((float *)x->data)[i] = (float)((double)(r >> 11) / 9007199254740992.0 - 0.5);
    }
    for (int64_t i = 0; i < n; i++)
        ((int64_t *)y->data)[i] = i % 10;
    assert_int_equal(ot_npy_write(x_path, x, &err), OT_OK);
    assert_int_equal(ot_npy_write(y_path, y, &err), OT_OK);
    ot_tensor_free(x);
    ot_tensor_free(y);
}

static int setup(void **state) {
    (void)state;
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0); /* spares each onnxtrain its re-exec (cli/main.c) */
    mkdir(TMP, 0777);
    write_chain_data(TMP "/x.npy", TMP "/y.npy", 2048);
    return 0;
}

#define CHAIN " train " S "chain48.onnx --input " TMP "/x.npy --labels " TMP "/y.npy --steps 1 --threads 2"

/* --remat none under a budget it exceeds: refused (not ignored) with both numbers; the
 * advice names --remat all as fitting, and --remat auto then trains. */
static void test_budget_policy_exceeded(void **state) {
    (void)state;
    remove(TMP "/m.onnx");
    assert_int_equal(run(BIN CHAIN " --batch-size 1024 --memory-budget 4M --remat none -o " TMP "/m.onnx"), 9);
    cli_expect_in(TMP "/out.txt", "the training step needs");
    cli_expect_in(TMP "/out.txt", "planned peak with --remat none), more than --memory-budget 4194304 bytes");
    cli_expect_in(TMP "/out.txt", "--remat all needs");
    cli_expect_in(TMP "/out.txt", "within the budget");
    assert_false(exists(TMP "/m.onnx"));
    assert_int_equal(run(BIN CHAIN " --batch-size 1024 --memory-budget 4M --remat auto -o " TMP "/m.onnx"), 0);
    assert_true(exists(TMP "/m.onnx"));
    /* --memory-budget alone: auto, the default, plans within it (it used to be exit 9) */
    remove(TMP "/m.onnx");
    assert_int_equal(run(BIN CHAIN " --batch-size 1024 --memory-budget 4M -o " TMP "/m.onnx"), 0);
    cli_expect_in(TMP "/out.txt", "remat auto (budget 4.00 MiB)");
    assert_true(exists(TMP "/m.onnx"));
}

/* Neither the policy nor --remat all fits at this batch: the largest batch that fits
 * is named, it trains within the budget, and one more sample does not fit. */
static void test_budget_batch_advice(void **state) {
    (void)state;
    assert_int_equal(run(BIN CHAIN " --batch-size 1024 --remat sqrt --memory-budget 2M -o " TMP "/m.onnx"), 9);
    cli_expect_in(TMP "/out.txt", "with --remat sqrt), more than --memory-budget 2097152 bytes");
    char *o = cli_slurp(TMP "/out.txt");
    assert_non_null(o);
    char *p = strstr(o, "--batch-size ");
    if (!p || !strstr(p, "with --remat sqrt fits")) fail_msg("no batch advice in:\n%s", o);
    long b = strtol(p + 13, NULL, 10);
    free(o);
    assert_true(b >= 1 && b < 1024);
    assert_int_equal(run(BIN CHAIN " --batch-size %ld --remat sqrt --memory-budget 2M -o " TMP "/m.onnx", b), 0);
    assert_int_equal(run(BIN CHAIN " --batch-size %ld --remat sqrt --memory-budget 2M -o " TMP "/m.onnx", b + 1), 9);
}

/* No plan at any batch: params, gradients and Adam state alone exceed the budget. */
static void test_budget_impossible(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy "
                             "--optimizer adam --remat auto --memory-budget 300K -o " TMP "/m2.onnx"),
                     9);
    cli_expect_in(TMP "/out.txt", "cannot be met: the smallest planned peak is");
    cli_expect_in(TMP "/out.txt", "no batch size fits 307200 bytes even with --remat all");
    assert_false(exists(TMP "/m2.onnx"));
}

/* The arena cannot be allocated (an address-space limit): the bytes it needed and the
 * smaller alternatives, before any step. */
static void test_allocation_fails(void **state) {
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* AddressSanitizer reserves terabytes of address space: no limit can apply */
#endif
    const char *limit = "ulimit -v 1500000; ";
    if (run("%s" BIN " train " S "mlp.onnx --input " S "mlp/input.npy --labels " S
            "mlp/labels.npy --steps 1 --threads 2 -o " TMP "/m3.onnx",
            limit) != 0) {
        print_message("skipped: onnxtrain does not start within a 1.5 GB address space here\n");
        skip();
    }
    write_chain_data(TMP "/bx.npy", TMP "/by.npy", 262144); /* planned peak ~1.6 GB */
    remove(TMP "/m3.onnx");
    assert_int_equal(run("%s" BIN " train " S "chain48.onnx --input " TMP "/bx.npy --labels " TMP "/by.npy --steps 1 "
                         "--threads 2 --batch-size 262144 -o " TMP "/m3.onnx",
                         limit),
                     9);
    cli_expect_in(TMP "/out.txt", "cannot allocate an arena of");
    cli_expect_in(TMP "/out.txt", "--remat all needs");
    cli_expect_in(TMP "/out.txt", "--batch-size 131072 needs");
    assert_false(exists(TMP "/m3.onnx"));
    remove(TMP "/bx.npy");
    remove(TMP "/by.npy");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_policy_exceeded),
        cmocka_unit_test(test_budget_batch_advice),
        cmocka_unit_test(test_budget_impossible),
        cmocka_unit_test(test_allocation_fails),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
