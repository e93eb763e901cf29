/* test_kernels_cpu_xfmr.c — the transformer speed paths (issue 14) give the same bits
 * as the plain rules they replace: the tiled 4-byte Transpose against an element-by-
 * element reference on shapes that are not multiples of the tile, for the permutations
 * a GPT exports (weights [1,0], attention [0,2,1,3] and [0,2,3,1]) and others, on one
 * and two threads; SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and their
 * gradient over [N, C, D] scores with D > 1 (positions side by side in lanes) against
 * one position at a time, with ignored labels, each reduction, D not a multiple of
 * the lane count, and with D = 1 (the gradient keeping each row's exps in dX's next
 * row) on one to three threads; LayerNormGrad (rows side by side, dScale / dBias by column blocks)
 * against one row and one column at a time; SoftmaxGrad over the last axis (lines
 * side by side) against one line at a time; Sum of same-shaped inputs in one pass,
 * in place or not, against input-by-input adds; ReduceToLike over leading axes against
 * column sums in row order; Gemm(X, W, transB = 1), what
 * autodiff/fold_linear.c turns MatMul(X, Transpose(W)) into, against that MatMul. */
#include "test_kernels_cpu_util.h"

/* y = transpose(x, perm) element by element: the definition, with no tiling. */
static void transpose_ref(const float *x, float *y, int r, const int64_t *xd, const int64_t *perm) {
    int64_t xs[8], n = 1;
    for (int d = r - 1; d >= 0; d--) xs[d] = n, n *= xd[d];
    for (int64_t i = 0; i < n; i++) {
        int64_t q = i, off = 0;
        for (int d = r - 1; d >= 0; d--) {
            int64_t yd = xd[perm[d]];
            off += (q % yd) * xs[perm[d]];
            q /= yd;
        }
        y[i] = x[off];
    }
}

static void check_transpose(int r, const int64_t *xd, const int64_t *perm, int threads) {
    int64_t n = 1;
    for (int d = 0; d < r; d++) n *= xd[d];
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    float *want = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)i * 0.5f - 7.0f;
    transpose_ref(x, want, r, xd, perm);
    ot_node node = tk_node(OT_OP_TRANSPOSE, 1, 1);
    ot_node_set_attr_ints(&node, "perm", perm, r);
    int64_t yd[8];
    for (int d = 0; d < r; d++) yd[d] = xd[perm[d]];
    ot_tensor in[1] = {tk_t(OT_F32, x, 0)}, out[1] = {tk_t(OT_F32, y, 0)};
    in[0].shape = ot_shape_make(r, xd);
    out[0].shape = ot_shape_make(r, yd);
    in[0].nbytes = out[0].nbytes = (size_t)n * sizeof(float);
    memset(y, 0xff, (size_t)n * sizeof(float));
    assert_int_equal(tk_run_ex(&node, in, out, threads, 0, 0, 0, NULL), OT_OK);
    assert_memory_equal(y, want, (size_t)n * sizeof(float));
    tk_node_free(&node);
    free(x);
    free(y);
    free(want);
}

static void test_transpose_tiled(void **state) {
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        check_transpose(2, (int64_t[]){77, 301}, (int64_t[]){1, 0}, threads);     /* a Linear weight */
        check_transpose(2, (int64_t[]){32, 64}, (int64_t[]){1, 0}, threads);      /* whole tiles */
        check_transpose(2, (int64_t[]){1, 40}, (int64_t[]){1, 0}, threads);       /* a row */
        check_transpose(4, (int64_t[]){3, 45, 5, 33}, (int64_t[]){0, 2, 3, 1}, threads); /* keys */
        check_transpose(4, (int64_t[]){3, 45, 5, 33}, (int64_t[]){0, 2, 1, 3}, threads); /* rows move whole */
        check_transpose(4, (int64_t[]){2, 3, 37, 35}, (int64_t[]){0, 1, 3, 2}, threads);
        check_transpose(3, (int64_t[]){33, 7, 65}, (int64_t[]){2, 0, 1}, threads);
        check_transpose(3, (int64_t[]){33, 7, 65}, (int64_t[]){1, 2, 0}, threads);
        check_transpose(3, (int64_t[]){5, 70, 1}, (int64_t[]){2, 1, 0}, threads); /* unit last axis */
    }
}

