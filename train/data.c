/* data.c — datasets, label checks, deterministic shuffling and batching (data.h). */
#include <stdlib.h>
#include <string.h>

#include "train/data.h"
#include "autodiff/autodiff.h" /* OT_DEFAULT_IGNORE_INDEX */

ot_status ot_dataset_add(ot_dataset *d, const char *name, const char *path, int value_id, ot_tensor *t,
                         ot_error *err) {
    if (!t) return ot_fail(err, OT_E_INTERNAL, "dataset: no tensor for '%s'", name ? name : "?");
    if (t->shape.rank < 1) {
        ot_tensor_free(t);
        return ot_fail(err, OT_E_DATA, "%s: a 0-d array; data needs samples along axis 0", path);
    }
    if (d->n_arrays > 0 && t->shape.dim[0] != d->n_samples) {
        int64_t got = t->shape.dim[0];
        ot_tensor_free(t);
        return ot_fail(err, OT_E_DATA, "%s: %lld samples (axis 0), but %s has %lld", path, (long long)got,
                       d->arrays[0].path, (long long)d->n_samples);
    }
    ot_data_array *a = realloc(d->arrays, (size_t)(d->n_arrays + 1) * sizeof *a);
    if (!a) {
        ot_tensor_free(t);
        return ot_fail(err, OT_E_MEMORY, "out of memory");
    }
    d->arrays = a;
    ot_data_array *x = &a[d->n_arrays];
    x->name = ot_strdup(name ? name : "");
    x->path = ot_strdup(path ? path : "");
    x->value_id = value_id;
    x->t = t;
    if (!x->name || !x->path) {
        free(x->name);
        free(x->path);
        ot_tensor_free(t);
        return ot_fail(err, OT_E_MEMORY, "out of memory");
    }
    if (d->n_arrays == 0) d->n_samples = t->shape.dim[0];
    d->n_arrays++;
    return OT_OK;
}

void ot_dataset_free(ot_dataset *d) {
    if (!d) return;
    for (int i = 0; i < d->n_arrays; i++) {
        free(d->arrays[i].name);
        free(d->arrays[i].path);
        ot_tensor_free(d->arrays[i].t);
    }
    free(d->arrays);
    memset(d, 0, sizeof *d);
}

const ot_data_array *ot_dataset_find(const ot_dataset *d, const char *name) {
    for (int i = 0; i < d->n_arrays; i++)
        if (!strcmp(d->arrays[i].name, name)) return &d->arrays[i];
    return NULL;
}

int64_t ot_batches_per_epoch(int64_t n_samples, int64_t batch, bool drop_last) {
    if (batch < 1 || batch > n_samples) return 0;
    return drop_last ? n_samples / batch : n_samples / batch + (n_samples % batch != 0);
}

ot_status ot_data_widen_i32(ot_tensor **t, const char *path, ot_error *err) {
    const ot_tensor *s = *t;
    ot_tensor *w = ot_tensor_new(OT_I64, &s->shape);
    if (!w) return ot_fail(err, OT_E_MEMORY, "out of memory widening %s from int32 to int64", path);
    int64_t n = ot_shape_numel(&s->shape);
    for (int64_t k = 0; k < n; k++) ((int64_t *)w->data)[k] = ((const int32_t *)s->data)[k];
    ot_tensor_free(*t);
    *t = w;
    return OT_OK;
}

ot_status ot_data_check_labels(const ot_tensor *labels, const char *path, int64_t n_classes, bool has_ignore,
                               int64_t ignore_index, ot_error *err) {
    if (labels->dtype != OT_I64 && labels->dtype != OT_I32)
        return ot_fail(err, OT_E_DATA, "%s: labels are %s; class labels must be int64 (or int32) class indices",
                       path, ot_dtype_name(labels->dtype));
    int64_t n = ot_shape_numel(&labels->shape);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = labels->dtype == OT_I64 ? ((const int64_t *)labels->data)[i] : ((const int32_t *)labels->data)[i];
        if (has_ignore && v == ignore_index) continue;
        if (v < 0 || v >= n_classes)
            return ot_fail(err, OT_E_DATA, "%s: label %lld at index %lld is out of range: the model has %lld classes (0..%lld)%s",
                           path, (long long)v, (long long)i, (long long)n_classes, (long long)(n_classes - 1),
                           has_ignore ? " and it is not the ignore index"
                           : v == OT_DEFAULT_IGNORE_INDEX ? " (-100 marks labels to ignore unless --ignore-index none)" : "");
    }
    return OT_OK;
}

