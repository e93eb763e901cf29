/* optimal_prechain.c — the recompute chains of remat/optimal_chain.h found before the
 * first solve, by walking the graph, instead of one rejected plan at a time.
 *
 * Why: a chain holds for every plan (optimal_chain.h), but optimal.c learns one only
 * from a plan the planner rejects, and each such plan costs an exact round. On the
 * zoo's bert at 272,160 bytes (batch 4, SGD) the first round ran its whole share
 * (45 s) to an incumbent of 186,880 FLOPs that the planner put at 275,520 bytes: the
 * GELU of cls/predictions/transform is recomputed whole before the LayerNormGrad
 * that reads its product (step 135), so its Div, Add and Mul outputs are back there,
 * not at their own first backward reads (137, 138); the rows missed 3,360 bytes. The
 * chain found from that plan came too late to matter. Given up front, every such
 * chain is in the first solve's rows.
 *
 * The walk: from every forward node c that reads a value u whose root a recompute can
 * free, every path c = c_0 -> c_1 -> ... -> c_k through outputs v_i (a column each,
 * read by a later forward node c_i) that ends at a saved output w of c_k whose first
 * backward read fb(w) comes before the model's place of c and after u's last forward
 * read. Such a path is exactly what ot_opt_chains_find records from a plan
 * (optimal_chain.c: its literals v_i not kept, w recomputed; root u's root, step
 * fb(w)), so the rows it makes are the ones a rejected plan would add. Paths are
 * bounded in length and count (PRECHAIN_DEPTH, PRECHAIN_MAX): what the walk leaves
 * out the rounds still find lazily, as before. The walk visits at most PRECHAIN_VISITS
 * nodes (paths fan out: chain48's 48 layers). */
#include <stdlib.h>

#include "remat/optimal_model.h"
#include "remat/remat_internal.h"

#define PRECHAIN_DEPTH 5           /* values on one path, w included (8: llama at 407,840 lost its proof) */
#define PRECHAIN_MAX 4096          /* chains in all */
#define PRECHAIN_VISITS (1L << 20) /* nodes the walk visits: wide graphs have many paths */

typedef struct walk {
    const ot_opt_chain_view *vw;
    ot_opt_chains *ch;
    ot_opt_lit lits[PRECHAIN_DEPTH];
    int root, lf, limit; /* u's root, its last forward read, place of c */
    long visits;
    bool oom;
} walk;

static bool has_col(const ot_opt_chain_view *vw, int v) {
    return v >= 0 && vw->a->candidate[v] && !vw->a->pinned[v] && vw->col[v] >= 0;
}

/* Whether node id reads a value of root r. A path through such a node adds nothing:
 * its chain from that node (same end, fewer literals) brings r back as early, or, when
 * that end is past the node's place, the node's own clone does (a reader row already). */
static bool reads_root(const ot_opt_chain_view *vw, int id, int r) {
    const ot_node *n = &vw->g->nodes[id];
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] >= 0 && vw->a->candidate[n->inputs[i]] && vw->root[n->inputs[i]] == r) return true;
    return false;
}

/* Extends the path at node id (depth values on it so far). */
static void extend(walk *wk, int id, int depth) {
    const ot_opt_chain_view *vw = wk->vw;
    const ot_graph *g = vw->g;
    const ot_remat_analysis *a = vw->a;
    const ot_node *n = &g->nodes[id];
    if (depth >= PRECHAIN_DEPTH || ++wk->visits > PRECHAIN_VISITS) return;
    for (int o = 0; o < n->n_outputs && !wk->oom && wk->ch->n < PRECHAIN_MAX; o++) {
        int v = n->outputs[o];
        if (!has_col(vw, v)) continue;
        wk->lits[depth] = (ot_opt_lit){vw->col[v], !a->saved[v]};
        int s = vw->first_bwd[v];
        if (a->saved[v] && s != vw->never && s < wk->limit && s > wk->lf &&
            !ot_opt_chains_push(wk->ch, wk->root, s, wk->lits, depth + 1))
            wk->oom = true;
        for (int c = 0; c < g->values[v].n_consumers && !wk->oom; c++) {
            int cid = g->values[v].consumers[c];
            if (cid >= a->n_nodes || a->fwd_pos[cid] <= a->fwd_pos[id] || vw->place[cid] == vw->never ||
                reads_root(vw, cid, wk->root))
                continue;
            extend(wk, cid, depth + 1);
        }
    }
}

ot_status ot_opt_prechains(ot_opt_model *md, ot_error *err) {
    if (md->walked) return OT_OK;
    md->walked = true;
    ot_opt_chain_view view = {md->g, md->a, md->first_bwd, md->last_fwd, md->root, md->col, md->place, OT_OPT_NEVER};
    const ot_opt_chain_view *vw = &view;
    ot_opt_chains *ch = &md->chains;
    const ot_graph *g = vw->g;
    const ot_remat_analysis *a = vw->a;
    bool *freeable = ot_xcalloc((size_t)a->n_values + 1, sizeof(bool));
    if (!freeable) return ot_opt_oom(err);
    for (int v = 0; v < a->n_values; v++)
        if (has_col(vw, v) && a->saved[v]) freeable[vw->root[v]] = true;
    walk wk = {.vw = vw, .ch = ch};
    for (int p = 0; p < a->n_fwd && !wk.oom && ch->n < PRECHAIN_MAX; p++) {
        const ot_node *n = &g->nodes[a->fwd[p]];
        if (vw->place[n->id] == vw->never) continue;
        for (int i = 0; i < n->n_inputs; i++) {
            int u = n->inputs[i];
            bool again = false; /* one walk per root that c reads */
            for (int j = 0; j < i && u >= 0; j++)
                again |= n->inputs[j] >= 0 && vw->root[n->inputs[j]] == vw->root[u];
            if (u < 0 || again || !a->candidate[u] || !freeable[vw->root[u]]) continue;
            wk.root = vw->root[u];
            wk.lf = vw->last_fwd[wk.root];
            wk.limit = vw->place[n->id];
            extend(&wk, n->id, 0);
        }
    }
    free(freeable);
    return wk.oom ? ot_opt_oom(err) : OT_OK;
}
