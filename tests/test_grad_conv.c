/* test_grad_conv.c — finite-difference checks of the Conv rule (ConvGradInput,
 * ConvGradWeight, bias; strides, pads, dilations, groups, 1-D and 2-D) and the pool
 * rules (MaxPool, AveragePool with and without counted pads, GlobalAveragePool). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "grad_check.h"

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d) {
    return (in + p0 + p1 - ((k - 1) * d + 1)) / s + 1;
}

static void check_conv(int nd, int64_t cin, int64_t cout, int64_t group, int64_t k, int64_t s, int64_t p,
                       int64_t dil, bool bias) {
    ot_graph *g = gc_graph();
    uint32_t rng = 31 + (uint32_t)(nd * 100 + group * 10 + s);
    int64_t xd[4] = {2, cin, 5, 6}, wd[4] = {cout, cin / group, k, k}, yd[4] = {2, cout, 0, 0}, bd[1] = {cout};
    if (nd == 1) xd[2] = 7;
    for (int i = 0; i < nd; i++) yd[2 + i] = out_dim(xd[2 + i], k, s, p, p, dil);
    int x = gc_param(g, "X", 2 + nd, xd, &rng, -1, 1, false);
    int w = gc_param(g, "W", 2 + nd, wd, &rng, -1, 1, false);
    int in[3] = {x, w, bias ? gc_param(g, "B", 1, bd, &rng, -1, 1, false) : -1};
    int y = gc_val(g, "Y", OT_F32, 2 + nd, yd);
    int n = gc_op(g, OT_OP_CONV, in, bias ? 3 : 2, &y, 1);
    int64_t ks[2] = {k, k}, ss[2] = {s, s}, ps[4] = {p, p, p, p}, ds[2] = {dil, dil};
    ot_node_set_attr_ints(&g->nodes[n], "kernel_shape", ks, nd);
    ot_node_set_attr_ints(&g->nodes[n], "strides", ss, nd);
    ot_node_set_attr_ints(&g->nodes[n], "pads", ps, 2 * nd);
    ot_node_set_attr_ints(&g->nodes[n], "dilations", ds, nd);
    ot_node_set_attr_int(&g->nodes[n], "group", group);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_conv(void **state) {
    (void)state;
    check_conv(2, 2, 3, 1, 3, 1, 1, 1, true);
    check_conv(2, 4, 4, 2, 3, 2, 1, 1, true);
    check_conv(2, 2, 2, 1, 2, 1, 0, 2, false);
    check_conv(1, 3, 2, 1, 3, 2, 1, 1, true);
}

/* X with distinct values 0.1 apart (shuffled) so no max is within a step of another. */
static int distinct_x(ot_graph *g, int64_t *xd, uint32_t *rng) {
    int x = gc_param(g, "X", 4, xd, rng, -1, 1, false);
    float *d = g->values[x].data;
    int64_t n = xd[0] * xd[1] * xd[2] * xd[3];
    for (int64_t i = 0; i < n; i++) d[i] = 0.1f * (float)((i * 37) % n) - 0.05f * (float)n;
    return x;
}

static void check_pool(ot_op op, int64_t k, int64_t s, int64_t p, int include_pad) {
    ot_graph *g = gc_graph();
    uint32_t rng = 41;
    int64_t xd[4] = {2, 2, 5, 5}, yd[4] = {2, 2, out_dim(5, k, s, p, p, 1), out_dim(5, k, s, p, p, 1)};
    int x = distinct_x(g, xd, &rng);
    int y = gc_val(g, "Y", OT_F32, 4, yd);
    int n = gc_op(g, op, &x, 1, &y, 1);
    int64_t ks[2] = {k, k}, ss[2] = {s, s}, ps[4] = {p, p, p, p};
    ot_node_set_attr_ints(&g->nodes[n], "kernel_shape", ks, 2);
    ot_node_set_attr_ints(&g->nodes[n], "strides", ss, 2);
    ot_node_set_attr_ints(&g->nodes[n], "pads", ps, 4);
    ot_node_set_attr_int(&g->nodes[n], "count_include_pad", include_pad);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_pools(void **state) {
    (void)state;
    check_pool(OT_OP_MAX_POOL, 2, 2, 0, 0);
    check_pool(OT_OP_MAX_POOL, 3, 1, 1, 0); /* overlapping windows: a max feeds several outputs */
    check_pool(OT_OP_AVERAGE_POOL, 2, 2, 0, 0);
    check_pool(OT_OP_AVERAGE_POOL, 3, 2, 1, 0);
    check_pool(OT_OP_AVERAGE_POOL, 3, 2, 1, 1);
}

static void test_global_average_pool(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 43;
    int64_t xd[4] = {2, 3, 4, 5}, yd[4] = {2, 3, 1, 1};
    int x = gc_param(g, "X", 4, xd, &rng, -1, 1, false);
    int y = gc_val(g, "Y", OT_F32, 4, yd);
    gc_op(g, OT_OP_GLOBAL_AVERAGE_POOL, &x, 1, &y, 1);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_global_average_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
