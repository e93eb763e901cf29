/* test_cpu_vecmath.c — ot_cpu_expf_n (kernels/cpu/cpu_vecmath.c) gives expf's bits: on a
 * sweep of float bit patterns over the whole 32-bit space, on the edges of expf's fast
 * range (±88, the overflow and underflow thresholds, subnormal results), on infinities,
 * NaNs and signed zeros, on every pattern near the bound below which expf is +0 (the
 * lanes the vector path zeroes itself), at lengths that are not multiples of 16, in place;
 * ot_cpu_exp_diff_f64 against exp on swept and dense arguments; ot_cpu_max_f32
 * against the running max (NaNs, zeros of both signs); ot_cpu_dropout_select against
 * the keep-and-scale rule; ot_cpu_select_u32 against Where's rule; ot_cpu_erf_n
 * against ot_cpu_erf1 (a bit-pattern sweep, the clamps, special values);
 * ot_cpu_arith_f32 against the plain + - * / (NaN payloads included, either one for two
 * NaNs under + and *); and the
 * kernels that call it (Softmax over a contiguous line, the cross-entropy loss over
 * [rows, C], ErfGrad) give the bits of their one-expf-at-a-time rules. */
#include "test_kernels_cpu_util.h"

#include <float.h>

#include "kernels/cpu/cpu_vecmath.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void check_expf(const float *x, int64_t n) {
    float *y = malloc((size_t)n * sizeof(float)), *w = malloc((size_t)n * sizeof(float));
    ot_cpu_expf_n(x, y, n);
    for (int64_t i = 0; i < n; i++) {
        w[i] = expf(x[i]);
        if (memcmp(&w[i], &y[i], sizeof(float)) != 0) fail_msg("expf(%a): got %a, want %a", x[i], y[i], w[i]);
    }
    memcpy(y, x, (size_t)n * sizeof(float)); /* in place */
    ot_cpu_expf_n(y, y, n);
    assert_memory_equal(y, w, (size_t)n * sizeof(float));
    /* each vector width this CPU has, the narrower ones too (an AVX-512 machine checks
     * the AVX2 body) */
    for (int lanes = 8; lanes <= ot_cpu_expf_lanes(); lanes *= 2) {
        int64_t done = ot_cpu_expf_n_lanes(lanes, x, y, n);
        assert_int_equal(done, n - n % lanes);
        for (int64_t i = 0; i < done; i++)
            if (memcmp(&w[i], &y[i], sizeof(float)) != 0)
                fail_msg("%d lanes: expf(%a): got %a, want %a", lanes, x[i], y[i], w[i]);
    }
    free(y);
    free(w);
}

static void test_expf_sweep(void **state) {
    (void)state;
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof(float));
    /* every 4093rd bit pattern (an odd stride: every low bit pattern is hit) */
    for (int64_t i = 0; i < N; i++) x[i] = from_bits((uint32_t)((uint64_t)i * 4093u));
    check_expf(x, N);
    /* dense around 0 and the arguments Softmax sees (x - max <= 0, down to -100) */
    for (int64_t i = 0; i < N; i++) x[i] = -100.0f * (float)i / (float)N + 1e-3f * (float)(i % 7);
    check_expf(x, N);
    free(x);
}

static void test_expf_edges(void **state) {
    (void)state;
    const float base[] = {0.0f,  -0.0f,     INFINITY, -INFINITY, NAN,      -NAN,      88.0f,
                          -88.0f, 88.72f,   88.7228f, 89.0f,     -87.33f,  -87.34f,   -103.27f,
                          -103.29f, -103.96f, -103.98f, -104.0f, 1e-30f,   -1e-30f,   1.4e-45f,
                          FLT_MAX, -FLT_MAX, 0.5f,     -0.5f,    1.0f,     -1.0f,     20.0f};
    int nb = (int)(sizeof base / sizeof base[0]);
    float x[64 * 3];
    /* each edge value among fast-range ones, at every position of a 16-group */
    for (int e = 0; e < nb; e++) {
        for (int k = 0; k < 64 * 3; k++) x[k] = -0.01f * (float)k;
        for (int p = 0; p < 16; p++) x[p * 11 % (64 * 3)] = base[e];
        for (int64_t n = 1; n <= 64 * 3; n += 13) check_expf(x, n);
    }
    /* the bit patterns next to the fast range's limit (top 12 bits of |x| = 0x42a / 0x42b) */
    float y[512];
    for (int k = 0; k < 512; k++) y[k] = from_bits((k % 2 ? 0xc2b00000u : 0x42b00000u) - 256u + (uint32_t)(k / 2));
    check_expf(y, 512);
}

