/* shape_rules_spatial.c — shape rules of the spatial ops of issue 26 (ops batch 2):
 * DepthToSpace and SpaceToDepth, ConvTranspose (ir/op_params.h's ot_conv_transpose_out, checked), and Resize and
 * Upsample (normalised to (X, roi, scales, sizes)). The output sizes follow
 * ONNX's reference: floor(in x scale) from constant scales, the sizes input (known
 * elements, or a symbol Shape read from a dim) as given, or rounded by
 * keep_aspect_ratio_policy. The params' modes are checked here so that `info`
 * refuses what the kernels would (tf_crop_and_resize, unknown names). */
#include <math.h>
#include <string.h>

#include "shape_internal.h"

#define SHP(s, buf) ot_shape_str(c->g, (s), (buf), sizeof(buf))

/* The kernels' own check, restated for the importer (which may not include kernels/):
 * unknown names, tf_crop_and_resize. */
static ot_status check_params(ot_shape_ctx *c, const ot_node *n, const ot_resize_params *p) {
    if (p->mode == OT_RESIZE_MODE_OTHER)
        return ot_shape_fail_model(c, n, "unknown mode '%s' (nearest, linear or cubic)", p->mode_name);
    if (p->ctm == OT_CTM_OTHER)
        return ot_shape_fail_model(c, n, "unknown coordinate_transformation_mode '%s'", p->ctm_name);
    if (p->ctm == OT_CTM_TF_CROP_AND_RESIZE)
        return ot_fail(c->err, OT_E_UNSUPPORTED,
                       "node '%s' (%s): coordinate_transformation_mode 'tf_crop_and_resize' (a crop by roi) is not "
                       "supported; crop with Slice and resize with another mode",
                       ot_shape_node_label(n), n->op_type);
    if (p->mode == OT_RESIZE_NEAREST && p->nearest == OT_NEAREST_OTHER)
        return ot_shape_fail_model(c, n, "unknown nearest_mode '%s'", p->nearest_name);
    if (p->aspect == OT_ASPECT_OTHER)
        return ot_shape_fail_model(c, n, "unknown keep_aspect_ratio_policy '%s'", p->aspect_name);
    return OT_OK;
}

/* axis[k] of scales / sizes entry k, or an error. */
static ot_status entry_axes(ot_shape_ctx *c, const ot_node *n, const ot_resize_params *p, const ot_shape *x, int count,
                            int *axis) {
    int rank = x->rank;
    if (p->n_axes < 0) {
        if (count != rank) return ot_shape_fail_model(c, n, "%d scales / sizes for an input of rank %d", count, rank);
        for (int d = 0; d < rank; d++) axis[d] = d;
        return OT_OK;
    }
    if (count != p->n_axes) return ot_shape_fail_model(c, n, "%d scales / sizes for %d axes", count, p->n_axes);
    bool seen[OT_MAX_RANK] = {false};
    for (int k = 0; k < count; k++) {
        int a = 0;
        ot_status st = ot_shape_axis(c, n, p->axes[k], rank, false, x, &a);
        if (st) return st;
        if (seen[a]) return ot_shape_fail_model(c, n, "axis %d repeated in 'axes'", a);
        seen[a] = true;
        axis[k] = a;
    }
    return OT_OK;
}

/* Output dims from constant scales (float32). */
static ot_status from_scales(ot_shape_ctx *c, const ot_node *n, const ot_value *s, const int *axis, int count,
                             ot_shape *y) {
    for (int k = 0; k < count; k++) {
        float f;
        memcpy(&f, (const char *)s->data + 4 * (size_t)k, 4);
        int d = axis[k];
        if (!(f > 0.0f) || !isfinite(f)) return ot_shape_fail_model(c, n, "scale %g is not positive and finite", (double)f);
        /* ONNX's Upsample only enlarges (ONNX Runtime refuses a scale below 1 too) */
        if (n->op == OT_OP_UPSAMPLE && f < 1.0f)
            return ot_shape_fail_model(c, n, "scale %g on axis %d is below 1 (Upsample only enlarges; Resize shrinks)",
                                       (double)f, d);
        if (f == 1.0f) continue;
        y->sym[d] = -1;
        if (y->dim[d] < 0) continue;
        double o = (double)f * (double)y->dim[d];
        if (!(o < 4.0e18)) return ot_shape_fail(c, n, "output dim %lld x %g overflows", (long long)y->dim[d], (double)f);
        /* a silent empty output otherwise (floor(4 x 0.1) = 0) */
        if (y->dim[d] > 0 && o < 1.0)
            return ot_shape_fail(c, n, "scale %g on axis %d shrinks %lld elements to none (floor %g)", (double)f, d,
                                 (long long)y->dim[d], o);
        y->dim[d] = (int64_t)o;
    }
    return OT_OK;
}

