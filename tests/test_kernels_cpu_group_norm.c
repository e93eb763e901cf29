/* test_kernels_cpu_group_norm.c — InstanceNormalization and GroupNormalization CPU
 * kernels (cpu_group_norm.c) against a plain C reference in double: one group per
 * channel, groups with the scale per channel and per group; num_groups that does not
 * divide C and a scale of the wrong size are refused, naming the node. */
#include "test_kernels_cpu_util.h"

/* y for X [N, C, S], G groups, scale / bias of np elements (C or G). */
static void reference(const float *x, const float *sc, const float *b, double *y, int N, int C, int S, int G, int np,
                      double eps) {
    int cpg = C / G, M = cpg * S;
    for (int n = 0; n < N; n++)
        for (int g = 0; g < G; g++) {
            const float *r = x + (n * G + g) * M;
            double mu = 0, var = 0;
            for (int j = 0; j < M; j++) mu += r[j];
            mu /= M;
            for (int j = 0; j < M; j++) var += (r[j] - mu) * (r[j] - mu);
            var /= M;
            for (int j = 0; j < M; j++) {
                int k = np == C ? g * cpg + j / S : g;
                y[(n * G + g) * M + j] = (r[j] - mu) / sqrt(var + eps) * sc[k] + b[k];
            }
        }
}

static void run_case(ot_op op, int G, int np) {
    enum { N = 2, C = 6, S = 10 };
    float x[N * C * S], y[N * C * S], sc[C], b[C];
    double want[N * C * S];
    tk_fill(x, N * C * S, 21, -3, 3);
    tk_fill(sc, C, 22, 0.5f, 1.5f);
    tk_fill(b, C, 23, -1, 1);
    ot_node n = tk_node(op, 3, 1);
    ot_node_set_attr_float(&n, "epsilon", 1e-4f);
    if (op == OT_OP_GROUP_NORM) ot_node_set_attr_int(&n, "num_groups", G);
    ot_tensor in[3] = {tk_t(OT_F32, x, 4, N, C, 2, 5), tk_t(OT_F32, sc, 1, np), tk_t(OT_F32, b, 1, np)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 4, N, C, 2, 5)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    reference(x, sc, b, want, N, C, S, G, np, 1e-4);
    double err = tk_max_rel(y, want, N * C * S);
    if (err > 1e-5) fail_msg("%s G %d: max relative error %g", ot_op_name(op), G, err);
    tk_node_free(&n);
}

static void test_forward(void **state) {
    (void)state;
    run_case(OT_OP_INSTANCE_NORM, 6, 6);
    run_case(OT_OP_GROUP_NORM, 3, 6); /* opset 21: per channel */
    run_case(OT_OP_GROUP_NORM, 3, 3); /* opset 18: per group */
    run_case(OT_OP_GROUP_NORM, 1, 6);
}

static void test_bad(void **state) {
    (void)state;
    float x[24] = {0}, y[24], sc[4] = {1, 1, 1, 1}, b[4] = {0};
    ot_node n = tk_node(OT_OP_GROUP_NORM, 3, 1);
    ot_node_set_attr_int(&n, "num_groups", 3); /* 4 channels */
    ot_tensor in[3] = {tk_t(OT_F32, x, 3, 2, 4, 3), tk_t(OT_F32, sc, 1, 4), tk_t(OT_F32, b, 1, 4)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 3, 2, 4, 3)};
    assert_int_equal(tk_run(&n, in, out), OT_E_MODEL);
    ot_node_set_attr_int(&n, "num_groups", 2);
    in[1] = tk_t(OT_F32, sc, 1, 3); /* neither C nor G */
    assert_int_equal(tk_run(&n, in, out), OT_E_SHAPE);
    tk_node_free(&n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward),
        cmocka_unit_test(test_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
