/* scratch.h — memory that the schedule and the planner reuse from one call to the next,
 * for a caller that plans many versions of one graph (remat's auto measures hundreds
 * of rewrites of it).
 *
 * Why: one schedule-and-plan of a 25,000-node graph allocates some 10 MB of arrays
 * (compact copies of the nodes, edges, heaps, the plan itself). Allocated and freed
 * per call, glibc hands most of it back to the kernel and the next call faults every
 * page in again: at 25,000 nodes that was a sixth of auto's time, and a growing share
 * as graphs grow. A scratch is a bump allocator over one block that stays: reset at
 * the start of a call, each array is a pointer bump, freeing is a no-op, and after the
 * first call no page is faulted again.
 *
 * Every function takes a NULL scratch to mean the ordinary heap (malloc, calloc,
 * free), so the code that allocates is the same with and without one.
 *
 * A scratch also holds the schedule's base when its caller sets one (a copy of the
 * un-rewritten graph's compact facts, plan/sched_base.h): a reset keeps it, a free
 * frees it. */
#ifndef OT_PLAN_SCRATCH_H
#define OT_PLAN_SCRATCH_H

#include <stddef.h>

typedef struct ot_plan_scratch ot_plan_scratch;

/* NULL when out of memory. */
ot_plan_scratch *ot_plan_scratch_new(void);
void ot_plan_scratch_free(ot_plan_scratch *s);
/* Forgets every allocation made since the last reset (what they hold is gone); the
 * blocks they used stay for the next call, merged into one when there were several. */
void ot_plan_scratch_reset(ot_plan_scratch *s);

/* malloc / calloc / free, from the scratch when s is not NULL (64-byte aligned; NULL
 * when out of memory). */
void *ot_scratch_alloc(ot_plan_scratch *s, size_t bytes);
void *ot_scratch_calloc(ot_plan_scratch *s, size_t n, size_t size);
void ot_scratch_release(ot_plan_scratch *s, void *p);
/* realloc: from the scratch, a new block holding the first old_bytes of p. */
void *ot_scratch_realloc(ot_plan_scratch *s, void *p, size_t old_bytes, size_t new_bytes);

#endif
