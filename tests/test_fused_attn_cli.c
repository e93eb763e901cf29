/* test_fused_attn_cli.c — --fused-attention as a user runs it (the built binary) on
 * the tinygpt sample (two attention blocks with Dropout): `verify` bitwise against
 * --remat none under every policy with the fused attention, `plan` saying what was
 * fused (text and --json), `train` saying so and training with the Dropout's own mask
 * (the loss after two steps within rounding of the plain graph's), the usage errors. */
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

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_fused_attn_cli_tmp"
#define OUT TMP "/out.txt"
#define run(...) cli_run(OUT, __VA_ARGS__)
#define GPT S "tinygpt.onnx --input " S "tinygpt/input.npy --labels " S "tinygpt/labels.npy --threads 2"

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    return 0;
}

static void test_verify_every_policy(void **state) {
    (void)state;
    static const char *policies[] = {"all", "sqrt", "selective", "every:2", "auto"};
    for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
        assert_int_equal(run(BIN " verify " GPT " --fused-attention on --time-steps 1 --remat %s", policies[k]), 0);
        cli_expect_in(OUT, "bitwise equal, 0 of 30 tensors differ");
    }
}

static void test_plan(void **state) {
    (void)state;
    assert_int_equal(run(BIN " plan " GPT " --fused-attention on --remat none"), 0);
    cli_expect_in(OUT, "--fused-attention: 2 attention blocks fused (2 with dropout drawn in the fused op); 28.0 KiB");
    assert_int_equal(run(BIN " plan " GPT " --fused-attention on --remat none --json"), 0);
    cli_expect_in(OUT, "\"fused_attention\": {\"fused\": 2, \"with_dropout\": 2, \"left_alone\": 0, \"prob_bytes\": 28672");
    /* a model without attention: nothing fused, and plan says why */
    assert_int_equal(run(BIN " plan " S "mlp.onnx --fused-attention on"), 0);
    cli_expect_in(OUT, "--fused-attention: no attention pattern matched (0 Softmax nodes)");
}

/* The number after `key` on the last line of a train run's output holding both
 * `line_has` and key ("trained .. loss A -> B", "val loss X"). */
static double last_number(const char *line_has, const char *key) {
    FILE *f = fopen(OUT, "r");
    assert_non_null(f);
    char line[1024];
    double last = -1.0;
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, key);
        if (strstr(line, line_has) && p) last = strtod(p + strlen(key), NULL);
    }
    fclose(f);
    return last;
}
#define final_loss() last_number("trained ", " -> ")

static void test_train(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train " GPT " --steps 2 --fused-attention off -o " TMP "/a.onnx"), 0);
    double plain = final_loss();
    assert_int_equal(run(BIN " train " GPT " --steps 2 --fused-attention on -o " TMP "/b.onnx"), 0);
    cli_expect_in(OUT, "fused attention: 2 attention blocks fused (2 with dropout drawn in the fused op)");
    double fused = final_loss();
    assert_true(plain > 0.0 && fused > 0.0);
    /* another mask would move the loss by far more than rounding */
    if (!(fabs(plain - fused) <= 1e-3)) fail_msg("loss after 2 steps: plain %.6f, fused %.6f", plain, fused);
    /* validation runs the fused op with its Dropout off, as it runs Dropout */
    double val[2];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(run(BIN " train " GPT " --steps 1 --fused-attention %s --val-input " S "tinygpt/input.npy "
                                 "--val-labels " S "tinygpt/labels.npy -o " TMP "/v.onnx",
                             k ? "on" : "off"),
                         0);
        val[k] = last_number("val loss", "val loss ");
    }
    assert_true(val[0] > 0.0);
    if (!(fabs(val[0] - val[1]) <= 1e-4)) fail_msg("validation loss: plain %.6f, fused %.6f", val[0], val[1]);
}

static void test_usage(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train " GPT " --fused-attention sometimes"), 2);
    cli_expect_in(OUT, "--fused-attention 'sometimes': expected off, on or auto");
    for (size_t k = 0; k < 5; k++) {
        static const char *cmds[] = {"train", "grad", "plan", "verify", "bench"};
        assert_int_equal(run(BIN " %s --help", cmds[k]), 0);
        cli_expect_in(OUT, "--fused-attention MODE");
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_every_policy),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_train),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
