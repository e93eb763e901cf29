/* test_kernels_cpu_index.c — CPU kernels of the layout and indexing ops of issue 13
 * (cpu_index.c, grad_index.c) against plain C references written out here: Pad in
 * every mode (reflect by repeated mirroring, as numpy.pad), PadGrad and TileGrad as a
 * scatter-add in output order, Tile, Trilu, GatherElements and its gradient,
 * CumSum, ScatterND / ScatterElements (every reduction) and GatherND (batch_dims). The backward kernels sum in the references' order, so they must agree bit
 * for bit, on one thread and on four. */
#include "test_kernels_cpu_util.h"

static int64_t ref_src(int64_t t, int64_t n, int mode) { /* 0 constant 1 reflect 2 edge 3 wrap */
    if (t >= 0 && t < n) return t;
    if (mode == 0) return -1;
    if (mode == 2) return t < 0 ? 0 : n - 1;
    if (mode == 3) return ((t % n) + n) % n;
    if (n == 1) return 0;
    while (t < 0 || t >= n) t = t < 0 ? -t : 2 * (n - 1) - t;
    return t;
}

/* Source offset of output element o for a rank-r pad with begin pads b. */
static int64_t ref_pad_off(int r, const int64_t *xd, const int64_t *yd, const int64_t *b, int mode, int64_t o) {
    int64_t off = 0, st = 1;
    for (int d = r - 1; d >= 0; d--) {
        int64_t c = o % yd[d];
        o /= yd[d];
        int64_t s = ref_src(c - b[d], xd[d], mode);
        if (s < 0) return -1;
        off += s * st;
        st *= xd[d];
    }
    return off;
}

static const char *MODES[4] = {"constant", "reflect", "edge", "wrap"};

static void test_pad_forward_and_grad(void **state) {
    (void)state;
    enum { XN = 2 * 3 * 4, YN = 3 * 7 * 12 };
    int64_t xd[3] = {2, 3, 4}, yd[3] = {3, 7, 12}, b[3] = {0, 2, 3}, pads[6] = {0, 2, 3, 1, 2, 5};
    float x[XN], y[YN], dy[YN], dx[XN], dx4[XN];
    tk_fill(x, XN, 1, -1, 1);
    tk_fill(dy, YN, 2, -1, 1);
    float value = 0.75f;
    for (int m = 0; m < 4; m++) {
        ot_node n = tk_node(OT_OP_PAD, 3, 1);
        ot_node_set_attr_string(&n, "mode", MODES[m]);
        ot_tensor in[3] = {tk_t(OT_F32, x, 3, 2, 3, 4), tk_t(OT_I64, pads, 1, 6), tk_t(OT_F32, &value, 0)};
        ot_tensor out[1] = {tk_t(OT_F32, y, 3, 3, 7, 12)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        for (int64_t o = 0; o < YN; o++) {
            int64_t s = ref_pad_off(3, xd, yd, b, m, o);
            assert_true(y[o] == (s < 0 ? value : x[s]));
        }
        /* PadGrad (dY, X, pads): the scatter-add of dY in output order */
        ot_node gnode = tk_node(OT_OP_PAD_GRAD, 3, 1);
        ot_node_set_attr_string(&gnode, "mode", MODES[m]);
        ot_tensor gin[3] = {tk_t(OT_F32, dy, 3, 3, 7, 12), tk_t(OT_F32, x, 3, 2, 3, 4), tk_t(OT_I64, pads, 1, 6)};
        ot_tensor gout[1] = {tk_t(OT_F32, dx, 3, 2, 3, 4)};
        assert_int_equal(tk_run_ex(&gnode, gin, gout, 1, 0, 0, 0, NULL), OT_OK);
        float want[XN] = {0};
        for (int64_t o = 0; o < YN; o++) {
            int64_t s = ref_pad_off(3, xd, yd, b, m, o);
            if (s >= 0) want[s] += dy[o];
        }
        for (int i = 0; i < XN; i++) assert_true(dx[i] == want[i]);
        gout[0] = tk_t(OT_F32, dx4, 3, 2, 3, 4);
        assert_int_equal(tk_run_ex(&gnode, gin, gout, 4, 0, 0, 0, NULL), OT_OK);
        assert_memory_equal(dx, dx4, sizeof dx);
        tk_node_free(&n);
        tk_node_free(&gnode);
    }
}

static void test_pad_axes_crop_int64(void **state) {
    (void)state;
    /* int64 data [2,3,4]; axes {2, -2}: axis 2 cropped by 1 at the start, axis 1
     * padded 2 / 1 with 7 (constant_value int64) */
    int64_t x[24], y[2 * 6 * 3], pads[4] = {-1, 2, 0, 1}, axes[2] = {2, -2}, value = 7;
    for (int i = 0; i < 24; i++) x[i] = 100 + i;
    ot_node n = tk_node(OT_OP_PAD, 4, 1);
    ot_tensor in[4] = {tk_t(OT_I64, x, 3, 2, 3, 4), tk_t(OT_I64, pads, 1, 4), tk_t(OT_I64, &value, 0),
                       tk_t(OT_I64, axes, 1, 2)};
    ot_tensor out[1] = {tk_t(OT_I64, y, 3, 2, 6, 3)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    int64_t xd[3] = {2, 3, 4}, yd[3] = {2, 6, 3}, b[3] = {0, 2, -1};
    for (int64_t o = 0; o < 36; o++) {
        int64_t s = ref_pad_off(3, xd, yd, b, 0, o);
        assert_int_equal(y[o], s < 0 ? 7 : x[s]);
    }
    /* a mode the spec does not have, and pads that do not fit the output */
    ot_error e = {0};
    ot_node_set_attr_string(&n, "mode", "mirror");
    assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, &e), OT_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "'k'"));
    ot_node_set_attr_string(&n, "mode", "constant");
    out[0] = tk_t(OT_I64, y, 3, 2, 5, 3);
    assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, &e), OT_E_SHAPE);
    tk_node_free(&n);
}