/* The loss one position at a time, as the kernel computed it before lanes: y is the
 * per-position loss (reduction none) or the reduced one; lp the log-probabilities. */
static void ce_ref(const float *x, const int64_t *lab, int64_t N, int64_t C, int64_t D, int red, int64_t ignore,
                   bool softmax, float *y, float *lp) {
    double sl = 0.0, sw = 0.0;
    for (int64_t i = 0; i < N * D; i++) {
        int64_t n = i / D, d = i % D;
        const float *xi = x + n * C * D + d;
        float mx = 0.0f, ls = 0.0f;
        if (softmax) {
            float sum = 0.0f;
            mx = -INFINITY;
            for (int64_t c = 0; c < C; c++) mx = xi[c * D] > mx ? xi[c * D] : mx;
            for (int64_t c = 0; c < C; c++) sum += expf(xi[c * D] - mx);
            ls = logf(sum);
            for (int64_t c = 0; c < C; c++) lp[n * C * D + c * D + d] = (xi[c * D] - mx) - ls;
        }
        double li = 0.0, wi = 0.0;
        if (lab[i] != ignore) {
            wi = 1.0;
            li = -(double)((xi[lab[i] * D] - mx) - ls) * wi;
        }
        if (red == 0) y[i] = (float)li;
        sl += li, sw += wi;
    }
    if (red) y[0] = (float)(red == 2 ? sl / sw : sl);
}

static void ce_grad_ref(const float *dl, const float *x, const int64_t *lab, int64_t N, int64_t C, int64_t D,
                        int red, int64_t ignore, bool softmax, float *dx) {
    double denom = 0.0;
    for (int64_t i = 0; i < N * D; i++) denom += lab[i] == ignore ? 0.0 : 1.0;
    for (int64_t i = 0; i < N * D; i++) {
        int64_t n = i / D, d = i % D, l = lab[i];
        const float *xr = x + n * C * D + d;
        float *dr = dx + n * C * D + d;
        bool skip = l == ignore;
        double g = skip ? 0.0 : 1.0;
        g *= red == 0 ? dl[i] : dl[0];
        if (red == 2) g = denom > 0.0 ? g / denom : 0.0;
        if (!softmax) {
            for (int64_t c = 0; c < C; c++) dr[c * D] = (!skip && c == l) ? (float)-g : 0.0f;
            continue;
        }
        double mx = -INFINITY, s = 0.0;
        for (int64_t c = 0; c < C; c++) mx = fmax(mx, xr[c * D]);
        for (int64_t c = 0; c < C; c++) s += exp(xr[c * D] - mx);
        for (int64_t c = 0; c < C; c++) {
            double p = exp(xr[c * D] - mx) / s;
            dr[c * D] = (float)(g * (p - (c == l ? 1.0 : 0.0)));
        }
    }
}

