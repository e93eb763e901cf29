/* cpu_einsum.c — Einsum and EinsumGrad on the CPU (ops batch 4, issue 26): one task
 * per output element (float32, or float64 for ONNX's node tests) through kernels/einsum_geometry.h's element code
 * (shared with the CUDA kernel), so the sums run in one fixed order on any thread count. */
#include "kernels/cpu/cpu_common.h"
#include "kernels/einsum_geometry.h"

ot_status ot_cpu_einsum(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                        ot_error *err) {
    if (out[0].dtype != OT_F32 && out[0].dtype != OT_F64) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    ot_ein_geom g;
    ot_status st = ot_ein_geometry(node, in, out, &g, err);
    if (st) return st;
    const void *x[OT_EIN_MAX_IN];
    for (int k = 0; k < g.n_ops; k++)
        x[k] = in[g.input[k]].data;
    bool f64 = out[0].dtype == OT_F64;
    int64_t work = 1;
    for (int l = 0; l < g.n_labels; l++)
        work *= g.size[l] ? g.size[l] : 1;
    float *y = out[0].data;
    double *y64 = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = g.n_out > 1 && work >= OT_CPU_PAR_MIN;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t o = 0; o < g.n_out; o++) {
        double v = ot_ein_element(&g, x, f64, o);
        if (f64)
            y64[o] = v;
        else
            y[o] = (float)v;
    }
    return OT_OK;
}
