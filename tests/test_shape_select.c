/* test_shape_select.c — shape rules of ops batch 4 (importer/shape_rules_ops4.c) and
 * Size's folding: Einsum keeps a symbolic batch dim through its labels and "...",
 * broadcasts a size-1 ellipsis dim, refuses disagreeing letters and an equation that
 * does not fit the operands; TopK with a constant K, an unknown K and a K past the
 * axis; OneHot's inserted depth at a middle axis; Size folded to a constant when its
 * input's shape is static, kept as a node on a symbolic one; LSTM's and GRU's output
 * shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "importer/importer.h"
#include "kernels/kernel.h"

#define IDS(...) (int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))

static ot_graph *graph(void) {
    ot_graph *g = ot_graph_new("index");
    assert_non_null(g);
    g->fold_eval = ot_cpu_fold_eval;
    return g;
}

static int input(ot_graph *g, const char *name, ot_dtype dt, int rank, const int64_t *dims, const char *sym0) {
    ot_shape s = ot_shape_make(rank, dims);
    if (sym0) s.sym[0] = ot_graph_add_sym(g, sym0);
    return ot_graph_add_value(g, name, dt, &s, OT_VK_INPUT);
}

static int act(ot_graph *g, const char *name) {
    return ot_graph_add_value(g, name, OT_UNDEFINED, NULL, OT_VK_ACTIVATION);
}

static int const_of(ot_graph *g, const char *name, ot_dtype dt, int rank, const int64_t *dims, const void *data) {
    ot_shape s = ot_shape_make(rank, dims);
    int v = ot_graph_add_value(g, name, dt, &s, OT_VK_CONSTANT);
    assert_int_equal(ot_value_set_data(&g->values[v], data, (size_t)ot_shape_numel(&s) * ot_dtype_size(dt)), 0);
    return v;
}

static int ints(ot_graph *g, const char *name, int n, const int64_t *v) {
    int64_t d = n;
    return const_of(g, name, OT_I64, 1, &d, v);
}

static ot_node *node(ot_graph *g, ot_op op, const char *name, const int *in, int nin, const int *out, int nout) {
    int id = ot_graph_add_node(g, op, name, in, nin, out, nout, OT_PHASE_FORWARD);
    assert_true(id >= 0);
    return &g->nodes[id];
}

static void expect_shape(const ot_graph *g, int v, const char *want) {
    char buf[160];
    ot_shape_str(g, &g->values[v].shape, buf, sizeof buf);
    if (strcmp(buf, want)) fail_msg("value '%s': shape %s, expected %s", g->values[v].name, buf, want);
}

static void infer_ok(ot_graph *g) {
    ot_error err = {0};
    if (ot_shape_infer(g, &err)) fail_msg("shape inference failed: %s", err.msg);
}

static void infer_fails(ot_graph *g, ot_status want, const char *words) {
    ot_error err = {0};
    ot_status st = ot_shape_infer(g, &err);
    if (st != want || !strstr(err.msg, words))
        fail_msg("status %d (want %d): %s (want '%s')", st, want, err.msg, words);
}

static ot_node *einsum(ot_graph *g, const char *eq, const int *in, int nin, int y) {
    ot_node *n = node(g, OT_OP_EINSUM, "ein", in, nin, &y, 1);
    ot_node_set_attr_string(n, "equation", eq);
    return n;
}

static void test_einsum_shapes(void **state) {
    (void)state;
    ot_graph *g = graph();
    int q = input(g, "q", OT_F32, 4, (int64_t[]){-1, 2, 5, 8}, "batch");
    int k = input(g, "k", OT_F32, 4, (int64_t[]){-1, 2, 7, 8}, "batch");
    int w = input(g, "w", OT_F32, 2, (int64_t[]){8, 3}, NULL);
    int one = input(g, "one", OT_F32, 3, (int64_t[]){1, 5, 8}, NULL);
    int y1 = act(g, "y1"), y2 = act(g, "y2"), y3 = act(g, "y3"), y4 = act(g, "y4");
    einsum(g, "bhqd,bhkd->bhqk", IDS(q, k), y1);
    einsum(g, "...d,de->...e", IDS(q, w), y2);
    einsum(g, "...qd,hqd->...hq", IDS(one, one), y3); /* [1] broadcast: ... is [1] */
    einsum(g, "bhqd", IDS(q), y4);                    /* implicit: the letters, sorted */
    infer_ok(g);
    expect_shape(g, y1, "[batch,2,5,7]");
    expect_shape(g, y2, "[batch,2,5,3]");
    expect_shape(g, y3, "[1,1,5]");
    expect_shape(g, y4, "[batch,8,2,5]");
    ot_graph_free(g);
    g = graph();
    w = input(g, "w", OT_F32, 2, (int64_t[]){8, 3}, NULL);
    int y = act(g, "y");
    einsum(g, "ij,ij->i", IDS(w, input(g, "v", OT_F32, 2, (int64_t[]){8, 4}, NULL)), y);
    infer_fails(g, OT_E_SHAPE, "label 'j'");
    ot_graph_free(g);
    g = graph();
    w = input(g, "w", OT_F32, 2, (int64_t[]){8, 3}, NULL);
    y = act(g, "y");
    einsum(g, "ijk->i", IDS(w), y);
    infer_fails(g, OT_E_MODEL, "names 3 dims but its operand has 2");
    ot_graph_free(g);
}

