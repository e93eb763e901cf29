/* grad_check.h — finite-difference gradient checks for the autodiff tests: build a
 * tiny forward graph with random params, append a scalar loss sum_k <Y_k, R_k> with
 * fixed random R_k, run ot_autodiff_build, evaluate with ref_eval, and compare every
 * param gradient element with a central difference (loss accumulated in double). */
#ifndef OT_GRAD_CHECK_H
#define OT_GRAD_CHECK_H

#include "autodiff/autodiff.h"
#include "ir.h"

typedef struct gc_opts {
    double step;      /* central-difference step (default 1e-2) */
    double rtol, atol; /* |analytic - numeric| <= atol + rtol * max(|a|, |n|) (defaults 1e-2, 2e-3) */
    uint64_t seed;    /* RNG seed passed to kernels (Dropout) */
    bool verbose;
} gc_opts;

ot_graph *gc_graph(void);
/* Deterministic uniform in [0, 1) from a 32-bit state. */
float gc_rand(uint32_t *s);
/* Float param with uniform data in [lo, hi); with away_from_zero, |x| >= 0.2*(hi-lo)/2
 * so kinks (Relu, Clip, |.|) are not straddled by the finite difference. */
int gc_param(ot_graph *g, const char *name, int rank, const int64_t *dims, uint32_t *rng, float lo, float hi,
             bool away_from_zero);
/* Constant (kind OT_VK_CONSTANT) with the given data. */
int gc_const(ot_graph *g, const char *name, ot_dtype dt, int rank, const int64_t *dims, const void *data);
/* Activation value with a static shape. */
int gc_val(ot_graph *g, const char *name, ot_dtype dt, int rank, const int64_t *dims);
/* Forward node; returns its id (asserts on failure). */
int gc_op(ot_graph *g, ot_op op, const int *in, int n_in, const int *out, int n_out);
/* Appends the loss over ys and returns its value id. */
int gc_loss(ot_graph *g, const int *ys, int n_ys, uint32_t *rng);
/* Full check: loss over ys, autodiff over every param, FD compare. Returns the
 * number of mismatching elements (printed). Frees nothing: the caller frees g. */
int gc_check(ot_graph *g, const int *ys, int n_ys, const gc_opts *opt);
/* Same as gc_check for one output with default options. */
int gc_check1(ot_graph *g, int y);
/* The check of a unary op: y = op(x) on a [3, 4] param with data in [lo, hi) (drawn
 * from rng state seed + op; away as gc_param's away_from_zero), attrs (may be NULL)
 * setting the node's attributes; asserts that no element mismatches. */
void gc_check_unary(ot_op op, uint32_t seed, float lo, float hi, bool away, void (*attrs)(ot_node *));

#endif
