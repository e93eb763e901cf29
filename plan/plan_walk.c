/* plan_walk.c — the planner's transient walk (see planner.h): it simulates the
 * schedule, placing every transient block and workspace by best fit (plan/best_fit.h)
 * as it is made, taking blocks over in place and writing gradient contributions into
 * their slots, and records the timeline and the exact peak.
 *
 * A second placement. Best fit does not know when the blocks around a new one will
 * die, so it can leave a hole below the top that no later block fills: the region
 * then ends above the most bytes ever live at once (the bytes in use of the timeline
 * plus the blocks' alignment), which --remat optimal's programme cannot see
 * (docs/remat.md, issue 28). So the walk logs every block it hands out (its aligned
 * size and the steps it is live) and, only when its region ends above that most, places
 * them again knowing every lifetime (plan/refit.h); when that ends lower, its offsets
 * are written into the plan (patch_offsets): every decision of the walk, in place,
 * slots, aliases, timeline, categories, is the same with any offsets (none depends on
 * one), so only the offsets, the peak, its step and the bytes at it change, and those
 * are what the walk would have found handing out the new offsets. (Until 2026-12-06
 * the walk ran a second time handing them out, which cost auto, thousands of refits on
 * a transformer, about a tenth of its time.) The lower peak is kept, so a plan's peak
 * never rises by it; which order or rewrite wins may change.
 *
 * Plans of more than b->refit_max blocks (OT_REFIT_MAX_BLOCKS, or
 * ot_plan_options.refit_max_blocks) keep best fit's placement (the second one's cost
 * is quadratic). A bounded build (a limit) stops once the peak must pass the limit
 * whatever the placement: when the aligned bytes in use do, not when best fit's peak
 * does (past b->refit_max blocks, when best fit's does). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/best_fit.h"
#include "plan/plan_build.h" /* the build's state, shared with plan/planner.c */
#include "plan/refit.h"
#include "plan/scratch.h"
#include "plan/workspace.h"

/* A block of size (aligned) bytes from step s, its offset (region-relative) in *off,
 * by best fit, logged as the next span. Returns the span's index; -1 when out of
 * memory. */
static int take_block(build *b, size_t size, int s, size_t *off) {
    int k = b->n_span++;
    if (k == b->span_cap) {
        int cap = b->span_cap ? 2 * b->span_cap : 256;
        size_t ss = sizeof *b->span;
        ot_fit_span *sp = ot_scratch_realloc(b->scr, b->span, ss * (size_t)b->span_cap, ss * (size_t)cap);
        if (!sp) return -1;
        b->span = sp;
        b->span_cap = cap;
    }
    b->span[k] = (ot_fit_span){.size = size, .first = s, .last = b->n - 1};
    *off = ot_fit_alloc(&b->al, size);
    b->in_use += size;
    return k;
}

/* Span k (size aligned bytes at region offset off) is free after step s. */
static int end_block(build *b, int k, size_t off, size_t size, int s) {
    b->span[k].last = s;
    b->in_use -= size;
    return ot_fit_free(&b->al, off, size);
}

/* In place: output o of node nd at step s takes over its first input's block when the
 * op allows it, the block is transient, nobody reads it (nor any alias of it) after
 * this step, the sizes match, and no other input of this node is another view of
 * the same block (an elementwise kernel with out == in[0] may read in[0][i] after
 * writing out[i], but not another view of those bytes). */
