/* grad_conv.c — CPU kernels of ConvGradInput (dY, W, X) -> dX and ConvGradWeight
 * (dY, X, W) -> dW for 1-D to 3-D grouped, strided, dilated, padded convolutions:
 * sgemms through an im2col / col2im buffer in ctx->workspace, one per (chunk of
 * images, group) where the images are small (ot_conv_batch, conv_cols.h: dY's and
 * X's channels are copied into (C x nb*L) rows so that one GEMM spans nb images),
 * else one per (sample, group). dW accumulates over the chunks in order, so results
 * do not depend on threads beyond OpenBLAS's own GEMM split.
 * Fast paths (bench/NOTES.md, change 16): im2col/col2im visit only the valid output
 * range of each tap (no per-element bounds checks); 1x1 stride-1 unpadded convs GEMM
 * straight on the NCHW planes (no col buffer); depthwise convs (one input and one
 * output channel per group) run direct loops, dX one plane per thread, dW one
 * channel per thread with a fixed sum order (both 8 channels per vector where the
 * planes are small enough, same bits). dX has the general path's bits; dW
 * differs in rounding where images are batched (a GEMM sums over nb*L at once) and
 * for depthwise. ot_kernel_ctx.conv_grad_general forces the plain path (tests). */
#include "kernels/cpu/grad_kernels.h"
#include "kernels/cpu/conv_cols.h"
#include "kernels/cpu/conv_dnnl.h"

/* Four floats as one SSE register (GCC and Clang vector extension). */
typedef float v4f __attribute__((vector_size(16)));

/* The general paths' one window rule: the offset in an input plane that tap kk reads
 * for output position l, or -1 in the padding. */
static inline int64_t general_tap_at(const ot_conv3 *p, int64_t kk, int64_t l) {
    int64_t k0 = kk / (p->sp.k[1] * p->sp.k[2]), k1 = (kk / p->sp.k[2]) % p->sp.k[1], k2 = kk % p->sp.k[2];
    int64_t o0 = l / (p->sp.out[1] * p->sp.out[2]), o1 = (l / p->sp.out[2]) % p->sp.out[1], o2 = l % p->sp.out[2];
    int64_t i0 = o0 * p->sp.s[0] - p->sp.pb[0] + k0 * p->sp.d[0];
    int64_t i1 = o1 * p->sp.s[1] - p->sp.pb[1] + k1 * p->sp.d[1];
    int64_t i2 = o2 * p->sp.s[2] - p->sp.pb[2] + k2 * p->sp.d[2];
    bool in = i0 >= 0 && i0 < p->sp.in[0] && i1 >= 0 && i1 < p->sp.in[1] && i2 >= 0 && i2 < p->sp.in[2];
    return in ? (i0 * p->sp.in[1] + i1) * p->sp.in[2] + i2 : -1;
}

/* col[(ci*K + kk) * L + l] = x[ci] at the window position (0 in the padding). */
static void im2col_general(const ot_conv3 *p, const float *x, float *col, int nt) {
    int64_t rows = p->Cig * p->K;
#pragma omp parallel for schedule(static) num_threads(nt) if (rows * p->L >= OT_CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t ci = r / p->K, kk = r % p->K;
        const float *xc = x + ci * p->S;
        float *cr = col + r * p->L;
        for (int64_t l = 0; l < p->L; l++) {
            int64_t at = general_tap_at(p, kk, l);
            cr[l] = at >= 0 ? xc[at] : 0.0f;
        }
    }
}

/* dx[ci] += col rows of channel ci scattered back (one thread per channel). */
static void col2im_general(const ot_conv3 *p, const float *col, float *dx, int nt) {
#pragma omp parallel for schedule(static) num_threads(nt) if (p->Cig * p->K * p->L >= OT_CPU_PAR_MIN)
    for (int64_t ci = 0; ci < p->Cig; ci++) {
        float *xc = dx + ci * p->S;
        for (int64_t kk = 0; kk < p->K; kk++) {
            const float *cr = col + (ci * p->K + kk) * p->L;
            for (int64_t l = 0; l < p->L; l++) {
                int64_t at = general_tap_at(p, kk, l);
                if (at >= 0) xc[at] += cr[l];
            }
        }
    }
}

/* group == channels, one output channel per group. */
static bool is_depthwise(const ot_conv3 *p) { return p->Cig == 1 && p->Cog == 1; }

