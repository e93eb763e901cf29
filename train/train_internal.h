/* train_internal.h — the training session's private state, shared by session.c
 * (building the training graph), train.c (the plan or executor and host buffers),
 * train_loop.c (the hooks at phase ends, running
 * micro-batches and the loop) and train_validate.c (validation in inference mode on a
 * forward-only copy of the graph). Not for use outside train/session.c and
 * train/train*.c. */
#ifndef OT_TRAIN_INTERNAL_H
#define OT_TRAIN_INTERNAL_H

#include "autodiff/lora.h"
#include "exec/executor.h"
#include "remat/remat.h"
#include "train/train.h"

/* What a run is for: the hook acts differently at the boundary. */
enum { MODE_TRAIN = 0, MODE_GRAD };

struct ot_train_session {
    ot_model *m;     /* as imported: m->graph stays unbound, its weights lent to g */
    ot_graph *g;     /* the bound training graph, a copy of m->graph (train/session.h) */
    ot_train_options o;
    bool with_opt;
    int64_t B;
    char kv_note[512]; /* the KV-cache defaults the data took (train/kv_cache.h), "" when none */
    int n_model_inputs;
    int label_value; /* loss's labels/targets input, -1 for --loss output */
    int loss_value;
    int out_value;   /* model output feeding the loss */
    int64_t n_classes;
    int class_axis;  /* resolved, cross-entropy only */
    ot_autodiff_result ad;
    bool ad_built;
    ot_train_remat_summary remat; /* what apply_remat did */
    ot_linear_ce_result lce;      /* what --chunked-loss did (autodiff/linear_ce.c) */
    ot_fused_attn_result fattn;   /* what --fused-attention did (autodiff/fused_attn.c) */
    /* the remat policy, the analysis of the graph before the rewrite and the chosen
     * keep set (an.n_values entries), kept for `plan`'s report */
    ot_remat_policy pol;
    bool pol_parsed, an_built;
    ot_remat_analysis an;
    bool *keep;
    double choose_seconds;
    ot_remat_optimal_stats ostats; /* --remat optimal: the solve's figures */
    bool have_ostats;
    ot_plan *plan;   /* o.plan_only: the step's plan, made without an executor */
    ot_optim_graph og;
    ot_backend *be;
    ot_executor *ex;
    int boundary;    /* schedule step after which only optimizer nodes run (fused: the last
                        forward or loss step, after which backward and optimizer nodes mix) */
    int n_opt_steps; /* optimizer nodes in the schedule */
    /* --fuse-update (train_loop.c): per param, the schedule step after which its
     * gradient is checked (the last step before its update that is not an optimizer
     * node, so a run of updates, exec/executor.c, starts after it), and the sum of
     * squares taken there; built on first use. fused_partial: a check failed after
     * some params of that step were updated, so the session's weights are no step's. */
    int *fuse_check_at;
    double *fuse_ss;
    /* per schedule step, the param an optimizer node there updates (-1: none); over
     * MPI ranks (train_dist.h) its gradient's sum is waited for before its run of
     * updates, and fuse_check_at is where the gradient is complete, its sum starting */
    int *fuse_param_at;
    bool fused_partial;
    /* one host batch per data array, [B, ...] */
    ot_tensor **batch;
    int *batch_value; /* graph input each batch feeds (training data's array order) */
    int n_batch;
    /* hook state */
    int mode;
    int64_t micro, opt_step;
    double lr;
    size_t *grad_off; /* params[i]'s gradient has grad_off[i+1] - grad_off[i] elements */
    size_t grad_elems;
    /* --accum above 1: per param, the float32 value (kind optimizer state, pinned in
     * the arena) its micro-batch gradients are summed into (ot_train_loop_prepare);
     * NULL otherwise. No gradient has a host copy. */
    int *accum_ids;
    /* split_update (train_split.c): backward calls run so far; whether the
     * accumulators hold a sum (false: the next call copies instead of adding) */
    int64_t split_calls;
    bool split_have_grads;
    /* Float32 checks and norms go through the backend's scan_f32 where the values lie
     * (a GPU, or the CPU when ot_train_options.scan_on_device asks); otherwise the
     * host-memory arena is read in place. */
    bool scan_on_device;
    double last_norm, last_loss;
    /* Gradient sums of squares taken by ot_train_after_step right after the step that
     * writes each gradient, while it is in cache (train_loop.c): hot_step[k] ..
     * hot_step[k + 1] index hot_grads, the gradients step k writes; hot_has[i]: whether
     * gradient i is summed there (else at the boundary); hot_ss[i]: its sum in this
     * run. Built on first use; NULL before. */
    int *hot_step, *hot_grads;
    bool *hot_has;
    double *hot_ss;
    /* The check without a read (train_loop.c, gemm_proves_finite): per param, the
     * Gemm / MatMul node that writes its gradient from two inputs (-1: none) and
     * whether this run proved the gradient finite from them; per param, the schedule
     * step of its optimizer node (-1: none); per schedule step, the gradient sum its
     * optimizer kernel took during the update (ot_executor_set_grad_ss). With a
     * gradient proved, the step's norm is added up after the update (norm_pending). */
    int *hot_gemm, *opt_at;
    bool *hot_proven;
    double *opt_ss;
    bool norm_pending;
    bool nonfinite;
    void *scan_buf;
    size_t scan_cap;
    int64_t run_step; /* optimizer step number for messages (1-based) */
    const ot_dataset *cur_data; /* batch being run, for messages */
    const int64_t *cur_idx;
    /* validation (train_validate.c): the forward and loss nodes copied into their own
     * graph with BatchNorm and Dropout in inference mode, and its own executor (value
     * ids equal the training graph's). The graph and its plan's peak are made before
     * remat when o.validation is set (so the budget covers them), else on first use;
     * the executor once the training executor exists. */
    ot_graph *val_g;
    ot_executor *val_ex;
    int *val_shared;    /* values it reads in place from the training arena (params, state, constants) */
    int n_val_shared;
    int64_t val_peak;   /* its planned arena: activations, workspace, inputs and outputs */
    ot_tensor *val_out; /* host copy of the loss's model output, cross-entropy only */
    /* --lora (train/lora_session.c): the adapters in g, and the --train patterns
     * with OT_LORA_TRAIN_PATTERN appended (o.n_train + 1 entries) */
    ot_lora_result lora;
    ot_autocast_result ac; /* --precision (autodiff/autocast.h) */
    /* a model exported in float16 or bfloat16 (train/lowp_model.c): its dtype
     * (OT_F32: none), and what the rewrite said */
    ot_dtype lowp;
    char lowp_note[512];
    const char **lora_train;
    /* what the memory budget covered (ot_train_memory_info) */
    int64_t budget;
    bool budget_from_device;
    bool val_in_budget;
    /* the arena bytes the step's plan aims at (ot_plan_options.fit_target_bytes): the
     * budget less validation's arena, auto's own budget on a GPU; 0 without one. Remat's
     * measurements, the budget check, `plan` and the executor all plan with it, so the
     * plan a search accepted is the plan that runs. */
    int64_t fit_target;
    /* fp16 loss scaling (train_scale.c): the float64[3] state value (-1: none), the
     * scale, growth and backoff factors, clean steps needed, clean steps in a row,
     * steps skipped, and whether this step's gradients overflowed */
    int ls_state;
    double ls_scale, ls_growth, ls_backoff;
    int64_t ls_interval, ls_clean, ls_skipped;
    bool ls_overflow;
    /* a data-parallel run's buffers (train_dist.c), made at its first micro-batch */
    struct ot_train_dist *dist;
};

