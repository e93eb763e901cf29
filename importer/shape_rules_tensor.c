/* shape_rules_tensor.c — shape rules of the layout and shape-computing ops (Flatten,
 * Reshape, Transpose, Squeeze, Unsqueeze, Concat, Split, Slice, Gather, Shape,
 * Range, Expand, ConstantOfShape, Constant). They read shape data (constant or
 * propagated by shape_data.c) where the output shape depends on values. */
#include "shape_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SHP(s, buf) ot_shape_str(c->g, (s), (buf), sizeof(buf))

/* Shape data for messages: "[0,-1]", "[batch,4]"; unknown elements are "?". */
static char *ival_str(const ot_graph *g, const ot_shape *iv, char *buf, size_t n) {
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int j = 0; j < iv->rank && len < n; j++) {
        const char *sep = j ? "," : "";
        if (ot_shape_ival_known(iv, j))
            len += (size_t)snprintf(buf + len, n - len, "%s%lld", sep, (long long)iv->dim[j]);
        else if (iv->sym[j] >= 0 && iv->sym[j] < g->n_syms)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", sep, g->syms[iv->sym[j]]);
        else
            len += (size_t)snprintf(buf + len, n - len, "%s?", sep);
    }
    if (len < n) snprintf(buf + len, n - len, "]");
    return buf;
}
#define IVS(iv, buf) ival_str(c->g, (iv), (buf), sizeof(buf))

static ot_shape shape_of(const ot_value *v) { return v ? v->shape : ot_shape_unknown(); }
static ot_dtype dtype_of(const ot_value *v) { return v ? v->dtype : OT_UNDEFINED; }

/* A 1-D shape-like input of static length L whose elements are not known: the
 * result has rank L and unknown dims. */
static ot_shape rank_from_length(const ot_value *v) {
    if (v && v->shape.rank == 1 && v->shape.dim[0] >= 0 && v->shape.dim[0] <= OT_MAX_RANK) {
        ot_shape s = ot_shape_make((int)v->shape.dim[0], NULL);
        for (int i = 0; i < s.rank; i++) s.dim[i] = -1;
        return s;
    }
    return ot_shape_unknown();
}

/* Axes from the ints attribute "axes", else from constant input slot `slot`. Returns
 * count, 0 when absent, -1 when an input holds them but they are not known. */
static int get_axes(ot_shape_ctx *c, const ot_node *n, int slot, int64_t *axes) {
    int na = 0;
    const int64_t *a = ot_node_attr_ints(n, "axes", &na);
    if (a) {
        if (na > OT_MAX_RANK) na = OT_MAX_RANK;
        memcpy(axes, a, (size_t)na * sizeof *axes);
        return na;
    }
    if (slot >= n->n_inputs || n->inputs[slot] < 0) return 0;
    const ot_shape *iv = ot_shape_ivals(c, n->inputs[slot]);
    if (!iv) return -1;
    for (int j = 0; j < iv->rank; j++) {
        if (!ot_shape_ival_known(iv, j)) return -1;
        axes[j] = iv->dim[j];
    }
    return iv->rank;
}