/* Workspace floats of a gradient kernel and its images per GEMM (*nb): the batched
 * path's dY rows (Cog x nb*L) and column matrix (Kg x nb*L), else one image's column
 * matrix (which also covers the general path and the unbatched fast paths). */
static size_t grad_ws_floats(const ot_conv3 *p, int64_t *nb) {
    int64_t Kg = p->Cig * p->K;
    *nb = is_depthwise(p) ? 1 : ot_conv_batch(p, Kg + p->Cog);
    return (size_t)(*nb > 1 ? (Kg + p->Cog) * *nb * p->L : Kg * p->L);
}

size_t ot_cpu_conv_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    /* ConvGradInput: (dY, W, X); ConvGradWeight: (dY, X, W); ConvTranspose: (X, W [, B])
     * -> Y, ConvGradInput's (dY, W) -> dX */
    bool gi = node->op == OT_OP_CONV_GRAD_INPUT || node->op == OT_OP_CONV_TRANSPOSE;
    const ot_tensor *x = node->op == OT_OP_CONV_TRANSPOSE ? &out[0] : gi ? &in[2] : &in[1];
    const ot_tensor *w = gi ? &in[1] : &in[2];
    ot_conv3 p;
    if (ot_conv3_init(&p, node, &x->shape, &w->shape, &in[0].shape, NULL)) return 0;
    int64_t nb;
    size_t ours = grad_ws_floats(&p, &nb) * sizeof(float);
    size_t dnnl = ot_dnnl_conv_workspace(&p, gi ? OT_DNNL_BWD_DATA : OT_DNNL_BWD_WEIGHTS);
    return dnnl > ours ? dnnl : ours;
}

static ot_status check_ws(const ot_node *node, const ot_conv3 *p, const ot_kernel_ctx *ctx, int64_t *nb,
                          ot_error *err) {
    size_t need = grad_ws_floats(p, nb) * sizeof(float);
    if (!ctx->workspace || ctx->workspace_bytes < need)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): needs %zu bytes of workspace, given %zu", node->name,
                       node->op_type, need, ctx->workspace_bytes);
    return OT_OK;
}

/* What both gradients start with: dY and the other read operand (in[1]: W for dX, X
 * for dW) float32, the geometry from X, W and dY, and the workspace checked for the
 * chunk of nb images it is sized for. */
static ot_status grad_begin(const ot_node *node, const ot_tensor *in, const ot_tensor *x, const ot_tensor *w,
                            const ot_kernel_ctx *ctx, ot_conv3 *p, int64_t *nb, ot_error *err) {
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", in[1].dtype, err);
    ot_status st = ot_conv3_init(p, node, &x->shape, &w->shape, &in[0].shape, err);
    if (!st) st = check_ws(node, p, ctx, nb, err);
    return st;
}

/* dX over chunks of nb images: per group, dY's channels as rows (Cog x nb*L), one
 * GEMM col = W_g^T . rows, then col2im per image (a 1x1 conv's col is dX itself). */
static void grad_input_batched(const ot_kernel_ctx *ctx, const ot_conv3 *p, int64_t nb, const float *dys,
                               const float *ws, float *dx, int nt) {
    int64_t Kg = p->Cig * p->K;
    float *dyt = ctx->workspace, *col = dyt + p->Cog * nb * p->L;
    bool pointwise = ot_conv3_pointwise(p);
    if (!pointwise) memset(dx, 0, (size_t)(p->N * p->Cin * p->S) * sizeof(float));
    for (int64_t n0 = 0; n0 < p->N; n0 += nb) {
        int64_t nc = p->N - n0 < nb ? p->N - n0 : nb, ld = nc * p->L;
        for (int64_t g = 0; g < p->G; g++) {
            ot_conv_nc_to_rows(dys, p->Cout, p->L, n0, nc, g * p->Cog, p->Cog, dyt);
            ot_cpu_sgemm(ctx, true, false, (int)Kg, (int)ld, (int)p->Cog, 1.0f, ws + g * p->Cog * Kg, (int)Kg, dyt,
                        (int)ld, 0.0f, col, (int)ld);
            if (pointwise) {
                ot_conv_rows_to_nc(col, p->Cin, p->S, n0, nc, g * p->Cig, p->Cig, dx);
                continue;
            }
            for (int64_t j = 0; j < nc; j++)
                ot_conv3_col2im(p, col + j * p->L, ld, dx + ((n0 + j) * p->Cin + g * p->Cig) * p->S, nt);
        }
    }
}

