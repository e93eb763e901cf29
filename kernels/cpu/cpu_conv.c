/* cpu_conv.c — Conv (1-D and 2-D; groups, dilations, strides, pads, auto_pad) on
 * the CPU. Depthwise convolutions (one input channel per group) use a direct kernel
 * (8 channels per vector where there is one output channel per group and the planes
 * are small, conv_cols.h).
 * The rest are GEMMs: where images are small, one per (chunk of images, group)
 * (ot_conv_batch, conv_cols.h) on a column matrix of the chunk's images side by side
 * (a 1x1 conv's: X's channels as rows, no im2col), into rows that are copied back to
 * NCHW; else one per (image, group), on the input as it lies (pointwise) or through
 * im2col into ctx->workspace. 1-D is run as 2-D with a height of 1. */
#include "kernels/cpu/conv_cols.h"
#include "kernels/cpu/conv_dnnl.h"

typedef struct conv_geom {
    int64_t N, C, H, W, M, OH, OW, KH, KW, SH, SW, DH, DW, PH, PW, G, Cg, Mg;
} conv_geom;

static ot_status conv_geom_init(conv_geom *g, const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                                ot_error *err) {
    const ot_shape *xs = &in[0].shape, *ws = &in[1].shape, *ys = &out[0].shape;
    memset(g, 0, sizeof *g);
    if (xs->rank != 3 && xs->rank != 4)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (Conv): the CPU kernel handles 1-D and 2-D convolutions, got input rank %d",
                       node->name, xs->rank);
    if (ws->rank != xs->rank || ys->rank != xs->rank)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (Conv): X, W and Y ranks differ", node->name);
    ot_window w;
    ot_status st = ot_window_init(&w, node, xs, ys, &ws->dim[2], err);
    if (st) return st;
    bool two = xs->rank == 4;
    g->N = xs->dim[0];
    g->C = xs->dim[1];
    g->M = ws->dim[0];
    g->H = two ? w.in[0] : 1;
    g->W = two ? w.in[1] : w.in[0];
    g->OH = two ? w.out[0] : 1;
    g->OW = two ? w.out[1] : w.out[0];
    g->KH = two ? w.k[0] : 1;
    g->KW = two ? w.k[1] : w.k[0];
    g->SH = two ? w.stride[0] : 1;
    g->SW = two ? w.stride[1] : w.stride[0];
    g->DH = two ? w.dil[0] : 1;
    g->DW = two ? w.dil[1] : w.dil[0];
    g->PH = two ? w.pad_begin[0] : 0;
    g->PW = two ? w.pad_begin[1] : w.pad_begin[0];
    g->G = w.group;
    if (g->G < 1 || g->C % g->G || g->M % g->G)
        return ot_fail(err, OT_E_MODEL, "node '%s' (Conv): group %lld does not divide channels", node->name,
                       (long long)g->G);
    g->Cg = g->C / g->G;
    g->Mg = g->M / g->G;
    if (ws->dim[1] != g->Cg || ys->dim[0] != g->N || ys->dim[1] != g->M)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (Conv): W or Y shape disagrees with X and group", node->name);
    return OT_OK;
}

static bool is_depthwise(const conv_geom *g) { return g->Cg == 1 && g->G > 1; }

/* The GEMM paths' geometry (conv_cols.h) and images per GEMM (*nb): X, W, Y. */
static ot_status gemm_geom(ot_conv3 *p, int64_t *nb, const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                           ot_error *err) {
    ot_status st = ot_conv3_init(p, node, &in[0].shape, &in[1].shape, &out[0].shape, err);
    if (st) return st;
    int64_t kdim = p->Cig * p->K;
    *nb = kdim > 0 ? ot_conv_batch(p, kdim + p->Cog) : 1;
    return OT_OK;
}

/* Workspace floats: the batched path's column matrix (Kg x nb*L) and output rows
 * (Mg x nb*L); else one image's column matrix (none for a pointwise conv). */
static size_t conv_ws_floats(const ot_conv3 *p, int64_t nb) {
    int64_t kdim = p->Cig * p->K;
    if (nb > 1) return (size_t)((kdim + p->Cog) * nb * p->L);
    return ot_conv3_pointwise(p) ? 0 : (size_t)(kdim * p->L);
}

