/* executor.h — runs a graph on a backend: builds the schedule and the memory plan,
 * allocates exactly the planned arena (one arena_alloc, nothing else for tensors),
 * loads params/state/constants into their slots, feeds inputs, runs the nodes in
 * schedule order and reads results back. Values may instead be bound to memory it
 * does not own (ot_exec_options.bind), which it reads in place.
 *
 * Views: a node whose outputs the planner made aliases of its inputs (planner.h,
 * Views) runs no kernel, on every backend: its outputs already are those bytes. The
 * support check skips it, and ot_executor_value_ptr of a view is its address inside
 * its base (in the bound memory when the base is external).
 *
 * The executor reads g's bound shapes when it is created; rebinding dims afterwards
 * needs a new executor. g must outlive the executor and must not be edited meanwhile.
 *
 * RNG: each node's kernel gets ctx->rng_node = its int attribute "rng_node" when
 * present (DropoutGrad names its forward Dropout that way), else node->orig_node for
 * recompute clones, else its own id — so a recomputed or differentiated Dropout
 * regenerates the forward mask. */
#ifndef OT_EXECUTOR_H
#define OT_EXECUTOR_H

#include "ir.h"
#include "exec/backend.h"
#include "plan/planner.h"

typedef struct ot_executor ot_executor;

/* Where a phase of the schedule ends. Phases for hooks are forward, loss, backward and
 * optimizer: recompute clones run interleaved with the backward pass and count as
 * backward. `step` is the last step of the phase that ended; `end` is true after the
 * schedule's last step (then `next` equals `ended`). */
typedef struct ot_exec_boundary {
    int step;
    ot_phase ended, next;
    bool end;
} ot_exec_boundary;

/* Called when set after the last step of each phase (the step whose successor is of
 * another phase, and the schedule's last step): e.g. the training loop's checks
 * between the backward pass and the optimizer. A non-OK status stops the run with
 * that status. */
typedef ot_status (*ot_exec_phase_hook)(void *user, ot_executor *ex, const ot_exec_boundary *b, ot_error *err);
/* Called when set after every step of ot_executor_run (before at_phase_end where a
 * phase ends): e.g. the training loop's sums of squares of the gradients that step
 * wrote, while they are still in cache. A non-OK status stops the run. */
typedef ot_status (*ot_exec_step_hook)(void *user, ot_executor *ex, int step, ot_error *err);

/* A value that lives in memory the executor does not own (e.g. the training
 * executor's params, from ot_executor_value_ptr, read in place by a validation
 * executor on the same backend). */
typedef struct ot_exec_binding {
    int value_id;
    void *data;    /* device memory of the executor's backend; must outlive the executor */
    size_t nbytes; /* must equal the value's planned size */
} ot_exec_binding;

typedef struct ot_exec_options {
    int n_threads;   /* kernel threads; 0: the backend's default */
    uint64_t seed;   /* Philox key, with step and rng node */
    uint64_t step;   /* training step (change with ot_executor_set_step) */
    bool no_inplace; /* planner option: never reuse an input's block */
    ot_exec_phase_hook at_phase_end;
    ot_exec_step_hook after_step; /* may be NULL */
    void *hook_user;
    /* Values bound to external memory (copied at creation; may be NULL). The planner
     * gives them no arena space (planner.h, External), so the arena, the peak and
     * the high-water mark exclude them. Nothing loads them at creation, no node may
     * write them (OT_E_USAGE) and ot_executor_write/set_input refuse them: the
     * executor only reads them. */
    const ot_exec_binding *bind;
    int n_bind;
    /* Once a param or state value is loaded into the arena, free its host copy in g
     * (data NULL; dtype, shape and nbytes stay), so the weights are held once, by the
     * executor. ot_executor_sync_to_graph allocates and fills them again (for the
     * exporter). Meanwhile nothing may read those values' data in g, and no second
     * executor can be made on g (it would find params without data). Constants are
     * kept: shape inference and folding read them when dims are bound again. */
    bool release_host_data;
    /* The arena bytes the plan aims at (ot_plan_options.fit_target_bytes: a budget), 0
     * for none: the order is judged and the plan made with it, as remat's measure made
     * the plan it accepted (remat/remat.h, ot_remat_measurement.fit_target). */
    size_t fit_target_bytes;
} ot_exec_options;

/* opt may be NULL (defaults). Checks that the backend supports every node first and
 * reports ALL unsupported nodes in one OT_E_UNSUPPORTED message. */
