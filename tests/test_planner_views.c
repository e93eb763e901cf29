/* test_planner_views.c — views as aliases in the memory planner (planner.h, Views):
 * a Reshape of a transient takes no block; a chain of views points at the first
 * base; a view of a param reads it in place; pinned views (graph outputs, param
 * gradients) and views an optimizer reads stay copies; an in-place op never writes
 * a block that another view or the base still needs; contiguous, aligned slices
 * alias and strided, partial-row, misaligned or lifetime-extending ones do not; a
 * view the backward pass reads keeps its base (kept activations, recompute clones).
 * Every plan is checked exhaustively (helpers/plan_check.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "plan/planner.h"
#include "plan/schedule.h"
#include "plan/views.h"
#include "plan_check.h"

/* An int64 constant holding vals (a Reshape shape, Slice bounds). */
static int i64(ot_graph *g, const char *name, const int64_t *vals, int n) {
    int64_t d = n;
    ot_shape s = ot_shape_make(1, &d);
    int v = ot_graph_add_value(g, name, OT_I64, &s, OT_VK_CONSTANT);
    assert_true(v >= 0);
    assert_int_equal(ot_value_set_data(&g->values[v], vals, sizeof(int64_t) * (size_t)n), 0);
    return v;
}

static int f32_2d(ot_graph *g, const char *name, int64_t r, int64_t c, ot_value_kind kind) {
    int64_t d[2] = {r, c};
    ot_shape s = ot_shape_make(2, d);
    int v = ot_graph_add_value(g, name, OT_F32, &s, kind);
    assert_true(v >= 0);
    return v;
}

static int slice(ot_graph *g, const char *name, int x, int y, int st, int en, int ax, int sp) {
    int in[5] = {x, st, en, ax, sp};
    int id = ot_graph_add_node(g, OT_OP_SLICE, name, in, sp >= 0 ? 5 : 4, &y, 1, OT_PHASE_FORWARD);
    assert_true(id >= 0);
    return id;
}

/* x -> Relu -> a -> Reshape -> v; Add(a, v) -> c -> Neg -> y (output). */
static void test_reshape_of_transient_takes_no_block(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("reshape");
    int x = pc_f32(g, "x", 64, OT_VK_INPUT);
    pc_mark_input(g, x);
    int a = pc_f32(g, "a", 64, OT_VK_ACTIVATION), v = pc_f32(g, "v", 64, OT_VK_ACTIVATION);
    int c = pc_f32(g, "c", 64, OT_VK_ACTIVATION), y = pc_f32(g, "y", 64, OT_VK_ACTIVATION);
    int shp = i64(g, "shape", (int64_t[]){64}, 1);
    pc_node1(g, OT_OP_RELU, "relu", x, a, OT_PHASE_FORWARD);
    pc_node2(g, OT_OP_RESHAPE, "reshape", a, shp, v, OT_PHASE_FORWARD);
    pc_node2(g, OT_OP_ADD, "add", a, v, c, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_NEG, "neg", c, y, OT_PHASE_FORWARD);
    pc_mark_output(g, y);
    ot_plan *p = pc_plan_of(g, NULL, false);
    assert_int_equal(p->values[v].alias_of, a);
    assert_int_equal(p->values[v].alias_offset, 0);
    assert_int_equal(p->values[v].offset, p->values[a].offset);
    assert_int_equal(p->values[a].last_step, 2); /* the base lives to Add, which reads both */
    /* Add reads a and a view of a: it may not write over them (not in place). */
    assert_int_equal(p->values[c].inplace_of, -1);
    assert_true(p->values[c].offset != p->values[a].offset);
    /* Two transient blocks (a, c); v adds no bytes anywhere. */
    assert_int_equal(p->total[OT_MEM_TRANSIENT], 2 * 256);
    assert_int_equal(p->peak_bytes, p->pinned_bytes + 2 * 256);
    for (int s = 0; s < p->n_steps; s++) assert_true(p->timeline[s] <= p->pinned_bytes + 2 * 256);
    size_t peak = p->peak_bytes;
    ot_plan_free(p);
    /* Without reuse v is a copy: one more block, and that is what the alias saves. */
    p = pc_plan_of(g, NULL, true);
    assert_int_equal(p->values[v].alias_of, -1);
    assert_int_equal(p->total[OT_MEM_TRANSIENT], 3 * 256);
    assert_int_equal(p->peak_bytes, peak + 256);
    ot_plan_free(p);
    ot_graph_free(g);
}

