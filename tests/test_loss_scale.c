/* test_loss_scale.c — fp16 dynamic loss scaling (train/train_scale.c) on the mlp
 * sample: a power-of-two scale divides out exactly (float32 steps with and without it
 * give the same bits); an overflow skips the step (the weights do not move) and halves
 * the scale and is not counted as Adam's step; clean steps grow it; GradScaler's defaults under --precision fp16 and
 * none under bf16; the options that cannot scale are refused with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_files.h"
#include "train/train.h"

#define S OT_SOURCE_DIR "/samples/"

static void load_data(ot_dataset *d) {
    ot_error err = {0};
    memset(d, 0, sizeof *d);
    if (ot_dataset_add(d, "", "x", -1, test_npy(S "data/mlp_x.npy"), &err)) fail_msg("%s", err.msg);
    if (ot_dataset_add(d, OT_DATA_LABELS, "labels", -1, test_npy(S "data/mlp_labels.npy"), &err))
        fail_msg("%s", err.msg);
}

static void opts(ot_train_options *o, ot_precision p, int64_t steps) {
    ot_train_options_default(o);
    o->batch_size = 8;
    o->n_threads = 2;
    o->steps = steps;
    o->no_shuffle = true;
    o->precision = p;
    o->optim.kind = OT_OPTIM_ADAM;
    o->optim.lr = 1e-3;
}

/* The params' bytes of g (values of kind param, in id order), concatenated; *n their size. */
static char *param_bytes(const ot_graph *g, size_t *n) {
    *n = 0;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind == OT_VK_PARAM) *n += g->values[v].nbytes;
    char *buf = malloc(*n + 1), *p = buf;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind == OT_VK_PARAM) {
            assert_non_null(g->values[v].data);
            memcpy(p, g->values[v].data, g->values[v].nbytes);
            p += g->values[v].nbytes;
        }
    return buf;
}

/* Trains a fresh import of mlp with o; the trained params' bytes into *w (caller
 * frees) and the result into *r. */
static size_t train(const ot_train_options *o, float **w, ot_train_result *r) {
    ot_model *m = test_model(S "mlp.onnx");
    ot_dataset d;
    load_data(&d);
    ot_error err = {0};
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, o, &d, true, &s, &err)) fail_msg("%s", err.msg);
    if (ot_train_run(s, &d, NULL, NULL, r, &err)) fail_msg("%s", err.msg);
    ot_train_session_free(s);
    size_t n = 0;
    *w = (float *)param_bytes(m->graph, &n);
    ot_dataset_free(&d);
    ot_model_free(m);
    return n;
}

/* S = 2^16 on a float32 step: every gradient is S times the plain one exactly and the
 * update divides it out exactly, so the trained weights are the plain run's bits. */
static void test_power_of_two_exact(void **state) {
    (void)state;
    ot_train_options o;
    ot_train_result r0, r1;
    float *w0, *w1;
    opts(&o, OT_PRECISION_FP32, 3);
    size_t n0 = train(&o, &w0, &r0);
    assert_false(r0.loss_scaling);
    o.loss_scale.mode = OT_LOSS_SCALE_DYNAMIC;
    size_t n1 = train(&o, &w1, &r1);
    assert_true(r1.loss_scaling);
    assert_int_equal(r1.skipped_steps, 0);
    assert_true(r1.loss_scale == 65536.0);
    assert_int_equal(n0, n1);
    assert_memory_equal(w0, w1, n0);
    assert_memory_equal(r0.loss, r1.loss, 3 * sizeof(double));
    free(w0), free(w1);
    ot_train_result_free(&r0), ot_train_result_free(&r1);
}

/* fp16 with a scale far beyond float16's range: every step overflows, is skipped (the
 * weights stay the imported ones) and halves the scale. */
static void test_overflow_skips(void **state) {
    (void)state;
    ot_train_options o;
    ot_train_result r1;
    float *w1;
    ot_model *m = test_model(S "mlp.onnx");
    size_t n0 = 0;
    char *w0 = param_bytes(m->graph, &n0);
    opts(&o, OT_PRECISION_FP16, 3);
    o.loss_scale.init = 1099511627776.0; /* 2^40 */
    size_t n1 = train(&o, &w1, &r1);
    assert_int_equal(n1, n0);
    assert_true(r1.loss_scaling);
    assert_int_equal(r1.skipped_steps, 3);
    assert_true(r1.loss_scale == 137438953472.0); /* 2^37 */
    assert_memory_equal(w0, w1, n0); /* skipped: the weights as imported */
    for (int k = 0; k < 3; k++) assert_true(isfinite(r1.loss[k]));
    ot_model_free(m);
    free(w0), free(w1);
    ot_train_result_free(&r1);
}