/* The lanes expf sends to +0 before any arithmetic (-inf, x < -0x1.9fe368p6f), which
 * the vector path answers itself: every float bit pattern from 2^20 below that bound
 * down to -inf, checked densely across the bound (2^19 on each side) and strided
 * beyond; each among fast-range lanes and among the slow ones
 * ([-103.97, -88], NaN, +inf) that still hand their group to expf, at every position
 * of a 16-group; and a causal Softmax row pattern (a run of -inf after a prefix). */
static void test_expf_underflow_lanes(void **state) {
    (void)state;
    enum { N = 1 << 21 };
    float *x = malloc(N * sizeof(float));
    const uint32_t bound = 0xc2cff1b4u; /* -0x1.9fe368p6f: below it (larger bits) expf is +0 */
    for (int64_t i = 0; i < N; i++) {
        uint32_t b = i < N / 2 ? bound - (1u << 19) + (uint32_t)i /* dense across the bound */
                               : bound + (uint32_t)((uint64_t)(i - N / 2) * 0x3cbu);
        x[i] = from_bits(b > 0xff800000u ? 0xff800000u : b);
    }
    check_expf(x, N);
    const float others[] = {-0.5f, 3.0f, -87.9f, -95.0f, -103.5f, NAN, INFINITY, 89.0f};
    float y[48];
    for (int o = 0; o < (int)(sizeof others / sizeof others[0]); o++)
        for (int p = 0; p < 16; p++) {
            for (int k = 0; k < 48; k++) y[k] = k % 3 ? -INFINITY : -104.0f - (float)k;
            y[16 + p] = others[o];
            check_expf(y, 48);
        }
    for (int64_t i = 0; i < N; i++) x[i] = (i % 256) <= (i / 256) % 256 ? -0.01f * (float)(i % 97) : -INFINITY;
    check_expf(x, N);
    free(x);
}

/* ot_cpu_exp_diff_f64 against exp((double)x - m): float bit patterns swept over the
 * whole space and dense over the logits' range, against maxima that put the
 * arguments in, at the edges of and outside exp's fast range. */
static void test_exp_diff(void **state) {
    (void)state;
    enum { N = 1 << 19 };
    float *x = malloc(N * sizeof(float));
    double *y = malloc(N * sizeof(double));
    const double ms[] = {0.0, 3.25, -7.5, 1e-17, 511.9, 600.0, -745.0, 1e300, INFINITY, -INFINITY, NAN};
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t i = 0; i < N; i++)
            x[i] = pass ? -40.0f * (float)i / (float)N + 1e-4f * (float)(i % 13)
                        : from_bits((uint32_t)((uint64_t)i * 8191u));
        for (size_t j = 0; j < sizeof ms / sizeof ms[0]; j++) {
            for (int64_t n = N; n >= N - 7; n -= 7) { /* a multiple of 8 and a tail */
                ot_cpu_exp_diff_f64(x, ms[j], y, n);
                for (int64_t i = 0; i < n; i++) {
                    double w = exp((double)x[i] - ms[j]);
                    if (memcmp(&w, &y[i], sizeof w) != 0)
                        fail_msg("exp(%a - %a): got %a, want %a", (double)x[i], ms[j], y[i], w);
                }
            }
        }
    }
    free(x);
    free(y);
}

