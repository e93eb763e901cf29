/* checkpoint.h — training checkpoints (`onnxtrain train --checkpoint-dir DIR
 * --checkpoint-every N`, `--resume DIR|FILE`): the file format, writing by temporary
 * name + fsync + rename, keeping the last K, finding the latest valid one, and (in
 * train/train_checkpoint.c) capturing and restoring a training session.
 *
 * File format (all integers little-endian, floats as IEEE-754 bit patterns):
 *   header  "ONNXTCKP" (8 bytes), u32 version (1), u32 reserved (0),
 *           u64 payload length, u64 FNV-1a 64 of the payload
 *   payload u64 model fingerprint, i64 step (optimizer steps done), i64 micro-batches
 *           done, i64 epoch and i64 batch index in that epoch's shuffled order (of the
 *           next micro-batch), the settings (see ot_ckpt_settings, field by field),
 *           u32 tensor count, then per tensor: str name, u32 kind, u32 dtype,
 *           u32 rank, i64 dims[rank], u64 nbytes, the bytes.
 *   str = u32 length + bytes (no terminator).
 * Exit codes: a truncated, corrupted (checksum) or unknown-version file and
 * settings that differ from the run's (also another set of trained params: --freeze,
 * --train) are OT_E_DATA (8); a checkpoint of another model (fingerprint, or a
 * tensor shaped differently) is OT_E_MODEL (5);
 * a missing file or folder OT_E_IO (3). Every message names the file. */
#ifndef OT_CHECKPOINT_H
#define OT_CHECKPOINT_H

#include <stdio.h>

#include "ir.h"
#include "train/data.h"
#include "train/optim.h"

#define OT_CKPT_VERSION 1
#define OT_CKPT_DEFAULT_KEEP 3

typedef enum ot_ckpt_kind {
    OT_CKPT_PARAM = 0,     /* trained params */
    OT_CKPT_STATE = 1,     /* BatchNorm running statistics */
    OT_CKPT_OPT_STATE = 2, /* momentum, Adam moments */
} ot_ckpt_kind;

typedef struct ot_ckpt_tensor {
    char *name;
    ot_ckpt_kind kind;
    ot_dtype dtype;
    ot_shape shape; /* static; sym[] unused */
    size_t nbytes;
    void *data;
} ot_ckpt_tensor;

/* What a resumed run must share with the run that wrote the checkpoint for the
 * result to be bitwise the same. remat and memory_budget are recorded for the
 * report but may differ: remat never changes results (DESIGN.md, Remat). */
typedef struct ot_ckpt_settings {
    int64_t batch_size, accum;
    int64_t n_samples; /* training data's sample count: the shuffled order depends on it */
    uint64_t seed;
    bool no_shuffle;
    /* the last partial batch of an epoch runs (padded, data.h) instead of being
     * dropped: set only where N mod B > 0. Stored as bit 1 of the no_shuffle word, so
     * checkpoints written before partial batches were kept read as dropped, as they
     * were, and resume where that is still the run's choice (--drop-last). */
    bool keep_partial;
    int loss_kind; /* ot_loss_kind */
    ot_optim_config optim;
    char remat[128];
    int64_t memory_budget;
} ot_ckpt_settings;

/* Where a checkpoint's tensor bytes come from when the tensors hold none (data NULL:
 * the values stay in an executor's arena while the file is written): host_ptr (may
 * be NULL, or return NULL) gives tensor i's bytes in place, otherwise read copies
 * bytes [offset, offset + n) of it into dst, a buffer of at most
 * OT_CKPT_STAGE_BYTES. */
typedef struct ot_ckpt_source {
    const void *(*host_ptr)(void *user, int tensor);
    ot_status (*read)(void *user, int tensor, uint64_t offset, void *dst, size_t n, ot_error *err);
    void *user;
} ot_ckpt_source;

#define OT_CKPT_STAGE_BYTES ((size_t)4 << 20)

typedef struct ot_checkpoint {
    uint64_t fingerprint;
    int64_t step;               /* optimizer steps completed */
    int64_t micro_batches;      /* micro-batches completed (step * accum) */
    int64_t epoch, epoch_batch; /* position of the next micro-batch in the data order */
    ot_ckpt_settings set;
    ot_ckpt_tensor *tensors;
    int n_tensors, cap_tensors;
    ot_ckpt_source source; /* for tensors added with ot_checkpoint_add_ref */
} ot_checkpoint;

void ot_checkpoint_free(ot_checkpoint *c);
/* Appends a copy of `nbytes` bytes of data as tensor `name`. */
ot_status ot_checkpoint_add(ot_checkpoint *c, const char *name, ot_ckpt_kind kind, ot_dtype dtype,
                            const ot_shape *shape, const void *data, size_t nbytes, ot_error *err);
