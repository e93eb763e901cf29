/* size_limits.c — refuses values whose declared or inferred dims are absurd (e.g. 2^40
 * elements), before later passes compute their element counts in int64 (which would
 * overflow: undefined behaviour, found by fuzzing and `onnxtrain plan`) or the planner
 * tries to place them. See size_limits.h. */
#include "size_limits.h"

bool ot_imp_shape_too_large(const ot_shape *s, ot_dtype dt) {
    uint64_t esize = ot_dtype_size(dt) ? ot_dtype_size(dt) : 1;
    uint64_t bytes = esize;
    for (int d = 0; d < s->rank; d++) {
        if (s->dim[d] < 0) continue; /* symbolic or unknown: checked again once bound */
        uint64_t n = (uint64_t)s->dim[d];
        if (n == 0) continue;        /* empty, but a huge dim elsewhere is still corrupt */
        if (bytes > OT_MAX_VALUE_BYTES / n) return true;
        bytes *= n;
    }
    return false;
}

ot_status ot_imp_check_value_sizes(const ot_graph *g, ot_error *err) {
    char buf[200];
    for (int i = 0; i < g->n_values; i++) {
        const ot_value *v = &g->values[i];
        if (v->shape.rank <= 0 || !ot_imp_shape_too_large(&v->shape, v->dtype)) continue;
        return ot_fail(err, OT_E_UNSUPPORTED,
                       "value '%s' has shape %s (%s), over the limit of %llu bytes per tensor: a corrupt or absurd dim",
                       v->name, ot_shape_str(g, &v->shape, buf, sizeof buf), ot_dtype_name(v->dtype),
                       (unsigned long long)OT_MAX_VALUE_BYTES);
    }
    return OT_OK;
}
