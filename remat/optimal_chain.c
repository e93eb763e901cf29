/* optimal_chain.c — finds, in a plan the planner rejected, the recompute chains that
 * run a clone earlier than remat/optimal.c's model places it (why, and why each chain
 * holds for every plan: optimal_chain.h). */
#include <stdlib.h>
#include <string.h>

#include "remat/optimal_model.h"
#include "remat/remat_internal.h"


void ot_opt_chains_free(ot_opt_chains *ch) {
    free(ch->root), free(ch->step), free(ch->start), free(ch->lits);
    memset(ch, 0, sizeof *ch);
}

static bool has_chain(const ot_opt_chains *ch, int root, int step, const ot_opt_lit *lits, int n) {
    for (int i = 0; i < ch->n; i++) {
        if (ch->root[i] != root || ch->step[i] != step || ch->start[i + 1] - ch->start[i] != n) continue;
        const ot_opt_lit *l = ch->lits + ch->start[i];
        int k = 0;
        while (k < n && l[k].col == lits[k].col && l[k].neg == lits[k].neg) k++; /* not memcmp: padding */
        if (k == n) return true;
    }
    return false;
}

static bool push_chain(ot_opt_chains *ch, int root, int step, const ot_opt_lit *lits, int n) {
    if (ch->n + 1 >= ch->cap) {
        int nc = ch->cap ? 2 * ch->cap : 16;
        int *r = realloc(ch->root, (size_t)nc * sizeof(int));
        if (r) ch->root = r;
        int *s = realloc(ch->step, (size_t)nc * sizeof(int));
        if (s) ch->step = s;
        int *st = realloc(ch->start, (size_t)(nc + 1) * sizeof(int));
        if (st) ch->start = st;
        if (!r || !s || !st) return false;
        if (!ch->cap) ch->start[0] = 0;
        ch->cap = nc;
    }
    if (ch->n_lits + n > ch->cap_lits) {
        int nc = ch->cap_lits ? 2 * ch->cap_lits : 64;
        while (nc < ch->n_lits + n) nc *= 2;
        ot_opt_lit *l = realloc(ch->lits, (size_t)nc * sizeof *l);
        if (!l) return false;
        ch->lits = l;
        ch->cap_lits = nc;
    }
    memcpy(ch->lits + ch->n_lits, lits, (size_t)n * sizeof *lits);
    ch->n_lits += n;
    ch->root[ch->n] = root;
    ch->step[ch->n] = step;
    ch->start[++ch->n] = ch->n_lits;
    return true;
}

bool ot_opt_chains_push(ot_opt_chains *ch, int root, int step, const ot_opt_lit *lits, int n) {
    return has_chain(ch, root, step, lits, n) || push_chain(ch, root, step, lits, n);
}

/* Where each clone of the plan really runs (none schedule steps): before the first
 * backward read of a recomputed saved output, or before a consumer's clone that
 * reads an output not kept; next/via say which (next -1: its own output via). */
static void true_places(const ot_opt_chain_view *vw, const bool *keep, const bool *cloned, int *at, int *next,
                        int *via) {
    const ot_graph *g = vw->g;
    const ot_remat_analysis *a = vw->a;
    for (int p = a->n_fwd - 1; p >= 0; p--) {
        const ot_node *n = &g->nodes[a->fwd[p]];
        int best = vw->never, nx = -1, vv = -1;
        at[n->id] = vw->never;
        if (!cloned[n->id]) continue;
        for (int o = 0; o < n->n_outputs; o++) {
            int w = n->outputs[o];
            if (w < 0 || !a->candidate[w] || keep[w]) continue; /* a kept output's readers read the original */
            if (a->saved[w] && vw->first_bwd[w] < best) best = vw->first_bwd[w], nx = -1, vv = w;
            for (int c = 0; c < g->values[w].n_consumers; c++) {
                int cid = g->values[w].consumers[c];
                if (cid < a->n_nodes && a->fwd_pos[cid] > p && cloned[cid] && at[cid] < best)
                    best = at[cid], nx = cid, vv = w;
            }
        }
        at[n->id] = best, next[n->id] = nx, via[n->id] = vv;
    }
}

/* The literals of the chain from clone c (at most room of them); -1 when a value on
 * it has no column (then no literal can state it). */
static int chain_lits(const ot_opt_chain_view *vw, int c, const int *next, const int *via, ot_opt_lit *out,
                      int room) {
    int n = 0;
    for (int cur = c; cur >= 0 && n < room; cur = next[cur]) {
        int v = via[cur];
        if (v < 0 || vw->col[v] < 0) return -1;
        out[n++] = (ot_opt_lit){vw->col[v], !vw->a->saved[v]};
        if (next[cur] < 0) return n;
    }
    return -1;
}

static ot_status find_in(const ot_opt_chain_view *vw, const bool *keep, const bool *cloned, int *at, int *next,
                         int *via, bool *freed, ot_opt_lit *lits, ot_opt_chains *ch, int *added, ot_error *err) {
    const ot_graph *g = vw->g;
    const ot_remat_analysis *a = vw->a;
    true_places(vw, keep, cloned, at, next, via);
    /* a root is freed when no member is kept (optimal.c: z_r <= x_v, z_r <= 1 - k_v) */
    for (int v = 0; v < a->n_values; v++) freed[v] = false;
    for (int v = 0; v < a->n_values; v++)
        if (a->candidate[v] && a->saved[v]) freed[vw->root[v]] = true;
    for (int v = 0; v < a->n_values; v++)
        if (a->candidate[v] && keep[v]) freed[vw->root[v]] = false;
    for (int u = 0; u < a->n_values; u++) {
        int r = vw->root[u];
        if (!a->candidate[u] || !freed[r]) continue;
        for (int c = 0; c < g->values[u].n_consumers; c++) {
            int cid = g->values[u].consumers[c];
            if (cid >= a->n_nodes || a->fwd_pos[cid] < 0 || !cloned[cid]) continue;
            int s = at[cid];
            if (s == vw->never || s >= vw->place[cid] || s <= vw->last_fwd[r]) continue;
            int n = chain_lits(vw, cid, next, via, lits, a->n_values);
            if (n <= 0 || has_chain(ch, r, s, lits, n)) continue;
            if (!push_chain(ch, r, s, lits, n)) return ot_opt_oom(err);
            (*added)++;
        }
    }
    return OT_OK;
}

ot_status ot_opt_chains_find(const ot_opt_chain_view *vw, const bool *keep, ot_opt_chains *ch, int *added,
                             ot_error *err) {
    const ot_remat_analysis *a = vw->a;
    size_t nn = (size_t)a->n_nodes + 1, nv = (size_t)a->n_values + 1;
    bool *cloned = ot_xcalloc(nn, sizeof(bool)), *freed = ot_xcalloc(nv, sizeof(bool));
    int *at = ot_xcalloc(nn, sizeof(int)), *next = ot_xcalloc(nn, sizeof(int)), *via = ot_xcalloc(nn, sizeof(int));
    int *stack = ot_xcalloc(ot_remat_stack_room(vw->g, a), sizeof(int));
    ot_opt_lit *lits = ot_xcalloc(nv, sizeof *lits);
    ot_status st;
    *added = 0;
    if (!cloned || !freed || !at || !next || !via || !stack || !lits) {
        st = ot_opt_oom(err);
    } else {
        ot_remat_mark_clones(vw->g, a, keep, cloned, stack);
        st = find_in(vw, keep, cloned, at, next, via, freed, lits, ch, added, err);
    }
    free(cloned), free(freed), free(at), free(next), free(via), free(stack), free(lits);
    return st;
}
