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

/* Appends piece to buf (len used of cap) when it fits below limit; false otherwise. */
static bool put_piece(char *buf, size_t *len, size_t limit, const char *piece) {
    size_t pl = strlen(piece);
    if (*len + pl > limit) return false;
    memcpy(buf + *len, piece, pl + 1);
    *len += pl;
    return true;
}

static const char *reason_kind(int reason) {
    return reason == OT_UNSUP_INPUT_DTYPE ? "input" : reason == OT_UNSUP_INIT_DTYPE ? "initializer" : "node";
}

char *ot_imp_unsupported_summary(const ot_model *m, const char *file, size_t budget) {
    char *full = ot_model_unsupported_str(m);
    if (!full || strlen(full) <= budget) return full;
    free(full);
    /* Too long for one message: every op type with its count first (what the user must
     * replace), then node names while they fit, then where to find the rest. */
    enum { TAIL = 160 }; /* room kept for the closing "... and N more" */
    char *s = malloc(budget + 1);
    if (!s || budget < 2 * TAIL) return s ? (s[0] = 0, s) : NULL;
    size_t len = 0, limit = budget - TAIL;
    s[0] = 0;
    int n_types = m->n_unsupported, n_nodes = 0, types_shown = 0, nodes_shown = 0;
    for (int i = 0; i < m->n_unsupported; i++) n_nodes += m->unsupported[i].n_nodes;
    char piece[700];
    snprintf(piece, sizeof piece, "%d unsupported op type%s or dtype%s in %d place%s:", n_types,
             n_types == 1 ? "" : "s", n_types == 1 ? "" : "s", n_nodes, n_nodes == 1 ? "" : "s");
    put_piece(s, &len, limit, piece);
    for (int i = 0; i < m->n_unsupported; i++) {
        const ot_unsupported_op *u = &m->unsupported[i];
        snprintf(piece, sizeof piece, "%s %s (%d %s%s%s)", i ? "," : "", u->op_type, u->n_nodes,
                 reason_kind(u->reason), u->n_nodes == 1 ? "" : "s",
                 u->reason == OT_UNSUP_NESTED_GRAPH ? "; nested graphs are not supported" : "");
        if (!put_piece(s, &len, limit, piece)) break;
        types_shown++;
    }
    bool room = types_shown == n_types;
    if (room) put_piece(s, &len, limit, "; named:");
    for (int i = 0; room && i < m->n_unsupported; i++)
        for (int k = 0; room && k < m->unsupported[i].n_nodes; k++) {
            snprintf(piece, sizeof piece, "%s '%s'", nodes_shown ? "," : "", m->unsupported[i].nodes[k]);
            room = put_piece(s, &len, limit, piece);
            nodes_shown += room;
        }
    /* the tail always fits: limit left TAIL bytes, and a long file name is left out */
    const char *model = strlen(file) < 80 ? file : "MODEL";
    if (types_shown < n_types)
        snprintf(piece, sizeof piece, " ... and %d more op types (%d places): run 'onnxtrain info %s' for the full list",
                 n_types - types_shown, n_nodes - nodes_shown, model);
    else
        snprintf(piece, sizeof piece, " ... and %d more: run 'onnxtrain info %s' for the full list",
                 n_nodes - nodes_shown, model);
    put_piece(s, &len, budget, piece);
    return s;
}
