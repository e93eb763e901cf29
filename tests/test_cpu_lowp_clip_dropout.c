/* test_cpu_lowp_clip_dropout.c — Clip, ClipGrad, Dropout and DropoutGrad with
 * bfloat16 / float16 tensors on the CPU (issue 27; kernels/cpu/cpu_lowp.c). Each gives
 * the bits of the float32 fallback autocast used before: the float32 kernel on the
 * widened inputs, its float32 output rounded to nearest even (as the Cast down that
 * followed it rounded it). Clip: bounds as attributes, as float32 inputs and as inputs
 * of the low dtype, representable or not (Clip's forward commutes with the rounding,
 * so a rounded bound changes no bit); inputs on the bounds, NaN and infinities.
 * ClipGrad: float32 and representable low bounds. Dropout: the same mask as the
 * float32 kernel for the same seed, step and node, the kept values scaled in float32
 * and rounded, on 1 and 2 threads; DropoutGrad regenerates that mask; inference mode
 * copies. The op table answers for the low dtypes. */
#include <math.h>

#include "kernels/half_float.h"
#include "test_kernels_cpu_util.h"
#include "kernels/cpu/cpu_common.h"

#define N 20011 /* several chunks of 4096 and Dropout blocks of 256, a ragged tail */

static uint16_t to_lp(ot_dtype t, float v) { return t == OT_BF16 ? ot_hf_f32_to_bf16(v) : ot_hf_f32_to_f16(v); }
static float from_lp(ot_dtype t, uint16_t h) { return t == OT_BF16 ? ot_hf_bf16_to_f32(h) : ot_hf_f16_to_f32(h); }

/* x in [-8, 8) rounded to t, with the bounds' neighbourhood and the specials planted */
static void fill(ot_dtype t, uint16_t *h, float *f, float lo, float hi) {
    uint32_t s = 12345u;
    for (int64_t i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        h[i] = to_lp(t, (float)(s >> 8) / 1048576.0f - 8.0f);
    }
    const float special[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 6.0f, 6.1f, 6.125f, 6.09375f, 5.99f, -1.0f};
    for (int k = 0; k < (int)(sizeof special / sizeof special[0]); k++) h[97 * k + 3] = to_lp(t, special[k]);
    h[5000] = to_lp(t, lo), h[5001] = to_lp(t, hi);
    for (int64_t i = 0; i < N; i++) f[i] = from_lp(t, h[i]);
}

static void expect_rounded(ot_dtype t, const uint16_t *y, const float *yref, const char *what) {
    for (int64_t i = 0; i < N; i++)
        if (y[i] != to_lp(t, yref[i]))
            fail_msg("%s %s element %lld: %04x vs %04x (%.9g)", what, ot_dtype_name(t), (long long)i, y[i],
                     to_lp(t, yref[i]), yref[i]);
}

/* bound forms: 0 attributes, 1 float32 inputs, 2 inputs of the low dtype */
static void check_clip(ot_dtype t, float lo, float hi, int form) {
    ot_node n = tk_node(OT_OP_CLIP, form ? 3 : 1, 1);
    if (!form) ot_node_set_attr_float(&n, "min", lo), ot_node_set_attr_float(&n, "max", hi);
    uint16_t *x = malloc(N * 2), *y = malloc(N * 2), *y1 = malloc(N * 2);
    float *xf = malloc(N * 4), *yref = malloc(N * 4);
    fill(t, x, xf, lo, hi);
    float flo = lo, fhi = hi;
    uint16_t llo = to_lp(t, lo), lhi = to_lp(t, hi);
    ot_tensor in[3] = {tk_t(t, x, 1, N), tk_absent(), tk_absent()}, out[1] = {tk_t(t, y, 1, N)};
    ot_tensor fin[3] = {tk_t(OT_F32, xf, 1, N), tk_t(OT_F32, &flo, 0), tk_t(OT_F32, &fhi, 0)};
    ot_tensor fout[1] = {tk_t(OT_F32, yref, 1, N)};
    if (form == 1) in[1] = fin[1], in[2] = fin[2];
    if (form == 2) in[1] = tk_t(t, &llo, 0), in[2] = tk_t(t, &lhi, 0);
    assert_true(ot_cpu_supports(&n, in, out));
    assert_int_equal(tk_run(&n, fin, fout), OT_OK); /* the fallback: float32 bounds as given */
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    expect_rounded(t, y, yref, "Clip");
    out[0].data = y1;
    assert_int_equal(tk_run_ex(&n, in, out, 1, 1, 0, 0, NULL), OT_OK);
    assert_memory_equal(y, y1, N * 2);
    free(x), free(y), free(y1), free(xf), free(yref);
    tk_node_free(&n);
}

