/* shape_rules_index.c — shape rules of the layout and indexing ops of issue 13: Pad,
 * Tile, Trilu, GatherElements, GatherND, CumSum, ScatterND and ScatterElements. Pad and Tile read their pads / repeats
 * from constant data (an initializer, or a value folded earlier in the same pass);
 * when those are not known the output keeps the input's rank with unknown dims. */
#include "shape_internal.h"

#include <string.h>

#define SHP(s, buf) ot_shape_str(c->g, (s), (buf), sizeof(buf))

/* Up to max int elements of input slot `slot` when its contents are known (constant
 * data, or shape data for short vectors); -1 when not known, 0 when absent. */
static int known_ints(ot_shape_ctx *c, const ot_node *n, int slot, int64_t *v, int max) {
    const ot_value *x = ot_shape_input(c, n, slot);
    if (!x) return 0;
    if (x->data && (x->dtype == OT_I64 || x->dtype == OT_I32)) {
        size_t es = ot_dtype_size(x->dtype), cnt = x->nbytes / es;
        if (cnt > (size_t)max) return -1;
        for (size_t i = 0; i < cnt; i++) {
            if (x->dtype == OT_I64) memcpy(&v[i], (const char *)x->data + 8 * i, 8);
            else {
                int32_t y;
                memcpy(&y, (const char *)x->data + 4 * i, 4);
                v[i] = y;
            }
        }
        return (int)cnt;
    }
    const ot_shape *iv = ot_shape_ivals(c, n->inputs[slot]);
    if (!iv || iv->rank > max) return -1;
    for (int j = 0; j < iv->rank; j++) {
        if (!ot_shape_ival_known(iv, j)) return -1;
        v[j] = iv->dim[j];
    }
    return iv->rank;
}

int ot_shape_known_ints(ot_shape_ctx *c, const ot_node *n, int slot, int64_t *v, int max) {
    return known_ints(c, n, slot, v, max);
}

static void all_unknown(ot_shape *s) {
    for (int i = 0; i < s->rank; i++) s->dim[i] = -1, s->sym[i] = -1;
}

/* Pad (data, pads [, constant_value [, axes]]): dim d grows by begin + end (negative
 * pads crop). A symbolic dim stays symbolic when its pads are 0. */
ot_status ot_shape_rule_pad(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160];
    const ot_value *x = ot_shape_input(c, n, 0);
    dt[0] = x ? x->dtype : OT_UNDEFINED;
    ot_shape X = x ? x->shape : ot_shape_unknown();
    if (X.rank < 0) return OT_OK;
    sh[0] = X;
    int64_t pads[2 * OT_MAX_RANK], axes[OT_MAX_RANK];
    int np = known_ints(c, n, 1, pads, 2 * OT_MAX_RANK);
    int na = known_ints(c, n, 3, axes, OT_MAX_RANK);
    if (np < 0 || na < 0) {
        all_unknown(&sh[0]);
        return OT_OK;
    }
    if (na == 0) {
        for (int d = 0; d < X.rank; d++) axes[d] = d;
        na = X.rank;
    }
    if (np != 2 * na) return ot_shape_fail(c, n, "%d pads for %d axes of %s", np, na, SHP(&X, a));
    for (int j = 0; j < na; j++) {
        int d = (int)(axes[j] < 0 ? axes[j] + X.rank : axes[j]);
        if (d < 0 || d >= X.rank) return ot_shape_fail(c, n, "axis %lld out of range for %s", (long long)axes[j], SHP(&X, a));
        int64_t grow, out;
        if (!ot_i64_add(pads[j], pads[j + na], &grow))
            return ot_shape_fail(c, n, "pads %lld and %lld on axis %d overflow int64", (long long)pads[j],
                                 (long long)pads[j + na], d);
        if (grow == 0) continue;
        sh[0].sym[d] = -1;
        if (X.dim[d] < 0) {
            sh[0].dim[d] = -1;
            continue;
        }
        if (!ot_i64_add(X.dim[d], grow, &out))
            return ot_shape_fail(c, n, "axis %d of %s padded by %lld overflows int64", d, SHP(&X, a), (long long)grow);
        if (out < 0) return ot_shape_fail(c, n, "pads crop axis %d of %s below 0", d, SHP(&X, a));
        sh[0].dim[d] = out;
    }
    return OT_OK;
}

