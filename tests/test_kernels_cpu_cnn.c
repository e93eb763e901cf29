/* test_kernels_cpu_cnn.c — the CNN fast paths of issue 14 against plain loops written
 * out here, bit for bit where the fast path promises the plain loop's bits:
 * BatchNormGrad with 4 channels side by side (training and inference statistics,
 * channel counts that leave 1-3 channels over, absent outputs), on 1 and 2 threads;
 * ReluGrad and ClipGrad (ReLU6, one-sided, unbounded) through bit masks against the
 * plain select, with NaN, signed zeros, infinities and values on the bounds; the
 * depthwise Conv's padded-plane path where a weight is infinite (the border taps must
 * not turn into 0 * inf); MaxPool and MaxPoolGrad (first maximum in window order, NaN
 * wins, Indices) with ties, NaN and windows that hang over the pads; depthwise
 * ConvGradInput's padded gather with an infinite weight (keeps the scatter);
 * depthwise Conv, ConvGradWeight and ConvGradInput (8 channels per vector, and the
 * one-channel loops for planes too big for it) against the one-channel loop with four
 * partial sums and the scatter. */
#include "test_kernels_cpu_util.h"

/* The one-channel-at-a-time BatchNormGrad the kernel replaced (its order of
 * operations is the contract). */
static void ref_bn_grad(const float *dy, const float *xs, const float *sc, const float *rm, const float *rv,
                        int64_t N, int64_t C, int64_t S, double eps, bool train, float *dx, float *dsc, float *db) {
    double M = (double)(N * S);
    for (int64_t c = 0; c < C; c++) {
        double mean = 0.0, var = 0.0;
        if (train) {
            for (int64_t n = 0; n < N; n++)
                for (int64_t s = 0; s < S; s++) mean += xs[(n * C + c) * S + s];
            mean /= M;
            for (int64_t n = 0; n < N; n++)
                for (int64_t s = 0; s < S; s++) {
                    double d = xs[(n * C + c) * S + s] - mean;
                    var += d * d;
                }
            var /= M;
        } else {
            mean = rm[c];
            var = rv[c];
        }
        double inv = 1.0 / sqrt(var + eps), sdy = 0.0, sdyx = 0.0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t j = (n * C + c) * S + s;
                sdy += dy[j];
                sdyx += dy[j] * (xs[j] - mean) * inv;
            }
        db[c] = (float)sdy;
        dsc[c] = (float)sdyx;
        double k = sc[c] * inv;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t j = (n * C + c) * S + s;
                if (train) {
                    double xh = (xs[j] - mean) * inv;
                    dx[j] = (float)(k * (dy[j] - sdy / M - xh * sdyx / M));
                } else {
                    dx[j] = (float)(k * dy[j]);
                }
            }
    }
}

static void bn_grad_case(int N, int C, int H, int W, bool train, int threads) {
    int64_t nx = (int64_t)N * C * H * W, S = (int64_t)H * W;
    float *dy = malloc((size_t)nx * sizeof(float)), *x = malloc((size_t)nx * sizeof(float));
    float *dx = malloc((size_t)nx * sizeof(float)), *wdx = malloc((size_t)nx * sizeof(float));
    float sc[37], rm[37], rv[37], dsc[37], db[37], wdsc[37], wdb[37];
    assert_true(C <= 37);
    tk_fill(dy, nx, 5 + (uint32_t)C, -1.0f, 1.0f);
    tk_fill(x, nx, 7 + (uint32_t)C, -3.0f, 5.0f); /* a mean far from 0: the two-pass variance matters */
    tk_fill(sc, C, 9, 0.5f, 1.5f);
    tk_fill(rm, C, 10, -1.0f, 1.0f);
    tk_fill(rv, C, 11, 0.5f, 2.0f);
    for (int64_t i = 0; i < nx; i++) dx[i] = NAN;
    ot_node n = tk_node(OT_OP_BATCH_NORM_GRAD, train ? 3 : 5, 3);
    ot_node_set_attr_float(&n, "epsilon", 1e-5f);
    ot_node_set_attr_int(&n, "training_mode", train);
    ot_tensor in[5] = {tk_t(OT_F32, dy, 4, N, C, H, W), tk_t(OT_F32, x, 4, N, C, H, W), tk_t(OT_F32, sc, 1, C),
                       tk_t(OT_F32, rm, 1, C), tk_t(OT_F32, rv, 1, C)};
    ot_tensor out[3] = {tk_t(OT_F32, dx, 4, N, C, H, W), tk_t(OT_F32, dsc, 1, C), tk_t(OT_F32, db, 1, C)};
    ot_error e = {0};
    ot_status st = tk_run_ex(&n, in, out, threads, 0, 0, 0, &e);
    if (st) print_error("%s\n", e.msg);
    assert_int_equal(st, OT_OK);
    ref_bn_grad(dy, x, sc, rm, rv, N, C, S, (double)1e-5f, train, wdx, wdsc, wdb);
    assert_memory_equal(dx, wdx, (size_t)nx * sizeof(float));
    assert_memory_equal(dsc, wdsc, (size_t)C * sizeof(float));
    assert_memory_equal(db, wdb, (size_t)C * sizeof(float));
    /* dX only (the scale and bias outputs absent) */
    out[1].data = out[2].data = NULL;
    for (int64_t i = 0; i < nx; i++) dx[i] = NAN;
    assert_int_equal(tk_run_ex(&n, in, out, threads, 0, 0, 0, NULL), OT_OK);
    assert_memory_equal(dx, wdx, (size_t)nx * sizeof(float));
    tk_node_free(&n);
    free(dy);
    free(x);
    free(dx);
    free(wdx);
}

