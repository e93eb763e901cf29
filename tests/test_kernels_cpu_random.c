/* test_kernels_cpu_random.c — Philox4x32-10 against the Random123 known-answer
 * vectors, and Dropout: same key -> same mask, different step or node -> different
 * mask, keep rate ~ 1 - ratio, kept values scaled by 1/(1-ratio), inference mode is
 * the identity, and the mask does not depend on the thread count. RandomUniformLike
 * and RandomUniform (issue 13): low + u * (high - low) of the same generator, keyed
 * alike, in [low, high), with a mean near the middle. */
#include "exec/rng.h"
#include "test_kernels_cpu_util.h"

static void test_philox_kat(void **state) {
    (void)state;
    /* Random123 kat_vectors: philox4x32 10 rounds */
    struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[3] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        ot_philox4x32_10(kat[i].ctr, kat[i].key, out);
        for (int j = 0; j < 4; j++) assert_int_equal(out[j], kat[i].out[j]);
    }
    /* the documented layout: uniform = (out[0] >> 8) * 2^-24 with ctr = {idx, idx>>32, step, node} */
    uint32_t key[2] = {0x89abcdefu, 0x01234567u}, ctr[4] = {5, 1, 9, 3}, out[4];
    ot_philox4x32_10(ctr, key, out);
    float u = ot_philox_uniform(0x0123456789abcdefULL, 9, 3, (1ULL << 32) + 5);
    assert_true(u == (float)(out[0] >> 8) / 16777216.0f);
    assert_true(u >= 0.0f && u < 1.0f);
}

static int run_dropout(float *x, float *y, uint8_t *mask, int n, float ratio, int training, uint64_t step, int node,
                       int threads) {
    ot_node d = tk_node(OT_OP_DROPOUT, 1, 2);
    ot_node_set_attr_float(&d, "ratio", ratio);
    ot_node_set_attr_int(&d, "training_mode", training);
    ot_tensor in[1] = {tk_t(OT_F32, x, 1, n)};
    ot_tensor out[2] = {tk_t(OT_F32, y, 1, n), tk_t(OT_BOOL, mask, 1, n)};
    ot_status st = tk_run_ex(&d, in, out, threads, 42, step, node, NULL);
    tk_node_free(&d);
    return st;
}

static void test_dropout(void **state) {
    (void)state;
    enum { N = 100000 };
    float *x = malloc(N * sizeof(float)), *y1 = malloc(N * sizeof(float)), *y2 = malloc(N * sizeof(float));
    uint8_t *m1 = malloc(N), *m2 = malloc(N);
    tk_fill(x, N, 1, 0.5f, 1.5f);
    assert_int_equal(run_dropout(x, y1, m1, N, 0.3f, 1, 7, 5, 2), OT_OK);
    /* kept values scaled, dropped zero; keep rate near 0.7 (5 sigma ~ 0.0073) */
    int kept = 0;
    for (int i = 0; i < N; i++) {
        if (m1[i]) {
            kept++;
            assert_true(y1[i] == x[i] * (1.0f / 0.7f));
        } else {
            assert_true(y1[i] == 0.0f);
        }
    }
    double rate = (double)kept / N;
    assert_true(fabs(rate - 0.7) < 0.0073);
    /* same key, one thread: same mask and values (a recompute reproduces it) */
    assert_int_equal(run_dropout(x, y2, m2, N, 0.3f, 1, 7, 5, 1), OT_OK);
    assert_memory_equal(m1, m2, N);
    assert_memory_equal(y1, y2, N * sizeof(float));
    /* another step or another node: a different mask */
    assert_int_equal(run_dropout(x, y2, m2, N, 0.3f, 1, 8, 5, 2), OT_OK);
    int same = 0;
    for (int i = 0; i < N; i++) same += m1[i] == m2[i];
    assert_true(same < N * 0.65); /* independent masks agree ~58% of the time */
    assert_int_equal(run_dropout(x, y2, m2, N, 0.3f, 1, 7, 6, 2), OT_OK);
    same = 0;
    for (int i = 0; i < N; i++) same += m1[i] == m2[i];
    assert_true(same < N * 0.65);
    /* inference: identity, mask all true */
    assert_int_equal(run_dropout(x, y2, m2, N, 0.3f, 0, 7, 5, 2), OT_OK);
    assert_memory_equal(x, y2, N * sizeof(float));
    for (int i = 0; i < N; i++) assert_int_equal(m2[i], 1);
    /* the mask is ot_dropout_keep element by element (the rule DropoutGrad reuses) */
    for (int i = 0; i < 1000; i++) assert_int_equal(m1[i], ot_dropout_keep(42, 7, 5, (uint64_t)i, 0.3f));
    free(x);
    free(y1);
    free(y2);
    free(m1);
    free(m2);
}

