/* test_kernels_cpu_shape.c — CPU kernels that shape inference folds with: Shape,
 * Gather, Squeeze/Unsqueeze/Reshape/Identity, Concat, Split, Slice, Transpose, Cast,
 * Range, Constant(OfShape), Expand, Equal, Where, and int64/float arithmetic with
 * broadcasting checked against naive index loops. */
#include "test_kernels_cpu_util.h"

static void test_shape_op(void **state) {
    (void)state;
    float x[2 * 3 * 4 * 5] = {0};
    int64_t y[4] = {0};
    ot_node n = tk_node(OT_OP_SHAPE, 1, 1);
    ot_tensor in[1] = {tk_t(OT_F32, x, 4, 2, 3, 4, 5)};
    ot_tensor out[1] = {tk_t(OT_I64, y, 1, 4)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_int_equal(y[0], 2);
    assert_int_equal(y[3], 5);
    ot_node_set_attr_int(&n, "start", 1);
    ot_node_set_attr_int(&n, "end", -1);
    out[0] = tk_t(OT_I64, y, 1, 2);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_int_equal(y[0], 3);
    assert_int_equal(y[1], 4);
    /* Shape reads only the shape: an activation without data folds too */
    in[0].data = NULL;
    y[0] = 0;
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_int_equal(y[0], 3);
    tk_node_free(&n);
}

static void test_gather(void **state) {
    (void)state;
    /* data [3,4] int64 = 10*i + j; axis 1, indices [2] = {-1, 0} */
    int64_t d[12], idx[2] = {-1, 0}, y[6];
    for (int i = 0; i < 12; i++) d[i] = 10 * (i / 4) + i % 4;
    ot_node n = tk_node(OT_OP_GATHER, 2, 1);
    ot_node_set_attr_int(&n, "axis", 1);
    ot_tensor in[2] = {tk_t(OT_I64, d, 2, 3, 4), tk_t(OT_I64, idx, 1, 2)};
    ot_tensor out[1] = {tk_t(OT_I64, y, 2, 3, 2)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    int64_t want[6] = {3, 0, 13, 10, 23, 20};
    for (int i = 0; i < 6; i++) assert_int_equal(y[i], want[i]);
    /* float, axis 0, scalar index (PyTorch's shape[0]) */
    float f[12], fy[4];
    for (int i = 0; i < 12; i++) f[i] = (float)i * 0.5f;
    int64_t s = 2;
    ot_node m = tk_node(OT_OP_GATHER, 2, 1);
    ot_tensor in2[2] = {tk_t(OT_F32, f, 2, 3, 4), tk_t(OT_I64, &s, 0)};
    ot_tensor out2[1] = {tk_t(OT_F32, fy, 1, 4)};
    assert_int_equal(tk_run(&m, in2, out2), OT_OK);
    for (int j = 0; j < 4; j++) assert_true(fy[j] == f[8 + j]);
    /* out of range index is a data error naming the node */
    s = 3;
    ot_error e = {0};
    assert_int_equal(tk_run_ex(&m, in2, out2, 1, 0, 0, 0, &e), OT_E_DATA);
    assert_non_null(strstr(e.msg, "'k'"));
    tk_node_free(&n);
    tk_node_free(&m);
}

static void test_views(void **state) {
    (void)state;
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0};
    ot_op ops[] = {OT_OP_RESHAPE, OT_OP_UNSQUEEZE, OT_OP_SQUEEZE, OT_OP_IDENTITY, OT_OP_FLATTEN};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        memset(y, 0, sizeof y);
        ot_node n = tk_node(ops[k], 1, 1);
        ot_tensor in[1] = {tk_t(OT_F32, x, 2, 2, 3)};
        ot_tensor out[1] = {tk_t(OT_F32, y, 3, 3, 1, 2)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        assert_memory_equal(x, y, sizeof x);
        out[0] = tk_t(OT_F32, y, 2, 2, 2); /* element count differs */
        assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, NULL), OT_E_SHAPE);
    }
}

