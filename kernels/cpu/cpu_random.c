/* cpu_random.c — CPU kernel of the random sources (RandomUniformLike, RandomUniform;
 * issue 13: the dynamo exporter lowers Dropout and stochastic depth to
 * RandomUniformLike -> Less -> Cast -> Div -> Mul). The draws come from the
 * counter-based generator Dropout uses (exec/rng.h, in bulk through cpu_philox.h)
 * keyed by (seed, step, ctx->rng_node, element): a recompute clone passes the node
 * it copies, so it draws the same values, and the same seed gives the same values on
 * any thread count. The element rule is kernels/random_rule.h's, shared with CUDA. */
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_random.h"
#include "kernels/cpu/cpu_philox.h"
#include "kernels/random_rule.h"

/* Uniforms come in blocks, as Dropout's do (cpu_norm.c). */
#define RANDOM_BLOCK 256

ot_status ot_cpu_random_uniform(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                                ot_error *err) {
    (void)in; /* RandomUniformLike reads its input's shape, which shape inference gave the output */
    if (out[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    float low, high;
    ot_status st = ot_random_uniform_bounds(node, &low, &high, err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&out[0]);
    float *y = out[0].data;
    uint64_t seed = ctx->seed, step = ctx->step;
    uint32_t nid = (uint32_t)ctx->rng_node;
    int nt = ot_cpu_threads(ctx);
    bool par = n >= OT_CPU_PAR_MIN / 4;
    int64_t blocks = (n + RANDOM_BLOCK - 1) / RANDOM_BLOCK;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t i0 = b * RANDOM_BLOCK, len = n - i0 < RANDOM_BLOCK ? n - i0 : RANDOM_BLOCK;
        float u[RANDOM_BLOCK];
        ot_cpu_philox_uniforms(seed, step, nid, (uint64_t)i0, len, u);
        for (int64_t k = 0; k < len; k++) y[i0 + k] = ot_random_uniform_value(u[k], low, high);
    }
    return OT_OK;
}
