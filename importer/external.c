/* external.c — tensors stored outside the model file (TensorProto.data_location =
 * EXTERNAL, keys location / offset / length / checksum). Reading: a model is untrusted
 * input, so the location is confined to the model's folder: absolute paths, `..`
 * components, symlinks that lead out of the folder and hard links are refused, as are
 * offsets and lengths that are negative, not numbers, or past the end of the file.
 * Writing (the exporter's data files): the names data files take, and committing a
 * model with its data files so that they appear together. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import_internal.h"
#include "ir/atomic_file.h"
#include "ir/input_file.h"

typedef struct ext_spec {
    const char *location;
    uint64_t offset;
    bool has_length;
    uint64_t length;
} ext_spec;

/* Parses a non-negative decimal number; anything else is refused with a reason. */
static ot_status parse_u64(const char *s, const char *key, const char *tname, const char *loc, uint64_t *out,
                           ot_error *err) {
    if (!s || !*s) return ot_fail(err, OT_E_MODEL, "tensor '%s': external data '%s': %s is empty", tname, loc, key);
    if (s[0] == '-')
        return ot_fail(err, OT_E_MODEL, "tensor '%s': external data '%s': %s %s is negative", tname, loc, key, s);
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return ot_fail(err, OT_E_MODEL, "tensor '%s': external data '%s': %s '%s' is not a number", tname, loc,
                           key, s);
        if (v > (UINT64_MAX - 9) / 10)
            return ot_fail(err, OT_E_MODEL, "tensor '%s': external data '%s': %s %s is too large", tname, loc, key, s);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    return OT_OK;
}

static ot_status parse_spec(const Onnx__TensorProto *t, const char *tname, ext_spec *sp, ot_error *err) {
    memset(sp, 0, sizeof *sp);
    const char *off = NULL, *len = NULL;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        const char *k = e->key ? e->key : "", *v = e->value ? e->value : "";
        if (!strcmp(k, "location")) sp->location = v;
        else if (!strcmp(k, "offset")) off = v;
        else if (!strcmp(k, "length")) len = v;
        else if (!strcmp(k, "checksum")) continue; /* SHA-1 of the bytes: optional, not checked */
        else
            return ot_fail(err, OT_E_MODEL,
                           "tensor '%s': unknown external_data key '%s' (expected location, offset, length, checksum)",
                           tname, k);
    }
    if (!sp->location || !sp->location[0])
        return ot_fail(err, OT_E_MODEL, "tensor '%s': external data without a location", tname);
    const char *loc = sp->location;
    if (off) {
        ot_status st = parse_u64(off, "offset", tname, loc, &sp->offset, err);
        if (st) return st;
    }
    if (len) {
        ot_status st = parse_u64(len, "length", tname, loc, &sp->length, err);
        if (st) return st;
        sp->has_length = true;
    }
    return OT_OK;
}

/* Opens the external file after confining it to `dir`. On success *fd is open and
 * *fsize holds its size. */
