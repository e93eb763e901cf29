/* normalize.c — opset normalisation: rewrites each node into the one form later
 * passes (shape inference, autodiff, kernels) expect, whatever opset the model was
 * exported with. Operands that moved between attributes and inputs across opsets
 * (axes, split, Clip bounds, Dropout ratio / training_mode) become attributes;
 * defaults that changed between opsets (Softmax axis, BatchNorm training mode) are
 * written explicitly. One table maps each op to its normalisation. Runs before
 * shape inference; ot_imp_normalize_late finishes, after it, the operands only
 * folding makes constant. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"

/* The value id at input slot k, or -1 when absent. */
static int input_at(const ot_node *n, int k) { return k < n->n_inputs ? n->inputs[k] : -1; }

/* A value whose contents are known at import: initializers and Constant outputs. A
 * param loaded without its data (skip_param_data) is one too, so a model gets the same
 * verdict either way: such params are over OT_SKIP_PARAM_MIN_BYTES, and read_ints and
 * read_scalar refuse them on dtype or size before they would read a byte. */
static const ot_value *const_value(const ot_graph *g, int vid) {
    if (vid < 0) return NULL;
    const ot_value *v = &g->values[vid];
    return ((v->data || ot_imp_payload_absent(v)) && v->producer < 0) ? v : NULL;
}

static ot_status not_constant(const ot_graph *g, const ot_node *n, int vid, const char *what, ot_error *err) {
    return ot_fail(err, OT_E_UNSUPPORTED,
                   "node '%s' (%s): %s come from '%s', which is computed at run time; only constant %s are supported",
                   n->name, n->op_type, what, g->values[vid].name, what);
}

/* Reads an int32/int64 tensor's elements into a new array. */
static ot_status read_ints(const ot_node *n, const ot_value *v, int64_t **out, int *count, ot_error *err) {
    size_t es = ot_dtype_size(v->dtype);
    if (v->dtype != OT_I64 && v->dtype != OT_I32)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): '%s' must be int64, not %s", n->name, n->op_type, v->name,
                       ot_dtype_name(v->dtype));
    size_t cnt = v->nbytes / es;
    int64_t *r = ot_xcalloc(cnt, sizeof(int64_t));
    if (!r) return ot_fail(err, OT_E_MEMORY, "out of memory");
    for (size_t i = 0; i < cnt; i++) {
        if (v->dtype == OT_I64) {
            memcpy(&r[i], (const char *)v->data + 8 * i, 8);
        } else {
            int32_t x;
            memcpy(&x, (const char *)v->data + 4 * i, 4);
            r[i] = x;
        }
    }
    *out = r;
    *count = (int)cnt;
    return OT_OK;
}

static float half_to_float(uint16_t h) {
    int e = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float s = (h & 0x8000) ? -1.0f : 1.0f;
    if (e == 0) return s * ldexpf((float)mant, -24);
    if (e == 31) return mant ? NAN : s * INFINITY;
    return s * ldexpf((float)(mant | 0x400), e - 25);
}

/* Reads a one-element tensor of any supported dtype as a float (Clip bounds, ratio). */
static ot_status read_scalar(const ot_node *n, const ot_value *v, double *out, ot_error *err) {
    size_t es = ot_dtype_size(v->dtype);
    if (!es || v->nbytes != es)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): '%s' must hold one element", n->name, n->op_type, v->name);
    const void *p = v->data;
    switch (v->dtype) {
    case OT_F32: { float x; memcpy(&x, p, 4); *out = x; break; }
    case OT_F64: { double x; memcpy(&x, p, 8); *out = x; break; }
    case OT_F16: { uint16_t x; memcpy(&x, p, 2); *out = half_to_float(x); break; }
    case OT_BF16: { uint16_t x; memcpy(&x, p, 2); uint32_t b = (uint32_t)x << 16; float f; memcpy(&f, &b, 4); *out = f; break; }
    case OT_I64: { int64_t x; memcpy(&x, p, 8); *out = (double)x; break; }
    case OT_I32: { int32_t x; memcpy(&x, p, 4); *out = x; break; }
    case OT_I8: *out = *(const int8_t *)p; break;
    case OT_U8: case OT_BOOL: *out = *(const uint8_t *)p; break;
    default: return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): '%s' has an unsupported dtype", n->name, n->op_type, v->name);
    }
    return OT_OK;
}

