/* test_kernels_cpu_conv.c — Conv against a naive direct convolution in double
 * (groups, depthwise, dilation, stride, asymmetric pads, auto_pad, pointwise, 1-D,
 * images batched into one GEMM, in chunks, or one per GEMM),
 * MaxPool / AveragePool with padding and ceil_mode against PyTorch's window rules
 * written out here, GlobalAveragePool, thread-count repeatability, and unsupported
 * dtypes reported with the node's name. */
#include "test_kernels_cpu_util.h"

typedef struct conv_case {
    int N, C, H, W, M, KH, KW, G, SH, SW, DH, DW, PT, PL, PB, PR;
    const char *auto_pad; /* NULL: explicit pads */
    bool bias;
} conv_case;

static int conv_out(int in, int k, int s, int d, int pb, int pe) { return (in + pb + pe - ((k - 1) * d + 1)) / s + 1; }

static void naive_conv(const conv_case *c, const float *x, const float *w, const float *b, double *y, int OH, int OW,
                       int PT, int PL) {
    int Cg = c->C / c->G, Mg = c->M / c->G;
    for (int n = 0; n < c->N; n++)
        for (int m = 0; m < c->M; m++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double s = b ? b[m] : 0.0;
                    int g = m / Mg;
                    for (int ci = 0; ci < Cg; ci++)
                        for (int kh = 0; kh < c->KH; kh++)
                            for (int kw = 0; kw < c->KW; kw++) {
                                int ih = oh * c->SH - PT + kh * c->DH, iw = ow * c->SW - PL + kw * c->DW;
                                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                                s += (double)x[((n * c->C + g * Cg + ci) * c->H + ih) * c->W + iw] *
                                     w[((m * Cg + ci) * c->KH + kh) * c->KW + kw];
                            }
                    y[((n * c->M + m) * OH + oh) * OW + ow] = s;
                }
}

static void run_conv_case(const conv_case *c, bool one_d) {
    int Cg = c->C / c->G, PT = c->PT, PL = c->PL, PB = c->PB, PR = c->PR;
    int OH, OW;
    if (c->auto_pad) { /* SAME_UPPER: out = ceil(in / stride), extra pad at the end */
        OH = (c->H + c->SH - 1) / c->SH;
        OW = (c->W + c->SW - 1) / c->SW;
        int th = (OH - 1) * c->SH + (c->KH - 1) * c->DH + 1 - c->H, tw = (OW - 1) * c->SW + (c->KW - 1) * c->DW + 1 - c->W;
        th = th < 0 ? 0 : th;
        tw = tw < 0 ? 0 : tw;
        PT = th / 2;
        PL = tw / 2;
    } else {
        OH = conv_out(c->H, c->KH, c->SH, c->DH, PT, PB);
        OW = conv_out(c->W, c->KW, c->SW, c->DW, PL, PR);
    }
    int nx = c->N * c->C * c->H * c->W, nw = c->M * Cg * c->KH * c->KW, ny = c->N * c->M * OH * OW;
    float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *b = malloc(c->M * sizeof(float));
    float *y = malloc(ny * sizeof(float)), *y2 = malloc(ny * sizeof(float));
    double *want = malloc(ny * sizeof(double));
    tk_fill(x, nx, 21, -1, 1);
    tk_fill(w, nw, 22, -1, 1);
    tk_fill(b, c->M, 23, -1, 1);
    ot_node n = tk_node(OT_OP_CONV, c->bias ? 3 : 2, 1);
    ot_node_set_attr_int(&n, "group", c->G);
    if (one_d) {
        int64_t st[1] = {c->SW}, dl[1] = {c->DW}, pd[2] = {c->PL, c->PR};
        ot_node_set_attr_ints(&n, "strides", st, 1);
        ot_node_set_attr_ints(&n, "dilations", dl, 1);
        ot_node_set_attr_ints(&n, "pads", pd, 2);
    } else {
        int64_t st[2] = {c->SH, c->SW}, dl[2] = {c->DH, c->DW}, pd[4] = {c->PT, c->PL, c->PB, c->PR};
        ot_node_set_attr_ints(&n, "strides", st, 2);
        ot_node_set_attr_ints(&n, "dilations", dl, 2);
        if (c->auto_pad) ot_node_set_attr_string(&n, "auto_pad", c->auto_pad);
        else ot_node_set_attr_ints(&n, "pads", pd, 4);
    }
    ot_tensor in[3], out[1];
    if (one_d) {
        in[0] = tk_t(OT_F32, x, 3, c->N, c->C, c->W);
        in[1] = tk_t(OT_F32, w, 3, c->M, Cg, c->KW);
        out[0] = tk_t(OT_F32, y, 3, c->N, c->M, OW);
    } else {
        in[0] = tk_t(OT_F32, x, 4, c->N, c->C, c->H, c->W);
        in[1] = tk_t(OT_F32, w, 4, c->M, Cg, c->KH, c->KW);
        out[0] = tk_t(OT_F32, y, 4, c->N, c->M, OH, OW);
    }
    in[2] = tk_t(OT_F32, b, 1, c->M);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    naive_conv(c, x, w, c->bias ? b : NULL, want, OH, OW, PT, PL);
    double e = tk_max_rel(y, want, ny);
    if (e > 1e-5) print_error("conv case G=%d K=%dx%d S=%d D=%d: max rel err %g\n", c->G, c->KH, c->KW, c->SH, c->DH, e);
    assert_true(e < 1e-5);
    /* bitwise repeatable with a fixed thread count; 1 vs 2 threads within rounding */
    ot_tensor out2[1] = {out[0]};
    out2[0].data = y2;
    assert_int_equal(tk_run_ex(&n, in, out2, 2, 0, 0, 0, NULL), OT_OK);
    assert_memory_equal(y, y2, ny * sizeof(float));
    assert_int_equal(tk_run_ex(&n, in, out2, 1, 0, 0, 0, NULL), OT_OK);
    for (int i = 0; i < ny; i++) assert_true(fabsf(y[i] - y2[i]) <= 1e-5f * (1.0f + fabsf(y[i])));
    tk_node_free(&n);
    free(x);
    free(w);
    free(b);
    free(y);
    free(y2);
    free(want);
}