/* Appends tensor `name` without its bytes (data NULL): writing takes them from
 * c->source, which must be set by then. Such a checkpoint can be written, not
 * encoded or restored from. */
ot_status ot_checkpoint_add_ref(ot_checkpoint *c, const char *name, ot_ckpt_kind kind, ot_dtype dtype,
                                const ot_shape *shape, size_t nbytes, ot_error *err);
const ot_ckpt_tensor *ot_checkpoint_find_tensor(const ot_checkpoint *c, const char *name);

/* FNV-1a 64: start from OT_FNV_OFFSET, feed bytes. */
#define OT_FNV_OFFSET 0xcbf29ce484222325ULL
uint64_t ot_fnv1a64(uint64_t h, const void *data, size_t n);

/* The whole file in memory (caller frees *buf). */
ot_status ot_checkpoint_encode(const ot_checkpoint *c, uint8_t **buf, size_t *len, ot_error *err);
/* Parses a file's bytes; `what` (the path) prefixes every message. Every field is
 * checked (ot_checkpoint_validate), so a checkpoint that decodes can be used. */
ot_status ot_checkpoint_decode(const uint8_t *buf, size_t len, const char *what, ot_checkpoint *out, ot_error *err);

/* Writes c to `path` through ot_atomic_file (a temporary `path.tmp-XXXXXX`, fsync,
 * rename, fsync of the folder): a crash leaves either the old file or the new one,
 * never half of one. The bytes are those of ot_checkpoint_encode, streamed: a first
 * pass over the tensors computes the checksum the header needs, a second writes, so
 * no buffer of the file's size is made (tensors without data are read twice from
 * c->source). */
ot_status ot_checkpoint_write(const ot_checkpoint *c, const char *path, ot_error *err);
/* Reads a regular file only (a FIFO, device or folder: OT_E_IO, never waited on). */
ot_status ot_checkpoint_read(const char *path, ot_checkpoint *out, ot_error *err);
/* The checks a decoded checkpoint passes (train/checkpoint_validate.c): step >= 0;
 * batch size, --accum and sample count >= 1 and consistent; micro-batches, epoch and
 * batch in the epoch exactly what the step gives; loss, optimizer and schedule known;
 * every float finite; no negative count; tensor names unique. OT_E_DATA naming `what`
 * and the field. */
ot_status ot_checkpoint_validate(const ot_checkpoint *c, const char *what, ot_error *err);

/* Writes DIR/ckpt-<step>.otc (creating DIR if missing) and removes all but the
 * newest `keep` ckpt-*.otc files (keep <= 0: OT_CKPT_DEFAULT_KEEP). The written path
 * goes to path_out (may be NULL). */
ot_status ot_checkpoint_save_dir(const ot_checkpoint *c, const char *dir, int keep, char *path_out, size_t cap,
                                 ot_error *err);

/* `--resume`: a file is read as is; a folder gives its newest ckpt-<step>.otc that
 * reads and checks out (a newer damaged one is skipped, and `skipped`, when not NULL,
 * receives why). The chosen path goes to path_out. */
ot_status ot_checkpoint_load_latest(const char *dir_or_file, ot_checkpoint *out, char *path_out, size_t cap,
                                    ot_error *skipped, ot_error *err);

/* Refuses (OT_E_DATA, naming `path` and each differing setting with both values) a
 * checkpoint whose settings differ from the run's in anything that changes results. */
ot_status ot_checkpoint_check_settings(const ot_ckpt_settings *run, const ot_ckpt_settings *ck, const char *path,
                                       ot_error *err);

/* ---- a training session (train/train_checkpoint.c) ---- */

typedef struct ot_train_session ot_train_session;

/* Hash of what makes two runs the same model: the model's own nodes (op, name,
 * input and output value names), its data inputs, and every initializer of the file
 * (name, dtype, shape), trained or frozen. */
uint64_t ot_train_fingerprint(const ot_train_session *s);
/* The settings of the session's run on `data`. */
void ot_train_ckpt_settings(const ot_train_session *s, const ot_dataset *data, ot_ckpt_settings *out);
/* A checkpoint of the session after `steps_done` optimizer steps: params, running
 * statistics and optimizer state as they are in the executor now. The tensors hold no
 * data: out->source reads them from the executor when the checkpoint is written, so
 * write it before the next step and before ot_train_session_free. */
ot_status ot_train_checkpoint_capture(ot_train_session *s, const ot_dataset *data, int64_t steps_done,
                                      ot_checkpoint *out, ot_error *err);
/* Loads a checkpoint into the session after checking that it belongs to this
 * model (OT_E_MODEL) and these settings (OT_E_DATA); `path` names it in messages. */
ot_status ot_train_checkpoint_restore(ot_train_session *s, const ot_dataset *data, const ot_checkpoint *c,
                                      const char *path, ot_error *err);

#endif
