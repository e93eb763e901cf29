/* cpu_common.c — helpers shared by the CPU kernels: thread counts, broadcasting,
 * dtype loads, float16/bfloat16 conversion, pool/conv window geometry. */
#include "kernels/cpu/cpu_common.h"
#include "kernels/half_float.h"

#include <math.h>
#include <omp.h>

int ot_cpu_threads(const ot_kernel_ctx *ctx) {
    if (ctx && ctx->n_threads > 0) return ctx->n_threads;
    return omp_get_max_threads();
}

int64_t ot_cpu_numel(const ot_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->shape.rank; i++) n *= t->shape.dim[i];
    return n;
}

int ot_cpu_axis(int64_t axis, int rank) {
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return -1;
    return (int)axis;
}

ot_status ot_cpu_bad_dtype(const ot_node *node, const char *what, ot_dtype t, ot_error *err) {
    return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): the CPU kernel does not support %s of dtype %s",
                   node->name ? node->name : "?", node->op_type ? node->op_type : ot_op_name(node->op), what,
                   ot_dtype_name(t));
}

/* ---- broadcasting ----------------------------------------------------------- */

bool ot_cpu_bcast_init(ot_cpu_bcast *b, const ot_shape *out, const ot_shape *const *ins, int n_in) {
    memset(b, 0, sizeof *b);
    b->n_in = n_in;
    int r = out->rank;
    int64_t dim[OT_MAX_RANK];
    int64_t st[OT_CPU_BCAST_MAX_IN][OT_MAX_RANK];
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
    int64_t ns[OT_CPU_BCAST_MAX_IN][OT_MAX_RANK];
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

void ot_cpu_bcast_row(const ot_cpu_bcast *b, int64_t row, int64_t *off) {
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

bool ot_cpu_is_int_dtype(ot_dtype t) {
    return t == OT_I64 || t == OT_I32 || t == OT_I8 || t == OT_U8 || t == OT_BOOL;
}

bool ot_cpu_load_int(ot_dtype t, const void *p, int64_t i, int64_t *v) {
    switch (t) {
    case OT_I64: *v = ((const int64_t *)p)[i]; return true;
    case OT_I32: *v = ((const int32_t *)p)[i]; return true;
    case OT_I8: *v = ((const int8_t *)p)[i]; return true;
    case OT_U8: *v = ((const uint8_t *)p)[i]; return true;
    case OT_BOOL: *v = ((const uint8_t *)p)[i] != 0; return true;
    default: return false;
    }
}

bool ot_cpu_load_double(ot_dtype t, const void *p, int64_t i, double *v) {
    int64_t iv;
    switch (t) {
    case OT_F32: *v = ((const float *)p)[i]; return true;
    case OT_F64: *v = ((const double *)p)[i]; return true;
    case OT_F16: *v = ot_f16_to_f32(((const uint16_t *)p)[i]); return true;
    case OT_BF16: *v = ot_bf16_to_f32(((const uint16_t *)p)[i]); return true;
    default:
        if (!ot_cpu_load_int(t, p, i, &iv)) return false;
        *v = (double)iv;
        return true;
    }
}

/* ---- pool / conv windows -------------------------------------------------------- */

ot_status ot_cpu_window_init(ot_cpu_window *w, const ot_node *node, const ot_shape *x, const ot_shape *y,
                             const int64_t *kernel, ot_error *err) {
    memset(w, 0, sizeof *w);
    int nd = x->rank - 2;
    if (nd < 1 || nd > 3 || y->rank != x->rank)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): CPU kernel handles 1-D to 3-D spatial inputs, got rank %d",
                       node->name, node->op_type, x->rank);
    w->nd = nd;
    int n;
    const int64_t *strides = ot_node_attr_ints(node, "strides", &n);
    if (strides && n != nd) strides = NULL;
    const int64_t *dil = ot_node_attr_ints(node, "dilations", &n);
    if (dil && n != nd) dil = NULL;
    const int64_t *pads = ot_node_attr_ints(node, "pads", &n);
    if (pads && n != 2 * nd) pads = NULL;
    const char *auto_pad = ot_node_attr_string(node, "auto_pad", "NOTSET");
    for (int i = 0; i < nd; i++) {
        w->in[i] = x->dim[2 + i];
        w->out[i] = y->dim[2 + i];
        w->k[i] = kernel[i];
        w->stride[i] = strides ? strides[i] : 1;
        w->dil[i] = dil ? dil[i] : 1;
        if (w->k[i] < 1 || w->stride[i] < 1 || w->dil[i] < 1)
            return ot_fail(err, OT_E_MODEL, "node '%s' (%s): kernel, strides and dilations must be positive",
                           node->name, node->op_type);
        int64_t span = (w->k[i] - 1) * w->dil[i] + 1;
        if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
            int64_t total = (w->out[i] - 1) * w->stride[i] + span - w->in[i];
            if (total < 0) total = 0;
            int64_t small = total / 2;
            w->pad_begin[i] = strcmp(auto_pad, "SAME_UPPER") == 0 ? small : total - small;
            w->pad_end[i] = total - w->pad_begin[i];
        } else if (strcmp(auto_pad, "VALID") == 0) {
            w->pad_begin[i] = w->pad_end[i] = 0;
        } else {
            w->pad_begin[i] = pads ? pads[i] : 0;
            w->pad_end[i] = pads ? pads[nd + i] : 0;
        }
    }
    return OT_OK;
}

double ot_grad_sum_sq(const float *g, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * (double)g[i];
    return s;
}
