/* remat.h — rematerialization (activation checkpointing): which forward values the
 * backward pass keeps and which it recomputes, and the rewrite that makes it so.
 *
 * Pipeline, all on one training graph (forward + loss + backward, from autodiff):
 *   ot_remat_analyze   forward order, values saved for backward, articulation points
 *                      (segment boundaries), FLOP cost per node (remat/cost.c)
 *   ot_remat_policy_*  parse a policy and turn it into a KEEP set (remat/policies.c)
 *   ot_remat_auto      least-recompute-cost keep set whose planned peak fits a
 *                      budget; every candidate is measured by a ot_remat_measure_fn,
 *                      which in the product is the planner (remat/auto.c)
 *   ot_remat_apply     clones the producer chain of every saved value that is not
 *                      kept (phase OT_PHASE_RECOMPUTE, orig_node = the copied node)
 *                      and rewires the backward consumers to the clones; undoable so
 *                      auto can try many plans on one graph (remat/rewrite.c)
 *
 * Placement of the clones (just before their first backward use) is the schedule's
 * rule (plan/schedule.h); freeing originals after their last forward use is the
 * planner's lifetimes. Remat never changes results: the executor keys Dropout of a
 * clone on orig_node, and a BatchNormalization clone has no running-stat outputs.
 *
 * A KEEP set is a bool per value id (sized for the graph as analysed). A value that
 * the backward pass reads and that is not kept is recomputed from kept values,
 * params, inputs and constants. Values that are not forward activations (params,
 * inputs, loss outputs, gradients) are always available and never recomputed.
 */
#ifndef OT_REMAT_H
#define OT_REMAT_H

#include "ir.h"

/* ---- cost model (remat/cost.c) -------------------------------------------- */

/* FLOPs of one node from its op and the static shapes of its values (multiply-add
 * = 2). Views are free, data movement costs one per element. 0 when shapes are
 * not static. */
double ot_remat_node_flops(const ot_graph *g, const ot_node *n);
/* True when op has an entry in the cost table (remat/cost.c): every op does. */
bool ot_cost_has_rule(ot_op op);
/* FLOPs of one training step: every live node except recompute clones. */
double ot_remat_step_flops(const ot_graph *g);
/* Bytes of a value with a static shape, 0 otherwise. */
int64_t ot_remat_value_bytes(const ot_graph *g, int value);

/* ---- analysis (remat/segments.c) ------------------------------------------ */

typedef struct ot_remat_analysis {
    int n_values;   /* graph->n_values when analysed; keep sets have this size */
    int n_nodes;
    int n_fwd;      /* forward-phase nodes, in schedule order */
    int *fwd;
    int *fwd_pos;   /* per node id: position in fwd, -1 for other nodes */
    bool *candidate; /* per value: forward activation that may be recomputed */
    bool *saved;    /* per value: candidate read by a backward node */
    bool *pinned;   /* per value: kept by every policy but manual (read by the loss) */
    bool *is_static; /* per value: depends on params/constants only, not on data */
    int n_art;      /* articulation values (cut points of the forward graph), in order */
    int *art;
    int *segment;   /* per value: segment index (0..n_art), -1 for non-candidates */
    double *node_flops; /* per node id */
    bool *bwd_node; /* per node id: a BACKWARD-phase node (the rewrite asks it of each reader
                     * of a recomputed value: the nodes are a cache miss each on a big graph) */
    double step_flops;
    int64_t saved_bytes; /* sum of bytes of saved values */
} ot_remat_analysis;

/* Analyses a training graph (it must have forward and backward nodes). */
ot_status ot_remat_analyze(const ot_graph *g, ot_remat_analysis *a, ot_error *err);
void ot_remat_analysis_free(ot_remat_analysis *a);

/* ---- policies (remat/policies.c) ------------------------------------------ */

