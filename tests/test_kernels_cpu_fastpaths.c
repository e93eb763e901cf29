/* test_kernels_cpu_fastpaths.c — the speed paths added from bench/NOTES.md give the
 * same bits as the plain rules they replace: Dropout's 8-lane Philox against
 * ot_philox_uniform element by element (odd lengths, block tails, indices across
 * 2^32, any step and node), and the depthwise Conv's vectorisable interior against
 * a float reference that sums the taps in the documented (kh, kw) order, on images
 * wider than one chunk, with strides, dilations and asymmetric pads; Relu and Clip
 * on NaN, signed zeros and infinities; float arithmetic over broadcast rows;
 * Tanh's and Erf's accuracy and lane independence; ConvGradInput's and
 * ConvGradWeight's fast paths (1x1, depthwise, hoisted im2col/col2im ranges, images
 * batched into one GEMM, in chunks) against their general GEMM + per-element
 * im2col/col2im path: the same bits per image, within rounding where images are
 * batched (OpenBLAS's result depends on the GEMM's shape), and bitwise repeatable. */
#include <cblas.h>
#include <omp.h>

#include "kernels/cpu/cpu_philox.h"
#include "kernels/cpu/grad_kernels.h"
#include "exec/rng.h"
#include "test_kernels_cpu_util.h"

/* The bulk uniforms across the 2^32 boundary of the element index (ctr[0] wraps,
 * ctr[1] counts up inside one group of 8) and with odd offsets and lengths. */
static void test_philox_uniforms_bulk(void **state) {
    (void)state;
    const uint64_t starts[] = {0, 5, (1ULL << 32) - 3, (7ULL << 32) + 1000};
    float u[37];
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
        ot_cpu_philox_uniforms(0xfeedULL << 20, 123456789ULL, 77, starts[s], 37, u);
        for (int k = 0; k < 37; k++) {
            float want = ot_philox_uniform(0xfeedULL << 20, 123456789ULL, 77, starts[s] + (uint64_t)k);
            assert_memory_equal(&u[k], &want, sizeof want);
        }
    }
}

/* Many keys, steps and nodes, every start offset around the 2^32 carry of the
 * element index and around 2^64, and every length from 0 to 41 plus whole 256
 * blocks: the 16- and 8-lane paths (per-run scalars, carry fallbacks, the tails)
 * against the scalar rule, bit for bit. */
static void test_philox_uniforms_many(void **state) {
    (void)state;
    const uint64_t seeds[] = {0, 1, 0xffffffffULL, 0xffffffffULL << 32, ~0ULL, 0x0123456789abcdefULL};
    const uint64_t steps[] = {0, 1, 0xffffffffULL, 0x1234567890ULL};
    const uint32_t nodes[] = {0, 3, 0xffffffffu};
    const uint64_t bases[] = {0, (1ULL << 32) - 24, (5ULL << 32) - 24, ~0ULL - 300};
    float u[300];
    for (size_t a = 0; a < sizeof seeds / sizeof seeds[0]; a++)
        for (size_t b = 0; b < sizeof steps / sizeof steps[0]; b++)
            for (size_t c = 0; c < sizeof nodes / sizeof nodes[0]; c++)
                for (size_t d = 0; d < sizeof bases / sizeof bases[0]; d++)
                    for (int off = 0; off < 24; off++) {
                        int len = off < 20 ? 42 - off : 256 + off;
                        uint64_t i0 = bases[d] + (uint64_t)off;
                        ot_cpu_philox_uniforms(seeds[a], steps[b], nodes[c], i0, len, u);
                        for (int k = 0; k < len; k++) {
                            float want = ot_philox_uniform(seeds[a], steps[b], nodes[c], i0 + (uint64_t)k);
                            assert_memory_equal(&u[k], &want, sizeof want);
                        }
                    }
    /* Every length from 0 to 41 at one start, so each tail size is seen. */
    for (int len = 0; len < 42; len++) {
        ot_cpu_philox_uniforms(7, 9, 11, 1000, len, u);
        for (int k = 0; k < len; k++) {
            float want = ot_philox_uniform(7, 9, 11, 1000 + (uint64_t)k);
            assert_memory_equal(&u[k], &want, sizeof want);
        }
    }
}

