/* op_params.c — resolving a node's attributes into its typed params (op_params.h):
 * one resolver per op family, chosen by an op-indexed table. */
#include "op_params.h"

#include <limits.h>
#include <string.h>

typedef ot_status (*resolve_fn)(const ot_node *n, ot_op_params *p, ot_error *err);

static const char *label(const ot_node *n) { return n->name ? n->name : "?"; }
static const char *op_label(const ot_node *n) { return n->op_type ? n->op_type : ot_op_name(n->op); }

/* An integer attribute narrowed to int: out of range is the model's error. */
static ot_status int_attr(const ot_node *n, const char *name, int64_t dflt, int *out, ot_error *err) {
    int64_t v = ot_node_attr_int(n, name, dflt);
    if (v < INT_MIN || v > INT_MAX)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): attribute '%s' = %lld is out of range", label(n), op_label(n),
                       name, (long long)v);
    *out = (int)v;
    return OT_OK;
}

/* A 0 / nonzero integer attribute. */
static ot_status flag_attr(const ot_node *n, const char *name, bool *out, ot_error *err) {
    int v = 0;
    ot_status st = int_attr(n, name, 0, &v, err);
    *out = v != 0;
    return st;
}

/* A list of ints: *count -1 when absent; values copied when they fit. */
static void list_attr(const ot_node *n, const char *name, int *count, int64_t *v) {
    int c = 0;
    const int64_t *a = ot_node_attr_ints(n, name, &c);
    *count = a ? c : -1;
    if (a && c <= OT_PARAMS_MAX_LIST) memcpy(v, a, sizeof(int64_t) * (size_t)c);
}

/* ---- families ------------------------------------------------------------------- */

static ot_status resolve_gemm(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_gemm_params *g = &p->u.gemm;
    ot_status st = flag_attr(n, "transA", &g->trans_a, err);
    if (!st) st = flag_attr(n, "transB", &g->trans_b, err);
    g->alpha = ot_node_attr_float(n, "alpha", 1.0f);
    g->beta = ot_node_attr_float(n, "beta", 1.0f);
    return st;
}

static ot_status resolve_window(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_window_params *w = &p->u.window;
    ot_status st = int_attr(n, "group", 1, &w->group, err);
    if (!st) st = flag_attr(n, "count_include_pad", &w->count_include_pad, err);
    if (!st) st = flag_attr(n, "storage_order", &w->storage_order, err);
    list_attr(n, "kernel_shape", &w->n_kernel, w->kernel);
    list_attr(n, "strides", &w->n_strides, w->strides);
    list_attr(n, "dilations", &w->n_dilations, w->dilations);
    list_attr(n, "pads", &w->n_pads, w->pads);
    list_attr(n, "output_padding", &w->n_output_padding, w->output_padding);
    list_attr(n, "output_shape", &w->n_output_shape, w->output_shape);
    /* anything but these three is NOTSET: explicit pads */
    const char *ap = ot_node_attr_string(n, "auto_pad", "NOTSET");
    w->auto_pad = strcmp(ap, "SAME_UPPER") == 0   ? OT_AUTO_PAD_SAME_UPPER
                  : strcmp(ap, "SAME_LOWER") == 0 ? OT_AUTO_PAD_SAME_LOWER
                  : strcmp(ap, "VALID") == 0      ? OT_AUTO_PAD_VALID
                                                  : OT_AUTO_PAD_NOTSET;
    return st;
}

static ot_status resolve_act(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_act_params *a = &p->u.act;
    a->alpha = ot_node_attr_float(n, "alpha", 0.01f);
    a->approximate_name = ot_node_attr_string(n, "approximate", "none");
    a->approximate = strcmp(a->approximate_name, "none") == 0   ? OT_GELU_NONE
                     : strcmp(a->approximate_name, "tanh") == 0 ? OT_GELU_TANH
                                                                : OT_GELU_OTHER;
    const ot_attr *lo = ot_node_attr(n, "min"), *hi = ot_node_attr(n, "max");
    a->has_min = lo && lo->type == OT_ATTR_FLOAT;
    a->has_max = hi && hi->type == OT_ATTR_FLOAT;
    a->min = a->has_min ? lo->f : 0.0f;
    a->max = a->has_max ? hi->f : 0.0f;
    return OT_OK;
}

static ot_status resolve_dropout(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_dropout_params *d = &p->u.dropout;
    const ot_attr *r = ot_node_attr(n, "ratio"), *t = ot_node_attr(n, "training_mode"), *k = ot_node_attr(n, "rng_node");
    ot_status st = OT_OK;
    d->has_ratio = r && r->type == OT_ATTR_FLOAT;
    d->ratio = d->has_ratio ? r->f : 0.5f;
    d->has_training_mode = t && t->type == OT_ATTR_INT;
    if (d->has_training_mode) st = flag_attr(n, "training_mode", &d->training_mode, err);
    d->has_rng_node = k && k->type == OT_ATTR_INT;
    if (!st && d->has_rng_node) st = int_attr(n, "rng_node", 0, &d->rng_node, err);
    return st;
}

