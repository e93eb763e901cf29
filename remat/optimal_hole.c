/* optimal_hole.c — holes that best fit must leave below the arena's top, as terms of
 * `--remat optimal`'s memory rows (remat/optimal.c), so that the programme sees them.
 *
 * Why: the rows bound bytes in use, and the planner's peak is the highest end offset
 * (plan/planner.h). On chain48 at 431,584 bytes every plan that keeps 20 layers has
 * bytes in use within the budget (less the pinned padding) but peaks 32 bytes over it:
 * the loss's 4-byte seed gradient X (a 64-byte block) is placed at step a, the logits'
 * gradient Y right above it, X dies after step b (Y's producer reads it last) and no
 * later block fits in its 64 bytes, so the backward pass's gradient blocks go on top,
 * 64 bytes above the bytes in use. The model proposed one such plan after another
 * (48 interchangeable layers), each excluded by its own no-good cut, and never closed.
 *
 * The argument, for a block X (aligned size aX) that the planner allocates at a step a
 * of the backward pass and frees after step b, and Y the next block it allocates:
 *  1. G is the gcd of the aligned sizes of every transient value made before X, which
 *     ever of them a plan allocates (offsets are relative to the pinned region's end,
 *     a multiple of 64). Best fit places a block at the start of a free block or on
 *     top, so while only multiples of G are allocated and freed, every block and free
 *     block starts at a multiple of G and is a multiple of G long.
 *  2. A workspace is allocated last in its step and freed first after it. One of at
 *     most G bytes, in a free block, leaves the free blocks as they were; when there
 *     is none, it leaves one free block, at the top. From the first workspace that is
 *     no multiple of G, nothing else may be freed until Y is placed; then at X's
 *     allocation either (S) every free block is a multiple of G, or (R) there is one,
 *     at the top, starting at a multiple of G.
 *  3. With G >= aX + aY: in (S) X goes to the start of the smallest free block F, and
 *     what is left of F (at least G - aX >= aY, smaller than every other free block)
 *     takes Y, when nothing was freed in between; with no free block both go on top;
 *     in (R) X goes to the top block's start (or extends it) and Y into the rest or on
 *     top. Either way X starts at a multiple of G and Y starts where X ends.
 *  4. After step b, X's bytes are part of a free block M that ends where Y starts, so
 *     it is never the top block; while every value made after Y is a multiple of G
 *     (every block below X stays G-aligned and a multiple of G), M starts at a
 *     multiple of G and is aX modulo G long: an allocation at its start takes at most
 *     the part below X, a free next to it adds a multiple of G, and a workspace put
 *     there goes back before anything else. So until Y is freed, M holds X's aX bytes
 *     free: the region's top is at least the aligned bytes of the live blocks plus aX.
 *  5. The peak is at least the top less what the block that last raised it left as
 *     alignment padding (its end is its offset plus its bytes): slack, the most any
 *     value or workspace made before the window's end (X aside: Y lies above it) pads.
 * So at the steps from b + 1 until Y's last read the peak is at least bytes in use +
 * pinned padding + aX - slack, and the term adds aX - slack to the model's bytes there.
 * Like the padding (optimal.c's header), it excludes no plan the planner accepts whose
 * bytes in use the model states exactly or understates and whose steps run as the
 * model assumes (the none plan's order, each clone before the backward step it
 * serves). Clones make blocks of forward values' sizes (multiples of G) and free such
 * blocks, so those in the window change nothing; one that may run by Y's step would,
 * so it switches the term off (its column is 1 only when none of them is cloned).
 * Holes of two blocks X are disjoint (no later X fits in an earlier one's, by 4), so
 * their terms add. */
#include <math.h>
#include <stdlib.h>

#include "plan/planner.h"
#include "remat/optimal_model.h"

typedef ot_opt_model model;

static size_t gcd(size_t x, size_t y) {
    while (y) {
        size_t t = x % y;
        x = y;
        y = t;
    }
    return x;
}

/* One allocation of the planner's best fit in the none plan, in allocation order. */
typedef struct fit_block {
    int step, value; /* value -1: the step's workspace */
    int end;         /* freed after this step (in place, the last taker's last read) */
    size_t size;     /* aligned bytes */
} fit_block;

