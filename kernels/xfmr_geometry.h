/* xfmr_geometry.h — geometry and element code of the transformer ops of issue 26
 * (RMSNormalization, RotaryEmbedding, Attention and their backward ops), written once
 * for both backends: the CUDA launchers (kernels/cuda/cuda_xfmr.cu) run one thread per
 * unit through ot_cu_map (host mode included); the CPU kernels (kernels/cpu/cpu_xfmr.c)
 * run the same units for RMSNorm and RotaryEmbedding, so the CUDA host mode gives the
 * CPU's bits there and the device differs only by its libm (expf, tanhf). The CPU's
 * Attention runs its products through GEMMs and shares the rest (bias, softcap,
 * softmax, the score gradient): the two agree within float32 rounding.
 *
 * Every sum is taken in double in a fixed order, one unit (a row, a column, a head of
 * one token) per thread, with no atomics: the results do not depend on the thread
 * count or the backend's scheduling. Single operations go through the xf_* helpers so
 * nvcc cannot contract them into FMAs the CPU (ISO C, -ffp-contract=off) never uses.
 *
 * Units: RMSNorm rows (dX) and columns (dScale); RotaryEmbedding one (token, head);
 * Attention one query row (b, q-head, i) forward and for dQ, one key row (b, kv-head,
 * j) for dK and dV. Attention keeps each query row's probabilities and score
 * gradients in a workspace of B*Hq*Sq*T floats (two of them for the backward; the
 * CPU's three: the raw scores too). */
#ifndef OT_KERNELS_XFMR_GEOMETRY_H
#define OT_KERNELS_XFMR_GEOMETRY_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"
#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#define OT_XF_FN static inline __host__ __device__
#else
#define OT_XF_FN static inline
#endif

