/* shape.c — shape inference (placeholder until the shape-inference work lands). */
#include "importer.h"

ot_status ot_shape_infer(ot_graph *g, ot_error *err) {
    (void)g;
    (void)err;
    return OT_OK;
}

ot_status ot_graph_bind_dim(ot_graph *g, const char *sym, int64_t value, ot_error *err) {
    (void)value;
    if (ot_graph_find_sym(g, sym) < 0) return ot_fail(err, OT_E_SHAPE, "no symbolic dim named '%s'", sym);
    return OT_OK;
}
