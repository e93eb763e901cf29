/* test_ir.c — unit tests of the IR: op table, graph construction, attributes,
 * verify (cycles, double producers, dangling inputs) and topological order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static void test_op_table(void **state) {
    (void)state;
    assert_int_equal(ot_op_from_name("Gemm", false), OT_OP_GEMM);
    assert_int_equal(ot_op_from_name("ReluGrad", true), OT_OP_RELU_GRAD);
    assert_int_equal(ot_op_from_name("ReluGrad", false), OT_OP_UNKNOWN);
    assert_int_equal(ot_op_from_name("Loop", false), OT_OP_UNKNOWN);
    assert_string_equal(ot_op_name(OT_OP_SOFTMAX), "Softmax");
    assert_true(ot_op_has(OT_OP_MATMUL, OT_T_HEAVY));
    assert_true(ot_op_has(OT_OP_DROPOUT, OT_T_RANDOM));
    for (int i = 1; i < OT_OP_COUNT; i++) assert_non_null(ot_op_get((ot_op)i)->name);
}

/* x -> Relu -> y -> Neg -> z */
static ot_graph *small_chain(void) {
    ot_graph *g = ot_graph_new("t");
    int64_t d[2] = {2, 3};
    ot_shape s = ot_shape_make(2, d);
    int x = ot_graph_add_value(g, "x", OT_F32, &s, OT_VK_INPUT);
    int y = ot_graph_add_value(g, "y", OT_F32, &s, OT_VK_ACTIVATION);
    int z = ot_graph_add_value(g, "z", OT_F32, &s, OT_VK_ACTIVATION);
    ot_graph_add_node(g, OT_OP_RELU, "r", &x, 1, &y, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_NEG, "n", &y, 1, &z, 1, OT_PHASE_FORWARD);
    g->outputs = calloc(1, sizeof(int));
    g->outputs[0] = z;
    g->n_outputs = 1;
    g->values[z].is_graph_output = true;
    return g;
}

static void test_build_and_verify(void **state) {
    (void)state;
    ot_graph *g = small_chain();
    ot_error err = {0};
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    assert_int_equal(g->values[1].producer, 0);
    assert_int_equal(g->values[1].n_consumers, 1);
    int order[2];
    assert_int_equal(ot_graph_topo_order(g, order, NULL), 2);
    assert_int_equal(order[0], 0);
    ot_graph_free(g);
}

/* ot_graph_shrink gives back the capacity past the entries and leaves a graph that
 * reads, verifies and grows as before. */
static void test_shrink(void **state) {
    (void)state;
    ot_graph *g = small_chain(); /* 3 values, 2 nodes: capacities of 16 */
    assert_true(g->cap_nodes > g->n_nodes && g->cap_values > g->n_values);
    ot_graph_shrink(g);
    assert_int_equal(g->cap_nodes, 2);
    assert_int_equal(g->cap_values, 3);
    ot_error err = {0};
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    assert_int_equal(g->values[1].producer, 0);
    assert_string_equal(g->nodes[1].name, "n");
    int y = 2, w = ot_graph_add_value(g, "w", OT_F32, &g->values[2].shape, OT_VK_ACTIVATION);
    assert_int_equal(w, 3);
    assert_int_equal(ot_graph_add_node(g, OT_OP_RELU, "r2", &y, 1, &w, 1, OT_PHASE_FORWARD), 2);
    assert_true(g->cap_nodes >= 3 && g->cap_values >= 4);
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    assert_int_equal(g->values[2].n_consumers, 1);
    ot_graph_shrink(g);
    ot_graph_shrink(g); /* nothing spare: a no-op */
    assert_int_equal(g->cap_nodes, 3);
    ot_graph_free(g);
}

static void test_cycle_detected(void **state) {
    (void)state;
    ot_graph *g = small_chain();
    ot_graph_set_input(g, 0, 0, 2); /* Relu now reads z: cycle */
    ot_error err = {0};
    assert_int_equal(ot_graph_verify(g, &err), OT_E_MODEL);
    assert_non_null(strstr(err.msg, "cycle"));
    ot_graph_free(g);
}

static void test_double_producer(void **state) {
    (void)state;
    ot_graph *g = small_chain();
    int x = 0, y = 1;
    ot_graph_add_node(g, OT_OP_EXP, "e", &x, 1, &y, 1, OT_PHASE_FORWARD);
    ot_error err = {0};
    assert_int_equal(ot_graph_verify(g, &err), OT_E_MODEL);
    assert_non_null(strstr(err.msg, "two nodes"));
    ot_graph_free(g);
}

static void test_dangling_input(void **state) {
    (void)state;
    ot_graph *g = small_chain();
    int w = ot_graph_add_value(g, "w", OT_F32, NULL, OT_VK_ACTIVATION);
    int o = ot_graph_add_value(g, "o", OT_F32, NULL, OT_VK_ACTIVATION);
    int ins[2] = {2, w};
    ot_graph_add_node(g, OT_OP_ADD, "a", ins, 2, &o, 1, OT_PHASE_FORWARD);
    ot_error err = {0};
    assert_int_equal(ot_graph_verify(g, &err), OT_E_MODEL);
    assert_non_null(strstr(err.msg, "'w'"));
    ot_graph_free(g);
}

static void test_attrs(void **state) {
    (void)state;
    ot_graph *g = small_chain();
    ot_node *n = &g->nodes[0];
    int64_t v[3] = {1, 2, 3};
    assert_int_equal(ot_node_set_attr_ints(n, "perm", v, 3), 0);
    assert_int_equal(ot_node_set_attr_int(n, "axis", -1), 0);
    assert_int_equal(ot_node_set_attr_int(n, "axis", 2), 0); /* replaces */
    assert_int_equal(ot_node_attr_int(n, "axis", 0), 2);
    assert_int_equal(n->n_attrs, 2);
    int c = 0;
    const int64_t *p = ot_node_attr_ints(n, "perm", &c);
    assert_int_equal(c, 3);
    assert_int_equal(p[2], 3);
    ot_node_remove_attr(n, "perm");
    assert_null(ot_node_attr_ints(n, "perm", NULL));
    assert_float_equal(ot_node_attr_float(n, "alpha", 0.5f), 0.5f, 0);
    ot_graph_free(g);
}

static void test_shape_str(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("s");
    int b = ot_graph_add_sym(g, "batch");
    int64_t d[2] = {-1, 10};
    ot_shape s = ot_shape_make(2, d);
    s.sym[0] = b;
    char buf[64];
    assert_string_equal(ot_shape_str(g, &s, buf, sizeof buf), "[batch,10]");
    assert_false(ot_shape_is_static(&s));
    assert_int_equal(ot_graph_add_sym(g, "batch"), b);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_table),       cmocka_unit_test(test_build_and_verify),
        cmocka_unit_test(test_cycle_detected), cmocka_unit_test(test_double_producer),
        cmocka_unit_test(test_dangling_input), cmocka_unit_test(test_attrs),
        cmocka_unit_test(test_shape_str),      cmocka_unit_test(test_shrink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
