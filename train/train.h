/* train.h — the training session every command that plans a step builds (`train`,
 * `grad`, `plan`, `verify`, --batch-size auto), and the training loop.
 *
 * A session turns an imported model into one training graph, on a bound copy of the
 * model's graph (train/session.h: the import stays unbound and serves other plans),
 * and plans or runs it:
 *   bind the dims → loss (autodiff/loss.c) → backward (ot_autodiff_build) →
 *   [remat, each candidate planned with the optimizer nodes] → optimizer nodes
 *   (train/optim.h) → executor (schedule, plan, arena), or with plan_only the plan.
 * One executor run is one micro-batch: forward, loss, backward and the optimizer
 * nodes. The executor's after-node hook stops at the boundary between the backward
 * pass and the optimizer nodes, where the loop checks the loss and the gradients for
 * NaN/Inf, accumulates micro-batches, computes the global gradient norm (fixed
 * order) and writes the step's scalars (lr, clip × 1/K, step, apply) that the
 * optimizer nodes read. After each run the BatchNorm running statistics are copied
 * into their state values.
 *
 * Validation runs in inference mode, as PyTorch's model.eval(): a second, forward-only
 * executor over the forward and loss nodes, with BatchNorm normalising by the running
 * statistics and Dropout the identity. It reads the training arena's params, running
 * statistics and constants in place (bound as external memory, never written), so
 * its own arena holds one batch's activations, workspace, inputs and outputs only;
 * with o.validation that arena is planned before remat and counted in the budget.
 *
 * Non-finite values: when the loss or a gradient is NaN/Inf the step is re-run with
 * every node's outputs scanned in schedule order, and the error (OT_E_NUMERICS)
 * names the step and the first node that produced a non-finite value. Nothing has
 * been updated by then (the optimizer nodes had not run). */
#ifndef OT_TRAIN_H
#define OT_TRAIN_H

#include <signal.h>
#include <stdio.h>

#include "autodiff/autodiff.h"
#include "autodiff/autocast.h"
#include "autodiff/lora.h"
#include "importer/importer.h"
#include "train/data.h"
#include "train/optim.h"
#include "train/step_results.h"
#include "plan/planner.h"

/* Name of the dataset array that holds the labels / targets of the loss (bound to the
 * loss's new graph input whatever the loss builder named it). */
#define OT_DATA_LABELS "<labels>"

/* Dynamic loss scaling (train/train_scale.c), as torch.amp.GradScaler: the loss's
 * gradient seed is multiplied by `scale` so that small float16 gradients do not flush
 * to zero; the optimizer divides it out (exact for powers of two). A step whose
 * gradients hold an Inf or NaN (an overflow) is skipped and the scale multiplied by
 * backoff; after growth_interval clean steps in a row it is multiplied by growth.
 * DEFAULT: DYNAMIC under --precision fp16, OFF otherwise. Zero fields take
 * GradScaler's defaults (2^16, 2, 0.5, 2000). */
typedef enum { OT_LOSS_SCALE_DEFAULT = 0, OT_LOSS_SCALE_OFF, OT_LOSS_SCALE_DYNAMIC } ot_loss_scale_mode;
typedef struct ot_loss_scale_options {
    ot_loss_scale_mode mode;
    double init, growth, backoff;
    int64_t growth_interval;
} ot_loss_scale_options;