static bool try_inplace(build *b, int s, const step_io *io, int o) {
    ot_plan *p = b->p;
    int k0 = b->step_flags[s] & STEP_ONTO_LAST ? io->n_in - 1 : 0;
    int i0 = io->n_in > 0 ? io->in[k0] : -1;
    if ((b->opt && b->opt->no_inplace) || i0 < 0 || i0 == o || !(b->step_flags[s] & STEP_INPLACE)) return false;
    int r = root_of(p, i0);
    ot_plan_value *po = &p->values[o], *pi = &p->values[i0], *pr = &p->values[r];
    if (pr->pinned || pr->offset < 0 || b->released[r] || pr->last_step != s || pi->nbytes != po->nbytes ||
        pr->nbytes != po->nbytes || pr->recv_bytes)
        return false;
    for (int k = 0; k < io->n_in; k++) {
        int v = io->in[k];
        if (k != k0 && v >= 0 && v != i0 && root_of(p, v) == r) return false;
    }
    po->offset = pr->offset;
    po->inplace_of = r;
    b->blk_of[o] = b->blk_of[r]; /* the same block, live on until o's last reader */
    b->released[r] = true; /* its block now belongs to o */
    live_sub(b, pr->category, pr->nbytes);
    live_add(b, po->category, po->nbytes);
    p->total[po->category] += po->nbytes;
    return true;
}

/* A param gradient's first contribution: output o of the node at step s is written
 * straight into the pinned slot of the gradient that a later Sum makes from it (o is
 * that Sum's input 0, or a GatherGrad's base, and read by nothing else, the sizes
 * match), so the Sum (or the GatherGrad) adds the other contributions in place and o costs no bytes of its own while the rest of
 * the backward pass runs (a tied embedding's head contribution waits from the loss
 * to the embedding's gradient). Nothing else reads or writes that slot before the
 * Sum defines the gradient. */
static bool try_slot(build *b, int s, int o) {
    const ot_graph *g = b->g;
    ot_plan *p = b->p;
    const ot_plan_nodes *t = b->nodes;
    if (b->opt && b->opt->no_inplace) return false;
    /* from the compact copy when there is one: the value and node structs are a cache
     * miss each on a big graph, and this runs for every block placed */
    int n_cons = t ? t->cons_start[o + 1] - t->cons_start[o] : g->values[o].n_consumers;
    if (n_cons != 1) return false;
    int c = t ? t->cons[t->cons_start[o]] : g->values[o].consumers[0];
    if (c < 0 || c >= g->n_nodes || b->step_of[c] <= s) return false;
    int gr;
    if (t) {
        int n_in = t->in_start[c + 1] - t->in_start[c];
        bool onto = t->flags[c] & STEP_ONTO_LAST;
        int in0 = n_in >= 2 ? t->in_val[t->in_start[c] + (onto ? n_in - 1 : 0)] : -1;
        gr = t->out_start[c + 1] > t->out_start[c] ? t->out_val[t->out_start[c]] : -1;
        if (!(t->flags[c] & (STEP_SUM | STEP_ONTO_LAST)) || in0 != o || gr < 0) return false;
    } else {
        const ot_node *sum = &g->nodes[c];
        bool onto = ot_plan_node_flags(sum) & STEP_ONTO_LAST;
        if ((sum->op != OT_OP_SUM && !onto) || sum->n_inputs < 2 || sum->inputs[onto ? sum->n_inputs - 1 : 0] != o ||
            sum->n_outputs < 1 || sum->outputs[0] < 0)
            return false;
        gr = sum->outputs[0];
    }
    ot_plan_value *po = &p->values[o], *pg = &p->values[gr];
    if (!pg->pinned || pg->external || pg->category != OT_MEM_GRADIENTS || pg->offset < 0 || pg->nbytes != po->nbytes ||
        po->last_step != b->step_of[c] || po->alias_of >= 0)
        return false;
    po->offset = pg->offset;
    po->slot_of = gr;
    b->released[o] = true; /* its bytes are the slot's: nothing to give back */
    return true;
}

/* Offsets of the outputs of the node at step s: an alias points into its base (and
 * takes no block), otherwise a gradient slot, in place or a best-fit block. */
/* Offsets of the outputs of the node at step s: an alias points into its base (and
 * takes no block), otherwise a gradient slot, in place or a block of its own. -1 when
 * out of memory. */
