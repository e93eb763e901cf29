/* matmul_geometry.c — Gemm and MatMul shape resolution (see matmul_geometry.h). */
#include "kernels/matmul_geometry.h"

#include <string.h>

#include "kernels/kernel_common.h"

static ot_status mm_shape(const ot_node *node, const char *what, ot_error *err) {
    return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): %s", node->name, node->op_type, what);
}

ot_status ot_gemm_geometry_init(ot_matmul_geometry *g, const ot_node *node, const ot_tensor *a, const ot_tensor *b,
                                const ot_tensor *y, ot_error *err) {
    const ot_shape *as = &a->shape, *bs = &b->shape, *ys = &y->shape;
    memset(g, 0, sizeof *g);
    g->batch = 1;
    if (as->rank != 2 || bs->rank != 2 || ys->rank != 2) return mm_shape(node, "A, B and Y must be 2-D", err);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    g->ta = pp->u.gemm.trans_a;
    g->tb = pp->u.gemm.trans_b;
    g->alpha = pp->u.gemm.alpha;
    g->beta = pp->u.gemm.beta;
    g->M = g->ta ? as->dim[1] : as->dim[0];
    g->K = g->ta ? as->dim[0] : as->dim[1];
    int64_t Kb = g->tb ? bs->dim[1] : bs->dim[0];
    g->N = g->tb ? bs->dim[0] : bs->dim[1];
    if (g->K != Kb || ys->dim[0] != g->M || ys->dim[1] != g->N)
        return mm_shape(node, "A, B and Y dimensions disagree", err);
    return OT_OK;
}

ot_status ot_matmul_geometry_init(ot_matmul_geometry *g, const ot_node *node, const ot_tensor *a, const ot_tensor *b,
                                  const ot_tensor *y, ot_error *err) {
    const ot_shape *as = &a->shape, *bs = &b->shape;
    memset(g, 0, sizeof *g);
    g->alpha = 1.0f;
    g->batch = 1;
    if (as->rank < 1 || bs->rank < 1) return mm_shape(node, "operands must have rank >= 1", err);
    int64_t M = as->rank == 1 ? 1 : as->dim[as->rank - 2], K = as->dim[as->rank - 1];
    int64_t Kb = bs->rank == 1 ? bs->dim[0] : bs->dim[bs->rank - 2], N = bs->rank == 1 ? 1 : bs->dim[bs->rank - 1];
    if (K != Kb) return mm_shape(node, "inner dimensions differ", err);
    g->M = M, g->N = N, g->K = K;
    /* batch shapes: everything before the matrix dims */
    int ra = as->rank > 2 ? as->rank - 2 : 0, rb = bs->rank > 2 ? bs->rank - 2 : 0;
    int r = g->r = ra > rb ? ra : rb;
    int64_t acc_a = M * K, acc_b = K * N;
    for (int d = r - 1; d >= 0; d--) {
        int da = d - (r - ra), db = d - (r - rb);
        int64_t na = da >= 0 ? as->dim[da] : 1, nb = db >= 0 ? bs->dim[db] : 1;
        if (na != nb && na != 1 && nb != 1) return mm_shape(node, "batch dimensions do not broadcast", err);
        g->bdim[d] = na > nb ? na : nb;
        if (na == 0 || nb == 0) g->bdim[d] = 0;
        g->sa[d] = na == 1 ? 0 : acc_a;
        g->sb[d] = nb == 1 ? 0 : acc_b;
        acc_a *= na;
        acc_b *= nb;
        g->batch *= g->bdim[d];
    }
    if (ot_kernel_numel(y) != g->batch * M * N) return mm_shape(node, "output size differs from batch x M x N", err);
    return OT_OK;
}