typedef struct ot_train_options {
    ot_loss_options loss;
    const char *const *freeze; /* name patterns (ir/name_pattern.h: globs, re:REGEX) over param names */
    int n_freeze;
    const char *const *train;
    int n_train;
    const char *const *bind;   /* "NAME=SIZE[,NAME=SIZE]" specs for other symbolic dims */
    int n_bind;
    ot_optim_config optim;
    int64_t batch_size; /* 0: the model's fixed batch, else min(32, samples) (grad, whole_batch: all samples) */
    bool whole_batch;   /* batch_size 0 means every sample also with the optimizer (verify) */
    /* The last partial batch of an epoch (N mod B samples) is dropped, as PyTorch's
     * DataLoader(drop_last=True). Off (the default, DataLoader's), it is kept where
     * that is exact (ot_train_partial_batch). */
    bool drop_last;
    int64_t accum;      /* micro-batches per optimizer step (>= 1) */
    /* The step in two calls (train_split.c: ot_train_backward, ot_train_optimizer_update):
     * gradients summed over backward calls in accumulators; accum must be 1. */
    bool split_update;
    int64_t steps;      /* optimizer steps; 0: derived from epochs */
    int64_t epochs;     /* used when steps is 0 (0 means 1) */
    uint64_t seed;      /* shuffling and Dropout masks */
    bool no_shuffle;
    int n_threads;      /* 0: OpenMP's default */
    const char *device; /* "cpu" (NULL = cpu) or "cuda[:N]" (kernels/backend_select.h) */
    bool tf32;          /* float32 GEMMs on TF32 tensor cores where the backend has them (ot_backend.tf32) */
    const char *remat;  /* remat policy text; NULL or "none" */
    int64_t memory_budget; /* bytes, for --remat auto and optimal; 0 = none */
    /* Bytes the step's placement aims at without being held to them (`plan` under a
     * fixed policy, which reports the peak rather than checking it): the plan is the one
     * `train --memory-budget` with that policy runs (ot_plan_options.fit_target_bytes,
     * less validation's arena). 0: memory_budget's, if any. */
    int64_t plan_target;
    double remat_time_limit; /* seconds the --remat optimal solver may take; 0 = its default */
    /* cross-entropy without the full logits (autodiff/linear_ce.c): off by default,
     * which keeps every bit of earlier releases; chunked_loss_rows 0 = the default chunk */
    ot_chunked_loss_mode chunked_loss;
    int64_t chunked_loss_rows;
    /* attention that keeps no probabilities (autodiff/fused_attn.c): off by default,
     * which keeps every bit of earlier releases */
    ot_fused_attn_mode fused_attention;
    /* Validation data will be given to ot_train_run: the validation plan is made when
     * the session is built, before remat, and the budget (memory_budget, or for
     * --remat auto on a GPU the free memory less a margin) must hold the training
     * step and it together. Without it validation still works, planned on first
     * use and outside the budget. */
    bool validation;
    bool no_numerics_check; /* skip the NaN/Inf checks (benchmarks) */
    /* Compute the global gradient norm of every step for ot_train_result.grad_norm
     * (--report-grad-norm) even where clipping does not need it: one more pass over the
     * gradients or their sums in the update (~3% of a step of small layers). Off, the
     * history holds NaN except under --clip-grad-norm. */
    bool record_grad_norm;
    /* --fuse-update: each param's optimizer update runs as soon as its gradient is
     * complete and every other read of the param is done, and the gradient's block is
     * freed there (ot_graph.fuse_update): the same bits as the update after the whole
     * backward pass, a lower peak. Each gradient is checked for NaN/Inf just before its
     * own update; a bad one stops the step with earlier params of the step already
     * updated (docs/training.md, "Fused updates"). Refused with clip_grad_norm, accum
     * above 1 and dist (OT_E_USAGE: each needs every gradient before any update). */
    bool fuse_update;
    /* Tests: keep a tied embedding's scatter gradient in its own buffer, summed with
     * the head's contribution (ot_autodiff_options.separate_scatter): the graph before
     * GatherGrad accumulated onto the head's, the same bits at a higher peak. */
    bool separate_scatter;
    /* --lora: adapters on the weights autodiff/lora.h picks, only they train
     * (train/lora_session.c); rank 0: none */
    ot_lora_options lora;
    /* --precision: mixed precision as a rewrite of the forward graph after LoRA and
     * before the loss (autodiff/autocast.h; the backend's kernels decide which nodes
     * run low). FP32: none. */
    ot_precision precision;
    ot_loss_scale_options loss_scale;
    /* Testing: which nodes have a low-precision kernel, asked instead of the
     * backend's op table (a plan_only session standing in for kernels not written
     * yet). NULL: the backend's. */
    ot_autocast_supports_fn precision_supports;
    void *precision_ctx;
    /* --lora-load DIR: the adapters start from a PEFT folder (train/lora_peft.c)
     * instead of A drawn and B zero; its r and alpha must equal lora's */
    const char *lora_load;
    /* Plan the step, run nothing (`plan`, --batch-size auto, the memory advice): the
     * same training graph and plan as a run, without an executor; data may be NULL
     * (the batch is then batch_size or the model's own). The model may have been
     * loaded without its weights (importer.h, skip_param_data). */
    bool plan_only;
    /* checkpoints (train/checkpoint.h): every checkpoint_every steps (0: never) into
     * checkpoint_dir, keeping the newest keep_checkpoints (0: 3). resume (with its path
     * for messages) is loaded before the first step and the run continues from its
     * step. stop, when set by a signal handler, ends the run after the current step
     * with a checkpoint in checkpoint_dir (result.interrupted). */
    const char *checkpoint_dir;
    int64_t checkpoint_every;
    int keep_checkpoints;
    const struct ot_checkpoint *resume;
    const char *resume_path;
    volatile sig_atomic_t *stop;
    /* By default the executor keeps the only copy of the params and running
     * statistics (ot_exec_options.release_host_data): from a successful
     * ot_train_session_new until ot_train_run succeeds, m->graph's param and state
     * values have no data (a failed session creation puts it back). true keeps the
     * host copies as well: results are the same, memory is not. */
    bool keep_host_weights;
    /* ot_train_run leaves the trained params and running statistics in the executor
     * instead of copying them back into m->graph (which then holds no data for them):
     * write the tuned model with ot_train_save_model, straight from the arena, before
     * ot_train_session_free. Saves a host copy of the weights at the end of a run. */
    bool stream_save;
    /* Testing: run the NaN checks and the gradient norm through the backend's
     * scan_f32 as on a GPU, even on the CPU (whose arena is otherwise read in place).
     * Results are bitwise the same; tests/test_device_scan.c compares them. */
    bool scan_on_device;
    /* A data-parallel run over MPI (train/dist.h, train/train_dist.h): the session
     * is this rank's share of it, built with ot_dist_train_options. NULL: one process. */
    struct ot_dist *dist;
} ot_train_options;

