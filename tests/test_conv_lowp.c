/* test_conv_lowp.c — a conv net's ops in bfloat16 on the CPU (issue 27 part 4):
 *   - Conv, ConvGradInput and ConvGradWeight on oneDNN's bfloat16 kernels
 *     (kernels/cpu/conv_lowp.c): within the output's rounding of the float32 kernel on
 *     the rounded inputs, ResNet's and MobileNet's shapes (stem 7x7/2, 3x3/1, 3x3/2,
 *     1x1/2 downsample, depthwise, a dilation, a bias); dX and dW also against central
 *     differences of the float32 forward (the loss sum(G * Conv(X, W)), double sums);
 *     the same bits twice on 1 and on 2 threads; on a CPU with AVX-512 the native path
 *     is taken (oneDNN has more than its reference loops for it);
 *   - BatchNormalization (training, and inference) and BatchNormGrad with bfloat16 X,
 *     Y, dY, dX and float32 scale, bias and statistics, and the pools and their
 *     gradients (MaxPool with Indices, AveragePool with pads, GlobalAveragePool):
 *     bitwise the float32 kernel's result on the rounded inputs, rounded, on 1 and 2
 *     threads (their documented contract; the float32 kernels' own gradients are
 *     checked by finite differences in test_grad_kernels);
 *   - the op table answers for them. */
#include <math.h>

#include "kernels/half_float.h"
#include "test_kernels_cpu_util.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/conv_dnnl.h"

static uint32_t seed = 4242u;
static float rnd(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)((int)(seed >> 9) % 2001 - 1000) / 731.0f;
}
static uint16_t bf(float v) { return ot_hf_f32_to_bf16(v); }
static float fb(uint16_t h) { return ot_hf_bf16_to_f32(h); }

static int64_t prod(int r, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < r; i++) n *= d[i];
    return n;
}

/* A random bfloat16 tensor and its float32 values. */
static void rand_bf(int64_t n, uint16_t **h, float **f) {
    *h = malloc((size_t)n * 2 + 2);
    *f = malloc((size_t)n * 4 + 4);
    for (int64_t i = 0; i < n; i++) (*f)[i] = fb((*h)[i] = bf(rnd()));
}

/* ---- convolutions -------------------------------------------------------------------- */

typedef struct conv_case {
    int64_t N, C, O, H, k, s, p, d, G;
    bool bias;
} conv_case;

static ot_node conv_node(ot_op op, const conv_case *c, int n_in) {
    ot_node n = tk_node(op, n_in, 1);
    int64_t ks[2] = {c->k, c->k}, st[2] = {c->s, c->s}, pd[4] = {c->p, c->p, c->p, c->p}, dl[2] = {c->d, c->d};
    ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
    ot_node_set_attr_ints(&n, "strides", st, 2);
    ot_node_set_attr_ints(&n, "pads", pd, 4);
    ot_node_set_attr_ints(&n, "dilations", dl, 2);
    ot_node_set_attr_int(&n, "group", c->G);
    return n;
}

/* |y - ref| within the output's rounding (bfloat16: 2^-8 relative) and float32 sums
 * in another order (relative to the largest |ref|). */
static void near(const char *what, const void *y, ot_dtype yt, const float *ref, int64_t n) {
    double big = 0.0;
    for (int64_t i = 0; i < n; i++) big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
    for (int64_t i = 0; i < n; i++) {
        double v = yt == OT_F32 ? ((const float *)y)[i] : fb(((const uint16_t *)y)[i]);
        if (!(fabs(v - ref[i]) <= 4e-3 * fabs(ref[i]) + 2e-5 * big))
            fail_msg("%s element %lld: %.9g vs %.9g", what, (long long)i, v, ref[i]);
    }
}

/* Runs op in bfloat16 (output yt) and in float32 on the rounded inputs: near, and the
 * same bits twice on 1 and 2 threads. Returns the bfloat16 run's output (caller frees). */
