/* test_gemm_select.c — the CPU GEMM selection (kernels/cpu/gemm_select.c): the rule
 * picks the library its header comment says (oneDNN only where it runs with AVX-512);
 * every library path computes op(A) op(B)
 * with alpha, beta and leading dimensions right; each gives the same bits on repeated
 * calls, at other addresses, and inside an OpenMP parallel region as outside on one
 * thread; and a batched MatMul spread over the threads gives the bits of its GEMMs run
 * one by one, whichever thread ran each. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/gemm_select.h"
#include "test_kernels_cpu_util.h"

static float *random_floats(size_t n, unsigned seed) {
    float *x = malloc(n * sizeof(float) + 64);
    assert_non_null(x);
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n + 16; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((int)(s >> 9) % 2001 - 1000) / 997.0f;
    }
    return x;
}

/* One GEMM problem: stored A (rows x lda), B, C with padded leading dimensions. */
typedef struct {
    bool ta, tb;
    int M, N, K, lda, ldb, ldc;
    float *A, *B, *C0; /* C0: C before the call (beta != 0 reads it) */
} gemm_case;

static gemm_case make_case(bool ta, bool tb, int M, int N, int K, unsigned seed) {
    gemm_case g = {ta, tb, M, N, K, (ta ? M : K) + 3, (tb ? K : N) + 5, N + 2, NULL, NULL, NULL};
    g.A = random_floats((size_t)(ta ? K : M) * g.lda, seed);
    g.B = random_floats((size_t)(tb ? N : K) * g.ldb, seed + 1);
    g.C0 = random_floats((size_t)M * g.ldc, seed + 2);
    return g;
}

static void free_case(gemm_case *g) { free(g->A), free(g->B), free(g->C0); }

/* Runs impl on the case at an offset of `shift` floats from the case's buffers. */
static float *run_case(const gemm_case *g, ot_gemm_impl impl, int threads, float alpha, float beta, int shift) {
    size_t na = (size_t)(g->ta ? g->K : g->M) * g->lda, nb = (size_t)(g->tb ? g->N : g->K) * g->ldb,
           nc = (size_t)g->M * g->ldc;
    float *a = malloc((na + 16) * sizeof(float)), *b = malloc((nb + 16) * sizeof(float)),
          *c = malloc((nc + 16) * sizeof(float));
    assert_true(a && b && c);
    memcpy(a + shift, g->A, na * sizeof(float));
    memcpy(b + shift, g->B, nb * sizeof(float));
    memcpy(c + shift, g->C0, nc * sizeof(float));
    ot_gemm_run(impl, threads, g->ta, g->tb, g->M, g->N, g->K, alpha, a + shift, g->lda, b + shift, g->ldb, beta,
                c + shift, g->ldc);
    float *out = malloc(nc * sizeof(float));
    memcpy(out, c + shift, nc * sizeof(float));
    free(a), free(b), free(c);
    return out;
}

static void check_against_reference(const gemm_case *g, const float *c, float alpha, float beta) {
    for (int i = 0; i < g->M; i++) {
        for (int j = 0; j < g->N; j++) {
            double s = 0, mag = 0;
            for (int k = 0; k < g->K; k++) {
                double a = g->ta ? g->A[(size_t)k * g->lda + i] : g->A[(size_t)i * g->lda + k];
                double b = g->tb ? g->B[(size_t)j * g->ldb + k] : g->B[(size_t)k * g->ldb + j];
                s += a * b;
                mag += fabs(a * b);
            }
            double want = alpha * s + beta * g->C0[(size_t)i * g->ldc + j];
            double tol = 1e-5 * (fabs(alpha) * mag + fabs(beta * g->C0[(size_t)i * g->ldc + j])) + 1e-6;
            if (fabs(c[(size_t)i * g->ldc + j] - want) > tol)
                fail_msg("C[%d][%d] = %.9g, reference %.9g (M %d N %d K %d ta %d tb %d)", i, j,
                         (double)c[(size_t)i * g->ldc + j], want, g->M, g->N, g->K, g->ta, g->tb);
        }
        /* The padding past N is C's own: never written. */
        for (int j = g->N; j < g->ldc; j++)
            assert_true(c[(size_t)i * g->ldc + j] == g->C0[(size_t)i * g->ldc + j]);
    }
}

