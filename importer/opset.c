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

/* The opset each op onnxtrain runs first appeared in (ONNX docs/Changelog.md); ops
 * not listed exist since opset 1. Keyed by name, so an op added to ir/ops.def only
 * needs a row here when it is younger than opset 1. */
typedef struct op_since {
    const char *op_type;
    int64_t since;
} op_since;

static const op_since SINCE[] = {
    {"Erf", 9},           {"Where", 9},
    {"ConstantOfShape", 9}, {"Expand", 8},
    {"Range", 11},        {"SoftmaxCrossEntropyLoss", 12},
    {"NegativeLogLikelihoodLoss", 12}, {"LayerNormalization", 17},
    {"Gelu", 20},
};

static bool is_default_domain(const char *d) { return !d || !d[0] || !strcmp(d, "ai.onnx"); }

static int64_t since_of(const char *op_type) {
    for (size_t i = 0; i < sizeof SINCE / sizeof SINCE[0]; i++)
        if (!strcmp(SINCE[i].op_type, op_type)) return SINCE[i].since;
    return 1;
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