/* dY * X of column o2 in every lane (a macro, as ot_conv_load8). */
#define dww_term(d, xr, o2, S2) (ot_conv_load8((d) + (o2) * DWW_LANES) * ot_conv_load8((xr) + (o2) * (S2) * DWW_LANES))
#define DWW_LANES OT_CONV_LANES
#define DWW_MAX OT_CONV_LANES_MAX
typedef ot_v8f v8f;

/* Depthwise dX with 8 channels side by side (like dW below): each image's 8 dY planes
 * interleaved, then every tap adds w[c][kk] * dY to the interleaved dX from +0 in tap
 * order, the scatter's terms in its order per element, so the same bits (for any
 * weights: no border terms). Then copied back to the 8 planes. */
static void dwx_block(const ot_conv3 *p, const ot_conv_tap *taps, const float *dys, const float *ws, int64_t n,
                      int64_t c0, float *dx) {
    const int64_t nc = p->Cin - c0 < DWW_LANES ? p->Cin - c0 : DWW_LANES;
    float xt[DWW_MAX * DWW_LANES] __attribute__((aligned(32))), dt[DWW_MAX * DWW_LANES] __attribute__((aligned(32)));
    memset(xt, 0, (size_t)p->S * DWW_LANES * sizeof(float));
    if (nc < DWW_LANES) memset(dt, 0, (size_t)p->L * DWW_LANES * sizeof(float));
    ot_conv_interleave(dys + (n * p->Cin + c0) * p->L, p->L, nc, p->L, dt);
    ot_conv_lanes_taps(p, taps, ws + c0 * p->K, nc, false, dt, xt);
    ot_conv_deinterleave(xt, nc, p->S, NULL, dx + (n * p->Cin + c0) * p->S, p->S);
}

/* The lanes path above where it applies: false leaves dx to the loops below. */
static bool depthwise_grad_input_lanes(const ot_conv3 *p, const float *dys, const float *ws, float *dx, int nt) {
    ot_conv_tap table[OT_CONV_TAPS_MAX];
    const ot_conv_tap *taps = ot_conv_taps(p, table);
    if (!taps || p->S > DWW_MAX || p->L > DWW_MAX) return false;
    int64_t blocks = (p->Cin + DWW_LANES - 1) / DWW_LANES;
#pragma omp parallel for schedule(static) num_threads(nt) if (p->N * p->Cin * p->K * p->L >= OT_CPU_PAR_MIN)
    for (int64_t b = 0; b < p->N * blocks; b++) dwx_block(p, taps, dys, ws, b / blocks, b % blocks * DWW_LANES, dx);
    return true;
}

/* Depthwise dX as a gather on a zero-bordered copy of each dY plane (stride 1, at most
 * two spatial dims, finite weights, planes up to DWG_PAD_MAX floats): input (ih, iw)
 * takes w[kk] * dY(ih + PH - kh*DH, iw + PW - kw*DW) for taps kk in order, so each
 * tap is one axpy over the flattened plane, rows Wq wide (columns past W computed and
 * dropped). The scatter adds the same terms to each input position in the same tap
 * order, from the memset's +0; the border adds w * 0 = +-0 to a sum that is never -0,
 * so the bits are the scatter's. */
#define DWG_PAD_MAX 8192

typedef struct dwg_pad {
    int64_t r0, c0, Wq, len, J; /* dY's row and column offsets in the copy, row width, floats, outputs */
} dwg_pad;

static bool dwg_pad_init(const ot_conv3 *p, dwg_pad *d) {
    const ot_window3 *w = &p->sp;
    if (w->in[0] != 1 || w->out[0] != 1 || w->k[0] != 1 || w->s[1] != 1 || w->s[2] != 1) return false;
    int64_t H = w->in[1], W = w->in[2], OH = w->out[1], OW = w->out[2];
    int64_t rh = (w->k[1] - 1) * w->d[1] - w->pb[1], rw = (w->k[2] - 1) * w->d[2] - w->pb[2];
    d->r0 = rh > 0 ? rh : 0;
    d->c0 = rw > 0 ? rw : 0;
    int64_t wq = W + w->pb[2] + d->c0;
    d->Wq = wq > d->c0 + OW ? wq : d->c0 + OW;
    int64_t hq = H + w->pb[1] + d->r0;
    if (hq < d->r0 + OH) hq = d->r0 + OH;
    d->len = hq * d->Wq;
    d->J = (H - 1) * d->Wq + W;
    return H > 0 && W > 0 && d->len <= DWG_PAD_MAX && d->J <= DWG_PAD_MAX;
}