/* Reshape -> Flatten -> Unsqueeze -> Squeeze -> Identity: all alias the first base,
 * which lives until the last view is read; an in-place op only takes the block over
 * when nothing reads the base or any view afterwards. */
static void test_view_chain(void **state) {
    (void)state;
    for (int late_read = 0; late_read < 2; late_read++) {
        ot_graph *g = ot_graph_new("chain");
        int x = pc_f32(g, "x", 24, OT_VK_INPUT);
        pc_mark_input(g, x);
        int a = pc_f32(g, "a", 24, OT_VK_ACTIVATION), v[5], t = pc_f32(g, "t", 24, OT_VK_ACTIVATION);
        int y = pc_f32(g, "y", 24, OT_VK_ACTIVATION);
        static const ot_op ops[5] = {OT_OP_RESHAPE, OT_OP_FLATTEN, OT_OP_UNSQUEEZE, OT_OP_SQUEEZE, OT_OP_IDENTITY};
        pc_node1(g, OT_OP_RELU, "relu", x, a, OT_PHASE_FORWARD);
        for (int i = 0; i < 5; i++) {
            char nm[8];
            snprintf(nm, sizeof nm, "v%d", i);
            v[i] = pc_f32(g, nm, 24, OT_VK_ACTIVATION);
            pc_node1(g, ops[i], nm, i ? v[i - 1] : a, v[i], OT_PHASE_FORWARD);
        }
        pc_node1(g, OT_OP_EXP, "exp", v[4], t, OT_PHASE_FORWARD); /* step 6 */
        if (late_read) pc_node2(g, OT_OP_ADD, "add", t, a, y, OT_PHASE_FORWARD);
        else pc_node1(g, OT_OP_NEG, "neg", t, y, OT_PHASE_FORWARD);
        pc_mark_output(g, y);
        ot_plan *p = pc_plan_of(g, NULL, false);
        for (int i = 0; i < 5; i++) {
            assert_int_equal(p->values[v[i]].alias_of, a);
            assert_int_equal(p->values[v[i]].offset, p->values[a].offset);
            assert_int_equal(p->values[v[i]].category, p->values[a].category);
        }
        if (late_read) { /* Add reads a after Exp: Exp must not write over it */
            assert_int_equal(p->values[a].last_step, 7);
            assert_int_equal(p->values[t].inplace_of, -1);
            assert_true(p->values[t].offset != p->values[a].offset);
        } else { /* Exp is the last reader of a and of every view: it takes the block */
            assert_int_equal(p->values[a].last_step, 6);
            assert_int_equal(p->values[t].inplace_of, a);
            assert_int_equal(p->values[t].offset, p->values[a].offset);
            assert_int_equal(p->peak_bytes, p->pinned_bytes + 96); /* one block of 24 floats */
        }
        ot_plan_free(p);
        ot_graph_free(g);
    }
}

/* A view of a param reads the param slab in place. A view that is a graph output or
 * a param's gradient keeps its own pinned slot; so does one an optimizer reads. */
