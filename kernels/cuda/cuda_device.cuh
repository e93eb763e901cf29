/* cuda_device.cuh — device-side helpers shared by the .cu kernel families: launch
 * geometry (grid-stride loops), broadcast descriptors copied from ot_bcast
 * (kernels/kernel_common.h: the host computes merged dims and strides once; the
 * kernel maps an output index to input offsets), and deterministic warp / block
 * reductions (a fixed tree, so a result never depends on timing). */
#ifndef OT_CUDA_DEVICE_CUH
#define OT_CUDA_DEVICE_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/half_float.h"
extern "C" {
#include "kernels/kernel_common.h"
}

/* The dtypes ot_kernel_load_double reads: a bound or ratio of any other dtype is
 * ignored by the CPU kernels, so it is by the CUDA ones too. */
static inline bool ot_cu_loadable(ot_dtype t) {
    return t == OT_F32 || t == OT_F64 || t == OT_F16 || t == OT_BF16 || ot_kernel_is_int_dtype(t);
}

/* ---- storage types (issue 27): float, __nv_bfloat16, __half; math in float ----------
 * A kernel templated on its tensors' storage type T loads each element to float with
 * ot_cu_ld, computes in float32 exactly as its float32 instantiation does, and stores
 * with ot_cu_st, which rounds to nearest even. The conversions are kernels/half_float.h's
 * (the CPU's and Cast's, on the host and the device alike), so a low-precision kernel
 * gives the float32 kernel's bits on the rounded inputs, rounded once; for float both
 * are the identity and the float32 kernels keep their bits. */
__host__ __device__ __forceinline__ float ot_cu_ld(float v) { return v; }
__host__ __device__ __forceinline__ float ot_cu_ld(__nv_bfloat16 v) {
    __nv_bfloat16_raw r = v;
    return ot_hf_bf16_to_f32(r.x);
}
__host__ __device__ __forceinline__ float ot_cu_ld(__half v) {
    __half_raw r = v;
    return ot_hf_f16_to_f32(r.x);
}
__host__ __device__ __forceinline__ void ot_cu_st(float *p, float v) { *p = v; }
__host__ __device__ __forceinline__ void ot_cu_st(__nv_bfloat16 *p, float v) {
    __nv_bfloat16_raw r;
    r.x = ot_hf_f32_to_bf16(v);
    *p = r;
}
__host__ __device__ __forceinline__ void ot_cu_st(__half *p, float v) {
    __half_raw r;
    r.x = ot_hf_f32_to_f16(v);
    *p = r;
}
/* The same for a small tensor whose dtype is known at run time only (a norm's scale,
 * bias and statistics: float32 or the data's low dtype): t is an ot_dtype. */
__host__ __device__ __forceinline__ float ot_cu_ldt(int t, const void *p, int64_t i) {
    if (t == OT_BF16) return ot_hf_bf16_to_f32(((const uint16_t *)p)[i]);
    if (t == OT_F16) return ot_hf_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}
__host__ __device__ __forceinline__ void ot_cu_stt(int t, void *p, int64_t i, float v) {
    if (t == OT_BF16) ((uint16_t *)p)[i] = ot_hf_f32_to_bf16(v);
    else if (t == OT_F16) ((uint16_t *)p)[i] = ot_hf_f32_to_f16(v);
    else ((float *)p)[i] = v;
}
/* float32, bfloat16, float16: the dtypes of the templated float kernels */
static inline bool ot_cu_float_dtype(ot_dtype t) { return t == OT_F32 || t == OT_BF16 || t == OT_F16; }
static inline bool ot_cu_low_dtype(ot_dtype t) { return t == OT_BF16 || t == OT_F16; }
/* `return LAUNCH(T)` for the storage type of float dtype dt; anything else is refused
 * naming `what` (needs node and err in scope). */
#define OT_CU_BY_FLOAT(dt, what, LAUNCH)                                  \
    switch (dt) {                                                         \
    case OT_F32: return LAUNCH(float);                                    \
    case OT_BF16: return LAUNCH(__nv_bfloat16);                           \
    case OT_F16: return LAUNCH(__half);                                   \
    default: return ot_cuda_bad_dtype(node, what, dt, err);               \
    }

#define OT_CU_THREADS 256
#define OT_CU_MAX_BLOCKS (1 << 20)

static inline unsigned ot_cu_blocks(int64_t n) {
    int64_t b = (n + OT_CU_THREADS - 1) / OT_CU_THREADS;
    if (b < 1) b = 1;
    return (unsigned)(b > OT_CU_MAX_BLOCKS ? OT_CU_MAX_BLOCKS : b);
}
/* Blocks for one warp per item. */
static inline unsigned ot_cu_warp_blocks(int64_t items) { return ot_cu_blocks(items * 32); }

