/* grad_norm_sum.h — the gradient sums of squares behind the training loop's NaN/Inf
 * check and gradient norm (issue 14): one fixed, deterministic summation order that
 * the scalar reference, AVX2 and AVX-512 all follow to the bit, one gradient at a
 * time (cache-hot, right after the node that writes it) or many at once.
 *
 * The order: the gradient in blocks of OT_SS_BLOCK floats from index 0; within a
 * block, element j goes to lane j % OT_SS_LANES, each lane a double sum in index
 * order (x*x of a float is exact in double, so fma(x, x, s) and s + x*x agree); the
 * lanes are folded by halves (lane l += lane l + w for w = 16, 8, 4, 2, 1), and the
 * block sums added in block order. Nothing depends on the thread count or the CPU.
 * A sum is finite exactly when its gradient is: no finite float's square overflows a
 * double, nor does any count of them. */
#ifndef OT_GRAD_NORM_SUM_H
#define OT_GRAD_NORM_SUM_H

#include <stddef.h>

#include "kernels/kernel.h" /* ot_grad_sum_sq: the same sum on the best path */

#define OT_SS_BLOCK 4096
#define OT_SS_LANES 32

/* Which code path sums: 0 scalar (the reference), 1 AVX2 + FMA, 2 AVX-512F. */
enum { OT_SS_SCALAR = 0, OT_SS_AVX2 = 1, OT_SS_AVX512 = 2 };

/* The best path this CPU runs. */
int ot_grad_sum_sq_best_isa(void);

/* The sum of squares of g[0..n) on path isa (clamped to ot_grad_sum_sq_best_isa, so
 * a test may ask for each); every path gives the same bits. */
double ot_grad_sum_sq_isa(const float *g, size_t n, int isa);

/* ss[k] = ot_grad_sum_sq(g[k], n[k]) for k < count, bit for bit: the blocks of all
 * the gradients split over up to n_threads threads (0: OpenMP's default), each
 * gradient's block sums then added in order. */
void ot_grad_sum_sq_many(const float *const *g, const size_t *n, int count, double *ss, int n_threads);

#endif
