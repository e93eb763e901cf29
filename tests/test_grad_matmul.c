/* test_grad_matmul.c — finite-difference checks of the Gemm rule (every transA /
 * transB combination, alpha, beta, broadcast C) and the MatMul rule (2-D, batched,
 * broadcast batch dims, 1-D operands). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "grad_check.h"

static void check_gemm(int ta, int tb, float alpha, float beta, int crank) {
    ot_graph *g = gc_graph();
    uint32_t rng = 17 + (uint32_t)(ta * 2 + tb);
    int64_t M = 3, K = 4, N = 5;
    int64_t ad[2] = {ta ? K : M, ta ? M : K}, bd[2] = {tb ? N : K, tb ? K : N};
    int64_t cd2[2] = {M, N}, cd1[1] = {N}, yd[2] = {M, N};
    int a = gc_param(g, "A", 2, ad, &rng, -1, 1, false);
    int b = gc_param(g, "B", 2, bd, &rng, -1, 1, false);
    int in[3] = {a, b, -1};
    int nin = 2;
    if (crank) {
        in[2] = gc_param(g, "C", crank, crank == 2 ? cd2 : cd1, &rng, -1, 1, false);
        nin = 3;
    }
    int y = gc_val(g, "Y", OT_F32, 2, yd);
    int n = gc_op(g, OT_OP_GEMM, in, nin, &y, 1);
    ot_node_set_attr_int(&g->nodes[n], "transA", ta);
    ot_node_set_attr_int(&g->nodes[n], "transB", tb);
    ot_node_set_attr_float(&g->nodes[n], "alpha", alpha);
    ot_node_set_attr_float(&g->nodes[n], "beta", beta);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_gemm(void **state) {
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) check_gemm(ta, tb, 1.0f, 1.0f, 1);
    check_gemm(0, 1, 0.5f, 2.0f, 2);
    check_gemm(1, 0, -1.5f, 0.25f, 1);
    check_gemm(1, 1, 2.0f, 1.0f, 0);
}

static void check_matmul(int ar, const int64_t *ad, int br, const int64_t *bd, int yr, const int64_t *yd) {
    ot_graph *g = gc_graph();
    uint32_t rng = 23 + (uint32_t)(ar * 8 + br);
    int a = gc_param(g, "A", ar, ad, &rng, -1, 1, false);
    int b = gc_param(g, "B", br, bd, &rng, -1, 1, false);
    int y = gc_val(g, "Y", OT_F32, yr, yd);
    int in[2] = {a, b};
    gc_op(g, OT_OP_MATMUL, in, 2, &y, 1);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_matmul(void **state) {
    (void)state;
    { int64_t a[2] = {3, 4}, b[2] = {4, 5}, y[2] = {3, 5}; check_matmul(2, a, 2, b, 2, y); }
    { int64_t a[3] = {2, 3, 4}, b[3] = {2, 4, 5}, y[3] = {2, 3, 5}; check_matmul(3, a, 3, b, 3, y); }
    { int64_t a[3] = {2, 3, 4}, b[2] = {4, 5}, y[3] = {2, 3, 5}; check_matmul(3, a, 2, b, 3, y); }
    { int64_t a[4] = {2, 2, 3, 4}, b[2] = {4, 5}, y[4] = {2, 2, 3, 5}; check_matmul(4, a, 2, b, 4, y); } /* one flat GEMM for dB */
    { int64_t a[2] = {3, 4}, b[3] = {2, 4, 5}, y[3] = {2, 3, 5}; check_matmul(2, a, 3, b, 3, y); }
    { int64_t a[4] = {2, 1, 3, 4}, b[3] = {3, 4, 2}, y[4] = {2, 3, 3, 2}; check_matmul(4, a, 3, b, 4, y); }
}

/* nn.Linear as PyTorch exports it: Y = X Transpose(W), X [2, 3, 4] (or [6, 4]), W [5, 4].
 * The rule reads W for dX (no transpose back) and forms dW in W's own layout with
 * one GEMM, dW = dY^T X as PyTorch computes it: the backward pass has no Transpose
 * of W's shape and W's gradient comes straight from a Gemm of W's shape. `perm` given or left to
 * its default (reverse) must not matter. tied: W is read a second time (Y2 = Z W,
 * as a tied embedding is), so its gradient is the Sum of both contributions. */
static void check_linear(bool with_perm, int xrank, bool tied) {
    ot_graph *g = gc_graph();
    uint32_t rng = 91 + (uint32_t)with_perm + 2u * (uint32_t)xrank + 8u * tied;
    int64_t xd3[3] = {2, 3, 4}, xd2[2] = {6, 4}, wd[2] = {5, 4}, td[2] = {4, 5}, yd3[3] = {2, 3, 5}, yd2[2] = {6, 5};
    int64_t zd[2] = {3, 5}, y2d[2] = {3, 4};
    int x = gc_param(g, "X", xrank, xrank == 3 ? xd3 : xd2, &rng, -1, 1, false);
    int w = gc_param(g, "W", 2, wd, &rng, -1, 1, false);
    int wt = gc_val(g, "Wt", OT_F32, 2, td);
    int t = gc_op(g, OT_OP_TRANSPOSE, &w, 1, &wt, 1);
    if (with_perm) {
        int64_t perm[2] = {1, 0};
        ot_node_set_attr_ints(&g->nodes[t], "perm", perm, 2);
    }
    int ys[2] = {gc_val(g, "Y", OT_F32, xrank, xrank == 3 ? yd3 : yd2), -1};
    int in[2] = {x, wt};
    gc_op(g, OT_OP_MATMUL, in, 2, &ys[0], 1);
    if (tied) {
        int z = gc_param(g, "Z", 2, zd, &rng, -1, 1, false);
        ys[1] = gc_val(g, "Y2", OT_F32, 2, y2d);
        int in2[2] = {z, w};
        gc_op(g, OT_OP_MATMUL, in2, 2, &ys[1], 1);
    }
    gc_opts o = {0};
    assert_int_equal(gc_check(g, ys, tied ? 2 : 1, &o), 0);
    int n_gemm_w = 0;
    for (int id = 0; id < g->n_nodes; id++) {
        const ot_node *nd = &g->nodes[id];
        if (nd->phase != OT_PHASE_BACKWARD) continue;
        bool w_shaped = ot_shape_equal(&g->values[nd->outputs[0]].shape, &g->values[w].shape);
        assert_false(nd->op == OT_OP_TRANSPOSE && w_shaped); /* (Y2's rule may transpose Z) */
        n_gemm_w += nd->op == OT_OP_GEMM && w_shaped;
    }
    assert_int_equal(n_gemm_w, 1);
    ot_graph_free(g);
}

static void test_linear(void **state) {
    (void)state;
    check_linear(true, 3, false);
    check_linear(false, 3, false);
    check_linear(true, 2, false);
    check_linear(true, 3, true);
}

static void test_matmul_1d(void **state) {
    (void)state;
    { int64_t a[1] = {4}, b[2] = {4, 5}, y[1] = {5}; check_matmul(1, a, 2, b, 1, y); }
    { int64_t a[1] = {4}, b[3] = {2, 4, 5}, y[2] = {2, 5}; check_matmul(1, a, 3, b, 2, y); }
    { int64_t a[3] = {2, 3, 4}, b[1] = {4}, y[2] = {2, 3}; check_matmul(3, a, 1, b, 2, y); }
    { int64_t a[1] = {4}, b[1] = {4}; check_matmul(1, a, 1, b, 0, NULL); }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_1d),
        cmocka_unit_test(test_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
