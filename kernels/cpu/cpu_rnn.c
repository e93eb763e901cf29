/* cpu_rnn.c — RNN, GRU, LSTM and RnnGrad on the CPU (issue 26): one task per
 * (direction, batch element) sequence, then one per weight-gradient element, through
 * kernels/rnn_geometry.h's element code (shared with the CUDA kernels). */
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/grad_kernels.h"
#include "kernels/rnn_geometry.h"

/* The geometry of a node over its tensors; io's pointers from the forward inputs. */
static ot_status setup(const ot_node *node, const ot_tensor *in, ot_rnn_geom *g, ot_rnn_io *io, bool grad,
                       ot_error *err) {
    ot_tensor in8[8];
    ot_rnn_forward_inputs(node, in, in8);
    ot_status st = ot_rnn_geometry(node, in8, g, err);
    if (st) return st;
    ot_rnn_set_ws(g, grad);
    memset(io, 0, sizeof *io);
    io->x = in8[0].data, io->w = in8[1].data, io->r = in8[2].data;
    io->b = g->has_b ? in8[3].data : NULL;
    io->seq = g->has_seq ? in8[4].data : NULL;
    io->h0 = g->has_h0 ? in8[5].data : NULL;
    io->c0 = g->has_c0 ? in8[6].data : NULL;
    io->p = g->has_p ? in8[7].data : NULL;
    return ot_rnn_check_lens(node, g, io->seq, err);
}

size_t ot_cpu_rnn_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    ot_tensor in8[8];
    ot_rnn_geom g;
    ot_error e = {0};
    ot_rnn_forward_inputs(node, in, in8);
    if (ot_rnn_geometry(node, in8, &g, &e)) return 0;
    return ot_rnn_workspace_bytes(&g, node->op == OT_OP_RNN_GRAD);
}

static bool has(const ot_tensor *t) { return t->dtype != OT_UNDEFINED && t->data; }

ot_status ot_cpu_rnn(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                     ot_error *err) {
    ot_rnn_geom g;
    ot_rnn_io io;
    ot_status st = setup(node, in, &g, &io, false, err);
    if (st) return st;
    if (!ctx || ctx->workspace_bytes < ot_rnn_workspace_bytes(&g, false))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): no workspace", node->name, node->op_type);
    io.ws = ctx->workspace;
    io.y = node->n_outputs > 0 && has(&out[0]) ? out[0].data : NULL;
    io.yh = node->n_outputs > 1 && has(&out[1]) ? out[1].data : NULL;
    io.yc = node->n_outputs > 2 && has(&out[2]) ? out[2].data : NULL;
    int64_t n = g.dirs * g.B;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n > 1)
    for (int64_t db = 0; db < n; db++)
        ot_rnn_forward_seq(&g, &io, db);
    return OT_OK;
}

/* (dY, dY_h, dY_c, X, W, R, B, sequence_lens, initial_h, initial_c, P) -> (dX, dW, dR,
 * dB, dinitial_h, dinitial_c, dP) */
OT_GRAD_KERNEL(ot_cpu_rnn_grad) {
    if (node->n_inputs != 11 || node->n_outputs != 7)
        return ot_fail(err, OT_E_MODEL, "node '%s' (RnnGrad): 11 inputs and 7 outputs", node->name);
    ot_rnn_geom g;
    ot_rnn_io io;
    ot_status st = setup(node, in, &g, &io, true, err);
    if (st) return st;
    if (!ctx || ctx->workspace_bytes < ot_rnn_workspace_bytes(&g, true))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): no workspace", node->name, node->op_type);
    io.ws = ctx->workspace;
    io.dy = has(&in[0]) ? in[0].data : NULL;
    io.dyh = has(&in[1]) ? in[1].data : NULL;
    io.dyc = has(&in[2]) ? in[2].data : NULL;
    float **dst[7] = {&io.dx, &io.dw, &io.dr, &io.db, &io.dh0, &io.dc0, &io.dp};
    for (int k = 0; k < 7; k++)
        *dst[k] = has(&out[k]) ? out[k].data : NULL;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (g.B > 1)
    for (int64_t b = 0; b < g.B; b++)
        ot_rnn_backward_seq(&g, &io, b);
    /* the weight gradients: [dW, dR, dB, dP] per direction, each element its own sum */
    int64_t H = g.H, GH = g.G * H, per = GH * g.I + GH * H + 2 * GH + 3 * H;
    int64_t seg[4] = {GH * g.I, GH * H, 2 * GH, 3 * H},
            start[4] = {0, GH * g.I, GH * g.I + GH * H, GH * g.I + GH * H + 2 * GH};
    float *outp[4] = {io.dw, io.dr, io.db, io.dp};
    int64_t total = g.dirs * per;
#pragma omp parallel for schedule(static) num_threads(nt) if (total > 1)
    for (int64_t e = 0; e < total; e++) {
        int64_t d = e / per, k = e % per;
        int q = k < start[1] ? 0 : k < start[2] ? 1 : k < start[3] ? 2 : 3;
        if (!outp[q]) continue;
        outp[q][d * seg[q] + k - start[q]] = ot_rnn_weight_grad(&g, &io, e);
    }
    return OT_OK;
}
