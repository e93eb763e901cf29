/* source.c — the bytes of a model being imported, from memory or from a file, read by
 * offset. A file is never read whole: the skeleton scan (skeleton.c) reads its structure
 * through a small window, and each initializer's payload is read straight into the IR
 * buffer that keeps it, so loading holds the weights once. Files are read with pread,
 * not mapped, so a file cut short while we read it is an I/O error, not a SIGBUS. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "import_internal.h"
#include "ir/input_file.h"

/* Large enough that scanning a graph of 10^5 nodes takes few system calls, small
 * enough to be noise next to any model. */
#define OT_SRC_WINDOW (256u << 10)

void ot_imp_src_memory(ot_imp_src *s, const void *data, size_t size, const char *name) {
    memset(s, 0, sizeof *s);
    s->mem = data;
    s->fd = -1;
    s->size = size;
    s->name = name;
}

ot_status ot_imp_src_open(ot_imp_src *s, const char *path, ot_error *err) {
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->name = path;
    /* Regular files only, opened without waiting (ir/input_file.h): /dev/zero has no
     * end and a FIFO would block until a writer appears. */
    int fd;
    uint64_t size;
    ot_status st = ot_input_open(path, NULL, &fd, &size, err);
    if (st) return st;
    if (size > OT_MAX_PROTO_FILE_BYTES) {
        close(fd);
        return ot_imp_too_big_for_protobuf(path, err);
    }
    s->fd = fd;
    s->size = size;
    return OT_OK;
}

void ot_imp_src_close(ot_imp_src *s) {
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    free(s->win);
    s->win = NULL;
    s->win_len = 0;
}

ot_status ot_imp_src_read(ot_imp_src *s, uint64_t off, void *dst, size_t n, ot_error *err) {
    if (off > s->size || n > s->size - off)
        return ot_fail(err, OT_E_INTERNAL, "%s: read of %zu bytes at offset %llu is past the end (%llu bytes)", s->name,
                       n, (unsigned long long)off, (unsigned long long)s->size);
    if (!n) return OT_OK;
    if (s->fd < 0) { /* memory */
        memcpy(dst, s->mem + off, n);
        return OT_OK;
    }
    if (!ot_input_pread(s->fd, off, dst, n)) {
        /* The size was taken when the file was opened: a short read means it changed. */
        if (errno) return ot_fail(err, OT_E_IO, "%s: read error: %s", s->name, strerror(errno));
        return ot_fail(err, OT_E_IO, "%s: the file became shorter while it was being loaded", s->name);
    }
    return OT_OK;
}

ot_status ot_imp_src_peek(ot_imp_src *s, uint64_t off, size_t want, const uint8_t **p, size_t *avail, ot_error *err) {
    *p = NULL;
    *avail = 0;
    if (off >= s->size) return OT_OK;
    uint64_t left = s->size - off;
    if (s->fd < 0) { /* memory */
        *p = s->mem + off;
        *avail = (size_t)left;
        return OT_OK;
    }
    if (want > OT_SRC_WINDOW) want = OT_SRC_WINDOW;
    if (want > left) want = (size_t)left;
    if (!s->win || off < s->win_off || off + want > s->win_off + s->win_len) {
        if (!s->win && !(s->win = malloc(OT_SRC_WINDOW)))
            return ot_fail(err, OT_E_MEMORY, "%s: out of memory", s->name);
        size_t n = left < OT_SRC_WINDOW ? (size_t)left : OT_SRC_WINDOW;
        s->win_len = 0;
        ot_status st = ot_imp_src_read(s, off, s->win, n, err);
        if (st) return st;
        s->win_off = off;
        s->win_len = n;
    }
    *p = s->win + (off - s->win_off);
    *avail = (size_t)(s->win_off + s->win_len - off);
    return OT_OK;
}

ot_status ot_imp_src_read_all(ot_imp_src *s, uint8_t **data, ot_error *err) {
    *data = NULL;
    uint8_t *buf = malloc(s->size + 1);
    if (!buf)
        return ot_fail(err, OT_E_MEMORY, "%s: out of memory for %llu bytes", s->name, (unsigned long long)s->size);
    ot_status st = ot_imp_src_read(s, 0, buf, (size_t)s->size, err);
    if (st) {
        free(buf);
        return st;
    }
    buf[s->size] = 0;
    *data = buf;
    return OT_OK;
}
