/* grad_conv.c — CPU kernels of ConvGradInput (dY, W, X) -> dX and ConvGradWeight
 * (dY, X, W) -> dW for 1-D to 3-D grouped, strided, dilated, padded convolutions:
 * one sgemm per (sample, group) through an im2col / col2im buffer in ctx->workspace.
 * dW accumulates over the samples in order, so results do not depend on threads
 * beyond OpenBLAS's own GEMM split.
 * Fast paths (bench/NOTES.md, change 16), all with the general path's bits except
 * depthwise dW: im2col/col2im visit only the valid output range of each tap (no
 * per-element bounds checks); 1x1 stride-1 unpadded convs GEMM straight on the NCHW
 * planes (no col buffer); depthwise convs (one input and one output channel per
 * group) run direct loops, dX one plane per thread, dW one channel per thread with
 * a fixed sum order. ot_kernel_ctx.conv_grad_general forces the plain path (tests). */
#include "kernels/cpu/grad_kernels.h"
#include "kernels/pool_geometry.h"

typedef struct conv3 {
    ot_window3 sp; /* the spatial window as 3-D (kernels/pool_geometry.h) */
    int64_t N, Cin, Cout, G, Cig, Cog, K, L, S; /* K = kernel volume, L = output volume, S = input volume */
} conv3;

static ot_status conv_init(conv3 *p, const ot_node *node, const ot_shape *x, const ot_shape *w, const ot_shape *y,
                           ot_error *err) {
    if (x->rank < 3 || w->rank != x->rank || y->rank != x->rank)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): X, W and dY must have the same rank >= 3", node->name,
                       node->op_type);
    ot_window win;
    ot_status st = ot_window_init(&win, node, x, y, &w->dim[2], err);
    if (st) return st;
    ot_window3_lift(&p->sp, &win);
    p->K = p->sp.k[0] * p->sp.k[1] * p->sp.k[2];
    p->L = p->sp.out_sz;
    p->S = p->sp.in_sz;
    p->N = x->dim[0];
    p->Cin = x->dim[1];
    p->Cout = w->dim[0];
    p->G = win.group;
    if (p->G < 1 || p->Cin % p->G || p->Cout % p->G || w->dim[1] != p->Cin / p->G || y->dim[1] != p->Cout ||
        y->dim[0] != p->N)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): channels of X, W, dY and group do not agree", node->name,
                       node->op_type);
    p->Cig = p->Cin / p->G;
    p->Cog = p->Cout / p->G;
    return OT_OK;
}

/* col[(ci*K + kk) * L + l] = x[ci] at the window position (0 in the padding). */
static void im2col_general(const conv3 *p, const float *x, float *col, int nt) {
    int64_t rows = p->Cig * p->K;
#pragma omp parallel for schedule(static) num_threads(nt) if (rows * p->L >= OT_CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t ci = r / p->K, kk = r % p->K;
        int64_t k0 = kk / (p->sp.k[1] * p->sp.k[2]), k1 = (kk / p->sp.k[2]) % p->sp.k[1], k2 = kk % p->sp.k[2];
        const float *xc = x + ci * p->S;
        float *cr = col + r * p->L;
        for (int64_t l = 0; l < p->L; l++) {
            int64_t o0 = l / (p->sp.out[1] * p->sp.out[2]), o1 = (l / p->sp.out[2]) % p->sp.out[1],
                    o2 = l % p->sp.out[2];
            int64_t i0 = o0 * p->sp.s[0] - p->sp.pb[0] + k0 * p->sp.d[0];
            int64_t i1 = o1 * p->sp.s[1] - p->sp.pb[1] + k1 * p->sp.d[1];
            int64_t i2 = o2 * p->sp.s[2] - p->sp.pb[2] + k2 * p->sp.d[2];
            bool in = i0 >= 0 && i0 < p->sp.in[0] && i1 >= 0 && i1 < p->sp.in[1] && i2 >= 0 && i2 < p->sp.in[2];
            cr[l] = in ? xc[(i0 * p->sp.in[1] + i1) * p->sp.in[2] + i2] : 0.0f;
        }
    }
}

