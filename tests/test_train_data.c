/* test_train_data.c — unit tests of the training loop's helpers: deterministic
 * shuffling and batching (data.c), label checks, safe file names for dumped
 * gradients and the JSON report (report.c); the progress display is test_progress.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/data.h"
#include "train/progress.h"
#include "train/report.h"

static void test_shuffle_is_a_deterministic_permutation(void **state) {
    (void)state;
    enum { N = 1000 };
    int64_t a[N], b[N], c[N];
    ot_shuffle_perm(a, N, 42, 0);
    ot_shuffle_perm(b, N, 42, 0);
    ot_shuffle_perm(c, N, 42, 1);
    assert_memory_equal(a, b, sizeof a);
    assert_true(memcmp(a, c, sizeof a) != 0); /* another epoch, another order */
    bool seen[N] = {false};
    int fixed = 0;
    for (int i = 0; i < N; i++) {
        assert_true(a[i] >= 0 && a[i] < N);
        assert_false(seen[a[i]]);
        seen[a[i]] = true;
        fixed += a[i] == i;
    }
    assert_true(fixed < 20); /* a real shuffle leaves about one element in place */
    ot_shuffle_perm(b, N, 43, 0);
    assert_true(memcmp(a, b, sizeof a) != 0);
}

static void test_batcher_drops_partial_batch(void **state) {
    (void)state;
    ot_batcher b;
    ot_error err = {0};
    assert_int_equal(ot_batcher_init(&b, 10, 4, false, true, 0, &err), OT_OK);
    assert_int_equal(ot_batcher_per_epoch(&b), 2); /* drop_last: samples 8 and 9 are dropped */
    int64_t e, n = 0;
    const int64_t *x = ot_batcher_batch(&b, 1, &e, &n);
    assert_int_equal(n, 4);
    assert_int_equal(e, 0);
    assert_int_equal(x[0], 4);
    assert_int_equal(x[3], 7);
    x = ot_batcher_batch(&b, 2, &e, NULL); /* first batch of epoch 1 */
    assert_int_equal(e, 1);
    assert_int_equal(x[0], 0);
    ot_batcher_free(&b);

    assert_int_equal(ot_batcher_init(&b, 10, 5, true, true, 7, &err), OT_OK);
    int64_t seen[10] = {0};
    for (int k = 0; k < 2; k++) {
        x = ot_batcher_batch(&b, k, &e, NULL);
        for (int i = 0; i < 5; i++) seen[x[i]]++;
    }
    for (int i = 0; i < 10; i++) assert_int_equal(seen[i], 1); /* an epoch visits each sample once */
    ot_batcher_free(&b);

    assert_int_equal(ot_batcher_init(&b, 3, 4, false, true, 0, &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "3 samples"));
}

/* The default, as PyTorch's DataLoader: the last partial batch is kept, so an epoch
 * of 10 samples in batches of 4 is 4, 4 and 2, and every sample is visited. */
static void test_batcher_keeps_partial_batch(void **state) {
    (void)state;
    ot_batcher b;
    ot_error err = {0};
    assert_int_equal(ot_batches_per_epoch(10, 4, false), 3);
    assert_int_equal(ot_batches_per_epoch(10, 4, true), 2);
    assert_int_equal(ot_batches_per_epoch(8, 4, false), 2);
    assert_int_equal(ot_batches_per_epoch(3, 4, false), 0);
    assert_int_equal(ot_batcher_init(&b, 10, 4, true, false, 3, &err), OT_OK);
    assert_int_equal(ot_batcher_per_epoch(&b), 3);
    for (int ep = 0; ep < 2; ep++) {
        int64_t seen[10] = {0}, e = -1, n = 0;
        for (int k = 0; k < 3; k++) {
            const int64_t *x = ot_batcher_batch(&b, ep * 3 + k, &e, &n);
            assert_int_equal(e, ep);
            assert_int_equal(n, k < 2 ? 4 : 2);
            for (int i = 0; i < n; i++) seen[x[i]]++;
        }
        for (int i = 0; i < 10; i++) assert_int_equal(seen[i], 1);
    }
    ot_batcher_free(&b);
}

static void test_gather_rows(void **state) {
    (void)state;
    int64_t d[2] = {4, 3};
    ot_shape s = ot_shape_make(2, d);
    ot_tensor *t = ot_tensor_new(OT_F32, &s);
    for (int i = 0; i < 12; i++) ((float *)t->data)[i] = (float)i;
    int64_t idx[2] = {3, 1};
    ot_tensor *o = NULL;
    ot_error err = {0};
    assert_int_equal(ot_data_gather_new(t, idx, 2, &o, &err), OT_OK);
    assert_int_equal(o->shape.dim[0], 2);
    const float want[6] = {9, 10, 11, 3, 4, 5};
    assert_memory_equal(o->data, want, sizeof want);
    ot_tensor_free(o);
    ot_tensor_free(t);
}

