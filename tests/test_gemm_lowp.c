/* test_gemm_lowp.c — the CPU's bfloat16 / float16 Gemm and MatMul (issue 27,
 * kernels/cpu/gemm_lowp.c) and the Cast between float32, float16 and bfloat16.
 * Every product is checked against a float64 reference of the rounded inputs, with
 * the bound of a float32 sum of K products (plus one rounding when Y is low
 * precision); odd shapes, all four transposes, alpha and beta with a broadcast C,
 * batch broadcast and 1-D operands of MatMul; the same bits twice for a fixed thread
 * count, with the node's kept state and without; the op table's dtype answers; Cast's
 * round to nearest even, NaN, overflow and float16 subnormals. */
#include <omp.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/gemm_lowp.h"
#include "kernels/half_float.h"
#include "test_kernels_cpu_util.h"

static uint32_t rng_state = 12345u;
static float rnd(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((int)(rng_state >> 9) % 2001 - 1000) / 613.0f;
}

static uint16_t to_lp(ot_dtype t, float v) { return t == OT_BF16 ? ot_hf_f32_to_bf16(v) : ot_hf_f32_to_f16(v); }
static double from_lp(ot_dtype t, uint16_t h) { return t == OT_BF16 ? ot_hf_bf16_to_f32(h) : ot_hf_f16_to_f32(h); }

static uint16_t *lp_random(ot_dtype t, int64_t n) {
    uint16_t *p = malloc((size_t)(n > 0 ? n : 1) * 2);
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) p[i] = to_lp(t, rnd());
    return p;
}

static double y_at(ot_dtype t, const void *y, int64_t i) {
    return t == OT_F32 ? ((const float *)y)[i] : from_lp(t, ((const uint16_t *)y)[i]);
}

/* |y - ref| within the float32 sum's bound: K products and K - 1 additions each
 * rounding by 2^-24 relative at most of the running sum of |terms| (oneDNN may split
 * K, which changes the order but not the bound), plus Y's own rounding. */
static void check_close(ot_dtype yt, const void *y, int64_t i, double ref, double absum, int64_t K) {
    double got = y_at(yt, y, i);
    double bound = (double)(K + 2) * ldexp(1.0, -24) * absum + 1e-30;
    if (yt == OT_BF16) bound += fabs(ref) * ldexp(1.0, -8);
    if (yt == OT_F16) bound += fabs(ref) * ldexp(1.0, -11);
    if (!(fabs(got - ref) <= bound))
        fail_msg("element %lld: got %.9g, reference %.9g, bound %.3g", (long long)i, got, ref, bound);
}