static int place_outputs(build *b, int s, const step_io *io) {
    ot_plan *p = b->p;
    for (int k = 0; k < io->n_out; k++) {
        int o = io->out[k];
        if (o < 0) continue;
        ot_plan_value *po = &p->values[o];
        if (po->alias_of >= 0) {
            const ot_plan_value *pr = &p->values[po->alias_of];
            po->offset = pr->offset >= 0 ? pr->offset + (int64_t)po->alias_offset : -1; /* -1: an external base */
            continue;
        }
        if (po->pinned) continue;
        if (po->nbytes == 0) { /* occupies nothing: any offset is safe */
            po->offset = (int64_t)b->base;
            continue;
        }
        for (int blk = 0; blk < 2; blk++) { /* the value's block (unless taken over), then its receive slots */
            size_t nb = blk ? po->recv_bytes : po->nbytes, off;
            if (nb == 0 || (!blk && (try_slot(b, s, o) || (k == 0 && try_inplace(b, s, io, o))))) continue;
            int sk = take_block(b, ot_plan_aligned(nb), s, &off);
            if (sk < 0) return -1;
            *(blk ? &b->recv_blk_of[o] : &b->blk_of[o]) = sk;
            *(blk ? &po->recv_offset : &po->offset) = (int64_t)(b->base + off);
            if (b->base + off + nb > b->max_end) b->max_end = b->base + off + nb;
            live_add(b, po->category, nb);
            p->total[po->category] += nb;
        }
    }
    return 0;
}

/* The workspace of the node at step s, if the device asks for one: a block alive only
 * during the step (span *sk, at region offset *off; b->ws_blk[s] too, for the second
 * placement). Returns its size; SIZE_MAX when out of memory. */
static size_t place_workspace(build *b, int s, size_t *off, int *sk) {
    ot_plan *p = b->p;
    p->ws_offset[s] = -1;
    /* the device reads the node itself */
    size_t ws = b->dev ? ot_plan_node_workspace(b->dev, b->g, &b->g->nodes[b->order[s]], b->tin, b->tout) : 0;
    if (ws == 0) return 0;
    if ((*sk = take_block(b, ot_plan_aligned(ws), s, off)) < 0) return SIZE_MAX;
    b->ws_blk[s] = *sk;
    p->ws_offset[s] = (int64_t)(b->base + *off);
    p->ws_bytes[s] = ws;
    if (b->base + *off + ws > b->max_end) b->max_end = b->base + *off + ws;
    live_add(b, OT_MEM_WORKSPACE, ws);
    p->total[OT_MEM_WORKSPACE] += ws;
    return ws;
}

/* After step s: the workspace, and the blocks whose last reader (of the value or of
 * any alias of it) this was, go back to the free list. */
static int release_step(build *b, int s, const step_io *io, size_t ws, size_t ws_off, int ws_blk) {
    ot_plan *p = b->p;
    if (ws > 0) {
        if (end_block(b, ws_blk, ws_off, ot_plan_aligned(ws), s)) return -1;
        live_sub(b, OT_MEM_WORKSPACE, ws);
    }
    for (int pass = 0; pass < 2; pass++) {
        const int *ids = pass == 0 ? io->in : io->out;
        int cnt = pass == 0 ? io->n_in : io->n_out;
        for (int k = 0; k < cnt; k++) {
            if (ids[k] < 0) continue;
            int v = root_of(p, ids[k]);
            ot_plan_value *pv = &p->values[v];
            if (pv->pinned || b->released[v] || pv->last_step != s || pv->offset < 0) continue;
            b->released[v] = true;
            if (pv->recv_bytes && end_block(b, b->recv_blk_of[v], (size_t)pv->recv_offset - b->base,
                                            ot_plan_aligned(pv->recv_bytes), s))
                return -1;
            live_sub(b, pv->category, pv->recv_bytes);
            if (pv->nbytes == 0) continue;
            if (end_block(b, b->blk_of[v], (size_t)pv->offset - b->base, ot_plan_aligned(pv->nbytes), s)) return -1;
            live_sub(b, pv->category, pv->nbytes);
        }
    }
    return 0;
}

/* The walk over the schedule: places every transient block by best fit, records the
 * timeline and the live bytes per category when the peak is reached (and, while a
 * second placement may follow, at every step: b->live_at). It stops (b->exceeded)
 * once the aligned bytes in use show that no placement's peak can stay within
 * b->limit. */
