/* test_cpu_bf16_fast.c — the fast paths of --precision bf16 on the CPU, each bitwise
 * against the scalar rule it replaces: the AVX-512 and AVX2 bfloat16 <-> float32
 * conversions (kernels/cpu/cpu_lowp.c; each width the CPU has) on every bfloat16 pattern and on a sweep of float32
 * patterns with the rounding ties, NaNs, infinities and subnormals; the Cast kernel
 * (quiet NaNs); and the tiled 2-byte Transpose (kernels/cpu/cpu_shape_ops.c) against
 * an index loop, on 1 and 2 threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_lowp.h"
#include "kernels/half_float.h"
#include "test_kernels_cpu_util.h"

/* Every bfloat16 pattern (a count that is no multiple of 16, so the scalar tail runs
 * too), plain and with the Cast's quiet bit, on 1 and 2 threads. */
static void test_bf16_to_f32_all(void **state) {
    (void)state;
    int64_t n = 65536 + 7;
    uint16_t *s = malloc((size_t)n * 2);
    float *d = malloc((size_t)n * 4);
    assert_non_null(s);
    assert_non_null(d);
    for (int64_t i = 0; i < n; i++) s[i] = (uint16_t)(i * 40503u);
    for (int q = 0; q < 2; q++)
        for (int nt = 1; nt <= 2; nt++) {
            memset(d, 0xa5, (size_t)n * 4);
            if (q) ot_cpu_bf16_to_f32(s, d, n, nt, true);
            else ot_cpu_lowp_to_f32(OT_BF16, s, d, n, nt);
            for (int64_t i = 0; i < n; i++) {
                uint32_t want = (uint32_t)s[i] << 16;
                if (q && (want & 0x7fffffffu) > 0x7f800000u) want |= 0x00400000u;
                assert_int_equal(ot_hf_bits(d[i]), want);
            }
        }
    free(s);
    free(d);
}

/* float32 patterns: a stride through all 2^32, the neighbours of every rounding tie
 * near 1 and of the specials, against ot_hf_f32_to_bf16. */
static void test_f32_to_bf16_sweep(void **state) {
    (void)state;
    const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x00800000u, 0x807fffffu,
                                0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f800000u, 0xff800000u, 0x7f800001u,
                                0x7fc00000u, 0xffc00001u, 0x7fbfffffu, 0x3f808000u, 0x3f818000u, 0x3f807fffu,
                                0x3f808001u, 0x3f80ffffu, 0x0000ffffu, 0x00008000u, 0x00018000u};
    int ns = (int)(sizeof special / sizeof special[0]);
    int64_t n = 300000 + ns * 5 + 3;
    uint32_t *x = malloc((size_t)n * 4);
    uint16_t *y = malloc((size_t)n * 2);
    assert_non_null(x);
    assert_non_null(y);
    int64_t k = 0;
    for (int i = 0; i < 300000; i++) x[k++] = (uint32_t)i * 14316557u; /* odd stride: every residue class */
    for (int i = 0; i < ns; i++)
        for (int d = -2; d <= 2; d++) x[k++] = special[i] + (uint32_t)d;
    while (k < n) x[k++] = 0x3f808000u;
    for (int nt = 1; nt <= 2; nt++) {
        memset(y, 0x5a, (size_t)n * 2);
        ot_cpu_lowp_from_f32(OT_BF16, (const float *)x, y, n, nt);
        for (int64_t i = 0; i < n; i++) assert_int_equal(y[i], ot_hf_f32_to_bf16(ot_hf_from_bits(x[i])));
    }
    free(x);
    free(y);
}

/* Each vector width this CPU has (16 lanes with AVX-512F, 8 with AVX2), called by
 * width, so that an AVX-512 machine checks the AVX2 bodies too: every bfloat16 pattern
 * up (plain and quiet) and the sweep's float32 patterns down, against the scalar rule. */
static void test_bf16_lanes(void **state) {
    (void)state;
    int64_t n = 65536 + 7, nx = 300007;
    uint16_t *s = malloc((size_t)n * 2), *y = malloc((size_t)nx * 2);
    float *d = malloc((size_t)n * 4);
    uint32_t *x = malloc((size_t)nx * 4);
    assert_non_null(s);
    assert_non_null(y);
    assert_non_null(d);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) s[i] = (uint16_t)(i * 40503u);
    static const uint32_t low[4] = {0x8000u, 0x7fffu, 0x8001u, 0x0000u}; /* a tie, its neighbours */
    for (int64_t i = 0; i < nx; i++) {
        uint32_t r = (uint32_t)i * 14316557u; /* every exponent, NaNs and infinities among them */
        x[i] = i % 2 ? r : (r & 0xffff0000u) | low[(i / 2) % 4];
    }
    int checked = 0;
    for (int lanes = 8; lanes <= 16; lanes += 8) {
        if (lanes > ot_cpu_bf16_lanes()) {
            print_message("this CPU has no %d-lane bfloat16 conversion: not checked\n", lanes);
            continue;
        }
        for (int q = 0; q < 2; q++) {
            int64_t done = ot_cpu_bf16_to_f32_lanes(lanes, s, d, n, q);
            assert_int_equal(done, n - n % lanes);
            for (int64_t i = 0; i < done; i++) {
                uint32_t want = (uint32_t)s[i] << 16;
                if (q && (want & 0x7fffffffu) > 0x7f800000u) want |= 0x00400000u;
                if (ot_hf_bits(d[i]) != want)
                    fail_msg("%d lanes: %04x -> %08x, want %08x", lanes, s[i], ot_hf_bits(d[i]), want);
            }
        }
        int64_t done = ot_cpu_f32_to_bf16_lanes(lanes, (const float *)x, y, nx);
        assert_int_equal(done, nx - nx % lanes);
        for (int64_t i = 0; i < done; i++) {
            uint16_t want = ot_hf_f32_to_bf16(ot_hf_from_bits(x[i]));
            if (y[i] != want) fail_msg("%d lanes: %08x -> %04x, want %04x", lanes, x[i], y[i], want);
        }
        checked++;
    }
    if (!checked) print_message("no bfloat16 vector width on this CPU: only the scalar rule runs\n");
    free(s), free(y), free(d), free(x);
}