/* Gemm: Y = alpha op(A) op(B) + beta C, C of shape cdims broadcast (NULL: none). */
static void gemm_case(ot_dtype t, ot_dtype yt, ot_dtype ct, bool ta, bool tb, int M, int N, int K, float alpha,
                      float beta, int crank, const int *cdims) {
    ot_node n = tk_node(OT_OP_GEMM, crank ? 3 : 2, 1);
    ot_node_set_attr_int(&n, "transA", ta);
    ot_node_set_attr_int(&n, "transB", tb);
    ot_node_set_attr_float(&n, "alpha", alpha);
    ot_node_set_attr_float(&n, "beta", beta);
    uint16_t *a = lp_random(t, (int64_t)M * K), *b = lp_random(t, (int64_t)K * N);
    int cn = crank == 0 ? 0 : crank == 1 ? cdims[0] : cdims[0] * cdims[1];
    void *c = malloc((size_t)(cn ? cn : 1) * 4);
    for (int i = 0; i < cn; i++) {
        float v = rnd();
        if (ct == OT_F32) ((float *)c)[i] = v;
        else ((uint16_t *)c)[i] = to_lp(ct, v);
    }
    void *y = malloc((size_t)M * N * ot_dtype_size(yt)), *y2 = malloc((size_t)M * N * ot_dtype_size(yt));
    ot_tensor in[3] = {ta ? tk_t(t, a, 2, K, M) : tk_t(t, a, 2, M, K), tb ? tk_t(t, b, 2, N, K) : tk_t(t, b, 2, K, N),
                       crank == 1 ? tk_t(ct, c, 1, cdims[0]) : tk_t(ct, c, 2, crank ? cdims[0] : 1, crank ? cdims[1] : 1)};
    ot_tensor out[1] = {tk_t(yt, y, 2, M, N)};
    assert_true(ot_cpu_supports(&n, in, out));
    void *slot = NULL;
    assert_int_equal(tk_run_kept(&n, in, out, 2, false, &slot), OT_OK);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, as = 0;
            for (int k = 0; k < K; k++) {
                double av = from_lp(t, ta ? a[k * M + i] : a[i * K + k]);
                double bv = from_lp(t, tb ? b[j * K + k] : b[k * N + j]);
                s += av * bv;
                as += fabs(av * bv);
            }
            double ref = alpha * s;
            as *= fabs(alpha);
            if (crank) {
                int ci = crank == 1 ? j % cdims[0] : (i % cdims[0]) * cdims[1] + (j % cdims[1]);
                double cv = ct == OT_F32 ? ((float *)c)[ci] : from_lp(ct, ((uint16_t *)c)[ci]);
                double bc = beta * cv;
                /* a low-precision Y holds beta C rounded first (cpu_matmul.c) */
                if (yt != OT_F32) bc = from_lp(yt, to_lp(yt, (float)bc));
                ref += bc;
                as += fabs(bc);
            }
            check_close(yt, y, (int64_t)i * N + j, ref, as, K);
        }
    /* the same bits again, with the kept primitive and with a fresh one */
    out[0].data = y2;
    assert_int_equal(tk_run_kept(&n, in, out, 2, false, &slot), OT_OK);
    assert_memory_equal(y, y2, (size_t)M * N * ot_dtype_size(yt));
    memset(y2, 0, (size_t)M * N * ot_dtype_size(yt));
    assert_int_equal(tk_run_kept(&n, in, out, 2, false, NULL), OT_OK);
    assert_memory_equal(y, y2, (size_t)M * N * ot_dtype_size(yt));
    tk_state_free(&slot);
    free(a), free(b), free(c), free(y), free(y2);
    tk_node_free(&n);
}

static void test_gemm_bf16_transposes(void **state) {
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            gemm_case(OT_BF16, OT_F32, OT_F32, ta, tb, 7, 13, 33, 1.0f, 0.0f, 0, NULL);
            gemm_case(OT_BF16, OT_BF16, OT_F32, ta, tb, 17, 5, 64, 0.5f, 0.0f, 0, NULL);
        }
}

static void test_gemm_bias(void **state) {
    (void)state;
    const int row[1] = {11}, col[2] = {9, 1}, full[2] = {9, 11};
    gemm_case(OT_BF16, OT_F32, OT_F32, false, true, 9, 11, 40, 1.0f, 1.0f, 1, row);
    gemm_case(OT_BF16, OT_BF16, OT_BF16, true, false, 9, 11, 40, 2.0f, 0.5f, 2, col);
    gemm_case(OT_F16, OT_F32, OT_F16, false, true, 9, 11, 40, 1.0f, 1.0f, 2, full);
    gemm_case(OT_F16, OT_F16, OT_F32, true, true, 9, 11, 40, 0.25f, -1.0f, 1, row);
}

static void test_gemm_f16_transposes(void **state) {
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            gemm_case(OT_F16, OT_F32, OT_F32, ta, tb, 6, 19, 31, 1.0f, 0.0f, 0, NULL);
            gemm_case(OT_F16, OT_F16, OT_F32, ta, tb, 33, 3, 70, 1.0f, 0.0f, 0, NULL);
        }
}