static ot_status resolve_norm(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_norm_params *m = &p->u.norm;
    bool softmax = n->op == OT_OP_SOFTMAX || n->op == OT_OP_LOG_SOFTMAX || n->op == OT_OP_SOFTMAX_GRAD ||
                   n->op == OT_OP_LOG_SOFTMAX_GRAD;
    ot_status st = flag_attr(n, "legacy_2d", &m->legacy_2d, err);
    if (!softmax) m->legacy_2d = false;
    if (!st) st = int_attr(n, "axis", m->legacy_2d ? 1 : -1, &m->axis, err);
    if (!st) st = flag_attr(n, "training_mode", &m->training_mode, err);
    if (!st) st = flag_attr(n, "unbiased_running_var", &m->unbiased_running_var, err);
    m->epsilon = ot_node_attr_float(n, "epsilon", 1e-5f);
    m->momentum = ot_node_attr_float(n, "momentum", 0.9f);
    if (!st) st = int_attr(n, "num_groups", 0, &m->num_groups, err);
    return st;
}

static ot_status resolve_loss(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_loss_params *l = &p->u.loss;
    l->reduction_name = ot_node_attr_string(n, "reduction", "mean");
    l->reduction = strcmp(l->reduction_name, "mean") == 0   ? OT_REDUCTION_MEAN
                   : strcmp(l->reduction_name, "sum") == 0  ? OT_REDUCTION_SUM
                   : strcmp(l->reduction_name, "none") == 0 ? OT_REDUCTION_NONE
                                                            : OT_REDUCTION_OTHER;
    const ot_attr *a = ot_node_attr(n, "ignore_index");
    l->has_ignore_index = a && a->type == OT_ATTR_INT;
    l->ignore_index = l->has_ignore_index ? a->i : 0;
    l->trans_w = false;
    l->chunk_rows = 0;
    if (n->op != OT_OP_LINEAR_CROSS_ENTROPY && n->op != OT_OP_LINEAR_CROSS_ENTROPY_GRAD) return OT_OK;
    ot_status st = flag_attr(n, "trans_w", &l->trans_w, err);
    int64_t rows = ot_node_attr_int(n, "chunk_rows", 0);
    if (!st && (rows < 1 || rows > INT32_MAX))
        st = ot_fail(err, OT_E_MODEL, "node '%s' (%s): chunk_rows %lld is not in [1, 2^31)", n->name, n->op_type,
                     (long long)rows);
    l->chunk_rows = rows;
    return st;
}

/* ops batch 1 (issue 26): the mode of a reduction op, and ReduceGrad's mode names */
static const struct {
    ot_op op;
    ot_reduce_mode mode;
    const char *name;
} REDUCE_MODES[] = {
    {OT_OP_REDUCE_SUM, OT_RMODE_SUM, "sum"},
    {OT_OP_REDUCE_MEAN, OT_RMODE_MEAN, "mean"},
    {OT_OP_REDUCE_MAX, OT_RMODE_MAX, "max"},
    {OT_OP_REDUCE_MIN, OT_RMODE_MIN, "min"},
    {OT_OP_REDUCE_PROD, OT_RMODE_PROD, "prod"},
    {OT_OP_REDUCE_L1, OT_RMODE_L1, "l1"},
    {OT_OP_REDUCE_L2, OT_RMODE_L2, "l2"},
    {OT_OP_REDUCE_LOG_SUM_EXP, OT_RMODE_LOG_SUM_EXP, "log_sum_exp"},
    {OT_OP_REDUCE_SUM_SQUARE, OT_RMODE_SUM_SQUARE, "sum_square"},
    {OT_OP_ARG_MAX, OT_RMODE_ARG_MAX, "arg_max"},
    {OT_OP_ARG_MIN, OT_RMODE_ARG_MIN, "arg_min"},
};

const char *ot_reduce_mode_name(ot_reduce_mode m) {
    for (size_t i = 0; i < sizeof REDUCE_MODES / sizeof REDUCE_MODES[0]; i++)
        if (REDUCE_MODES[i].mode == m) return REDUCE_MODES[i].name;
    return "other";
}

static ot_status resolve_reduce(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_reduce_params *r = &p->u.reduce;
    int c = 0;
    r->axes = ot_node_attr_ints(n, "axes", &c);
    r->n_axes = r->axes ? c : -1;
    r->mode = OT_RMODE_OTHER;
    r->mode_name = ot_node_attr_string(n, "mode", "");
    for (size_t i = 0; i < sizeof REDUCE_MODES / sizeof REDUCE_MODES[0]; i++)
        if (n->op == OT_OP_REDUCE_GRAD ? !strcmp(r->mode_name, REDUCE_MODES[i].name) : n->op == REDUCE_MODES[i].op)
            r->mode = REDUCE_MODES[i].mode;
    int keep = 1;
    ot_status st = int_attr(n, "keepdims", 1, &keep, err);
    r->keepdims = keep != 0;
    if (!st) st = int_attr(n, "axis", 0, &r->axis, err);
    if (!st) st = flag_attr(n, "select_last_index", &r->select_last_index, err);
    if (!st) st = flag_attr(n, "noop_with_empty_axes", &r->noop_with_empty_axes, err);
    return st;
}

