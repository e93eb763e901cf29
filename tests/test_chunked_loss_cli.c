/* test_chunked_loss_cli.c — --chunked-loss as a user runs it (the built binary):
 * `verify` bitwise against --remat none under every policy with the fused loss,
 * `plan`'s saving (text and --json), `train` saying what was fused and, when it was
 * asked for, why nothing was, the fused loss under --precision bf16, and the usage
 * errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_run.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_chunked_loss_cli_tmp"
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
    static const char *policies[] = {"all",     "sqrt", "selective",
                                     "every:2", "auto", "manual:/ln_f/LayerNormalization_output_0"};
    for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
        assert_int_equal(
            run(BIN " verify " GPT " --chunked-loss on --chunked-loss-rows 5 --time-steps 1 --remat %s", policies[k]),
            0);
        cli_expect_in(OUT, "bitwise equal, 0 of 30 tensors differ");
    }
}

static void test_plan_saving(void **state) {
    (void)state;
    assert_int_equal(run(BIN " plan " GPT " --chunked-loss on --chunked-loss-rows 8 --remat all --optimizer sgd"), 0);
    cli_expect_in(OUT, "--chunked-loss: '/ln_f/LayerNormalization_output_0' x 'head.weight'^T -> loss in chunks of 8");
    cli_expect_in(OUT, "of logits and their gradient never exist");
    cli_expect_in(OUT, "instead of");
    cli_expect_in(OUT, "at the peak, without -> with: params");
    assert_int_equal(run(BIN " plan " GPT " --chunked-loss on --remat all --json"), 0);
    cli_expect_in(OUT, "\"chunked_loss\": {\"applied\": true");
    cli_expect_in(OUT, "\"peak_bytes_without\": ");
    /* auto with a chunk as big as the logits: nothing to save, and plan says so */
    assert_int_equal(run(BIN " plan " GPT " --chunked-loss auto --chunked-loss-rows 100000 --remat all"), 0);
    cli_expect_in(OUT, "--chunked-loss: not applied: one chunk of");
}

static void test_train_messages(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train " GPT " --steps 2 --chunked-loss on -o " TMP "/t.onnx"), 0);
    cli_expect_in(OUT, "chunked cross-entropy: '/ln_f/LayerNormalization_output_0' x 'head.weight'^T");
    assert_int_equal(run(BIN " train " GPT " --steps 1 --chunked-loss on --val-input " S "tinygpt/input.npy "
                             "--val-labels " S "tinygpt/labels.npy -o " TMP "/t.onnx"),
                     0);
    cli_expect_in(OUT, "chunked cross-entropy not used: validation (its accuracy) reads the logits");
    assert_int_equal(run(BIN " train " S "mlp.onnx --input " S "mlp/input.npy --labels " S
                             "mlp/labels.npy --steps 1 --chunked-loss auto -v --chunked-loss-rows 2 -o " TMP "/m.onnx"),
                     0);
    cli_expect_in(OUT, "chunked cross-entropy: '/Relu_1_output_0' x 'fc3.weight'^T + bias -> loss in chunks of 2");
}

/* Under --memory-budget without --chunked-loss-rows: the largest chunk whose step fits,
 * halving from the default (128 rows here, the whole batch). */
static void test_budget_picks_chunk(void **state) {
    (void)state;
#define STEP                                                                                                           \
    S "tinygpt_nodrop.onnx --input " S "data/tinygpt_tokens.npy --labels " S "data/tinygpt_labels.npy "                \
      "--threads 2 --batch-size 8 --optimizer sgd --remat none --chunked-loss on"
    assert_int_equal(run(BIN " plan " STEP " --chunked-loss-rows 128 --json"), 0);
    double big = cli_json_nth(OUT, "\"peak_bytes\": ", 1);
    assert_int_equal(run(BIN " plan " STEP " --chunked-loss-rows 64 --json"), 0);
    double half = cli_json_nth(OUT, "\"peak_bytes\": ", 1);
    assert_true(half < big); /* the chunk's workspace is at the peak */
    long long budget = (long long)((big + half) / 2);
    assert_int_equal(run(BIN " train " STEP " --steps 1 --memory-budget %lld -o " TMP "/b.onnx", budget), 0);
    cli_expect_in(OUT, "loss in chunks of 64 of 128 rows");
    assert_int_equal(run(BIN " train " STEP " --steps 1 --memory-budget %lld -o " TMP "/b.onnx", (long long)big), 0);
    cli_expect_in(OUT, "loss in chunks of 128 of 128 rows");
#undef STEP
}

/* Under --precision bf16 autocast has made the head a bf16 GEMM whose logits it casts up:
 * the fused node reads the float32 hidden state and weight instead, and the bf16 copies
 * only the head read are not made (nor kept: the hidden state's was the largest). */
static void test_low_precision(void **state) {
    (void)state;
    assert_int_equal(run(BIN " plan " GPT " --precision bf16 --chunked-loss on --chunked-loss-rows 8 --remat none"), 0);
    cli_expect_in(OUT, "--chunked-loss: '/ln_f/LayerNormalization_output_0' x 'head.weight'^T -> loss in chunks of 8");
    cli_expect_in(OUT, ", the head in float32");
    assert_int_equal(run(BIN " plan " GPT " --precision bf16 --chunked-loss on --remat none --json"), 0);
    char *json = cli_slurp(OUT);
    assert_non_null(json);
    assert_null(strstr(json, "/ln_f/LayerNormalization_output_0.bf16"));
    free(json);
    assert_int_equal(run(BIN " plan " GPT " --precision bf16 --chunked-loss off --remat none --json"), 0);
    cli_expect_in(OUT, "/ln_f/LayerNormalization_output_0.bf16");
    static const char *policies[] = {"all", "auto"};
    for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
        assert_int_equal(run(BIN " verify " GPT " --precision bf16 --chunked-loss on --chunked-loss-rows 5 "
                                 "--time-steps 1 --remat %s",
                             policies[k]),
                         0);
        cli_expect_in(OUT, "bitwise equal, 0 of 30 tensors differ");
    }
}

static void test_usage(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train " GPT " --chunked-loss sometimes"), 2);
    cli_expect_in(OUT, "--chunked-loss 'sometimes': expected off, on or auto");
    assert_int_equal(run(BIN " grad " GPT " --chunked-loss on --chunked-loss-rows 0"), 2);
    cli_expect_in(OUT, "--chunked-loss-rows 0");
    assert_int_equal(run(BIN " train --help"), 0);
    cli_expect_in(OUT, "--chunked-loss MODE");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_every_policy),
        cmocka_unit_test(test_plan_saving),
        cmocka_unit_test(test_train_messages),
        cmocka_unit_test(test_budget_picks_chunk),
        cmocka_unit_test(test_low_precision),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
