/* test_step_numerics.c — the fused numerics passes of a training step (issue 14):
 * ot_grad_sum_sq_many gives every gradient's ot_grad_sum_sq to the bit (any count,
 * size, thread count, with NaN and Inf; long ones in blocks, ties and binades), and the vectorised SGD / Adam updates give
 * the bits of the scalar torch.optim loop they replace and say when what they wrote
 * is not finite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/optim_cpu.h"

/* xorshift: values spread over many binades, signs mixed */
static float rnd(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    float m = (float)(*s >> 40) / (float)(1 << 24);
    int e = (int)((*s >> 8) % 40) - 30;
    return ldexpf((*s & 1) ? -m : m, e);
}

static void test_sum_sq_many_bitwise(void **state) {
    (void)state;
    enum { K = 41 };
    static const size_t sizes[] = {0, 1, 3, 4, 5, 17, 512, 1000, 4099, 70001, 300000};
    float *g[K];
    size_t n[K];
    uint64_t seed = 88172645463325252ull;
    for (int k = 0; k < K; k++) {
        n[k] = sizes[(k * 7) % (sizeof sizes / sizeof *sizes)];
        g[k] = malloc((n[k] ? n[k] : 1) * sizeof(float));
        for (size_t i = 0; i < n[k]; i++) g[k][i] = rnd(&seed);
    }
    g[9][2] = NAN;          /* a NaN, an Inf, both, and an Inf late in a long one */
    g[12][0] = INFINITY;
    g[20][1] = -INFINITY, g[20][3] = NAN;
    g[30][n[30] - 1] = INFINITY;
    for (int threads = 0; threads <= 3; threads++) {
        for (int count = 1; count <= K; count += 8) {
            double ss[K];
            ot_grad_sum_sq_many((const float *const *)g, n, count, ss, threads);
            for (int k = 0; k < count; k++) {
                double want = ot_grad_sum_sq(g[k], n[k]);
                if (memcmp(&want, &ss[k], sizeof want))
                    fail_msg("threads %d, count %d: gradient %d (%zu elements): %.17g, want %.17g", threads, count, k,
                             n[k], ss[k], want);
            }
        }
    }
    double ss[K];
    ot_grad_sum_sq_many((const float *const *)g, n, K, ss, 2);
    assert_true(isnan(ss[9]) && isinf(ss[12]) && isnan(ss[20]) && isinf(ss[30]));
    assert_true(isfinite(ss[0]) && isfinite(ss[1]));
    for (int k = 0; k < K; k++) free(g[k]);
}

/* Long gradients (summed in blocks) whose squares tie often (few-bit dyadic values),
 * cross many binades (growing magnitudes), hold subnormals, a huge value late, or
 * an Inf or a NaN early. */
static void test_sum_sq_blocks_bitwise(void **state) {
    (void)state;
    enum { K = 8, N = 50000 };
    float *g[K];
    size_t n[K];
    uint64_t seed = 42;
    for (int k = 0; k < K; k++) g[k] = malloc(N * sizeof(float)), n[k] = N - (size_t)k * 1013;
    for (size_t i = 0; i < N; i++) {
        g[0][i] = (float)((int)(i % 13) - 6) * 0.125f;                 /* ties everywhere */
        g[1][i] = ldexpf((float)(1 + i % 3), (int)(i % 9) - 4);        /* ties, several binades */
        g[2][i] = ldexpf(1.0f + (float)(i % 5) / 4.0f, (int)(i / 400)); /* the sum keeps growing */
        g[3][i] = rnd(&seed) * 1e-19f;                                 /* squares near subnormal */
        g[4][i] = i % 4093 == 7 ? 1e18f : rnd(&seed);                  /* a few huge ones */
        g[5][i] = i == 0 ? 1e-30f : rnd(&seed);
        g[6][i] = i == 700 ? INFINITY : rnd(&seed); /* an Inf, then a NaN, early in a long one: walked */
        g[7][i] = i == 3000 ? NAN : rnd(&seed);
    }
    double ss[K];
    ot_grad_sum_sq_many((const float *const *)g, n, K, ss, 1);
    for (int k = 0; k < K; k++) {
        double want = ot_grad_sum_sq(g[k], n[k]);
        if (memcmp(&want, &ss[k], sizeof want)) fail_msg("gradient %d: %.17g, want %.17g", k, ss[k], want);
        free(g[k]);
    }
}

