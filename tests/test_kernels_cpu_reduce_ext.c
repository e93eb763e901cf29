/* test_kernels_cpu_reduce_ext.c — issue 26's reduction CPU kernels (cpu_reduce_ext.c)
 * against plain C references: every mode over one axis, two axes and all axes, with
 * and without keepdims, the axes as the opset-18 input; NaN, empty sets; ArgMax /
 * ArgMin (first and last of ties, NaN, int64 input, an empty axis refused); and
 * ReduceGrad at its edges: ties of Max split evenly, Prod with one and two zeros, L2
 * of a zero group. */
#include "test_kernels_cpu_util.h"

static const ot_op OPS[7] = {OT_OP_REDUCE_MAX, OT_OP_REDUCE_MIN, OT_OP_REDUCE_PROD,        OT_OP_REDUCE_L1,
                             OT_OP_REDUCE_L2,  OT_OP_REDUCE_LOG_SUM_EXP, OT_OP_REDUCE_SUM_SQUARE};

/* The reference over the elements x[base + j * step], j < n. */
static double ref(ot_op op, const float *x, int64_t base, int64_t step, int64_t n) {
    double acc = op == OT_OP_REDUCE_MAX ? -INFINITY : op == OT_OP_REDUCE_MIN ? INFINITY : op == OT_OP_REDUCE_PROD;
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++) m = fmax(m, x[base + j * step]);
    for (int64_t j = 0; j < n; j++) {
        double v = x[base + j * step];
        switch (op) {
        case OT_OP_REDUCE_MAX: acc = fmax(acc, v); break;
        case OT_OP_REDUCE_MIN: acc = fmin(acc, v); break;
        case OT_OP_REDUCE_PROD: acc *= v; break;
        case OT_OP_REDUCE_L1: acc += fabs(v); break;
        case OT_OP_REDUCE_LOG_SUM_EXP: acc += exp(v - m); break;
        default: acc += v * v; break;
        }
    }
    if (op == OT_OP_REDUCE_L2) return sqrt(acc);
    if (op == OT_OP_REDUCE_LOG_SUM_EXP) return m + log(acc);
    return acc;
}

/* x [3, 4, 5] over axis 1 (attribute, then input), keepdims 0; and over every axis. */
static void test_modes(void **state) {
    (void)state;
    float x[60], y[15];
    double want[15];
    tk_fill(x, 60, 3, -1.5f, 1.5f);
    int64_t ax[1] = {1};
    for (int o = 0; o < 7; o++)
        for (int form = 0; form < 2; form++) {
            ot_node n = tk_node(OPS[o], form ? 2 : 1, 1);
            if (!form) ot_node_set_attr_ints(&n, "axes", ax, 1);
            ot_node_set_attr_int(&n, "keepdims", 0);
            ot_tensor in[2] = {tk_t(OT_F32, x, 3, 3, 4, 5), tk_t(OT_I64, ax, 1, 1)}, out[1] = {tk_t(OT_F32, y, 2, 3, 5)};
            assert_int_equal(tk_run(&n, in, out), OT_OK);
            for (int a = 0; a < 3; a++)
                for (int c = 0; c < 5; c++) want[a * 5 + c] = ref(OPS[o], x, a * 20 + c, 5, 4);
            double err = tk_max_rel(y, want, 15);
            if (err > 2e-6) fail_msg("%s (form %d): max relative error %g", ot_op_name(OPS[o]), form, err);
            tk_node_free(&n);
            /* every axis */
            ot_node all = tk_node(OPS[o], 1, 1);
            float y1;
            ot_tensor o1[1] = {tk_t(OT_F32, &y1, 0)};
            assert_int_equal(tk_run(&all, in, o1), OT_OK);
            double w = ref(OPS[o], x, 0, 1, 60);
            assert_true(fabs(y1 - w) <= 2e-6 * fmax(1.0, fabs(w)));
            tk_node_free(&all);
        }
}