static ot_status resolve_layout(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_layout_params *l = &p->u.layout;
    ot_status st = int_attr(n, "axis", 0, &l->axis, err);
    int c = 0;
    l->perm = ot_node_attr_ints(n, "perm", &c);
    l->n_perm = l->perm ? c : -1;
    for (int i = 0; !st && i < c && l->perm; i++)
        if (l->perm[i] < INT_MIN || l->perm[i] > INT_MAX)
            st = ot_fail(err, OT_E_MODEL, "node '%s' (%s): attribute 'perm' entry %lld is out of range", label(n),
                         op_label(n), (long long)l->perm[i]);
    l->split = ot_node_attr_ints(n, "split", &c);
    l->n_split = l->split ? c : -1;
    const ot_attr *e = ot_node_attr(n, "end");
    l->has_end = e && e->type == OT_ATTR_INT;
    l->end = l->has_end ? e->i : 0;
    l->start = ot_node_attr_int(n, "start", 0);
    return st;
}

static ot_status resolve_optim(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_optim_params *o = &p->u.optim;
    o->momentum = ot_node_attr_float(n, "momentum", 0.0f);
    o->weight_decay = ot_node_attr_float(n, "weight_decay", 0.0f);
    o->beta1 = ot_node_attr_float(n, "beta1", 0.9f);
    o->beta2 = ot_node_attr_float(n, "beta2", 0.999f);
    o->epsilon = ot_node_attr_float(n, "epsilon", 1e-8f);
    ot_status st = flag_attr(n, "nesterov", &o->nesterov, err);
    if (!st) st = flag_attr(n, "decoupled", &o->decoupled, err);
    if (!st) st = flag_attr(n, "eps_hf", &o->eps_hf, err);
    return st;
}

/* Issue 13's pointwise math: each op reads its own attributes, defaults per ONNX. */
static ot_status resolve_math(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_math_params *m = &p->u.math;
    m->alpha = ot_node_attr_float(n, "alpha", 0.2f);
    m->beta = ot_node_attr_float(n, "beta", 0.5f);
    int neg = 1, pos = 1;
    ot_status st = int_attr(n, "detect_negative", 1, &neg, err);
    if (!st) st = int_attr(n, "detect_positive", 1, &pos, err);
    m->detect_negative = neg != 0;
    m->detect_positive = pos != 0;
    if (!st) st = flag_attr(n, "fmod", &m->fmod, err);
    if (!st) st = int_attr(n, "index", 0, &m->index, err);
    return st;
}

/* ---- layout and indexing (issue 13) ---- */
static ot_status resolve_index(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_index_params *x = &p->u.index;
    ot_status st = int_attr(n, "axis", 0, &x->axis, err);
    x->mode_name = ot_node_attr_string(n, "mode", "constant");
    x->pad_mode = strcmp(x->mode_name, "constant") == 0  ? OT_PAD_CONSTANT
                  : strcmp(x->mode_name, "reflect") == 0 ? OT_PAD_REFLECT
                  : strcmp(x->mode_name, "edge") == 0    ? OT_PAD_EDGE
                  : strcmp(x->mode_name, "wrap") == 0    ? OT_PAD_WRAP
                                                         : OT_PAD_OTHER;
    int upper = 1;
    if (!st) st = int_attr(n, "upper", 1, &upper, err);
    x->upper = upper != 0;
    if (!st) st = flag_attr(n, "exclusive", &x->exclusive, err);
    if (!st) st = flag_attr(n, "reverse", &x->reverse, err);
    if (!st) st = int_attr(n, "batch_dims", 0, &x->batch_dims, err);
    x->reduction_name = ot_node_attr_string(n, "reduction", "none");
    x->reduction = strcmp(x->reduction_name, "none") == 0  ? OT_SCATTER_NONE
                   : strcmp(x->reduction_name, "add") == 0 ? OT_SCATTER_ADD
                   : strcmp(x->reduction_name, "mul") == 0 ? OT_SCATTER_MUL
                   : strcmp(x->reduction_name, "max") == 0 ? OT_SCATTER_MAX
                   : strcmp(x->reduction_name, "min") == 0 ? OT_SCATTER_MIN
                                                           : OT_SCATTER_OTHER;
    return st;
}

static ot_status resolve_random(const ot_node *n, ot_op_params *p, ot_error *err) {
    (void)err;
    p->u.random.low = ot_node_attr_float(n, "low", 0.0f);
    p->u.random.high = ot_node_attr_float(n, "high", 1.0f);
    return OT_OK;
}

/* ---- ops batch 1 (issue 26) ---- */
/* Selu's ONNX defaults (float32 values of the constants in the spec). */
#define SELU_ALPHA 1.67326319217681884765625f
#define SELU_GAMMA 1.05070102214813232421875f

