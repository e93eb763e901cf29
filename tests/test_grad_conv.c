/* test_grad_conv.c — finite-difference checks of the Conv rule (ConvGradInput,
 * ConvGradWeight, bias; strides, pads, dilations, groups, 1-D and 2-D) and the pool
 * rules (MaxPool, AveragePool with and without counted pads, GlobalAveragePool), and
 * the sample CNNs' chain of rules in miniature (BatchNorm in training mode with its
 * running-stat outputs, residual sums, depthwise and strided convs, Clip, Gemm). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>

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
    check_conv(2, 4, 4, 4, 3, 2, 1, 1, false); /* depthwise (group = C), stride 2, pad 1 */
    check_conv(2, 4, 8, 4, 3, 1, 1, 1, true);  /* depthwise with multiplier 2 */
    check_conv(2, 3, 4, 1, 1, 2, 0, 1, false); /* 1x1 stride-2 downsample */
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

static void set_window(ot_node *n, int64_t k, int64_t s, int64_t p) {
    int64_t ks[2] = {k, k}, ss[2] = {s, s}, ps[4] = {p, p, p, p};
    ot_node_set_attr_ints(n, "kernel_shape", ks, 2);
    ot_node_set_attr_ints(n, "strides", ss, 2);
    ot_node_set_attr_ints(n, "pads", ps, 4);
}

static int conv_bn(ot_graph *g, const char *pfx, int x, int64_t cin, int64_t cout, int64_t group, int64_t k,
                   int64_t s, int64_t p, int64_t hw_out, uint32_t *rng) {
    char nm[64];
    int64_t wd[4] = {cout, cin / group, k, k}, yd[4] = {2, cout, hw_out, hw_out}, cd[1] = {cout};
    snprintf(nm, sizeof nm, "%s.w", pfx);
    int in[3] = {x, gc_param(g, nm, 4, wd, rng, -0.6f, 0.6f, false), -1};
    snprintf(nm, sizeof nm, "%s.y", pfx);
    int y = gc_val(g, nm, OT_F32, 4, yd);
    int n = gc_op(g, OT_OP_CONV, in, 2, &y, 1);
    set_window(&g->nodes[n], k, s, p);
    ot_node_set_attr_int(&g->nodes[n], "group", group);
    /* BatchNormalization in training mode with its running-stat outputs, as exported */
    int bin[5];
    bin[0] = y;
    snprintf(nm, sizeof nm, "%s.bn.scale", pfx);
    bin[1] = gc_param(g, nm, 1, cd, rng, 0.5f, 1.5f, false);
    snprintf(nm, sizeof nm, "%s.bn.bias", pfx);
    bin[2] = gc_param(g, nm, 1, cd, rng, -0.3f, 0.3f, false);
    snprintf(nm, sizeof nm, "%s.bn.running_mean", pfx);
    bin[3] = gc_param(g, nm, 1, cd, rng, -0.2f, 0.2f, false);
    snprintf(nm, sizeof nm, "%s.bn.running_var", pfx);
    bin[4] = gc_param(g, nm, 1, cd, rng, 0.5f, 1.5f, false);
    int outs[3];
    snprintf(nm, sizeof nm, "%s.bn.y", pfx);
    outs[0] = gc_val(g, nm, OT_F32, 4, yd);
    snprintf(nm, sizeof nm, "%s.bn.mean", pfx);
    outs[1] = gc_val(g, nm, OT_F32, 1, cd);
    snprintf(nm, sizeof nm, "%s.bn.var", pfx);
    outs[2] = gc_val(g, nm, OT_F32, 1, cd);
    int bn = gc_op(g, OT_OP_BATCH_NORM, bin, 5, outs, 3);
    ot_node_set_attr_int(&g->nodes[bn], "training_mode", 1);
    ot_node_set_attr_int(&g->nodes[bn], "unbiased_running_var", 1);
    return outs[0];
}

static int unary(ot_graph *g, ot_op op, int x, const char *name) {
    int y = gc_val(g, name, OT_F32, g->values[x].shape.rank, g->values[x].shape.dim);
    gc_op(g, op, &x, 1, &y, 1);
    return y;
}

