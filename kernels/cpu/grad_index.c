/* grad_index.c — CPU backward kernels of the layout and indexing ops of issue 13:
 * PadGrad (dY, X, pads [, axes]) and TileGrad (dY, X), which sum dY over the output
 * elements that read each input element (index_geometry.h's ot_pad_grad_at, in
 * output order), and GatherElementsGrad (dY, indices, data), a scatter-add done per
 * data element over the indices in order. One output element per iteration: no
 * atomics, the same sums on any thread count. */
#include "kernels/cpu/grad_kernels.h"
#include "kernels/index_geometry.h"

OT_GRAD_KERNEL(ot_cpu_pad_grad) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "dY", in[0].dtype, err);
    ot_pad_geom g;
    const ot_tensor *ax = node->n_inputs > 3 ? &in[3] : NULL;
    ot_status st = node->op == OT_OP_TILE_GRAD ? ot_tile_geometry(node, &out[0].shape, &in[0].shape, &g, err)
                                               : ot_cpu_pad_geom(node, &in[2], ax, &out[0].shape, &in[0].shape, &g, err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&out[0]);
    const float *dy = in[0].data;
    float *dx = out[0].data;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN / 4)
    for (int64_t i = 0; i < n; i++) dx[i] = ot_pad_grad_at(&g, dy, i);
    return OT_OK;
}

OT_GRAD_KERNEL(ot_cpu_gather_elements_grad) {
    const ot_tensor *dy = &in[0], *idx = &in[1];
    if (dy->dtype != OT_F32) return ot_cpu_bad_dtype(node, "dY", dy->dtype, err);
    if (idx->dtype != OT_I64 && idx->dtype != OT_I32) return ot_cpu_bad_dtype(node, "indices", idx->dtype, err);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    ot_gather_el_geom g;
    const ot_shape *ds = &out[0].shape;
    if ((st = ot_gather_el_geometry(node, pp->u.index.axis, ds, &idx->shape, &g, err))) return st;
    if (!ot_shape_equal(&dy->shape, &idx->shape))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (GatherElementsGrad): dY shape differs from the indices'", node->name);
    int64_t n = ot_kernel_numel(&out[0]), I = g.is[g.axis], istride = 1;
    for (int d = g.rank - 1; d > g.axis; d--) istride *= g.is[d];
    const float *gy = dy->data;
    float *dd = out[0].data;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n * I >= OT_CPU_PAR_MIN)
    for (int64_t j = 0; j < n; j++) {
        /* data coordinates of j; the indices elements on the same line along axis */
        int64_t q = j, base = 0, acc = 1, ja = 0;
        bool inside = true;
        for (int d = g.rank - 1; d >= 0; d--) {
            int64_t dim = d == g.axis ? g.d_axis : ds->dim[d], c = q % dim;
            q /= dim;
            if (d == g.axis) ja = c;
            else if (c >= g.is[d]) inside = false;
            else base += c * acc;
            acc *= g.is[d];
        }
        float sum = 0.0f;
        for (int64_t i = 0; inside && i < I; i++) {
            int64_t v;
            ot_kernel_load_int(idx->dtype, idx->data, base + i * istride, &v);
            if (v < 0) v += g.d_axis;
            if (v == ja) sum += gy[base + i * istride];
        }
        dd[j] = sum;
    }
    return OT_OK;
}
