/* rnn_geometry.h — RNN, GRU and LSTM (ONNX's recurrent ops) and their one backward
 * op RnnGrad, for both backends (issue 26): the host reads the node into a geometry
 * (ot_rnn_geometry, rnn_geometry.c); the element code below runs one (direction,
 * batch element) sequence, or one weight-gradient element, the same on the CPU
 * (kernels/cpu/cpu_rnn.c) and the GPU (kernels/cuda/cuda_rnn.cu, host mode included).
 *
 * ONNX's equations, gates in ONNX's order (GRU z, r, h; LSTM i, o, f, c), the default
 * activations (RNN: Tanh or Relu; GRU: Sigmoid, Tanh; LSTM: Sigmoid, Tanh, Tanh),
 * LSTM peepholes P (i, o, f), GRU's linear_before_reset, layout 0 and 1, forward,
 * reverse and bidirectional, sequence_lens (steps at and past a batch element's length
 * leave its state alone and give zeros in Y; a reverse direction starts at its last
 * valid step), initial_h and initial_c. Dot products are summed in double, in index
 * order.
 *
 * The gradient recomputes the forward sequence into its workspace (the gates after
 * their activations and every state), then walks it back: per (direction, batch
 * element) the pre-activation gradients of the W path (dAw) and of the R path (dAr)
 * at every step, dX, dinitial_h, dinitial_c and a per-element peephole gradient; then
 * each element of dW, dR and dB sums over batch elements and steps in a fixed order
 * (one task per element: no atomics, the same bits on any thread count or backend). */
#ifndef OT_KERNELS_RNN_GEOMETRY_H
#define OT_KERNELS_RNN_GEOMETRY_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define OT_RNN_FN static inline __host__ __device__
#else
#define OT_RNN_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"

enum { OT_RNN_CELL_RNN = 0, OT_RNN_CELL_GRU = 1, OT_RNN_CELL_LSTM = 2 };

typedef struct ot_rnn_geom {
    int cell, G;  /* the cell and its gate count (1, 3, 4) */
    bool relu;    /* RNN's activation: Relu (else Tanh) */
    bool lbr;     /* GRU's linear_before_reset */
    int dirs;     /* 1 or 2 */
    bool reverse; /* one direction, run backwards */
    bool layout1; /* batch first */
    int64_t T, B, I, H;
    bool has_b, has_seq, has_h0, has_c0, has_p;
    int64_t ws_seq; /* floats of workspace per (direction, batch element) */
} ot_rnn_geom;

/* The tensors of one run (device pointers on the GPU); absent ones NULL. */
typedef struct ot_rnn_io {
    const float *x, *w, *r, *b, *h0, *c0, *p;
    const int32_t *seq;
    float *y, *yh, *yc;
    /* RnnGrad: */
    const float *dy, *dyh, *dyc;
    float *dx, *dw, *dr, *db, *dh0, *dc0, *dp;
    float *ws;
} ot_rnn_io;

/* From a forward node (RNN, GRU, LSTM) or RnnGrad and its forward inputs in ONNX's
 * LSTM order (X, W, R, B, sequence_lens, initial_h, initial_c, P; an absent one has
 * dtype OT_UNDEFINED): the dims, checked against each other (float32 tensors, int32
 * sequence_lens), the attributes, and ws_seq. OT_E_MODEL / OT_E_SHAPE /
 * OT_E_UNSUPPORTED naming the node. */
ot_status ot_rnn_geometry(const ot_node *node, const ot_tensor *in8, ot_rnn_geom *g, ot_error *err);
/* Workspace bytes of a node with that geometry: the forward's per-sequence scratch,
 * or the gradient's records. */
size_t ot_rnn_workspace_bytes(const ot_rnn_geom *g, bool grad);
/* Sets g->ws_seq, the floats each (direction, batch element) has in that workspace. */
void ot_rnn_set_ws(ot_rnn_geom *g, bool grad);
/* Every length in [0, T] (seq: host memory, NULL when absent). OT_E_MODEL naming the
 * node and the batch element. */
ot_status ot_rnn_check_lens(const ot_node *node, const ot_rnn_geom *g, const int32_t *seq, ot_error *err);
/* A node's forward inputs in the order above, from its own inputs (RNN and GRU have
 * no initial_c and P; RnnGrad's start at slot 3). */
void ot_rnn_forward_inputs(const ot_node *node, const ot_tensor *in, ot_tensor *in8);

#ifdef __cplusplus
}
#endif