static void check_dropout(int n, float ratio, uint64_t step, int node, int threads) {
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    uint8_t *mask = malloc((size_t)n);
    tk_fill(x, n, 7, -2.0f, 2.0f);
    ot_node d = tk_node(OT_OP_DROPOUT, 1, 2);
    ot_node_set_attr_float(&d, "ratio", ratio);
    ot_node_set_attr_int(&d, "training_mode", 1);
    ot_tensor in[1] = {tk_t(OT_F32, x, 1, n)};
    ot_tensor out[2] = {tk_t(OT_F32, y, 1, n), tk_t(OT_BOOL, mask, 1, n)};
    assert_int_equal(tk_run_ex(&d, in, out, threads, 0x0123456789abcdefULL, step, node, NULL), OT_OK);
    float scale = 1.0f / (1.0f - ratio);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        bool keep = ot_dropout_keep(0x0123456789abcdefULL, step, (uint32_t)node, (uint64_t)i, ratio);
        float want = keep ? x[i] * scale : 0.0f;
        if (mask[i] != keep || memcmp(&y[i], &want, sizeof want)) bad++;
    }
    if (bad) print_error("dropout n=%d ratio=%g threads=%d: %d elements differ from ot_dropout_keep\n", n,
                         (double)ratio, threads, bad);
    assert_int_equal(bad, 0);
    tk_node_free(&d);
    free(x);
    free(y);
    free(mask);
}

static void test_dropout_matches_scalar_rule(void **state) {
    (void)state;
    check_dropout(13, 0.5f, 0, 0, 1);         /* shorter than one 8-lane group */
    check_dropout(257, 0.1f, 3, 7, 1);        /* one block and a tail */
    check_dropout(100003, 0.3f, 9, 12, 2);    /* threaded, odd length */
    check_dropout(40000, 0.9f, 0xffffffffULL, 1, 2);
}

/* Relu and Clip, 4 lanes at a time, against their scalar rules on NaN, -0, +-inf,
 * the bounds themselves and ordinary values; lengths with and without a tail. */
static void test_relu_clip_same_bits(void **state) {
    (void)state;
    enum { N = 1031 };
    float x[N], y[N];
    tk_fill(x, N, 41, -8.0f, 8.0f);
    const float special[] = {NAN, -0.0f, 0.0f, INFINITY, -INFINITY, 6.0f, -1.0f, 1e-30f, -1e-30f};
    for (int i = 0; i < 9; i++) x[i * 97] = special[i];
    const int lens[] = {N, 3, 8};
    for (int which = 0; which < 2; which++)
        for (int l = 0; l < 3; l++) {
            int n = lens[l];
            ot_node u = tk_node(which ? OT_OP_CLIP : OT_OP_RELU, 1, 1);
            if (which) {
                ot_node_set_attr_float(&u, "min", 0.0f);
                ot_node_set_attr_float(&u, "max", 6.0f);
            }
            ot_tensor in[1] = {tk_t(OT_F32, x, 1, n)}, out[1] = {tk_t(OT_F32, y, 1, n)};
            assert_int_equal(tk_run_ex(&u, in, out, 2, 0, 0, 0, NULL), OT_OK);
            for (int i = 0; i < n; i++) {
                float v = x[i], want;
                if (which) {
                    v = v < 0.0f ? 0.0f : v;
                    want = v > 6.0f ? 6.0f : v;
                } else {
                    want = v > 0.0f ? v : 0.0f;
                }
                if (memcmp(&y[i], &want, sizeof want))
                    print_error("%s x=%g: got %g want %g\n", which ? "Clip" : "Relu", (double)x[i], (double)y[i],
                                (double)want);
                assert_memory_equal(&y[i], &want, sizeof want);
            }
            tk_node_free(&u);
        }
}

/* Float Add/Sub/Mul/Div, 4 lanes at a time: same shapes, a row vector broadcast down
 * the rows, and a column (one value per row), against the scalar operation. */
