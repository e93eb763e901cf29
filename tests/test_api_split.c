/* test_api_split.c — the public API's step in two calls (onnxtrain_backward,
 * onnxtrain_optimizer_step, onnxtrain_zero_grad, the learning rate; api/split.c and
 * train/train_split.c) on samples/mlp.onnx: one backward and one update give bitwise
 * the loss and weights of onnxtrain_train_step, for SGD and Adam; two backward calls
 * sum their gradients (SGD: twice the update of one) until zero_grad; the rate set is
 * the one used; mixing the two kinds of step, an update before any gradient, a bad
 * rate and options.split_step with accum are refused with a message. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "include/onnxtrain.h"

#define MLP OT_SOURCE_DIR "/samples/mlp.onnx"
#define B 8

static float xs[2 * B * 64];
static int64_t ys[2 * B];
static int64_t xshape[2] = {B, 64}, yshape[1] = {B};

static void make_data(void) {
    uint32_t r = 777;
    for (int i = 0; i < 2 * B * 64; i++) {
        r = r * 1664525u + 1013904223u;
        xs[i] = (float)((r >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int i = 0; i < 2 * B; i++) ys[i] = (i * 3) % 10;
}

/* Batch k (0 or 1) of B samples. */
static void batch(int k, onnxtrain_tensor *x, onnxtrain_tensor *y) {
    *x = (onnxtrain_tensor){"x", ONNXTRAIN_FLOAT32, 2, xshape, xs + k * B * 64, sizeof(float) * B * 64};
    *y = (onnxtrain_tensor){NULL, ONNXTRAIN_INT64, 1, yshape, ys + k * B, sizeof(int64_t) * B};
}

static onnxtrain_session *open_with(const char *optimizer, double lr, int split) {
    onnxtrain_options o;
    onnxtrain_options_init(&o);
    o.optimizer = optimizer;
    o.lr = lr;
    o.split_step = split;
    onnxtrain_session *s = NULL;
    onnxtrain_status st = onnxtrain_session_open(MLP, &o, &s);
    if (st) fprintf(stderr, "open: %s\n", onnxtrain_last_error());
    assert_int_equal(st, ONNXTRAIN_OK);
    return s;
}

static void read_bias(onnxtrain_session *s, float out[10]) {
    assert_int_equal(onnxtrain_param_read(s, "fc3.bias", out, 10 * sizeof(float)), ONNXTRAIN_OK);
}

static void expect_error(onnxtrain_status got, onnxtrain_status want, const char *needle) {
    if (got != want || !strstr(onnxtrain_last_error(), needle))
        fprintf(stderr, "status %d (want %d): %s (want '%s')\n", got, want, onnxtrain_last_error(), needle);
    assert_int_equal(got, want);
    assert_non_null(strstr(onnxtrain_last_error(), needle));
}

/* Three steps each way: whole steps against backward + update (+ zero_grad). */
static void test_two_calls_are_one_step(void **state) {
    (void)state;
    const char *opts[] = {"sgd", "adam", "adamw"};
    for (int k = 0; k < 3; k++) {
        onnxtrain_session *whole = open_with(opts[k], 0.05, 0), *split = open_with(opts[k], 0.05, 0);
        for (int step = 0; step < 3; step++) {
            onnxtrain_tensor x, y;
            batch(step % 2, &x, &y);
            double lw = 0, ls = 0, lr = 0;
            assert_int_equal(onnxtrain_train_step(whole, &x, 1, &y, &lw), ONNXTRAIN_OK);
            assert_int_equal(onnxtrain_learning_rate(split, &lr), ONNXTRAIN_OK);
            assert_true(lr == 0.05);
            assert_int_equal(onnxtrain_backward(split, &x, 1, &y, &ls), ONNXTRAIN_OK);
            assert_int_equal(onnxtrain_optimizer_step(split), ONNXTRAIN_OK);
            assert_int_equal(onnxtrain_zero_grad(split), ONNXTRAIN_OK);
            assert_memory_equal(&lw, &ls, sizeof lw);
        }
        float a[10], b[10];
        read_bias(whole, a);
        read_bias(split, b);
        assert_memory_equal(a, b, sizeof a);
        assert_int_equal(onnxtrain_step_count(split), 3);
        onnxtrain_session_free(whole);
        onnxtrain_session_free(split);
    }
}

