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
 * OT_REFIT_MAX_BLOCKS blocks (plan/plan_walk.c). The scan tests 64 blocks' lifetimes
 * at a time without a branch (placed_set, live_mask), and the keys are sorted without
 * qsort: on the zoo's llama under a budget, auto's 26,625 refits of 258 blocks scan
 * 952 M blocks, 17% of them live with the one placed (2026-12-06). */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "plan/refit.h"

/* The sort key of a block (a total order, so the same placement on every machine):
 * by size, larger first, then earlier first; by breadth, the widest step it is live
 * at first (step: that step, the earliest when several), then larger first. */
typedef struct refit_key {
    size_t breadth, size;
    int step, idx;
} refit_key;

/* a before b: by size, larger first, then earlier first, then by index; with breadth,
 * first by the widest step (wider first, then earlier). */
static inline bool key_before(const refit_key *a, const refit_key *b, bool breadth) {
    if (breadth && a->breadth != b->breadth) return a->breadth > b->breadth;
    if (breadth && a->step != b->step) return a->step < b->step;
    if (a->size != b->size) return a->size > b->size;
    if (a->step != b->step) return a->step < b->step;
    return a->idx < b->idx;
}

/* Sorts ord[0..n) by key_before (a total order: the index ends it, so any sort gives
 * this one), tmp: room for n. Runs of 16 by insertion, then merged bottom-up: qsort's
 * call per comparison was a tenth of auto's time on the zoo's llama. */
static void sort_keys(refit_key *ord, refit_key *tmp, int n, bool breadth) {
    enum { RUN = 16 };
    for (int lo = 0; lo < n; lo += RUN) {
        int hi = lo + RUN < n ? lo + RUN : n;
        for (int i = lo + 1; i < hi; i++) {
            refit_key k = ord[i];
            int j = i;
            for (; j > lo && key_before(&k, &ord[j - 1], breadth); j--) ord[j] = ord[j - 1];
            ord[j] = k;
        }
    }
    refit_key *from = ord, *to = tmp;
    for (int w = RUN; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, k = lo;
            while (a < mid && b < hi) to[k++] = key_before(&from[b], &from[a], breadth) ? from[b++] : from[a++];
            while (a < mid) to[k++] = from[a++];
            while (b < hi) to[k++] = from[b++];
        }
        refit_key *t = from;
        from = to;
        to = t;
    }
    if (from != ord) memcpy(ord, from, sizeof *ord * (size_t)n);
}

/* The blocks placed so far, in offset order (ties: in the order placed), as arrays of
 * their lifetimes, offsets and ends, so that best_gap scans them without a branch per
 * block: 17% of them are live with the block being placed on the zoo's llama, and a
 * branch taken at random that often cost more than the comparisons. Entries from n
 * up to a multiple of 64 are never live (first INT_MAX, last INT_MIN). */
typedef struct placed_set {
    int n;
    int *first, *last;
    size_t *off, *end;
} placed_set;

/* Bit j: block j of fi/la[0..64) is live at some step of [sf, sl]. SSE2 (every
 * x86-64) compares four at once; the scalar loop is the same test. */
static inline uint64_t live_mask(const int *fi, const int *la, int sf, int sl) {
    uint64_t live = 0;
#ifdef __SSE2__
    __m128i vsl = _mm_set1_epi32(sl), vsf = _mm_set1_epi32(sf);
    for (int j = 0; j < 64; j += 4) { /* not live: first > sl or sf > last */
        __m128i apart = _mm_or_si128(_mm_cmpgt_epi32(_mm_loadu_si128((const __m128i *)(fi + j)), vsl),
                                     _mm_cmpgt_epi32(vsf, _mm_loadu_si128((const __m128i *)(la + j))));
        live |= (uint64_t)(~_mm_movemask_ps(_mm_castsi128_ps(apart)) & 15) << j;
    }
#else
    for (int j = 0; j < 64; j++) live |= (uint64_t)((fi[j] <= sl) & (la[j] >= sf)) << j;
#endif
    return live;
}

/* The offset for block s: the smallest gap between the placed blocks that are live
 * with it and fits it, lowest on ties; else the end of the highest of them. */
static size_t best_gap(const placed_set *ps, const ot_fit_span *s) {
    const int *fi = ps->first, *la = ps->last;
    int sf = s->first, sl = s->last;
    size_t end = 0, best = SIZE_MAX, best_off = 0;
    for (int lo = 0; lo < ps->n; lo += 64) {
        uint64_t live = live_mask(fi + lo, la + lo, sf, sl); /* which of the next 64 are live with s */
        for (; live; live &= live - 1) {
            int k = lo + __builtin_ctzll(live);
            size_t o = ps->off[k];
            if (o >= end && o - end >= s->size && o - end < best) {
                best = o - end;
                best_off = end;
                if (best == s->size) return best_off; /* an exact fit: no gap is smaller */
            }
            if (ps->end[k] > end) end = ps->end[k];
        }
    }
    return best == SIZE_MAX ? end : best_off;
}

/* Places the blocks in the order ord[0..n) (ps: room for n rounded up to 64), each in
 * best_gap; as soon as the top reaches give_up, stops and returns 1 + the position in
 * ord of the block that reached it, else 0. */
