/* outputs.c — checks a run's outputs against its inputs and each destination before
 * any work (see outputs.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/outputs.h"

static ot_status add_path(ot_run_path **v, int *n, int *cap, const char *opt, const char *path, ot_output_kind kind,
                          ot_error *err) {
    if (!path) return OT_OK;
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 8;
        ot_run_path *nv = realloc(*v, (size_t)nc * sizeof *nv);
        if (!nv) return ot_fail(err, OT_E_MEMORY, "out of memory");
        *v = nv;
        *cap = nc;
    }
    ot_run_path p = {.opt = strdup(opt), .path = strdup(path), .kind = kind};
    if (!p.opt || !p.path) {
        free(p.opt);
        free(p.path);
        return ot_fail(err, OT_E_MEMORY, "out of memory");
    }
    (*v)[(*n)++] = p;
    return OT_OK;
}

ot_status ot_run_files_input(ot_run_files *f, const char *opt, const char *path, ot_error *err) {
    return add_path(&f->in, &f->n_in, &f->cap_in, opt, path, OT_OUTPUT_FILE, err);
}

ot_status ot_run_files_output(ot_run_files *f, const char *opt, const char *path, ot_output_kind kind,
                              ot_error *err) {
    return add_path(&f->out, &f->n_out, &f->cap_out, opt, path, kind, err);
}

ot_status ot_run_files_model(ot_run_files *f, const ot_model *m, ot_error *err) {
    ot_status st = ot_run_files_input(f, "the model", m->path, err);
    char **ext = NULL;
    int n = 0;
    if (!st) st = ot_model_external_files(m, &ext, &n, err);
    for (int i = 0; i < n && !st; i++) st = ot_run_files_input(f, "the model's external data", ext[i], err);
    ot_model_external_files_free(ext, n);
    return st;
}

void ot_run_files_free(ot_run_files *f) {
    for (int i = 0; i < f->n_in; i++) free(f->in[i].opt), free(f->in[i].path);
    for (int i = 0; i < f->n_out; i++) free(f->out[i].opt), free(f->out[i].path);
    free(f->in);
    free(f->out);
    memset(f, 0, sizeof *f);
}

/* What a path names: the file itself when it exists (followed through symlinks),
 * else its resolved folder joined with its last component. */
typedef struct file_id {
    bool exists;
    struct stat st;
    char resolved[PATH_MAX + NAME_MAX + 2];
} file_id;

/* The folder part of path ("." when none), into buf. */
static const char *folder_of(const char *path, char *buf, size_t n) {
    snprintf(buf, n, "%s", path);
    size_t len = strlen(buf);
    while (len > 1 && buf[len - 1] == '/') buf[--len] = 0; /* "dir/" names dir */
    char *slash = strrchr(buf, '/');
    if (!slash) snprintf(buf, n, ".");
    else if (slash == buf) buf[1] = 0;
    else *slash = 0;
    return buf;
}

static void identify(const char *path, file_id *id) {
    memset(id, 0, sizeof *id);
    id->exists = stat(path, &id->st) == 0;
    char real[PATH_MAX];
    if (id->exists && realpath(path, real)) {
        snprintf(id->resolved, sizeof id->resolved, "%s", real);
        return;
    }
    char dir[PATH_MAX];
    folder_of(path, dir, sizeof dir);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (realpath(dir, real)) snprintf(id->resolved, sizeof id->resolved, "%s/%s", strcmp(real, "/") ? real : "", base);
    else snprintf(id->resolved, sizeof id->resolved, "%s", path);
}

static bool same_file(const file_id *a, const file_id *b) {
    if (a->exists && b->exists) return a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino;
    return !strcmp(a->resolved, b->resolved);
}