size_t ot_cpu_conv_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    conv_geom g;
    if (conv_geom_init(&g, node, in, out, NULL) != OT_OK) return 0;
    ot_conv3 p;
    int64_t nb;
    if (gemm_geom(&p, &nb, node, in, out, NULL)) return 0;
    size_t ours = is_depthwise(&g) ? 0 : conv_ws_floats(&p, nb) * sizeof(float);
    size_t dnnl = ot_dnnl_conv_workspace(&p, OT_DNNL_FWD);
    return dnnl > ours ? dnnl : ours;
}

/* One depthwise output point with the bounds checks (image borders). */
static float depthwise_point(const conv_geom *g, const float *xc, const float *wk, int64_t oh, int64_t ow) {
    float s = 0.0f;
    for (int64_t kh = 0; kh < g->KH; kh++) {
        int64_t ih = oh * g->SH - g->PH + kh * g->DH;
        if (ih < 0 || ih >= g->H) continue;
        for (int64_t kw = 0; kw < g->KW; kw++) {
            int64_t iw = ow * g->SW - g->PW + kw * g->DW;
            if (iw < 0 || iw >= g->W) continue;
            s += xc[ih * g->W + iw] * wk[kh * g->KW + kw];
        }
    }
    return s;
}

#define DW_CHUNK 64
#define DW_MAX_KW 32

/* Four floats as one SSE register (GCC and Clang vector extension). */
typedef float v4f __attribute__((vector_size(16)));

/* acc[i] += xs[i * sw] * wv for i < len: the conv kernels' 4-lane axpy where sw == 1. */
static inline void axpy_strided(float *acc, const float *xs, int64_t sw, float wv, int64_t len) {
    if (sw == 1) {
        ot_conv_axpy4(acc, xs, wv, len);
        return;
    }
    for (int64_t i = 0; i < len; i++) acc[i] += xs[i * sw] * wv;
}

/* Depthwise on a zero-bordered copy of the channel whose rows are Wp wide: output
 * (oh, ow) reads xp[s * (oh * Wp + ow) + kh * DH * Wp + kw * DW] for every tap, so
 * each tap is one axpy over the flattened plane (the columns past OW are computed and
 * dropped) instead of one per tap and output row. A tap in the border adds x * w =
 * +-0 to a sum that is never -0 (it starts at +0.0f), so each output keeps the bits
 * of its valid taps summed in (kh, kw) order, depthwise_point's; a channel with a
 * non-finite weight (0 * inf = NaN) takes the row path. Planes of up to DW_PAD_MAX
 * floats, equal strides. */
#define DW_PAD_MAX 8192

typedef struct dw_pad {
    int64_t Wp, J, len; /* row width, flattened outputs, buffer floats */
} dw_pad;

static bool dw_pad_init(const conv_geom *g, dw_pad *d) {
    if (g->SH != g->SW || g->OH < 1 || g->OW < 1) return false;
    int64_t s = g->SH, wr = (g->OW - 1) * s + (g->KW - 1) * g->DW + 1;
    d->Wp = g->PW + g->W > wr ? g->PW + g->W : wr;
    d->J = (g->OH - 1) * d->Wp + g->OW;
    int64_t reads = s * (d->J - 1) + (g->KH - 1) * g->DH * d->Wp + (g->KW - 1) * g->DW + 1;
    d->len = reads > (g->PH + g->H) * d->Wp ? reads : (g->PH + g->H) * d->Wp;
    return d->len < DW_PAD_MAX && d->J <= DW_PAD_MAX;
}

static bool finite_taps(const float *wk, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(wk[i])) return false;
    return true;
}


/* axpy_strided for a stride of 2 over the padded copy: the even floats of two 4-float
 * loads (one shuffle) instead of four scalar loads; each lane is the same multiply
 * and add. The last load reads one float past xs[2 * (len - 1)]: inside the padded
 * buffer (dw_pad_init keeps len below DW_PAD_MAX). */
static void axpy_s2_padded(float *acc, const float *xs, float wv, int64_t len) {
    const v4f wv4 = {wv, wv, wv, wv};
    int64_t i = 0;
    for (; i + 4 <= len; i += 4) {
        v4f a, b, av;
        memcpy(&a, xs + 2 * i, sizeof a);
        memcpy(&b, xs + 2 * i + 4, sizeof b);
        memcpy(&av, acc + i, sizeof av);
        av += __builtin_shufflevector(a, b, 0, 2, 4, 6) * wv4; /* clang and GCC >= 12 */
        memcpy(acc + i, &av, sizeof av);
    }
    for (; i < len; i++) acc[i] += xs[2 * i] * wv;
}

