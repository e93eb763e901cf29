/* random_rule.h — the element rule of the random sources (RandomUniformLike,
 * RandomUniform, issue 13), written once for the CPU kernel (C) and the CUDA kernel
 * (host and device code), as pointwise_math.h is. The uniform u in [0, 1) is
 * ot_philox_uniform's (exec/rng.h) for (seed, step, node, element); both backends draw
 * the same u, and this rule turns it into the same float: one rounded multiply, then
 * one rounded add, never fused (nvcc would contract a * b + c into an FMA by default,
 * the CPU build has no FMA), so the GPU's draws are the CPU's bit for bit. */
#ifndef OT_RANDOM_RULE_H
#define OT_RANDOM_RULE_H

#if defined(__CUDACC__)
#define OT_RR_FN static __host__ __device__ __forceinline__
#else
#define OT_RR_FN static inline
#endif

/* low + u * (high - low): in [low, high) for low < high (ONNX RandomUniform). */
OT_RR_FN float ot_random_uniform_value(float u, float low, float high) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(low, __fmul_rn(u, __fsub_rn(high, low)));
#else
    float range = high - low;
    float scaled = u * range;
    return low + scaled;
#endif
}

#endif