/* Drops input slots >= keep. A float initializer read only through a dropped slot
 * (a Clip bound, a Dropout ratio) is no longer trainable: it becomes a constant. */
static void keep_inputs(ot_graph *g, int nid, int keep) {
    ot_node *n = &g->nodes[nid];
    for (int k = keep; k < n->n_inputs; k++) {
        int vid = n->inputs[k];
        ot_graph_set_input(g, nid, k, -1);
        if (vid >= 0) {
            ot_value *v = &g->values[vid];
            if (v->kind == OT_VK_PARAM && v->n_consumers == 0 && !v->is_graph_output) v->kind = OT_VK_CONSTANT;
        }
    }
    if (n->n_inputs > keep) n->n_inputs = keep;
}

static ot_status set_int_default(ot_node *n, const char *name, int64_t dflt, ot_error *err) {
    if (ot_node_attr(n, name)) return OT_OK;
    return ot_node_set_attr_int(n, name, dflt) ? ot_fail(err, OT_E_MEMORY, "out of memory") : OT_OK;
}

static ot_status set_float_default(ot_node *n, const char *name, float dflt, ot_error *err) {
    if (ot_node_attr(n, name)) return OT_OK;
    return ot_node_set_attr_float(n, name, dflt) ? ot_fail(err, OT_E_MEMORY, "out of memory") : OT_OK;
}

/* Squeeze / Unsqueeze / ReduceMean / ReduceSum axes, Split sizes: input 1 → ints attr. */
static ot_status ints_input_to_attr(ot_graph *g, int nid, const char *attr, const char *what, ot_error *err) {
    ot_node *n = &g->nodes[nid];
    int vid = input_at(n, 1);
    if (vid >= 0) {
        const ot_value *v = const_value(g, vid);
        if (!v) return not_constant(g, n, vid, what, err);
        int64_t *vals = NULL;
        int cnt = 0;
        ot_status st = read_ints(n, v, &vals, &cnt, err);
        if (st) return st;
        /* An empty list means "absent" (all axes / equal split), as with no input. */
        int rc = cnt ? ot_node_set_attr_ints(n, attr, vals, cnt) : 0;
        if (!cnt) ot_node_remove_attr(n, attr);
        free(vals);
        if (rc) return ot_fail(err, OT_E_MEMORY, "out of memory");
    }
    keep_inputs(g, nid, 1);
    return OT_OK;
}

/* A Clip bound cast to X's dtype (PyTorch's dynamo exporter without its optimizer
 * writes Constant -> CastLike(bound, X) -> Clip): the constant it casts, or NULL. The
 * bound becomes a float attribute either way, which is the cast; *cast is the
 * CastLike node (or -1), removed by the caller once nothing else reads it. */
static const ot_value *cast_bound(const ot_graph *g, int vid, int *cast) {
    *cast = -1;
    int p = vid >= 0 ? g->values[vid].producer : -1;
    if (p < 0 || g->nodes[p].removed || g->nodes[p].op != OT_OP_CAST_LIKE) return NULL;
    const ot_value *c = const_value(g, input_at(&g->nodes[p], 0));
    if (c) *cast = p;
    return c;
}

static void drop_unread_cast(ot_graph *g, int cast) {
    if (cast < 0 || g->nodes[cast].removed) return;
    int out = g->nodes[cast].outputs[0];
    if (out >= 0 && (g->values[out].n_consumers > 0 || g->values[out].is_graph_output)) return;
    ot_graph_remove_node(g, cast);
}

static ot_status normalize_clip(ot_graph *g, int nid, ot_error *err) {
    ot_node *n = &g->nodes[nid];
    const char *names[2] = {"min", "max"};
    const float dflt[2] = {-INFINITY, INFINITY};
    int casts[2] = {-1, -1};
    for (int k = 0; k < 2; k++) {
        int vid = input_at(n, k + 1);
        if (vid >= 0) { /* opset 11+: bounds are optional inputs */
            const ot_value *v = const_value(g, vid);
            if (!v) v = cast_bound(g, vid, &casts[k]);
            if (!v) return not_constant(g, n, vid, "Clip bounds", err);
            double x;
            ot_status st = read_scalar(n, v, &x, err);
            if (st) return st;
            if (ot_node_set_attr_float(n, names[k], (float)x)) return ot_fail(err, OT_E_MEMORY, "out of memory");
        } else {
            ot_status st = set_float_default(n, names[k], dflt[k], err);
            if (st) return st;
        }
    }
    keep_inputs(g, nid, 1);
    for (int k = 0; k < 2; k++) drop_unread_cast(g, casts[k]);
    return OT_OK;
}