static void test_batch_norm_grad_same_bits(void **state) {
    (void)state;
    const int shapes[][4] = {{2, 1, 3, 3}, {3, 5, 2, 3}, {2, 6, 4, 4}, {2, 7, 1, 5}, {8, 16, 8, 8}, {4, 37, 9, 7}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int t = 1; t <= 2; t++)
            for (int train = 0; train <= 1; train++)
                bn_grad_case(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], train, t);
}

/* ClipGrad with bounds lo / hi (an absent bound: no attribute), or ReluGrad. */
static void pass_case(ot_op op, bool has_lo, float lo, bool has_hi, float hi, int n, int threads) {
    float *dy = malloc((size_t)n * sizeof(float)), *v = malloc((size_t)n * sizeof(float));
    float *dx = malloc((size_t)n * sizeof(float));
    tk_fill(dy, n, 3, -2.0f, 2.0f);
    tk_fill(v, n, 4, -8.0f, 8.0f);
    const float special[] = {NAN, -0.0f, 0.0f, INFINITY, -INFINITY, 6.0f, -1.0f, 1e-30f, -1e-30f, 5.9999995f};
    for (int i = 0; i < 10 && i * 7 < n; i++) v[i * 7] = special[i];
    for (int i = 0; i < 10 && i * 11 + 1 < n; i++) dy[i * 11 + 1] = special[i];
    ot_node g = tk_node(op, 2, 1);
    if (has_lo) ot_node_set_attr_float(&g, "min", lo);
    if (has_hi) ot_node_set_attr_float(&g, "max", hi);
    ot_tensor in[2] = {tk_t(OT_F32, dy, 1, n), tk_t(OT_F32, v, 1, n)}, out[1] = {tk_t(OT_F32, dx, 1, n)};
    assert_int_equal(tk_run_ex(&g, in, out, threads, 0, 0, 0, NULL), OT_OK);
    for (int i = 0; i < n; i++) {
        bool pass = op == OT_OP_RELU_GRAD ? v[i] > 0.0f : (!has_lo || v[i] > lo) && (!has_hi || v[i] < hi);
        float want = pass ? dy[i] : 0.0f;
        if (memcmp(&dx[i], &want, sizeof want))
            print_error("%s v=%g dy=%g: got %g want %g\n", ot_op_name(op), (double)v[i], (double)dy[i], (double)dx[i],
                        (double)want);
        assert_memory_equal(&dx[i], &want, sizeof want);
    }
    tk_node_free(&g);
    free(dy);
    free(v);
    free(dx);
}

static void test_relu_clip_grad_same_bits(void **state) {
    (void)state;
    const int lens[] = {1, 3, 8, 1031, 300007}; /* tails; the last over several threaded blocks */
    for (int l = 0; l < 5; l++)
        for (int t = 1; t <= 2; t++) {
            pass_case(OT_OP_RELU_GRAD, false, 0, false, 0, lens[l], t);
            pass_case(OT_OP_CLIP_GRAD, true, 0.0f, true, 6.0f, lens[l], t);
            pass_case(OT_OP_CLIP_GRAD, true, -1.0f, false, 0, lens[l], t);
            pass_case(OT_OP_CLIP_GRAD, false, 0, true, 6.0f, lens[l], t);
            pass_case(OT_OP_CLIP_GRAD, false, 0, false, 0, lens[l], t);
        }
}

