/* test_cpu_lowp.c — the CPU ops that run bfloat16 / float16 through their float32
 * kernels (issue 27, kernels/cpu/cpu_lowp.c): Conv, ConvGradInput, ConvGradWeight and
 * ConvTranspose, and the element-wise ops (Add .. Div with and without broadcasting,
 * Relu, Gelu, Tanh, ..., their gradients). Each gives exactly the float32 kernel's
 * result on the rounded inputs, rounded to nearest even (the documented contract): the
 * float16 convolutions and ConvTranspose on our kernels and on oneDNN's (a 3x3
 * 64-channel shape its rule picks), with a float32 or a low-precision output; the
 * bfloat16 Conv and its gradients run oneDNN's bfloat16 kernels where the CPU has them
 * (conv_lowp.c: float32 sums in its own order), so they are held to that result within
 * the output's rounding instead (test_conv_lowp checks them further); the element-wise ops chunk by chunk on 1
 * and 2 threads alike; the same bits twice; the op table answers for the
 * low-precision dtypes; the planned workspace suffices. */
#include <math.h>

#include "kernels/half_float.h"
#include "test_kernels_cpu_util.h"
#include "kernels/cpu/cpu_common.h"

static uint32_t seed = 777u;
static float rnd(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)((int)(seed >> 9) % 2001 - 1000) / 731.0f;
}
static uint16_t to_lp(ot_dtype t, float v) { return t == OT_BF16 ? ot_hf_f32_to_bf16(v) : ot_hf_f32_to_f16(v); }
static float from_lp(ot_dtype t, uint16_t h) { return t == OT_BF16 ? ot_hf_bf16_to_f32(h) : ot_hf_f16_to_f32(h); }

static int64_t numel4(const int64_t *d) { return d[0] * d[1] * d[2] * d[3]; }

/* op with two read inputs of dims d0, d1, a shape-only third (dims d2, or none) and
 * output dims dy: the low-precision run against the float32 kernel on the rounded
 * inputs, rounded. */
static void check_op(ot_op op, ot_dtype t, ot_dtype yt, const int64_t *d0, const int64_t *d1, const int64_t *d2,
                     const int64_t *dy, int64_t k, int64_t s, int64_t p, bool dnnl) {
    ot_node n = tk_node(op, d2 ? 3 : 2, 1);
    int64_t ks[2] = {k, k}, st[2] = {s, s}, pd[4] = {p, p, p, p};
    ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
    ot_node_set_attr_ints(&n, "strides", st, 2);
    ot_node_set_attr_ints(&n, "pads", pd, 4);
    int64_t n0 = numel4(d0), n1 = numel4(d1), ny = numel4(dy), n2 = d2 ? numel4(d2) : 1;
    uint16_t *a = malloc((size_t)n0 * 2), *b = malloc((size_t)n1 * 2), *c = calloc((size_t)n2, 2);
    float *af = malloc((size_t)n0 * 4), *bf = malloc((size_t)n1 * 4), *cf = calloc((size_t)n2, 4);
    float *yref = malloc((size_t)ny * 4);
    void *y = malloc((size_t)ny * 4), *y2 = malloc((size_t)ny * 4);
    for (int64_t i = 0; i < n0; i++) af[i] = from_lp(t, a[i] = to_lp(t, rnd()));
    for (int64_t i = 0; i < n1; i++) bf[i] = from_lp(t, b[i] = to_lp(t, rnd()));
    ot_tensor in[3] = {tk_ta(t, a, 4, d0), tk_ta(t, b, 4, d1), d2 ? tk_ta(t, c, 4, d2) : tk_absent()};
    ot_tensor out[1] = {tk_ta(yt, y, 4, dy)};
    ot_tensor fin[3] = {tk_ta(OT_F32, af, 4, d0), tk_ta(OT_F32, bf, 4, d1),
                        d2 ? tk_ta(OT_F32, cf, 4, d2) : tk_absent()};
    ot_tensor fout[1] = {tk_ta(OT_F32, yref, 4, dy)};
    assert_true(ot_cpu_supports(&n, in, out));
    void *slot = NULL, *fslot = NULL;
    assert_int_equal(tk_run_kept(&n, fin, fout, 2, !dnnl, &fslot), OT_OK);
    assert_int_equal(tk_run_kept(&n, in, out, 2, !dnnl, &slot), OT_OK);
    /* bfloat16 convolutions (oneDNN's own sums): within the output's rounding */
    bool near = t == OT_BF16 && op != OT_OP_CONV_TRANSPOSE;
    double big = 0.0;
    for (int64_t i = 0; i < ny; i++) big = fabs(yref[i]) > big ? fabs(yref[i]) : big;
    for (int64_t i = 0; i < ny && near; i++) {
        double v = yt == OT_F32 ? ((float *)y)[i] : from_lp(yt, ((uint16_t *)y)[i]);
        if (fabs(v - yref[i]) > 4e-3 * fabs(yref[i]) + 1e-5 * big)
            fail_msg("%s element %lld: %.9g vs %.9g", ot_op_name(op), (long long)i, v, yref[i]);
    }
    for (int64_t i = 0; i < ny && !near; i++) {
        if (yt == OT_F32) {
            if (((float *)y)[i] != yref[i]) fail_msg("%s element %lld: %.9g vs %.9g", ot_op_name(op), (long long)i,
                                                     ((float *)y)[i], yref[i]);
        } else if (((uint16_t *)y)[i] != to_lp(yt, yref[i])) {
            fail_msg("%s element %lld: %04x vs %04x", ot_op_name(op), (long long)i, ((uint16_t *)y)[i],
                     to_lp(yt, yref[i]));
        }
    }
    out[0].data = y2;
    assert_int_equal(tk_run_kept(&n, in, out, 2, !dnnl, &slot), OT_OK);
    assert_memory_equal(y, y2, (size_t)ny * ot_dtype_size(yt));
    tk_state_free(&slot), tk_state_free(&fslot);
    free(a), free(b), free(c), free(af), free(bf), free(cf), free(yref), free(y), free(y2);
    tk_node_free(&n);
}

