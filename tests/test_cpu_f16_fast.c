/* test_cpu_f16_fast.c — the float16 <-> float32 conversions of --precision fp16 on the
 * CPU (kernels/cpu/cpu_lowp.c: F16C on 16 lanes where the CPU has AVX-512F), bitwise
 * against half_float.h's scalar rule: every float16 pattern up (plain, and with the
 * Cast's quiet bit), float32 patterns down (a stride through all 2^32, a million
 * random ones, and the neighbours of the rounding ties, the overflow threshold, the
 * subnormal range, infinities and NaNs with payloads), through the threaded, the
 * serial and the Cast entry points, and each vector width (16 lanes of AVX-512F, 8 of
 * AVX2) on its own where this CPU has it. */
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

static uint32_t want_up(uint16_t h, bool quiet) {
    uint32_t w = ot_hf_bits(ot_hf_f16_to_f32(h));
    if (quiet && (w & 0x7fffffffu) > 0x7f800000u) w |= 0x00400000u;
    return w;
}

/* Every float16 pattern, shuffled (a count that is no multiple of 16, so the scalar
 * tail runs too): threaded on 1 and 2 threads, quiet or not, and serial. */
static void test_f16_to_f32_all(void **state) {
    (void)state;
    int64_t n = 65536 + 7;
    uint16_t *s = malloc((size_t)n * 2);
    float *d = malloc((size_t)n * 4);
    assert_non_null(s);
    assert_non_null(d);
    for (int64_t i = 0; i < n; i++) s[i] = (uint16_t)(i * 40503u);
    for (int mode = 0; mode < 5; mode++) {
        memset(d, 0xa5, (size_t)n * 4);
        bool quiet = mode >= 2 && mode < 4;
        if (mode < 2) ot_cpu_lowp_to_f32(OT_F16, s, d, n, mode + 1);
        else if (mode < 4) ot_cpu_f16_to_f32(s, d, n, mode - 1, true);
        else ot_cpu_lowp_to_f32_serial(OT_F16, s, d, n);
        for (int64_t i = 0; i < n; i++)
            if (ot_hf_bits(d[i]) != want_up(s[i], quiet))
                fail_msg("mode %d: %04x -> %08x, want %08x", mode, s[i], ot_hf_bits(d[i]), want_up(s[i], quiet));
    }
    free(s);
    free(d);
}

/* Each vector width alone on every float16 pattern and on the float32 sweep: the
 * elements it converts (all but the ragged tail) are the scalar rule's. */
static int64_t sweep(uint32_t *x);
static void test_f16_widths(void **state) {
    (void)state;
    int64_t n = 65536 + 7;
    uint16_t *s = malloc((size_t)n * 2);
    float *d = malloc((size_t)n * 4);
    uint32_t *x = malloc((1300000 + 64 * 5 + 3) * sizeof(uint32_t));
    assert_non_null(s);
    assert_non_null(d);
    assert_non_null(x);
    int64_t nx = sweep(x);
    uint16_t *y = malloc((size_t)nx * 2);
    assert_non_null(y);
    for (int64_t i = 0; i < n; i++) s[i] = (uint16_t)(i * 40503u);
    int checked = 0;
    for (int lanes = 8; lanes <= 16; lanes += 8) {
        if (lanes > ot_cpu_f16_lanes()) {
            print_message("this CPU has no %d-lane float16 conversion: not checked\n", lanes);
            continue;
        }
        for (int q = 0; q < 2; q++) {
            int64_t done = ot_cpu_f16_to_f32_lanes(lanes, s, d, n, q);
            assert_int_equal(done, n - n % lanes);
            for (int64_t i = 0; i < done; i++)
                if (ot_hf_bits(d[i]) != want_up(s[i], q))
                    fail_msg("%d lanes: %04x -> %08x, want %08x", lanes, s[i], ot_hf_bits(d[i]), want_up(s[i], q));
        }
        int64_t done = ot_cpu_f32_to_f16_lanes(lanes, (const float *)x, y, nx);
        assert_int_equal(done, nx - nx % lanes);
        for (int64_t i = 0; i < done; i++) {
            uint16_t want = ot_hf_f32_to_f16(ot_hf_from_bits(x[i]));
            if (y[i] != want) fail_msg("%d lanes: %08x -> %04x, want %04x", lanes, x[i], y[i], want);
        }
        checked++;
    }
    if (!checked) print_message("no float16 vector width on this CPU: only the scalar rule runs\n");
    free(s), free(d), free(x), free(y);
}