#include "train/lowp_model.h" /* fp16/bf16-exported models: float32 master weights */

static inline const char *vname(const ot_graph *g, int v) {
    return v >= 0 && g->values[v].name ? g->values[v].name : "?";
}

/* Builds the training graph on s->g (train/session.c): binds the dims, maps and
 * checks the data (may be NULL or empty with o.plan_only), appends the loss, the
 * backward pass, the remat rewrite and the optimizer nodes, plans validation with
 * o.validation, checks the budget. */
ot_status ot_train_build_graph(ot_train_session *s, ot_dataset *data, ot_error *err);
/* --remat on the training graph, every candidate measured with the optimizer
 * nodes planned (train/session.c). */
ot_status ot_train_apply_remat(ot_train_session *s, ot_error *err);
/* Per-sample dtype and shape of every mapped array against its bound graph input,
 * label range, at least one batch (train.c). */
ot_status ot_train_check_arrays(ot_train_session *s, ot_dataset *d, ot_error *err);

/* --lora (train/lora_session.c): rewrites g with the adapters (after the dims are
 * bound, before the loss), draws A from o.seed, sets lora_train. Nothing without
 * o.lora.rank. */
ot_status ot_train_lora_prepare(ot_train_session *s, ot_error *err);
/* h extended with the LoRA settings (unchanged without LoRA), for checkpoints. */
uint64_t ot_train_lora_fingerprint(const ot_train_session *s, uint64_t h);
/* The merged model (each adapted W as W + s·A·B) from the arena (lora_session.c). */
/* PEFT's folder format (lora_peft.c): write the adapters; fill g's A and B from one. */
ot_status ot_train_lora_save_peft(ot_train_session *s, const char *dir, ot_error *err);
ot_status ot_train_lora_load_peft(ot_train_session *s, const char *dir, ot_error *err);
ot_status ot_train_lora_save_merged(ot_train_session *s, const char *path, bool external_data, ot_error *err);
/* A value's bytes for the exporter (train.c): in place where the arena is host
 * memory (or the graph's host copy), else NULL; and the copy through the backend. */