static ot_status rule_reshape(ot_shape_ctx *c, const ot_node *n, ot_shape *out) {
    char a[160], b[160];
    const ot_value *xv = ot_shape_input(c, n, 0), *sv = ot_shape_input(c, n, 1);
    ot_shape X = shape_of(xv);
    const ot_shape *iv = sv ? ot_shape_ivals(c, sv->id) : NULL;
    if (!iv) {
        *out = rank_from_length(sv);
        return OT_OK;
    }
    bool allowzero = ot_node_attr_int(n, "allowzero", 0) != 0;
    ot_shape o = ot_shape_make(iv->rank, NULL);
    int infer = -1;
    for (int j = 0; j < iv->rank; j++) {
        if (!ot_shape_ival_known(iv, j)) {
            o.dim[j] = -1;
            o.sym[j] = iv->sym[j];
            continue;
        }
        int64_t v = iv->dim[j];
        if (v == 0 && !allowzero) {
            if (X.rank >= 0 && j >= X.rank)
                return ot_shape_fail(c, n, "shape %s copies dim %d (0) of input %s, which has no such dim",
                                     IVS(iv, b), j, SHP(&X, a));
            o.dim[j] = X.rank >= 0 ? X.dim[j] : -1;
            o.sym[j] = X.rank >= 0 ? X.sym[j] : -1;
        } else if (v == -1) {
            if (infer >= 0) return ot_shape_fail(c, n, "shape has more than one -1");
            infer = j;
            o.dim[j] = -1;
        } else if (v < -1) {
            return ot_shape_fail(c, n, "shape entry %lld is invalid", (long long)v);
        } else {
            o.dim[j] = v;
        }
    }
    if (X.rank < 0) {
        *out = o;
        return OT_OK;
    }
    /* Compare element counts with matching symbols cancelled: what is left decides
     * the -1 or shows a contradiction. */
    int64_t kin = 1, kout = 1;
    int32_t sin[OT_MAX_RANK], sout[OT_MAX_RANK];
    int nsin = 0, nsout = 0;
    bool unk_in = false, unk_out = false;
    for (int i = 0; i < X.rank; i++) {
        if (X.dim[i] >= 0) {
            if (__builtin_mul_overflow(kin, X.dim[i], &kin))
                return ot_shape_fail(c, n, "the element count of input %s overflows int64", SHP(&X, a));
        }
        else if (X.sym[i] >= 0) sin[nsin++] = X.sym[i];
        else unk_in = true;
    }
    for (int j = 0; j < o.rank; j++) {
        if (j == infer) continue;
        if (o.dim[j] >= 0) {
            if (__builtin_mul_overflow(kout, o.dim[j], &kout))
                return ot_shape_fail(c, n, "the element count of target shape %s overflows int64", IVS(iv, b));
        }
        else if (o.sym[j] >= 0) sout[nsout++] = o.sym[j];
        else unk_out = true;
    }
    for (int i = 0; i < nsin; i++)
        for (int j = 0; j < nsout; j++)
            if (sin[i] >= 0 && sin[i] == sout[j]) sin[i] = sout[j] = -1;
    int left_in = 0, left_out = 0;
    int32_t last_in = -1;
    for (int i = 0; i < nsin; i++)
        if (sin[i] >= 0) left_in++, last_in = sin[i];
    for (int j = 0; j < nsout; j++) left_out += sout[j] >= 0;
    if (unk_in || unk_out || left_out) {
        *out = o;
        return OT_OK;
    }
    if (infer >= 0) {
        if (left_in == 0) {
            if (kout == 0 || kin % kout)
                return ot_shape_fail(c, n, "cannot reshape %s (%lld elements) to %s", SHP(&X, a), (long long)kin,
                                     IVS(iv, b));
            o.dim[infer] = kin / kout;
        } else if (left_in == 1 && kin == kout) {
            o.sym[infer] = last_in;
        }
    } else if (left_in == 0 && kin != kout) {
        return ot_shape_fail(c, n, "cannot reshape %s (%lld elements) to %s (%lld elements)", SHP(&X, a),
                             (long long)kin, SHP(&o, b), (long long)kout);
    }
    *out = o;
    return OT_OK;
}

