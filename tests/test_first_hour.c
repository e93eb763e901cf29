/* test_first_hour.c — the traps a new user met in the first hour (issue 31), run as
 * that user runs them (the built binary on the bundled samples): each gives the
 * expected behaviour or a message that points to the right option.
 *   - the bare form's suggested command, run as printed on the sample data, trains:
 *     the loss falls by at least a quarter (a model that cannot learn says so);
 *   - `--output tuned.onnx` (meant as -o) names -o and --loss-output;
 *   - `--freeze '*.bias'` is a glob; a bad `re:` pattern says it was a regex;
 *   - HF labels of -100 are ignored by default; int32 token ids are accepted;
 *   - the last partial batch is kept (or dropped with --drop-last, said);
 *   - `--checkpoint-every 10` over 28 steps also checkpoints the final state;
 *   - no --optimizer is AdamW at 3e-3, --momentum alone still SGD; a flat loss is said. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "train/data.h"
#include "train/npy.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define D S "data/"
#define TMP OT_BINARY_DIR "/test_first_hour_tmp"
#define OUT TMP "/out.txt"
#define run(...) cli_run(OUT, __VA_ARGS__)
#define expect_output(needle) cli_expect_in(OUT, needle)
#define TINY S "tinygpt.onnx --input tokens=" D "tinygpt_tokens.npy --labels " D "tinygpt_labels.npy"

/* Replaces every `from` in s (malloc'd, freed) by `to`; returns the new string. */
static char *replace(char *s, const char *from, const char *to) {
    size_t n = 0, lf = strlen(from), lt = strlen(to);
    for (const char *p = s; (p = strstr(p, from)); p += lf) n++;
    char *r = malloc(strlen(s) + n * lt + 1), *w = r;
    assert_non_null(r);
    for (const char *p = s, *q; ; p = q + lf) {
        q = strstr(p, from);
        size_t k = q ? (size_t)(q - p) : strlen(p);
        memcpy(w, p, k);
        w += k;
        if (!q) break;
        memcpy(w, to, lt);
        w += lt;
    }
    *w = 0;
    free(s);
    return r;
}

/* "trained N steps in T s: loss A -> B" of the last run. */
static void final_losses(double *a, double *b) {
    char *o = cli_slurp(OUT);
    assert_non_null(o);
    const char *t = strstr(o, "trained ");
    const char *l = t ? strstr(t, ": loss ") : NULL;
    if (!l || sscanf(l, ": loss %lf -> %lf", a, b) != 2) fail_msg("no final loss in:\n%s", o);
    free(o);
}

/* The bare form without data prints a command; run as printed (placeholders replaced
 * by the sample's data, in a scratch folder), it lowers the loss by a quarter. */
static void suggested_command_trains(const char *model, const char *input_ph, const char *input, const char *labels,
                                     bool learns) {
    assert_int_equal(run(BIN " " S "%s.onnx", model), 0);
    char *o = cli_slurp(OUT);
    assert_non_null(o);
    char *c = strstr(o, "\n  onnxtrain ");
    if (!c) fail_msg("%s: no suggested command in:\n%s", model, o);
    c += 3;
    *strchr(c, '\n') = 0;
    char *cmd = strdup(c);
    free(o);
    assert_non_null(strstr(cmd, "--epochs 5"));
    cmd = replace(cmd, "onnxtrain ", BIN " ");
    cmd = replace(cmd, input_ph, input);
    cmd = replace(cmd, "LABELS.npy", labels);
    char tuned[512];
    snprintf(tuned, sizeof tuned, TMP "/%s.tuned.onnx", model);
    remove(tuned);
    int rc = run("cd " TMP " && %s", cmd);
    if (rc != 0) fail_msg("%s: `%s` exited %d", model, cmd, rc);
    free(cmd);
    double a, b;
    final_losses(&a, &b);
    printf("%s: the suggested command: loss %.5g -> %.5g (%.0f%%)\n", model, a, b, 100.0 * (b - a) / a);
    if (learns && !(b <= 0.75 * a)) fail_msg("%s: loss %.6g -> %.6g, less than a quarter lower", model, a, b);
    if (!learns) expect_output("the loss barely fell"); /* a model that cannot learn says so */
    remove(tuned);
}

static void test_suggested_command_trains(void **state) {
    (void)state;
    suggested_command_trains("tinygpt", "TOKENS.npy", D "tinygpt_tokens.npy", D "tinygpt_labels.npy", true);
    suggested_command_trains("mlp", "X.npy", D "mlp_x.npy", D "mlp_labels.npy", true);
    suggested_command_trains("mobilenet", "X.npy", D "mobilenet_x.npy", D "mobilenet_labels.npy", true);
    suggested_command_trains("resnet", "X.npy", D "resnet_x.npy", D "resnet_labels.npy", true);
    /* 48 Tanh layers at PyTorch's init: the gradient vanishes (the remat benchmark) */
    suggested_command_trains("chain48", "X.npy", D "chain48_x.npy", D "chain48_labels.npy", false);
}