#define OT_CU_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)
/* One warp per item: `item` runs over items, `lane` is 0..31. */
#define OT_CU_WARP_LOOP(item, n)                                                                  \
    for (int64_t item = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; item < (n);        \
         item += ((int64_t)blockDim.x * gridDim.x) / 32)

/* Broadcast descriptor passed by value to kernels. */
struct ot_cu_bcast {
    int rank, n_in;
    int64_t dim[OT_MAX_RANK];
    int64_t stride[OT_BCAST_MAX_IN][OT_MAX_RANK];
};

static inline ot_cu_bcast ot_cu_bcast_from(const ot_bcast *c) {
    ot_cu_bcast b;
    memset(&b, 0, sizeof b);
    b.rank = c->rank;
    b.n_in = c->n_in;
    for (int d = 0; d < c->rank; d++) {
        b.dim[d] = c->dim[d];
        for (int k = 0; k < c->n_in; k++) b.stride[k][d] = c->stride[k][d];
    }
    return b;
}

/* ot_kernel_bcast (the node's first n_in inputs against out) as a device descriptor. */
static inline ot_status ot_cu_bcast_node(const ot_node *node, const ot_tensor *in, int n_in, const ot_tensor *out,
                                         ot_cu_bcast *b, ot_error *err) {
    ot_bcast c;
    ot_status st = ot_kernel_bcast(node, in, n_in, out, &c, err);
    if (!st) *b = ot_cu_bcast_from(&c);
    return st;
}

__host__ __device__ __forceinline__ void ot_cu_bcast_off(const ot_cu_bcast &b, int64_t i, int64_t *off) {
    for (int k = 0; k < OT_BCAST_MAX_IN; k++) off[k] = 0;
    for (int d = b.rank - 1; d >= 0; d--) {
        int64_t c = i % b.dim[d];
        i /= b.dim[d];
        for (int k = 0; k < b.n_in; k++) off[k] += c * b.stride[k][d];
    }
}

/* Element-wise launches that also have a host mode (cuda_internal.h): op is a functor
 * whose `__host__ __device__ void operator()(int64_t i) const` handles element i. With
 * a context it runs as a grid-stride kernel on cx->stream; with cx == NULL it runs in
 * a plain loop on the host over host pointers, the very same element code, which is
 * how tests/test_cuda.c checks it against the CPU kernels on a machine without a GPU. */
template <typename Op> __global__ void ot_cu_k_map(Op op, int64_t n) {
    OT_CU_LOOP(i, n) op(i);
}

template <typename Op> static ot_status ot_cu_map(ot_cuda_ctx *cx, const Op &op, int64_t n, ot_error *err) {
    if (n <= 0) return OT_OK;
    if (!cx) {
        for (int64_t i = 0; i < n; i++) op(i);
        return OT_OK;
    }
    ot_cu_k_map<Op><<<ot_cu_blocks(n), OT_CU_THREADS, 0, cx->stream>>>(op, n);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

/* Integer Div and Mod (cuda_elementwise.cu, cuda_pointwise_math.cu): a zero divisor
 * cannot be reported from inside a kernel, so their element code writes 0 and raises
 * *zero, a flag in the node's workspace (ot_cuda_pointwise_workspace,
 * ot_cuda_mod_workspace) that this launcher clears, points f.zero at, and reads back.
 * Reading it synchronises the stream, a cost integer arithmetic (shape arithmetic,
 * rare after import-time folding) can afford. op_name and what word the messages:
 * "node 'N' (Div): integer division by zero". */
template <typename Op>
static ot_status ot_cu_map_zero_flag(ot_cuda_ctx *cx, const ot_node *node, const ot_kernel_ctx *ctx, Op f, int64_t n,
                                     const char *op_name, const char *what, ot_error *err) {
    if (n == 0) return OT_OK;
    int *zero = (int *)ctx->workspace;
    if (!zero || ctx->workspace_bytes < sizeof(int))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): workspace smaller than the backend asked for", node->name,
                       op_name);
    int seen = 0;
    if (cx)
        OT_CUDA_CHECK(cudaMemsetAsync(zero, 0, sizeof(int), cx->stream));
    else
        *zero = 0;
    f.zero = zero;
    ot_status st = ot_cu_map(cx, f, n, err);
    if (st) return st;
    if (cx) {
        OT_CUDA_CHECK(cudaMemcpyAsync(&seen, zero, sizeof(int), cudaMemcpyDeviceToHost, cx->stream));
        OT_CUDA_CHECK(cudaStreamSynchronize(cx->stream));
    } else {
        seen = *zero;
    }
    if (seen) return ot_fail(err, OT_E_DATA, "node '%s' (%s): integer %s by zero", node->name, op_name, what);
    return OT_OK;
}