static void test_tile_forward_and_grad(void **state) {
    (void)state;
    /* float [2,1,3] x {2,3,2} -> [4,3,6]; int64 shape data [3] x {2} */
    float x[6], y[72], dy[72], dx[6];
    tk_fill(x, 6, 3, -1, 1);
    tk_fill(dy, 72, 4, -1, 1);
    int64_t rep[3] = {2, 3, 2};
    ot_node n = tk_node(OT_OP_TILE, 2, 1);
    ot_tensor in[2] = {tk_t(OT_F32, x, 3, 2, 1, 3), tk_t(OT_I64, rep, 1, 3)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 3, 4, 3, 6)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    float want[6] = {0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 6; k++) {
                int s = (i % 2) * 3 + k % 3;
                assert_true(y[(i * 3 + j) * 6 + k] == x[s]);
                want[s] += dy[(i * 3 + j) * 6 + k];
            }
    ot_node g = tk_node(OT_OP_TILE_GRAD, 2, 1);
    ot_tensor gin[2] = {tk_t(OT_F32, dy, 3, 4, 3, 6), tk_t(OT_F32, x, 3, 2, 1, 3)};
    ot_tensor gout[1] = {tk_t(OT_F32, dx, 3, 2, 1, 3)};
    assert_int_equal(tk_run(&g, gin, gout), OT_OK);
    for (int i = 0; i < 6; i++) assert_true(dx[i] == want[i]);
    int64_t s[3] = {5, 6, 7}, sy[6], two = 2;
    ot_tensor in2[2] = {tk_t(OT_I64, s, 1, 3), tk_t(OT_I64, &two, 1, 1)};
    ot_tensor out2[1] = {tk_t(OT_I64, sy, 1, 6)};
    assert_int_equal(tk_run(&n, in2, out2), OT_OK);
    for (int i = 0; i < 6; i++) assert_int_equal(sy[i], s[i % 3]);
    /* repeats that do not give the output shape */
    out2[0] = tk_t(OT_I64, sy, 1, 5);
    ot_error e = {0};
    assert_int_equal(tk_run_ex(&n, in2, out2, 1, 0, 0, 0, &e), OT_E_SHAPE);
    tk_node_free(&n);
}

