/* test_eval_labels.c — `onnxtrain eval --labels`: the loss, accuracy and perplexity
 * over the whole data (train/metrics.h), checked against the same figures computed here
 * from the logits eval dumps; against train's validation of the same weights (one code
 * path: the same numbers); a last partial batch weighed by its samples; and bad labels
 * refused with the exit codes train uses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "train/npy.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_eval_labels_tmp"
#define OUT TMP "/out.txt"
#define run(...) cli_run(OUT, __VA_ARGS__)
#define TOKENS " --input " S "data/tinygpt_tokens.npy"
#define LABELS " --labels " S "data/tinygpt_labels.npy"

static int setup(void **state) {
    (void)state;
    return system("rm -rf " TMP " && mkdir -p " TMP) == 0 ? 0 : -1;
}

/* Mean cross-entropy (in double) and argmax hits of logits [N, ..., C] (classes last)
 * against labels, over rows [r0, r1) of the sample axis. */
static void reference(const ot_tensor *lg, const ot_tensor *y, int64_t r0, int64_t r1, double *loss, int64_t *hits,
                      int64_t *count) {
    int64_t C = lg->shape.dim[lg->shape.rank - 1], per = ot_shape_numel(&y->shape) / y->shape.dim[0];
    const float *l = lg->data;
    const int64_t *t = y->data;
    double sum = 0;
    *hits = *count = 0;
    for (int64_t i = r0 * per; i < r1 * per; i++) {
        const float *row = l + i * C;
        double mx = row[0], z = 0;
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (row[c] > row[best]) best = c;
        mx = row[best];
        for (int64_t c = 0; c < C; c++)
            z += exp((double)row[c] - mx);
        sum += log(z) + mx - (double)row[t[i]];
        *hits += best == t[i];
        (*count)++;
    }
    *loss = sum / (double)*count;
}

/* 512 sequences in batches of 100: five full batches and a last one of 12, weighed by
 * its samples; perplexity exp(loss) for a token model; accuracy over every token. */
static void test_against_the_logits(void **state) {
    (void)state;
    assert_int_equal(
        run(BIN " eval " S "tinygpt.onnx" TOKENS LABELS " --batch-size 100 --dump-outputs " TMP "/dump --json"), 0);
    double loss = cli_json_nth(OUT, "\"loss\": ", 0), acc = cli_json_nth(OUT, "\"accuracy\": ", 0);
    double ppl = cli_json_nth(OUT, "\"perplexity\": ", 0);
    assert_true(cli_json_nth(OUT, "\"labels_counted\": ", 0) == 512 * 16);
    ot_tensor *lg = NULL, *y = NULL;
    ot_error err = {0};
    assert_int_equal(ot_npy_read(TMP "/dump/logits.npy", &lg, &err), OT_OK);
    assert_int_equal(ot_npy_read(S "data/tinygpt_labels.npy", &y, &err), OT_OK);
    /* the batch means, weighed by the batch's samples */
    double want = 0;
    int64_t hits = 0, count = 0;
    for (int64_t b0 = 0; b0 < 512; b0 += 100) {
        int64_t b1 = b0 + 100 < 512 ? b0 + 100 : 512, h, c;
        double l;
        reference(lg, y, b0, b1, &l, &h, &c);
        want += l * (double)(b1 - b0) / 512.0;
        hits += h;
        count += c;
    }
    assert_true(fabs(loss - want) < 2e-5 * want);
    assert_true(fabs(acc - (double)hits / (double)count) < 1e-9);
    assert_true(fabs(ppl - exp(loss)) < 1e-4 * ppl);
    ot_tensor_free(lg);
    ot_tensor_free(y);
    /* the text form says the same */
    assert_int_equal(run(BIN " eval " S "tinygpt.onnx" TOKENS LABELS " --batch-size 100"), 0);
    cli_expect_in(OUT, "loss ");
    cli_expect_in(OUT, " over 512 samples, accuracy ");
    cli_expect_in(OUT, "(8192 labels), perplexity ");
}

/* Validation after the only epoch and eval of the model the run wrote: one code path,
 * the same figures. */
static void test_same_as_validation(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train " S "tinygpt.onnx" TOKENS LABELS " --val-input " S "data/tinygpt_tokens.npy"
                             " --val-labels " S "data/tinygpt_labels.npy --batch-size 16 --steps 8 --threads 2"
                             " --report " TMP "/r.json -o " TMP "/t.onnx"),
                     0);
    double vl = cli_json_nth(TMP "/r.json", "\"val_loss\": ", 0);
    double va = cli_json_nth(TMP "/r.json", "\"val_accuracy\": ", 0);
    double vp = cli_json_nth(TMP "/r.json", "\"val_perplexity\": ", 0);
    assert_int_equal(run(BIN " eval " TMP "/t.onnx" TOKENS LABELS " --batch-size 16 --threads 2 --json"), 0);
    assert_true(fabs(cli_json_nth(OUT, "\"loss\": ", 0) - vl) < 1e-6 * vl);
    assert_true(fabs(cli_json_nth(OUT, "\"accuracy\": ", 0) - va) < 1e-9);
    assert_true(fabs(cli_json_nth(OUT, "\"perplexity\": ", 0) - vp) < 1e-5 * vp);
}

/* Classification (mlp): accuracy, no perplexity; labels refused as train refuses them. */
static void test_classes_and_bad_labels(void **state) {
    (void)state;
    assert_int_equal(run(BIN " eval " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --json"), 0);
    cli_expect_in(OUT, "\"perplexity\": null");
    assert_true(cli_json_nth(OUT, "\"labels_counted\": ", 0) == 7);
    /* a label out of range: exit 8 naming the file */
    int64_t bad[7] = {0, 1, 2, 99, 4, 5, 6};
    ot_tensor *t = ot_tensor_new(OT_I64, &(ot_shape){.rank = 1, .dim = {7}});
    memcpy(t->data, bad, sizeof bad);
    ot_error err = {0};
    assert_int_equal(ot_npy_write(TMP "/bad.npy", t, &err), OT_OK);
    ot_tensor_free(t);
    assert_int_equal(run(BIN " eval " S "mlp.onnx --input " S "mlp/input.npy --labels " TMP "/bad.npy"), 8);
    cli_expect_in(OUT, "bad.npy");
    /* mse needs targets; --loss output takes no labels */
    assert_int_equal(run(BIN " eval " S "mlp.onnx --input " S "mlp/input.npy --loss mse"), 2);
    cli_expect_in(OUT, "--labels");
    assert_int_equal(run(BIN " eval --help"), 0);
    cli_expect_in(OUT, "--labels FILE");
    cli_expect_in(OUT, "perplexity");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_the_logits),
        cmocka_unit_test(test_same_as_validation),
        cmocka_unit_test(test_classes_and_bad_labels),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