static void dwg_plane_padded(const ot_conv3 *p, const dwg_pad *d, const float *dyp, const float *wc, float *dxp,
                             float *ypad, float *acc) {
    const ot_window3 *w = &p->sp;
    int64_t H = w->in[1], W = w->in[2], OH = w->out[1], OW = w->out[2];
    memset(ypad, 0, (size_t)d->len * sizeof(float));
    for (int64_t oh = 0; oh < OH; oh++)
        memcpy(ypad + (d->r0 + oh) * d->Wq + d->c0, dyp + oh * OW, (size_t)OW * sizeof(float));
    memset(acc, 0, (size_t)d->J * sizeof(float));
    for (int64_t kh = 0; kh < w->k[1]; kh++)
        for (int64_t kw = 0; kw < w->k[2]; kw++) {
            int64_t off = (w->pb[1] + d->r0 - kh * w->d[1]) * d->Wq + (w->pb[2] + d->c0 - kw * w->d[2]);
            ot_conv_axpy4(acc, ypad + off, wc[kh * w->k[2] + kw], d->J);
        }
    for (int64_t ih = 0; ih < H; ih++) memcpy(dxp + ih * W, acc + ih * d->Wq, (size_t)W * sizeof(float));
}

/* dX of a depthwise conv (dx zeroed): the GEMM of one (sample, channel) is an outer
 * product w (K) x dY (L): each plane adds w[kk] * dY tap by tap, the general path's
 * terms in its order (or the padded gather above, same bits). */
static void depthwise_grad_input(const ot_conv3 *p, const float *dys, const float *ws, float *dx, int nt) {
    int64_t planes = p->N * p->Cin;
    ot_conv_tap table[OT_CONV_TAPS_MAX];
    const ot_conv_tap *taps = ot_conv_taps(p, table);
    dwg_pad pd;
    bool padded = dwg_pad_init(p, &pd);
#pragma omp parallel for schedule(static) num_threads(nt) if (planes * p->K * p->L >= OT_CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *wc = ws + (pl % p->Cin) * p->K;
        bool finite = true;
        for (int64_t kk = 0; kk < p->K; kk++) finite = finite && isfinite(wc[kk]);
        if (padded && finite) {
            float ypad[DWG_PAD_MAX], acc[DWG_PAD_MAX];
            dwg_plane_padded(p, &pd, dys + pl * p->L, wc, dx + pl * p->S, ypad, acc);
            continue;
        }
        for (int64_t kk = 0; kk < p->K; kk++) {
            ot_conv_tap own;
            ot_conv_scatter_tap(p, ot_conv_tap_of(p, taps, kk, &own), dys + pl * p->L, wc[kk], true, dx + pl * p->S);
        }
    }
}

OT_GRAD_KERNEL(ot_cpu_conv_grad_input) {
    const ot_tensor *dy = &in[0], *w = &in[1], *x = &in[2];
    ot_conv3 p;
    int64_t nb;
    ot_status st = grad_begin(node, in, x, w, ctx, &p, &nb, err);
    if (st) return st;
    float *col = ctx->workspace, *dx = out[0].data;
    const float *dys = dy->data, *ws = w->data;
    int nt = ot_cpu_threads(ctx);
    int64_t Kg = p.Cig * p.K;
    bool general = ctx->conv_grad_general, ran = false;
    if (!general && (st = ot_dnnl_conv_run(node, &p, OT_DNNL_BWD_DATA, ctx, dys, ws, NULL, dx, &ran, err))) return st;
    if (ran) return OT_OK;
    if (!general && nb > 1) {
        grad_input_batched(ctx, &p, nb, dys, ws, dx, nt);
        return OT_OK;
    }
    if (!general && ot_conv3_pointwise(&p)) {
        /* dX_g (Cig x S) = W_g^T . dY_g, written in place */
        for (int64_t n = 0; n < p.N; n++)
            for (int64_t g = 0; g < p.G; g++)
                ot_cpu_sgemm(ctx, true, false, (int)p.Cig, (int)p.L, (int)p.Cog, 1.0f,
                            ws + g * p.Cog * Kg, (int)Kg, dys + (n * p.Cout + g * p.Cog) * p.L, (int)p.L, 0.0f,
                            dx + (n * p.Cin + g * p.Cig) * p.S, (int)p.S);
        return OT_OK;
    }
    if (!general && is_depthwise(&p) && depthwise_grad_input_lanes(&p, dys, ws, dx, nt)) return OT_OK;
    memset(dx, 0, (size_t)ot_kernel_numel(&out[0]) * sizeof(float));
    if (!general && is_depthwise(&p)) {
        depthwise_grad_input(&p, dys, ws, dx, nt);
        return OT_OK;
    }
    for (int64_t n = 0; n < p.N; n++)
        for (int64_t g = 0; g < p.G; g++) {
            /* col = W_g^T (Kg x Cog) . dY_g (Cog x L) */
            ot_cpu_sgemm(ctx, true, false, (int)Kg, (int)p.L, (int)p.Cog, 1.0f,
                        ws + g * p.Cog * Kg, (int)Kg, dys + (n * p.Cout + g * p.Cog) * p.L, (int)p.L, 0.0f, col,
                        (int)p.L);
            float *dxg = dx + (n * p.Cin + g * p.Cig) * p.S;
            if (general)
                col2im_general(&p, col, dxg, nt);
            else
                ot_conv3_col2im(&p, col, p.L, dxg, nt);
        }
    return OT_OK;
}