/* dx[ci] += col rows of channel ci scattered back (one thread per channel). */
static void col2im_general(const conv3 *p, const float *col, float *dx, int nt) {
#pragma omp parallel for schedule(static) num_threads(nt) if (p->Cig * p->K * p->L >= OT_CPU_PAR_MIN)
    for (int64_t ci = 0; ci < p->Cig; ci++) {
        float *xc = dx + ci * p->S;
        for (int64_t kk = 0; kk < p->K; kk++) {
            int64_t k0 = kk / (p->sp.k[1] * p->sp.k[2]), k1 = (kk / p->sp.k[2]) % p->sp.k[1], k2 = kk % p->sp.k[2];
            const float *cr = col + (ci * p->K + kk) * p->L;
            for (int64_t l = 0; l < p->L; l++) {
                int64_t o0 = l / (p->sp.out[1] * p->sp.out[2]), o1 = (l / p->sp.out[2]) % p->sp.out[1],
                    o2 = l % p->sp.out[2];
                int64_t i0 = o0 * p->sp.s[0] - p->sp.pb[0] + k0 * p->sp.d[0];
                int64_t i1 = o1 * p->sp.s[1] - p->sp.pb[1] + k1 * p->sp.d[1];
                int64_t i2 = o2 * p->sp.s[2] - p->sp.pb[2] + k2 * p->sp.d[2];
                if (i0 >= 0 && i0 < p->sp.in[0] && i1 >= 0 && i1 < p->sp.in[1] && i2 >= 0 && i2 < p->sp.in[2])
                    xc[(i0 * p->sp.in[1] + i1) * p->sp.in[2] + i2] += cr[l];
            }
        }
    }
}

/* Outputs o in [*a, *b) of spatial dim j read inside the input at tap k
 * (0 <= o*s - pb + k*d < in); the rest read padding. */
static void valid_range(const conv3 *p, int j, int64_t k, int64_t *a, int64_t *b) {
    int64_t base = -p->sp.pb[j] + k * p->sp.d[j], s = p->sp.s[j];
    int64_t lo = base >= 0 ? 0 : (-base + s - 1) / s;
    int64_t hi = p->sp.in[j] - 1 - base < 0 ? 0 : (p->sp.in[j] - 1 - base) / s + 1;
    if (hi > p->sp.out[j]) hi = p->sp.out[j];
    if (lo > hi) lo = hi;
    *a = lo;
    *b = hi;
}

typedef struct tap_ranges {
    int64_t a[3], b[3], base[3]; /* valid outputs per dim, and the input index of output 0 */
} tap_ranges;

static void tap_init(const conv3 *p, int64_t kk, tap_ranges *t) {
    int64_t k[3] = {kk / (p->sp.k[1] * p->sp.k[2]), (kk / p->sp.k[2]) % p->sp.k[1], kk % p->sp.k[2]};
    for (int j = 0; j < 3; j++) {
        valid_range(p, j, k[j], &t->a[j], &t->b[j]);
        t->base[j] = -p->sp.pb[j] + k[j] * p->sp.d[j];
    }
}

/* im2col_general's result, with the valid ranges computed once per col row. */
static void im2col(const conv3 *p, const float *x, float *col, int nt) {
    int64_t rows = p->Cig * p->K;
    const int64_t O1 = p->sp.out[1], O2 = p->sp.out[2], I1 = p->sp.in[1], I2 = p->sp.in[2], S2 = p->sp.s[2];
#pragma omp parallel for schedule(static) num_threads(nt) if (rows * p->L >= OT_CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        tap_ranges t;
        tap_init(p, r % p->K, &t);
        const float *xc = x + (r / p->K) * p->S;
        float *cr = col + r * p->L;
        for (int64_t o0 = 0; o0 < p->sp.out[0]; o0++) {
            float *c0 = cr + o0 * O1 * O2;
            if (o0 < t.a[0] || o0 >= t.b[0]) {
                for (int64_t l = 0; l < O1 * O2; l++) c0[l] = 0.0f;
                continue;
            }
            int64_t i0 = o0 * p->sp.s[0] + t.base[0];
            for (int64_t o1 = 0; o1 < O1; o1++) {
                float *d = c0 + o1 * O2;
                if (o1 < t.a[1] || o1 >= t.b[1]) {
                    for (int64_t o2 = 0; o2 < O2; o2++) d[o2] = 0.0f;
                    continue;
                }
                const float *xr = xc + (i0 * I1 + o1 * p->sp.s[1] + t.base[1]) * I2 + t.base[2];
                for (int64_t o2 = 0; o2 < t.a[2]; o2++) d[o2] = 0.0f;
                if (S2 == 1)
                    for (int64_t o2 = t.a[2]; o2 < t.b[2]; o2++) d[o2] = xr[o2];
                else
                    for (int64_t o2 = t.a[2]; o2 < t.b[2]; o2++) d[o2] = xr[o2 * S2];
                for (int64_t o2 = t.b[2]; o2 < O2; o2++) d[o2] = 0.0f;
            }
        }
    }
}

/* xc += the valid positions of one col row cr (tap t); each input position gets at
 * most one term per tap, so visiting only the valid outputs keeps col2im_general's
 * order of additions (taps in order) and its bits. wv scales cr (1 for col2im). */