typedef enum ot_remat_kind {
    OT_REMAT_NONE = 0,
    OT_REMAT_ALL,       /* keep only segment inputs: the least planned peak (see
                         * ot_remat_least_memory); ot_remat_policy_keep alone keeps
                         * every articulation value, the finest segmentation */
    OT_REMAT_SQRT,      /* Chen et al.: segments of about sqrt(saved bytes * mean size) */
    OT_REMAT_EVERY,     /* keep every K-th articulation value that the backward
                         * reads (every K-th layer / residual block) */
    OT_REMAT_SELECTIVE, /* recompute pointwise / norm / view / layout / dropout outputs */
    OT_REMAT_MANUAL,    /* keep exactly the values whose names match the globs */
    OT_REMAT_AUTO,      /* least cost under budget_bytes; without a budget the least peak at
                         * modest recompute, never above none's (ot_remat_auto_modest) */
    OT_REMAT_OPTIMAL,   /* least cost under budget_bytes, solved as a MIP (remat/optimal.c) */
} ot_remat_kind;

typedef struct ot_remat_policy {
    ot_remat_kind kind;
    int every_k;          /* OT_REMAT_EVERY */
    char **globs;         /* OT_REMAT_MANUAL: fnmatch patterns */
    int n_globs;
    int64_t budget_bytes; /* OT_REMAT_AUTO, OT_REMAT_OPTIMAL: 0 = no budget */
    double time_limit_s;  /* OT_REMAT_OPTIMAL: the solver's limit; 0 = the default (60 s) */
} ot_remat_policy;

/* Parses "none" | "all" | "sqrt" | "every:K" | "selective" | "manual:N1,N2" | "auto" | "optimal".
 * OT_E_USAGE naming the text otherwise. Free with ot_remat_policy_free. */
ot_status ot_remat_policy_parse(const char *text, ot_remat_policy *p, ot_error *err);
void ot_remat_policy_free(ot_remat_policy *p);
/* Writes a policy back as text ("every:4"). */
const char *ot_remat_policy_str(const ot_remat_policy *p, char *buf, size_t n);
/* Parses a size: "512M", "2G", "1.5GiB", "4096" (bytes); K/M/G/T are powers of 1024. */
ot_status ot_parse_size(const char *text, int64_t *bytes, ot_error *err);

/* Fills keep[a->n_values] for every policy but auto and optimal (chosen by measuring). A manual glob that
 * matches no candidate is OT_E_USAGE naming it. */
ot_status ot_remat_policy_keep(const ot_graph *g, const ot_remat_analysis *a, const ot_remat_policy *p,
                               bool *keep, ot_error *err);
/* Recompute cost (FLOPs of the nodes that would be cloned) and the number of
 * cloned nodes of a keep set, without rewriting anything. */
double ot_remat_keep_cost(const ot_graph *g, const ot_remat_analysis *a, const bool *keep, int *n_clones);
/* Bytes of forward activations a keep set holds across the forward/backward boundary:
 * saved values kept, and kept values that clones read. */
int64_t ot_remat_kept_bytes(const ot_graph *g, const ot_remat_analysis *a, const bool *keep);

/* ---- the rewrite (remat/rewrite.c) ---------------------------------------- */

/* What ot_remat_apply did, so that it can be reported and undone. */
typedef struct ot_remat_rewrite {
    int n_nodes0, n_values0; /* graph sizes before the rewrite */
    int n_rewired;
    int *rw_node, *rw_slot, *rw_old; /* backward input slots that now read a clone */
    int n_clones;
    double extra_flops;      /* FLOPs of the clones */
    int64_t kept_bytes;      /* forward activations read after the forward pass */
    int *clone_of;           /* per value id: its clone (value id) or -1; n_values0 entries */
    struct ot_remat_rewrite_buf *buf; /* the search's arrays (remat/auto_search.h), not freed with rw; or NULL */
} ot_remat_rewrite;

/* Rewrites g so that every saved value not in keep is recomputed. keep has
 * a->n_values entries (g must not have changed since ot_remat_analyze). */
ot_status ot_remat_apply(ot_graph *g, const ot_remat_analysis *a, const bool *keep, ot_remat_rewrite *rw,
                         ot_error *err);
/* Removes the clones and restores the backward inputs: g is as before the apply
 * (same node and value counts). rw is freed. */
void ot_remat_undo(ot_graph *g, ot_remat_rewrite *rw);
void ot_remat_rewrite_free(ot_remat_rewrite *rw);

