/* test_kernels_cpu_activation.c — issue 26's pointwise CPU kernels (cpu_activation.c)
 * against plain C references in double: Elu, Selu, Celu, ThresholdedRelu, Softsign
 * (their attributes and defaults), Sign (float with NaN and +-0, integers), Floor,
 * Ceil, Round (half to even), PRelu with a broadcast slope, and the backward kernels
 * EluGrad, ThresholdedReluGrad, SoftsignGrad and PReluGrad (both outputs). Celu with
 * alpha = 0 is refused. */
#include "test_kernels_cpu_util.h"

/* The ONNX formulas, in double. */
static double ref_unary(ot_op op, double x, double alpha) {
    switch (op) {
    case OT_OP_ELU: return x < 0 ? alpha * (exp(x) - 1) : x;
    case OT_OP_SELU: return x <= 0 ? 1.0507009873554805 * (1.6732632423543772 * exp(x) - 1.6732632423543772)
                                   : 1.0507009873554805 * x;
    case OT_OP_CELU: return fmax(0.0, x) + fmin(0.0, alpha * (exp(x / alpha) - 1));
    case OT_OP_THRESHOLDED_RELU: return x > alpha ? x : 0.0;
    default: return x / (1 + fabs(x));
    }
}

static void test_unary(void **state) {
    (void)state;
    enum { N = 203 };
    float x[N], y[N];
    double want[N];
    tk_fill(x, N, 37, -9.0f, 9.0f);
    x[0] = 0.0f, x[1] = -0.0f, x[2] = 1e-6f, x[3] = -1e-6f, x[4] = 90.0f, x[5] = -90.0f;
    ot_op ops[5] = {OT_OP_ELU, OT_OP_SELU, OT_OP_CELU, OT_OP_THRESHOLDED_RELU, OT_OP_SOFTSIGN};
    for (int o = 0; o < 5; o++)
        for (int a = 0; a < 2; a++) {
            if (ops[o] == OT_OP_SELU && a) continue; /* Selu's own attributes: below */
            ot_node n = tk_node(ops[o], 1, 1);
            double alpha = 1.0;
            if (a) ot_node_set_attr_float(&n, "alpha", 0.625f), alpha = 0.625;
            ot_tensor in[1] = {tk_t(OT_F32, x, 1, N)}, out[1] = {tk_t(OT_F32, y, 1, N)};
            assert_int_equal(tk_run(&n, in, out), OT_OK);
            for (int i = 0; i < N; i++) want[i] = ref_unary(ops[o], x[i], alpha);
            double err = tk_max_rel(y, want, N);
            if (err > 2e-6) fail_msg("%s (alpha %g): max relative error %g", ot_op_name(ops[o]), alpha, err);
            tk_node_free(&n);
        }
    /* Selu with its attributes given */
    ot_node s = tk_node(OT_OP_SELU, 1, 1);
    ot_node_set_attr_float(&s, "alpha", 2.0f);
    ot_node_set_attr_float(&s, "gamma", 3.0f);
    ot_tensor in[1] = {tk_t(OT_F32, x, 1, N)}, out[1] = {tk_t(OT_F32, y, 1, N)};
    assert_int_equal(tk_run(&s, in, out), OT_OK);
    for (int i = 0; i < N; i++) want[i] = x[i] <= 0 ? 3.0 * 2.0 * expm1(x[i]) : 3.0 * x[i];
    assert_true(tk_max_rel(y, want, N) <= 2e-6);
    tk_node_free(&s);
    /* Celu's alpha = 0 divides by zero: refused, naming the attribute */
    ot_node c = tk_node(OT_OP_CELU, 1, 1);
    ot_node_set_attr_float(&c, "alpha", 0.0f);
    assert_int_equal(tk_run(&c, in, out), OT_E_MODEL);
    tk_node_free(&c);
}

