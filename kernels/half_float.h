/* half_float.h — float16 and bfloat16 conversions, written once for the CPU backend
 * (C) and the CUDA backend (host and device code). Round to nearest even, NaN stays a
 * quiet NaN, overflow goes to infinity, float16 subnormals are handled by scaling.
 * Both backends must give the same bits for every Cast, so there is one copy. */
#ifndef OT_HALF_FLOAT_H
#define OT_HALF_FLOAT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define OT_HF_FN static __host__ __device__ __forceinline__
#else
#define OT_HF_FN static inline
#endif

OT_HF_FN uint32_t ot_hf_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

OT_HF_FN float ot_hf_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

OT_HF_FN float ot_hf_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    return ot_hf_from_bits(bits);
}

OT_HF_FN uint16_t ot_hf_f32_to_f16(float f) {
    uint32_t x = ot_hf_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow after rounding */
    if (ax < 0x38800000u) { /* subnormal or zero in half: the step 2^-24 scaled to 1, rounded
                             * to nearest even (rintf in the default rounding mode) */
        return (uint16_t)(sign | (uint32_t)rintf(ot_hf_from_bits(ax) * 16777216.0f));
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1); /* round to nearest even on bit 13 */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

OT_HF_FN float ot_hf_bf16_to_f32(uint16_t h) { return ot_hf_from_bits((uint32_t)h << 16); }

OT_HF_FN uint16_t ot_hf_f32_to_bf16(float f) {
    uint32_t x = ot_hf_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

#undef OT_HF_FN
#endif