/* ---- IEEE single operations (no FMA contraction on the device) -------------------- */
OT_XF_FN float xf_mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
OT_XF_FN float xf_add(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
OT_XF_FN float xf_sub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
OT_XF_FN double xf_dmul(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
OT_XF_FN double xf_dadd(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}
OT_XF_FN double xf_dsub(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}

#ifdef __cplusplus
extern "C" {
#endif

/* Optional input k of node (its tensor in `in`), or NULL when absent. */
const ot_tensor *ot_xfmr_input(const ot_node *node, const ot_tensor *in, int k);
/* Output k's float data, or NULL when the node does not produce it. */
float *ot_xfmr_output(const ot_node *node, ot_tensor *out, int k);

/* ---- RMSNormalization ----------------------------------------------------------- */

typedef struct ot_rms_geom {
    int64_t rows, cols;
    int64_t scale_step; /* 1: one scale per column; 0: one for all */
    double eps;
} ot_rms_geom;

/* From the node's params (axis, epsilon, stash_type), X's shape and the scale's
 * element count. OT_E_MODEL / OT_E_SHAPE / OT_E_UNSUPPORTED naming the node. */
ot_status ot_rms_geometry(ot_rms_geom *g, const ot_node *node, const ot_shape *x, int64_t scale_numel, ot_error *err);
/* RMSNormGrad's workspace: 1/rms per row and dScale per column, in doubles. */
size_t ot_rms_grad_workspace(const ot_node *node, const ot_shape *x, int64_t scale_numel);

#ifdef __cplusplus
}
#endif

/* 1/sqrt(mean(x^2) + eps) of one row: four partial sums in a fixed order. */
OT_XF_FN double ot_rms_inv(const float *xr, int64_t cols, double eps) {
    double s4[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t i4 = cols - cols % 4;
    for (int64_t i = 0; i < i4; i += 4)
        for (int k = 0; k < 4; k++)
            s4[k] = xf_dadd(s4[k], xf_dmul(xr[i + k], xr[i + k]));
    for (int64_t i = i4; i < cols; i++)
        s4[i & 3] = xf_dadd(s4[i & 3], xf_dmul(xr[i], xr[i]));
    double ms = cols ? xf_dadd(s4[0], s4[1]) + xf_dadd(s4[2], s4[3]) : 0.0;
    if (cols) ms /= (double)cols;
    return 1.0 / sqrt(ms + eps);
}

/* Y = (X * (1/rms)) * scale, as ONNX's reference orders it. */
OT_XF_FN void ot_rms_row(const ot_rms_geom *g, int64_t r, const float *x, const float *scale, float *y) {
    const float *xr = x + r * g->cols;
    float *yr = y + r * g->cols;
    float inv = (float)ot_rms_inv(xr, g->cols, g->eps);
    for (int64_t j = 0; j < g->cols; j++)
        yr[j] = xf_mul(xf_mul(xr[j], inv), scale[j * g->scale_step]);
}

/* RMSNormGrad, one row: 1/rms into inv_ws[r]; dX (when dx) = r * (g - xh * mean(g * xh))
 * with g = dY * scale and xh = X * r. */
OT_XF_FN void ot_rms_grad_row(const ot_rms_geom *g, int64_t r, const float *dy, const float *x, const float *scale,
                              float *dx, double *inv_ws) {
    int64_t cols = g->cols;
    const float *xr = x + r * cols, *dr = dy + r * cols;
    double inv = ot_rms_inv(xr, cols, g->eps);
    inv_ws[r] = inv;
    if (!dx) return;
    double m = 0.0;
    for (int64_t j = 0; j < cols; j++)
        m = xf_dadd(m, xf_dmul(xf_dmul((double)dr[j], scale[j * g->scale_step]), xf_dmul(xr[j], inv)));
    if (cols) m /= (double)cols;
    float *dxr = dx + r * cols;
    for (int64_t j = 0; j < cols; j++) {
        double gj = xf_dmul((double)dr[j], scale[j * g->scale_step]);
        dxr[j] = (float)xf_dmul(inv, xf_dsub(gj, xf_dmul(xf_dmul(xr[j], inv), m)));
    }
}

/* RMSNormGrad, one column: sum over the rows of dY * X * (1/rms), in row order. */
OT_XF_FN void ot_rms_grad_col(const ot_rms_geom *g, int64_t j, const float *dy, const float *x, const double *inv_ws,
                              double *col_ws, float *dscale) {
    double a = 0.0;
    for (int64_t r = 0; r < g->rows; r++) {
        int64_t o = r * g->cols + j;
        a = xf_dadd(a, xf_dmul((double)dy[o], xf_dmul(x[o], inv_ws[r])));
    }
    col_ws[j] = a;
    if (g->scale_step) dscale[j] = (float)a;
}

/* A one-element scale: the columns' sums, in column order. */
OT_XF_FN void ot_rms_grad_scalar(const ot_rms_geom *g, const double *col_ws, float *dscale) {
    double a = 0.0;
    for (int64_t j = 0; j < g->cols; j++)
        a = xf_dadd(a, col_ws[j]);
    dscale[0] = (float)a;
}

/* ---- RotaryEmbedding -------------------------------------------------------------- */

typedef struct ot_rope_geom {
    int64_t B, S, H, D; /* batch, sequence, heads, head size */
    int64_t half;       /* rotary_embedding_dim / 2 */
    int64_t sb, ss, sh; /* X's strides of b, s, h (d is contiguous) */
    bool interleaved, has_pos;
    int64_t cache_rows; /* with position ids: the caches' first dim */
} ot_rope_geom;

#ifdef __cplusplus
extern "C" {
#endif
/* From the node's params and the shapes of X, the caches and (has_pos) the position
 * ids. OT_E_MODEL / OT_E_SHAPE naming the node. */
ot_status ot_rope_geometry(ot_rope_geom *g, const ot_node *node, const ot_shape *x, const ot_shape *cos_s,
                           const ot_shape *sin_s, const ot_shape *pos, ot_error *err);
/* Every position id in [0, cache_rows): OT_E_MODEL naming the node and the first one
 * outside. pos holds B*S ids (host memory). */
ot_status ot_rope_check_positions(const ot_rope_geom *g, const ot_node *node, const int64_t *pos, ot_error *err);
#ifdef __cplusplus
}
#endif

/* One (token, head) unit u = (b * S + s) * H + h: the rotation of its pairs (inverse:
 * the transposed rotation, RotaryEmbeddingGrad), the dims past the rotary ones copied. */
OT_XF_FN void ot_rope_unit(const ot_rope_geom *g, int64_t u, const float *x, const float *cosc, const float *sinc,
                           const int64_t *pos, float *y, bool inverse) {
    int64_t h = u % g->H, bs = u / g->H, s = bs % g->S, b = bs / g->S;
    int64_t base = b * g->sb + s * g->ss + h * g->sh;
    int64_t crow = g->has_pos ? pos[bs] : bs;
    const float *cr = cosc + crow * g->half, *sr = sinc + crow * g->half;
    const float *xu = x + base;
    float *yu = y + base;
    for (int64_t k = 0; k < g->half; k++) {
        int64_t i1 = g->interleaved ? 2 * k : k, i2 = g->interleaved ? 2 * k + 1 : k + g->half;
        float c = cr[k], sn = sr[k], x1 = xu[i1], x2 = xu[i2];
        if (!inverse) {
            yu[i1] = xf_sub(xf_mul(c, x1), xf_mul(sn, x2));
            yu[i2] = xf_add(xf_mul(sn, x1), xf_mul(c, x2));
        } else {
            yu[i1] = xf_add(xf_mul(c, x1), xf_mul(sn, x2));
            yu[i2] = xf_sub(xf_mul(c, x2), xf_mul(sn, x1));
        }
    }
    for (int64_t d = 2 * g->half; d < g->D; d++)
        yu[d] = xu[d];
}

/* ---- Attention -------------------------------------------------------------------- */

enum { OT_ATTN_MASK_NONE = 0, OT_ATTN_MASK_BOOL = 1, OT_ATTN_MASK_FLOAT = 2 };

typedef struct ot_attn_geom {
    int64_t B, Hq, Hkv, Sq, Skv, P, T, D, Dv; /* T = P + Skv */
    int64_t q_sb, q_sh, q_ss;                 /* strides of b, head, position (d contiguous) */
    int64_t k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, y_sb, y_sh, y_ss;
    int mask_kind;
    int64_t m_sb, m_sh, m_sq, m_len; /* mask strides (0: broadcast) and its last dim */
    float scale, softcap;
    float dropout; /* --fused-attention's absorbed Dropout ratio (ot_xfmr_params); 0: none */
    bool causal;
    bool has_nonpad; /* Attention-24's nonpad_kv_seqlen: keys [0, nonpad[b]) of batch b */
} ot_attn_geom;

#ifdef __cplusplus
extern "C" {
#endif
/* From the node's params and the shapes of Q, K, V and the optional mask (mask_dt its
 * dtype), past key and past value, nonpad_kv_seqlen (NULL when absent). OT_E_MODEL /
 * OT_E_SHAPE / OT_E_UNSUPPORTED naming the node. */
ot_status ot_attn_geometry(ot_attn_geom *g, const ot_node *node, const ot_shape *q, const ot_shape *k,
                           const ot_shape *v, const ot_shape *mask, ot_dtype mask_dt, const ot_shape *pk,
                           const ot_shape *pv, const ot_shape *nonpad, ot_error *err);
/* The same from an Attention (o = 0) or AttentionGrad (o = 1: dY first) node's input
 * tensors, the optional ones read through ot_xfmr_input. */
ot_status ot_attn_geometry_of(ot_attn_geom *g, const ot_node *node, const ot_tensor *in, int o, ot_error *err);
/* Every nonpad_kv_seqlen value (B of them, host memory) in [0, T]: OT_E_MODEL naming
 * the node and the first one outside. */
ot_status ot_attn_check_nonpad(const ot_attn_geom *g, const ot_node *node, const int64_t *nonpad, ot_error *err);
/* Workspace of Attention (the probabilities) and AttentionGrad (probabilities and
 * score gradients), in bytes; 0 when the shapes do not resolve. */
size_t ot_attn_workspace(const ot_node *node, const ot_tensor *in, bool grad);
#ifdef __cplusplus
}
#endif

/* The operands of one Attention or AttentionGrad node (NULL when absent). */
typedef struct ot_attn_ptrs {
    const float *q, *k, *v, *pk, *pv, *dy;
    const void *mask;
    const int64_t *nonpad;
    float *y, *dq, *dk, *dv, *prob, *dscore;
} ot_attn_ptrs;

/* Key (or value) row j of (b, kv head hk): the past for j < P, else the new rows. */
OT_XF_FN const float *ot_attn_krow(const ot_attn_geom *g, const float *past, const float *cur, int64_t sb, int64_t sh,
                                   int64_t ss, int64_t d, int64_t b, int64_t hk, int64_t j) {
    if (j < g->P) return past + ((b * g->Hkv + hk) * g->P + j) * d;
    return cur + b * sb + hk * sh + (j - g->P) * ss;
}

/* The additive bias of score (b, h, i, j): 0, the float mask, or -inf where the bool
 * mask is false, j is past the mask's last dim or batch b's nonpad length, or causal
 * masking hides j (aligned to the end: the past, or the nonpad length, precedes the
 * queries). */
OT_XF_FN float ot_attn_bias(const ot_attn_geom *g, const ot_attn_ptrs *a, int64_t b, int64_t h, int64_t i, int64_t j) {
    int64_t offset = g->P;
    if (g->has_nonpad) {
        if (j >= a->nonpad[b]) return -INFINITY;
        offset = a->nonpad[b] - g->Sq;
    }
    if (g->causal && j > i + offset) return -INFINITY;
    if (g->mask_kind == OT_ATTN_MASK_NONE) return 0.0f;
    if (j >= g->m_len) return -INFINITY;
    int64_t o = b * g->m_sb + h * g->m_sh + i * g->m_sq + j;
    if (g->mask_kind == OT_ATTN_MASK_BOOL) return ((const uint8_t *)a->mask)[o] ? 0.0f : -INFINITY;
    return ((const float *)a->mask)[o];
}

/* Query row (b, h, i) from its scaled scores s[0..T) (in place): softcap, the bias,
 * softmax. False for a fully masked row (all 0). */
OT_XF_FN bool ot_attn_finish_row(const ot_attn_geom *g, const ot_attn_ptrs *a, int64_t b, int64_t h, int64_t i,
                                 float *p) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < g->T; j++) {
        float s = p[j];
        if (g->softcap > 0.0f) s = xf_mul(g->softcap, tanhf(s / g->softcap));
        s = xf_add(s, ot_attn_bias(g, a, b, h, i, j));
        p[j] = s;
        if (s > mx) mx = s;
    }
    if (mx == -INFINITY) {
        for (int64_t j = 0; j < g->T; j++)
            p[j] = 0.0f;
        return false;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < g->T; j++) {
        p[j] = expf(xf_sub(p[j], mx));
        sum = xf_dadd(sum, p[j]);
    }
    for (int64_t j = 0; j < g->T; j++)
        p[j] = (float)(p[j] / sum);
    return true;
}

/* The score gradient of one score from its probability p, dP = (dY V^T) there, the
 * row's sum of p dP and the scaled score before the softcap (raw; read only with a
 * softcap): the scale and softcap's derivative 1 - tanh^2 included. */
OT_XF_FN float ot_attn_dscore(const ot_attn_geom *g, float p, float dp, double rowdot, float raw) {
    float v = (float)xf_dmul(xf_dmul(p, xf_dsub(dp, rowdot)), g->scale);
    if (g->softcap > 0.0f) {
        float t = tanhf(raw / g->softcap);
        v = xf_mul(v, xf_sub(1.0f, xf_mul(t, t)));
    }
    return v;
}

/* The probabilities of query row r = (b * Hq + h) * Sq + i into p (T floats); with raw,
 * the scaled scores before the softcap too. False for a fully masked row (p all 0). */
OT_XF_FN bool ot_attn_probs(const ot_attn_geom *g, const ot_attn_ptrs *a, int64_t r, float *p, float *raw) {
    int64_t i = r % g->Sq, bh = r / g->Sq, h = bh % g->Hq, b = bh / g->Hq, hk = h / (g->Hq / g->Hkv);
    const float *qr = a->q + b * g->q_sb + h * g->q_sh + i * g->q_ss;
    for (int64_t j = 0; j < g->T; j++) {
        const float *kr = ot_attn_krow(g, a->pk, a->k, g->k_sb, g->k_sh, g->k_ss, g->D, b, hk, j);
        double dot = 0.0;
        for (int64_t d = 0; d < g->D; d++)
            dot = xf_dadd(dot, xf_dmul(qr[d], kr[d]));
        p[j] = (float)xf_dmul(dot, g->scale);
        if (raw) raw[j] = p[j];
    }
    return ot_attn_finish_row(g, a, b, h, i, p);
}

/* Forward, one query row: probabilities into the workspace, Y = P V. */
OT_XF_FN void ot_attn_row(const ot_attn_geom *g, const ot_attn_ptrs *a, int64_t r) {
    int64_t i = r % g->Sq, bh = r / g->Sq, h = bh % g->Hq, b = bh / g->Hq, hk = h / (g->Hq / g->Hkv);
    float *p = a->prob + r * g->T;
    ot_attn_probs(g, a, r, p, NULL);
    float *yr = a->y + b * g->y_sb + h * g->y_sh + i * g->y_ss;
    for (int64_t d = 0; d < g->Dv; d++) {
        double acc = 0.0;
        for (int64_t j = 0; j < g->T; j++) {
            const float *vr = ot_attn_krow(g, a->pv, a->v, g->v_sb, g->v_sh, g->v_ss, g->Dv, b, hk, j);
            acc = xf_dadd(acc, xf_dmul(p[j], vr[d]));
        }
        yr[d] = (float)acc;
    }
}

/* dP of query row (b, h, i) at key j: dY_i . V_j, in float as the CPU's GEMM gives it. */
OT_XF_FN float ot_attn_dp(const ot_attn_geom *g, const ot_attn_ptrs *a, const float *dyr, int64_t b, int64_t hk,
                          int64_t j) {
    const float *vr = ot_attn_krow(g, a->pv, a->v, g->v_sb, g->v_sh, g->v_ss, g->Dv, b, hk, j);
    double dp = 0.0;
    for (int64_t d = 0; d < g->Dv; d++)
        dp = xf_dadd(dp, xf_dmul(dyr[d], vr[d]));
    return (float)dp;
}

/* Backward, one query row: P into the workspace and the raw scores into the score
 * gradient row, the row's sum of P dP, then dS in place of the raw scores (dP computed
 * twice rather than kept), then dQ = dS K. */
OT_XF_FN void ot_attn_grad_row(const ot_attn_geom *g, const ot_attn_ptrs *a, int64_t r) {
    int64_t i = r % g->Sq, bh = r / g->Sq, h = bh % g->Hq, b = bh / g->Hq, hk = h / (g->Hq / g->Hkv);
    float *p = a->prob + r * g->T, *ds = a->dscore + r * g->T;
    ot_attn_probs(g, a, r, p, ds);
    const float *dyr = a->dy + b * g->y_sb + h * g->y_sh + i * g->y_ss;
    double rowdot = 0.0;
    for (int64_t j = 0; j < g->T; j++)
        rowdot = xf_dadd(rowdot, xf_dmul(p[j], ot_attn_dp(g, a, dyr, b, hk, j)));
    for (int64_t j = 0; j < g->T; j++)
        ds[j] = ot_attn_dscore(g, p[j], ot_attn_dp(g, a, dyr, b, hk, j), rowdot, ds[j]);
    if (!a->dq) return;
    float *dqr = a->dq + b * g->q_sb + h * g->q_sh + i * g->q_ss;
    for (int64_t d = 0; d < g->D; d++) {
        double acc = 0.0;
        for (int64_t j = 0; j < g->T; j++) {
            const float *kr = ot_attn_krow(g, a->pk, a->k, g->k_sb, g->k_sh, g->k_ss, g->D, b, hk, j);
            acc = xf_dadd(acc, xf_dmul(ds[j], kr[d]));
        }
        dqr[d] = (float)acc;
    }
}

/* Backward, one new key row u = (b * Hkv + hk) * Skv + jn (j = P + jn): dK = dS^T Q
 * and dV = P^T dY, summed over the group's query heads and rows in order. */
OT_XF_FN void ot_attn_grad_kv(const ot_attn_geom *g, const ot_attn_ptrs *a, int64_t u) {
    int64_t jn = u % g->Skv, bh = u / g->Skv, hk = bh % g->Hkv, b = bh / g->Hkv, j = g->P + jn;
    int64_t grp = g->Hq / g->Hkv;
    if (a->dk) {
        float *dkr = a->dk + b * g->k_sb + hk * g->k_sh + jn * g->k_ss;
        for (int64_t d = 0; d < g->D; d++) {
            double acc = 0.0;
            for (int64_t h = hk * grp; h < (hk + 1) * grp; h++)
                for (int64_t i = 0; i < g->Sq; i++) {
                    int64_t r = (b * g->Hq + h) * g->Sq + i;
                    const float *qr = a->q + b * g->q_sb + h * g->q_sh + i * g->q_ss;
                    acc = xf_dadd(acc, xf_dmul(a->dscore[r * g->T + j], qr[d]));
                }
            dkr[d] = (float)acc;
        }
    }
    if (a->dv) {
        float *dvr = a->dv + b * g->v_sb + hk * g->v_sh + jn * g->v_ss;
        for (int64_t d = 0; d < g->Dv; d++) {
            double acc = 0.0;
            for (int64_t h = hk * grp; h < (hk + 1) * grp; h++)
                for (int64_t i = 0; i < g->Sq; i++) {
                    int64_t r = (b * g->Hq + h) * g->Sq + i;
                    const float *dyr = a->dy + b * g->y_sb + h * g->y_sh + i * g->y_ss;
                    acc = xf_dadd(acc, xf_dmul(a->prob[r * g->T + j], dyr[d]));
                }
            dvr[d] = (float)acc;
        }
    }
}

/* present_key / present_value element e of [B, Hkv, T, d]: the past, then the new rows. */
OT_XF_FN void ot_attn_present(const ot_attn_geom *g, int64_t e, const float *past, const float *cur, int64_t sb,
                              int64_t sh, int64_t ss, int64_t dsz, float *out) {
    int64_t d = e % dsz, t = (e / dsz) % g->T, bh = e / (dsz * g->T), hk = bh % g->Hkv, b = bh / g->Hkv;
    out[e] = ot_attn_krow(g, past, cur, sb, sh, ss, dsz, b, hk, t)[d];
}

#endif
