/* atomic_file.c — write to a temporary name, fsync, rename, fsync the folder
 * (atomic_file.h). The stream is a stdio cookie stream over the temporary file's
 * descriptor, so every writer can use fprintf/fwrite as before while the first
 * failed write(2) keeps its errno for the message (a plain FILE forgets it). */
#define _GNU_SOURCE /* fopencookie */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"

struct ot_atomic_file {
    FILE *f;
    int fd;
    int write_errno; /* of the first failed write, 0 if none */
    bool in_place;   /* a character device or FIFO: written directly, never renamed */
    bool finished;   /* ot_atomic_finish done: only the rename is left */
    char *path;      /* destination */
    char *tmp;       /* PATH.tmp-XXXXXX (NULL when in place) */
};

enum { NAME_TRIES = 64 };

static ssize_t cookie_write(void *cookie, const char *buf, size_t n) {
    ot_atomic_file *af = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(af->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (!af->write_errno) af->write_errno = w < 0 ? errno : EIO;
            /* short (never negative: fopencookie(3)); stdio sets the error flag */
            return (ssize_t)done;
        }
        done += (size_t)w;
    }
    return (ssize_t)n;
}

/* The descriptor is closed by commit or abort, where its errors are seen. */
static int cookie_close(void *cookie) {
    (void)cookie;
    return 0;
}

/* Six random letters or digits after "PATH.tmp-", as mkstemp draws them; mkstemp
 * itself is not used because it forces mode 0600. */
static void fill_suffix(char *x, unsigned attempt) {
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char r[6];
    if (getentropy(r, sizeof r) != 0) {
        /* no entropy source: pid and clock still make a clash unlikely, and O_EXCL
         * turns one into a retry, never into a shared file */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned long long h =
            (unsigned long long)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (unsigned long long)getpid() << 20 ^ attempt;
        for (int i = 0; i < 6; i++, h >>= 8)
            r[i] = (unsigned char)h;
    }
    for (int i = 0; i < 6; i++)
        x[i] = alnum[r[i] % (sizeof alnum - 1)];
}

static ot_status open_temp(ot_atomic_file *af, ot_error *err) {
    size_t n = strlen(af->path);
    if (!(af->tmp = malloc(n + sizeof ".tmp-XXXXXX"))) return ot_fail(err, OT_E_MEMORY, "%s: out of memory", af->path);
    memcpy(af->tmp, af->path, n);
    memcpy(af->tmp + n, ".tmp-XXXXXX", sizeof ".tmp-XXXXXX");
    for (unsigned attempt = 0; attempt < NAME_TRIES; attempt++) {
        fill_suffix(af->tmp + n + 5, attempt);
        af->fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (af->fd >= 0) return OT_OK;
        if (errno != EEXIST) break;
    }
    ot_status st =
        ot_fail(err, OT_E_IO, "%s: cannot create a temporary file next to it: %s", af->path, strerror(errno));
    free(af->tmp);
    af->tmp = NULL;
    return st;
}

/* Character devices and FIFOs take the bytes directly (see the header). */
static bool write_in_place(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && (S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode));
}

static void destroy(ot_atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->fd >= 0) close(af->fd);
    if (af->tmp) unlink(af->tmp);
    free(af->tmp);
    free(af->path);
    free(af);
}