static int place_in_order(const ot_fit_span *sp, int n, const refit_key *ord, placed_set *ps, size_t give_up,
                          size_t *off, size_t *top) {
    int cap = (n + 63) / 64 * 64;
    for (int k = 0; k < cap; k++) ps->first[k] = INT_MAX, ps->last[k] = INT_MIN;
    ps->n = 0;
    *top = 0;
    for (int np = 0; np < n; np++) {
        int i = ord[np].idx;
        size_t o = best_gap(ps, &sp[i]), e = o + sp[i].size;
        off[i] = o;
        if (e > *top) *top = e;
        if (*top >= give_up) return np + 1;
        int lo = 0, hi = np; /* insert after every placed block at or below o */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (ps->off[mid] <= o) lo = mid + 1;
            else hi = mid;
        }
        size_t m = (size_t)(np - lo);
        memmove(&ps->first[lo + 1], &ps->first[lo], sizeof(int) * m);
        memmove(&ps->last[lo + 1], &ps->last[lo], sizeof(int) * m);
        memmove(&ps->off[lo + 1], &ps->off[lo], sizeof(size_t) * m);
        memmove(&ps->end[lo + 1], &ps->end[lo], sizeof(size_t) * m);
        ps->first[lo] = sp[i].first, ps->last[lo] = sp[i].last, ps->off[lo] = o, ps->end[lo] = e;
        ps->n = np + 1;
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

/* What a placement run takes from the scratch: the order and its sort's room (n + 1
 * keys each), and the placed set (n rounded up to 64, and 64 more). */
typedef struct fit_work {
    refit_key *ord, *tmp;
    placed_set ps;
} fit_work;

/* Takes fit_work for n blocks from scr; false (and nothing held) when it cannot. */
static bool fit_work_take(ot_plan_scratch *scr, int n, fit_work *w) {
    size_t cap = (size_t)(n + 63) / 64 * 64 + 64;
    *w = (fit_work){.ord = ot_scratch_alloc(scr, sizeof *w->ord * (size_t)(n + 1)),
                    .tmp = ot_scratch_alloc(scr, sizeof *w->tmp * (size_t)(n + 1)),
                    .ps = {.first = ot_scratch_alloc(scr, sizeof(int) * cap),
                           .last = ot_scratch_alloc(scr, sizeof(int) * cap),
                           .off = ot_scratch_alloc(scr, sizeof(size_t) * cap),
                           .end = ot_scratch_alloc(scr, sizeof(size_t) * cap)}};
    return w->ord && w->tmp && w->ps.first && w->ps.last && w->ps.off && w->ps.end;
}

static void fit_work_give(ot_plan_scratch *scr, fit_work *w) {
    ot_scratch_release(scr, w->ord);
    ot_scratch_release(scr, w->tmp);
    ot_scratch_release(scr, w->ps.first);
    ot_scratch_release(scr, w->ps.last);
    ot_scratch_release(scr, w->ps.off);
    ot_scratch_release(scr, w->ps.end);
}

int ot_fit_refit(const ot_fit_span *sp, int n, size_t floor, size_t give_up, ot_plan_scratch *scr, size_t *off,
                 size_t *top) {
    fit_work w;
    bool have = fit_work_take(scr, n, &w);
    refit_key *ord = w.ord, *tmp = w.tmp;
    placed_set ps = w.ps;
    size_t *off2 = ot_scratch_alloc(scr, sizeof(size_t) * (size_t)(n + 1)), top2 = 0;
    int rc = -1;
    *top = 0;
    if (!have || !off2) goto done;
    for (int i = 0; i < n; i++) ord[i] = (refit_key){.size = sp[i].size, .step = sp[i].first, .idx = i};
    sort_keys(ord, tmp, n, false);
    rc = place_in_order(sp, n, ord, &ps, give_up, off, top) != 0;
    if (rc == 0 && *top <= floor) goto done; /* no order can end lower */
    /* by breadth, kept only when strictly lower (by size wins ties) */
    if (breadth_keys(sp, n, scr, ord)) {
        rc = -1;
        goto done;
    }
    sort_keys(ord, tmp, n, true);
    if (place_in_order(sp, n, ord, &ps, rc ? give_up : *top, off2, &top2) == 0) {
        memcpy(off, off2, sizeof(size_t) * (size_t)n);
        *top = top2;
        rc = 0;
    }
done:
    fit_work_give(scr, &w);
    ot_scratch_release(scr, off2);
    return rc;
}

/* The search's tries: at most OT_FIT_SEARCH_TRIES, and at most FIT_SEARCH_WORK / n^2
 * (each try scans up to n^2 / 2 pairs of blocks), so that on the largest plans it
 * takes (OT_REFIT_MAX_BLOCKS blocks) it costs a few placements, not 32. */
enum { FIT_SEARCH_WORK = 1 << 24 };

int ot_fit_search(const ot_fit_span *sp, int n, size_t goal, ot_plan_scratch *scr, size_t *off, size_t *top,
                  int *tries) {
    fit_work w;
    bool have = fit_work_take(scr, n, &w);
    refit_key *ord = w.ord, *tmp = w.tmp;
    placed_set ps = w.ps;
    int rc = -1, max_tries = OT_FIT_SEARCH_TRIES;
    if ((double)n * n * max_tries > FIT_SEARCH_WORK) max_tries = n > 0 ? FIT_SEARCH_WORK / n / n : 1;
    if (max_tries < 1) max_tries = 1;
    *tries = 0;
    if (!have) goto done;
    for (int i = 0; i < n; i++) ord[i] = (refit_key){.size = sp[i].size, .step = sp[i].first, .idx = i};
    sort_keys(ord, tmp, n, false); /* greedy by size's order, the first the refit tried */
    rc = 1;
    while (rc == 1 && *tries < max_tries) {
        ++*tries;
        int at = place_in_order(sp, n, ord, &ps, goal + 1, off, top); /* stops at the first block past goal */
        if (at == 0) {
            rc = 0;
            break;
        }
        refit_key k = ord[at - 1]; /* that block first, the others in their order */
        memmove(&ord[1], &ord[0], sizeof *ord * (size_t)(at - 1));
        ord[0] = k;
    }
done:
    fit_work_give(scr, &w);
    return rc;
}