static int add2(ot_graph *g, int a, int b, const char *name) {
    int y = gc_val(g, name, OT_F32, g->values[a].shape.rank, g->values[a].shape.dim);
    int in[2] = {a, b};
    gc_op(g, OT_OP_ADD, in, 2, &y, 1);
    return y;
}

/* The sample CNNs' composition in miniature, every rule chained as exported by
 * PyTorch: conv-BN(train, with running-stat outputs)-Relu stem, MaxPool 3x3/2 pad 1,
 * a residual block whose input has two consumers (depthwise conv-BN-Clip(0,6)
 * branch + identity), a stride-2 block with a 1x1 stride-2 downsample, then
 * GlobalAveragePool, Flatten and Gemm(transB=1). */
static void test_cnn_composition(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 77;
    int64_t xd[4] = {2, 3, 8, 8};
    int x = gc_param(g, "X", 4, xd, &rng, -1, 1, false);
    int stem = unary(g, OT_OP_RELU, conv_bn(g, "stem", x, 3, 4, 1, 3, 1, 1, 8, &rng), "stem.relu");
    int64_t pd[4] = {2, 4, 4, 4};
    int pool = gc_val(g, "pool", OT_F32, 4, pd);
    int pn = gc_op(g, OT_OP_MAX_POOL, &stem, 1, &pool, 1);
    set_window(&g->nodes[pn], 3, 2, 1);
    /* block 1: depthwise branch + identity */
    int dw = conv_bn(g, "b1.dw", pool, 4, 4, 4, 3, 1, 1, 4, &rng);
    int clip = unary(g, OT_OP_CLIP, dw, "b1.clip");
    ot_node_set_attr_float(&g->nodes[g->values[clip].producer], "min", 0.0f);
    ot_node_set_attr_float(&g->nodes[g->values[clip].producer], "max", 6.0f);
    int b1 = unary(g, OT_OP_RELU, add2(g, clip, pool, "b1.add"), "b1.relu");
    /* block 2: stride 2 with a 1x1 stride-2 downsample */
    int c1 = unary(g, OT_OP_RELU, conv_bn(g, "b2.c1", b1, 4, 6, 1, 3, 2, 1, 2, &rng), "b2.relu1");
    int c2 = conv_bn(g, "b2.c2", c1, 6, 6, 1, 3, 1, 1, 2, &rng);
    int ds = conv_bn(g, "b2.down", b1, 4, 6, 1, 1, 2, 0, 2, &rng);
    int b2 = unary(g, OT_OP_RELU, add2(g, c2, ds, "b2.add"), "b2.relu2");
    int64_t gd[4] = {2, 6, 1, 1}, fd[2] = {2, 6}, wd[2] = {5, 6}, bd[1] = {5}, yd[2] = {2, 5};
    int gap = gc_val(g, "gap", OT_F32, 4, gd);
    gc_op(g, OT_OP_GLOBAL_AVERAGE_POOL, &b2, 1, &gap, 1);
    int flat = gc_val(g, "flat", OT_F32, 2, fd);
    int fl = gc_op(g, OT_OP_FLATTEN, &gap, 1, &flat, 1);
    ot_node_set_attr_int(&g->nodes[fl], "axis", 1);
    int gin[3] = {flat, gc_param(g, "fc.w", 2, wd, &rng, -1, 1, false), gc_param(g, "fc.b", 1, bd, &rng, -1, 1, false)};
    int y = gc_val(g, "Y", OT_F32, 2, yd);
    int gn = gc_op(g, OT_OP_GEMM, gin, 3, &y, 1);
    ot_node_set_attr_int(&g->nodes[gn], "transB", 1);
    gc_opts o = {.step = 1e-3, .rtol = 1e-2, .atol = 2e-3};
    assert_int_equal(gc_check(g, &y, 1, &o), 0);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_global_average_pool),
        cmocka_unit_test(test_cnn_composition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
