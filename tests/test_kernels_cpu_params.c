/* test_kernels_cpu_params.c — typed op params (ir/op_params.h) as the kernels read
 * them: resolution once (a resolved node keeps its params when its attributes change
 * later; a node never resolved is parsed on the spot), integer attributes out of int
 * range refused with OT_E_MODEL naming the node, the defaults and odd lists the
 * kernels used to apply themselves, and whole-graph resolution. */
#include "test_kernels_cpu_util.h"

/* Gemm transB = 2^32 is no silent cast to 0: the node's resolution and its kernel
 * both refuse it, naming the node. */
static void test_int_attr_out_of_range(void **state) {
    (void)state;
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, y[4];
    ot_node n = tk_node(OT_OP_GEMM, 2, 1);
    n.name = (char *)"gemm_big";
    assert_int_equal(ot_node_set_attr_int(&n, "transB", (int64_t)1 << 32), 0);
    ot_op_params p;
    ot_error e = {0};
    assert_int_equal(ot_node_resolve_params(&n, &p, &e), OT_E_MODEL);
    assert_non_null(strstr(e.msg, "gemm_big"));
    assert_non_null(strstr(e.msg, "transB"));
    ot_tensor in[2] = {tk_t(OT_F32, a, 2, 2, 2), tk_t(OT_F32, b, 2, 2, 2)}, out[1] = {tk_t(OT_F32, y, 2, 2, 2)};
    memset(&e, 0, sizeof e);
    assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, &e), OT_E_MODEL);
    assert_non_null(strstr(e.msg, "gemm_big"));
    /* a negative one out of range too; in range is fine */
    assert_int_equal(ot_node_set_attr_int(&n, "transB", INT64_MIN), 0);
    assert_int_equal(ot_node_resolve_params(&n, &p, &e), OT_E_MODEL);
    assert_int_equal(ot_node_set_attr_int(&n, "transB", 1), 0);
    assert_int_equal(ot_node_resolve_params(&n, &p, &e), OT_OK);
    assert_int_equal(p.kind, OT_PARAMS_GEMM);
    assert_true(p.u.gemm.trans_b);
    assert_false(p.u.gemm.trans_a);
    assert_true(p.u.gemm.alpha == 1.0f && p.u.gemm.beta == 1.0f);
    /* Conv's group narrowed the same way */
    ot_node c = tk_node(OT_OP_CONV, 2, 1);
    c.name = (char *)"conv_big";
    assert_int_equal(ot_node_set_attr_int(&c, "group", (int64_t)1 << 40), 0);
    memset(&e, 0, sizeof e);
    assert_int_equal(ot_node_resolve_params(&c, &p, &e), OT_E_MODEL);
    assert_non_null(strstr(e.msg, "conv_big"));
    tk_node_free(&n);
    tk_node_free(&c);
}

/* A resolved node runs on its params, not on its attributes (they are not parsed
 * again per run); changing an attribute drops the resolved params, so the kernel never
 * sees a stale value. */
static void test_resolved_once(void **state) {
    (void)state;
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, y[4], want_t[4], want[4];
    ot_node n = tk_node(OT_OP_GEMM, 2, 1);
    ot_tensor in[2] = {tk_t(OT_F32, a, 2, 2, 2), tk_t(OT_F32, b, 2, 2, 2)}, out[1] = {tk_t(OT_F32, y, 2, 2, 2)};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            want[i * 2 + j] = a[i * 2] * b[j] + a[i * 2 + 1] * b[2 + j];
            want_t[i * 2 + j] = a[i * 2] * b[j * 2] + a[i * 2 + 1] * b[j * 2 + 1];
        }
    ot_error e = {0};
    assert_int_equal(ot_node_resolve_params(&n, &n.params, &e), OT_OK);
    /* the kernel reads the resolved struct: an edit there shows, no attribute says so */
    n.params.u.gemm.trans_b = true;
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_memory_equal(y, want_t, sizeof y);
    /* an attribute change (transB = 0 over the edited struct) drops the params */
    assert_int_equal(ot_node_set_attr_int(&n, "transB", 0), 0);
    assert_int_equal(n.params.kind, OT_PARAMS_UNRESOLVED);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_memory_equal(y, want, sizeof y);
    assert_int_equal(ot_node_set_attr_int(&n, "transB", 1), 0);
    assert_int_equal(ot_node_resolve_params(&n, &n.params, &e), OT_OK);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_memory_equal(y, want_t, sizeof y);
    /* params of another op's family are not used: the node is parsed afresh */
    n.params.kind = OT_PARAMS_WINDOW;
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_memory_equal(y, want_t, sizeof y);
    tk_node_free(&n);
}

