/* grad_norm.c — CPU kernels of BatchNormGrad and LayerNormGrad (dY, X, scale ...) ->
 * (dX, dScale, dBias), each output optional. Statistics are recomputed from X in
 * double, the same way the forward kernels compute them. */
#include <math.h>

#include "kernels/cpu/grad_kernels.h"
#include "kernels/cpu/cpu_lowp.h" /* ot_cpu_lowp_to_f32_serial / _from_f32_serial: BatchNormGrad's low runs */
#include "kernels/norm_geometry.h"

/* BatchNormGrad runs 4 channels side by side, one per lane of a vector of doubles:
 * each channel's sums stay one add chain over (n, s) in the plain loop's order, and
 * every lane does the plain loop's operations in its order, so the bits are those of
 * the one-channel-at-a-time loop; the chains' latency (one dependent double add per
 * element and sum) was the bound, 14% of MobileNetV2's step. Compiled for x86-64-v3
 * too (target_clones; -std=c11 keeps -ffp-contract=off, so no FMA is formed). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OT_BN_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define OT_BN_CLONES
#endif
#define BN_LANES 4

typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

typedef struct bn_grad_args {
    const void *dy, *x; /* float32, or bfloat16 / float16 (both of one dtype: bn_grad_block's t) */
    const float *sc, *rm, *rv;
    void *dx; /* dY's dtype */
    float *dsc, *db;
    int64_t N, C, S;
    double eps;
    bool train;
} bn_grad_args;

/* Lane k: element (off)[k] + s of the float run p as a double (a macro: a function
 * returning a 32-byte vector would change the ABI between the clones). */
#define bn_load(p, off, s) ((v4d){(p)[(off)[0] + (s)], (p)[(off)[1] + (s)], (p)[(off)[2] + (s)], (p)[(off)[3] + (s)]})

/* The planes' elements go by runs of BN_RUN along s (the sums keep their order: one
 * chain per channel over n, then s). A float32 run is read in place; a bfloat16 /
 * float16 run of the nc channels is widened into buf (BN_LANES runs of BN_RUN) by
 * cpu_lowp.c's vector converters, exact, in place of a scalar widening per element
 * and lane (bn_grad_block_bf16 was 7.2% of ResNet-18's bf16 step). */
#define BN_RUN 512

static inline __attribute__((always_inline)) const float *bn_run(ot_dtype t, const void *p, int64_t o, int64_t r,
                                                                 int64_t len, int nc, int64_t S, float *buf) {
    if (t == OT_F32) return (const float *)p + o + r;
    for (int k = 0; k < nc; k++) ot_cpu_lowp_to_f32_serial(t, (const uint16_t *)p + o + k * S + r, buf + k * BN_RUN, len);
    return buf;
}

/* Channels c0 .. c0 + nc - 1 (nc <= 4); lanes past nc repeat the last channel and are
 * not stored. Inlined into one instance per dtype t (below): the float32 one is the
 * plain float loop; the low ones do its math on the exact float values of X and dY
 * and round dX to nearest even. */
