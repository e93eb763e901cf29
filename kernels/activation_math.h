/* activation_math.h — the element rules of issue 26's pointwise ops (Elu, Selu, Celu,
 * PRelu, ThresholdedRelu, Softsign, Sign, Floor, Ceil, Round) and their backward ops,
 * written once for the CPU kernels (kernels/cpu/cpu_activation.c) and the CUDA
 * functors (kernels/cuda/cuda_activation.cu), as pointwise_math.h is for issue 13's:
 * the CUDA host mode matches the CPU bit for bit, the device differs only by its libm.
 *
 * The backward rules follow PyTorch 1.13's kernels (elu_backward with is_result =
 * false, prelu's backward), operation for operation where PyTorch has one. */
#ifndef OT_ACTIVATION_MATH_H
#define OT_ACTIVATION_MATH_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define OT_AM_FN static __host__ __device__ __forceinline__
#else
#define OT_AM_FN static inline
#endif

/* ---- forward ---------------------------------------------------------------------- */

/* PyTorch's elu(x, alpha, scale, input_scale) with negcoef = alpha * scale and
 * poscoef = scale: Elu (scale 1), Selu (alpha, gamma), Celu (input_scale 1 / alpha).
 * expm1 rather than exp - 1: exact near 0; NaN passes through (x <= 0 is false). */
OT_AM_FN float ot_am_elu(float x, float negcoef, float poscoef, float input_scale) {
    return x <= 0.0f ? expm1f(x * input_scale) * negcoef : x * poscoef;
}

/* x where x > alpha, else 0 (NaN gives 0, as the comparison fails) */
OT_AM_FN float ot_am_thresholded_relu(float x, float alpha) { return x > alpha ? x : 0.0f; }

OT_AM_FN float ot_am_softsign(float x) { return x / (1.0f + fabsf(x)); }

/* PyTorch's prelu: x > 0 ? x : slope * x */
OT_AM_FN float ot_am_prelu(float x, float slope) { return x > 0.0f ? x : slope * x; }

/* 1, -1 or 0 (for +-0); NaN stays NaN as numpy's sign (ONNX's reference) gives */
OT_AM_FN float ot_am_sign(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == x ? 0.0f : x; }
OT_AM_FN int64_t ot_am_sign_i(int64_t x) { return (int64_t)(x > 0) - (int64_t)(x < 0); }

/* half to even (ONNX Round, torch.round): rintf under the default rounding mode */
OT_AM_FN float ot_am_round(float x) { return rintf(x); }

/* ---- backward ----------------------------------------------------------------------- */

/* PyTorch's elu_backward from the input: dY * input_scale * negcoef * exp(x *
 * input_scale) for x <= 0, dY * poscoef above (the same products in the same order). */
OT_AM_FN float ot_am_elu_grad(float g, float x, float negcoef, float poscoef, float input_scale) {
    return x <= 0.0f ? g * input_scale * negcoef * expf(x * input_scale) : g * poscoef;
}

OT_AM_FN float ot_am_thresholded_relu_grad(float g, float x, float alpha) { return x > alpha ? g : 0.0f; }

/* d/dx x / (1 + |x|) = 1 / (1 + |x|)^2 */
OT_AM_FN float ot_am_softsign_grad(float g, float x) {
    float d = 1.0f + fabsf(x);
    return g / (d * d);
}

/* PyTorch's prelu backward: which = 0 gives dX (dY, or slope * dY at x <= 0), which =
 * 1 the slope's share at this element (x * dY at x <= 0), summed later over the
 * elements the slope was broadcast to. */
OT_AM_FN float ot_am_prelu_grad(float g, float x, float slope, int which) {
    if (which == 0) return x > 0.0f ? g : slope * g;
    return x > 0.0f ? 0.0f : x * g;
}

#endif
