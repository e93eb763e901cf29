/* test_kernels_cpu_math.c — CPU compute kernels against naive double-precision
 * loops written here: activations, Pow, Clip, Gelu, Gemm, MatMul (batched,
 * broadcast, 1-D), Softmax / LogSoftmax (incl. legacy 2-D), ReduceMean / ReduceSum,
 * Sum, BatchNorm (training update), LayerNorm, losses, and the Philox generator
 * (Random123 known answers) with Dropout mask determinism. */
#include "exec/rng.h"
#include "test_kernels_cpu_util.h"

static double ref_unary(ot_op op, double x) {
    switch (op) {
    case OT_OP_SQRT: return sqrt(x);
    case OT_OP_RECIPROCAL: return 1.0 / x;
    case OT_OP_NEG: return -x;
    case OT_OP_EXP: return exp(x);
    case OT_OP_LOG: return log(x);
    case OT_OP_ERF: return erf(x);
    case OT_OP_TANH: return tanh(x);
    case OT_OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case OT_OP_RELU: return x > 0 ? x : 0;
    case OT_OP_LEAKY_RELU: return x >= 0 ? x : 0.2 * x;
    case OT_OP_CLIP: return x < -0.5 ? -0.5 : x > 1.0 ? 1.0 : x;
    case OT_OP_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    default: return NAN;
    }
}

static void test_unary(void **state) {
    (void)state;
    enum { N = 40000 }; /* large enough to take the threaded path */
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    double *want = malloc(N * sizeof(double));
    ot_op ops[] = {OT_OP_SQRT, OT_OP_RECIPROCAL, OT_OP_NEG,  OT_OP_EXP,        OT_OP_LOG,  OT_OP_ERF,
                   OT_OP_TANH, OT_OP_SIGMOID,    OT_OP_RELU, OT_OP_LEAKY_RELU, OT_OP_CLIP, OT_OP_GELU};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        bool positive = ops[k] == OT_OP_SQRT || ops[k] == OT_OP_LOG || ops[k] == OT_OP_RECIPROCAL;
        tk_fill(x, N, (uint32_t)k, positive ? 0.1f : -6.0f, 6.0f);
        ot_node n = tk_node(ops[k], 1, 1);
        if (ops[k] == OT_OP_LEAKY_RELU) ot_node_set_attr_float(&n, "alpha", 0.2f);
        if (ops[k] == OT_OP_CLIP) {
            ot_node_set_attr_float(&n, "min", -0.5f);
            ot_node_set_attr_float(&n, "max", 1.0f);
        }
        ot_tensor in[1] = {tk_t(OT_F32, x, 2, 200, 200)};
        ot_tensor out[1] = {tk_t(OT_F32, y, 2, 200, 200)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        for (int i = 0; i < N; i++) want[i] = ref_unary(ops[k], x[i]);
        double e = tk_max_rel(y, want, N);
        if (e > 2e-6) print_error("%s: max rel err %g\n", ot_op_name(ops[k]), e);
        assert_true(e < 2e-6);
        tk_node_free(&n);
    }
    /* Gelu tanh approximation */
    tk_fill(x, 1000, 99, -5, 5);
    ot_node g = tk_node(OT_OP_GELU, 1, 1);
    ot_node_set_attr_string(&g, "approximate", "tanh");
    ot_tensor in[1] = {tk_t(OT_F32, x, 1, 1000)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 1, 1000)};
    assert_int_equal(tk_run(&g, in, out), OT_OK);
    for (int i = 0; i < 1000; i++) {
        double v = x[i];
        want[i] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    }
    assert_true(tk_max_rel(y, want, 1000) < 2e-6);
    tk_node_free(&g);
    /* Pow with a broadcast float exponent and an int64 scalar exponent */
    float base[6] = {0.5f, 1, 2, 3, 4, 5}, ex[3] = {2, 0.5f, -1}, py[6];
    ot_node p = tk_node(OT_OP_POW, 2, 1);
    ot_tensor pin[2] = {tk_t(OT_F32, base, 2, 2, 3), tk_t(OT_F32, ex, 1, 3)};
    ot_tensor pout[1] = {tk_t(OT_F32, py, 2, 2, 3)};
    assert_int_equal(tk_run(&p, pin, pout), OT_OK);
    for (int i = 0; i < 6; i++) want[i] = pow(base[i], ex[i % 3]);
    assert_true(tk_max_rel(py, want, 6) < 1e-6);
    int64_t three = 3;
    pin[1] = tk_t(OT_I64, &three, 0);
    assert_int_equal(tk_run(&p, pin, pout), OT_OK);
    for (int i = 0; i < 6; i++) want[i] = pow(base[i], 3);
    assert_true(tk_max_rel(py, want, 6) < 1e-6);
    free(x);
    free(y);
    free(want);
}

