/* input_file.h — the one way onnxtrain opens a file it reads: the model, its external
 * data, .npy data (--input, --labels, --val-*, eval --input) and checkpoints
 * (--resume). Only regular files are read: a FIFO would block the open (or the first
 * read) until a writer appears, which may be never; a device such as /dev/zero has no
 * end; a folder or socket is no data. The open itself never waits: it is made with
 * O_NONBLOCK (then cleared, so reads of the regular file behave as usual), O_NOCTTY
 * (a terminal never becomes ours) and O_CLOEXEC, and the kind is taken from the open
 * descriptor (fstat), so the file checked is the file read. Outputs go through
 * ir/atomic_file.h instead. */
#ifndef OT_INPUT_FILE_H
#define OT_INPUT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

/* Opens `path` for reading. On success *fd is the descriptor (caller closes) and
 * *size the file's size in bytes. Refusals are OT_E_IO with a message starting with
 * `name` (the path when NULL): "NAME: cannot open: REASON" or "NAME: not a regular
 * file (a FIFO)" (a character device, a block device, a socket, a folder); *fd is -1
 * and nothing is left open. */
ot_status ot_input_open(const char *path, const char *name, int *fd, uint64_t *size, ot_error *err);

/* pread until n bytes: false when the file ends first (errno 0) or a read fails
 * (errno set). */
bool ot_input_pread(int fd, uint64_t off, void *dst, size_t n);

/* The whole of `path` (opened as above) in a fresh buffer, NUL-terminated one past
 * *len; files over max_bytes (0: no limit) are OT_E_IO "NAME: N bytes, over the limit
 * of M bytes", and a file that shrinks while read is OT_E_IO. */
ot_status ot_input_read_all(const char *path, const char *name, uint64_t max_bytes, uint8_t **buf, size_t *len,
                            ot_error *err);

#endif
