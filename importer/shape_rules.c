/* shape_rules.c — the table of shape rules (one entry per op of ops.def, the only
 * dispatch of shape inference) and the rules of the compute ops: elementwise and
 * broadcasting ops, Gemm/MatMul, Conv and pools, normalisations, losses, and the
 * internal backward ops (which are shaped like one of their inputs). Layout and
 * shape-computing ops are in shape_rules_tensor.c. Rules follow the ONNX spec; a
 * contradiction is OT_E_SHAPE naming the node and both shapes. */
#include "shape_internal.h"

#include <stdint.h>
#include <string.h>

#define SHP(s, buf) ot_shape_str(c->g, (s), (buf), sizeof(buf))

bool ot_shape_dim_product(const ot_shape *s, int from, int to, int64_t *dim, int32_t *sym) {
    int64_t known = 1;
    int n_sym = 0, n_unknown = 0;
    int32_t the_sym = -1;
    bool overflow = false, zero = false;
    for (int i = from; i < to; i++) {
        if (s->dim[i] >= 0) {
            zero |= s->dim[i] == 0;
            overflow |= !ot_i64_mul(known, s->dim[i], &known);
        } else if (s->sym[i] >= 0) {
            n_sym++;
            the_sym = s->sym[i];
        } else
            n_unknown++;
    }
    *dim = -1;
    *sym = -1;
    if (zero) { /* [2^62, 4, 0] holds no element: not an overflow */
        *dim = 0;
        return true;
    }
    if (overflow) return false;
    if (n_sym == 0 && n_unknown == 0)
        *dim = known;
    else if (known == 0)
        *dim = 0;
    else if (n_unknown == 0 && n_sym == 1 && known == 1)
        *sym = the_sym;
    return true;
}

/* Broadcast of one dim pair (numpy rules); false on a contradiction. */
static bool bdim(int64_t a, int32_t sa, int64_t b, int32_t sb, int64_t *d, int32_t *s) {
    if (a >= 0 && b >= 0) {
        if (a == b) {
            *d = a;
            *s = sa >= 0 ? sa : sb;
        } else if (a == 1) {
            *d = b;
            *s = sb;
        } else if (b == 1) {
            *d = a;
            *s = sa;
        } else {
            return false;
        }
    } else if (a >= 0) { /* b unknown: it is either a or 1 unless a is 1 */
        *d = a == 1 ? b : a;
        *s = a == 1 ? sb : sa;
    } else if (b >= 0) {
        *d = b == 1 ? a : b;
        *s = b == 1 ? sa : sb;
    } else {
        *d = -1;
        *s = (sa >= 0 && sa == sb) ? sa : -1;
    }
    return true;
}

bool ot_shape_broadcast(const ot_shape *a, const ot_shape *b, ot_shape *out) {
    if (a->rank < 0 || b->rank < 0) {
        *out = ot_shape_unknown();
        return true;
    }
    int r = a->rank > b->rank ? a->rank : b->rank;
    ot_shape o = ot_shape_make(r, NULL);
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
        int32_t sa = ia >= 0 ? a->sym[ia] : -1, sb = ib >= 0 ? b->sym[ib] : -1;
        if (!bdim(da, sa, db, sb, &o.dim[i], &o.sym[i])) return false;
    }
    *out = o;
    return true;
}

/* Merges two shapes that must be equal (dY and X of a backward op); false when
 * known dims differ. */
static bool merge_equal(const ot_shape *a, const ot_shape *b, ot_shape *out) {
    if (a->rank < 0 || b->rank < 0) {
        *out = a->rank >= 0 ? *a : *b;
        return true;
    }
    if (a->rank != b->rank) return false;
    *out = *a;
    for (int i = 0; i < a->rank; i++) {
        if (a->dim[i] >= 0 && b->dim[i] >= 0 && a->dim[i] != b->dim[i]) return false;
        if (a->dim[i] < 0 && (b->dim[i] >= 0 || a->sym[i] < 0)) {
            out->dim[i] = b->dim[i];
            out->sym[i] = b->sym[i];
        }
    }
    return true;
}

static ot_shape shape_of(const ot_value *v) { return v ? v->shape : ot_shape_unknown(); }
static ot_dtype dtype_of(const ot_value *v) { return v ? v->dtype : OT_UNDEFINED; }

static ot_status broadcast_all(ot_shape_ctx *c, const ot_node *n, int first, int last, ot_shape *out) {
    char a[160], b[160];
    ot_shape acc = ot_shape_make(0, NULL);
    bool any = false;
    for (int i = first; i <= last && i < n->n_inputs; i++) {
        const ot_value *v = ot_shape_input(c, n, i);
        if (!v) continue;
        ot_shape next;
        if (!ot_shape_broadcast(&acc, &v->shape, &next)) {
            const ot_value *p = ot_shape_input(c, n, first);
            return ot_shape_fail(c, n, "cannot broadcast %s ('%s') with %s ('%s')", SHP(&acc, a),
                                 i == first + 1 && p ? p->name : "earlier inputs", SHP(&v->shape, b), v->name);
        }
        acc = next;
        any = true;
    }
    *out = any ? acc : ot_shape_unknown();
    return OT_OK;
}