static void *conv_dir(ot_op op, const conv_case *c, ot_dtype yt, int n_in, ot_tensor *in, ot_tensor *fin,
                      int r_out, const int64_t *dout) {
    ot_node n = conv_node(op, c, n_in);
    int64_t ny = prod(r_out, dout);
    float *ref = malloc((size_t)ny * 4);
    void *y = malloc((size_t)ny * 4), *y2 = malloc((size_t)ny * 4);
    ot_tensor out[1] = {tk_ta(yt, y, r_out, dout)}, fout[1] = {tk_ta(OT_F32, ref, r_out, dout)};
    assert_true(ot_cpu_supports(&n, in, out));
    void *slot = NULL, *fslot = NULL;
    assert_int_equal(tk_run_kept(&n, fin, fout, 2, false, &fslot), OT_OK);
    for (int threads = 1; threads <= 2; threads++) {
        out[0].data = y;
        assert_int_equal(tk_run_kept(&n, in, out, threads, false, &slot), OT_OK);
        near(ot_op_name(op), y, yt, ref, ny);
        out[0].data = y2;
        assert_int_equal(tk_run_kept(&n, in, out, threads, false, &slot), OT_OK); /* the kept primitive */
        assert_memory_equal(y, y2, (size_t)ny * ot_dtype_size(yt));
        tk_state_free(&slot);
        assert_int_equal(tk_run_kept(&n, in, out, threads, false, NULL), OT_OK); /* built and dropped in the call */
        assert_memory_equal(y, y2, (size_t)ny * ot_dtype_size(yt));
    }
    tk_state_free(&fslot);
    free(ref), free(y2);
    tk_node_free(&n);
    return y;
}

/* L(X, W) = sum(G * Conv(X, W)) by the float32 kernel, summed in double. */
static double loss(const conv_case *c, ot_tensor *fin, const float *g, float *yf, const int64_t *yd) {
    ot_node n = conv_node(OT_OP_CONV, c, 2);
    ot_tensor out[1] = {tk_ta(OT_F32, yf, 4, yd)};
    assert_int_equal(tk_run_kept(&n, fin, out, 1, false, NULL), OT_OK);
    tk_node_free(&n);
    double s = 0.0;
    for (int64_t i = 0; i < prod(4, yd); i++) s += (double)g[i] * yf[i];
    return s;
}

/* Entry i of dX (or dW) against (L(+h) - L(-h)) / 2h: the loss is linear in each, so
 * the difference is exact but for float32 rounding of the forward. */
static void finite_diff(const conv_case *c, float *xf, float *wf, const float *g, const int64_t *xd,
                        const int64_t *wd, const int64_t *yd, const uint16_t *dx, const uint16_t *dw) {
    float *yf = malloc((size_t)prod(4, yd) * 4);
    ot_tensor fin[2] = {tk_ta(OT_F32, xf, 4, xd), tk_ta(OT_F32, wf, 4, wd)};
    for (int which = 0; which < 2; which++) {
        float *v = which ? wf : xf;
        const uint16_t *an = which ? dw : dx;
        int64_t n = prod(4, which ? wd : xd);
        for (int t = 0; t < 6; t++) {
            int64_t i = (int64_t)(t * 7919) % n;
            float keep = v[i], h = 0.5f;
            v[i] = keep + h;
            double lp = loss(c, fin, g, yf, yd);
            v[i] = keep - h;
            double lm = loss(c, fin, g, yf, yd);
            v[i] = keep;
            double fd = (lp - lm) / (2.0 * h), a = fb(an[i]);
            if (!(fabs(a - fd) <= 1e-2 * fabs(fd) + 1e-2))
                fail_msg("%s[%lld]: %.6g vs finite difference %.6g", which ? "dW" : "dX", (long long)i, a, fd);
        }
    }
    free(yf);
}

