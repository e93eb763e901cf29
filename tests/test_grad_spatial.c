/* test_grad_spatial.c — finite-difference checks of the gradient rules of issue 26's
 * spatial ops (ops batch 2): Resize and Upsample (ResizeGrad, the adjoint computed as
 * a gather: every mode, the coordinate transforms PyTorch emits, nearest roundings,
 * cubic with exclude_outside, scales and sizes, axes, downscaling and upscaling), and
 * DepthToSpace (DCR, CRD) and SpaceToDepth (each the other's gradient). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "grad_check.h"

typedef struct rs_case {
    const char *mode, *ctm, *nearest;
    int64_t xd[4], yd[4];
    int n_scales; /* > 0: scales (float), else sizes = yd */
    float scales[4];
    int n_axes;
    int64_t axes[2];
    bool exclude_outside;
} rs_case;

static void check_resize(ot_op op, const rs_case *k) {
    ot_graph *g = gc_graph();
    uint32_t rng = 311;
    int x = gc_param(g, "X", 4, k->xd, &rng, -1, 1, false);
    int in[4] = {x, -1, -1, -1};
    int64_t ns = k->n_scales, nz = k->n_axes > 0 ? k->n_axes : 4, sz[4];
    for (int j = 0; j < nz; j++) sz[j] = k->yd[k->n_axes > 0 ? k->axes[j] : j];
    if (ns > 0) in[2] = gc_const(g, "scales", OT_F32, 1, &ns, k->scales);
    else in[3] = gc_const(g, "sizes", OT_I64, 1, &nz, sz);
    int y = gc_val(g, "Y", OT_F32, 4, k->yd);
    int n = gc_op(g, op, in, op == OT_OP_UPSAMPLE ? 3 : (ns > 0 ? 3 : 4), &y, 1);
    ot_node *nd = &g->nodes[n];
    ot_node_set_attr_string(nd, "mode", k->mode);
    if (k->ctm) ot_node_set_attr_string(nd, "coordinate_transformation_mode", k->ctm);
    if (k->nearest) ot_node_set_attr_string(nd, "nearest_mode", k->nearest);
    if (k->exclude_outside) ot_node_set_attr_int(nd, "exclude_outside", 1);
    if (k->n_axes > 0) ot_node_set_attr_ints(nd, "axes", k->axes, k->n_axes);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_resize_modes(void **state) {
    (void)state;
    static const rs_case cases[] = {
        /* F.interpolate(bilinear, align_corners=False), x2 and x0.6 */
        {"linear", "pytorch_half_pixel", NULL, {1, 2, 3, 4}, {1, 2, 6, 8}, 4, {1, 1, 2, 2}, 0, {0}, false},
        {"linear", "half_pixel", NULL, {1, 2, 5, 5}, {1, 2, 3, 3}, 4, {1, 1, 0.6f, 0.6f}, 0, {0}, false},
        /* align_corners=True through sizes; a non-integer ratio */
        {"linear", "align_corners", NULL, {2, 1, 3, 4}, {2, 1, 5, 7}, 0, {0}, 0, {0}, false},
        /* PyTorch's nearest (asymmetric, floor), up and down */
        {"nearest", "asymmetric", "floor", {1, 2, 3, 2}, {1, 2, 6, 5}, 0, {0}, 0, {0}, false},
        {"nearest", "half_pixel", "round_prefer_ceil", {1, 1, 7, 6}, {1, 1, 3, 4}, 0, {0}, 0, {0}, false},
        {"nearest", "align_corners", "round_prefer_floor", {1, 1, 3, 3}, {1, 1, 5, 8}, 0, {0}, 0, {0}, false},
        /* bicubic (a = -0.75), with and without exclude_outside */
        {"cubic", "pytorch_half_pixel", NULL, {1, 2, 4, 3}, {1, 2, 8, 5}, 0, {0}, 0, {0}, false},
        {"cubic", "half_pixel", NULL, {1, 1, 6, 5}, {1, 1, 4, 9}, 0, {0}, 0, {0}, true},
        {"cubic", "asymmetric", NULL, {1, 1, 3, 3}, {1, 1, 6, 6}, 4, {1, 1, 2, 2}, 0, {0}, false},
        /* axes (opset 18): only the last two, in reverse order */
        {"linear", "half_pixel", NULL, {1, 2, 3, 4}, {1, 2, 5, 2}, 2, {0.5f, 1.7f}, 2, {3, 2}, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_resize(OT_OP_RESIZE, &cases[i]);
    }
}

/* Upsample (opset 7-9): asymmetric transform, floor rounding; scales in slot 2 after
 * normalisation. */
static void test_upsample(void **state) {
    (void)state;
    rs_case n = {"nearest", NULL, NULL, {1, 2, 2, 3}, {1, 2, 4, 6}, 4, {1, 1, 2, 2}, 0, {0}, false};
    check_resize(OT_OP_UPSAMPLE, &n);
    rs_case l = {"linear", NULL, NULL, {1, 1, 3, 2}, {1, 1, 6, 5}, 4, {1, 1, 2, 2.5f}, 0, {0}, false};
    check_resize(OT_OP_UPSAMPLE, &l);
}

/* DepthToSpace in both modes, then SpaceToDepth of its output (the loss reads both,
 * every element weighted differently), and SpaceToDepth with blocksize 3 alone. */
static void test_depth_space(void **state) {
    (void)state;
    for (int m = 0; m < 3; m++) {
        ot_graph *g = gc_graph();
        uint32_t rng = 313;
        int64_t xd[4] = {2, 8, 2, 3}, yd[4] = {2, 2, 4, 6}, x3[4] = {1, 2, 6, 3}, z3[4] = {1, 18, 2, 1};
        int x = gc_param(g, "X", 4, m < 2 ? xd : x3, &rng, -1, 1, false);
        int ys[2], ny = 0;
        if (m < 2) {
            int y = gc_val(g, "Y", OT_F32, 4, yd), z = gc_val(g, "Z", OT_F32, 4, xd);
            int d = gc_op(g, OT_OP_DEPTH_TO_SPACE, &x, 1, &y, 1);
            ot_node_set_attr_int(&g->nodes[d], "blocksize", 2);
            ot_node_set_attr_string(&g->nodes[d], "mode", m ? "CRD" : "DCR");
            int s2 = gc_op(g, OT_OP_SPACE_TO_DEPTH, &y, 1, &z, 1);
            ot_node_set_attr_int(&g->nodes[s2], "blocksize", 2);
            ys[ny++] = y;
            ys[ny++] = z;
        } else {
            int z = gc_val(g, "Z", OT_F32, 4, z3);
            int s3 = gc_op(g, OT_OP_SPACE_TO_DEPTH, &x, 1, &z, 1);
            ot_node_set_attr_int(&g->nodes[s3], "blocksize", 3);
            ys[ny++] = z;
        }
        gc_opts o = {0};
        assert_int_equal(gc_check(g, ys, ny, &o), 0);
        ot_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_depth_space),
        cmocka_unit_test(test_resize_modes),
        cmocka_unit_test(test_upsample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
