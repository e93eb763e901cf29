/* remat_session.h — one training step's graph under a remat policy, for the
 * model-level remat tests: a view over the one session builder (train/train.h), not
 * a second pipeline. It loads a model once and builds a plan-only training session
 * without optimizer nodes (forward + loss + backward; the state updates are the
 * BatchNorm running statistics) under the policy; its fields expose that session's
 * graph, remat analysis, keep set and rewrite figures. A step (ot_remat_session_step)
 * is a runnable session over the same import, built like `verify` builds its steps.
 * The commands (`plan`, `verify`) use ot_train_session_new directly. */
#ifndef OT_REMAT_SESSION_H
#define OT_REMAT_SESSION_H

#include "autodiff/autodiff.h"
#include "importer/importer.h"
#include "remat/remat.h"
#include "exec/backend.h"
#include "train/data.h"
#include "train/step_results.h"
#include "plan/planner.h"

struct ot_train_session;

typedef struct ot_remat_session_options {
    ot_loss_options loss;
    int64_t batch_size;     /* 0: the model's fixed batch (a symbolic one needs it) */
    uint64_t seed;          /* Philox key of Dropout */
    int n_threads;          /* 0: OpenMP's default */
    const char *device;     /* "cpu" (NULL = cpu) or "cuda[:N]" */
    const char *policy;     /* --remat text; NULL = none */
    int64_t memory_budget;  /* --memory-budget for auto; 0 = none */
    /* Plan only: load the model with skip_param_data (importer.h), so its weights are
     * never read or held; ot_remat_session_step then refuses to run. Plans, remat
     * choices and every figure are the same either way. */
    bool plan_only;
} ot_remat_session_options;

typedef struct ot_remat_session {
    ot_model *model;         /* the one import; its graph stays as loaded */
    struct ot_train_session *ts; /* the plan-only training session the fields below show */
    ot_remat_session_options o;
    ot_graph *g;             /* the training graph (a bound copy of model->graph), rewritten */
    int64_t batch;
    uint64_t seed;           /* Philox key of the steps (o.seed; may be changed between steps) */
    ot_backend *be;          /* the session's backend (its workspace sizes count) */
    ot_remat_policy policy;
    ot_remat_analysis an;    /* of the graph before the rewrite (the session's: not freed here) */
    const bool *keep;        /* the chosen keep set (an.n_values) */
    ot_remat_rewrite rw;     /* what the rewrite did: n_clones, extra_flops, kept_bytes */
    double choose_seconds;   /* time to choose the plan (auto: the search) */
    bool plan_only;          /* built without the weights (options.plan_only) */
} ot_remat_session;

/* Loads the model at `path` and builds its training graph under o's policy. */
ot_status ot_remat_session_new(const char *path, const ot_remat_session_options *o, ot_remat_session **out,
                               ot_error *err);
void ot_remat_session_free(ot_remat_session *s);

/* Schedules and plans the session's graph as it stands (caller frees *plan). */
ot_status ot_remat_session_plan(const ot_remat_session *s, ot_plan **plan, ot_error *err);

/* One step's results (train/step_results.h). */
typedef ot_step_results ot_remat_step;

/* Runs one step on the first `batch` samples of data (arrays named after the model's
 * inputs, "" for positional ones, OT_DATA_LABELS for the loss's labels/targets; the
 * session sets their value ids, as ot_train_session_new does). */
ot_status ot_remat_session_step(ot_remat_session *s, ot_dataset *data, ot_remat_step *r, ot_error *err);
static inline void ot_remat_step_free(ot_remat_step *r) { ot_step_results_free(r); }

/* ot_tensor_bitwise_diff (train/step_results.h). */
static inline double ot_remat_tensor_diff(const ot_tensor *a, const ot_tensor *b, bool *equal) {
    return ot_tensor_bitwise_diff(a, b, equal);
}

#endif