static ot_status open_confined(const char *tname, const char *dir, const char *loc, int *fd, uint64_t *fsize,
                               ot_error *err) {
    *fd = -1;
    char *full = NULL, *real_dir = NULL, *real_file = NULL, *what = NULL;
    ot_status st = OT_OK;
    if (!dir) {
        st = ot_fail(err, OT_E_UNSUPPORTED,
                     "tensor '%s': data is stored externally in '%s' but the model was loaded from memory without a "
                     "folder to resolve it against; load it from its file instead",
                     tname, loc);
        goto fail;
    }
    if (loc[0] == '/') {
        st = ot_fail(err, OT_E_MODEL,
                     "tensor '%s': external data location '%s' is an absolute path; only files inside the model's "
                     "folder are read",
                     tname, loc);
        goto fail;
    }
    /* Refuse any ".." component outright, even one that would stay inside (a/../b):
     * exporters never write them, and refusing is simpler to reason about. */
    for (const char *p = loc; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            st = ot_fail(err, OT_E_MODEL,
                         "tensor '%s': external data location '%s' contains '..'; only files inside the model's "
                         "folder are read",
                         tname, loc);
            goto fail;
        }
        p += n;
        while (*p == '/') p++;
    }
    size_t n = strlen(dir) + strlen(loc) + 2;
    full = malloc(n);
    if (!full) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory");
        goto fail;
    }
    snprintf(full, n, "%s/%s", dir, loc);
    real_dir = realpath(dir, NULL);
    if (!real_dir) {
        st = ot_fail(err, OT_E_IO, "tensor '%s': model folder '%s': %s", tname, dir, strerror(errno));
        goto fail;
    }
    real_file = realpath(full, NULL);
    if (!real_file) {
        st = ot_fail(err, OT_E_IO, "tensor '%s': external data file '%s': %s", tname, full, strerror(errno));
        goto fail;
    }
    size_t dl = strlen(real_dir);
    bool inside = strncmp(real_file, real_dir, dl) == 0 && (real_file[dl] == '/' || (dl == 1 && real_dir[0] == '/'));
    if (!inside) {
        st = ot_fail(err, OT_E_MODEL,
                     "tensor '%s': external data file '%s' resolves to '%s', outside the model's folder '%s' (a "
                     "symlink?)",
                     tname, full, real_file, real_dir);
        goto fail;
    }
    /* Open the resolved path so the file read is the file checked; regular files only,
     * without waiting (ir/input_file.h): a FIFO here would block the import forever. */
    size_t wn = strlen(tname) + strlen(full) + 40;
    what = malloc(wn);
    if (!what) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory");
        goto fail;
    }
    snprintf(what, wn, "tensor '%s': external data file '%s'", tname, full);
    if ((st = ot_input_open(real_file, what, fd, fsize, err))) goto fail;
    struct stat sb;
    if (fstat(*fd, &sb) != 0) {
        st = ot_fail(err, OT_E_IO, "%s: %s", what, strerror(errno));
        goto fail;
    }
    /* A hard link is a second name for a file that may live outside the folder (an
     * archive can carry one to /etc/...); realpath cannot tell, so refuse them all. */
    if (sb.st_nlink > 1) {
        st = ot_fail(err, OT_E_MODEL,
                     "tensor '%s': external data file '%s' has %lu hard links; a hard link may lead outside the "
                     "model's folder, so only singly linked files are read (replace it with a copy)",
                     tname, full, (unsigned long)sb.st_nlink);
        goto fail;
    }
    goto done;
fail:
    if (*fd >= 0) close(*fd);
    *fd = -1;
done:
    free(what);
    free(full);
    free(real_dir);
    free(real_file);
    return st;
}

/* Parses, confines and bounds-checks; returns the open fd and the byte range. */
static ot_status locate(const Onnx__TensorProto *t, const char *tname, const char *dir, int *fd, ext_spec *sp,
                        ot_error *err) {
    uint64_t fsize = 0;
    ot_status st = parse_spec(t, tname, sp, err);
    if (st) return st;
    st = open_confined(tname, dir, sp->location, fd, &fsize, err);
    if (st) return st;
    if (sp->offset > fsize) {
        st = ot_fail(err, OT_E_MODEL, "tensor '%s': external data '%s': offset %llu is past the end of the file (%llu bytes)",
                     tname, sp->location, (unsigned long long)sp->offset, (unsigned long long)fsize);
        goto fail;
    }
    if (!sp->has_length) sp->length = fsize - sp->offset;
    if (sp->length > fsize - sp->offset) {
        st = ot_fail(err, OT_E_MODEL,
                     "tensor '%s': external data '%s': offset %llu + length %llu is past the end of the file (%llu "
                     "bytes)",
                     tname, sp->location, (unsigned long long)sp->offset, (unsigned long long)sp->length,
                     (unsigned long long)fsize);
        goto fail;
    }
    return OT_OK;
fail:
    close(*fd);
    *fd = -1;
    return st;
}

ot_status ot_imp_external_size(const Onnx__TensorProto *t, const char *tname, const char *dir, uint64_t *nbytes,
                               ot_error *err) {
    int fd = -1;
    ext_spec sp;
    ot_status st = locate(t, tname, dir, &fd, &sp, err);
    if (st) return st;
    close(fd);
    *nbytes = sp.length;
    return OT_OK;
}

