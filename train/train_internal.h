/* train_internal.h — the training session's private state, shared by session.c
 * (building the training graph), train.c (the plan or executor and host buffers),
 * train_loop.c (the hook at the backward/optimizer boundary, running
 * micro-batches and the loop) and train_validate.c (validation in inference mode on a
 * forward-only copy of the graph). Not for use outside train/session.c and
 * train/train*.c. */
#ifndef OT_TRAIN_INTERNAL_H
#define OT_TRAIN_INTERNAL_H

#include "exec/executor.h"
#include "remat/remat.h"
#include "train/train.h"

/* What a run is for: the hook acts differently at the boundary. */
enum { MODE_TRAIN = 0, MODE_GRAD, MODE_SCAN };

struct ot_train_session {
    ot_model *m;     /* as imported: m->graph stays unbound, its weights lent to g */
    ot_graph *g;     /* the bound training graph, a copy of m->graph (train/session.h) */
    ot_train_options o;
    bool with_opt;
    int64_t B;
    int n_model_inputs;
    int label_value; /* loss's labels/targets input, -1 for --loss output */
    int loss_value;
    int out_value;   /* model output feeding the loss */
    int64_t n_classes;
    int class_axis;  /* resolved, cross-entropy only */
    ot_autodiff_result ad;
    bool ad_built;
    ot_train_remat_summary remat; /* what apply_remat did */
    /* the remat policy, the analysis of the graph before the rewrite and the chosen
     * keep set (an.n_values entries), kept for `plan`'s report */
    ot_remat_policy pol;
    bool pol_parsed, an_built;
    ot_remat_analysis an;
    bool *keep;
    double choose_seconds;
    ot_plan *plan;   /* o.plan_only: the step's plan, made without an executor */
    ot_optim_graph og;
    ot_backend *be;
    ot_executor *ex;
    int boundary;    /* schedule step after which only optimizer nodes run */
    /* one host batch per data array, [B, ...] */
    ot_tensor **batch;
    int *batch_value; /* graph input each batch feeds (training data's array order) */
    int n_batch;
    /* hook state */
    int mode;
    int64_t micro, opt_step;
    double lr;
    size_t *grad_off; /* element offset of params[i]'s gradient in grad_host */
    size_t grad_elems;
    float *grad_host, *acc_host;
    /* Per param, its gradient as host floats at the boundary (read_grads): the arena
     * itself when grads_in_place (a host-memory backend and every gradient float32),
     * else params[i]'s slice of grad_host, a copy. */
    float **grad_ptr;
    bool grads_in_place;
    /* The backend scans gradients, params and optimizer state where they lie
     * (ot_backend.scan_f32): a GPU without a host copy each step. Accumulation over
     * micro-batches still goes through grad_host. */
    bool scan_on_device;
    double last_norm, last_loss;
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
    /* what the memory budget covered (ot_train_memory_info) */
    int64_t budget;
    bool budget_from_device;
    bool val_in_budget;
};

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

/* Allocates the host gradient buffers (grad_host, and acc_host with accum > 1) when
 * they are not there: ot_train_run frees them once the last step is done, before the
 * weights are copied back to the graph, so the two are never held together. */
ot_status ot_train_host_grads(ot_train_session *s, ot_error *err);

/* The executor's after-node hook (train_loop.c): scans outputs in MODE_SCAN and does
 * the boundary work after the last non-optimizer step. */
ot_status ot_train_hook(void *user, ot_executor *ex, int step, const ot_node *node, const ot_tensor *out,
                        ot_error *err);

/* Builds the validation graph and plans it without allocating (once): sets val_g,
 * val_shared and val_peak. Needs the loss and backward built and the dims bound;
 * the training executor need not exist (train_validate.c). */
ot_status ot_train_validation_plan_ahead(ot_train_session *s, ot_error *err);
/* Frees what ot_train_validation_plan_ahead / _prepare built (train_validate.c). */
void ot_train_validation_free(ot_train_session *s);

#endif