/* A large enough product that both threads share it (and oneDNN may split K). */
static void test_gemm_big_repeatable(void **state) {
    (void)state;
    gemm_case(OT_BF16, OT_F32, OT_F32, false, false, 96, 200, 384, 1.0f, 0.0f, 0, NULL);
    gemm_case(OT_BF16, OT_BF16, OT_F32, false, true, 64, 160, 512, 1.0f, 0.0f, 0, NULL);
    gemm_case(OT_F16, OT_F32, OT_F32, true, false, 80, 96, 300, 1.0f, 0.0f, 0, NULL);
}

/* MatMul of a (ra dims) by b (rb dims): numpy semantics, y (ry dims). */
static void matmul_case(ot_dtype t, ot_dtype yt, int ra, const int *ad, int rb, const int *bd, int ry, const int *yd) {
    ot_node n = tk_node(OT_OP_MATMUL, 2, 1);
    int64_t na = 1, nb = 1, ny = 1;
    for (int i = 0; i < ra; i++) na *= ad[i];
    for (int i = 0; i < rb; i++) nb *= bd[i];
    for (int i = 0; i < ry; i++) ny *= yd[i];
    uint16_t *a = lp_random(t, na), *b = lp_random(t, nb);
    void *y = calloc((size_t)ny, ot_dtype_size(yt)), *y2 = calloc((size_t)ny, ot_dtype_size(yt));
    int64_t sa[OT_MAX_RANK], sb[OT_MAX_RANK], sy[OT_MAX_RANK];
    ot_tensor in[2], out[1];
    memset(in, 0, sizeof in), memset(out, 0, sizeof out);
    for (int i = 0; i < ra; i++) sa[i] = ad[i];
    for (int i = 0; i < rb; i++) sb[i] = bd[i];
    for (int i = 0; i < ry; i++) sy[i] = yd[i];
    in[0] = (ot_tensor){.dtype = t, .shape = ot_shape_make(ra, sa), .data = a, .nbytes = (size_t)na * 2};
    in[1] = (ot_tensor){.dtype = t, .shape = ot_shape_make(rb, sb), .data = b, .nbytes = (size_t)nb * 2};
    out[0] = (ot_tensor){.dtype = yt, .shape = ot_shape_make(ry, sy), .data = y, .nbytes = (size_t)ny * ot_dtype_size(yt)};
    assert_true(ot_cpu_supports(&n, in, out));
    void *slot = NULL;
    assert_int_equal(tk_run_kept(&n, in, out, 2, false, &slot), OT_OK);
    /* reference: the operands promoted to >= 2-D, batch dims broadcast from the right */
    int M = ra >= 2 ? ad[ra - 2] : 1, K = ad[ra - 1], N = rb >= 2 ? bd[rb - 1] : 1;
    assert_int_equal(rb >= 2 ? bd[rb - 2] : bd[0], K);
    int r = (ra > rb ? ra : rb) - 2, bdim[OT_MAX_RANK];
    int64_t batch = 1;
    for (int d = 0; d < r; d++) {
        int ia = d - (r - (ra - 2)), ib = d - (r - (rb - 2));
        int da = ia >= 0 && ra > 2 ? ad[ia] : 1, db = ib >= 0 && rb > 2 ? bd[ib] : 1;
        bdim[d] = da > db ? da : db;
        batch *= bdim[d];
    }
    assert_int_equal(batch * M * N, ny);
    for (int64_t q = 0; q < batch; q++) {
        int64_t oa = 0, ob = 0, rem = q, stra = (int64_t)M * K, strb = (int64_t)K * N;
        for (int d = r - 1; d >= 0; d--) {
            int idx = (int)(rem % bdim[d]);
            rem /= bdim[d];
            int ia = d - (r - (ra - 2)), ib = d - (r - (rb - 2));
            if (ia >= 0 && ra > 2) {
                if (ad[ia] != 1) oa += idx * stra;
                stra *= ad[ia];
            }
            if (ib >= 0 && rb > 2) {
                if (bd[ib] != 1) ob += idx * strb;
                strb *= bd[ib];
            }
        }
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0, as = 0;
                for (int k = 0; k < K; k++) {
                    double p = from_lp(t, a[oa + (int64_t)i * K + k]) * from_lp(t, b[ob + (int64_t)k * N + j]);
                    s += p, as += fabs(p);
                }
                check_close(yt, y, (q * M + i) * N + j, s, as, K);
            }
    }
    out[0].data = y2;
    assert_int_equal(tk_run_kept(&n, in, out, 2, false, &slot), OT_OK);
    assert_memory_equal(y, y2, (size_t)ny * ot_dtype_size(yt));
    tk_state_free(&slot);
    free(a), free(b), free(y), free(y2);
    tk_node_free(&n);
}