/* The window's lists as the geometry used to read them: absent is -1, a list of the
 * wrong length keeps its count (the geometry then ignores it), auto_pad strings. */
static void test_window_params(void **state) {
    (void)state;
    ot_node n = tk_node(OT_OP_MAX_POOL, 1, 1);
    int64_t k[2] = {3, 3}, s[3] = {2, 2, 2};
    assert_int_equal(ot_node_set_attr_ints(&n, "kernel_shape", k, 2), 0);
    assert_int_equal(ot_node_set_attr_ints(&n, "strides", s, 3), 0);
    assert_int_equal(ot_node_set_attr_string(&n, "auto_pad", "SAME_LOWER"), 0);
    assert_int_equal(ot_node_set_attr_int(&n, "storage_order", 1), 0);
    ot_op_params p;
    ot_error e = {0};
    assert_int_equal(ot_node_resolve_params(&n, &p, &e), OT_OK);
    const ot_window_params *w = &p.u.window;
    assert_int_equal(w->n_kernel, 2);
    assert_int_equal(w->kernel[1], 3);
    assert_int_equal(w->n_strides, 3);
    assert_int_equal(w->n_dilations, -1);
    assert_int_equal(w->n_pads, -1);
    assert_int_equal(w->auto_pad, OT_AUTO_PAD_SAME_LOWER);
    assert_int_equal(w->group, 1);
    assert_true(w->storage_order);
    assert_false(w->count_include_pad);
    assert_int_equal(ot_node_set_attr_string(&n, "auto_pad", "same_upper"), 0); /* not a value ONNX has */
    assert_int_equal(ot_node_resolve_params(&n, &p, &e), OT_OK);
    assert_int_equal(p.u.window.auto_pad, OT_AUTO_PAD_NOTSET);
    /* the 3-long strides do not fit a 2-D pool: ignored, stride 1 */
    float x[16], y[16];
    for (int i = 0; i < 16; i++) x[i] = (float)i;
    ot_tensor in[1] = {tk_t(OT_F32, x, 4, 1, 1, 4, 4)}, out[1] = {tk_t(OT_F32, y, 4, 1, 1, 2, 2)};
    ot_node_remove_attr(&n, "auto_pad");
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    assert_true(y[0] == 10.0f && y[1] == 11.0f && y[2] == 14.0f && y[3] == 15.0f);
    tk_node_free(&n);
}

