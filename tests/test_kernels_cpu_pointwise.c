/* test_kernels_cpu_pointwise.c — issue 13's pointwise CPU kernels against plain C
 * references: comparisons and logic with broadcasting, IsNaN / IsInf and their
 * attributes, Abs .. Mish (double-precision formulas), Min / Max (variadic, NaN),
 * Mod (both fmod modes, zero divisors), and the backward kernels at their edges (ties
 * of MaxGrad / MinGrad, the kinks of HardSigmoidGrad and HardSwishGrad). */
#include "test_kernels_cpu_util.h"

/* ---- comparisons and logic --------------------------------------------------------- */

/* a [2, 3] against b [3]: out[i][j] = a[i][j] OP b[j]. */
static int ref_cmp(ot_op op, double a, double b) {
    switch (op) {
    case OT_OP_LESS: return a < b;
    case OT_OP_GREATER: return a > b;
    case OT_OP_LESS_OR_EQUAL: return a <= b;
    default: return a >= b;
    }
}

static void test_compare(void **state) {
    (void)state;
    float af[6] = {1, 2, NAN, -1, 5, 0}, bf[3] = {2, 2, 2};
    int64_t a64[6] = {1, 2, 3, INT64_MIN, 5, INT64_MAX}, b64[3] = {2, 2, 2};
    int32_t a32[6] = {1, 2, 3, -7, 5, 0}, b32[3] = {2, 2, 2};
    ot_op ops[4] = {OT_OP_LESS, OT_OP_GREATER, OT_OP_LESS_OR_EQUAL, OT_OP_GREATER_OR_EQUAL};
    for (int o = 0; o < 4; o++)
        for (int t = 0; t < 3; t++) {
            ot_node n = tk_node(ops[o], 2, 1);
            uint8_t y[6];
            ot_tensor in[2], out[1] = {tk_t(OT_BOOL, y, 2, 2, 3)};
            if (t == 0) in[0] = tk_t(OT_F32, af, 2, 2, 3), in[1] = tk_t(OT_F32, bf, 1, 3);
            else if (t == 1) in[0] = tk_t(OT_I64, a64, 2, 2, 3), in[1] = tk_t(OT_I64, b64, 1, 3);
            else in[0] = tk_t(OT_I32, a32, 2, 2, 3), in[1] = tk_t(OT_I32, b32, 1, 3);
            assert_int_equal(tk_run(&n, in, out), OT_OK);
            for (int i = 0; i < 6; i++) {
                int want = t == 0 ? ref_cmp(ops[o], af[i], bf[i % 3])
                           : t == 1 ? (ops[o] == OT_OP_LESS ? a64[i] < 2 : ops[o] == OT_OP_GREATER ? a64[i] > 2
                                       : ops[o] == OT_OP_LESS_OR_EQUAL ? a64[i] <= 2 : a64[i] >= 2)
                                    : ref_cmp(ops[o], a32[i], b32[i % 3]);
                if (y[i] != want) fail_msg("%s dtype %d at %d: %d, want %d", ot_op_name(ops[o]), t, i, y[i], want);
            }
            tk_node_free(&n);
        }
    /* mixed dtypes are refused */
    ot_node n = tk_node(OT_OP_LESS, 2, 1);
    uint8_t y[6];
    ot_tensor in[2] = {tk_t(OT_F32, af, 2, 2, 3), tk_t(OT_I64, b64, 1, 3)}, out[1] = {tk_t(OT_BOOL, y, 2, 2, 3)};
    ot_error e = {0};
    assert_int_not_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, &e), OT_OK);
}