static void test_views_of_pinned_values(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("pinned");
    int x = pc_f32(g, "x", 16, OT_VK_INPUT);
    pc_mark_input(g, x);
    int w = pc_f32(g, "w", 16, OT_VK_PARAM), m = pc_f32(g, "m", 16, OT_VK_OPT_STATE);
    int sc0 = pc_f32(g, "sc0", 4, OT_VK_OPT_STATE), sc = pc_f32(g, "sc", 4, OT_VK_ACTIVATION);
    int wv = pc_f32(g, "wv", 16, OT_VK_ACTIVATION), h = pc_f32(g, "h", 16, OT_VK_ACTIVATION);
    int out = pc_f32(g, "out", 16, OT_VK_ACTIVATION), gt = pc_f32(g, "gt", 16, OT_VK_GRADIENT);
    int gw = pc_f32(g, "gw", 16, OT_VK_GRADIENT);
    pc_node1(g, OT_OP_RESHAPE, "wview", w, wv, OT_PHASE_FORWARD);
    pc_node2(g, OT_OP_MUL, "mul", x, wv, h, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_RESHAPE, "outview", h, out, OT_PHASE_LOSS);
    pc_node2(g, OT_OP_MUL, "grad", h, x, gt, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_RESHAPE, "gview", gt, gw, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_IDENTITY, "scview", sc0, sc, OT_PHASE_BACKWARD);
    int in[4] = {w, gw, m, sc};
    ot_graph_add_node(g, OT_OP_SGD_STEP, "sgd", in, 4, NULL, 0, OT_PHASE_OPTIMIZER);
    pc_mark_output(g, out);
    ot_plan *p = pc_plan_of(g, NULL, false);
    assert_int_equal(p->values[wv].alias_of, w);
    assert_false(p->values[wv].pinned);
    assert_int_equal(p->values[wv].offset, p->values[w].offset);
    assert_int_equal(p->values[wv].category, OT_MEM_PARAMS);
    assert_int_equal(p->total[OT_MEM_PARAMS], 64); /* counted once, as the param */
    assert_int_equal(p->values[out].alias_of, -1); /* a graph output: its own IO slot */
    assert_true(p->values[out].pinned && p->values[out].category == OT_MEM_IO);
    assert_int_equal(p->values[gw].alias_of, -1); /* a param's gradient: its slot in the gradient slab */
    assert_true(p->values[gw].pinned && p->values[gw].category == OT_MEM_GRADIENTS);
    assert_int_equal(p->values[sc].alias_of, -1); /* optimizer nodes may write what they read */
    ot_plan_free(p);

    /* A view of w read after an optimizer step that reads (and may write) w is a copy. */
    int *order = NULL, n = 0;
    ot_error err = {0};
    assert_int_equal(ot_schedule_build(g, &order, &n, &err), OT_OK);
    int late = pc_f32(g, "late", 16, OT_VK_ACTIVATION), wv2 = pc_f32(g, "wv2", 16, OT_VK_ACTIVATION);
    int r = pc_node1(g, OT_OP_RESHAPE, "wview2", w, wv2, OT_PHASE_FORWARD);
    int l = pc_node1(g, OT_OP_NEG, "late", wv2, late, OT_PHASE_FORWARD);
    pc_mark_output(g, late);
    int *o2 = malloc(sizeof(int) * (size_t)(n + 2));
    o2[0] = r;
    memcpy(o2 + 1, order, sizeof(int) * (size_t)n);
    o2[n + 1] = l; /* after sgd */
    assert_int_equal(ot_plan_build(g, o2, n + 2, NULL, &p, &err), OT_OK);
    pc_check_plan(g, p);
    assert_int_equal(p->values[wv2].alias_of, -1);
    assert_int_equal(p->values[wv].alias_of, w); /* read before the step: still an alias */
    ot_plan_free(p);
    free(o2);
    free(order);
    ot_graph_free(g);
}

/* The layout test on its own: which slices are one run, and where. */
static void test_view_offset(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("offset");
    int64_t d3[3] = {2, 3, 4}, d1[3] = {1, 2, 4}, dr[3] = {2, 3, 4};
    ot_shape s3 = ot_shape_make(3, d3), s1 = ot_shape_make(3, d1), sr = ot_shape_make(3, dr);
    int x = ot_graph_add_value(g, "x", OT_F32, &s3, OT_VK_ACTIVATION);
    int y = ot_graph_add_value(g, "y", OT_F32, &s1, OT_VK_ACTIVATION);
    int z = ot_graph_add_value(g, "z", OT_F32, &sr, OT_VK_ACTIVATION);
    int st = i64(g, "st", (int64_t[]){1, 1}, 2), en = i64(g, "en", (int64_t[]){2, 3}, 2);
    int ax = i64(g, "ax", (int64_t[]){0, 1}, 2), one = i64(g, "one", (int64_t[]){1, 1}, 2);
    int rs = i64(g, "rs", (int64_t[]){-1}, 1), re = i64(g, "re", (int64_t[]){INT64_MIN}, 1);
    int ra = i64(g, "ra", (int64_t[]){2}, 1), rstep = i64(g, "rstep", (int64_t[]){-1}, 1);
    int dyn = ot_graph_add_value(g, "dyn", OT_I64, &g->values[st].shape, OT_VK_ACTIVATION); /* no data */
    size_t off = 99;
    /* x[1:2, 1:3, :] = [1,2,4]: one run of 8 floats at element 12 + 4 */
    int n1 = slice(g, "s1", x, y, st, en, ax, one);
    assert_true(ot_plan_view_offset(g, &g->nodes[n1], &off));
    assert_int_equal(off, 16 * sizeof(float));
    /* reversed along the last axis: same shape as x, not a view */
    int n2 = slice(g, "s2", x, z, rs, re, ra, rstep);
    assert_false(ot_plan_view_offset(g, &g->nodes[n2], &off));
    /* bounds that are not constants */
    int n3 = slice(g, "s3", x, y, dyn, en, ax, -1);
    assert_false(ot_plan_view_offset(g, &g->nodes[n3], &off));
    /* a Reshape of another size is not a view */
    int n4 = pc_node1(g, OT_OP_RESHAPE, "r", x, y, OT_PHASE_FORWARD);
    assert_false(ot_plan_view_offset(g, &g->nodes[n4], &off));
    assert_true(ot_plan_view_candidate(&g->nodes[n4]));
    ot_graph_free(g);
}

