/* schedule.h — the execution order of a graph's live nodes, shared by the planner
 * (lifetimes), the executor (run order) and remat (placement of recompute clones).
 *
 * The rule (deterministic, O(n log n) per order): Kahn's topological sort that always picks
 * the ready node with the smallest key (phase rank, anchor, recompute-first, id):
 *   - phase rank: FORWARD 0, LOSS 1, BACKWARD and RECOMPUTE 2, OPTIMIZER 3, so the
 *     phases run in that order as far as the dependencies allow;
 *   - anchor: a node's own id, except for a RECOMPUTE clone, whose anchor (and rank)
 *     is the smallest key among the nodes that read its outputs (through chains of
 *     clones). A clone therefore waits until just before its first backward consumer
 *     instead of running as soon as its inputs exist (lazy placement), and runs before
 *     that consumer because of the recompute-first tie-break. Any other node takes
 *     the smallest anchor of its readers of the same rank when that is below its own
 *     id: a node appended by a later pass (autocast's casts around a backward node, a
 *     fused loss's gradient) has an id above the whole graph, and by that id it would
 *     hold up its readers while every clone anchored between them ran long before its
 *     own reader (GPT-2 under --precision bf16 kept 36 float32 copies of Q, K, V at
 *     once that way).
 *   - eager: a BACKWARD node that frees at least what it allocates (inputs that die
 *     at it, not graph outputs, as large as its outputs) gets anchor -1, so it runs
 *     as soon as it is ready instead of keeping its inputs alive until its id comes
 *     up. A param's gradient counts as nothing in the
 *     dynamic form: its slot in the gradient slab is there anyway, and with fused
 *     updates, a gradient that only updates read is freed by them at once.
 * Other backward nodes run in id order where possible: autodiff emits them in the
 * order it wants them run.
 *
 * Two forms of the eager rule make two orders: static (an input dies at a node when
 * the node is its only reader) and dynamic (re-evaluated as the sort proceeds: an
 * input dies at its last reader not yet scheduled, so the GEMM of a weight gradient
 * turns eager once dX's MatMul has read dY). The planner judges them, without any
 * device's workspace so that the order depends on the graph alone and every caller
 * (planner, executor, remat's measurements) gets the same one: the dynamic order is
 * taken when its planned peak is strictly smaller, or the static one otherwise (and
 * when the graph cannot be planned, e.g. symbolic shapes). Cost: two planner runs
 * when the orders differ, the static one stopped as soon as its peak passes the
 * dynamic one's.
 *
 * Fused updates under MPI (ot_graph.sum_ranks > 1): after the sort, each run of
 * consecutive optimizer nodes moves to just before the next run (the last to the
 * end), so that each update waits for its gradient's sum over the ranks one gradient
 * later, while the backward pass goes on (plan/sched_defer.c). */
#ifndef OT_SCHEDULE_H
#define OT_SCHEDULE_H

#include "ir.h"
#include "plan/planner.h"
#include "plan/scratch.h"

/* Builds the order of every live (not removed) node. *order is malloc'd (free it),
 * *n is its length. A cycle is OT_E_MODEL naming a node on it. */
ot_status ot_schedule_build(const ot_graph *g, int **order, int *n, ot_error *err);

/* ot_schedule_build followed by ot_plan_build(g, *order, *n, dev, plan): the same
 * order and plan, but the plan that judged the order is reused when dev asks no
 * workspace of any node (ot_plan_device_idle), which saves a planner run. *plan is
 * the caller's to free (NULL on failure). */
ot_status ot_schedule_plan(const ot_graph *g, const ot_plan_device *dev, int **order, int *n, ot_plan **plan,
                           ot_error *err);

/* ot_schedule_plan with every array from scr (plan/scratch.h), which it resets first:
 * *order and *plan are the same, but they live in scr until the next call with it (or
 * its reset or free) and are not the caller's to free. For a caller that plans many
 * versions of one graph (remat's measurements): no call after the first faults a page
 * in. scr NULL: ot_schedule_plan. */
ot_status ot_schedule_plan_scratch(const ot_graph *g, const ot_plan_device *dev, ot_plan_scratch *scr, int **order,
                                   int *n, ot_plan **plan, ot_error *err);

/* ot_schedule_plan_opts for a caller that needs the plan only when its peak is at most
 * limit (remat's auto, judging whether a plan fits): the planner runs stop once their
 * peak must pass limit (a bounded build gives the unbounded one's plan, target and
 * all: planner.h). When the chosen order's plan for dev would pass it, *exceeded is
 * set, *plan NULL and *order one of the two orders; otherwise the same order and plan
 * as ot_schedule_plan_opts. */
ot_status ot_schedule_plan_limit(const ot_graph *g, const ot_plan_device *dev, const ot_plan_options *opt,
                                 ot_plan_scratch *scr, size_t limit, int **order, int *n, ot_plan **plan,
                                 bool *exceeded, ot_error *err);

/* ot_schedule_plan (scr NULL) or ot_schedule_plan_scratch (scr given) with planner
 * options (planner.h; NULL: the defaults), which the judging of the two orders uses
 * too. */
ot_status ot_schedule_plan_opts(const ot_graph *g, const ot_plan_device *dev, const ot_plan_options *opt,
                                ot_plan_scratch *scr, int **order, int *n, ot_plan **plan, ot_error *err);

/* Opt-in, for a caller that plans many rewrites of one graph (remat's auto): the
 * facts the schedule reads of every node and value, kept in scr for g as it is now
 * (the base: the graph between rewrites), so that a declared call reads only what its
 * rewrite changed (plan/sched_base.h says why and the rule). Until scr is freed or
 * the base set again, g may change only by rewrites that append nodes and values,
 * rewire base nodes' inputs, and are undone before the next; the caller declares each
 * call with ot_schedule_base_hint. An undeclared call reads the whole graph, as
 * without a base. */
ot_status ot_schedule_base_set(ot_plan_scratch *scr, const ot_graph *g, ot_error *err);

/* Declares the next ot_schedule_plan_scratch with scr: g is the base with changed
 * (n_changed node ids, repeats allowed) the only base nodes whose inputs differ, and
 * what was appended since. It serves that call alone, and only when g still has the
 * node and value counts it has now (a measure that appends more reads in full and
 * drops the base unless it says so, ot_schedule_base_grown; so does any call with scr
 * that was not declared, and a declaration withdrawn unused). g NULL withdraws it. Nothing
 * without a base. */
void ot_schedule_base_hint(ot_plan_scratch *scr, const ot_graph *g, const int *changed, int n_changed);

/* The graph declared for the next call has since had nodes and values appended, and
 * nothing else changed (the session's measure appends the optimizer nodes, which write
 * no value, on top of the rewrite): the declaration covers them. Nothing when scr has
 * no declaration for g. */
void ot_schedule_base_grown(ot_plan_scratch *scr, const ot_graph *g);

#endif
