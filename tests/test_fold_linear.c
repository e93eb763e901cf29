/* test_fold_linear.c — autodiff/fold_linear.c: MatMul(X, Transpose(W)) becomes
 * Gemm(X rows, W, transB = 1) with Reshapes around it for X of rank > 2, directly for
 * rank 2, in float32 and in the low dtypes of --precision; a Transpose with any other
 * reader, an X with an unknown dim, or an X of another dtype than W, stays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/fold_linear.h"

/* x [xd] -> MatMul(x, Transpose(w [5, 4])) -> y; with extra, Relu(T) reads T too. */
static ot_graph *linear(int rank, const int64_t *xd, bool extra, int *y_out) {
    ot_graph *g = ot_graph_new("t");
    int64_t wd[2] = {5, 4}, td[2] = {4, 5}, yd[4];
    for (int i = 0; i < rank - 1; i++) yd[i] = xd[i];
    yd[rank - 1] = 5;
    ot_shape xs = ot_shape_make(rank, xd), ws = ot_shape_make(2, wd), ts = ot_shape_make(2, td);
    ot_shape ys = ot_shape_make(rank, yd);
    int x = ot_graph_add_value(g, "x", OT_F32, &xs, OT_VK_INPUT);
    int w = ot_graph_add_value(g, "w", OT_F32, &ws, OT_VK_PARAM);
    int t = ot_graph_add_value(g, "wt", OT_F32, &ts, OT_VK_ACTIVATION);
    int y = ot_graph_add_value(g, "y", OT_F32, &ys, OT_VK_ACTIVATION);
    int tn = ot_graph_add_node(g, OT_OP_TRANSPOSE, "tr", &w, 1, &t, 1, OT_PHASE_FORWARD);
    int64_t perm[2] = {1, 0};
    ot_node_set_attr_ints(&g->nodes[tn], "perm", perm, 2);
    int in[2] = {x, t};
    ot_graph_add_node(g, OT_OP_MATMUL, "mm", in, 2, &y, 1, OT_PHASE_FORWARD);
    if (extra) {
        int r = ot_graph_add_value(g, "r", OT_F32, &ts, OT_VK_ACTIVATION);
        ot_graph_add_node(g, OT_OP_RELU, "relu", &t, 1, &r, 1, OT_PHASE_FORWARD);
    }
    *y_out = y;
    return g;
}

static int live(const ot_graph *g, ot_op op) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += !g->nodes[i].removed && g->nodes[i].op == op;
    return n;
}

static void test_fold_rank3(void **state) {
    (void)state;
    int y;
    ot_graph *g = linear(3, (int64_t[]){2, 3, 4}, false, &y);
    assert_int_equal(ot_fold_linear_transposes(g), 1);
    assert_int_equal(live(g, OT_OP_TRANSPOSE), 0);
    assert_int_equal(live(g, OT_OP_MATMUL), 0);
    assert_int_equal(live(g, OT_OP_GEMM), 1);
    assert_int_equal(live(g, OT_OP_RESHAPE), 2);
    /* y keeps its shape and is now the Reshape of the Gemm's [6, 5] rows */
    const ot_node *r = &g->nodes[g->values[y].producer];
    assert_int_equal(r->op, OT_OP_RESHAPE);
    const ot_node *gm = &g->nodes[g->values[r->inputs[0]].producer];
    assert_int_equal(gm->op, OT_OP_GEMM);
    assert_int_equal(ot_node_attr_int(gm, "transB", 0), 1);
    assert_string_equal(g->values[gm->inputs[1]].name, "w");
    assert_int_equal(g->values[gm->inputs[0]].shape.dim[0], 6);
    assert_int_equal(g->values[gm->inputs[0]].shape.dim[1], 4);
    ot_error err = {0};
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    ot_graph_free(g);
}

static void test_fold_rank2(void **state) {
    (void)state;
    int y;
    ot_graph *g = linear(2, (int64_t[]){3, 4}, false, &y);
    assert_int_equal(ot_fold_linear_transposes(g), 1);
    assert_int_equal(live(g, OT_OP_RESHAPE), 0);
    const ot_node *gm = &g->nodes[g->values[y].producer];
    assert_int_equal(gm->op, OT_OP_GEMM);
    assert_int_equal(ot_node_attr_int(gm, "transB", 0), 1);
    ot_error err = {0};
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    ot_graph_free(g);
}

static void test_fold_kept(void **state) {
    (void)state;
    int y;
    ot_graph *g = linear(3, (int64_t[]){2, 3, 4}, true, &y); /* Relu reads the transpose too */
    assert_int_equal(ot_fold_linear_transposes(g), 0);
    assert_int_equal(live(g, OT_OP_TRANSPOSE), 1);
    assert_int_equal(live(g, OT_OP_MATMUL), 1);
    ot_graph_free(g);
    g = linear(3, (int64_t[]){-1, 3, 4}, false, &y); /* a dim not known */
    assert_int_equal(ot_fold_linear_transposes(g), 0);
    assert_int_equal(live(g, OT_OP_MATMUL), 1);
    ot_graph_free(g);
}

/* --precision bf16: the MatMul reads Transpose(W's low copy) with a low X, and the low
 * GEMM reads W transposed the same way (fp16 likewise); an X of another dtype than W
 * (no GEMM of mixed inputs) keeps its Transpose. */
static void test_fold_low(void **state) {
    (void)state;
    const ot_dtype lows[2] = {OT_BF16, OT_F16};
    for (int i = 0; i < 2; i++) {
        int y;
        ot_graph *g = linear(3, (int64_t[]){2, 3, 4}, false, &y);
        for (int v = 0; v < g->n_values; v++)
            if (g->values[v].dtype == OT_F32) g->values[v].dtype = lows[i];
        assert_int_equal(ot_fold_linear_transposes(g), 1);
        assert_int_equal(live(g, OT_OP_TRANSPOSE), 0);
        const ot_node *r = &g->nodes[g->values[y].producer];
        const ot_node *gm = &g->nodes[g->values[r->inputs[0]].producer];
        assert_int_equal(gm->op, OT_OP_GEMM);
        assert_int_equal(ot_node_attr_int(gm, "transB", 0), 1);
        assert_int_equal(g->values[gm->inputs[0]].dtype, lows[i]);
        assert_int_equal(g->values[gm->outputs[0]].dtype, lows[i]);
        ot_error err = {0};
        assert_int_equal(ot_graph_verify(g, &err), OT_OK);
        ot_graph_free(g);
    }
    int y;
    ot_graph *g = linear(3, (int64_t[]){2, 3, 4}, false, &y);
    for (int v = 0; v < g->n_values; v++)
        if (strcmp(g->values[v].name, "x") != 0) g->values[v].dtype = OT_BF16; /* x stays float32 */
    assert_int_equal(ot_fold_linear_transposes(g), 0);
    assert_int_equal(live(g, OT_OP_TRANSPOSE), 1);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_rank3),
        cmocka_unit_test(test_fold_rank2),
        cmocka_unit_test(test_fold_kept),
        cmocka_unit_test(test_fold_low),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
