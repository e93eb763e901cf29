/* gemm_probe_log.c — an LD_PRELOAD shim that logs every cblas_sgemm call onnxtrain makes
 * (one line per call: order, transposes, M N K, lda ldb ldc, alpha beta, whether inside
 * an OpenMP parallel region), then forwards it to the real OpenBLAS. It lists the GEMM
 * shapes a bench case issues, for bench/gemm_probe.c to time; bench/gemm_probe.sh builds
 * it. Not part of onnxtrain.
 *
 *     GEMM_LOG=/tmp/shapes.txt LD_PRELOAD=build/gemm_probe_log.so onnxtrain train ...
 */
#define _GNU_SOURCE
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE, const blasint,
                         const blasint, const blasint, const float, const float *, const blasint, const float *,
                         const blasint, const float, float *, const blasint);

void cblas_sgemm(const enum CBLAS_ORDER o, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                 const blasint M, const blasint N, const blasint K, const float alpha, const float *A,
                 const blasint lda, const float *B, const blasint ldb, const float beta, float *C, const blasint ldc) {
    sgemm_fn real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
    const char *path = getenv("GEMM_LOG");
    FILE *f = path ? fopen(path, "a") : stderr;
    if (f) {
        fprintf(f, "%c %c%c %d %d %d %d %d %d %g %g par=%d\n", o == CblasRowMajor ? 'R' : 'C',
                ta == CblasTrans ? 'T' : 'N', tb == CblasTrans ? 'T' : 'N', (int)M, (int)N, (int)K, (int)lda, (int)ldb,
                (int)ldc, (double)alpha, (double)beta, omp_in_parallel());
        if (path) fclose(f);
    }
    real(o, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
