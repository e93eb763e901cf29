/* session.h — one training step's graph under a remat policy, for `onnxtrain plan`
 * (which runs nothing), `onnxtrain verify` (one step with and without remat, compared
 * bitwise) and the model-level remat tests.
 *
 * A session loads a model, binds the batch dim, appends the loss (autodiff/loss.c)
 * and the backward pass (ot_autodiff_build), analyses the training graph, chooses
 * the policy's keep set with the planner as the measure and rewrites the graph. No
 * optimizer nodes: a step here is forward + loss + backward, and the state updates
 * are the BatchNorm running statistics. */
#ifndef OT_REMAT_SESSION_H
#define OT_REMAT_SESSION_H

#include "autodiff/autodiff.h"
#include "importer/importer.h"
#include "remat/remat.h"
#include "exec/backend.h"
#include "train/data.h"
#include "train/step_results.h"
#include "plan/planner.h"

typedef struct ot_remat_session_options {
    ot_loss_options loss;
    int64_t batch_size;     /* 0: the model's fixed batch, else the data's sample count */
    uint64_t seed;          /* Philox key of Dropout */
    int n_threads;          /* 0: OpenMP's default */
    const char *device;     /* "cpu" (NULL = cpu) or "cuda[:N]" */
    const char *policy;     /* --remat text; NULL = none */
    int64_t memory_budget;  /* --memory-budget for auto; 0 = none */
    /* Plan only: load the model with skip_param_data (importer.h), so its weights are
     * never read or held; ot_remat_session_step then refuses to run. Plans, remat
     * choices and every figure `plan` prints are the same either way. */
    bool plan_only;
} ot_remat_session_options;

typedef struct ot_remat_session {
    ot_model *model;
    ot_graph *g;             /* model->graph, extended to the training graph */
    int64_t batch;
    uint64_t seed;
    int n_model_inputs;      /* g->inputs[0..n) are the model's data inputs */
    int loss_value, label_value; /* label_value -1 for --loss output */
    ot_autodiff_result ad;
    bool ad_built;
    ot_backend *be;
    ot_remat_policy policy;
    ot_remat_analysis an;    /* of the graph before the rewrite */
    bool *keep;              /* the chosen keep set (an.n_values) */
    ot_remat_rewrite rw;     /* the rewrite applied to g */
    double choose_seconds;   /* time to choose the plan (auto: the search) */
    bool plan_only;          /* built without the weights (options.plan_only) */
} ot_remat_session;

/* Builds and rewrites the training graph of the model at `path`. */
ot_status ot_remat_session_new(const char *path, const ot_remat_session_options *o, ot_remat_session **out,
                               ot_error *err);
void ot_remat_session_free(ot_remat_session *s);

/* Schedules and plans the session's graph as it stands (caller frees *plan). */
ot_status ot_remat_session_plan(const ot_remat_session *s, ot_plan **plan, ot_error *err);

/* One step's results (train/step_results.h). */
typedef ot_step_results ot_remat_step;

/* Runs one step on the first `batch` samples of data (arrays named after the model's
 * inputs, "" for positional ones, OT_DATA_LABELS — see train/train.h — or "labels"
 * for the loss's labels/targets). */
ot_status ot_remat_session_step(ot_remat_session *s, const ot_dataset *data, ot_remat_step *r, ot_error *err);
static inline void ot_remat_step_free(ot_remat_step *r) { ot_step_results_free(r); }

/* ot_tensor_bitwise_diff (train/step_results.h). */
static inline double ot_remat_tensor_diff(const ot_tensor *a, const ot_tensor *b, bool *equal) {
    return ot_tensor_bitwise_diff(a, b, equal);
}

/* `--batch-size auto`: the largest batch in [1, max_batch] whose plan under o's
 * policy has a planned peak within budget (doubling, then bisection; each probe is a
 * fresh session, loaded without weights whatever o.plan_only says: probes only plan).
 * OT_E_MEMORY when even batch 1 does not fit, stating its peak. */
ot_status ot_remat_find_batch(const char *path, const ot_remat_session_options *o, int64_t budget, int64_t max_batch,
                              int64_t *batch, ot_error *err);

#endif