/* ClipGrad (dY, X, min, max) with bounds t_b (float32 or the low dtype t) */
static void check_clip_grad(ot_dtype t, float lo, float hi, ot_dtype t_b) {
    ot_node n = tk_node(OT_OP_CLIP_GRAD, 4, 1);
    uint16_t *dy = malloc(N * 2), *x = malloc(N * 2), *dx = malloc(N * 2);
    float *dyf = malloc(N * 4), *xf = malloc(N * 4), *dxref = malloc(N * 4);
    fill(t, x, xf, lo, hi);
    for (int64_t i = 0; i < N; i++) dyf[i] = from_lp(t, dy[i] = to_lp(t, 0.37f * (float)(i % 101) - 17.0f));
    float flo = lo, fhi = hi;
    uint16_t llo = to_lp(t, lo), lhi = to_lp(t, hi);
    ot_tensor in[4] = {tk_t(t, dy, 1, N), tk_t(t, x, 1, N), tk_t(OT_F32, &flo, 0), tk_t(OT_F32, &fhi, 0)};
    if (t_b != OT_F32) in[2] = tk_t(t, &llo, 0), in[3] = tk_t(t, &lhi, 0);
    ot_tensor out[1] = {tk_t(t, dx, 1, N)};
    ot_tensor fin[4] = {tk_t(OT_F32, dyf, 1, N), tk_t(OT_F32, xf, 1, N), tk_t(OT_F32, &flo, 0), tk_t(OT_F32, &fhi, 0)};
    ot_tensor fout[1] = {tk_t(OT_F32, dxref, 1, N)};
    assert_true(ot_cpu_supports(&n, in, out));
    assert_int_equal(tk_run(&n, fin, fout), OT_OK);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    expect_rounded(t, dx, dxref, "ClipGrad");
    /* a planted x == max passes nothing, as in float32 (PyTorch's hardtanh rule) */
    if (from_lp(t, lhi) == hi) assert_int_equal(dx[5001] & 0x7fff, 0);
    free(dy), free(x), free(dx), free(dyf), free(xf), free(dxref);
    tk_node_free(&n);
}

static void test_clip_lowp(void **state) {
    (void)state;
    const ot_dtype ts[2] = {OT_BF16, OT_F16};
    for (int k = 0; k < 2; k++) {
        for (int form = 0; form < 3; form++) {
            check_clip(ts[k], 0.0f, 6.0f, form);  /* ReLU6 */
            check_clip(ts[k], -1.3f, 6.1f, form); /* bounds no low dtype holds: rounded in form 2 */
        }
        check_clip_grad(ts[k], 0.0f, 6.0f, OT_F32);
        check_clip_grad(ts[k], 0.0f, 6.0f, ts[k]);
        check_clip_grad(ts[k], -1.3f, 6.1f, OT_F32);
    }
}

