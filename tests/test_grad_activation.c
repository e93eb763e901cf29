/* test_grad_activation.c — finite-difference checks of the gradient rules of issue
 * 26's pointwise ops (autodiff/grad_activation.c): Elu, Selu, Celu (EluGrad with their
 * parameters), ThresholdedRelu, Softsign, PRelu (X and a broadcast slope, both
 * gradients) and the zero gradient of Sign, Floor, Ceil and Round. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "grad_check.h"

/* gc_check_unary draws x from this seed plus the op. */
enum { UNARY_SEED = 29 };

static void alpha_07(ot_node *n) { ot_node_set_attr_float(n, "alpha", 0.7f); }
static void alpha_2(ot_node *n) { ot_node_set_attr_float(n, "alpha", 2.0f); }
static void selu_attrs(ot_node *n) {
    ot_node_set_attr_float(n, "alpha", 1.5f);
    ot_node_set_attr_float(n, "gamma", 1.2f);
}

static void test_unary(void **state) {
    (void)state;
    /* the kink at 0 is avoided (away): Elu's slope jumps there unless alpha = 1 */
    gc_check_unary(OT_OP_ELU, UNARY_SEED, -3, 3, true, NULL);
    gc_check_unary(OT_OP_ELU, UNARY_SEED, -3, 3, true, alpha_07);
    gc_check_unary(OT_OP_SELU, UNARY_SEED, -3, 3, true, NULL);
    gc_check_unary(OT_OP_SELU, UNARY_SEED, -3, 3, true, selu_attrs);
    gc_check_unary(OT_OP_CELU, UNARY_SEED, -3, 3, true, NULL);
    gc_check_unary(OT_OP_CELU, UNARY_SEED, -3, 3, true, alpha_2);
    gc_check_unary(OT_OP_SOFTSIGN, UNARY_SEED, -3, 3, false, NULL);
}

/* ThresholdedRelu: the jump at alpha is kept 0.1 away from the data. */
static void test_thresholded_relu(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    int64_t d[1] = {6};
    const float xv[6] = {-2.0f, 0.3f, 0.6f, 0.8f, 1.5f, 3.0f};
    uint32_t rng = 5;
    int x = gc_param(g, "x", 1, d, &rng, 0, 1, false);
    memcpy(g->values[x].data, xv, sizeof xv);
    int y = gc_val(g, "y", OT_F32, 1, d);
    int n = gc_op(g, OT_OP_THRESHOLDED_RELU, &x, 1, &y, 1);
    ot_node_set_attr_float(&g->nodes[n], "alpha", 0.7f);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

/* PRelu of a [2, 3, 4] X with slopes [3, 1] (PyTorch's per-channel form), [1] and a
 * full [2, 3, 4]: the slope's gradient is summed over the elements it covers. */
static void test_prelu(void **state) {
    (void)state;
    int64_t xd[3] = {2, 3, 4};
    int64_t sd[3][3] = {{3, 1, 0}, {1, 0, 0}, {2, 3, 4}};
    int sr[3] = {2, 1, 3};
    for (int k = 0; k < 3; k++) {
        ot_graph *g = gc_graph();
        uint32_t rng = 41 + (uint32_t)k;
        int x = gc_param(g, "x", 3, xd, &rng, -2, 2, true);
        int s = gc_param(g, "slope", sr[k], sd[k], &rng, -0.5f, 0.8f, false);
        int y = gc_val(g, "y", OT_F32, 3, xd);
        int in[2] = {x, s};
        gc_op(g, OT_OP_PRELU, in, 2, &y, 1);
        assert_int_equal(gc_check1(g, y), 0);
        ot_graph_free(g);
    }
}

/* y = x * op(x): op's gradient is zero, so dy/dx = op(x) (PyTorch gives the same);
 * the data is kept 0.1 away from op's jumps (integers, half-integers for Round, 0). */
static void test_zero_gradient(void **state) {
    (void)state;
    ot_op ops[4] = {OT_OP_SIGN, OT_OP_FLOOR, OT_OP_CEIL, OT_OP_ROUND};
    const float xv[6] = {-2.3f, -1.2f, -0.3f, 0.3f, 1.3f, 2.2f};
    for (int k = 0; k < 4; k++) {
        ot_graph *g = gc_graph();
        int64_t d[1] = {6};
        uint32_t rng = 7;
        int x = gc_param(g, "x", 1, d, &rng, 0, 1, false);
        memcpy(g->values[x].data, xv, sizeof xv);
        int f = gc_val(g, "f", OT_F32, 1, d), y = gc_val(g, "y", OT_F32, 1, d);
        gc_op(g, ops[k], &x, 1, &f, 1);
        int in[2] = {x, f};
        gc_op(g, OT_OP_MUL, in, 2, &y, 1);
        assert_int_equal(gc_check1(g, y), 0);
        ot_graph_free(g);
    }
}

/* A param reached only through Floor: autodiff builds, and its gradient is zeros. */
static void test_floor_only(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    int64_t d[1] = {6};
    const float xv[6] = {-2.3f, -1.2f, -0.3f, 0.3f, 1.3f, 2.2f};
    uint32_t rng = 9;
    int x = gc_param(g, "x", 1, d, &rng, 0, 1, false);
    memcpy(g->values[x].data, xv, sizeof xv);
    int y = gc_val(g, "y", OT_F32, 1, d);
    gc_op(g, OT_OP_FLOOR, &x, 1, &y, 1);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),         cmocka_unit_test(test_thresholded_relu),
        cmocka_unit_test(test_prelu),         cmocka_unit_test(test_zero_gradient),
        cmocka_unit_test(test_floor_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
