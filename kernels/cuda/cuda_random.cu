/* cuda_random.cu — the random sources on the GPU (RandomUniformLike, RandomUniform;
 * issue 13), counterpart of kernels/cpu/cpu_random.c: one thread per element draws
 * Philox's uniform for (seed, step, ctx->rng_node, element) (cuda_philox.cuh, the
 * generator Dropout uses) and scales it by random_rule.h's rule, so the draws are the
 * CPU's bit for bit and a recompute clone draws what its original drew. Host mode. */
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/cuda/cuda_philox.cuh"
extern "C" {
#include "kernels/random_rule.h"
}

struct random_uniform_op {
    float *y;
    uint64_t seed, step;
    uint32_t nid;
    float low, high;
    __host__ __device__ void operator()(int64_t i) const {
        y[i] = ot_random_uniform_value(philox_uniform(seed, step, nid, (uint64_t)i), low, high);
    }
};

OT_CUDA_LAUNCHER(ot_cuda_random_uniform) {
    (void)in; /* RandomUniformLike reads its input's shape, which shape inference gave the output */
    if (out[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    float low, high;
    ot_status st = ot_random_uniform_bounds(node, &low, &high, err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&out[0]);
    if (n == 0) return OT_OK;
    return ot_cu_map(cx, random_uniform_op{(float *)out[0].data, ctx->seed, ctx->step, (uint32_t)ctx->rng_node, low, high},
                     n, err);
}