static void naive_mm(const float *a, const float *b, double *c, int M, int N, int K, bool ta, bool tb) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)(ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
            c[i * N + j] = s;
        }
}

static void test_gemm(void **state) {
    (void)state;
    enum { M = 5, N = 7, K = 6 };
    float a[M * K], b[K * N], c[N], y[M * N];
    double want[M * N];
    tk_fill(a, M * K, 3, -1, 1);
    tk_fill(b, K * N, 4, -1, 1);
    tk_fill(c, N, 5, -1, 1);
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        ot_node n = tk_node(OT_OP_GEMM, 3, 1);
        ot_node_set_attr_int(&n, "transA", ta);
        ot_node_set_attr_int(&n, "transB", tb);
        ot_node_set_attr_float(&n, "alpha", 0.5f);
        ot_node_set_attr_float(&n, "beta", 2.0f);
        ot_tensor in[3] = {ta ? tk_t(OT_F32, a, 2, K, M) : tk_t(OT_F32, a, 2, M, K),
                           tb ? tk_t(OT_F32, b, 2, N, K) : tk_t(OT_F32, b, 2, K, N), tk_t(OT_F32, c, 1, N)};
        ot_tensor out[1] = {tk_t(OT_F32, y, 2, M, N)};
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        naive_mm(a, b, want, M, N, K, ta, tb);
        for (int i = 0; i < M * N; i++) want[i] = 0.5 * want[i] + 2.0 * c[i % N];
        assert_true(tk_max_rel(y, want, M * N) < 1e-5);
        /* without C */
        n.n_inputs = 2;
        assert_int_equal(tk_run(&n, in, out), OT_OK);
        naive_mm(a, b, want, M, N, K, ta, tb);
        for (int i = 0; i < M * N; i++) want[i] *= 0.5;
        assert_true(tk_max_rel(y, want, M * N) < 1e-5);
        tk_node_free(&n);
    }
}

static void test_matmul(void **state) {
    (void)state;
    /* A [2,1,3,4] x B [3,4,5] -> [2,3,3,5] */
    float a[2 * 3 * 4], b[3 * 4 * 5], y[2 * 3 * 3 * 5];
    double want[90], tmp[15];
    tk_fill(a, 24, 6, -1, 1);
    tk_fill(b, 60, 7, -1, 1);
    ot_node n = tk_node(OT_OP_MATMUL, 2, 1);
    ot_tensor in[2] = {tk_t(OT_F32, a, 4, 2, 1, 3, 4), tk_t(OT_F32, b, 3, 3, 4, 5)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 4, 2, 3, 3, 5)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            naive_mm(a + i * 12, b + j * 20, tmp, 3, 5, 4, false, false);
            memcpy(want + (i * 3 + j) * 15, tmp, sizeof tmp);
        }
    assert_true(tk_max_rel(y, want, 90) < 1e-5);
    /* A [2,3,4] x B [4,5] (one tall GEMM) */
    in[0] = tk_t(OT_F32, a, 3, 2, 3, 4);
    in[1] = tk_t(OT_F32, b, 2, 4, 5);
    out[0] = tk_t(OT_F32, y, 3, 2, 3, 5);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    naive_mm(a, b, want, 6, 5, 4, false, false);
    assert_true(tk_max_rel(y, want, 30) < 1e-5);
    /* 1-D x 2-D and 2-D x 1-D */
    in[0] = tk_t(OT_F32, a, 1, 4);
    out[0] = tk_t(OT_F32, y, 1, 5);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    naive_mm(a, b, want, 1, 5, 4, false, false);
    assert_true(tk_max_rel(y, want, 5) < 1e-5);
    in[0] = tk_t(OT_F32, b, 2, 5, 4);
    in[1] = tk_t(OT_F32, a, 1, 4);
    out[0] = tk_t(OT_F32, y, 1, 5);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    naive_mm(b, a, want, 5, 1, 4, false, false);
    assert_true(tk_max_rel(y, want, 5) < 1e-5);
    /* int64 is not a MatMul dtype here: unsupported, naming the node */
    in[0].dtype = OT_I64;
    ot_error e = {0};
    assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, &e), OT_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "'k'"));
    assert_false(ot_cpu_supports(&n, in, out));
}