/* The float32 patterns of the sweep: n of them into x. */
static int64_t sweep(uint32_t *x) {
    const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x00800000u, 0x807fffffu, /* zeros, float32 subnormals */
        0x3f800000u, 0x3f801000u, 0x3f803000u, 0x3f800fffu, 0x3f801001u,              /* 1 and the ties after it */
        0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477ff001u, 0x47800000u, 0xc77ff000u, /* 65504, overflow */
        0x38800000u, 0x387fe000u, 0x387ff000u, 0x38000000u, 0x33800000u,              /* 2^-14, the subnormals */
        0x33000000u, 0x33000001u, 0x337fffffu, 0x32ffffffu, 0x33c00000u, 0x34200000u, /* 2^-25 ties, 2^-24 * 1.5 */
        0xb3000000u, 0xb3400000u, 0xb8801000u,                                        /* negative ones */
        0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,                           /* max, infinities */
        0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0xffc00001u, 0x7fc02000u, 0xff801234u, /* NaNs with payloads */
    };
    int ns = (int)(sizeof special / sizeof special[0]);
    int64_t k = 0;
    for (int i = 0; i < 300000; i++) x[k++] = (uint32_t)i * 14316557u; /* odd stride: every residue class */
    uint32_t r = 2463534242u;
    for (int i = 0; i < 1000000; i++) { /* xorshift: random bits, exponents of every kind */
        r ^= r << 13, r ^= r >> 17, r ^= r << 5;
        x[k++] = r;
    }
    for (int i = 0; i < ns; i++)
        for (int d = -2; d <= 2; d++) x[k++] = special[i] + (uint32_t)d;
    x[k++] = 0x3f801000u; /* a ragged tail */
    x[k++] = 0x387ff000u;
    x[k++] = 0x7fc02000u;
    return k;
}

static void test_f32_to_f16_sweep(void **state) {
    (void)state;
    uint32_t *x = malloc((1300000 + 64 * 5 + 3) * sizeof(uint32_t));
    assert_non_null(x);
    int64_t n = sweep(x);
    uint16_t *y = malloc((size_t)n * 2);
    assert_non_null(y);
    for (int mode = 0; mode < 3; mode++) {
        memset(y, 0x5a, (size_t)n * 2);
        if (mode < 2) ot_cpu_lowp_from_f32(OT_F16, (const float *)x, y, n, mode + 1);
        else ot_cpu_lowp_from_f32_serial(OT_F16, (const float *)x, y, n);
        for (int64_t i = 0; i < n; i++) {
            uint16_t want = ot_hf_f32_to_f16(ot_hf_from_bits(x[i]));
            if (y[i] != want) fail_msg("mode %d: %08x -> %04x, want %04x", mode, x[i], y[i], want);
        }
    }
    free(x);
    free(y);
}

/* The Cast kernel both ways, past its threading threshold. */
static void test_cast_f16(void **state) {
    (void)state;
    int64_t n = 100003;
    float *f = malloc((size_t)n * 4), *back = malloc((size_t)n * 4);
    uint16_t *h = malloc((size_t)n * 2);
    assert_non_null(f);
    assert_non_null(back);
    assert_non_null(h);
    for (int64_t i = 0; i < n; i++) f[i] = ot_hf_from_bits((uint32_t)i * 2654435761u);
    ot_node down = tk_node(OT_OP_CAST, 1, 1), up = tk_node(OT_OP_CAST, 1, 1);
    ot_node_set_attr_int(&down, "to", OT_F16);
    ot_node_set_attr_int(&up, "to", OT_F32);
    ot_tensor a[1] = {tk_t(OT_F32, f, 1, n)}, b[1] = {tk_t(OT_F16, h, 1, n)}, c[1] = {tk_t(OT_F32, back, 1, n)};
    assert_int_equal(tk_run(&down, a, b), OT_OK);
    assert_int_equal(tk_run(&up, b, c), OT_OK);
    for (int64_t i = 0; i < n; i++) {
        assert_int_equal(h[i], ot_hf_f32_to_f16(f[i]));
        assert_int_equal(ot_hf_bits(back[i]), want_up(h[i], true)); /* the Cast's quiet NaN */
    }
    tk_node_free(&down);
    tk_node_free(&up);
    free(f);
    free(back);
    free(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_to_f32_all),
        cmocka_unit_test(test_f32_to_f16_sweep),
        cmocka_unit_test(test_cast_f16),
        cmocka_unit_test(test_f16_widths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
