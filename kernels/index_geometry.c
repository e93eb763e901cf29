/* index_geometry.c — the host side of index_geometry.h: Pad, Tile, GatherElements
 * and CumSum geometry from a node's shapes and int inputs, checked once for both
 * backends. */
#include "kernels/index_geometry.h"

#include <string.h>

#include "kernels/kernel_common.h"

static ot_status bad(const ot_node *node, ot_status code, const char *what, ot_error *err) {
    return ot_fail(err, code, "node '%s' (%s): %s", node->name, node->op_type ? node->op_type : "?", what);
}

ot_status ot_pad_geometry(const ot_node *node, ot_pad_mode mode, const int64_t *pads, int n_pads, const int64_t *axes,
                          int n_axes, const ot_shape *xs, const ot_shape *ys, ot_pad_geom *g, ot_error *err) {
    int r = xs->rank;
    if (mode == OT_PAD_OTHER) return bad(node, OT_E_UNSUPPORTED, "mode must be constant, reflect, edge or wrap", err);
    if (ys->rank != r) return bad(node, OT_E_SHAPE, "output rank differs from the input's", err);
    int na = axes ? n_axes : r;
    if (n_pads != 2 * na) return bad(node, OT_E_MODEL, "pads must hold 2 entries per padded axis", err);
    g->rank = r;
    g->mode = mode;
    for (int d = 0; d < r; d++) {
        g->n[d] = xs->dim[d];
        g->m[d] = ys->dim[d];
        g->b[d] = 0;
    }
    int64_t end[OT_MAX_RANK] = {0};
    unsigned seen = 0;
    for (int j = 0; j < na; j++) {
        int d = axes ? ot_kernel_axis(axes[j], r) : j;
        if (d < 0 || (seen & (1u << d))) return bad(node, OT_E_MODEL, "axes out of range or repeated", err);
        seen |= 1u << d;
        g->b[d] = pads[j];
        end[d] = pads[j + na];
    }
    for (int d = 0; d < r; d++) {
        if (g->n[d] + g->b[d] + end[d] != g->m[d]) return bad(node, OT_E_SHAPE, "output shape differs from the pads", err);
        if (mode != OT_PAD_CONSTANT && g->n[d] == 0 && g->m[d] > 0)
            return bad(node, OT_E_MODEL, "reflect / edge / wrap padding of an empty axis", err);
    }
    return OT_OK;
}

ot_status ot_pad_fill_bytes(const ot_node *node, double v, ot_dtype t, unsigned char *bytes, ot_error *err) {
    memset(bytes, 0, 8);
    switch (t) {
    case OT_F32: { float f = (float)v; memcpy(bytes, &f, 4); break; }
    case OT_F64: memcpy(bytes, &v, 8); break;
    case OT_I64: { int64_t i = (int64_t)v; memcpy(bytes, &i, 8); break; }
    case OT_I32: { int32_t i = (int32_t)v; memcpy(bytes, &i, 4); break; }
    case OT_I8: { int8_t i = (int8_t)v; memcpy(bytes, &i, 1); break; }
    case OT_U8: { uint8_t i = (uint8_t)v; memcpy(bytes, &i, 1); break; }
    case OT_BOOL: bytes[0] = v != 0.0; break;
    default:
        if (v != 0.0) return bad(node, OT_E_UNSUPPORTED, "a nonzero constant_value for this data dtype", err);
    }
    return OT_OK;
}

ot_status ot_tile_geometry(const ot_node *node, const ot_shape *xs, const ot_shape *ys, ot_pad_geom *g,
                           ot_error *err) {
    if (ys->rank != xs->rank) return bad(node, OT_E_SHAPE, "ranks of the tiled and the input differ", err);
    g->rank = xs->rank;
    g->mode = OT_PAD_WRAP;
    for (int d = 0; d < xs->rank; d++) {
        g->n[d] = xs->dim[d];
        g->m[d] = ys->dim[d];
        g->b[d] = 0;
        if (g->n[d] == 0 ? g->m[d] != 0 : g->m[d] % g->n[d] != 0)
            return bad(node, OT_E_SHAPE, "tiled dims are not multiples of the input's", err);
    }
    return OT_OK;
}