/* Output dims from the sizes input (known elements or symbols). */
static ot_status from_sizes(ot_shape_ctx *c, const ot_node *n, const ot_resize_params *p, const ot_shape *iv,
                            const int *axis, int count, const ot_shape *x, ot_shape *y) {
    for (int k = 0; k < count; k++) {
        int d = axis[k];
        if (ot_shape_ival_known(iv, k) && iv->dim[k] < 0) return ot_shape_fail_model(c, n, "size %lld is negative", (long long)iv->dim[k]);
        if (ot_shape_ival_known(iv, k) && x->dim[d] == 0 && iv->dim[k] > 0) return ot_shape_fail_model(c, n, "resizing an empty axis");
        y->dim[d] = ot_shape_ival_known(iv, k) ? iv->dim[k] : -1;
        y->sym[d] = ot_shape_ival_known(iv, k) ? -1 : iv->sym[k];
    }
    if (p->aspect == OT_ASPECT_STRETCH) return OT_OK;
    double s = 0;
    for (int k = 0; k < count; k++) {
        int d = axis[k];
        if (y->dim[d] < 0 || x->dim[d] <= 0) { /* the policy needs every size */
            for (int j = 0; j < count; j++) y->dim[axis[j]] = -1, y->sym[axis[j]] = -1;
            return OT_OK;
        }
        double r = (double)y->dim[d] / (double)x->dim[d];
        if (k == 0 || (p->aspect == OT_ASPECT_NOT_LARGER ? r < s : r > s)) s = r;
    }
    for (int k = 0; k < count; k++) {
        double o = s * (double)x->dim[axis[k]] + 0.5;
        if (!(o < 4.0e18)) /* checked before the conversion, undefined past int64 */
            return ot_shape_fail(c, n, "keep_aspect_ratio_policy scales axis %d (%lld) by %g: past int64", axis[k],
                                 (long long)x->dim[axis[k]], s);
        y->dim[axis[k]] = (int64_t)o;
    }
    return OT_OK;
}

ot_status ot_shape_rule_resize(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *x = ot_shape_input(c, n, 0);
    dt[0] = x ? x->dtype : OT_UNDEFINED;
    ot_op_params scratch;
    const ot_op_params *pp = NULL;
    ot_status st = ot_node_params(n, &scratch, &pp, c->err);
    if (!st) st = check_params(c, n, &pp->u.resize);
    if (st || !x || x->shape.rank < 0) return st;
    ot_shape X = x->shape, Y = X;
    const ot_value *s = ot_shape_input(c, n, 2), *z = ot_shape_input(c, n, 3);
    int ns = s ? (int)ot_shape_numel(&s->shape) : 0, nz = z ? (int)ot_shape_numel(&z->shape) : 0;
    if (s && s->shape.rank < 0) ns = -1;
    if (z && z->shape.rank < 0) nz = -1;
    if (ns != 0 && nz != 0 && ns >= 0 && nz >= 0)
        return ot_shape_fail_model(c, n, "both scales and sizes are given (one must be empty or absent)");
    if (ns == 0 && nz == 0) return ot_shape_fail_model(c, n, "neither scales nor sizes is given");
    int axis[OT_MAX_RANK], count = ns > 0 ? ns : nz;
    if (count > 0 && (st = entry_axes(c, n, &pp->u.resize, &X, count, axis))) return st;
    if (ns > 0 && s->data && s->dtype == OT_F32 && s->nbytes == 4 * (size_t)ns) {
        if ((st = from_scales(c, n, s, axis, ns, &Y))) return st;
    } else if (nz > 0 && n->inputs[3] >= 0 && ot_shape_ivals(c, n->inputs[3]) &&
               ot_shape_ivals(c, n->inputs[3])->rank == nz) {
        if ((st = from_sizes(c, n, &pp->u.resize, ot_shape_ivals(c, n->inputs[3]), axis, nz, &X, &Y))) return st;
    } else {
        for (int d = 0; d < Y.rank; d++) Y.dim[d] = -1, Y.sym[d] = -1; /* computed at run time: unknown here */
    }
    if (pp->u.resize.antialias && pp->u.resize.mode != OT_RESIZE_NEAREST)
        for (int d = 0; d < Y.rank; d++)
            if (Y.dim[d] >= 0 && Y.dim[d] < X.dim[d])
                return ot_fail(c->err, OT_E_UNSUPPORTED,
                               "node '%s' (%s): antialias = 1 when downscaling is not supported; export with "
                               "antialias=False",
                               ot_shape_node_label(n), n->op_type);
    sh[0] = Y;
    return OT_OK;
}

