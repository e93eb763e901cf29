/* grad_rnn.c — the gradient rule of RNN, GRU and LSTM (issue 26): one backward op,
 * RnnGrad, takes the gradients of the outputs the loss reads (Y, Y_h, Y_c; absent ones
 * -1) and the forward inputs, and gives the gradients of X, W, R, B, initial_h,
 * initial_c and P (those nobody needs -1). sequence_lens has none. RnnGrad recomputes
 * the forward sequence itself (kernels/rnn_geometry.h), so the forward keeps nothing
 * but its inputs for the backward pass. */
#include "autodiff/grad_rules.h"

ot_status ot_grad_rnn(ot_grad_ctx *c, const ot_node *n, const int *dy) {
    int n_dy = n->n_outputs < 3 ? n->n_outputs : 3;
    bool any = false;
    for (int o = 0; o < n_dy; o++)
        any |= dy[o] >= 0;
    if (!any) return OT_OK;
    int in[11];
    for (int k = 0; k < 3; k++)
        in[k] = k < n_dy ? dy[k] : -1;
    for (int k = 0; k < 8; k++)
        in[3 + k] = k < n->n_inputs ? n->inputs[k] : -1;
    static const int of[7] = {0, 1, 2, 3, 5, 6, 7}; /* forward input of each output */
    int out[7];
    bool need = false;
    for (int o = 0; o < 7; o++) {
        int v = in[3 + of[o]];
        out[o] = -1;
        if (v >= 0 && ot_gb_needs(c, v)) {
            ot_shape s = ot_gb_shape(c, v);
            out[o] = ot_gb_new(c, ot_gb_dtype(c, v), &s);
            need = true;
        }
    }
    if (!need) return OT_OK;
    int node = ot_gb_emit(c, OT_OP_RNN_GRAD, in, 11, out, 7);
    ot_gb_copy_attrs(c, node, n);
    ot_gb_set_int(c, node, "cell", n->op);
    for (int o = 0; o < 7; o++)
        if (out[o] >= 0) ot_gb_add(c, in[3 + of[o]], out[o]);
    return OT_OK;
}
