/* test_train_synthetic.c — synthetic data shaped like a session's inputs
 * (train/train_synthetic.h): the shapes and dtypes of the bound inputs, integer ids in
 * the range of the table a Gather reads (through a Cast), [0, 2) where nothing bounds
 * them, cross-entropy labels in [0, classes), floats N(0, 1); the same seed gives the
 * same bytes and another seed others; and a session accepts the data and runs a step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fixtures/onnx_builder.h"
#include "kernels/kernel.h"
#include "test_files.h"
#include "train/train.h"
#include "train/train_synthetic.h"

#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_train_synthetic_tmp"

/* Synthetic data for a plan-only session of m at `batch` (0: the model's). */
static ot_dataset synth(ot_model *m, ot_loss_kind loss, int64_t batch, uint64_t seed, int64_t n) {
    ot_train_options o;
    ot_train_options_default(&o);
    o.plan_only = true;
    o.batch_size = batch;
    o.loss.kind = loss;
    ot_train_session *s = NULL;
    ot_error err = {0};
    ot_status st = ot_train_session_new(m, &o, NULL, true, &s, &err);
    if (st) fail_msg("session: %s", err.msg);
    ot_dataset d = {0};
    st = ot_train_synthetic_data(s, seed, n, &d, &err);
    if (st) fail_msg("synthetic: %s", err.msg);
    ot_train_session_free(s);
    return d;
}

static void expect_ints_in(const ot_tensor *t, int64_t lo, int64_t hi, int min_distinct) {
    assert_int_equal(t->dtype, OT_I64);
    int64_t n = ot_shape_numel(&t->shape);
    bool seen[256] = {0};
    int distinct = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = ((const int64_t *)t->data)[i];
        if (v < lo || v >= hi)
            fail_msg("value %lld at %lld is outside [%lld, %lld)", (long long)v, (long long)i, (long long)lo,
                     (long long)hi);
        if (v < 256 && !seen[v]) seen[v] = true, distinct++;
    }
    assert_true(distinct >= min_distinct);
}

/* tinygpt: tokens [4,16] in [0, 64) from the embedding table, labels [4,16] in [0, 64). */
static void test_tinygpt_ids_and_labels(void **state) {
    (void)state;
    ot_model *m = test_model(S "tinygpt.onnx");
    ot_dataset d = synth(m, OT_LOSS_CROSS_ENTROPY, 4, 0, 4);
    assert_int_equal(d.n_arrays, 2);
    assert_int_equal(d.n_samples, 4);
    const ot_data_array *tok = ot_dataset_find(&d, "tokens"), *lab = ot_dataset_find(&d, OT_DATA_LABELS);
    assert_non_null(tok);
    assert_non_null(lab);
    assert_int_equal(tok->t->shape.rank, 2);
    assert_int_equal(tok->t->shape.dim[0], 4);
    assert_int_equal(tok->t->shape.dim[1], 16);
    expect_ints_in(tok->t, 0, 64, 20);
    expect_ints_in(lab->t, 0, 64, 20);
    assert_non_null(strstr(tok->path, "[0, 64)"));
    assert_non_null(strstr(tok->path, "tok.weight"));
    assert_non_null(strstr(lab->path, "classes of output 'logits'"));
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* Same seed, same bytes; another seed, other bytes; floats look like N(0, 1). */
static void test_seeded_normal(void **state) {
    (void)state;
    ot_model *m = test_model(S "mlp.onnx");
    ot_dataset a = synth(m, OT_LOSS_CROSS_ENTROPY, 8, 7, 64), b = synth(m, OT_LOSS_CROSS_ENTROPY, 8, 7, 64),
               c = synth(m, OT_LOSS_CROSS_ENTROPY, 8, 8, 64);
    const ot_tensor *xa = ot_dataset_find(&a, "x")->t, *xb = ot_dataset_find(&b, "x")->t,
                    *xc = ot_dataset_find(&c, "x")->t;
    assert_int_equal(xa->dtype, OT_F32);
    assert_int_equal(xa->shape.dim[0], 64);
    assert_int_equal(xa->shape.dim[1], 64);
    assert_memory_equal(xa->data, xb->data, xa->nbytes);
    assert_true(memcmp(xa->data, xc->data, xa->nbytes) != 0);
    int64_t n = ot_shape_numel(&xa->shape);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = ((const float *)xa->data)[i];
        assert_true(isfinite(v));
        sum += v;
        sq += v * v;
    }
    double mean = sum / (double)n, var = sq / (double)n - mean * mean;
    assert_true(fabs(mean) < 0.05);
    assert_true(var > 0.9 && var < 1.1);
    expect_ints_in(ot_dataset_find(&a, OT_DATA_LABELS)->t, 0, 10, 10);
    ot_dataset_free(&a);
    ot_dataset_free(&b);
    ot_dataset_free(&c);
    ot_model_free(m);
}