static ot_status normalize_dropout(ot_graph *g, int nid, ot_error *err) {
    ot_node *n = &g->nodes[nid];
    int rv = input_at(n, 1), tv = input_at(n, 2);
    if (rv >= 0) {
        const ot_value *v = const_value(g, rv);
        if (!v) return not_constant(g, n, rv, "Dropout ratios", err);
        double x;
        ot_status st = read_scalar(n, v, &x, err);
        if (st) return st;
        if (ot_node_set_attr_float(n, "ratio", (float)x)) return ot_fail(err, OT_E_MEMORY, "out of memory");
    }
    int64_t training = 0;
    if (tv >= 0) {
        const ot_value *v = const_value(g, tv);
        if (!v) return not_constant(g, n, tv, "Dropout training modes", err);
        double x;
        ot_status st = read_scalar(n, v, &x, err);
        if (st) return st;
        training = x != 0;
    } else if (g->opset < 7) {
        /* Opset 1-6 Dropout trains unless is_test is set. */
        training = ot_node_attr_int(n, "is_test", 0) == 0;
    }
    ot_node_remove_attr(n, "is_test");
    ot_status st = set_float_default(n, "ratio", 0.5f, err);
    if (!st && ot_node_set_attr_int(n, "training_mode", training)) st = ot_fail(err, OT_E_MEMORY, "out of memory");
    if (st) return st;
    float r = ot_node_attr_float(n, "ratio", 0.5f);
    if (!(r >= 0.0f && r < 1.0f))
        return ot_fail(err, OT_E_MODEL, "node '%s' (Dropout): ratio %g is outside [0, 1)", n->name, r);
    keep_inputs(g, nid, 1);
    return OT_OK;
}

static ot_status normalize_batchnorm(ot_graph *g, int nid, ot_error *err) {
    ot_node *n = &g->nodes[nid];
    if (g->opset < 14) {
        /* Before opset 14 the mode is implied by the outputs: Y alone is inference,
         * Y with running mean/var (and saved mean/var) is training. */
        int present = 0;
        for (int o = 0; o < n->n_outputs; o++) present += n->outputs[o] >= 0;
        int64_t training = present > 1;
        if (g->opset < 7 && ot_node_attr(n, "is_test")) training = ot_node_attr_int(n, "is_test", 0) == 0;
        ot_node_remove_attr(n, "is_test");
        ot_node_remove_attr(n, "spatial");
        if (ot_node_set_attr_int(n, "training_mode", training)) return ot_fail(err, OT_E_MEMORY, "out of memory");
        /* Opset < 14 adds saved_mean / saved_var: drop them when nothing reads them. */
        for (int o = 3; o < n->n_outputs; o++) {
            int vid = n->outputs[o];
            if (vid < 0) continue;
            ot_value *v = &g->values[vid];
            if (v->n_consumers || v->is_graph_output)
                return ot_fail(err, OT_E_UNSUPPORTED,
                               "node '%s' (BatchNormalization): output '%s' (saved mean/variance of opset < 14) is "
                               "used; onnxtrain does not provide it",
                               n->name, v->name);
            v->producer = -1;
        }
        if (n->n_outputs > 3) n->n_outputs = 3;
    }
    ot_status st = set_int_default(n, "training_mode", 0, err);
    if (!st) st = set_float_default(n, "epsilon", 1e-5f, err);
    if (!st) st = set_float_default(n, "momentum", 0.9f, err);
    return st;
}

/* Squeeze / Unsqueeze: axes input → attribute. */
static ot_status normalize_squeeze(ot_graph *g, int nid, ot_error *err) {
    return ints_input_to_attr(g, nid, "axes", "axes", err);
}

