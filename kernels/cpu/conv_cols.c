/* conv_cols.c — the convolution geometry, im2col / col2im and the batching rule that
 * the Conv forward and its gradients share (see conv_cols.h). im2col and col2im visit
 * only the valid output range of each tap (no per-element bounds checks); col2im adds
 * each input position's terms tap by tap, in order, so its bits are the plain loop's. */
#include "kernels/cpu/conv_cols.h"

ot_status ot_conv3_init(ot_conv3 *p, const ot_node *node, const ot_shape *x, const ot_shape *w, const ot_shape *y,
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

bool ot_conv3_pointwise(const ot_conv3 *p) {
    if (p->K != 1 || p->L != p->S) return false;
    for (int j = 0; j < 3; j++)
        if (p->sp.s[j] != 1 || p->sp.pb[j] != 0 || p->sp.out[j] != p->sp.in[j]) return false;
    return true;
}

int64_t ot_conv_batch(const ot_conv3 *p, int64_t rows) {
    if (p->N <= 1 || p->L <= 0 || rows <= 0 || p->L >= OT_CONV_BATCH_COLS) return 1;
    int64_t nb = (OT_CONV_BATCH_COLS + p->L - 1) / p->L;
    int64_t fit = (int64_t)(OT_CONV_BATCH_BYTES / sizeof(float)) / (rows * p->L);
    if (nb > fit) nb = fit;
    if (nb > p->N) nb = p->N;
    return nb < 1 ? 1 : nb;
}

/* Outputs o in [*a, *b) of spatial dim j read inside the input at tap k
 * (0 <= o*s - pb + k*d < in); the rest read padding. */
static void valid_range(const ot_conv3 *p, int j, int64_t k, int64_t *a, int64_t *b) {
    int64_t base = -p->sp.pb[j] + k * p->sp.d[j], s = p->sp.s[j];
    int64_t lo = base >= 0 ? 0 : (-base + s - 1) / s;
    int64_t hi = p->sp.in[j] - 1 - base < 0 ? 0 : (p->sp.in[j] - 1 - base) / s + 1;
    if (hi > p->sp.out[j]) hi = p->sp.out[j];
    if (lo > hi) lo = hi;
    *a = lo;
    *b = hi;
}

void ot_conv_tap_init(const ot_conv3 *p, int64_t kk, ot_conv_tap *t) {
    int64_t k[3] = {kk / (p->sp.k[1] * p->sp.k[2]), (kk / p->sp.k[2]) % p->sp.k[1], kk % p->sp.k[2]};
    for (int j = 0; j < 3; j++) {
        valid_range(p, j, k[j], &t->a[j], &t->b[j]);
        t->base[j] = -p->sp.pb[j] + k[j] * p->sp.d[j];
    }
}

const ot_conv_tap *ot_conv_taps(const ot_conv3 *p, ot_conv_tap *table) {
    if (p->K > OT_CONV_TAPS_MAX) return NULL;
    for (int64_t kk = 0; kk < p->K; kk++) ot_conv_tap_init(p, kk, &table[kk]);
    return table;
}

/* Four floats as one SSE register (GCC and Clang vector extension). */
typedef float v4f __attribute__((vector_size(16)));

/* d[i] = x[i] for i in [a, b), 4 lanes per step (the plain loop stays scalar at -O2;
 * memcpy's call costs more than a 4- to 16-float run). */
static inline void copy_run(float *d, const float *x, int64_t a, int64_t b) {
    int64_t i = a;
    for (; i + 4 <= b; i += 4) {
        v4f v;
        memcpy(&v, x + i, sizeof v);
        memcpy(d + i, &v, sizeof v);
    }
    for (; i < b; i++) d[i] = x[i];
}

/* x[i] += c[i] for i in [a, b), 4 lanes per step (scalar at -O2 otherwise: x and c
 * might overlap; they never do here); each lane is the plain loop's add. */
static inline void add_plain(float *x, const float *c, int64_t a, int64_t b) {
    int64_t i = a;
    for (; i + 4 <= b; i += 4) {
        v4f xv, cv;
        memcpy(&xv, x + i, sizeof xv);
        memcpy(&cv, c + i, sizeof cv);
        xv += cv;
        memcpy(x + i, &xv, sizeof xv);
    }
    for (; i < b; i++) x[i] += c[i];
}

/* One column row: tap t of one input channel xc, L outputs into cr. */
static void im2col_row(const ot_conv3 *p, const ot_conv_tap *tp, const float *xc, float *cr) {
    const int64_t O1 = p->sp.out[1], O2 = p->sp.out[2], I1 = p->sp.in[1], I2 = p->sp.in[2], S2 = p->sp.s[2];
    const ot_conv_tap t = *tp;
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
                copy_run(d, xr, t.a[2], t.b[2]);
            else
                for (int64_t o2 = t.a[2]; o2 < t.b[2]; o2++) d[o2] = xr[o2 * S2];
            for (int64_t o2 = t.b[2]; o2 < O2; o2++) d[o2] = 0.0f;
        }
    }
}

