/* attrs.c — node attributes at import: AttributeProto → ot_attr for every attribute
 * kind (graphs, sparse tensors and type protos are kept only to be reported as
 * unsupported), and the attribute types onnxtrain reads for each supported op,
 * checked so a malformed model (Transpose perm given as a float, say) fails with a
 * message naming the node instead of a kernel silently reading a default. Attributes
 * not listed in the rules are kept and ignored. */
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"

/* ---- attributes ---------------------------------------------------------------- */

static char *dup_bytes(const ProtobufCBinaryData *b) {
    char *s = malloc(b->len + 1);
    if (s) {
        if (b->len) memcpy(s, b->data, b->len);
        s[b->len] = 0;
    }
    return s;
}

/* Proto2 models before IR 2 have no type field: infer it from what is set. */
static int attr_type(const Onnx__AttributeProto *a) {
    if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) return a->type;
    if (a->has_f) return OT_ATTR_FLOAT;
    if (a->has_i) return OT_ATTR_INT;
    if (a->has_s) return OT_ATTR_STRING;
    if (a->t) return OT_ATTR_TENSOR;
    if (a->g) return OT_ATTR_GRAPH;
    if (a->n_floats) return OT_ATTR_FLOATS;
    if (a->n_ints) return OT_ATTR_INTS;
    if (a->n_strings) return OT_ATTR_STRINGS;
    if (a->n_graphs) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
    return OT_ATTR_UNDEFINED;
}

/* Appends one converted attribute; *nested is set for graph attributes. */
ot_status ot_imp_convert_attr(const char *file, const char *dir, ot_node *n, const Onnx__AttributeProto *ap, bool *nested,
                              ot_error *err) {
    const char *aname = ap->name ? ap->name : "";
    for (int i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].name, aname))
            return ot_fail(err, OT_E_MODEL, "%s: node '%s' (%s): attribute '%s' given twice", file, n->name,
                           n->op_type, aname);
    ot_attr *na = realloc(n->attrs, (size_t)(n->n_attrs + 1) * sizeof *na);
    if (!na) return ot_fail(err, OT_E_MEMORY, "out of memory");
    n->attrs = na;
    ot_attr *a = &n->attrs[n->n_attrs];
    memset(a, 0, sizeof *a);
    if (!(a->name = ot_strdup(aname))) return ot_fail(err, OT_E_MEMORY, "out of memory");
    n->n_attrs++; /* counted now so the graph frees whatever is filled in below */
    int t = attr_type(ap);
    switch (t) {
    case OT_ATTR_FLOAT: a->type = OT_ATTR_FLOAT; a->f = ap->f; break;
    case OT_ATTR_INT: a->type = OT_ATTR_INT; a->i = ap->i; break;
    case OT_ATTR_STRING:
        a->type = OT_ATTR_STRING;
        if (!(a->s = dup_bytes(&ap->s))) return ot_fail(err, OT_E_MEMORY, "out of memory");
        break;
    case OT_ATTR_FLOATS:
        a->type = OT_ATTR_FLOATS;
        a->n = (int)ap->n_floats;
        if (!(a->floats = ot_xcalloc(ap->n_floats, sizeof(float)))) return ot_fail(err, OT_E_MEMORY, "out of memory");
        if (ap->n_floats) memcpy(a->floats, ap->floats, ap->n_floats * sizeof(float));
        break;
    case OT_ATTR_INTS:
        a->type = OT_ATTR_INTS;
        a->n = (int)ap->n_ints;
        if (!(a->ints = ot_xcalloc(ap->n_ints, sizeof(int64_t)))) return ot_fail(err, OT_E_MEMORY, "out of memory");
        if (ap->n_ints) memcpy(a->ints, ap->ints, ap->n_ints * sizeof(int64_t));
        break;
    case OT_ATTR_STRINGS:
        a->type = OT_ATTR_STRINGS;
        if (!(a->strings = ot_xcalloc(ap->n_strings, sizeof(char *)))) return ot_fail(err, OT_E_MEMORY, "out of memory");
        for (size_t i = 0; i < ap->n_strings; i++) {
            if (!(a->strings[i] = dup_bytes(&ap->strings[i]))) return ot_fail(err, OT_E_MEMORY, "out of memory");
            a->n = (int)i + 1;
        }
        break;
    case OT_ATTR_TENSOR: {
        if (!ap->t)
            return ot_fail(err, OT_E_MODEL, "%s: node '%s' (%s): tensor attribute '%s' has no tensor", file,
                           n->name, n->op_type, aname);
        a->type = OT_ATTR_TENSOR;
        ot_status st = ot_tensor_from_proto(ap->t, dir, &a->t, err);
        if (st == OT_E_UNSUPPORTED && n->op == OT_OP_UNKNOWN) {
            /* The node is reported as unsupported already; its tensor need not load. */
            a->type = OT_ATTR_OTHER;
            break;
        }
        if (st)
            return ot_error_prefix(err, "%s: node '%s' (%s), attribute '%s': ", file, n->name, n->op_type, aname);
        break;
    }
    case OT_ATTR_GRAPH:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
        a->type = OT_ATTR_GRAPH;
        *nested = true;
        break;
    case OT_ATTR_UNDEFINED:
        return ot_fail(err, OT_E_MODEL, "%s: node '%s' (%s): attribute '%s' has no type and no value", file,
                       n->name, n->op_type, aname);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS:
        a->type = OT_ATTR_OTHER;
        *nested = true;
        break;
    default: /* not an AttributeType at all: a corrupt or crafted model */
        return ot_fail(err, OT_E_MODEL, "%s: node '%s' (%s): attribute '%s' has type %d, which ONNX does not define",
                       file, n->name, n->op_type, aname, t);
    }
    return OT_OK;
}