/* Fills o with the library's defaults: cross-entropy ignoring labels of -100, SGD lr
 * 0.01, accum 1, 1 epoch, seed 0, the last partial batch kept. (The CLI's optimizer
 * without --optimizer is AdamW at 3e-3: OT_OPTIM_DEFAULT_KIND, train/optim.h.) */
void ot_train_options_default(ot_train_options *o);

typedef struct ot_train_session ot_train_session;

/* The one session builder of every command that plans a step (train, grad, plan,
 * verify, and the probes of --batch-size auto): builds the training graph for `data`
 * (arrays named after graph inputs, "" for positional ones matched to the model's
 * inputs in order, OT_DATA_LABELS for the loss's labels/targets) on a bound copy of
 * m->graph (train/session.h), checks the data (dtypes, per-sample shapes, label
 * range) and creates the executor (o.plan_only: the plan only). with_optimizer
 * false: forward + backward only (`grad`, `verify`). m must outlive the session;
 * m->graph stays as imported, so several sessions (other batch sizes, policies) can
 * be built from one import, while its weights are lent to one session that runs:
 * ot_train_run gives the trained ones back, ot_train_session_free what it holds. */
ot_status ot_train_session_new(ot_model *m, const ot_train_options *o, ot_dataset *data, bool with_optimizer,
                               ot_train_session **out, ot_error *err);
void ot_train_session_free(ot_train_session *s);

/* Checks that another data set (validation) fits the session: same arrays, dtypes and
 * per-sample shapes, labels in range, at least one batch. Binds its value ids. */
ot_status ot_train_check_data(ot_train_session *s, ot_dataset *data, const char *what, ot_error *err);

int64_t ot_train_batch_size(const ot_train_session *s);
/* The last partial batch of an epoch of n_samples (N mod B samples). Returns its
 * sample count when it is kept: it then runs in the planned shapes of a full batch,
 * padded with copies of its first sample whose labels are the ignore index, so the
 * loss (a mean over the labels not ignored), the gradients and the plan are those of
 * the partial batch alone. Returns 0 when there is none or it is dropped; then
 * *dropped_why (may be NULL) says why, or is NULL where there is none. Padding is exact
 * for cross-entropy with an ignore index on a model that treats samples separately;
 * it is dropped with --drop-last, for mse and output losses, --ignore-index none and
 * models with BatchNormalization in training mode (the padding would enter the batch
 * statistics). */