static int run_uniform(ot_op op, float *x, float *y, int n, float low, float high, uint64_t step, int node,
                       int threads) {
    ot_node u = tk_node(op, op == OT_OP_RANDOM_UNIFORM_LIKE ? 1 : 0, 1);
    ot_node_set_attr_float(&u, "low", low);
    ot_node_set_attr_float(&u, "high", high);
    ot_tensor in[1] = {tk_t(OT_F32, x, 1, n)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 1, n)};
    ot_status st = tk_run_ex(&u, in, out, threads, 42, step, node, NULL);
    tk_node_free(&u);
    return st;
}

static void test_random_uniform(void **state) {
    (void)state;
    enum { N = 100000 };
    float *x = malloc(N * sizeof(float)), *y1 = malloc(N * sizeof(float)), *y2 = malloc(N * sizeof(float));
    tk_fill(x, N, 1, 0.5f, 1.5f);
    assert_int_equal(run_uniform(OT_OP_RANDOM_UNIFORM_LIKE, x, y1, N, -2.0f, 3.0f, 7, 5, 2), OT_OK);
    double sum = 0;
    for (int i = 0; i < N; i++) {
        assert_true(y1[i] >= -2.0f && y1[i] < 3.0f);
        sum += y1[i];
        /* element by element the generator's uniform, scaled: Dropout's draws */
        if (i < 1000) assert_true(y1[i] == -2.0f + ot_philox_uniform(42, 7, 5, (uint64_t)i) * 5.0f);
    }
    assert_true(fabs(sum / N - 0.5) < 0.03); /* sd of the mean ~ 5 / sqrt(12 N) = 0.0046 */
    /* same key on one thread, and RandomUniform: the same values (a recompute draws them again) */
    assert_int_equal(run_uniform(OT_OP_RANDOM_UNIFORM_LIKE, x, y2, N, -2.0f, 3.0f, 7, 5, 1), OT_OK);
    assert_memory_equal(y1, y2, N * sizeof(float));
    assert_int_equal(run_uniform(OT_OP_RANDOM_UNIFORM, x, y2, N, -2.0f, 3.0f, 7, 5, 2), OT_OK);
    assert_memory_equal(y1, y2, N * sizeof(float));
    /* another step or another node: other values */
    assert_int_equal(run_uniform(OT_OP_RANDOM_UNIFORM_LIKE, x, y2, N, -2.0f, 3.0f, 8, 5, 2), OT_OK);
    int same = 0;
    for (int i = 0; i < N; i++) same += y1[i] == y2[i];
    assert_true(same < N / 100);
    assert_int_equal(run_uniform(OT_OP_RANDOM_UNIFORM_LIKE, x, y2, N, -2.0f, 3.0f, 7, 6, 2), OT_OK);
    same = 0;
    for (int i = 0; i < N; i++) same += y1[i] == y2[i];
    assert_true(same < N / 100);
    /* defaults [0, 1): Dropout's own uniforms; low above high is the model's error */
    ot_node d = tk_node(OT_OP_RANDOM_UNIFORM_LIKE, 1, 1);
    ot_tensor in[1] = {tk_t(OT_F32, x, 1, N)}, out[1] = {tk_t(OT_F32, y2, 1, N)};
    assert_int_equal(tk_run_ex(&d, in, out, 2, 42, 7, 5, NULL), OT_OK);
    for (int i = 0; i < 1000; i++) assert_true(y2[i] == ot_philox_uniform(42, 7, 5, (uint64_t)i));
    tk_node_free(&d);
    assert_int_equal(run_uniform(OT_OP_RANDOM_UNIFORM_LIKE, x, y2, N, 1.0f, 0.0f, 7, 5, 2), OT_E_MODEL);
    free(x);
    free(y1);
    free(y2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_kat),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_random_uniform),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
