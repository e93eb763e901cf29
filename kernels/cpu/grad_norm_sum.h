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
 * double, nor does any count of them.
 *
 * The sums feed the training loop's NaN/Inf check and its reported gradient norm
 * (train/train_loop.c); the optimizer's kernels can take them during their update
 * (ot_grad_sum_sq_visit), so that a gradient proved finite before the update is
 * never read twice. */
#ifndef OT_GRAD_NORM_SUM_H
#define OT_GRAD_NORM_SUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Called on elements [lo, hi) of gradient k, one block at a time, right before the
 * block's sum is taken (which then reads it from L1); says whether what it did came
 * out finite (the optimizer's update: kernels/cpu/optim_cpu.c). */
typedef bool (*ot_ss_visit_fn)(const void *user, int k, size_t lo, size_t hi);

/* ot_grad_sum_sq_many's sums (to the bit) in ss[k] for each k with want[k] (want
 * NULL: every k; the others are left alone) on exactly n_threads threads (0:
 * OpenMP's default), calling visit (when not NULL) on every block of every gradient
 * before its sum, each block once; *all_true (when not NULL): whether every visit
 * returned true. False, with nothing done, when out of memory. */
bool ot_grad_sum_sq_visit(const float *const *g, const size_t *n, int count, double *ss, const bool *want,
                          int n_threads, ot_ss_visit_fn visit, const void *user, bool *all_true);

/* The largest |x[i]|'s bits (an integer that orders like |x|, NaN above Inf): every
 * x[i] is finite exactly when the result is below 0x7f800000, and the result read
 * back as a float is max |x[i]|. */
uint32_t ot_f32_max_abs_bits(const float *x, size_t n);

#endif
