/* test_import_dynamo.c — forms PyTorch's dynamo exporter writes (issue 13; the first
 * two without its optimizer): SplitToSequence read by SequenceAt at constant positions
 * becomes one Slice per SequenceAt (importer/sequence.c) and computes the chunks
 * torch.split gives (a scalar split size with a shorter last chunk, explicit sizes
 * with a negative position, no split with keepdims 0); a position computed at run
 * time is refused naming the node and the reason. Clip bounds cast by CastLike from
 * constants become the attributes and the CastLike nodes go (importer/normalize.c).
 * The lowered Dropout (RandomUniformLike -> Less -> Cast -> Div -> Mul) becomes one
 * Dropout with ratio 1 - p (importer/dropout_pattern.c); a variant off the pattern
 * (another keep probability in the Div) stays as written.
 * Models are built in C (fixtures/onnx_builder.h) under OT_BINARY_DIR. */
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

#define TMP OT_BINARY_DIR "/test_import_dynamo_tmp"
#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

static ot_status load_mb(mb *b, const char *name, ot_model **m, ot_error *err) {
    return mb_load(b, TMP, name, NULL, m, err);
}

/* x [2,7,3] = 0..41 (row-major) */
static void x_data(float *x) {
    for (int i = 0; i < 42; i++) x[i] = (float)i;
}

/* Element (i, j, k) of x. */
static float xe(int i, int j, int k) { return (float)(i * 21 + j * 3 + k); }

static void add_position(mb *b, const char *name, int64_t pos) {
    mb_raw(b, mb_init(b, mb_tensor(b, name, I64, 0, NULL)), &pos, sizeof pos);
}

/* The output `name` has shape dims and holds x's j-range [j0, j0 + dims[1]) (or, with
 * squeezed, the single j0 with the axis gone). */
static void check_chunk(ot_graph *g, ot_ref_env *e, const char *name, int j0, int width, bool squeezed) {
    int v = ot_graph_find_value(g, name);
    assert_true(v >= 0);
    const ot_shape *s = &g->values[v].shape;
    assert_int_equal(s->rank, squeezed ? 2 : 3);
    assert_int_equal(s->dim[0], 2);
    assert_int_equal(s->dim[1], squeezed ? 3 : width);
    const float *y = ot_ref_f32(e, v);
    int at = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < width; j++)
            for (int k = 0; k < 3; k++, at++)
                if (y[at] != xe(i, j0 + j, k)) fail_msg("%s[%d] = %g, want %g", name, at, y[at], xe(i, j0 + j, k));
}

static ot_model *load_ok(mb *b, const char *file) {
    ot_model *m = NULL;
    ot_error err = {0};
    if (load_mb(b, file, &m, &err)) fail_msg("%s: %s", file, err.msg);
    for (int i = 0; i < m->graph->n_nodes; i++)
        if (!m->graph->nodes[i].removed) assert_int_not_equal(m->graph->nodes[i].op, OT_OP_UNKNOWN);
    assert_int_equal(ot_graph_verify(m->graph, &err), OT_OK);
    return m;
}

static ot_ref_env *run_ref(ot_graph *g) {
    ot_ref_env *e = ot_ref_new(g);
    float x[42];
    x_data(x);
    ot_error err = {0};
    assert_int_equal(ot_ref_feed(e, ot_graph_find_value(g, "x"), x, sizeof x, &err), OT_OK);
    if (ot_ref_run(e, true, &err)) fail_msg("%s", err.msg);
    return e;
}

/* torch.split(x, 3, dim=1) of 7: chunks of 3, 3 and 1 */
static void test_scalar_split(void **state) {
    (void)state;
    mb *b = mb_new(18);
    const int64_t xd[3] = {2, 7, 3};
    mb_input(b, "x", F32, 3, xd, NULL);
    const int64_t three = 3;
    mb_raw(b, mb_init(b, mb_tensor(b, "size", I64, 0, NULL)), &three, sizeof three);
    mb_attr_int(b, mb_node(b, "SplitToSequence", "split", "x,size", "seq"), "axis", 1);
    const char *outs[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        char pos[16], ins[32], nm[16];
        snprintf(pos, sizeof pos, "p%d", i);
        snprintf(ins, sizeof ins, "seq,p%d", i);
        snprintf(nm, sizeof nm, "at%d", i);
        add_position(b, pos, i);
        mb_node(b, "SequenceAt", nm, ins, outs[i]);
        mb_output(b, outs[i], F32);
    }
    ot_model *m = load_ok(b, "scalar_split.onnx");
    ot_ref_env *e = run_ref(m->graph);
    check_chunk(m->graph, e, "a", 0, 3, false);
    check_chunk(m->graph, e, "b", 3, 3, false);
    check_chunk(m->graph, e, "c", 6, 1, false);
    ot_ref_free(e);
    ot_model_free(m);
    mb_free(b);
}

/* explicit sizes [2, 5] read at -1; no split (one index each) with keepdims 0 */
static void test_sizes_and_unbind(void **state) {
    (void)state;
    mb *b = mb_new(18);
    const int64_t xd[3] = {2, 7, 3}, two = 2, sizes[2] = {2, 5};
    mb_input(b, "x", F32, 3, xd, NULL);
    mb_init_i64(b, "sizes", 1, &two, sizes);
    mb_attr_int(b, mb_node(b, "SplitToSequence", "split", "x,sizes", "seq"), "axis", 1);
    add_position(b, "last", -1);
    mb_node(b, "SequenceAt", "at_last", "seq,last", "tail");
    mb_output(b, "tail", F32);
    Onnx__NodeProto *u = mb_node(b, "SplitToSequence", "unbind", "x", "seq1");
    mb_attr_int(b, u, "axis", 1);
    mb_attr_int(b, u, "keepdims", 0);
    add_position(b, "four", 4);
    mb_node(b, "SequenceAt", "at_four", "seq1,four", "row");
    mb_output(b, "row", F32);
    ot_model *m = load_ok(b, "sizes_unbind.onnx");
    ot_ref_env *e = run_ref(m->graph);
    check_chunk(m->graph, e, "tail", 2, 5, false);
    check_chunk(m->graph, e, "row", 4, 1, true);
    ot_ref_free(e);
    ot_model_free(m);
    mb_free(b);
}