static void test_softmax(void **state) {
    (void)state;
    /* [2,3,4], axis 1 (strided) and legacy_2d axis 1 (over 12) */
    float x[24], y[24];
    double want[24];
    tk_fill(x, 24, 8, -3, 3);
    for (int lg = 0; lg < 2; lg++) {
        for (int legacy = 0; legacy < 2; legacy++) {
            ot_node n = tk_node(lg ? OT_OP_LOG_SOFTMAX : OT_OP_SOFTMAX, 1, 1);
            ot_node_set_attr_int(&n, "axis", 1);
            if (legacy) ot_node_set_attr_int(&n, "legacy_2d", 1);
            ot_tensor in[1] = {tk_t(OT_F32, x, 3, 2, 3, 4)};
            ot_tensor out[1] = {tk_t(OT_F32, y, 3, 2, 3, 4)};
            assert_int_equal(tk_run(&n, in, out), OT_OK);
            for (int b = 0; b < 2; b++) {
                if (legacy) {
                    double s = 0;
                    for (int k = 0; k < 12; k++) s += exp(x[b * 12 + k]);
                    for (int k = 0; k < 12; k++)
                        want[b * 12 + k] = lg ? x[b * 12 + k] - log(s) : exp(x[b * 12 + k]) / s;
                } else {
                    for (int i = 0; i < 4; i++) {
                        double s = 0;
                        for (int c = 0; c < 3; c++) s += exp(x[b * 12 + c * 4 + i]);
                        for (int c = 0; c < 3; c++) {
                            double v = x[b * 12 + c * 4 + i];
                            want[b * 12 + c * 4 + i] = lg ? v - log(s) : exp(v) / s;
                        }
                    }
                }
            }
            assert_true(tk_max_rel(y, want, 24) < 1e-6);
            tk_node_free(&n);
        }
    }
}

static void test_reduce_sum(void **state) {
    (void)state;
    float x[2 * 3 * 4 * 5], y[60];
    double want[60];
    tk_fill(x, 120, 9, -1, 1);
    /* axes sets: {1} (middle), {0,2} (non-adjacent), {3} (last), all; keepdims irrelevant to data */
    int64_t sets[4][4] = {{1}, {0, 2}, {-1}, {0, 1, 2, 3}};
    int counts[4] = {1, 2, 1, 4};
    for (int mean = 0; mean < 2; mean++) {
        for (int s = 0; s < 4; s++) {
            ot_node n = tk_node(mean ? OT_OP_REDUCE_MEAN : OT_OP_REDUCE_SUM, 1, 1);
            ot_node_set_attr_ints(&n, "axes", sets[s], counts[s]);
            bool red[4] = {0};
            for (int i = 0; i < counts[s]; i++) red[(sets[s][i] + 4) % 4] = true;
            int64_t dims[4] = {2, 3, 4, 5}, od[4], n_out = 1, nred = 1;
            for (int d = 0; d < 4; d++) {
                od[d] = red[d] ? 1 : dims[d];
                n_out *= od[d];
                if (red[d]) nred *= dims[d];
            }
            for (int64_t o = 0; o < n_out; o++) want[o] = 0;
            for (int i = 0; i < 120; i++) {
                int c[4] = {i / 60, (i / 20) % 3, (i / 5) % 4, i % 5};
                int64_t o = 0;
                for (int d = 0; d < 4; d++) o = o * od[d] + (red[d] ? 0 : c[d]);
                want[o] += x[i];
            }
            if (mean)
                for (int64_t o = 0; o < n_out; o++) want[o] /= (double)nred;
            ot_tensor in[1] = {tk_t(OT_F32, x, 4, 2, 3, 4, 5)};
            ot_tensor out[1] = {tk_t(OT_F32, y, 4, (int)od[0], (int)od[1], (int)od[2], (int)od[3])};
            assert_int_equal(tk_run(&n, in, out), OT_OK);
            assert_true(tk_max_rel(y, want, n_out) < 1e-6);
            tk_node_free(&n);
        }
    }
    /* Sum: variadic with broadcasting */
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, c = 100, s[6];
    ot_node n = tk_node(OT_OP_SUM, 3, 1);
    ot_tensor in[3] = {tk_t(OT_F32, a, 2, 2, 3), tk_t(OT_F32, b, 1, 3), tk_t(OT_F32, &c, 0)};
    ot_tensor out[1] = {tk_t(OT_F32, s, 2, 2, 3)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < 6; i++) assert_true(s[i] == a[i] + b[i % 3] + c);
}