static void conv_all(const conv_case *c) {
    int64_t oh = (c->H + 2 * c->p - c->d * (c->k - 1) - 1) / c->s + 1;
    int64_t xd[4] = {c->N, c->C, c->H, c->H}, wd[4] = {c->O, c->C / c->G, c->k, c->k}, yd[4] = {c->N, c->O, oh, oh};
    int64_t bd[1] = {c->O};
    uint16_t *x, *w, *b, *g;
    float *xf, *wf, *bf32, *gf;
    rand_bf(prod(4, xd), &x, &xf);
    rand_bf(prod(4, wd), &w, &wf);
    rand_bf(c->O, &b, &bf32);
    rand_bf(prod(4, yd), &g, &gf);
    /* Conv with a bfloat16 and with a float32 output */
    ot_tensor in[3] = {tk_ta(OT_BF16, x, 4, xd), tk_ta(OT_BF16, w, 4, wd), tk_ta(OT_BF16, b, 1, bd)};
    ot_tensor fin[3] = {tk_ta(OT_F32, xf, 4, xd), tk_ta(OT_F32, wf, 4, wd), tk_ta(OT_F32, bf32, 1, bd)};
    int nb = c->bias ? 3 : 2;
    free(conv_dir(OT_OP_CONV, c, OT_BF16, nb, in, fin, 4, yd));
    free(conv_dir(OT_OP_CONV, c, OT_F32, nb, in, fin, 4, yd));
    /* ConvGradInput (dY, W, X for its shape), ConvGradWeight (dY, X, W for its shape) */
    float *shape_only = calloc((size_t)(prod(4, xd) + prod(4, wd)), 4); /* read for its shape */
    ot_tensor gi[3] = {tk_ta(OT_BF16, g, 4, yd), tk_ta(OT_BF16, w, 4, wd), tk_ta(OT_BF16, shape_only, 4, xd)};
    ot_tensor fgi[3] = {tk_ta(OT_F32, gf, 4, yd), tk_ta(OT_F32, wf, 4, wd), tk_ta(OT_F32, shape_only, 4, xd)};
    uint16_t *dx = conv_dir(OT_OP_CONV_GRAD_INPUT, c, OT_BF16, 3, gi, fgi, 4, xd);
    ot_tensor gw[3] = {tk_ta(OT_BF16, g, 4, yd), tk_ta(OT_BF16, x, 4, xd), tk_ta(OT_BF16, shape_only, 4, wd)};
    ot_tensor fgw[3] = {tk_ta(OT_F32, gf, 4, yd), tk_ta(OT_F32, xf, 4, xd), tk_ta(OT_F32, shape_only, 4, wd)};
    uint16_t *dw = conv_dir(OT_OP_CONV_GRAD_WEIGHT, c, OT_BF16, 3, gw, fgw, 4, wd);
    free(conv_dir(OT_OP_CONV_GRAD_WEIGHT, c, OT_F32, 3, gw, fgw, 4, wd)); /* float32 dW */
    finite_diff(c, xf, wf, gf, xd, wd, yd, dx, dw);
    free(dx), free(dw), free(shape_only);
    free(x), free(w), free(b), free(g), free(xf), free(wf), free(bf32), free(gf);
}

static const conv_case cases[] = {
    {2, 3, 16, 20, 7, 2, 3, 1, 1, false}, /* ResNet's stem */
    {2, 16, 16, 9, 3, 1, 1, 1, 1, true},  /* a basic block's 3x3, with a bias */
    {2, 16, 32, 9, 3, 2, 1, 1, 1, false}, /* 3x3 stride 2 */
    {1, 16, 16, 30, 3, 1, 1, 1, 1, false}, /* a 30x30 plane: the weight gradient natively too */
    {2, 16, 32, 9, 1, 2, 0, 1, 1, false}, /* the 1x1 stride-2 downsample */
    {2, 24, 24, 10, 3, 1, 1, 1, 24, true}, /* MobileNet's depthwise */
    {1, 8, 8, 11, 3, 1, 2, 2, 1, false},  /* a dilation (DeepLab) */
    {2, 12, 8, 6, 3, 1, 1, 1, 4, false},  /* grouped */
};

static void test_conv_bf16_native(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv_all(&cases[i]);
}

/* On a CPU with AVX-512 oneDNN has jit kernels for bfloat16 (AVX512-BF16 or AMX, else
 * emulated): the native path is taken there (conv_lowp.c), not the copies. */