static float max_ref(const float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* ot_cpu_max_f32: NaNs anywhere, equal zeros of both signs in either order (in the
 * 16-lane part and in the tail), all -inf, a max in the tail, lengths around 16. */
static void test_max(void **state) {
    (void)state;
    float x[100];
    for (int c = 0; c < 12; c++) {
        for (int64_t n = 1; n <= 100; n += (n < 40 ? 1 : 7)) {
            for (int64_t i = 0; i < n; i++) x[i] = -1.0f - (float)((i * 37) % 11);
            switch (c) {
            case 1: x[n / 2] = NAN; break;
            case 2: x[0] = -0.0f, x[n - 1] = 0.0f; break;
            case 3: x[0] = 0.0f, x[n - 1] = -0.0f; break;
            case 4: x[n - 1] = -0.0f; if (n > 20) x[17] = 0.0f; break;
            case 5: for (int64_t i = 0; i < n; i++) x[i] = -INFINITY; break;
            case 6: for (int64_t i = 0; i < n; i++) x[i] = NAN; break;
            case 7: x[n - 1] = 5.0f, x[0] = 5.0f; break;
            case 8: for (int64_t i = 0; i < n; i++) x[i] = (i % 3) ? -0.0f : 0.0f; break;
            case 9: for (int64_t i = 0; i < n; i++) x[i] = (i % 3) ? 0.0f : -0.0f; break;
            case 10: x[n / 3] = INFINITY, x[0] = NAN; break;
            case 11: if (n > 16) x[16] = -0.0f, x[3] = 0.0f; break;
            default: break;
            }
            float got = ot_cpu_max_f32(x, n), want = max_ref(x, n);
            if (memcmp(&got, &want, sizeof got) != 0) fail_msg("case %d n %lld: got %a, want %a", c, (long long)n, got, want);
        }
    }
}

/* ot_cpu_dropout_select against the keep-and-scale rule, with and without a mask,
 * in place, with NaN / inf / -0 inputs, ratios 0, 0.1 and 1, lengths around 16. */
static void test_dropout_select(void **state) {
    (void)state;
    enum { N = 300 };
    float u[N], x[N], y[N], w[N];
    uint8_t mk[N], mw[N];
    const float ratios[] = {0.0f, 0.1f, 0.5f, 1.0f};
    tk_fill(u, N, 5, 0.0f, 1.0f);
    tk_fill(x, N, 6, -3.0f, 3.0f);
    x[1] = NAN, x[2] = INFINITY, x[3] = -0.0f, u[4] = 0.1f, u[5] = 0.0f;
    for (int r = 0; r < 4; r++) {
        float ratio = ratios[r], scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
        for (int64_t n = 1; n <= N; n += (n < 40 ? 1 : 37)) {
            for (int64_t k = 0; k < n; k++) {
                bool keep = u[k] >= ratio;
                w[k] = keep ? x[k] * scale : 0.0f;
                mw[k] = keep;
            }
            ot_cpu_dropout_select(u, ratio, x, scale, y, mk, n);
            assert_memory_equal(y, w, (size_t)n * sizeof(float));
            assert_memory_equal(mk, mw, (size_t)n);
            memcpy(y, x, (size_t)n * sizeof(float)); /* in place, no mask */
            ot_cpu_dropout_select(u, ratio, y, scale, y, NULL, n);
            assert_memory_equal(y, w, (size_t)n * sizeof(float));
        }
    }
}

/* ot_cpu_select_u32 against the Where rule: contiguous or broadcast X and Y, any
 * nonzero condition byte as true, NaN payloads kept, lengths around 16. */
static void test_select(void **state) {
    (void)state;
    enum { N = 200 };
    uint8_t c[N];
    uint32_t x[N], y[N], o[N], w[N];
    for (int i = 0; i < N; i++) c[i] = (uint8_t)((i * 7) % 3 ? (i % 5 == 0 ? 2 : 1) : 0), x[i] = 0x7fc00001u + (uint32_t)i,
                                y[i] = 0xff800000u - (uint32_t)i;
    for (int v = 0; v < 4; v++) {
        bool xs = v & 1, ys = v & 2;
        for (int64_t n = 0; n <= N; n += (n < 40 ? 1 : 23)) {
            for (int64_t k = 0; k < n; k++) w[k] = c[k] ? x[xs ? k : 0] : y[ys ? k : 0];
            ot_cpu_select_u32(c, x, xs, y, ys, o, n);
            if (n > 0) assert_memory_equal(o, w, (size_t)n * sizeof(uint32_t));
        }
    }
}

/* Softmax over the last axis (a contiguous line) against one expf at a time. */
static void test_softmax_lines(void **state) {
    (void)state;
    int rows = 70, len = 301;
    int64_t n = (int64_t)rows * len;
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    float *w = malloc((size_t)n * sizeof(float));
    tk_fill(x, n, 99, -30.0f, 30.0f);
    x[5] = -INFINITY;
    for (int j = 0; j < len; j++) x[3 * len + j] = -INFINITY; /* a whole line of -inf */
    for (int j = 0; j < len; j++) x[4 * len + j] = j % 5 ? -(float)j : (j % 2 ? 0.0f : -0.0f); /* max ±0 */
    for (int r = 0; r < rows; r++) {
        const float *xl = x + (int64_t)r * len;
        float *wl = w + (int64_t)r * len, mx = -INFINITY, sum = 0.0f;
        for (int k = 0; k < len; k++) mx = xl[k] > mx ? xl[k] : mx;
        if (mx == -INFINITY) mx = 0.0f;
        for (int k = 0; k < len; k++) {
            wl[k] = expf(xl[k] - mx);
            sum += wl[k];
        }
        float inv = 1.0f / sum;
        for (int k = 0; k < len; k++) wl[k] *= inv;
    }
    for (int threads = 1; threads <= 2; threads++) {
        ot_node node = tk_node(OT_OP_SOFTMAX, 1, 1);
        ot_node_set_attr_int(&node, "axis", -1);
        ot_tensor in[1] = {tk_t(OT_F32, x, 2, rows, len)}, out[1] = {tk_t(OT_F32, y, 2, rows, len)};
        assert_int_equal(tk_run_ex(&node, in, out, threads, 0, 0, 0, NULL), OT_OK);
        assert_memory_equal(y, w, (size_t)n * sizeof(float));
        tk_node_free(&node);
    }
    free(x), free(y), free(w);
}

/* ot_cpu_erf_n against ot_cpu_erf1 bit for bit: a sweep of float bit patterns over the
 * whole 32-bit space, dense over [-4.5, 4.5] and across the clamps, the special values
 * at every position of a 16-group, lengths that are not multiples of 16 or 4, in
 * place; and the Erf kernel (blocks split between threads) against the same rule. */
static void check_erf(const float *x, int64_t n) {
    float *y = malloc((size_t)n * sizeof(float)), *w = malloc((size_t)n * sizeof(float));
    ot_cpu_erf_n(x, y, n);
    for (int64_t i = 0; i < n; i++) {
        w[i] = ot_cpu_erf1(x[i]);
        if (memcmp(&w[i], &y[i], sizeof(float)) != 0) fail_msg("erf(%a): got %a, want %a", x[i], y[i], w[i]);
    }
    memcpy(y, x, (size_t)n * sizeof(float));
    ot_cpu_erf_n(y, y, n);
    assert_memory_equal(y, w, (size_t)n * sizeof(float));
    free(y);
    free(w);
}

static void test_erf(void **state) {
    (void)state;
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof(float));
    for (int64_t i = 0; i < N; i++) x[i] = from_bits((uint32_t)((uint64_t)i * 4093u));
    check_erf(x, N);
    for (int64_t i = 0; i < N; i++) x[i] = -4.5f + 9.0f * (float)i / (float)N;
    check_erf(x, N);
    for (int64_t i = 0; i < N; i++) /* the bit patterns next to ±4 */
        x[i] = from_bits((i % 2 ? 0xc0800000u : 0x40800000u) - (uint32_t)(N / 4) + (uint32_t)(i / 2));
    check_erf(x, N);
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1.4e-45f, -1.4e-45f, FLT_MAX, 4.0f, -4.0f};
    float z[48];
    for (int e = 0; e < (int)(sizeof special / sizeof special[0]); e++)
        for (int p = 0; p < 16; p++) {
            for (int k = 0; k < 48; k++) z[k] = 0.1f * (float)(k - 24);
            z[16 + p] = special[e];
            for (int64_t n = 1; n <= 48; n += 5) check_erf(z, n);
        }
    int64_t n = 3 * 4096 + 37; /* several kernel blocks and a ragged end */
    float *y = malloc((size_t)n * sizeof(float));
    tk_fill(x, n, 17, -6.0f, 6.0f);
    for (int threads = 1; threads <= 2; threads++) {
        ot_node node = tk_node(OT_OP_ERF, 1, 1);
        ot_tensor in[1] = {tk_t(OT_F32, x, 1, (int)n)}, out[1] = {tk_t(OT_F32, y, 1, (int)n)};
        assert_int_equal(tk_run_ex(&node, in, out, threads, 0, 0, 0, NULL), OT_OK);
        for (int64_t i = 0; i < n; i++) {
            float w = ot_cpu_erf1(x[i]);
            assert_memory_equal(&y[i], &w, sizeof w);
        }
        tk_node_free(&node);
    }
    free(x), free(y);
}