ot_status ot_atomic_open(const char *path, ot_atomic_file **out, ot_error *err) {
    *out = NULL;
    ot_atomic_file *af = calloc(1, sizeof *af);
    if (!af) return ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
    af->fd = -1;
    ot_status st = OT_OK;
    if (!(af->path = ot_strdup(path))) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    if ((af->in_place = write_in_place(path))) {
        /* O_NONBLOCK: opening a FIFO nobody reads would block for ever; it fails with
         * ENXIO instead. Writes then block as usual (the flag is cleared). */
        if ((af->fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK)) < 0) {
            if (errno == ENXIO)
                st = ot_fail(err, OT_E_IO, "%s: a FIFO that no process reads; nothing would take what is written",
                             path);
            else
                st = ot_fail(err, OT_E_IO, "%s: cannot open for writing: %s", path, strerror(errno));
            goto fail;
        }
        int fl = fcntl(af->fd, F_GETFL);
        if (fl < 0 || fcntl(af->fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
            st = ot_fail(err, OT_E_IO, "%s: cannot open for writing: %s", path, strerror(errno));
            goto fail;
        }
    } else if ((st = open_temp(af, err))) {
        goto fail;
    }
    af->f = fopencookie(af, "w", (cookie_io_functions_t){.write = cookie_write, .close = cookie_close});
    if (!af->f) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    *out = af;
    return OT_OK;
fail:
    destroy(af);
    return st;
}

FILE *ot_atomic_stream(ot_atomic_file *af) { return af->f; }

/* A file system that cannot sync a folder (EINVAL) and a folder we may write but not
 * open (EACCES) leave nothing we could do: not failures. */
ot_status ot_atomic_sync_folder(const char *path, ot_error *err) {
    const char *slash = strrchr(path, '/');
    char *dir = slash == path ? ot_strdup("/") : slash ? strndup(path, (size_t)(slash - path)) : ot_strdup(".");
    if (!dir) return ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
    ot_status st = OT_OK;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != EACCES)
            st = ot_fail(err, OT_E_IO, "%s: cannot open its folder '%s' to sync it: %s", path, dir, strerror(errno));
    } else {
        if (fsync(fd) != 0 && errno != EINVAL)
            st = ot_fail(err, OT_E_IO, "%s: cannot sync its folder '%s': %s", path, dir, strerror(errno));
        close(fd);
    }
    free(dir);
    return st;
}

/* Everything but the rename: on failure af is freed and its temporary file removed. */
static ot_status finish(ot_atomic_file *af, ot_error *err) {
    ot_status st = OT_OK;
    if (fflush(af->f) != 0 || ferror(af->f)) {
        st = ot_fail(err, OT_E_IO, "%s: write error: %s", af->path, strerror(af->write_errno ? af->write_errno : EIO));
        goto fail;
    }
    fclose(af->f); /* flushed: nothing left to fail */
    af->f = NULL;
    if (!af->in_place && fsync(af->fd) != 0) {
        st = ot_fail(err, OT_E_IO, "%s: fsync failed: %s", af->path, strerror(errno));
        goto fail;
    }
    int fd = af->fd;
    af->fd = -1;
    if (close(fd) != 0) {
        st = ot_fail(err, OT_E_IO, "%s: write error: %s", af->path, strerror(errno));
        goto fail;
    }
    af->finished = true;
    return OT_OK;
fail:
    destroy(af);
    return st;
}

ot_status ot_atomic_finish(ot_atomic_file *af, ot_error *err) { return af->finished ? OT_OK : finish(af, err); }

ot_status ot_atomic_commit(ot_atomic_file *af, ot_error *err) {
    ot_status st = OT_OK;
    if (!af->finished && (st = finish(af, err))) return st;
    if (af->in_place) goto done;
    if (rename(af->tmp, af->path) != 0) {
        st = ot_fail(err, OT_E_IO, "%s: cannot rename the temporary file into place: %s", af->path, strerror(errno));
        goto done;
    }
    free(af->tmp);
    af->tmp = NULL;                            /* renamed: nothing to remove */
    st = ot_atomic_sync_folder(af->path, err); /* makes the rename itself durable */
done:
    destroy(af);
    return st;
}

void ot_atomic_abort(ot_atomic_file *af) {
    if (af) destroy(af);
}

ot_status ot_atomic_write(const char *path, const void *data, size_t n, ot_error *err) {
    ot_atomic_file *af;
    ot_status st = ot_atomic_open(path, &af, err);
    if (st) return st;
    if (n) fwrite(data, 1, n, af->f); /* a failure is reported by the commit */
    return ot_atomic_commit(af, err);
}