/* Output o of n is shaped like input i (and like input j when j >= 0, checked). */
static ot_status like(ot_shape_ctx *c, const ot_node *n, int i, int j, ot_dtype dtype, ot_dtype *dt, ot_shape *sh,
                      int o) {
    char a[160], b[160];
    const ot_value *vi = ot_shape_input(c, n, i), *vj = ot_shape_input(c, n, j);
    ot_shape si = shape_of(vi), sj = shape_of(vj);
    if (!merge_equal(&si, &sj, &sh[o]))
        return ot_shape_fail(c, n, "'%s' has shape %s but '%s' has shape %s; they must be equal", vi->name,
                             SHP(&si, a), vj->name, SHP(&sj, b));
    dt[o] = dtype != OT_UNDEFINED ? dtype : dtype_of(vi);
    return OT_OK;
}

static ot_status rule_gemm(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160], b[160];
    ot_shape A = shape_of(ot_shape_input(c, n, 0)), B = shape_of(ot_shape_input(c, n, 1));
    dt[0] = dtype_of(ot_shape_input(c, n, 0));
    if ((A.rank >= 0 && A.rank != 2) || (B.rank >= 0 && B.rank != 2))
        return ot_shape_fail(c, n, "Gemm needs 2-D A and B, got %s and %s", SHP(&A, a), SHP(&B, b));
    bool ta = ot_node_attr_int(n, "transA", 0) != 0, tb = ot_node_attr_int(n, "transB", 0) != 0;
    ot_shape o = ot_shape_make(2, NULL);
    o.dim[0] = o.dim[1] = -1;
    if (A.rank == 2) {
        o.dim[0] = A.dim[ta ? 1 : 0];
        o.sym[0] = A.sym[ta ? 1 : 0];
    }
    if (B.rank == 2) {
        o.dim[1] = B.dim[tb ? 0 : 1];
        o.sym[1] = B.sym[tb ? 0 : 1];
    }
    if (A.rank == 2 && B.rank == 2) {
        int64_t ka = A.dim[ta ? 0 : 1], kb = B.dim[tb ? 1 : 0];
        if (ka >= 0 && kb >= 0 && ka != kb)
            return ot_shape_fail(c, n, "inner dims differ: A %s%s (K=%lld) and B %s%s (K=%lld)", SHP(&A, a),
                                 ta ? " transposed" : "", (long long)ka, SHP(&B, b), tb ? " transposed" : "",
                                 (long long)kb);
    }
    const ot_value *C = ot_shape_input(c, n, 2);
    ot_shape check;
    if (C && (!ot_shape_broadcast(&C->shape, &o, &check) || check.rank != 2 ||
              (check.dim[0] >= 0 && o.dim[0] >= 0 && check.dim[0] != o.dim[0]) ||
              (check.dim[1] >= 0 && o.dim[1] >= 0 && check.dim[1] != o.dim[1])))
        return ot_shape_fail(c, n, "C %s does not broadcast to the output %s", SHP(&C->shape, a), SHP(&o, b));
    sh[0] = o;
    return OT_OK;
}

static ot_status rule_matmul(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160], b[160];
    ot_shape A = shape_of(ot_shape_input(c, n, 0)), B = shape_of(ot_shape_input(c, n, 1));
    dt[0] = dtype_of(ot_shape_input(c, n, 0));
    if (A.rank < 0 || B.rank < 0) return OT_OK;
    if (A.rank == 0 || B.rank == 0) return ot_shape_fail(c, n, "MatMul of a scalar: %s and %s", SHP(&A, a), SHP(&B, b));
    /* 1-D operands: promote ([K] -> [1,K], [K] -> [K,1]) and drop the added dim after. */
    ot_shape pa = A, pb = B;
    if (A.rank == 1) pa = ot_shape_make(2, (int64_t[]){1, A.dim[0]}), pa.sym[1] = A.sym[0];
    if (B.rank == 1) pb = ot_shape_make(2, (int64_t[]){B.dim[0], 1}), pb.sym[0] = B.sym[0];
    int64_t ka = pa.dim[pa.rank - 1], kb = pb.dim[pb.rank - 2];
    if (ka >= 0 && kb >= 0 && ka != kb)
        return ot_shape_fail(c, n, "inner dims differ: %s x %s (%lld vs %lld)", SHP(&A, a), SHP(&B, b), (long long)ka,
                             (long long)kb);
    ot_shape ba = pa, bb = pb, batch;
    ba.rank -= 2;
    bb.rank -= 2;
    if (!ot_shape_broadcast(&ba, &bb, &batch))
        return ot_shape_fail(c, n, "batch dims do not broadcast: %s x %s", SHP(&A, a), SHP(&B, b));
    if (batch.rank + 2 > OT_MAX_RANK) return ot_shape_fail(c, n, "result rank above %d", OT_MAX_RANK);
    ot_shape o = batch;
    o.rank = batch.rank;
    if (A.rank != 1) {
        o.dim[o.rank] = pa.dim[pa.rank - 2];
        o.sym[o.rank++] = pa.sym[pa.rank - 2];
    }
    if (B.rank != 1) {
        o.dim[o.rank] = pb.dim[pb.rank - 1];
        o.sym[o.rank++] = pb.sym[pb.rank - 1];
    }
    sh[0] = o;
    return OT_OK;
}

/* Output size of one spatial dim of a conv or pool (ONNX, with PyTorch's rule that a
 * ceil_mode window must start inside the input or left padding). Attribute values may
 * be anything (2^62): every step is checked. */