/* ot_cpu_arith_f32 against the plain loop's IEEE operation, bit for bit: random
 * operands and special ones (infinities, zeros of both signs, subnormals, NaNs with
 * payloads on either side or both), B contiguous or one value, lengths around 16 and
 * 4, in place; and Add / Mul / Div kernels on equal shapes and with a scalar (one row
 * that the threads split into chunks) against the same loop. */
static float arith_ref(int op, float a, float b) {
    switch (op) {
    case OT_CPU_ARITH_ADD: return a + b;
    case OT_CPU_ARITH_SUB: return a - b;
    case OT_CPU_ARITH_MUL: return a * b;
    default: return a / b;
    }
}

/* got is want's bits; or, for a commutative operation of two NaNs, either operand
 * quieted: x86 returns the first operand of the instruction, and a compiler may swap
 * the operands of a + b or a * b (seen with GCC 12's vector extensions at -O1, the
 * ASan build, on an AVX2 CPU, where the four-lane path runs every element); IEEE 754
 * leaves the choice open. */
static bool arith_same(int op, float a, float b, float got, float want) {
    if (memcmp(&got, &want, sizeof got) == 0) return true;
    if ((op != OT_CPU_ARITH_ADD && op != OT_CPU_ARITH_MUL) || !isnan(a) || !isnan(b)) return false;
    uint32_t ua, ub, ug;
    memcpy(&ua, &a, 4), memcpy(&ub, &b, 4), memcpy(&ug, &got, 4);
    return ug == (ua | 0x00400000u) || ug == (ub | 0x00400000u);
}

