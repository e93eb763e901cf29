/* test_kernels_cpu_spatial.c — CPU kernels of issue 26's spatial ops (ops batch 2,
 * kernels/cpu/cpu_spatial.c). ResizeGrad against the dense adjoint of Resize (the
 * matrix A read off the forward kernel one basis vector at a time; dX = A^T dY in
 * double) for every mode, nearest rounding, coordinate transform but
 * tf_crop_and_resize, exclude_outside, axes of size 1 and up- and downscaling by sizes
 * and by scales; the same bits on 1 and 2 threads. DepthToSpace against the
 * Reshape / Transpose definition in both modes, and SpaceToDepth as its inverse. */
#include "test_kernels_cpu_util.h"

typedef struct rs_attrs {
    const char *mode, *ctm, *nearest;
    bool exclude;
} rs_attrs;

static ot_node rs_node(ot_op op, int n_in, const rs_attrs *a) {
    ot_node n = tk_node(op, n_in, 1);
    ot_node_set_attr_string(&n, "mode", a->mode);
    ot_node_set_attr_string(&n, "coordinate_transformation_mode", a->ctm);
    ot_node_set_attr_string(&n, "nearest_mode", a->nearest);
    if (a->exclude) ot_node_set_attr_int(&n, "exclude_outside", 1);
    return n;
}

/* One resize of [1, 2, h, w] to [1, 2, oh, ow] (sizes, or scales sh / sw when given). */
static void check_adjoint(const rs_attrs *a, int h, int w, int oh, int ow, float sh, float sw) {
    int64_t nx = 2 * h * w, ny = 2 * oh * ow, sizes[4] = {1, 2, oh, ow};
    float scales[4] = {1, 1, sh, sw};
    float *x = calloc((size_t)nx, sizeof(float)), *y = malloc((size_t)ny * sizeof(float));
    float *dy = malloc((size_t)ny * sizeof(float)), *dx1 = malloc((size_t)nx * sizeof(float));
    float *dx2 = malloc((size_t)nx * sizeof(float));
    double *ref = calloc((size_t)nx, sizeof(double));
    tk_fill(dy, ny, 7, -1, 1);
    bool by_scales = sh > 0;
    ot_tensor sz = by_scales ? tk_absent() : tk_t(OT_I64, sizes, 1, 4);
    ot_tensor sc = by_scales ? tk_t(OT_F32, scales, 1, 4) : tk_absent();
    ot_node f = rs_node(OT_OP_RESIZE, 4, a), g = rs_node(OT_OP_RESIZE_GRAD, 5, a);
    for (int64_t i = 0; i < nx; i++) { /* column i of A: Resize(e_i) */
        x[i] = 1.0f;
        ot_tensor in[4] = {tk_t(OT_F32, x, 4, 1, 2, h, w), tk_absent(), sc, sz};
        ot_tensor out[1] = {tk_t(OT_F32, y, 4, 1, 2, oh, ow)};
        assert_int_equal(tk_run(&f, in, out), OT_OK);
        for (int64_t o = 0; o < ny; o++) ref[i] += (double)y[o] * dy[o];
        x[i] = 0.0f;
    }
    ot_tensor gin[5] = {tk_t(OT_F32, dy, 4, 1, 2, oh, ow), tk_t(OT_F32, x, 4, 1, 2, h, w), tk_absent(), sc, sz};
    ot_tensor g1[1] = {tk_t(OT_F32, dx1, 4, 1, 2, h, w)}, g2[1] = {tk_t(OT_F32, dx2, 4, 1, 2, h, w)};
    assert_int_equal(tk_run_ex(&g, gin, g1, 1, 0, 0, 0, NULL), OT_OK);
    assert_int_equal(tk_run_ex(&g, gin, g2, 2, 0, 0, 0, NULL), OT_OK);
    assert_memory_equal(dx1, dx2, (size_t)nx * sizeof(float));
    double e = tk_max_rel(dx1, ref, nx);
    if (e > 1e-5)
        fail_msg("%s %s %s%s: [%d,%d] -> [%d,%d]: ResizeGrad differs from Resize's adjoint by %g", a->mode, a->ctm,
                 a->nearest, a->exclude ? " exclude_outside" : "", h, w, oh, ow, e);
    tk_node_free(&f);
    tk_node_free(&g);
    free(x), free(y), free(dy), free(dx1), free(dx2), free(ref);
}