static void test_matmul_batch_broadcast(void **state) {
    (void)state;
    const ot_dtype ts[2] = {OT_BF16, OT_F16};
    for (int k = 0; k < 2; k++) {
        ot_dtype t = ts[k];
        /* shared B: one tall GEMM */
        const int a1[3] = {3, 5, 24}, b1[2] = {24, 7}, y1[3] = {3, 5, 7};
        matmul_case(t, OT_F32, 3, a1, 2, b1, 3, y1);
        matmul_case(t, t, 3, a1, 2, b1, 3, y1);
        /* both batched, A broadcast over B's batch dim */
        const int a2[4] = {2, 1, 5, 7}, b2[3] = {3, 7, 4}, y2[4] = {2, 3, 5, 4};
        matmul_case(t, OT_F32, 4, a2, 3, b2, 4, y2);
        matmul_case(t, t, 4, a2, 3, b2, 4, y2);
        /* 1-D operands */
        const int a3[1] = {9}, b3[3] = {2, 9, 6}, y3[2] = {2, 6};
        matmul_case(t, OT_F32, 1, a3, 3, b3, 2, y3);
        const int a4[2] = {4, 9}, b4[1] = {9}, y4[1] = {4};
        matmul_case(t, OT_F32, 2, a4, 1, b4, 1, y4);
    }
}

static void test_op_table_dtypes(void **state) {
    (void)state;
    uint16_t d[4] = {0};
    ot_node mm = tk_node(OT_OP_MATMUL, 2, 1);
    ot_tensor bf[2] = {tk_t(OT_BF16, d, 2, 2, 2), tk_t(OT_BF16, d, 2, 2, 2)};
    ot_tensor h[2] = {tk_t(OT_F16, d, 2, 2, 2), tk_t(OT_F16, d, 2, 2, 2)};
    ot_tensor mix[2] = {tk_t(OT_BF16, d, 2, 2, 2), tk_t(OT_F32, d, 2, 2, 2)};
    ot_tensor of32[1] = {tk_t(OT_F32, d, 2, 2, 2)}, obf[1] = {tk_t(OT_BF16, d, 2, 2, 2)},
              of16[1] = {tk_t(OT_F16, d, 2, 2, 2)};
    assert_true(ot_cpu_supports(&mm, bf, of32));
    assert_true(ot_cpu_supports(&mm, bf, obf));
    assert_true(ot_cpu_supports(&mm, h, of16));
    assert_true(ot_cpu_supports(&mm, h, of32));
    assert_false(ot_cpu_supports(&mm, bf, of16));
    assert_false(ot_cpu_supports(&mm, mix, of32));
    /* a mixed pair reaching the kernel anyway is an error naming the node, no crash */
    ot_error e = {0};
    ot_kernel_ctx ctx = {.n_threads = 1};
    float y[4];
    ot_tensor out[1] = {tk_t(OT_F32, y, 2, 2, 2)};
    assert_int_equal(ot_cpu_run_node(&mm, mix, out, &ctx, &e), OT_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "node 'k'"));
    /* float16 needs its planned panels; bfloat16 runs on oneDNN without (when built with it) */
    assert_true(ot_cpu_workspace_bytes(&mm, h, of16) >= (4 + 4 + 4) * sizeof(float));
    tk_node_free(&mm);
}