static void test_arith_same_bits(void **state) {
    (void)state;
    enum { R = 5, C = 11 };
    float a[R * C], b[R * C], y[R * C];
    tk_fill(a, R * C, 51, -3.0f, 3.0f);
    tk_fill(b, R * C, 52, 0.5f, 2.0f);
    const ot_op ops[] = {OT_OP_ADD, OT_OP_SUB, OT_OP_MUL, OT_OP_DIV};
    for (int o = 0; o < 4; o++)
        for (int form = 0; form < 3; form++) {
            ot_node n = tk_node(ops[o], 2, 1);
            ot_tensor in[2] = {tk_t(OT_F32, a, 2, R, C),
                               form == 0 ? tk_t(OT_F32, b, 2, R, C)
                               : form == 1 ? tk_t(OT_F32, b, 1, C)
                                           : tk_t(OT_F32, b, 2, R, 1)};
            ot_tensor out[1] = {tk_t(OT_F32, y, 2, R, C)};
            assert_int_equal(tk_run_ex(&n, in, out, 2, 0, 0, 0, NULL), OT_OK);
            for (int r = 0; r < R; r++)
                for (int c = 0; c < C; c++) {
                    float va = a[r * C + c], vb = form == 0 ? b[r * C + c] : form == 1 ? b[c] : b[r];
                    float want = o == 0 ? va + vb : o == 1 ? va - vb : o == 2 ? va * vb : va / vb;
                    assert_memory_equal(&y[r * C + c], &want, sizeof want);
                }
            tk_node_free(&n);
        }
}

/* Tanh and Erf (rational approximations, 4 lanes per step): within 5e-7 of the double
 * function on a dense grid and on NaN, +-inf, signed zeros; and an element gets the
 * same bits whether a vector lane or the scalar tail computes it. */
static void check_rational(ot_op op, double (*ref)(double), double lim, double tol) {
    enum { N = 24001 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), *y1 = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) x[i] = (float)(-lim + 2.0 * lim * i / (N - 1));
    x[5] = NAN;
    x[6] = INFINITY;
    x[7] = -INFINITY;
    x[8] = -0.0f;
    x[9] = 1e-5f;
    ot_node t = tk_node(op, 1, 1);
    ot_tensor in[1] = {tk_t(OT_F32, x, 1, N)}, out[1] = {tk_t(OT_F32, y, 1, N)};
    assert_int_equal(tk_run_ex(&t, in, out, 2, 0, 0, 0, NULL), OT_OK);
    for (int i = 0; i < N; i++) {
        if (isnan(x[i])) {
            assert_true(isnan(y[i]));
            continue;
        }
        double want = ref((double)x[i]);
        double e = fabs((double)y[i] - want) / (fabs(want) > 1e-30 ? fabs(want) : 1.0);
        if (e > tol) print_error("%s(%.9g) = %.9g, want %.9g\n", ot_op_name(op), (double)x[i], (double)y[i], want);
        assert_true(e <= tol);
    }
    assert_true(y[8] == 0.0f && signbit(y[8]));
    /* shifted by one element: every element moves to another lane or to the tail */
    ot_tensor in1[1] = {tk_t(OT_F32, x + 1, 1, N - 1)}, out1[1] = {tk_t(OT_F32, y1, 1, N - 1)};
    assert_int_equal(tk_run_ex(&t, in1, out1, 1, 0, 0, 0, NULL), OT_OK);
    assert_memory_equal(y + 1, y1, (N - 1) * sizeof(float));
    tk_node_free(&t);
    free(x);
    free(y);
    free(y1);
}

static void test_tanh_erf_accuracy_and_lanes(void **state) {
    (void)state;
    check_rational(OT_OP_TANH, tanh, 12.0, 5e-7);
    check_rational(OT_OP_ERF, erf, 6.0, 5e-7);
}

typedef struct dw_case {
    int N, C, mult, H, W, KH, KW, SH, SW, DH, DW, PT, PL, PB, PR;
    bool bias;
} dw_case;

static int out_size(int in, int k, int s, int d, int pb, int pe) { return (in + pb + pe - ((k - 1) * d + 1)) / s + 1; }