/* 3x3 depthwise, pad 1, stride 1 or 2, channel 1's top-left weight +inf: every output
 * equals the valid taps summed in (kh, kw) order from 0.0f, plus the bias. */
static void test_depthwise_infinite_weight(void **state) {
    (void)state;
    enum { N = 2, C = 3, H = 6, W = 5 };
    float x[N * C * H * W], w[C * 9], b[C], y[N * C * H * W];
    tk_fill(x, N * C * H * W, 51, -1.0f, 1.0f);
    tk_fill(w, C * 9, 52, -1.0f, 1.0f);
    tk_fill(b, C, 53, -1.0f, 1.0f);
    w[9 + 0] = INFINITY; /* the top-left tap: in the border for the first row and column */
    for (int s = 1; s <= 2; s++) {
        int OH = (H + 2 - 3) / s + 1, OW = (W + 2 - 3) / s + 1;
        ot_node n = tk_node(OT_OP_CONV, 3, 1);
        int64_t st[2] = {s, s}, pd[4] = {1, 1, 1, 1};
        ot_node_set_attr_int(&n, "group", C);
        ot_node_set_attr_ints(&n, "strides", st, 2);
        ot_node_set_attr_ints(&n, "pads", pd, 4);
        ot_tensor in[3] = {tk_t(OT_F32, x, 4, N, C, H, W), tk_t(OT_F32, w, 4, C, 1, 3, 3), tk_t(OT_F32, b, 1, C)};
        ot_tensor out[1] = {tk_t(OT_F32, y, 4, N, C, OH, OW)};
        assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, NULL), OT_OK);
        for (int p = 0; p < N * C; p++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    float acc = 0.0f;
                    for (int kh = 0; kh < 3; kh++)
                        for (int kw = 0; kw < 3; kw++) {
                            int ih = oh * s - 1 + kh, iw = ow * s - 1 + kw;
                            if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                acc += x[(p * H + ih) * W + iw] * w[(p % C) * 9 + kh * 3 + kw];
                        }
                    float want = acc + b[p % C];
                    assert_memory_equal(&y[(p * OH + oh) * OW + ow], &want, sizeof want);
                }
        tk_node_free(&n);
    }
}

/* MaxPool K x K, stride S, pads P (ceil_mode off): outputs, Indices and MaxPoolGrad
 * against the window walked in order here. */
