/* kernel_common.c — the backend-neutral kernel helpers of kernel_common.h: axis
 * normalisation, the broadcasting iterator, dtype loads and half-float conversion. */
#include "kernels/kernel_common.h"

#include <string.h>

#include "kernels/half_float.h"
#include "kernels/pointwise_math.h" /* OT_MINMAX_GRAD_MAX_IN */

int ot_kernel_axis(int64_t axis, int rank) {
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return -1;
    return (int)axis;
}

/* ---- broadcasting ----------------------------------------------------------- */

ot_status ot_kernel_bcast(const ot_node *node, const ot_tensor *in, int n_in, const ot_tensor *out, ot_bcast *b,
                          ot_error *err) {
    const ot_shape *shapes[OT_BCAST_MAX_IN];
    for (int k = 0; k < n_in; k++) shapes[k] = &in[k].shape;
    if (!ot_bcast_init(b, &out->shape, shapes, n_in))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): input shapes do not broadcast to the output shape",
                       node->name, node->op_type);
    return OT_OK;
}

/* ---- elementwise launch checks ---------------------------------------------- */

ot_status ot_kernel_same_numel(const ot_node *node, const ot_tensor *x, const ot_tensor *y, ot_error *err) {
    if (ot_kernel_numel(x) != ot_kernel_numel(y))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output has %lld elements, input %lld", node->name,
                       node->op_type, (long long)ot_kernel_numel(y), (long long)ot_kernel_numel(x));
    return OT_OK;
}

ot_status ot_kernel_grad_dy_x(const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                              ot_kernel_bad_dtype_fn bad, int64_t *n, ot_op_params *scratch,
                              const ot_op_params **pp, ot_error *err) {
    if (in[0].dtype != OT_F32 || in[1].dtype != OT_F32) return bad(node, "input", in[1].dtype, err);
    *n = ot_kernel_numel(&out[0]);
    if (ot_kernel_numel(&in[0]) != *n || ot_kernel_numel(&in[1]) != *n)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): dY, X and dX differ in size", node->name, node->op_type);
    return ot_node_params(node, scratch, pp, err);
}

ot_status ot_kernel_minmax_grad_check(const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                                      ot_kernel_bad_dtype_fn bad, int *nx, int *k, int64_t *n, ot_error *err) {
    *nx = node->n_inputs - 2;
    if (*nx < 1 || *nx > OT_MINMAX_GRAD_MAX_IN)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): %d forward inputs (1 to %d)", node->name, node->op_type,
                       *nx, OT_MINMAX_GRAD_MAX_IN);
    for (int j = 0; j < node->n_inputs; j++)
        if (in[j].dtype != OT_F32) return bad(node, "input", in[j].dtype, err);
    *n = ot_kernel_numel(&out[0]);
    if (ot_kernel_numel(&in[0]) != *n || ot_kernel_numel(&in[1]) != *n)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): dY, Y and dX differ in size", node->name, node->op_type);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    *k = pp->u.math.index;
    if (*k < 0 || *k >= *nx)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): index %d is not one of its %d inputs", node->name,
                       node->op_type, *k, *nx);
    return OT_OK;
}

ot_status ot_kernel_concat_axis(const ot_node *node, const ot_shape *s, size_t es, ot_op_params *scratch,
                                const ot_layout_params **lp, int *axis, ot_error *err) {
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, scratch, &pp, err);
    if (st) return st;
    *lp = &pp->u.layout;
    *axis = ot_kernel_axis((*lp)->axis, s->rank);
    if (*axis < 0 || !es)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): axis out of range or bad dtype", node->name, node->op_type);
    return OT_OK;
}

int64_t ot_kernel_split_len(const ot_node *node, const ot_layout_params *lp, const ot_tensor *out, int k, int axis,
                            int64_t dim) {
    if (lp->split && lp->n_split == node->n_outputs) return lp->split[k];
    if (out[k].data) return out[k].shape.dim[axis];
    return dim / node->n_outputs;
}