/* Sign, Floor, Ceil, Round: exact, at the edges (halves, +-0, NaN, infinities). */
static void test_rounding(void **state) {
    (void)state;
    float x[12] = {-2.5f, -1.5f, -0.5f, -0.0f, 0.0f, 0.5f, 1.5f, 2.5f, 2.7f, NAN, INFINITY, -3.2f}, y[12];
    float want[4][12] = {
        {-1, -1, -1, 0, 0, 1, 1, 1, 1, NAN, 1, -1},
        {-3, -2, -1, -0.0f, 0, 0, 1, 2, 2, NAN, INFINITY, -4},
        {-2, -1, -0.0f, -0.0f, 0, 1, 2, 3, 3, NAN, INFINITY, -3},
        {-2, -2, -0.0f, -0.0f, 0, 0, 2, 2, 3, NAN, INFINITY, -3},
    };
    ot_op ops[4] = {OT_OP_SIGN, OT_OP_FLOOR, OT_OP_CEIL, OT_OP_ROUND};
    for (int o = 0; o < 4; o++) {
        ot_node n = tk_node(ops[o], 1, 1);
        ot_tensor in[1] = {tk_t(OT_F32, x, 1, 12)}, out[1] = {tk_t(OT_F32, y, 1, 12)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        for (int i = 0; i < 12; i++)
            if (!(y[i] == want[o][i] || (isnan(y[i]) && isnan(want[o][i]))))
                fail_msg("%s(%g) = %g, want %g", ot_op_name(ops[o]), (double)x[i], (double)y[i], (double)want[o][i]);
        tk_node_free(&n);
    }
    int64_t a64[4] = {-7, 0, 9, INT64_MIN}, y64[4];
    int32_t a32[4] = {-7, 0, 9, INT32_MIN}, y32[4];
    ot_node n = tk_node(OT_OP_SIGN, 1, 1);
    ot_tensor in[1] = {tk_t(OT_I64, a64, 1, 4)}, out[1] = {tk_t(OT_I64, y64, 1, 4)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_true(y64[0] == -1 && y64[1] == 0 && y64[2] == 1 && y64[3] == -1);
    in[0] = tk_t(OT_I32, a32, 1, 4), out[0] = tk_t(OT_I32, y32, 1, 4);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_true(y32[0] == -1 && y32[1] == 0 && y32[2] == 1 && y32[3] == -1);
    tk_node_free(&n);
}

/* PRelu of a [2, 3, 4] X with a [3, 1] slope, and PReluGrad's two outputs. */
static void test_prelu(void **state) {
    (void)state;
    float x[24], s[3] = {0.25f, -0.5f, 2.0f}, dy[24], y[24];
    tk_fill(x, 24, 5, -3, 3);
    tk_fill(dy, 24, 6, -1, 1);
    x[0] = 0.0f;
    ot_node n = tk_node(OT_OP_PRELU, 2, 1);
    ot_tensor in[2] = {tk_t(OT_F32, x, 3, 2, 3, 4), tk_t(OT_F32, s, 2, 3, 1)}, out[1] = {tk_t(OT_F32, y, 3, 2, 3, 4)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < 24; i++) {
        float sl = s[(i / 4) % 3];
        assert_true(y[i] == (x[i] > 0 ? x[i] : sl * x[i]));
    }
    tk_node_free(&n);
    for (int k = 0; k < 2; k++) {
        ot_node g = tk_node(OT_OP_PRELU_GRAD, 3, 1);
        ot_node_set_attr_int(&g, "index", k);
        ot_tensor gi[3] = {tk_t(OT_F32, dy, 3, 2, 3, 4), tk_t(OT_F32, x, 3, 2, 3, 4), tk_t(OT_F32, s, 2, 3, 1)};
        assert_int_equal(tk_run(&g, gi, out), OT_OK);
        for (int i = 0; i < 24; i++) {
            float sl = s[(i / 4) % 3];
            float w = k == 0 ? (x[i] > 0 ? dy[i] : sl * dy[i]) : (x[i] > 0 ? 0.0f : x[i] * dy[i]);
            assert_true(y[i] == w);
        }
        ot_node_set_attr_int(&g, "index", 2);
        assert_int_equal(tk_run(&g, gi, out), OT_E_MODEL);
        tk_node_free(&g);
    }
}

/* EluGrad (the elu family's derivative), ThresholdedReluGrad, SoftsignGrad. */
static void test_grads(void **state) {
    (void)state;
    enum { N = 101 };
    float x[N], dy[N], y[N];
    double want[N];
    tk_fill(x, N, 11, -6, 6);
    tk_fill(dy, N, 12, -2, 2);
    ot_op ops[3] = {OT_OP_ELU_GRAD, OT_OP_THRESHOLDED_RELU_GRAD, OT_OP_SOFTSIGN_GRAD};
    for (int o = 0; o < 3; o++) {
        ot_node n = tk_node(ops[o], 2, 1);
        ot_node_set_attr_float(&n, "alpha", 1.5f);
        ot_node_set_attr_float(&n, "scale", 1.25f);
        ot_node_set_attr_float(&n, "input_scale", 0.5f);
        ot_tensor in[2] = {tk_t(OT_F32, dy, 1, N), tk_t(OT_F32, x, 1, N)}, out[1] = {tk_t(OT_F32, y, 1, N)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        for (int i = 0; i < N; i++) {
            double v = x[i], g = dy[i], d = 1 + fabs(v);
            want[i] = o == 0 ? (v <= 0 ? g * 0.5 * 1.5 * 1.25 * exp(0.5 * v) : g * 1.25)
                      : o == 1 ? (v > 1.5 ? g : 0.0)
                               : g / (d * d);
        }
        double err = tk_max_rel(y, want, N);
        if (err > 2e-6) fail_msg("%s: max relative error %g", ot_op_name(ops[o]), err);
        tk_node_free(&n);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_prelu),
        cmocka_unit_test(test_grads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