static void check_ce(int64_t N, int64_t C, int64_t D, const char *reduction, bool softmax, bool special, int threads) {
    int64_t nx = N * C * D, nl = N * D, ignore = 2;
    int red = reduction[0] == 'n' ? 0 : reduction[0] == 's' ? 1 : 2;
    float *x = malloc((size_t)nx * sizeof(float)), *lp = malloc((size_t)nx * sizeof(float));
    float *lp_want = malloc((size_t)nx * sizeof(float)), *dx = malloc((size_t)nx * sizeof(float));
    float *dx_want = malloc((size_t)nx * sizeof(float)), *y = malloc((size_t)nl * sizeof(float));
    float *y_want = malloc((size_t)nl * sizeof(float)), *dl = malloc((size_t)nl * sizeof(float));
    int64_t *lab = malloc((size_t)nl * sizeof(int64_t));
    uint32_t r = 12345;
    for (int64_t i = 0; i < nx; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)(r >> 8) / (float)(1u << 24) * 8.0f - 4.0f;
    }
    for (int64_t i = 0; i < nl; i++) lab[i] = (i * 7 + 3) % C, dl[i] = 0.25f + (float)(i % 5);
    if (special) { /* a NaN, an -inf, signed zeros: the max's NaN and tie rules */
        x[0] = NAN;
        x[D] = -INFINITY;
        for (int64_t c = 0; c < C; c++) x[c * D + 1] = c % 2 ? 0.0f : -0.0f;
        x[3 * D + 2] = -INFINITY;
    }
    ot_op op = softmax ? OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS : OT_OP_NLL_LOSS;
    ot_node f = tk_node(op, 2, softmax ? 2 : 1);
    ot_node_set_attr_string(&f, "reduction", reduction);
    ot_node_set_attr_int(&f, "ignore_index", ignore);
    ot_tensor in[3] = {tk_t(OT_F32, x, 3, (int)N, (int)C, (int)D), tk_t(OT_I64, lab, 2, (int)N, (int)D)};
    ot_tensor out[2] = {red ? tk_t(OT_F32, y, 0) : tk_t(OT_F32, y, 2, (int)N, (int)D),
                        tk_t(OT_F32, lp, 3, (int)N, (int)C, (int)D)};
    assert_int_equal(tk_run_ex(&f, in, out, threads, 0, 0, 0, NULL), OT_OK);
    ce_ref(x, lab, N, C, D, red, ignore, softmax, y_want, lp_want);
    assert_memory_equal(y, y_want, (size_t)(red ? 1 : nl) * sizeof(float));
    if (softmax) assert_memory_equal(lp, lp_want, (size_t)nx * sizeof(float));
    ot_node b = tk_node(softmax ? OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD : OT_OP_NLL_LOSS_GRAD, 3, 1);
    ot_node_set_attr_string(&b, "reduction", reduction);
    ot_node_set_attr_int(&b, "ignore_index", ignore);
    ot_tensor gin[3] = {red ? tk_t(OT_F32, dl, 0) : tk_t(OT_F32, dl, 2, (int)N, (int)D), in[0], in[1]};
    ot_tensor gout[1] = {tk_t(OT_F32, dx, 3, (int)N, (int)C, (int)D)};
    assert_int_equal(tk_run_ex(&b, gin, gout, threads, 0, 0, 0, NULL), OT_OK);
    ce_grad_ref(dl, x, lab, N, C, D, red, ignore, softmax, dx_want);
    assert_memory_equal(dx, dx_want, (size_t)nx * sizeof(float));
    tk_node_free(&f);
    tk_node_free(&b);
    free(x), free(lp), free(lp_want), free(dx), free(dx_want), free(y), free(y_want), free(dl), free(lab);
}

static void test_cross_entropy_lanes(void **state) {
    (void)state;
    for (int threads = 1; threads <= 3; threads++) {
        check_ce(3, 41, 37, "mean", true, false, threads); /* D: two whole lane groups and a tail */
        check_ce(3, 41, 37, "none", true, false, threads);
        check_ce(2, 600, 16, "sum", true, false, threads);
        check_ce(40, 523, 1, "mean", true, false, threads); /* classes last: one lane */
        /* classes last, the gradient keeping its exps in dX: NaN / -inf / signed zeros,
         * runs of rows that do not split evenly over the threads, a lone row */
        check_ce(40, 523, 1, "none", true, true, threads);
        check_ce(7, 3001, 1, "sum", true, false, threads);
        check_ce(1, 20000, 1, "mean", true, false, threads);
        check_ce(3, 41, 37, "none", true, true, threads);
        check_ce(40, 523, 3, "none", true, true, threads);
        check_ce(3, 41, 37, "mean", false, false, threads);
        check_ce(2, 33, 5, "none", false, false, threads);
    }
}