/* ReduceMean / ReduceSum. Axes computed by a node (PyTorch's dynamo exporter without
 * optimisation writes Constant -> Reshape) stay an input here: shape inference reads
 * them through its shape data and folds the chain, and ot_imp_normalize_late turns
 * them into the attribute afterwards. */
static ot_status normalize_reduce(ot_graph *g, int nid, ot_error *err) {
    int av = input_at(&g->nodes[nid], 1);
    bool computed = av >= 0 && g->values[av].producer >= 0;
    ot_status st = computed ? OT_OK : ints_input_to_attr(g, nid, "axes", "axes", err);
    if (!st) st = set_int_default(&g->nodes[nid], "keepdims", 1, err);
    if (!st) st = set_int_default(&g->nodes[nid], "noop_with_empty_axes", 0, err);
    return st;
}

static ot_status normalize_split(ot_graph *g, int nid, ot_error *err) {
    ot_status st = ints_input_to_attr(g, nid, "split", "split sizes", err);
    if (!st) st = set_int_default(&g->nodes[nid], "axis", 0, err);
    return st;
}

/* Softmax / LogSoftmax. */
static ot_status normalize_softmax(ot_graph *g, int nid, ot_error *err) {
    ot_node *n = &g->nodes[nid];
    if (g->opset < 13) {
        /* Opset 1-12: input coerced to 2-D [prod(d<axis), prod(d>=axis)], axis 1. */
        if (ot_node_set_attr_int(n, "legacy_2d", 1)) return ot_fail(err, OT_E_MEMORY, "out of memory");
        return set_int_default(n, "axis", 1, err);
    }
    return set_int_default(n, "axis", -1, err);
}

static ot_status normalize_gemm(ot_graph *g, int nid, ot_error *err) {
    ot_node *n = &g->nodes[nid];
    ot_status st = set_float_default(n, "alpha", 1.0f, err);
    if (!st) st = set_float_default(n, "beta", 1.0f, err);
    if (!st) st = set_int_default(n, "transA", 0, err);
    if (!st) st = set_int_default(n, "transB", 0, err);
    return st;
}

/* ---- layout and indexing (issue 13) ---- */

int ot_imp_add_const(ot_graph *g, const ot_node *n, const char *what, ot_dtype dt, const ot_shape *s,
                     const void *data, size_t nbytes) {
    char base[256];
    snprintf(base, sizeof base, "%s.%s", n->name ? n->name : "pad", what);
    int v = ot_graph_add_value_unique(g, base, dt, s, OT_VK_CONSTANT);
    if (v < 0 || ot_value_set_data(&g->values[v], data, nbytes)) return -1;
    return v;
}

/* Pad: opset 2-10 give pads (Pad-1: "paddings") and value as attributes; they become
 * the inputs of opset 11 on (pads int64, constant_value float32), so every later pass
 * reads one form. The inputs themselves stay inputs: they are often computed from
 * shapes and only known once shape inference has folded them. */
static ot_status normalize_pad(ot_graph *g, int nid, ot_error *err) {
    ot_node *n = &g->nodes[nid];
    const ot_attr *pa = ot_node_attr(n, "pads");
    if (!pa) pa = ot_node_attr(n, "paddings");
    if (n->n_inputs >= 2) {
        if (pa) return ot_fail(err, OT_E_MODEL, "node '%s' (Pad): pads given both as an attribute and an input", n->name);
        return OT_OK;
    }
    if (!pa || pa->type != OT_ATTR_INTS)
        return ot_fail(err, OT_E_MODEL, "node '%s' (Pad): no pads (an ints attribute before opset 11)", n->name);
    int64_t np = pa->n;
    ot_shape ps = ot_shape_make(1, &np);
    float value = ot_node_attr_float(n, "value", 0.0f);
    int pv = ot_imp_add_const(g, n, "pads", OT_I64, &ps, pa->ints, (size_t)pa->n * sizeof(int64_t));
    ot_shape scalar = ot_shape_make(0, NULL);
    int cv = pv < 0 ? -1 : ot_imp_add_const(g, n, "value", OT_F32, &scalar, &value, sizeof value);
    n = &g->nodes[nid];
    int *in = cv < 0 ? NULL : realloc(n->inputs, 3 * sizeof(int));
    if (!in) return ot_fail(err, OT_E_MEMORY, "out of memory");
    n->inputs = in;
    for (int k = n->n_inputs; k < 3; k++) n->inputs[k] = -1;
    n->n_inputs = 3;
    ot_graph_set_input(g, nid, 1, pv);
    ot_graph_set_input(g, nid, 2, cv);
    ot_node_remove_attr(n, "pads");
    ot_node_remove_attr(n, "paddings");
    ot_node_remove_attr(n, "value");
    return OT_OK;
}