int64_t ot_train_partial_batch(const ot_train_session *s, int64_t n_samples, const char **dropped_why);
/* Batches (micro-batches) in one epoch of n_samples, the partial one included when
 * kept. */
int64_t ot_train_batches_per_epoch(const ot_train_session *s, int64_t n_samples);
const ot_plan *ot_train_plan(const ot_train_session *s);
const ot_autodiff_result *ot_train_autodiff(const ot_train_session *s);
/* What --precision did to the forward graph (all zero with fp32); node ids are the
 * training graph's (ot_train_graph). */
const ot_autocast_result *ot_train_autocast(const ot_train_session *s);
/* When the params rule (ot_param_rule) kept float initializers constant, prints one
 * line to f: "training N params (M values); K float initializers kept constant: see
 * `onnxtrain info`"; before it, a note when a --freeze/--train pattern was read as a
 * regular expression the old way (autodiff.h, legacy_pattern); with --precision bf16 or
 * fp16, a line saying how many nodes run low on the device and how many low-list
 * nodes fall back to float32 for want of a kernel. Prints nothing otherwise, or
 * before the backward pass exists. */
void ot_train_print_constants_note(const ot_train_session *s, FILE *f);

/* What --remat did to the step, measured by the planner (applied false for none). */
typedef struct ot_train_remat_summary {
    bool applied;
    int64_t peak_none, peak;          /* planned peak bytes without remat and with it */
    int64_t kept_none, kept;          /* forward activation bytes kept for the backward */
    double extra_flops, step_flops;   /* recompute FLOPs, FLOPs of the plain step */
    int n_clones;
    /* auto without a budget (ot_remat_auto_modest): searched within modest_cap FLOPs, and
     * no_gain when no plan peaked below none's (then the plan is none's) */
    bool modest;
    bool no_gain;
    double modest_cap;
} ot_train_remat_summary;
const ot_train_remat_summary *ot_train_remat_info(const ot_train_session *s);
/* What --chunked-loss did: the fused head and loss, or why there is none. */
const ot_linear_ce_result *ot_train_chunked_loss(const ot_train_session *s);
/* What --fused-attention did: the attention blocks fused, or why there are none. */
const ot_fused_attn_result *ot_train_fused_attention(const ot_train_session *s);

/* What the memory budget had to hold. */
typedef struct ot_train_memory_summary {
    int64_t budget;          /* bytes; 0: no budget */
    bool budget_from_device; /* --remat auto on a GPU without --memory-budget: free memory less a margin */
    int64_t train_peak;      /* the training step's planned arena (optimizer state included) */
    int64_t val_peak;        /* the validation plan's arena; 0 when not planned yet */
    bool val_in_budget;      /* val_peak was part of what the budget had to hold (o.validation) */
} ot_train_memory_summary;
void ot_train_memory_info(const ot_train_session *s, ot_train_memory_summary *out);
ot_graph *ot_train_graph(ot_train_session *s);
/* The backend the session plans for (and runs on). */
ot_backend *ot_train_backend(const ot_train_session *s);
/* With o.keep_host_weights, once the executor holds its own copy of the weights: gives
 * the host copies back to m->graph, so that another session can be built from the
 * import while this one lives and runs (train/measure.c keeps several). Nothing
 * otherwise; the session then can no longer write the weights it was built with. */
void ot_train_return_weights(ot_train_session *s);
/* The training arena's high-water mark so far (bytes); 0 for a plan-only session. */
size_t ot_train_high_water(const ot_train_session *s);
/* The schedule step at which it was first reached (ot_executor_high_water_step); -1
 * for a plan-only session or when unknown. */
int ot_train_high_water_step(const ot_train_session *s);
/* The remat analysis of the training graph before the rewrite and the chosen keep
 * set (analysis->n_values entries); NULL with --remat none unless o.plan_only. */