/* LayerNormGrad over the last axis one row and one column at a time, as the kernel
 * computed it before rows went side by side. */
static void ln_grad_ref(const float *dy, const float *xs, const float *sc, int64_t rows, int64_t cols, double eps,
                        float *dx, float *dsc, float *db) {
    double *stat = malloc((size_t)rows * 2 * sizeof(double));
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = xs + r * cols, *dr = dy + r * cols;
        double mean = 0.0, var = 0.0;
        for (int64_t j = 0; j < cols; j++) mean += xr[j];
        mean /= (double)cols;
        for (int64_t j = 0; j < cols; j++) var += (xr[j] - mean) * (xr[j] - mean);
        var /= (double)cols;
        double inv = 1.0 / sqrt(var + eps);
        stat[2 * r] = mean;
        stat[2 * r + 1] = inv;
        double mg = 0.0, mgx = 0.0;
        for (int64_t j = 0; j < cols; j++) {
            double g = (double)dr[j] * sc[j];
            mg += g;
            mgx += g * (xr[j] - mean) * inv;
        }
        mg /= (double)cols;
        mgx /= (double)cols;
        for (int64_t j = 0; j < cols; j++) {
            double xh = (xr[j] - mean) * inv;
            dx[r * cols + j] = (float)(inv * ((double)dr[j] * sc[j] - mg - xh * mgx));
        }
    }
    for (int64_t j = 0; j < cols; j++) {
        double a = 0.0, b = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            double g = dy[r * cols + j];
            a += g * (xs[r * cols + j] - stat[2 * r]) * stat[2 * r + 1];
            b += g;
        }
        dsc[j] = (float)a;
        db[j] = (float)b;
    }
    free(stat);
}

static void check_ln_grad(int64_t rows, int64_t cols, int threads) {
    int64_t n = rows * cols;
    float *dy = malloc((size_t)n * sizeof(float)), *x = malloc((size_t)n * sizeof(float));
    float *sc = malloc((size_t)cols * sizeof(float)), *dx = malloc((size_t)n * sizeof(float));
    float *dx_want = malloc((size_t)n * sizeof(float)), *dsc = malloc((size_t)cols * sizeof(float) * 4);
    float *dsc_want = dsc + cols, *db = dsc + 2 * cols, *db_want = dsc + 3 * cols;
    uint32_t r = 777;
    for (int64_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)(r >> 8) / (float)(1u << 24) * 6.0f - 2.0f + (float)(i / cols % 3);
        r = r * 1664525u + 1013904223u;
        dy[i] = (float)(r >> 8) / (float)(1u << 24) - 0.5f;
    }
    for (int64_t j = 0; j < cols; j++) sc[j] = 0.5f + (float)(j % 7) * 0.25f;
    ot_node node = tk_node(OT_OP_LAYER_NORM_GRAD, 3, 3);
    ot_node_set_attr_int(&node, "axis", -1);
    ot_node_set_attr_float(&node, "epsilon", 1e-5f);
    ot_tensor in[3] = {tk_t(OT_F32, dy, 2, (int)rows, (int)cols), tk_t(OT_F32, x, 2, (int)rows, (int)cols),
                       tk_t(OT_F32, sc, 1, (int)cols)};
    ot_tensor out[3] = {tk_t(OT_F32, dx, 2, (int)rows, (int)cols), tk_t(OT_F32, dsc, 1, (int)cols),
                        tk_t(OT_F32, db, 1, (int)cols)};
    assert_int_equal(tk_run_ex(&node, in, out, threads, 0, 0, 0, NULL), OT_OK);
    ln_grad_ref(dy, x, sc, rows, cols, (double)1e-5f, dx_want, dsc_want, db_want);
    assert_memory_equal(dx, dx_want, (size_t)n * sizeof(float));
    assert_memory_equal(dsc, dsc_want, (size_t)cols * sizeof(float));
    assert_memory_equal(db, db_want, (size_t)cols * sizeof(float));
    tk_node_free(&node);
    free(dy), free(x), free(sc), free(dx), free(dx_want), free(dsc);
}

