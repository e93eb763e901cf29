/* api_internal.h — the public API's session handle and the helpers its files share
 * (api/session.c: open, options, batches, steps, eval; api/access.c: params, plan,
 * verify, checkpoints, the tuned model; api/split.c: the step in two calls). Not installed: applications see only
 * include/onnxtrain.h. */
#ifndef OT_API_INTERNAL_H
#define OT_API_INTERNAL_H

#include <stdatomic.h>

#include "include/onnxtrain.h"
#include "train/checkpoint.h"
#include "train/train.h"

/* The shape of one array of the batch the session was built for. */
typedef struct api_sig {
    ot_dtype dtype;
    ot_shape shape;
} api_sig;

struct onnxtrain_session {
    atomic_flag busy; /* set while a call runs: a second thread is refused, not waited for */
    bool closed;
    ot_model *m;
    ot_train_options o; /* its strings and lists point into strs */
    char **strs;        /* owned copies of every string of the options */
    int n_strs;
    const char **lists; /* owned copies of the string lists (freeze, train, bind, lora targets) */
    ot_train_session *ts; /* the training session, built for the first batch */
    api_sig *sig;         /* that batch's arrays (labels last, named OT_DATA_LABELS) */
    int n_sig;
    int64_t step;         /* optimizer steps done */
    bool has_lr;          /* onnxtrain_set_learning_rate: lr replaces the schedule's (api/split.c) */
    double lr;
    ot_checkpoint resume; /* onnxtrain_checkpoint_load before the session is built */
    bool has_resume;
    char resume_path[4096];
};

/* A dataset over the caller's buffers: the tensors point at them (borrowed, never
 * written); int32 class labels are widened into an owned copy (the session's checks
 * would otherwise replace the caller's tensor). */
typedef struct api_batch {
    ot_dataset d;
    const void **borrowed; /* per array: the caller's pointer, NULL for an owned copy */
} api_batch;

/* Checks every tensor (NULL, dtype, rank, shape, nbytes, sample counts agree) naming
 * the argument, and wraps them in b. */
ot_status api_batch_make(const onnxtrain_tensor *inputs, int n_inputs, const onnxtrain_tensor *labels, api_batch *b,
                         ot_error *err);
void api_batch_free(api_batch *b);

/* Enters a call on s (NULL, closed, busy in another thread: an error naming `fn`). */
ot_status api_enter(onnxtrain_session *s, const char *fn, ot_error *err);
void api_leave(onnxtrain_session *s);
/* Records the thread's last error and returns the status as the public type. */
onnxtrain_status api_result(ot_status st, const ot_error *err);
/* Builds the training session for b (api/session.c) unless built; later batches must
 * match the first one's arrays (exact_count: axis 0 too). */
ot_status api_build(onnxtrain_session *s, api_batch *b, bool exact_count, const char *fn, ot_error *err);
/* The train options as the session builds with them (batch size from b). */
ot_status api_train_options(const onnxtrain_session *s, const api_batch *b, ot_train_options *o, ot_error *err);

#endif
