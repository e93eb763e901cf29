/* grad_matmul.c — gradient rules of Gemm (alpha, beta, transA, transB) and MatMul
 * (batched, broadcast batch dims reduced with ReduceToLike, 1-D operands promoted
 * with Unsqueeze the way numpy.matmul does). */
#include "autodiff/grad_rules.h"

static int gemm(ot_grad_ctx *c, int a, int b, int ta, int tb, float alpha, int like) {
    int in[2] = {a, b}, node = -1;
    ot_shape s = ot_gb_shape(c, like);
    int out = ot_gb_op_s(c, OT_OP_GEMM, in, 2, ot_gb_dtype(c, like), &s, &node);
    ot_gb_set_int(c, node, "transA", ta);
    ot_gb_set_int(c, node, "transB", tb);
    ot_gb_set_float(c, node, "alpha", alpha);
    return out;
}

static ot_status grad_gemm(ot_grad_ctx *c, const ot_node *n, int dy) {
    int a = n->inputs[0], b = n->inputs[1], cc = n->n_inputs > 2 ? n->inputs[2] : -1;
    int ta = (int)ot_node_attr_int(n, "transA", 0), tb = (int)ot_node_attr_int(n, "transB", 0);
    float alpha = ot_node_attr_float(n, "alpha", 1.0f), beta = ot_node_attr_float(n, "beta", 1.0f);
    /* Y = alpha A' B' + beta C with A' = op(A), B' = op(B):
     * dA' = alpha dY B'^T, dB' = alpha A'^T dY, each transposed back when op transposes. */
    if (ot_gb_needs(c, a)) {
        int d = !ta ? gemm(c, dy, b, 0, !tb, alpha, a) : gemm(c, b, dy, tb, 1, alpha, a);
        ot_gb_add(c, a, d);
    }
    if (ot_gb_needs(c, b)) {
        int d = !tb ? gemm(c, a, dy, !ta, 0, alpha, b) : gemm(c, dy, a, 1, ta, alpha, b);
        ot_gb_add(c, b, d);
    }
    if (ot_gb_needs(c, cc)) {
        int d = dy;
        if (beta != 1.0f) {
            int in[2] = {dy, ot_gb_const_f32(c, beta)};
            d = ot_gb_op(c, OT_OP_MUL, in, 2, n->outputs[0]);
        }
        ot_shape ys = ot_gb_shape(c, n->outputs[0]);
        ot_gb_add_like(c, cc, d, &ys);
    }
    return OT_OK;
}

static int unsqueeze(ot_grad_ctx *c, int x, int64_t axis) {
    ot_shape s = ot_gb_shape(c, x);
    if (s.rank < 0 || s.rank >= OT_MAX_RANK) return -1;
    for (int i = s.rank; i > axis; i--) {
        s.dim[i] = s.dim[i - 1];
        s.sym[i] = s.sym[i - 1];
    }
    s.dim[axis] = 1;
    s.sym[axis] = -1;
    s.rank++;
    int node = -1;
    int out = ot_gb_op_s(c, OT_OP_UNSQUEEZE, &x, 1, ot_gb_dtype(c, x), &s, &node);
    ot_gb_set_ints(c, node, "axes", &axis, 1);
    return out;
}

static int swap_last2(ot_grad_ctx *c, int x) {
    ot_shape s = ot_gb_shape(c, x);
    int64_t perm[OT_MAX_RANK];
    for (int i = 0; i < s.rank; i++) perm[i] = i;
    perm[s.rank - 2] = s.rank - 1;
    perm[s.rank - 1] = s.rank - 2;
    int64_t td = s.dim[s.rank - 1];
    int32_t ts = s.sym[s.rank - 1];
    s.dim[s.rank - 1] = s.dim[s.rank - 2];
    s.sym[s.rank - 1] = s.sym[s.rank - 2];
    s.dim[s.rank - 2] = td;
    s.sym[s.rank - 2] = ts;
    int node = -1;
    int out = ot_gb_op_s(c, OT_OP_TRANSPOSE, &x, 1, ot_gb_dtype(c, x), &s, &node);
    ot_gb_set_ints(c, node, "perm", perm, s.rank);
    return out;
}

