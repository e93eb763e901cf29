/* conv_lowp.c — the convolutions' op-table entry (conv_lowp.h): a bfloat16 Conv,
 * ConvGradInput or ConvGradWeight goes to oneDNN's bfloat16 primitive (float32 sums;
 * its activations, weights and gradients stay bfloat16, no float32 copy is made), the
 * same primitive for the node on every step, so a given --threads gives the same bits
 * on every step and in every recompute clone. Which path a node takes depends on its
 * shapes and dtypes and on the CPU only, decided the same way by the workspace query
 * and the run: where oneDNN has only its reference loops (a CPU without AVX-512),
 * where the build has no oneDNN, and for ConvTranspose and float16, the node runs as
 * before (cpu_lowp.c, through float32 copies). */
#include "kernels/cpu/conv_lowp.h"

#include "kernels/cpu/conv_dnnl.h"
#include "kernels/cpu/cpu_lowp.h"

/* The node's convolution, direction and oneDNN operands: (a, b, bias, out) as
 * ot_dnnl_conv_lowp_run takes them. False where the native path does not apply. */
typedef struct lowp_conv {
    ot_conv3 p;
    ot_dnnl_dir dir;
    ot_dnnl_lowp_dtypes d;
    const void *a, *b, *bias;
    void *out;
} lowp_conv;

static bool lowp_conv_of(const ot_node *node, const ot_tensor *in, const ot_tensor *out, lowp_conv *c) {
    if (node->n_outputs < 1 || node->n_inputs < 2 || (in[0].dtype != OT_BF16 && in[1].dtype != OT_BF16)) return false;
    const ot_tensor *x, *w, *y;
    memset(c, 0, sizeof *c);
    c->d.bias = OT_UNDEFINED;
    switch (node->op) {
    case OT_OP_CONV: /* (X, W [, B]) -> Y */
        x = &in[0], w = &in[1], y = &out[0];
        c->dir = OT_DNNL_FWD;
        c->a = in[0].data, c->b = in[1].data;
        if (node->n_inputs > 2 && in[2].dtype != OT_UNDEFINED && ot_kernel_numel(&in[2]) > 0) {
            c->bias = in[2].data;
            c->d.bias = in[2].dtype;
        }
        break;
    case OT_OP_CONV_GRAD_INPUT: /* (dY, W, X for its shape) -> dX */
        if (node->n_inputs < 3) return false;
        y = &in[0], w = &in[1], x = &out[0];
        c->dir = OT_DNNL_BWD_DATA;
        c->a = in[0].data, c->b = in[1].data;
        break;
    case OT_OP_CONV_GRAD_WEIGHT: /* (dY, X, W for its shape) -> dW */
        if (node->n_inputs < 3) return false;
        y = &in[0], x = &in[1], w = &out[0];
        c->dir = OT_DNNL_BWD_WEIGHTS;
        c->a = in[0].data, c->b = in[1].data;
        break;
    default: return false;
    }
    c->out = out[0].data;
    c->d.x = x->dtype, c->d.w = w->dtype, c->d.y = y->dtype;
    /* ConvGradInput's X and ConvGradWeight's W give their shapes only */
    const ot_shape *xs = node->op == OT_OP_CONV_GRAD_INPUT ? &in[2].shape : &x->shape;
    const ot_shape *ws = node->op == OT_OP_CONV_GRAD_WEIGHT ? &in[2].shape : &w->shape;
    return ot_conv3_init(&c->p, node, xs, ws, &y->shape, NULL) == OT_OK;
}

size_t ot_cpu_conv_all_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    lowp_conv c;
    size_t bytes;
    if (lowp_conv_of(node, in, out, &c) && ot_dnnl_conv_lowp_workspace(&c.p, c.dir, &c.d, &bytes)) return bytes;
    return ot_cpu_conv_any_workspace(node, in, out);
}

ot_status ot_cpu_conv_all(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    lowp_conv c;
    bool ran = false;
    if (lowp_conv_of(node, in, out, &c) && ot_kernel_numel(&out[0]) > 0) {
        ot_status st = ot_dnnl_conv_lowp_run(node, &c.p, c.dir, ctx, &c.d, c.a, c.b, c.bias, c.out, &ran, err);
        if (st || ran) return st;
    }
    return ot_cpu_conv_any(node, in, out, ctx, err);
}