typedef enum { WIN_OK, WIN_TOO_SMALL, WIN_OVERFLOW } win_result;
static win_result window_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, const char *pad,
                             bool ceil_mode, int64_t *out) {
    int64_t eff, num, t;
    if (k >= 0 && (!ot_i64_mul(k > 0 ? k - 1 : 0, d, &eff) || !ot_i64_add(eff, 1, &eff))) return WIN_OVERFLOW;
    if (in < 0 || k < 0) {
        *out = -1;
        return WIN_OK;
    }
    if (!strcmp(pad, "SAME_UPPER") || !strcmp(pad, "SAME_LOWER")) {
        *out = in / s + (in % s != 0);
        return WIN_OK;
    }
    if (!strcmp(pad, "VALID")) pb = pe = 0;
    if (!ot_i64_add(in, pb, &num) || !ot_i64_add(num, pe, &num) || !ot_i64_sub(num, eff, &num)) return WIN_OVERFLOW;
    if (num < 0) return WIN_TOO_SMALL;
    if (ceil_mode) {
        *out = num / s + (num % s != 0) + 1;
        if (!ot_i64_mul(*out - 1, s, &t) || !ot_i64_add(in, pb, &num)) return WIN_OVERFLOW;
        if (t >= num) (*out)--;
    } else {
        *out = num / s + 1;
    }
    return WIN_OK;
}

/* Pads are never negative (ONNX); a pool's pad must be smaller than its (dilated)
 * kernel, or some windows hold only padding (ONNX's pool shape inference refuses it;
 * AveragePool would divide by a count of 0). */
static ot_status check_pads(ot_shape_ctx *c, const ot_node *n, const int64_t *pd, int np, const int64_t *ks,
                            const int64_t *dl) {
    bool pool = n->op == OT_OP_MAX_POOL || n->op == OT_OP_AVERAGE_POOL;
    for (int i = 0; pd && i < np; i++) {
        if (pd[i] < 0) return ot_shape_fail_model(c, n, "pads[%d] = %lld is negative", i, (long long)pd[i]);
        int sp = i % (np / 2);
        int64_t eff;
        if (pool && ks && ks[sp] >= 1 && ot_i64_mul(ks[sp] - 1, dl ? dl[sp] : 1, &eff) && pd[i] > eff)
            return ot_shape_fail_model(c, n, "pads[%d] = %lld is not smaller than the kernel (%lld on spatial axis %d)",
                                       i, (long long)pd[i], (long long)(eff + 1), sp);
    }
    return OT_OK;
}

static ot_status rule_conv_pool(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160], b[160];
    const ot_value *xv = ot_shape_input(c, n, 0);
    ot_shape X = shape_of(xv), W = shape_of(ot_shape_input(c, n, 1));
    bool conv = n->op == OT_OP_CONV;
    dt[0] = dtype_of(xv);
    if (n->op == OT_OP_MAX_POOL && n->n_outputs > 1) dt[1] = OT_I64;
    if (X.rank >= 0 && X.rank < 3)
        return ot_shape_fail(c, n, "input '%s' has shape %s; expected [N,C,spatial...]", xv->name, SHP(&X, a));
    if (X.rank < 0 && conv && W.rank >= 3) { /* rank from the weight, dims unknown */
        X = ot_shape_make(W.rank, NULL);
        for (int i = 0; i < X.rank; i++) X.dim[i] = -1;
    }
    if (X.rank < 0) return OT_OK;
    int k = X.rank - 2, nk = 0, ns = 0, nd = 0, np = 0;
    const int64_t *ks = ot_node_attr_ints(n, "kernel_shape", &nk), *st = ot_node_attr_ints(n, "strides", &ns);
    const int64_t *dl = ot_node_attr_ints(n, "dilations", &nd), *pd = ot_node_attr_ints(n, "pads", &np);
    const char *pad = ot_node_attr_string(n, "auto_pad", "NOTSET");
    bool ceil_mode = ot_node_attr_int(n, "ceil_mode", 0) != 0;
    int64_t group = ot_node_attr_int(n, "group", 1);
    if ((ks && nk != k) || (st && ns != k) || (dl && nd != k) || (pd && np != 2 * k))
        return ot_shape_fail(c, n, "kernel_shape/strides/dilations/pads lengths do not match %d spatial dims of %s", k,
                             SHP(&X, a));
    if (conv && W.rank >= 0 && W.rank != X.rank)
        return ot_shape_fail(c, n, "weight %s and input %s differ in rank", SHP(&W, a), SHP(&X, b));
    if (!conv && !ks) return ot_shape_fail(c, n, "kernel_shape attribute is required");
    if (group < 1) return ot_shape_fail(c, n, "group %lld < 1", (long long)group);
    ot_status pst = check_pads(c, n, pd, np, ks, dl);
    if (pst) return pst;
    ot_shape o = ot_shape_make(X.rank, NULL);
    o.dim[0] = X.dim[0];
    o.sym[0] = X.sym[0];
    if (conv) {
        o.dim[1] = W.rank >= 0 ? W.dim[0] : -1;
        o.sym[1] = W.rank >= 0 ? W.sym[0] : -1;
        int64_t want_c = 0;
        if (W.rank >= 0 && W.dim[1] >= 0 && !ot_i64_mul(W.dim[1], group, &want_c))
            return ot_shape_fail_model(c, n, "group %lld times the weight's %lld input channels overflows int64",
                                       (long long)group, (long long)W.dim[1]);
        if (W.rank >= 0 && X.dim[1] >= 0 && W.dim[1] >= 0 && X.dim[1] != want_c)
            return ot_shape_fail(c, n, "input %s has %lld channels but weight %s with group %lld expects %lld",
                                 SHP(&X, a), (long long)X.dim[1], SHP(&W, b), (long long)group, (long long)want_c);
        if (W.rank >= 0 && W.dim[0] >= 0 && W.dim[0] % group)
            return ot_shape_fail(c, n, "weight %s: %lld output channels not divisible by group %lld", SHP(&W, a),
                                 (long long)W.dim[0], (long long)group);
        const ot_value *bv = ot_shape_input(c, n, 2);
        if (bv && bv->shape.rank >= 0 && W.rank >= 0 &&
            (bv->shape.rank != 1 || (bv->shape.dim[0] >= 0 && W.dim[0] >= 0 && bv->shape.dim[0] != W.dim[0])))
            return ot_shape_fail(c, n, "bias %s does not match weight %s", SHP(&bv->shape, a), SHP(&W, b));
    } else {
        o.dim[1] = X.dim[1];
        o.sym[1] = X.sym[1];
    }
    for (int i = 0; i < k; i++) {
        int64_t kk = ks ? ks[i] : (W.rank >= 0 ? W.dim[2 + i] : -1);
        int64_t s = st ? st[i] : 1, d = dl ? dl[i] : 1;
        if (s < 1 || d < 1) return ot_shape_fail(c, n, "strides and dilations must be >= 1");
        if (ks && conv && W.rank >= 0 && W.dim[2 + i] >= 0 && W.dim[2 + i] != ks[i])
            return ot_shape_fail(c, n, "kernel_shape does not match weight %s", SHP(&W, a));
        win_result wr = window_out(X.dim[2 + i], kk, s, d, pd ? pd[i] : 0, pd ? pd[k + i] : 0, pad, ceil_mode,
                                   &o.dim[2 + i]);
        if (wr == WIN_OVERFLOW)
            return ot_shape_fail_model(c, n, "kernel %lld, dilation %lld, stride %lld and pads on spatial axis %d "
                                       "overflow int64: absurd attributes",
                                       (long long)kk, (long long)d, (long long)s, i);
        if (wr == WIN_TOO_SMALL)
            return ot_shape_fail(c, n, "kernel %lld (dilation %lld) is larger than the padded input %s on spatial "
                                 "axis %d",
                                 (long long)kk, (long long)d, SHP(&X, a), i);
    }
    sh[0] = o;
    if (n->op == OT_OP_MAX_POOL && n->n_outputs > 1) sh[1] = o;
    return OT_OK;
}