static void all_dirs(ot_dtype t, ot_dtype yt, int64_t N, int64_t C, int64_t O, int64_t H, int64_t k, int64_t s,
                     int64_t p, bool dnnl) {
    int64_t oh = (H + 2 * p - k) / s + 1;
    int64_t xd[4] = {N, C, H, H}, wd[4] = {O, C, k, k}, yd[4] = {N, O, oh, oh};
    check_op(OT_OP_CONV, t, yt, xd, wd, NULL, yd, k, s, p, dnnl);
    check_op(OT_OP_CONV_GRAD_INPUT, t, yt, yd, wd, xd, xd, k, s, p, dnnl);
    check_op(OT_OP_CONV_GRAD_WEIGHT, t, yt, yd, xd, wd, wd, k, s, p, dnnl);
}

static void test_conv_bf16(void **state) {
    (void)state;
    all_dirs(OT_BF16, OT_BF16, 2, 3, 5, 9, 3, 2, 1, false);
    all_dirs(OT_BF16, OT_F32, 2, 4, 6, 7, 3, 1, 1, false);
}

static void test_conv_f16(void **state) {
    (void)state;
    all_dirs(OT_F16, OT_F16, 2, 3, 5, 9, 3, 2, 1, false);
    all_dirs(OT_F16, OT_F32, 1, 2, 3, 6, 1, 1, 0, false);
}

/* a shape conv_dnnl.c's rule sends to oneDNN: the float32 kernel there is oneDNN's */
static void test_conv_bf16_dnnl(void **state) {
    (void)state;
    all_dirs(OT_BF16, OT_BF16, 1, 64, 64, 8, 3, 1, 1, true);
}

static void test_conv_transpose_bf16(void **state) {
    (void)state;
    /* ConvTranspose (X, W) -> Y is ConvGradInput's computation with X as dY */
    int64_t xd[4] = {2, 4, 5, 5}, wd[4] = {4, 3, 3, 3}, yd[4] = {2, 3, 9, 9};
    check_op(OT_OP_CONV_TRANSPOSE, OT_BF16, OT_BF16, xd, wd, NULL, yd, 3, 2, 1, false);
}

static void test_conv_mixed_refused(void **state) {
    (void)state;
    uint16_t d[16] = {0};
    ot_node n = tk_node(OT_OP_CONV, 2, 1);
    int64_t x[4] = {1, 1, 2, 2}, w[4] = {1, 1, 1, 1};
    ot_tensor in[2] = {tk_ta(OT_BF16, d, 4, x), tk_ta(OT_F16, d, 4, w)}, out[1] = {tk_ta(OT_BF16, d, 4, x)};
    assert_false(ot_cpu_supports(&n, in, out));
    in[1].dtype = OT_BF16;
    out[0].dtype = OT_F16;
    assert_false(ot_cpu_supports(&n, in, out));
    tk_node_free(&n);
}

/* node op over inputs of dims (broadcast allowed) into out dims, dtype t throughout:
 * bitwise the float32 kernel on the rounded inputs, rounded, on 1 and 2 threads. */