static void test_conv_bf16_path(void **state) {
    (void)state;
#if defined(OT_HAVE_DNNL) && defined(__x86_64__) && defined(__GNUC__)
    if (!__builtin_cpu_supports("avx512f")) skip();
    ot_node n = conv_node(OT_OP_CONV, &cases[1], 2);
    int64_t xd[4] = {2, 16, 9, 9}, wd[4] = {16, 16, 3, 3};
    ot_shape xs = ot_shape_make(4, xd), ws = ot_shape_make(4, wd);
    ot_conv3 p;
    ot_error e = {0};
    assert_int_equal(ot_conv3_init(&p, &n, &xs, &ws, &xs, &e), OT_OK);
    size_t bytes = 0;
    ot_dnnl_lowp_dtypes d = {OT_BF16, OT_BF16, OT_BF16, OT_UNDEFINED};
    assert_true(ot_dnnl_conv_lowp_workspace(&p, OT_DNNL_FWD, &d, &bytes));
    assert_true(ot_dnnl_conv_lowp_workspace(&p, OT_DNNL_BWD_DATA, &d, &bytes));
    /* the weight gradient at a 9x9 plane runs through copies (conv_dnnl.c's rule); at 28x28 natively */
    assert_false(ot_dnnl_conv_lowp_workspace(&p, OT_DNNL_BWD_WEIGHTS, &d, &bytes));
    int64_t xb[4] = {2, 16, 28, 28};
    ot_shape xbs = ot_shape_make(4, xb);
    assert_int_equal(ot_conv3_init(&p, &n, &xbs, &ws, &xbs, &e), OT_OK);
    assert_true(ot_dnnl_conv_lowp_workspace(&p, OT_DNNL_BWD_WEIGHTS, &d, &bytes));
    /* float16 and a float32 X are not the bfloat16 kernel's */
    ot_dnnl_lowp_dtypes h = {OT_F16, OT_F16, OT_F16, OT_UNDEFINED}, f = {OT_F32, OT_BF16, OT_BF16, OT_UNDEFINED};
    assert_false(ot_dnnl_conv_lowp_workspace(&p, OT_DNNL_FWD, &h, &bytes));
    assert_false(ot_dnnl_conv_lowp_workspace(&p, OT_DNNL_FWD, &f, &bytes));
    tk_node_free(&n);
#else
    skip();
#endif
}

/* ---- BatchNormalization ---------------------------------------------------------------- */

static void assert_rounded(const char *what, const uint16_t *y, const float *ref, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (y[i] != bf(ref[i])) fail_msg("%s element %lld: %04x vs %04x", what, (long long)i, y[i], bf(ref[i]));
}