/* A transient value that gets a block of its own: not pinned, not a view, not a slot,
 * not taken over in place. */
static bool own_block(const ot_plan_value *pv) {
    return !pv->pinned && pv->nbytes > 0 && pv->offset >= 0 && pv->alias_of < 0 && pv->slot_of < 0 &&
           pv->inplace_of < 0;
}

/* A transient value some plan could place by best fit (in place or not). */
static bool transient(const ot_plan_value *pv) { return !pv->pinned && !pv->external && pv->nbytes > 0 && pv->def_step >= 0; }

/* The blocks of the none plan in the order the planner allocates them: per step its
 * outputs in order, then its workspace. */
static fit_block *fit_blocks(const model *md, int *n_out, int *known_out) {
    const ot_plan *p = md->p0;
    const ot_graph *g = md->g;
    int nv = p->n_values, n = 0;
    int *taker = malloc(((size_t)nv + 1) * sizeof(int));
    fit_block *b = malloc(((size_t)nv + (size_t)p->n_steps + 1) * sizeof(fit_block));
    if (!taker || !b) {
        free(taker), free(b);
        return NULL;
    }
    for (int v = 0; v < nv; v++) taker[v] = -1;
    for (int v = 0; v < nv; v++)
        if (p->values[v].inplace_of >= 0) taker[p->values[v].inplace_of] = v;
    /* Steps up to the first node the measure added and took away again (the optimizer's:
     * train/session.c): past it the order of its outputs is unknown, so the window stops. */
    int known = 0;
    while (known < p->n_steps && p->order[known] >= 0 && p->order[known] < g->n_nodes) known++;
    for (int s = 0; s < known; s++) {
        const ot_node *nd = &g->nodes[p->order[s]];
        for (int k = 0; k < nd->n_outputs; k++) {
            int v = nd->outputs[k];
            if (v < 0 || v >= nv || !own_block(&p->values[v]) || p->values[v].def_step != s) continue;
            int last = v;
            for (int hops = 0; taker[last] >= 0 && hops < nv; hops++) last = taker[last];
            b[n++] = (fit_block){s, v, p->values[last].last_step, ot_plan_aligned(p->values[v].nbytes)};
        }
        if (p->ws_bytes[s] > 0) b[n++] = (fit_block){s, -1, s, ot_plan_aligned(p->ws_bytes[s])};
    }
    free(taker);
    *n_out = n;
    *known_out = known;
    return b;
}

/* Index of output v among the outputs of the node at its step. */
static int out_index(const model *md, int v) {
    const ot_node *nd = &md->g->nodes[md->p0->order[md->p0->values[v].def_step]];
    for (int k = 0; k < nd->n_outputs; k++)
        if (nd->outputs[k] == v) return k;
    return nd->n_outputs;
}

/* G of point 1: the gcd of the aligned sizes of every transient value made before X
 * (at an earlier step, or earlier among X's step's outputs), which ever of them a
 * plan allocates. 0: nothing. */
static size_t grain_before(const model *md, int x) {
    const ot_plan *p = md->p0;
    int a = p->values[x].def_step, kx = out_index(md, x);
    size_t gr = 0;
    for (int v = 0; v < p->n_values; v++) {
        const ot_plan_value *pv = &p->values[v];
        if (transient(pv) && (pv->def_step < a || (pv->def_step == a && out_index(md, v) < kx)))
            gr = gcd(gr, ot_plan_aligned(pv->nbytes));
    }
    return gr;
}

/* Point 1 with workspaces: a workspace is allocated last in its step and freed first
 * after it, so one of at most G bytes leaves the free blocks as they were, or, when
 * there were none, one free block at the top; until something else is freed, every
 * later allocation (a multiple of G, or another such workspace) keeps that so: either
 * every free block is a multiple of G, or there is just one, at the top, and X and Y
 * then lie next to each other too (X at its start, Y after X in what is left of it or
 * on top). The first step from which nothing but workspaces may be freed: the first
 * workspace that is no multiple of G, else X's step; -1 when one exceeds G. */