static ot_status rule_slice(ot_shape_ctx *c, const ot_node *n, ot_shape *out) {
    char a[160];
    ot_shape X = shape_of(ot_shape_input(c, n, 0));
    if (X.rank < 0) return OT_OK;
    const ot_shape *st = ot_shape_ivals(c, n->inputs[1]), *en = ot_shape_ivals(c, n->inputs[2]);
    const ot_shape *ax = n->n_inputs > 3 && n->inputs[3] >= 0 ? ot_shape_ivals(c, n->inputs[3]) : NULL;
    const ot_shape *sp = n->n_inputs > 4 && n->inputs[4] >= 0 ? ot_shape_ivals(c, n->inputs[4]) : NULL;
    bool has_axes = n->n_inputs > 3 && n->inputs[3] >= 0, has_steps = n->n_inputs > 4 && n->inputs[4] >= 0;
    ot_shape o = X;
    bool axes_known = !has_axes || ax;
    for (int j = 0; ax && j < ax->rank; j++) axes_known &= ot_shape_ival_known(ax, j) != 0;
    if (!axes_known) { /* any dim may be sliced */
        for (int i = 0; i < o.rank; i++) o.dim[i] = -1, o.sym[i] = -1;
        *out = o;
        return OT_OK;
    }
    int count = st ? st->rank : (en ? en->rank : (ax ? ax->rank : -1));
    if (count < 0) {
        const ot_value *sv = ot_shape_input(c, n, 1);
        if (sv && sv->shape.rank == 1 && sv->shape.dim[0] == X.rank) count = X.rank;
        else {
            for (int i = 0; i < o.rank; i++) o.dim[i] = -1, o.sym[i] = -1;
            *out = o;
            return OT_OK;
        }
    }
    if ((st && st->rank != count) || (en && en->rank != count) || (ax && ax->rank != count) ||
        (sp && sp->rank != count))
        return ot_shape_fail(c, n, "starts, ends, axes and steps differ in length");
    bool seen[OT_MAX_RANK] = {false};
    for (int j = 0; j < count; j++) {
        int64_t axis = ax ? ax->dim[j] : j;
        int d;
        ot_status rc = ot_shape_axis(c, n, axis, X.rank, false, &X, &d);
        if (rc) return rc;
        if (seen[d]) return ot_shape_fail(c, n, "axis %lld repeated", (long long)axis);
        seen[d] = true;
        bool known = st && en && ot_shape_ival_known(st, j) && ot_shape_ival_known(en, j) &&
                     (!has_steps || (sp && ot_shape_ival_known(sp, j)));
        o.sym[d] = -1;
        o.dim[d] = -1;
        if (!known) continue;
        int64_t s = st->dim[j], e = en->dim[j], step = has_steps ? sp->dim[j] : 1, dim = X.dim[d];
        if (step == 0) return ot_shape_fail(c, n, "step 0 on axis %lld", (long long)axis);
        if (dim < 0) { /* x[0:] and x[0:INT_MAX] keep a symbolic dim */
            if (step == 1 && s == 0 && e >= INT32_MAX) o.dim[d] = X.dim[d], o.sym[d] = X.sym[d];
            continue;
        }
        if (s < 0) s += dim;
        if (e < 0) e += dim;
        int64_t len = 0, t;
        /* the kernel's own formula, checked: a step of INT64_MIN / INT64_MAX overflows it */
        bool fits = true;
        if (step > 0) {
            s = s < 0 ? 0 : (s > dim ? dim : s);
            e = e < 0 ? 0 : (e > dim ? dim : e);
            if (e > s) fits = ot_i64_add(e - s, step - 1, &t) && (len = t / step, true);
        } else {
            s = s < 0 ? 0 : (s > dim - 1 ? dim - 1 : s);
            e = e < -1 ? -1 : (e > dim - 1 ? dim - 1 : e);
            if (s > e) fits = step != INT64_MIN && ot_i64_add(s - e, -step - 1, &t) && (len = t / (-step), true);
        }
        if (!fits)
            return ot_shape_fail_model(c, n, "step %lld on axis %lld overflows int64 with the bounds of %s",
                                       (long long)step, (long long)axis, SHP(&X, a));
        o.dim[d] = len;
        if (len == dim) o.sym[d] = X.sym[d];
    }
    *out = o;
    return OT_OK;
}