static inline __attribute__((always_inline)) void bn_grad_body(const bn_grad_args *a, int64_t c0, ot_dtype t) {
    const int64_t N = a->N, C = a->C, S = a->S;
    int nc = C - c0 < BN_LANES ? (int)(C - c0) : BN_LANES;
    int64_t ch[BN_LANES], off32[BN_LANES], offr[BN_LANES];
    for (int k = 0; k < BN_LANES; k++) {
        ch[k] = c0 + (k < nc ? k : nc - 1);
        off32[k] = (ch[k] - c0) * S;
        offr[k] = (ch[k] - c0) * BN_RUN;
    }
    /* the lanes' offsets into a run: the planes' own, or the staged runs' */
    const int64_t *off = t == OT_F32 ? off32 : offr;
    float xb[BN_LANES * BN_RUN], gb[BN_LANES * BN_RUN]; /* the low runs of X (then dX) and dY: 16 KiB */
    double Md = (double)(N * S);
    const v4d M = {Md, Md, Md, Md};
    v4d mean = {0.0, 0.0, 0.0, 0.0}, var = {0.0, 0.0, 0.0, 0.0};
#define BN_RUNS(body)                                                                                  \
    for (int64_t n = 0; n < N; n++) {                                                                  \
        int64_t o = (n * C + c0) * S;                                                                  \
        for (int64_t r = 0; r < S; r += BN_RUN) {                                                      \
            int64_t len = S - r < BN_RUN ? S - r : BN_RUN;                                             \
            body                                                                                       \
        }                                                                                              \
    }
    if (a->train) {
        BN_RUNS(const float *xr = bn_run(t, a->x, o, r, len, nc, S, xb);
                for (int64_t s = 0; s < len; s++) mean += bn_load(xr, off, s);)
        mean /= M;
        BN_RUNS(const float *xr = bn_run(t, a->x, o, r, len, nc, S, xb); for (int64_t s = 0; s < len; s++) {
            v4d d = bn_load(xr, off, s) - mean;
            var += d * d;
        })
        var /= M;
    } else {
        for (int k = 0; k < BN_LANES; k++) {
            mean[k] = a->rm[ch[k]];
            var[k] = a->rv[ch[k]];
        }
    }
    v4d inv, kc;
    for (int k = 0; k < BN_LANES; k++) {
        inv[k] = 1.0 / sqrt(var[k] + a->eps);
        kc[k] = a->sc[ch[k]] * inv[k];
    }
    v4d sdy = {0.0, 0.0, 0.0, 0.0}, sdyx = {0.0, 0.0, 0.0, 0.0};
    BN_RUNS(const float *xr = bn_run(t, a->x, o, r, len, nc, S, xb);
            const float *gr = bn_run(t, a->dy, o, r, len, nc, S, gb); for (int64_t s = 0; s < len; s++) {
                v4d g = bn_load(gr, off, s);
                sdy += g;
                sdyx += g * (bn_load(xr, off, s) - mean) * inv;
            })
    for (int k = 0; k < nc; k++) {
        if (a->db) a->db[c0 + k] = (float)sdy[k];
        if (a->dsc) a->dsc[c0 + k] = (float)sdyx[k];
    }
    if (!a->dx) return;
    const v4d t1 = sdy / M;
    /* a low dX run is written into xb (read before, lane by lane) and rounded from there */
    BN_RUNS(const float *xr = a->train ? bn_run(t, a->x, o, r, len, nc, S, xb) : NULL;
            const float *gr = bn_run(t, a->dy, o, r, len, nc, S, gb); for (int64_t s = 0; s < len; s++) {
                v4d rv;
                if (a->train) {
                    v4d xh = (bn_load(xr, off, s) - mean) * inv;
                    rv = kc * (bn_load(gr, off, s) - t1 - xh * sdyx / M);
                } else {
                    rv = kc * bn_load(gr, off, s);
                }
                v4f rf = __builtin_convertvector(rv, v4f); /* each lane's (float) */
                float *of = t == OT_F32 ? (float *)a->dx + o + r : xb;
                if (nc == BN_LANES) {
                    of[off[0] + s] = rf[0];
                    of[off[1] + s] = rf[1];
                    of[off[2] + s] = rf[2];
                    of[off[3] + s] = rf[3];
                } else {
                    for (int k = 0; k < nc; k++) of[off[k] + s] = rf[k];
                }
            } if (t != OT_F32) for (int k = 0; k < nc; k++)
                ot_cpu_lowp_from_f32_serial(t, xb + k * BN_RUN, (uint16_t *)a->dx + o + k * S + r, len);)
#undef BN_RUNS
}

OT_BN_CLONES static void bn_grad_block(const bn_grad_args *a, int64_t c0) { bn_grad_body(a, c0, OT_F32); }
OT_BN_CLONES static void bn_grad_block_bf16(const bn_grad_args *a, int64_t c0) { bn_grad_body(a, c0, OT_BF16); }
OT_BN_CLONES static void bn_grad_block_f16(const bn_grad_args *a, int64_t c0) { bn_grad_body(a, c0, OT_F16); }

/* (dY, X, scale [, mean, var]) -> (dX, dScale, dBias): dY, X and dX float32, or all
 * three bfloat16 / float16 (issue 27), scale, statistics, dScale and dBias float32. */
