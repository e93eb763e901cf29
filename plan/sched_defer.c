/* sched_defer.c — the schedule of fused updates under MPI (ot_graph.sum_ranks > 1):
 * each update waits for its gradient's sum over the ranks, which starts when the
 * gradient is complete (train/train_fuse.c). Left where the fused order puts it, right
 * after the gradient, an update would wait for the whole exchange at once; deferred by
 * one group, the exchange runs while the backward pass computes the next gradients. */
#include <string.h>

#include "plan/sched_internal.h"

/* Rewrites order[0..n): the runs of consecutive optimizer nodes U1, U2, ..., Um
 * (separated by runs of other nodes R0, R1, ...) move one run later, each to just
 * before the next: R0 U1 R1 U2 R2 becomes R0 R1 U1 R2 U2. Valid for fused updates:
 * every reader of a param, and the producer of its gradient, comes before its update
 * in the fused order (schedule.c's reader -> update edges), nothing reads what an
 * update writes, so moving an update later breaks no dependency. False when out of
 * memory. */
bool ot_sched_defer_updates(const unsigned char *phase, int *order, int n, ot_plan_scratch *scr) {
    int *out = ot_scratch_alloc(scr, sizeof(int) * (size_t)(n + 1));
    if (!out) return false;
    int w = 0, pend_lo = 0, pend_hi = 0; /* the run waiting for its place: order[pend_lo..pend_hi) */
    for (int k = 0; k < n;) {
        if (phase[order[k]] != OT_PHASE_OPTIMIZER) {
            out[w++] = order[k++];
            continue;
        }
        int e = k;
        while (e < n && phase[order[e]] == OT_PHASE_OPTIMIZER) e++;
        for (int j = pend_lo; j < pend_hi; j++) out[w++] = order[j];
        pend_lo = k, pend_hi = e, k = e;
    }
    for (int j = pend_lo; j < pend_hi; j++) out[w++] = order[j];
    memcpy(order, out, sizeof(int) * (size_t)n);
    ot_scratch_release(scr, out);
    return true;
}