static ot_status rule_reduce(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *xv = ot_shape_input(c, n, 0);
    ot_shape X = shape_of(xv);
    dt[0] = dtype_of(xv);
    bool keep = ot_node_attr_int(n, "keepdims", 1) != 0, noop = ot_node_attr_int(n, "noop_with_empty_axes", 0) != 0;
    int na = 0;
    const int64_t *axes = ot_node_attr_ints(n, "axes", &na);
    const ot_shape *iv = NULL;
    if (!axes && n->n_inputs > 1 && n->inputs[1] >= 0) {
        iv = ot_shape_ivals(c, n->inputs[1]);
        if (!iv) { /* axes not known: with keepdims the rank still is */
            if (X.rank >= 0 && keep) {
                sh[0] = ot_shape_make(X.rank, NULL);
                for (int i = 0; i < X.rank; i++) sh[0].dim[i] = -1;
            }
            return OT_OK;
        }
        na = iv->rank;
    }
    if (X.rank < 0) return OT_OK;
    bool red[OT_MAX_RANK] = {false};
    if (!axes && !iv) na = 0;
    if (na == 0) {
        if (noop) {
            sh[0] = X;
            return OT_OK;
        }
        for (int i = 0; i < X.rank; i++) red[i] = true;
    }
    for (int j = 0; j < na; j++) {
        int64_t ax = axes ? axes[j] : iv->dim[j];
        if (iv && !ot_shape_ival_known(iv, j)) return OT_OK;
        int a2;
        ot_status st = ot_shape_axis(c, n, ax, X.rank, false, &X, &a2);
        if (st) return st;
        if (red[a2]) return ot_shape_fail_model(c, n, "axis %lld repeated in axes", (long long)ax);
        red[a2] = true;
    }
    ot_shape o = ot_shape_make(0, NULL);
    for (int i = 0; i < X.rank; i++) {
        if (!red[i]) {
            o.dim[o.rank] = X.dim[i];
            o.sym[o.rank++] = X.sym[i];
        } else if (keep) {
            o.dim[o.rank++] = 1;
        }
    }
    sh[0] = o;
    return OT_OK;
}

static ot_status rule_layer_norm(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *xv = ot_shape_input(c, n, 0);
    ot_shape X = shape_of(xv);
    dt[0] = dtype_of(xv);
    sh[0] = X;
    for (int o = 1; o < n->n_outputs; o++) dt[o] = OT_F32; /* stash_type float */
    if (X.rank < 0) return OT_OK;
    int ax;
    ot_status rc = ot_shape_axis(c, n, ot_node_attr_int(n, "axis", -1), X.rank, false, &X, &ax);
    if (rc) return rc;
    ot_shape st = X;
    for (int i = ax; i < X.rank; i++) st.dim[i] = 1, st.sym[i] = -1;
    for (int o = 1; o < n->n_outputs; o++) sh[o] = st;
    return OT_OK;
}

/* SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss: scores [N,C,d...], labels
 * [N,d...]; reduction none gives [N,d...], mean/sum a scalar. */