static void test_logic(void **state) {
    (void)state;
    uint8_t a[8] = {0, 0, 1, 1, 0, 1, 0, 1}, b[2] = {0, 1}, y[8];
    ot_op ops[3] = {OT_OP_AND, OT_OP_OR, OT_OP_XOR};
    for (int o = 0; o < 3; o++) {
        ot_node n = tk_node(ops[o], 2, 1);
        ot_tensor in[2] = {tk_t(OT_BOOL, a, 2, 4, 2), tk_t(OT_BOOL, b, 1, 2)}, out[1] = {tk_t(OT_BOOL, y, 2, 4, 2)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        for (int i = 0; i < 8; i++) {
            int p = a[i], q = b[i % 2];
            int want = o == 0 ? p && q : o == 1 ? p || q : p != q;
            assert_int_equal(y[i], want);
        }
        tk_node_free(&n);
    }
    ot_node n = tk_node(OT_OP_NOT, 1, 1);
    ot_tensor in[1] = {tk_t(OT_BOOL, a, 1, 8)}, out[1] = {tk_t(OT_BOOL, y, 1, 8)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < 8; i++) assert_int_equal(y[i], !a[i]);
}

static void test_is_nan_inf(void **state) {
    (void)state;
    float x[6] = {1.0f, NAN, INFINITY, -INFINITY, -0.0f, 3.4e38f};
    uint8_t y[6];
    ot_tensor in[1] = {tk_t(OT_F32, x, 1, 6)}, out[1] = {tk_t(OT_BOOL, y, 1, 6)};
    ot_node n = tk_node(OT_OP_IS_NAN, 1, 1);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < 6; i++) assert_int_equal(y[i], i == 1);
    for (int neg = 0; neg < 2; neg++)
        for (int pos = 0; pos < 2; pos++) {
            ot_node m = tk_node(OT_OP_IS_INF, 1, 1);
            ot_node_set_attr_int(&m, "detect_negative", neg);
            ot_node_set_attr_int(&m, "detect_positive", pos);
            assert_int_equal(tk_run(&m, in, out), OT_OK);
            for (int i = 0; i < 6; i++) assert_int_equal(y[i], (i == 2 && pos) || (i == 3 && neg));
            tk_node_free(&m);
        }
    /* float64, as PyTorch 1.13 exports torch.isinf (Cast to double first) */
    double xd[4] = {1e300, NAN, INFINITY, -INFINITY};
    ot_tensor din[1] = {tk_t(OT_F64, xd, 1, 4)}, dout[1] = {tk_t(OT_BOOL, y, 1, 4)};
    ot_node m = tk_node(OT_OP_IS_INF, 1, 1);
    assert_int_equal(tk_run(&m, din, dout), OT_OK);
    assert_true(!y[0] && !y[1] && y[2] && y[3]);
    assert_int_equal(tk_run(&n, din, dout), OT_OK);
    assert_true(!y[0] && y[1] && !y[2] && !y[3]);
}

/* ---- unary maths --------------------------------------------------------------------- */

static double ref_unary(ot_op op, double x) {
    switch (op) {
    case OT_OP_ABS: return fabs(x);
    case OT_OP_SIN: return sin(x);
    case OT_OP_COS: return cos(x);
    case OT_OP_HARD_SIGMOID: return fmax(0.0, fmin(1.0, 0.3 * x + 0.4));
    case OT_OP_HARD_SWISH: return x * fmax(0.0, fmin(1.0, x / 6.0 + 0.5));
    case OT_OP_SOFTPLUS: return log1p(exp(x));
    default: return x * tanh(log1p(exp(x)));
    }
}