static ot_status rule_concat(ot_shape_ctx *c, const ot_node *n, ot_shape *out) {
    char a[160], b[160];
    const ot_value *first = NULL;
    ot_shape o = ot_shape_unknown();
    int64_t axis = ot_node_attr_int(n, "axis", 0);
    int ax = -1;
    int64_t sum = 0;
    bool sum_known = true;
    for (int i = 0; i < n->n_inputs; i++) {
        const ot_value *v = ot_shape_input(c, n, i);
        if (!v) continue;
        if (v->shape.rank < 0) {
            sum_known = false;
            continue;
        }
        if (o.rank < 0) {
            o = v->shape;
            first = v;
            ot_status rc = ot_shape_axis(c, n, axis, o.rank, false, &o, &ax);
            if (rc) return rc;
        } else if (v->shape.rank != o.rank) {
            return ot_shape_fail(c, n, "inputs '%s' %s and '%s' %s differ in rank", first->name, SHP(&first->shape, a),
                                 v->name, SHP(&v->shape, b));
        }
        for (int d = 0; d < o.rank; d++) {
            if (d == ax) continue;
            if (o.dim[d] >= 0 && v->shape.dim[d] >= 0 && o.dim[d] != v->shape.dim[d])
                return ot_shape_fail(c, n, "inputs '%s' %s and '%s' %s differ on dim %d", first->name,
                                     SHP(&first->shape, a), v->name, SHP(&v->shape, b), d);
            if (o.dim[d] < 0 && (v->shape.dim[d] >= 0 || o.sym[d] < 0))
                o.dim[d] = v->shape.dim[d], o.sym[d] = v->shape.sym[d];
        }
        if (v->shape.dim[ax] < 0) sum_known = false;
        else if (!ot_i64_add(sum, v->shape.dim[ax], &sum))
            return ot_shape_fail(c, n, "the inputs' sizes on axis %d add up past int64 (%lld + input '%s' %s)", ax,
                                 (long long)sum, v->name, SHP(&v->shape, a));
    }
    if (o.rank >= 0) {
        o.dim[ax] = sum_known ? sum : -1;
        o.sym[ax] = -1;
    }
    *out = o;
    return OT_OK;
}

static ot_status rule_split(ot_shape_ctx *c, const ot_node *n, ot_shape *sh) {
    char a[160];
    ot_shape X = shape_of(ot_shape_input(c, n, 0));
    if (X.rank < 0) return OT_OK;
    int ax;
    ot_status rc = ot_shape_axis(c, n, ot_node_attr_int(n, "axis", 0), X.rank, false, &X, &ax);
    if (rc) return rc;
    int ns = 0;
    const int64_t *split = ot_node_attr_ints(n, "split", &ns);
    int64_t buf[OT_MAX_RANK];
    if (!split && n->n_inputs > 1 && n->inputs[1] >= 0) {
        const ot_shape *iv = ot_shape_ivals(c, n->inputs[1]);
        bool ok = iv != NULL;
        for (int j = 0; ok && j < iv->rank; j++) ok = ot_shape_ival_known(iv, j), buf[j] = iv->dim[j];
        if (ok) split = buf, ns = iv->rank;
    }
    int64_t dim = X.dim[ax];
    for (int o = 0; o < n->n_outputs; o++) {
        sh[o] = X;
        sh[o].dim[ax] = -1;
        sh[o].sym[ax] = -1;
    }
    if (split) {
        if (ns != n->n_outputs)
            return ot_shape_fail(c, n, "split has %d sizes for %d outputs", ns, n->n_outputs);
        int64_t total = 0;
        for (int o = 0; o < ns; o++) {
            if (split[o] < 0) return ot_shape_fail(c, n, "split size %lld < 0", (long long)split[o]);
            sh[o].dim[ax] = split[o];
            if (!ot_i64_add(total, split[o], &total))
                return ot_shape_fail_model(c, n, "split sizes add up past int64 (size %d is %lld)", o,
                                           (long long)split[o]);
        }
        if (dim >= 0 && total != dim)
            return ot_shape_fail(c, n, "split sizes add up to %lld but axis %d of %s has %lld", (long long)total, ax,
                                 SHP(&X, a), (long long)dim);
    } else if (dim >= 0) { /* equal parts; the last one smaller when uneven (opset 18) */
        int64_t parts = n->n_outputs, each = dim / parts + (dim % parts != 0), used;
        for (int o = 0; o < n->n_outputs; o++) {
            int64_t left = ot_i64_mul(each, o, &used) ? dim - used : -1; /* past int64: past dim too */
            sh[o].dim[ax] = left < 0 ? 0 : (left < each ? left : each);
        }
    }
    return OT_OK;
}

