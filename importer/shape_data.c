/* shape_data.c — propagation of small integer "shape data" (the values of rank-0/1
 * int64, int32 and bool tensors of at most OT_MAX_RANK elements) through Shape,
 * Gather, Unsqueeze, Concat, Slice, arithmetic, Equal, Where and ConstantOfShape, so
 * that PyTorch's Shape -> Gather -> Concat -> Reshape chains keep symbolic dims
 * before they are bound and need no kernels (ONNX's data propagation). */
#include "shape_internal.h"

#include <string.h>

static bool ival_output(const ot_value *v) {
    return (v->dtype == OT_I64 || v->dtype == OT_I32 || v->dtype == OT_BOOL) && v->shape.rank >= 0 &&
           v->shape.rank <= 1 && ot_shape_numel(&v->shape) >= 0 && ot_shape_numel(&v->shape) <= OT_MAX_RANK;
}

/* Element i of iv. */
static void ival_at(const ot_shape *iv, int i, int64_t *d, int32_t *s) {
    *d = iv->dim[i];
    *s = iv->sym[i];
}

static void set_known(ot_shape *o, int j, int64_t v) {
    o->dim[j] = v;
    o->sym[j] = v < 0 ? OT_IVAL_CONST : -1;
}

/* Elementwise ops on shape data; a symbol survives x*1, x+0, x-0, x/1 and x==x. A
 * result past int64 (2^62 * 4) fails naming the node and both values: propagated, a
 * wrapped value would become a dim (a Reshape or Tile of the wrong size). */
static ot_status ival_binary(ot_shape_ctx *c, const ot_node *n, const ot_shape *a, const ot_shape *b, ot_shape *o) {
    ot_op op = n->op;
    for (int j = 0; j < o->rank; j++) {
        int64_t x, y;
        int32_t sx, sy;
        ival_at(a, j, &x, &sx);
        ival_at(b, j, &y, &sy);
        bool kx = x >= 0 || sx == OT_IVAL_CONST, ky = y >= 0 || sy == OT_IVAL_CONST;
        o->dim[j] = -1;
        o->sym[j] = -1;
        if (kx && ky) {
            int64_t r = 0;
            bool fits = true;
            switch (op) {
            case OT_OP_ADD: fits = ot_i64_add(x, y, &r); break;
            case OT_OP_SUB: fits = ot_i64_sub(x, y, &r); break;
            case OT_OP_MUL: fits = ot_i64_mul(x, y, &r); break;
            case OT_OP_DIV: /* shape data is >= 0: truncation = floor */
                if (!y) continue;
                fits = !(x == INT64_MIN && y == -1);
                r = fits ? x / y : 0;
                break;
            case OT_OP_EQUAL: r = x == y; break;
            default: continue;
            }
            if (!fits)
                return ot_shape_fail(c, n, "shape data %lld and %lld (element %d) overflow int64", (long long)x,
                                     (long long)y, j);
            set_known(o, j, r);
        } else if (!kx && sx >= 0 && ky) {
            bool keep = ((op == OT_OP_MUL || op == OT_OP_DIV) && y == 1) || ((op == OT_OP_ADD || op == OT_OP_SUB) && y == 0);
            if (keep) o->sym[j] = sx;
            if (op == OT_OP_EQUAL && y < 0) set_known(o, j, 0); /* a dim is never negative */
        } else if (kx && !ky && sy >= 0) {
            if ((op == OT_OP_MUL && x == 1) || (op == OT_OP_ADD && x == 0)) o->sym[j] = sy;
            if (op == OT_OP_EQUAL && x < 0) set_known(o, j, 0);
        } else if (op == OT_OP_EQUAL && sx >= 0 && sx == sy) {
            set_known(o, j, 1);
        }
    }
    return OT_OK;
}