static void test_concat_split(void **state) {
    (void)state;
    int64_t a[4] = {1, 2, 3, 4}, b[2] = {5, 6}, y[6];
    ot_node n = tk_node(OT_OP_CONCAT, 2, 1);
    ot_node_set_attr_int(&n, "axis", -1);
    ot_tensor in[2] = {tk_t(OT_I64, a, 2, 2, 2), tk_t(OT_I64, b, 2, 2, 1)};
    ot_tensor out[1] = {tk_t(OT_I64, y, 2, 2, 3)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    int64_t want[6] = {1, 2, 5, 3, 4, 6};
    for (int i = 0; i < 6; i++) assert_int_equal(y[i], want[i]);
    /* Split back with explicit sizes */
    int64_t p[4], q[2], sizes[2] = {2, 1};
    ot_node s = tk_node(OT_OP_SPLIT, 1, 2);
    ot_node_set_attr_int(&s, "axis", 1);
    ot_node_set_attr_ints(&s, "split", sizes, 2);
    ot_tensor sin[1] = {tk_t(OT_I64, y, 2, 2, 3)};
    ot_tensor sout[2] = {tk_t(OT_I64, p, 2, 2, 2), tk_t(OT_I64, q, 2, 2, 1)};
    assert_int_equal(tk_run(&s, sin, sout), OT_OK);
    assert_memory_equal(p, a, sizeof a);
    assert_memory_equal(q, b, sizeof b);
    tk_node_free(&n);
    tk_node_free(&s);
}

static void test_slice(void **state) {
    (void)state;
    /* x [4,5] = 10*i + j; rows 3..0 step -2 (i = 3, 1), cols 1..end */
    float x[20], y[8];
    for (int i = 0; i < 20; i++) x[i] = (float)(10 * (i / 5) + i % 5);
    int64_t st[2] = {-1, 1}, en[2] = {INT64_MIN, INT64_MAX}, ax[2] = {0, 1}, sp[2] = {-2, 1};
    ot_node n = tk_node(OT_OP_SLICE, 5, 1);
    ot_tensor in[5] = {tk_t(OT_F32, x, 2, 4, 5), tk_t(OT_I64, st, 1, 2), tk_t(OT_I64, en, 1, 2),
                       tk_t(OT_I64, ax, 1, 2), tk_t(OT_I64, sp, 1, 2)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 2, 2, 4)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    float want[8] = {31, 32, 33, 34, 11, 12, 13, 14};
    for (int i = 0; i < 8; i++) assert_true(y[i] == want[i]);
    /* int32 starts/ends, no axes/steps: x[1:3, 0:5:1] and negative step on the last axis */
    int32_t s32[2] = {1, 4}, e32[2] = {3, -6};
    int32_t a32[2] = {0, 1}, p32[2] = {1, -3};
    float z[4];
    ot_tensor in2[5] = {tk_t(OT_F32, x, 2, 4, 5), tk_t(OT_I32, s32, 1, 2), tk_t(OT_I32, e32, 1, 2),
                        tk_t(OT_I32, a32, 1, 2), tk_t(OT_I32, p32, 1, 2)};
    ot_tensor out2[1] = {tk_t(OT_F32, z, 2, 2, 2)};
    assert_int_equal(tk_run(&n, in2, out2), OT_OK);
    float want2[4] = {14, 11, 24, 21};
    for (int i = 0; i < 4; i++) assert_true(z[i] == want2[i]);
    /* wrong output shape is reported */
    out2[0] = tk_t(OT_F32, z, 2, 2, 1);
    assert_int_equal(tk_run_ex(&n, in2, out2, 1, 0, 0, 0, NULL), OT_E_SHAPE);
}

static void test_transpose(void **state) {
    (void)state;
    float x[24], y[24];
    for (int i = 0; i < 24; i++) x[i] = (float)i;
    int64_t perm[3] = {2, 0, 1};
    ot_node n = tk_node(OT_OP_TRANSPOSE, 1, 1);
    ot_node_set_attr_ints(&n, "perm", perm, 3);
    ot_tensor in[1] = {tk_t(OT_F32, x, 3, 2, 3, 4)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 3, 4, 2, 3)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 3; c++) assert_true(y[(a * 2 + b) * 3 + c] == x[(b * 3 + c) * 4 + a]);
    /* default perm reverses; int64 */
    int64_t xi[6] = {1, 2, 3, 4, 5, 6}, yi[6];
    ot_node m = tk_node(OT_OP_TRANSPOSE, 1, 1);
    ot_tensor in2[1] = {tk_t(OT_I64, xi, 2, 2, 3)};
    ot_tensor out2[1] = {tk_t(OT_I64, yi, 2, 3, 2)};
    assert_int_equal(tk_run(&m, in2, out2), OT_OK);
    int64_t want[6] = {1, 4, 2, 5, 3, 6};
    for (int i = 0; i < 6; i++) assert_int_equal(yi[i], want[i]);
    tk_node_free(&n);
}