/* Clean steps grow the scale: with an interval of 1, each doubles it. fp16's default
 * is dynamic from 2^16; bf16's is none. */
static void test_growth_and_defaults(void **state) {
    (void)state;
    ot_train_options o;
    ot_train_result r;
    float *w;
    opts(&o, OT_PRECISION_FP16, 3);
    o.loss_scale.growth_interval = 1;
    o.loss_scale.init = 16.0; /* far from float16's overflow */
    train(&o, &w, &r);
    assert_true(r.loss_scaling);
    assert_int_equal(r.skipped_steps, 0);
    assert_true(r.loss_scale == 16.0 * 8);
    free(w);
    ot_train_result_free(&r);
    opts(&o, OT_PRECISION_FP16, 2);
    train(&o, &w, &r);
    assert_true(r.loss_scaling && r.loss_scale == 65536.0); /* 2000 clean steps before it grows */
    free(w);
    ot_train_result_free(&r);
    opts(&o, OT_PRECISION_BF16, 1);
    train(&o, &w, &r);
    assert_false(r.loss_scaling);
    free(w);
    ot_train_result_free(&r);
}

/* A skipped step is not one of Adam's: with every step on the same batch (the whole
 * data set), a run whose first step overflows (2^40, backed off to 64) and whose second
 * applies at S = 64 ends with the bits of one step at S = 64 (Adam's t = 1 in both). */
static void test_skip_not_counted(void **state) {
    (void)state;
    ot_train_options o;
    ot_train_result r0, r1;
    float *w0, *w1;
    opts(&o, OT_PRECISION_FP16, 2);
    o.batch_size = 512;
    o.loss_scale.init = 1099511627776.0;     /* 2^40: overflows */
    o.loss_scale.backoff = 1.0 / 17179869184.0; /* 2^-34: then 64 */
    size_t n0 = train(&o, &w0, &r0);
    assert_int_equal(r0.skipped_steps, 1);
    assert_true(r0.loss_scale == 64.0);
    opts(&o, OT_PRECISION_FP16, 1);
    o.batch_size = 512;
    o.loss_scale.init = 64.0;
    size_t n1 = train(&o, &w1, &r1);
    assert_int_equal(r1.skipped_steps, 0);
    assert_int_equal(n0, n1);
    assert_memory_equal(w0, w1, n0);
    free(w0), free(w1);
    ot_train_result_free(&r0), ot_train_result_free(&r1);
}

static void expect_refused(ot_train_options *o, ot_status code, const char *needle) {
    ot_model *m = test_model(S "mlp.onnx");
    ot_dataset d;
    load_data(&d);
    ot_error err = {0};
    ot_train_session *s = NULL;
    assert_int_equal(ot_train_session_new(m, o, &d, true, &s, &err), code);
    assert_null(s);
    if (!strstr(err.msg, needle)) fail_msg("'%s' not in: %s", needle, err.msg);
    ot_dataset_free(&d);
    ot_model_free(m);
}

static void test_refused(void **state) {
    (void)state;
    ot_train_options o;
    opts(&o, OT_PRECISION_FP16, 1);
    o.fuse_update = true; /* an update may run before a later gradient overflows */
    expect_refused(&o, OT_E_USAGE, "--loss-scale off");
    opts(&o, OT_PRECISION_FP16, 1);
    o.loss_scale.backoff = 2.0;
    expect_refused(&o, OT_E_USAGE, "--loss-scale-backoff");
    opts(&o, OT_PRECISION_FP16, 1);
    o.loss_scale.growth = 0.5;
    expect_refused(&o, OT_E_USAGE, "--loss-scale-growth");
    /* off: --fuse-update trains */
    opts(&o, OT_PRECISION_FP16, 1);
    o.fuse_update = true;
    o.loss_scale.mode = OT_LOSS_SCALE_OFF;
    ot_train_result r;
    float *w;
    train(&o, &w, &r);
    assert_false(r.loss_scaling);
    free(w);
    ot_train_result_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_power_of_two_exact),
        cmocka_unit_test(test_overflow_skips),
        cmocka_unit_test(test_growth_and_defaults),
        cmocka_unit_test(test_skip_not_counted),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