static void bn_case(bool training, int64_t N, int64_t C, int64_t H, int threads) {
    int64_t xd[4] = {N, C, H, H}, cd[1] = {C}, nx = prod(4, xd);
    uint16_t *x, *dy, *y = malloc((size_t)nx * 2), *dx = malloc((size_t)nx * 2);
    float *xf, *dyf, *yf = malloc((size_t)nx * 4), *dxf = malloc((size_t)nx * 4);
    rand_bf(nx, &x, &xf);
    rand_bf(nx, &dy, &dyf);
    float sc[64], bi[64], rm[64], rv[64], om[2][64], ov[2][64], ds[2][64], db[2][64];
    for (int64_t c = 0; c < C; c++) sc[c] = rnd(), bi[c] = rnd(), rm[c] = rnd(), rv[c] = 1.0f + fabsf(rnd());
    ot_node n = tk_node(OT_OP_BATCH_NORM, 5, 3);
    ot_node_set_attr_int(&n, "training_mode", training);
    ot_node_set_attr_int(&n, "unbiased_running_var", 1);
    ot_tensor in[5] = {tk_ta(OT_BF16, x, 4, xd), tk_ta(OT_F32, sc, 1, cd), tk_ta(OT_F32, bi, 1, cd),
                       tk_ta(OT_F32, rm, 1, cd), tk_ta(OT_F32, rv, 1, cd)};
    ot_tensor out[3] = {tk_ta(OT_BF16, y, 4, xd), tk_ta(OT_F32, om[0], 1, cd), tk_ta(OT_F32, ov[0], 1, cd)};
    assert_true(ot_cpu_supports(&n, in, out));
    assert_int_equal(tk_run_kept(&n, in, out, threads, false, NULL), OT_OK);
    in[0] = tk_ta(OT_F32, xf, 4, xd);
    ot_tensor fout[3] = {tk_ta(OT_F32, yf, 4, xd), tk_ta(OT_F32, om[1], 1, cd), tk_ta(OT_F32, ov[1], 1, cd)};
    assert_int_equal(tk_run_kept(&n, in, fout, threads, false, NULL), OT_OK);
    assert_rounded("BatchNormalization", y, yf, nx);
    assert_memory_equal(om[0], om[1], (size_t)C * 4);
    assert_memory_equal(ov[0], ov[1], (size_t)C * 4);
    tk_node_free(&n);
    /* BatchNormGrad (dY, X, scale [, mean, var]) -> (dX, dScale, dBias) */
    n = tk_node(OT_OP_BATCH_NORM_GRAD, training ? 3 : 5, 3);
    ot_node_set_attr_int(&n, "training_mode", training);
    ot_tensor gin[5] = {tk_ta(OT_BF16, dy, 4, xd), tk_ta(OT_BF16, x, 4, xd), tk_ta(OT_F32, sc, 1, cd),
                        tk_ta(OT_F32, rm, 1, cd), tk_ta(OT_F32, rv, 1, cd)};
    ot_tensor gout[3] = {tk_ta(OT_BF16, dx, 4, xd), tk_ta(OT_F32, ds[0], 1, cd), tk_ta(OT_F32, db[0], 1, cd)};
    assert_true(ot_cpu_supports(&n, gin, gout));
    assert_int_equal(tk_run_kept(&n, gin, gout, threads, false, NULL), OT_OK);
    gin[0] = tk_ta(OT_F32, dyf, 4, xd), gin[1] = tk_ta(OT_F32, xf, 4, xd);
    ot_tensor fgout[3] = {tk_ta(OT_F32, dxf, 4, xd), tk_ta(OT_F32, ds[1], 1, cd), tk_ta(OT_F32, db[1], 1, cd)};
    assert_int_equal(tk_run_kept(&n, gin, fgout, threads, false, NULL), OT_OK);
    assert_rounded("BatchNormGrad", dx, dxf, nx);
    assert_memory_equal(ds[0], ds[1], (size_t)C * 4);
    assert_memory_equal(db[0], db[1], (size_t)C * 4);
    /* a float32 scale is required; mixed X and dY are refused by the table */
    gin[0] = tk_ta(OT_BF16, dy, 4, xd);
    assert_false(ot_cpu_supports(&n, gin, gout));
    tk_node_free(&n);
    free(x), free(dy), free(y), free(dx), free(xf), free(dyf), free(yf), free(dxf);
}

static void test_batch_norm_bf16(void **state) {
    (void)state;
    bn_case(true, 3, 6, 7, 1);
    bn_case(true, 4, 37, 9, 2); /* channel blocks of 4 with a tail; planes of 81 (a tail of 1) */
    bn_case(false, 2, 5, 6, 2);
    /* planes of 2209: past the kernels' float32 runs (2048 forward, 512 backward),
     * with a short last run and a plane tail of 1 */
    bn_case(true, 2, 5, 47, 2);
    bn_case(false, 1, 3, 47, 1);
}

/* ---- pools ----------------------------------------------------------------------------- */