/* ConvTranspose (X [N, C, spatial...], W [C, M / group, k...] [, B [M]]) -> [N, M,
 * out...]; output_padding must stay below the stride (the gradient's Conv then gives
 * X's size back) and the sizes may not overflow. */
ot_status ot_shape_rule_conv_transpose(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160], b[160];
    const ot_value *xv = ot_shape_input(c, n, 0), *bv = ot_shape_input(c, n, 2);
    ot_shape X = xv ? xv->shape : ot_shape_unknown(), W = ot_shape_input(c, n, 1) ? ot_shape_input(c, n, 1)->shape : ot_shape_unknown();
    dt[0] = xv ? xv->dtype : OT_UNDEFINED;
    ot_op_params scratch;
    const ot_op_params *pp = NULL;
    ot_status st = ot_node_params(n, &scratch, &pp, c->err);
    if (st || X.rank < 0 || W.rank < 0) return st;
    const ot_window_params *wp = &pp->u.window;
    int nd = X.rank - 2;
    if (nd < 1 || W.rank != X.rank)
        return ot_shape_fail(c, n, "input %s and weight %s: expected [N,C,spatial...] and [C,M/group,kernel...]",
                             SHP(&X, a), SHP(&W, b));
    if ((wp->n_kernel >= 0 && wp->n_kernel != nd) || (wp->n_strides >= 0 && wp->n_strides != nd) ||
        (wp->n_dilations >= 0 && wp->n_dilations != nd) || (wp->n_pads >= 0 && wp->n_pads != 2 * nd) ||
        (wp->n_output_padding >= 0 && wp->n_output_padding != nd && wp->n_output_padding != 2 * nd) ||
        (wp->n_output_shape >= 0 && wp->n_output_shape != nd && wp->n_output_shape != nd + 2))
        return ot_shape_fail_model(c, n, "kernel_shape / strides / dilations / pads / output_padding / output_shape "
                                         "lengths do not match %d spatial dims", nd);
    if (wp->group < 1) return ot_shape_fail_model(c, n, "group %d < 1", wp->group);
    if (X.dim[1] >= 0 && W.dim[0] >= 0 && X.dim[1] != W.dim[0])
        return ot_shape_fail(c, n, "input %s has %lld channels but weight %s expects %lld", SHP(&X, a),
                             (long long)X.dim[1], SHP(&W, b), (long long)W.dim[0]);
    if (W.dim[0] >= 0 && W.dim[0] % wp->group)
        return ot_shape_fail(c, n, "weight %s: %lld input channels not divisible by group %d", SHP(&W, a),
                             (long long)W.dim[0], wp->group);
    ot_shape Y = ot_shape_make(X.rank, NULL);
    Y.dim[0] = X.dim[0];
    Y.sym[0] = X.sym[0];
    if (W.dim[1] >= 0 && !ot_i64_mul(W.dim[1], wp->group, &Y.dim[1]))
        return ot_shape_fail_model(c, n, "group %d times %lld output channels overflows", wp->group, (long long)W.dim[1]);
    if (W.dim[1] < 0) Y.dim[1] = -1;
    if (bv && bv->shape.rank >= 0 && (bv->shape.rank != 1 || (bv->shape.dim[0] >= 0 && Y.dim[1] >= 0 && bv->shape.dim[0] != Y.dim[1])))
        return ot_shape_fail(c, n, "bias %s does not match %lld output channels", SHP(&bv->shape, a), (long long)Y.dim[1]);
    for (int i = 0; i < nd; i++) {
        int64_t k = W.dim[2 + i], s = wp->n_strides == nd ? wp->strides[i] : 1, d = wp->n_dilations == nd ? wp->dilations[i] : 1;
        int64_t op = wp->n_output_padding > 0 ? wp->output_padding[i] : 0, pb = 0, pe = 0;
        if (wp->n_kernel == nd && k >= 0 && wp->kernel[i] != k)
            return ot_shape_fail(c, n, "kernel_shape does not match weight %s", SHP(&W, a));
        if (s < 1 || d < 1 || k == 0) return ot_shape_fail_model(c, n, "kernel, strides and dilations must be >= 1");
        if (op < 0 || op >= s)
            return ot_shape_fail_model(c, n, "output_padding %lld must be at least 0 and below the stride %lld",
                                       (long long)op, (long long)s);
        if (wp->n_pads == 2 * nd && (wp->pads[i] < 0 || wp->pads[nd + i] < 0))
            return ot_shape_fail_model(c, n, "pads must not be negative");
        Y.sym[2 + i] = -1;
        if (X.dim[2 + i] < 0 || k < 0) {
            Y.dim[2 + i] = wp->n_output_shape >= nd ? wp->output_shape[wp->n_output_shape - nd + i] : -1;
            continue;
        }
        int64_t natural, past, span;
        if (!ot_conv_transpose_out(wp, nd, i, X.dim[2 + i], k, &Y.dim[2 + i]))
            return ot_shape_fail(c, n, "spatial dim %d: the output size overflows int64 or is below 1 (input %lld, "
                                 "kernel %lld, stride %lld, dilation %lld)",
                                 i, (long long)X.dim[2 + i], (long long)k, (long long)s, (long long)d);
        /* the output past stride x (in - 1) + span - pads reads nothing (bias only) up to
         * one stride; beyond that the gradient's Conv would not give X's size back */
        if (!ot_conv_transpose_pads(wp, nd, i, X.dim[2 + i], k, Y.dim[2 + i], &pb, &pe) ||
            !ot_i64_mul(k - 1, d, &span) || !ot_i64_mul(s, X.dim[2 + i] - 1, &natural) ||
            !ot_i64_add(natural, span, &natural) || !ot_i64_add(natural, 1, &natural) ||
            !ot_i64_sub(natural, pb, &natural) || !ot_i64_sub(Y.dim[2 + i], natural, &past))
            return ot_shape_fail(c, n, "spatial dim %d: output %lld, input %lld, kernel %lld, stride %lld, dilation "
                                 "%lld and pads overflow int64",
                                 i, (long long)Y.dim[2 + i], (long long)X.dim[2 + i], (long long)k, (long long)s,
                                 (long long)d);
        if (pb < 0 || past >= s)
            return ot_shape_fail_model(c, n, "output_shape %lld on spatial dim %d is out of reach of the input (%lld)",
                                       (long long)Y.dim[2 + i], i, (long long)X.dim[2 + i]);
    }
    sh[0] = Y;
    return OT_OK;
}

