/* schedule.h — the execution order of a graph's live nodes, shared by the planner
 * (lifetimes), the executor (run order) and remat (placement of recompute clones).
 *
 * The rule (deterministic, O(n log n)): Kahn's topological sort that always picks
 * the ready node with the smallest key (phase rank, anchor, recompute-first, id):
 *   - phase rank: FORWARD 0, LOSS 1, BACKWARD and RECOMPUTE 2, OPTIMIZER 3, so the
 *     phases run in that order as far as the dependencies allow;
 *   - anchor: a node's own id, except for a RECOMPUTE clone, whose anchor (and rank)
 *     is the smallest key among the nodes that read its outputs (through chains of
 *     clones). A clone therefore waits until just before its first backward consumer
 *     instead of running as soon as its inputs exist (lazy placement), and runs before
 *     that consumer because of the recompute-first tie-break.
 *   - eager: a BACKWARD node that frees at least what it allocates (inputs read only
 *     by it, not graph outputs, as large as its outputs) gets anchor -1, so it runs as
 *     soon as it is ready: the Transpose of a weight gradient out of the exporter's
 *     layout would otherwise keep that gradient alive to the end of the backward pass.
 * Other backward nodes run in id order where possible: autodiff emits them in the
 * order it wants them run. */
#ifndef OT_SCHEDULE_H
#define OT_SCHEDULE_H

#include "ir.h"

/* Builds the order of every live (not removed) node. *order is malloc'd (free it),
 * *n is its length. A cycle is OT_E_MODEL naming a node on it. */
ot_status ot_schedule_build(const ot_graph *g, int **order, int *n, ot_error *err);

#endif