/* The destination itself: a name, of the right kind, in a folder that can be written. */
static ot_status check_destination(const ot_run_path *o, const file_id *id, ot_error *err) {
    if (!*o->path) return ot_fail(err, OT_E_USAGE, "%s '': empty file name", o->opt);
    bool want_folder = o->kind != OT_OUTPUT_FILE;
    if (!want_folder && o->path[strlen(o->path) - 1] == '/')
        return ot_fail(err, OT_E_USAGE, "%s '%s' ends with '/'; give a file name", o->opt, o->path);
    if (id->exists && !want_folder && S_ISDIR(id->st.st_mode))
        return ot_fail(err, OT_E_USAGE, "%s '%s' is a folder; give a file name", o->opt, o->path);
    if (id->exists && want_folder && !S_ISDIR(id->st.st_mode))
        return ot_fail(err, OT_E_USAGE, "%s '%s' exists and is not a folder", o->opt, o->path);
    if (id->exists && want_folder) {
        if (access(o->path, W_OK | X_OK) != 0)
            return ot_fail(err, OT_E_IO, "%s '%s': cannot write into this folder: %s", o->opt, o->path, strerror(errno));
        return OT_OK;
    }
    if (id->exists && !S_ISREG(id->st.st_mode)) return OT_OK; /* /dev/null, a FIFO: written in place */
    char dir[PATH_MAX];
    folder_of(o->path, dir, sizeof dir);
    struct stat ds;
    if (stat(dir, &ds) != 0)
        return ot_fail(err, OT_E_IO, "%s '%s': folder '%s': %s", o->opt, o->path, dir, strerror(errno));
    if (!S_ISDIR(ds.st_mode)) return ot_fail(err, OT_E_IO, "%s '%s': '%s' is not a folder", o->opt, o->path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return ot_fail(err, OT_E_IO, "%s '%s': cannot write into the folder '%s': %s", o->opt, o->path, dir,
                       strerror(errno));
    return OT_OK;
}

/* An input lying directly in folder `dir` under a name such a folder gets written
 * (OT_OUTPUT_FOLDER_OF_FILES: NAME.npy, index.json). */
static bool input_in_folder(const file_id *dir, const char *input_path) {
    if (!dir->exists) return false; /* a folder still to be created holds nothing */
    const char *base = strrchr(input_path, '/') ? strrchr(input_path, '/') + 1 : input_path;
    size_t n = strlen(base);
    if (strcmp(base, "index.json") != 0 && !(n >= 4 && !strcmp(base + n - 4, ".npy"))) return false;
    char d[PATH_MAX];
    struct stat ds;
    return stat(folder_of(input_path, d, sizeof d), &ds) == 0 && ds.st_dev == dir->st.st_dev &&
           ds.st_ino == dir->st.st_ino;
}

ot_status ot_run_files_check(const ot_run_files *f, ot_error *err) {
    file_id *ins = calloc((size_t)f->n_in + 1, sizeof *ins), *outs = calloc((size_t)f->n_out + 1, sizeof *outs);
    ot_status st = OT_OK;
    if (!ins || !outs) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory");
        goto done;
    }
    for (int i = 0; i < f->n_in; i++) identify(f->in[i].path, &ins[i]);
    for (int k = 0; k < f->n_out && !st; k++) {
        const ot_run_path *o = &f->out[k];
        identify(o->path, &outs[k]);
        if ((st = check_destination(o, &outs[k], err))) break;
        for (int i = 0; i < f->n_in && !st; i++) {
            /* a checkpoint folder may be the --resume folder: resuming in place is the point */
            if (o->kind != OT_OUTPUT_FOLDER && same_file(&outs[k], &ins[i]))
                st = ot_fail(err, OT_E_USAGE, "%s '%s' is the same file as %s '%s'; refusing to overwrite an input",
                             o->opt, o->path, f->in[i].opt, f->in[i].path);
            else if (o->kind == OT_OUTPUT_FOLDER_OF_FILES && input_in_folder(&outs[k], f->in[i].path))
                st = ot_fail(err, OT_E_USAGE,
                             "%s '%s' holds %s '%s', which a file written there could replace; choose another folder",
                             o->opt, o->path, f->in[i].opt, f->in[i].path);
        }
        for (int j = 0; j < k && !st; j++)
            if (same_file(&outs[k], &outs[j]))
                st = ot_fail(err, OT_E_USAGE, "%s '%s' and %s '%s' name the same file", f->out[j].opt, f->out[j].path,
                             o->opt, o->path);
    }
done:
    free(ins);
    free(outs);
    return st;
}
