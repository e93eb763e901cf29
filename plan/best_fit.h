/* best_fit.h — the best-fit allocator the planner places transient blocks with
 * (plan/planner.c): offsets relative to the start of the transient region, a free
 * list holding only the holes between live blocks (a few dozen even on large graphs,
 * so a linear scan per allocation). Internal to plan/. */
#ifndef OT_PLAN_BEST_FIT_H
#define OT_PLAN_BEST_FIT_H

#include <stddef.h>

#include "plan/scratch.h"

typedef struct ot_fit_block {
    size_t off, size;
} ot_fit_block;

typedef struct ot_fit {
    ot_fit_block *b; /* free blocks sorted by offset, never adjacent (merged) */
    int n, cap;
    size_t top; /* end of the highest block ever handed out (region-relative) */
    ot_plan_scratch *scr; /* where b comes from (plan/scratch.h): NULL for the heap */
} ot_fit;

/* Smallest free block that fits (lowest offset on ties); else grows the region,
 * extending a free block that ends at the top. Returns the block's offset. */
size_t ot_fit_alloc(ot_fit *a, size_t size);
/* Gives [off, off + size) back, merging with its neighbours; -1 when out of memory. */
int ot_fit_free(ot_fit *a, size_t off, size_t size);

#endif
