/* optimal_point.c — a keep set as a point of `--remat optimal`'s programme (the seed,
 * auto's plan, offered to every solve as its first incumbent): its integer columns,
 * the x/k choices and the clone columns r that cost FLOPs (remat/optimal.c's
 * choice_columns), which are integer too. */
#include <stdlib.h>

#include "remat/optimal_model.h"
#include "remat/remat_internal.h"

/* A value no backward node reads is kept for the clones (k = 1) only when a clone
 * reads it: keep[] says "kept" of every such value that auto never dropped, and k = 1
 * would count its bytes until a clone that never runs, so the point broke the memory
 * rows by up to 896,497 bytes (tinygpt, adamw, at 3/4 of the way) and was no
 * incumbent at all. k = 0 is the same rewrite. r is the rewrite's closure: 1 exactly
 * for the nodes it clones (the solvers fix every integer column at the start's value,
 * so an r left at 0 under a clone would make the point infeasible). */
ot_status ot_opt_keep_point(const ot_opt_model *md, const bool *keep, double *x, ot_error *err) {
    const ot_graph *g = md->g;
    const ot_remat_analysis *a = md->a;
    bool *cloned = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(bool));
    int *stack = ot_xcalloc(ot_remat_stack_room(g, a), sizeof(int));
    if (!cloned || !stack) {
        free(cloned), free(stack);
        return ot_opt_oom(err);
    }
    ot_remat_mark_clones(g, a, keep, cloned, stack);
    for (int v = 0; v < a->n_values; v++) {
        if (md->col[v] < 0) continue;
        bool read = false;
        for (int c = 0; c < g->values[v].n_consumers && !read && !a->saved[v]; c++) {
            int cid = g->values[v].consumers[c];
            read = cid < a->n_nodes && cloned[cid];
        }
        x[md->col[v]] = a->saved[v] ? !keep[v] : keep[v] && read;
    }
    for (int id = 0; id < a->n_nodes; id++)
        if (md->rcol[id] >= 0 && md->mip.col_int[md->rcol[id]]) x[md->rcol[id]] = cloned[id];
    free(cloned), free(stack);
    return OT_OK;
}