static ot_status rule_class_loss(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160], b[160];
    const ot_value *sv = ot_shape_input(c, n, 0), *lv = ot_shape_input(c, n, 1);
    ot_shape S = shape_of(sv), L = shape_of(lv);
    dt[0] = dtype_of(sv);
    const char *red = ot_node_attr_string(n, "reduction", "mean");
    if (strcmp(red, "none") && strcmp(red, "mean") && strcmp(red, "sum"))
        return ot_shape_fail(c, n, "reduction '%s' is not none, mean or sum", red);
    if (S.rank >= 0 && S.rank < 2) return ot_shape_fail(c, n, "scores %s must be [N,C,...]", SHP(&S, a));
    if (S.rank >= 0 && L.rank >= 0) {
        bool ok = L.rank == S.rank - 1;
        for (int i = 0; ok && i < L.rank; i++) {
            int si = i == 0 ? 0 : i + 1;
            ok = !(L.dim[i] >= 0 && S.dim[si] >= 0 && L.dim[i] != S.dim[si]);
        }
        if (!ok) return ot_shape_fail(c, n, "labels %s do not match scores %s (expected [N,d...] of [N,C,d...])",
                                      SHP(&L, a), SHP(&S, b));
    }
    if (!strcmp(red, "none")) {
        if (S.rank >= 0) {
            ot_shape o = ot_shape_make(S.rank - 1, NULL);
            for (int i = 0, j = 0; i < S.rank; i++)
                if (i != 1) o.dim[j] = S.dim[i], o.sym[j++] = S.sym[i];
            sh[0] = o;
        } else if (L.rank >= 0) {
            sh[0] = L;
        }
    } else {
        sh[0] = ot_shape_make(0, NULL);
    }
    if (n->n_outputs > 1) {
        sh[1] = S;
        dt[1] = dt[0];
    }
    return OT_OK;
}

/* Unary elementwise ops, Clip, Identity: shaped and typed like the input. */
static ot_status rule_like_input(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *x = ot_shape_input(c, n, 0);
    dt[0] = dtype_of(x);
    sh[0] = shape_of(x);
    return OT_OK;
}

/* Add, Sub, Mul, Div, Pow, Sum: every input broadcast together. */
static ot_status rule_broadcast(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    dt[0] = dtype_of(ot_shape_input(c, n, 0));
    return broadcast_all(c, n, 0, n->n_inputs - 1, &sh[0]);
}

static ot_status rule_equal(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    dt[0] = OT_BOOL;
    return broadcast_all(c, n, 0, 1, &sh[0]);
}

static ot_status rule_where(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    dt[0] = dtype_of(ot_shape_input(c, n, 1));
    return broadcast_all(c, n, 0, 2, &sh[0]);
}

static ot_status rule_cast(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    dt[0] = (ot_dtype)ot_node_attr_int(n, "to", OT_UNDEFINED);
    if (!ot_dtype_supported(dt[0]))
        return ot_shape_fail(c, n, "cast to unsupported dtype %d", (int)ot_node_attr_int(n, "to", 0));
    sh[0] = shape_of(ot_shape_input(c, n, 0));
    return OT_OK;
}

static ot_status rule_global_pool(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160];
    const ot_value *x = ot_shape_input(c, n, 0);
    ot_shape X = shape_of(x);
    dt[0] = dtype_of(x);
    if (X.rank >= 0 && X.rank < 3) return ot_shape_fail(c, n, "input %s must be [N,C,spatial...]", SHP(&X, a));
    sh[0] = X;
    for (int i = 2; i < X.rank; i++) sh[0].dim[i] = 1, sh[0].sym[i] = -1;
    return OT_OK;
}

/* Softmax, LogSoftmax. */
static ot_status rule_softmax(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *x = ot_shape_input(c, n, 0);
    ot_shape X = shape_of(x);
    int ax;
    /* a scalar's one axis is 0 (or -1) */
    ot_status st = X.rank >= 0 ? ot_shape_axis(c, n, ot_node_attr_int(n, "axis", -1), X.rank ? X.rank : 1, false, &X, &ax)
                               : OT_OK;
    if (st) return st;
    dt[0] = dtype_of(x);
    sh[0] = X;
    return OT_OK;
}

static ot_status rule_batch_norm(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160];
    const ot_value *x = ot_shape_input(c, n, 0);
    ot_shape X = shape_of(x), S = shape_of(ot_shape_input(c, n, 1));
    if (X.rank >= 0 && X.rank < 2) return ot_shape_fail(c, n, "input %s must be [N,C,...]", SHP(&X, a));
    if (X.rank >= 2 && S.rank >= 0 && (S.rank != 1 || (S.dim[0] >= 0 && X.dim[1] >= 0 && S.dim[0] != X.dim[1]))) {
        char b[160];
        return ot_shape_fail(c, n, "scale %s does not match the %lld channels of %s", SHP(&S, b),
                             (long long)X.dim[1], SHP(&X, a));
    }
    dt[0] = dtype_of(x);
    sh[0] = X;
    for (int o = 1; o < n->n_outputs; o++) {
        const ot_value *m = ot_shape_input(c, n, 2 + o); /* running mean / var */
        dt[o] = dtype_of(m);
        sh[o] = shape_of(m);
    }
    return OT_OK;
}

static ot_status rule_dropout(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *x = ot_shape_input(c, n, 0);
    dt[0] = dtype_of(x);
    sh[0] = shape_of(x);
    if (n->n_outputs > 1) dt[1] = OT_BOOL, sh[1] = shape_of(x);
    return OT_OK;
}

/* ---- backward-only ops: each output is shaped like a forward tensor among the inputs */

/* (dY, Y or X) -> dX of the pointwise *Grad ops, SoftmaxGrad, DropoutGrad. */
static ot_status rule_grad_pointwise(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    return like(c, n, 0, 1, dtype_of(ot_shape_input(c, n, 0)), dt, sh, 0);
}

/* Shaped like input 2 (ConvGradInput / ConvGradWeight's shape source, GatherGrad's data). */
static ot_status rule_grad_like_input2(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    return like(c, n, 2, -1, dtype_of(ot_shape_input(c, n, 0)), dt, sh, 0);
}