static inline void scatter_tap(const conv3 *p, const tap_ranges *t, const float *cr, float wv, bool scale,
                               float *xc) {
    const int64_t O1 = p->sp.out[1], O2 = p->sp.out[2], I1 = p->sp.in[1], I2 = p->sp.in[2], S2 = p->sp.s[2];
    for (int64_t o0 = t->a[0]; o0 < t->b[0]; o0++) {
        int64_t i0 = o0 * p->sp.s[0] + t->base[0];
        for (int64_t o1 = t->a[1]; o1 < t->b[1]; o1++) {
            float *xr = xc + (i0 * I1 + o1 * p->sp.s[1] + t->base[1]) * I2 + t->base[2];
            const float *c = cr + (o0 * O1 + o1) * O2;
            if (scale) {
                if (S2 == 1)
                    for (int64_t o2 = t->a[2]; o2 < t->b[2]; o2++) xr[o2] += wv * c[o2];
                else
                    for (int64_t o2 = t->a[2]; o2 < t->b[2]; o2++) xr[o2 * S2] += wv * c[o2];
            } else {
                if (S2 == 1)
                    for (int64_t o2 = t->a[2]; o2 < t->b[2]; o2++) xr[o2] += c[o2];
                else
                    for (int64_t o2 = t->a[2]; o2 < t->b[2]; o2++) xr[o2 * S2] += c[o2];
            }
        }
    }
}

static void col2im(const conv3 *p, const float *col, float *dx, int nt) {
#pragma omp parallel for schedule(static) num_threads(nt) if (p->Cig * p->K * p->L >= OT_CPU_PAR_MIN)
    for (int64_t ci = 0; ci < p->Cig; ci++) {
        float *xc = dx + ci * p->S;
        for (int64_t kk = 0; kk < p->K; kk++) {
            tap_ranges t;
            tap_init(p, kk, &t);
            scatter_tap(p, &t, col + (ci * p->K + kk) * p->L, 1.0f, false, xc);
        }
    }
}

/* 1x1 kernel, stride 1, no padding: col is X itself and col2im a copy. */
static bool is_pointwise(const conv3 *p) {
    if (p->K != 1 || p->L != p->S) return false;
    for (int j = 0; j < 3; j++)
        if (p->sp.s[j] != 1 || p->sp.pb[j] != 0 || p->sp.out[j] != p->sp.in[j]) return false;
    return true;
}

/* group == channels, one output channel per group. */
static bool is_depthwise(const conv3 *p) { return p->Cig == 1 && p->Cog == 1; }

size_t ot_cpu_conv_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    /* ConvGradInput: (dY, W, X); ConvGradWeight: (dY, X, W) */
    const ot_tensor *x = node->op == OT_OP_CONV_GRAD_INPUT ? &in[2] : &in[1];
    const ot_tensor *w = node->op == OT_OP_CONV_GRAD_INPUT ? &in[1] : &in[2];
    conv3 p;
    if (conv_init(&p, node, &x->shape, &w->shape, &in[0].shape, NULL)) return 0;
    return (size_t)(p.Cig * p.K * p.L) * sizeof(float);
}

static ot_status check_ws(const ot_node *node, const conv3 *p, const ot_kernel_ctx *ctx, ot_error *err) {
    size_t need = (size_t)(p->Cig * p->K * p->L) * sizeof(float);
    if (!ctx->workspace || ctx->workspace_bytes < need)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): needs %zu bytes of workspace, given %zu", node->name,
                       node->op_type, need, ctx->workspace_bytes);
    return OT_OK;
}