/* The float32 elementwise launchers' element loops, written once: X -> Y
 * (y[i] = rule(x[i])) and an elementwise gradient (dY, X) -> dX
 * (dx[i] = rule(dy[i], x[i])). The rule is a __host__ __device__ functor holding
 * the op the launcher picked from the node and its attributes. */
template <typename R> struct ot_cu_x_y_op {
    const float *x;
    float *y;
    R rule;
    __host__ __device__ void operator()(int64_t i) const { y[i] = rule(x[i]); }
};

template <typename R> struct ot_cu_dy_x_op {
    const float *dy, *x;
    float *dx;
    R rule;
    __host__ __device__ void operator()(int64_t i) const { dx[i] = rule(dy[i], x[i]); }
};

template <typename R>
static ot_status ot_cu_map_x_y(ot_cuda_ctx *cx, const ot_tensor *in, ot_tensor *out, const R &rule, int64_t n,
                               ot_error *err) {
    return ot_cu_map(cx, ot_cu_x_y_op<R>{(const float *)in[0].data, (float *)out[0].data, rule}, n, err);
}

template <typename R>
static ot_status ot_cu_map_dy_x(ot_cuda_ctx *cx, const ot_tensor *in, ot_tensor *out, const R &rule, int64_t n,
                                ot_error *err) {
    ot_cu_dy_x_op<R> f = {(const float *)in[0].data, (const float *)in[1].data, (float *)out[0].data, rule};
    return ot_cu_map(cx, f, n, err);
}

/* As ot_cu_map, for element code that first derives per-launch values from device
 * memory (the optimizer's step scalars): `bool prepare(typename Op::prep *q) const`
 * runs once per thread (false: do nothing), then `operator()(const prep &, int64_t)`
 * per element. Host mode as above. */
template <typename Op> __global__ void ot_cu_k_map_prepared(Op op, int64_t n) {
    typename Op::prep q;
    if (!op.prepare(&q)) return;
    OT_CU_LOOP(i, n) op(q, i);
}

template <typename Op> static ot_status ot_cu_map_prepared(ot_cuda_ctx *cx, const Op &op, int64_t n, ot_error *err) {
    if (n <= 0) return OT_OK;
    if (!cx) {
        typename Op::prep q;
        if (!op.prepare(&q)) return OT_OK;
        for (int64_t i = 0; i < n; i++) op(q, i);
        return OT_OK;
    }
    ot_cu_k_map_prepared<Op><<<ot_cu_blocks(n), OT_CU_THREADS, 0, cx->stream>>>(op, n);
    OT_CUDA_LAUNCHED();
    return OT_OK;
}

/* Zero-fill and copy within one device (host memory in host mode), queued on the
 * context's stream. */
static inline ot_status ot_cu_zero(ot_cuda_ctx *cx, void *p, size_t n, ot_error *err) {
    if (!n) return OT_OK;
    if (!cx) {
        memset(p, 0, n);
        return OT_OK;
    }
    OT_CUDA_CHECK(cudaMemsetAsync(p, 0, n, cx->stream));
    return OT_OK;
}
static inline ot_status ot_cu_copy(ot_cuda_ctx *cx, void *dst, const void *src, size_t n, ot_error *err) {
    if (!n || dst == src) return OT_OK;
    if (!cx) {
        memmove(dst, src, n);
        return OT_OK;
    }
    OT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, cx->stream));
    return OT_OK;
}

/* IEEE-rounded single operations that nvcc may not contract into an FMA (its default
 * -fmad=true fuses a*b+c in device code; the CPU kernels, built as ISO C, never do):
 * the intrinsics on the device, the plain operators in host mode (x86-64 SSE, where
 * the host compiler has no FMA to fuse with). */
__host__ __device__ __forceinline__ float ot_cu_fmul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
__host__ __device__ __forceinline__ float ot_cu_fadd(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
__host__ __device__ __forceinline__ float ot_cu_fdiv(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
__host__ __device__ __forceinline__ float ot_cu_fsqrt(float a) {
#ifdef __CUDA_ARCH__
    return __fsqrt_rn(a);
#else
    return sqrtf(a);
#endif
}
__host__ __device__ __forceinline__ double ot_cu_dmul(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}

template <typename T> __device__ __forceinline__ T ot_cu_warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}
__device__ __forceinline__ float ot_cu_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    return __shfl_sync(0xffffffffu, v, 0);
}

/* Sum over a whole block (blockDim.x a multiple of 32, <= 1024) in a fixed tree;
 * every thread gets the result. `sh` holds 32 values. */
template <typename T> __device__ T ot_cu_block_sum(T v, T *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = ot_cu_warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    T t = lane < nw ? sh[lane] : (T)0;
    if (w == 0) t = ot_cu_warp_sum(t);
    if (threadIdx.x == 0) sh[0] = t;
    __syncthreads();
    T r = sh[0];
    __syncthreads();
    return r;
}

#endif
