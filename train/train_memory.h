/* train_memory.h — what `onnxtrain train` says when a training step does not fit:
 * the budget check made before the arena is allocated, advice naming the remat
 * policy or batch size that would fit, and --batch-size auto (each one measured by
 * the planner on a plan-only session over the same import, never estimated). */
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
 * policy, else --remat all); without one, the peak at half the batch. Each figure is
 * a plan-only session over m (the same import: m->graph is as loaded), optimizer
 * nodes and state planned. With o->validation the batch sizes are said to fit the
 * training step alone: the validation plan at another batch is not measured here.
 * Silent when the model cannot be planned. */
void ot_train_memory_advice(ot_model *m, const ot_train_options *o, int64_t n_samples, ot_error *err);

/* `--batch-size auto`: the largest batch in [1, max_batch] whose training step (with
 * the optimizer unless with_optimizer is false) fits budget under o->remat (auto:
 * searching within it; another policy: its planned peak at most budget). Doubling,
 * then bisection; each probe is a plan-only session over m, never a second import.
 * A fixed-batch model: its own batch, if it fits. OT_E_MEMORY when even batch 1 does
 * not fit, stating its least peak. */
ot_status ot_train_find_batch(ot_model *m, const ot_train_options *o, bool with_optimizer, int64_t budget,
                              int64_t max_batch, int64_t *batch, ot_error *err);

#endif