/* NaN propagates through Max / Min / LogSumExp; an empty set gives the identity. */
static void test_edges(void **state) {
    (void)state;
    float x[4] = {1.0f, NAN, 3.0f, -2.0f}, y;
    for (int o = 0; o < 7; o++) {
        ot_node n = tk_node(OPS[o], 1, 1);
        ot_tensor in[1] = {tk_t(OT_F32, x, 1, 4)}, out[1] = {tk_t(OT_F32, &y, 0)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        if (!isnan(y)) fail_msg("%s of a NaN: %g", ot_op_name(OPS[o]), (double)y);
        in[0] = tk_t(OT_F32, x, 1, 0);
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        float want[7] = {-INFINITY, INFINITY, 1.0f, 0.0f, 0.0f, -INFINITY, 0.0f};
        if (y != want[o]) fail_msg("%s of nothing: %g, want %g", ot_op_name(OPS[o]), (double)y, (double)want[o]);
        tk_node_free(&n);
    }
}

/* Max / Min on int64 and int32 (shape arithmetic), an empty set the dtype's extreme;
 * the other modes refuse integers. */
static void test_int(void **state) {
    (void)state;
    int64_t a[6] = {4, INT64_MIN, 7, -3, 9, INT64_MAX}, y[2];
    int32_t b[6] = {4, -8, 7, -3, 9, 2}, z[2];
    for (int mx = 0; mx < 2; mx++) {
        ot_node n = tk_node(mx ? OT_OP_REDUCE_MAX : OT_OP_REDUCE_MIN, 1, 1);
        int64_t ax[1] = {1};
        ot_node_set_attr_ints(&n, "axes", ax, 1);
        ot_tensor in[1] = {tk_t(OT_I64, a, 2, 2, 3)}, out[1] = {tk_t(OT_I64, y, 1, 2)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        assert_true(mx ? (y[0] == 7 && y[1] == INT64_MAX) : (y[0] == INT64_MIN && y[1] == -3));
        in[0] = tk_t(OT_I32, b, 2, 2, 3), out[0] = tk_t(OT_I32, z, 1, 2);
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        assert_true(mx ? (z[0] == 7 && z[1] == 9) : (z[0] == -8 && z[1] == -3));
        in[0] = tk_t(OT_I64, a, 2, 2, 0), out[0] = tk_t(OT_I64, y, 1, 2);
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        assert_true(y[0] == (mx ? INT64_MIN : INT64_MAX));
        tk_node_free(&n);
    }
    ot_node p = tk_node(OT_OP_REDUCE_PROD, 1, 1);
    ot_tensor in[1] = {tk_t(OT_I64, a, 1, 6)}, out[1] = {tk_t(OT_I64, y, 0)};
    assert_true(tk_run(&p, in, out) != OT_OK);
    tk_node_free(&p);
}

static void test_arg(void **state) {
    (void)state;
    /* [2, 4] along axis 1: ties, NaN */
    float x[8] = {1, 3, 3, 0, 2, NAN, 5, NAN};
    int64_t y[2];
    struct {
        ot_op op;
        int last;
        int64_t w0, w1;
    } c[4] = {{OT_OP_ARG_MAX, 0, 1, 1}, {OT_OP_ARG_MAX, 1, 2, 3}, {OT_OP_ARG_MIN, 0, 3, 1}, {OT_OP_ARG_MIN, 1, 3, 3}};
    for (int k = 0; k < 4; k++) {
        ot_node n = tk_node(c[k].op, 1, 1);
        ot_node_set_attr_int(&n, "axis", -1);
        ot_node_set_attr_int(&n, "select_last_index", c[k].last);
        ot_tensor in[1] = {tk_t(OT_F32, x, 2, 2, 4)}, out[1] = {tk_t(OT_I64, y, 2, 2, 1)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        if (y[0] != c[k].w0 || y[1] != c[k].w1)
            fail_msg("%s last %d: %lld %lld, want %lld %lld", ot_op_name(c[k].op), c[k].last, (long long)y[0],
                     (long long)y[1], (long long)c[k].w0, (long long)c[k].w1);
        tk_node_free(&n);
    }
    /* int64 input along axis 0 (CLIP's argmax over token ids) */
    int64_t ids[6] = {4, 9, 1, 7, 9, 0}, yi[3];
    ot_node n = tk_node(OT_OP_ARG_MAX, 1, 1);
    ot_node_set_attr_int(&n, "keepdims", 0);
    ot_tensor in[1] = {tk_t(OT_I64, ids, 2, 2, 3)}, out[1] = {tk_t(OT_I64, yi, 1, 3)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_true(yi[0] == 1 && yi[1] == 0 && yi[2] == 0);
    /* an empty axis has no index; an axis past the rank is refused */
    in[0] = tk_t(OT_I64, ids, 2, 0, 3);
    out[0] = tk_t(OT_I64, yi, 1, 3);
    assert_int_equal(tk_run(&n, in, out), OT_E_SHAPE);
    ot_node_set_attr_int(&n, "axis", 2);
    in[0] = tk_t(OT_I64, ids, 2, 2, 3);
    assert_int_equal(tk_run(&n, in, out), OT_E_MODEL);
    tk_node_free(&n);
}

/* ReduceGrad over axis 1 of [2, 3]: (dY, X, Y) -> dX. */
static void grad_of(const char *mode, const float *x, const float *y, float *dx) {
    float dy[2] = {1.5f, -2.0f};
    int64_t ax[1] = {1};
    ot_node n = tk_node(OT_OP_REDUCE_GRAD, 3, 1);
    ot_node_set_attr_ints(&n, "axes", ax, 1);
    ot_node_set_attr_int(&n, "keepdims", 0);
    ot_node_set_attr_string(&n, "mode", mode);
    ot_tensor in[3] = {tk_t(OT_F32, dy, 1, 2), tk_t(OT_F32, (void *)x, 2, 2, 3), tk_t(OT_F32, (void *)y, 1, 2)};
    ot_tensor out[1] = {tk_t(OT_F32, dx, 2, 2, 3)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    tk_node_free(&n);
}

static void test_grad_edges(void **state) {
    (void)state;
    float dx[6];
    /* Max with a tie in row 0 (split evenly, as torch.amax), a single winner in row 1 */
    float x[6] = {2, 5, 5, -1, 0, 4}, ymax[2] = {5, 4};
    grad_of("max", x, ymax, dx);
    float wmax[6] = {0, 0.75f, 0.75f, 0, 0, -2};
    for (int i = 0; i < 6; i++) assert_true(dx[i] == wmax[i]);
    /* Prod: one zero in row 0 (its gradient is the product of the others), two in row 1 */
    float xp[6] = {2, 0, 3, 0, 4, 0}, yp[2] = {0, 0};
    grad_of("prod", xp, yp, dx);
    float wp[6] = {0, 1.5f * 6, 0, 0, 0, 0};
    for (int i = 0; i < 6; i++) assert_true(dx[i] == wp[i]);
    /* Prod without zeros: dY * (Y / x) */
    float xq[6] = {2, 4, 0.5f, 1, 2, 3}, yq[2] = {4, 6};
    grad_of("prod", xq, yq, dx);
    float wq[6] = {1.5f * 2, 1.5f * 1, 1.5f * 8, -2.0f * 6, -2.0f * 3, -2.0f * 2};
    for (int i = 0; i < 6; i++) assert_true(dx[i] == wq[i]);
    /* L2 of an all-zero row gives 0, not NaN (PyTorch's masked rule) */
    float xl[6] = {0, 0, 0, 3, 4, 0}, yl[2] = {0, 5};
    grad_of("l2", xl, yl, dx);
    float wl[6] = {0, 0, 0, 3 * (-2.0f / 5), 4 * (-2.0f / 5), 0};
    for (int i = 0; i < 6; i++) assert_true(dx[i] == wl[i]);
    /* an unknown mode is refused */
    float dy[2] = {1, 1};
    ot_node n = tk_node(OT_OP_REDUCE_GRAD, 3, 1);
    ot_node_set_attr_string(&n, "mode", "median");
    ot_tensor in[3] = {tk_t(OT_F32, dy, 1, 2), tk_t(OT_F32, x, 2, 2, 3), tk_t(OT_F32, ymax, 1, 2)};
    ot_tensor out[1] = {tk_t(OT_F32, dx, 2, 2, 3)};
    assert_int_equal(tk_run(&n, in, out), OT_E_MODEL);
    tk_node_free(&n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_int),
        cmocka_unit_test(test_arg),
        cmocka_unit_test(test_grad_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