static void test_dataset_and_labels(void **state) {
    (void)state;
    ot_dataset ds = {0};
    ot_error err = {0};
    int64_t n = 4, n3 = 3;
    ot_shape s4 = ot_shape_make(1, &n), s3 = ot_shape_make(1, &n3);
    ot_tensor *l = ot_tensor_new(OT_I64, &s4);
    int64_t *y = l->data;
    y[0] = 0, y[1] = 2, y[2] = -100, y[3] = 1;
    assert_int_equal(ot_dataset_add(&ds, "y", "y.npy", -1, l, &err), OT_OK);
    assert_int_equal(ot_dataset_add(&ds, "x", "x.npy", -1, ot_tensor_new(OT_F32, &s3), &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "x.npy"));
    assert_non_null(strstr(err.msg, "y.npy"));
    assert_int_equal(ot_data_check_labels(l, "y.npy", 3, false, 0, &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "index 2"));
    assert_non_null(strstr(err.msg, "-100"));
    assert_int_equal(ot_data_check_labels(l, "y.npy", 3, true, -100, &err), OT_OK);
    assert_int_equal(ot_data_check_labels(l, "y.npy", 2, true, -100, &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "index 1"));
    ot_tensor *f = ot_tensor_new(OT_F32, &s4);
    assert_int_equal(ot_data_check_labels(f, "f.npy", 3, false, 0, &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "float32"));
    ot_tensor_free(f);
    assert_non_null(ot_dataset_find(&ds, "y"));
    assert_null(ot_dataset_find(&ds, "x"));
    ot_dataset_free(&ds);
}

static void test_safe_file_stem(void **state) {
    (void)state;
    const char *used[4];
    char *a = ot_safe_file_stem("encoder/layer.0:weight", NULL, 0);
    assert_string_equal(a, "encoder_layer.0_weight");
    used[0] = a;
    char *b = ot_safe_file_stem("encoder:layer.0/weight", used, 1); /* same stem: made unique */
    assert_string_equal(b, "encoder_layer.0_weight_1");
    used[1] = b;
    char *c = ot_safe_file_stem("..", used, 2);
    assert_string_equal(c, "_.");
    char *d = ot_safe_file_stem("ENCODER_layer.0_weight", used, 2); /* case-insensitive clash */
    assert_string_equal(d, "ENCODER_layer.0_weight_2");
    free(a), free(b), free(c), free(d);
}

static void test_report_json(void **state) {
    (void)state;
    double loss[2] = {2.5, 1.5}, lr[2] = {0.1, 0.1}, secs[2] = {0.01, 0.02}, gn[2] = {1.0, NAN};
    ot_train_epoch_stats ep = {.epoch = 0, .step = 2, .val_loss = 1.25, .val_accuracy = 0.5, .val_samples = 8};
    ot_train_result r = {.n_steps = 2, .batch_size = 4, .accum = 1, .samples_per_epoch = 8, .loss = loss, .lr = lr,
                         .step_seconds = secs, .grad_norm = gn, .n_epochs = 1, .epochs = &ep};
    ot_optim_config oc;
    ot_optim_config_default(&oc, OT_OPTIM_ADAM);
    ot_report_info info = {.model = "m\"q.onnx", .loss = "cross-entropy", .n_params = 3, .n_param_elems = 10};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ot_report_write_json(f, &info, &oc, &r, NULL);
    fclose(f);
    assert_non_null(strstr(buf, "\"loss\": [2.5, 1.5]"));
    assert_non_null(strstr(buf, "\"grad_norm\": [1, null]")); /* NaN is not JSON */
    assert_non_null(strstr(buf, "\"m\\\"q.onnx\""));
    assert_non_null(strstr(buf, "\"kind\": \"adam\""));
    assert_non_null(strstr(buf, "\"val_accuracy\": 0.5"));
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shuffle_is_a_deterministic_permutation),
        cmocka_unit_test(test_batcher_drops_partial_batch),
        cmocka_unit_test(test_batcher_keeps_partial_batch),
        cmocka_unit_test(test_gather_rows),
        cmocka_unit_test(test_dataset_and_labels),
        cmocka_unit_test(test_safe_file_stem),
        cmocka_unit_test(test_report_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
