/* plan_build.h — the state of one planner build, shared by plan/planner.c (lifetimes,
 * views, the pinned region, the entry points) and plan/plan_walk.c (the transient
 * walk and its second placement), with the few helpers both use. Internal to plan/. */
#ifndef OT_PLAN_BUILD_H
#define OT_PLAN_BUILD_H

#include "plan/best_fit.h"
#include "plan/planner.h"
#include "plan/refit.h"
#include "plan/scratch.h"

/* step_flags bits (INPLACE: OT_T_INPLACE or OT_T_VIEW; ONTO_LAST: in place on the last input, a GatherGrad's base) */
enum { STEP_VIEW = 1, STEP_OPTIMIZER = 2, STEP_INPLACE = 4, STEP_SUM = 8, STEP_ONTO_LAST = 16 };

/* A step's inputs and outputs, from the build's compact copy (build.io). */
typedef struct step_io {
    const int *in, *out;
    int n_in, n_out;
} step_io;

typedef struct build {
    const ot_graph *g;
    const int *order;
    int n, nv;
    const ot_plan_device *dev;
    const ot_plan_options *opt;
    const ot_plan_nodes *nodes; /* NULL: scan_steps reads the graph's nodes */
    ot_plan_scratch *scr;       /* where the plan and the tables come from: NULL for the heap */
    ot_error *err;
    ot_plan *p;
    int *step_of;   /* per node: its schedule step, -1 when not scheduled */
    bool *used;     /* per value: some scheduled node reads or writes it */
    bool *released; /* per value: its block went back to the free list or to an in-place successor */
    bool *is_output, *external;
    int *opt_read;  /* per value: optimizer nodes that read it */
    int *opt_first; /* per value: first step of an optimizer node reading it; INT_MAX when none */
    int *reach;     /* per value: last read of it or of any view that may alias it */
    int *first_read; /* per value: first step that reads it; INT_MAX when none */
    /* per value: the step that writes it and the last that reads it (-1: none), as
     * scan_steps finds them: classify_values then writes each plan value whole, in the
     * one pass over those 64-byte structs that sets them (a pass of its own before the
     * scan, to clear them, missed the cache along all of them again on big graphs) */
    int *def_of, *last_of;
    unsigned char *step_flags; /* per step: STEP_VIEW, STEP_OPTIMIZER */
    unsigned char *step_phase; /* per step: the node's ot_phase */
    /* Without nodes, the value ids every step reads and writes, copied once from the
     * nodes (648 bytes each) in schedule order: step s's inputs are io[io_start[s] .. +
     * n_in[s]), its outputs the rest up to io_start[s + 1]; with nodes, io_of reads those. */
    int *io, *io_start, *n_in;
    int io_cap;
    int *slab_key, *slab_ids;
    /* The values classify_values pins (not external), in id order: the pinned region's
     * passes run over these, not over every 64-byte plan value (a miss each, big graphs). */
    int *pinned_ids, n_pinned;
    int n_views; /* steps flagged STEP_VIEW */
    int n_params;               /* params in the param slab (slab keys 0..n_params-1) */
    int *sort_count, *sort_tmp; /* sort_by_key's buffers (nv + 2 each) */
    ot_tensor *tin, *tout;
    int max_io;
    ot_fit al;
    size_t live[OT_MEM_COUNT]; /* bytes of live blocks per category during the walk */
    size_t live_sum;           /* their sum, kept with them (live_add, live_sub): the timeline's entry */
    size_t max_end;            /* highest end offset of any block so far */
    size_t limit;              /* give up once the peak must pass it (ot_plan_build_bounded) */
    bool exceeded;             /* it does: the plan is incomplete */
    size_t base;               /* start of the transient region */
    /* The blocks of the walk, for the second placement (plan/plan_walk.c): span[k] is
     * the k-th block handed out, with its aligned size and the steps it is live;
     * blk_of and recv_blk_of give a value's block and its receive slots' (an in-place
     * successor takes its input's). in_use: aligned bytes of the live transient blocks,
     * max_in_use their most at any step (no placement's region ends below it). */
    ot_fit_span *span;
    int n_span, span_cap;
    int *blk_of, *recv_blk_of;
    int *ws_blk; /* per step: the span of its workspace (set where p->ws_offset is) */
    size_t in_use, max_in_use;
    /* The most blocks the second placement takes (ot_plan_options.refit_max_blocks;
     * 0: none), and while the walk has at most that many, the live bytes per category
     * after each step's blocks are placed (n_steps x OT_MEM_COUNT): the second
     * placement's peak step takes its at_peak from there. */
    int refit_max;
    size_t *live_at;
} build;

static ot_status oom(const build *b) {
    return ot_fail(b->err, OT_E_MEMORY, "planner: out of memory planning %d values over %d steps", b->nv, b->n);
}

/* Step s's inputs and outputs: from the caller's compact copy or from b->io. Inlined:
 * the walk asks it at every step, and a call returning the struct cost more than it. */
static inline __attribute__((always_inline)) step_io io_of(const build *b, int s) {
    const ot_plan_nodes *t = b->nodes;
    if (t) {
        int id = b->order[s], i = t->in_start[id], o = t->out_start[id];
        return (step_io){.in = t->in_val + i, .n_in = t->in_start[id + 1] - i, .out = t->out_val + o,
                         .n_out = t->out_start[id + 1] - o};
    }
    const int *in = b->io + b->io_start[s];
    return (step_io){.in = in, .n_in = b->n_in[s], .out = in + b->n_in[s],
                     .n_out = b->io_start[s + 1] - b->io_start[s] - b->n_in[s]};
}

/* The value that owns v's memory: v itself, or the base it is a view of. */
static inline int root_of(const ot_plan *p, int v) { return p->values[v].alias_of >= 0 ? p->values[v].alias_of : v; }

/* Bytes of category c becoming live or free: live[c] and their sum move together. */
static inline void live_add(build *b, int c, size_t n) { b->live[c] += n, b->live_sum += n; }
static inline void live_sub(build *b, int c, size_t n) { b->live[c] -= n, b->live_sum -= n; }

/* The transient walk (plan/plan_walk.c): places every transient block and workspace,
 * sets the timeline, the peak and the bytes at it; b->exceeded when the peak passes
 * b->limit (the plan is then incomplete). */
ot_status ot_plan_walk(build *b);

#endif