/* Each family's defaults and parsed strings as the kernels used to read them. */
static void test_family_defaults(void **state) {
    (void)state;
    ot_op_params p;
    ot_error e = {0};
    ot_node g = tk_node(OT_OP_GELU, 1, 1);
    assert_int_equal(ot_node_resolve_params(&g, &p, &e), OT_OK);
    assert_int_equal(p.kind, OT_PARAMS_ACT);
    assert_int_equal(p.u.act.approximate, OT_GELU_NONE);
    assert_int_equal(ot_node_set_attr_string(&g, "approximate", "tanh"), 0);
    assert_int_equal(ot_node_resolve_params(&g, &p, &e), OT_OK);
    assert_int_equal(p.u.act.approximate, OT_GELU_TANH);
    assert_int_equal(ot_node_set_attr_string(&g, "approximate", "fast"), 0);
    assert_int_equal(ot_node_resolve_params(&g, &p, &e), OT_OK);
    assert_int_equal(p.u.act.approximate, OT_GELU_OTHER);
    /* the kernel still refuses it, quoting the value */
    float x[2] = {1, -1}, y[2];
    ot_tensor in[1] = {tk_t(OT_F32, x, 1, 2)}, out[1] = {tk_t(OT_F32, y, 1, 2)};
    assert_int_equal(tk_run_ex(&g, in, out, 1, 0, 0, 0, &e), OT_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "'fast'"));
    ot_node sm = tk_node(OT_OP_SOFTMAX, 1, 1), ln = tk_node(OT_OP_LAYER_NORM, 2, 1);
    assert_int_equal(ot_node_resolve_params(&sm, &p, &e), OT_OK);
    assert_int_equal(p.u.norm.axis, -1);
    assert_int_equal(ot_node_set_attr_int(&sm, "legacy_2d", 1), 0);
    assert_int_equal(ot_node_resolve_params(&sm, &p, &e), OT_OK);
    assert_int_equal(p.u.norm.axis, 1); /* opset < 13: axis 1 by default */
    assert_true(p.u.norm.legacy_2d);
    assert_int_equal(ot_node_resolve_params(&ln, &p, &e), OT_OK);
    assert_true(p.u.norm.epsilon == 1e-5f && p.u.norm.axis == -1);
    ot_node nll = tk_node(OT_OP_NLL_LOSS, 2, 1);
    assert_int_equal(ot_node_resolve_params(&nll, &p, &e), OT_OK);
    assert_int_equal(p.u.loss.reduction, OT_REDUCTION_MEAN);
    assert_false(p.u.loss.has_ignore_index);
    assert_int_equal(ot_node_set_attr_int(&nll, "ignore_index", (int64_t)1 << 40), 0); /* int64 labels: kept whole */
    assert_int_equal(ot_node_resolve_params(&nll, &p, &e), OT_OK);
    assert_true(p.u.loss.has_ignore_index && p.u.loss.ignore_index == (int64_t)1 << 40);
    ot_node adam = tk_node(OT_OP_ADAM_STEP, 4, 0);
    assert_int_equal(ot_node_resolve_params(&adam, &p, &e), OT_OK);
    assert_true(p.u.optim.beta1 == 0.9f && p.u.optim.beta2 == 0.999f && p.u.optim.epsilon == 1e-8f);
    /* Transpose's perm entries must fit an int: 2^32 used to wrap to 0 */
    ot_node t = tk_node(OT_OP_TRANSPOSE, 1, 1);
    t.name = (char *)"tr";
    int64_t perm[2] = {(int64_t)1 << 32, 0};
    assert_int_equal(ot_node_set_attr_ints(&t, "perm", perm, 2), 0);
    assert_int_equal(ot_node_resolve_params(&t, &p, &e), OT_E_MODEL);
    assert_non_null(strstr(e.msg, "'tr'"));
    tk_node_free(&g);
    tk_node_free(&sm);
    tk_node_free(&nll);
    tk_node_free(&t);
}

/* ot_graph_resolve_params fills every live node and stops at the first bad one. */
static void test_graph_resolve(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("params");
    assert_non_null(g);
    ot_shape s2 = ot_shape_unknown();
    int x = ot_graph_add_value(g, "x", OT_F32, &s2, OT_VK_INPUT);
    int y = ot_graph_add_value(g, "y", OT_F32, &s2, OT_VK_ACTIVATION);
    int z = ot_graph_add_value(g, "z", OT_F32, &s2, OT_VK_ACTIVATION);
    int ins[2] = {x, x};
    int a = ot_graph_add_node(g, OT_OP_GEMM, "g0", ins, 2, &y, 1, OT_PHASE_FORWARD);
    int b = ot_graph_add_node(g, OT_OP_RELU, "r0", &y, 1, &z, 1, OT_PHASE_FORWARD);
    assert_true(a >= 0 && b >= 0);
    ot_error e = {0};
    assert_int_equal(ot_graph_resolve_params(g, &e), OT_OK);
    assert_int_equal(g->nodes[a].params.kind, OT_PARAMS_GEMM);
    assert_int_equal(g->nodes[b].params.kind, OT_PARAMS_NONE);
    assert_int_equal(ot_node_set_attr_int(&g->nodes[a], "transA", (int64_t)3 << 31), 0);
    assert_int_equal(ot_graph_resolve_params(g, &e), OT_E_MODEL);
    assert_non_null(strstr(e.msg, "g0"));
    g->nodes[a].removed = true; /* removed nodes are skipped */
    assert_int_equal(ot_graph_resolve_params(g, &e), OT_OK);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int_attr_out_of_range),
        cmocka_unit_test(test_resolved_once),
        cmocka_unit_test(test_window_params),
        cmocka_unit_test(test_family_defaults),
        cmocka_unit_test(test_graph_resolve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