static void test_trilu(void **state) {
    (void)state;
    float x[2 * 3 * 5], y[30];
    tk_fill(x, 30, 5, -1, 1);
    for (int upper = 0; upper < 2; upper++)
        for (int64_t k = -4; k <= 6; k++) {
            ot_node n = tk_node(OT_OP_TRILU, 2, 1);
            ot_node_set_attr_int(&n, "upper", upper);
            ot_tensor in[2] = {tk_t(OT_F32, x, 3, 2, 3, 5), tk_t(OT_I64, &k, 0)};
            ot_tensor out[1] = {tk_t(OT_F32, y, 3, 2, 3, 5)};
            assert_int_equal(tk_run(&n, in, out), OT_OK);
            for (int b = 0; b < 2; b++)
                for (int i = 0; i < 3; i++)
                    for (int j = 0; j < 5; j++) {
                        int at = (b * 3 + i) * 5 + j;
                        bool keep = upper ? j - i >= k : j - i <= k;
                        assert_true(y[at] == (keep ? x[at] : 0.0f));
                    }
            tk_node_free(&n);
        }
    /* a causal mask: bool, no k, lower */
    uint8_t ones[16], m[16];
    memset(ones, 1, sizeof ones);
    ot_node n = tk_node(OT_OP_TRILU, 1, 1);
    ot_node_set_attr_int(&n, "upper", 0);
    ot_tensor in[1] = {tk_t(OT_BOOL, ones, 2, 4, 4)};
    ot_tensor out[1] = {tk_t(OT_BOOL, m, 2, 4, 4)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < 16; i++) assert_int_equal(m[i], i % 4 <= i / 4);
    tk_node_free(&n);
}

static void test_gather_elements(void **state) {
    (void)state;
    /* data [3,4], indices [2,3] (smaller on the other dim), both axes */
    float x[12], y[6], dy[6], dx[12];
    tk_fill(x, 12, 6, -1, 1);
    tk_fill(dy, 6, 7, -1, 1);
    int64_t idx0[6] = {2, 0, -1, 1, 2, 2}, idx1[6] = {3, 0, 3, 1, -4, 2};
    for (int axis = 0; axis < 2; axis++) {
        const int64_t *idx = axis ? idx1 : idx0;
        int64_t da = axis ? 4 : 3;
        ot_node n = tk_node(OT_OP_GATHER_ELEMENTS, 2, 1);
        ot_node_set_attr_int(&n, "axis", axis);
        ot_tensor in[2] = {tk_t(OT_F32, x, 2, 3, 4), tk_t(OT_I64, (void *)idx, 2, 2, 3)};
        ot_tensor out[1] = {tk_t(OT_F32, y, 2, 2, 3)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        float want[12] = {0};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                int64_t v = idx[i * 3 + j];
                if (v < 0) v += da;
                int at = axis ? i * 4 + (int)v : (int)v * 4 + j;
                assert_true(y[i * 3 + j] == x[at]);
                want[at] += dy[i * 3 + j];
            }
        ot_node g = tk_node(OT_OP_GATHER_ELEMENTS_GRAD, 3, 1);
        ot_node_set_attr_int(&g, "axis", axis);
        ot_tensor gin[3] = {tk_t(OT_F32, dy, 2, 2, 3), tk_t(OT_I64, (void *)idx, 2, 2, 3), tk_t(OT_F32, x, 2, 3, 4)};
        ot_tensor gout[1] = {tk_t(OT_F32, dx, 2, 3, 4)};
        assert_int_equal(tk_run(&g, gin, gout), OT_OK);
        for (int i = 0; i < 12; i++) assert_true(dx[i] == want[i]);
        tk_node_free(&n);
        tk_node_free(&g);
    }
    /* an index out of range is a data error naming the node */
    int32_t bad[6] = {0, 0, 0, 0, 3, 0};
    ot_node n = tk_node(OT_OP_GATHER_ELEMENTS, 2, 1);
    ot_tensor in[2] = {tk_t(OT_F32, x, 2, 3, 4), tk_t(OT_I32, bad, 2, 2, 3)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 2, 2, 3)};
    ot_error e = {0};
    assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, &e), OT_E_DATA);
    assert_non_null(strstr(e.msg, "'k'"));
    tk_node_free(&n);
}

