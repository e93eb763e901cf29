/* train_memory.h — what `onnxtrain train` says when a training step does not fit:
 * the budget check made before the arena is allocated, and advice naming the remat
 * policy or batch size that would fit (each one measured by the planner on a fresh
 * remat session, never estimated). */
#ifndef OT_TRAIN_MEMORY_H
#define OT_TRAIN_MEMORY_H

#include "exec/backend.h"
#include "train/train.h"

/* With a memory budget and a remat policy other than auto (which searches within the
 * budget itself), the planned peak of g (the whole step, optimizer included) plus
 * val_peak (the validation plan's arena; 0 without validation) must fit: OT_E_MEMORY
 * stating the numbers otherwise. Nothing is allocated. */
ot_status ot_train_check_budget(const ot_graph *g, ot_backend *be, const char *policy, int64_t budget, int64_t val_peak,
                                ot_error *err);

/* After a training session failed with OT_E_MEMORY (budget unmet, or the arena
 * could not be allocated): appends to err->msg the peak with --remat all at this
 * batch and, with a budget, the largest --batch-size that fits it (under the user's
 * policy, else --remat all); without one, the peak at half the batch. Optimizer
 * state is counted as (0, 1 or 2) x the params' bytes. With o->validation the batch
 * sizes are said to fit the training step alone: the validation plan at another
 * batch is not measured here. Silent when the model cannot be planned here (e.g. it
 * needs --bind). */
void ot_train_memory_advice(const char *model_path, const ot_train_options *o, int64_t n_samples, ot_error *err);

#endif