OT_GRAD_KERNEL(ot_cpu_batch_norm_grad) {
    const ot_tensor *x = &in[1];
    ot_dtype t = x->dtype;
    if (t != OT_F32 && t != OT_BF16 && t != OT_F16) return ot_cpu_bad_dtype(node, "input X", t, err);
    if (in[0].dtype != t) return ot_cpu_bad_dtype(node, "input dY", in[0].dtype, err);
    if (in[2].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input scale", in[2].dtype, err);
    if (out[0].data && out[0].dtype != t) return ot_cpu_bad_dtype(node, "output dX", out[0].dtype, err);
    for (int k = 1; k < node->n_outputs && k < 3; k++)
        if (out[k].data && out[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "output dScale / dBias", out[k].dtype, err);
    for (int k = 3; k < node->n_inputs && k < 5; k++)
        if (in[k].data && in[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "a running statistic", in[k].dtype, err);
    if (x->shape.rank < 2) return ot_fail(err, OT_E_SHAPE, "node '%s' (BatchNormGrad): X rank < 2", node->name);
    int64_t N = x->shape.dim[0], C = x->shape.dim[1], S = N * C > 0 ? ot_kernel_numel(x) / (N * C) : 0;
    if (ot_kernel_numel(&in[2]) != C)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (BatchNormGrad): scale must have C elements", node->name);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_norm_params *np = &pp->u.norm;
    bool train = np->training_mode || node->n_inputs < 5 || !in[3].data || !in[4].data;
    bn_grad_args a = {.dy = in[0].data,
                      .x = x->data,
                      .sc = in[2].data,
                      .rm = train ? NULL : in[3].data,
                      .rv = train ? NULL : in[4].data,
                      .dx = out[0].data,
                      .dsc = node->n_outputs > 1 ? out[1].data : NULL,
                      .db = node->n_outputs > 2 ? out[2].data : NULL,
                      .N = N,
                      .C = C,
                      .S = S,
                      .eps = np->epsilon,
                      .train = train};
    int nt = ot_cpu_threads(ctx);
    int64_t blocks = (C + BN_LANES - 1) / BN_LANES;
    void (*block)(const bn_grad_args *, int64_t) =
        t == OT_F32 ? bn_grad_block : t == OT_BF16 ? bn_grad_block_bf16 : bn_grad_block_f16;
#pragma omp parallel for schedule(static) num_threads(nt) if (N * C * S >= OT_CPU_PAR_MIN && blocks > 1)
    for (int64_t b = 0; b < blocks; b++) block(&a, b * BN_LANES);
    return OT_OK;
}

/* rows x cols view of X for a LayerNorm over axes [axis, rank). */
static bool ln_view(const ot_node *node, const ot_tensor *x, int64_t *rows, int64_t *cols) {
    return ot_layer_norm_view(node, &x->shape, rows, cols);
}

size_t ot_cpu_layer_norm_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    int64_t rows, cols;
    if (!ln_view(node, &in[1], &rows, &cols)) return 0;
    return (size_t)rows * 2 * sizeof(double);
}

/* LayerNormGrad takes LN_ROWS rows side by side: each row's sums are one chain of
 * dependent double adds, so one row at a time waits on the adder's latency; four
 * independent chains fill it. dScale and dBias take LN_COLS columns side by side, so
 * the walk down the rows reads whole cache lines. Every sum keeps its order: the same
 * bits as one row (one column) at a time. */
#define LN_ROWS 4
#define LN_COLS 16

/* Rows r0 .. r0 + n - 1 (x, dy and dx point at row r0): mean and 1/std into st,
 * dX when dx is not NULL. */
static inline __attribute__((always_inline)) void ln_grad_rows_n(const float *x, const float *dy, const float *sc,
                                                                 float *dx, double *st, int64_t cols, int n,
                                                                 double eps) {
    double mean[LN_ROWS], var[LN_ROWS], inv[LN_ROWS], mg[LN_ROWS], mgx[LN_ROWS];
    for (int k = 0; k < n; k++) mean[k] = 0.0, var[k] = 0.0, mg[k] = 0.0, mgx[k] = 0.0;
    for (int64_t j = 0; j < cols; j++)
        for (int k = 0; k < n; k++) mean[k] += x[k * cols + j];
    for (int k = 0; k < n; k++) mean[k] /= (double)cols;
    for (int64_t j = 0; j < cols; j++)
        for (int k = 0; k < n; k++) var[k] += (x[k * cols + j] - mean[k]) * (x[k * cols + j] - mean[k]);
    for (int k = 0; k < n; k++) {
        var[k] /= (double)cols;
        inv[k] = 1.0 / sqrt(var[k] + eps);
        st[2 * k] = mean[k];
        st[2 * k + 1] = inv[k];
    }
    if (!dx) return;
    /* means of g = dy*scale and of g*xhat */
    for (int64_t j = 0; j < cols; j++)
        for (int k = 0; k < n; k++) {
            double g = (double)dy[k * cols + j] * sc[j];
            mg[k] += g;
            mgx[k] += g * (x[k * cols + j] - mean[k]) * inv[k];
        }
    for (int k = 0; k < n; k++) mg[k] /= (double)cols, mgx[k] /= (double)cols;
    for (int k = 0; k < n; k++)
        for (int64_t j = 0; j < cols; j++) {
            double xh = (x[k * cols + j] - mean[k]) * inv[k];
            dx[k * cols + j] = (float)(inv[k] * ((double)dy[k * cols + j] * sc[j] - mg[k] - xh * mgx[k]));
        }
}

/* ln_grad_rows_n with n known to be LN_ROWS where it is: the lane loops unroll into
 * LN_ROWS straight chains (the same operations in the same order per row). */
static void ln_grad_rows(const float *x, const float *dy, const float *sc, float *dx, double *st, int64_t cols,
                         int n, double eps) {
    if (n == LN_ROWS) ln_grad_rows_n(x, dy, sc, dx, st, cols, LN_ROWS, eps);
    else ln_grad_rows_n(x, dy, sc, dx, st, cols, n, eps);
}

/* dScale and dBias of columns j0 .. j0 + n - 1, down the rows; called with n =
 * LN_COLS where it is, so the lane loops unroll (same operations, same order). */
static inline __attribute__((always_inline)) void ln_grad_cols_n(const float *dy, const float *xs,
                                                                 const double *stat, float *dsc, float *db,
                                                                 int64_t rows, int64_t cols, int64_t j0, int n) {
    double a[LN_COLS], b[LN_COLS];
    for (int k = 0; k < n; k++) a[k] = 0.0, b[k] = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        const float *dr = dy + r * cols + j0, *xr = xs + r * cols + j0;
        double mean = stat[2 * r], inv = stat[2 * r + 1];
        for (int k = 0; k < n; k++) {
            double g = dr[k];
            a[k] += g * (xr[k] - mean) * inv;
            b[k] += g;
        }
    }
    for (int k = 0; k < n; k++) {
        if (dsc) dsc[j0 + k] = (float)a[k];
        if (db) db[j0 + k] = (float)b[k];
    }
}

OT_GRAD_KERNEL(ot_cpu_layer_norm_grad) {
    const ot_tensor *x = &in[1];
    if (in[0].dtype != OT_F32 || x->dtype != OT_F32 || in[2].dtype != OT_F32)
        return ot_cpu_bad_dtype(node, "input", x->dtype, err);
    int64_t rows, cols;
    if (!ln_view(node, x, &rows, &cols))
        return ot_fail(err, OT_E_MODEL, "node '%s' (LayerNormGrad): axis out of range", node->name);
    if (ot_kernel_numel(&in[2]) != cols)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (LayerNormGrad): scale must cover the normalised axes",
                       node->name);
    double *stat = ctx->workspace; /* mean, 1/std per row */
    if (!stat || ctx->workspace_bytes < (size_t)rows * 2 * sizeof(double))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (LayerNormGrad): workspace missing", node->name);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_norm_params *np = &pp->u.norm;
    double eps = np->epsilon;
    const float *dy = in[0].data, *xs = x->data, *sc = in[2].data;
    float *dx = out[0].data;
    float *dsc = node->n_outputs > 1 ? out[1].data : NULL, *db = node->n_outputs > 2 ? out[2].data : NULL;
    int nt = ot_cpu_threads(ctx);
    bool par = rows * cols >= OT_CPU_PAR_MIN;
    int64_t groups = (rows + LN_ROWS - 1) / LN_ROWS, blocks = (cols + LN_COLS - 1) / LN_COLS;
    bool sums = dsc || db;
    /* One team for both loops: the barrier after the rows (dScale and dBias read every
     * row's statistics) is cheaper than joining the team and waking it again. */
#pragma omp parallel num_threads(nt) if (par)
    {
#pragma omp for schedule(static)
        for (int64_t t = 0; t < groups; t++) {
            int64_t r0 = t * LN_ROWS;
            int n = (int)(rows - r0 < LN_ROWS ? rows - r0 : LN_ROWS);
            ln_grad_rows(xs + r0 * cols, dy + r0 * cols, sc, dx ? dx + r0 * cols : NULL, stat + 2 * r0, cols, n, eps);
        }
        if (sums) {
#pragma omp for schedule(static)
            for (int64_t t = 0; t < blocks; t++) {
                int64_t j0 = t * LN_COLS;
                int n = (int)(cols - j0 < LN_COLS ? cols - j0 : LN_COLS);
                if (n == LN_COLS) ln_grad_cols_n(dy, xs, stat, dsc, db, rows, cols, j0, LN_COLS);
                else ln_grad_cols_n(dy, xs, stat, dsc, db, rows, cols, j0, n);
            }
        }
    }
    return OT_OK;
}