/* SGD: two calls on one batch move the params twice as far as one call (sums of equal
 * gradients are exact doublings); after zero_grad a call starts a new sum. */
static void test_sums_and_reset(void **state) {
    (void)state;
    onnxtrain_tensor x, y;
    batch(0, &x, &y);
    float p0[10], p1[10], p2[10], p3[10];
    onnxtrain_session *one = open_with("sgd", 0.5, 1), *two = open_with("sgd", 0.5, 1);
    read_bias(one, p0);
    assert_int_equal(onnxtrain_backward(one, &x, 1, &y, NULL), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_optimizer_step(one), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_backward(two, &x, 1, &y, NULL), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_backward(two, &x, 1, &y, NULL), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_optimizer_step(two), ONNXTRAIN_OK);
    read_bias(one, p1);
    read_bias(two, p2);
    for (int i = 0; i < 10; i++) assert_float_equal(p2[i] - p0[i], 2.0f * (p1[i] - p0[i]), 1e-6);
    /* the rate set is the one used: lr 0 moves nothing */
    assert_int_equal(onnxtrain_set_learning_rate(one, 0.0), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_zero_grad(one), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_backward(one, &x, 1, &y, NULL), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_optimizer_step(one), ONNXTRAIN_OK);
    read_bias(one, p3);
    assert_memory_equal(p1, p3, sizeof p1);
    onnxtrain_session_free(one);
    onnxtrain_session_free(two);
}

static void test_refusals(void **state) {
    (void)state;
    onnxtrain_tensor x, y;
    batch(0, &x, &y);
    onnxtrain_session *s = open_with("sgd", 0.1, 0);
    expect_error(onnxtrain_optimizer_step(s), ONNXTRAIN_E_USAGE, "call onnxtrain_backward first");
    expect_error(onnxtrain_set_learning_rate(s, INFINITY), ONNXTRAIN_E_USAGE, "lr inf");
    expect_error(onnxtrain_set_learning_rate(s, -1), ONNXTRAIN_E_USAGE, "must be finite and >= 0");
    expect_error(onnxtrain_learning_rate(s, NULL), ONNXTRAIN_E_USAGE, "lr is NULL");
    assert_int_equal(onnxtrain_train_step(s, &x, 1, &y, NULL), ONNXTRAIN_OK);
    expect_error(onnxtrain_backward(s, &x, 1, &y, NULL), ONNXTRAIN_E_USAGE, "built for whole steps");
    onnxtrain_session_free(s);
    s = open_with("sgd", 0.1, 1);
    assert_int_equal(onnxtrain_eval(s, &x, 1, &y, &(double){0}, NULL), ONNXTRAIN_OK); /* builds it split */
    expect_error(onnxtrain_train_step(s, &x, 1, &y, NULL), ONNXTRAIN_E_USAGE, "use onnxtrain_optimizer_step");
    int64_t half[2] = {B / 2, 64};
    onnxtrain_tensor xh = x, yh = y;
    xh.shape = half, xh.nbytes /= 2, yh.shape = half, yh.rank = 1, yh.nbytes /= 2;
    expect_error(onnxtrain_backward(s, &xh, 1, &yh, NULL), ONNXTRAIN_E_DATA, "the session was built for");
    onnxtrain_session_free(s);
    onnxtrain_options o;
    onnxtrain_options_init(&o);
    o.split_step = 1;
    o.accum = 2;
    expect_error(onnxtrain_session_open(MLP, &o, &s), ONNXTRAIN_E_USAGE, "options.split_step");
    expect_error(onnxtrain_zero_grad(NULL), ONNXTRAIN_E_USAGE, "session is NULL");
}

int main(void) {
    make_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_calls_are_one_step),
        cmocka_unit_test(test_sums_and_reset),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