/* mse targets are floats shaped like the output. */
static void test_mse_targets(void **state) {
    (void)state;
    ot_model *m = test_model(S "mlp.onnx");
    ot_dataset d = synth(m, OT_LOSS_MSE, 4, 0, 4);
    const ot_tensor *y = ot_dataset_find(&d, OT_DATA_LABELS)->t;
    assert_int_equal(y->dtype, OT_F32);
    assert_int_equal(y->shape.rank, 2);
    assert_int_equal(y->shape.dim[1], 10);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* ids int64 [batch,2] -> Cast(int32) -> Gather(table [10,4]) -> Flatten -> MatMul; mask
 * int64 [batch,4] -> Cast(float) -> Mul(x) -> MatMul: the ids get [0, 10) through the
 * Cast, the mask [0, 2). */
static const char *write_int_model(void) {
    static const char *path = TMP "/ints.onnx";
    mkdir(TMP, 0755);
    mb *b = mb_new(17);
    int64_t td[2] = {10, 4}, w1d[2] = {8, 3}, w2d[2] = {4, 3};
    float table[40], w1[24], w2[12];
    for (int i = 0; i < 40; i++)
        table[i] = 0.01f * (float)(i % 7) - 0.02f;
    for (int i = 0; i < 24; i++)
        w1[i] = 0.05f * (float)(i % 5) - 0.1f;
    for (int i = 0; i < 12; i++)
        w2[i] = 0.03f * (float)(i % 4) - 0.04f;
    mb_init_f32(b, "table", 2, td, table);
    mb_init_f32(b, "w1", 2, w1d, w1);
    mb_init_f32(b, "w2", 2, w2d, w2);
    int64_t idd[2] = {-1, 2}, md[2] = {-1, 4};
    const char *syms[2] = {"batch", NULL};
    mb_input(b, "ids", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, idd, syms);
    mb_input(b, "mask", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, md, syms);
    mb_input(b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, md, syms);
    mb_attr_int(b, mb_node(b, "Cast", "cast_ids", "ids", "ids32"), "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT32);
    mb_node(b, "Gather", "emb", "table,ids32", "e");
    mb_attr_int(b, mb_node(b, "Flatten", "flat", "e", "ef"), "axis", 1);
    mb_node(b, "MatMul", "mm1", "ef,w1", "o1");
    mb_attr_int(b, mb_node(b, "Cast", "cast_mask", "mask", "mf"), "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    mb_node(b, "Mul", "masked", "x,mf", "xm");
    mb_node(b, "MatMul", "mm2", "xm,w2", "o2");
    mb_node(b, "Add", "sum", "o1,o2", "logits");
    mb_output(b, "logits", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    assert_int_equal(mb_write(b, path), 0);
    mb_free(b);
    return path;
}

static void test_int_ranges(void **state) {
    (void)state;
    ot_model *m = test_model("%s", write_int_model());
    ot_dataset d = synth(m, OT_LOSS_CROSS_ENTROPY, 6, 3, 6);
    assert_int_equal(d.n_arrays, 4);
    const ot_data_array *ids = ot_dataset_find(&d, "ids"), *mask = ot_dataset_find(&d, "mask");
    expect_ints_in(ids->t, 0, 10, 5);
    assert_non_null(strstr(ids->path, "'table'"));
    expect_ints_in(mask->t, 0, 2, 2);
    assert_non_null(strstr(mask->path, "[0, 2)"));
    expect_ints_in(ot_dataset_find(&d, OT_DATA_LABELS)->t, 0, 3, 3);
    /* the data is what a session accepts: one step runs on it */
    ot_train_options o;
    ot_train_options_default(&o);
    o.whole_batch = true;
    ot_train_session *s = NULL;
    ot_error err = {0};
    if (ot_train_session_new(m, &o, &d, true, &s, &err)) fail_msg("session on synthetic data: %s", err.msg);
    ot_step_results r = {0};
    if (ot_train_step_results(s, &d, &r, &err)) fail_msg("step on synthetic data: %s", err.msg);
    assert_true(isfinite(r.loss) && r.loss > 0);
    ot_step_results_free(&r);
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

static void test_zero_samples_refused(void **state) {
    (void)state;
    ot_model *m = test_model(S "mlp.onnx");
    ot_train_options o;
    ot_train_options_default(&o);
    o.plan_only = true;
    o.batch_size = 2;
    ot_train_session *s = NULL;
    ot_error err = {0};
    assert_int_equal(ot_train_session_new(m, &o, NULL, true, &s, &err), OT_OK);
    ot_dataset d = {0};
    assert_int_equal(ot_train_synthetic_data(s, 0, 0, &d, &err), OT_E_USAGE);
    assert_int_equal(d.n_arrays, 0);
    ot_train_session_free(s);
    ot_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tinygpt_ids_and_labels),
        cmocka_unit_test(test_seeded_normal),
        cmocka_unit_test(test_mse_targets),
        cmocka_unit_test(test_int_ranges),
        cmocka_unit_test(test_zero_samples_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
