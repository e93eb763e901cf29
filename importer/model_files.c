/* model_files.c — the files a loaded model was read from besides the model itself:
 * the external data files its tensors name (initializers, and the tensors of Constant
 * and other nodes' attributes in the main graph, the only graph the importer reads).
 * Commands use the list to refuse an output path that would overwrite one of them.
 * And the check that writing a model with external data replaces no data file but
 * that model's own. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* Whether a and b name one file (same device and inode). */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

ot_status ot_model_data_file_check(const char *model_path, const char *data_path, ot_error *err) {
    char *own = NULL;
    ot_status st = OT_OK;
    if (!data_path) { /* the one data file: PATH.data beside the model */
        const char *slash = strrchr(model_path, '/');
        size_t dl = slash ? (size_t)(slash - model_path) + 1 : 0;
        char *loc = ot_imp_data_location(model_path, NULL, -1);
        if (!loc || !(own = malloc(dl + strlen(loc) + 1))) {
            free(loc);
            return ot_fail(err, OT_E_MEMORY, "out of memory");
        }
        memcpy(own, model_path, dl);
        strcpy(own + dl, loc);
        free(loc);
        data_path = own;
    }
    struct stat sb;
    if (lstat(data_path, &sb) != 0) goto done; /* nothing there to replace */
    /* It may be replaced only as part of the model the user named: when the model
     * now at model_path reads its initializers from it (an earlier -o of the same
     * name). */
    bool ours = false;
    ot_model *old = NULL;
    ot_import_options io = {.skip_param_data = true};
    ot_error ignored = {0};
    if (lstat(model_path, &sb) == 0 && !ot_model_load(model_path, &io, &old, &ignored)) {
        char **paths = NULL;
        int n = 0;
        if (!ot_model_external_files(old, &paths, &n, &ignored))
            for (int i = 0; i < n && !ours; i++) ours = same_file(paths[i], data_path);
        ot_model_external_files_free(paths, n);
    }
    ot_model_free(old);
    if (!ours)
        st = ot_fail(err, OT_E_USAGE,
                     "%s: writing the model %s with external data would replace this file, which is not the external "
                     "data of the model at %s (onnxtrain did not write it): move or remove it, or write the model "
                     "under another name",
                     data_path, model_path, model_path);
done:
    free(own);
    return st;
}