/* Shaped like input 1 (the forward X of pool grads and SliceGrad, the "like" input). */
static ot_status rule_grad_like_input1(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    return like(c, n, 1, -1, dtype_of(ot_shape_input(c, n, 0)), dt, sh, 0);
}

/* BatchNormGrad / LayerNormGrad: dX like X, dScale and dBias like the scale. */
static ot_status rule_norm_grad(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    ot_dtype g0 = dtype_of(ot_shape_input(c, n, 0));
    ot_status st = like(c, n, 1, -1, g0, dt, sh, 0);
    for (int o = 1; !st && o < n->n_outputs; o++) st = like(c, n, 2, -1, g0, dt, sh, o);
    return st;
}

/* Loss gradients: dX typed and shaped like the forward X (input 1). */
static ot_status rule_loss_grad(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    return like(c, n, 1, -1, OT_UNDEFINED, dt, sh, 0);
}

/* ZerosLike / OnesLike. */
static ot_status rule_fill_like(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    return like(c, n, 0, -1, OT_UNDEFINED, dt, sh, 0);
}

/* MseLoss, BceWithLogitsLoss, L1Loss: (prediction, target) of one shape -> scalar. */
static ot_status rule_mse_loss(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160], b[160];
    ot_shape X = shape_of(ot_shape_input(c, n, 0)), T = shape_of(ot_shape_input(c, n, 1)), m;
    if (!merge_equal(&X, &T, &m))
        return ot_shape_fail(c, n, "prediction %s and target %s differ", ot_shape_str(c->g, &X, a, sizeof a),
                             ot_shape_str(c->g, &T, b, sizeof b));
    dt[0] = dtype_of(ot_shape_input(c, n, 0));
    sh[0] = ot_shape_make(0, NULL);
    return OT_OK;
}

/* Optimizer steps update their inputs in place and have no outputs to infer. */
static ot_status rule_no_outputs(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    (void)c, (void)n, (void)dt, (void)sh;
    return OT_OK;
}

/* ---- the table --------------------------------------------------------------- */

/* The shape rule of every op, forward and internal alike: the only dispatch of shape
 * inference. Every op of ops.def has an entry (tests/test_op_table.c checks it). */
/* IsNaN, IsInf: a bool shaped like the input. */
static ot_status rule_bool_like(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    sh[0] = shape_of(ot_shape_input(c, n, 0));
    dt[0] = OT_BOOL;
    return OT_OK;
}

/* CastLike: input 0's shape, input 1's dtype. */
static ot_status rule_cast_like(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    sh[0] = shape_of(ot_shape_input(c, n, 0));
    dt[0] = dtype_of(ot_shape_input(c, n, 1));
    return OT_OK;
}

/* ModGrad, MaxGrad, MinGrad: shaped and typed like dY (input 0). */
static ot_status rule_like_dy(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    return like(c, n, 0, -1, OT_UNDEFINED, dt, sh, 0);
}

