/* ref_eval.h — a test-only reference evaluator: runs a graph with static shapes
 * node by node in topological order through ot_cpu_run_node, one malloc per value.
 * Leaves (params, constants, state) are read from the graph's value data at every
 * run, so a test can perturb g->values[v].data and run again; graph inputs are fed
 * with ot_ref_feed. Not the executor: no planning, no arena. */
#ifndef OT_REF_EVAL_H
#define OT_REF_EVAL_H

#include "ir.h"

typedef struct ot_ref_env {
    const ot_graph *g;
    ot_tensor *vals; /* per value id; data NULL until computed or fed */
    bool *fed;
    uint64_t seed, step;
    int n_threads;
} ot_ref_env;

ot_ref_env *ot_ref_new(const ot_graph *g);
void ot_ref_free(ot_ref_env *e);
/* Copies nbytes of data as the value of graph input v (shape from the graph). */
ot_status ot_ref_feed(ot_ref_env *e, int v, const void *data, size_t nbytes, ot_error *err);
/* Runs every live node (or, with forward_only, those not in the backward phase).
 * The executor's contract for ctx->rng_node is followed (see autodiff.h). */
ot_status ot_ref_run(ot_ref_env *e, bool forward_only, ot_error *err);
/* The computed (or fed / leaf) float32 data of value v, NULL when absent. */
const float *ot_ref_f32(const ot_ref_env *e, int v);

#endif