static ot_status resolve_unary(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_unary_params *u = &p->u.unary;
    bool selu = n->op == OT_OP_SELU, grad = n->op == OT_OP_ELU_GRAD;
    u->alpha = ot_node_attr_float(n, "alpha", selu ? SELU_ALPHA : 1.0f);
    u->scale = selu ? ot_node_attr_float(n, "gamma", SELU_GAMMA) : grad ? ot_node_attr_float(n, "scale", 1.0f) : 1.0f;
    u->input_scale = grad ? ot_node_attr_float(n, "input_scale", 1.0f) : 1.0f;
    u->threshold = u->alpha;
    if (n->op == OT_OP_CELU) {
        /* Celu divides by alpha: alpha = 0 has no meaning (PyTorch refuses it too) */
        if (u->alpha == 0.0f || u->alpha != u->alpha)
            return ot_fail(err, OT_E_MODEL, "node '%s' (%s): attribute 'alpha' must be non-zero, got %g", label(n),
                           op_label(n), (double)u->alpha);
        u->scale = 1.0f;
        u->input_scale = (float)(1.0 / (double)u->alpha);
    }
    u->negcoef = (float)((double)u->alpha * (double)u->scale);
    u->poscoef = u->scale;
    return OT_OK;
}

/* ---- spatial ops (issue 26, ops batch 2) ---- */

/* Stride, dilation and output padding of spatial dim i (defaults 1, 1, 0). */
static void ct_dim(const ot_window_params *wp, int nd, int i, int64_t *s, int64_t *d, int64_t *op) {
    *s = wp->n_strides == nd ? wp->strides[i] : 1;
    *d = wp->n_dilations == nd ? wp->dilations[i] : 1;
    *op = wp->n_output_padding == nd ? wp->output_padding[i] : wp->n_output_padding == 2 * nd ? wp->output_padding[i] : 0;
}

bool ot_conv_transpose_out(const ot_window_params *wp, int nd, int i, int64_t in, int64_t k, int64_t *out) {
    int64_t s, d, op, span, r;
    ct_dim(wp, nd, i, &s, &d, &op);
    if (wp->n_output_shape == nd || wp->n_output_shape == nd + 2) {
        *out = wp->output_shape[wp->n_output_shape - nd + i];
        return *out >= 1;
    }
    if (__builtin_mul_overflow(k - 1, d, &span) || __builtin_add_overflow(span, 1, &span)) return false;
    if (wp->auto_pad == OT_AUTO_PAD_SAME_UPPER || wp->auto_pad == OT_AUTO_PAD_SAME_LOWER) {
        if (__builtin_mul_overflow(in, s, out)) return false;
        return *out >= 1;
    }
    int64_t pb = wp->n_pads == 2 * nd ? wp->pads[i] : 0, pe = wp->n_pads == 2 * nd ? wp->pads[nd + i] : 0;
    if (__builtin_mul_overflow(s, in - 1, &r) || __builtin_add_overflow(r, op, &r) ||
        __builtin_add_overflow(r, span, &r) || __builtin_sub_overflow(r, pb, &r) || __builtin_sub_overflow(r, pe, &r))
        return false;
    *out = r;
    return r >= 1;
}

bool ot_conv_transpose_pads(const ot_window_params *wp, int nd, int i, int64_t in, int64_t k, int64_t out, int64_t *pb,
                            int64_t *pe) {
    int64_t s, d, op, span, natural, total;
    ct_dim(wp, nd, i, &s, &d, &op);
    *pb = *pe = 0;
    /* span = (k - 1) d + 1, natural = s (in - 1) + span: checked, attributes may be 2^62 */
    if (__builtin_mul_overflow(k - 1, d, &span) || __builtin_add_overflow(span, 1, &span) ||
        __builtin_mul_overflow(s, in - 1, &natural) || __builtin_add_overflow(natural, span, &natural) ||
        __builtin_sub_overflow(natural, out, &total))
        return false;
    if (wp->n_pads == 2 * nd) {
        *pb = wp->pads[i];
    } else if (wp->auto_pad == OT_AUTO_PAD_SAME_UPPER || wp->auto_pad == OT_AUTO_PAD_SAME_LOWER) {
        if (__builtin_add_overflow(total, op, &total)) return false;
        int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); /* floor */
        *pb = wp->auto_pad == OT_AUTO_PAD_SAME_UPPER ? half : total - half;
    }
    if (__builtin_sub_overflow(natural - out, *pb, pe)) return false;
    if (*pe < 0) *pe = 0;
    return true;
}

/* The index of name in names[0..n), n (the OTHER value) when absent. */
static int pick(const char *name, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return n;
}

