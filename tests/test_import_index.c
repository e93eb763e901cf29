/* test_import_index.c — importing the layout and indexing ops of issue 13 in their
 * opset forms: Pad before opset 11 (pads, Pad-1's "paddings" and value as attributes)
 * is normalised to the opset-11 inputs (importer/normalize.c) and then computes what
 * the input form computes; pads given both ways is the model's error. ReduceMean axes
 * that only folding makes constant (Reshape of a Constant) become the attribute. Models are
 * built in C (fixtures/onnx_builder.h) under OT_BINARY_DIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fixtures/onnx_builder.h"
#include "ref_eval.h"
#include "importer/importer.h"
#include "kernels/kernel.h"
#include "fixtures/mb_load.h"

#define TMP OT_BINARY_DIR "/test_import_index_tmp"
#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

static ot_status load_mb(mb *b, const char *name, ot_model **m, ot_error *err) {
    return mb_load(b, TMP, name, NULL, m, err);
}

/* x [2,3] -> Pad (reflect on axis 1 by 2 / 1, constant 1.5 rows on axis 0) -> y */
static void check_old_pad(int64_t opset, const char *pads_attr) {
    mb *b = mb_new(opset);
    const int64_t xd[2] = {2, 3};
    mb_input(b, "x", F32, 2, xd, NULL);
    Onnx__NodeProto *p = mb_node(b, "Pad", "pad_r", "x", "r");
    const int64_t pr[4] = {0, 2, 0, 1}, pc[4] = {1, 0, 0, 0};
    mb_attr_ints(b, p, pads_attr, pr, 4);
    mb_attr_string(b, p, "mode", "reflect");
    Onnx__NodeProto *q = mb_node(b, "Pad", "pad_c", "r", "y");
    mb_attr_ints(b, q, pads_attr, pc, 4);
    mb_attr_float(b, q, "value", 1.5f);
    mb_output(b, "y", F32);
    ot_model *m = NULL;
    ot_error err = {0};
    if (load_mb(b, "old_pad.onnx", &m, &err)) fail_msg("opset %lld: %s", (long long)opset, err.msg);
    ot_graph *g = m->graph;
    for (int i = 0; i < 2; i++) {
        const ot_node *n = &g->nodes[i];
        assert_int_equal(n->op, OT_OP_PAD);
        assert_int_equal(n->n_inputs, 3);
        assert_null(ot_node_attr(n, "pads"));
        assert_null(ot_node_attr(n, "paddings"));
        assert_int_equal(g->values[n->inputs[1]].dtype, OT_I64);
        assert_memory_equal(g->values[n->inputs[1]].data, i ? pc : pr, sizeof pr);
    }
    int y = ot_graph_find_value(g, "y");
    assert_int_equal(g->values[y].shape.rank, 2);
    assert_int_equal(g->values[y].shape.dim[0], 3);
    assert_int_equal(g->values[y].shape.dim[1], 6);
    ot_ref_env *e = ot_ref_new(g);
    float x[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(ot_ref_feed(e, ot_graph_find_value(g, "x"), x, sizeof x, &err), OT_OK);
    assert_int_equal(ot_ref_run(e, true, &err), OT_OK);
    const float *yv = ot_ref_f32(e, y);
    const float want[18] = {1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5};
    for (int i = 0; i < 18; i++)
        if (yv[i] != want[i]) fail_msg("opset %lld: y[%d] = %g, want %g", (long long)opset, i, yv[i], want[i]);
    ot_ref_free(e);
    ot_model_free(m);
    mb_free(b);
}

static void test_pad_attribute_forms(void **state) {
    (void)state;
    check_old_pad(2, "pads");
    check_old_pad(10, "pads");
    check_old_pad(1, "paddings");
}

static void test_pad_both_forms_refused(void **state) {
    (void)state;
    mb *b = mb_new(13);
    const int64_t xd[2] = {2, 3}, four = 4, pv[4] = {0, 1, 0, 1};
    mb_input(b, "x", F32, 2, xd, NULL);
    mb_raw(b, mb_init(b, mb_tensor(b, "pads", I64, 1, &four)), pv, sizeof pv);
    Onnx__NodeProto *p = mb_node(b, "Pad", "twice", "x,pads", "y");
    mb_attr_ints(b, p, "pads", pv, 4);
    mb_output(b, "y", F32);
    ot_model *m = NULL;
    ot_error err = {0};
    assert_int_equal(load_mb(b, "twice.onnx", &m, &err), OT_E_MODEL);
    assert_null(m);
    assert_non_null(strstr(err.msg, "twice"));
    mb_free(b);
}

/* x [2,3,4] -> ReduceMean(axes = Reshape(Constant)), as PyTorch's dynamo exporter writes
 * without optimisation: the axes are only constant once shape inference folds the
 * Reshape; axes computed from a graph input the same way stay refused. */
static void check_reshaped_axes(bool from_input) {
    mb *b = mb_new(18);
    const int64_t xd[3] = {2, 3, 4}, one = 1, ax[1] = {-1};
    mb_input(b, "x", F32, 3, xd, NULL);
    if (from_input) {
        mb_input(b, "ax", I64, 1, &one, NULL);
    } else {
        mb_attr_ints(b, mb_node(b, "Constant", "ax_c", "", "ax"), "value_ints", ax, 1);
    }
    mb_raw(b, mb_init(b, mb_tensor(b, "ax_shape", I64, 1, &one)), &one, sizeof one);
    mb_node(b, "Reshape", "ax_r", "ax,ax_shape", "axes");
    mb_attr_int(b, mb_node(b, "ReduceMean", "mean", "x,axes", "y"), "keepdims", 0);
    mb_output(b, "y", F32);
    ot_model *m = NULL;
    ot_error err = {0};
    ot_status st = load_mb(b, from_input ? "axes_input.onnx" : "axes_reshaped.onnx", &m, &err);
    if (from_input) {
        assert_int_equal(st, OT_E_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "'mean'"));
        assert_non_null(strstr(err.msg, "only constant axes"));
        mb_free(b);
        return;
    }
    if (st) fail_msg("%s", err.msg);
    ot_graph *g = m->graph;
    const ot_node *n = &g->nodes[g->values[ot_graph_find_value(g, "y")].producer];
    assert_int_equal(n->op, OT_OP_REDUCE_MEAN);
    assert_int_equal(n->n_inputs, 1);
    int cnt = 0;
    const int64_t *v = ot_node_attr_ints(n, "axes", &cnt);
    assert_int_equal(cnt, 1);
    assert_int_equal(v[0], -1);
    const ot_shape *ys = &g->values[ot_graph_find_value(g, "y")].shape;
    assert_int_equal(ys->rank, 2);
    assert_int_equal(ys->dim[1], 3);
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    ot_model_free(m);
    mb_free(b);
}

static void test_reduce_axes_folded(void **state) {
    (void)state;
    check_reshaped_axes(false);
    check_reshaped_axes(true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pad_attribute_forms),
        cmocka_unit_test(test_pad_both_forms_refused),
        cmocka_unit_test(test_reduce_axes_folded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