/* Depthwise dW[c][kk] = sum over samples and valid outputs of dY * X, in a fixed
 * order (samples, then rows, output column o2 into partial sum o2 % 4 counted from
 * the tap's first valid column), one thread per channel. The four partial sums are
 * the lanes of one vector (-O2 at the x86-64 baseline leaves the plain loop scalar):
 * each lane does the plain loop's multiply and add in its order, so the same bits. */
static void depthwise_grad_weight(const ot_conv3 *p, const float *dys, const float *xs, float *dw, int nt) {
    const int64_t O1 = p->sp.out[1], O2 = p->sp.out[2], I1 = p->sp.in[1], I2 = p->sp.in[2], S2 = p->sp.s[2];
    ot_conv_tap table[OT_CONV_TAPS_MAX];
    const ot_conv_tap *taps = ot_conv_taps(p, table);
#pragma omp parallel for schedule(static) num_threads(nt) if (p->N * p->Cin * p->K * p->L >= OT_CPU_PAR_MIN)
    for (int64_t c = 0; c < p->Cin; c++)
        for (int64_t kk = 0; kk < p->K; kk++) {
            ot_conv_tap own;
            const ot_conv_tap t = *ot_conv_tap_of(p, taps, kk, &own);
            v4f acc = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int64_t n = 0; n < p->N; n++) {
                const float *dyp = dys + (n * p->Cin + c) * p->L, *xp = xs + (n * p->Cin + c) * p->S;
                for (int64_t o0 = t.a[0]; o0 < t.b[0]; o0++) {
                    int64_t i0 = o0 * p->sp.s[0] + t.base[0];
                    for (int64_t o1 = t.a[1]; o1 < t.b[1]; o1++) {
                        const float *xr = xp + (i0 * I1 + o1 * p->sp.s[1] + t.base[1]) * I2 + t.base[2];
                        const float *d = dyp + (o0 * O1 + o1) * O2;
                        int64_t o2 = t.a[2];
                        for (; o2 + 4 <= t.b[2]; o2 += 4) {
                            v4f dv, xv;
                            memcpy(&dv, d + o2, sizeof dv);
                            if (S2 == 1)
                                memcpy(&xv, xr + o2, sizeof xv);
                            else
                                xv = (v4f){xr[o2 * S2], xr[(o2 + 1) * S2], xr[(o2 + 2) * S2], xr[(o2 + 3) * S2]};
                            acc += dv * xv;
                        }
                        for (int q = 0; o2 < t.b[2]; o2++, q++) acc[q] += d[o2] * xr[o2 * S2];
                    }
                }
            }
            dw[c * p->K + kk] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        }
}

