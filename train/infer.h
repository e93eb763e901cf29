/* infer.h — the forward pass over data in batches (`onnxtrain eval`), built the way
 * every command builds its plans (train/session.h): the data mapped to the model's
 * inputs by ot_session_map_data, the dims bound by ot_session_bind on a copy of the
 * imported graph that borrows the weights, one executor that keeps the only copy of
 * them. A last partial batch is a second plan over another bound copy of the same
 * import (never a second ot_model_load), whose params and state are the first
 * executor's, read in place.
 *
 * Inference mode by default, as PyTorch's model.eval(): BatchNormalization and
 * Dropout get training_mode 0 whatever the model says; train_mode runs them as
 * exported (no_dropout then turns Dropout off alone). */
#ifndef OT_INFER_H
#define OT_INFER_H

#include "autodiff/autocast.h"
#include "exec/executor.h"
#include "importer/importer.h"
#include "train/data.h"
#include "train/metrics.h"

typedef struct ot_infer_options {
    const char *const *bind; /* --bind specs */
    int n_bind;
    int64_t batch_size;      /* 0: min(32, samples); larger than the data: the data's count */
    uint64_t seed;           /* Dropout with train_mode */
    int n_threads;
    const char *device;      /* NULL: cpu */
    bool tf32;               /* float32 GEMMs on TF32 tensor cores where the backend has them */
    bool train_mode, no_dropout;
    /* A loss over the outputs (eval --labels / --loss): built on every plan as the
     * training session builds it (autodiff/loss.c), its labels (OT_DATA_LABELS, checked
     * and int32 widened as for training) fed with each batch, and the loss, accuracy and
     * perplexity summed over the batches by train/metrics.h, as validation does. NULL:
     * no loss. */
    const ot_loss_options *loss;
    /* --precision: the forward graph in mixed precision, as training rewrites it
     * (autodiff/autocast.h), asked of the device's kernels */
    ot_precision precision;
} ot_infer_options;

typedef struct ot_infer_session ot_infer_session;

/* Checks the data against the model's inputs before any work (names, dtypes, ranks,
 * fixed dims, sample counts; a fixed batch must divide the sample count), binds and
 * plans. m must outlive the session; its weights go to the executor, which keeps the
 * only copy (m cannot be saved afterwards). */
ot_status ot_infer_session_new(ot_model *m, const ot_infer_options *o, ot_dataset *data, ot_infer_session **out,
                               ot_error *err);
void ot_infer_session_free(ot_infer_session *s);

int64_t ot_infer_batch_size(const ot_infer_session *s);
/* Full batches, and the size of the last partial one (0: none). */
int64_t ot_infer_full_batches(const ot_infer_session *s);
int64_t ot_infer_last_batch(const ot_infer_session *s);
/* The full batches' bound graph and plan. */
const ot_graph *ot_infer_graph(const ot_infer_session *s);
const ot_plan *ot_infer_plan(const ot_infer_session *s);
size_t ot_infer_high_water(const ot_infer_session *s);

/* Runs samples [start, start + n) of data (n: the batch size, or the last batch's). */
ot_status ot_infer_run(ot_infer_session *s, const ot_dataset *data, int64_t start, int64_t n, ot_error *err);
/* A copy of graph output k (0..n_outputs-1) of the last run. */
ot_status ot_infer_get_output(ot_infer_session *s, int k, ot_tensor **out, ot_error *err);
/* With o.loss: the loss, accuracy and perplexity over the batches run so far; false
 * without a loss. */
bool ot_infer_metrics(const ot_infer_session *s, ot_metrics_result *r);

#endif