static ot_status rule_gather(ot_shape_ctx *c, const ot_node *n, ot_shape *out) {
    char a[160];
    ot_shape X = shape_of(ot_shape_input(c, n, 0)), I = shape_of(ot_shape_input(c, n, 1));
    if (X.rank < 0 || I.rank < 0) return OT_OK;
    int ax;
    ot_status rc = ot_shape_axis(c, n, ot_node_attr_int(n, "axis", 0), X.rank, false, &X, &ax);
    if (rc) return rc;
    if (X.rank - 1 + I.rank > OT_MAX_RANK) return ot_shape_fail(c, n, "result rank above %d", OT_MAX_RANK);
    const ot_shape *iv = ot_shape_ivals(c, n->inputs[1]);
    for (int j = 0; iv && X.dim[ax] >= 0 && j < iv->rank; j++)
        if (ot_shape_ival_known(iv, j) && (iv->dim[j] >= X.dim[ax] || iv->dim[j] < -X.dim[ax]))
            return ot_shape_fail(c, n, "index %lld out of range for axis %d of %s", (long long)iv->dim[j], ax,
                                 SHP(&X, a));
    ot_shape o = ot_shape_make(0, NULL);
    for (int i = 0; i < ax; i++) o.dim[o.rank] = X.dim[i], o.sym[o.rank++] = X.sym[i];
    for (int i = 0; i < I.rank; i++) o.dim[o.rank] = I.dim[i], o.sym[o.rank++] = I.sym[i];
    for (int i = ax + 1; i < X.rank; i++) o.dim[o.rank] = X.dim[i], o.sym[o.rank++] = X.sym[i];
    *out = o;
    return OT_OK;
}

void ot_shape_range_attrs(const ot_node *n, int r, int *s, int *e) {
    int64_t a = ot_node_attr_int(n, "start", 0), b = ot_node_attr_int(n, "end", r);
    if (a < 0) a += r;
    if (b < 0) b += r;
    a = a < 0 ? 0 : (a > r ? r : a);
    b = b < 0 ? 0 : (b > r ? r : b);
    *s = (int)a;
    *e = (int)(b < a ? a : b);
}

/* A scalar input's value as a double (Range), from constant data of any numeric dtype. */
static bool scalar_value(ot_shape_ctx *c, const ot_value *v, double *x) {
    if (!v) return false;
    const ot_shape *iv = ot_shape_ivals(c, v->id);
    if (iv && iv->rank == 1 && ot_shape_ival_known(iv, 0)) return *x = (double)iv->dim[0], true;
    if (!v->data || v->kind != OT_VK_CONSTANT || ot_shape_numel(&v->shape) != 1) return false;
    switch (v->dtype) {
    case OT_F32: { float f; memcpy(&f, v->data, 4); *x = f; return true; }
    case OT_F64: memcpy(x, v->data, 8); return true;
    case OT_I32: { int32_t i; memcpy(&i, v->data, 4); *x = i; return true; }
    case OT_I64: { int64_t i; memcpy(&i, v->data, 8); *x = (double)i; return true; }
    default: return false;
    }
}

ot_status ot_shape_rule_constant(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_attr *a;
    if ((a = ot_node_attr(n, "value")) && a->type == OT_ATTR_TENSOR && a->t) {
        dt[0] = a->t->dtype;
        sh[0] = a->t->shape;
    } else if ((a = ot_node_attr(n, "value_float")) && a->type == OT_ATTR_FLOAT) {
        dt[0] = OT_F32, sh[0] = ot_shape_make(0, NULL);
    } else if ((a = ot_node_attr(n, "value_int")) && a->type == OT_ATTR_INT) {
        dt[0] = OT_I64, sh[0] = ot_shape_make(0, NULL);
    } else if ((a = ot_node_attr(n, "value_floats")) && a->type == OT_ATTR_FLOATS) {
        dt[0] = OT_F32, sh[0] = ot_shape_make(1, (int64_t[]){a->n});
    } else if ((a = ot_node_attr(n, "value_ints")) && a->type == OT_ATTR_INTS) {
        dt[0] = OT_I64, sh[0] = ot_shape_make(1, (int64_t[]){a->n});
    } else {
        return ot_shape_fail(c, n, "Constant without a value attribute onnxtrain supports");
    }
    return OT_OK;
}

