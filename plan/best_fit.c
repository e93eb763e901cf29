/* best_fit.c — the planner's best-fit allocator over the transient region (see
 * best_fit.h): a sorted free list of the holes between live blocks, merged on free. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "plan/best_fit.h"
#include "plan/scratch.h"

static int alloc_remove(ot_fit *a, int i) {
    memmove(&a->b[i], &a->b[i + 1], sizeof(ot_fit_block) * (size_t)(a->n - i - 1));
    a->n--;
    return 0;
}

/* Smallest free block that fits (lowest offset on ties); else grow the region,
 * extending a free block that ends at the top. */
size_t ot_fit_alloc(ot_fit *a, size_t size) {
    int best = -1;
    for (int i = 0; i < a->n; i++)
        if (a->b[i].size >= size && (best < 0 || a->b[i].size < a->b[best].size)) best = i;
    if (best >= 0) {
        size_t off = a->b[best].off;
        a->b[best].off += size;
        a->b[best].size -= size;
        if (a->b[best].size == 0) alloc_remove(a, best);
        return off;
    }
    if (a->n > 0 && a->b[a->n - 1].off + a->b[a->n - 1].size == a->top) {
        size_t off = a->b[a->n - 1].off;
        alloc_remove(a, a->n - 1);
        a->top = off + size;
        return off;
    }
    size_t off = a->top;
    a->top += size;
    return off;
}

int ot_fit_free(ot_fit *a, size_t off, size_t size) {
    if (size == 0) return 0;
    int lo = 0, hi = a->n; /* first block with offset > off */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (a->b[mid].off <= off) lo = mid + 1;
        else hi = mid;
    }
    int i = lo;
    bool merge_prev = i > 0 && a->b[i - 1].off + a->b[i - 1].size == off;
    bool merge_next = i < a->n && off + size == a->b[i].off;
    if (merge_prev && merge_next) {
        a->b[i - 1].size += size + a->b[i].size;
        return alloc_remove(a, i);
    }
    if (merge_prev) {
        a->b[i - 1].size += size;
        return 0;
    }
    if (merge_next) {
        a->b[i].off = off;
        a->b[i].size += size;
        return 0;
    }
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 64;
        size_t bs = sizeof(ot_fit_block);
        ot_fit_block *nb = ot_scratch_realloc(a->scr, a->b, bs * (size_t)a->n, bs * (size_t)cap);
        if (!nb) return -1;
        a->b = nb;
        a->cap = cap;
    }
    memmove(&a->b[i + 1], &a->b[i], sizeof(ot_fit_block) * (size_t)(a->n - i));
    a->b[i].off = off;
    a->b[i].size = size;
    a->n++;
    return 0;
}