static const ot_shape_rule_fn shape_rules[OT_OP_COUNT] = {
    [OT_OP_GEMM] = rule_gemm,
    [OT_OP_MATMUL] = rule_matmul,
    [OT_OP_ADD] = rule_broadcast,
    [OT_OP_SUB] = rule_broadcast,
    [OT_OP_MUL] = rule_broadcast,
    [OT_OP_DIV] = rule_broadcast,
    [OT_OP_POW] = rule_broadcast,
    [OT_OP_SQRT] = rule_like_input,
    [OT_OP_RECIPROCAL] = rule_like_input,
    [OT_OP_NEG] = rule_like_input,
    [OT_OP_EXP] = rule_like_input,
    [OT_OP_LOG] = rule_like_input,
    [OT_OP_ERF] = rule_like_input,
    [OT_OP_TANH] = rule_like_input,
    [OT_OP_SIGMOID] = rule_like_input,
    [OT_OP_RELU] = rule_like_input,
    [OT_OP_LEAKY_RELU] = rule_like_input,
    [OT_OP_CLIP] = rule_like_input,
    [OT_OP_GELU] = rule_like_input,
    [OT_OP_SOFTMAX] = rule_softmax,
    [OT_OP_LOG_SOFTMAX] = rule_softmax,
    [OT_OP_CONV] = rule_conv_pool,
    [OT_OP_MAX_POOL] = rule_conv_pool,
    [OT_OP_AVERAGE_POOL] = rule_conv_pool,
    [OT_OP_GLOBAL_AVERAGE_POOL] = rule_global_pool,
    [OT_OP_BATCH_NORM] = rule_batch_norm,
    [OT_OP_LAYER_NORM] = rule_layer_norm,
    [OT_OP_DROPOUT] = rule_dropout,
    /* shape_rules_tensor.c */
    [OT_OP_FLATTEN] = ot_shape_rule_flatten,
    [OT_OP_RESHAPE] = ot_shape_rule_reshape,
    [OT_OP_TRANSPOSE] = ot_shape_rule_transpose,
    [OT_OP_SQUEEZE] = ot_shape_rule_squeeze,
    [OT_OP_UNSQUEEZE] = ot_shape_rule_squeeze,
    [OT_OP_CONCAT] = ot_shape_rule_concat,
    [OT_OP_SPLIT] = ot_shape_rule_split,
    [OT_OP_SLICE] = ot_shape_rule_slice,
    [OT_OP_GATHER] = ot_shape_rule_gather,
    [OT_OP_SHAPE] = ot_shape_rule_shape,
    [OT_OP_RANGE] = ot_shape_rule_range,
    [OT_OP_EQUAL] = rule_equal,
    [OT_OP_WHERE] = rule_where,
    [OT_OP_CAST] = rule_cast,
    [OT_OP_CONSTANT] = ot_shape_rule_constant,
    [OT_OP_CONSTANT_OF_SHAPE] = ot_shape_rule_constant_of_shape,
    [OT_OP_EXPAND] = ot_shape_rule_expand,
    [OT_OP_REDUCE_MEAN] = rule_reduce,
    [OT_OP_REDUCE_SUM] = rule_reduce,
    [OT_OP_IDENTITY] = rule_like_input,
    [OT_OP_SUM] = rule_broadcast,
    [OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = rule_class_loss,
    [OT_OP_NLL_LOSS] = rule_class_loss,
    /* backward-only and training ops */
    [OT_OP_RELU_GRAD] = rule_grad_pointwise,
    [OT_OP_LEAKY_RELU_GRAD] = rule_grad_pointwise,
    [OT_OP_SIGMOID_GRAD] = rule_grad_pointwise,
    [OT_OP_TANH_GRAD] = rule_grad_pointwise,
    [OT_OP_GELU_GRAD] = rule_grad_pointwise,
    [OT_OP_ERF_GRAD] = rule_grad_pointwise,
    [OT_OP_CLIP_GRAD] = rule_grad_pointwise,
    [OT_OP_SOFTMAX_GRAD] = rule_grad_pointwise,
    [OT_OP_LOG_SOFTMAX_GRAD] = rule_grad_pointwise,
    [OT_OP_CONV_GRAD_INPUT] = rule_grad_like_input2,
    [OT_OP_CONV_GRAD_WEIGHT] = rule_grad_like_input2,
    [OT_OP_MAX_POOL_GRAD] = rule_grad_like_input1,
    [OT_OP_AVERAGE_POOL_GRAD] = rule_grad_like_input1,
    [OT_OP_BATCH_NORM_GRAD] = rule_norm_grad,
    [OT_OP_LAYER_NORM_GRAD] = rule_norm_grad,
    [OT_OP_DROPOUT_GRAD] = rule_grad_pointwise,
    [OT_OP_GATHER_GRAD] = rule_grad_like_input2,
    [OT_OP_REDUCE_TO_LIKE] = rule_grad_like_input1,
    [OT_OP_EXPAND_LIKE] = rule_grad_like_input1,
    [OT_OP_SLICE_GRAD] = rule_grad_like_input1,
    [OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD] = rule_loss_grad,
    [OT_OP_NLL_LOSS_GRAD] = rule_loss_grad,
    [OT_OP_ZEROS_LIKE] = rule_fill_like,
    [OT_OP_ONES_LIKE] = rule_fill_like,
    [OT_OP_MSE_LOSS] = rule_mse_loss,
    [OT_OP_MSE_LOSS_GRAD] = rule_loss_grad,
    [OT_OP_BCE_LOGITS_LOSS] = rule_mse_loss,
    [OT_OP_BCE_LOGITS_LOSS_GRAD] = rule_loss_grad,
    [OT_OP_L1_LOSS] = rule_mse_loss,
    [OT_OP_L1_LOSS_GRAD] = rule_loss_grad,
    [OT_OP_SGD_STEP] = rule_no_outputs,
    [OT_OP_ADAM_STEP] = rule_no_outputs,
    /* ---- comparison, logic and pointwise math (issue 13) ---- */
    [OT_OP_LESS] = rule_equal,
    [OT_OP_GREATER] = rule_equal,
    [OT_OP_LESS_OR_EQUAL] = rule_equal,
    [OT_OP_GREATER_OR_EQUAL] = rule_equal,
    [OT_OP_NOT] = rule_like_input,
    [OT_OP_AND] = rule_equal,
    [OT_OP_OR] = rule_equal,
    [OT_OP_XOR] = rule_equal,
    [OT_OP_IS_NAN] = rule_bool_like,
    [OT_OP_IS_INF] = rule_bool_like,
    [OT_OP_ABS] = rule_like_input,
    [OT_OP_SIN] = rule_like_input,
    [OT_OP_COS] = rule_like_input,
    [OT_OP_HARD_SIGMOID] = rule_like_input,
    [OT_OP_HARD_SWISH] = rule_like_input,
    [OT_OP_SOFTPLUS] = rule_like_input,
    [OT_OP_MISH] = rule_like_input,
    [OT_OP_MIN] = rule_broadcast,
    [OT_OP_MAX] = rule_broadcast,
    [OT_OP_MOD] = rule_broadcast,
    [OT_OP_CAST_LIKE] = rule_cast_like,
    [OT_OP_ABS_GRAD] = rule_grad_pointwise,
    [OT_OP_HARD_SIGMOID_GRAD] = rule_grad_pointwise,
    [OT_OP_HARD_SWISH_GRAD] = rule_grad_pointwise,
    [OT_OP_MISH_GRAD] = rule_grad_pointwise,
    [OT_OP_MOD_GRAD] = rule_like_dy,
    [OT_OP_MAX_GRAD] = rule_like_dy,
    [OT_OP_MIN_GRAD] = rule_like_dy,
    /* ---- layout and indexing (issue 13) ---- */
    [OT_OP_PAD] = ot_shape_rule_pad,
    [OT_OP_TILE] = ot_shape_rule_tile,
    [OT_OP_TRILU] = ot_shape_rule_trilu,
    [OT_OP_GATHER_ELEMENTS] = ot_shape_rule_gather_elements,
    [OT_OP_CUMSUM] = ot_shape_rule_like_data,
    [OT_OP_SCATTER_ND] = ot_shape_rule_like_data,
    [OT_OP_SCATTER_ELEMENTS] = ot_shape_rule_like_data,
    [OT_OP_GATHER_ND] = ot_shape_rule_gather_nd,
    /* ---- random sources (issue 13) ---- */
    [OT_OP_RANDOM_UNIFORM_LIKE] = ot_shape_rule_random,
    [OT_OP_RANDOM_UNIFORM] = ot_shape_rule_random,
    [OT_OP_PAD_GRAD] = rule_grad_like_input1,
    [OT_OP_TILE_GRAD] = rule_grad_like_input1,
    [OT_OP_GATHER_ELEMENTS_GRAD] = rule_grad_like_input2,
    /* ---- ops batch 1 (issue 26): activations and rounding ---- */
    [OT_OP_ELU] = rule_like_input,
    [OT_OP_SELU] = rule_like_input,
    [OT_OP_CELU] = rule_like_input,
    [OT_OP_PRELU] = ot_shape_rule_prelu,
    [OT_OP_THRESHOLDED_RELU] = rule_like_input,
    [OT_OP_SOFTSIGN] = rule_like_input,
    [OT_OP_SIGN] = rule_like_input,
    [OT_OP_FLOOR] = rule_like_input,
    [OT_OP_CEIL] = rule_like_input,
    [OT_OP_ROUND] = rule_like_input,
    [OT_OP_ELU_GRAD] = rule_grad_pointwise,
    [OT_OP_THRESHOLDED_RELU_GRAD] = rule_grad_pointwise,
    [OT_OP_SOFTSIGN_GRAD] = rule_grad_pointwise,
    [OT_OP_PRELU_GRAD] = rule_like_dy,
    /* ---- ops batch 1 (issue 26): reductions ---- */
    [OT_OP_REDUCE_MAX] = rule_reduce,
    [OT_OP_REDUCE_MIN] = rule_reduce,
    [OT_OP_REDUCE_PROD] = rule_reduce,
    [OT_OP_REDUCE_L1] = rule_reduce,
    [OT_OP_REDUCE_L2] = rule_reduce,
    [OT_OP_REDUCE_LOG_SUM_EXP] = rule_reduce,
    [OT_OP_REDUCE_SUM_SQUARE] = rule_reduce,
    [OT_OP_ARG_MAX] = ot_shape_rule_arg_reduce,
    [OT_OP_ARG_MIN] = ot_shape_rule_arg_reduce,
    [OT_OP_REDUCE_GRAD] = rule_grad_like_input1,
    /* ---- issue 26: InstanceNormalization, GroupNormalization ---- */
    [OT_OP_INSTANCE_NORM] = ot_shape_rule_group_norm,
    [OT_OP_GROUP_NORM] = ot_shape_rule_group_norm,
    [OT_OP_GROUP_NORM_GRAD] = rule_norm_grad,
    /* ---- spatial ops (issue 26, ops batch 2) ---- */
    [OT_OP_RESIZE] = ot_shape_rule_resize,
    [OT_OP_UPSAMPLE] = ot_shape_rule_resize,
    [OT_OP_RESIZE_GRAD] = rule_grad_like_input1,
    [OT_OP_CONV_TRANSPOSE] = ot_shape_rule_conv_transpose,
    [OT_OP_DEPTH_TO_SPACE] = ot_shape_rule_depth_space,
    [OT_OP_SPACE_TO_DEPTH] = ot_shape_rule_depth_space,
    /* ---- ops3 (issue 26): shape_rules_xfmr.c ---- */
    [OT_OP_RMS_NORM] = ot_shape_rule_rms_norm,
    [OT_OP_RMS_NORM_GRAD] = rule_norm_grad,
    [OT_OP_ROTARY_EMBEDDING] = ot_shape_rule_rotary,
    [OT_OP_ROTARY_EMBEDDING_GRAD] = ot_shape_rule_rotary,
    [OT_OP_ATTENTION] = ot_shape_rule_attention,
    [OT_OP_ATTENTION_GRAD] = ot_shape_rule_attention_grad,
    /* ---- ops batch 4 (issue 26) ---- */
    [OT_OP_EINSUM] = ot_shape_rule_einsum,
    [OT_OP_EINSUM_GRAD] = ot_shape_rule_einsum_grad,
    [OT_OP_TOP_K] = ot_shape_rule_top_k,
    [OT_OP_ONE_HOT] = ot_shape_rule_one_hot,
    [OT_OP_SIZE] = ot_shape_rule_size,
    /* ---- recurrent ops (issue 26) ---- */
    [OT_OP_RNN] = ot_shape_rule_rnn,
    [OT_OP_GRU] = ot_shape_rule_rnn,
    [OT_OP_LSTM] = ot_shape_rule_rnn,
    [OT_OP_RNN_GRAD] = ot_shape_rule_rnn_grad,
    [OT_OP_LINEAR_CROSS_ENTROPY] = ot_shape_rule_linear_ce, /* shape_rules_lce.c (issue 28) */
    [OT_OP_LINEAR_CROSS_ENTROPY_GRAD] = ot_shape_rule_linear_ce_grad,
};

bool ot_shape_has_rule(ot_op op) { return op > 0 && op < OT_OP_COUNT && shape_rules[op]; }

ot_status ot_shape_rule(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    if (!ot_shape_has_rule(n->op))
        return ot_fail(c->err, OT_E_INTERNAL, "shape inference: node '%s' (%s): op has no shape rule",
                       ot_shape_node_label(n), n->op_type);
    return shape_rules[n->op](c, n, dt, sh);
}