/* Output 0 takes the dtype of input 0 unless the rule says otherwise; returns input 0. */
static const ot_value *dtype_from_input0(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt) {
    const ot_value *x = ot_shape_input(c, n, 0);
    dt[0] = dtype_of(x);
    return x;
}

ot_status ot_shape_rule_reshape(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    dtype_from_input0(c, n, dt);
    return rule_reshape(c, n, &sh[0]);
}

ot_status ot_shape_rule_slice(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    dtype_from_input0(c, n, dt);
    return rule_slice(c, n, &sh[0]);
}

ot_status ot_shape_rule_concat(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    dtype_from_input0(c, n, dt);
    return rule_concat(c, n, &sh[0]);
}

ot_status ot_shape_rule_split(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    dtype_from_input0(c, n, dt);
    for (int o = 1; o < n->n_outputs; o++) dt[o] = dt[0];
    return rule_split(c, n, sh);
}

ot_status ot_shape_rule_gather(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    dtype_from_input0(c, n, dt);
    return rule_gather(c, n, &sh[0]);
}

ot_status ot_shape_rule_flatten(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    ot_shape X = shape_of(dtype_from_input0(c, n, dt));
    if (X.rank < 0) return OT_OK;
    int ax;
    ot_status rc = ot_shape_axis(c, n, ot_node_attr_int(n, "axis", 1), X.rank, true, &X, &ax);
    if (rc) return rc;
    sh[0] = ot_shape_make(2, NULL);
    char a[160];
    if (!ot_shape_dim_product(&X, 0, ax, &sh[0].dim[0], &sh[0].sym[0]) ||
        !ot_shape_dim_product(&X, ax, X.rank, &sh[0].dim[1], &sh[0].sym[1]))
        return ot_shape_fail(c, n, "flattening %s at axis %d: a product of its dims overflows int64", SHP(&X, a), ax);
    return OT_OK;
}

ot_status ot_shape_rule_transpose(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160];
    ot_shape X = shape_of(dtype_from_input0(c, n, dt));
    if (X.rank < 0) return OT_OK;
    int np = 0;
    const int64_t *perm = ot_node_attr_ints(n, "perm", &np);
    bool seen[OT_MAX_RANK] = {false};
    if (perm && np != X.rank) return ot_shape_fail(c, n, "perm has %d entries for %s", np, SHP(&X, a));
    sh[0] = X;
    for (int i = 0; i < X.rank; i++) {
        int64_t p = perm ? perm[i] : X.rank - 1 - i;
        if (p < 0 || p >= X.rank || seen[p]) return ot_shape_fail(c, n, "perm is not a permutation of %d axes", X.rank);
        seen[p] = true;
        sh[0].dim[i] = X.dim[p];
        sh[0].sym[i] = X.sym[p];
    }
    return OT_OK;
}

/* Squeeze and Unsqueeze. */
ot_status ot_shape_rule_squeeze(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160];
    ot_shape X = shape_of(dtype_from_input0(c, n, dt));
    int64_t axes[OT_MAX_RANK];
    int na = get_axes(c, n, 1, axes);
    if (X.rank < 0 || na < 0) return OT_OK;
    bool squeeze = n->op == OT_OP_SQUEEZE, mark[OT_MAX_RANK] = {false};
    int r = squeeze ? X.rank : X.rank + na;
    if (r > OT_MAX_RANK) return ot_shape_fail(c, n, "result rank above %d", OT_MAX_RANK);
    for (int j = 0; j < na; j++) {
        int d;
        ot_status rc = ot_shape_axis(c, n, axes[j], r, false, &X, &d);
        if (rc) return rc;
        if (mark[d]) return ot_shape_fail_model(c, n, "axis %lld repeated for %s", (long long)axes[j], SHP(&X, a));
        if (squeeze && X.dim[d] >= 0 && X.dim[d] != 1)
            return ot_shape_fail(c, n, "cannot squeeze axis %d of %s: it is not 1", d, SHP(&X, a));
        mark[d] = true;
    }
    ot_shape o = ot_shape_make(0, NULL);
    for (int i = 0, k = 0; i < r; i++) {
        if (squeeze) {
            /* No axes: drop every dim of 1; a symbolic dim is taken to be > 1. */
            bool drop = na ? mark[i] : X.dim[i] == 1;
            if (!na && X.dim[i] < 0 && X.sym[i] < 0) return OT_OK;
            if (!drop) o.dim[o.rank] = X.dim[i], o.sym[o.rank++] = X.sym[i];
        } else if (mark[i]) {
            o.dim[o.rank++] = 1;
        } else {
            o.dim[o.rank] = X.dim[k], o.sym[o.rank++] = X.sym[k++];
        }
    }
    sh[0] = o;
    return OT_OK;
}

