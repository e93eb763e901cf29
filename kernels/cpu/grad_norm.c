/* grad_norm.c — CPU kernels of BatchNormGrad and LayerNormGrad (dY, X, scale ...) ->
 * (dX, dScale, dBias), each output optional. Statistics are recomputed from X in
 * double, the same way the forward kernels compute them. */
#include <math.h>

#include "kernels/cpu/grad_kernels.h"
#include "kernels/norm_geometry.h"

OT_GRAD_KERNEL(ot_cpu_batch_norm_grad) {
    const ot_tensor *x = &in[1];
    if (in[0].dtype != OT_F32 || x->dtype != OT_F32 || in[2].dtype != OT_F32)
        return ot_cpu_bad_dtype(node, "input", x->dtype, err);
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
    double eps = np->epsilon;
    const float *dy = in[0].data, *xs = x->data, *sc = in[2].data;
    const float *rm = train ? NULL : in[3].data, *rv = train ? NULL : in[4].data;
    float *dx = out[0].data;
    float *dsc = node->n_outputs > 1 ? out[1].data : NULL, *db = node->n_outputs > 2 ? out[2].data : NULL;
    double M = (double)(N * S);
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (N * C * S >= OT_CPU_PAR_MIN)
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
        if (db) db[c] = (float)sdy;
        if (dsc) dsc[c] = (float)sdyx;
        if (!dx) continue;
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
static void ln_grad_rows(const float *x, const float *dy, const float *sc, float *dx, double *st, int64_t cols,
                         int n, double eps) {
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
    int64_t groups = (rows + LN_ROWS - 1) / LN_ROWS;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t t = 0; t < groups; t++) {
        int64_t r0 = t * LN_ROWS;
        int n = (int)(rows - r0 < LN_ROWS ? rows - r0 : LN_ROWS);
        ln_grad_rows(xs + r0 * cols, dy + r0 * cols, sc, dx ? dx + r0 * cols : NULL, stat + 2 * r0, cols, n, eps);
    }
    if (dsc || db) {
        int64_t blocks = (cols + LN_COLS - 1) / LN_COLS;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t t = 0; t < blocks; t++) {
            int64_t j0 = t * LN_COLS;
            int n = (int)(cols - j0 < LN_COLS ? cols - j0 : LN_COLS);
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
    }
    return OT_OK;
}
