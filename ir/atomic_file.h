/* atomic_file.h — the one way onnxtrain writes an output file (tuned model,
 * checkpoint, .npy, report, index.json, --dot, --timeline): into a temporary file
 * next to the destination, then fsync, rename over the destination, fsync of the
 * folder. A reader, a crash or a full disk therefore sees either the old file or the
 * whole new one, never a part, and a failure leaves no temporary file behind.
 *
 *     ot_atomic_file *af;
 *     if ((st = ot_atomic_open(path, &af, err))) return st;
 *     fprintf(ot_atomic_stream(af), ...);          // any stdio output
 *     return ot_atomic_commit(af, err);            // or ot_atomic_abort(af)
 *
 * A destination that is a character device or a FIFO (/dev/null, /dev/stdout, a
 * pipe) is written in place instead: there is nothing to replace atomically, and a
 * rename would replace the device node itself with a regular file. */
#ifndef OT_ATOMIC_FILE_H
#define OT_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "ir.h"

typedef struct ot_atomic_file ot_atomic_file;

/* Starts writing `path`. The temporary file is PATH.tmp-XXXXXX (six random letters
 * or digits), created with O_CREAT | O_EXCL | O_NOFOLLOW, so nothing planted at that
 * name (a symlink, another file) is ever followed or overwritten, with mode 0666 less
 * the umask, as fopen gives. On failure (a missing or unwritable folder: OT_E_IO
 * naming path and the reason; OT_E_MEMORY) *out is NULL and nothing was created. */
ot_status ot_atomic_open(const char *path, ot_atomic_file **out, ot_error *err);

/* The stream to write the contents through (buffered; errors are kept and reported
 * by ot_atomic_commit, with the errno of the first failed write). */
FILE *ot_atomic_stream(ot_atomic_file *af);

/* Finishes and frees af: flushes the stream, fails if any write failed, fsyncs the
 * file, renames it over the destination and fsyncs the folder. Any failure before
 * the rename returns OT_E_IO naming the destination and the reason (strerror), removes
 * the temporary file and leaves the destination as it was. A failure to sync the
 * folder after the rename is OT_E_IO too, with the new file already in place. */
ot_status ot_atomic_commit(ot_atomic_file *af, ot_error *err);

/* Everything ot_atomic_commit does before the rename (flush, write errors, fsync),
 * so that several outputs can be written in full, each checked, before any of them
 * appears: finish them all, then commit them all (a commit is then only the rename
 * and the folder sync). On failure af is freed, its temporary file removed and the
 * destination untouched, as for a failed commit; do not commit or abort it then. */
ot_status ot_atomic_finish(ot_atomic_file *af, ot_error *err);

/* Gives up: closes and removes the temporary file (the destination is untouched) and
 * frees af. NULL is allowed. */
void ot_atomic_abort(ot_atomic_file *af);

/* fsync of the folder holding `path`, so that renames and removals in it are durable
 * (ot_atomic_commit calls it; also for a caller that removes files). OT_E_IO naming
 * the path and the reason; a folder that cannot be opened for want of read
 * permission, or a file system that cannot sync folders, is not a failure. */
ot_status ot_atomic_sync_folder(const char *path, ot_error *err);

/* The whole of `path` from one buffer: open, write, commit. */
ot_status ot_atomic_write(const char *path, const void *data, size_t n, ot_error *err);

#endif