static void test_top_k_one_hot_size(void **state) {
    (void)state;
    ot_graph *g = graph();
    int x = input(g, "x", OT_F32, 3, (int64_t[]){-1, 6, 4}, "batch");
    int kk = input(g, "kk", OT_I64, 1, (int64_t[]){1}, NULL);
    int v1 = act(g, "v1"), i1 = act(g, "i1"), v2 = act(g, "v2"), i2 = act(g, "i2");
    ot_node *t = node(g, OT_OP_TOP_K, "t1", IDS(x, ints(g, "k3", 1, (int64_t[]){3})), IDS(v1, i1));
    ot_node_set_attr_int(t, "axis", 1);
    node(g, OT_OP_TOP_K, "t2", IDS(x, kk), IDS(v2, i2)); /* K only known at run time */
    int ind = input(g, "ind", OT_I64, 2, (int64_t[]){-1, 3}, "batch");
    int oh = act(g, "oh"), sz = act(g, "sz"), sz2 = act(g, "sz2");
    int depth = const_of(g, "depth", OT_F32, 0, NULL, (float[]){10.0f});
    int vals = const_of(g, "vals", OT_F32, 1, (int64_t[]){2}, (float[]){0, 1});
    ot_node *o = node(g, OT_OP_ONE_HOT, "oh", IDS(ind, depth, vals), IDS(oh));
    ot_node_set_attr_int(o, "axis", 1);
    node(g, OT_OP_SIZE, "size_w", IDS(input(g, "w", OT_F32, 2, (int64_t[]){8, 3}, NULL)), IDS(sz));
    node(g, OT_OP_SIZE, "size_x", IDS(x), IDS(sz2));
    infer_ok(g);
    expect_shape(g, v1, "[batch,3,4]");
    assert_int_equal(g->values[i1].dtype, OT_I64);
    expect_shape(g, v2, "[batch,6,?]");
    expect_shape(g, oh, "[batch,10,3]");
    assert_int_equal(g->values[oh].dtype, OT_F32);
    expect_shape(g, sz, "[]");
    /* Size of a static input folds to the constant 24; of a symbolic one it stays */
    assert_int_equal(g->values[sz].kind, OT_VK_CONSTANT);
    assert_int_equal(*(const int64_t *)g->values[sz].data, 24);
    assert_int_not_equal(g->values[sz2].kind, OT_VK_CONSTANT);
    ot_graph_free(g);
    g = graph();
    x = input(g, "x", OT_F32, 2, (int64_t[]){2, 6}, NULL);
    v1 = act(g, "v1"), i1 = act(g, "i1");
    node(g, OT_OP_TOP_K, "t1", IDS(x, ints(g, "k9", 1, (int64_t[]){9})), IDS(v1, i1));
    infer_fails(g, OT_E_SHAPE, "K = 9 outside [0, 6]");
    ot_graph_free(g);
}

/* LSTM, layout 1 and bidirectional: Y [batch, T, 2, H], Y_h and Y_c [batch, 2, H];
 * a hidden_size R does not hold is refused. */
static void test_rnn_shapes(void **state) {
    (void)state;
    ot_graph *g = graph();
    int x = input(g, "x", OT_F32, 3, (int64_t[]){-1, 7, 3}, "batch");
    int w = input(g, "w", OT_F32, 3, (int64_t[]){2, 20, 3}, NULL);
    int r = input(g, "r", OT_F32, 3, (int64_t[]){2, 20, 5}, NULL);
    int y = act(g, "y"), yh = act(g, "yh"), yc = act(g, "yc");
    ot_node *n = node(g, OT_OP_LSTM, "lstm", IDS(x, w, r), IDS(y, yh, yc));
    ot_node_set_attr_int(n, "layout", 1);
    ot_node_set_attr_string(n, "direction", "bidirectional");
    infer_ok(g);
    expect_shape(g, y, "[batch,7,2,5]");
    expect_shape(g, yh, "[batch,2,5]");
    expect_shape(g, yc, "[batch,2,5]");
    ot_graph_free(g);
    g = graph();
    x = input(g, "x", OT_F32, 3, (int64_t[]){7, 2, 3}, NULL);
    w = input(g, "w", OT_F32, 3, (int64_t[]){1, 15, 3}, NULL);
    r = input(g, "r", OT_F32, 3, (int64_t[]){1, 15, 5}, NULL);
    y = act(g, "y");
    n = node(g, OT_OP_GRU, "gru", IDS(x, w, r), IDS(y));
    ot_node_set_attr_int(n, "hidden_size", 4);
    infer_fails(g, OT_E_SHAPE, "hidden_size 4");
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_einsum_shapes),
        cmocka_unit_test(test_top_k_one_hot_size),
        cmocka_unit_test(test_rnn_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