static ot_status resolve_resize(const ot_node *n, ot_op_params *p, ot_error *err) {
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const ctms[] = {"half_pixel",          "pytorch_half_pixel", "align_corners", "asymmetric",
                                       "half_pixel_symmetric", "tf_crop_and_resize"};
    static const char *const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const char *const aspect[] = {"stretch", "not_larger", "not_smaller"};
    ot_resize_params *x = &p->u.resize;
    bool upsample = n->op == OT_OP_UPSAMPLE;
    x->mode_name = ot_node_attr_string(n, "mode", "nearest");
    x->mode = (ot_resize_mode)pick(x->mode_name, modes, 3);
    if (strcmp(x->mode_name, "bilinear") == 0) x->mode = OT_RESIZE_LINEAR;
    if (strcmp(x->mode_name, "bicubic") == 0) x->mode = OT_RESIZE_CUBIC;
    x->ctm_name = ot_node_attr_string(n, "coordinate_transformation_mode", upsample ? "asymmetric" : "half_pixel");
    x->ctm = (ot_resize_ctm)pick(x->ctm_name, ctms, 6);
    x->nearest_name = ot_node_attr_string(n, "nearest_mode", upsample ? "floor" : "round_prefer_floor");
    x->nearest = (ot_resize_nearest)pick(x->nearest_name, nearest, 4);
    x->aspect_name = ot_node_attr_string(n, "keep_aspect_ratio_policy", "stretch");
    x->aspect = (ot_resize_aspect)pick(x->aspect_name, aspect, 3);
    x->cubic_a = ot_node_attr_float(n, "cubic_coeff_a", -0.75f);
    x->extrapolation_value = ot_node_attr_float(n, "extrapolation_value", 0.0f);
    ot_status st = flag_attr(n, "exclude_outside", &x->exclude_outside, err);
    if (!st) st = flag_attr(n, "antialias", &x->antialias, err);
    list_attr(n, "axes", &x->n_axes, x->axes);
    if (!st && x->n_axes > OT_PARAMS_MAX_LIST)
        st = ot_fail(err, OT_E_MODEL, "node '%s' (%s): %d axes (at most %d)", label(n), op_label(n), x->n_axes,
                     OT_PARAMS_MAX_LIST);
    return st;
}

static ot_status resolve_depth(const ot_node *n, ot_op_params *p, ot_error *err) {
    (void)err;
    ot_depth_params *d = &p->u.depth;
    d->blocksize = ot_node_attr_int(n, "blocksize", 0);
    d->mode_name = ot_node_attr_string(n, "mode", "DCR");
    d->crd = strcmp(d->mode_name, "CRD") == 0;
    d->mode_other = !d->crd && strcmp(d->mode_name, "DCR") != 0;
    return OT_OK;
}

/* ops3 (issue 26): every integer range-checked; which members an op reads is its own
 * business (ir/op_params.h) */
static ot_status resolve_xfmr(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_xfmr_params *x = &p->u.xfmr;
    ot_status st = int_attr(n, "axis", -1, &x->axis, err);
    if (!st) st = int_attr(n, "stash_type", 1, &x->stash_type, err);
    if (!st) st = flag_attr(n, "interleaved", &x->interleaved, err);
    if (!st) st = int_attr(n, "num_heads", 0, &x->num_heads, err);
    if (!st) st = int_attr(n, "rotary_embedding_dim", 0, &x->rotary_dim, err);
    if (!st) st = flag_attr(n, "is_causal", &x->is_causal, err);
    if (!st) st = int_attr(n, "q_num_heads", 0, &x->q_num_heads, err);
    if (!st) st = int_attr(n, "kv_num_heads", 0, &x->kv_num_heads, err);
    if (!st) st = int_attr(n, "qk_matmul_output_mode", 0, &x->qk_matmul_output_mode, err);
    if (!st) st = int_attr(n, "softmax_precision", 0, &x->softmax_precision, err);
    x->epsilon = ot_node_attr_float(n, "epsilon", 1e-5f);
    const ot_attr *a = ot_node_attr(n, "scale");
    x->has_scale = a && a->type == OT_ATTR_FLOAT;
    x->scale = x->has_scale ? a->f : 0.0f;
    x->softcap = ot_node_attr_float(n, "softcap", 0.0f);
    x->dropout_ratio = ot_node_attr_float(n, "dropout_ratio", 0.0f);
    return st;
}

/* ---- the table ------------------------------------------------------------------ */

typedef struct family {
    ot_params_kind kind;
    resolve_fn resolve;
} family;

/* ---- ops batch 4 (issue 26) ---- */
static ot_status resolve_einsum(const ot_node *n, ot_op_params *p, ot_error *err) {
    p->u.einsum.equation = ot_node_attr_string(n, "equation", NULL);
    return int_attr(n, "index", 0, &p->u.einsum.index, err);
}

static ot_status resolve_select(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_select_params *x = &p->u.select;
    int largest = 1, sorted = 1;
    ot_status st = int_attr(n, "axis", -1, &x->axis, err);
    if (!st) st = int_attr(n, "largest", 1, &largest, err);
    if (!st) st = int_attr(n, "sorted", 1, &sorted, err);
    x->largest = largest != 0;
    x->sorted = sorted != 0;
    return st;
}