static void test_layer_norm_grad_rows(void **state) {
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        check_ln_grad(203, 37, threads); /* row groups and column blocks with tails */
        check_ln_grad(64, 128, threads);
        check_ln_grad(3, 5, threads);
        check_ln_grad(1, 300, threads);
    }
}

/* MatMul(X, Transpose(W)) and Gemm(X, W, transB = 1): the same bits. */
static void check_gemm_tb(int M, int K, int N, int threads) {
    float *x = malloc((size_t)M * K * sizeof(float)), *w = malloc((size_t)N * K * sizeof(float));
    float *wt = malloc((size_t)N * K * sizeof(float)), *y1 = malloc((size_t)M * N * sizeof(float));
    float *y2 = malloc((size_t)M * N * sizeof(float));
    uint32_t r = 4242;
    for (int i = 0; i < M * K; i++) r = r * 1664525u + 1013904223u, x[i] = (float)(r >> 8) / (float)(1u << 24) - 0.5f;
    for (int i = 0; i < N * K; i++) r = r * 1664525u + 1013904223u, w[i] = (float)(r >> 8) / (float)(1u << 24) - 0.5f;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) wt[k * N + n] = w[n * K + k];
    ot_node mm = tk_node(OT_OP_MATMUL, 2, 1), gm = tk_node(OT_OP_GEMM, 2, 1);
    ot_node_set_attr_int(&gm, "transB", 1);
    ot_tensor in1[2] = {tk_t(OT_F32, x, 2, M, K), tk_t(OT_F32, wt, 2, K, N)}, out1[1] = {tk_t(OT_F32, y1, 2, M, N)};
    ot_tensor in2[2] = {tk_t(OT_F32, x, 2, M, K), tk_t(OT_F32, w, 2, N, K)}, out2[1] = {tk_t(OT_F32, y2, 2, M, N)};
    assert_int_equal(tk_run_ex(&mm, in1, out1, threads, 0, 0, 0, NULL), OT_OK);
    assert_int_equal(tk_run_ex(&gm, in2, out2, threads, 0, 0, 0, NULL), OT_OK);
    assert_memory_equal(y1, y2, (size_t)M * N * sizeof(float));
    tk_node_free(&gm);
    free(x), free(w), free(wt), free(y1), free(y2);
}

/* SoftmaxGrad over the last axis (lines side by side) against one line at a time. */
static void check_softmax_grad(int64_t lines, int64_t len, int threads) {
    int64_t n = lines * len;
    float *dy = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    float *dx = malloc((size_t)n * sizeof(float)), *want = malloc((size_t)n * sizeof(float));
    tk_fill(dy, n, 11, -1.0f, 1.0f);
    tk_fill(y, n, 12, 0.0f, 0.1f);
    for (int64_t l = 0; l < lines; l++) {
        double dot = 0.0;
        for (int64_t j = 0; j < len; j++) dot += (double)dy[l * len + j] * y[l * len + j];
        for (int64_t j = 0; j < len; j++) want[l * len + j] = (float)(y[l * len + j] * (dy[l * len + j] - dot));
    }
    ot_node node = tk_node(OT_OP_SOFTMAX_GRAD, 2, 1);
    ot_node_set_attr_int(&node, "axis", -1);
    ot_tensor in[2] = {tk_t(OT_F32, dy, 2, (int)lines, (int)len), tk_t(OT_F32, y, 2, (int)lines, (int)len)};
    ot_tensor out[1] = {tk_t(OT_F32, dx, 2, (int)lines, (int)len)};
    assert_int_equal(tk_run_ex(&node, in, out, threads, 0, 0, 0, NULL), OT_OK);
    assert_memory_equal(dx, want, (size_t)n * sizeof(float));
    tk_node_free(&node);
    free(dy), free(y), free(dx), free(want);
}