static void test_arith(void **state) {
    (void)state;
    enum { N = 4099 };
    float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    float *w = malloc(N * sizeof(float));
    tk_fill(a, N, 5, -3.0f, 3.0f);
    tk_fill(b, N, 6, -3.0f, 3.0f);
    const float special[] = {INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, FLT_MAX, from_bits(0x7fc00001u),
                             from_bits(0xffc12345u), from_bits(0x7f800abcu)};
    int ns = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < 400; i++) { /* every pair of specials, at varying positions */
        a[7 * i % N] = special[i % ns];
        b[7 * i % N] = special[(i / ns) % ns];
    }
    for (int op = OT_CPU_ARITH_ADD; op <= OT_CPU_ARITH_DIV; op++)
        for (int step = 0; step < 2; step++)
            for (int64_t n = 1; n <= N; n = n < 40 ? n + 1 : n * 3 + 1) {
                for (int64_t k = 0; k < n; k++) w[k] = arith_ref(op, a[k], b[step ? k : 7]);
                ot_cpu_arith_f32((ot_cpu_arith_op)op, a, step ? b : b + 7, step, y, n);
                for (int64_t k = 0; k < n; k++)
                    if (!arith_same(op, a[k], b[step ? k : 7], y[k], w[k]))
                        fail_msg("op %d step %d n %lld: %a, %a -> %a, want %a", op, step, (long long)n, a[k],
                                 b[step ? k : 7], y[k], w[k]);
                memcpy(y, a, (size_t)n * sizeof(float)); /* in place */
                ot_cpu_arith_f32((ot_cpu_arith_op)op, y, step ? b : b + 7, step, y, n);
                for (int64_t k = 0; k < n; k++)
                    if (!arith_same(op, a[k], b[step ? k : 7], y[k], w[k]))
                        fail_msg("in place: op %d step %d n %lld: %a, %a -> %a, want %a", op, step, (long long)n,
                                 a[k], b[step ? k : 7], y[k], w[k]);
            }
    free(a), free(b), free(y), free(w);
    int64_t n = 3 * 16384 + 77; /* one merged row, more than one chunk */
    a = malloc((size_t)n * sizeof(float)), b = malloc((size_t)n * sizeof(float)), y = malloc((size_t)n * sizeof(float));
    w = malloc((size_t)n * sizeof(float));
    tk_fill(a, n, 8, -2.0f, 2.0f);
    tk_fill(b, n, 9, 0.5f, 2.0f);
    const ot_op ops[] = {OT_OP_ADD, OT_OP_MUL, OT_OP_DIV};
    const int rule[] = {OT_CPU_ARITH_ADD, OT_CPU_ARITH_MUL, OT_CPU_ARITH_DIV};
    for (int o = 0; o < 3; o++)
        for (int scalar = 0; scalar < 2; scalar++)
            for (int threads = 1; threads <= 2; threads++) {
                for (int64_t k = 0; k < n; k++) w[k] = arith_ref(rule[o], a[k], b[scalar ? 0 : k]);
                ot_node node = tk_node(ops[o], 2, 1);
                ot_tensor in[2] = {tk_t(OT_F32, a, 2, 1, (int)n), scalar ? tk_t(OT_F32, b, 0) : tk_t(OT_F32, b, 2, 1, (int)n)};
                ot_tensor out[1] = {tk_t(OT_F32, y, 2, 1, (int)n)};
                assert_int_equal(tk_run_ex(&node, in, out, threads, 0, 0, 0, NULL), OT_OK);
                assert_memory_equal(y, w, (size_t)n * sizeof(float));
                tk_node_free(&node);
            }
    free(a), free(b), free(y), free(w);
}