static void check_depthwise(const dw_case *c, int threads) {
    int M = c->C * c->mult, OH = out_size(c->H, c->KH, c->SH, c->DH, c->PT, c->PB),
        OW = out_size(c->W, c->KW, c->SW, c->DW, c->PL, c->PR);
    int nx = c->N * c->C * c->H * c->W, nw = M * c->KH * c->KW, ny = c->N * M * OH * OW;
    float *x = malloc((size_t)nx * sizeof(float)), *w = malloc((size_t)nw * sizeof(float));
    float *b = malloc((size_t)M * sizeof(float)), *y = malloc((size_t)ny * sizeof(float));
    tk_fill(x, nx, 31, -1, 1);
    tk_fill(w, nw, 32, -1, 1);
    tk_fill(b, M, 33, -1, 1);
    ot_node n = tk_node(OT_OP_CONV, c->bias ? 3 : 2, 1);
    int64_t st[2] = {c->SH, c->SW}, dl[2] = {c->DH, c->DW}, pd[4] = {c->PT, c->PL, c->PB, c->PR};
    ot_node_set_attr_int(&n, "group", c->C);
    ot_node_set_attr_ints(&n, "strides", st, 2);
    ot_node_set_attr_ints(&n, "dilations", dl, 2);
    ot_node_set_attr_ints(&n, "pads", pd, 4);
    ot_tensor in[3] = {tk_t(OT_F32, x, 4, c->N, c->C, c->H, c->W), tk_t(OT_F32, w, 4, M, 1, c->KH, c->KW),
                       tk_t(OT_F32, b, 1, M)};
    ot_tensor out[1] = {tk_t(OT_F32, y, 4, c->N, M, OH, OW)};
    assert_int_equal(tk_run_ex(&n, in, out, threads, 0, 0, 0, NULL), OT_OK);
    int bad = 0;
    for (int i = 0; i < c->N; i++)
        for (int m = 0; m < M; m++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    const float *xc = x + (i * c->C + m / c->mult) * c->H * c->W;
                    float s = 0.0f;
                    for (int kh = 0; kh < c->KH; kh++) {
                        int ih = oh * c->SH - c->PT + kh * c->DH;
                        if (ih < 0 || ih >= c->H) continue;
                        for (int kw = 0; kw < c->KW; kw++) {
                            int iw = ow * c->SW - c->PL + kw * c->DW;
                            if (iw < 0 || iw >= c->W) continue;
                            s += xc[ih * c->W + iw] * w[(m * c->KH + kh) * c->KW + kw];
                        }
                    }
                    float want = s + (c->bias ? b[m] : 0.0f);
                    float got = y[((i * M + m) * OH + oh) * OW + ow];
                    if (memcmp(&got, &want, sizeof got)) bad++;
                }
    if (bad) print_error("depthwise %dx%d K%dx%d S%d,%d D%d,%d: %d of %d outputs differ\n", c->H, c->W, c->KH, c->KW,
                         c->SH, c->SW, c->DH, c->DW, bad, ny);
    assert_int_equal(bad, 0);
    tk_node_free(&n);
    free(x);
    free(w);
    free(b);
    free(y);
}

static void test_depthwise_same_bits(void **state) {
    (void)state;
    const dw_case cases[] = {
        /* N C mult H   W  KH KW SH SW DH DW PT PL PB PR bias */
        {2, 3, 1, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false},   /* MobileNet's block */
        {2, 4, 2, 9, 150, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true},  /* wider than a chunk, multiplier 2 */
        {1, 5, 1, 11, 77, 3, 5, 2, 2, 1, 1, 1, 2, 0, 1, true},  /* stride 2, asymmetric pads */
        {1, 3, 1, 12, 90, 3, 3, 1, 3, 2, 2, 2, 2, 2, 2, false}, /* dilation 2, stride 3 along W */
        {1, 2, 1, 4, 3, 3, 3, 1, 1, 1, 1, 0, 4, 0, 4, true},    /* no interior column at all */
        {1, 40, 1, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true}, /* big enough for the threaded path */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_depthwise(&cases[i], 1);
        check_depthwise(&cases[i], 2);
    }
}

