/* test_shape_spatial.c — the shape rules of issue 26's spatial ops (ops batch 2,
 * importer/shape_rules_spatial.c). ConvTranspose: output sizes (pads, output_padding,
 * auto_pad, output_shape, groups) and bad attributes refused naming the node.
 * Resize / Upsample: sizes read from a symbolic-batch input's shape (the
 * LRASPP form keeps `batch`), constant scales (floor), axes, keep_aspect_ratio_policy,
 * and bad input refused naming the node: absurd and negative scales, both or neither
 * of scales and sizes, a wrong count, tf_crop_and_resize, unknown modes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "importer/importer.h"
#include "kernels/kernel.h"

#define IDS(...) (int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))

static ot_graph *graph(void) {
    ot_graph *g = ot_graph_new("resize");
    assert_non_null(g);
    g->fold_eval = ot_cpu_fold_eval;
    return g;
}

static int input(ot_graph *g, const char *name, int rank, const int64_t *dims, const char *sym0) {
    ot_shape s = ot_shape_make(rank, dims);
    if (sym0) s.sym[0] = ot_graph_add_sym(g, sym0);
    return ot_graph_add_value(g, name, OT_F32, &s, OT_VK_INPUT);
}

static int act(ot_graph *g, const char *name) { return ot_graph_add_value(g, name, OT_UNDEFINED, NULL, OT_VK_ACTIVATION); }

static int const_of(ot_graph *g, const char *name, ot_dtype dt, int n, const void *data) {
    int64_t d = n;
    ot_shape s = ot_shape_make(1, &d);
    int v = ot_graph_add_value(g, name, dt, &s, OT_VK_CONSTANT);
    assert_int_equal(ot_value_set_data(&g->values[v], data, (size_t)n * ot_dtype_size(dt)), 0);
    return v;
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

static void test_resize_shapes(void **state) {
    (void)state;
    ot_graph *g = graph();
    int x = input(g, "x", 4, (int64_t[]){-1, 3, 5, 6}, "batch");
    /* LRASPP: sizes = Concat(Shape(x)[0:2], [10, 12]) */
    int sh = act(g, "sh"), nc = act(g, "nc"), sz = act(g, "sz"), y1 = act(g, "y1"), y2 = act(g, "y2"), y3 = act(g, "y3");
    node(g, OT_OP_SHAPE, "shape", IDS(x), IDS(sh));
    int64_t zero = 0, two = 2, hw[2] = {10, 12};
    node(g, OT_OP_SLICE, "slice", IDS(sh, const_of(g, "s0", OT_I64, 1, &zero), const_of(g, "s1", OT_I64, 1, &two)),
         IDS(nc));
    ot_node *cat = node(g, OT_OP_CONCAT, "cat", IDS(nc, const_of(g, "hw", OT_I64, 2, hw)), IDS(sz));
    ot_node_set_attr_int(cat, "axis", 0);
    ot_node *r1 = node(g, OT_OP_RESIZE, "r1", IDS(x, -1, -1, sz), IDS(y1));
    ot_node_set_attr_string(r1, "mode", "linear");
    /* scales: floor(5 x 1.5) = 7, floor(6 x 0.4) = 2 */
    float sc[4] = {1, 1, 1.5f, 0.4f};
    node(g, OT_OP_RESIZE, "r2", IDS(x, -1, const_of(g, "sc", OT_F32, 4, sc)), IDS(y2));
    /* axes + not_larger: min(8 / 5, 9 / 6) = 1.5 -> round(7.5) = 8, 9 */
    int64_t sz3[2] = {8, 9}, ax[2] = {2, 3};
    ot_node *r3 = node(g, OT_OP_RESIZE, "r3", IDS(x, -1, -1, const_of(g, "sz3", OT_I64, 2, sz3)), IDS(y3));
    ot_node_set_attr_ints(r3, "axes", ax, 2);
    ot_node_set_attr_string(r3, "keep_aspect_ratio_policy", "not_larger");
    ot_error err = {0};
    if (ot_shape_infer(g, &err)) fail_msg("shape inference failed: %s", err.msg);
    expect_shape(g, y1, "[batch,3,10,12]");
    expect_shape(g, y2, "[batch,3,7,2]");
    expect_shape(g, y3, "[batch,3,8,9]");
    ot_graph_free(g);
}

/* One bad Resize: shape inference fails with `code`, naming the node and `what`. */
static void expect_refused(const float *scales, int ns, const int64_t *sizes, int nz, const char *attr,
                           const char *value, ot_status code, const char *what) {
    ot_graph *g = graph();
    int x = input(g, "x", 4, (int64_t[]){1, 3, 5, 6}, NULL), y = act(g, "y");
    int s = ns ? const_of(g, "sc", OT_F32, ns, scales) : -1, z = nz ? const_of(g, "sz", OT_I64, nz, sizes) : -1;
    ot_node *n = node(g, OT_OP_RESIZE, "bad_resize", IDS(x, -1, s, z), IDS(y));
    if (attr) ot_node_set_attr_string(n, attr, value);
    ot_error err = {0};
    assert_int_equal(ot_shape_infer(g, &err), code);
    if (!strstr(err.msg, "bad_resize") || !strstr(err.msg, what)) fail_msg("message: %s (expected '%s')", err.msg, what);
    ot_graph_free(g);
}