OT_RNN_FN float ot_rnn_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* Offsets of X[t, b], Y[t, d, b], Y_h[d, b] (and initial_h, initial_c) by layout. */
OT_RNN_FN int64_t ot_rnn_x_off(const ot_rnn_geom *g, int64_t t, int64_t b) {
    return (g->layout1 ? b * g->T + t : t * g->B + b) * g->I;
}
OT_RNN_FN int64_t ot_rnn_y_off(const ot_rnn_geom *g, int64_t t, int d, int64_t b) {
    return (g->layout1 ? (b * g->T + t) * g->dirs + d : (t * g->dirs + d) * g->B + b) * g->H;
}
OT_RNN_FN int64_t ot_rnn_h_off(const ot_rnn_geom *g, int d, int64_t b) {
    return (g->layout1 ? b * g->dirs + d : d * g->B + b) * g->H;
}
OT_RNN_FN int64_t ot_rnn_len(const ot_rnn_geom *g, const ot_rnn_io *io, int64_t b) {
    return io->seq ? (int64_t)io->seq[b] : g->T;
}
/* The time of processing step s (reverse: from the last valid step down). */
OT_RNN_FN int64_t ot_rnn_time(const ot_rnn_geom *g, int d, int64_t len, int64_t s) {
    bool rev = g->dirs == 2 ? d == 1 : g->reverse;
    return rev ? len - 1 - s : s;
}

/* sum_k m[row, k] * v[k] + bias, in double */
OT_RNN_FN float ot_rnn_dot(const float *m, int64_t row, int64_t n, const float *v, float bias) {
    double s = bias;
    const float *mr = m + row * n;
    for (int64_t k = 0; k < n; k++)
        s += (double)mr[k] * v[k];
    return (float)s;
}

/* The records of sequence (d, b) in the workspace: states hs[(T + 1) H] (hs[0] the
 * initial state), cs likewise (LSTM), gates[T GH] after their activations, arh[T H]
 * (GRU: the h gate's R path, linear_before_reset = 1, or r * Hprev, = 0), dAw and
 * dAr [T GH], dp[3 H], and scratch[4 H + GH]. */
typedef struct ot_rnn_rec {
    float *hs, *cs, *gates, *arh, *daw, *dar, *dp, *scratch;
} ot_rnn_rec;

OT_RNN_FN ot_rnn_rec ot_rnn_rec_of(const ot_rnn_geom *g, float *ws, int d, int64_t b, bool grad) {
    float *p = ws + ((int64_t)d * g->B + b) * g->ws_seq;
    int64_t T = grad ? g->T : 1, H = g->H, GH = g->G * g->H;
    ot_rnn_rec r;
    r.hs = p, p += (T + 1) * H; /* the forward keeps one state (and the next, in scratch) */
    r.cs = p, p += (T + 1) * H;
    r.gates = p, p += T * GH;
    r.arh = p, p += T * H;
    r.daw = r.dar = r.dp = 0;
    if (grad) {
        r.daw = p, p += T * GH;
        r.dar = p, p += T * GH;
        r.dp = p, p += 3 * H;
    }
    r.scratch = p;
    return r;
}

/* One step of sequence (d, b) at time t from (hp, cp) into (hn, cn); the gates after
 * their activations into gt, GRU's arh into ah. */