static ot_status walk_once(build *b) {
    ot_plan *p = b->p;
    for (int s = 0; s < b->n; s++) {
        step_io io = io_of(b, s);
        size_t end_before = b->max_end, ws_off = 0;
        int ws_blk = -1;
        if (place_outputs(b, s, &io)) return oom(b);
        size_t ws = place_workspace(b, s, &ws_off, &ws_blk);
        if (ws == SIZE_MAX) return oom(b);
        p->timeline[s] = b->live_sum; /* the sum over the categories */
        if (b->in_use > b->max_in_use) b->max_in_use = b->in_use;
        if (b->max_end > end_before) {
            p->peak_step = s;
            memcpy(p->at_peak, b->live, sizeof b->live);
        }
        if (b->n_span <= b->refit_max) memcpy(b->live_at + (size_t)s * OT_MEM_COUNT, b->live, sizeof b->live);
        if (release_step(b, s, &io, ws, ws_off, ws_blk)) return oom(b);
        /* max_in_use only grows, and any placement's peak is at least base + max_in_use
         * less the top block's alignment (OT_PLAN_ALIGN - 1); past b->refit_max blocks
         * best fit's peak stands, and it only grows too */
        if (b->max_end > b->limit &&
            (b->n_span > b->refit_max || b->base + b->max_in_use > b->limit + (OT_PLAN_ALIGN - 1))) {
            b->exceeded = true;
            return OT_OK;
        }
    }
    return OT_OK;
}

/* Where the walk started (place_pinned's end of the region and bytes per category):
 * the second placement's peak starts from it. */
typedef struct walk_start {
    size_t at_peak[OT_MEM_COUNT];
    size_t max_end;
} walk_start;

/* A block of the second placement ending at `end`, made at step s: the peak is the
 * highest end, and its step the first that reaches it (the walk's rule). */
static void note_end(size_t end, int s, size_t *peak, int *step) {
    if (end > *peak || (end == *peak && *step >= 0 && s < *step)) *peak = end, *step = s;
}

/* The second placement's offsets off[] (region-relative, per span) written into the
 * plan: every block-owning value (an in-place successor shares its input's span), its
 * receive slots, every alias (its base's offset moved), every workspace; then the
 * peak, its step and the bytes at it, as the walk would have found them handing out
 * these offsets (none of its decisions depends on an offset, so the timeline, the
 * totals and the categories stand). */
static void patch_offsets(build *b, const walk_start *w, const size_t *off) {
    ot_plan *p = b->p;
    size_t peak = w->max_end, base = b->base;
    int step = -1;
    for (int v = 0; v < b->nv; v++) {
        ot_plan_value *pv = &p->values[v];
        if (pv->pinned || pv->alias_of >= 0 || pv->offset < 0 || pv->nbytes == 0) continue;
        if (pv->recv_bytes) {
            int k = b->recv_blk_of[v];
            pv->recv_offset = (int64_t)(base + off[k]);
            note_end(base + off[k] + pv->recv_bytes, b->span[k].first, &peak, &step);
        }
        if (pv->slot_of >= 0) continue;
        int k = b->blk_of[v];
        pv->offset = (int64_t)(base + off[k]);
        if (pv->inplace_of < 0) note_end(base + off[k] + pv->nbytes, b->span[k].first, &peak, &step);
    }
    for (int s = 0; s < b->n && b->n_views > 0; s++) { /* aliases (a view step's output 0), once every base moved */
        if (!(b->step_flags[s] & STEP_VIEW)) continue;
        ot_plan_value *pv = &p->values[io_of(b, s).out[0]];
        if (pv->alias_of < 0) continue;
        const ot_plan_value *pr = &p->values[pv->alias_of];
        pv->offset = pr->offset >= 0 ? pr->offset + (int64_t)pv->alias_offset : -1;
    }
    for (int s = 0; s < b->n; s++) {
        if (p->ws_offset[s] < 0) continue;
        int k = b->ws_blk[s];
        p->ws_offset[s] = (int64_t)(base + off[k]);
        note_end(base + off[k] + p->ws_bytes[s], s, &peak, &step);
    }
    b->max_end = peak;
    p->peak_step = step;
    if (step >= 0) memcpy(p->at_peak, b->live_at + (size_t)step * OT_MEM_COUNT, sizeof p->at_peak);
    else memcpy(p->at_peak, w->at_peak, sizeof p->at_peak);
}