static void test_unary_math(void **state) {
    (void)state;
    enum { N = 203 };
    float x[N], y[N];
    double want[N];
    tk_fill(x, N, 31, -12.0f, 12.0f);
    x[0] = 0.0f, x[1] = -3.0f, x[2] = 3.0f, x[3] = 90.0f, x[4] = -90.0f;
    ot_op ops[7] = {OT_OP_ABS, OT_OP_SIN, OT_OP_COS, OT_OP_HARD_SIGMOID, OT_OP_HARD_SWISH, OT_OP_SOFTPLUS, OT_OP_MISH};
    for (int o = 0; o < 7; o++) {
        ot_node n = tk_node(ops[o], 1, 1);
        if (ops[o] == OT_OP_HARD_SIGMOID) {
            ot_node_set_attr_float(&n, "alpha", 0.3f);
            ot_node_set_attr_float(&n, "beta", 0.4f);
        }
        ot_tensor in[1] = {tk_t(OT_F32, x, 1, N)}, out[1] = {tk_t(OT_F32, y, 1, N)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        for (int i = 0; i < N; i++) want[i] = ref_unary(ops[o], x[i]);
        double err = tk_max_rel(y, want, N);
        if (err > 2e-6) fail_msg("%s: max relative error %g", ot_op_name(ops[o]), err);
        tk_node_free(&n);
    }
    /* Abs on integers wraps at the minimum, as ONNX Runtime */
    int64_t a64[3] = {-5, INT64_MIN, 7}, y64[3];
    int32_t a32[3] = {-5, INT32_MIN, 7}, y32[3];
    ot_node n = tk_node(OT_OP_ABS, 1, 1);
    ot_tensor in[1] = {tk_t(OT_I64, a64, 1, 3)}, out[1] = {tk_t(OT_I64, y64, 1, 3)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_true(y64[0] == 5 && y64[1] == INT64_MIN && y64[2] == 7);
    in[0] = tk_t(OT_I32, a32, 1, 3), out[0] = tk_t(OT_I32, y32, 1, 3);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_true(y32[0] == 5 && y32[1] == INT32_MIN && y32[2] == 7);
}

/* ---- Min, Max ---------------------------------------------------------------------------- */

static void test_min_max(void **state) {
    (void)state;
    float a[6] = {1, 5, NAN, -2, 0, 4}, b[3] = {3, 3, 3}, c[1] = {2}, y[6];
    for (int mx = 0; mx < 2; mx++) {
        ot_node n = tk_node(mx ? OT_OP_MAX : OT_OP_MIN, 3, 1);
        ot_tensor in[3] = {tk_t(OT_F32, a, 2, 2, 3), tk_t(OT_F32, b, 1, 3), tk_t(OT_F32, c, 0)};
        ot_tensor out[1] = {tk_t(OT_F32, y, 2, 2, 3)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        for (int i = 0; i < 6; i++) {
            double v = a[i], w = mx ? fmax(fmax(v, 3), 2) : fmin(fmin(v, 3), 2);
            if (isnan(v)) assert_true(isnan(y[i])); /* NaN propagates */
            else assert_true(y[i] == (float)w);
        }
        tk_node_free(&n);
    }
    int64_t i0[4] = {1, -9, 7, INT64_MIN}, i1[4] = {2, -10, 7, 0}, iy[4];
    ot_node n = tk_node(OT_OP_MAX, 2, 1);
    ot_tensor in[2] = {tk_t(OT_I64, i0, 1, 4), tk_t(OT_I64, i1, 1, 4)}, out[1] = {tk_t(OT_I64, iy, 1, 4)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_true(iy[0] == 2 && iy[1] == -9 && iy[2] == 7 && iy[3] == 0);
    ot_node one = tk_node(OT_OP_MIN, 1, 1); /* one input: a copy */
    assert_int_equal(tk_run(&one, in, out), OT_OK);
    assert_memory_equal(iy, i0, sizeof i0);
}

/* ---- Mod ------------------------------------------------------------------------------------ */

/* Python's % (the divisor's sign) in plain arithmetic. */
static int64_t py_mod(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return a - q * b;
}

static void test_mod(void **state) {
    (void)state;
    int64_t a[8] = {7, -7, 7, -7, 0, 13, -13, INT64_MIN}, b[8] = {3, 3, -3, -3, 5, 1, 4, -1}, y[8];
    for (int fm = 0; fm < 2; fm++) {
        ot_node n = tk_node(OT_OP_MOD, 2, 1);
        ot_node_set_attr_int(&n, "fmod", fm);
        ot_tensor in[2] = {tk_t(OT_I64, a, 1, 8), tk_t(OT_I64, b, 1, 8)}, out[1] = {tk_t(OT_I64, y, 1, 8)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        for (int i = 0; i < 7; i++) {
            int64_t want = fm ? a[i] % b[i] : py_mod(a[i], b[i]);
            if (y[i] != want) fail_msg("Mod fmod=%d: %lld %% %lld = %lld, want %lld", fm, (long long)a[i],
                                       (long long)b[i], (long long)y[i], (long long)want);
        }
        assert_true(y[7] == 0); /* MIN % -1 */
        int64_t z[8] = {1, 1, 1, 0, 1, 1, 1, 1};
        in[1] = tk_t(OT_I64, z, 1, 8);
        ot_error e = {0};
        assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, &e), OT_E_DATA);
        tk_node_free(&n);
    }
    float fa[6] = {5.5f, -5.5f, 5.5f, -5.5f, 1e10f, 0.25f}, fb[2] = {2.0f, -1.5f}, fy[6];
    ot_node n = tk_node(OT_OP_MOD, 2, 1);
    ot_node_set_attr_int(&n, "fmod", 1);
    ot_tensor in[2] = {tk_t(OT_F32, fa, 2, 3, 2), tk_t(OT_F32, fb, 1, 2)}, out[1] = {tk_t(OT_F32, fy, 2, 3, 2)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < 6; i++) assert_true(fy[i] == (float)fmod(fa[i], fb[i % 2]));
    tk_node_free(&n);
    ot_node f0 = tk_node(OT_OP_MOD, 2, 1); /* float with fmod = 0: refused, as the spec says */
    ot_error e = {0};
    assert_int_equal(tk_run_ex(&f0, in, out, 1, 0, 0, 0, &e), OT_E_MODEL);
}

/* ---- backward kernels ------------------------------------------------------------------------ */

static void test_act_grads(void **state) {
    (void)state;
    float x[9] = {-4.0f, -3.0f, -2.9f, -0.0f, 0.0f, 1.0f, 2.9f, 3.0f, 4.0f}, dy[9], dx[9];
    for (int i = 0; i < 9; i++) dy[i] = 2.0f;
    ot_tensor in[2] = {tk_t(OT_F32, dy, 1, 9), tk_t(OT_F32, x, 1, 9)}, out[1] = {tk_t(OT_F32, dx, 1, 9)};
    ot_node a = tk_node(OT_OP_ABS_GRAD, 2, 1);
    assert_int_equal(tk_run(&a, in, out), OT_OK);
    for (int i = 0; i < 9; i++) assert_true(dx[i] == (x[i] > 0 ? 2.0f : x[i] < 0 ? -2.0f : 0.0f));
    /* PyTorch's hardswish_backward: 0 below -3, dY * (x / 3 + 0.5) on [-3, 3], dY above */
    ot_node s = tk_node(OT_OP_HARD_SWISH_GRAD, 2, 1);
    assert_int_equal(tk_run(&s, in, out), OT_OK);
    for (int i = 0; i < 9; i++) {
        float want = x[i] < -3.0f ? 0.0f : x[i] <= 3.0f ? 2.0f * (x[i] / 3.0f + 0.5f) : 2.0f;
        assert_true(dx[i] == want);
    }
    /* HardSigmoid (defaults 0.2, 0.5): dY * alpha strictly inside (-2.5, 2.5) */
    ot_node h = tk_node(OT_OP_HARD_SIGMOID_GRAD, 2, 1);
    float hx[5] = {-2.5f, -2.4f, 0.0f, 2.4f, 2.5f};
    in[1] = tk_t(OT_F32, hx, 1, 5), in[0] = tk_t(OT_F32, dy, 1, 5), out[0] = tk_t(OT_F32, dx, 1, 5);
    assert_int_equal(tk_run(&h, in, out), OT_OK);
    for (int i = 0; i < 5; i++) assert_true(dx[i] == (i == 0 || i == 4 ? 0.0f : 2.0f * 0.2f));
    /* MishGrad against the derivative in double */
    enum { N = 101 };
    float mx[N], mdy[N], mdx[N];
    double want[N];
    tk_fill(mx, N, 5, -8.0f, 8.0f);
    tk_fill(mdy, N, 6, -1.0f, 1.0f);
    for (int i = 0; i < N; i++) {
        double v = mx[i], sp = log1p(exp(v)), t = tanh(sp), sg = 1.0 / (1.0 + exp(-v));
        want[i] = mdy[i] * (t + v * sg * (1.0 - t * t));
    }
    ot_node m = tk_node(OT_OP_MISH_GRAD, 2, 1);
    ot_tensor min[2] = {tk_t(OT_F32, mdy, 1, N), tk_t(OT_F32, mx, 1, N)}, mout[1] = {tk_t(OT_F32, mdx, 1, N)};
    assert_int_equal(tk_run(&m, min, mout), OT_OK);
    assert_true(tk_max_rel(mdx, want, N) < 1e-5);
    tk_node_free(&a), tk_node_free(&s), tk_node_free(&h), tk_node_free(&m);
}

/* MaxGrad / MinGrad: ties split dY evenly (torch.maximum's backward for two inputs,
 * the same rule for three); NaN in the output gives every input dY. */
static void test_minmax_grad(void **state) {
    (void)state;
    float x0[5] = {1, 2, 3, NAN, 0.0f}, x1[5] = {1, 1, 4, 1, -0.0f}, x2[1] = {1}, dy[5] = {4, 4, 4, 4, 4}, dx[5];
    float y[5] = {1, 2, 4, NAN, 1}; /* Max of the three (x2 broadcast) */
    const float want[3][5] = {{4.0f / 3.0f, 4, 0, 4, 0}, {4.0f / 3.0f, 0, 4, 4, 0}, {4.0f / 3.0f, 0, 0, 4, 4}};
    for (int k = 0; k < 3; k++) {
        ot_node n = tk_node(OT_OP_MAX_GRAD, 5, 1);
        ot_node_set_attr_int(&n, "index", k);
        ot_tensor in[5] = {tk_t(OT_F32, dy, 1, 5), tk_t(OT_F32, y, 1, 5), tk_t(OT_F32, x0, 1, 5),
                           tk_t(OT_F32, x1, 1, 5), tk_t(OT_F32, x2, 0)};
        ot_tensor out[1] = {tk_t(OT_F32, dx, 1, 5)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        for (int i = 0; i < 5; i++)
            if (dx[i] != want[k][i]) fail_msg("MaxGrad input %d at %d: %g, want %g", k, i, dx[i], want[k][i]);
        tk_node_free(&n);
    }
    /* two inputs, Min: a tie halves, +0 and -0 tie */
    float ym[5] = {1, 1, 3, NAN, -0.0f};
    const float wmin[5] = {2, 0, 4, 4, 2};
    ot_node n = tk_node(OT_OP_MIN_GRAD, 4, 1);
    ot_tensor in[4] = {tk_t(OT_F32, dy, 1, 5), tk_t(OT_F32, ym, 1, 5), tk_t(OT_F32, x0, 1, 5), tk_t(OT_F32, x1, 1, 5)};
    ot_tensor out[1] = {tk_t(OT_F32, dx, 1, 5)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < 5; i++) assert_true(dx[i] == wmin[i]);
    ot_node_set_attr_int(&n, "index", 2); /* not an input */
    ot_error e = {0};
    assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, &e), OT_E_MODEL);
    tk_node_free(&n);
}

static void test_mod_grad(void **state) {
    (void)state;
    float dy[6] = {1, 2, 3, 4, 5, 6}, a[6] = {5.5f, -5.5f, 3.0f, -3.0f, 0.5f, 7.9f}, b[2] = {2.0f, -2.0f}, dx[6];
    ot_node n = tk_node(OT_OP_MOD_GRAD, 3, 1);
    ot_tensor in[3] = {tk_t(OT_F32, dy, 2, 3, 2), tk_t(OT_F32, a, 2, 3, 2), tk_t(OT_F32, b, 1, 2)};
    ot_tensor out[1] = {tk_t(OT_F32, dx, 2, 3, 2)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < 6; i++) assert_true(dx[i] == -dy[i] * truncf(a[i] / b[i % 2]));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare),    cmocka_unit_test(test_logic),      cmocka_unit_test(test_is_nan_inf),
        cmocka_unit_test(test_unary_math), cmocka_unit_test(test_min_max),    cmocka_unit_test(test_mod),
        cmocka_unit_test(test_act_grads),  cmocka_unit_test(test_minmax_grad), cmocka_unit_test(test_mod_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