static void test_conv(void **state) {
    (void)state;
    const conv_case cases[] = {
        /* N C  H  W  M KH KW G SH SW DH DW PT PL PB PR auto bias */
        {2, 3, 9, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, NULL, true},   /* plain 3x3 same */
        {2, 4, 11, 10, 6, 3, 2, 2, 2, 1, 2, 1, 2, 0, 1, 1, NULL, true}, /* groups, stride, dilation, asym pads */
        {1, 6, 8, 8, 12, 3, 3, 6, 2, 2, 1, 1, 1, 1, 1, 1, NULL, true},  /* depthwise, multiplier 2 */
        {2, 8, 5, 7, 5, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, NULL, false},  /* pointwise */
        {1, 3, 7, 9, 2, 3, 3, 1, 2, 2, 1, 1, 0, 0, 0, 0, "SAME_UPPER", true},
        {1, 2, 40, 40, 8, 5, 5, 1, 1, 1, 1, 1, 2, 2, 2, 2, NULL, true}, /* big enough for the threaded paths */
        {5, 3, 20, 20, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, NULL, true}, /* images batched in chunks of 3 + 2 */
        {5, 6, 20, 20, 4, 1, 1, 2, 1, 1, 1, 1, 0, 0, 0, 0, NULL, true}, /* pointwise, grouped, chunks */
        {2, 3, 32, 32, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, NULL, false}, /* one image per GEMM */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_conv_case(&cases[i], false);
    /* 1-D: H = 1 */
    const conv_case c1 = {2, 4, 1, 17, 6, 1, 3, 2, 1, 2, 1, 2, 0, 2, 0, 1, NULL, true};
    run_conv_case(&c1, true);
}

static void test_conv_bad_dtype(void **state) {
    (void)state;
    int64_t x[16] = {0}, w[4] = {0}, y[9] = {0};
    ot_node n = tk_node(OT_OP_CONV, 2, 1);
    n.name = (char *)"conv_7";
    ot_tensor in[2] = {tk_t(OT_I64, x, 4, 1, 1, 4, 4), tk_t(OT_I64, w, 4, 1, 1, 2, 2)};
    ot_tensor out[1] = {tk_t(OT_I64, y, 4, 1, 1, 3, 3)};
    ot_error e = {0};
    assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, &e), OT_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "conv_7"));
    assert_false(ot_cpu_supports(&n, in, out));
    in[0].dtype = in[1].dtype = out[0].dtype = OT_F32;
    assert_true(ot_cpu_supports(&n, in, out));
    /* internal ops run from the same op table: ReluGrad(dY, X) = dY where X > 0 */
    float dy[4] = {1, -1, 2, -2}, x2[4] = {1, 0, -1, 3}, r[4] = {9, 9, 9, 9}, want[4] = {1, 0, 0, -2};
    ot_node g = tk_node(OT_OP_RELU_GRAD, 2, 1);
    ot_tensor gin[2] = {tk_t(OT_F32, dy, 1, 4), tk_t(OT_F32, x2, 1, 4)};
    ot_tensor g1[1] = {tk_t(OT_F32, r, 1, 4)};
    ot_kernel_ctx ctx = {0};
    ot_error e1 = {0};
    assert_true(ot_cpu_has_kernel(OT_OP_RELU_GRAD));
    assert_int_equal(ot_cpu_run_node(&g, gin, g1, &ctx, &e1), OT_OK);
    assert_memory_equal(r, want, sizeof r);
    assert_true(ot_cpu_supports(&g, gin, g1));
    gin[1].dtype = OT_F64;
    assert_true(ot_cpu_supports(&g, gin, g1)); /* the backward kernels check input 0 */
    gin[0].dtype = OT_F64;
    assert_false(ot_cpu_supports(&g, gin, g1));
    assert_false(ot_cpu_has_kernel(OT_OP_UNKNOWN));
    assert_false(ot_cpu_has_kernel(OT_OP_COUNT));
}