void ot_conv3_im2col_images(const ot_conv3 *p, const float *x, int64_t xstride, int64_t nimg, float *col,
                            int64_t ld, int nt) {
    int64_t rows = p->Cig * p->K, total = nimg * rows;
    ot_conv_tap table[OT_CONV_TAPS_MAX];
    const ot_conv_tap *taps = ot_conv_taps(p, table);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && total * p->L >= OT_CPU_PAR_MIN)
    for (int64_t q = 0; q < total; q++) {
        int64_t j = q / rows, r = q % rows;
        ot_conv_tap own;
        im2col_row(p, ot_conv_tap_of(p, taps, r % p->K, &own), x + j * xstride + (r / p->K) * p->S,
                   col + r * ld + j * p->L);
    }
}

void ot_conv3_im2col(const ot_conv3 *p, const float *x, float *col, int64_t ld, int nt) {
    ot_conv3_im2col_images(p, x, 0, 1, col, ld, nt);
}

/* Each input position gets at most one term per tap, so visiting only the valid
 * outputs keeps the plain loop's order of additions (taps in order) and its bits. */
void ot_conv_scatter_tap(const ot_conv3 *p, const ot_conv_tap *t, const float *cr, float wv, bool scale, float *xc) {
    const int64_t O1 = p->sp.out[1], O2 = p->sp.out[2], I1 = p->sp.in[1], I2 = p->sp.in[2], S2 = p->sp.s[2];
    for (int64_t o0 = t->a[0]; o0 < t->b[0]; o0++) {
        int64_t i0 = o0 * p->sp.s[0] + t->base[0];
        for (int64_t o1 = t->a[1]; o1 < t->b[1]; o1++) {
            float *xr = xc + (i0 * I1 + o1 * p->sp.s[1] + t->base[1]) * I2 + t->base[2];
            const float *c = cr + (o0 * O1 + o1) * O2;
            if (scale) {
                if (S2 == 1)
                    ot_conv_axpy4(xr + t->a[2], c + t->a[2], wv, t->b[2] - t->a[2]);
                else
                    for (int64_t o2 = t->a[2]; o2 < t->b[2]; o2++) xr[o2 * S2] += wv * c[o2];
            } else {
                if (S2 == 1)
                    add_plain(xr, c, t->a[2], t->b[2]);
                else
                    for (int64_t o2 = t->a[2]; o2 < t->b[2]; o2++) xr[o2 * S2] += c[o2];
            }
        }
    }
}

void ot_conv3_col2im(const ot_conv3 *p, const float *col, int64_t ld, float *dx, int nt) {
    ot_conv_tap table[OT_CONV_TAPS_MAX];
    const ot_conv_tap *taps = ot_conv_taps(p, table);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && p->Cig * p->K * p->L >= OT_CPU_PAR_MIN)
    for (int64_t ci = 0; ci < p->Cig; ci++) {
        float *xc = dx + ci * p->S;
        for (int64_t kk = 0; kk < p->K; kk++) {
            ot_conv_tap own;
            ot_conv_scatter_tap(p, ot_conv_tap_of(p, taps, kk, &own), col + (ci * p->K + kk) * ld, 1.0f, false, xc);
        }
    }
}

void ot_conv_nc_to_rows(const float *t, int64_t C, int64_t L, int64_t n0, int64_t nb, int64_t c0, int64_t nc,
                        float *rows) {
    for (int64_t c = 0; c < nc; c++)
        for (int64_t j = 0; j < nb; j++)
            memcpy(rows + (c * nb + j) * L, t + ((n0 + j) * C + c0 + c) * L, (size_t)L * sizeof(float));
}

void ot_conv_rows_to_nc(const float *rows, int64_t C, int64_t L, int64_t n0, int64_t nb, int64_t c0, int64_t nc,
                        float *t) {
    for (int64_t c = 0; c < nc; c++)
        for (int64_t j = 0; j < nb; j++)
            memcpy(t + ((n0 + j) * C + c0 + c) * L, rows + (c * nb + j) * L, (size_t)L * sizeof(float));
}

/* r[q] = column q of the 8 x 8 block whose row j is r[j] (unpack pairs, then pairs
 * of pairs, then 128-bit halves): data movement only. __builtin_shufflevector, not
 * GCC's __builtin_shuffle: clang (the fuzz and sanitizer builds) has only the former,
 * GCC has both since 12. */