/* a = Relu(x[4,16]) (rows of 64 bytes), sliced six ways, each slice read by a Neg
 * whose output is a graph output; Neg(a) is a's own last read, and one slice is read
 * only after it. */
static void test_slices(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("slices");
    int x = f32_2d(g, "x", 4, 16, OT_VK_INPUT);
    pc_mark_input(g, x);
    int a = f32_2d(g, "a", 4, 16, OT_VK_ACTIVATION);
    pc_node1(g, OT_OP_RELU, "relu", x, a, OT_PHASE_FORWARD);
    int ax0 = i64(g, "ax0", (int64_t[]){0}, 1), ax1 = i64(g, "ax1", (int64_t[]){1}, 1);
    int ax01 = i64(g, "ax01", (int64_t[]){0, 1}, 2), two = i64(g, "two", (int64_t[]){2}, 1);
    int c0 = i64(g, "c0", (int64_t[]){0}, 1), c1 = i64(g, "c1", (int64_t[]){1}, 1), c2 = i64(g, "c2", (int64_t[]){2}, 1);
    int c3 = i64(g, "c3", (int64_t[]){3}, 1), c8 = i64(g, "c8", (int64_t[]){8}, 1), c16 = i64(g, "c16", (int64_t[]){16}, 1);
    int cm1 = i64(g, "cm1", (int64_t[]){-1}, 1), big = i64(g, "big", (int64_t[]){INT64_MAX}, 1);
    int st04 = i64(g, "st04", (int64_t[]){0, 4}, 2), en112 = i64(g, "en112", (int64_t[]){1, 12}, 2);
    int rows = f32_2d(g, "rows", 2, 16, OT_VK_ACTIVATION), last = f32_2d(g, "last", 1, 16, OT_VK_ACTIVATION);
    int strided = f32_2d(g, "strided", 4, 8, OT_VK_ACTIVATION), cols = f32_2d(g, "cols", 4, 8, OT_VK_ACTIVATION);
    int mis = f32_2d(g, "mis", 1, 8, OT_VK_ACTIVATION), late = f32_2d(g, "late", 2, 16, OT_VK_ACTIVATION);
    slice(g, "rows", a, rows, c1, c3, ax0, -1);        /* rows 1..2: one run at byte 64 */
    slice(g, "last", a, last, cm1, big, ax0, -1);      /* row -1 to the end: at byte 192 */
    slice(g, "strided", a, strided, c0, c16, ax1, two); /* every other column */
    slice(g, "cols", a, cols, c0, c8, ax1, -1);        /* half of every row: four runs */
    slice(g, "mis", a, mis, st04, en112, ax01, -1);    /* one run, at byte 16 */
    int vals[5] = {rows, last, strided, cols, mis}, outs[6];
    for (int i = 0; i < 5; i++) {
        const ot_shape *s = &g->values[vals[i]].shape;
        outs[i] = f32_2d(g, "o", s->dim[0], s->dim[1], OT_VK_ACTIVATION);
        pc_node1(g, OT_OP_NEG, "neg", vals[i], outs[i], OT_PHASE_FORWARD);
        pc_mark_output(g, outs[i]);
    }
    slice(g, "late", a, late, c0, c2, ax0, -1); /* rows 0..1, read after a's last read */
    int own = f32_2d(g, "own", 4, 16, OT_VK_ACTIVATION);
    pc_node1(g, OT_OP_NEG, "a_last", a, own, OT_PHASE_FORWARD);
    pc_mark_output(g, own);
    outs[5] = f32_2d(g, "o", 2, 16, OT_VK_ACTIVATION);
    pc_node1(g, OT_OP_NEG, "late_read", late, outs[5], OT_PHASE_FORWARD);
    pc_mark_output(g, outs[5]);

    ot_plan *p = pc_plan_of(g, NULL, false);
    assert_int_equal(p->values[rows].alias_of, a);
    assert_int_equal(p->values[rows].alias_offset, 64);
    assert_int_equal(p->values[rows].offset, p->values[a].offset + 64);
    assert_int_equal(p->values[last].alias_of, a);
    assert_int_equal(p->values[last].alias_offset, 192);
    assert_int_equal(p->values[strided].alias_of, -1);
    assert_int_equal(p->values[cols].alias_of, -1);
    size_t off = 0; /* one run, but kernels get 64-byte-aligned tensors only */
    assert_true(ot_plan_view_offset(g, &g->nodes[g->values[mis].producer], &off));
    assert_int_equal(off, 16);
    assert_int_equal(p->values[mis].alias_of, -1);
    assert_int_equal(p->values[late].alias_of, -1); /* would keep all of a alive for half of it */
    /* a dies at its own last read, not later */
    assert_int_equal(p->values[a].last_step, g->nodes[g->values[own].producer].id);
    /* the blocks: a, and the three copies */
    assert_int_equal(p->total[OT_MEM_TRANSIENT], 256 + 128 + 128 + 32 + 128);
    ot_plan_free(p);
    ot_graph_free(g);
}