/* ---- shuffling and batching ------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void ot_shuffle_perm(int64_t *perm, int64_t n, uint64_t seed, uint64_t epoch) {
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    uint64_t s = seed ^ (epoch * 0xD1B54A32D192ED03ull);
    splitmix64(&s); /* decorrelate nearby seeds */
    for (int64_t i = n - 1; i > 0; i--) {
        /* modulo bias is below 2^-40 for any data set that fits in memory */
        int64_t j = (int64_t)(splitmix64(&s) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

ot_status ot_batcher_init(ot_batcher *b, int64_t n_samples, int64_t batch, bool shuffle, bool drop_last,
                          uint64_t seed, ot_error *err) {
    memset(b, 0, sizeof *b);
    if (batch < 1 || batch > n_samples)
        return ot_fail(err, OT_E_DATA, "batch size %lld: the data has %lld samples; use --batch-size between 1 and %lld",
                       (long long)batch, (long long)n_samples, (long long)n_samples);
    b->perm = malloc((size_t)n_samples * sizeof *b->perm);
    if (!b->perm) return ot_fail(err, OT_E_MEMORY, "out of memory for a permutation of %lld samples", (long long)n_samples);
    b->n_samples = n_samples;
    b->batch = batch;
    b->shuffle = shuffle;
    b->drop_last = drop_last;
    b->seed = seed;
    b->epoch = -1;
    return OT_OK;
}

void ot_batcher_free(ot_batcher *b) {
    free(b->perm);
    memset(b, 0, sizeof *b);
}

int64_t ot_batcher_per_epoch(const ot_batcher *b) {
    return ot_batches_per_epoch(b->n_samples, b->batch, b->drop_last);
}

const int64_t *ot_batcher_batch(ot_batcher *b, int64_t k, int64_t *epoch, int64_t *n) {
    int64_t per = ot_batcher_per_epoch(b);
    /* k comes from a step that may have been read from a file (--resume): a negative
     * one would index before the permutation */
    if (k < 0 || per < 1 || !b->perm) return NULL;
    int64_t e = k / per;
    if (e != b->epoch) {
        if (b->shuffle)
            ot_shuffle_perm(b->perm, b->n_samples, b->seed, (uint64_t)e);
        else
            for (int64_t i = 0; i < b->n_samples; i++) b->perm[i] = i;
        b->epoch = e;
    }
    if (epoch) *epoch = e;
    int64_t first = (k % per) * b->batch, left = b->n_samples - first;
    if (n) *n = left < b->batch ? left : b->batch;
    return b->perm + first;
}

void ot_data_gather(const ot_tensor *src, const int64_t *idx, int64_t n, void *dst) {
    int64_t rows = src->shape.dim[0];
    size_t row = rows > 0 ? src->nbytes / (size_t)rows : 0;
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)dst + (size_t)i * row, (const char *)src->data + (size_t)idx[i] * row, row);
}

ot_status ot_data_gather_new(const ot_tensor *src, const int64_t *idx, int64_t n, ot_tensor **out, ot_error *err) {
    ot_shape s = src->shape;
    s.dim[0] = n;
    s.sym[0] = -1;
    ot_tensor *t = ot_tensor_new(src->dtype, &s);
    if (!t) return ot_fail(err, OT_E_MEMORY, "out of memory for a batch of %lld samples", (long long)n);
    ot_data_gather(src, idx, n, t->data);
    *out = t;
    return OT_OK;
}