/* ---- type rules ----------------------------------------------------------------- */

/* The attribute types an op's kernels and rules read, per op: an attribute present with
 * another type is refused at import. Checked in this order, so the first mismatch named
 * is the first listed. An op without an entry has no typed attributes to check. */
#define OT_MAX_TYPED_ATTRS 10
typedef struct attr_rule {
    const char *name; /* NULL ends an op's list */
    ot_attr_type type;
} attr_rule;

static const attr_rule rules[OT_OP_COUNT][OT_MAX_TYPED_ATTRS] = {
    [OT_OP_GEMM] = {{"alpha", OT_ATTR_FLOAT},
                    {"beta", OT_ATTR_FLOAT},
                    {"transA", OT_ATTR_INT},
                    {"transB", OT_ATTR_INT}},
    [OT_OP_LEAKY_RELU] = {{"alpha", OT_ATTR_FLOAT}},
    [OT_OP_CLIP] = {{"min", OT_ATTR_FLOAT}, {"max", OT_ATTR_FLOAT}},
    [OT_OP_GELU] = {{"approximate", OT_ATTR_STRING}},
    [OT_OP_SOFTMAX] = {{"axis", OT_ATTR_INT}},
    [OT_OP_LOG_SOFTMAX] = {{"axis", OT_ATTR_INT}},
    [OT_OP_CONV] = {{"auto_pad", OT_ATTR_STRING},
                    {"dilations", OT_ATTR_INTS},
                    {"group", OT_ATTR_INT},
                    {"kernel_shape", OT_ATTR_INTS},
                    {"pads", OT_ATTR_INTS},
                    {"strides", OT_ATTR_INTS}},
    [OT_OP_MAX_POOL] = {{"auto_pad", OT_ATTR_STRING},
                        {"ceil_mode", OT_ATTR_INT},
                        {"dilations", OT_ATTR_INTS},
                        {"kernel_shape", OT_ATTR_INTS},
                        {"pads", OT_ATTR_INTS},
                        {"storage_order", OT_ATTR_INT},
                        {"strides", OT_ATTR_INTS}},
    [OT_OP_AVERAGE_POOL] = {{"auto_pad", OT_ATTR_STRING},
                            {"ceil_mode", OT_ATTR_INT},
                            {"count_include_pad", OT_ATTR_INT},
                            {"dilations", OT_ATTR_INTS},
                            {"kernel_shape", OT_ATTR_INTS},
                            {"pads", OT_ATTR_INTS},
                            {"strides", OT_ATTR_INTS}},
    [OT_OP_BATCH_NORM] = {{"epsilon", OT_ATTR_FLOAT},
                          {"momentum", OT_ATTR_FLOAT},
                          {"training_mode", OT_ATTR_INT},
                          {"is_test", OT_ATTR_INT},
                          {"spatial", OT_ATTR_INT}},
    [OT_OP_LAYER_NORM] = {{"axis", OT_ATTR_INT}, {"epsilon", OT_ATTR_FLOAT}, {"stash_type", OT_ATTR_INT}},
    [OT_OP_DROPOUT] = {{"ratio", OT_ATTR_FLOAT}, {"seed", OT_ATTR_INT}, {"is_test", OT_ATTR_INT}},
    [OT_OP_FLATTEN] = {{"axis", OT_ATTR_INT}},
    [OT_OP_RESHAPE] = {{"allowzero", OT_ATTR_INT}, {"shape", OT_ATTR_INTS}},
    [OT_OP_TRANSPOSE] = {{"perm", OT_ATTR_INTS}},
    [OT_OP_SQUEEZE] = {{"axes", OT_ATTR_INTS}},
    [OT_OP_UNSQUEEZE] = {{"axes", OT_ATTR_INTS}},
    [OT_OP_CONCAT] = {{"axis", OT_ATTR_INT}},
    [OT_OP_SPLIT] = {{"axis", OT_ATTR_INT}, {"split", OT_ATTR_INTS}, {"num_outputs", OT_ATTR_INT}},
    [OT_OP_SLICE] = {{"starts", OT_ATTR_INTS}, {"ends", OT_ATTR_INTS}, {"axes", OT_ATTR_INTS}},
    [OT_OP_GATHER] = {{"axis", OT_ATTR_INT}},
    [OT_OP_SHAPE] = {{"start", OT_ATTR_INT}, {"end", OT_ATTR_INT}},
    [OT_OP_CAST] = {{"to", OT_ATTR_INT}, {"saturate", OT_ATTR_INT}},
    [OT_OP_CONSTANT_OF_SHAPE] = {{"value", OT_ATTR_TENSOR}},
    [OT_OP_REDUCE_MEAN] = {{"axes", OT_ATTR_INTS}, {"keepdims", OT_ATTR_INT}, {"noop_with_empty_axes", OT_ATTR_INT}},
    [OT_OP_REDUCE_SUM] = {{"axes", OT_ATTR_INTS}, {"keepdims", OT_ATTR_INT}, {"noop_with_empty_axes", OT_ATTR_INT}},
    [OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = {{"ignore_index", OT_ATTR_INT}, {"reduction", OT_ATTR_STRING}},
    [OT_OP_NLL_LOSS] = {{"ignore_index", OT_ATTR_INT}, {"reduction", OT_ATTR_STRING}},
    /* ---- comparison, logic and pointwise math (issue 13) ---- */
    [OT_OP_IS_INF] = {{"detect_negative", OT_ATTR_INT}, {"detect_positive", OT_ATTR_INT}},
    [OT_OP_HARD_SIGMOID] = {{"alpha", OT_ATTR_FLOAT}, {"beta", OT_ATTR_FLOAT}},
    [OT_OP_MOD] = {{"fmod", OT_ATTR_INT}},
    [OT_OP_CAST_LIKE] = {{"saturate", OT_ATTR_INT}},
    /* ---- layout and indexing (issue 13) ---- */
    [OT_OP_PAD] = {{"mode", OT_ATTR_STRING}, {"pads", OT_ATTR_INTS}, {"paddings", OT_ATTR_INTS}, {"value", OT_ATTR_FLOAT}},
    [OT_OP_TRILU] = {{"upper", OT_ATTR_INT}},
    [OT_OP_GATHER_ELEMENTS] = {{"axis", OT_ATTR_INT}},
    [OT_OP_CUMSUM] = {{"exclusive", OT_ATTR_INT}, {"reverse", OT_ATTR_INT}},
    [OT_OP_SCATTER_ND] = {{"reduction", OT_ATTR_STRING}},
    [OT_OP_SCATTER_ELEMENTS] = {{"axis", OT_ATTR_INT}, {"reduction", OT_ATTR_STRING}},
    [OT_OP_GATHER_ND] = {{"batch_dims", OT_ATTR_INT}},
    /* ---- random sources (issue 13) ---- */
    [OT_OP_RANDOM_UNIFORM_LIKE] = {{"dtype", OT_ATTR_INT}, {"high", OT_ATTR_FLOAT}, {"low", OT_ATTR_FLOAT},
                                   {"seed", OT_ATTR_FLOAT}},
    [OT_OP_RANDOM_UNIFORM] = {{"dtype", OT_ATTR_INT}, {"high", OT_ATTR_FLOAT}, {"low", OT_ATTR_FLOAT},
                              {"seed", OT_ATTR_FLOAT}, {"shape", OT_ATTR_INTS}},
    /* ---- ops batch 1 (issue 26) ---- */
    [OT_OP_ELU] = {{"alpha", OT_ATTR_FLOAT}},
    [OT_OP_SELU] = {{"alpha", OT_ATTR_FLOAT}, {"gamma", OT_ATTR_FLOAT}},
    [OT_OP_CELU] = {{"alpha", OT_ATTR_FLOAT}},
    [OT_OP_THRESHOLDED_RELU] = {{"alpha", OT_ATTR_FLOAT}},
    [OT_OP_REDUCE_MAX] = {{"axes", OT_ATTR_INTS}, {"keepdims", OT_ATTR_INT}, {"noop_with_empty_axes", OT_ATTR_INT}},
    [OT_OP_REDUCE_MIN] = {{"axes", OT_ATTR_INTS}, {"keepdims", OT_ATTR_INT}, {"noop_with_empty_axes", OT_ATTR_INT}},
    [OT_OP_REDUCE_PROD] = {{"axes", OT_ATTR_INTS}, {"keepdims", OT_ATTR_INT}, {"noop_with_empty_axes", OT_ATTR_INT}},
    [OT_OP_REDUCE_L1] = {{"axes", OT_ATTR_INTS}, {"keepdims", OT_ATTR_INT}, {"noop_with_empty_axes", OT_ATTR_INT}},
    [OT_OP_REDUCE_L2] = {{"axes", OT_ATTR_INTS}, {"keepdims", OT_ATTR_INT}, {"noop_with_empty_axes", OT_ATTR_INT}},
    [OT_OP_REDUCE_LOG_SUM_EXP] = {{"axes", OT_ATTR_INTS}, {"keepdims", OT_ATTR_INT}, {"noop_with_empty_axes", OT_ATTR_INT}},
    [OT_OP_REDUCE_SUM_SQUARE] = {{"axes", OT_ATTR_INTS}, {"keepdims", OT_ATTR_INT}, {"noop_with_empty_axes", OT_ATTR_INT}},
    [OT_OP_ARG_MAX] = {{"axis", OT_ATTR_INT}, {"keepdims", OT_ATTR_INT}, {"select_last_index", OT_ATTR_INT}},
    [OT_OP_ARG_MIN] = {{"axis", OT_ATTR_INT}, {"keepdims", OT_ATTR_INT}, {"select_last_index", OT_ATTR_INT}},
    [OT_OP_INSTANCE_NORM] = {{"epsilon", OT_ATTR_FLOAT}},
    [OT_OP_GROUP_NORM] = {{"epsilon", OT_ATTR_FLOAT}, {"num_groups", OT_ATTR_INT}, {"stash_type", OT_ATTR_INT}},
    /* ---- spatial ops (issue 26, ops batch 2) ---- */
    [OT_OP_RESIZE] = {{"antialias", OT_ATTR_INT}, {"axes", OT_ATTR_INTS}, {"coordinate_transformation_mode", OT_ATTR_STRING},
                      {"cubic_coeff_a", OT_ATTR_FLOAT}, {"exclude_outside", OT_ATTR_INT},
                      {"extrapolation_value", OT_ATTR_FLOAT}, {"keep_aspect_ratio_policy", OT_ATTR_STRING},
                      {"mode", OT_ATTR_STRING}, {"nearest_mode", OT_ATTR_STRING}},
    [OT_OP_CONV_TRANSPOSE] = {{"auto_pad", OT_ATTR_STRING}, {"dilations", OT_ATTR_INTS}, {"group", OT_ATTR_INT},
                              {"kernel_shape", OT_ATTR_INTS}, {"output_padding", OT_ATTR_INTS},
                              {"output_shape", OT_ATTR_INTS}, {"pads", OT_ATTR_INTS}, {"strides", OT_ATTR_INTS}},
    [OT_OP_DEPTH_TO_SPACE] = {{"blocksize", OT_ATTR_INT}, {"mode", OT_ATTR_STRING}},
    [OT_OP_SPACE_TO_DEPTH] = {{"blocksize", OT_ATTR_INT}, {"mode", OT_ATTR_STRING}},
    [OT_OP_UPSAMPLE] = {{"mode", OT_ATTR_STRING}, {"scales", OT_ATTR_FLOATS}, {"height_scale", OT_ATTR_FLOAT},
                        {"width_scale", OT_ATTR_FLOAT}},
    /* ---- ops3 (issue 26) ---- */
    [OT_OP_RMS_NORM] = {{"axis", OT_ATTR_INT}, {"epsilon", OT_ATTR_FLOAT}, {"stash_type", OT_ATTR_INT}},
    [OT_OP_ROTARY_EMBEDDING] = {{"interleaved", OT_ATTR_INT},
                                {"num_heads", OT_ATTR_INT},
                                {"rotary_embedding_dim", OT_ATTR_INT}},
    [OT_OP_ATTENTION] = {{"is_causal", OT_ATTR_INT},
                         {"kv_num_heads", OT_ATTR_INT},
                         {"q_num_heads", OT_ATTR_INT},
                         {"qk_matmul_output_mode", OT_ATTR_INT},
                         {"scale", OT_ATTR_FLOAT},
                         {"softcap", OT_ATTR_FLOAT},
                         {"softmax_precision", OT_ATTR_INT}},
    /* ---- ops batch 4 (issue 26) ---- (TopK's k: opset 1, normalised to an input) */
    [OT_OP_EINSUM] = {{"equation", OT_ATTR_STRING}},
    [OT_OP_TOP_K] = {{"axis", OT_ATTR_INT}, {"largest", OT_ATTR_INT}, {"sorted", OT_ATTR_INT}, {"k", OT_ATTR_INT}},
    [OT_OP_ONE_HOT] = {{"axis", OT_ATTR_INT}},
    /* ---- recurrent ops (issue 26) ---- */
    [OT_OP_RNN] = {{"activations", OT_ATTR_STRINGS}, {"clip", OT_ATTR_FLOAT}, {"direction", OT_ATTR_STRING}, {"hidden_size", OT_ATTR_INT}, {"layout", OT_ATTR_INT}},
    [OT_OP_GRU] = {{"activations", OT_ATTR_STRINGS}, {"clip", OT_ATTR_FLOAT}, {"direction", OT_ATTR_STRING}, {"hidden_size", OT_ATTR_INT}, {"layout", OT_ATTR_INT}, {"linear_before_reset", OT_ATTR_INT}},
    [OT_OP_LSTM] = {{"activations", OT_ATTR_STRINGS}, {"clip", OT_ATTR_FLOAT}, {"direction", OT_ATTR_STRING}, {"hidden_size", OT_ATTR_INT}, {"layout", OT_ATTR_INT}, {"input_forget", OT_ATTR_INT}},
};

static const char *type_name(ot_attr_type t) {
    switch (t) {
    case OT_ATTR_FLOAT: return "a float";
    case OT_ATTR_INT: return "an int";
    case OT_ATTR_STRING: return "a string";
    case OT_ATTR_TENSOR: return "a tensor";
    case OT_ATTR_GRAPH: return "a graph";
    case OT_ATTR_FLOATS: return "floats";
    case OT_ATTR_INTS: return "ints";
    case OT_ATTR_STRINGS: return "strings";
    default: return "another type";
    }
}

ot_status ot_imp_check_attrs(const ot_graph *g, const ot_node *n, ot_error *err) {
    (void)g;
    if ((unsigned)n->op >= OT_OP_COUNT) return OT_OK;
    const attr_rule *r = rules[n->op];
    for (int k = 0; k < OT_MAX_TYPED_ATTRS && r[k].name; k++) {
        const ot_attr *a = ot_node_attr(n, r[k].name);
        if (a && a->type != r[k].type)
            return ot_fail(err, OT_E_MODEL, "node '%s' (%s): attribute '%s' must be %s, not %s", n->name, n->op_type,
                           r[k].name, type_name(r[k].type), type_name(a->type));
    }
    return OT_OK;
}