OT_CONV_LANES_CLONES static void dww_block(const ot_conv3 *p, const ot_conv_tap *taps, const float *dys, const float *xs,
                                    int64_t c0, float *dw) {
    const int64_t O1 = p->sp.out[1], O2 = p->sp.out[2], I1 = p->sp.in[1], I2 = p->sp.in[2], S2 = p->sp.s[2];
    const int64_t nc = p->Cin - c0 < DWW_LANES ? p->Cin - c0 : DWW_LANES;
    float xt[DWW_MAX * DWW_LANES] __attribute__((aligned(32))), dt[DWW_MAX * DWW_LANES] __attribute__((aligned(32)));
    v8f acc[OT_CONV_TAPS_MAX][4];
    memset(acc, 0, (size_t)p->K * sizeof acc[0]);
    if (nc < DWW_LANES) {
        memset(xt, 0, (size_t)p->S * DWW_LANES * sizeof(float));
        memset(dt, 0, (size_t)p->L * DWW_LANES * sizeof(float));
    }
    for (int64_t n = 0; n < p->N; n++) {
        ot_conv_interleave(xs + (n * p->Cin + c0) * p->S, p->S, nc, p->S, xt);
        ot_conv_interleave(dys + (n * p->Cin + c0) * p->L, p->L, nc, p->L, dt);
        for (int64_t kk = 0; kk < p->K; kk++) {
            const ot_conv_tap *t = &taps[kk];
            v8f a0 = acc[kk][0], a1 = acc[kk][1], a2 = acc[kk][2], a3 = acc[kk][3];
            for (int64_t o0 = t->a[0]; o0 < t->b[0]; o0++) {
                int64_t i0 = o0 * p->sp.s[0] + t->base[0];
                for (int64_t o1 = t->a[1]; o1 < t->b[1]; o1++) {
                    const float *xr = xt + ((i0 * I1 + o1 * p->sp.s[1] + t->base[1]) * I2 + t->base[2]) * DWW_LANES;
                    const float *d = dt + (o0 * O1 + o1) * O2 * DWW_LANES;
                    int64_t o2 = t->a[2], e = t->b[2];
                    for (; o2 + 4 <= e; o2 += 4) {
                        a0 += dww_term(d, xr, o2, S2);
                        a1 += dww_term(d, xr, o2 + 1, S2);
                        a2 += dww_term(d, xr, o2 + 2, S2);
                        a3 += dww_term(d, xr, o2 + 3, S2);
                    }
                    if (o2 < e) a0 += dww_term(d, xr, o2, S2);
                    if (o2 + 1 < e) a1 += dww_term(d, xr, o2 + 1, S2);
                    if (o2 + 2 < e) a2 += dww_term(d, xr, o2 + 2, S2);
                }
            }
            acc[kk][0] = a0;
            acc[kk][1] = a1;
            acc[kk][2] = a2;
            acc[kk][3] = a3;
        }
    }
    for (int64_t j = 0; j < nc; j++)
        for (int64_t kk = 0; kk < p->K; kk++)
            dw[(c0 + j) * p->K + kk] = (acc[kk][0][j] + acc[kk][1][j]) + (acc[kk][2][j] + acc[kk][3][j]);
}

/* The lanes path above where it applies: false leaves dw to the one-channel loop. */
static bool depthwise_grad_weight_lanes(const ot_conv3 *p, const float *dys, const float *xs, float *dw, int nt) {
    ot_conv_tap table[OT_CONV_TAPS_MAX];
    const ot_conv_tap *taps = ot_conv_taps(p, table);
    if (!taps || p->S > DWW_MAX || p->L > DWW_MAX) return false;
    int64_t blocks = (p->Cin + DWW_LANES - 1) / DWW_LANES;
#pragma omp parallel for schedule(static) num_threads(nt) if (p->N * p->Cin * p->K * p->L >= OT_CPU_PAR_MIN)
    for (int64_t b = 0; b < blocks; b++) dww_block(p, taps, dys, xs, b * DWW_LANES, dw);
    return true;
}

/* dW over chunks of nb images: per group, dY's channels as rows (Cog x nb*L) and the
 * column matrix of nb images side by side (a 1x1 conv's: X's channels as rows), one
 * GEMM each, accumulated over the chunks in order. */
