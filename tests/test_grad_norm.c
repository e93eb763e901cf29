/* test_grad_norm.c — finite-difference checks of BatchNormalization (training and
 * inference mode; running statistics are state, not params), LayerNormalization
 * (with and without bias, several axes), Softmax and LogSoftmax (axes, legacy 2-D). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "grad_check.h"

static void check_bn(bool training) {
    ot_graph *g = gc_graph();
    uint32_t rng = training ? 51 : 52;
    int64_t xd[4] = {3, 2, 2, 3}, cd[1] = {2};
    int x = gc_param(g, "X", 4, xd, &rng, -1, 1, false);
    int sc = gc_param(g, "scale", 1, cd, &rng, 0.5f, 1.5f, false);
    int b = gc_param(g, "bias", 1, cd, &rng, -1, 1, false);
    int m = gc_param(g, "running_mean", 1, cd, &rng, -0.2f, 0.2f, false);
    int v = gc_param(g, "running_var", 1, cd, &rng, 0.5f, 1.5f, false);
    int y = gc_val(g, "Y", OT_F32, 4, xd);
    int outs[3] = {y, gc_val(g, "new_mean", OT_F32, 1, cd), gc_val(g, "new_var", OT_F32, 1, cd)};
    int in[5] = {x, sc, b, m, v};
    int n = gc_op(g, OT_OP_BATCH_NORM, in, 5, outs, training ? 3 : 1);
    ot_node_set_attr_int(&g->nodes[n], "training_mode", training);
    ot_node_set_attr_float(&g->nodes[n], "epsilon", 1e-3f);
    assert_int_equal(gc_check1(g, y), 0);
    /* running statistics became state, never params */
    assert_int_equal(g->values[m].kind, OT_VK_STATE);
    assert_int_equal(g->values[v].kind, OT_VK_STATE);
    ot_graph_free(g);
}

static void test_batch_norm(void **state) {
    (void)state;
    check_bn(true);
    check_bn(false);
}

static void test_batch_norm_state_pairs(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 53;
    int64_t xd[2] = {4, 3}, cd[1] = {3};
    int in[5];
    in[0] = gc_param(g, "X", 2, xd, &rng, -1, 1, false);
    in[1] = gc_param(g, "scale", 1, cd, &rng, 0.5f, 1.5f, false);
    in[2] = gc_param(g, "bias", 1, cd, &rng, -1, 1, false);
    in[3] = gc_param(g, "running_mean", 1, cd, &rng, -0.2f, 0.2f, false);
    in[4] = gc_param(g, "running_var", 1, cd, &rng, 0.5f, 1.5f, false);
    int outs[3] = {gc_val(g, "Y", OT_F32, 2, xd), gc_val(g, "new_mean", OT_F32, 1, cd),
                   gc_val(g, "new_var", OT_F32, 1, cd)};
    int n = gc_op(g, OT_OP_BATCH_NORM, in, 5, outs, 3);
    ot_node_set_attr_int(&g->nodes[n], "training_mode", 1);
    uint32_t r2 = 1;
    int loss = gc_loss(g, &outs[0], 1, &r2);
    ot_autodiff_options o = {.loss_value = loss};
    ot_autodiff_result res;
    ot_error err = {0};
    assert_int_equal(ot_autodiff_build(g, &o, &res, &err), OT_OK);
    assert_int_equal(res.n_params, 3); /* X, scale, bias */
    assert_int_equal(res.n_state, 2);
    assert_int_equal(res.state_values[0], in[3]);
    assert_int_equal(res.state_updates[0], outs[1]);
    assert_int_equal(res.state_values[1], in[4]);
    assert_int_equal(res.state_updates[1], outs[2]);
    assert_true(g->values[outs[1]].is_graph_output && g->values[outs[2]].is_graph_output);
    ot_autodiff_result_free(&res);
    ot_graph_free(g);
}

static void check_ln(int64_t axis, bool bias) {
    ot_graph *g = gc_graph();
    uint32_t rng = 61 + (uint32_t)axis;
    int64_t xd[3] = {2, 3, 4};
    int a = (int)(axis < 0 ? axis + 3 : axis);
    int x = gc_param(g, "X", 3, xd, &rng, -1, 1, false);
    int sc = gc_param(g, "scale", 3 - a, xd + a, &rng, 0.5f, 1.5f, false);
    int in[3] = {x, sc, bias ? gc_param(g, "bias", 3 - a, xd + a, &rng, -1, 1, false) : -1};
    int y = gc_val(g, "Y", OT_F32, 3, xd);
    int n = gc_op(g, OT_OP_LAYER_NORM, in, bias ? 3 : 2, &y, 1);
    ot_node_set_attr_int(&g->nodes[n], "axis", axis);
    ot_node_set_attr_float(&g->nodes[n], "epsilon", 1e-3f);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_layer_norm(void **state) {
    (void)state;
    check_ln(-1, true);
    check_ln(1, true);
    check_ln(-1, false);
}

static void check_softmax(ot_op op, int64_t axis, bool legacy) {
    ot_graph *g = gc_graph();
    uint32_t rng = 71 + (uint32_t)axis;
    int64_t xd[3] = {2, 3, 4};
    int x = gc_param(g, "X", 3, xd, &rng, -2, 2, false);
    int y = gc_val(g, "Y", OT_F32, 3, xd);
    int n = gc_op(g, op, &x, 1, &y, 1);
    ot_node_set_attr_int(&g->nodes[n], "axis", axis);
    if (legacy) ot_node_set_attr_int(&g->nodes[n], "legacy_2d", 1);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_softmax(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        ot_op op = k ? OT_OP_LOG_SOFTMAX : OT_OP_SOFTMAX;
        check_softmax(op, -1, false);
        check_softmax(op, 1, false);
        check_softmax(op, 0, false);
        check_softmax(op, 1, true);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_norm),
        cmocka_unit_test(test_batch_norm_state_pairs),
        cmocka_unit_test(test_layer_norm),
        cmocka_unit_test(test_softmax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