#define OT_TRANSPOSE8(r)                                                                                   \
    do {                                                                                                   \
        ot_v8f t_[8], u_[8];                                                                               \
        for (int k_ = 0; k_ < 8; k_ += 2) {                                                                \
            t_[k_] = __builtin_shufflevector(r[k_], r[k_ + 1], 0, 8, 1, 9, 4, 12, 5, 13);              \
            t_[k_ + 1] = __builtin_shufflevector(r[k_], r[k_ + 1], 2, 10, 3, 11, 6, 14, 7, 15);        \
        }                                                                                                  \
        for (int k_ = 0; k_ < 8; k_ += 4)                                                                  \
            for (int h_ = 0; h_ < 2; h_++) {                                                               \
                u_[k_ + 2 * h_] = __builtin_shufflevector(t_[k_ + h_], t_[k_ + h_ + 2], 0, 1, 8, 9, 4, 5, 12, 13); \
                u_[k_ + 2 * h_ + 1] = __builtin_shufflevector(t_[k_ + h_], t_[k_ + h_ + 2], 2, 3, 10, 11, 6, 7, 14, 15); \
            }                                                                                              \
        for (int q_ = 0; q_ < 4; q_++) {                                                                   \
            r[q_] = __builtin_shufflevector(u_[q_], u_[q_ + 4], 0, 1, 2, 3, 8, 9, 10, 11);             \
            r[q_ + 4] = __builtin_shufflevector(u_[q_], u_[q_ + 4], 4, 5, 6, 7, 12, 13, 14, 15);       \
        }                                                                                                  \
    } while (0)


OT_CONV_LANES_CLONES void ot_conv_interleave(const float *src, int64_t stride, int64_t nc, int64_t len, float *t) {
    int64_t l0 = 0;
    if (nc == OT_CONV_LANES)
        for (; l0 + 8 <= len; l0 += 8) {
            ot_v8f r[8];
            for (int j = 0; j < 8; j++) memcpy(&r[j], src + j * stride + l0, sizeof r[j]);
            OT_TRANSPOSE8(r);
            for (int q = 0; q < 8; q++) memcpy(t + (l0 + q) * OT_CONV_LANES, &r[q], sizeof r[q]);
        }
    for (int64_t j = 0; j < nc; j++)
        for (int64_t l = l0; l < len; l++) t[l * OT_CONV_LANES + j] = src[j * stride + l];
}

OT_CONV_LANES_CLONES void ot_conv_deinterleave(const float *t, int64_t nc, int64_t len, const float *add, float *dst,
                                               int64_t stride) {
    int64_t l0 = 0;
    if (nc == OT_CONV_LANES)
        for (; l0 + 8 <= len; l0 += 8) {
            ot_v8f r[8];
            for (int q = 0; q < 8; q++) memcpy(&r[q], t + (l0 + q) * OT_CONV_LANES, sizeof r[q]);
            OT_TRANSPOSE8(r);
            for (int j = 0; j < 8; j++) {
                if (add) r[j] += (ot_v8f){add[j], add[j], add[j], add[j], add[j], add[j], add[j], add[j]};
                memcpy(dst + j * stride + l0, &r[j], sizeof r[j]);
            }
        }
    for (int64_t j = 0; j < nc; j++)
        for (int64_t l = l0; l < len; l++)
            dst[j * stride + l] = add ? t[l * OT_CONV_LANES + j] + add[j] : t[l * OT_CONV_LANES + j];
}

OT_CONV_LANES_CLONES void ot_conv_lanes_taps(const ot_conv3 *p, const ot_conv_tap *taps, const float *wl, int64_t nc,
                                             bool forward, const float *src, float *dst) {
    const int64_t O1 = p->sp.out[1], O2 = p->sp.out[2], I1 = p->sp.in[1], I2 = p->sp.in[2], S2 = p->sp.s[2];
    const int64_t so = forward ? S2 * OT_CONV_LANES : OT_CONV_LANES, sd = forward ? OT_CONV_LANES : S2 * OT_CONV_LANES;
    for (int64_t kk = 0; kk < p->K; kk++) {
        const ot_conv_tap *t = &taps[kk];
        ot_v8f wv = {0};
        for (int64_t j = 0; j < nc; j++) wv[j] = wl[j * p->K + kk];
        for (int64_t o0 = t->a[0]; o0 < t->b[0]; o0++) {
            int64_t i0 = o0 * p->sp.s[0] + t->base[0];
            for (int64_t o1 = t->a[1]; o1 < t->b[1]; o1++) {
                int64_t in = ((i0 * I1 + o1 * p->sp.s[1] + t->base[1]) * I2 + t->base[2]) * OT_CONV_LANES;
                int64_t on = (o0 * O1 + o1) * O2 * OT_CONV_LANES;
                const float *s = src + (forward ? in : on);
                float *d = dst + (forward ? on : in);
                for (int64_t o2 = t->a[2]; o2 < t->b[2]; o2++) {
                    ot_v8f a = ot_conv_load8(d + o2 * sd);
                    a += wv * ot_conv_load8(s + o2 * so);
                    memcpy(d + o2 * sd, &a, sizeof a);
                }
            }
        }
    }
}