static void check_elem(ot_op op, ot_dtype t, int n_in, const int64_t *const *dims, const int *ranks, int yrank,
                       const int64_t *ydims, bool positive) {
    ot_node n = tk_node(op, n_in, 1);
    if (op == OT_OP_GELU) ot_node_set_attr_string(&n, "approximate", "tanh");
    ot_tensor in[3], fin[3], out[1], fout[1];
    void *bufs[8] = {0};
    int nb = 0;
    for (int k = 0; k < n_in; k++) {
        int64_t cnt = 1;
        for (int d = 0; d < ranks[k]; d++) cnt *= dims[k][d];
        uint16_t *h = malloc((size_t)cnt * 2);
        float *f = malloc((size_t)cnt * 4);
        for (int64_t i = 0; i < cnt; i++) {
            float v = rnd();
            if (positive) v = fabsf(v) + 0.25f;
            f[i] = from_lp(t, h[i] = to_lp(t, v));
        }
        bufs[nb++] = h, bufs[nb++] = f;
        in[k] = (ot_tensor){.dtype = t, .shape = ot_shape_make(ranks[k], dims[k]), .data = h, .nbytes = (size_t)cnt * 2};
        fin[k] = (ot_tensor){.dtype = OT_F32, .shape = in[k].shape, .data = f, .nbytes = (size_t)cnt * 4};
    }
    int64_t ny = 1;
    for (int d = 0; d < yrank; d++) ny *= ydims[d];
    uint16_t *y = malloc((size_t)ny * 2), *y1 = malloc((size_t)ny * 2);
    float *yref = malloc((size_t)ny * 4);
    out[0] = (ot_tensor){.dtype = t, .shape = ot_shape_make(yrank, ydims), .data = y, .nbytes = (size_t)ny * 2};
    fout[0] = (ot_tensor){.dtype = OT_F32, .shape = out[0].shape, .data = yref, .nbytes = (size_t)ny * 4};
    assert_true(ot_cpu_supports(&n, in, out));
    assert_int_equal(tk_run_kept(&n, fin, fout, 2, true, NULL), OT_OK);
    assert_int_equal(tk_run_kept(&n, in, out, 2, true, NULL), OT_OK);
    for (int64_t i = 0; i < ny; i++)
        if (y[i] != to_lp(t, yref[i]))
            fail_msg("%s %s element %lld: %04x vs %04x (%.9g)", ot_op_name(op), ot_dtype_name(t), (long long)i, y[i],
                     to_lp(t, yref[i]), yref[i]);
    /* one thread: the same bits */
    ot_kernel_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.n_threads = 1;
    ctx.workspace_bytes = ot_cpu_workspace_bytes(&n, in, out);
    ctx.workspace = ctx.workspace_bytes ? malloc(ctx.workspace_bytes) : NULL;
    out[0].data = y1;
    ot_error e = {0};
    assert_int_equal(ot_cpu_run_node(&n, in, out, &ctx, &e), OT_OK);
    assert_memory_equal(y, y1, (size_t)ny * 2);
    free(ctx.workspace);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    free(y), free(y1), free(yref);
    tk_node_free(&n);
}

static void test_elementwise_lowp(void **state) {
    (void)state;
    /* 3 x 50000 elements: more than one chunk, several threads' worth, a ragged tail */
    const int64_t big[2] = {3, 50001}, row[1] = {50001};
    const int64_t *same[3] = {big, big, big}, *bc[2] = {big, row};
    const int r2[3] = {2, 2, 2}, rb[2] = {2, 1};
    const ot_dtype ts[2] = {OT_BF16, OT_F16};
    for (int k = 0; k < 2; k++) {
        ot_dtype t = ts[k];
        const ot_op bin[4] = {OT_OP_ADD, OT_OP_SUB, OT_OP_MUL, OT_OP_DIV};
        for (int i = 0; i < 4; i++) {
            check_elem(bin[i], t, 2, same, r2, 2, big, bin[i] == OT_OP_DIV);
            check_elem(bin[i], t, 2, bc, rb, 2, big, bin[i] == OT_OP_DIV); /* broadcast: the copies path */
        }
        const ot_op un[6] = {OT_OP_RELU, OT_OP_GELU, OT_OP_TANH, OT_OP_SIGMOID, OT_OP_ERF, OT_OP_EXP};
        for (int i = 0; i < 6; i++) check_elem(un[i], t, 1, same, r2, 2, big, false);
        const ot_op gr[5] = {OT_OP_RELU_GRAD, OT_OP_GELU_GRAD, OT_OP_TANH_GRAD, OT_OP_SIGMOID_GRAD, OT_OP_ERF_GRAD};
        for (int i = 0; i < 5; i++) check_elem(gr[i], t, 2, same, r2, 2, big, false);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_bf16),          cmocka_unit_test(test_conv_f16),
        cmocka_unit_test(test_conv_bf16_dnnl),     cmocka_unit_test(test_conv_transpose_bf16),
        cmocka_unit_test(test_conv_mixed_refused), cmocka_unit_test(test_elementwise_lowp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
