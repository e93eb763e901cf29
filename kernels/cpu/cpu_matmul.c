/* cpu_matmul.c — Gemm and MatMul on the CPU through OpenBLAS cblas_sgemm.
 *
 * The Debian OpenBLAS here is the pthread build, which threads each call itself, so
 * sgemm is never called from inside an OpenMP region (nested pools oversubscribe
 * and serialise on OpenBLAS's lock); batches run one call after another. */
#include <cblas.h>

#include "kernels/cpu/cpu_common.h"

static ot_status mm_shape(const ot_node *node, const char *what, ot_error *err) {
    return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): %s", node->name, node->op_type, what);
}

ot_status ot_cpu_gemm(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                      ot_error *err) {
    (void)ctx;
    for (int k = 0; k < node->n_inputs && k < 3; k++)
        if (in[k].data && in[k].dtype != OT_F32) return ot_cpu_bad_dtype(node, "an input", in[k].dtype, err);
    if (out[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    const ot_shape *as = &in[0].shape, *bs = &in[1].shape;
    if (as->rank != 2 || bs->rank != 2 || out[0].shape.rank != 2) return mm_shape(node, "A, B and Y must be 2-D", err);
    bool ta = ot_node_attr_int(node, "transA", 0) != 0, tb = ot_node_attr_int(node, "transB", 0) != 0;
    float alpha = ot_node_attr_float(node, "alpha", 1.0f), beta = ot_node_attr_float(node, "beta", 1.0f);
    int64_t M = ta ? as->dim[1] : as->dim[0], K = ta ? as->dim[0] : as->dim[1];
    int64_t Kb = tb ? bs->dim[1] : bs->dim[0], N = tb ? bs->dim[0] : bs->dim[1];
    if (K != Kb || out[0].shape.dim[0] != M || out[0].shape.dim[1] != N)
        return mm_shape(node, "A, B and Y dimensions disagree", err);
    float *y = out[0].data;
    bool has_c = node->n_inputs > 2 && in[2].data;
    if (has_c && beta != 0.0f) {
        ot_cpu_bcast bc;
        const ot_shape *cs = &in[2].shape;
        if (!ot_cpu_bcast_init(&bc, &out[0].shape, &cs, 1)) return mm_shape(node, "C does not broadcast to (M, N)", err);
        const float *c = in[2].data;
        int64_t sc = bc.stride[0][bc.rank - 1];
        for (int64_t r = 0; r < bc.rows; r++) {
            int64_t off;
            ot_cpu_bcast_row(&bc, r, &off);
            for (int64_t i = 0; i < bc.inner; i++) y[r * bc.inner + i] = beta * c[off + i * sc];
        }
    }
    if (M == 0 || N == 0) return OT_OK;
    if (K == 0) {
        if (!(has_c && beta != 0.0f)) memset(y, 0, (size_t)(M * N) * sizeof(float));
        return OT_OK;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                alpha, in[0].data, (int)as->dim[1], in[1].data, (int)bs->dim[1], (has_c && beta != 0.0f) ? 1.0f : 0.0f,
                y, (int)N);
    return OT_OK;
}

/* MatMul with numpy semantics: 1-D operands are promoted (and the added dim removed
 * from the result), leading batch dims broadcast. */
ot_status ot_cpu_matmul(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                        ot_error *err) {
    (void)ctx;
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input 0", in[0].dtype, err);
    if (in[1].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input 1", in[1].dtype, err);
    const ot_shape *as = &in[0].shape, *bs = &in[1].shape;
    if (as->rank < 1 || bs->rank < 1) return mm_shape(node, "operands must have rank >= 1", err);
    int64_t M = as->rank == 1 ? 1 : as->dim[as->rank - 2], K = as->dim[as->rank - 1];
    int64_t Kb = bs->rank == 1 ? bs->dim[0] : bs->dim[bs->rank - 2], N = bs->rank == 1 ? 1 : bs->dim[bs->rank - 1];
    if (K != Kb) return mm_shape(node, "inner dimensions differ", err);
    /* batch shapes: everything before the matrix dims */
    int ra = as->rank > 2 ? as->rank - 2 : 0, rb = bs->rank > 2 ? bs->rank - 2 : 0;
    int r = ra > rb ? ra : rb;
    int64_t bdim[OT_MAX_RANK], sa[OT_MAX_RANK], sb[OT_MAX_RANK], batch = 1;
    int64_t acc_a = M * K, acc_b = K * N;
    for (int d = r - 1; d >= 0; d--) {
        int da = d - (r - ra), db = d - (r - rb);
        int64_t na = da >= 0 ? as->dim[da] : 1, nb = db >= 0 ? bs->dim[db] : 1;
        if (na != nb && na != 1 && nb != 1) return mm_shape(node, "batch dimensions do not broadcast", err);
        bdim[d] = na > nb ? na : nb;
        if (na == 0 || nb == 0) bdim[d] = 0;
        sa[d] = na == 1 ? 0 : acc_a;
        sb[d] = nb == 1 ? 0 : acc_b;
        acc_a *= na;
        acc_b *= nb;
        batch *= bdim[d];
    }
    if (ot_cpu_numel(&out[0]) != batch * M * N) return mm_shape(node, "output size differs from batch x M x N", err);
    const float *a = in[0].data, *b = in[1].data;
    float *y = out[0].data;
    if (batch * M * N == 0) return OT_OK;
    if (K == 0) {
        memset(y, 0, (size_t)(batch * M * N) * sizeof(float));
        return OT_OK;
    }
    /* B shared by every batch and A's batches contiguous: one tall GEMM. */
    bool b_shared = true, a_dense = true;
    for (int d = 0; d < r; d++) {
        if (sb[d] != 0) b_shared = false;
        if (sa[d] == 0 && bdim[d] != 1) a_dense = false;
    }
    if (b_shared && a_dense) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(batch * M), (int)N, (int)K, 1.0f, a, (int)K, b,
                    (int)N, 0.0f, y, (int)N);
        return OT_OK;
    }
    for (int64_t i = 0; i < batch; i++) {
        int64_t oa = 0, ob = 0, q = i;
        for (int d = r - 1; d >= 0; d--) {
            int64_t j = q % bdim[d];
            q /= bdim[d];
            oa += j * sa[d];
            ob += j * sb[d];
        }
        if (M == 1 && N == 1) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += (double)a[oa + k] * b[ob + k * N];
            y[i] = (float)s;
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, a + oa, (int)K, b + ob,
                        (int)N, 0.0f, y + i * M * N, (int)N);
        }
    }
    return OT_OK;
}