/* ErfGrad: dx = dy * 2/sqrt(pi) * expf(-v * v), one element at a time. */
static void test_erf_grad(void **state) {
    (void)state;
    int64_t n = 70000 + 5;
    float *dy = malloc((size_t)n * sizeof(float)), *v = malloc((size_t)n * sizeof(float));
    float *dx = malloc((size_t)n * sizeof(float)), *w = malloc((size_t)n * sizeof(float));
    tk_fill(dy, n, 3, -1.0f, 1.0f);
    tk_fill(v, n, 4, -12.0f, 12.0f);
    v[7] = NAN, v[8] = INFINITY, v[9] = -0.0f;
    for (int64_t i = 0; i < n; i++) w[i] = dy[i] * 1.1283791670955126f * expf(-v[i] * v[i]);
    for (int threads = 1; threads <= 2; threads++) {
        ot_node node = tk_node(OT_OP_ERF_GRAD, 2, 1);
        ot_tensor in[2] = {tk_t(OT_F32, dy, 1, (int)n), tk_t(OT_F32, v, 1, (int)n)};
        ot_tensor out[1] = {tk_t(OT_F32, dx, 1, (int)n)};
        assert_int_equal(tk_run_ex(&node, in, out, threads, 0, 0, 0, NULL), OT_OK);
        assert_memory_equal(dx, w, (size_t)n * sizeof(float));
        tk_node_free(&node);
    }
    free(dy), free(v), free(dx), free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expf_sweep),
        cmocka_unit_test(test_expf_edges),
        cmocka_unit_test(test_expf_underflow_lanes),
        cmocka_unit_test(test_exp_diff),
        cmocka_unit_test(test_max),
        cmocka_unit_test(test_dropout_select),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_softmax_lines),
        cmocka_unit_test(test_erf),
        cmocka_unit_test(test_arith),
        cmocka_unit_test(test_erf_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