/* DepthToSpace [N, C, H, W] -> [N, C / b^2, H b, W b]; SpaceToDepth the reverse. */
ot_status ot_shape_rule_depth_space(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160];
    const ot_value *xv = ot_shape_input(c, n, 0);
    dt[0] = xv ? xv->dtype : OT_UNDEFINED;
    ot_op_params scratch;
    const ot_op_params *pp = NULL;
    ot_status st = ot_node_params(n, &scratch, &pp, c->err);
    if (st) return st;
    const ot_depth_params *p = &pp->u.depth;
    if (p->mode_other) return ot_shape_fail_model(c, n, "mode '%s' (DCR or CRD)", p->mode_name);
    if (p->blocksize < 1 || p->blocksize > (int64_t)1 << 20)
        return ot_shape_fail_model(c, n, "blocksize %lld is out of range (required; 1 .. 2^20)", (long long)p->blocksize);
    if (!xv || xv->shape.rank < 0) return OT_OK;
    ot_shape X = xv->shape, Y = X;
    if (X.rank != 4) return ot_shape_fail(c, n, "input %s is not [N, C, H, W]", SHP(&X, a));
    int64_t b = p->blocksize, bb = b * b;
    bool to_space = n->op == OT_OP_DEPTH_TO_SPACE;
    for (int d = 1; d < 4; d++) Y.sym[d] = -1;
    if (to_space) {
        if (X.dim[1] >= 0 && X.dim[1] % bb)
            return ot_shape_fail(c, n, "input %s: channels not divisible by blocksize^2 = %lld", SHP(&X, a), (long long)bb);
        Y.dim[1] = X.dim[1] < 0 ? -1 : X.dim[1] / bb;
        for (int d = 2; d < 4; d++)
            if (X.dim[d] >= 0 && !ot_i64_mul(X.dim[d], b, &Y.dim[d]))
                return ot_shape_fail(c, n, "input %s times blocksize overflows", SHP(&X, a));
    } else {
        for (int d = 2; d < 4; d++) {
            if (X.dim[d] >= 0 && X.dim[d] % b)
                return ot_shape_fail(c, n, "input %s: H and W must be divisible by blocksize %lld", SHP(&X, a), (long long)b);
            Y.dim[d] = X.dim[d] < 0 ? -1 : X.dim[d] / b;
        }
        if (X.dim[1] >= 0 && !ot_i64_mul(X.dim[1], bb, &Y.dim[1]))
            return ot_shape_fail(c, n, "input %s: channels times blocksize^2 overflows", SHP(&X, a));
    }
    sh[0] = Y;
    return OT_OK;
}