/* Pooling reference with symmetric pads (written independently of the kernel): max and
 * count_include_pad=0 as PyTorch, count_include_pad=1 as the ONNX reference. */
static void naive_pool(const float *x, double *y, int64_t *idx, int NC, int H, int W, int OH, int OW, int K, int S,
                       int P, bool max, bool include_pad) {
    for (int p = 0; p < NC; p++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                int hs = oh * S - P, ws = ow * S - P;
                int he = hs + K < H + P ? hs + K : H + P, we = ws + K < W + P ? ws + K : W + P;
                int pool = K * K; /* ONNX: the whole kernel, past the end pad too */
                int hs0 = hs < 0 ? 0 : hs, ws0 = ws < 0 ? 0 : ws, he0 = he < H ? he : H, we0 = we < W ? we : W;
                double s = 0, m = -INFINITY;
                int64_t mi = -1;
                for (int h = hs0; h < he0; h++)
                    for (int w = ws0; w < we0; w++) {
                        double v = x[(p * H + h) * W + w];
                        s += v;
                        if (v > m) m = v, mi = (int64_t)(p * H + h) * W + w;
                    }
                int o = (p * OH + oh) * OW + ow;
                if (max) {
                    y[o] = m;
                    idx[o] = mi;
                } else {
                    y[o] = s / (include_pad ? pool : (he0 - hs0) * (we0 - ws0));
                }
            }
}

static void test_pools(void **state) {
    (void)state;
    enum { N = 2, C = 3, H = 7, W = 6, K = 3, S = 2, P = 1 };
    /* ceil_mode: OH = ceil((7 + 2 - 3) / 2) + 1 = 4, OW = ceil((6 + 2 - 3) / 2) + 1 = 4 (last window starts
     * inside the input, so PyTorch keeps it) */
    int OH = 4, OW = 4;
    float x[N * C * H * W], y[N * C * 16];
    int64_t idx[N * C * 16], widx[N * C * 16];
    double want[N * C * 16];
    tk_fill(x, N * C * H * W, 31, -1, 1);
    int64_t ks[2] = {K, K}, st[2] = {S, S}, pd[4] = {P, P, P, P};
    for (int kind = 0; kind < 3; kind++) {
        bool max = kind == 0, incl = kind == 2;
        ot_node n = tk_node(max ? OT_OP_MAX_POOL : OT_OP_AVERAGE_POOL, 1, max ? 2 : 1);
        ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
        ot_node_set_attr_ints(&n, "strides", st, 2);
        ot_node_set_attr_ints(&n, "pads", pd, 4);
        ot_node_set_attr_int(&n, "ceil_mode", 1);
        if (!max) ot_node_set_attr_int(&n, "count_include_pad", incl);
        ot_tensor in[1] = {tk_t(OT_F32, x, 4, N, C, H, W)};
        ot_tensor out[2] = {tk_t(OT_F32, y, 4, N, C, OH, OW), tk_t(OT_I64, idx, 4, N, C, OH, OW)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        naive_pool(x, want, widx, N * C, H, W, OH, OW, K, S, P, max, incl);
        assert_true(tk_max_rel(y, want, N * C * OH * OW) < 1e-6);
        if (max)
            for (int i = 0; i < N * C * OH * OW; i++) assert_int_equal(idx[i], widx[i]);
        tk_node_free(&n);
    }
    /* MaxPool 2x2 stride 2 with dilation 2 on a 1-D input, small literal */
    float x1[8] = {1, 5, 2, 0, 7, 3, 4, 6}, y1[3];
    int64_t k1[1] = {2}, d1[1] = {2};
    ot_node m = tk_node(OT_OP_MAX_POOL, 1, 1);
    ot_node_set_attr_ints(&m, "kernel_shape", k1, 1);
    ot_node_set_attr_ints(&m, "dilations", d1, 1);
    ot_node_set_attr_ints(&m, "strides", d1, 1);
    ot_tensor in1[1] = {tk_t(OT_F32, x1, 3, 1, 1, 8)};
    ot_tensor out1[1] = {tk_t(OT_F32, y1, 3, 1, 1, 3)};
    assert_int_equal(tk_run(&m, in1, out1), OT_OK);
    /* windows {0,2}, {2,4}, {4,6} -> max(1,2), max(2,7), max(7,4) */
    assert_true(y1[0] == 2 && y1[1] == 7 && y1[2] == 7);
    tk_node_free(&m);
    /* GlobalAveragePool */
    ot_node g = tk_node(OT_OP_GLOBAL_AVERAGE_POOL, 1, 1);
    ot_tensor gin[1] = {tk_t(OT_F32, x, 4, N, C, H, W)};
    ot_tensor gout[1] = {tk_t(OT_F32, y, 4, N, C, 1, 1)};
    assert_int_equal(tk_run(&g, gin, gout), OT_OK);
    for (int p = 0; p < N * C; p++) {
        double s = 0;
        for (int i = 0; i < H * W; i++) s += x[p * H * W + i];
        want[p] = s / (H * W);
    }
    assert_true(tk_max_rel(y, want, N * C) < 1e-6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_conv_bad_dtype),
        cmocka_unit_test(test_pools),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
