/* gemm_probe.c — times every way onnxtrain could run one row-major float GEMM
 * C = op(A) op(B) of a given shape, to choose the rule in kernels/cpu/gemm_select.c.
 * Reads lines "TT M N K COUNT" (as bench/gemm_probe.sh collects them from the bench
 * cases) on stdin and prints, for a thread count T, microseconds per GEMM of:
 *   ob    OpenBLAS on T threads
 *   dn    oneDNN dnnl_sgemm on T threads
 *   dnT   (op(B) = B^T only) B transposed into a scratch copy, then dnnl NN
 *   dnS   (op(B) = B^T only) C^T = B A^T by dnnl into a scratch, transposed into C
 *   pob   COUNT independent GEMMs spread over T threads, each OpenBLAS on 1 thread
 *   pdn   the same with dnnl on 1 thread
 * Each figure is the least of 7 samples of ~8 ms (the machine is shared: the least is
 * the one least disturbed). Run it with OMP_WAIT_POLICY=PASSIVE, as onnxtrain runs
 * (cli/main.c). Not part of onnxtrain.
 *
 *     gemm_probe T < shapes.txt
 */
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    char ta, tb;
    int M, N, K, count, T;
    float *A, *B, *C, *S; /* S: scratch for dnT / dnS */
} probe;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void transpose(const float *x, int rows, int cols, float *y) {
    for (int i0 = 0; i0 < rows; i0 += 32)
        for (int j0 = 0; j0 < cols; j0 += 32)
            for (int i = i0; i < rows && i < i0 + 32; i++)
                for (int j = j0; j < cols && j < j0 + 32; j++)
                    y[(size_t)j * rows + i] = x[(size_t)i * cols + j];
}

static void run_ob(const probe *p, const float *A, const float *B, float *C) {
    int lda = p->ta == 'T' ? p->M : p->K, ldb = p->tb == 'T' ? p->K : p->N;
    cblas_sgemm(CblasRowMajor, p->ta == 'T' ? CblasTrans : CblasNoTrans, p->tb == 'T' ? CblasTrans : CblasNoTrans, p->M,
                p->N, p->K, 1.0f, A, lda, B, ldb, 0.0f, C, p->N);
}

static void run_dn(const probe *p, const float *A, const float *B, float *C) {
    int lda = p->ta == 'T' ? p->M : p->K, ldb = p->tb == 'T' ? p->K : p->N;
    dnnl_sgemm(p->ta, p->tb, p->M, p->N, p->K, 1.0f, A, lda, B, ldb, 0.0f, C, p->N);
}

static void one(const probe *p, int variant) {
    int lda = p->ta == 'T' ? p->M : p->K;
    switch (variant) {
    case 0: run_ob(p, p->A, p->B, p->C); break;
    case 1: run_dn(p, p->A, p->B, p->C); break;
    case 2: /* B is N x K: make it K x N */
        transpose(p->B, p->N, p->K, p->S);
        dnnl_sgemm(p->ta, 'N', p->M, p->N, p->K, 1.0f, p->A, lda, p->S, p->N, 0.0f, p->C, p->N);
        break;
    case 3: /* C^T (N x M) = B (N x K) . op(A)^T */
        dnnl_sgemm('N', p->ta == 'T' ? 'N' : 'T', p->N, p->M, p->K, 1.0f, p->B, p->K, p->A, lda, 0.0f, p->S, p->M);
        transpose(p->S, p->N, p->M, p->C);
        break;
    default: { /* count GEMMs over the threads, one thread each */
        size_t a = (size_t)p->M * p->K, b = (size_t)p->K * p->N, c = (size_t)p->M * p->N;
        int nb = p->count < 16 ? p->count : 16;
#pragma omp parallel for schedule(static) num_threads(p->T)
        for (int i = 0; i < p->count; i++) {
            int j = i % nb;
            if (variant == 4)
                run_ob(p, p->A + j * a, p->B + j * b, p->C + (size_t)i % nb * c);
            else
                run_dn(p, p->A + j * a, p->B + j * b, p->C + (size_t)i % nb * c);
        }
    }
    }
}

/* Microseconds per GEMM: the least of 7 samples. */
static double time_variant(const probe *p, int variant) {
    one(p, variant);
    double t0 = now();
    one(p, variant);
    double once = now() - t0;
    int reps = once > 0.008 ? 1 : (int)(0.008 / (once + 1e-9)) + 1;
    double best = 1e30;
    for (int s = 0; s < 7; s++) {
        t0 = now();
        for (int r = 0; r < reps; r++)
            one(p, variant);
        double t = (now() - t0) / reps;
        if (t < best) best = t;
    }
    int per = variant >= 4 ? p->count : 1;
    return best / per * 1e6;
}

static float *fill(size_t n) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(rand() % 200 - 100) / 128.0f;
    return x;
}

int main(int argc, char **argv) {
    int T = argc > 1 ? atoi(argv[1]) : 2;
    openblas_set_num_threads(T);
    omp_set_num_threads(T);
    static const char *names[] = {"ob", "dn", "dnT", "dnS", "pob", "pdn"};
    printf("%-3s %5s %5s %5s %5s %2s", "op", "M", "N", "K", "count", "T");
    for (int v = 0; v < 6; v++)
        printf(" %9s", names[v]);
    printf("  best  GF/s(best)\n");
    char tt[8];
    probe p;
    while (scanf("%7s %d %d %d %d", tt, &p.M, &p.N, &p.K, &p.count) == 5) {
        p.ta = tt[0], p.tb = tt[1], p.T = T;
        int nb = p.count < 16 ? p.count : 16;
        p.A = fill((size_t)nb * p.M * p.K);
        p.B = fill((size_t)nb * p.K * p.N);
        p.C = fill((size_t)nb * p.M * p.N);
        size_t s = (size_t)p.N * (p.K > p.M ? p.K : p.M);
        p.S = fill(s);
        double t[6], best = 1e30;
        int bi = 0;
        for (int v = 0; v < 6; v++) {
            int skip = ((v == 2 || v == 3) && p.tb != 'T') || (v >= 4 && p.count < 2 * T);
            t[v] = skip ? -1 : time_variant(&p, v);
            if (!skip && t[v] < best) best = t[v], bi = v;
        }
        printf("%-3s %5d %5d %5d %5d %2d", tt, p.M, p.N, p.K, p.count, T);
        for (int v = 0; v < 6; v++)
            if (t[v] < 0)
                printf(" %9s", "-");
            else
                printf(" %9.1f", t[v]);
        printf("  %-4s %6.0f\n", names[bi], 2.0 * p.M * p.N * p.K / best / 1e3);
        fflush(stdout);
        free(p.A), free(p.B), free(p.C), free(p.S);
    }
    return 0;
}