static void maxpool_case(int H, int W, int K, int S, int P, int threads) {
    enum { N = 2, C = 3 };
    int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1, nx = N * C * H * W, ny = N * C * OH * OW;
    float *x = malloc((size_t)nx * sizeof(float)), *y = malloc((size_t)ny * sizeof(float));
    float *dy = malloc((size_t)ny * sizeof(float)), *dx = malloc((size_t)nx * sizeof(float));
    float *want_dx = calloc((size_t)nx, sizeof(float));
    int64_t *idx = malloc((size_t)ny * sizeof(int64_t));
    tk_fill(x, nx, 61, -1.0f, 1.0f);
    for (int i = 0; i < nx; i++) x[i] = floorf(x[i] * 2.0f); /* few levels: ties everywhere */
    x[5] = NAN;
    x[nx - 3] = NAN;
    for (int i = 1; i < nx; i += 7) /* -0 and +0 side by side: equal, so the first stays */
        if (x[i] == 0.0f) x[i] = -0.0f;
    tk_fill(dy, ny, 62, -1.0f, 1.0f);
    int64_t ks[2] = {K, K}, st[2] = {S, S}, pd[4] = {P, P, P, P};
    ot_node n = tk_node(OT_OP_MAX_POOL, 1, 2);
    ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
    ot_node_set_attr_ints(&n, "strides", st, 2);
    ot_node_set_attr_ints(&n, "pads", pd, 4);
    ot_tensor in[1] = {tk_t(OT_F32, x, 4, N, C, H, W)};
    ot_tensor out[2] = {tk_t(OT_F32, y, 4, N, C, OH, OW), tk_t(OT_I64, idx, 4, N, C, OH, OW)};
    assert_int_equal(tk_run_ex(&n, in, out, threads, 0, 0, 0, NULL), OT_OK);
    for (int p = 0; p < N * C; p++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                float best = -INFINITY;
                int bi = -1;
                for (int h = oh * S - P; h < oh * S - P + K; h++)
                    for (int w = ow * S - P; w < ow * S - P + K; w++) {
                        if (h < 0 || h >= H || w < 0 || w >= W || (bi >= 0 && isnan(best))) continue;
                        float v = x[(p * H + h) * W + w];
                        if (bi < 0 || v > best || isnan(v)) best = v, bi = h * W + w;
                    }
                int o = (p * OH + oh) * OW + ow;
                assert_memory_equal(&y[o], &best, sizeof best);
                assert_int_equal(idx[o], (int64_t)p * H * W + bi);
                want_dx[p * H * W + bi] += dy[o];
            }
    ot_node g = n;
    g.op = OT_OP_MAX_POOL_GRAD;
    g.op_type = (char *)ot_op_name(OT_OP_MAX_POOL_GRAD);
    g.n_inputs = 2;
    g.n_outputs = 1;
    ot_tensor gin[2] = {tk_t(OT_F32, dy, 4, N, C, OH, OW), tk_t(OT_F32, x, 4, N, C, H, W)};
    ot_tensor gout[1] = {tk_t(OT_F32, dx, 4, N, C, H, W)};
    assert_int_equal(tk_run_ex(&g, gin, gout, threads, 0, 0, 0, NULL), OT_OK);
    assert_memory_equal(dx, want_dx, (size_t)nx * sizeof(float));
    tk_node_free(&n);
    free(x);
    free(y);
    free(dy);
    free(dx);
    free(want_dx);
    free(idx);
}

static void test_maxpool_first_max_same_bits(void **state) {
    (void)state;
    for (int t = 1; t <= 2; t++) {
        maxpool_case(32, 32, 3, 2, 1, t); /* ResNet's stem pool */
        maxpool_case(9, 7, 3, 2, 1, t);
        maxpool_case(8, 8, 2, 2, 0, t);
        maxpool_case(5, 6, 3, 1, 1, t);
    }
}

/* Depthwise ConvGradInput (3x3, pad 1, stride 1) with channel 1's top-left weight
 * +inf against the scatter written out here: taps in order from +0. */
static void test_depthwise_grad_input_infinite_weight(void **state) {
    (void)state;
    enum { N = 2, C = 3, H = 6, W = 5 };
    float dy[N * C * H * W], w[C * 9], x[N * C * H * W], dx[N * C * H * W], want[N * C * H * W];
    tk_fill(dy, N * C * H * W, 71, -1.0f, 1.0f);
    tk_fill(w, C * 9, 72, -1.0f, 1.0f);
    tk_fill(x, N * C * H * W, 73, -1.0f, 1.0f);
    w[9 + 0] = INFINITY;
    ot_node n = tk_node(OT_OP_CONV_GRAD_INPUT, 3, 1);
    int64_t ks[2] = {3, 3}, st[2] = {1, 1}, pd[4] = {1, 1, 1, 1};
    ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
    ot_node_set_attr_ints(&n, "strides", st, 2);
    ot_node_set_attr_ints(&n, "pads", pd, 4);
    ot_node_set_attr_int(&n, "group", C);
    ot_tensor in[3] = {tk_t(OT_F32, dy, 4, N, C, H, W), tk_t(OT_F32, w, 4, C, 1, 3, 3), tk_t(OT_F32, x, 4, N, C, H, W)};
    ot_tensor out[1] = {tk_t(OT_F32, dx, 4, N, C, H, W)};
    assert_int_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, NULL), OT_OK);
    memset(want, 0, sizeof want);
    for (int p = 0; p < N * C; p++)
        for (int kk = 0; kk < 9; kk++)
            for (int oh = 0; oh < H; oh++)
                for (int ow = 0; ow < W; ow++) {
                    int ih = oh - 1 + kk / 3, iw = ow - 1 + kk % 3;
                    if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                        want[(p * H + ih) * W + iw] += w[(p % C) * 9 + kk] * dy[(p * H + oh) * W + ow];
                }
    assert_memory_equal(dx, want, sizeof want);
    tk_node_free(&n);
}