static void test_resize_refused(void **state) {
    (void)state;
    float ok[4] = {1, 1, 2, 2}, neg[4] = {1, 1, -2, 2}, huge[4] = {1, 1, 1e30f, 2}, nan[4] = {1, 1, 0.0f / 0.0f, 1};
    int64_t sizes[4] = {1, 3, 10, 12};
    expect_refused(neg, 4, NULL, 0, NULL, NULL, OT_E_MODEL, "not positive");
    expect_refused(nan, 4, NULL, 0, NULL, NULL, OT_E_MODEL, "not positive");
    expect_refused(huge, 4, NULL, 0, NULL, NULL, OT_E_SHAPE, "overflows");
    expect_refused(ok, 3, NULL, 0, NULL, NULL, OT_E_MODEL, "rank 4");
    expect_refused(ok, 4, sizes, 4, NULL, NULL, OT_E_MODEL, "both scales and sizes");
    expect_refused(NULL, 0, NULL, 0, NULL, NULL, OT_E_MODEL, "neither");
    int64_t negsz[4] = {1, 3, -4, 12};
    expect_refused(NULL, 0, negsz, 4, NULL, NULL, OT_E_MODEL, "negative");
    expect_refused(ok, 4, NULL, 0, "coordinate_transformation_mode", "tf_crop_and_resize", OT_E_UNSUPPORTED,
                   "tf_crop_and_resize");
    expect_refused(ok, 4, NULL, 0, "coordinate_transformation_mode", "sideways", OT_E_MODEL, "sideways");
    expect_refused(ok, 4, NULL, 0, "mode", "lanczos", OT_E_MODEL, "lanczos");
}

static int wconst(ot_graph *g, const char *name, int rank, const int64_t *dims) {
    ot_shape s = ot_shape_make(rank, dims);
    int v = ot_graph_add_value(g, name, OT_F32, &s, OT_VK_PARAM);
    float *zero = calloc((size_t)ot_shape_numel(&s), sizeof(float));
    assert_int_equal(ot_value_set_data(&g->values[v], zero, (size_t)ot_shape_numel(&s) * sizeof(float)), 0);
    free(zero);
    return v;
}

/* One ConvTranspose of x [batch, 4, 5, 6] with weight w; attrs as "name=v,v" pairs. */
static ot_status ct_shape(const int64_t *wd, int group, const char *auto_pad, const int64_t *strides,
                          const int64_t *pads, const int64_t *out_pad, const int64_t *out_shape, char *shape,
                          ot_error *err) {
    ot_graph *g = graph();
    int x = input(g, "x", 4, (int64_t[]){-1, 4, 5, 6}, "batch"), y = act(g, "y");
    ot_node *n = node(g, OT_OP_CONV_TRANSPOSE, "ct", IDS(x, wconst(g, "w", 4, wd)), IDS(y));
    ot_node_set_attr_int(n, "group", group);
    if (auto_pad) ot_node_set_attr_string(n, "auto_pad", auto_pad);
    if (strides) ot_node_set_attr_ints(n, "strides", strides, 2);
    if (pads) ot_node_set_attr_ints(n, "pads", pads, 4);
    if (out_pad) ot_node_set_attr_ints(n, "output_padding", out_pad, 2);
    if (out_shape) ot_node_set_attr_ints(n, "output_shape", out_shape, 2);
    ot_status st = ot_shape_infer(g, err);
    if (!st) ot_shape_str(g, &g->values[y].shape, shape, 160);
    ot_graph_free(g);
    return st;
}

static void test_conv_transpose_shapes(void **state) {
    (void)state;
    char s[160];
    ot_error err = {0};
    int64_t w[4] = {4, 3, 3, 3}, two[2] = {2, 2}, p1[4] = {1, 1, 1, 1}, op1[2] = {1, 1};
    assert_int_equal(ct_shape(w, 1, NULL, two, p1, op1, NULL, s, &err), OT_OK);
    assert_string_equal(s, "[batch,3,10,12]");
    assert_int_equal(ct_shape(w, 2, NULL, NULL, NULL, NULL, NULL, s, &err), OT_OK);
    assert_string_equal(s, "[batch,6,7,8]");
    assert_int_equal(ct_shape(w, 1, "SAME_UPPER", two, NULL, NULL, NULL, s, &err), OT_OK);
    assert_string_equal(s, "[batch,3,10,12]");
    assert_int_equal(ct_shape(w, 1, NULL, two, NULL, NULL, (int64_t[]){12, 13}, s, &err), OT_OK);
    assert_string_equal(s, "[batch,3,12,13]");
    /* refused, naming the node */
    assert_int_equal(ct_shape(w, 1, NULL, two, p1, (int64_t[]){2, 0}, NULL, s, &err), OT_E_MODEL);
    assert_non_null(strstr(err.msg, "'ct'"));
    assert_non_null(strstr(err.msg, "output_padding"));
    assert_int_equal(ct_shape((int64_t[]){3, 3, 3, 3}, 1, NULL, NULL, NULL, NULL, NULL, s, &err), OT_E_SHAPE);
    assert_non_null(strstr(err.msg, "channels"));
    assert_int_equal(ct_shape(w, 3, NULL, NULL, NULL, NULL, NULL, s, &err), OT_E_SHAPE);
    assert_int_equal(ct_shape(w, 1, NULL, (int64_t[]){(int64_t)1 << 62, 1}, NULL, NULL, NULL, s, &err), OT_E_SHAPE);
    assert_non_null(strstr(err.msg, "overflows"));
    assert_int_equal(ct_shape(w, 1, NULL, two, NULL, NULL, (int64_t[]){40, 13}, s, &err), OT_E_MODEL);
    assert_non_null(strstr(err.msg, "out of reach"));
    assert_int_equal(ct_shape(w, 1, NULL, two, (int64_t[]){-1, 0, 0, 0}, NULL, NULL, s, &err), OT_E_MODEL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_transpose_shapes),
        cmocka_unit_test(test_resize_shapes),
        cmocka_unit_test(test_resize_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