/* One plane through the padded copy; xpad and acc hold DW_PAD_MAX floats each. */
static void depthwise_plane_padded(const conv_geom *g, const dw_pad *d, const float *xc, const float *wk, float b0,
                                   float *yp, float *xpad, float *acc) {
    memset(xpad, 0, (size_t)d->len * sizeof(float));
    for (int64_t ih = 0; ih < g->H; ih++)
        memcpy(xpad + (g->PH + ih) * d->Wp + g->PW, xc + ih * g->W, (size_t)g->W * sizeof(float));
    for (int64_t j = 0; j < d->J; j++) acc[j] = 0.0f;
    for (int64_t kh = 0; kh < g->KH; kh++)
        for (int64_t kw = 0; kw < g->KW; kw++)
            if (g->SH == 2)
                axpy_s2_padded(acc, xpad + kh * g->DH * d->Wp + kw * g->DW, wk[kh * g->KW + kw], d->J);
            else
                axpy_strided(acc, xpad + kh * g->DH * d->Wp + kw * g->DW, g->SH, wk[kh * g->KW + kw], d->J);
    for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow = 0; ow < g->OW; ow++) yp[oh * g->OW + ow] = acc[oh * d->Wp + ow] + b0;
}

/* One input channel per group: each output channel m reads channel m / Mg. Tap-major
 * over a chunk of an output row: for tap kw only the columns [lo[kw], hi[kw]) read
 * inside the row, so no per-tap bounds checks, and each output still sums its valid
 * taps in (kh, kw) order from 0.0f, as depthwise_point does (same bits). Was 46% of
 * MobileNet's forward instructions with a bounds check per tap (bench/NOTES.md). */
static void depthwise(const conv_geom *g, const float *x, const float *w, const float *bias, float *y, int nt) {
    int64_t planes = g->N * g->M, ohw = g->OH * g->OW;
    bool par = planes * ohw * g->KH * g->KW >= OT_CPU_PAR_MIN;
    bool fast = g->KW <= DW_MAX_KW;
    dw_pad pd;
    bool padded = dw_pad_init(g, &pd);
    int64_t lo[DW_MAX_KW], hi[DW_MAX_KW];
    for (int64_t kw = 0; fast && kw < g->KW; kw++) {
        int64_t iw0 = kw * g->DW - g->PW; /* iw = ow * SW + iw0 must lie in [0, W) */
        int64_t a = iw0 >= 0 ? 0 : (-iw0 + g->SW - 1) / g->SW;
        int64_t b = g->W - 1 - iw0 < 0 ? 0 : (g->W - 1 - iw0) / g->SW + 1;
        if (b > g->OW) b = g->OW;
        lo[kw] = a;
        hi[kw] = a > b ? a : b;
    }
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t p = 0; p < planes; p++) {
        int64_t n = p / g->M, m = p % g->M, c = m / g->Mg;
        const float *xc = x + (n * g->C + c) * g->H * g->W;
        const float *wk = w + m * g->KH * g->KW;
        float *yp = y + p * ohw;
        float b0 = bias ? bias[m] : 0.0f;
        if (padded && finite_taps(wk, g->KH * g->KW)) {
            float xpad[DW_PAD_MAX], acc[DW_PAD_MAX];
            depthwise_plane_padded(g, &pd, xc, wk, b0, yp, xpad, acc);
            continue;
        }
        for (int64_t oh = 0; oh < g->OH; oh++) {
            float *yr = yp + oh * g->OW;
            if (!fast) {
                for (int64_t ow = 0; ow < g->OW; ow++) yr[ow] = depthwise_point(g, xc, wk, oh, ow) + b0;
                continue;
            }
            for (int64_t c0 = 0; c0 < g->OW; c0 += DW_CHUNK) {
                int64_t c1 = g->OW - c0 < DW_CHUNK ? g->OW : c0 + DW_CHUNK;
                float acc[DW_CHUNK];
                for (int64_t i = 0; i < c1 - c0; i++) acc[i] = 0.0f;
                for (int64_t kh = 0; kh < g->KH; kh++) {
                    int64_t ih = oh * g->SH - g->PH + kh * g->DH;
                    if (ih < 0 || ih >= g->H) continue;
                    const float *xr = xc + ih * g->W;
                    for (int64_t kw = 0; kw < g->KW; kw++) {
                        int64_t a = lo[kw] > c0 ? lo[kw] : c0, b = hi[kw] < c1 ? hi[kw] : c1;
                        if (a >= b) continue;
                        axpy_strided(acc + (a - c0), xr + a * g->SW + kw * g->DW - g->PW, g->SW,
                                     wk[kh * g->KW + kw], b - a);
                    }
                }
                for (int64_t i = 0; i < c1 - c0; i++) yr[c0 + i] = acc[i] + b0;
            }
        }
    }
}