ot_status ot_shape_propagate_ivals(ot_shape_ctx *c, const ot_node *n) {
    if (n->n_outputs < 1 || n->outputs[0] < 0) return OT_OK;
    const ot_value *out = &c->g->values[n->outputs[0]];
    if (!ival_output(out)) return OT_OK;
    int count = (int)ot_shape_numel(&out->shape);
    ot_shape o = ot_shape_make(count, NULL);
    for (int j = 0; j < count; j++) o.dim[j] = -1;
    const ot_value *x = ot_shape_input(c, n, 0);
    const ot_shape *a = x ? ot_shape_ivals(c, x->id) : NULL;
    const ot_shape *b = n->n_inputs > 1 ? ot_shape_ivals(c, n->inputs[1]) : NULL;
    switch (n->op) {
    case OT_OP_SHAPE: {
        if (!x || x->shape.rank < 0) return OT_OK;
        int s, e;
        ot_shape_range_attrs(n, x->shape.rank, &s, &e);
        if (e - s != count) return OT_OK;
        for (int j = 0; j < count; j++) o.dim[j] = x->shape.dim[s + j], o.sym[j] = x->shape.sym[s + j];
        break;
    }
    case OT_OP_GATHER: {
        if (!a || !b || a->rank == 0 || x->shape.rank != 1 || b->rank != count) return OT_OK;
        for (int j = 0; j < count; j++) {
            if (!ot_shape_ival_known(b, j)) continue;
            int64_t idx = b->dim[j] < 0 ? b->dim[j] + a->rank : b->dim[j];
            if (idx < 0 || idx >= a->rank) return OT_OK;
            o.dim[j] = a->dim[idx], o.sym[j] = a->sym[idx];
        }
        break;
    }
    case OT_OP_UNSQUEEZE: case OT_OP_SQUEEZE: case OT_OP_IDENTITY: case OT_OP_RESHAPE: case OT_OP_FLATTEN:
    case OT_OP_CAST:
        if (!a || a->rank != count) return OT_OK;
        if (n->op == OT_OP_CAST && out->dtype == OT_BOOL) return OT_OK;
        o = *a;
        break;
    case OT_OP_CONCAT: {
        int k = 0;
        for (int i = 0; i < n->n_inputs; i++) {
            const ot_value *v = ot_shape_input(c, n, i);
            if (!v) continue;
            int64_t len = ot_shape_numel(&v->shape);
            if (len < 0 || k + len > count) return OT_OK;
            const ot_shape *iv = ot_shape_ivals(c, v->id);
            for (int j = 0; j < len; j++, k++)
                if (iv) o.dim[k] = iv->dim[j], o.sym[k] = iv->sym[j];
        }
        if (k != count) return OT_OK;
        break;
    }
    case OT_OP_SLICE: {
        const ot_shape *st = ot_shape_ivals(c, n->inputs[1]), *en = ot_shape_ivals(c, n->inputs[2]);
        const ot_shape *sp = n->n_inputs > 4 && n->inputs[4] >= 0 ? ot_shape_ivals(c, n->inputs[4]) : NULL;
        if (!a || a->rank == 0 || x->shape.rank != 1 || !st || !en || st->rank != 1 || en->rank != 1) return OT_OK;
        if (!ot_shape_ival_known(st, 0)) return OT_OK;
        int64_t s = st->dim[0], step = sp && ot_shape_ival_known(sp, 0) ? sp->dim[0] : 1, len = a->rank;
        if (n->n_inputs > 4 && n->inputs[4] >= 0 && !sp) return OT_OK;
        if (s < 0) s += len;
        if (step > 0) s = s < 0 ? 0 : (s > len ? len : s);
        else s = s < 0 ? 0 : (s > len - 1 ? len - 1 : s);
        for (int j = 0; j < count; j++) {
            int64_t idx; /* a huge step leaves the vector: nothing known, as out of range */
            if (!ot_i64_mul(j, step, &idx) || !ot_i64_add(s, idx, &idx) || idx < 0 || idx >= len) return OT_OK;
            o.dim[j] = a->dim[idx], o.sym[j] = a->sym[idx];
        }
        break;
    }
    case OT_OP_ADD: case OT_OP_SUB: case OT_OP_MUL: case OT_OP_DIV: case OT_OP_EQUAL: {
        /* single elements broadcast */
        if (!a || !b || (a->rank != count && a->rank != 1) || (b->rank != count && b->rank != 1)) return OT_OK;
        ot_shape aa = *a, bb = *b;
        for (int j = 1; j < count; j++) {
            if (a->rank == 1) aa.dim[j] = a->dim[0], aa.sym[j] = a->sym[0];
            if (b->rank == 1) bb.dim[j] = b->dim[0], bb.sym[j] = b->sym[0];
        }
        aa.rank = bb.rank = count;
        ot_status st = ival_binary(c, n, &aa, &bb, &o);
        if (st) return st;
        break;
    }
    case OT_OP_WHERE: {
        const ot_shape *cond = a, *tv = b, *fv = n->n_inputs > 2 ? ot_shape_ivals(c, n->inputs[2]) : NULL;
        if (!cond || !tv || !fv) return OT_OK;
        for (int j = 0; j < count; j++) {
            int64_t cd, td, fd;
            int32_t cs, ts, fs;
            if ((cond->rank != count && cond->rank != 1) || (tv->rank != count && tv->rank != 1) ||
                (fv->rank != count && fv->rank != 1))
                return OT_OK;
            ival_at(cond, cond->rank == 1 ? 0 : j, &cd, &cs);
            ival_at(tv, tv->rank == 1 ? 0 : j, &td, &ts);
            ival_at(fv, fv->rank == 1 ? 0 : j, &fd, &fs);
            if (cd < 0 && cs != OT_IVAL_CONST) continue;
            o.dim[j] = cd ? td : fd;
            o.sym[j] = cd ? ts : fs;
        }
        break;
    }
    case OT_OP_CONSTANT_OF_SHAPE: {
        const ot_attr *va = ot_node_attr(n, "value");
        int64_t v = 0;
        if (va && va->type == OT_ATTR_TENSOR && va->t && va->t->nbytes >= ot_dtype_size(va->t->dtype)) {
            if (va->t->dtype == OT_I64) memcpy(&v, va->t->data, 8);
            else if (va->t->dtype == OT_I32) { int32_t w; memcpy(&w, va->t->data, 4); v = w; }
            else if (va->t->dtype == OT_BOOL) v = *(const uint8_t *)va->t->data;
            else return OT_OK;
        } else if (va) {
            return OT_OK;
        }
        for (int j = 0; j < count; j++) set_known(&o, j, v);
        break;
    }
    default:
        return OT_OK;
    }
    c->ivals[out->id] = o;
    return OT_OK;
}