/* The activations a cell's list must hold per direction (RNN: Tanh, or Relu). */
static bool default_activations(const ot_node *n, int cell, int dirs, bool *relu) {
    const ot_attr *a = ot_node_attr(n, "activations");
    *relu = false;
    if (!a) return true;
    static const char *gru[2] = {"Sigmoid", "Tanh"}, *lstm[3] = {"Sigmoid", "Tanh", "Tanh"};
    int per = cell == OT_OP_RNN ? 1 : cell == OT_OP_GRU ? 2 : 3;
    if (a->type != OT_ATTR_STRINGS || a->n != per * (dirs > 0 ? dirs : 1)) return false;
    for (int k = 0; k < a->n; k++) {
        const char *v = a->strings[k], *want = cell == OT_OP_RNN ? NULL : cell == OT_OP_GRU ? gru[k % 2] : lstm[k % 3];
        if (!want) {
            bool r = !strcmp(v, "Relu");
            if (!r && strcmp(v, "Tanh")) return false;
            if (k > 0 && r != *relu) return false;
            *relu = r;
        } else if (strcmp(v, want)) {
            return false;
        }
    }
    return true;
}

static ot_status resolve_rnn(const ot_node *n, ot_op_params *p, ot_error *err) {
    ot_rnn_params *x = &p->u.rnn;
    x->cell = n->op == OT_OP_RNN_GRAD ? (int)ot_node_attr_int(n, "cell", OT_OP_UNKNOWN) : (int)n->op;
    if (x->cell != OT_OP_RNN && x->cell != OT_OP_GRU && x->cell != OT_OP_LSTM) x->cell = OT_OP_UNKNOWN;
    x->direction = ot_node_attr_string(n, "direction", "forward");
    x->dirs = !strcmp(x->direction, "bidirectional") ? 2
              : (!strcmp(x->direction, "forward") || !strcmp(x->direction, "reverse")) ? 1 : 0;
    x->reverse = !strcmp(x->direction, "reverse");
    int lbr = 0, layout = 0, input_forget = 0;
    ot_status st = int_attr(n, "hidden_size", -1, &x->hidden_size, err);
    if (!st) st = int_attr(n, "layout", 0, &layout, err);
    if (!st) st = int_attr(n, "linear_before_reset", 0, &lbr, err);
    if (!st) st = int_attr(n, "input_forget", 0, &input_forget, err);
    x->layout1 = layout != 0;
    x->lbr = lbr != 0;
    x->input_forget = input_forget != 0;
    x->has_clip = ot_node_attr(n, "clip") != NULL;
    x->bad_activations = x->cell != OT_OP_UNKNOWN && !default_activations(n, x->cell, x->dirs, &x->relu);
    return st;
}