static void test_batch_norm(void **state) {
    (void)state;
    enum { N = 3, C = 2, S = 5 };
    float x[N * C * S], scale[C] = {1.5f, 0.5f}, bias[C] = {0.1f, -0.2f}, rm[C] = {0.3f, -0.1f}, rv[C] = {2.0f, 0.5f};
    float y[N * C * S], om[C], ov[C];
    double want[N * C * S];
    tk_fill(x, N * C * S, 10, -2, 3);
    ot_node n = tk_node(OT_OP_BATCH_NORM, 5, 3);
    ot_node_set_attr_int(&n, "training_mode", 1);
    ot_node_set_attr_float(&n, "momentum", 0.8f);
    ot_node_set_attr_float(&n, "epsilon", 1e-3f);
    ot_node_set_attr_int(&n, "unbiased_running_var", 1); /* set by the importer for PyTorch models */
    ot_tensor in[5] = {tk_t(OT_F32, x, 3, N, C, S), tk_t(OT_F32, scale, 1, C), tk_t(OT_F32, bias, 1, C),
                       tk_t(OT_F32, rm, 1, C), tk_t(OT_F32, rv, 1, C)};
    ot_tensor out[3] = {tk_t(OT_F32, y, 3, N, C, S), tk_t(OT_F32, om, 1, C), tk_t(OT_F32, ov, 1, C)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    double wm[C], wv[C];
    for (int c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int b = 0; b < N; b++)
            for (int i = 0; i < S; i++) m += x[(b * C + c) * S + i];
        m /= N * S;
        for (int b = 0; b < N; b++)
            for (int i = 0; i < S; i++) v += pow(x[(b * C + c) * S + i] - m, 2);
        for (int b = 0; b < N; b++)
            for (int i = 0; i < S; i++)
                want[(b * C + c) * S + i] = (x[(b * C + c) * S + i] - m) / sqrt(v / (N * S) + 1e-3) * scale[c] + bias[c];
        wm[c] = 0.8 * rm[c] + 0.2 * m;
        wv[c] = 0.8 * rv[c] + 0.2 * v / (N * S - 1); /* unbiased, as PyTorch */
    }
    assert_true(tk_max_rel(y, want, N * C * S) < 1e-5);
    assert_true(tk_max_rel(om, wm, C) < 1e-6);
    assert_true(tk_max_rel(ov, wv, C) < 1e-6);
    /* without the attribute: ONNX's update with the population variance */
    ot_node_remove_attr(&n, "unbiased_running_var");
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int c = 0; c < C; c++) wv[c] = 0.8 * rv[c] + 0.2 * (wv[c] - 0.8 * rv[c]) / 0.2 * (N * S - 1) / (N * S);
    assert_true(tk_max_rel(ov, wv, C) < 1e-6);
    /* inference mode uses the running statistics, state passes through */
    ot_node_set_attr_int(&n, "training_mode", 0);
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < N * C * S; i++) {
        int c = (i / S) % C;
        want[i] = (x[i] - rm[c]) / sqrt(rv[c] + 1e-3) * scale[c] + bias[c];
    }
    assert_true(tk_max_rel(y, want, N * C * S) < 1e-5);
    tk_node_free(&n);
}