OT_GRAD_KERNEL(ot_cpu_conv_grad_input) {
    const ot_tensor *dy = &in[0], *w = &in[1], *x = &in[2];
    if (dy->dtype != OT_F32 || w->dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", w->dtype, err);
    conv3 p;
    ot_status st = conv_init(&p, node, &x->shape, &w->shape, &dy->shape, err);
    if (!st) st = check_ws(node, &p, ctx, err);
    if (st) return st;
    float *col = ctx->workspace, *dx = out[0].data;
    const float *dys = dy->data, *ws = w->data;
    int nt = ot_cpu_threads(ctx);
    int64_t Kg = p.Cig * p.K;
    bool general = ctx->conv_grad_general;
    if (!general && is_pointwise(&p)) {
        /* dX_g (Cig x S) = W_g^T . dY_g, written in place */
        for (int64_t n = 0; n < p.N; n++)
            for (int64_t g = 0; g < p.G; g++)
                ot_cpu_sgemm(ctx, true, false, (int)p.Cig, (int)p.L, (int)p.Cog, 1.0f,
                            ws + g * p.Cog * Kg, (int)Kg, dys + (n * p.Cout + g * p.Cog) * p.L, (int)p.L, 0.0f,
                            dx + (n * p.Cin + g * p.Cig) * p.S, (int)p.S);
        return OT_OK;
    }
    memset(dx, 0, (size_t)ot_kernel_numel(&out[0]) * sizeof(float));
    if (!general && is_depthwise(&p)) {
        /* the GEMM of one (sample, channel) is an outer product w (K) x dY (L): each
         * plane adds w[kk] * dY tap by tap, the general path's terms in its order */
        int64_t planes = p.N * p.Cin;
#pragma omp parallel for schedule(static) num_threads(nt) if (planes * p.K * p.L >= OT_CPU_PAR_MIN)
        for (int64_t pl = 0; pl < planes; pl++) {
            const float *wc = ws + (pl % p.Cin) * p.K;
            for (int64_t kk = 0; kk < p.K; kk++) {
                tap_ranges t;
                tap_init(&p, kk, &t);
                scatter_tap(&p, &t, dys + pl * p.L, wc[kk], true, dx + pl * p.S);
            }
        }
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
                col2im(&p, col, dxg, nt);
        }
    return OT_OK;
}

/* Depthwise dW[c][kk] = sum over samples and valid outputs of dY * X, in a fixed
 * order (samples, then rows, output column o2 into partial sum o2 % 4), one thread
 * per channel. */
static void depthwise_grad_weight(const conv3 *p, const float *dys, const float *xs, float *dw, int nt) {
    const int64_t O1 = p->sp.out[1], O2 = p->sp.out[2], I1 = p->sp.in[1], I2 = p->sp.in[2], S2 = p->sp.s[2];
#pragma omp parallel for schedule(static) num_threads(nt) if (p->N * p->Cin * p->K * p->L >= OT_CPU_PAR_MIN)
    for (int64_t c = 0; c < p->Cin; c++)
        for (int64_t kk = 0; kk < p->K; kk++) {
            tap_ranges t;
            tap_init(p, kk, &t);
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int64_t n = 0; n < p->N; n++) {
                const float *dyp = dys + (n * p->Cin + c) * p->L, *xp = xs + (n * p->Cin + c) * p->S;
                for (int64_t o0 = t.a[0]; o0 < t.b[0]; o0++) {
                    int64_t i0 = o0 * p->sp.s[0] + t.base[0];
                    for (int64_t o1 = t.a[1]; o1 < t.b[1]; o1++) {
                        const float *xr = xp + (i0 * I1 + o1 * p->sp.s[1] + t.base[1]) * I2 + t.base[2];
                        const float *d = dyp + (o0 * O1 + o1) * O2;
                        int64_t o2 = t.a[2];
                        for (; o2 + 4 <= t.b[2]; o2 += 4)
                            for (int q = 0; q < 4; q++) acc[q] += d[o2 + q] * xr[(o2 + q) * S2];
                        for (int q = 0; o2 < t.b[2]; o2++, q++) acc[q] += d[o2] * xr[o2 * S2];
                    }
                }
            }
            dw[c * p->K + kk] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        }
}

OT_GRAD_KERNEL(ot_cpu_conv_grad_weight) {
    const ot_tensor *dy = &in[0], *x = &in[1], *w = &in[2];
    if (dy->dtype != OT_F32 || x->dtype != OT_F32) return ot_cpu_bad_dtype(node, "input", x->dtype, err);
    conv3 p;
    ot_status st = conv_init(&p, node, &x->shape, &w->shape, &dy->shape, err);
    if (!st) st = check_ws(node, &p, ctx, err);
    if (st) return st;
    float *col = ctx->workspace, *dw = out[0].data;
    const float *dys = dy->data, *xs = x->data;
    int nt = ot_cpu_threads(ctx);
    int64_t Kg = p.Cig * p.K;
    bool general = ctx->conv_grad_general;
    if (!general && is_depthwise(&p)) {
        depthwise_grad_weight(&p, dys, xs, dw, nt);
        return OT_OK;
    }
    bool pointwise = !general && is_pointwise(&p);
    if (p.N == 0) memset(dw, 0, (size_t)ot_kernel_numel(&out[0]) * sizeof(float));
    for (int64_t n = 0; n < p.N; n++)
        for (int64_t g = 0; g < p.G; g++) {
            const float *xg = xs + (n * p.Cin + g * p.Cig) * p.S, *b = col;
            if (pointwise)
                b = xg; /* col would be X_g itself */
            else if (general)
                im2col_general(&p, xg, col, nt);
            else
                im2col(&p, xg, col, nt);
            /* dW_g (Cog x Kg) += dY_g (Cog x L) . col^T (L x Kg) */
            ot_cpu_sgemm(ctx, false, true, (int)p.Cog, (int)Kg, (int)p.L, 1.0f,
                        dys + (n * p.Cout + g * p.Cog) * p.L, (int)p.L, b, (int)p.L, n == 0 ? 0.0f : 1.0f,
                        dw + g * p.Cog * Kg, (int)Kg);
        }
    return OT_OK;
}