/* Depthwise ConvGradWeight's contract (2-D, square stride s, pad pd, kernel k): per
 * channel and tap, column ow of each valid row into partial sum (ow - first valid
 * ow) % 4, over samples, then rows, then columns; dW = (p0 + p1) + (p2 + p3). */
static void ref_dw_grad(const float *dy, const float *x, int N, int C, int H, int W, int OH, int OW, int k, int s,
                        int pd, float *dw) {
    for (int c = 0; c < C; c++)
        for (int kk = 0; kk < k * k; kk++) {
            int kh = kk / k, kw = kk % k, a = 0;
            while (a < OW && (a * s - pd + kw < 0 || a * s - pd + kw >= W)) a++;
            float q[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int n = 0; n < N; n++)
                for (int oh = 0; oh < OH; oh++) {
                    int ih = oh * s - pd + kh;
                    if (ih < 0 || ih >= H) continue;
                    for (int ow = a; ow < OW; ow++) {
                        int iw = ow * s - pd + kw;
                        if (iw >= W) break;
                        q[(ow - a) % 4] += dy[((n * C + c) * OH + oh) * OW + ow] * x[((n * C + c) * H + ih) * W + iw];
                    }
                }
            dw[c * k * k + kk] = (q[0] + q[1]) + (q[2] + q[3]);
        }
}

/* Depthwise ConvGradInput against the scatter written out here (taps in order from
 * +0), with weights from tk_fill and one infinite. */
static void dw_grad_input_case(const float *dy, float *w, const float *x, int N, int C, int H, int W, int OH, int OW,
                               int k, int s, int pd, int threads) {
    int nx = N * C * H * W, K = k * k;
    float *dx = malloc((size_t)nx * sizeof(float)), *want = calloc((size_t)nx, sizeof(float));
    tk_fill(w, C * K, 83 + C, -1.0f, 1.0f);
    w[C * K - 1] = -INFINITY;
    ot_node n = tk_node(OT_OP_CONV_GRAD_INPUT, 3, 1);
    int64_t ks[2] = {k, k}, st[2] = {s, s}, pads[4] = {pd, pd, pd, pd};
    ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
    ot_node_set_attr_ints(&n, "strides", st, 2);
    ot_node_set_attr_ints(&n, "pads", pads, 4);
    ot_node_set_attr_int(&n, "group", C);
    ot_tensor in[3] = {tk_t(OT_F32, (void *)dy, 4, N, C, OH, OW), tk_t(OT_F32, w, 4, C, 1, k, k),
                       tk_t(OT_F32, (void *)x, 4, N, C, H, W)};
    ot_tensor out[1] = {tk_t(OT_F32, dx, 4, N, C, H, W)};
    assert_int_equal(tk_run_ex(&n, in, out, threads, 0, 0, 0, NULL), OT_OK);
    for (int p = 0; p < N * C; p++)
        for (int kk = 0; kk < K; kk++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    int ih = oh * s - pd + kk / k, iw = ow * s - pd + kk % k;
                    if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                        want[(p * H + ih) * W + iw] += w[(p % C) * K + kk] * dy[(p * OH + oh) * OW + ow];
                }
    assert_memory_equal(dx, want, (size_t)nx * sizeof(float));
    tk_node_free(&n);
    free(dx);
    free(want);
}

/* Depthwise Conv (weights from dw_grad_input_case, one infinite), with a bias and
 * without, against its valid taps summed in order from +0, then + bias (or + 0). */
static void dw_forward_case(const float *x, float *w, int N, int C, int H, int W, int OH, int OW, int k, int s,
                            int pd, int threads) {
    int ny = N * C * OH * OW, K = k * k;
    float *y = malloc((size_t)ny * sizeof(float)), *want = malloc((size_t)ny * sizeof(float));
    float *b = malloc((size_t)C * sizeof(float));
    tk_fill(b, C, 84, -1.0f, 1.0f);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        ot_node n = tk_node(OT_OP_CONV, 2 + with_bias, 1);
        int64_t ks[2] = {k, k}, st[2] = {s, s}, pads[4] = {pd, pd, pd, pd};
        ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
        ot_node_set_attr_ints(&n, "strides", st, 2);
        ot_node_set_attr_ints(&n, "pads", pads, 4);
        ot_node_set_attr_int(&n, "group", C);
        ot_tensor in[3] = {tk_t(OT_F32, (void *)x, 4, N, C, H, W), tk_t(OT_F32, w, 4, C, 1, k, k),
                           tk_t(OT_F32, b, 1, C)};
        ot_tensor out[1] = {tk_t(OT_F32, y, 4, N, C, OH, OW)};
        assert_int_equal(tk_run_ex(&n, in, out, threads, 0, 0, 0, NULL), OT_OK);
        for (int p = 0; p < N * C; p++)
            for (int o = 0; o < OH * OW; o++) {
                float acc = 0.0f;
                for (int kk = 0; kk < K; kk++) {
                    int ih = o / OW * s - pd + kk / k, iw = o % OW * s - pd + kk % k;
                    if (ih >= 0 && ih < H && iw >= 0 && iw < W) acc += x[(p * H + ih) * W + iw] * w[(p % C) * K + kk];
                }
                want[p * OH * OW + o] = acc + (with_bias ? b[p % C] : 0.0f);
            }
        assert_memory_equal(y, want, (size_t)ny * sizeof(float));
        tk_node_free(&n);
    }
    free(y);
    free(want);
    free(b);
}