static void test_layer_norm(void **state) {
    (void)state;
    enum { R = 6, K = 8 };
    float x[R * K], sc[K], b[K], y[R * K], mean[R], inv[R];
    double want[R * K], wmean[R], winv[R];
    tk_fill(x, R * K, 11, -2, 2);
    tk_fill(sc, K, 12, 0.5f, 1.5f);
    tk_fill(b, K, 13, -1, 1);
    ot_node n = tk_node(OT_OP_LAYER_NORM, 3, 3);
    ot_node_set_attr_int(&n, "axis", -1);
    ot_node_set_attr_float(&n, "epsilon", 1e-4f);
    ot_tensor in[3] = {tk_t(OT_F32, x, 3, 2, 3, K), tk_t(OT_F32, sc, 1, K), tk_t(OT_F32, b, 1, K)};
    ot_tensor out[3] = {tk_t(OT_F32, y, 3, 2, 3, K), tk_t(OT_F32, mean, 3, 2, 3, 1), tk_t(OT_F32, inv, 3, 2, 3, 1)};
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int r = 0; r < R; r++) {
        double m = 0, v = 0;
        for (int k = 0; k < K; k++) m += x[r * K + k];
        m /= K;
        for (int k = 0; k < K; k++) v += pow(x[r * K + k] - m, 2);
        v /= K;
        wmean[r] = m;
        winv[r] = 1.0 / sqrt(v + 1e-4);
        for (int k = 0; k < K; k++) want[r * K + k] = (x[r * K + k] - m) * winv[r] * sc[k] + b[k];
    }
    assert_true(tk_max_rel(y, want, R * K) < 1e-5);
    assert_true(tk_max_rel(mean, wmean, R) < 1e-6);
    assert_true(tk_max_rel(inv, winv, R) < 1e-5);
    /* without B and without the optional outputs */
    n.n_inputs = 2;
    n.n_outputs = 1;
    assert_int_equal(tk_run(&n, in, out), OT_OK);
    for (int i = 0; i < R * K; i++) want[i] -= b[i % K];
    assert_true(tk_max_rel(y, want, R * K) < 1e-5);
    tk_node_free(&n);
}

/* naive loss over scores [N, C, D] with labels [N, D]; lp: log-probs (or NULL for NLL on raw input) */
static void ref_loss(const float *x, const int64_t *lab, const float *w, int N, int C, int D, bool softmax,
                     int64_t ignore, double *per, double *wsum, double *lp) {
    *wsum = 0;
    for (int n = 0; n < N; n++)
        for (int d = 0; d < D; d++) {
            double s = 0;
            for (int c = 0; c < C; c++) s += exp(x[(n * C + c) * D + d]);
            for (int c = 0; c < C; c++)
                lp[(n * C + c) * D + d] = softmax ? x[(n * C + c) * D + d] - log(s) : x[(n * C + c) * D + d];
            int64_t l = lab[n * D + d];
            if (l == ignore) {
                per[n * D + d] = 0;
                continue;
            }
            double wi = w ? w[l] : 1.0;
            per[n * D + d] = -lp[(n * C + l) * D + d] * wi;
            *wsum += wi;
        }
}

static void test_losses(void **state) {
    (void)state;
    enum { N = 3, C = 4, D = 2 };
    float x[N * C * D], w[C] = {1.0f, 2.0f, 0.5f, 1.5f}, y[N * D], lp[N * C * D];
    int64_t lab[N * D] = {0, 3, 2, 1, 1, 3};
    double per[N * D], wsum, wlp[N * C * D];
    tk_fill(x, N * C * D, 14, -2, 2);
    const char *reds[3] = {"none", "sum", "mean"};
    for (int sm = 0; sm < 2; sm++)
        for (int useW = 0; useW < 2; useW++)
            for (int r = 0; r < 3; r++) {
                ot_node n = tk_node(sm ? OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS : OT_OP_NLL_LOSS, useW ? 3 : 2, sm ? 2 : 1);
                ot_node_set_attr_string(&n, "reduction", reds[r]);
                ot_node_set_attr_int(&n, "ignore_index", 1);
                ot_tensor in[3] = {tk_t(OT_F32, x, 3, N, C, D), tk_t(OT_I64, lab, 2, N, D), tk_t(OT_F32, w, 1, C)};
                ot_tensor out[2] = {r == 0 ? tk_t(OT_F32, y, 2, N, D) : tk_t(OT_F32, y, 0), tk_t(OT_F32, lp, 3, N, C, D)};
                assert_int_equal(tk_run(&n, in, out), OT_OK);
                ref_loss(x, lab, useW ? w : NULL, N, C, D, sm, 1, per, &wsum, wlp);
                if (r == 0) {
                    assert_true(tk_max_rel(y, per, N * D) < 1e-5);
                } else {
                    double s = 0;
                    for (int i = 0; i < N * D; i++) s += per[i];
                    double want = r == 1 ? s : s / wsum;
                    assert_true(tk_max_rel(y, &want, 1) < 1e-5);
                }
                if (sm) assert_true(tk_max_rel(lp, wlp, N * C * D) < 1e-5);
                tk_node_free(&n);
            }
    /* a label outside [0, C) that is not ignore_index is a data error */
    lab[0] = 7;
    ot_node n = tk_node(OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS, 2, 1);
    ot_tensor in[2] = {tk_t(OT_F32, x, 3, N, C, D), tk_t(OT_I64, lab, 2, N, D)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 0)};
    assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, NULL), OT_E_DATA);
}