/* ---- memory measurement and auto (remat/auto.c) --------------------------- */

/* What a memory measure reports for a (rewritten) training graph: the exact planned
 * peak, and how many schedule steps run at the highest bytes-in-use (the search's
 * tie-break: fewer steps at the top means a cheaper way down). */
typedef struct ot_remat_measurement {
    int64_t peak;
    int64_t n_top;
    /* Asked for by setting want_timeline (optimal's memory model starts from it): the
     * schedule (node id per step) and bytes in use per step, malloc'd, the caller
     * frees them. A measure that cannot leaves them NULL. */
    bool want_timeline;
    int n_steps;
    int *order;
    size_t *timeline;
    size_t pinned_padding; /* with the timeline: the plan's (planner.h, Padding); 0 when unknown */
    /* Asked for by setting want_plan without a scratch (optimal's holes read where best
     * fit placed every block): the plan itself, the caller frees it (ot_plan_free). A
     * measure that cannot leaves it NULL. */
    bool want_plan;
    struct ot_plan *plan;
    /* Given by a caller that measures many plans of one graph (auto), NULL otherwise:
     * memory the planner's measure reuses from one call to the next (plan/scratch.h),
     * so that no measurement after the first faults pages in. A measure that wraps
     * ot_remat_measure_planner passes m on as it is. */
    struct ot_plan_scratch *scratch;
    /* The bytes the plan must fit (the searches' budget), 0 for none: passed to the
     * planner as ot_plan_options.fit_target_bytes, so a plan that misses it by a
     * placement's hole while its bytes in use fit is placed again aiming at it
     * (plan/refit.h). The session plans the step it runs with the same target, so the
     * plan a search accepted is the one that runs. */
    int64_t fit_target;
    /* Given (> 0) by a caller that reads the peak only against limit (auto, asking
     * whether a plan fits its budget), without want_timeline or want_plan: a measure may
     * stop once the peak must pass limit and then set exceeded, with peak some value
     * above limit and n_top 0. A measure that ignores it measures in full. */
    int64_t limit;
    bool exceeded;
} ot_remat_measurement;

/* The product passes ot_remat_measure_planner; tests may pass their own. */
typedef ot_status (*ot_remat_measure_fn)(const ot_graph *g, void *user, ot_remat_measurement *m, ot_error *err);

/* The product's measure: plan/schedule + plan/planner on g. user is the
 * ot_backend * whose workspace sizes count (NULL: none). */
ot_status ot_remat_measure_planner(const ot_graph *g, void *user, ot_remat_measurement *m, ot_error *err);

typedef struct ot_remat_auto_stats {
    int n_measured;       /* keep sets measured (planner runs, but for n_reused of them) */
    int n_reused;         /* of those, the ones measured before, answered from the search's memo */
    int64_t peak;         /* peak of the chosen plan */
    int64_t min_peak;     /* smallest peak seen (the `all`-like plans) */
    double cost;          /* recompute FLOPs of the chosen plan */
    /* auto without a budget (ot_remat_auto_modest) only: */
    int64_t none_peak;    /* peak of --remat none */
    double cost_cap;      /* the recompute FLOPs a plan might cost (OT_REMAT_AUTO_MODEST of the step) */
    bool no_gain;         /* no plan within the cap peaked below none: the plan is none */
} ot_remat_auto_stats;

/* Chooses the keep set with the least recompute cost whose measured peak is at most
 * budget. Tries the policy plans (none, selective, sqrt, all, every:K) and a greedy
 * order by bytes freed per FLOP recomputed, bisects on its length, then adds back the
 * most expensive recomputations that still fit. An infeasible budget is OT_E_MEMORY
 * stating the smallest peak found. g is unchanged on return. */
ot_status ot_remat_auto(ot_graph *g, const ot_remat_analysis *a, int64_t budget, ot_remat_measure_fn measure,
                        void *user, bool *keep, ot_remat_auto_stats *stats, ot_error *err);

/* "Modest" recompute, what auto without a budget may spend: at most this share of the
 * step's FLOPs (ot_remat_analysis.step_flops). Selective recompute, Megatron's, costs
 * some 2-4% on transformers; segment checkpointing (sqrt, all) about one more forward
 * pass, 20-35%. */