enum { CG_DX = 1, CG_DW = 2 };

typedef struct cg_case {
    int nd, N, Cin, Cout, G, k, s, d;
    int in[3], pb[3], pe[3];
    int exact; /* CG_DX, CG_DW: must equal the general path's bits (else within rounding:
                * depthwise dW's own sum order; batched images) */
} cg_case;

/* Runs ConvGradInput (dY, W, X) or ConvGradWeight (dY, X, W) into res. */
static void cg_run(const cg_case *c, ot_op op, int threads, bool general, float *dy, float *w, float *x, float *res,
                   const int64_t *yd, const int64_t *wd, const int64_t *xd) {
    int rank = 2 + c->nd;
    ot_node n = tk_node(op, 3, 1);
    int64_t ks[3], ss[3], ds[3], ps[6];
    for (int i = 0; i < c->nd; i++) {
        ks[i] = c->k;
        ss[i] = c->s;
        ds[i] = c->d;
        ps[i] = c->pb[i];
        ps[c->nd + i] = c->pe[i];
    }
    ot_node_set_attr_ints(&n, "kernel_shape", ks, c->nd);
    ot_node_set_attr_ints(&n, "strides", ss, c->nd);
    ot_node_set_attr_ints(&n, "dilations", ds, c->nd);
    ot_node_set_attr_ints(&n, "pads", ps, 2 * c->nd);
    ot_node_set_attr_int(&n, "group", c->G);
    ot_tensor in[3], out[1];
    in[0] = tk_ta(OT_F32, dy, rank, yd);
    if (op == OT_OP_CONV_GRAD_INPUT) {
        in[1] = tk_ta(OT_F32, w, rank, wd);
        in[2] = tk_ta(OT_F32, x, rank, xd);
        out[0] = tk_ta(OT_F32, res, rank, xd);
    } else {
        in[1] = tk_ta(OT_F32, x, rank, xd);
        in[2] = tk_ta(OT_F32, w, rank, wd);
        out[0] = tk_ta(OT_F32, res, rank, wd);
    }
    ot_kernel_ctx ctx = {.n_threads = threads, .conv_grad_general = general, .no_dnnl = true}; /* ours vs ours */
    ctx.workspace_bytes = ot_cpu_workspace_bytes(&n, in, out);
    ctx.workspace = ctx.workspace_bytes ? malloc(ctx.workspace_bytes) : NULL;
    ot_error e = {0};
    ot_status st = ot_cpu_run_node(&n, in, out, &ctx, &e);
    free(ctx.workspace);
    assert_int_equal(st, OT_OK);
    tk_node_free(&n);
}

static int cg_compare(const char *what, int ci, const float *got, const float *want, int64_t n, bool exact) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float tol = exact ? 0.0f : 1e-5f * (1.0f + fabsf(want[i]) * 64.0f);
        if (!(fabsf(got[i] - want[i]) <= tol)) {
            if (!bad) print_error("case %d %s [%lld]: %.9g, general path %.9g\n", ci, what, (long long)i,
                                  (double)got[i], (double)want[i]);
            bad++;
        }
    }
    return bad;
}