/* Results are bitwise repeatable for a fixed thread count, and the non-GEMM kernels
 * do not depend on the thread count at all (fixed-order sums inside one output). */
static void run_threads(const ot_node *n, ot_tensor *in, ot_tensor *out, int threads, float *dst, int64_t count) {
    float *keep = out[0].data;
    out[0].data = dst;
    assert_int_equal(tk_run_ex(n, in, out, threads, 3, 1, 2, NULL), OT_OK);
    out[0].data = keep;
    (void)count;
}

static void test_thread_repeatability(void **state) {
    (void)state;
    enum { R = 256, K = 300 };
    float *x = malloc(R * K * sizeof(float)), *w = malloc(K * K * sizeof(float)), *a = malloc(R * K * sizeof(float)),
          *b = malloc(R * K * sizeof(float)), *c = malloc(R * K * sizeof(float));
    tk_fill(x, R * K, 41, -3, 3);
    tk_fill(w, K * K, 42, -1, 1);
    int64_t ax[1] = {0};
    ot_op ops[5] = {OT_OP_MATMUL, OT_OP_SOFTMAX, OT_OP_REDUCE_MEAN, OT_OP_LAYER_NORM, OT_OP_BATCH_NORM};
    for (int k = 0; k < 5; k++) {
        ot_node n = tk_node(ops[k], 2, 1);
        ot_tensor in[5] = {tk_t(OT_F32, x, 2, R, K), tk_t(OT_F32, w, 2, K, K)};
        ot_tensor out[1] = {tk_t(OT_F32, a, 2, R, K)};
        int64_t cnt = R * K;
        if (ops[k] == OT_OP_SOFTMAX) n.n_inputs = 1;
        if (ops[k] == OT_OP_REDUCE_MEAN) {
            n.n_inputs = 1;
            ot_node_set_attr_ints(&n, "axes", ax, 1);
            out[0] = tk_t(OT_F32, a, 2, 1, K);
            cnt = K;
        }
        if (ops[k] == OT_OP_LAYER_NORM) in[1] = tk_t(OT_F32, w, 1, K);
        if (ops[k] == OT_OP_BATCH_NORM) { /* x as [R, K, 1]: K channels */
            n.n_inputs = 5;
            ot_node_set_attr_int(&n, "training_mode", 1);
            in[0] = tk_t(OT_F32, x, 3, R, K, 1);
            for (int j = 1; j < 5; j++) in[j] = tk_t(OT_F32, w + j * K, 1, K);
            out[0] = tk_t(OT_F32, a, 3, R, K, 1);
        }
        run_threads(&n, in, out, 2, a, cnt);
        run_threads(&n, in, out, 2, b, cnt);
        run_threads(&n, in, out, 1, c, cnt);
        assert_memory_equal(a, b, cnt * sizeof(float));
        if (ops[k] == OT_OP_MATMUL) {
            for (int64_t i = 0; i < cnt; i++) assert_true(fabsf(a[i] - c[i]) <= 1e-4f * (1 + fabsf(a[i])));
        } else {
            assert_memory_equal(a, c, cnt * sizeof(float));
        }
        tk_node_free(&n);
    }
    free(x);
    free(w);
    free(a);
    free(b);
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),     cmocka_unit_test(test_gemm),       cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_softmax),   cmocka_unit_test(test_reduce_sum), cmocka_unit_test(test_batch_norm),
        cmocka_unit_test(test_layer_norm), cmocka_unit_test(test_losses), cmocka_unit_test(test_thread_repeatability),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
