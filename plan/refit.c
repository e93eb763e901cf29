/* refit.c — offline placement of the walk's blocks (see refit.h): greedy by size,
 * then greedy by breadth, the lower kept.
 *
 * Why: best fit places each block when it is made, not knowing when the blocks
 * around it will die, so a small block can land in the hole a large one will need
 * and push it to the top: on remat plans of transformer graphs the region then ends
 * 2-16 KiB above the bytes in use, which --remat optimal's programme cannot see.
 * Placing the largest blocks first, each in the smallest gap left between the blocks
 * placed so far that are live at some step of its lifetime (or above all of them),
 * is what TFLite's "greedy by size" planner does; on these interval graphs it
 * usually reaches the bytes in use exactly. Where it does not (a graph with kernel
 * workspaces, each live one step), TFLite's other order, "greedy by breadth" (the
 * blocks of the step with the most bytes live first, then the next widest step's),
 * often does; both run and the lower top is kept.
 *
 * Cost: O(n^2) per order (each block scans the blocks placed so far in offset
 * order; bucketing them by time was tried, and was no faster on bench/plan_5000's
 * graph), run only when best fit left a hole, on plans of at most
 * OT_REFIT_MAX_BLOCKS blocks (plan/plan_walk.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/refit.h"

/* The sort key of a block (a total order, so the same placement on every machine):
 * by size, larger first, then earlier first; by breadth, the widest step it is live
 * at first (step: that step, the earliest when several), then larger first. */
typedef struct refit_key {
    size_t breadth, size;
    int step, idx;
} refit_key;

static int by_size(const void *x, const void *y) {
    const refit_key *a = x, *b = y;
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    if (a->step != b->step) return a->step < b->step ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

static int by_breadth(const void *x, const void *y) {
    const refit_key *a = x, *b = y;
    if (a->breadth != b->breadth) return a->breadth > b->breadth ? -1 : 1;
    if (a->step != b->step) return a->step < b->step ? -1 : 1;
    return by_size(x, y);
}

/* The offset for block i: the smallest gap between the placed blocks (placed[0..np),
 * sorted by offset) that are live with it and fits it, lowest on ties; else the end
 * of the highest of them. */
static size_t best_gap(const ot_fit_span *sp, const size_t *off, const int *placed, int np, int i) {
    const ot_fit_span *s = &sp[i];
    size_t end = 0, best = SIZE_MAX, best_off = 0;
    for (int k = 0; k < np; k++) {
        const ot_fit_span *t = &sp[placed[k]];
        if (t->first > s->last || s->first > t->last) continue; /* never live together */
        size_t o = off[placed[k]];
        if (o >= end && o - end >= s->size && o - end < best) {
            best = o - end;
            best_off = end;
            if (best == s->size) break; /* an exact fit: no gap is smaller */
        }
        if (o + t->size > end) end = o + t->size;
    }
    return best == SIZE_MAX ? end : best_off;
}

/* Places the blocks in the order ord[0..n) (placed: n ints of room), each in
 * best_gap; 1 as soon as the top reaches give_up, else 0. */
static int place_in_order(const ot_fit_span *sp, int n, const refit_key *ord, int *placed, size_t give_up,
                          size_t *off, size_t *top) {
    *top = 0;
    for (int np = 0; np < n; np++) {
        int i = ord[np].idx;
        size_t o = best_gap(sp, off, placed, np, i);
        off[i] = o;
        if (o + sp[i].size > *top) *top = o + sp[i].size;
        if (*top >= give_up) return 1;
        int lo = 0, hi = np; /* insert after every placed block at or below o */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (off[placed[mid]] <= o) lo = mid + 1;
            else hi = mid;
        }
        memmove(&placed[lo + 1], &placed[lo], sizeof(int) * (size_t)(np - lo));
        placed[lo] = i;
    }
    return 0;
}

/* Each block's widest step: the bytes of all blocks live at each step (a difference
 * array over the steps), then the most over the block's lifetime. */
static int breadth_keys(const ot_fit_span *sp, int n, ot_plan_scratch *scr, refit_key *ord) {
    int n_steps = 0;
    for (int i = 0; i < n; i++) n_steps = sp[i].last + 1 > n_steps ? sp[i].last + 1 : n_steps;
    size_t *w = ot_scratch_calloc(scr, (size_t)n_steps + 1, sizeof *w);
    if (!w) return -1;
    for (int i = 0; i < n; i++) {
        w[sp[i].first] += sp[i].size;
        w[sp[i].last + 1] -= sp[i].size; /* wraps, and the running sum wraps back */
    }
    for (int t = 1; t <= n_steps; t++) w[t] += w[t - 1];
    for (int i = 0; i < n; i++) {
        refit_key k = {.size = sp[i].size, .step = sp[i].first, .idx = i};
        for (int t = sp[i].first; t <= sp[i].last; t++)
            if (w[t] > k.breadth) k.breadth = w[t], k.step = t;
        ord[i] = k;
    }
    ot_scratch_release(scr, w);
    return 0;
}

int ot_fit_refit(const ot_fit_span *sp, int n, size_t floor, size_t give_up, ot_plan_scratch *scr, size_t *off,
                 size_t *top) {
    refit_key *ord = ot_scratch_alloc(scr, sizeof *ord * (size_t)(n + 1));
    int *placed = ot_scratch_alloc(scr, sizeof(int) * (size_t)(n + 1));
    size_t *off2 = ot_scratch_alloc(scr, sizeof(size_t) * (size_t)(n + 1)), top2 = 0;
    int rc = -1;
    *top = 0;
    if (!ord || !placed || !off2) goto done;
    for (int i = 0; i < n; i++) ord[i] = (refit_key){.size = sp[i].size, .step = sp[i].first, .idx = i};
    qsort(ord, (size_t)n, sizeof *ord, by_size);
    rc = place_in_order(sp, n, ord, placed, give_up, off, top);
    if (rc == 0 && *top <= floor) goto done; /* no order can end lower */
    /* by breadth, kept only when strictly lower (by size wins ties) */
    if (breadth_keys(sp, n, scr, ord)) {
        rc = -1;
        goto done;
    }
    qsort(ord, (size_t)n, sizeof *ord, by_breadth);
    if (place_in_order(sp, n, ord, placed, rc ? give_up : *top, off2, &top2) == 0) {
        memcpy(off, off2, sizeof(size_t) * (size_t)n);
        *top = top2;
        rc = 0;
    }
done:
    ot_scratch_release(scr, ord);
    ot_scratch_release(scr, placed);
    ot_scratch_release(scr, off2);
    return rc;
}