const void *ot_train_arena_host_ptr(void *user, int v);
ot_status ot_train_arena_read(void *user, int v, uint64_t offset, void *dst, size_t n, ot_error *err);

/* Once the optimizer nodes are in the graph and before the executor is made
 * (train_loop.c): decides how the loop reads values (scan_on_device; a backend whose
 * memory is not the host's must have scan_f32) and, with --accum above 1 and an
 * optimizer, adds the gradient accumulators to the graph (accum_ids). */
ot_status ot_train_loop_prepare(ot_train_session *s, ot_error *err);
/* Around ot_train_run's steps (rss.c): _begin resets the process's peak RSS and notes
 * the resident bytes, _end reads the peak and the split into r's rss_* fields (all 0
 * when a reading failed, so that no lifetime peak passes for the steps'). */
void ot_train_rss_begin(ot_train_result *r);
void ot_train_rss_end(ot_train_result *r);
/* Adds to g one float32 accumulator per param gradient of s (kind optimizer state,
 * named after the param), ids in ids[0..n_params) (train_loop.c): what
 * ot_train_loop_prepare adds for --accum, and what remat's measure adds to a
 * candidate so that its plan is the step's. */
ot_status ot_train_add_accumulators(const ot_train_session *s, ot_graph *g, int *ids, ot_error *err);

/* Pieces of the loop (train_loop.c) the two-call step (train_split.c) runs: the
 * step scalars, the check of one optimizer node's update, feeding samples idx[0..n)
 * of d, and one executor run with the numerics diagnosis. */
ot_status ot_train_write_scalars(ot_train_session *s, double lr, double scale, bool apply, ot_error *err);
ot_status ot_train_check_update(ot_train_session *s, int step, const ot_node *node, ot_error *err);
ot_status ot_train_feed(ot_train_session *s, const ot_dataset *d, const int64_t *idx, int64_t n, ot_error *err);
ot_status ot_train_run_once(ot_train_session *s, int mode, uint64_t rng_step, ot_error *err);
/* The boundary of a split_update run: gradients into the accumulators, no update. */
ot_status ot_train_split_boundary(ot_train_session *s, ot_error *err);

/* The executor's phase-end hook (train_loop.c): the boundary work after the last
 * step before the optimizer (or the schedule's end without one), the check of the
 * updated params after the optimizer. */
ot_status ot_train_hook(void *user, ot_executor *ex, const ot_exec_boundary *b, ot_error *err);
/* The executor's after-step hook (train_loop.c): the sums of squares of the gradients
 * the step just wrote, where the boundary will use them. */
ot_status ot_train_after_step(void *user, ot_executor *ex, int step, ot_error *err);

/* Gradient i's first non-finite index (bad, may be NULL) and sum of squares (ss, may
 * be NULL), read where it lies (train_loop.c). */
ot_status ot_train_grad_scan(ot_train_session *s, int i, int64_t *bad, double *ss, ot_error *err);
/* --fuse-update (train_fuse.c): the after-step hook (each gradient checked before its
 * own update), and at the run's end the norm from the sums taken there. */
ot_status ot_train_fused_after_step(ot_train_session *s, int step, ot_error *err);
void ot_train_fused_norm(ot_train_session *s);

/* fp16 loss scaling (train_scale.c): the options checked against the session's
 * (refused with --fuse-update, the two-call step and MPI); whether this session
 * scales (train sessions only); the state value added once autodiff made the seed's
 * multiplier; the multiplier written before a run; GradScaler's update after a step;
 * the state read back after a checkpoint's restore. */
ot_status ot_train_scale_check(const ot_train_session *s, ot_error *err);
bool ot_train_scale_wanted(const ot_train_session *s);
ot_status ot_train_scale_prepare(ot_train_session *s, ot_error *err);
ot_status ot_train_scale_write(ot_train_session *s, ot_error *err);
ot_status ot_train_scale_update(ot_train_session *s, ot_error *err);
ot_status ot_train_scale_restored(ot_train_session *s, const char *path, ot_error *err);

/* Builds the validation graph and plans it without allocating (once): sets val_g,
 * val_shared and val_peak. Needs the loss and backward built and the dims bound;
 * the training executor need not exist (train_validate.c). */
ot_status ot_train_validation_plan_ahead(ot_train_session *s, ot_error *err);
/* Frees what ot_train_validation_plan_ahead / _prepare built (train_validate.c). */
void ot_train_validation_free(ot_train_session *s);

#endif
