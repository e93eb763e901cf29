/* cuda_spatial.cu — Resize / Upsample, ResizeGrad, DepthToSpace and SpaceToDepth on
 * the GPU, counterparts of kernels/cpu/cpu_spatial.c: one thread per output element
 * running spatial_geometry.h's element code (Resize's gradient a gather, in the CPU's
 * order, no atomics), so the results are the CPU's bit for bit. All have a host mode. */
#include "kernels/cuda/cuda_device.cuh"
extern "C" {
#include "kernels/spatial_geometry.h"
}

static ot_status bad(const ot_node *node, const char *what, ot_error *err) {
    return ot_fail(err, OT_E_MODEL, "node '%s' (%s): %s", node->name, node->op_type, what);
}

/* The geometry from the operands at in[first ..] (roi, scales, sizes): scales are read
 * one element at a time (ot_cuda_read_double reads a scalar). */
static ot_status resize_geom(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, int first, const ot_shape *xs,
                             const ot_shape *ys, ot_resize_geom *g, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp = NULL;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    double scales[OT_MAX_RANK];
    int64_t sizes[OT_MAX_RANK];
    int ns = 0, nz = 0;
    const ot_tensor *st_t = node->n_inputs > first + 1 ? &in[first + 1] : NULL;
    const ot_tensor *sz_t = node->n_inputs > first + 2 ? &in[first + 2] : NULL;
    if (st_t && st_t->data && ot_kernel_numel(st_t) > 0) {
        if (st_t->dtype != OT_F32 || ot_kernel_numel(st_t) > OT_MAX_RANK) return bad(node, "scales must be float32, one per axis", err);
        ns = (int)ot_kernel_numel(st_t);
        for (int k = 0; k < ns; k++) {
            ot_tensor one = *st_t;
            one.data = (char *)st_t->data + (size_t)k * 4;
            one.shape = ot_shape_make(0, NULL);
            if ((st = ot_cuda_read_double(cx, &one, &scales[k], err))) return st;
        }
    }
    if (sz_t && sz_t->data && ot_kernel_numel(sz_t) > 0) {
        if (sz_t->dtype != OT_I64) return bad(node, "sizes must be int64", err);
        if ((st = ot_cuda_read_ints(cx, sz_t, sizes, OT_MAX_RANK, &nz, err))) return st;
    }
    return ot_resize_geometry(node, &pp->u.resize, xs, ys, ns ? scales : NULL, ns, nz ? sizes : NULL, nz, g, err);
}

struct resize_op {
    const float *x;
    float *y;
    ot_resize_geom g;
    __host__ __device__ void operator()(int64_t o) const { y[o] = ot_resize_at(&g, x, o); }
};

struct resize_grad_op {
    const float *dy;
    float *dx;
    ot_resize_geom g;
    __host__ __device__ void operator()(int64_t i) const { dx[i] = ot_resize_grad_at(&g, dy, i); }
};

/* Resize / Upsample (X, roi, scales, sizes). */
OT_CUDA_LAUNCHER(ot_cuda_resize) {
    (void)ctx;
    if (in[0].dtype != OT_F32 || out[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "X", in[0].dtype, err);
    ot_resize_geom g;
    ot_status st = resize_geom(cx, node, in, 1, &in[0].shape, &out[0].shape, &g, err);
    if (st) return st;
    return ot_cu_map(cx, resize_op{(const float *)in[0].data, (float *)out[0].data, g}, ot_kernel_numel(&out[0]), err);
}

/* ResizeGrad (dY, X, roi, scales, sizes) -> dX. */
OT_CUDA_LAUNCHER(ot_cuda_resize_grad) {
    (void)ctx;
    if (in[0].dtype != OT_F32) return ot_cuda_bad_dtype(node, "dY", in[0].dtype, err);
    ot_resize_geom g;
    ot_status st = resize_geom(cx, node, in, 2, &out[0].shape, &in[0].shape, &g, err);
    if (st) return st;
    return ot_cu_map(cx, resize_grad_op{(const float *)in[0].data, (float *)out[0].data, g}, ot_kernel_numel(&out[0]),
                     err);
}

template <typename T> struct depth_op {
    const T *src;
    T *dst;
    ot_depth_geom g;
    __host__ __device__ void operator()(int64_t o) const { dst[o] = src[ot_depth_src(&g, o)]; }
};

template <typename T>
static ot_status depth_run(ot_cuda_ctx *cx, const void *src, void *dst, const ot_depth_geom &g, int64_t n,
                           ot_error *err) {
    return ot_cu_map(cx, depth_op<T>{(const T *)src, (T *)dst, g}, n, err);
}

/* DepthToSpace / SpaceToDepth, any dtype of 1 to 8 bytes (elements are moved). */
OT_CUDA_LAUNCHER(ot_cuda_depth_space) {
    (void)ctx;
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || es > 8 || in[0].dtype != out[0].dtype) return ot_cuda_bad_dtype(node, "input", in[0].dtype, err);
    ot_op_params scratch;
    const ot_op_params *pp = NULL;
    ot_depth_geom g;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (!st)
        st = ot_depth_geometry(node, &pp->u.depth, node->op == OT_OP_DEPTH_TO_SPACE, &in[0].shape, &out[0].shape, &g,
                               err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&out[0]);
    switch (es) {
    case 1: return depth_run<uint8_t>(cx, in[0].data, out[0].data, g, n, err);
    case 2: return depth_run<uint16_t>(cx, in[0].data, out[0].data, g, n, err);
    case 4: return depth_run<uint32_t>(cx, in[0].data, out[0].data, g, n, err);
    case 8: return depth_run<uint64_t>(cx, in[0].data, out[0].data, g, n, err);
    default: return ot_cuda_bad_dtype(node, "input", in[0].dtype, err);
    }
}
