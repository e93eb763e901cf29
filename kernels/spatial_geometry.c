/* spatial_geometry.c — the host half of spatial_geometry.h: Resize's per-axis scales
 * and output sizes from its inputs, as ONNX's reference computes them, and the
 * DepthToSpace / SpaceToDepth geometry, checked against the shapes the planner gave. */
#include "kernels/spatial_geometry.h"

#include <string.h>

static ot_status bad(const ot_node *node, ot_status code, const char *what, ot_error *err) {
    return ot_fail(err, code, "node '%s' (%s): %s", node->name, node->op_type, what);
}

ot_status ot_resize_check_params(const ot_node *node, const ot_resize_params *p, ot_error *err) {
    if (p->mode == OT_RESIZE_MODE_OTHER)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): unknown mode '%s' (nearest, linear or cubic)", node->name,
                       node->op_type, p->mode_name);
    if (p->ctm == OT_CTM_OTHER)
        return ot_fail(err, OT_E_MODEL,
                       "node '%s' (%s): unknown coordinate_transformation_mode '%s' (half_pixel, "
                       "pytorch_half_pixel, align_corners, asymmetric, half_pixel_symmetric or tf_crop_and_resize)",
                       node->name, node->op_type, p->ctm_name);
    if (p->ctm == OT_CTM_TF_CROP_AND_RESIZE)
        return bad(node, OT_E_UNSUPPORTED,
                   "coordinate_transformation_mode 'tf_crop_and_resize' (a crop by roi) is not supported; crop with "
                   "Slice and resize with another mode",
                   err);
    if (p->mode == OT_RESIZE_NEAREST && p->nearest == OT_NEAREST_OTHER)
        return ot_fail(err, OT_E_MODEL,
                       "node '%s' (%s): unknown nearest_mode '%s' (round_prefer_floor, round_prefer_ceil, floor or ceil)",
                       node->name, node->op_type, p->nearest_name);
    if (p->aspect == OT_ASPECT_OTHER)
        return ot_fail(err, OT_E_MODEL,
                       "node '%s' (%s): unknown keep_aspect_ratio_policy '%s' (stretch, not_larger or not_smaller)",
                       node->name, node->op_type, p->aspect_name);
    if (!(p->cubic_a > -1e6f && p->cubic_a < 1e6f)) return bad(node, OT_E_MODEL, "cubic_coeff_a is not finite", err);
    return OT_OK;
}

/* axis[k] (normalised) of the scales / sizes entry k. */
static ot_status resize_axes(const ot_node *node, const ot_resize_params *p, int rank, int count, int *axis,
                             ot_error *err) {
    if (p->n_axes < 0) {
        if (count != rank) return bad(node, OT_E_MODEL, "scales / sizes must have one entry per input dim", err);
        for (int d = 0; d < rank; d++) axis[d] = d;
        return OT_OK;
    }
    if (count != p->n_axes) return bad(node, OT_E_MODEL, "scales / sizes must have one entry per axis in 'axes'", err);
    bool seen[OT_MAX_RANK] = {false};
    for (int k = 0; k < count; k++) {
        int64_t a = p->axes[k] < 0 ? p->axes[k] + rank : p->axes[k];
        if (a < 0 || a >= rank || seen[a]) return bad(node, OT_E_MODEL, "axes out of range or repeated", err);
        seen[a] = true;
        axis[k] = (int)a;
    }
    return OT_OK;
}

/* Per-axis scales and expected output sizes (ONNX's _interpolate_nd). */
static ot_status resize_scales(const ot_node *node, const ot_resize_params *p, const ot_shape *xs,
                               const double *scales, int n_scales, const int64_t *sizes, int n_sizes, double *scale,
                               int64_t *out, ot_error *err) {
    int rank = xs->rank, axis[OT_MAX_RANK];
    if ((n_scales > 0) == (n_sizes > 0))
        return bad(node, OT_E_MODEL, "exactly one of scales and sizes must be given (non-empty)", err);
    ot_status st = resize_axes(node, p, rank, n_scales > 0 ? n_scales : n_sizes, axis, err);
    if (st) return st;
    int count = n_scales > 0 ? n_scales : n_sizes;
    for (int d = 0; d < rank; d++) {
        scale[d] = 1.0;
        out[d] = xs->dim[d];
    }
    for (int k = 0; k < count; k++) {
        int d = axis[k];
        double in = (double)xs->dim[d];
        if (n_scales > 0) {
            scale[d] = scales[k];
            double o = scale[d] * in;
            if (!(scale[d] > 0.0) || !(o < 4.0e18)) return bad(node, OT_E_MODEL, "a scale is not positive or too large", err);
            out[d] = (int64_t)o;
        } else {
            if (sizes[k] < 0) return bad(node, OT_E_MODEL, "a size is negative", err);
            if (xs->dim[d] == 0) return bad(node, OT_E_MODEL, "resizing an empty axis", err);
            out[d] = sizes[k];
            scale[d] = (double)sizes[k] / in;
        }
    }
    if (n_sizes > 0 && p->aspect != OT_ASPECT_STRETCH) {
        double s = scale[axis[0]];
        for (int k = 1; k < count; k++)
            s = p->aspect == OT_ASPECT_NOT_LARGER ? (scale[axis[k]] < s ? scale[axis[k]] : s)
                                                  : (scale[axis[k]] > s ? scale[axis[k]] : s);
        for (int k = 0; k < count; k++) {
            scale[axis[k]] = s;
            out[axis[k]] = (int64_t)(s * (double)xs->dim[axis[k]] + 0.5);
        }
    }
    return OT_OK;
}