/* --output was the loss's model output: a file name there was meant for -o. */
static void test_output_names(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train " TINY " --output tuned.onnx"), 2);
    expect_output("-o tuned.onnx");
    expect_output("--loss-output");
    assert_int_equal(run(BIN " train " TINY " --output logits"), 2); /* no -o: said, with what --output is */
    expect_output("missing -o TUNED.onnx");
    expect_output("--loss-output");
    assert_int_equal(run(BIN " train " TINY " --output logits --steps 1 -o " TMP "/t.onnx"), 0); /* old scripts */
    expect_output("read as --loss-output logits");
    assert_int_equal(run(BIN " train " TINY " --loss-output nope --steps 1 -o " TMP "/t.onnx"), 2);
    expect_output("no output named 'nope'");
}

/* Runs that named no optimizer used SGD; --momentum (SGD's option) still selects it. */
static void test_optimizer_default(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train " TINY " --steps 1 -o " TMP "/t.onnx"), 0);
    expect_output("with adamw lr 0.003");
    assert_int_equal(run(BIN " train " TINY " --momentum 0.9 --steps 1 -o " TMP "/t.onnx"), 0);
    expect_output("--momentum without --optimizer: SGD");
    expect_output("with sgd lr 0.01,");
    assert_int_equal(run(BIN " train " TINY " --optimizer adamw --momentum 0.9 --steps 1 -o " TMP "/t.onnx"), 2);
    expect_output("--beta1");
    /* a run whose loss barely falls says so, naming the options that help */
    assert_int_equal(run(BIN " train " TINY " --optimizer sgd --steps 10 -o " TMP "/t.onnx"), 0);
    expect_output("the loss barely fell");
    expect_output("try a larger --lr (this run: 0.01) or more --steps (this run: 10)");
}

static void test_pattern_syntax(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train " TINY " --freeze '*.bias' --steps 1 -o " TMP "/t.onnx"), 0);
    assert_int_equal(run(BIN " train " TINY " --freeze 're:*.bias' --steps 1 -o " TMP "/t.onnx"), 2);
    expect_output("not a valid regular expression");
    assert_int_equal(run(BIN " train " TINY " --freeze 'ln_9*' --steps 1 -o " TMP "/t.onnx"), 2);
    expect_output("the glob matches no parameter");
    /* an old script's regex still works, and the run says how it was read */
    assert_int_equal(run(BIN " train " TINY " --freeze 'bias$' --steps 1 -o " TMP "/t.onnx"), 0);
    expect_output("read as a regular expression");
    assert_int_equal(run(BIN " train " TINY " --lora 2 --lora-target 're:attn' --steps 1 -o " TMP "/t.onnx"), 0);
}

/* HF data: int32 token ids and labels, -100 on padding. */
static void test_hf_token_data(void **state) {
    (void)state;
    ot_error err = {0};
    ot_tensor *tok = NULL, *lab = NULL;
    assert_int_equal(ot_npy_read(D "tinygpt_tokens.npy", &tok, &err), OT_OK);
    assert_int_equal(ot_npy_read(D "tinygpt_labels.npy", &lab, &err), OT_OK);
    ot_tensor *t32 = ot_tensor_new(OT_I32, &tok->shape), *l32 = ot_tensor_new(OT_I32, &lab->shape);
    int64_t n = ot_shape_numel(&tok->shape);
    for (int64_t i = 0; i < n; i++) {
        ((int32_t *)t32->data)[i] = (int32_t)((int64_t *)tok->data)[i];
        ((int64_t *)lab->data)[i] = i % 16 < 4 ? -100 : ((int64_t *)lab->data)[i]; /* left padding */
        ((int32_t *)l32->data)[i] = (int32_t)((int64_t *)lab->data)[i];
    }
    assert_int_equal(ot_npy_write(TMP "/tok32.npy", t32, &err), OT_OK);
    assert_int_equal(ot_npy_write(TMP "/lab100.npy", lab, &err), OT_OK);
    assert_int_equal(ot_npy_write(TMP "/lab32.npy", l32, &err), OT_OK);
    ot_tensor_free(tok), ot_tensor_free(lab), ot_tensor_free(t32), ot_tensor_free(l32);
    assert_int_equal(run(BIN " train " S "tinygpt.onnx --input tokens=" TMP "/tok32.npy --labels " TMP
                         "/lab100.npy --steps 2 -o " TMP "/t.onnx"), 0);
    assert_int_equal(run(BIN " train " S "tinygpt.onnx --input tokens=" TMP "/tok32.npy --labels " TMP
                         "/lab32.npy --steps 2 -o " TMP "/t.onnx"), 0);
    assert_int_equal(run(BIN " train " S "tinygpt.onnx --input tokens=" TMP "/tok32.npy --labels " TMP
                         "/lab100.npy --ignore-index none --steps 2 -o " TMP "/t.onnx"), 8);
    expect_output("label -100");
    expect_output("--ignore-index none");
    assert_int_equal(run(BIN " eval " S "tinygpt.onnx --input tokens=" TMP "/tok32.npy"), 0);
}