/* Y over chunks of nb images: per group, the chunk's column matrix (Kg x nb*L), one
 * GEMM into output rows (Mg x nb*L) that start as the bias (beta = 1, the per-image
 * path's order), copied back to NCHW. im2col runs on the context's threads: OpenBLAS
 * is the OpenMP build now (cpu_common.h), so its GEMM threads are the same pool, and
 * the CLI sets OMP_WAIT_POLICY=PASSIVE (a serial im2col was 8% of a ResNet-18 step
 * on one core, issue 14). The bias fill and the copies stay serial (memory-bound,
 * short). */
static void conv_batched(const ot_kernel_ctx *ctx, const ot_conv3 *p, int64_t nb, const float *x, const float *w,
                         const float *bias, float *y) {
    int64_t kdim = p->Cig * p->K;
    float *yt = ctx->workspace, *col = yt + p->Cog * nb * p->L;
    bool pointwise = ot_conv3_pointwise(p);
    for (int64_t n0 = 0; n0 < p->N; n0 += nb) {
        int64_t nc = p->N - n0 < nb ? p->N - n0 : nb, ld = nc * p->L;
        for (int64_t gi = 0; gi < p->G; gi++) {
            if (pointwise)
                ot_conv_nc_to_rows(x, p->Cin, p->S, n0, nc, gi * p->Cig, p->Cig, col);
            else
                ot_conv3_im2col_images(p, x + (n0 * p->Cin + gi * p->Cig) * p->S, p->Cin * p->S, nc, col, ld,
                                       ot_cpu_threads(ctx));
            if (bias)
                for (int64_t m = 0; m < p->Cog; m++) {
                    float b0 = bias[gi * p->Cog + m], *r = yt + m * ld;
                    for (int64_t i = 0; i < ld; i++) r[i] = b0;
                }
            ot_cpu_sgemm(ctx, false, false, (int)p->Cog, (int)ld, (int)kdim, 1.0f, w + gi * p->Cog * kdim, (int)kdim,
                        col, (int)ld, bias ? 1.0f : 0.0f, yt, (int)ld);
            ot_conv_rows_to_nc(yt, p->Cout, p->L, n0, nc, gi * p->Cog, p->Cog, y);
        }
    }
}

/* Depthwise with one output channel per input channel, 8 channels side by side
 * (conv_cols.h): each image's 8 X planes interleaved, every tap adds x * w to the
 * interleaved Y from +0 in (kh, kw) order over its valid outputs, then + bias: each
 * output's valid taps in depthwise_point's order, so the same bits, for any weights.
 * False where it does not apply (planes over OT_CONV_LANES_MAX, too many taps). */
