/* test_regress_shape_overflow.c — issue 26 item 4: every product or sum of dims in a
 * shape rule is checked. One hand-made graph per family of rule whose arithmetic
 * overflowed int64 (undefined behaviour; a wrapped or garbage dim) before: Pad's
 * begin + end, shape data (Shape -> Mul), Range's count, ConvTranspose's pads,
 * Resize's keep_aspect_ratio_policy, TopK's K, and the recurrent ops' gates x hidden
 * size. Each absurd graph is OT_E_SHAPE naming the node; the same graph with sane
 * values still loads with the expected shape, so the checks cannot pass by refusing
 * everything. (Tile and Reshape are in test_regress_absurd_dims.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "kernels/kernel.h"

#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define BIG ((int64_t)1 << 62)

/* Loads b (freed) with shape inference and folding as the CLI does; on success *out
 * is output 0's shape. */
static ot_status load(mb *b, ot_shape *out, ot_error *err) {
    size_t len = 0;
    uint8_t *buf = mb_pack(b, &len);
    ot_model *m = NULL;
    ot_status st = ot_model_load_buffer(buf, len, "overflow.onnx", NULL,
                                        &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, err);
    mb_free(b);
    assert_true((st == OT_OK) == (m != NULL));
    if (m) *out = m->graph->values[m->graph->outputs[0]].shape;
    ot_model_free(m);
    return st;
}

/* Expects OT_E_SHAPE naming node `name` and saying `what`. */
static void expect_refused(ot_status st, const ot_error *err, const char *name, const char *what) {
    if (st != OT_E_SHAPE) fail_msg("expected OT_E_SHAPE, got %d: %s", st, err->msg);
    if (!strstr(err->msg, name) || !strstr(err->msg, what)) fail_msg("message lacks '%s' / '%s': %s", name, what, err->msg);
}

/* Pad [1, 4] by pads (0, p, 0, p): 2^62 + 2^62 wrapped to INT64_MIN. */
static ot_status pad_graph(int64_t p, ot_shape *out, ot_error *err) {
    mb *b = mb_new(18);
    const int64_t xd[2] = {1, 4}, pd[1] = {4}, pads[4] = {0, p, 0, p};
    mb_input(b, "x", F32, 2, xd, NULL);
    mb_init_i64(b, "pads", 1, pd, pads);
    mb_node(b, "Pad", "pad_huge", "x,pads", "y");
    mb_output(b, "y", F32);
    return load(b, out, err);
}

static void test_pad(void **state) {
    (void)state;
    ot_error err = {0};
    ot_shape s;
    expect_refused(pad_graph(BIG, &s, &err), &err, "pad_huge", "overflow int64");
    assert_int_equal(pad_graph(3, &s, &err), OT_OK);
    assert_int_equal(s.dim[1], 10);
}

/* Shape(x) * k -> Reshape: x [batch, 4], so element 1 is 4 * k (past int64 for 2^62). */
static ot_status shape_data_graph(int64_t k, ot_shape *out, ot_error *err) {
    mb *b = mb_new(17);
    const int64_t xd[2] = {-1, 4}, kd[1] = {2}, kv[2] = {1, k};
    const char *syms[2] = {"batch", NULL};
    mb_input(b, "x", F32, 2, xd, syms);
    mb_init_i64(b, "k", 1, kd, kv);
    mb_node(b, "Shape", "shape", "x", "s");
    mb_node(b, "Mul", "mul_huge", "s,k", "t");
    mb_node(b, "Expand", "expand", "x,t", "y");
    mb_output(b, "y", F32);
    return load(b, out, err);
}

static void test_shape_data(void **state) {
    (void)state;
    ot_error err = {0};
    ot_shape s;
    expect_refused(shape_data_graph(BIG, &s, &err), &err, "mul_huge", "overflow int64");
    assert_non_null(strstr(err.msg, "4611686018427387904"));
    assert_int_equal(shape_data_graph(1, &s, &err), OT_OK);
    assert_int_equal(s.dim[1], 4);
    assert_true(s.sym[0] >= 0); /* batch kept through the shape data */
}

/* Range(0, limit, 1) in float32: 1e30 elements was converted to int64 (undefined). */
static ot_status range_graph(float limit, ot_shape *out, ot_error *err) {
    mb *b = mb_new(17);
    /* Constant nodes: float initializers would be trainable parameters, not known */
    mb_attr_float(b, mb_node(b, "Constant", "c0", NULL, "start"), "value_float", 0.0f);
    mb_attr_float(b, mb_node(b, "Constant", "c1", NULL, "limit"), "value_float", limit);
    mb_attr_float(b, mb_node(b, "Constant", "c2", NULL, "delta"), "value_float", 1.0f);
    mb_node(b, "Range", "range_huge", "start,limit,delta", "y");
    mb_output(b, "y", F32);
    return load(b, out, err);
}

static void test_range(void **state) {
    (void)state;
    ot_error err = {0};
    ot_shape s;
    expect_refused(range_graph(1e30f, &s, &err), &err, "range_huge", "past int64");
    assert_int_equal(range_graph(5.5f, &s, &err), OT_OK);
    assert_int_equal(s.rank, 1);
    assert_int_equal(s.dim[0], 6);
}