/* TMP/tok64.npy and lab64.npy: the first 64 tinygpt samples. */
static void write_64(void) {
    ot_error err = {0};
    ot_tensor *tok = NULL, *lab = NULL, *t64 = NULL, *l64 = NULL;
    assert_int_equal(ot_npy_read(D "tinygpt_tokens.npy", &tok, &err), OT_OK);
    assert_int_equal(ot_npy_read(D "tinygpt_labels.npy", &lab, &err), OT_OK);
    int64_t idx[64];
    for (int i = 0; i < 64; i++) idx[i] = i;
    assert_int_equal(ot_data_gather_new(tok, idx, 64, &t64, &err), OT_OK);
    assert_int_equal(ot_data_gather_new(lab, idx, 64, &l64, &err), OT_OK);
    assert_int_equal(ot_npy_write(TMP "/tok64.npy", t64, &err), OT_OK);
    assert_int_equal(ot_npy_write(TMP "/lab64.npy", l64, &err), OT_OK);
    ot_tensor_free(tok), ot_tensor_free(lab), ot_tensor_free(t64), ot_tensor_free(l64);
}

/* 64 samples in batches of 48: 48 and 16 every epoch, or 48 alone with --drop-last. */
static void test_partial_batch(void **state) {
    (void)state;
    write_64();
#define T64 S "tinygpt.onnx --input tokens=" TMP "/tok64.npy --labels " TMP "/lab64.npy --batch-size 48 --epochs 2"
    assert_int_equal(run(BIN " train " T64 " --report " TMP "/r.json -o " TMP "/t.onnx"), 0);
    expect_output("then a partial batch of 16");
    expect_output("trained 4 steps");
    cli_expect_in(TMP "/r.json", "\"samples_per_epoch\": 64");
    assert_int_equal(run(BIN " train " T64 " --drop-last -o " TMP "/t.onnx"), 0);
    expect_output("the last 16 samples of its order are dropped (--drop-last)");
    expect_output("trained 2 steps");
}

/* 28 steps, a checkpoint every 10: 10, 20 and the final 28. */
static void test_final_checkpoint(void **state) {
    (void)state;
    assert_int_equal(run("rm -rf " TMP "/ck"), 0);
    assert_int_equal(run(BIN " train " TINY " --batch-size 8 --steps 28 --checkpoint-every 10 --checkpoint-dir " TMP
                         "/ck -o " TMP "/t.onnx"), 0);
    struct stat st;
    assert_int_equal(stat(TMP "/ck/ckpt-10.otc", &st), 0);
    assert_int_equal(stat(TMP "/ck/ckpt-20.otc", &st), 0);
    assert_int_equal(stat(TMP "/ck/ckpt-28.otc", &st), 0);
    /* the final checkpoint is the run's end: resuming it has nothing left to do */
    assert_int_equal(run(BIN " train " TINY " --batch-size 8 --steps 28 --checkpoint-every 10 --resume " TMP
                         "/ck -o " TMP "/t.onnx"), 2);
    expect_output("checkpoint is at step 28");
    /* with a partial batch in every epoch (64 samples in batches of 10: 6 + a padded 4),
     * resuming from a checkpoint gives the uninterrupted run's bits; a checkpoint of a
     * run that kept it refuses --drop-last, naming the setting */
    write_64();
#define R64 S "tinygpt.onnx --input tokens=" TMP "/tok64.npy --labels " TMP "/lab64.npy --batch-size 10 --epochs 2 --threads 1"
    assert_int_equal(run("rm -rf " TMP "/ck64"), 0);
    assert_int_equal(run(BIN " train " R64 " --checkpoint-every 4 --checkpoint-dir " TMP "/ck64 -o " TMP "/a.onnx"), 0);
    assert_int_equal(run(BIN " train " R64 " --resume " TMP "/ck64/ckpt-8.otc -o " TMP "/b.onnx"), 0);
    assert_int_equal(run("cmp " TMP "/a.onnx " TMP "/b.onnx"), 0);
    assert_int_equal(run(BIN " train " R64 " --drop-last --resume " TMP "/ck64/ckpt-8.otc -o " TMP "/c.onnx"), 8);
    expect_output("the last partial batch dropped (--drop-last) (checkpoint: kept)");
}

int main(void) {
    mkdir(TMP, 0755);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suggested_command_trains), cmocka_unit_test(test_output_names),
        cmocka_unit_test(test_pattern_syntax),           cmocka_unit_test(test_hf_token_data),
        cmocka_unit_test(test_partial_batch),            cmocka_unit_test(test_final_checkpoint),
        cmocka_unit_test(test_optimizer_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