static int first_odd_workspace(const model *md, int a, size_t gr) {
    const ot_plan *p = md->p0;
    for (int s = 0; s < a; s++) {
        size_t w = ot_plan_aligned(p->ws_bytes[s]);
        if (p->ws_bytes[s] == 0 || (gr && w % gr == 0)) continue;
        for (int r = s; r < a; r++)
            if (p->ws_bytes[r] > 0 && gr && ot_plan_aligned(p->ws_bytes[r]) > gr) return -1;
        return s;
    }
    return a;
}

/* Whether some plan may free a block other than a workspace after a step in
 * [from, to): a block of the none plan freed there, or a transient value read there
 * in the forward pass (a plan that recomputes it frees it there; in the backward pass
 * a recomputed value is read from its clone, which the hole's column answers for). */
static bool frees_in(const model *md, const fit_block *bl, int n, int from, int to) {
    const ot_plan *p = md->p0;
    for (int i = 0; i < n; i++)
        if (bl[i].value >= 0 && bl[i].end >= from && bl[i].end < to) return true;
    for (int s = from; s < to && s < p->backward_step; s++) {
        const ot_node *nd = &md->g->nodes[p->order[s]];
        for (int k = 0; k < nd->n_inputs; k++)
            if (nd->inputs[k] >= 0 && transient(&p->values[nd->inputs[k]])) return true;
    }
    return false;
}

/* Point 4: the most alignment padding of a value or workspace made before step end,
 * X aside. */
static size_t slack_before(const model *md, int x, int end) {
    const ot_plan *p = md->p0;
    size_t most = 0;
    for (int v = 0; v < p->n_values; v++) {
        const ot_plan_value *pv = &p->values[v];
        if (v != x && transient(pv) && pv->def_step < end && ot_plan_aligned(pv->nbytes) - pv->nbytes > most)
            most = ot_plan_aligned(pv->nbytes) - pv->nbytes;
    }
    for (int s = 0; s < end && s < p->n_steps; s++)
        if (p->ws_bytes[s] > 0 && ot_plan_aligned(p->ws_bytes[s]) - p->ws_bytes[s] > most)
            most = ot_plan_aligned(p->ws_bytes[s]) - p->ws_bytes[s];
    return most;
}

/* Per node id: the earliest step of the none schedule at which a clone of it may run
 * (OT_OPT_NEVER: none). A clone runs when the node is cloned (r_p, so it has a
 * column), before the first backward read of a saved output the programme may
 * recompute, or before a clone of a consumer. Tighter than the model's reach, which
 * also follows consumers that are never cloned (the head whose output, the logits,
 * is pinned: on chain48 that put every layer's clone at the loss's gradient). */
static int *clone_steps(const model *md) {
    const ot_graph *g = md->g;
    const ot_remat_analysis *a = md->a;
    int *at = malloc(((size_t)a->n_nodes + 1) * sizeof(int));
    if (!at) return NULL;
    for (int id = 0; id < a->n_nodes; id++) at[id] = OT_OPT_NEVER;
    for (int q = a->n_fwd - 1; q >= 0; q--) {
        const ot_node *nd = &g->nodes[a->fwd[q]];
        if (md->rcol[nd->id] < 0) continue;
        int r = OT_OPT_NEVER;
        for (int o = 0; o < nd->n_outputs; o++) {
            int w = nd->outputs[o];
            if (w < 0 || !a->candidate[w]) continue;
            if (a->saved[w] && md->col[w] >= 0 && md->first_bwd[w] < r) r = md->first_bwd[w];
            for (int c = 0; c < g->values[w].n_consumers; c++) {
                int cid = g->values[w].consumers[c];
                if (cid < a->n_nodes && a->fwd_pos[cid] > q && at[cid] < r) r = at[cid];
            }
        }
        at[nd->id] = r;
    }
    return at;
}

/* The term for X = blocks[k] (points 1-4) over steps [*start, *end); *start = *end
 * when there is none. *ystep: Y's step. */