static void test_softmax_grad_lines(void **state) {
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        check_softmax_grad(203, 97, threads); /* groups of lines with a tail */
        check_softmax_grad(3, 7, threads);
        check_softmax_grad(64, 256, threads);
    }
}

/* Sum of same-shaped inputs (one fused pass) against input-by-input adds, out of
 * place and with the output over input 0 or input 2. */
static void test_sum_fused(void **state) {
    (void)state;
    int64_t n = 3 * 1024 + 7;
    float *a = malloc((size_t)n * 4 * sizeof(float)), *b = a + n, *c = a + 2 * n, *o = a + 3 * n;
    float *want = malloc((size_t)n * sizeof(float)), *keep = malloc((size_t)n * 3 * sizeof(float));
    tk_fill(a, 3 * n, 21, -1e3f, 1e3f);
    memcpy(keep, a, (size_t)n * 3 * sizeof(float));
    for (int64_t i = 0; i < n; i++) want[i] = (a[i] + b[i]) + c[i];
    for (int alias = 0; alias < 3; alias++)
        for (int threads = 1; threads <= 2; threads++) {
            memcpy(a, keep, (size_t)n * 3 * sizeof(float));
            float *dst = alias == 0 ? o : alias == 1 ? a : c;
            ot_node node = tk_node(OT_OP_SUM, 3, 1);
            ot_tensor in[3] = {tk_t(OT_F32, a, 1, (int)n), tk_t(OT_F32, b, 1, (int)n), tk_t(OT_F32, c, 1, (int)n)};
            ot_tensor out[1] = {tk_t(OT_F32, dst, 1, (int)n)};
            assert_int_equal(tk_run_ex(&node, in, out, threads, 0, 0, 0, NULL), OT_OK);
            assert_memory_equal(dst, want, (size_t)n * sizeof(float));
            tk_node_free(&node);
        }
    free(a), free(want), free(keep);
}

/* ReduceToLike over leading axes (a bias gradient) against column sums in row order. */
static void test_reduce_to_like_columns(void **state) {
    (void)state;
    int b = 3, t = 37, c = 2 * 256 + 41;
    int64_t n = (int64_t)b * t * c;
    float *dy = malloc((size_t)n * sizeof(float)), *dx = malloc((size_t)c * sizeof(float));
    float *want = malloc((size_t)c * sizeof(float));
    tk_fill(dy, n, 31, -10.0f, 10.0f);
    for (int k = 0; k < c; k++) {
        double acc = 0.0;
        for (int64_t j = 0; j < (int64_t)b * t; j++) acc += dy[j * c + k];
        want[k] = (float)acc;
    }
    for (int threads = 1; threads <= 2; threads++) {
        ot_node node = tk_node(OT_OP_REDUCE_TO_LIKE, 2, 1);
        ot_tensor in[2] = {tk_t(OT_F32, dy, 3, b, t, c), tk_t(OT_F32, dx, 1, c)};
        ot_tensor out[1] = {tk_t(OT_F32, dx, 1, c)};
        assert_int_equal(tk_run_ex(&node, in, out, threads, 0, 0, 0, NULL), OT_OK);
        assert_memory_equal(dx, want, (size_t)c * sizeof(float));
        tk_node_free(&node);
    }
    free(dy), free(dx), free(want);
}

static void test_gemm_trans_b(void **state) {
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        check_gemm_tb(37, 129, 300, threads);
        check_gemm_tb(512, 128, 384, threads); /* gpt4_d128's qkv */
        check_gemm_tb(256, 768, 640, threads);
        check_gemm_tb(5, 3, 2, threads);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transpose_tiled),
        cmocka_unit_test(test_cross_entropy_lanes),
        cmocka_unit_test(test_layer_norm_grad_rows),
        cmocka_unit_test(test_softmax_grad_lines),
        cmocka_unit_test(test_sum_fused),
        cmocka_unit_test(test_reduce_to_like_columns),
        cmocka_unit_test(test_gemm_trans_b),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
