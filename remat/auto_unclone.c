/* auto_unclone.c — auto's unclone moves (remat/auto.c's first phase, and its last
 * stage): keep every recomputed value whose chain clones one node, so that the node is
 * cloned no more, then recompute other kept values until the peak fits again.
 *
 * No exchange of one value removes a clone that several recomputed values share (the
 * QKV MatMul three Transposes read). The first phase tries the few costliest clones
 * only. The last stage tries every clone that costs FLOPs, cheap ones too (issue 28,
 * the 4-layer GPT "gpt4_d128" at half of its range, batch 8 x 64): there auto
 * recomputed blocks 1-3's Q, K and V Transposes from the Split outputs it kept for
 * them, and kept LayerNorm outputs, 7,610,368 extra FLOPs; optimal keeps the
 * Transposes and recomputes LayerNorm outputs, 6,299,648, at the same peak. Keeping a
 * block's Transposes (unclone the Transpose) and recomputing the kept values of most
 * bytes per FLOP to fit, then flips, reaches 6,430,720 (1.02x). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "remat/auto_search.h"
#include "remat/remat_internal.h"

/* Expensive clones the first phase's unclone rounds try; the drops a move may add to
 * fit again, and the drops measured per step. */
#define UNCLONE_NODES 4
#define UNCLONE_REPAIRS 8
#define UNCLONE_TRIES 6

/* True when recomputing saved value w under keep clones node p (w's chain reaches it). */
bool ot_remat_chain_reaches(const ot_graph *g, const ot_remat_analysis *a, const bool *keep, int w, int p, int *stamp,
                            int tag, int *stack) {
    int sp = 0;
    stack[sp++] = g->values[w].producer;
    stamp[g->values[w].producer] = tag;
    while (sp > 0) {
        const ot_node *n = &g->nodes[stack[--sp]];
        if (n->id == p) return true;
        for (int i = 0; i < n->n_inputs; i++) {
            int u = n->inputs[i], q = u >= 0 ? g->values[u].producer : -1;
            if (u < 0 || !a->candidate[u] || keep[u] || stamp[q] == tag) continue;
            stamp[q] = tag;
            stack[sp++] = q;
        }
    }
    return false;
}

/* One unclone move: keep every recomputed value whose chain clones p (a matmul three
 * Transposes share, say: no exchange of one value removes it), then recompute, one by
 * one, the kept values of best bytes per chain FLOP (cf) until the peak fits. */
static ot_status unclone_one(ot_remat_search *s, bool *keep, const int *vars, int n, const double *cf, int p,
                             int *stamp, int *tag, int *stack, bool *group, uint64_t *seen, int *n_seen,
                             ot_error *err) {
    const ot_remat_analysis *a = s->a;
    memcpy(keep, s->best, (size_t)a->n_values * sizeof(bool));
    int n_kept = 0;
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the group's indices */
    for (int i = 0; i < n; i++) {
        group[i] = !keep[vars[i]] && ot_remat_chain_reaches(s->g, a, s->best, vars[i], p, stamp, ++*tag, stack);
        if (group[i]) keep[vars[i]] = true, n_kept++, h = (h ^ (uint64_t)i) * 1099511628211ull;
    }
    for (int k = 0; k < *n_seen; k++)
        if (seen[k] == h) return OT_OK; /* the same group as a costlier clone's, this round */
    if (!n_kept) return OT_OK;
    seen[(*n_seen)++] = h;
    int64_t peak = 0;
    ot_status st = ot_remat_search_try(s, keep, &peak, NULL, err);
    /* Peaks are not monotone (a recomputed residual Add may raise it): each repair
     * measures the UNCLONE_TRIES best-ranked drops and takes the lowest peak. */
    ot_remat_ranked cand[UNCLONE_TRIES];
    for (int r = 0; r < UNCLONE_REPAIRS && st == OT_OK && peak > s->budget; r++) {
        int nc = 0;
        for (int i = 0; i < n; i++) {
            if (!keep[vars[i]] || group[i]) continue;
            ot_remat_ranked c = {i, (double)ot_remat_value_bytes(s->g, vars[i]) / (1.0 + cf[i])};
            int at = nc < UNCLONE_TRIES ? nc++ : UNCLONE_TRIES;
            while (at > 0 && ot_remat_ranked_desc(&c, &cand[at - 1]) < 0) {
                if (at < UNCLONE_TRIES) cand[at] = cand[at - 1];
                at--;
            }
            if (at < UNCLONE_TRIES) cand[at] = c;
        }
        int pick = -1;
        int64_t pick_peak = peak;
        for (int k = 0; k < nc && st == OT_OK; k++) {
            int64_t pk = 0;
            keep[vars[cand[k].v]] = false;
            st = ot_remat_search_try(s, keep, &pk, NULL, err);
            keep[vars[cand[k].v]] = true;
            if (pk < pick_peak) pick_peak = pk, pick = cand[k].v;
        }
        if (pick < 0) break; /* no drop lowers the peak */
        keep[vars[pick]] = false;
        peak = pick_peak;
    }
    return st;
}

int ot_remat_costly_clones(const ot_remat_search *s, bool *cloned, int *stack, ot_remat_ranked *top) {
    const ot_remat_analysis *a = s->a;
    memset(cloned, 0, (size_t)a->n_nodes * sizeof(bool));
    ot_remat_mark_clones(s->g, a, s->best, cloned, stack);
    int m = 0;
    for (int id = 0; id < a->n_nodes; id++)
        if (cloned[id] && a->node_flops[id] > 0.0) top[m++] = (ot_remat_ranked){id, a->node_flops[id]};
    qsort(top, (size_t)m, sizeof(ot_remat_ranked), ot_remat_ranked_desc);
    return m;
}

ot_status ot_remat_unclone_search(ot_remat_search *s, bool *keep, const int *vars, int n, bool cheap_too,
                                  ot_error *err) {
    const ot_remat_analysis *a = s->a;
    int *stamp = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(int)),
        *stack = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(int));
    bool *cloned = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(bool)), *group = ot_xcalloc((size_t)n + 1, sizeof(bool));
    int *mstack = ot_xcalloc(ot_remat_stack_room(s->g, a), sizeof(int));
    double *cf = ot_xcalloc((size_t)n + 1, sizeof(double));
    ot_remat_ranked *top = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(ot_remat_ranked));
    uint64_t *seen = ot_xcalloc((size_t)a->n_nodes + 1, sizeof(uint64_t));
    ot_status st = OT_OK;
    if (!stamp || !stack || !cloned || !group || !mstack || !cf || !top || !seen)
        st = ot_fail(err, OT_E_MEMORY, "remat auto: out of memory for %d nodes", a->n_nodes);
    int tag = 0;
    for (int i = 0; i < n && !st; i++)
        cf[i] = ot_remat_closure_flops(s->g, a, vars[i], stamp, ++tag, stack);
    bool improved = s->have_best;
    for (int round = 0; round < 4 && improved && !st; round++) {
        improved = false;
        int m = ot_remat_costly_clones(s, cloned, mstack, top), n_seen = 0;
        for (int k = 0; k < m && (cheap_too || k < UNCLONE_NODES) && !st && !improved; k++) {
            double before = s->best_cost;
            st = unclone_one(s, keep, vars, n, cf, top[k].v, stamp, &tag, stack, group, seen, &n_seen, err);
            improved = s->best_cost < before;
        }
    }
    free(stamp), free(stack), free(cloned), free(group), free(mstack), free(cf), free(top), free(seen);
    return st;
}
