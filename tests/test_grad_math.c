/* test_grad_math.c — finite-difference checks of the gradient rules of issue 13's
 * pointwise maths (autodiff/grad_math.c): Abs, Sin, Cos, HardSigmoid, HardSwish,
 * Softplus, Mish, Min and Max (broadcast, two and three inputs), Mod (both operands)
 * and CastLike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "grad_check.h"

/* gc_check_unary draws x from this seed plus the op. */
enum { UNARY_SEED = 17 };

static void hard_sigmoid_attrs(ot_node *n) {
    ot_node_set_attr_float(n, "alpha", 0.3f);
    ot_node_set_attr_float(n, "beta", 0.4f);
}

static void test_unary(void **state) {
    (void)state;
    gc_check_unary(OT_OP_ABS, UNARY_SEED, -1, 1, true, NULL);
    gc_check_unary(OT_OP_SIN, UNARY_SEED, -3, 3, false, NULL);
    gc_check_unary(OT_OP_COS, UNARY_SEED, -3, 3, false, NULL);
    /* kinks at x = -4/3 and 2 (alpha 0.3, beta 0.4); defaults: -2.5 and 2.5 */
    gc_check_unary(OT_OP_HARD_SIGMOID, UNARY_SEED, -1.2f, 1.9f, false, hard_sigmoid_attrs);
    gc_check_unary(OT_OP_HARD_SIGMOID, UNARY_SEED, -2.4f, 2.4f, false, NULL);
    gc_check_unary(OT_OP_HARD_SWISH, UNARY_SEED, -2.9f, 2.9f, false, NULL);
    gc_check_unary(OT_OP_SOFTPLUS, UNARY_SEED, -3, 3, false, NULL);
    gc_check_unary(OT_OP_MISH, UNARY_SEED, -3, 3, false, NULL);
}

/* The flat parts of HardSigmoid and HardSwish pass no gradient: a check that mixes
 * them in, away from the kinks (the FD step is 1e-2). */
static void test_flat_parts(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    int64_t d[1] = {6};
    const float xv[6] = {-5.0f, -3.5f, -1.0f, 0.5f, 3.5f, 6.0f};
    int ys[2];
    for (int k = 0; k < 2; k++) {
        uint32_t rng = 3;
        int x = gc_param(g, k ? "x1" : "x0", 1, d, &rng, 0, 1, false);
        memcpy(g->values[x].data, xv, sizeof xv);
        ys[k] = gc_val(g, k ? "y1" : "y0", OT_F32, 1, d);
        gc_op(g, k ? OT_OP_HARD_SWISH : OT_OP_HARD_SIGMOID, &x, 1, &ys[k], 1);
    }
    gc_opts o = {0};
    assert_int_equal(gc_check(g, ys, 2, &o), 0);
    ot_graph_free(g);
}

/* Moves a's elements at least 0.1 away from b's (broadcast [3, 1]) and c's ([4]), so
 * the finite difference never crosses a switch of the selected input. */
static void keep_apart(float *a, const float *b, const float *c) {
    for (int i = 0; i < 24; i++)
        for (int pass = 0; pass < 4; pass++) {
            float near = fabsf(a[i] - b[(i / 4) % 3]) < 0.1f ? b[(i / 4) % 3] : c && fabsf(a[i] - c[i % 4]) < 0.1f ? c[i % 4] : NAN;
            if (isnan(near)) break;
            a[i] = near + (a[i] >= near ? 0.1f : -0.1f);
        }
}

/* Max / Min of a [2, 3, 4] param and a broadcast [3, 1] one, then of three inputs. */
static void test_min_max(void **state) {
    (void)state;
    ot_op ops[2] = {OT_OP_MAX, OT_OP_MIN};
    for (int k = 0; k < 2; k++) {
        ot_graph *g = gc_graph();
        uint32_t rng = 5 + (uint32_t)k;
        int64_t ad[3] = {2, 3, 4}, bd[2] = {3, 1}, cd[1] = {4};
        int a = gc_param(g, "a", 3, ad, &rng, -1, 1, false);
        int b = gc_param(g, "b", 2, bd, &rng, -1, 1, false);
        keep_apart(g->values[a].data, g->values[b].data, NULL);
        int y = gc_val(g, "y", OT_F32, 3, ad);
        int in[2] = {a, b};
        gc_op(g, ops[k], in, 2, &y, 1);
        assert_int_equal(gc_check1(g, y), 0);
        ot_graph_free(g);

        g = gc_graph();
        a = gc_param(g, "a", 3, ad, &rng, -1, 1, false);
        b = gc_param(g, "b", 2, bd, &rng, -1, 1, false);
        int c = gc_param(g, "c", 1, cd, &rng, -1, 1, false);
        float *cv = g->values[c].data, *bv = g->values[b].data;
        for (int i = 0; i < 4; i++) /* c apart from b too: 0.3 steps from b's first */
            cv[i] = bv[0] + 0.3f * (float)(i + 1) * (i % 2 ? 1.0f : -1.0f);
        keep_apart(g->values[a].data, bv, cv);
        y = gc_val(g, "y", OT_F32, 3, ad);
        int in3[3] = {a, b, c};
        gc_op(g, ops[k], in3, 3, &y, 1);
        assert_int_equal(gc_check1(g, y), 0);
        ot_graph_free(g);
    }
}

/* Mod with fmod = 1 on floats: dA = dY, dB = -dY * trunc(A / B); B broadcast. */
static void test_mod(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 9;
    int64_t ad[2] = {3, 4}, bd[1] = {4};
    int a = gc_param(g, "a", 2, ad, &rng, -3, 3, false);
    int b = gc_param(g, "b", 1, bd, &rng, 0.7f, 1.3f, false);
    int y = gc_val(g, "y", OT_F32, 2, ad);
    int in[2] = {a, b};
    int n = gc_op(g, OT_OP_MOD, in, 2, &y, 1);
    ot_node_set_attr_int(&g->nodes[n], "fmod", 1);
    /* keep A / B off the integers, where fmod jumps */
    float *av = g->values[a].data, *bv = g->values[b].data;
    for (int i = 0; i < 12; i++) {
        float q = av[i] / bv[i % 4], f = q - truncf(q);
        if (fabsf(f) < 0.1f || fabsf(f) > 0.9f) av[i] += 0.5f * bv[i % 4];
    }
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

/* CastLike to float64 and back to float32: the gradient passes through both casts. */
static void test_cast_like(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 13;
    int64_t d[2] = {2, 3}, one[1] = {1};
    double l64 = 0.0;
    float l32 = 0.0f;
    int x = gc_param(g, "x", 2, d, &rng, -1, 1, false);
    int like64 = gc_const(g, "like64", OT_F64, 1, one, &l64);
    int like32 = gc_const(g, "like32", OT_F32, 1, one, &l32);
    int m = gc_val(g, "m", OT_F64, 2, d), y = gc_val(g, "y", OT_F32, 2, d);
    int in1[2] = {x, like64}, in2[2] = {m, like32};
    gc_op(g, OT_OP_CAST_LIKE, in1, 2, &m, 1);
    gc_op(g, OT_OP_CAST_LIKE, in2, 2, &y, 1);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),     cmocka_unit_test(test_flat_parts), cmocka_unit_test(test_min_max),
        cmocka_unit_test(test_mod),       cmocka_unit_test(test_cast_like),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