static void test_cumsum(void **state) {
    (void)state;
    enum { N = 3 * 40 * 200 }; /* large enough for the threaded path */
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    assert_non_null(x);
    assert_non_null(y);
    tk_fill(x, N, 8, -1, 1);
    int64_t dims[3] = {3, 40, 200};
    for (int mode = 0; mode < 4; mode++)
        for (int64_t axis = -1; axis < 3; axis++) {
            bool excl = mode & 1, rev = mode >> 1;
            ot_node n = tk_node(OT_OP_CUMSUM, 2, 1);
            ot_node_set_attr_int(&n, "exclusive", excl);
            ot_node_set_attr_int(&n, "reverse", rev);
            int32_t ax32 = (int32_t)axis;
            ot_tensor in[2] = {tk_t(OT_F32, x, 3, 3, 40, 200), tk_t(OT_I32, &ax32, 0)};
            ot_tensor out[1] = {tk_t(OT_F32, y, 3, 3, 40, 200)};
            assert_int_equal(tk_run_ex(&n, in, out, 4, 0, 0, 0, NULL), OT_OK);
            int a = (int)(axis < 0 ? axis + 3 : axis);
            int64_t inner = 1, outer = 1, len = dims[a];
            for (int d = a + 1; d < 3; d++) inner *= dims[d];
            for (int d = 0; d < a; d++) outer *= dims[d];
            for (int64_t o = 0; o < outer; o++)
                for (int64_t b = 0; b < inner; b++) {
                    double acc = 0.0;
                    for (int64_t s = 0; s < len; s++) {
                        int64_t j = rev ? len - 1 - s : s, at = (o * len + j) * inner + b;
                        if (!excl) acc += x[at];
                        assert_true(y[at] == (float)acc);
                        if (excl) acc += x[at];
                    }
                }
            tk_node_free(&n);
        }
    /* int64 (position ids from a mask) */
    int64_t m[6] = {1, 1, 0, 1, 0, 1}, c[6], zero = 0;
    ot_node n = tk_node(OT_OP_CUMSUM, 2, 1);
    ot_tensor in[2] = {tk_t(OT_I64, m, 1, 6), tk_t(OT_I64, &zero, 0)};
    ot_tensor out[1] = {tk_t(OT_I64, c, 1, 6)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    int64_t want[6] = {1, 2, 2, 3, 3, 4};
    for (int i = 0; i < 6; i++) assert_int_equal(c[i], want[i]);
    free(x);
    free(y);
}

/* ScatterND on [4,3] rows (int64 indices [3,1], row 1 twice) with every reduction,
 * float32 and int64; GatherND with batch_dims 1; indices out of range. */
static void test_scatter_nd_gather_nd(void **state) {
    (void)state;
    const char *reds[5] = {"none", "add", "mul", "max", "min"};
    float x[12], u[9], y[12];
    tk_fill(x, 12, 9, -1, 1);
    tk_fill(u, 9, 10, -1, 1);
    int64_t idx[3] = {1, -1, 1};
    for (int r = 0; r < 5; r++) {
        ot_node n = tk_node(OT_OP_SCATTER_ND, 3, 1);
        ot_node_set_attr_string(&n, "reduction", reds[r]);
        ot_tensor in[3] = {tk_t(OT_F32, x, 2, 4, 3), tk_t(OT_I64, idx, 2, 3, 1), tk_t(OT_F32, u, 2, 3, 3)};
        ot_tensor out[1] = {tk_t(OT_F32, y, 2, 4, 3)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        float want[12];
        memcpy(want, x, sizeof want);
        for (int k = 0; k < 3; k++) {
            int row = (int)(idx[k] < 0 ? idx[k] + 4 : idx[k]);
            for (int e = 0; e < 3; e++) {
                float *o = &want[row * 3 + e], v = u[k * 3 + e];
                *o = r == 0 ? v : r == 1 ? *o + v : r == 2 ? *o * v : r == 3 ? fmaxf(*o, v) : fminf(*o, v);
            }
        }
        for (int i = 0; i < 12; i++) assert_true(y[i] == want[i]);
        tk_node_free(&n);
    }
    /* int64 data, one element per tuple (q = rank), add */
    int64_t xi[6] = {1, 2, 3, 4, 5, 6}, ti[4] = {0, 2, 0, 2}, ui[2] = {10, 20}, yi[6];
    ot_node a = tk_node(OT_OP_SCATTER_ND, 3, 1);
    ot_node_set_attr_string(&a, "reduction", "add");
    ot_tensor ain[3] = {tk_t(OT_I64, xi, 2, 2, 3), tk_t(OT_I64, ti, 2, 2, 2), tk_t(OT_I64, ui, 1, 2)};
    ot_tensor aout[1] = {tk_t(OT_I64, yi, 2, 2, 3)};
    assert_int_equal(tk_run(&a, ain, aout), OT_OK);
    assert_int_equal(yi[2], 33);
    assert_int_equal(yi[0], 1);
    ot_node_set_attr_string(&a, "reduction", "average");
    ot_error e = {0};
    assert_int_equal(tk_run_ex(&a, ain, aout, 1, 0, 0, 0, &e), OT_E_UNSUPPORTED);
    ti[1] = 3;
    ot_node_set_attr_string(&a, "reduction", "none");
    assert_int_equal(tk_run_ex(&a, ain, aout, 1, 0, 0, 0, &e), OT_E_DATA);
    assert_non_null(strstr(e.msg, "'k'"));
    tk_node_free(&a);
    /* GatherND batch_dims 1: data [2,3,2], indices [2,1] -> [2,2] rows of each batch */
    float d[12], gy[4];
    for (int i = 0; i < 12; i++) d[i] = (float)i;
    int64_t gi[2] = {2, -3};
    ot_node g = tk_node(OT_OP_GATHER_ND, 2, 1);
    ot_node_set_attr_int(&g, "batch_dims", 1);
    ot_tensor gin[2] = {tk_t(OT_F32, d, 3, 2, 3, 2), tk_t(OT_I64, gi, 2, 2, 1)};
    ot_tensor gout[1] = {tk_t(OT_F32, gy, 2, 2, 2)};
    assert_int_equal(tk_run(&g, gin, gout), OT_OK);
    const float gw[4] = {4, 5, 6, 7};
    for (int i = 0; i < 4; i++) assert_true(gy[i] == gw[i]);
    tk_node_free(&g);
}

/* ScatterElements along both axes, none and add (repeated indices add in order). */
static void test_scatter_elements(void **state) {
    (void)state;
    float x[12], u[6], y[12];
    tk_fill(x, 12, 11, -1, 1);
    tk_fill(u, 6, 12, -1, 1);
    int64_t idx[6] = {1, 0, 3, 1, 2, -1};
    for (int axis = 0; axis < 2; axis++)
        for (int add = 0; add < 2; add++) {
            ot_node n = tk_node(OT_OP_SCATTER_ELEMENTS, 3, 1);
            ot_node_set_attr_int(&n, "axis", axis);
            ot_node_set_attr_string(&n, "reduction", add ? "add" : "none");
            int64_t da = axis ? 3 : 4;
            int64_t ix[6];
            for (int i = 0; i < 6; i++) ix[i] = idx[i] % da;
            ot_tensor in[3] = {tk_t(OT_F32, x, 2, 4, 3), tk_t(OT_I64, ix, 2, 2, 3), tk_t(OT_F32, u, 2, 2, 3)};
            ot_tensor out[1] = {tk_t(OT_F32, y, 2, 4, 3)};
            assert_int_equal(tk_run(&n, in, out), OT_OK);
            float want[12];
            memcpy(want, x, sizeof want);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++) {
                    int64_t v = ix[i * 3 + j];
                    if (v < 0) v += da;
                    int at = axis ? i * 3 + (int)v : (int)v * 3 + j;
                    want[at] = add ? want[at] + u[i * 3 + j] : u[i * 3 + j];
                }
            for (int i = 0; i < 12; i++) assert_true(y[i] == want[i]);
            tk_node_free(&n);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pad_forward_and_grad), cmocka_unit_test(test_pad_axes_crop_int64),
        cmocka_unit_test(test_tile_forward_and_grad), cmocka_unit_test(test_trilu),
        cmocka_unit_test(test_gather_elements),       cmocka_unit_test(test_cumsum),
        cmocka_unit_test(test_scatter_nd_gather_nd),  cmocka_unit_test(test_scatter_elements),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