ot_status ot_shape_rule_shape(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    ot_shape X = shape_of(ot_shape_input(c, n, 0));
    dt[0] = OT_I64;
    if (X.rank < 0) {
        sh[0] = ot_shape_make(1, (int64_t[]){-1});
    } else {
        int s, e;
        ot_shape_range_attrs(n, X.rank, &s, &e);
        sh[0] = ot_shape_make(1, (int64_t[]){e - s});
    }
    return OT_OK;
}

ot_status ot_shape_rule_range(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *x = dtype_from_input0(c, n, dt);
    double s, l, d;
    sh[0] = ot_shape_make(1, (int64_t[]){-1});
    bool ks = scalar_value(c, x, &s), kd = scalar_value(c, ot_shape_input(c, n, 2), &d);
    const ot_value *lv = ot_shape_input(c, n, 1);
    if (!scalar_value(c, lv, &l)) {
        /* Range(0, seq, 1) over a symbolic dim (position ids) has seq elements */
        const ot_shape *liv = lv ? ot_shape_ivals(c, lv->id) : NULL;
        if (ks && kd && s == 0 && d == 1 && liv && liv->rank == 1) sh[0].sym[0] = liv->sym[0];
        return OT_OK;
    }
    if (!ks || !kd) return OT_OK;
    if (d == 0) return ot_shape_fail(c, n, "delta is 0");
    double cnt = ceil((l - s) / d);
    /* checked before the conversion, which is undefined past int64 (and for NaN) */
    if (!(cnt < 9.2e18))
        return ot_shape_fail(c, n, "Range(%g, %g, %g) would have %g elements: past int64", s, l, d, cnt);
    sh[0].dim[0] = cnt > 0 ? (int64_t)cnt : 0;
    return OT_OK;
}

ot_status ot_shape_rule_expand(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160], b[160];
    ot_shape X = shape_of(dtype_from_input0(c, n, dt));
    const ot_value *sv = ot_shape_input(c, n, 1);
    const ot_shape *iv = sv ? ot_shape_ivals(c, sv->id) : NULL;
    if (!iv) {
        ot_shape r = rank_from_length(sv);
        if (r.rank >= 0 && X.rank > r.rank) r.rank = X.rank; /* dims stay unknown */
        for (int i = 0; i < r.rank; i++) r.dim[i] = -1, r.sym[i] = -1;
        sh[0] = r;
        return OT_OK;
    }
    ot_shape target = *iv;
    for (int j = 0; j < target.rank; j++)
        if (target.sym[j] == OT_IVAL_CONST) return ot_shape_fail(c, n, "shape %s has a negative entry", IVS(iv, a));
    if (!ot_shape_broadcast(&X, &target, &sh[0]))
        return ot_shape_fail(c, n, "cannot expand %s to %s", SHP(&X, a), SHP(&target, b));
    return OT_OK;
}

ot_status ot_shape_rule_constant_of_shape(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160];
    const ot_value *x = ot_shape_input(c, n, 0);
    const ot_attr *va = ot_node_attr(n, "value");
    dt[0] = (va && va->type == OT_ATTR_TENSOR && va->t) ? va->t->dtype : OT_F32;
    const ot_shape *iv = x ? ot_shape_ivals(c, x->id) : NULL;
    if (!iv) {
        sh[0] = rank_from_length(x);
        return OT_OK;
    }
    sh[0] = *iv;
    for (int j = 0; j < iv->rank; j++)
        if (iv->sym[j] == OT_IVAL_CONST) return ot_shape_fail(c, n, "shape %s has a negative entry", IVS(iv, a));
    return OT_OK;
}