/* The Cast kernel both ways, with a length past its threading threshold. */
static void test_cast_bf16(void **state) {
    (void)state;
    int64_t n = 100003;
    float *f = malloc((size_t)n * 4), *back = malloc((size_t)n * 4);
    uint16_t *h = malloc((size_t)n * 2);
    assert_non_null(f);
    assert_non_null(back);
    assert_non_null(h);
    for (int64_t i = 0; i < n; i++) f[i] = ot_hf_from_bits((uint32_t)i * 2654435761u);
    ot_node down = tk_node(OT_OP_CAST, 1, 1), up = tk_node(OT_OP_CAST, 1, 1);
    ot_node_set_attr_int(&down, "to", OT_BF16);
    ot_node_set_attr_int(&up, "to", OT_F32);
    ot_tensor a[1] = {tk_t(OT_F32, f, 1, n)}, b[1] = {tk_t(OT_BF16, h, 1, n)}, c[1] = {tk_t(OT_F32, back, 1, n)};
    assert_int_equal(tk_run(&down, a, b), OT_OK);
    assert_int_equal(tk_run(&up, b, c), OT_OK);
    for (int64_t i = 0; i < n; i++) {
        assert_int_equal(h[i], ot_hf_f32_to_bf16(f[i]));
        uint32_t want = (uint32_t)h[i] << 16;
        if ((want & 0x7fffffffu) > 0x7f800000u) want |= 0x00400000u; /* the Cast's quiet NaN */
        assert_int_equal(ot_hf_bits(back[i]), want);
    }
    tk_node_free(&down);
    tk_node_free(&up);
    free(f);
    free(back);
    free(h);
}

/* A 2-byte Transpose against the index loop: a weight-like [67, 45] (tiles with ragged
 * edges), attention's K^T [2, 3, 37, 40] -> perm (0, 1, 3, 2), and (2, 0, 1) on
 * [5, 33, 34]; 1 and 2 threads. */
static void check_transpose2(int rank, const int64_t *xd, const int64_t *perm) {
    int64_t n = 1, xs[4], yd[4];
    for (int d = rank - 1; d >= 0; d--) xs[d] = n, n *= xd[d];
    for (int d = 0; d < rank; d++) yd[d] = xd[perm[d]];
    uint16_t *x = malloc((size_t)n * 2), *y = malloc((size_t)n * 2);
    assert_non_null(x);
    assert_non_null(y);
    for (int64_t i = 0; i < n; i++) x[i] = (uint16_t)(i * 7919u + 13u);
    ot_node nd = tk_node(OT_OP_TRANSPOSE, 1, 1);
    ot_node_set_attr_ints(&nd, "perm", perm, rank);
    ot_tensor in[1] = {tk_t(OT_BF16, x, 1, n)}, out[1] = {tk_t(OT_BF16, y, 1, n)};
    in[0].shape = ot_shape_make(rank, xd);
    out[0].shape = ot_shape_make(rank, yd);
    for (int nt = 1; nt <= 2; nt++) {
        memset(y, 0, (size_t)n * 2);
        ot_error e = {0};
        assert_int_equal(tk_run_ex(&nd, in, out, nt, 1, 0, 0, &e), OT_OK);
        for (int64_t o = 0; o < n; o++) {
            int64_t q = o, src = 0;
            for (int d = rank - 1; d >= 0; d--) {
                src += (q % yd[d]) * xs[perm[d]];
                q /= yd[d];
            }
            assert_int_equal(y[o], x[src]);
        }
    }
    tk_node_free(&nd);
    free(x);
    free(y);
}

static void test_transpose_2byte(void **state) {
    (void)state;
    const int64_t w[2] = {67, 45}, pw[2] = {1, 0};
    const int64_t k[4] = {2, 3, 37, 40}, pk[4] = {0, 1, 3, 2};
    const int64_t r3[3] = {5, 33, 34}, p3[3] = {2, 0, 1};
    check_transpose2(2, w, pw);
    check_transpose2(4, k, pk);
    check_transpose2(3, r3, p3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_to_f32_all),
        cmocka_unit_test(test_f32_to_bf16_sweep),
        cmocka_unit_test(test_bf16_lanes),
        cmocka_unit_test(test_cast_bf16),
        cmocka_unit_test(test_transpose_2byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