static void test_rule(void **state) {
    (void)state;
    for (int t = 1; t <= 2; t++) {
        if (ot_gemm_dnnl_avx512()) {
            assert_int_equal(ot_gemm_select(false, false, 32, 512, 512, t), OT_GEMM_DNNL);
            assert_int_equal(ot_gemm_select(false, false, 512, 768, 50257, t), OT_GEMM_DNNL);
            assert_int_equal(ot_gemm_select(true, false, 512, 512, 32, t), OT_GEMM_DNNL);
            assert_int_equal(ot_gemm_select(false, true, 16, 512, 512, t), OT_GEMM_DNNL_CT);
            assert_int_equal(ot_gemm_select(false, true, 32, 512, 512, t), OT_GEMM_DNNL_CT);
            assert_int_equal(ot_gemm_select(false, true, 32, 1024, 512, t), OT_GEMM_DNNL); /* scratch too small */
            assert_int_equal(ot_gemm_select(false, true, 33, 512, 512, t), OT_GEMM_DNNL);
            assert_int_equal(ot_gemm_select(false, true, 512, 768, 768, t), OT_GEMM_DNNL);
        } else { /* AVX2, or no oneDNN: OpenBLAS for every shape */
            assert_int_equal(ot_gemm_select(false, false, 32, 512, 512, t), OT_GEMM_OPENBLAS);
            assert_int_equal(ot_gemm_select(false, false, 512, 768, 50257, t), OT_GEMM_OPENBLAS);
            assert_int_equal(ot_gemm_select(true, false, 512, 512, 32, t), OT_GEMM_OPENBLAS);
            assert_int_equal(ot_gemm_select(false, true, 16, 512, 512, t), OT_GEMM_OPENBLAS);
            assert_int_equal(ot_gemm_select(false, true, 512, 768, 768, t), OT_GEMM_OPENBLAS);
        }
        assert_int_equal(ot_gemm_select(true, true, 32, 512, 512, t), OT_GEMM_OPENBLAS);
        assert_int_equal(ot_gemm_select(false, false, 64, 32, 64, t), OT_GEMM_OPENBLAS); /* 2^17 MACs */
        assert_int_equal(ot_gemm_select(true, true, 256, 256, 256, t), OT_GEMM_OPENBLAS);
    }
    assert_false(ot_gemm_batch_parallel(96, 256, 256, 64, 1));
    assert_true(ot_gemm_batch_parallel(96, 256, 256, 64, 2));
    assert_false(ot_gemm_batch_parallel(7, 256, 256, 64, 2));
    assert_true(ot_gemm_batch_parallel(8, 256, 256, 64, 2));
    assert_false(ot_gemm_batch_parallel(96, 512, 512, 512, 2));
}

static const ot_gemm_impl IMPLS[] = {OT_GEMM_OPENBLAS, OT_GEMM_DNNL, OT_GEMM_DNNL_CT};

/* Every implementation, every transpose pair it takes, alpha and beta: right values,
 * and the same bits on a repeat and at another alignment. */
static void test_values_and_repeat_bits(void **state) {
    (void)state;
    for (int v = 0; v < 3; v++)
        for (int tt = 0; tt < 4; tt++) {
            bool ta = tt & 1, tb = tt & 2;
            if (IMPLS[v] == OT_GEMM_DNNL_CT && !tb) continue; /* C^T is for op(B) = B^T */
            gemm_case g = make_case(ta, tb, 24, 80, 200, (unsigned)(v * 4 + tt));
            for (int t = 1; t <= 2; t++)
                for (int b = 0; b < 2; b++) {
                    float alpha = b ? 0.75f : 1.0f, beta = b ? 1.0f : 0.0f;
                    float *c0 = run_case(&g, IMPLS[v], t, alpha, beta, 0);
                    check_against_reference(&g, c0, alpha, beta);
                    for (int shift = 0; shift < 3; shift++) {
                        float *c1 = run_case(&g, IMPLS[v], t, alpha, beta, shift * 5 + 1);
                        assert_memory_equal(c0, c1, (size_t)g.M * g.ldc * sizeof(float));
                        free(c1);
                    }
                    free(c0);
                }
            free_case(&g);
        }
}

/* The shapes the bench cases issue most, each by the implementation the rule picks: on
 * one thread the bits inside a parallel region (each thread its own call) are those of
 * the call outside; on 1 and 2 threads a repeat gives the same bits. */
static void test_bits_inside_parallel(void **state) {
    (void)state;
    static const int shapes[][5] = {
        {0, 0, 32, 512, 512}, {0, 1, 16, 512, 512}, {1, 0, 512, 512, 32}, {0, 1, 256, 384, 128}, {0, 0, 256, 64, 256},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int *d = shapes[s];
        gemm_case g = make_case(d[0], d[1], d[2], d[3], d[4], (unsigned)(100 + s));
        size_t nc = (size_t)g.M * g.ldc;
        for (int t = 1; t <= 2; t++) {
            ot_gemm_impl impl = ot_gemm_select(g.ta, g.tb, g.M, g.N, g.K, t);
            float *c0 = run_case(&g, impl, t, 1.0f, 0.0f, 0);
            float *c1 = run_case(&g, impl, t, 1.0f, 0.0f, 0);
            assert_memory_equal(c0, c1, nc * sizeof(float));
            free(c1);
            if (t == 1) {
                float *par[4] = {0};
#pragma omp parallel for num_threads(4) schedule(static, 1)
                for (int i = 0; i < 4; i++)
                    par[i] = run_case(&g, impl, 1, 1.0f, 0.0f, i);
                for (int i = 0; i < 4; i++) {
                    assert_memory_equal(c0, par[i], nc * sizeof(float));
                    free(par[i]);
                }
            }
            free(c0);
        }
        free_case(&g);
    }
}

