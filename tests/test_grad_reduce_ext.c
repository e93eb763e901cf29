/* test_grad_reduce_ext.c — finite-difference checks of the gradient rules of issue
 * 26's reductions (autodiff/grad_reduce_ext.c and its backward op ReduceGrad):
 * ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSumExp and
 * ReduceSumSquare over one axis (keepdims 1 and 0), two axes, every axis (no axes
 * attribute), and axes given as the opset-18 constant input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "grad_check.h"

static const ot_op OPS[7] = {OT_OP_REDUCE_MAX, OT_OP_REDUCE_MIN, OT_OP_REDUCE_PROD,        OT_OP_REDUCE_L1,
                             OT_OP_REDUCE_L2,  OT_OP_REDUCE_LOG_SUM_EXP, OT_OP_REDUCE_SUM_SQUARE};

/* Distinct values at least 0.05 apart in [-1.2, 1.2], none within 0.1 of zero, so the
 * FD step (1e-2) never swaps Max / Min's winner or crosses |x|'s kink. */
static void spread(float *x, int n, uint32_t seed) {
    for (int i = 0; i < n; i++) {
        int k = (int)((uint32_t)(i * 7 + (int)seed) % (uint32_t)n);
        float v = -1.2f + 2.4f * (float)k / (float)(n - 1);
        if (fabsf(v) < 0.1f) v = v < 0 ? -0.15f : 0.15f;
        x[i] = v;
    }
}

/* op over a [2, 3, 4] param: axes (NULL: none), keepdims, axes as input 1 instead. */
static void check(ot_op op, const int64_t *axes, int na, int keep, bool as_input) {
    ot_graph *g = gc_graph();
    uint32_t rng = 3 + (uint32_t)op;
    int64_t xd[3] = {2, 3, 4};
    int x = gc_param(g, "x", 3, xd, &rng, -1, 1, false);
    spread(g->values[x].data, 24, (uint32_t)op);
    bool red[3] = {na == 0, na == 0, na == 0};
    for (int i = 0; i < na; i++) red[(axes[i] + 3) % 3] = true;
    int64_t yd[3];
    int yr = 0;
    for (int d = 0; d < 3; d++)
        if (!red[d]) yd[yr++] = xd[d];
        else if (keep) yd[yr++] = 1;
    int y = gc_val(g, "y", OT_F32, yr, yd);
    int in[2] = {x, -1};
    if (as_input) {
        int64_t ad[1] = {na};
        in[1] = gc_const(g, "axes", OT_I64, 1, ad, axes);
    }
    int n = gc_op(g, op, in, as_input ? 2 : 1, &y, 1);
    if (axes && !as_input) ot_node_set_attr_ints(&g->nodes[n], "axes", axes, na);
    ot_node_set_attr_int(&g->nodes[n], "keepdims", keep);
    if (gc_check1(g, y)) fail_msg("%s: axes %d (input %d), keepdims %d", ot_op_name(op), na, as_input, keep);
    ot_graph_free(g);
}

static void test_one_axis(void **state) {
    (void)state;
    const int64_t a1[1] = {1}, am[1] = {-1};
    for (int o = 0; o < 7; o++) {
        check(OPS[o], a1, 1, 1, false);
        check(OPS[o], am, 1, 0, false);
    }
}

static void test_two_axes_and_all(void **state) {
    (void)state;
    const int64_t a2[2] = {0, 2};
    for (int o = 0; o < 7; o++) {
        check(OPS[o], a2, 2, 1, false);
        check(OPS[o], NULL, 0, 0, false);
    }
}

static void test_axes_input(void **state) {
    (void)state;
    const int64_t a2[2] = {2, 0};
    for (int o = 0; o < 7; o++) check(OPS[o], a2, 2, 0, true);
}

/* noop_with_empty_axes and no axes: Y is X, and so is the gradient. */
static void test_noop(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 5;
    int64_t xd[2] = {3, 4};
    int x = gc_param(g, "x", 2, xd, &rng, -1, 1, true);
    int y = gc_val(g, "y", OT_F32, 2, xd);
    int n = gc_op(g, OT_OP_REDUCE_L1, &x, 1, &y, 1);
    ot_node_set_attr_int(&g->nodes[n], "noop_with_empty_axes", 1);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_axis),
        cmocka_unit_test(test_two_axes_and_all),
        cmocka_unit_test(test_axes_input),
        cmocka_unit_test(test_noop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