static void check_conv_grad(const cg_case *c, int ci) {
    int rank = 2 + c->nd;
    int64_t xd[5] = {c->N, c->Cin}, wd[5] = {c->Cout, c->Cin / c->G}, yd[5] = {c->N, c->Cout};
    for (int i = 0; i < c->nd; i++) {
        xd[2 + i] = c->in[i];
        wd[2 + i] = c->k;
        yd[2 + i] = (c->in[i] + c->pb[i] + c->pe[i] - ((c->k - 1) * c->d + 1)) / c->s + 1;
    }
    int64_t nx = 1, nw = 1, ny = 1;
    for (int i = 0; i < rank; i++) {
        nx *= xd[i];
        nw *= wd[i];
        ny *= yd[i];
    }
    float *x = malloc((size_t)nx * sizeof(float)), *w = malloc((size_t)nw * sizeof(float));
    float *dy = malloc((size_t)ny * sizeof(float));
    /* r/q[0], [1]: general path on 1 and 2 threads; [2], [3]: fast paths; [4]: the fast
     * path on 2 threads again. The context's thread count reaches OpenBLAS too, whose
     * GEMM split may change the bits, so each fast path is compared with the general
     * path on the same count. */
    float *r[5], *q[5];
    for (int k = 0; k < 5; k++) {
        r[k] = malloc((size_t)nx * sizeof(float));
        q[k] = malloc((size_t)nw * sizeof(float));
    }
    tk_fill(x, nx, 11 + (uint32_t)ci, -1.0f, 1.0f);
    tk_fill(w, nw, 23 + (uint32_t)ci, -1.0f, 1.0f);
    tk_fill(dy, ny, 37 + (uint32_t)ci, -1.0f, 1.0f);
    for (int k = 0; k < 5; k++) { /* stale values must not leak into the results */
        for (int64_t i = 0; i < nx; i++) r[k][i] = NAN;
        for (int64_t i = 0; i < nw; i++) q[k][i] = NAN;
    }
    for (int k = 0; k < 5; k++) {
        int threads = k == 4 ? 2 : 1 + k % 2;
        cg_run(c, OT_OP_CONV_GRAD_INPUT, threads, k < 2, dy, w, x, r[k], yd, wd, xd);
        cg_run(c, OT_OP_CONV_GRAD_WEIGHT, threads, k < 2, dy, w, x, q[k], yd, wd, xd);
    }
    int bad = 0;
    for (int t = 0; t < 2; t++)
        bad += cg_compare("dX", ci, r[2 + t], r[t], nx, c->exact & CG_DX) +
               cg_compare("dW", ci, q[2 + t], q[t], nw, c->exact & CG_DW);
    bad += cg_compare("dX again", ci, r[4], r[3], nx, true) + cg_compare("dW again", ci, q[4], q[3], nw, true);
    assert_int_equal(bad, 0);
    free(x);
    free(w);
    free(dy);
    for (int k = 0; k < 5; k++) {
        free(r[k]);
        free(q[k]);
    }
}