static void pool_case(ot_op op, int64_t k, int64_t s, int64_t p, bool include_pad, int threads) {
    int64_t N = 2, C = 5, H = 11;
    bool global = op == OT_OP_GLOBAL_AVERAGE_POOL;
    int64_t oh = global ? 1 : (H + 2 * p - k) / s + 1;
    int64_t xd[4] = {N, C, H, H}, yd[4] = {N, C, oh, oh}, nx = prod(4, xd), ny = prod(4, yd);
    uint16_t *x, *dy, *y = malloc((size_t)ny * 2), *dx = malloc((size_t)nx * 2);
    float *xf, *dyf, *yf = malloc((size_t)ny * 4), *dxf = malloc((size_t)nx * 4);
    int64_t *ix = malloc((size_t)ny * 8), *ixf = malloc((size_t)ny * 8);
    rand_bf(nx, &x, &xf);
    rand_bf(ny, &dy, &dyf);
    bool max = op == OT_OP_MAX_POOL;
    ot_node n = tk_node(op, 1, max ? 2 : 1);
    int64_t ks[2] = {k, k}, st[2] = {s, s}, pd[4] = {p, p, p, p};
    if (!global) {
        ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
        ot_node_set_attr_ints(&n, "strides", st, 2);
        ot_node_set_attr_ints(&n, "pads", pd, 4);
        if (include_pad) ot_node_set_attr_int(&n, "count_include_pad", 1);
    }
    ot_tensor in[1] = {tk_ta(OT_BF16, x, 4, xd)}, fin[1] = {tk_ta(OT_F32, xf, 4, xd)};
    ot_tensor out[2] = {tk_ta(OT_BF16, y, 4, yd), tk_ta(OT_I64, ix, 4, yd)};
    ot_tensor fout[2] = {tk_ta(OT_F32, yf, 4, yd), tk_ta(OT_I64, ixf, 4, yd)};
    assert_true(ot_cpu_supports(&n, in, out));
    assert_int_equal(tk_run_kept(&n, in, out, threads, false, NULL), OT_OK);
    assert_int_equal(tk_run_kept(&n, fin, fout, threads, false, NULL), OT_OK);
    assert_rounded(ot_op_name(op), y, yf, ny);
    if (max) assert_memory_equal(ix, ixf, (size_t)ny * 8);
    tk_node_free(&n);
    if (!global) { /* the gradient (dY, X) -> dX */
        n = tk_node(max ? OT_OP_MAX_POOL_GRAD : OT_OP_AVERAGE_POOL_GRAD, 2, 1);
        ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
        ot_node_set_attr_ints(&n, "strides", st, 2);
        ot_node_set_attr_ints(&n, "pads", pd, 4);
        if (include_pad) ot_node_set_attr_int(&n, "count_include_pad", 1);
        ot_tensor gin[2] = {tk_ta(OT_BF16, dy, 4, yd), tk_ta(OT_BF16, x, 4, xd)};
        ot_tensor fgin[2] = {tk_ta(OT_F32, dyf, 4, yd), tk_ta(OT_F32, xf, 4, xd)};
        ot_tensor gout[1] = {tk_ta(OT_BF16, dx, 4, xd)}, fgout[1] = {tk_ta(OT_F32, dxf, 4, xd)};
        assert_true(ot_cpu_supports(&n, gin, gout));
        assert_int_equal(tk_run_kept(&n, gin, gout, threads, false, NULL), OT_OK);
        assert_int_equal(tk_run_kept(&n, fgin, fgout, threads, false, NULL), OT_OK);
        assert_rounded(ot_op_name(n.op), dx, dxf, nx);
        tk_node_free(&n);
    }
    free(x), free(dy), free(y), free(dx), free(xf), free(dyf), free(yf), free(dxf), free(ix), free(ixf);
}

static void test_pools_bf16(void **state) {
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        pool_case(OT_OP_MAX_POOL, 3, 2, 1, false, threads); /* ResNet's stem pool */
        pool_case(OT_OP_AVERAGE_POOL, 3, 2, 1, false, threads);
        pool_case(OT_OP_AVERAGE_POOL, 2, 1, 1, true, threads);
        pool_case(OT_OP_GLOBAL_AVERAGE_POOL, 0, 0, 0, false, threads);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_bf16_native),
        cmocka_unit_test(test_conv_bf16_path),
        cmocka_unit_test(test_batch_norm_bf16),
        cmocka_unit_test(test_pools_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
