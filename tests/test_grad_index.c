/* test_grad_index.c — finite-difference checks of the gradient rules of the layout and
 * indexing ops of issue 13 (autodiff/grad_index.c): Pad in every mode (with crops and
 * an axes input), Tile, Trilu, GatherElements (repeated indices add up), CumSum
 * (exclusive, reverse), ScatterND and ScatterElements (reduction none and add; data and
 * updates) and GatherND. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "grad_check.h"

static void check_pad(const char *mode, int n_pads, const int64_t *pads, const int64_t *axes, int n_axes,
                      const int64_t *yd) {
    ot_graph *g = gc_graph();
    uint32_t rng = 91;
    int64_t xd[3] = {2, 3, 4}, np = n_pads, na = n_axes;
    int x = gc_param(g, "X", 3, xd, &rng, -1, 1, false);
    float value = 0.5f;
    int in[4] = {x, gc_const(g, "pads", OT_I64, 1, &np, pads), gc_const(g, "value", OT_F32, 0, NULL, &value), -1};
    if (axes) in[3] = gc_const(g, "axes", OT_I64, 1, &na, axes);
    int y = gc_val(g, "Y", OT_F32, 3, yd);
    int n = gc_op(g, OT_OP_PAD, in, axes ? 4 : 3, &y, 1);
    ot_node_set_attr_string(&g->nodes[n], "mode", mode);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_pad_modes(void **state) {
    (void)state;
    const char *modes[4] = {"constant", "reflect", "edge", "wrap"};
    /* pads larger than the axis (reflect repeats its period; wrap goes round twice) */
    int64_t pads[6] = {0, 2, 3, 1, 2, 5}, yd[3] = {3, 7, 12};
    /* a crop on one axis, padding on another, through the axes input */
    int64_t pads2[4] = {-1, 2, 0, 1}, axes2[2] = {2, -2}, yd2[3] = {2, 6, 3};
    for (int m = 0; m < 4; m++) {
        check_pad(modes[m], 6, pads, NULL, 0, yd);
        check_pad(modes[m], 4, pads2, axes2, 2, yd2);
    }
}

