/* refit.h — the planner's second placement (plan/plan_walk.c): when best fit's online
 * walk leaves a hole (its region ends above the most bytes that are ever live at
 * once), the blocks it handed out are placed again knowing every lifetime, greedy by
 * size and greedy by breadth (TFLite's two offline buffer planners), and the planner
 * keeps the lowest of the three. Internal to plan/. */
#ifndef OT_PLAN_REFIT_H
#define OT_PLAN_REFIT_H

#include <stddef.h>

#include "plan/scratch.h"

/* The most blocks a plan may have for the second placement (its cost is quadratic in
 * them): on larger plans best fit's placement stands, holes and all. 2,048 covers the
 * graphs issue 28 asks proofs on (up to 1,000 nodes) and keeps auto's thousands of
 * measurements on 5,000-node graphs as fast as before. The default of
 * ot_plan_options.refit_max_blocks (planner.h), which a test sets to none. */
enum { OT_REFIT_MAX_BLOCKS = 2048 };

/* One block of the walk: its aligned size, live from step first to step last
 * (both included; a workspace's first == last). */
typedef struct ot_fit_span {
    size_t size;
    int first, last;
} ot_fit_span;

/* Offsets (region-relative, multiples of the sizes' alignment when the sizes are)
 * for sp[0..n), no two blocks that are live at one step overlapping; *top is the
 * end of the highest block: the lower of the two orders' (by size on a tie).
 * Deterministic (sort keys end with the index). An order stops as soon as its top
 * reaches give_up (no better than what the caller has): when both do, returns 1 and
 * off[] is incomplete; the second is not tried when the first ends at floor (the
 * most bytes live at one step: no placement ends lower). -1 when out of memory,
 * else 0. */
int ot_fit_refit(const ot_fit_span *sp, int n, size_t floor, size_t give_up, ot_plan_scratch *scr, size_t *off,
                 size_t *top);

/* The most placements ot_fit_search tries (fewer on plans of more than 724 blocks: its
 * work is capped at 2^24 block pairs). Iterated greedy reached the floor within 9 on
 * each of 60 plans of the zoo's gpt2 under a budget where both orders above end 4 KiB
 * above it (docs/remat.md). */
enum { OT_FIT_SEARCH_TRIES = 32 };

/* A placement whose top is at most goal, for a plan with a target (planner.h,
 * ot_plan_options.fit_target_bytes) that the two orders above miss while the floor
 * does not: iterated greedy, deterministic. It places the blocks greedy by size's
 * order; when a block ends past goal it stops, moves that block to the front of the
 * order and places again (the blocks that meet the top get their room first), up to
 * OT_FIT_SEARCH_TRIES times. Returns 0 with off[] and *top (<= goal), 1 when no try
 * fits (off[] is then garbage), -1 when out of memory; *tries: the placements made. */
int ot_fit_search(const ot_fit_span *sp, int n, size_t goal, ot_plan_scratch *scr, size_t *off, size_t *top,
                  int *tries);

#endif