/* W when v = Transpose(W) swaps the two dims of a 2-D W; else -1. */
static int transposed_from(const ot_grad_ctx *c, int v) {
    int p = c->g->values[v].producer;
    if (p < 0) return -1;
    const ot_node *t = &c->g->nodes[p];
    if (t->op != OT_OP_TRANSPOSE || t->n_inputs < 1 || t->inputs[0] < 0) return -1;
    int w = t->inputs[0], n = 0;
    if (c->g->values[w].shape.rank != 2) return -1;
    const int64_t *perm = ot_node_attr_ints(t, "perm", &n);
    if (perm && !(n == 2 && perm[0] == 1 && perm[1] == 0)) return -1;
    return w;
}

static bool all_known(const ot_shape *s) {
    for (int i = 0; i < s->rank; i++)
        if (s->dim[i] < 0) return false;
    return s->rank >= 0;
}

/* x [d0, ..., dr-1] (rank >= 2, every dim known) reshaped to [d0 * ... * dr-2, dr-1]. */
static int flatten_rows(ot_grad_ctx *c, int x) {
    ot_shape s = ot_gb_shape(c, x);
    int64_t rows = 1;
    for (int i = 0; i < s.rank - 1; i++) rows *= s.dim[i];
    int64_t dims[2] = {rows, s.dim[s.rank - 1]};
    ot_shape f = ot_shape_unknown();
    f.rank = 2;
    for (int i = 0; i < 2; i++) {
        f.dim[i] = dims[i];
        f.sym[i] = -1;
    }
    int in[2] = {x, ot_gb_const_i64(c, dims, 2)};
    return ot_gb_op_s(c, OT_OP_RESHAPE, in, 2, ot_gb_dtype(c, x), &f, NULL);
}

/* MatMul output shape of a [..., M, K] x b [..., K, N] with broadcast batch dims. */
static ot_shape matmul_shape(const ot_shape *a, const ot_shape *b) {
    ot_shape s = ot_shape_unknown();
    int r = a->rank > b->rank ? a->rank : b->rank;
    s.rank = r;
    for (int i = 0; i < r - 2; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        bool ha = ia >= 0, hb = ib >= 0;
        int64_t da = ha ? a->dim[ia] : 1, db = hb ? b->dim[ib] : 1;
        int32_t sa = ha ? a->sym[ia] : -1, sb = hb ? b->sym[ib] : -1;
        if (da == 1 && sa < 0) {
            s.dim[i] = db;
            s.sym[i] = sb;
        } else {
            s.dim[i] = da;
            s.sym[i] = sa;
        }
    }
    s.dim[r - 2] = a->dim[a->rank - 2];
    s.sym[r - 2] = a->sym[a->rank - 2];
    s.dim[r - 1] = b->dim[b->rank - 1];
    s.sym[r - 1] = b->sym[b->rank - 1];
    return s;
}

