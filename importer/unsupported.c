/* unsupported.c — the list of everything a model uses that onnxtrain does not
 * support (ops, nested graphs, dtypes of inputs and initializers), gathered over the
 * whole model so one message (and `onnxtrain info`) names all of it at once. */
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"

ot_status ot_imp_note_unsupported(ot_model *m, const char *op_type, const char *node, int reason, ot_error *err) {
    ot_unsupported_op *u = NULL;
    for (int i = 0; i < m->n_unsupported; i++)
        if (!strcmp(m->unsupported[i].op_type, op_type) && m->unsupported[i].reason == reason) u = &m->unsupported[i];
    if (!u) {
        ot_unsupported_op *nu = realloc(m->unsupported, (size_t)(m->n_unsupported + 1) * sizeof *nu);
        if (!nu) return ot_fail(err, OT_E_MEMORY, "out of memory");
        m->unsupported = nu;
        u = &nu[m->n_unsupported];
        memset(u, 0, sizeof *u);
        u->reason = reason;
        if (!(u->op_type = ot_strdup(op_type))) return ot_fail(err, OT_E_MEMORY, "out of memory");
        m->n_unsupported++;
    }
    char **nn = realloc(u->nodes, (size_t)(u->n_nodes + 1) * sizeof *nn);
    if (!nn) return ot_fail(err, OT_E_MEMORY, "out of memory");
    u->nodes = nn;
    if (!(u->nodes[u->n_nodes] = ot_strdup(node))) return ot_fail(err, OT_E_MEMORY, "out of memory");
    u->n_nodes++;
    return OT_OK;
}

char *ot_model_unsupported_str(const ot_model *m) {
    if (!m || m->n_unsupported == 0) return NULL;
    size_t cap = 256, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    int n_ops = 0, n_vals = 0;
    for (int i = 0; i < m->n_unsupported; i++) {
        int r = m->unsupported[i].reason;
        if (r == OT_UNSUP_INPUT_DTYPE || r == OT_UNSUP_INIT_DTYPE) n_vals += m->unsupported[i].n_nodes;
        else n_ops++;
    }
    if (n_ops && n_vals)
        len = (size_t)snprintf(s, cap, "%d unsupported op%s and %d value%s of unsupported type:", n_ops,
                               n_ops == 1 ? "" : "s", n_vals, n_vals == 1 ? "" : "s");
    else if (n_ops)
        len = (size_t)snprintf(s, cap, "%d unsupported op%s:", n_ops, n_ops == 1 ? "" : "s");
    else
        len = (size_t)snprintf(s, cap, "%d value%s of unsupported type:", n_vals, n_vals == 1 ? "" : "s");
    for (int i = 0; i < m->n_unsupported; i++) {
        const ot_unsupported_op *u = &m->unsupported[i];
        for (int k = -1; k < u->n_nodes; k++) {
            char piece[600];
            const char *kind = u->reason == OT_UNSUP_INPUT_DTYPE  ? "input"
                               : u->reason == OT_UNSUP_INIT_DTYPE ? "initializer"
                                                                  : "node";
            if (k < 0)
                snprintf(piece, sizeof piece, "%s %s (%s%s ", i ? "," : "", u->op_type, kind, u->n_nodes > 1 ? "s" : "");
            else
                snprintf(piece, sizeof piece, "%s'%s'%s", k ? ", " : "", u->nodes[k],
                         k + 1 < u->n_nodes ? ""
                         : u->reason == OT_UNSUP_NESTED_GRAPH ? "; nested graphs are not supported)"
                                                              : ")");
            size_t pl = strlen(piece);
            if (len + pl + 1 > cap) {
                while (len + pl + 1 > cap) cap *= 2;
                char *ns = realloc(s, cap);
                if (!ns) {
                    free(s);
                    return NULL;
                }
                s = ns;
            }
            memcpy(s + len, piece, pl + 1);
            len += pl;
        }
    }
    return s;
}
