/* cuda_scan.cu — the training loop's checks on the GPU (ot_backend.scan_f32): is
 * every float of a gradient, param or optimizer state finite, and the sum of squares
 * of a gradient for the global norm, computed where the values lie. Without it the
 * loop copies every gradient and every updated param to the host each step (GPT-2
 * small: 0.5 GB of gradients plus the params and Adam state, over PCIe, then scanned
 * by the CPU).
 *
 * One launch of OT_CUDA_SCAN_BLOCKS blocks at most, a grid-stride loop, each block
 * reduced in shared memory in a fixed tree; the host adds the per-block sums in block
 * order. So the sum is repeatable for a given n (it differs from the CPU's sequential
 * sum by rounding only), and nothing uses atomics.
 *
 * Also the gradient accumulation of --accum (ot_backend.accumulate_f32): an element-wise
 * float add between two arena ranges, one IEEE rounding per element as on the CPU, so
 * the summed gradients are bitwise the CPU's; it has a host mode (cx == NULL) that
 * tests/test_cuda.c checks against the CPU backend's. */
#include <limits.h>
#include <math.h>

#include "kernels/cuda/cuda_device.cuh"

#define SCAN_THREADS 256

__global__ void k_scan_f32(const float *x, int64_t n, long long *bad, double *sums) {
    __shared__ double ss[SCAN_THREADS];
    __shared__ long long sb[SCAN_THREADS];
    int t = threadIdx.x;
    double s = 0.0;
    long long b = LLONG_MAX;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + t; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        if (!isfinite(v) && i < b) b = i;
        s += (double)v * (double)v;
    }
    ss[t] = s;
    sb[t] = b;
    __syncthreads();
    for (int w = SCAN_THREADS / 2; w > 0; w >>= 1) { /* every thread reaches every barrier */
        if (t < w) {
            ss[t] += ss[t + w];
            if (sb[t + w] < sb[t]) sb[t] = sb[t + w];
        }
        __syncthreads();
    }
    if (t == 0) {
        sums[blockIdx.x] = ss[0];
        bad[blockIdx.x] = sb[0];
    }
}

extern "C" ot_status ot_cuda_scan_f32(ot_cuda_ctx *cx, const void *data, size_t n, int64_t *first_bad, double *sum_sq,
                                      ot_error *err) {
    *first_bad = -1;
    if (sum_sq) *sum_sq = 0.0;
    if (n == 0) return OT_OK;
    int64_t blocks = ((int64_t)n + SCAN_THREADS - 1) / SCAN_THREADS;
    if (blocks > OT_CUDA_SCAN_BLOCKS) blocks = OT_CUDA_SCAN_BLOCKS;
    OT_CUDA_CHECK(cudaSetDevice(cx->device));
    k_scan_f32<<<(unsigned)blocks, SCAN_THREADS, 0, cx->stream>>>((const float *)data, (int64_t)n, cx->scan_bad,
                                                                  cx->scan_sums);
    OT_CUDA_CHECK(cudaGetLastError());
    double sums[OT_CUDA_SCAN_BLOCKS];
    long long bad[OT_CUDA_SCAN_BLOCKS];
    OT_CUDA_CHECK(cudaMemcpyAsync(sums, cx->scan_sums, (size_t)blocks * sizeof(double), cudaMemcpyDeviceToHost,
                                  cx->stream));
    OT_CUDA_CHECK(cudaMemcpyAsync(bad, cx->scan_bad, (size_t)blocks * sizeof(long long), cudaMemcpyDeviceToHost,
                                  cx->stream));
    OT_CUDA_CHECK(cudaStreamSynchronize(cx->stream));
    long long b = LLONG_MAX;
    double s = 0.0;
    for (int64_t k = 0; k < blocks; k++) {
        s += sums[k];
        if (bad[k] < b) b = bad[k];
    }
    if (b != LLONG_MAX) *first_bad = (int64_t)b;
    if (sum_sq) *sum_sq = s;
    return OT_OK;
}

/* dst[i] += src[i], then src[i] = 0 when clear: the element code of accumulate_f32. */
struct ot_cu_accumulate {
    float *dst, *src;
    bool clear;
    __host__ __device__ void operator()(int64_t i) const {
        dst[i] = ot_cu_fadd(dst[i], src[i]);
        if (clear) src[i] = 0.0f;
    }
};

extern "C" ot_status ot_cuda_accumulate_f32(ot_cuda_ctx *cx, float *dst, float *src, size_t n, bool clear_src,
                                            ot_error *err) {
    if (cx) OT_CUDA_CHECK(cudaSetDevice(cx->device));
    ot_cu_accumulate op = {dst, src, clear_src};
    return ot_cu_map(cx, op, (int64_t)n, err);
}
