/* test_bad_labels.c — issue 28's bad input (docs/bad-input.md): a micro-batch whose
 * every label is the ignore index trains on (loss 0, zero gradients, a warning naming
 * the step) instead of stopping on a mask's intended -Inf, and the NaN/Inf diagnosis
 * still names a genuinely bad value, on tinygpt (a causal mask: Where writes -Inf). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importer/importer.h"
#include "train/train.h"
#include "train/train_check.h"
#include "test_files.h"

#define TG OT_SOURCE_DIR "/samples/tinygpt/"

typedef struct warnings {
    int n;
    char first[512];
} warnings;

static void on_warning(void *user, const char *msg) {
    warnings *w = user;
    if (w->n++ == 0) snprintf(w->first, sizeof w->first, "%s", msg);
}

/* tinygpt's inputs with labels: every one -100 in the first `ignored` samples. */
static void load_data(ot_dataset *d, int64_t ignored) {
    ot_error err = {0};
    memset(d, 0, sizeof *d);
    assert_int_equal(ot_dataset_add(d, "", "input.npy", -1, test_npy(TG "input.npy"), &err), OT_OK);
    ot_tensor *l = test_npy(TG "labels.npy");
    int64_t *p = l->data, row = l->shape.dim[1];
    for (int64_t i = 0; i < ignored * row; i++) p[i] = -100;
    assert_int_equal(ot_dataset_add(d, OT_DATA_LABELS, "labels.npy", -1, l, &err), OT_OK);
}

static ot_status train(ot_model *m, ot_dataset *d, int64_t batch, int64_t accum, ot_train_result *r, warnings *w,
                       ot_error *err) {
    ot_train_options o;
    ot_train_options_default(&o);
    o.steps = 2;
    o.batch_size = batch;
    o.accum = accum;
    o.no_shuffle = true;
    o.optim.lr = 1e30;
    ot_train_session *s = NULL;
    ot_status st = ot_train_session_new(m, &o, d, true, &s, err);
    ot_train_observer obs = {.on_warning = on_warning, .user = w};
    if (!st) st = ot_train_run(s, d, NULL, &obs, r, err);
    ot_train_session_free(s);
    return st;
}

/* Every label ignored: loss 0 and zero gradients, so even --lr 1e30 changes nothing
 * and nothing overflows; each step warns once. Before, the loss was 0/0 = NaN and the
 * diagnosis blamed the causal mask's Where. */
static void test_all_ignored_trains_on(void **state) {
    (void)state;
    ot_error err = {0};
    ot_model *m = test_model(OT_SOURCE_DIR "/samples/tinygpt_nodrop.onnx");
    ot_dataset d;
    load_data(&d, 7);
    ot_train_result r;
    warnings w = {0};
    ot_status st = train(m, &d, 7, 1, &r, &w, &err);
    if (st) fail_msg("%s", err.msg);
    assert_int_equal(r.n_steps, 2);
    assert_true(r.loss[0] == 0.0 && r.loss[1] == 0.0);
    assert_int_equal(w.n, 2);
    assert_non_null(strstr(w.first, "training step 1, micro-batch 1 of 1: every label is the ignore index -100"));
    ot_train_result_free(&r);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* --accum 2: the first micro-batch (samples 0-2) all ignored, the second counts. Only
 * the first warns, and the step's loss is the second's over 2. */
static void test_all_ignored_micro_batch_with_accum(void **state) {
    (void)state;
    ot_error err = {0};
    ot_model *m = test_model(OT_SOURCE_DIR "/samples/tinygpt_nodrop.onnx");
    ot_dataset d;
    load_data(&d, 3);
    ot_train_result r;
    warnings w = {0};
    ot_train_options o;
    ot_train_options_default(&o);
    o.steps = 1;
    o.batch_size = 3;
    o.accum = 2;
    o.no_shuffle = true;
    ot_train_session *s = NULL;
    assert_int_equal(ot_train_session_new(m, &o, &d, true, &s, &err), OT_OK);
    ot_train_observer obs = {.on_warning = on_warning, .user = &w};
    ot_status st = ot_train_run(s, &d, NULL, &obs, &r, &err);
    if (st) fail_msg("%s", err.msg);
    assert_int_equal(w.n, 1);
    assert_non_null(strstr(w.first, "micro-batch 1 of 2"));
    assert_true(isfinite(r.loss[0]) && r.loss[0] > 1.0); /* log(64) / 2 ~ 2.1 at the start */
    ot_train_result_free(&r);
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* The rule itself on tinygpt's graph: the mask's Where output (read by a Softmax,
 * maybe through an Add) may hold -Inf; a LayerNormalization output may not. */
static void test_inf_intended_rule(void **state) {
    (void)state;
    ot_model *m = test_model(OT_SOURCE_DIR "/samples/tinygpt_nodrop.onnx");
    const ot_graph *g = m->graph;
    int where = ot_graph_find_value(g, "/blocks.0/attn/Where_output_0");
    int ln = ot_graph_find_value(g, "/ln_f/LayerNormalization_output_0");
    assert_true(where >= 0 && ln >= 0);
    assert_true(ot_train_inf_intended(g, where, 0));
    assert_false(ot_train_inf_intended(g, ln, 0));
    assert_false(ot_train_inf_intended(g, g->outputs[0], 0)); /* a graph output */
    ot_model_free(m);
}

/* A genuinely bad value after the mask in schedule order (an Inf in ln_f.bias): the
 * diagnosis names ln_f's LayerNormalization, not the mask's Where before it. */
static void test_real_inf_named_past_the_mask(void **state) {
    (void)state;
    ot_error err = {0};
    ot_model *m = test_model(OT_SOURCE_DIR "/samples/tinygpt_nodrop.onnx");
    int b = ot_graph_find_value(m->graph, "ln_f.bias");
    assert_true(b >= 0 && m->graph->values[b].data);
    ((float *)m->graph->values[b].data)[3] = INFINITY;
    ot_dataset d;
    load_data(&d, 0);
    ot_train_result r;
    warnings w = {0};
    assert_int_equal(train(m, &d, 7, 1, &r, &w, &err), OT_E_NUMERICS);
    assert_non_null(strstr(err.msg, "node '/ln_f/LayerNormalization'"));
    assert_non_null(strstr(err.msg, "first to produce a non-finite value: +Inf"));
    assert_null(strstr(err.msg, "Where"));
    ot_train_result_free(&r);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* A huge --lr that overflows at step 2 is still caught and named. */
static void test_huge_lr_still_caught(void **state) {
    (void)state;
    ot_error err = {0};
    ot_model *m = test_model(OT_SOURCE_DIR "/samples/tinygpt_nodrop.onnx");
    ot_dataset d;
    load_data(&d, 0);
    ot_train_result r;
    warnings w = {0};
    assert_int_equal(train(m, &d, 7, 1, &r, &w, &err), OT_E_NUMERICS);
    assert_non_null(strstr(err.msg, "training step 2"));
    assert_non_null(strstr(err.msg, "first to produce"));
    assert_null(strstr(err.msg, "Where"));
    assert_int_equal(r.n_steps, 1);
    ot_train_result_free(&r);
    ot_dataset_free(&d);
    ot_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_ignored_trains_on),   cmocka_unit_test(test_all_ignored_micro_batch_with_accum),
        cmocka_unit_test(test_inf_intended_rule),       cmocka_unit_test(test_real_inf_named_past_the_mask),
        cmocka_unit_test(test_huge_lr_still_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