ot_status ot_executor_new(ot_graph *g, ot_backend *be, const ot_exec_options *opt, ot_executor **out,
                          ot_error *err);
void ot_executor_free(ot_executor *ex);

/* Feeds a graph input. dtype and shape must equal the input's bound ones (OT_E_DATA
 * naming the input, expected vs got). */
ot_status ot_executor_set_input(ot_executor *ex, int value_id, const ot_tensor *t, ot_error *err);
ot_status ot_executor_set_input_by_name(ot_executor *ex, const char *name, const ot_tensor *t, ot_error *err);

/* Runs the whole schedule once, calling after_step after each step and at_phase_end
 * at each phase's end. Every graph input must have been set. */
ot_status ot_executor_run(ot_executor *ex, ot_error *err);
/* Runs steps first .. first+count-1 of the schedule (the plan's order) and waits for
 * them, without calling after_step or at_phase_end: for a caller that must look at values between
 * nodes (a transient output lives only until a later node reuses its block), e.g. the
 * re-run that names the first node to produce a NaN. Steps are not independent: a
 * step reads what earlier steps of this run wrote. Every graph input must be set. */
ot_status ot_executor_run_steps(ot_executor *ex, int first, int count, ot_error *err);

/* Copies a pinned value (input, output, param, gradient, state, optimizer state,
 * constant; external ones too) to a new host tensor (free with ot_tensor_free).
 * Transient values are refused: their blocks are reused during the run. */
ot_status ot_executor_get(ot_executor *ex, int value_id, ot_tensor **copy_out, ot_error *err);
/* Overwrites a pinned value from host memory (nbytes must equal its size); external
 * values are refused (they belong to their owner). */
ot_status ot_executor_write(ot_executor *ex, int value_id, const void *host, size_t nbytes, ot_error *err);
/* Copies pinned value src into pinned value dst (same byte size), e.g. updated
 * BatchNorm running stats back into the state. */
ot_status ot_executor_copy_value(ot_executor *ex, int dst_value, int src_value, ot_error *err);
/* Copies every param and state value back into g->values[].data (for the exporter),
 * allocating the host copies that release_host_data freed. */
ot_status ot_executor_sync_to_graph(ot_executor *ex, ot_error *err);

/* Device pointer of a placed or external value, or of a view inside its base (NULL
 * when not placed); for the optimizer and backends. On the CPU it is a host pointer. */
void *ot_executor_value_ptr(ot_executor *ex, int value_id);
/* Device range of a pinned slab (params, gradients, optimizer state, ...). */
void *ot_executor_slab(ot_executor *ex, ot_mem_category c, size_t *nbytes);

void ot_executor_set_step(ot_executor *ex, uint64_t step);
void ot_executor_set_seed(ot_executor *ex, uint64_t seed);

const ot_plan *ot_executor_plan(const ot_executor *ex);
const ot_graph *ot_executor_graph(const ot_executor *ex);
ot_backend *ot_executor_backend(const ot_executor *ex);
/* Measured high-water mark: the highest arena end offset actually touched by a copy
 * or by a tensor/workspace handed to a kernel so far. After a full run it must equal
 * ot_plan_peak_bytes(). */
size_t ot_executor_high_water(const ot_executor *ex);
/* The schedule step whose workspace or tensors first reached that mark (as the plan's
 * peak_step is the step whose blocks first reach its peak); -1 before any step or when
 * the mark was set by a copy outside one. Recorded with the mark, in the first run only. */
int ot_executor_high_water_step(const ot_executor *ex);
/* Arena bytes [p, p + n) that the caller writes outside any kernel or copy of the
 * executor after schedule step `step` (the receive slots of a gradient's sum over
 * MPI ranks, planner.h): counted in the high-water mark as that step's. */
void ot_executor_note_write(ot_executor *ex, int step, const void *p, size_t n);

/* What the optimizer kernels of the last ot_executor_run reported about the values
 * they updated (exec/kernel_ctx.h), reset at the start of every run. */
const ot_update_check *ot_executor_update_check(const ot_executor *ex);

/* per_step[s] (n_steps doubles, the caller's; NULL: none) is where the optimizer
 * kernel of schedule step s may store its gradient's sum of squares during a run
 * (exec/kernel_ctx.h, grad_ss; a kernel that updates a run of steps fills their
 * consecutive slots). Slots no kernel fills are left as they are. */
void ot_executor_set_grad_ss(ot_executor *ex, double *per_step);

#endif
