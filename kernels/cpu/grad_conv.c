/* grad_conv.c — CPU kernels of ConvGradInput (dY, W, X) -> dX and ConvGradWeight
 * (dY, X, W) -> dW for 1-D to 3-D grouped, strided, dilated, padded convolutions:
 * one sgemm per (sample, group) through an im2col / col2im buffer in ctx->workspace.
 * dW accumulates over the samples in order, so results do not depend on threads
 * beyond OpenBLAS's own GEMM split. */
#include <cblas.h>

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
    ot_cpu_window win;
    ot_status st = ot_cpu_window_init(&win, node, x, y, &w->dim[2], err);
    if (st) return st;
    ot_window3_lift(&p->sp, &win);
    p->K = p->sp.k[0] * p->sp.k[1] * p->sp.k[2];
    p->L = p->sp.out_sz;
    p->S = p->sp.in_sz;
    p->N = x->dim[0];
    p->Cin = x->dim[1];
    p->Cout = w->dim[0];
    p->G = ot_node_attr_int(node, "group", 1);
    if (p->G < 1 || p->Cin % p->G || p->Cout % p->G || w->dim[1] != p->Cin / p->G || y->dim[1] != p->Cout ||
        y->dim[0] != p->N)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): channels of X, W, dY and group do not agree", node->name,
                       node->op_type);
    p->Cig = p->Cin / p->G;
    p->Cog = p->Cout / p->G;
    return OT_OK;
}

/* col[(ci*K + kk) * L + l] = x[ci] at the window position (0 in the padding). */
static void im2col(const conv3 *p, const float *x, float *col, int nt) {
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
static void col2im(const conv3 *p, const float *col, float *dx, int nt) {
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

size_t ot_cpu_conv_grad_workspace(const ot_node *node, const ot_tensor *in) {
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
    memset(dx, 0, (size_t)ot_cpu_numel(&out[0]) * sizeof(float));
    int64_t Kg = p.Cig * p.K;
    for (int64_t n = 0; n < p.N; n++)
        for (int64_t g = 0; g < p.G; g++) {
            /* col = W_g^T (Kg x Cog) . dY_g (Cog x L) */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Kg, (int)p.L, (int)p.Cog, 1.0f,
                        ws + g * p.Cog * Kg, (int)Kg, dys + (n * p.Cout + g * p.Cog) * p.L, (int)p.L, 0.0f, col,
                        (int)p.L);
            col2im(&p, col, dx + (n * p.Cin + g * p.Cig) * p.S, nt);
        }
    return OT_OK;
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
    if (p.N == 0) memset(dw, 0, (size_t)ot_cpu_numel(&out[0]) * sizeof(float));
    for (int64_t n = 0; n < p.N; n++)
        for (int64_t g = 0; g < p.G; g++) {
            im2col(&p, xs + (n * p.Cin + g * p.Cig) * p.S, col, nt);
            /* dW_g (Cog x Kg) += dY_g (Cog x L) . col^T (L x Kg) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p.Cog, (int)Kg, (int)p.L, 1.0f,
                        dys + (n * p.Cout + g * p.Cog) * p.L, (int)p.L, col, (int)p.L, n == 0 ? 0.0f : 1.0f,
                        dw + g * p.Cog * Kg, (int)Kg);
        }
    return OT_OK;
}