static void test_cast(void **state) {
    (void)state;
    float f[5] = {-2.7f, -0.5f, 0.0f, 1.5f, 3e9f};
    int64_t i64[5];
    int32_t i32[5];
    uint8_t b[5];
    uint16_t h[5];
    float back[5];
    ot_node n = tk_node(OT_OP_CAST, 1, 1);
    ot_tensor in[1] = {tk_t(OT_F32, f, 1, 5)};
    ot_tensor out[1] = {tk_t(OT_I64, i64, 1, 5)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    int64_t want[5] = {-2, 0, 0, 1, 3000000000LL};
    for (int i = 0; i < 5; i++) assert_int_equal(i64[i], want[i]);
    out[0] = tk_t(OT_BOOL, b, 1, 5);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    uint8_t wb[5] = {1, 1, 0, 1, 1};
    assert_memory_equal(b, wb, 5);
    /* int64 -> int32 -> float */
    in[0] = tk_t(OT_I64, i64, 1, 5);
    out[0] = tk_t(OT_I32, i32, 1, 5);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_int_equal(i32[0], -2);
    in[0] = tk_t(OT_I32, i32, 1, 5);
    out[0] = tk_t(OT_F32, back, 1, 5);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_true(back[3] == 1.0f);
    /* float16 round trip of representable values, and known bit patterns */
    float hv[5] = {1.0f, -2.0f, 0.5f, 65504.0f, 5.9604645e-08f};
    in[0] = tk_t(OT_F32, hv, 1, 5);
    out[0] = tk_t(OT_F16, h, 1, 5);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    uint16_t wh[5] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001};
    for (int i = 0; i < 5; i++) assert_int_equal(h[i], wh[i]);
    in[0] = tk_t(OT_F16, h, 1, 5);
    out[0] = tk_t(OT_F32, back, 1, 5);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < 5; i++) assert_true(back[i] == hv[i]);
    /* bool -> float */
    in[0] = tk_t(OT_BOOL, wb, 1, 5);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_true(back[2] == 0.0f && back[4] == 1.0f);
    /* strings are not supported, and the message names the node */
    in[0].dtype = OT_STRING;
    ot_error e = {0};
    assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, &e), OT_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "'k'"));
}

