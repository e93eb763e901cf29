/* cuda_einsum.cu — Einsum and EinsumGrad on the GPU (ops batch 4, issue 26),
 * counterpart of kernels/cpu/cpu_einsum.c: one thread per output element runs
 * kernels/einsum_geometry.h's element code (labels summed in the CPU's order, double
 * accumulation with the rounding-exact intrinsics), so the bits are the CPU's; host
 * mode through ot_cu_map. Einsum in the models trained here is small (attention
 * scores, bilinear forms); a large batched contraction would want cuBLAS, at the price
 * of the CPU's summation order. */
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/einsum_geometry.h"

struct einsum_op {
    ot_ein_geom g;
    const void *x[OT_EIN_MAX_IN];
    void *y;
    bool f64;
    __host__ __device__ void operator()(int64_t o) const {
        double v = ot_ein_element(&g, x, f64, o);
        if (f64)
            ((double *)y)[o] = v;
        else
            ((float *)y)[o] = (float)v;
    }
};

OT_CUDA_LAUNCHER(ot_cuda_einsum) {
    (void)ctx;
    if (out[0].dtype != OT_F32 && out[0].dtype != OT_F64) return ot_cuda_bad_dtype(node, "output", out[0].dtype, err);
    einsum_op f;
    memset(&f, 0, sizeof f);
    ot_status st = ot_ein_geometry(node, in, out, &f.g, err);
    if (st) return st;
    for (int k = 0; k < f.g.n_ops; k++)
        f.x[k] = in[f.g.input[k]].data;
    f.y = out[0].data;
    f.f64 = out[0].dtype == OT_F64;
    return ot_cu_map(cx, f, f.g.n_out, err);
}