/* ConvTranspose [1, 1, 4] * [1, 1, 3] with output_shape [5]: a dilation of 2^62 made
 * (k - 1) x dilation overflow in the pads the gradient's Conv uses. */
static ot_status conv_transpose_graph(int64_t dilation, ot_shape *out, ot_error *err) {
    mb *b = mb_new(17);
    const int64_t xd[3] = {1, 1, 4}, wd[3] = {1, 1, 3}, os[1] = {6}, dl[1] = {dilation};
    const float w[3] = {1, 2, 3};
    mb_input(b, "x", F32, 3, xd, NULL);
    mb_init_f32(b, "w", 3, wd, w);
    Onnx__NodeProto *n = mb_node(b, "ConvTranspose", "convt_huge", "x,w", "y");
    mb_attr_ints(b, n, "output_shape", os, 1);
    mb_attr_ints(b, n, "dilations", dl, 1);
    mb_output(b, "y", F32);
    return load(b, out, err);
}

static void test_conv_transpose(void **state) {
    (void)state;
    ot_error err = {0};
    ot_shape s;
    expect_refused(conv_transpose_graph(BIG, &s, &err), &err, "convt_huge", "overflow int64");
    assert_int_equal(conv_transpose_graph(1, &s, &err), OT_OK);
    assert_int_equal(s.dim[2], 6);
}

/* Resize [1, 1, 1, 2^30] to sizes (1, 1, h, 2^30) keeping the aspect ratio (not
 * smaller): h = 2^62 scales the last dim by 2^62, past int64 as a double. */
static ot_status resize_graph(int64_t h, ot_shape *out, ot_error *err) {
    mb *b = mb_new(18);
    const int64_t xd[4] = {1, 1, 1, (int64_t)1 << 30}, zd[1] = {4}, sizes[4] = {1, 1, h, (int64_t)1 << 30};
    mb_input(b, "x", F32, 4, xd, NULL);
    mb_init_i64(b, "sizes", 1, zd, sizes);
    Onnx__NodeProto *n = mb_node(b, "Resize", "resize_huge", "x,,,sizes", "y");
    mb_attr_string(b, n, "keep_aspect_ratio_policy", "not_smaller");
    mb_output(b, "y", F32);
    return load(b, out, err);
}

static void test_resize(void **state) {
    (void)state;
    ot_error err = {0};
    ot_shape s;
    expect_refused(resize_graph(BIG, &s, &err), &err, "resize_huge", "past int64");
    assert_int_equal(resize_graph(1, &s, &err), OT_OK);
    assert_int_equal(s.dim[3], (int64_t)1 << 30);
}

/* TopK of K = INT64_MAX on a symbolic axis: (int64_t)(double)K was undefined. */
static ot_status topk_graph(int64_t k, ot_shape *out, ot_error *err) {
    mb *b = mb_new(17);
    const int64_t xd[2] = {2, -1}, kd[1] = {1}, kv[1] = {k};
    const char *syms[2] = {NULL, "n"};
    mb_input(b, "x", F32, 2, xd, syms);
    mb_init_i64(b, "k", 1, kd, kv);
    mb_node(b, "TopK", "topk_huge", "x,k", "v,i");
    mb_output(b, "v", F32);
    mb_output(b, "i", I64);
    return load(b, out, err);
}

static void test_top_k(void **state) {
    (void)state;
    ot_error err = {0};
    ot_shape s;
    expect_refused(topk_graph(INT64_MAX, &s, &err), &err, "topk_huge", "past int64");
    assert_int_equal(topk_graph(3, &s, &err), OT_OK);
    assert_int_equal(s.dim[1], 3);
}

/* LSTM with hidden_size h and W [1, gates x H, 3], R [1, gates x H, H] symbolic:
 * 4 gates x 2^62 overflowed; a W that does not hold 4 gates is refused too. */
static ot_status lstm_graph(int64_t h, int64_t w1, ot_shape *out, ot_error *err) {
    mb *b = mb_new(17);
    const int64_t xd[3] = {5, 2, 3}, wd[3] = {1, w1, 3}, rd[3] = {1, -1, -1};
    const char *rs[3] = {NULL, "gh", "h"};
    mb_input(b, "x", F32, 3, xd, NULL);
    mb_input(b, "w", F32, 3, wd, NULL);
    mb_input(b, "r", F32, 3, rd, rs);
    Onnx__NodeProto *n = mb_node(b, "LSTM", "lstm_huge", "x,w,r", "y");
    mb_attr_int(b, n, "hidden_size", h);
    mb_output(b, "y", F32);
    return load(b, out, err);
}

static void test_rnn(void **state) {
    (void)state;
    ot_error err = {0};
    ot_shape s;
    expect_refused(lstm_graph(BIG, 8, &s, &err), &err, "lstm_huge", "overflow int64");
    expect_refused(lstm_graph(2, 7, &s, &err), &err, "lstm_huge", "4 gates");
    assert_int_equal(lstm_graph(2, 8, &s, &err), OT_OK);
    assert_int_equal(s.rank, 4);
    assert_int_equal(s.dim[3], 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pad),         cmocka_unit_test(test_shape_data), cmocka_unit_test(test_range),
        cmocka_unit_test(test_conv_transpose), cmocka_unit_test(test_resize), cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_rnn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