static void test_range_constants(void **state) {
    (void)state;
    int64_t s = 10, l = 1, d = -3, y[3];
    ot_node n = tk_node(OT_OP_RANGE, 3, 1);
    ot_tensor in[3] = {tk_t(OT_I64, &s, 0), tk_t(OT_I64, &l, 0), tk_t(OT_I64, &d, 0)};
    ot_tensor out[1] = {tk_t(OT_I64, y, 1, 3)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_int_equal(y[0], 10);
    assert_int_equal(y[2], 4);
    float fs = 0.5f, fl = 2.0f, fd = 0.5f, fy[3];
    ot_tensor fin[3] = {tk_t(OT_F32, &fs, 0), tk_t(OT_F32, &fl, 0), tk_t(OT_F32, &fd, 0)};
    ot_tensor fout[1] = {tk_t(OT_F32, fy, 1, 3)};
    assert_int_equal(tk_run(&n, fin, fout), OT_OK);
    assert_true(fy[0] == 0.5f && fy[2] == 1.5f);
    fout[0] = tk_t(OT_F32, fy, 1, 1);
    assert_int_equal(tk_run_ex(&n, fin, fout, 1, 0, 0, 0, NULL), OT_E_SHAPE);

    /* ConstantOfShape with an int64 value tensor */
    int64_t shp[2] = {2, 3}, c[6];
    ot_node k = tk_node(OT_OP_CONSTANT_OF_SHAPE, 1, 1);
    int64_t one = 1;
    ot_shape s1 = ot_shape_make(1, &one);
    ot_tensor *v = ot_tensor_new(OT_I64, &s1);
    ((int64_t *)v->data)[0] = 7;
    ot_node_set_attr_tensor(&k, "value", v);
    ot_tensor kin[1] = {tk_t(OT_I64, shp, 1, 2)};
    ot_tensor kout[1] = {tk_t(OT_I64, c, 2, 2, 3)};
    assert_int_equal(tk_run(&k, kin, kout), OT_OK);
    for (int i = 0; i < 6; i++) assert_int_equal(c[i], 7);
    tk_node_free(&k);
    /* default: float zeros */
    float cf[6] = {1, 1, 1, 1, 1, 1};
    ot_node k2 = tk_node(OT_OP_CONSTANT_OF_SHAPE, 1, 1);
    kout[0] = tk_t(OT_F32, cf, 2, 2, 3);
    assert_int_equal(tk_run(&k2, kin, kout), OT_OK);
    for (int i = 0; i < 6; i++) assert_true(cf[i] == 0.0f);
    /* Constant */
    ot_node cn = tk_node(OT_OP_CONSTANT, 0, 1);
    int64_t vals[3] = {4, 5, 6}, cy[3];
    ot_node_set_attr_ints(&cn, "value_ints", vals, 3);
    ot_tensor cout_[1] = {tk_t(OT_I64, cy, 1, 3)};
    assert_int_equal(tk_run(&cn, NULL, cout_), OT_OK);
    assert_memory_equal(cy, vals, sizeof vals);
    tk_node_free(&cn);
}

static void test_expand_where_equal(void **state) {
    (void)state;
    /* Expand [3,1] -> [2,3,4] */
    float x[3] = {1, 2, 3}, y[24];
    int64_t shp[3] = {2, 3, 4};
    ot_node n = tk_node(OT_OP_EXPAND, 2, 1);
    ot_tensor in[2] = {tk_t(OT_F32, x, 2, 3, 1), tk_t(OT_I64, shp, 1, 3)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 3, 2, 3, 4)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < 24; i++) assert_true(y[i] == x[(i / 4) % 3]);
    /* Equal int64 [2,1] vs [3] -> bool [2,3] */
    int64_t a[2] = {1, 5}, b[3] = {5, 1, 1};
    uint8_t eq[6];
    ot_node e = tk_node(OT_OP_EQUAL, 2, 1);
    ot_tensor ein[2] = {tk_t(OT_I64, a, 2, 2, 1), tk_t(OT_I64, b, 1, 3)};
    ot_tensor eout[1] = {tk_t(OT_BOOL, eq, 2, 2, 3)};
    assert_int_equal(tk_run(&e, ein, eout), OT_OK);
    uint8_t weq[6] = {0, 1, 1, 1, 0, 0};
    assert_memory_equal(eq, weq, 6);
    /* Where(cond [2,3], x int64 [3], y scalar) */
    int64_t wx[3] = {10, 20, 30}, wy = -1, wo[6];
    ot_node w = tk_node(OT_OP_WHERE, 3, 1);
    ot_tensor win[3] = {tk_t(OT_BOOL, eq, 2, 2, 3), tk_t(OT_I64, wx, 1, 3), tk_t(OT_I64, &wy, 0)};
    ot_tensor wout[1] = {tk_t(OT_I64, wo, 2, 2, 3)};
    assert_int_equal(tk_run(&w, win, wout), OT_OK);
    int64_t ww[6] = {-1, 20, 30, 10, -1, -1};
    for (int i = 0; i < 6; i++) assert_int_equal(wo[i], ww[i]);
    /* Where on float with broadcast cond */
    uint8_t c2[2] = {1, 0};
    float fx[6] = {1, 2, 3, 4, 5, 6}, fyv[3] = {-1, -2, -3}, fo[6];
    ot_tensor fin[3] = {tk_t(OT_BOOL, c2, 2, 2, 1), tk_t(OT_F32, fx, 2, 2, 3), tk_t(OT_F32, fyv, 1, 3)};
    ot_tensor fout[1] = {tk_t(OT_F32, fo, 2, 2, 3)};
    assert_int_equal(tk_run(&w, fin, fout), OT_OK);
    float fw[6] = {1, 2, 3, -1, -2, -3};
    for (int i = 0; i < 6; i++) assert_true(fo[i] == fw[i]);
}

/* naive broadcast index: element of input with shape `is` (rank ir) at output index o */
static int64_t naive_bidx(const int64_t *os, int orank, const int64_t *is, int irank, int64_t o) {
    int64_t off = 0, mul = 1;
    for (int d = orank - 1; d >= 0; d--) {
        int64_t i = o % os[d];
        o /= os[d];
        int id = d - (orank - irank);
        if (id >= 0) {
            if (is[id] != 1) off += i * mul;
            mul *= is[id];
        }
    }
    return off;
}

