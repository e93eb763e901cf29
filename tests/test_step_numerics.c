/* test_step_numerics.c — the numerics passes of a training step (issue 14): the
 * gradient sum of squares follows its specified block-and-lane order to the bit on
 * every code path (scalar, AVX2, AVX-512; NaN, Inf, subnormals, the largest floats),
 * ot_grad_sum_sq_many gives each gradient's sum at any thread count, and the
 * vectorised SGD / Adam updates give the bits of the scalar torch.optim loop they
 * replace and say when what they wrote is not finite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/grad_norm_sum.h"
#include "kernels/cpu/optim_cpu.h"

/* xorshift: values spread over many binades, signs mixed */
static float rnd(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    float m = (float)(*s >> 40) / (float)(1 << 24);
    int e = (int)((*s >> 8) % 40) - 30;
    return ldexpf((*s & 1) ? -m : m, e);
}

/* The order grad_norm_sum.h specifies, written out from its words: blocks of 4096,
 * element j of a block into lane j % 32, the lanes folded by halves, the blocks
 * added in order. */
static double spec_sum(const float *g, size_t n) {
    double total = 0.0;
    for (size_t b = 0; b < n; b += 4096) {
        double lane[32] = {0};
        for (size_t j = 0; j < 4096 && b + j < n; j++) lane[j % 32] += (double)g[b + j] * (double)g[b + j];
        for (int w = 16; w >= 1; w /= 2)
            for (int l = 0; l < w; l++) lane[l] += lane[l + w];
        total += lane[0];
    }
    return total;
}

static const size_t sizes[] = {0, 1, 31, 32, 33, 100, 4095, 4096, 4097, 8191, 70001, 300000};
enum { N_SIZES = sizeof sizes / sizeof *sizes };

/* Gradients of every size above in several flavours: k = size * 6 + flavour. */
static float *make_grad(int k, size_t *n, uint64_t *seed) {
    *n = sizes[k / 6];
    float *g = malloc((*n ? *n : 1) * sizeof(float));
    for (size_t i = 0; i < *n; i++) {
        float r = rnd(seed);
        switch (k % 6) {
        case 0: g[i] = r; break;                                       /* many binades, mixed signs */
        case 1: g[i] = r * 1e-25f; break;                              /* subnormal floats */
        case 2: g[i] = (i % 3) ? 3.4e38f : -3.3e38f; break;            /* the largest floats: finite sum */
        case 3: g[i] = i == *n / 2 ? NAN : r; break;                   /* a NaN */
        case 4: g[i] = i == *n - 1 ? -INFINITY : r; break;             /* an Inf, last */
        default: g[i] = i % 4099 == 5 ? 1e30f : r * 1e-40f; break;     /* huge among tiny */
        }
    }
    return g;
}

/* Scalar, AVX2 and AVX-512 give the spec's bits for every size and flavour; a sum is
 * finite exactly when its gradient is. */
static void test_sum_sq_paths_bitwise(void **state) {
    (void)state;
    uint64_t seed = 88172645463325252ull;
    int best = ot_grad_sum_sq_best_isa();
    if (best < OT_SS_AVX512)
        print_message("this CPU lacks %s: that path is not tested here\n", best < OT_SS_AVX2 ? "AVX2 and AVX-512" : "AVX-512");
    for (int k = 0; k < N_SIZES * 6; k++) {
        size_t n;
        float *g = make_grad(k, &n, &seed);
        double want = spec_sum(g, n);
        bool finite = true;
        for (size_t i = 0; i < n; i++) finite = finite && isfinite(g[i]);
        for (int isa = OT_SS_SCALAR; isa <= best; isa++) {
            double got = ot_grad_sum_sq_isa(g, n, isa);
            if (memcmp(&want, &got, sizeof want))
                fail_msg("path %d, %zu elements, flavour %d: %.17g, want %.17g", isa, n, k % 6, got, want);
        }
        double got = ot_grad_sum_sq(g, n);
        assert_memory_equal(&want, &got, sizeof want);
        assert_int_equal(finite, isfinite(got));
        free(g);
    }
}

/* ot_grad_sum_sq_many gives every gradient's ot_grad_sum_sq to the bit, for any
 * count and thread count (the blocks split over threads). */
static void test_sum_sq_many_bitwise(void **state) {
    (void)state;
    enum { K = N_SIZES * 6 };
    float *g[K];
    size_t n[K];
    uint64_t seed = 42;
    for (int k = 0; k < K; k++) g[k] = make_grad((k * 7) % K, &n[k], &seed);
    for (int threads = 0; threads <= 3; threads++) {
        for (int count = 1; count <= K; count += 9) {
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
    for (int k = 0; k < K; k++) free(g[k]);
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
        cmocka_unit_test(test_sum_sq_paths_bitwise),
        cmocka_unit_test(test_sum_sq_many_bitwise),
        cmocka_unit_test(test_sgd_update_bitwise),
        cmocka_unit_test(test_adam_update_flags_nonfinite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
