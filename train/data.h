/* data.h — training data: named arrays with samples along axis 0 (one per graph
 * input, plus labels), deterministic shuffling and batching, and the checks that run
 * before training starts (sample counts agree, labels in range).
 *
 * Batching: each epoch visits the samples in a permutation of 0..N-1 (identity
 * without shuffling; with shuffling Fisher–Yates driven by splitmix64 keyed by
 * (seed, epoch), so a run is reproducible) in batches of B. The last partial batch
 * of an epoch (N mod B samples) is kept, as PyTorch's DataLoader keeps it, or dropped
 * (drop_last, DataLoader's drop_last=True). A kept partial batch runs in the planned
 * shapes of a full one: the caller pads it (train_loop.c), so the plan never changes. */
#ifndef OT_DATA_H
#define OT_DATA_H

#include "ir.h"

typedef struct ot_data_array {
    char *name;      /* graph input it feeds (e.g. "x", "labels") */
    char *path;      /* file it came from, for messages */
    int value_id;    /* graph input value id, -1 until bound */
    ot_tensor *t;    /* owned; shape [N, ...] */
} ot_data_array;

typedef struct ot_dataset {
    ot_data_array *arrays;
    int n_arrays;
    int64_t n_samples; /* axis 0 of every array */
} ot_dataset;

/* Adds an array (takes ownership of t, also on failure). Rank-0 arrays and a sample
 * count different from the arrays already there are OT_E_DATA naming both files. */
ot_status ot_dataset_add(ot_dataset *d, const char *name, const char *path, int value_id, ot_tensor *t,
                         ot_error *err);
void ot_dataset_free(ot_dataset *d);
const ot_data_array *ot_dataset_find(const ot_dataset *d, const char *name);

/* Batches in one epoch of n_samples: floor(N / B) with drop_last, else ceil(N / B).
 * 0 for a batch outside [1, N]. */
int64_t ot_batches_per_epoch(int64_t n_samples, int64_t batch, bool drop_last);

/* Widens an int32 array to int64 in place (*t replaced; the old tensor freed), for
 * int64 model inputs and labels fed from int32 files (HF tokenizers write int32 ids). */
ot_status ot_data_widen_i32(ot_tensor **t, const char *path, ot_error *err);

/* Checks class labels before training: integer dtype (int64 or int32), every value in
 * [0, n_classes) or equal to the ignore index. OT_E_DATA naming the file, the flat
 * index and the value of the first bad label. */
ot_status ot_data_check_labels(const ot_tensor *labels, const char *path, int64_t n_classes, bool has_ignore,
                               int64_t ignore_index, ot_error *err);

/* The batch order of one run. */
typedef struct ot_batcher {
    int64_t n_samples, batch;
    bool shuffle, drop_last;
    uint64_t seed;
    int64_t *perm;   /* current epoch's order */
    int64_t epoch;   /* epoch perm belongs to, -1 before the first */
} ot_batcher;

/* batch must be in [1, n_samples] (OT_E_DATA otherwise, saying how many samples
 * there are). drop_last: the last partial batch of an epoch is skipped. */
ot_status ot_batcher_init(ot_batcher *b, int64_t n_samples, int64_t batch, bool shuffle, bool drop_last,
                          uint64_t seed, ot_error *err);
void ot_batcher_free(ot_batcher *b);
/* Batches per epoch: ot_batches_per_epoch(N, B, drop_last). */
int64_t ot_batcher_per_epoch(const ot_batcher *b);
/* The sample indices of batch `k` (0-based over the whole run: epoch k / per_epoch);
 * *epoch receives its epoch and *n (may be NULL) its sample count: B, or N mod B for
 * the last batch of an epoch when it is kept. Returns a pointer to *n indices inside
 * b->perm, or NULL for a k below 0 or a batcher without a batch (never an index out
 * of range). */
const int64_t *ot_batcher_batch(ot_batcher *b, int64_t k, int64_t *epoch, int64_t *n);
/* The permutation of 0..n-1 for (seed, epoch): Fisher–Yates over splitmix64. */
void ot_shuffle_perm(int64_t *perm, int64_t n, uint64_t seed, uint64_t epoch);

/* Copies rows idx[0..n) of src (axis 0) into dst, which has room for n rows. */
void ot_data_gather(const ot_tensor *src, const int64_t *idx, int64_t n, void *dst);
/* A new tensor shaped [n, src dims 1..] holding rows idx[0..n) of src. */
ot_status ot_data_gather_new(const ot_tensor *src, const int64_t *idx, int64_t n, ot_tensor **out, ot_error *err);

#endif