static void test_resize_grad_is_adjoint(void **state) {
    (void)state;
    static const rs_attrs attrs[] = {
        {"nearest", "asymmetric", "floor", false},         {"nearest", "half_pixel", "round_prefer_floor", false},
        {"nearest", "align_corners", "round_prefer_ceil", false}, {"nearest", "pytorch_half_pixel", "ceil", false},
        {"nearest", "half_pixel_symmetric", "floor", false}, {"linear", "half_pixel", "floor", false},
        {"linear", "pytorch_half_pixel", "floor", false},    {"linear", "align_corners", "floor", false},
        {"linear", "asymmetric", "floor", false},            {"linear", "half_pixel_symmetric", "floor", false},
        {"linear", "half_pixel", "floor", true},             {"cubic", "half_pixel", "floor", false},
        {"cubic", "align_corners", "floor", false},          {"cubic", "pytorch_half_pixel", "floor", true},
        {"cubic", "asymmetric", "floor", true},              {"cubic", "half_pixel_symmetric", "floor", false},
    };
    static const int sizes[][4] = {{3, 4, 7, 9}, {7, 6, 3, 2}, {1, 5, 4, 1}, {4, 1, 1, 6}, {5, 5, 5, 12}, {2, 9, 13, 4}};
    for (size_t a = 0; a < sizeof attrs / sizeof attrs[0]; a++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            check_adjoint(&attrs[a], sizes[s][0], sizes[s][1], sizes[s][2], sizes[s][3], 0, 0);
        /* scales whose product is not an integer: floor(5 x 1.7) = 8, floor(6 x 0.45) = 2 */
        check_adjoint(&attrs[a], 5, 6, 8, 2, 1.7f, 0.45f);
    }
}

/* DepthToSpace from its definition: DCR reshapes to [N, b, b, C / b^2, H, W] and
 * transposes to [N, C / b^2, H, b, W, b]; CRD reshapes to [N, C / b^2, b, b, H, W]. */
static void test_depth_space(void **state) {
    (void)state;
    enum { N = 2, C = 12, H = 3, W = 4, B = 2, CO = C / (B * B) };
    float x[N * C * H * W], y[N * C * H * W], back[N * C * H * W];
    tk_fill(x, N * C * H * W, 11, -1, 1);
    for (int crd = 0; crd < 2; crd++) {
        ot_node d = tk_node(OT_OP_DEPTH_TO_SPACE, 1, 1), s = tk_node(OT_OP_SPACE_TO_DEPTH, 1, 1);
        ot_node_set_attr_int(&d, "blocksize", B);
        ot_node_set_attr_int(&s, "blocksize", B);
        ot_node_set_attr_string(&d, "mode", crd ? "CRD" : "DCR");
        ot_node_set_attr_string(&s, "mode", crd ? "CRD" : "DCR");
        ot_tensor in[1] = {tk_t(OT_F32, x, 4, N, C, H, W)}, out[1] = {tk_t(OT_F32, y, 4, N, CO, H * B, W * B)};
        assert_int_equal(tk_run(&d, in, out), OT_OK);
        for (int n = 0; n < N; n++)
            for (int c = 0; c < CO; c++)
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < B; i++)
                        for (int w = 0; w < W; w++)
                            for (int j = 0; j < B; j++) {
                                int ch = crd ? (c * B + i) * B + j : (i * B + j) * CO + c;
                                float want = x[((n * C + ch) * H + h) * W + w];
                                float got = y[((n * CO + c) * H * B + h * B + i) * W * B + w * B + j];
                                assert_true(got == want);
                            }
        ot_tensor sin[1] = {out[0]}, sout[1] = {tk_t(OT_F32, back, 4, N, C, H, W)};
        assert_int_equal(tk_run(&s, sin, sout), OT_OK);
        assert_memory_equal(back, x, sizeof x);
        tk_node_free(&d);
        tk_node_free(&s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resize_grad_is_adjoint),
        cmocka_unit_test(test_depth_space),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
