/* input_file.c — opening a file to read, regular files only, never blocking (see
 * input_file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/input_file.h"

static const char *kind_of(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISDIR(m)) return "a folder";
    return "not a plain file";
}

ot_status ot_input_open(const char *path, const char *name, int *fd, uint64_t *size, ot_error *err) {
    *fd = -1;
    *size = 0;
    if (!name) name = path;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. A
     * socket cannot be opened at all (ENXIO), which is refused as well. */
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (f < 0) return ot_fail(err, OT_E_IO, "%s: cannot open: %s", name, strerror(errno));
    struct stat sb;
    if (fstat(f, &sb) != 0) {
        int e = errno;
        close(f);
        return ot_fail(err, OT_E_IO, "%s: cannot open: %s", name, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        return ot_fail(err, OT_E_IO, "%s: not a regular file (%s); only regular files are read", name,
                       kind_of(sb.st_mode));
    }
    int fl = fcntl(f, F_GETFL);
    if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(f);
        return ot_fail(err, OT_E_IO, "%s: cannot open: %s", name, strerror(e));
    }
    *fd = f;
    *size = (uint64_t)sb.st_size;
    return OT_OK;
}

bool ot_input_pread(int fd, uint64_t off, void *dst, size_t n) {
    uint8_t *p = dst;
    while (n) {
        ssize_t got = pread(fd, p, n, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            if (got == 0) errno = 0;
            return false;
        }
        p += got;
        off += (uint64_t)got;
        n -= (size_t)got;
    }
    return true;
}

ot_status ot_input_read_all(const char *path, const char *name, uint64_t max_bytes, uint8_t **buf, size_t *len,
                            ot_error *err) {
    *buf = NULL;
    *len = 0;
    if (!name) name = path;
    int fd;
    uint64_t size;
    ot_status st = ot_input_open(path, name, &fd, &size, err);
    if (st) return st;
    if ((max_bytes && size > max_bytes) || size >= SIZE_MAX) {
        close(fd);
        return ot_fail(err, OT_E_IO, "%s: %llu bytes, over the limit of %llu bytes", name, (unsigned long long)size,
                       (unsigned long long)(max_bytes ? max_bytes : SIZE_MAX - 1));
    }
    uint8_t *b = malloc((size_t)size + 1);
    if (!b) {
        close(fd);
        return ot_fail(err, OT_E_MEMORY, "%s: out of memory for %llu bytes", name, (unsigned long long)size);
    }
    if (!ot_input_pread(fd, 0, b, (size_t)size)) {
        int e = errno;
        close(fd);
        free(b);
        if (e) return ot_fail(err, OT_E_IO, "%s: read error: %s", name, strerror(e));
        return ot_fail(err, OT_E_IO, "%s: the file became shorter while it was being read", name);
    }
    close(fd);
    b[size] = 0;
    *buf = b;
    *len = (size_t)size;
    return OT_OK;
}
