/* pointwise_math.h — the element rules of issue 13's pointwise ops (Abs, Sin, Cos,
 * HardSigmoid, HardSwish, Softplus, Mish, Min, Max, Mod, the comparisons and their
 * backward ops), written once for the CPU backend (C) and the CUDA backend (host and
 * device code), as half_float.h is. The CPU kernels (kernels/cpu/cpu_pointwise_math.c)
 * and the CUDA functors (kernels/cuda/cuda_pointwise_math.cu) call these, so the CUDA
 * host mode matches the CPU bit for bit and the device differs only by its libm.
 *
 * The backward rules follow PyTorch 1.13's kernels, operation for operation, so the
 * gradients of an exported model agree with PyTorch's within its libm's rounding. */
#ifndef OT_POINTWISE_MATH_H
#define OT_POINTWISE_MATH_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define OT_PM_FN static __host__ __device__ __forceinline__
#else
#define OT_PM_FN static inline
#endif

/* The most forward inputs a MaxGrad / MinGrad node reads (ir/ops.def: 3 to 6 inputs). */
#define OT_MINMAX_GRAD_MAX_IN 4

/* ---- forward ---------------------------------------------------------------------- */

/* max(0, min(1, alpha * x + beta)) by comparisons: NaN passes through. */
OT_PM_FN float ot_pm_hard_sigmoid(float x, float alpha, float beta) {
    float v = alpha * x + beta;
    v = v < 0.0f ? 0.0f : v;
    return v > 1.0f ? 1.0f : v;
}

/* ONNX HardSwish: x * HardSigmoid(x) with alpha = 1/6, beta = 0.5. */
OT_PM_FN float ot_pm_hard_swish(float x) { return x * ot_pm_hard_sigmoid(x, 1.0f / 6.0f, 0.5f); }

/* log(1 + e^x) without overflow: x + log1p(e^-x) for x > 0. */
OT_PM_FN float ot_pm_softplus(float x) { return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x)); }

/* PyTorch's mish: x * tanh(log1p(exp(x))) (exp overflowing to inf gives x). */
OT_PM_FN float ot_pm_mish(float x) { return x * tanhf(log1pf(expf(x))); }

/* Max / Min of two, NaN propagating as torch.maximum / minimum (and numpy) do. */
OT_PM_FN float ot_pm_max_f(float a, float b) { return (a >= b || a != a) ? a : b; }
OT_PM_FN float ot_pm_min_f(float a, float b) { return (a <= b || a != a) ? a : b; }

/* Integer Mod in int64: fmod = 1 truncates (C's %), fmod = 0 takes the divisor's sign
 * (Python's %). The caller rules out d == 0; MIN % -1 is 0 either way. */
OT_PM_FN int64_t ot_pm_mod_i(int64_t a, int64_t d, int fmod) {
    if (d == -1) return 0;
    int64_t r = a % d;
    if (!fmod && r != 0 && ((r < 0) != (d < 0))) r += d;
    return r;
}

/* ---- backward ----------------------------------------------------------------------- */

/* dY * sign(x); sign(0) = sign(NaN) = 0, as PyTorch's sgn. */
OT_PM_FN float ot_pm_abs_grad(float g, float x) {
    float s = x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f;
    return g * s;
}

/* dY * alpha strictly inside the ramp (PyTorch: 0 at x = +-3 for alpha = 1/6). */
OT_PM_FN float ot_pm_hard_sigmoid_grad(float g, float x, float alpha, float beta) {
    float v = alpha * x + beta;
    return (v > 0.0f && v < 1.0f) ? g * alpha : 0.0f;
}

/* PyTorch's hardswish_backward: 0 below -3, dY * (x / 3 + 0.5) up to 3, dY above. */
OT_PM_FN float ot_pm_hard_swish_grad(float g, float x) {
    if (x < -3.0f) return 0.0f;
    if (x <= 3.0f) return g * (x / 3.0f + 0.5f);
    return g;
}

/* PyTorch's mish_backward: dY * (tanh(sp) + x * sigmoid(x) * (1 - tanh(sp)^2)). */
OT_PM_FN float ot_pm_mish_grad(float g, float x) {
    /* NaN in, that NaN out: the formula combines NaNs in an order the C and the C++
     * compiler may pick differently (the sign of the NaN would differ) */
    if (x != x) return x;
    float sig = 1.0f / (1.0f + expf(-x));
    float t = tanhf(log1pf(expf(x)));
    return g * (t + x * sig * (1.0f - t * t));
}

/* d fmod(a, b) / db = -trunc(a / b) (PyTorch's fmod backward), times dY. */
OT_PM_FN float ot_pm_mod_grad_b(float g, float a, float b) { return -g * truncf(a / b); }

/* The gradient of input k of Max (is_max) or Min at one element: x_k the input's
 * value, y the output's, ties the number of inputs equal to y. As torch.maximum's
 * backward for two inputs: dY to a strict winner, dY / ties to each tied input, 0 to
 * a strict loser; when y is NaN nothing ties or loses, so every input gets dY. */
OT_PM_FN float ot_pm_minmax_grad(float g, float x_k, float y, int ties, int is_max) {
    if (x_k == y) return ties > 1 ? g / (float)ties : g;
    int loses = is_max ? x_k < y : x_k > y;
    return loses ? 0.0f : g;
}

#endif
