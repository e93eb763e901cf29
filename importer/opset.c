/* opset.c — the model's opset for the default ONNX domain, checked as onnx.checker
 * does: a model of IR version 3 or later must declare one (an IR 1-2 model means
 * opset 1), the version must be a real opset (1 up to OT_MAX_OPSET), and every node of
 * the main graph must use an op that exists at that opset (LayerNormalization needs 17).
 * Without these checks a model declaring opset -5, 2^62, only ai.onnx.ml, or none at
 * all was trained as if it declared something else. */
#include <string.h>

#include "import_internal.h"

/* Far above any real opset (ONNX 1.18 is at opset 23 and adds one or two a year),
 * far below what a corrupt varint gives. */
#define OT_MAX_OPSET 1000

/* The opset each ONNX op of ir/ops.def first appeared in (its first schema version in
 * the default domain), indexed by op like every other per-op table (docs/adding-an-op.md);
 * 0 = since opset 1. tests/check_opset_since.py compares this table with ONNX's own
 * schema history and fails on a missing or wrong entry. */
static const int64_t SINCE[OT_OP_COUNT] = {
    [OT_OP_ERF] = 9,
    [OT_OP_WHERE] = 9,
    [OT_OP_CONSTANT_OF_SHAPE] = 9,
    [OT_OP_EXPAND] = 8,
    [OT_OP_RANGE] = 11,
    [OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = 12,
    [OT_OP_NLL_LOSS] = 12,
    [OT_OP_LAYER_NORM] = 17,
    [OT_OP_GELU] = 20,
    /* ---- comparison, logic and pointwise math (issue 13) ---- */
    [OT_OP_LESS_OR_EQUAL] = 12,
    [OT_OP_GREATER_OR_EQUAL] = 12,
    [OT_OP_IS_NAN] = 9,
    [OT_OP_IS_INF] = 10,
    [OT_OP_SIN] = 7,
    [OT_OP_COS] = 7,
    [OT_OP_HARD_SWISH] = 14,
    [OT_OP_MISH] = 18,
    [OT_OP_MOD] = 10,
    [OT_OP_CAST_LIKE] = 15,
    /* ---- layout and indexing (issue 13) ---- (Pad and Tile exist since opset 1) */
    [OT_OP_TRILU] = 14,
    [OT_OP_GATHER_ELEMENTS] = 11,
    [OT_OP_CUMSUM] = 11,
    [OT_OP_SCATTER_ND] = 11,
    [OT_OP_SCATTER_ELEMENTS] = 11,
    [OT_OP_GATHER_ND] = 11,
    /* ---- ops batch 1 (issue 26) ---- (Elu, Selu, PRelu, Softsign, Floor, Ceil: opset 1) */
    [OT_OP_CELU] = 12,
    [OT_OP_THRESHOLDED_RELU] = 10,
    [OT_OP_SIGN] = 9,
    [OT_OP_ROUND] = 11,
    [OT_OP_GROUP_NORM] = 18, /* InstanceNormalization: opset 1 */
    /* ---- spatial ops (issue 26, ops batch 2) ---- (Upsample exists since opset 1) */
    [OT_OP_RESIZE] = 10,
    /* ---- ops3 (issue 26) ---- */
    [OT_OP_RMS_NORM] = 23,
    [OT_OP_ROTARY_EMBEDDING] = 23,
    [OT_OP_ATTENTION] = 23,
    /* ---- ops batch 4 (issue 26) ---- (TopK, Size: opset 1) */
    [OT_OP_EINSUM] = 12,
    [OT_OP_ONE_HOT] = 9,
    /* recurrent ops (issue 26): RNN, GRU and LSTM exist since opset 1 (GRU-1 had no
     * linear_before_reset: its default 0 is GRU-1's behaviour) */
};

static bool is_default_domain(const char *d) { return !d || !d[0] || !strcmp(d, "ai.onnx"); }

static int64_t since_of(const char *op_type) {
    ot_op op = ot_op_from_name(op_type, false);
    if (op <= OT_OP_UNKNOWN || op >= OT_OP_COUNT || !SINCE[op]) return 1;
    return SINCE[op];
}

/* The first main-graph node in the default domain, or NULL. */
static const Onnx__NodeProto *first_default_node(const Onnx__GraphProto *gp) {
    for (size_t i = 0; gp && i < gp->n_node; i++)
        if (is_default_domain(gp->node[i]->domain)) return gp->node[i];
    return NULL;
}

static ot_status check_nodes(const Onnx__ModelProto *mp, const char *file, int64_t opset, ot_error *err) {
    const Onnx__GraphProto *gp = mp->graph;
    for (size_t i = 0; gp && i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        const char *op = np->op_type ? np->op_type : "";
        if (!is_default_domain(np->domain)) continue;
        int64_t since = since_of(op);
        if (since > opset)
            return ot_fail(err, OT_E_MODEL,
                           "%s: node '%s' (%s): %s exists from opset %lld on, but the model declares opset %lld for "
                           "the default domain (re-export it with opset %lld or later)",
                           file, np->name && np->name[0] ? np->name : op, op, op, (long long)since, (long long)opset,
                           (long long)since);
    }
    return OT_OK;
}

ot_status ot_imp_model_opset(const Onnx__ModelProto *mp, const char *file, int64_t *opset, ot_error *err) {
    const Onnx__OperatorSetIdProto *dflt = NULL;
    for (size_t i = 0; i < mp->n_opset_import; i++)
        if (is_default_domain(mp->opset_import[i]->domain)) dflt = mp->opset_import[i];
    int64_t ir = mp->has_ir_version ? mp->ir_version : 0;
    if (!dflt) {
        const Onnx__NodeProto *np = first_default_node(mp->graph);
        if (ir >= 3 && !mp->n_opset_import)
            return ot_fail(err, OT_E_MODEL,
                           "%s: the model (IR version %lld) declares no opset_import; ONNX requires one from IR "
                           "version 3 on (which opset was it exported with?)",
                           file, (long long)ir);
        if (ir >= 3 && np)
            return ot_fail(err, OT_E_MODEL,
                           "%s: the model declares no opset for the default ONNX domain (only for '%s'), but node "
                           "'%s' (%s) is in it",
                           file, mp->opset_import[0]->domain ? mp->opset_import[0]->domain : "",
                           np->name && np->name[0] ? np->name : "", np->op_type ? np->op_type : "");
        *opset = 1; /* IR 1-2 models have no opset_import and mean opset 1 */
        return check_nodes(mp, file, *opset, err);
    }
    if (!dflt->has_version || dflt->version < 1 || dflt->version > OT_MAX_OPSET)
        return ot_fail(err, OT_E_MODEL,
                       "%s: the model declares opset %lld for the default ONNX domain; opsets run from 1 to about "
                       "23 (onnxtrain reads up to %d): a corrupt or crafted model",
                       file, dflt->has_version ? (long long)dflt->version : 0LL, OT_MAX_OPSET);
    *opset = dflt->version;
    return check_nodes(mp, file, *opset, err);
}