/* A position only the data gives, and one counted from an end only the data gives:
 * exit-6 material, naming the node and the reason. */
static void test_refused(void **state) {
    (void)state;
    const int64_t xd[3] = {2, 7, 3};
    for (int neg = 0; neg < 2; neg++) {
        mb *b = mb_new(18);
        mb_input(b, "x", F32, 3, xd, NULL);
        if (neg) add_position(b, "p", -1);
        else mb_input(b, "p", I64, 0, NULL, NULL);
        mb_attr_int(b, mb_node(b, "SplitToSequence", "split", "x", "seq"), "axis", 1);
        mb_node(b, "SequenceAt", "at_p", "seq,p", "y");
        mb_output(b, "y", F32);
        ot_model *m = NULL;
        ot_error err = {0};
        assert_int_equal(load_mb(b, "refused.onnx", &m, &err), OT_E_UNSUPPORTED);
        assert_null(m);
        assert_non_null(strstr(err.msg, "'at_p'"));
        assert_non_null(strstr(err.msg, neg ? "negative position" : "position computed at run time"));
        assert_non_null(strstr(err.msg, "'split'"));
        mb_free(b);
    }
}

/* Constant -> CastLike(bound, x) -> Clip: bounds 0 and 6, the casts removed. */
static void test_clip_cast_like_bounds(void **state) {
    (void)state;
    mb *b = mb_new(18);
    const int64_t xd[3] = {2, 7, 3};
    mb_input(b, "x", F32, 3, xd, NULL);
    mb_attr_float(b, mb_node(b, "Constant", "lo_c", "", "lo"), "value_float", 0.0f);
    mb_attr_float(b, mb_node(b, "Constant", "hi_c", "", "hi"), "value_float", 6.0f);
    mb_node(b, "CastLike", "lo_cast", "lo,x", "lo_x");
    mb_node(b, "CastLike", "hi_cast", "hi,x", "hi_x");
    mb_node(b, "Clip", "relu6", "x,lo_x,hi_x", "y");
    mb_output(b, "y", F32);
    ot_model *m = load_ok(b, "clip_cast_like.onnx");
    ot_graph *g = m->graph;
    const ot_node *n = &g->nodes[g->values[ot_graph_find_value(g, "y")].producer];
    assert_int_equal(n->op, OT_OP_CLIP);
    assert_int_equal(n->n_inputs, 1);
    assert_true(ot_node_attr_float(n, "min", -1) == 0.0f && ot_node_attr_float(n, "max", -1) == 6.0f);
    int live = 0;
    for (int i = 0; i < g->n_nodes; i++) live += !g->nodes[i].removed;
    assert_int_equal(live, 1);
    ot_ref_env *e = run_ref(g);
    const float *y = ot_ref_f32(e, ot_graph_find_value(g, "y"));
    for (int i = 0; i < 42; i++) assert_true(y[i] == (i < 6 ? (float)i : 6.0f));
    ot_ref_free(e);
    ot_model_free(m);
    mb_free(b);
}

static void check_lowered_dropout(bool same_p) {
    mb *b = mb_new(20);
    const int64_t xd[2] = {4, 5};
    const float keep = 0.75f, other = 0.5f;
    mb_input(b, "x", F32, 2, xd, NULL);
    mb_raw(b, mb_init(b, mb_tensor(b, "p", F32, 0, NULL)), &keep, sizeof keep);
    mb_raw(b, mb_init(b, mb_tensor(b, "q", F32, 0, NULL)), same_p ? &keep : &other, sizeof keep);
    mb_node(b, "RandomUniformLike", "rand", "x", "u");
    mb_node(b, "Less", "less", "u,p", "kept");
    mb_attr_int(b, mb_node(b, "Cast", "cast", "kept", "mask"), "to", 1);
    mb_node(b, "Div", "div", "mask,q", "scale");
    mb_node(b, "Mul", "drop", "x,scale", "y");
    mb_output(b, "y", F32);
    ot_model *m = load_ok(b, same_p ? "lowered_dropout.onnx" : "not_dropout.onnx");
    ot_graph *g = m->graph;
    const ot_node *n = &g->nodes[g->values[ot_graph_find_value(g, "y")].producer];
    int live = 0;
    for (int i = 0; i < g->n_nodes; i++) live += !g->nodes[i].removed;
    if (same_p) {
        assert_int_equal(n->op, OT_OP_DROPOUT);
        assert_int_equal(n->inputs[0], ot_graph_find_value(g, "x"));
        assert_true(ot_node_attr_float(n, "ratio", 0) == 1.0f - keep);
        assert_int_equal(ot_node_attr_int(n, "training_mode", 0), 1);
        assert_int_equal(live, 1);
    } else {
        assert_int_equal(n->op, OT_OP_MUL);
        assert_int_equal(live, 5);
    }
    ot_model_free(m);
    mb_free(b);
}

static void test_lowered_dropout(void **state) {
    (void)state;
    check_lowered_dropout(true);
    check_lowered_dropout(false);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar_split),
        cmocka_unit_test(test_sizes_and_unbind),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_clip_cast_like_bounds),
        cmocka_unit_test(test_lowered_dropout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
