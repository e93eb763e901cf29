/* views.c — the layout test for views (see views.h): the byte offset of a view op's
 * output in its input, or "not a contiguous view". */
#include <string.h>

#include "plan/views.h"

bool ot_plan_view_candidate(const ot_node *nd) {
    return (ot_op_has(nd->op, OT_T_VIEW) || nd->op == OT_OP_SLICE) && nd->n_inputs > 0 && nd->n_outputs > 0 &&
           nd->inputs[0] >= 0 && nd->outputs[0] >= 0 && nd->inputs[0] != nd->outputs[0];
}

/* The integers of a constant int32/int64 value (at most max of them). */
static bool const_ints(const ot_graph *g, int v, int64_t *out, int max, int *n) {
    if (v < 0 || v >= g->n_values) return false;
    const ot_value *val = &g->values[v];
    size_t es = ot_dtype_size(val->dtype);
    if (!val->data || (val->dtype != OT_I64 && val->dtype != OT_I32) || val->nbytes % es) return false;
    size_t count = val->nbytes / es;
    if (count > (size_t)max) return false;
    for (size_t i = 0; i < count; i++) {
        if (val->dtype == OT_I64) memcpy(&out[i], (const char *)val->data + i * es, sizeof(int64_t));
        else {
            int32_t x;
            memcpy(&x, (const char *)val->data + i * es, sizeof x);
            out[i] = x;
        }
    }
    *n = (int)count;
    return true;
}

/* An optional constant input: absent is fine (*present false), present without
 * constant data is not. */
static bool optional_ints(const ot_graph *g, const ot_node *nd, int k, int64_t *out, int *n, bool *present) {
    *present = nd->n_inputs > k && nd->inputs[k] >= 0;
    return !*present || const_ints(g, nd->inputs[k], out, OT_MAX_RANK, n);
}

/* Slice: per axis its clamped start, with the same rules as the kernels (negative
 * indices count from the end; bounds clamp to the axis). False unless the output's
 * dims are what the bounds select, and every axis that keeps more than one index
 * steps by 1. */
static bool slice_starts(const ot_graph *g, const ot_node *nd, const ot_shape *x, const ot_shape *y, int64_t *start) {
    int64_t st[OT_MAX_RANK], en[OT_MAX_RANK], ax[OT_MAX_RANK], sp[OT_MAX_RANK];
    int ns = 0, ne = 0, na = 0, nsp = 0;
    bool has_axes, has_steps;
    if (nd->n_inputs < 3 || !const_ints(g, nd->inputs[1], st, OT_MAX_RANK, &ns) ||
        !const_ints(g, nd->inputs[2], en, OT_MAX_RANK, &ne) || ns != ne ||
        !optional_ints(g, nd, 3, ax, &na, &has_axes) || !optional_ints(g, nd, 4, sp, &nsp, &has_steps) ||
        (has_axes && na != ns) || (has_steps && nsp != ns))
        return false;
    bool seen[OT_MAX_RANK] = {false};
    for (int d = 0; d < x->rank; d++) start[d] = 0;
    for (int i = 0; i < ns; i++) {
        int64_t a = has_axes ? ax[i] : i;
        if (a < 0) a += x->rank;
        if (a < 0 || a >= x->rank || seen[a]) return false;
        seen[a] = true;
        int64_t step = has_steps ? sp[i] : 1, s;
        if (step == 0) return false;
        int64_t cnt = ot_slice_axis(x->dim[a], st[i], en[i], step, &s);
        if (cnt != y->dim[a] || (cnt > 1 && step != 1)) return false;
        start[a] = s;
    }
    for (int d = 0; d < x->rank; d++)
        if (!seen[d] && y->dim[d] != x->dim[d]) return false;
    return true;
}

static bool slice_offset(const ot_graph *g, const ot_node *nd, const ot_shape *x, const ot_shape *y,
                         int64_t *elems) {
    int64_t start[OT_MAX_RANK];
    if (y->rank != x->rank || !slice_starts(g, nd, x, y, start)) return false;
    /* One run: the axes after the last one that is cut are whole, and the axes
     * before it keep one index each. */
    int cut = -1;
    for (int d = 0; d < x->rank; d++)
        if (y->dim[d] != x->dim[d]) cut = d;
    for (int d = 0; d < cut; d++)
        if (y->dim[d] != 1) return false;
    int64_t off = 0, stride = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        off += start[d] * stride;
        stride *= x->dim[d];
    }
    *elems = off;
    return true;
}

bool ot_plan_view_offset(const ot_graph *g, const ot_node *nd, size_t *offset) {
    if (!ot_plan_view_candidate(nd)) return false;
    int i = nd->inputs[0], o = nd->outputs[0];
    if (i >= g->n_values || o >= g->n_values) return false;
    const ot_value *x = &g->values[i], *y = &g->values[o];
    size_t es = ot_dtype_size(x->dtype);
    int64_t nx = ot_shape_numel(&x->shape), ny = ot_shape_numel(&y->shape);
    if (x->dtype != y->dtype || es == 0 || nx <= 0 || ny <= 0) return false;
    if (nd->op != OT_OP_SLICE) {
        *offset = 0;
        return nx == ny;
    }
    int64_t elems = 0;
    if (!slice_offset(g, nd, &x->shape, &y->shape, &elems) || elems < 0 || elems + ny > nx) return false;
    *offset = (size_t)elems * es;
    return true;
}