const struct ot_remat_analysis *ot_train_remat_analysis(const ot_train_session *s, const bool **keep);
/* What the --remat optimal solve found (gap, rounds, model vs planner peak);
 * NULL for the other policies. */
const struct ot_remat_optimal_stats *ot_train_remat_optimal(const ot_train_session *s);
/* The arena bytes the training step's plan aims at (ot_plan_options.fit_target_bytes):
 * --memory-budget less validation's arena (auto's own budget on a GPU), 0 for none. */
int64_t ot_train_fit_target(const ot_train_session *s);
/* Seconds spent choosing the remat plan (auto: the search). */
double ot_train_remat_choose_seconds(const ot_train_session *s);
/* The optimizer configuration in use (total_steps filled in for cosine). */
const ot_optim_config *ot_train_optim(const ot_train_session *s);

/* ---- one forward + backward (`onnxtrain grad`) ---- */

/* Runs forward and backward on the first batch (samples 0..B-1, no shuffling).
 * *loss receives the loss; gradients stay in the session (ot_train_get_grad). */
ot_status ot_train_grad_once(ot_train_session *s, const ot_dataset *data, double *loss, ot_error *err);
/* A copy of the gradient of param i (0..n_params-1, autodiff order). */
ot_status ot_train_get_grad(ot_train_session *s, int i, ot_tensor **out, ot_error *err);
/* A copy of the update of state value i (0..n_state-1: BatchNorm running statistics)
 * the last run computed. */
ot_status ot_train_get_state_update(ot_train_session *s, int i, ot_tensor **out, ot_error *err);

/* A copy of value v of the training graph (a param, running statistic or optimizer
 * state) as the executor holds it now (the public API's parameter access). */
ot_status ot_train_get_value(ot_train_session *s, int v, ot_tensor **out, ot_error *err);
/* Overwrites value v (a param or running statistic) in the executor with nbytes of
 * host data (exactly its size); nothing else changes. */
ot_status ot_train_set_value(ot_train_session *s, int v, const void *data, size_t nbytes, ot_error *err);

/* `verify`: ot_train_grad_once and that run's results (train/step_results.h): the
 * loss, every gradient, every state update, the run's time and peaks. With the
 * optimizer nodes in the graph (so that the peaks are a training step's) their step
 * scalars say "do not apply": they change nothing, and the results are those of a
 * session without them. */
ot_status ot_train_step_results(ot_train_session *s, const ot_dataset *data, ot_step_results *r, ot_error *err);

/* `verify --fuse-update`: n_steps optimizer steps as ot_train_step_once runs them
 * (steps 0..n_steps-1), then the results to compare: "losses" (their sum, float64),
 * every param ("param:NAME") and every optimizer-state value ("state:NAME"). The
 * session must run the optimizer (train/train_fuse.c). */
ot_status ot_train_params_results(ot_train_session *s, const ot_dataset *data, int64_t n_steps, ot_step_results *r,
                                  ot_error *err);

/* One optimizer step as ot_train_run does it (o.accum micro-batches, the optimizer
 * applied, BatchNorm statistics updated), numbered `step` (0-based: the lr schedule,
 * the Dropout masks): micro-batch j takes samples j*B.. of data in file order,
 * wrapping around. For measuring a step's time (train/measure.h); *loss (may be NULL)
 * receives the mean loss. The session must have been built with the optimizer and not
 * plan_only; data must have passed its checks (the data it was built with). */
ot_status ot_train_step_once(ot_train_session *s, const ot_dataset *data, int64_t step, double *loss, ot_error *err);

/* ---- the step in two calls (split_update, train_split.c) ---- */

/* Forward and backward on data's samples (exactly B of them), the gradients added to
 * the session's sums (or copied there, the first call after ot_train_zero_grad); no
 * update. *loss (may be NULL) receives the loss. */
ot_status ot_train_backward(ot_train_session *s, const ot_dataset *data, double *loss, ot_error *err);
/* The next backward call starts the sums afresh (ONNX Runtime's lazy_reset_grad). */
void ot_train_zero_grad(ot_train_session *s);
/* The optimizer update from the sums, numbered `step` (0-based; Adam's bias
 * correction), at learning rate lr (no schedule, no clipping). */