OT_RNN_FN void ot_rnn_step(const ot_rnn_geom *g, const ot_rnn_io *io, int d, int64_t b, int64_t t, const float *hp,
                           const float *cp, float *hn, float *cn, float *gt, float *ah, float *tmp) {
    int64_t H = g->H, I = g->I, GH = g->G * H;
    const float *x = io->x + ot_rnn_x_off(g, t, b);
    const float *w = io->w + (int64_t)d * GH * I, *r = io->r + (int64_t)d * GH * H;
    const float *wb = io->b ? io->b + (int64_t)d * 2 * GH : 0, *rb = wb ? wb + GH : 0;
    const float *p = io->p ? io->p + (int64_t)d * 3 * H : 0;
    if (g->cell == OT_RNN_CELL_RNN) {
        for (int64_t j = 0; j < H; j++) {
            double a = (double)ot_rnn_dot(w, j, I, x, wb ? wb[j] : 0.0f) + ot_rnn_dot(r, j, H, hp, rb ? rb[j] : 0.0f);
            float v = (float)a;
            hn[j] = gt[j] = g->relu ? (v > 0.0f ? v : 0.0f) : tanhf(v);
        }
        return;
    }
    if (g->cell == OT_RNN_CELL_GRU) {
        for (int64_t j = 0; j < 2 * H; j++) { /* z, r */
            double a = (double)ot_rnn_dot(w, j, I, x, wb ? wb[j] : 0.0f) + ot_rnn_dot(r, j, H, hp, rb ? rb[j] : 0.0f);
            gt[j] = ot_rnn_sigmoid((float)a);
        }
        for (int64_t j = 0; j < H; j++)
            tmp[j] = gt[H + j] * hp[j]; /* r * Hprev */
        for (int64_t j = 0; j < H; j++) {
            int64_t row = 2 * H + j;
            float aw = ot_rnn_dot(w, row, I, x, wb ? wb[row] : 0.0f), v;
            if (g->lbr) {
                ah[j] = ot_rnn_dot(r, row, H, hp, rb ? rb[row] : 0.0f);
                v = aw + gt[H + j] * ah[j];
            } else {
                ah[j] = tmp[j];
                v = (float)((double)aw + ot_rnn_dot(r, row, H, tmp, rb ? rb[row] : 0.0f));
            }
            gt[row] = tanhf(v);
        }
        for (int64_t j = 0; j < H; j++)
            hn[j] = (1.0f - gt[j]) * gt[2 * H + j] + gt[j] * hp[j];
        return;
    }
    /* LSTM: i, o, f, c */
    for (int64_t j = 0; j < GH; j++) {
        double a = (double)ot_rnn_dot(w, j, I, x, wb ? wb[j] : 0.0f) + ot_rnn_dot(r, j, H, hp, rb ? rb[j] : 0.0f);
        tmp[j] = (float)a;
    }
    for (int64_t j = 0; j < H; j++) {
        float ig = ot_rnn_sigmoid(tmp[j] + (p ? p[j] * cp[j] : 0.0f));
        float fg = ot_rnn_sigmoid(tmp[2 * H + j] + (p ? p[2 * H + j] * cp[j] : 0.0f));
        float cc = tanhf(tmp[3 * H + j]);
        float c = fg * cp[j] + ig * cc;
        float og = ot_rnn_sigmoid(tmp[H + j] + (p ? p[H + j] * c : 0.0f));
        gt[j] = ig, gt[H + j] = og, gt[2 * H + j] = fg, gt[3 * H + j] = cc;
        cn[j] = c;
        hn[j] = og * tanhf(c);
    }
}

/* The forward of sequence (d, b): Y (zeros past its length), Y_h, Y_c. */
OT_RNN_FN void ot_rnn_forward_seq(const ot_rnn_geom *g, const ot_rnn_io *io, int64_t db) {
    int d = (int)(db / g->B);
    int64_t b = db % g->B, H = g->H, len = ot_rnn_len(g, io, b);
    ot_rnn_rec rc = ot_rnn_rec_of(g, io->ws, d, b, false);
    float *h = rc.hs, *c = rc.cs, *hn = rc.scratch, *cn = hn + H, *tmp = cn + H;
    for (int64_t j = 0; j < H; j++) {
        h[j] = io->h0 ? io->h0[ot_rnn_h_off(g, d, b) + j] : 0.0f;
        c[j] = io->c0 ? io->c0[ot_rnn_h_off(g, d, b) + j] : 0.0f;
    }
    for (int64_t s = 0; s < g->T; s++) {
        if (s >= len) {
            if (io->y)
                for (int64_t j = 0; j < H; j++)
                    io->y[ot_rnn_y_off(g, s, d, b) + j] = 0.0f;
            continue;
        }
        int64_t t = ot_rnn_time(g, d, len, s);
        ot_rnn_step(g, io, d, b, t, h, c, hn, cn, rc.gates, rc.arh, tmp);
        for (int64_t j = 0; j < H; j++) {
            h[j] = hn[j];
            if (g->cell == OT_RNN_CELL_LSTM) c[j] = cn[j];
            if (io->y) io->y[ot_rnn_y_off(g, t, d, b) + j] = hn[j];
        }
    }
    for (int64_t j = 0; j < H; j++) {
        if (io->yh) io->yh[ot_rnn_h_off(g, d, b) + j] = h[j];
        if (io->yc) io->yc[ot_rnn_h_off(g, d, b) + j] = c[j];
    }
}