/* ---- Cast --------------------------------------------------------------------------- */

static float f_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void cast_run(ot_dtype from, const void *x, ot_dtype to, void *y, int n) {
    ot_node c = tk_node(OT_OP_CAST, 1, 1);
    ot_node_set_attr_int(&c, "to", to);
    ot_tensor in[1] = {tk_t(from, (void *)x, 1, n)}, out[1] = {tk_t(to, y, 1, n)};
    assert_true(ot_cpu_supports(&c, in, out));
    assert_int_equal(tk_run(&c, in, out), OT_OK);
    tk_node_free(&c);
}

static void test_cast_rounding(void **state) {
    (void)state;
    /* float32 -> bfloat16: ties to even, NaN stays NaN (quiet), Inf stays, overflow rounds to Inf */
    const uint32_t fx[8] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x7fc00001u, 0xff800000u,
                            0x7f7fffffu, 0x00000001u, 0x7f800001u};
    const uint16_t bx[8] = {0x3f80, 0x3f82, 0x3f81, 0x7fc0, 0xff80, 0x7f80, 0x0000, 0x7fc0};
    float f[8];
    uint16_t b[8], h[8];
    for (int i = 0; i < 8; i++) f[i] = f_of(fx[i]);
    cast_run(OT_F32, f, OT_BF16, b, 8);
    for (int i = 0; i < 8; i++) assert_int_equal(b[i], bx[i]);
    /* float32 -> float16: 1 + 2^-11 ties to 1, 1 + 3 * 2^-11 to 1 + 2^-9; 65520 overflows; 2^-25 ties to 0
     * and 3 * 2^-25 rounds to the subnormal 2^-23; NaN */
    const float hf[6] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.0f, 0x1p-25f, 3 * 0x1p-25f, NAN};
    const uint16_t hx[6] = {0x3c00, 0x3c02, 0x7c00, 0x0000, 0x0002, 0};
    cast_run(OT_F32, hf, OT_F16, h, 6);
    for (int i = 0; i < 5; i++) assert_int_equal(h[i], hx[i]);
    assert_true((h[5] & 0x7c00) == 0x7c00 && (h[5] & 0x3ff) != 0);
    /* back to float32: exact */
    float back[6];
    cast_run(OT_F16, h, OT_F32, back, 6);
    assert_true(back[0] == 1.0f && back[1] == 1.0f + 0x1p-9f && isinf(back[2]) && back[3] == 0.0f &&
                back[4] == 0x1p-23f && isnan(back[5]));
    cast_run(OT_BF16, b, OT_F32, back, 6);
    assert_true(back[0] == 1.0f && back[1] == f_of(0x3f820000u) && isnan(back[3]) && isinf(back[4]));
    /* bfloat16 -> float16 and back (through float32, one rounding each way) */
    uint16_t bh[2] = {0x3f80, 0x4780 /* 65536: past float16's range */}, hh[2];
    cast_run(OT_BF16, bh, OT_F16, hh, 2);
    assert_int_equal(hh[0], 0x3c00);
    assert_int_equal(hh[1], 0x7c00);
    cast_run(OT_F16, hh, OT_BF16, bh, 2);
    assert_int_equal(bh[0], 0x3f80);
    assert_int_equal(bh[1], 0x7f80);
}

int main(void) {
    const char *note = ot_gemm_lowp_isa_note();
    print_message("bfloat16 GEMMs: %s\n", note ? note : "native (AVX512-BF16 or AMX)");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_bf16_transposes), cmocka_unit_test(test_gemm_bias),
        cmocka_unit_test(test_gemm_f16_transposes),  cmocka_unit_test(test_gemm_big_repeatable),
        cmocka_unit_test(test_matmul_batch_broadcast), cmocka_unit_test(test_op_table_dtypes),
        cmocka_unit_test(test_cast_rounding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
