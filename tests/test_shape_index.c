/* test_shape_index.c — shape rules and import-time constant folding of the layout and
 * indexing ops of issue 13 (importer/shape_rules_index.c): Pad with known, computed
 * and unknown pads (a symbolic dim survives a 0 pad), negative pads, the axes input;
 * Tile; Trilu's rank check; GatherElements; GatherND (batch_dims); ScatterND; CumSum;
 * and folding of Trilu / Pad /
 * CumSum on constants (causal masks, position ids), which then cost nothing per step. */
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

static int act(ot_graph *g, const char *name) { return ot_graph_add_value(g, name, OT_UNDEFINED, NULL, OT_VK_ACTIVATION); }

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

static void test_pad_shapes(void **state) {
    (void)state;
    ot_graph *g = graph();
    int x = input(g, "x", OT_F32, 4, (int64_t[]){-1, 3, 8, 8}, "batch");
    int y1 = act(g, "y1"), y2 = act(g, "y2"), y3 = act(g, "y3"), y4 = act(g, "y4");
    /* DenseNet / AveragePool style: pad H and W only; batch stays symbolic */
    node(g, OT_OP_PAD, "p1", IDS(x, ints(g, "pads1", 8, (int64_t[]){0, 0, 1, 1, 0, 0, 1, 2})), IDS(y1));
    /* axes input with a crop */
    node(g, OT_OP_PAD, "p2", IDS(x, ints(g, "pads2", 4, (int64_t[]){-2, 1, 0, 3}), -1, ints(g, "ax2", 2, (int64_t[]){-1, 1})),
         IDS(y2));
    /* pads computed from constants (PyTorch's opset-11 F.pad chain), folded first */
    int a = ints(g, "a", 4, (int64_t[]){0, 0, 2, 2}), b = ints(g, "b", 4, (int64_t[]){0, 0, 2, 2}), cat = act(g, "cat");
    ot_node *c = node(g, OT_OP_CONCAT, "cat", IDS(a, b), IDS(cat));
    ot_node_set_attr_int(c, "axis", 0);
    ot_node *p3 = node(g, OT_OP_PAD, "p3", IDS(x, cat), IDS(y3));
    ot_node_set_attr_string(p3, "mode", "reflect");
    /* pads only known at run time: the rank survives */
    int rt = input(g, "rt", OT_I64, 1, (int64_t[]){8}, NULL);
    node(g, OT_OP_PAD, "p4", IDS(x, rt), IDS(y4));
    infer_ok(g);
    expect_shape(g, y1, "[batch,3,10,11]");
    expect_shape(g, y2, "[batch,7,8,6]");
    expect_shape(g, y3, "[batch,3,12,12]");
    expect_shape(g, y4, "[?,?,?,?]");
    ot_graph_free(g);
    /* pads that do not fit the rank */
    g = graph();
    x = input(g, "x", OT_F32, 2, (int64_t[]){2, 3}, NULL);
    int y = act(g, "y");
    node(g, OT_OP_PAD, "bad_pad", IDS(x, ints(g, "pads", 2, (int64_t[]){1, 1})), IDS(y));
    ot_error err = {0};
    assert_int_equal(ot_shape_infer(g, &err), OT_E_SHAPE);
    assert_non_null(strstr(err.msg, "bad_pad"));
    ot_graph_free(g);
}