ot_status ot_imp_external_read(const Onnx__TensorProto *t, const char *tname, const char *dir, void *dst,
                               size_t nbytes, ot_error *err) {
    int fd = -1;
    ext_spec sp;
    ot_status st = locate(t, tname, dir, &fd, &sp, err);
    if (st) return st;
    if (sp.length != nbytes) {
        st = ot_fail(err, OT_E_MODEL, "tensor '%s': external data '%s' has %llu bytes but its dims and dtype need %zu",
                     tname, sp.location, (unsigned long long)sp.length, nbytes);
        goto fail;
    }
    size_t done = 0;
    while (done < nbytes) {
        ssize_t r = pread(fd, (char *)dst + done, nbytes - done, (off_t)(sp.offset + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            st = ot_fail(err, OT_E_IO, "tensor '%s': reading external data '%s': %s", tname, sp.location,
                         r < 0 ? strerror(errno) : "unexpected end of file");
            goto fail;
        }
        done += (size_t)r;
    }
fail:
    close(fd);
    return st;
}

/* ---- writing ----------------------------------------------------------------------- */

char *ot_imp_data_location(const char *model_path, const char *tensor, int k) {
    const char *slash = strrchr(model_path, '/');
    const char *base = slash ? slash + 1 : model_path;
    size_t nb = strlen(base), nt = tensor ? strlen(tensor) : 0;
    if (nt > 100) nt = 100;
    char *s = malloc(nb + nt + 40);
    if (!s) return NULL;
    size_t at = 0;
    memcpy(s, base, nb);
    at = nb;
    if (tensor) {
        s[at++] = '.';
        for (size_t i = 0; i < nt; i++) {
            char c = tensor[i];
            bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-';
            s[at++] = ok ? c : '_';
        }
    }
    if (k >= 0) at += (size_t)snprintf(s + at, 24, "-%d", k);
    memcpy(s + at, ".data", sizeof ".data");
    return s;
}

static bool path_exists(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0;
}

ot_status ot_imp_commit_with_data(ot_atomic_file *model, const char *model_path, ot_atomic_file **data,
                                  char **data_paths, int n_data, ot_error *err) {
    ot_status st = OT_OK;
    int renamed = 0;
    /* Every byte reaches its temporary file before anything is renamed: a full disk
     * fails here, with nothing in place yet. */
    for (int k = 0; k < n_data && !st; k++)
        if (fflush(ot_atomic_stream(data[k])) != 0 || ferror(ot_atomic_stream(data[k])))
            st = ot_atomic_commit(data[k], err), data[k] = NULL; /* reports the write error, removes the file */
    if (!st && (fflush(ot_atomic_stream(model)) != 0 || ferror(ot_atomic_stream(model))))
        st = ot_atomic_commit(model, err), model = NULL;
    if (st) goto fail;
    bool replaces = false;
    for (int k = 0; k < n_data; k++) replaces = replaces || path_exists(data_paths[k]);
    struct stat sb;
    if (replaces && lstat(model_path, &sb) == 0 && S_ISREG(sb.st_mode)) {
        /* The old model would read the new data between the renames: withdraw it
         * first, so a reader sees the old model whole, no model, or the new one. */
        if (unlink(model_path) != 0) {
            st = ot_fail(err, OT_E_IO, "%s: cannot remove the old model before replacing its data files: %s",
                         model_path, strerror(errno));
            goto fail;
        }
        (void)ot_atomic_sync_folder(model_path, NULL);
    }
    for (; renamed < n_data; renamed++) {
        ot_atomic_file *af = data[renamed];
        data[renamed] = NULL;
        if ((st = ot_atomic_commit(af, err))) {
            renamed++; /* a folder-sync failure leaves it renamed: removed below either way */
            goto fail;
        }
    }
    st = ot_atomic_commit(model, err);
    model = NULL;
    if (!st) return OT_OK;
    /* The model's rename failed, or the folder sync after it: in the second case the
     * new model is in place and needs its data. */
    if (path_exists(model_path)) return st;
fail:
    for (int k = 0; k < renamed; k++) (void)unlink(data_paths[k]);
    if (renamed) (void)ot_atomic_sync_folder(model_path, NULL);
    for (int k = 0; k < n_data; k++) ot_atomic_abort(data[k]);
    ot_atomic_abort(model);
    return st;
}