static bool depthwise_lanes(const ot_node *node, const ot_tensor *in, ot_tensor *out, const float *bias, int nt) {
    ot_conv3 p;
    ot_conv_tap table[OT_CONV_TAPS_MAX];
    if (ot_conv3_init(&p, node, &in[0].shape, &in[1].shape, &out[0].shape, NULL)) return false;
    const ot_conv_tap *taps = ot_conv_taps(&p, table);
    if (!taps || p.S > OT_CONV_LANES_MAX || p.L > OT_CONV_LANES_MAX) return false;
    const float *x = in[0].data, *w = in[1].data;
    float *y = out[0].data;
    int64_t blocks = (p.Cin + OT_CONV_LANES - 1) / OT_CONV_LANES;
#pragma omp parallel for schedule(static) num_threads(nt) if (p.N * p.Cin * p.K * p.L >= OT_CPU_PAR_MIN)
    for (int64_t b = 0; b < p.N * blocks; b++) {
        int64_t n = b / blocks, c0 = b % blocks * OT_CONV_LANES;
        int64_t nc = p.Cin - c0 < OT_CONV_LANES ? p.Cin - c0 : OT_CONV_LANES;
        float xt[OT_CONV_LANES_MAX * OT_CONV_LANES] __attribute__((aligned(32)));
        float yt[OT_CONV_LANES_MAX * OT_CONV_LANES] __attribute__((aligned(32)));
        if (nc < OT_CONV_LANES) memset(xt, 0, (size_t)p.S * OT_CONV_LANES * sizeof(float));
        memset(yt, 0, (size_t)p.L * OT_CONV_LANES * sizeof(float));
        ot_conv_interleave(x + (n * p.Cin + c0) * p.S, p.S, nc, p.S, xt);
        ot_conv_lanes_taps(&p, taps, w + c0 * p.K, nc, true, xt, yt);
        static const float zeros[OT_CONV_LANES] = {0.0f}; /* depthwise_point's + 0.0f without a bias */
        ot_conv_deinterleave(yt, nc, p.L, bias ? bias + c0 : zeros, y + (n * p.Cin + c0) * p.L, p.L);
    }
    return true;
}

ot_status ot_cpu_conv(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                      ot_error *err) {
    for (int k = 0; k < node->n_inputs; k++)
        if (in[k].data && in[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "an input", in[k].dtype, err);
    conv_geom g;
    ot_status st = conv_geom_init(&g, node, in, out, err);
    if (st) return st;
    const float *x = in[0].data, *w = in[1].data;
    const float *bias = node->n_inputs > 2 && in[2].data ? in[2].data : NULL;
    if (bias && ot_kernel_numel(&in[2]) != g.M)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (Conv): bias length differs from output channels", node->name);
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
    int64_t ohw = g.OH * g.OW, kdim = g.Cg * g.KH * g.KW;
    if (ot_kernel_numel(&out[0]) == 0) return OT_OK;
    ot_conv3 p;
    int64_t nb;
    bool ran;
    if ((st = gemm_geom(&p, &nb, node, in, out, err))) return st;
    if ((st = ot_dnnl_conv_run(node, &p, OT_DNNL_FWD, ctx, x, w, bias, y, &ran, err)) || ran) return st;
    if (is_depthwise(&g)) {
        if (!(g.Mg == 1 && depthwise_lanes(node, in, out, bias, nt))) depthwise(&g, x, w, bias, y, nt);
        return OT_OK;
    }
    size_t need = conv_ws_floats(&p, nb) * sizeof(float);
    if (need && (!ctx->workspace || ctx->workspace_bytes < need))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (Conv): workspace smaller than ot_cpu_workspace_bytes", node->name);
    if (nb > 1) {
        conv_batched(ctx, &p, nb, x, w, bias, y);
        return OT_OK;
    }
    bool pointwise = ot_conv3_pointwise(&p);
    float *col = ctx->workspace;
    /* Y starts as the broadcast bias so the GEMM accumulates onto it (beta = 1). */
    if (bias) { /* serial: memory-bound and short (conv_batched) */
        for (int64_t q = 0; q < g.N * g.M; q++) {
            float b0 = bias[q % g.M];
            float *yp = y + q * ohw;
            for (int64_t i = 0; i < ohw; i++) yp[i] = b0;
        }
    }
    for (int64_t n = 0; n < g.N; n++) {
        for (int64_t gi = 0; gi < g.G; gi++) {
            const float *xg = x + (n * g.C + gi * g.Cg) * g.H * g.W;
            const float *src = xg;
            if (!pointwise) {
                ot_conv3_im2col(&p, xg, col, ohw, nt);
                src = col;
            }
            float *yg = y + (n * g.M + gi * g.Mg) * ohw;
            if (kdim == 0) continue;
            ot_cpu_sgemm(ctx, false, false, (int)g.Mg, (int)ohw, (int)kdim, 1.0f,
                        w + gi * g.Mg * kdim, (int)kdim, src, (int)ohw, bias ? 1.0f : 0.0f, yg, (int)ohw);
        }
    }
    if (kdim == 0 && !bias) memset(y, 0, (size_t)ot_kernel_numel(&out[0]) * sizeof(float));
    return OT_OK;
}
