/* test_grad_group_norm.c — finite-difference checks of InstanceNormalization's and
 * GroupNormalization's gradient (autodiff/grad_norm.c, GroupNormGrad): X, scale and B
 * all params; GroupNormalization with its scale per channel (opset 21) and per group
 * (opset 18); a rank-2 X (no spatial dims). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "grad_check.h"

/* op over X [xd], scale and B of np elements; num_groups when > 0. */
static void check(ot_op op, int rank, const int64_t *xd, int64_t np, int groups, int64_t opset) {
    ot_graph *g = gc_graph();
    g->opset = opset;
    uint32_t rng = 11 + (uint32_t)groups + (uint32_t)np;
    int x = gc_param(g, "x", rank, xd, &rng, -2, 2, false);
    int s = gc_param(g, "scale", 1, &np, &rng, 0.5f, 1.5f, false);
    int b = gc_param(g, "b", 1, &np, &rng, -1, 1, false);
    int y = gc_val(g, "y", OT_F32, rank, xd);
    int in[3] = {x, s, b};
    int n = gc_op(g, op, in, 3, &y, 1);
    ot_node_set_attr_float(&g->nodes[n], "epsilon", 1e-3f);
    if (groups > 0) ot_node_set_attr_int(&g->nodes[n], "num_groups", groups);
    if (gc_check1(g, y)) fail_msg("%s: %lld params, %d groups", ot_op_name(op), (long long)np, groups);
    ot_graph_free(g);
}

static void test_instance_norm(void **state) {
    (void)state;
    int64_t d3[3] = {2, 3, 5}, d4[4] = {2, 2, 3, 2};
    check(OT_OP_INSTANCE_NORM, 3, d3, 3, 0, 17);
    check(OT_OP_INSTANCE_NORM, 4, d4, 2, 0, 17);
}

static void test_group_norm(void **state) {
    (void)state;
    int64_t d4[4] = {2, 4, 3, 2}, d2[2] = {3, 8};
    check(OT_OP_GROUP_NORM, 4, d4, 4, 2, 21); /* per channel */
    check(OT_OP_GROUP_NORM, 4, d4, 2, 2, 18); /* per group */
    check(OT_OP_GROUP_NORM, 2, d2, 8, 2, 21); /* no spatial dims */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_instance_norm),
        cmocka_unit_test(test_group_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