/* ---- spatial ops (issue 26, ops batch 2) ---- */

/* Resize-10 (X, scales) and Upsample-9 (X, scales) become Resize-11's (X, roi, scales)
 * with no roi; Upsample-7's scales attribute (Upsample-1's height_scale / width_scale
 * of a 4-D input: [1, 1, h, w]) becomes that constant input. Both older
 * forms mean the asymmetric transform with floor rounding (PyTorch's nearest), written
 * out for Resize-10 (Upsample's params default to it). */
static ot_status normalize_resize(ot_graph *g, int nid, ot_error *err) {
    ot_node *n = &g->nodes[nid];
    bool upsample = n->op == OT_OP_UPSAMPLE, old = upsample || g->opset < 11;
    if (!old) return OT_OK;
    const ot_attr *sa = upsample ? ot_node_attr(n, "scales") : NULL;
    if (sa && n->n_inputs >= 2)
        return ot_fail(err, OT_E_MODEL, "node '%s' (Upsample): scales given both as an attribute and an input", n->name);
    if (n->n_inputs > 2)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): %d inputs (this opset's form is (X, scales))", n->name,
                       n->op_type, n->n_inputs);
    int sv = input_at(n, 1);
    float hw[4] = {1.0f, 1.0f, ot_node_attr_float(n, "height_scale", 0.0f), ot_node_attr_float(n, "width_scale", 0.0f)};
    if (upsample && !sa && sv < 0 && (ot_node_attr(n, "height_scale") || ot_node_attr(n, "width_scale"))) {
        int64_t four = 4;
        ot_shape fs = ot_shape_make(1, &four);
        if ((sv = ot_imp_add_const(g, n, "scales", OT_F32, &fs, hw, sizeof hw)) < 0)
            return ot_fail(err, OT_E_MEMORY, "out of memory");
        n = &g->nodes[nid];
    }
    if (sa) {
        if (sa->type != OT_ATTR_FLOATS)
            return ot_fail(err, OT_E_MODEL, "node '%s' (Upsample): attribute 'scales' must be floats", n->name);
        int64_t ns = sa->n;
        ot_shape ss = ot_shape_make(1, &ns);
        if ((sv = ot_imp_add_const(g, n, "scales", OT_F32, &ss, sa->floats, (size_t)sa->n * sizeof(float))) < 0)
            return ot_fail(err, OT_E_MEMORY, "out of memory");
        n = &g->nodes[nid];
        ot_node_remove_attr(n, "scales");
    }
    if (sv < 0) return ot_fail(err, OT_E_MODEL, "node '%s' (%s): no scales", n->name, n->op_type);
    int *in = realloc(n->inputs, 3 * sizeof(int));
    if (!in) return ot_fail(err, OT_E_MEMORY, "out of memory");
    n->inputs = in;
    for (int k = n->n_inputs; k < 3; k++) n->inputs[k] = -1;
    n->n_inputs = 3;
    if (input_at(n, 1) >= 0) ot_graph_set_input(g, nid, 1, -1);
    ot_graph_set_input(g, nid, 2, sv);
    if (!upsample && ((!ot_node_attr(n, "coordinate_transformation_mode") &&
                       ot_node_set_attr_string(n, "coordinate_transformation_mode", "asymmetric")) ||
                      (!ot_node_attr(n, "nearest_mode") && ot_node_set_attr_string(n, "nearest_mode", "floor"))))
        return ot_fail(err, OT_E_MEMORY, "out of memory");
    return OT_OK;
}

/* ops batch 4 (issue 26): TopK before opset 10 gives k as an attribute; it becomes
 * the constant input K (int64 [1]) of the later opsets. */