ot_status ot_gather_el_geometry(const ot_node *node, int axis, const ot_shape *ds, const ot_shape *is,
                                ot_gather_el_geom *g, ot_error *err) {
    int r = ds->rank;
    if (is->rank != r || r == 0) return bad(node, OT_E_SHAPE, "indices and data differ in rank (or are scalars)", err);
    g->rank = r;
    g->axis = ot_kernel_axis(axis, r);
    if (g->axis < 0) return bad(node, OT_E_MODEL, "axis out of range", err);
    int64_t acc = 1;
    for (int d = r - 1; d >= 0; d--) {
        g->is[d] = is->dim[d];
        g->dst[d] = acc;
        acc *= ds->dim[d];
        if (d != g->axis && is->dim[d] > ds->dim[d])
            return bad(node, OT_E_SHAPE, "indices exceed data on a dim other than axis", err);
    }
    g->d_axis = ds->dim[g->axis];
    return OT_OK;
}

ot_status ot_nd_geometry(const ot_node *node, const ot_shape *ds, const ot_shape *is, int batch_dims, ot_nd_geom *g,
                         ot_error *err) {
    int r = ds->rank, b = batch_dims;
    if (is->rank < 1 || b < 0 || b >= is->rank || b >= r) return bad(node, OT_E_MODEL, "batch_dims does not fit the ranks", err);
    int64_t q = is->dim[is->rank - 1];
    if (q < 0 || b + q > r) return bad(node, OT_E_SHAPE, "index tuples longer than the data's rank", err);
    g->q = (int)q;
    int64_t acc = 1;
    for (int d = r - 1; d >= 0; d--) {
        if (d >= b && d < b + q) {
            g->dim[d - b] = ds->dim[d];
            g->stride[d - b] = acc;
        }
        if (d == b) g->batch_stride = acc * ds->dim[d];
        acc *= ds->dim[d];
    }
    if (b == 0) g->batch_stride = 0;
    g->slice = 1;
    for (int d = b + (int)q; d < r; d++) g->slice *= ds->dim[d];
    g->n_tuples = 1;
    for (int d = 0; d < is->rank - 1; d++) g->n_tuples *= is->dim[d];
    int64_t batches = 1;
    for (int d = 0; d < b; d++) {
        if (is->dim[d] != ds->dim[d]) return bad(node, OT_E_SHAPE, "batch dims of data and indices differ", err);
        batches *= ds->dim[d];
    }
    g->tuples_per_batch = batches ? g->n_tuples / batches : 1;
    if (g->tuples_per_batch == 0) g->tuples_per_batch = 1;
    return OT_OK;
}

ot_status ot_cumsum_geometry(const ot_node *node, int64_t axis, const ot_shape *xs, int64_t *outer, int64_t *n,
                             int64_t *inner, ot_error *err) {
    int a = ot_kernel_axis(axis, xs->rank);
    if (a < 0) return bad(node, OT_E_MODEL, "axis out of range", err);
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < a; d++) *outer *= xs->dim[d];
    for (int d = a + 1; d < xs->rank; d++) *inner *= xs->dim[d];
    *n = xs->dim[a];
    return OT_OK;
}

ot_status ot_gather_geometry(const ot_node *node, const ot_shape *data, const ot_tensor *indices,
                             int64_t gathered_numel, ot_gather_geom *g, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    g->axis = ot_kernel_axis(pp->u.layout.axis, data->rank);
    if (g->axis < 0) return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): axis out of range", node->name, node->op_type);
    g->outer = g->inner = 1;
    g->n_axis = data->dim[g->axis];
    g->n_idx = ot_kernel_numel(indices);
    for (int d = 0; d < g->axis; d++) g->outer *= data->dim[d];
    for (int d = g->axis + 1; d < data->rank; d++) g->inner *= data->dim[d];
    if (gathered_numel != g->outer * g->n_idx * g->inner)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): %s has %lld elements, not data[:axis] x indices x data[axis+1:]",
                       node->name, node->op_type, node->op == OT_OP_GATHER ? "the output" : "dY",
                       (long long)gathered_numel);
    return OT_OK;
}