/* sum_r m[r, k] * v[r] (a transposed product), in double */
OT_RNN_FN float ot_rnn_tdot(const float *m, int64_t k, int64_t rows, int64_t n, const float *v) {
    double s = 0.0;
    for (int64_t r = 0; r < rows; r++)
        s += (double)m[r * n + k] * v[r];
    return (float)s;
}

/* The gradient of sequence (d, b) for every direction of batch element b (d in
 * order, so dX sums the directions in a fixed order): records, then back through the
 * steps. */
OT_RNN_FN void ot_rnn_backward_seq(const ot_rnn_geom *g, const ot_rnn_io *io, int64_t b) {
    int64_t H = g->H, I = g->I, G = g->G, GH = G * H, len = ot_rnn_len(g, io, b);
    if (io->dx)
        for (int64_t t = 0; t < g->T; t++)
            for (int64_t k = 0; k < I; k++)
                io->dx[ot_rnn_x_off(g, t, b) + k] = 0.0f;
    for (int d = 0; d < g->dirs; d++) {
        ot_rnn_rec rc = ot_rnn_rec_of(g, io->ws, d, b, true);
        float *dh = rc.scratch, *dc = dh + H, *dhp = dc + H, *dcp = dhp + H, *tmp = dcp + H;
        int64_t ho = ot_rnn_h_off(g, d, b);
        for (int64_t j = 0; j < H; j++) {
            rc.hs[j] = io->h0 ? io->h0[ho + j] : 0.0f;
            rc.cs[j] = io->c0 ? io->c0[ho + j] : 0.0f;
        }
        for (int64_t s = 0; s < len; s++) {
            int64_t t = ot_rnn_time(g, d, len, s);
            ot_rnn_step(g, io, d, b, t, rc.hs + s * H, rc.cs + s * H, rc.hs + (s + 1) * H, rc.cs + (s + 1) * H,
                        rc.gates + s * GH, rc.arh + s * H, tmp);
            if (g->cell != OT_RNN_CELL_LSTM)
                for (int64_t j = 0; j < H; j++)
                    rc.cs[(s + 1) * H + j] = rc.cs[s * H + j];
        }
        for (int64_t j = 0; j < H; j++) {
            dh[j] = io->dyh ? io->dyh[ho + j] : 0.0f;
            dc[j] = io->dyc ? io->dyc[ho + j] : 0.0f;
        }
        for (int64_t j = 0; j < 3 * H; j++)
            rc.dp[j] = 0.0f;
        const float *w = io->w + (int64_t)d * GH * I, *r = io->r + (int64_t)d * GH * H;
        const float *p = io->p ? io->p + (int64_t)d * 3 * H : 0;
        for (int64_t s = len - 1; s >= 0; s--) {
            int64_t t = ot_rnn_time(g, d, len, s);
            const float *gt = rc.gates + s * GH, *hp = rc.hs + s * H, *cp = rc.cs + s * H, *cn = rc.cs + (s + 1) * H;
            float *daw = rc.daw + s * GH, *dar = rc.dar + s * GH;
            if (io->dy)
                for (int64_t j = 0; j < H; j++)
                    dh[j] += io->dy[ot_rnn_y_off(g, t, d, b) + j];
            for (int64_t j = 0; j < H; j++)
                dhp[j] = 0.0f, dcp[j] = 0.0f;
            if (g->cell == OT_RNN_CELL_RNN) {
                for (int64_t j = 0; j < H; j++) {
                    float v = gt[j];
                    daw[j] = dar[j] = dh[j] * (g->relu ? (v > 0.0f ? 1.0f : 0.0f) : 1.0f - v * v);
                }
            } else if (g->cell == OT_RNN_CELL_GRU) {
                for (int64_t j = 0; j < H; j++) {
                    float z = gt[j], hh = gt[2 * H + j];
                    float dpre_h = dh[j] * (1.0f - z) * (1.0f - hh * hh);
                    daw[j] = dar[j] = dh[j] * (hp[j] - hh) * z * (1.0f - z);
                    daw[2 * H + j] = dpre_h;
                    dar[2 * H + j] = g->lbr ? dpre_h * gt[H + j] : dpre_h;
                    dcp[j] = dh[j] * z; /* the direct path, kept in dcp until dhp is summed */
                }
                for (int64_t j = 0; j < H; j++) { /* dr, through the h gate */
                    float rg = gt[H + j], dr;
                    if (g->lbr) {
                        dr = daw[2 * H + j] * rc.arh[s * H + j];
                    } else {
                        tmp[j] = ot_rnn_tdot(r + 2 * H * H, j, H, H, daw + 2 * H); /* d(r * Hprev) */
                        dr = tmp[j] * hp[j];
                    }
                    daw[H + j] = dar[H + j] = dr * rg * (1.0f - rg);
                }
            } else {
                for (int64_t j = 0; j < H; j++) {
                    float ig = gt[j], og = gt[H + j], fg = gt[2 * H + j], cc = gt[3 * H + j], tc = tanhf(cn[j]);
                    float dpo = dh[j] * tc * og * (1.0f - og);
                    float dct = dc[j] + dh[j] * og * (1.0f - tc * tc) + (p ? dpo * p[H + j] : 0.0f);
                    float dpi = dct * cc * ig * (1.0f - ig), dpf = dct * cp[j] * fg * (1.0f - fg);
                    daw[j] = dar[j] = dpi;
                    daw[H + j] = dar[H + j] = dpo;
                    daw[2 * H + j] = dar[2 * H + j] = dpf;
                    daw[3 * H + j] = dar[3 * H + j] = dct * ig * (1.0f - cc * cc);
                    dcp[j] = dct * fg + (p ? dpi * p[j] + dpf * p[2 * H + j] : 0.0f);
                    rc.dp[j] += dpi * cp[j], rc.dp[H + j] += dpo * cn[j], rc.dp[2 * H + j] += dpf * cp[j];
                }
            }
            /* dHprev = R^T dAr (+ GRU's direct and reset paths) */
            for (int64_t k = 0; k < H; k++) {
                int64_t rows = g->cell == OT_RNN_CELL_GRU && !g->lbr ? 2 * H : GH;
                double v = ot_rnn_tdot(r, k, rows, H, dar);
                if (g->cell == OT_RNN_CELL_GRU) {
                    v += dcp[k];
                    if (!g->lbr) v += tmp[k] * gt[H + k];
                }
                dhp[k] = (float)v;
            }
            if (g->cell == OT_RNN_CELL_GRU)
                for (int64_t j = 0; j < H; j++)
                    dcp[j] = 0.0f;
            if (io->dx)
                for (int64_t k = 0; k < I; k++)
                    io->dx[ot_rnn_x_off(g, t, b) + k] += ot_rnn_tdot(w, k, GH, I, daw);
            for (int64_t j = 0; j < H; j++)
                dh[j] = dhp[j], dc[j] = dcp[j];
        }
        for (int64_t j = 0; j < H; j++) {
            if (io->dh0) io->dh0[ho + j] = dh[j];
            if (io->dc0) io->dc0[ho + j] = dc[j];
        }
    }
}