static void test_tile(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 92;
    int64_t xd[3] = {2, 1, 3}, yd[3] = {4, 3, 3}, three = 3, rep[3] = {2, 3, 1};
    int x = gc_param(g, "X", 3, xd, &rng, -1, 1, false);
    int in[2] = {x, gc_const(g, "repeats", OT_I64, 1, &three, rep)};
    int y = gc_val(g, "Y", OT_F32, 3, yd);
    gc_op(g, OT_OP_TILE, in, 2, &y, 1);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_trilu(void **state) {
    (void)state;
    for (int upper = 0; upper < 2; upper++)
        for (int64_t k = -1; k <= 2; k++) {
            ot_graph *g = gc_graph();
            uint32_t rng = 93;
            int64_t xd[3] = {2, 3, 4};
            int x = gc_param(g, "X", 3, xd, &rng, -1, 1, false);
            int in[2] = {x, gc_const(g, "k", OT_I64, 0, NULL, &k)};
            int y = gc_val(g, "Y", OT_F32, 3, xd);
            int n = gc_op(g, OT_OP_TRILU, in, k == 0 ? 1 : 2, &y, 1);
            ot_node_set_attr_int(&g->nodes[n], "upper", upper);
            assert_int_equal(gc_check1(g, y), 0);
            ot_graph_free(g);
        }
}

static void test_gather_elements(void **state) {
    (void)state;
    for (int axis = -1; axis < 2; axis++) {
        ot_graph *g = gc_graph();
        uint32_t rng = 94;
        int64_t xd[2] = {3, 4}, idd[2] = {2, 3};
        int64_t idx[6] = {1, 2, -1, 0, 2, 2}; /* repeated indices add up; -1 counts from the end */
        int x = gc_param(g, "X", 2, xd, &rng, -1, 1, false);
        int in[2] = {x, gc_const(g, "idx", OT_I64, 2, idd, idx)};
        int y = gc_val(g, "Y", OT_F32, 2, idd);
        int n = gc_op(g, OT_OP_GATHER_ELEMENTS, in, 2, &y, 1);
        ot_node_set_attr_int(&g->nodes[n], "axis", axis);
        assert_int_equal(gc_check1(g, y), 0);
        ot_graph_free(g);
    }
}

static void test_cumsum(void **state) {
    (void)state;
    for (int mode = 0; mode < 4; mode++)
        for (int64_t axis = -1; axis < 3; axis++) {
            ot_graph *g = gc_graph();
            uint32_t rng = 95;
            int64_t xd[3] = {2, 3, 4};
            int x = gc_param(g, "X", 3, xd, &rng, -1, 1, false);
            int in[2] = {x, gc_const(g, "axis", OT_I64, 0, NULL, &axis)};
            int y = gc_val(g, "Y", OT_F32, 3, xd);
            int n = gc_op(g, OT_OP_CUMSUM, in, 2, &y, 1);
            ot_node_set_attr_int(&g->nodes[n], "exclusive", mode & 1);
            ot_node_set_attr_int(&g->nodes[n], "reverse", mode >> 1);
            assert_int_equal(gc_check1(g, y), 0);
            ot_graph_free(g);
        }
}

/* ScatterND (none, add) and ScatterElements (none, add): gradients of data and of the
 * updates; repeated indices with add. GatherND: a scatter-add back. */
static void check_scatter(ot_op op, const char *reduction) {
    ot_graph *g = gc_graph();
    uint32_t rng = 96;
    int64_t xd[2] = {4, 3};
    int x = gc_param(g, "X", 2, xd, &rng, -1, 1, false);
    int in[3] = {x, -1, -1};
    bool add = reduction[0] == 'a';
    if (op == OT_OP_SCATTER_ND) {
        int64_t id[2] = {2, 1}, ud[2] = {2, 3}, idx[2] = {3, add ? 3 : 1}; /* rows */
        in[1] = gc_const(g, "idx", OT_I64, 2, id, idx);
        in[2] = gc_param(g, "U", 2, ud, &rng, -1, 1, false);
    } else {
        int64_t id[2] = {2, 3}, idx[6] = {1, 0, 3, add ? 1 : 2, 2, -4}; /* -4: row 0; no repeats without add */
        in[1] = gc_const(g, "idx", OT_I64, 2, id, idx);
        in[2] = gc_param(g, "U", 2, id, &rng, -1, 1, false);
    }
    int y = gc_val(g, "Y", OT_F32, 2, xd);
    int n = gc_op(g, op, in, 3, &y, 1);
    ot_node_set_attr_string(&g->nodes[n], "reduction", reduction);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_scatter(void **state) {
    (void)state;
    check_scatter(OT_OP_SCATTER_ND, "none");
    check_scatter(OT_OP_SCATTER_ND, "add");
    check_scatter(OT_OP_SCATTER_ELEMENTS, "none");
    check_scatter(OT_OP_SCATTER_ELEMENTS, "add");
}

static void test_gather_nd(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 97;
    int64_t xd[3] = {3, 2, 4}, id[2] = {3, 2}, idx[6] = {2, 1, 0, -1, 2, 1}, yd[2] = {3, 4};
    int x = gc_param(g, "X", 3, xd, &rng, -1, 1, false);
    int in[2] = {x, gc_const(g, "idx", OT_I64, 2, id, idx)}; /* the tuple (2, 1) twice: adds up */
    int y = gc_val(g, "Y", OT_F32, 2, yd);
    gc_op(g, OT_OP_GATHER_ND, in, 2, &y, 1);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pad_modes), cmocka_unit_test(test_tile),   cmocka_unit_test(test_trilu),
        cmocka_unit_test(test_gather_elements), cmocka_unit_test(test_cumsum),  cmocka_unit_test(test_scatter),
        cmocka_unit_test(test_gather_nd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