#define OT_REMAT_AUTO_MODEST 0.05

/* auto without a budget: the keep set of least measured peak among the plans whose
 * recompute FLOPs are at most OT_REMAT_AUTO_MODEST of the step (the policy plans,
 * segment ladders and greedy prefixes within that cap, then local search on (peak,
 * cost)), and the cheapest plan found at that peak. Never a plan whose peak exceeds
 * none's: when no plan within the cap peaks below none, keep is none's (every
 * candidate kept) and stats->no_gain is set. g is unchanged on return. */
ot_status ot_remat_auto_modest(ot_graph *g, const ot_remat_analysis *a, ot_remat_measure_fn measure, void *user,
                               bool *keep, ot_remat_auto_stats *stats, ot_error *err);

/* The `all` policy: keep only segment inputs, with the segmentation (every:K over the
 * articulation values, and sqrt) whose measured peak is least; among plans within 1%
 * of that peak, the cheapest. *peak gets its peak. g is unchanged on return. */
ot_status ot_remat_least_memory(ot_graph *g, const ot_remat_analysis *a, ot_remat_measure_fn measure, void *user,
                                bool *keep, int64_t *peak, ot_error *err);

/* ---- optimal (remat/optimal.c; solver: remat/optimal_cbc.c or optimal_glpk.c) - */

/* True when this build has a MIP solver (GLPK): --remat optimal works. */
bool ot_remat_optimal_available(void);

/* Default and most a solve may take, in seconds (--remat-time-limit). */
#define OT_REMAT_OPTIMAL_TIME_LIMIT 60.0

typedef struct ot_remat_optimal_stats {
    int n_binaries, n_columns, n_rows; /* size of the last programme solved */
    int rounds;            /* solves: every round (exact or tightening) and the seed's bound */
    bool proven;           /* the accepted solve closed the gap (optimal under the model) */
    double gap;            /* relative MIP gap of the accepted solve (0 when proven); for
                            * auto's plan (heuristic), its cost against the last bound */
    double cost;           /* recompute FLOPs of the chosen plan */
    double bound;          /* best lower bound on those FLOPs the solver proved */
    int64_t model_peak;    /* peak bytes in use the solver's model predicts for the plan */
    int64_t planner_peak;  /* the planner's exact peak of the same plan */
    int64_t model_budget;  /* the budget the accepted solve had (budget less tightening) */
    double seconds;        /* wall time of every solve together */
    int n_measured;        /* planner runs */
    bool heuristic;        /* the plan is auto's (the first incumbent): no solution the
                            * planner accepted was cheaper; model_peak is then 0 */
    double auto_cost;      /* recompute FLOPs of auto's plan; -1 when auto found none */
    double auto_seconds;   /* time auto took */
} ot_remat_optimal_stats;

/* The keep set of least recompute FLOPs whose planned peak fits budget: a mixed-
 * integer programme over the keep/recompute choices (see remat/optimal.c for the
 * model), solved by GLPK within time_limit_s (0: the default), with auto's plan for
 * the budget as the first incumbent; every solution is checked by measure and, while
 * its exact peak exceeds budget, excluded and the programme solved again (without
 * auto's plan, after some such rounds, the programme's budget is also lowered by the
 * excess where the peak is). When no solution the planner accepts is
 * cheaper than auto's, auto's plan is the answer (stats->heuristic). A budget the model cannot meet
 * is OT_E_MEMORY; a build without GLPK is OT_E_UNSUPPORTED. g is unchanged. */
ot_status ot_remat_optimal(ot_graph *g, const ot_remat_analysis *a, int64_t budget, double time_limit_s,
                           ot_remat_measure_fn measure, void *user, bool *keep, ot_remat_optimal_stats *stats,
                           ot_error *err);

/* Any policy to a keep set: `all`, `auto` (with or without a budget) and `optimal` measure
 * plans with measure/user (see above), the others are ot_remat_policy_keep. */
ot_status ot_remat_choose(ot_graph *g, const ot_remat_analysis *a, const ot_remat_policy *p,
                          ot_remat_measure_fn measure, void *user, bool *keep, ot_error *err);

#endif