/* Dropout (ratio 0.3, training) and its gradient on node key 17, step 5 */
static void check_dropout(ot_dtype t, bool training) {
    ot_node n = tk_node(OT_OP_DROPOUT, 1, 2), g = tk_node(OT_OP_DROPOUT_GRAD, 2, 1);
    ot_node_set_attr_float(&n, "ratio", 0.3f);
    ot_node_set_attr_int(&n, "training_mode", training);
    ot_node_set_attr_float(&g, "ratio", 0.3f);
    ot_node_set_attr_int(&g, "training_mode", 1);
    ot_node_set_attr_int(&g, "rng_node", 17);
    uint16_t *x = malloc(N * 2), *y = malloc(N * 2), *y1 = malloc(N * 2), *dx = malloc(N * 2);
    float *xf = malloc(N * 4), *yref = malloc(N * 4), *dxref = malloc(N * 4);
    uint8_t *m = malloc(N), *mref = malloc(N);
    fill(t, x, xf, 0.0f, 6.0f);
    ot_tensor in[1] = {tk_t(t, x, 1, N)}, out[2] = {tk_t(t, y, 1, N), tk_t(OT_BOOL, m, 1, N)};
    ot_tensor fin[1] = {tk_t(OT_F32, xf, 1, N)}, fout[2] = {tk_t(OT_F32, yref, 1, N), tk_t(OT_BOOL, mref, 1, N)};
    assert_true(ot_cpu_supports(&n, in, out));
    assert_int_equal(tk_run_ex(&n, fin, fout, 2, 99, 5, 17, NULL), OT_OK);
    assert_int_equal(tk_run_ex(&n, in, out, 2, 99, 5, 17, NULL), OT_OK);
    expect_rounded(t, y, yref, "Dropout");
    assert_memory_equal(m, mref, N);
    int kept = 0;
    for (int64_t i = 0; i < N; i++) kept += m[i];
    if (training) assert_true(kept > N / 2 && kept < N * 9 / 10);
    else assert_int_equal(kept, N), assert_memory_equal(x, y, N * 2);
    out[0].data = y1; /* one thread: the same bits */
    assert_int_equal(tk_run_ex(&n, in, out, 1, 99, 5, 17, NULL), OT_OK);
    assert_memory_equal(y, y1, N * 2);
    if (training) { /* DropoutGrad (dY, dY) with dY = x: the forward's mask and scale again */
        ot_tensor gin[2] = {tk_t(t, x, 1, N), tk_t(t, x, 1, N)}, gout[1] = {tk_t(t, dx, 1, N)};
        ot_tensor fgin[2] = {tk_t(OT_F32, xf, 1, N), tk_t(OT_F32, xf, 1, N)}, fgout[1] = {tk_t(OT_F32, dxref, 1, N)};
        assert_true(ot_cpu_supports(&g, gin, gout));
        assert_int_equal(tk_run_ex(&g, fgin, fgout, 2, 99, 5, 17, NULL), OT_OK);
        assert_int_equal(tk_run_ex(&g, gin, gout, 2, 99, 5, 17, NULL), OT_OK);
        expect_rounded(t, dx, dxref, "DropoutGrad");
        assert_memory_equal(dx, y, N * 2);
    }
    free(x), free(y), free(y1), free(dx), free(xf), free(yref), free(dxref), free(m), free(mref);
    tk_node_free(&n);
    tk_node_free(&g);
}

static void test_dropout_lowp(void **state) {
    (void)state;
    check_dropout(OT_BF16, true);
    check_dropout(OT_F16, true);
    check_dropout(OT_BF16, false);
}

/* mixed dtypes are refused (autocast then keeps the float32 fallback) */
static void test_mixed_refused(void **state) {
    (void)state;
    uint16_t d[4] = {0};
    ot_node n = tk_node(OT_OP_DROPOUT, 1, 1), c = tk_node(OT_OP_CLIP, 1, 1), g = tk_node(OT_OP_CLIP_GRAD, 2, 1);
    ot_tensor a[2] = {tk_t(OT_BF16, d, 1, 4), tk_t(OT_F16, d, 1, 4)}, y[1] = {tk_t(OT_F32, d, 1, 2)};
    assert_false(ot_cpu_supports(&n, a, y));
    assert_false(ot_cpu_supports(&c, a, y));
    y[0].dtype = OT_BF16;
    assert_false(ot_cpu_supports(&g, a, y));
    tk_node_free(&n), tk_node_free(&c), tk_node_free(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clip_lowp),
        cmocka_unit_test(test_dropout_lowp),
        cmocka_unit_test(test_mixed_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
