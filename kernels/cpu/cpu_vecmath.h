/* cpu_vecmath.h — element loops vectorised where the CPU allows, with the bits of the
 * one-at-a-time loops they replace (cpu_vecmath.c): expf over an array, exp of float
 * minus a double, a running max, Dropout's select, Where's, Erf's rational rule, float + - * /. */
#ifndef OT_CPU_VECMATH_H
#define OT_CPU_VECMATH_H

#include <stdbool.h>
#include <stdint.h>

/* y[i] = expf(x[i]) for i < n, bit for bit; y may be x. */
void ot_cpu_expf_n(const float *x, float *y, int64_t n);
/* Its vector bodies by width, for it and its tests: the widest this CPU has (16 with
 * AVX-512, 8 with AVX2 and FMA, 0), and the first elements of n done with `lanes`
 * lanes (a multiple of it; 0 when this CPU lacks that width), the rest left to the
 * caller. */
int ot_cpu_expf_lanes(void);
int64_t ot_cpu_expf_n_lanes(int lanes, const float *x, float *y, int64_t n);

/* y[i] = exp((double)x[i] - m) for i < n, bit for bit (the C library's exp). */
void ot_cpu_exp_diff_f64(const float *x, double m, double *y, int64_t n);

/* The result of m = -inf; for i < n: m = x[i] > m ? x[i] : m (NaNs skipped, the first
 * of equal values kept), bit for bit. */
float ot_cpu_max_f32(const float *x, int64_t n);

/* y[k] = u[k] >= ratio ? x[k] * scale : 0 and, when mask is not NULL, mask[k] = the
 * keep bit, for k < n (Dropout and DropoutGrad after their uniforms); y may be x. */
void ot_cpu_dropout_select(const float *u, float ratio, const float *x, float scale, float *y, uint8_t *mask,
                           int64_t n);

/* o[k] = c[k] ? x[x_step ? k : 0] : y[y_step ? k : 0] for k < n: Where over a
 * contiguous condition, with X and Y contiguous or one broadcast value each. */
void ot_cpu_select_u32(const uint8_t *c, const uint32_t *x, bool x_step, const uint32_t *y, bool y_step, uint32_t *o,
                       int64_t n);

/* y[k] = erf(x[k]) for k < n as x * P(x^2) / Q(x^2) on x clamped to [-4, 4] (Eigen's
 * float erf coefficients; max relative error 4.5e-7 against double erf over [-6, 6]):
 * ot_cpu_erf1's bits for every element, 16 or 4 at a time; y may be x. */
void ot_cpu_erf_n(const float *x, float *y, int64_t n);
float ot_cpu_erf1(float x);

/* y[k] = a[k] OP b[b_step ? k : 0] for k < n, one IEEE float operation per element (the
 * plain loop's bits); y may be a or b. */
typedef enum { OT_CPU_ARITH_ADD, OT_CPU_ARITH_SUB, OT_CPU_ARITH_MUL, OT_CPU_ARITH_DIV } ot_cpu_arith_op;
void ot_cpu_arith_f32(ot_cpu_arith_op op, const float *a, const float *b, bool b_step, float *y, int64_t n);

/* v[k] = (float)(g * (e[k] / s)) for k < n. */
void ot_cpu_div_scale_f64(const double *e, double s, double g, float *v, int64_t n);

#endif