static void test_arith_broadcast(void **state) {
    (void)state;
    /* float: [2,1,4,3] op [3,1,3] -> [2,3,4,3] */
    int64_t as[4] = {2, 1, 4, 3}, bs[3] = {3, 1, 3}, os[4] = {2, 3, 4, 3};
    float a[24], b[9], y[72];
    double want[72];
    tk_fill(a, 24, 1, -2, 2);
    tk_fill(b, 9, 2, 0.5f, 2);
    ot_op ops[4] = {OT_OP_ADD, OT_OP_SUB, OT_OP_MUL, OT_OP_DIV};
    for (int k = 0; k < 4; k++) {
        ot_node n = tk_node(ops[k], 2, 1);
        ot_tensor in[2] = {tk_t(OT_F32, a, 4, 2, 1, 4, 3), tk_t(OT_F32, b, 3, 3, 1, 3)};
        ot_tensor out[1] = {tk_t(OT_F32, y, 4, 2, 3, 4, 3)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        for (int64_t o = 0; o < 72; o++) {
            double x1 = a[naive_bidx(os, 4, as, 4, o)], x2 = b[naive_bidx(os, 4, bs, 3, o)];
            want[o] = k == 0 ? x1 + x2 : k == 1 ? x1 - x2 : k == 2 ? x1 * x2 : x1 / x2;
        }
        assert_true(tk_max_rel(y, want, 72) < 1e-6);
    }
    /* int64: scalar-with-vector both ways, Div truncates */
    int64_t v[4] = {7, -7, 8, 9}, s = 2, r[4];
    ot_node d = tk_node(OT_OP_DIV, 2, 1);
    ot_tensor din[2] = {tk_t(OT_I64, v, 1, 4), tk_t(OT_I64, &s, 0)};
    ot_tensor dout[1] = {tk_t(OT_I64, r, 1, 4)};
    assert_int_equal(tk_run(&d, din, dout), OT_OK);
    int64_t wd[4] = {3, -3, 4, 4};
    for (int i = 0; i < 4; i++) assert_int_equal(r[i], wd[i]);
    ot_node m = tk_node(OT_OP_MUL, 2, 1);
    ot_tensor min_[2] = {tk_t(OT_I64, &s, 1, 1), tk_t(OT_I64, v, 1, 4)};
    assert_int_equal(tk_run(&m, min_, dout), OT_OK);
    assert_int_equal(r[1], -14);
    s = 0;
    assert_int_equal(tk_run_ex(&d, din, dout, 1, 0, 0, 0, NULL), OT_E_DATA);
    /* shapes that do not broadcast */
    ot_tensor bad[2] = {tk_t(OT_I64, v, 1, 4), tk_t(OT_I64, v, 1, 3)};
    assert_int_equal(tk_run_ex(&m, bad, dout, 1, 0, 0, 0, NULL), OT_E_SHAPE);
    /* integer Pow (exact, keeps the base dtype), Clip on int64, uint8 Add wraps */
    int64_t pb[4] = {2, -3, 10, 7}, pe = 3, pr[4];
    ot_node pw = tk_node(OT_OP_POW, 2, 1);
    ot_tensor pin[2] = {tk_t(OT_I64, pb, 1, 4), tk_t(OT_I64, &pe, 0)};
    ot_tensor pout[1] = {tk_t(OT_I64, pr, 1, 4)};
    assert_int_equal(tk_run(&pw, pin, pout), OT_OK);
    int64_t wp[4] = {8, -27, 1000, 343};
    for (int i = 0; i < 4; i++) assert_int_equal(pr[i], wp[i]);
    ot_node cl = tk_node(OT_OP_CLIP, 1, 1);
    ot_node_set_attr_float(&cl, "min", -2.5f);
    ot_node_set_attr_float(&cl, "max", 8.0f);
    ot_tensor cin[1] = {tk_t(OT_I64, pb, 1, 4)};
    assert_int_equal(tk_run(&cl, cin, pout), OT_OK);
    int64_t wc[4] = {2, -2, 8, 7};
    for (int i = 0; i < 4; i++) assert_int_equal(pr[i], wc[i]);
    tk_node_free(&cl);
    uint8_t u[2] = {250, 3}, uv = 10, ur[2];
    ot_node ua = tk_node(OT_OP_ADD, 2, 1);
    ot_tensor uin[2] = {tk_t(OT_U8, u, 1, 2), tk_t(OT_U8, &uv, 0)};
    ot_tensor uout[1] = {tk_t(OT_U8, ur, 1, 2)};
    assert_int_equal(tk_run(&ua, uin, uout), OT_OK);
    assert_int_equal(ur[0], 4);
    assert_int_equal(ur[1], 13);
    /* in place: output aliases input 0 */
    float ip[6] = {1, 2, 3, 4, 5, 6}, bias[3] = {10, 20, 30};
    ot_node add = tk_node(OT_OP_ADD, 2, 1);
    ot_tensor ain[2] = {tk_t(OT_F32, ip, 2, 2, 3), tk_t(OT_F32, bias, 1, 3)};
    ot_tensor aout[1] = {tk_t(OT_F32, ip, 2, 2, 3)};
    assert_int_equal(tk_run(&add, ain, aout), OT_OK);
    assert_true(ip[0] == 11 && ip[5] == 36);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_op),        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_views),           cmocka_unit_test(test_concat_split),
        cmocka_unit_test(test_slice),           cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_cast),            cmocka_unit_test(test_range_constants),
        cmocka_unit_test(test_expand_where_equal), cmocka_unit_test(test_arith_broadcast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