static void grad_weight_batched(const ot_kernel_ctx *ctx, const ot_conv3 *p, int64_t nb, const float *dys,
                                const float *xs, float *dw, int nt) {
    int64_t Kg = p->Cig * p->K;
    float *dyt = ctx->workspace, *col = dyt + p->Cog * nb * p->L;
    bool pointwise = ot_conv3_pointwise(p);
    for (int64_t n0 = 0; n0 < p->N; n0 += nb) {
        int64_t nc = p->N - n0 < nb ? p->N - n0 : nb, ld = nc * p->L;
        for (int64_t g = 0; g < p->G; g++) {
            ot_conv_nc_to_rows(dys, p->Cout, p->L, n0, nc, g * p->Cog, p->Cog, dyt);
            if (pointwise)
                ot_conv_nc_to_rows(xs, p->Cin, p->S, n0, nc, g * p->Cig, p->Cig, col);
            else
                ot_conv3_im2col_images(p, xs + (n0 * p->Cin + g * p->Cig) * p->S, p->Cin * p->S, nc, col, ld, nt);
            /* dW_g (Cog x Kg) += rows (Cog x nb*L) . col^T (nb*L x Kg) */
            ot_cpu_sgemm(ctx, false, true, (int)p->Cog, (int)Kg, (int)ld, 1.0f, dyt, (int)ld, col, (int)ld,
                        n0 == 0 ? 0.0f : 1.0f, dw + g * p->Cog * Kg, (int)Kg);
        }
    }
}

OT_GRAD_KERNEL(ot_cpu_conv_grad_weight) {
    const ot_tensor *dy = &in[0], *x = &in[1], *w = &in[2];
    ot_conv3 p;
    int64_t nb;
    ot_status st = grad_begin(node, in, x, w, ctx, &p, &nb, err);
    if (st) return st;
    float *col = ctx->workspace, *dw = out[0].data;
    const float *dys = dy->data, *xs = x->data;
    int nt = ot_cpu_threads(ctx);
    int64_t Kg = p.Cig * p.K;
    bool general = ctx->conv_grad_general;
    bool ran = false;
    if (!general && (st = ot_dnnl_conv_run(node, &p, OT_DNNL_BWD_WEIGHTS, ctx, dys, xs, NULL, dw, &ran, err))) return st;
    if (ran) return OT_OK;
    if (!general && is_depthwise(&p)) {
        if (!depthwise_grad_weight_lanes(&p, dys, xs, dw, nt))
            depthwise_grad_weight(&p, dys, xs, dw, nt);
        return OT_OK;
    }
    if (!general && nb > 1) {
        grad_weight_batched(ctx, &p, nb, dys, xs, dw, nt);
        return OT_OK;
    }
    bool pointwise = !general && ot_conv3_pointwise(&p);
    if (p.N == 0) memset(dw, 0, (size_t)ot_kernel_numel(&out[0]) * sizeof(float));
    for (int64_t n = 0; n < p.N; n++)
        for (int64_t g = 0; g < p.G; g++) {
            const float *xg = xs + (n * p.Cin + g * p.Cig) * p.S, *b = col;
            if (pointwise)
                b = xg; /* col would be X_g itself */
            else if (general)
                im2col_general(&p, xg, col, nt);
            else
                ot_conv3_im2col(&p, xg, col, p.L, nt);
            /* dW_g (Cog x Kg) += dY_g (Cog x L) . col^T (L x Kg) */
            ot_cpu_sgemm(ctx, false, true, (int)p.Cog, (int)Kg, (int)p.L, 1.0f,
                        dys + (n * p.Cout + g * p.Cog) * p.L, (int)p.L, b, (int)p.L, n == 0 ? 0.0f : 1.0f,
                        dw + g * p.Cog * Kg, (int)Kg);
        }
    return OT_OK;
}

/* ConvTranspose (X, W [, B]) -> Y (issue 26): ConvGradInput of the convolution whose
 * input is Y (pads: ot_conv_transpose_pads), then the bias per channel. */
ot_status ot_cpu_conv_transpose(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                                ot_error *err) {
    ot_tensor gin[3] = {in[0], in[1], out[0]};
    ot_status st = ot_cpu_conv_grad_input(node, gin, out, ctx, err);
    if (st || node->n_inputs < 3 || !in[2].data) return st;
    if (in[2].dtype != OT_F32 || ot_kernel_numel(&in[2]) != out[0].shape.dim[1])
        return ot_fail(err, OT_E_SHAPE, "node '%s' (ConvTranspose): bias must be float32 with one entry per output channel",
                       node->name);
    int64_t C = out[0].shape.dim[1], plane = C > 0 ? ot_kernel_numel(&out[0]) / (out[0].shape.dim[0] * C) : 0;
    int64_t rows = out[0].shape.dim[0] * C;
    const float *b = in[2].data;
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (rows * plane >= OT_CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < plane; i++) y[r * plane + i] += b[r % C];
    return OT_OK;
}
