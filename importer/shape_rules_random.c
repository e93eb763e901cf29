/* shape_rules_random.c — shape rules of the random sources (issue 13):
 * RandomUniformLike is shaped like its input, typed by its `dtype` attribute or else
 * like its input; RandomUniform takes both from its `shape` and `dtype` attributes
 * (float32 by default). ONNX allows only float outputs: anything else is the model's
 * error. */
#include "shape_internal.h"

ot_status ot_shape_rule_random(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    bool like = n->op == OT_OP_RANDOM_UNIFORM_LIKE;
    const ot_value *x = like ? ot_shape_input(c, n, 0) : NULL;
    ot_dtype dflt = x ? x->dtype : OT_F32;
    const ot_attr *d = ot_node_attr(n, "dtype");
    dt[0] = d && d->type == OT_ATTR_INT ? (ot_dtype)d->i : dflt;
    if (!ot_dtype_is_float(dt[0]))
        return ot_shape_fail_model(c, n, "output dtype %s is not a float type", ot_dtype_name(dt[0]));
    if (like) {
        sh[0] = x ? x->shape : ot_shape_unknown();
        return OT_OK;
    }
    int rank = 0;
    const int64_t *dims = ot_node_attr_ints(n, "shape", &rank);
    if (!dims) return ot_shape_fail_model(c, n, "attribute 'shape' is required");
    if (rank > OT_MAX_RANK) return ot_shape_fail_model(c, n, "shape of rank %d is above %d", rank, OT_MAX_RANK);
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0) return ot_shape_fail_model(c, n, "shape entry %d is %lld", i, (long long)dims[i]);
    sh[0] = ot_shape_make(rank, dims);
    return OT_OK;
}
