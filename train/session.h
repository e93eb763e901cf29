/* session.h — the pieces every command builds its plans from (train, grad, plan,
 * verify, eval): an imported model stays as imported (its symbolic dims unbound); each
 * plan works on a bound copy of its graph (ot_graph_clone) that borrows the weights,
 * so a new batch size or sequence length is a new copy of the same import, never a
 * second ot_model_load.
 *
 *   ot_session_map_data   data arrays → graph inputs (the one mapping of --input /
 *                         --labels files to the model's inputs)
 *   ot_session_batch      the batch a command runs (--batch-size, the model's fixed
 *                         batch, or the command's default)
 *   ot_session_bind       --bind specs, symbolic dims the data fixes, the batch
 *   ot_session_borrow     the bound copy (weights moved in), ot_session_give_back
 *                         moves them home
 *
 * The training graph itself (loss, backward, remat, optimizer nodes, frozen params,
 * the validation plan) is built by ot_train_session_new (train/train.h) on such a
 * copy, for every command that plans a step; eval's inference plans are in
 * train/infer.h. */
#ifndef OT_SESSION_H
#define OT_SESSION_H

#include "importer/importer.h"
#include "train/data.h"

/* label_value for ot_session_map_data before the loss exists: arrays meant for the
 * loss's labels are left unmapped (value_id -1) instead of refused. */
#define OT_SESSION_LABELS_LATER (-2)

/* Sets every array's value_id: OT_DATA_LABELS (train/train.h) to label_value, named
 * arrays to the model input of that name, unnamed ones to the model's inputs
 * (g->inputs[0..n_model_inputs)) in order. Fails (OT_E_USAGE, `what` first) on an
 * unknown name, an input given twice, extra files, a model input without data, or
 * labels missing (label_value >= 0; `loss` names the loss) or unwanted (-1). */
ot_status ot_session_map_data(const ot_graph *g, int n_model_inputs, int label_value, const char *loss,
                              ot_dataset *d, const char *what, ot_error *err);

/* The batch: axis 0 of the first model input. A fixed batch must equal want (when
 * given); a symbolic one is want, else dflt, and must lie in [1, n_samples] when
 * n_samples >= 0. */
ot_status ot_session_batch(const ot_graph *g, int64_t want, int64_t dflt, int64_t n_samples, int64_t *batch,
                           ot_error *err);

/* Binds, in this order: every --bind spec; each symbolic dim past axis 0 of a model
 * input that the data fixes (d's mapped arrays; d may be NULL); then the batch
 * (ot_session_batch on the graph bound so far, with want, dflt and n_samples) on axis
 * 0 of every model input whose axis 0 is still symbolic. *batch gets it. Each bind
 * re-runs shape inference on g: call it on a copy (ot_session_borrow). */
ot_status ot_session_bind(ot_graph *g, int n_model_inputs, const char *const *bind, int n_bind, const ot_dataset *d,
                          int64_t want, int64_t dflt, int64_t n_samples, int64_t *batch, ot_error *err);

/* A copy of g to bind and extend: with weights, every param and state value's data
 * moves into it (g keeps dtype, shape and nbytes); without, the copy has none (a
 * plan that never runs, or one that reads another executor's). Everything else is
 * copied. NULL when out of memory (g unchanged). */
ot_graph *ot_session_borrow(ot_graph *g, bool weights);
/* Moves the weights back into g (they were borrowed by `copy`): each param or state
 * value of g without data takes copy's data, whatever the copy holds now (trained
 * weights, or nothing when an executor still holds the only copy). */
void ot_session_give_back(ot_graph *g, ot_graph *copy);

#endif
