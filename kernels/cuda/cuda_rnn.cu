/* cuda_rnn.cu — RNN, GRU, LSTM and RnnGrad on the GPU (issue 26), counterparts of
 * kernels/cpu/cpu_rnn.c through kernels/rnn_geometry.h's element code: one thread
 * per (direction, batch element) sequence, then one per weight-gradient element, in
 * the CPU's order: host mode (ot_cu_map) gives the CPU's bits, the GPU the same
 * within float32 rounding (its expf / tanhf). A
 * sequence is serial by nature; a GPU-wide kernel per step (cuBLAS for the gate
 * products) would be faster at the price of the CPU's summation order. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/rnn_geometry.h"

struct rnn_forward_op {
    ot_rnn_geom g;
    ot_rnn_io io;
    __host__ __device__ void operator()(int64_t db) const { ot_rnn_forward_seq(&g, &io, db); }
};
struct rnn_backward_op {
    ot_rnn_geom g;
    ot_rnn_io io;
    __host__ __device__ void operator()(int64_t b) const { ot_rnn_backward_seq(&g, &io, b); }
};
struct rnn_weight_op {
    ot_rnn_geom g;
    ot_rnn_io io;
    int64_t per, start[4], seg[4];
    float *outp[4];
    __host__ __device__ void operator()(int64_t e) const {
        int64_t d = e / per, k = e % per;
        int q = k < start[1] ? 0 : k < start[2] ? 1 : k < start[3] ? 2 : 3;
        if (outp[q]) outp[q][d * seg[q] + k - start[q]] = ot_rnn_weight_grad(&g, &io, e);
    }
};

static bool has(const ot_tensor *t) { return t->dtype != OT_UNDEFINED && t->data; }

/* Geometry and pointers; sequence_lens read back to the host and checked. */
static ot_status setup(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, ot_rnn_geom *g, ot_rnn_io *io,
                       bool grad, ot_error *err) {
    ot_tensor in8[8];
    ot_rnn_forward_inputs(node, in, in8);
    ot_status st = ot_rnn_geometry(node, in8, g, err);
    if (st) return st;
    ot_rnn_set_ws(g, grad);
    memset(io, 0, sizeof *io);
    io->x = (const float *)in8[0].data, io->w = (const float *)in8[1].data, io->r = (const float *)in8[2].data;
    io->b = g->has_b ? (const float *)in8[3].data : NULL;
    io->seq = g->has_seq ? (const int32_t *)in8[4].data : NULL;
    io->h0 = g->has_h0 ? (const float *)in8[5].data : NULL;
    io->c0 = g->has_c0 ? (const float *)in8[6].data : NULL;
    io->p = g->has_p ? (const float *)in8[7].data : NULL;
    if (!io->seq) return OT_OK;
    int64_t *lens = (int64_t *)malloc((size_t)(g->B ? g->B : 1) * sizeof(int64_t));
    int32_t *l32 = (int32_t *)malloc((size_t)(g->B ? g->B : 1) * sizeof(int32_t));
    int n = 0;
    if (!lens || !l32) st = ot_fail(err, OT_E_MEMORY, "node '%s': out of memory", node->name);
    if (!st) st = ot_cuda_read_ints(cx, &in8[4], lens, (int)g->B, &n, err);
    for (int64_t b = 0; !st && b < g->B; b++)
        l32[b] = lens[b] < -1 ? -1 : lens[b] > g->T + 1 ? (int32_t)(g->T + 1) : (int32_t)lens[b];
    if (!st) st = ot_rnn_check_lens(node, g, l32, err);
    free(lens);
    free(l32);
    return st;
}

OT_CUDA_LAUNCHER(ot_cuda_rnn) {
    rnn_forward_op f;
    memset(&f, 0, sizeof f);
    ot_status st = setup(cx, node, in, &f.g, &f.io, false, err);
    if (st) return st;
    if (!ctx || ctx->workspace_bytes < ot_rnn_workspace_bytes(&f.g, false))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): no workspace", node->name, node->op_type);
    f.io.ws = (float *)ctx->workspace;
    f.io.y = node->n_outputs > 0 && has(&out[0]) ? (float *)out[0].data : NULL;
    f.io.yh = node->n_outputs > 1 && has(&out[1]) ? (float *)out[1].data : NULL;
    f.io.yc = node->n_outputs > 2 && has(&out[2]) ? (float *)out[2].data : NULL;
    return ot_cu_map(cx, f, f.g.dirs * f.g.B, err);
}

OT_CUDA_LAUNCHER(ot_cuda_rnn_grad) {
    if (node->n_inputs != 11 || node->n_outputs != 7)
        return ot_fail(err, OT_E_MODEL, "node '%s' (RnnGrad): 11 inputs and 7 outputs", node->name);
    rnn_backward_op f;
    memset(&f, 0, sizeof f);
    ot_status st = setup(cx, node, in, &f.g, &f.io, true, err);
    if (st) return st;
    if (!ctx || ctx->workspace_bytes < ot_rnn_workspace_bytes(&f.g, true))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): no workspace", node->name, node->op_type);
    f.io.ws = (float *)ctx->workspace;
    f.io.dy = has(&in[0]) ? (const float *)in[0].data : NULL;
    f.io.dyh = has(&in[1]) ? (const float *)in[1].data : NULL;
    f.io.dyc = has(&in[2]) ? (const float *)in[2].data : NULL;
    float **dst[7] = {&f.io.dx, &f.io.dw, &f.io.dr, &f.io.db, &f.io.dh0, &f.io.dc0, &f.io.dp};
    for (int k = 0; k < 7; k++)
        *dst[k] = has(&out[k]) ? (float *)out[k].data : NULL;
    if ((st = ot_cu_map(cx, f, f.g.B, err))) return st;
    rnn_weight_op wgt;
    memset(&wgt, 0, sizeof wgt);
    wgt.g = f.g;
    wgt.io = f.io;
    int64_t H = f.g.H, GH = f.g.G * H, I = f.g.I;
    wgt.per = GH * I + GH * H + 2 * GH + 3 * H;
    int64_t seg[4] = {GH * I, GH * H, 2 * GH, 3 * H}, start[4] = {0, GH * I, GH * I + GH * H, GH * I + GH * H + 2 * GH};
    float *outp[4] = {f.io.dw, f.io.dr, f.io.db, f.io.dp};
    for (int q = 0; q < 4; q++)
        wgt.seg[q] = seg[q], wgt.start[q] = start[q], wgt.outp[q] = outp[q];
    return ot_cu_map(cx, wgt, f.g.dirs * wgt.per, err);
}

size_t ot_cuda_rnn_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    ot_tensor in8[8];
    ot_rnn_geom g;
    ot_error e;
    memset(&e, 0, sizeof e);
    ot_rnn_forward_inputs(node, in, in8);
    if (ot_rnn_geometry(node, in8, &g, &e)) return 0;
    return ot_rnn_workspace_bytes(&g, node->op == OT_OP_RNN_GRAD);
}