/* ot_cpu_sgemm gives the calling thread's OpenMP count back, whatever runs. */
static void test_thread_count_restored(void **state) {
    (void)state;
    gemm_case g = make_case(false, true, 16, 512, 512, 7);
    int before = omp_get_max_threads();
    for (int t = 1; t <= 3; t++) {
        ot_kernel_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.n_threads = t;
        float *c = malloc((size_t)g.M * g.ldc * sizeof(float));
        ot_cpu_sgemm(&ctx, g.ta, g.tb, g.M, g.N, g.K, 1.0f, g.A, g.lda, g.B, g.ldb, 0.0f, c, g.ldc);
        assert_int_equal(omp_get_max_threads(), before);
        free(c);
    }
    free_case(&g);
}

/* NN on B^T copied out and NT on B itself: the same bits through ot_cpu_sgemm, as
 * autodiff/fold_linear.c relies on (bench shapes: the MLP's, the chain's, GPT's, the
 * classifier heads'). Not below 2^18 multiply-adds: there OpenBLAS runs both, and its
 * small-matrix kernels (picked on AVX-512 machines unless OPENBLAS_CORETYPE says
 * otherwise) give NN and NT other bits, as on main. */
static void test_nn_nt_same_bits(void **state) {
    (void)state;
    static const int shapes[][3] = {{16, 512, 512},  {32, 512, 512},  {16, 96, 1024},  {37, 129, 300},
                                    {512, 128, 384}, {256, 768, 640}, {512, 768, 768}, {8, 1280, 1000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        float *x = random_floats((size_t)M * K, 31), *w = random_floats((size_t)N * K, 32);
        float *wt = malloc((size_t)N * K * sizeof(float)), *y1 = malloc((size_t)M * N * sizeof(float)),
              *y2 = malloc((size_t)M * N * sizeof(float));
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++)
                wt[(size_t)k * N + n] = w[(size_t)n * K + k];
        for (int t = 1; t <= 2; t++) {
            ot_kernel_ctx ctx;
            memset(&ctx, 0, sizeof ctx);
            ctx.n_threads = t;
            ot_cpu_sgemm(&ctx, false, false, M, N, K, 1.0f, x, K, wt, N, 0.0f, y1, N);
            ot_cpu_sgemm(&ctx, false, true, M, N, K, 1.0f, x, K, w, K, 0.0f, y2, N);
            if (memcmp(y1, y2, (size_t)M * N * sizeof(float)))
                fail_msg("NN and NT differ: M %d K %d N %d, %d threads", M, K, N, t);
        }
        free(x), free(w), free(wt), free(y1), free(y2);
    }
}

/* A batched MatMul spread over 2 or 3 threads: the bits of one thread's run, in which
 * every GEMM runs one after another. 12 GEMMs, so that 3 threads spread them too (a
 * GEMM on several threads is not promised one thread's bits: OpenBLAS's differ on
 * AVX2). */
static void test_batched_matmul_spread(void **state) {
    (void)state;
    enum { B0 = 3, B1 = 4, M = 64, K = 128, N = 64 };
    float *a = random_floats((size_t)B0 * B1 * M * K, 11), *b = random_floats((size_t)B1 * K * N, 12);
    size_t ny = (size_t)B0 * B1 * M * N;
    float *y[3];
    for (int t = 1; t <= 3; t++) {
        y[t - 1] = calloc(ny, sizeof(float));
        ot_node n = tk_node(OT_OP_MATMUL, 2, 1);
        ot_tensor in[2] = {tk_t(OT_F32, a, 4, B0, B1, M, K), tk_t(OT_F32, b, 3, B1, K, N)};
        ot_tensor out[1] = {tk_t(OT_F32, y[t - 1], 4, B0, B1, M, N)};
        assert_int_equal(tk_run_ex(&n, in, out, t, 0, 0, -1, NULL), OT_OK);
    }
    assert_true(ot_gemm_batch_parallel(B0 * B1, M, N, K, 2));
    assert_true(ot_gemm_batch_parallel(B0 * B1, M, N, K, 3));
    assert_memory_equal(y[0], y[1], ny * sizeof(float));
    assert_memory_equal(y[0], y[2], ny * sizeof(float));
    /* and batch 5 (B1 of 4 broadcast against A's 3) is right */
    for (int m = 0; m < M; m += 9)
        for (int j = 0; j < N; j += 7) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)a[((size_t)5 * M + m) * K + k] * b[((size_t)1 * K + k) * N + j];
            assert_float_equal(y[1][((size_t)5 * M + m) * N + j], s, 1e-4);
        }
    for (int t = 0; t < 3; t++)
        free(y[t]);
    free(a), free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule),
        cmocka_unit_test(test_values_and_repeat_bits),
        cmocka_unit_test(test_bits_inside_parallel),
        cmocka_unit_test(test_thread_count_restored),
        cmocka_unit_test(test_nn_nt_same_bits),
        cmocka_unit_test(test_batched_matmul_spread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