/* Weight-gradient element e of the concatenation [dW, dR, dB, dP] (per direction:
 * GH I, GH H, 2 GH, 3 H): its sum over batch elements, then steps. */
OT_RNN_FN float ot_rnn_weight_grad(const ot_rnn_geom *g, const ot_rnn_io *io, int64_t e) {
    int64_t H = g->H, I = g->I, GH = g->G * H;
    int64_t per = GH * I + GH * H + 2 * GH + 3 * H;
    int d = (int)(e / per);
    int64_t k = e % per;
    double s = 0.0;
    for (int64_t b = 0; b < g->B; b++) {
        ot_rnn_rec rc = ot_rnn_rec_of(g, io->ws, d, b, true);
        int64_t len = ot_rnn_len(g, io, b);
        if (k >= GH * I + GH * H + 2 * GH) {
            s += rc.dp[k - (GH * I + GH * H + 2 * GH)];
            continue;
        }
        for (int64_t st = 0; st < len; st++) {
            const float *daw = rc.daw + st * GH, *dar = rc.dar + st * GH;
            if (k < GH * I) { /* dW[row, col]: dAw x X_t */
                int64_t t = ot_rnn_time(g, d, len, st);
                s += (double)daw[k / I] * io->x[ot_rnn_x_off(g, t, b) + k % I];
            } else if (k < GH * I + GH * H) { /* dR[row, col]: dAr x the R path's input */
                int64_t q = k - GH * I, row = q / H, col = q % H;
                bool rin = g->cell == OT_RNN_CELL_GRU && !g->lbr && row >= 2 * H;
                float in = rin ? rc.arh[st * H + col] : rc.hs[st * H + col];
                s += (double)dar[row] * in;
            } else { /* dB: the W bias, then the R bias */
                int64_t q = k - GH * I - GH * H;
                s += q < GH ? daw[q] : dar[q - GH];
            }
        }
    }
    return (float)s;
}

#endif
