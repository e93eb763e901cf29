/* metrics.h — loss, accuracy and perplexity over a data set in batches: what validation
 * computes after every epoch (train_validate.c) and `onnxtrain eval --labels` over the
 * whole data (train/infer.c), one code path. After each forward + loss run a batch adds
 * its scalar loss, read where the executor left it, and for cross-entropy the argmax
 * hits of its logits against its labels (the ignore index skipped).
 *
 * The loss over the set is the mean of the batch losses weighted by their samples, as
 * HF's Trainer reports eval_loss (with equal batches: their plain mean). Perplexity, for
 * cross-entropy over a sequence (labels with axes past the sample axis: a token model),
 * is exp of that loss, as HF's run_clm computes it. Accuracy counts every label that is
 * not the ignore index. */
#ifndef OT_METRICS_H
#define OT_METRICS_H

#include "autodiff/autodiff.h"
#include "exec/backend.h"

typedef struct ot_metrics {
    /* what to compute (ot_metrics_init) */
    bool accuracy;  /* cross-entropy with float32 logits: count argmax hits */
    bool per_token; /* cross-entropy whose labels have axes past the sample axis */
    int class_axis; /* of the logits, resolved */
    bool has_ignore;
    int64_t ignore_index;
    /* sums over the batches so far */
    double loss_sum;     /* of the batch losses */
    double weighted_sum; /* of batch loss x batch samples */
    int64_t batches, samples, first_batch;
    int64_t correct, counted;
} ot_metrics;

typedef struct ot_metrics_result {
    double loss;       /* NaN before any batch */
    double accuracy;   /* NaN unless m->accuracy and a label counted */
    double perplexity; /* NaN unless m->per_token */
    int64_t samples;
    int64_t counted; /* labels accuracy counted */
} ot_metrics_result;

/* For a loss: class_axis is the logits' class axis, resolved (cross-entropy only);
 * label_rank the rank of the label data, samples axis included (0: no labels);
 * float32_logits whether accuracy can read the logits. */
void ot_metrics_init(ot_metrics *m, const ot_loss_options *loss, int class_axis, int label_rank, bool float32_logits);

/* Adds one batch of n_samples: the scalar loss at loss_ptr (float32, or float64 with
 * loss64) read through be; with m->accuracy the logits at logits_ptr copied through be
 * into logits (a float32 host tensor of the batch's logits shape) and compared with
 * labels (the batch's int64 labels, host memory). */
ot_status ot_metrics_add_batch(ot_metrics *m, ot_backend *be, const void *loss_ptr, bool loss64, int64_t n_samples,
                               const void *logits_ptr, ot_tensor *logits, const int64_t *labels, ot_error *err);

void ot_metrics_get(const ot_metrics *m, ot_metrics_result *r);

#endif