static const family FAMILY[OT_OP_COUNT] = {
    [OT_OP_GEMM] = {OT_PARAMS_GEMM, resolve_gemm},
    [OT_OP_CONV] = {OT_PARAMS_WINDOW, resolve_window},
    [OT_OP_CONV_GRAD_INPUT] = {OT_PARAMS_WINDOW, resolve_window},
    [OT_OP_CONV_GRAD_WEIGHT] = {OT_PARAMS_WINDOW, resolve_window},
    [OT_OP_CONV_TRANSPOSE] = {OT_PARAMS_WINDOW, resolve_window}, /* issue 26, ops batch 2 */
    [OT_OP_DEPTH_TO_SPACE] = {OT_PARAMS_DEPTH, resolve_depth},
    [OT_OP_SPACE_TO_DEPTH] = {OT_PARAMS_DEPTH, resolve_depth},
    [OT_OP_MAX_POOL] = {OT_PARAMS_WINDOW, resolve_window},
    [OT_OP_AVERAGE_POOL] = {OT_PARAMS_WINDOW, resolve_window},
    [OT_OP_MAX_POOL_GRAD] = {OT_PARAMS_WINDOW, resolve_window},
    [OT_OP_AVERAGE_POOL_GRAD] = {OT_PARAMS_WINDOW, resolve_window},
    [OT_OP_LEAKY_RELU] = {OT_PARAMS_ACT, resolve_act},
    [OT_OP_LEAKY_RELU_GRAD] = {OT_PARAMS_ACT, resolve_act},
    [OT_OP_GELU] = {OT_PARAMS_ACT, resolve_act},
    [OT_OP_GELU_GRAD] = {OT_PARAMS_ACT, resolve_act},
    [OT_OP_CLIP] = {OT_PARAMS_ACT, resolve_act},
    [OT_OP_CLIP_GRAD] = {OT_PARAMS_ACT, resolve_act},
    [OT_OP_DROPOUT] = {OT_PARAMS_DROPOUT, resolve_dropout},
    [OT_OP_DROPOUT_GRAD] = {OT_PARAMS_DROPOUT, resolve_dropout},
    [OT_OP_SOFTMAX] = {OT_PARAMS_NORM, resolve_norm},
    [OT_OP_LOG_SOFTMAX] = {OT_PARAMS_NORM, resolve_norm},
    [OT_OP_SOFTMAX_GRAD] = {OT_PARAMS_NORM, resolve_norm},
    [OT_OP_LOG_SOFTMAX_GRAD] = {OT_PARAMS_NORM, resolve_norm},
    [OT_OP_BATCH_NORM] = {OT_PARAMS_NORM, resolve_norm},
    [OT_OP_BATCH_NORM_GRAD] = {OT_PARAMS_NORM, resolve_norm},
    [OT_OP_LAYER_NORM] = {OT_PARAMS_NORM, resolve_norm},
    [OT_OP_LAYER_NORM_GRAD] = {OT_PARAMS_NORM, resolve_norm},
    [OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = {OT_PARAMS_LOSS, resolve_loss},
    [OT_OP_NLL_LOSS] = {OT_PARAMS_LOSS, resolve_loss},
    [OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD] = {OT_PARAMS_LOSS, resolve_loss},
    [OT_OP_NLL_LOSS_GRAD] = {OT_PARAMS_LOSS, resolve_loss},
    [OT_OP_LINEAR_CROSS_ENTROPY] = {OT_PARAMS_LOSS, resolve_loss},
    [OT_OP_LINEAR_CROSS_ENTROPY_GRAD] = {OT_PARAMS_LOSS, resolve_loss},
    [OT_OP_REDUCE_MEAN] = {OT_PARAMS_REDUCE, resolve_reduce},
    [OT_OP_REDUCE_SUM] = {OT_PARAMS_REDUCE, resolve_reduce},
    [OT_OP_TRANSPOSE] = {OT_PARAMS_LAYOUT, resolve_layout},
    [OT_OP_CONCAT] = {OT_PARAMS_LAYOUT, resolve_layout},
    [OT_OP_SPLIT] = {OT_PARAMS_LAYOUT, resolve_layout},
    [OT_OP_GATHER] = {OT_PARAMS_LAYOUT, resolve_layout},
    [OT_OP_GATHER_GRAD] = {OT_PARAMS_LAYOUT, resolve_layout},
    [OT_OP_SHAPE] = {OT_PARAMS_LAYOUT, resolve_layout},
    [OT_OP_SGD_STEP] = {OT_PARAMS_OPTIM, resolve_optim},
    [OT_OP_ADAM_STEP] = {OT_PARAMS_OPTIM, resolve_optim},
    /* ---- comparison, logic and pointwise math (issue 13) ---- */
    [OT_OP_IS_INF] = {OT_PARAMS_MATH, resolve_math},
    [OT_OP_HARD_SIGMOID] = {OT_PARAMS_MATH, resolve_math},
    [OT_OP_MOD] = {OT_PARAMS_MATH, resolve_math},
    [OT_OP_HARD_SIGMOID_GRAD] = {OT_PARAMS_MATH, resolve_math},
    [OT_OP_MOD_GRAD] = {OT_PARAMS_MATH, resolve_math},
    [OT_OP_MAX_GRAD] = {OT_PARAMS_MATH, resolve_math},
    [OT_OP_MIN_GRAD] = {OT_PARAMS_MATH, resolve_math},
    /* ---- layout and indexing (issue 13) ---- */
    [OT_OP_PAD] = {OT_PARAMS_INDEX, resolve_index},
    [OT_OP_PAD_GRAD] = {OT_PARAMS_INDEX, resolve_index},
    [OT_OP_TRILU] = {OT_PARAMS_INDEX, resolve_index},
    [OT_OP_GATHER_ELEMENTS] = {OT_PARAMS_INDEX, resolve_index},
    [OT_OP_GATHER_ELEMENTS_GRAD] = {OT_PARAMS_INDEX, resolve_index},
    [OT_OP_CUMSUM] = {OT_PARAMS_INDEX, resolve_index},
    [OT_OP_SCATTER_ND] = {OT_PARAMS_INDEX, resolve_index},
    [OT_OP_SCATTER_ELEMENTS] = {OT_PARAMS_INDEX, resolve_index},
    [OT_OP_GATHER_ND] = {OT_PARAMS_INDEX, resolve_index},
    /* ---- random sources (issue 13) ---- */
    [OT_OP_RANDOM_UNIFORM_LIKE] = {OT_PARAMS_RANDOM, resolve_random},
    [OT_OP_RANDOM_UNIFORM] = {OT_PARAMS_RANDOM, resolve_random},
    /* ---- ops batch 1 (issue 26) ---- */
    [OT_OP_ELU] = {OT_PARAMS_UNARY, resolve_unary},
    [OT_OP_SELU] = {OT_PARAMS_UNARY, resolve_unary},
    [OT_OP_CELU] = {OT_PARAMS_UNARY, resolve_unary},
    [OT_OP_ELU_GRAD] = {OT_PARAMS_UNARY, resolve_unary},
    [OT_OP_THRESHOLDED_RELU] = {OT_PARAMS_UNARY, resolve_unary},
    [OT_OP_THRESHOLDED_RELU_GRAD] = {OT_PARAMS_UNARY, resolve_unary},
    [OT_OP_PRELU_GRAD] = {OT_PARAMS_MATH, resolve_math},
    [OT_OP_REDUCE_MAX] = {OT_PARAMS_REDUCE, resolve_reduce},
    [OT_OP_REDUCE_MIN] = {OT_PARAMS_REDUCE, resolve_reduce},
    [OT_OP_REDUCE_PROD] = {OT_PARAMS_REDUCE, resolve_reduce},
    [OT_OP_REDUCE_L1] = {OT_PARAMS_REDUCE, resolve_reduce},
    [OT_OP_REDUCE_L2] = {OT_PARAMS_REDUCE, resolve_reduce},
    [OT_OP_REDUCE_LOG_SUM_EXP] = {OT_PARAMS_REDUCE, resolve_reduce},
    [OT_OP_REDUCE_SUM_SQUARE] = {OT_PARAMS_REDUCE, resolve_reduce},
    [OT_OP_ARG_MAX] = {OT_PARAMS_REDUCE, resolve_reduce},
    [OT_OP_ARG_MIN] = {OT_PARAMS_REDUCE, resolve_reduce},
    [OT_OP_REDUCE_GRAD] = {OT_PARAMS_REDUCE, resolve_reduce},
    [OT_OP_INSTANCE_NORM] = {OT_PARAMS_NORM, resolve_norm},
    [OT_OP_GROUP_NORM] = {OT_PARAMS_NORM, resolve_norm},
    [OT_OP_GROUP_NORM_GRAD] = {OT_PARAMS_NORM, resolve_norm},
    /* ---- spatial ops (issue 26, ops batch 2) ---- */
    [OT_OP_RESIZE] = {OT_PARAMS_RESIZE, resolve_resize},
    [OT_OP_UPSAMPLE] = {OT_PARAMS_RESIZE, resolve_resize},
    [OT_OP_RESIZE_GRAD] = {OT_PARAMS_RESIZE, resolve_resize},
    /* ops3 (issue 26) */
    [OT_OP_RMS_NORM] = {OT_PARAMS_XFMR, resolve_xfmr},
    [OT_OP_RMS_NORM_GRAD] = {OT_PARAMS_XFMR, resolve_xfmr},
    [OT_OP_ROTARY_EMBEDDING] = {OT_PARAMS_XFMR, resolve_xfmr},
    [OT_OP_ROTARY_EMBEDDING_GRAD] = {OT_PARAMS_XFMR, resolve_xfmr},
    [OT_OP_ATTENTION] = {OT_PARAMS_XFMR, resolve_xfmr},
    [OT_OP_ATTENTION_GRAD] = {OT_PARAMS_XFMR, resolve_xfmr},
    /* ---- ops batch 4 (issue 26) ---- */
    [OT_OP_EINSUM] = {OT_PARAMS_EINSUM, resolve_einsum},
    [OT_OP_EINSUM_GRAD] = {OT_PARAMS_EINSUM, resolve_einsum},
    [OT_OP_TOP_K] = {OT_PARAMS_SELECT, resolve_select},
    [OT_OP_ONE_HOT] = {OT_PARAMS_SELECT, resolve_select},
    /* ---- recurrent ops (issue 26) ---- */
    [OT_OP_RNN] = {OT_PARAMS_RNN, resolve_rnn},
    [OT_OP_GRU] = {OT_PARAMS_RNN, resolve_rnn},
    [OT_OP_LSTM] = {OT_PARAMS_RNN, resolve_rnn},
    [OT_OP_RNN_GRAD] = {OT_PARAMS_RNN, resolve_rnn},
};

ot_status ot_node_resolve_params(const ot_node *node, ot_op_params *p, ot_error *err) {
    ot_op_params r;
    memset(&r, 0, sizeof r);
    r.kind = OT_PARAMS_NONE;
    ot_status st = OT_OK;
    if (node->op > OT_OP_UNKNOWN && node->op < OT_OP_COUNT && FAMILY[node->op].resolve) {
        r.kind = FAMILY[node->op].kind;
        st = FAMILY[node->op].resolve(node, &r, err);
    }
    /* p may be &node->params: written once, whole, on success */
    if (!st) *p = r;
    return st;
}

ot_status ot_graph_resolve_params(ot_graph *g, ot_error *err) {
    for (int i = 0; i < g->n_nodes; i++) {
        ot_node *n = &g->nodes[i];
        if (n->removed) continue;
        ot_status st = ot_node_resolve_params(n, &n->params, err);
        if (st) return st;
    }
    return OT_OK;
}

ot_status ot_node_params(const ot_node *node, ot_op_params *scratch, const ot_op_params **out, ot_error *err) {
    /* a kind that does not fit the op (never resolved, or the op was rewritten since)
     * is resolved afresh */
    ot_params_kind want = node->op > OT_OP_UNKNOWN && node->op < OT_OP_COUNT && FAMILY[node->op].resolve
                              ? FAMILY[node->op].kind
                              : OT_PARAMS_NONE;
    if (node->params.kind == want) {
        *out = &node->params;
        return OT_OK;
    }
    *out = scratch;
    return ot_node_resolve_params(node, scratch, err);
}
