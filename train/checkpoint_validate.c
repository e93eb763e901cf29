/* checkpoint_validate.c — the field checks a decoded checkpoint passes before it is
 * used (see checkpoint.h). The checksum catches accidents, not a crafted file: a file
 * with a valid checksum and a step of -1 once sent the batcher before its permutation.
 * So every field is checked against the range the writer can produce, and against the
 * other fields it follows from (the data position follows from the step, the batch
 * size, --accum and the sample count). What depends on the run (the model's params,
 * the settings) is checked when the checkpoint is restored (train_checkpoint.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h" /* ot_loss_kind */
#include "train/checkpoint.h"

#define BAD(field, fmt, ...)                                                                                           \
    ot_fail(err, OT_E_DATA, "%s: field '%s' is " fmt ": not a checkpoint this onnxtrain wrote (crafted or damaged)",   \
            what, field, __VA_ARGS__)

static ot_status check_counts(const ot_checkpoint *c, const char *what, ot_error *err) {
    const ot_ckpt_settings *s = &c->set;
    if (s->batch_size < 1) return BAD("batch_size", "%lld, below 1", (long long)s->batch_size);
    if (s->accum < 1) return BAD("accum", "%lld, below 1", (long long)s->accum);
    if (s->n_samples < s->batch_size)
        return BAD("n_samples", "%lld, fewer than the batch size %lld", (long long)s->n_samples,
                   (long long)s->batch_size);
    if (c->step < 0) return BAD("step", "%lld, negative", (long long)c->step);
    int64_t micro;
    if (__builtin_mul_overflow(c->step, s->accum, &micro) || micro != c->micro_batches)
        return BAD("micro_batches", "%lld, not step %lld x accum %lld", (long long)c->micro_batches, (long long)c->step,
                   (long long)s->accum);
    if (s->keep_partial && s->n_samples % s->batch_size == 0)
        return BAD("keep_partial", "%s", "set, but the batch size divides the sample count");
    int64_t per_epoch = ot_batches_per_epoch(s->n_samples, s->batch_size, !s->keep_partial);
    if (c->epoch != micro / per_epoch)
        return BAD("epoch", "%lld; %lld micro-batches of %lld per epoch end in epoch %lld", (long long)c->epoch,
                   (long long)micro, (long long)per_epoch, (long long)(micro / per_epoch));
    if (c->epoch_batch != micro % per_epoch)
        return BAD("epoch_batch", "%lld; %lld micro-batches of %lld per epoch end at batch %lld",
                   (long long)c->epoch_batch, (long long)micro, (long long)per_epoch, (long long)(micro % per_epoch));
    if (s->memory_budget < 0) return BAD("memory_budget", "%lld, negative", (long long)s->memory_budget);
    return OT_OK;
}

static ot_status check_optim(const ot_checkpoint *c, const char *what, ot_error *err) {
    const ot_ckpt_settings *s = &c->set;
    const ot_optim_config *o = &s->optim;
    if (s->loss_kind < OT_LOSS_CROSS_ENTROPY || s->loss_kind > OT_LOSS_L1)
        return BAD("loss_kind", "%d, no loss", s->loss_kind);
    if ((unsigned)o->kind > OT_OPTIM_ADAMW) return BAD("optimizer", "%u, no optimizer", (unsigned)o->kind);
    if ((unsigned)o->schedule > OT_SCHED_COSINE) return BAD("schedule", "%u, no schedule", (unsigned)o->schedule);
    const struct {
        const char *name;
        double v;
    } f[] = {{"lr", o->lr},       {"momentum", o->momentum}, {"weight_decay", o->weight_decay},    {"beta1", o->beta1},
             {"beta2", o->beta2}, {"eps", o->eps},           {"clip_grad_norm", o->clip_grad_norm}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!isfinite(f[i].v)) return BAD(f[i].name, "%g, not a finite number", f[i].v);
    if (o->warmup_steps < 0) return BAD("warmup_steps", "%lld, negative", (long long)o->warmup_steps);
    if (o->total_steps < 0) return BAD("total_steps", "%lld, negative", (long long)o->total_steps);
    /* a cosine run knows its length: its checkpoints lie within it */
    if (o->schedule == OT_SCHED_COSINE && o->total_steps > 0 && c->step > o->total_steps)
        return BAD("step", "%lld, past the run's %lld steps", (long long)c->step, (long long)o->total_steps);
    for (const char *p = s->remat; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            return BAD("remat", "%s", "a name holding a control or non-ASCII byte");
    return OT_OK;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Names are unique: sorted, not compared pairwise, since a crafted file may hold
 * hundreds of thousands of tiny records. */
static ot_status check_names(const ot_checkpoint *c, const char *what, ot_error *err) {
    if (c->n_tensors < 2) return OT_OK;
    char **names = malloc((size_t)c->n_tensors * sizeof *names);
    if (!names) return ot_fail(err, OT_E_MEMORY, "%s: out of memory checking %d tensor names", what, c->n_tensors);
    for (int i = 0; i < c->n_tensors; i++)
        names[i] = c->tensors[i].name;
    qsort(names, (size_t)c->n_tensors, sizeof *names, cmp_names);
    ot_status st = OT_OK;
    for (int i = 1; i < c->n_tensors && !st; i++)
        if (!strcmp(names[i - 1], names[i]))
            st = ot_fail(err, OT_E_DATA, "%s: tensor '%s' appears twice: not a checkpoint this onnxtrain wrote", what,
                         names[i]);
    free(names);
    return st;
}

ot_status ot_checkpoint_validate(const ot_checkpoint *c, const char *what, ot_error *err) {
    ot_status st = check_counts(c, what, err);
    if (!st) st = check_optim(c, what, err);
    if (!st) st = check_names(c, what, err);
    return st;
}
