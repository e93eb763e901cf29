/* scratch.c — the schedule's and planner's reusable memory (see scratch.h): a bump
 * allocator over a list of blocks; a reset keeps the first block, or replaces the list
 * by one block as large as all of them, so that the steady state is one block that
 * every call reuses without faulting a page in. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/scratch.h"
#include "plan/sched_base.h"

#define SCRATCH_ALIGN 64
#define SCRATCH_FIRST ((size_t)1 << 20)

typedef struct chunk {
    unsigned char *mem;
    size_t cap, used;
} chunk;

struct ot_plan_scratch {
    chunk *c; /* c[n - 1] is the one being filled */
    int n, cap;
    ot_sched_base base; /* the schedule's, kept across resets (plan/sched_base.h) */
};

ot_plan_scratch *ot_plan_scratch_new(void) { return calloc(1, sizeof(ot_plan_scratch)); }

void ot_plan_scratch_free(ot_plan_scratch *s) {
    if (!s) return;
    ot_sched_base_clear(&s->base);
    for (int i = 0; i < s->n; i++) free(s->c[i].mem);
    free(s->c);
    free(s);
}

void ot_plan_scratch_reset(ot_plan_scratch *s) {
    if (!s) return;
    if (s->n > 1) { /* one block of their whole size, so that the next call fits in it */
        size_t total = 0;
        for (int i = 0; i < s->n; i++) {
            total += s->c[i].cap;
            free(s->c[i].mem);
        }
        s->c[0].mem = malloc(total);
        s->c[0].cap = s->c[0].mem ? total : 0;
        s->n = s->c[0].mem ? 1 : 0;
    }
    if (s->n == 1) s->c[0].used = 0;
}

/* A new block of at least bytes (aligned room included); false when out of memory. */
static int add_chunk(ot_plan_scratch *s, size_t bytes) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4;
        chunk *c = realloc(s->c, sizeof(chunk) * (size_t)cap);
        if (!c) return 0;
        s->c = c;
        s->cap = cap;
    }
    size_t want = s->n ? 2 * s->c[s->n - 1].cap : SCRATCH_FIRST;
    if (want < bytes + SCRATCH_ALIGN) want = bytes + SCRATCH_ALIGN;
    unsigned char *mem = malloc(want);
    if (!mem) return 0;
    s->c[s->n++] = (chunk){mem, want, 0};
    return 1;
}

void *ot_scratch_alloc(ot_plan_scratch *s, size_t bytes) {
    if (!s) return malloc(bytes);
    if (bytes == 0) bytes = 1;
    if (bytes > SIZE_MAX / 2) return NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (s->n > 0) {
            chunk *c = &s->c[s->n - 1];
            uintptr_t at = ((uintptr_t)(c->mem + c->used) + SCRATCH_ALIGN - 1) & ~(uintptr_t)(SCRATCH_ALIGN - 1);
            size_t off = (size_t)(at - (uintptr_t)c->mem);
            if (off <= c->cap && c->cap - off >= bytes) {
                c->used = off + bytes;
                return c->mem + off;
            }
        }
        if (attempt == 0 && !add_chunk(s, bytes)) return NULL;
    }
    return NULL;
}

void *ot_scratch_calloc(ot_plan_scratch *s, size_t n, size_t size) {
    if (!s) return calloc(n, size);
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = ot_scratch_alloc(s, n * size);
    if (p) memset(p, 0, n * size);
    return p;
}

void ot_scratch_release(ot_plan_scratch *s, void *p) {
    if (!s) free(p);
}

void *ot_scratch_realloc(ot_plan_scratch *s, void *p, size_t old_bytes, size_t new_bytes) {
    if (!s) return realloc(p, new_bytes);
    void *q = ot_scratch_alloc(s, new_bytes);
    if (q && p && old_bytes) memcpy(q, p, old_bytes < new_bytes ? old_bytes : new_bytes);
    return q;
}

ot_sched_base *ot_plan_scratch_base(ot_plan_scratch *s) { return &s->base; }

void ot_sched_base_clear(ot_sched_base *b) {
    void *arrays[] = {b->live, b->phase, b->flags, b->bwd, b->in_start, b->in_val, b->out_start, b->out_val,
                      b->vprod, b->cons_start, b->cons, b->sole, b->readers0, b->vsize, b->vbytes, b->vinfo,
                      b->vflags, b->mark, b->stale, b->touched};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
    memset(b, 0, sizeof *b);
}