/* The scalar update the vectorised one replaces (torch.optim's order, libm's fmaf). */
static void sgd_ref(float *p, const float *g, float *buf, size_t n, float neg_lr, float gs, float mom, float wd,
                    bool nest) {
    for (size_t i = 0; i < n; i++) {
        float d = g[i];
        if (gs != 1.0f) d = d * gs;
        if (wd != 0.0f) d = fmaf(wd, p[i], d);
        if (mom != 0.0f && buf) {
            float b = buf[i] * mom + d;
            buf[i] = b;
            d = nest ? fmaf(mom, b, d) : b;
        }
        p[i] = fmaf(neg_lr, d, p[i]);
    }
}

static void test_sgd_update_bitwise(void **state) {
    (void)state;
    const size_t n = 200003; /* several chunks per thread and a vector tail */
    float *p = malloc(n * 4), *q = malloc(n * 4), *g = malloc(n * 4), *b1 = malloc(n * 4), *b2 = malloc(n * 4);
    uint64_t seed = 1234567;
    struct { float gs, mom, wd; bool nest; } cfg[] = {{1, 0, 0, false}, {0.5f, 0, 0.01f, false}, {1, 0.9f, 0, false},
                                                      {0.25f, 0.9f, 0.1f, true}};
    for (size_t c = 0; c < sizeof cfg / sizeof *cfg; c++) {
        for (size_t i = 0; i < n; i++) p[i] = q[i] = rnd(&seed), g[i] = rnd(&seed), b1[i] = b2[i] = rnd(&seed);
        for (int threads = 1; threads <= 2; threads++) {
            bool fin = ot_sgd_update(p, g, b1, n, 0.01, cfg[c].gs, cfg[c].mom, cfg[c].wd, cfg[c].nest, threads);
            sgd_ref(q, g, b2, n, (float)-0.01, cfg[c].gs, cfg[c].mom, cfg[c].wd, cfg[c].nest);
            assert_true(fin);
            assert_memory_equal(p, q, n * 4);
            assert_memory_equal(b1, b2, n * 4);
        }
    }
    /* an overflowing step is reported, wherever it happens */
    for (size_t i = 0; i < n; i++) p[i] = 1.0f, g[i] = 1e-3f;
    g[n - 2] = 3e38f;
    assert_false(ot_sgd_update(p, g, NULL, n, 10.0, 1.0f, 0, 0, false, 2));
    assert_true(isinf(p[n - 2]));
    g[n - 2] = 1e-3f, p[n - 2] = 1.0f;
    assert_true(ot_sgd_update(p, g, NULL, n, 10.0, 1.0f, 0, 0, false, 2));
    free(p), free(q), free(g), free(b1), free(b2);
}

static void test_adam_update_flags_nonfinite(void **state) {
    (void)state;
    const size_t n = 150001;
    float *p = calloc(n, 4), *g = calloc(n, 4), *m = calloc(n, 4), *v = calloc(n, 4);
    for (size_t i = 0; i < n; i++) g[i] = 1e-2f;
    assert_true(ot_adam_update(p, g, m, v, n, 1e-3, 1.0f, 0.9f, 0.999f, 1e-8f, 0.01f, true, 1, 2));
    g[77] = 3e38f; /* v = (1-b2) g^2 overflows */
    assert_false(ot_adam_update(p, g, m, v, n, 1e-3, 1.0f, 0.9f, 0.999f, 1e-8f, 0.0f, false, 2, 2));
    free(p), free(g), free(m), free(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_sq_many_bitwise),
        cmocka_unit_test(test_sum_sq_blocks_bitwise),
        cmocka_unit_test(test_sgd_update_bitwise),
        cmocka_unit_test(test_adam_update_flags_nonfinite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