static ot_status normalize_top_k(ot_graph *g, int nid, ot_error *err) {
    ot_node *n = &g->nodes[nid];
    const ot_attr *ka = ot_node_attr(n, "k");
    if (n->n_inputs >= 2) {
        if (ka) return ot_fail(err, OT_E_MODEL, "node '%s' (TopK): k given both as an attribute and an input", n->name);
        return OT_OK;
    }
    if (!ka || ka->type != OT_ATTR_INT)
        return ot_fail(err, OT_E_MODEL, "node '%s' (TopK): no K (an int attribute k before opset 10)", n->name);
    int64_t one = 1, k = ka->i;
    ot_shape ks = ot_shape_make(1, &one);
    int kv = ot_imp_add_const(g, n, "k", OT_I64, &ks, &k, sizeof k);
    n = &g->nodes[nid];
    int *in = kv < 0 ? NULL : realloc(n->inputs, 2 * sizeof(int));
    if (!in) return ot_fail(err, OT_E_MEMORY, "out of memory");
    n->inputs = in;
    n->inputs[1] = -1;
    n->n_inputs = 2;
    ot_graph_set_input(g, nid, 1, kv);
    ot_node_remove_attr(n, "k");
    return OT_OK;
}

typedef ot_status (*normalize_fn)(ot_graph *g, int nid, ot_error *err);

/* The normalisation of each op whose form differs across opsets or whose defaults
 * later passes rely on being written out. An op without an entry is read as
 * imported: its attributes and inputs mean the same in every opset onnxtrain reads. */
static const normalize_fn normalizers[OT_OP_COUNT] = {
    [OT_OP_GEMM] = normalize_gemm,
    [OT_OP_CLIP] = normalize_clip,
    [OT_OP_SOFTMAX] = normalize_softmax,
    [OT_OP_LOG_SOFTMAX] = normalize_softmax,
    [OT_OP_BATCH_NORM] = normalize_batchnorm,
    [OT_OP_DROPOUT] = normalize_dropout,
    [OT_OP_SQUEEZE] = normalize_squeeze,
    [OT_OP_UNSQUEEZE] = normalize_squeeze,
    [OT_OP_SPLIT] = normalize_split,
    [OT_OP_REDUCE_MEAN] = normalize_reduce,
    [OT_OP_REDUCE_SUM] = normalize_reduce,
    /* ---- layout and indexing (issue 13) ---- */
    [OT_OP_PAD] = normalize_pad,
    [OT_OP_TOP_K] = normalize_top_k, /* ops batch 4 (issue 26) */
    /* ---- ops batch 1 (issue 26): axes as ReduceSum's ---- */
    [OT_OP_REDUCE_MAX] = normalize_reduce,
    [OT_OP_REDUCE_MIN] = normalize_reduce,
    [OT_OP_REDUCE_PROD] = normalize_reduce,
    [OT_OP_REDUCE_L1] = normalize_reduce,
    [OT_OP_REDUCE_L2] = normalize_reduce,
    [OT_OP_REDUCE_LOG_SUM_EXP] = normalize_reduce,
    [OT_OP_REDUCE_SUM_SQUARE] = normalize_reduce,
    /* ---- spatial ops (issue 26, ops batch 2) ---- */
    [OT_OP_RESIZE] = normalize_resize,
    [OT_OP_UPSAMPLE] = normalize_resize,
};

ot_status ot_imp_normalize(ot_graph *g, ot_error *err) {
    for (int id = 0; id < g->n_nodes; id++) {
        if (g->nodes[id].removed || g->nodes[id].op == OT_OP_UNKNOWN) continue;
        normalize_fn fn = normalizers[g->nodes[id].op];
        ot_status st = fn ? fn(g, id, err) : OT_OK;
        if (st) return st;
    }
    return OT_OK;
}

ot_status ot_imp_normalize_late(ot_graph *g, ot_error *err) {
    for (int id = 0; id < g->n_nodes; id++) {
        const ot_node *n = &g->nodes[id];
        if (n->removed || normalizers[n->op] != normalize_reduce) continue;
        ot_status st = input_at(n, 1) >= 0 ? ints_input_to_attr(g, id, "axes", "axes", err) : OT_OK;
        if (st) return st;
    }
    return OT_OK;
}
