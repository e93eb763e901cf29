/* test_grad_elementwise.c — finite-difference checks of the pointwise gradient
 * rules (arithmetic with broadcasting, unary maths, activations, Where, Cast, Sum). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "grad_check.h"

/* gc_check_unary draws x from this seed plus the op. */
enum { UNARY_SEED = 7 };

static void leaky_attrs(ot_node *n) { ot_node_set_attr_float(n, "alpha", 0.2f); }
static void clip_attrs(ot_node *n) {
    ot_node_set_attr_float(n, "min", -0.5f);
    ot_node_set_attr_float(n, "max", 0.6f);
}
static void gelu_tanh_attrs(ot_node *n) { ot_node_set_attr_string(n, "approximate", "tanh"); }

static void test_unary(void **state) {
    (void)state;
    gc_check_unary(OT_OP_NEG, UNARY_SEED, -1, 1, false, NULL);
    gc_check_unary(OT_OP_EXP, UNARY_SEED, -1, 1, false, NULL);
    gc_check_unary(OT_OP_LOG, UNARY_SEED, 0.5f, 2, false, NULL);
    gc_check_unary(OT_OP_SQRT, UNARY_SEED, 0.5f, 2, false, NULL);
    gc_check_unary(OT_OP_RECIPROCAL, UNARY_SEED, 0.5f, 2, false, NULL);
    gc_check_unary(OT_OP_ERF, UNARY_SEED, -1.5f, 1.5f, false, NULL);
    gc_check_unary(OT_OP_TANH, UNARY_SEED, -2, 2, false, NULL);
    gc_check_unary(OT_OP_SIGMOID, UNARY_SEED, -3, 3, false, NULL);
    gc_check_unary(OT_OP_RELU, UNARY_SEED, -1, 1, true, NULL);
    gc_check_unary(OT_OP_LEAKY_RELU, UNARY_SEED, -1, 1, true, leaky_attrs);
    gc_check_unary(OT_OP_GELU, UNARY_SEED, -2, 2, false, NULL);
    gc_check_unary(OT_OP_GELU, UNARY_SEED, -2, 2, false, gelu_tanh_attrs);
}

static void test_clip(void **state) {
    (void)state;
    /* values drawn in +-[0.2, 1]: some clipped on each side, none at a bound */
    ot_graph *g = gc_graph();
    uint32_t rng = 3;
    int64_t d[1] = {24};
    int x = gc_param(g, "x", 1, d, &rng, -1, 1, true);
    float *xd = g->values[x].data;
    for (int i = 0; i < 24; i++)
        if (fabsf(xd[i] - 0.6f) < 0.05f || fabsf(xd[i] + 0.5f) < 0.05f) xd[i] = 0.0f; /* keep away from the bounds */
    int y = gc_val(g, "y", OT_F32, 1, d);
    int cn = gc_op(g, OT_OP_CLIP, &x, 1, &y, 1);
    clip_attrs(&g->nodes[cn]);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

/* y = op(a, b) with a [2, 3, 4] and b of shape bd (broadcast). */
static void check_binary(ot_op op, int brank, const int64_t *bd, float lo, float hi) {
    ot_graph *g = gc_graph();
    uint32_t rng = 11 + (uint32_t)op;
    int64_t ad[3] = {2, 3, 4};
    int a = gc_param(g, "a", 3, ad, &rng, lo, hi, false);
    int b = gc_param(g, "b", brank, bd, &rng, lo, hi, false);
    int y = gc_val(g, "y", OT_F32, 3, ad);
    int in[2] = {a, b};
    gc_op(g, op, in, 2, &y, 1);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_binary_broadcast(void **state) {
    (void)state;
    int64_t same[3] = {2, 3, 4}, row[1] = {4}, mid[3] = {1, 3, 1}, sc[1] = {1};
    ot_op ops[4] = {OT_OP_ADD, OT_OP_SUB, OT_OP_MUL, OT_OP_DIV};
    for (int i = 0; i < 4; i++) {
        float lo = ops[i] == OT_OP_DIV ? 0.5f : -1, hi = ops[i] == OT_OP_DIV ? 1.5f : 1;
        check_binary(ops[i], 3, same, lo, hi);
        check_binary(ops[i], 1, row, lo, hi);
        check_binary(ops[i], 3, mid, lo, hi);
        check_binary(ops[i], 0, sc, lo, hi);
    }
    check_binary(OT_OP_POW, 3, same, 0.5f, 1.5f);
    check_binary(OT_OP_POW, 1, row, 0.5f, 1.5f);
}

/* The broadcast operand is the left one: its gradient must be reduced too. */
static void test_broadcast_left(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 5;
    int64_t ad[2] = {3, 1}, bd[2] = {3, 4};
    int a = gc_param(g, "a", 2, ad, &rng, 0.5f, 1.5f, false);
    int b = gc_param(g, "b", 2, bd, &rng, 0.5f, 1.5f, false);
    int y = gc_val(g, "y", OT_F32, 2, bd);
    int in[2] = {a, b};
    gc_op(g, OT_OP_DIV, in, 2, &y, 1);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_where_sum_cast(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 9;
    int64_t d[2] = {3, 4}, r[1] = {4};
    uint8_t cond[12];
    for (int i = 0; i < 12; i++) cond[i] = (uint8_t)((i * 7) % 3 == 0);
    int c = gc_const(g, "cond", OT_BOOL, 2, d, cond);
    int x1 = gc_param(g, "x1", 2, d, &rng, -1, 1, false);
    int x2 = gc_param(g, "x2", 1, r, &rng, -1, 1, false);
    int w = gc_val(g, "w", OT_F32, 2, d);
    int in[3] = {c, x1, x2};
    gc_op(g, OT_OP_WHERE, in, 3, &w, 1);
    /* Sum of three with broadcasting, then a float->float Cast */
    int x3 = gc_param(g, "x3", 1, r, &rng, -1, 1, false);
    int s = gc_val(g, "s", OT_F32, 2, d);
    int sin[3] = {w, x3, x1};
    gc_op(g, OT_OP_SUM, sin, 3, &s, 1);
    int y = gc_val(g, "y", OT_F32, 2, d);
    int cn = gc_op(g, OT_OP_CAST, &s, 1, &y, 1);
    ot_node_set_attr_int(&g->nodes[cn], "to", OT_F32);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_clip),
        cmocka_unit_test(test_binary_broadcast),
        cmocka_unit_test(test_broadcast_left),
        cmocka_unit_test(test_where_sum_cast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
