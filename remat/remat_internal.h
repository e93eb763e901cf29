/* remat_internal.h — helpers shared by the remat sources; not part of the API. */
#ifndef OT_REMAT_INTERNAL_H
#define OT_REMAT_INTERNAL_H

#include "remat/remat.h"

/* Room ot_remat_mark_clones' stack needs: one entry per node (each is pushed once). */
size_t ot_remat_stack_room(const ot_graph *g, const ot_remat_analysis *a);
/* Marks (cloned[node id]) the forward nodes the rewrite clones for a keep set: the
 * producers of saved values not kept, and back through their inputs that are
 * candidates not kept. Returns how many. */
int ot_remat_mark_clones(const ot_graph *g, const ot_remat_analysis *a, const bool *keep, bool *cloned, int *stack);
/* ot_remat_kept_bytes for clones already marked (ot_remat_mark_clones); held is
 * a->n_values of scratch, all false. */
int64_t ot_remat_kept_bytes_marked(const ot_graph *g, const ot_remat_analysis *a, const bool *keep,
                                   const bool *cloned, bool *held);

/* Bytes of the mean saved value: the unit segment sizes are counted in. */
double ot_remat_saved_unit(const ot_remat_analysis *a);
/* Sets keep[] on articulation values so that segments hold about `first` saved bytes,
 * the next one `step` more (negative: tapering towards the output), at least one
 * unit each. Chen's sqrt is step 0; tapered plans suit the backward pass, which
 * frees checkpoints as it goes, so early segments may be longer. */
void ot_remat_segment_keep(const ot_graph *g, const ot_remat_analysis *a, double first, double step, bool *keep);

#endif
