/* model_files.c — the files a loaded model was read from besides the model itself:
 * the external data files its tensors name (initializers, and the tensors of Constant
 * and other nodes' attributes in the main graph, the only graph the importer reads).
 * Commands use the list to refuse an output path that would overwrite one of them. */
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"

/* Adds DIR/LOCATION of an externally stored tensor to the list, once per location. */
static ot_status add_tensor(const Onnx__TensorProto *t, const char *dir, char ***paths, int *n, int *cap,
                            ot_error *err) {
    if (!t || !t->has_data_location || t->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) return OT_OK;
    const char *loc = NULL;
    for (size_t i = 0; i < t->n_external_data; i++)
        if (t->external_data[i]->key && !strcmp(t->external_data[i]->key, "location")) loc = t->external_data[i]->value;
    if (!loc || !*loc) return OT_OK;
    size_t len = strlen(dir) + strlen(loc) + 2;
    char *full = malloc(len);
    if (!full) return ot_fail(err, OT_E_MEMORY, "out of memory");
    snprintf(full, len, "%s/%s", dir, loc);
    for (int i = 0; i < *n; i++)
        if (!strcmp((*paths)[i], full)) {
            free(full);
            return OT_OK;
        }
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 8;
        char **v = realloc(*paths, (size_t)nc * sizeof *v);
        if (!v) {
            free(full);
            return ot_fail(err, OT_E_MEMORY, "out of memory");
        }
        *paths = v;
        *cap = nc;
    }
    (*paths)[(*n)++] = full;
    return OT_OK;
}

ot_status ot_model_external_files(const ot_model *m, char ***paths, int *n, ot_error *err) {
    *paths = NULL;
    *n = 0;
    const Onnx__ModelProto *mp = m->proto;
    if (!mp || !mp->graph || !m->dir) return OT_OK;
    const Onnx__GraphProto *g = mp->graph;
    int cap = 0;
    ot_status st = OT_OK;
    for (size_t i = 0; i < g->n_initializer && !st; i++) st = add_tensor(g->initializer[i], m->dir, paths, n, &cap, err);
    for (size_t i = 0; i < g->n_node && !st; i++)
        for (size_t a = 0; a < g->node[i]->n_attribute && !st; a++) {
            const Onnx__AttributeProto *ap = g->node[i]->attribute[a];
            st = add_tensor(ap->t, m->dir, paths, n, &cap, err);
            for (size_t k = 0; k < ap->n_tensors && !st; k++) st = add_tensor(ap->tensors[k], m->dir, paths, n, &cap, err);
        }
    if (st) {
        ot_model_external_files_free(*paths, *n);
        *paths = NULL;
        *n = 0;
    }
    return st;
}

void ot_model_external_files_free(char **paths, int n) {
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
}