/* The region's top a plan must reach to meet ot_plan_options.fit_target_bytes (the
 * target less the region's start); SIZE_MAX when there is none, or when the floor
 * (the aligned bytes in use at the busiest step) already passes it: no placement can. */
static size_t fit_goal(const build *b) {
    size_t target = b->opt ? b->opt->fit_target_bytes : 0;
    if (target == 0 || target < b->base || b->max_in_use > target - b->base) return SIZE_MAX;
    return target - b->base;
}

/* Best fit left a hole: places the walk's spans again (plan/refit.h) and, when they
 * end lower, writes those offsets into the plan. The refit gives up as soon as it
 * reaches best fit's top, or a top whose peak must pass b->limit; with a target in
 * reach (fit_goal) it never stops at the limit, so that whether the search runs (the
 * lower top of the three still passes the target) is the same in a bounded build as in
 * an unbounded one, and so is the plan. */
static ot_status refit(build *b, const walk_start *w) {
    size_t give_up = b->al.top, top = 0, goal = fit_goal(b);
    if (goal == SIZE_MAX && b->limit < SIZE_MAX - OT_PLAN_ALIGN && b->limit + OT_PLAN_ALIGN > b->base &&
        b->limit + OT_PLAN_ALIGN - b->base < give_up)
        give_up = b->limit + OT_PLAN_ALIGN - b->base;
    size_t *off = ot_scratch_alloc(b->scr, sizeof(size_t) * (size_t)(b->n_span + 1));
    if (!off) return oom(b);
    int rc = ot_fit_refit(b->span, b->n_span, b->max_in_use, give_up, b->scr, off, &top);
    size_t *off2 = NULL;
    if (rc >= 0 && goal != SIZE_MAX && (rc ? b->al.top : top) > goal) { /* missed narrowly: search */
        int tries = 0, rs = -1;
        if ((off2 = ot_scratch_alloc(b->scr, sizeof(size_t) * (size_t)(b->n_span + 1))))
            rs = ot_fit_search(b->span, b->n_span, goal, b->scr, off2, &top, &tries);
        if (rs == 0) { /* else the refit's offsets, if lower than best fit's, stand */
            memcpy(off, off2, sizeof(size_t) * (size_t)b->n_span);
            rc = 0;
        }
        if (rs < 0) rc = -1;
    }
    if (rc == 0) patch_offsets(b, w, off);
    ot_scratch_release(b->scr, off2);
    ot_scratch_release(b->scr, off);
    return rc < 0 ? oom(b) : OT_OK;
}

ot_status ot_plan_walk(build *b) {
    ot_plan *p = b->p;
    b->tin = ot_scratch_calloc(b->scr, (size_t)b->max_io, sizeof *b->tin);
    b->tout = ot_scratch_calloc(b->scr, (size_t)b->max_io, sizeof *b->tout);
    b->live_at = ot_scratch_alloc(b->scr, sizeof(size_t) * OT_MEM_COUNT * (size_t)(b->n + 1));
    b->ws_blk = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(b->n + 1));
    if (!b->tin || !b->tout || !b->live_at || !b->ws_blk) return oom(b);
    walk_start w = {.max_end = b->max_end};
    memcpy(w.at_peak, p->at_peak, sizeof w.at_peak);
    ot_status st = walk_once(b);
    if (!st && !b->exceeded && b->al.top > b->max_in_use && b->n_span <= b->refit_max)
        st = refit(b, &w); /* a hole below the top */
    if (st || b->exceeded) return st;
    b->exceeded = b->max_end > b->limit;
    p->peak_bytes = b->max_end;
    p->best_fit_stands = b->n_span > b->refit_max;
    return OT_OK;
}