/* Tile (input, repeats): dim d times repeats[d]. */
ot_status ot_shape_rule_tile(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160];
    const ot_value *x = ot_shape_input(c, n, 0);
    dt[0] = x ? x->dtype : OT_UNDEFINED;
    ot_shape X = x ? x->shape : ot_shape_unknown();
    if (X.rank < 0) return OT_OK;
    sh[0] = X;
    int64_t rep[OT_MAX_RANK];
    int nr = known_ints(c, n, 1, rep, OT_MAX_RANK);
    if (nr < 0) {
        all_unknown(&sh[0]);
        return OT_OK;
    }
    if (nr != X.rank) return ot_shape_fail(c, n, "%d repeats for %s", nr, SHP(&X, a));
    for (int d = 0; d < X.rank; d++) {
        if (rep[d] < 0) return ot_shape_fail(c, n, "repeats[%d] = %lld is negative", d, (long long)rep[d]);
        if (rep[d] == 1) continue;
        sh[0].sym[d] = -1;
        /* a product past int64 wrapped (4 x 2^62 gave 0: a silent zero-width output) */
        if (X.dim[d] >= 0 && !ot_i64_mul(X.dim[d], rep[d], &sh[0].dim[d]))
            return ot_shape_fail(c, n, "dim %d of %s times repeats[%d] = %lld overflows int64", d, SHP(&X, a), d,
                                 (long long)rep[d]);
        if (X.dim[d] < 0) sh[0].dim[d] = -1;
    }
    return OT_OK;
}

/* CumSum, ScatterND, ScatterElements: typed and shaped like input 0. */
ot_status ot_shape_rule_like_data(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *x = ot_shape_input(c, n, 0);
    dt[0] = x ? x->dtype : OT_UNDEFINED;
    sh[0] = x ? x->shape : ot_shape_unknown();
    return OT_OK;
}

/* Trilu: like the input, which must be a (batch of) matrix. */
ot_status ot_shape_rule_trilu(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160];
    ot_status st = ot_shape_rule_like_data(c, n, dt, sh);
    if (!st && sh[0].rank >= 0 && sh[0].rank < 2) return ot_shape_fail(c, n, "input %s has rank below 2", SHP(&sh[0], a));
    return st;
}

/* GatherND (data, indices): indices.shape[:-1] + data.shape[batch_dims + q:], q the
 * last dim of indices (which must be static). */
ot_status ot_shape_rule_gather_nd(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160], b[160];
    const ot_value *x = ot_shape_input(c, n, 0), *i = ot_shape_input(c, n, 1);
    dt[0] = x ? x->dtype : OT_UNDEFINED;
    ot_shape X = x ? x->shape : ot_shape_unknown(), I = i ? i->shape : ot_shape_unknown();
    if (X.rank < 0 || I.rank < 0) return OT_OK;
    int64_t bd = ot_node_attr_int(n, "batch_dims", 0);
    if (I.rank < 1 || bd < 0 || bd >= I.rank || bd >= X.rank)
        return ot_shape_fail(c, n, "batch_dims %lld does not fit indices %s and data %s", (long long)bd, SHP(&I, a), SHP(&X, b));
    int64_t q = I.dim[I.rank - 1];
    if (q < 0) return OT_OK; /* the rank depends on it */
    if (bd + q > X.rank) return ot_shape_fail(c, n, "index tuples of %lld for data %s", (long long)q, SHP(&X, a));
    int rank = I.rank - 1 + X.rank - (int)(bd + q);
    if (rank > OT_MAX_RANK) return ot_shape_fail(c, n, "output rank %d is over %d", rank, OT_MAX_RANK);
    sh[0] = ot_shape_make(rank, NULL);
    for (int d = 0; d < I.rank - 1; d++) sh[0].dim[d] = I.dim[d], sh[0].sym[d] = I.sym[d];
    for (int d = (int)(bd + q); d < X.rank; d++) {
        sh[0].dim[I.rank - 1 + d - bd - q] = X.dim[d];
        sh[0].sym[I.rank - 1 + d - bd - q] = X.sym[d];
    }
    return OT_OK;
}

/* GatherElements (data, indices): shaped like indices, typed like data. */
ot_status ot_shape_rule_gather_elements(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160], b[160];
    const ot_value *x = ot_shape_input(c, n, 0), *i = ot_shape_input(c, n, 1);
    dt[0] = x ? x->dtype : OT_UNDEFINED;
    sh[0] = i ? i->shape : ot_shape_unknown();
    ot_shape X = x ? x->shape : ot_shape_unknown();
    if (X.rank >= 0 && sh[0].rank >= 0 && X.rank != sh[0].rank)
        return ot_shape_fail(c, n, "indices %s and data %s differ in rank", SHP(&sh[0], a), SHP(&X, b));
    int64_t axis = ot_node_attr_int(n, "axis", 0);
    if (X.rank >= 0 && (axis < -X.rank || axis >= X.rank))
        return ot_shape_fail(c, n, "axis %lld out of range for %s", (long long)axis, SHP(&X, a));
    return OT_OK;
}