/* A forward view the backward pass reads keeps its base: the base is a kept
 * activation and the view adds no kept bytes. A recompute clone of a view aliases
 * its (kept) input too. */
static void test_views_across_backward(void **state) {
    (void)state;
    for (int clone = 0; clone < 2; clone++) {
        ot_graph *g = ot_graph_new("kept");
        int x = pc_f32(g, "x", 16, OT_VK_INPUT);
        pc_mark_input(g, x);
        int a = pc_f32(g, "a", 16, OT_VK_ACTIVATION), v = pc_f32(g, "v", 16, OT_VK_ACTIVATION);
        int l = pc_f32(g, "l", 16, OT_VK_ACTIVATION), gr = pc_f32(g, "g", 16, OT_VK_GRADIENT);
        int rv = pc_f32(g, "rv", 16, OT_VK_ACTIVATION);
        pc_node1(g, OT_OP_RELU, "relu", x, a, OT_PHASE_FORWARD);
        int nv = pc_node1(g, OT_OP_RESHAPE, "view", a, v, OT_PHASE_FORWARD);
        pc_node1(g, OT_OP_NEG, "loss", v, l, OT_PHASE_LOSS);
        if (clone) {
            int r = pc_node1(g, OT_OP_RESHAPE, "view_clone", a, rv, OT_PHASE_RECOMPUTE);
            g->nodes[r].orig_node = nv;
        }
        pc_node2(g, OT_OP_MUL, "back", l, clone ? rv : v, gr, OT_PHASE_BACKWARD);
        pc_mark_output(g, l);
        pc_mark_output(g, gr);
        ot_plan *p = pc_plan_of(g, NULL, false);
        assert_int_equal(p->values[v].alias_of, a);
        assert_int_equal(p->values[a].category, OT_MEM_KEPT);
        assert_int_equal(p->values[v].category, OT_MEM_KEPT);
        assert_int_equal(p->total[OT_MEM_KEPT], 64);
        assert_true(p->values[a].last_step >= p->backward_step);
        if (clone) assert_int_equal(p->values[rv].alias_of, a);
        ot_plan_free(p);
        ot_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshape_of_transient_takes_no_block),
        cmocka_unit_test(test_view_chain),
        cmocka_unit_test(test_views_of_pinned_values),
        cmocka_unit_test(test_view_offset),
        cmocka_unit_test(test_slices),
        cmocka_unit_test(test_views_across_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
