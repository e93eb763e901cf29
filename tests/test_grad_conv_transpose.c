/* test_grad_conv_transpose.c — finite-difference checks of ConvTranspose's gradient
 * rule (issue 26, ops batch 2: dX = Conv(dY, W), dW = ConvGradWeight(X, dY, W), dB a
 * sum of dY, with the explicit pads of ot_conv_transpose_pads): 2-D with stride,
 * pads and output_padding; 1-D with dilation and groups; auto_pad SAME_UPPER and
 * SAME_LOWER; output_shape; X, W and B all params. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "grad_check.h"

typedef struct ct_case {
    int rank;
    int64_t xd[4], wd[4], yd[4];
    int group;
    int64_t strides[2], dil[2], pads[4], out_pad[2], out_shape[2];
    bool has_pads, has_out_pad, has_out_shape, bias;
    const char *auto_pad;
} ct_case;

static void check_ct(const ct_case *k) {
    ot_graph *g = gc_graph();
    uint32_t rng = 421;
    int nd = k->rank - 2;
    int x = gc_param(g, "X", k->rank, k->xd, &rng, -1, 1, false);
    int w = gc_param(g, "W", k->rank, k->wd, &rng, -1, 1, false);
    int64_t m = k->yd[1];
    int in[3] = {x, w, k->bias ? gc_param(g, "B", 1, &m, &rng, -1, 1, false) : -1};
    int y = gc_val(g, "Y", OT_F32, k->rank, k->yd);
    int n = gc_op(g, OT_OP_CONV_TRANSPOSE, in, k->bias ? 3 : 2, &y, 1);
    ot_node *nd_ = &g->nodes[n];
    ot_node_set_attr_ints(nd_, "strides", k->strides, nd);
    ot_node_set_attr_ints(nd_, "dilations", k->dil, nd);
    ot_node_set_attr_int(nd_, "group", k->group);
    if (k->has_pads) ot_node_set_attr_ints(nd_, "pads", k->pads, 2 * nd);
    if (k->has_out_pad) ot_node_set_attr_ints(nd_, "output_padding", k->out_pad, nd);
    if (k->has_out_shape) ot_node_set_attr_ints(nd_, "output_shape", k->out_shape, nd);
    if (k->auto_pad) ot_node_set_attr_string(nd_, "auto_pad", k->auto_pad);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_conv_transpose(void **state) {
    (void)state;
    static const ct_case cases[] = {
        /* the UNet / FCN upsampler: k3 s2 p1 output_padding 1 (5 -> 10), bias */
        {4, {2, 3, 5, 4}, {3, 2, 3, 3}, {2, 2, 10, 8}, 1, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, {0}, true, true, false,
         true, NULL},
        /* k4 s2 p1, no output padding (DCGAN) */
        {4, {1, 2, 3, 3}, {2, 3, 4, 4}, {1, 3, 6, 6}, 1, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0}, {0}, true, false, false,
         true, NULL},
        /* 1-D, dilation 2, groups 2, uneven pads */
        {3, {2, 4, 5}, {4, 3, 3}, {2, 6, 10}, 2, {2}, {2}, {2, 1}, {0}, {0}, true, false, false, true, NULL},
        /* auto_pad SAME_UPPER / SAME_LOWER: out = in x stride (odd total padding) */
        {4, {1, 2, 3, 2}, {2, 2, 2, 3}, {1, 2, 6, 4}, 1, {2, 2}, {1, 1}, {0}, {0}, {0}, false, false, false, false,
         "SAME_UPPER"},
        {4, {1, 2, 3, 2}, {2, 2, 2, 3}, {1, 2, 6, 4}, 1, {2, 2}, {1, 1}, {0}, {0}, {0}, false, false, false, true,
         "SAME_LOWER"},
        /* output_shape one past the natural size (the extra row reads nothing) */
        {4, {1, 1, 3, 3}, {1, 2, 3, 3}, {1, 2, 10, 8}, 1, {3, 2}, {1, 1}, {0}, {0}, {10, 8}, false, false, true, true,
         NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_ct(&cases[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_conv_transpose)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
