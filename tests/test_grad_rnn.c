/* test_grad_rnn.c — finite-difference checks of the recurrent ops' gradient rule
 * (autodiff/grad_rnn.c and its backward op RnnGrad, kernels/rnn_geometry.h): RNN
 * (Tanh, Relu), GRU (linear_before_reset 0 and 1), LSTM (with peepholes and
 * initial_c), forward, reverse and bidirectional, layout 0 and 1, sequence_lens
 * shorter than the sequence, initial_h; the loss reads Y, Y_h and Y_c, and every
 * weight, bias, initial state and the input X are params. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "grad_check.h"

typedef struct rnn_case {
    ot_op op;
    const char *direction;
    int layout, lbr, relu, peep, seq;
} rnn_case;

static void check(rnn_case k) {
    const int64_t T = 4, B = 3, I = 2, H = 3;
    int64_t D = !strcmp(k.direction, "bidirectional") ? 2 : 1;
    int64_t G = k.op == OT_OP_RNN ? 1 : k.op == OT_OP_GRU ? 3 : 4;
    ot_graph *g = gc_graph();
    uint32_t rng = 17 + (uint32_t)k.op + (uint32_t)k.layout * 3;
    int64_t xd[3] = {k.layout ? B : T, k.layout ? T : B, I}, wd[3] = {D, G * H, I}, rd[3] = {D, G * H, H};
    int64_t bd[2] = {D, 2 * G * H}, hd[3] = {k.layout ? B : D, k.layout ? D : B, H}, pd[2] = {D, 3 * H}, sd[1] = {B};
    int in[8];
    for (int j = 0; j < 8; j++)
        in[j] = -1;
    in[0] = gc_param(g, "x", 3, xd, &rng, -1, 1, false);
    in[1] = gc_param(g, "w", 3, wd, &rng, -0.8f, 0.8f, false);
    in[2] = gc_param(g, "r", 3, rd, &rng, -0.8f, 0.8f, false);
    in[3] = gc_param(g, "b", 2, bd, &rng, -0.5f, 0.5f, false);
    int32_t lens[3] = {4, 2, 3};
    if (k.seq) in[4] = gc_const(g, "lens", OT_I32, 1, sd, lens);
    in[5] = gc_param(g, "h0", 3, hd, &rng, -0.5f, 0.5f, false);
    int n_in = 6;
    if (k.op == OT_OP_LSTM) {
        in[6] = gc_param(g, "c0", 3, hd, &rng, -0.5f, 0.5f, false);
        if (k.peep) in[7] = gc_param(g, "p", 2, pd, &rng, -0.5f, 0.5f, false);
        n_in = k.peep ? 8 : 7;
    }
    int64_t yd[4] = {T, D, B, H}, yld[4] = {B, T, D, H};
    int n_out = k.op == OT_OP_LSTM ? 3 : 2;
    int out[3] = {gc_val(g, "y", OT_F32, 4, k.layout ? yld : yd), gc_val(g, "yh", OT_F32, 3, hd),
                  k.op == OT_OP_LSTM ? gc_val(g, "yc", OT_F32, 3, hd) : -1};
    int node = gc_op(g, k.op, in, n_in, out, n_out);
    ot_node *nd = &g->nodes[node];
    ot_node_set_attr_string(nd, "direction", k.direction);
    ot_node_set_attr_int(nd, "hidden_size", H);
    if (k.layout) ot_node_set_attr_int(nd, "layout", 1);
    if (k.lbr) ot_node_set_attr_int(nd, "linear_before_reset", 1);
    if (k.relu) {
        const char *acts[2] = {"Relu", "Relu"};
        ot_node_set_attr_strings(nd, "activations", acts, (int)D);
    }
    gc_opts opt = {.step = 1e-3, .rtol = 2e-2, .atol = 2e-3};
    if (gc_check(g, out, n_out, &opt))
        fail_msg("%s %s layout %d lbr %d relu %d peepholes %d sequence_lens %d", ot_op_name(k.op), k.direction,
                 k.layout, k.lbr, k.relu, k.peep, k.seq);
    ot_graph_free(g);
}

static void test_rnn(void **state) {
    (void)state;
    check((rnn_case){OT_OP_RNN, "forward", 0, 0, 0, 0, 0});
    check((rnn_case){OT_OP_RNN, "reverse", 0, 0, 0, 0, 1});
    check((rnn_case){OT_OP_RNN, "bidirectional", 1, 0, 1, 0, 1});
}

static void test_gru(void **state) {
    (void)state;
    check((rnn_case){OT_OP_GRU, "forward", 0, 0, 0, 0, 0});
    check((rnn_case){OT_OP_GRU, "forward", 0, 1, 0, 0, 1});
    check((rnn_case){OT_OP_GRU, "bidirectional", 1, 1, 0, 0, 1});
    check((rnn_case){OT_OP_GRU, "reverse", 1, 0, 0, 0, 1});
}

static void test_lstm(void **state) {
    (void)state;
    check((rnn_case){OT_OP_LSTM, "forward", 0, 0, 0, 0, 0});
    check((rnn_case){OT_OP_LSTM, "forward", 0, 0, 0, 1, 1});
    check((rnn_case){OT_OP_LSTM, "bidirectional", 1, 0, 0, 1, 1});
    check((rnn_case){OT_OP_LSTM, "reverse", 0, 0, 0, 0, 1});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rnn),
        cmocka_unit_test(test_gru),
        cmocka_unit_test(test_lstm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