ot_status ot_resize_geometry(const ot_node *node, const ot_resize_params *p, const ot_shape *xs, const ot_shape *ys,
                             const double *scales, int n_scales, const int64_t *sizes, int n_sizes,
                             ot_resize_geom *g, ot_error *err) {
    ot_status st = ot_resize_check_params(node, p, err);
    if (st) return st;
    memset(g, 0, sizeof *g);
    if (xs->rank != ys->rank || xs->rank < 1 || xs->rank > OT_MAX_RANK)
        return bad(node, OT_E_SHAPE, "input and output ranks differ", err);
    int64_t out[OT_MAX_RANK];
    if ((st = resize_scales(node, p, xs, scales, n_scales, sizes, n_sizes, g->scale, out, err))) return st;
    g->rank = xs->rank;
    g->mode = p->mode;
    g->ctm = p->ctm;
    g->nearest = p->nearest;
    g->exclude_outside = p->exclude_outside;
    g->cubic_a = p->cubic_a;
    int64_t is = 1, os = 1;
    for (int d = g->rank - 1; d >= 0; d--) {
        g->in[d] = xs->dim[d];
        g->out[d] = ys->dim[d];
        if (out[d] != ys->dim[d]) return bad(node, OT_E_SHAPE, "output shape differs from what scales / sizes give", err);
        if (g->in[d] == 0 && g->out[d] > 0) return bad(node, OT_E_MODEL, "resizing an empty axis", err);
        g->out_f[d] = g->scale[d] * (double)g->in[d];
        g->in_stride[d] = is;
        g->out_stride[d] = os;
        is *= g->in[d];
        os *= g->out[d];
    }
    for (int d = 0; d < g->rank; d++) {
        if (g->in[d] == g->out[d] && g->scale[d] == 1.0) continue;
        if (p->antialias && p->mode != OT_RESIZE_NEAREST && g->scale[d] < 1.0)
            return bad(node, OT_E_UNSUPPORTED,
                       "antialias = 1 when downscaling is not supported; export with antialias=False", err);
        g->active[g->n_active++] = d;
    }
    return OT_OK;
}

int64_t ot_resize_tab_entries(const ot_shape *ys) {
    int64_t n = 0;
    for (int d = 0; d < ys->rank; d++) n += ys->dim[d] > 0 ? ys->dim[d] : 0;
    return n;
}

void ot_resize_fill_taps(ot_resize_geom *g, ot_resize_tap *mem) {
    int64_t at = 0;
    g->tab = NULL; /* computed, below, by the element code's own rule */
    for (int a = 0; a < g->n_active; a++) {
        int d = g->active[a];
        g->tab_off[d] = at;
        for (int64_t o = 0; o < g->out[d]; o++, at++) {
            double r;
            memset(&mem[at], 0, sizeof mem[at]);
            mem[at].base = ot_resize_base(g, d, o, &r);
            ot_resize_taps(g, d, o, mem[at].idx, mem[at].w);
        }
    }
    g->tab = mem;
}

ot_status ot_depth_geometry(const ot_node *node, const ot_depth_params *p, bool to_space, const ot_shape *xs,
                            const ot_shape *ys, ot_depth_geom *g, ot_error *err) {
    if (p->mode_other) return bad(node, OT_E_MODEL, "mode must be DCR or CRD", err);
    if (p->blocksize < 1 || p->blocksize > (int64_t)1 << 20) return bad(node, OT_E_MODEL, "blocksize is out of range (1 .. 2^20)", err);
    if (xs->rank != 4 || ys->rank != 4) return bad(node, OT_E_SHAPE, "input and output must be [N, C, H, W]", err);
    int64_t b = p->blocksize, bb = b * b;
    *g = (ot_depth_geom){xs->dim[0], xs->dim[1], xs->dim[2], xs->dim[3], b, to_space, p->crd};
    bool ok = to_space ? xs->dim[1] % bb == 0 && ys->dim[1] == xs->dim[1] / bb && ys->dim[2] == xs->dim[2] * b &&
                             ys->dim[3] == xs->dim[3] * b
                       : xs->dim[2] % b == 0 && xs->dim[3] % b == 0 && ys->dim[1] == xs->dim[1] * bb &&
                             ys->dim[2] == xs->dim[2] / b && ys->dim[3] == xs->dim[3] / b;
    if (!ok || ys->dim[0] != xs->dim[0]) return bad(node, OT_E_SHAPE, "output shape differs from what blocksize gives", err);
    return OT_OK;
}