bool ot_bcast_init(ot_bcast *b, const ot_shape *out, const ot_shape *const *ins, int n_in) {
    memset(b, 0, sizeof *b);
    b->n_in = n_in;
    int r = out->rank;
    int64_t dim[OT_MAX_RANK];
    int64_t st[OT_BCAST_MAX_IN][OT_MAX_RANK];
    for (int d = 0; d < r; d++) dim[d] = out->dim[d];
    for (int k = 0; k < n_in; k++) {
        const ot_shape *s = ins[k];
        if (s->rank > r) return false;
        int64_t acc = 1;
        for (int d = r - 1; d >= 0; d--) {
            int sd = d - (r - s->rank);
            int64_t n = sd >= 0 ? s->dim[sd] : 1;
            if (n == dim[d]) {
                st[k][d] = (n == 1) ? 0 : acc;
            } else if (n == 1) {
                st[k][d] = 0;
            } else {
                return false;
            }
            acc *= n;
        }
    }
    /* Merge dims: drop size-1 dims, then merge d into the next kept dim when every
     * input's stride continues contiguously (or stays 0 on both). */
    int nr = 0;
    int64_t nd[OT_MAX_RANK];
    int64_t ns[OT_BCAST_MAX_IN][OT_MAX_RANK];
    for (int d = 0; d < r; d++) {
        if (dim[d] == 1) continue;
        if (nr > 0) {
            bool merge = true;
            for (int k = 0; k < n_in; k++) {
                if (ns[k][nr - 1] != st[k][d] * dim[d]) merge = false;
            }
            if (merge) {
                nd[nr - 1] *= dim[d];
                for (int k = 0; k < n_in; k++) ns[k][nr - 1] = st[k][d];
                continue;
            }
        }
        nd[nr] = dim[d];
        for (int k = 0; k < n_in; k++) ns[k][nr] = st[k][d];
        nr++;
    }
    if (nr == 0) {
        nd[0] = 1;
        for (int k = 0; k < n_in; k++) ns[k][0] = 0;
        nr = 1;
    }
    b->rank = nr;
    b->rows = 1;
    for (int d = 0; d < nr; d++) {
        b->dim[d] = nd[d];
        for (int k = 0; k < n_in; k++) b->stride[k][d] = ns[k][d];
        if (d < nr - 1) b->rows *= nd[d];
    }
    b->inner = nd[nr - 1];
    for (int d = 0; d < r; d++)
        if (out->dim[d] == 0) b->rows = 0;
    return true;
}

void ot_bcast_row(const ot_bcast *b, int64_t row, int64_t *off) {
    for (int k = 0; k < b->n_in; k++) off[k] = 0;
    for (int d = b->rank - 2; d >= 0; d--) {
        int64_t i = row % b->dim[d];
        row /= b->dim[d];
        for (int k = 0; k < b->n_in; k++) off[k] += i * b->stride[k][d];
    }
}

/* ---- dtypes ----------------------------------------------------------------- */

/* The conversions themselves are in kernels/half_float.h, shared with CUDA. */
float ot_f16_to_f32(uint16_t h) { return ot_hf_f16_to_f32(h); }
uint16_t ot_f32_to_f16(float f) { return ot_hf_f32_to_f16(f); }
float ot_bf16_to_f32(uint16_t h) { return ot_hf_bf16_to_f32(h); }
uint16_t ot_f32_to_bf16(float f) { return ot_hf_f32_to_bf16(f); }

bool ot_kernel_is_int_dtype(ot_dtype t) {
    return t == OT_I64 || t == OT_I32 || t == OT_I8 || t == OT_U8 || t == OT_BOOL;
}

bool ot_kernel_load_int(ot_dtype t, const void *p, int64_t i, int64_t *v) {
    switch (t) {
    case OT_I64: *v = ((const int64_t *)p)[i]; return true;
    case OT_I32: *v = ((const int32_t *)p)[i]; return true;
    case OT_I8: *v = ((const int8_t *)p)[i]; return true;
    case OT_U8: *v = ((const uint8_t *)p)[i]; return true;
    case OT_BOOL: *v = ((const uint8_t *)p)[i] != 0; return true;
    default: return false;
    }
}

bool ot_kernel_load_double(ot_dtype t, const void *p, int64_t i, double *v) {
    int64_t iv;
    switch (t) {
    case OT_F32: *v = ((const float *)p)[i]; return true;
    case OT_F64: *v = ((const double *)p)[i]; return true;
    case OT_F16: *v = ot_f16_to_f32(((const uint16_t *)p)[i]); return true;
    case OT_BF16: *v = ot_bf16_to_f32(((const uint16_t *)p)[i]); return true;
    default:
        if (!ot_kernel_load_int(t, p, i, &iv)) return false;
        *v = (double)iv;
        return true;
    }
}


ot_status ot_transpose_perm(const ot_node *node, const ot_shape *x, const ot_shape *y, int *perm, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    const int64_t *pa = pp->u.layout.perm;
    int r = x->rank;
    if (pa && pp->u.layout.n_perm != r)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): perm length differs from the rank", node->name,
                       node->op_type);
    unsigned seen = 0;
    for (int d = 0; d < r; d++) {
        perm[d] = pa ? (int)pa[d] : r - 1 - d;
        if (perm[d] < 0 || perm[d] >= r || (seen & (1u << perm[d])))
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): bad perm", node->name, node->op_type);
        seen |= 1u << perm[d];
        if (y->dim[d] != x->dim[perm[d]])
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output shape is not permuted input", node->name,
                           node->op_type);
    }
    return OT_OK;
}

ot_status ot_random_uniform_bounds(const ot_node *node, float *low, float *high, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    *low = pp->u.random.low;
    *high = pp->u.random.high;
    if (!(*low <= *high))
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): low %g is above high %g", node->name, node->op_type,
                       (double)*low, (double)*high);
    return OT_OK;
}

ot_status ot_prelu_grad_setup(const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                              ot_kernel_bad_dtype_fn bad, int *which, ot_bcast *b, ot_error *err) {
    for (int k = 0; k < 3; k++)
        if (in[k].dtype != OT_F32) return bad(node, "input", in[k].dtype, err);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    *which = pp->u.math.index;
    if (*which != 0 && *which != 1)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): index %d is not 0 (X) or 1 (slope)", node->name,
                       node->op_type, *which);
    return ot_kernel_bcast(node, in, 3, out, b, err);
}