static void test_conv_grad_fast_paths(void **state) {
    (void)state;
    const cg_case cases[] = {
        /* nd N Cin Cout G k s d  in         pads begin  pads end  exact */
        {2, 4, 32, 32, 32, 3, 1, 1, {16, 16}, {1, 1}, {1, 1}, CG_DX}, /* depthwise, threaded */
        {2, 2, 5, 5, 5, 3, 2, 2, {9, 7}, {0, 2}, {1, 1}, CG_DX},      /* depthwise, stride, dilation, asym pads */
        {1, 2, 3, 3, 3, 5, 2, 1, {11}, {2}, {1}, CG_DX},              /* depthwise 1-D */
        {3, 2, 3, 3, 3, 3, 1, 1, {4, 5, 6}, {1, 1, 1}, {1, 0, 1}, CG_DX}, /* depthwise 3-D */
        {2, 2, 3, 3, 3, 3, 1, 1, {2, 3}, {2, 2}, {2, 2}, CG_DX},     /* depthwise, taps off the image */
        /* below, images of fewer than OT_CONV_BATCH_COLS outputs are batched: rounding */
        {2, 4, 16, 24, 1, 1, 1, 1, {8, 8}, {0, 0}, {0, 0}, 0},       /* pointwise */
        {2, 2, 6, 10, 2, 1, 1, 3, {5, 7}, {0, 0}, {0, 0}, 0},        /* pointwise, grouped */
        {1, 3, 4, 6, 1, 1, 1, 1, {9}, {0}, {0}, 0},                  /* pointwise 1-D */
        {2, 2, 8, 16, 1, 3, 1, 1, {16, 16}, {1, 1}, {1, 1}, 0},      /* ResNet's 3x3, threaded */
        {2, 2, 4, 6, 2, 3, 2, 2, {11, 9}, {2, 0}, {1, 2}, 0},        /* grouped, stride, dilation, asym pads */
        {2, 2, 4, 6, 1, 1, 2, 1, {8, 8}, {0, 0}, {0, 0}, 0},         /* 1x1 stride-2 downsample */
        {2, 2, 4, 8, 4, 3, 1, 1, {6, 6}, {1, 1}, {1, 1}, 0},         /* depthwise multiplier 2: general */
        {3, 1, 2, 3, 1, 2, 1, 1, {3, 4, 5}, {1, 0, 1}, {0, 1, 1}, CG_DX | CG_DW}, /* 3-D, one image */
        {1, 2, 3, 2, 1, 3, 3, 2, {10}, {3}, {3}, 0},                 /* 1-D, stride 3 */
        {2, 5, 3, 4, 1, 3, 1, 1, {20, 20}, {1, 1}, {1, 1}, 0},       /* chunks of 3 + 2 images */
        {2, 5, 6, 4, 2, 1, 1, 1, {20, 20}, {0, 0}, {0, 0}, 0},       /* pointwise, grouped, chunks */
        /* one image per GEMM (wide enough): the general path's bits */
        {2, 2, 3, 4, 1, 3, 1, 1, {32, 32}, {1, 1}, {1, 1}, CG_DX | CG_DW},
        {2, 2, 3, 5, 1, 1, 1, 1, {32, 33}, {0, 0}, {0, 0}, CG_DX | CG_DW}, /* pointwise */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_conv_grad(&cases[i], (int)i);
}

/* A Gemm runs on its context's thread count whatever the process had set before
 * (OpenBLAS's count included: a count of 1 sticks in OpenBLAS until set again), and
 * leaves the calling thread's OpenMP count as it was. */
static void test_gemm_threads_per_context(void **state) {
    (void)state;
    enum { M = 48, K = 64, N = 40 };
    static float a[M * K], b[K * N], y1[M * N], y2[M * N];
    tk_fill(a, M * K, 5, -1.0f, 1.0f);
    tk_fill(b, K * N, 6, -1.0f, 1.0f);
    ot_node n = tk_node(OT_OP_GEMM, 2, 1);
    ot_tensor in[2] = {tk_t(OT_F32, a, 2, M, K), tk_t(OT_F32, b, 2, K, N)};
    ot_tensor out1[1] = {tk_t(OT_F32, y1, 2, M, N)}, out2[1] = {tk_t(OT_F32, y2, 2, M, N)};
    int blas = openblas_get_num_threads(), omp = omp_get_max_threads();
    for (int threads = 1; threads <= 2; threads++) {
        assert_int_equal(tk_run_ex(&n, in, out1, threads, 0, 0, 0, NULL), OT_OK);
        assert_int_equal(openblas_get_num_threads(), threads);
        assert_int_equal(omp_get_max_threads(), omp);
        /* the same context count after the process's own count changed: same bits */
        openblas_set_num_threads(threads == 1 ? 2 : 1);
        omp_set_num_threads(omp);
        assert_int_equal(tk_run_ex(&n, in, out2, threads, 0, 0, 0, NULL), OT_OK);
        assert_int_equal(openblas_get_num_threads(), threads);
        assert_int_equal(omp_get_max_threads(), omp);
        assert_memory_equal(y1, y2, sizeof y1);
    }
    /* a context without a count takes the OpenMP default, even after a count of 1 */
    assert_int_equal(tk_run_ex(&n, in, out1, 1, 0, 0, 0, NULL), OT_OK);
    assert_int_equal(tk_run_ex(&n, in, out1, 0, 0, 0, 0, NULL), OT_OK);
    assert_int_equal(openblas_get_num_threads(), omp);
    openblas_set_num_threads(blas);
    omp_set_num_threads(omp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_uniforms_bulk),
        cmocka_unit_test(test_philox_uniforms_many),
        cmocka_unit_test(test_dropout_matches_scalar_rule),
        cmocka_unit_test(test_depthwise_same_bits),
        cmocka_unit_test(test_relu_clip_same_bits),
        cmocka_unit_test(test_arith_same_bits),
        cmocka_unit_test(test_tanh_erf_accuracy_and_lanes),
        cmocka_unit_test(test_conv_grad_fast_paths),
        cmocka_unit_test(test_gemm_threads_per_context),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