static void hole_of(const model *md, const fit_block *bl, int n, int known, int k, int *start, int *end, int *ystep,
                    size_t *bytes) {
    const ot_plan *p = md->p0;
    const fit_block *x = &bl[k], *y = k + 1 < n ? &bl[k + 1] : NULL;
    *start = *end = 0;
    if (x->value < 0 || x->step < p->backward_step || !y || y->value < 0 || y->step > x->end) return;
    size_t gr = grain_before(md, x->value);
    if (gr && gr < x->size + y->size) return;
    int a = x->step, b = x->end, stop = y->end + 1; /* Y bounds the hole while t <= stop - 1 */
    int from = first_odd_workspace(md, a, gr);
    if (from < 0 || frees_in(md, bl, n, from, y->step)) return; /* Y may go elsewhere */
    if (stop > known) stop = known;
    /* the first value made after Y whose size is no multiple of G (point 3) */
    int ky = out_index(md, y->value);
    for (int v = 0; v < p->n_values; v++) {
        const ot_plan_value *pv = &p->values[v];
        if (!transient(pv) || pv->def_step < y->step || pv->def_step >= stop || v == y->value) continue;
        if (gr && ot_plan_aligned(pv->nbytes) % gr == 0) continue;
        if (pv->def_step > y->step || out_index(md, v) > ky) stop = pv->def_step;
    }
    size_t slack = slack_before(md, x->value, stop);
    if (b + 1 >= stop || slack >= x->size) return;
    *start = b + 1, *end = stop, *ystep = y->step, *bytes = x->size - slack;
}

/* The clones that may run by Y's step (before X, or between X and Y), whose r_p
 * switch a hole off: the allocations and frees up to Y are then no longer the none
 * plan's. Clones later on make blocks of forward values' sizes, multiples of G. */
static int guard_cols(const model *md, const int *clone_at, int ystep, int *lit) {
    int n = 0;
    for (int id = 0; id < md->a->n_nodes; id++)
        if (md->rcol[id] >= 0 && clone_at[id] <= ystep) lit[n++] = md->rcol[id];
    return n;
}

/* The column of one hole: fixed at 1, or h >= 1 - (sum of the guard's columns): the
 * rows never want more bytes, so h is 1 exactly when none of them is. */
static int hole_col(model *md, const int *lit, int n_lit) {
    ot_mip *mp = &md->mip;
    int h = ot_mip_add_col(mp, 0.0, n_lit ? 0.0 : 1.0, 1.0, false);
    if (h < 0 || !n_lit) return h;
    int row = ot_mip_add_row(mp, 1.0, HUGE_VAL);
    if (row < 0 || !ot_mip_add_coef(mp, row, h, 1.0)) return -1;
    for (int i = 0; i < n_lit; i++)
        if (!ot_mip_add_coef(mp, row, lit[i], 1.0)) return -1;
    return h;
}

ot_status ot_opt_hole_terms(model *md, ot_error *err) {
    const ot_plan *p = md->p0;
    /* The argument is about best fit's placement. A plan with few enough blocks is
     * placed again where best fit leaves a hole (plan/refit.h), which closes these
     * holes, so the terms hold only where best fit's placement stands: the plain
     * plan has too many blocks for the second placement, and every plan the model
     * covers has at least its blocks (clones only add). */
    if (!p || !p->best_fit_stands || p->n_steps != md->m0.n_steps) return OT_OK;
    for (int s = 0; s < p->n_steps; s++)
        if (p->order[s] != md->m0.order[s]) return OT_OK; /* not the model's schedule */
    int n = 0, known = 0;
    fit_block *bl = fit_blocks(md, &n, &known);
    int *clone_at = clone_steps(md);
    int *lit = malloc(((size_t)md->a->n_nodes + 1) * sizeof(int));
    ot_status st = !bl || !clone_at || !lit ? ot_opt_oom(err) : OT_OK;
    for (int k = 0; k < n && !st; k++) {
        int start, end, ystep = 0;
        size_t bytes = 0;
        hole_of(md, bl, n, known, k, &start, &end, &ystep, &bytes);
        if (start >= end) continue;
        int h = hole_col(md, lit, guard_cols(md, clone_at, ystep, lit));
        if (h < 0 || !ot_opt_add_term(md, h, start, end, (double)bytes / md->unit)) st = ot_opt_oom(err);
    }
    free(bl), free(clone_at), free(lit);
    return st;
}
