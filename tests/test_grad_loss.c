/* test_grad_loss.c — finite-difference checks of the loss rules:
 * SoftmaxCrossEntropyLoss (mean / sum / none, ignore_index, class weights, [N, C, d]
 * scores, the log_prob output), NegativeLogLikelihoodLoss and MseLoss. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "grad_check.h"

static void check_sce(ot_op op, const char *reduction, bool weights, bool ignore, bool spatial, bool log_prob) {
    ot_graph *g = gc_graph();
    uint32_t rng = 91;
    int64_t xd[3] = {4, 3, 2}, ld[2] = {4, 2}, c = 3;
    int64_t labels[8] = {0, 2, 1, 1, 2, 0, 1, 2};
    int rank = spatial ? 3 : 2;
    int x = gc_param(g, "scores", rank, xd, &rng, -2, 2, false);
    int l = gc_const(g, "labels", OT_I64, rank - 1, ld, labels);
    float w[3] = {0.5f, 1.5f, 1.0f};
    int in[3] = {x, l, weights ? gc_const(g, "weight", OT_F32, 1, &c, w) : -1};
    bool none = reduction[0] == 'n';
    int y = none ? gc_val(g, "loss", OT_F32, rank - 1, ld) : gc_val(g, "loss", OT_F32, 0, NULL);
    int outs[2] = {y, log_prob ? gc_val(g, "log_prob", OT_F32, rank, xd) : -1};
    int n = gc_op(g, op, in, weights ? 3 : 2, outs, log_prob ? 2 : 1);
    ot_node_set_attr_string(&g->nodes[n], "reduction", reduction);
    if (ignore) ot_node_set_attr_int(&g->nodes[n], "ignore_index", 1);
    assert_int_equal(gc_check(g, outs, log_prob ? 2 : 1, NULL), 0);
    ot_graph_free(g);
}

static void test_softmax_cross_entropy(void **state) {
    (void)state;
    ot_op op = OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS;
    check_sce(op, "mean", false, false, false, false);
    check_sce(op, "sum", false, false, false, false);
    check_sce(op, "none", false, false, false, false);
    check_sce(op, "mean", true, false, false, false);
    check_sce(op, "mean", false, true, false, false);
    check_sce(op, "mean", true, true, true, false);
    check_sce(op, "mean", false, false, false, true);
}

static void test_nll(void **state) {
    (void)state;
    ot_op op = OT_OP_NLL_LOSS;
    check_sce(op, "mean", false, false, false, false);
    check_sce(op, "none", false, false, true, false);
    check_sce(op, "mean", true, true, true, false);
    check_sce(op, "sum", true, false, false, false);
}

static void test_mse(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 93;
    int64_t d[2] = {3, 4};
    int x = gc_param(g, "X", 2, d, &rng, -1, 1, false);
    int t = gc_param(g, "T", 2, d, &rng, -1, 1, false); /* both sides get gradients */
    int y = gc_val(g, "loss", OT_F32, 0, NULL);
    int in[2] = {x, t};
    ot_graph_add_node(g, OT_OP_MSE_LOSS, "mse", in, 2, &y, 1, OT_PHASE_LOSS);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

/* BceWithLogitsLoss / L1Loss against finite differences, the targets a constant (the
 * loss builders feed them as data: no gradient). L1's targets are 0 and its X at least
 * 0.2 from 0, so the difference never straddles the kink. */
static void check_elementwise(ot_op op, float lo, float hi, float tlo, float thi) {
    ot_graph *g = gc_graph();
    uint32_t rng = 17;
    int64_t d[2] = {3, 5};
    int x = gc_param(g, "X", 2, d, &rng, lo, hi, true);
    float tv[15];
    for (int i = 0; i < 15; i++) tv[i] = tlo + (thi - tlo) * gc_rand(&rng);
    int t = gc_const(g, "T", OT_F32, 2, d, tv);
    int y = gc_val(g, "loss", OT_F32, 0, NULL);
    int in[2] = {x, t};
    ot_graph_add_node(g, op, "loss", in, 2, &y, 1, OT_PHASE_LOSS);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_bce_logits(void **state) {
    (void)state;
    check_elementwise(OT_OP_BCE_LOGITS_LOSS, -4, 4, 0, 1);
    check_elementwise(OT_OP_BCE_LOGITS_LOSS, -40, 40, 0, 1); /* saturated: exp never overflows */
}

static void test_l1(void **state) {
    (void)state;
    check_elementwise(OT_OP_L1_LOSS, -1, 1, 0, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_cross_entropy),
        cmocka_unit_test(test_nll),
        cmocka_unit_test(test_mse),
        cmocka_unit_test(test_bce_logits),
        cmocka_unit_test(test_l1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