ot_status ot_train_optimizer_update(ot_train_session *s, int64_t step, double lr, ot_error *err);

/* ---- the training loop ---- */

typedef struct ot_train_epoch_stats {
    int64_t epoch;      /* 0-based */
    int64_t step;       /* optimizer steps done when it ended */
    double val_loss;    /* mean over the validation batches; NaN without validation */
    double val_accuracy; /* cross-entropy only; NaN otherwise */
    double val_perplexity; /* exp(val_loss) for cross-entropy over a sequence (train/metrics.h); NaN otherwise */
    int64_t val_samples;
} ot_train_epoch_stats;

typedef struct ot_train_result {
    int64_t n_steps;       /* optimizer steps done */
    int64_t batch_size, accum, samples_per_epoch;
    double *loss;          /* per step: mean loss of its micro-batches */
    double *lr;            /* per step */
    double *step_seconds;  /* per step: wall time of its micro-batches */
    double *grad_norm;     /* per step: global L2 norm before clipping (NaN when not computed) */
    int64_t n_epochs;
    ot_train_epoch_stats *epochs;
    double total_seconds;
    size_t planned_peak, measured_peak; /* the training step's arena */
    size_t val_planned_peak, val_measured_peak; /* the validation arena (no params or state); 0 without validation */
    /* The process's resident bytes during the steps (train/rss.h), 0 where Linux's
     * /proc readings or the reset of the peak are unavailable: the peak (VmHWM reset
     * just before the first step, read after the last), the resident bytes at that
     * reset (the params already in the arena, the binary, libraries, data), and at the
     * end the part backed by files (binary, shared libraries) and the anonymous rest
     * (arena, heap, thread stacks, BLAS and OpenMP buffers). */
    int64_t rss_steps_peak, rss_before_steps, rss_file, rss_anon;
    int64_t first_step;     /* 0, or the resumed checkpoint's step (loss[] before it is NaN) */
    bool interrupted;       /* o->stop was set: stopped early after writing a checkpoint */
    char last_checkpoint[4096]; /* path of the newest checkpoint written, "" if none */
    /* loss scaling (loss_scaling false without it): steps skipped for an overflow over
     * the whole run (a resumed run counts those before the checkpoint too), the scale
     * at the end */
    bool loss_scaling;
    int64_t skipped_steps;
    double loss_scale;
} ot_train_result;

void ot_train_result_free(ot_train_result *r);
/* The loss scaler's figures now (loss_scaling, skipped_steps, loss_scale; the rest of
 * r untouched), as ot_train_run leaves them in its result (train_scale.c). */
void ot_train_loss_scale_state(const ot_train_session *s, ot_train_result *r);

/* One optimizer step, as the observer sees it. */
typedef struct ot_train_step_info {
    int64_t step, total;     /* 1-based, of the run's total */
    int64_t epoch, n_epochs; /* 1-based epoch of the step's last micro-batch, of the epochs the run touches */
    double loss;             /* mean loss of its micro-batches */
    double lr;
    double samples_per_s;    /* samples consumed per second so far */
    /* loss scaling: whether this step was skipped (an overflow), the steps skipped so
     * far, the scale the next step uses; loss_scale 0 without loss scaling */
    bool skipped;
    int64_t skipped_total;
    double loss_scale;
} ot_train_step_info;

/* Whether the loss of a run hardly fell: the mean loss of the last fifth of its steps
 * (an epoch of a 5-epoch run; at least one step) is not 1% below that of the first
 * fifth, or is above it. *first and *last get the two means. false for a run of fewer
 * than 2 steps (a resumed run counts from its first step) or whose first fifth has
 * mean loss 0. */
bool ot_train_loss_flat(const ot_train_result *r, double *first, double *last);

/* Observer of the loop (progress display): called after every optimizer step and at
 * the end of every epoch (with the validation results). May be NULL. */