static void test_tile_trilu_gather_cumsum_shapes(void **state) {
    (void)state;
    ot_graph *g = graph();
    int x = input(g, "x", OT_F32, 3, (int64_t[]){-1, 4, 5}, "batch");
    int t = act(g, "t"), tr = act(g, "tr"), ge = act(g, "ge"), cs = act(g, "cs");
    node(g, OT_OP_TILE, "tile", IDS(x, ints(g, "rep", 3, (int64_t[]){1, 2, 3})), IDS(t));
    node(g, OT_OP_TRILU, "trilu", IDS(x), IDS(tr));
    int idx = input(g, "idx", OT_I64, 3, (int64_t[]){2, 4, 1}, NULL);
    ot_node *n = node(g, OT_OP_GATHER_ELEMENTS, "ge", IDS(x, idx), IDS(ge));
    ot_node_set_attr_int(n, "axis", -1);
    int64_t axis = 1;
    node(g, OT_OP_CUMSUM, "cs", IDS(x, const_of(g, "axis", OT_I64, 0, NULL, &axis)), IDS(cs));
    /* GatherND: indices [2,1] pick rows of the batch dim; batch_dims 1 keeps it */
    int gi = input(g, "gi", OT_I64, 2, (int64_t[]){2, 1}, NULL), gn = act(g, "gn"), gb = act(g, "gb"), sn = act(g, "sn");
    node(g, OT_OP_GATHER_ND, "gnd", IDS(x, gi), IDS(gn));
    int bi = input(g, "bi", OT_I64, 3, (int64_t[]){-1, 3, 2}, "batch");
    n = node(g, OT_OP_GATHER_ND, "gnd_b", IDS(x, bi), IDS(gb));
    ot_node_set_attr_int(n, "batch_dims", 1);
    int upd = input(g, "upd", OT_F32, 3, (int64_t[]){2, 4, 5}, NULL);
    node(g, OT_OP_SCATTER_ND, "snd", IDS(x, gi, upd), IDS(sn));
    infer_ok(g);
    expect_shape(g, gn, "[2,4,5]");
    expect_shape(g, gb, "[batch,3]");
    expect_shape(g, sn, "[batch,4,5]");
    expect_shape(g, t, "[batch,8,15]");
    expect_shape(g, tr, "[batch,4,5]");
    expect_shape(g, ge, "[2,4,1]");
    expect_shape(g, cs, "[batch,4,5]");
    assert_int_equal(g->values[ge].dtype, OT_F32);
    ot_graph_free(g);
    /* Trilu needs a matrix; GatherElements needs equal ranks */
    const ot_op ops[2] = {OT_OP_TRILU, OT_OP_GATHER_ELEMENTS};
    for (int k = 0; k < 2; k++) {
        g = graph();
        int v = input(g, "v", OT_F32, 1, (int64_t[]){4}, NULL);
        int i2 = input(g, "i2", OT_I64, 2, (int64_t[]){1, 1}, NULL), y = act(g, "y");
        if (k == 0) node(g, ops[k], "bad", IDS(v), IDS(y));
        else node(g, ops[k], "bad", IDS(v, i2), IDS(y));
        ot_error err = {0};
        assert_int_equal(ot_shape_infer(g, &err), OT_E_SHAPE);
        assert_non_null(strstr(err.msg, "bad"));
        ot_graph_free(g);
    }
}

/* A causal mask (Trilu of a constant), a padded constant and position ids
 * (CumSum of a constant mask) fold at import: the nodes go, the values become
 * constants holding the kernels' results. */
static void test_fold(void **state) {
    (void)state;
    ot_graph *g = graph();
    float onesv[16], fone = 1.0f;
    for (int i = 0; i < 16; i++) onesv[i] = 1.0f;
    int ones = const_of(g, "ones", OT_F32, 2, (int64_t[]){4, 4}, onesv), mask = act(g, "mask");
    ot_node *n;
    int64_t k = 1;
    node(g, OT_OP_TRILU, "triu", IDS(ones, const_of(g, "k", OT_I64, 0, NULL, &k)), IDS(mask));
    float base[3] = {1, 2, 3};
    int c = const_of(g, "c", OT_F32, 1, (int64_t[]){3}, base), pc = act(g, "pc");
    n = node(g, OT_OP_PAD, "padc", IDS(c, ints(g, "pads", 2, (int64_t[]){2, 1}), const_of(g, "v", OT_F32, 0, NULL, &fone)),
             IDS(pc));
    ot_node_set_attr_string(n, "mode", "reflect");
    int64_t m[5] = {1, 1, 0, 1, 1}, zero = 0;
    int mv = const_of(g, "m", OT_I64, 1, (int64_t[]){5}, m), pos = act(g, "pos");
    node(g, OT_OP_CUMSUM, "pos", IDS(mv, const_of(g, "zero", OT_I64, 0, NULL, &zero)), IDS(pos));
    /* consumers that stay: the folded values feed the activations */
    int x = input(g, "x", OT_F32, 2, (int64_t[]){4, 4}, NULL), y = act(g, "y");
    node(g, OT_OP_MUL, "apply_mask", IDS(x, mask), IDS(y));
    infer_ok(g);
    for (int i = 0; i < 3; i++) assert_true(g->nodes[i].removed);
    assert_false(g->nodes[3].removed);
    const float *mk = g->values[mask].data;
    assert_non_null(mk);
    for (int i = 0; i < 16; i++) assert_true(mk[i] == (i % 4 - i / 4 >= 1 ? 1.0f : 0.0f));
    const float *pv = g->values[pc].data, want[6] = {3, 2, 1, 2, 3, 2};
    assert_non_null(pv);
    for (int i = 0; i < 6; i++) assert_true(pv[i] == want[i]);
    const int64_t *ps = g->values[pos].data, wp[5] = {1, 2, 2, 3, 4};
    assert_non_null(ps);
    for (int i = 0; i < 5; i++) assert_int_equal(ps[i], wp[i]);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pad_shapes),
        cmocka_unit_test(test_tile_trilu_gather_cumsum_shapes),
        cmocka_unit_test(test_fold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