static ot_status grad_matmul(ot_grad_ctx *c, const ot_node *n, int dy) {
    int a = n->inputs[0], b = n->inputs[1];
    ot_shape as = ot_gb_shape(c, a), bs = ot_gb_shape(c, b), ys = ot_gb_shape(c, dy);
    if (as.rank < 1 || bs.rank < 1 || ys.rank < 0)
        return ot_fail(c->err, OT_E_SHAPE, "autodiff: MatMul '%s' needs known input ranks; run shape inference first",
                       n->name);
    /* Promote 1-D operands as numpy.matmul does; dY gets the squeezed axes back. */
    int a2 = a, b2 = b, dy2 = dy;
    if (as.rank == 1) {
        a2 = unsqueeze(c, a, 0);
        dy2 = unsqueeze(c, dy2, ys.rank - (bs.rank == 1 ? 0 : 1));
    }
    if (bs.rank == 1) {
        b2 = unsqueeze(c, b, 1);
        dy2 = unsqueeze(c, dy2, ot_gb_shape(c, dy2).rank);
    }
    if (c->oom) return OT_OK;
    ot_shape a2s = ot_gb_shape(c, a2), b2s = ot_gb_shape(c, b2);
    if (ot_gb_needs(c, a)) {
        /* B = Transpose(W) (how PyTorch exports nn.Linear) needs no transpose back:
         * B^T is W itself. */
        int w = bs.rank == 2 ? transposed_from(c, b) : -1;
        int bt = w >= 0 ? w : swap_last2(c, b2);
        ot_shape bts = ot_gb_shape(c, bt), dys = ot_gb_shape(c, dy2);
        ot_shape s = matmul_shape(&dys, &bts);
        int in[2] = {dy2, bt};
        int d = ot_gb_op_s(c, OT_OP_MATMUL, in, 2, ot_gb_dtype(c, a), &s, NULL);
        /* [..., 1, K] against [K]: ReduceToLike's right-aligned broadcast sums the rest. */
        ot_gb_add_like(c, a, d, &s);
        (void)a2s;
    }
    if (ot_gb_needs(c, b) && bs.rank == 2 && as.rank >= 2 && (as.rank == 2 || (all_known(&as) && all_known(&ys)))) {
        /* B = Transpose(W) read by this node alone (nn.Linear as PyTorch exports it):
         * W's gradient in W's own layout, dW = dY^T A, as PyTorch computes it, instead
         * of dB = A^T dY and a Transpose: no weight-sized temporary next to the
         * gradient (the GEMM's operands swap roles, so it rounds as PyTorch does, not
         * as the transposed product did). */
        int w = transposed_from(c, b);
        if (w >= 0 && ot_gb_needs(c, w) && c->g->values[b].n_consumers == 1) {
            int dy_rows = as.rank == 2 ? dy2 : flatten_rows(c, dy), a_rows = as.rank == 2 ? a2 : flatten_rows(c, a);
            ot_gb_add(c, w, gemm(c, dy_rows, a_rows, 1, 0, 1.0f, w));
            return OT_OK;
        }
    }
    if (ot_gb_needs(c, b) && bs.rank == 2 && as.rank >= 3) {
        /* A [..., M, K] against a shared 2-D B [K, N] (every Linear layer applied to a
         * sequence): dB = A_flat^T dY_flat, one GEMM over all P*M rows. The batched
         * form below would transpose A, run P small GEMMs into a [P, K, N] buffer
         * (P weight-sized copies) and sum them with ReduceToLike. */
        if (all_known(&as) && all_known(&ys)) {
            ot_gb_add(c, b, gemm(c, flatten_rows(c, a), flatten_rows(c, dy), 1, 0, 1.0f, b));
            return OT_OK;
        }
    }
    if (ot_gb_needs(c, b)) {
        int at = swap_last2(c, a2);
        ot_shape ats = ot_gb_shape(c, at), dys = ot_gb_shape(c, dy2);
        ot_shape s = matmul_shape(&ats, &dys);
        int in[2] = {at, dy2};
        int d = ot_gb_op_s(c, OT_OP_MATMUL, in, 2, ot_gb_dtype(c, b), &s, NULL);
        if (bs.rank == 1) { /* [..., K, 1] -> [..., K] before reducing to [K] */
            int64_t ax = s.rank - 1;
            s.rank--;
            int node = -1;
            d = ot_gb_op_s(c, OT_OP_SQUEEZE, &d, 1, ot_gb_dtype(c, b), &s, &node);
            ot_gb_set_ints(c, node, "axes", &ax, 1);
        }
        ot_gb_add_like(c, b, d, &s);
        (void)b2s;
    }
    return OT_OK;
}

ot_status ot_grad_matmul(ot_grad_ctx *c, const ot_node *n, const int *dy) {
    if (n->op == OT_OP_GEMM) return grad_gemm(c, n, dy[0]);
    if (n->op == OT_OP_MATMUL) return grad_matmul(c, n, dy[0]);
    return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s': no gradient rule for %s", n->name, n->op_type);
}