typedef struct ot_train_observer {
    void (*on_step)(void *user, const ot_train_step_info *info);
    void (*on_epoch)(void *user, const ot_train_epoch_stats *e);
    /* one line, no newline: something the run carried on past (a micro-batch whose
     * every label is the ignore index); may be NULL */
    void (*on_warning)(void *user, const char *msg);
    void *user;
} ot_train_observer;

/* ---- validation (inference mode) ---- */

/* Builds the validation graph and executor once (later calls do nothing): the forward
 * and loss nodes that the loss and the model output depend on, BatchNorm and Dropout
 * with training_mode 0 (running statistics, identity), no backward, no optimizer, no
 * state updates. Params, running statistics and constants are the training arena's,
 * read in place; its own arena (one batch's inputs, forward activations, workspace,
 * outputs) lives next to the training arena for the whole session and is counted in
 * the memory budget when o.validation was set. ot_train_session_new calls it with
 * o.validation, ot_train_run when given validation data. */
ot_status ot_train_validation_prepare(ot_train_session *s, ot_error *err);
/* The validation executor's plan; NULL before ot_train_validation_prepare. */
const ot_plan *ot_train_validation_plan(const ot_train_session *s);
/* Loss (mean over every full batch of val, in file order) and, for cross-entropy,
 * accuracy, with the params and running statistics the training arena holds now.
 * val must have passed ot_train_check_data. Prepares the executor if needed; allocates
 * nothing per batch. e->epoch and e->step are left to the caller. */
ot_status ot_train_validate(ot_train_session *s, const ot_dataset *val, ot_train_epoch_stats *e, ot_error *err);

/* Total optimizer steps the options ask for with this data. */
int64_t ot_train_total_steps(const ot_train_session *s, const ot_dataset *data);

/* Trains: o->steps optimizer steps (or o->epochs epochs), each of o->accum micro-
 * batches; validation (ot_train_validate) after every epoch and after the last step
 * when val is not NULL. On success the
 * trained params and running statistics are in m->graph (ready for ot_model_save),
 * unless o.stream_save: then they stay in the executor for ot_train_save_model.
 * r is filled also on failure (the steps done so far). */
ot_status ot_train_run(ot_train_session *s, const ot_dataset *data, const ot_dataset *val,
                       const ot_train_observer *obs, ot_train_result *r, ot_error *err);

/* Writes the tuned model (ot_model_save_ex) with the params and running statistics
 * the executor holds now, read from its arena in place (CPU) or through a staging
 * buffer (GPU): writing adds no copy of the weights. external_data: as
 * ot_export_options.external_data. */
ot_status ot_train_save_model(ot_train_session *s, const char *path, bool external_data, ot_error *err);

/* --lora-save: the adapters alone, as .npz (arrays "<W>.lora_A", "<W>.lora_B",
 * "lora_rank", "lora_alpha") or .onnx (the same tensors as initializers; rank,
 * alpha, scale and each W's layout as metadata), by the name's ending. In both,
 * A·B has W's shape: W' = W + (alpha/rank)·A·B for every adapted W (for W stored
 * [out, in] the pair written is (B^T, A^T) of the graph's adapters). */
ot_status ot_train_save_adapters(ot_train_session *s, const char *path, ot_error *err);

/* PEFT's adapter folder (train/lora_peft.c, docs/training.md "Adapters for PEFT"):
 * ot_train_save_adapters writes one (adapter_model.safetensors, adapter_config.json)
 * when path ends in '/' or is a folder (ot_lora_peft_is_dir). read_config reads r
 * and lora_alpha of DIR/adapter_config.json (for --lora-load without --lora):
 * OT_E_IO, OT_E_PARSE, OT_E_DATA (out of range) or OT_E_UNSUPPORTED (not LORA). */
bool ot_lora_peft_is_dir(const char *path);
/* Whether every adapted weight has a PEFT module name ("<module>.weight"); else
 * OT_E_UNSUPPORTED naming the first that has none. Writing checks it too; a caller
 * checks before training so that no run is lost to it. */
ot_status ot_train_lora_peft_check(const ot_train_session *s, ot_error *err);
ot_status ot_lora_peft_read_config(const char *dir, int64_t *rank, double *alpha, ot_error *err);

#endif