static void dw_grad_case(int N, int C, int H, int W, int k, int s, int pd, int threads) {
    int OH = (H + 2 * pd - k) / s + 1, OW = (W + 2 * pd - k) / s + 1;
    int nx = N * C * H * W, ny = N * C * OH * OW;
    float *x = malloc((size_t)nx * sizeof(float)), *dy = malloc((size_t)ny * sizeof(float));
    float *w = calloc((size_t)(C * k * k), sizeof(float)), *dw = malloc((size_t)(C * k * k) * sizeof(float));
    float *want = malloc((size_t)(C * k * k) * sizeof(float));
    tk_fill(x, nx, 81 + H, -2.0f, 2.0f);
    tk_fill(dy, ny, 82 + W, -1.0f, 1.0f);
    x[nx / 3] = INFINITY; /* a NaN or infinite sum stays one in its lane only */
    dy[ny / 2] = NAN;
    ot_node n = tk_node(OT_OP_CONV_GRAD_WEIGHT, 3, 1);
    int64_t ks[2] = {k, k}, st[2] = {s, s}, pads[4] = {pd, pd, pd, pd};
    ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
    ot_node_set_attr_ints(&n, "strides", st, 2);
    ot_node_set_attr_ints(&n, "pads", pads, 4);
    ot_node_set_attr_int(&n, "group", C);
    ot_tensor in[3] = {tk_t(OT_F32, dy, 4, N, C, OH, OW), tk_t(OT_F32, x, 4, N, C, H, W),
                       tk_t(OT_F32, w, 4, C, 1, k, k)};
    ot_tensor out[1] = {tk_t(OT_F32, dw, 4, C, 1, k, k)};
    assert_int_equal(tk_run_ex(&n, in, out, threads, 0, 0, 0, NULL), OT_OK);
    ref_dw_grad(dy, x, N, C, H, W, OH, OW, k, s, pd, want);
    assert_memory_equal(dw, want, (size_t)(C * k * k) * sizeof(float));
    tk_node_free(&n);
    dw_grad_input_case(dy, w, x, N, C, H, W, OH, OW, k, s, pd, threads);
    dw_forward_case(x, w, N, C, H, W, OH, OW, k, s, pd, threads);
    free(x);
    free(dy);
    free(w);
    free(dw);
    free(want);
}

static void test_depthwise_grad_weight_same_bits(void **state) {
    (void)state;
    for (int t = 1; t <= 2; t++) {
        dw_grad_case(3, 11, 4, 4, 3, 1, 1, t); /* 8 + 3 channels */
        dw_grad_case(2, 8, 2, 2, 3, 1, 1, t);
        dw_grad_case(2, 5, 9, 7, 3, 2, 1, t);
        dw_grad_case(2, 17, 13, 10, 3, 1, 1, t);
        dw_grad_case(1, 3, 8, 8, 5, 2, 2, t);
        dw_grad_case(2, 9, 40, 36, 3, 1, 1, t); /* planes past the lanes' buffers */
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_norm_grad_same_bits),
        cmocka_unit_test(test_relu_clip_grad_same_bits),
        cmocka_unit_test(test_depthwise_infinite_weight),
        cmocka_unit_test(test_maxpool_first_max_same_bits),
        cmocka_unit_test(test_depthwise_grad_input_infinite_weight),
        cmocka_unit_test(test_depthwise_grad_weight_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
