/* schedule.c — Kahn's sort taking the ready node with the least (phase rank, anchor,
 * recompute-first, id), in two forms (the eager rule evaluated once per node, or again
 * whenever a value's readers run), the one with the smaller planned peak chosen; see
 * schedule.h for the rule, why recompute clones are placed lazily and why nodes that
 * free at least what they allocate run eagerly. The graph is read into compact arrays
 * by plan/sched_read.c, from a base kept in the scratch when the caller declared its
 * rewrite (ot_schedule_base_set, plan/sched_base.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/planner.h"
#include "plan/schedule.h"
#include "plan/scratch.h"
#include "plan/sched_base.h"
#include "plan/sched_internal.h"

/* fused: ot_graph.fuse_update, where an optimizer node ranks with the backward pass
 * and waits only for its edges (its gradient, and every other reader of what it
 * updates: build_edges). */
static int phase_rank(ot_phase p, bool fused) {
    switch (p) {
    case OT_PHASE_FORWARD: return 0;
    case OT_PHASE_LOSS: return 1;
    case OT_PHASE_BACKWARD:
    case OT_PHASE_RECOMPUTE: return 2;
    case OT_PHASE_OPTIMIZER: return fused ? 2 : 3;
    }
    return 2;
}

static int key_cmp(const sched_key *a, const sched_key *b) {
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->anchor != b->anchor) return a->anchor < b->anchor ? -1 : 1;
    if (a->sub != b->sub) return a->sub < b->sub ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* The ready nodes wait in a bitmap over every key a node can be pushed with, in key
 * order: a node's static key and, for a backward node, its eager key (rank 2, anchor
 * -1). Those keys are known once build_keys has run, so sched_init sorts them once
 * (a counting sort: linear) and a push sets the key's bit, a pop takes the lowest set
 * bit. A binary or 4-ary heap of packed keys did the same with a sift per pop through
 * a heap of some 700 nodes on average at 5,000 nodes (the weight Transposes and the
 * input Transposes of a training graph are ready from the forward pass on and waited
 * there all through it): heap_pop was the largest single item of auto's time. Keys
 * are unique and each is pushed at most once per order (a node at its readiness and
 * at most once more when it turns eager), so both pop the same sequence. An entry
 * carries its key, so a node whose key changed (it became eager) is pushed again and
 * its stale entry skipped when popped. */
typedef struct ready_set {
    uint64_t *bits; /* one bit per key position */
    uint64_t *sum;  /* bit w: bits[w] != 0 */
    int n_sum, lo;  /* lo: no sum word below it is nonzero */
} ready_set;

static void ready_push(ready_set *r, int pos) {
    int w = pos >> 6;
    r->bits[w] |= (uint64_t)1 << (pos & 63);
    r->sum[w >> 6] |= (uint64_t)1 << (w & 63);
    if ((w >> 6) < r->lo) r->lo = w >> 6;
}

/* The lowest set position, cleared; -1 when the set is empty. */
static int ready_pop(ready_set *r) {
    while (r->lo < r->n_sum && r->sum[r->lo] == 0) r->lo++;
    if (r->lo == r->n_sum) return -1;
    int w = (r->lo << 6) + __builtin_ctzll(r->sum[r->lo]);
    int b = __builtin_ctzll(r->bits[w]);
    r->bits[w] &= r->bits[w] - 1;
    if (r->bits[w] == 0) r->sum[w >> 6] &= ~((uint64_t)1 << (w & 63));
    return (w << 6) + b;
}

/* The ready set's positions (two per node) must fit an int. */
#define SCHED_MAX_NODES (INT32_MAX / 2 - 2)

static bool node_live(const ot_graph *g, int id) { return id >= 0 && id < g->n_nodes && !g->nodes[id].removed; }

/* True if v is a temporary: produced by a live node, an activation or gradient, not
 * a graph output (a pinned slot that outlives the step). */
static bool temporary(const ot_graph *g, const ot_value *v) {
    if (v->is_graph_output || !node_live(g, v->producer)) return false;
    return v->kind == OT_VK_ACTIVATION || v->kind == OT_VK_GRADIENT;
}

/* A param's gradient, whose writing the eager rule counts as nothing: a graph output,
 * or read by an optimizer node. Unfused it has its slot in the pinned gradient slab, so
 * writing it allocates nothing. With fused updates it is a transient like any other
 * (planner.h), but when only updates read it, they run as soon as it exists (an update
 * frees its gradient and allocates nothing: eager) and free it at once; so the node
 * that writes it (the Cast up of a bf16 weight gradient) frees its inputs for nothing,
 * where counted in full it would wait for its id, at the end of the backward pass, and
 * keep every layer's low gradient alive until then. sched_read.c's flag says the same. */
static bool pinned_gradient(const ot_graph *g, const ot_value *v) {
    if (v->is_graph_output) return true;
    if (v->kind != OT_VK_GRADIENT) return false;
    int n_opt = 0, n_other = 0;
    for (int c = 0; c < v->n_consumers; c++) {
        if (!node_live(g, v->consumers[c])) continue;
        if (g->nodes[v->consumers[c]].phase == OT_PHASE_OPTIMIZER) n_opt++;
        else n_other++;
    }
    return n_opt > 0 && (!g->fuse_update || n_other == 0);
}

/* A backward node is eager when running it frees at least as much as it allocates:
 * the inputs that die at it are as large as its outputs (static shapes), or, with
 * symbolic shapes, its one output has the shape and element size of such an input.
 * readers NULL (static form): an input dies at the node it is read by alone, and
 * every output counts. readers given (dynamic form): an input dies at its last live
 * reader not yet scheduled (readers[v] is 1), and a param's gradient counts as
 * nothing (its slot in the gradient slab is there anyway). Typical cases: a Reshape or
 * ReduceToLike of a gradient, the Sum of gradient contributions, the GEMM that
 * writes a weight's gradient once the other reader of dY has run. Delaying such a
 * node until its id comes up keeps its input alive for nothing. */
static bool node_eager(const ot_graph *g, const ot_node *nd, const int *readers) {
    if (nd->phase != OT_PHASE_BACKWARD && !(g->fuse_update && nd->phase == OT_PHASE_OPTIMIZER)) return false;
    int64_t freed = 0, alloc = 0;
    bool sizes_known = true, shape_match = false;
    int n_out = 0;
    const ot_value *out = NULL;
    for (int k = 0; k < nd->n_outputs; k++) {
        if (nd->outputs[k] < 0 || nd->outputs[k] >= g->n_values) continue;
        out = &g->values[nd->outputs[k]];
        n_out++;
        if (readers && pinned_gradient(g, out)) continue;
        int64_t b = value_bytes(out);
        if (b < 0) sizes_known = false;
        else alloc += b;
    }
    for (int k = 0; k < nd->n_inputs; k++) {
        int vid = nd->inputs[k];
        if (vid < 0 || vid >= g->n_values) continue;
        bool seen = false; /* count a value read twice once */
        for (int j = 0; j < k && !seen; j++) seen = nd->inputs[j] == vid;
        const ot_value *v = &g->values[vid];
        if ((seen && readers) || !temporary(g, v) || v->n_consumers == 0) continue;
        if (readers ? readers[vid] != 1 : false) continue;
        bool only = true;
        for (int c = 0; c < v->n_consumers && !readers; c++)
            if (v->consumers[c] != nd->id) only = false;
        if (!only) continue;
        int64_t b = value_bytes(v);
        if (b < 0) sizes_known = false;
        else freed += b;
        if (n_out == 1 && ot_shape_equal(&v->shape, &out->shape) && ot_dtype_size(v->dtype) == ot_dtype_size(out->dtype))
            shape_match = true;
    }
    if (sizes_known) return freed > 0 && freed >= alloc;
    return shape_match;
}

/* node_eager from the caches: the same answer whenever every size it weighs is known;
 * otherwise (symbolic shapes) it asks node_eager, which also compares shapes. */
static bool node_eager_fast(const sched *s, int id, const int *readers) {
    if (!s->bwd[id]) return false;
    int nv = s->g->n_values;
    int64_t freed = 0, alloc = 0;
    for (int k = s->out_start[id]; k < s->out_start[id + 1]; k++) {
        int o = s->out_val[k];
        if (o < 0 || o >= nv || (readers && (s->vflags[o] & V_PINNED_GRADIENT))) continue;
        if (s->vbytes[o] < 0) return node_eager(s->g, &s->g->nodes[id], readers);
        alloc += s->vbytes[o];
    }
    const int *in = s->in_val + s->in_start[id];
    for (int k = 0; k < s->in_start[id + 1] - s->in_start[id]; k++) {
        int vid = in[k];
        if (vid < 0 || vid >= nv || !(s->vflags[vid] & V_TEMPORARY)) continue;
        bool seen = false; /* count a value read twice once */
        for (int j = 0; j < k && !seen; j++) seen = in[j] == vid;
        if (readers ? seen || readers[vid] != 1 : s->sole[vid] != id) continue;
        if (s->vbytes[vid] < 0) return node_eager(s->g, &s->g->nodes[id], readers);
        freed += s->vbytes[vid];
    }
    return freed > 0 && freed >= alloc;
}

static void sched_free(sched *s) {
    ot_scratch_release(s->scr, s->vbytes);
    ot_scratch_release(s->scr, s->vflags);
    ot_scratch_release(s->scr, s->sole);
    ot_scratch_release(s->scr, s->live);
    ot_scratch_release(s->scr, s->bwd);
    ot_scratch_release(s->scr, s->topo);
    ot_scratch_release(s->scr, s->succ_start);
    ot_scratch_release(s->scr, s->succ);
    ot_scratch_release(s->scr, s->indeg0);
    ot_scratch_release(s->scr, s->readers0);
    ot_scratch_release(s->scr, s->keys);
    ot_scratch_release(s->scr, s->indeg);
    ot_scratch_release(s->scr, s->readers);
    ot_scratch_release(s->scr, s->done);
    ot_scratch_release(s->scr, s->eager);
    ot_scratch_release(s->scr, s->pos_static);
    ot_scratch_release(s->scr, s->pos_eager);
    ot_scratch_release(s->scr, s->pos_node);
    ot_scratch_release(s->scr, s->ready_bits);
    ot_scratch_release(s->scr, s->ready_sum);
    ot_scratch_release(s->scr, s->phase);
    ot_scratch_release(s->scr, s->flags);
    ot_scratch_release(s->scr, s->in_start);
    ot_scratch_release(s->scr, s->in_val);
    ot_scratch_release(s->scr, s->out_start);
    ot_scratch_release(s->scr, s->out_val);
    ot_scratch_release(s->scr, s->vprod);
    ot_scratch_release(s->scr, s->cons_start);
    ot_scratch_release(s->scr, s->cons);
    ot_scratch_release(s->scr, s->vinfo);
    ot_scratch_release(s->scr, s->vsize);
}

/* The edge p -> id of build_edges: counted in pass 0, stored in pass 1. */
static void add_edge(sched *s, int pass, int p, int id, int *n_edges) {
    if (pass == 0) {
        s->succ_start[p + 1]++;
        s->indeg0[id]++;
        (*n_edges)++;
    } else {
        s->succ[s->succ_start[p] + s->indeg[p]++] = id;
    }
}

/* Edges producer -> consumer, one per input slot (CSR), and in-degrees. With fused
 * updates (ot_graph.fuse_update) also reader -> update: an optimizer node writes its
 * param and state in place, so every other live node that reads one of its inputs
 * (the forward pass, a gradient node dX = dY W, a recompute clone, a tied weight's
 * second use) runs before it; unfused, its rank puts it after all of them anyway. */
static ot_status build_edges(sched *s, ot_error *err) {
    int nn = s->nn, nv = s->g->n_values, n_edges = 0;
    bool fused = s->g->fuse_update;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (int i = 0; i < nn; i++) s->succ_start[i + 1] += s->succ_start[i];
            s->succ = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(n_edges + 1));
            if (!s->succ) return ot_fail(err, OT_E_MEMORY, "schedule: out of memory for %d edges", n_edges);
            memset(s->indeg, 0, sizeof(int) * (size_t)(nn + 1)); /* reused as fill counts */
        }
        for (int id = 0; id < nn; id++) {
            if (!s->live[id]) continue;
            for (int k = s->in_start[id]; k < s->in_start[id + 1]; k++) {
                int v = s->in_val[k];
                if (v < 0 || v >= nv) continue;
                int p = s->vprod[v];
                if (live_id(s, p)) add_edge(s, pass, p, id, &n_edges);
                if (!fused || s->phase[id] != OT_PHASE_OPTIMIZER) continue;
                for (int c = s->cons_start[v]; c < s->cons_start[v + 1]; c++) {
                    int r = s->cons[c];
                    if (live_id(s, r) && r != id && s->phase[r] != OT_PHASE_OPTIMIZER) add_edge(s, pass, r, id, &n_edges);
                }
            }
        }
    }
    return OT_OK;
}

/* A topological order of the live nodes into s->topo from the edges build_edges made
 * (arrays, where the graph's own sort reads every node and consumer list again); any
 * topological order serves build_keys and run_order, whose ready set pops by unique keys.
 * False when some live node is left out: a cycle. */
static bool edge_topo_order(sched *s) {
    int *indeg = s->indeg, head = 0, tail = 0, live = 0; /* s->indeg is free until run_order */
    memcpy(indeg, s->indeg0, sizeof(int) * (size_t)(s->nn + 1));
    for (int id = 0; id < s->nn; id++) {
        if (!s->live[id]) continue;
        live++;
        if (indeg[id] == 0) s->topo[tail++] = id;
    }
    while (head < tail) {
        int id = s->topo[head++];
        for (int e = s->succ_start[id]; e < s->succ_start[id + 1]; e++)
            if (--indeg[s->succ[e]] == 0) s->topo[tail++] = s->succ[e];
    }
    s->n_live = tail;
    return tail == live;
}

/* Static keys, in reverse topological order so a clone sees its consumers' final
 * keys. */
static void build_keys(sched *s) {
    for (int i = s->n_live - 1; i >= 0; i--) {
        int id = s->topo[i];
        ot_phase ph = (ot_phase)s->phase[id];
        sched_key k = {phase_rank(ph, s->g->fuse_update), id, 1, id};
        if (ph != OT_PHASE_RECOMPUTE) {
            /* a node that a lower anchor waits for takes that anchor: ids are the
             * order a pass emitted nodes in, and a pass that ran later (autocast's
             * casts around a backward node, a fused loss) appends its nodes with ids
             * above everything; by its own id such a node would wait behind every
             * recompute clone anchored below it, which would then run long before
             * their readers (schedule.h) */
            for (int e = s->succ_start[id]; e < s->succ_start[id + 1]; e++) {
                const sched_key *c = &s->keys[s->succ[e]];
                if (c->rank == k.rank && c->anchor < k.anchor) k.anchor = c->anchor;
            }
        } else {
            k.sub = 0;
            bool any = false;
            for (int e = s->succ_start[id]; e < s->succ_start[id + 1]; e++) {
                const sched_key *c = &s->keys[s->succ[e]];
                sched_key cand = {c->rank, c->anchor, 0, id};
                if (!any || key_cmp(&cand, &k) < 0) k = cand;
                any = true;
            }
        }
        s->keys[id] = k;
    }
}

/* Every key a live node can be pushed with, in key_cmp's order (ready_set): a counting
 * sort by (rank, anchor), filled with the sub-0 keys (clones) in id order, then the
 * sub-1 keys in id order. The anchor decides the rank: a key's anchor is a node whose
 * own key has that anchor and rank (a node that is not a clone, or a clone no node
 * reads), so the buckets are one per anchor, laid out rank by rank in id order, and
 * the eager keys (rank 2, anchor -1, by id) open rank 2. Linear, where sorting the keys
 * would not be. False when out of memory. */
static bool build_positions(sched *s) {
    int nn = s->nn, rank_n[4] = {0}, n_eager = 0;
    int *start = ot_scratch_calloc(s->scr, (size_t)nn + 1, sizeof(int)); /* per anchor: its keys, then their first position */
    s->pos_static = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(nn + 1));
    s->pos_eager = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(nn + 1));
    s->pos_node = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(2 * nn + 1));
    if (!start || !s->pos_static || !s->pos_eager || !s->pos_node) {
        ot_scratch_release(s->scr, start);
        return false;
    }
    for (int id = 0; id < nn; id++) {
        if (!s->live[id]) continue;
        start[s->keys[id].anchor]++;
        rank_n[s->keys[id].rank]++;
        n_eager += s->bwd[id];
    }
    int base[4] = {0, rank_n[0], rank_n[0] + rank_n[1] + n_eager, 0};
    base[3] = base[2] + rank_n[2];
    s->eager_lo = rank_n[0] + rank_n[1];
    s->eager_hi = s->eager_lo + n_eager;
    s->n_pos = base[3] + rank_n[3];
    for (int a = 0; a < nn; a++) { /* the anchors of each rank in id order */
        if (!s->live[a] || s->keys[a].anchor != a) continue;
        int cnt = start[a];
        start[a] = base[s->keys[a].rank];
        base[s->keys[a].rank] += cnt;
    }
    int eager_at = s->eager_lo;
    for (int sub = 0; sub < 2; sub++)
        for (int id = 0; id < nn; id++) {
            if (!s->live[id]) continue;
            if (s->keys[id].sub == sub) {
                int at = start[s->keys[id].anchor]++;
                s->pos_static[id] = at;
                s->pos_node[at] = id;
            }
            if (sub == 1) {
                int at = s->bwd[id] ? eager_at++ : -1;
                s->pos_eager[id] = at;
                if (at >= 0) s->pos_node[at] = id;
            }
        }
    ot_scratch_release(s->scr, start);
    int n_words = (s->n_pos + 63) / 64 + 1;
    s->ready_bits = ot_scratch_alloc(s->scr, sizeof(uint64_t) * (size_t)n_words);
    s->ready_sum = ot_scratch_alloc(s->scr, sizeof(uint64_t) * (size_t)((n_words + 63) / 64));
    return s->ready_bits && s->ready_sum;
}

static ot_status sched_init(sched *s, const ot_graph *g, ot_plan_scratch *scr, ot_error *err) {
    memset(s, 0, sizeof *s);
    s->g = g;
    s->scr = scr;
    int nn = s->nn = g->n_nodes, nv = g->n_values;
    if (nn >= SCHED_MAX_NODES)
        return ot_fail(err, OT_E_UNSUPPORTED, "schedule: %d nodes, more than the %d it can order", nn, SCHED_MAX_NODES - 1);
    s->topo = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(nn + 1));
    s->keys = ot_scratch_alloc(s->scr, sizeof(sched_key) * (size_t)(nn + 1));
    s->indeg0 = ot_scratch_calloc(s->scr, (size_t)nn + 1, sizeof(int));
    s->succ_start = ot_scratch_calloc(s->scr, (size_t)nn + 2, sizeof(int));
    /* set in full before they are read (read_nodes, read_values, build_edges, run_order):
     * no calloc, whose clearing is a pass over each */
    s->indeg = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(nn + 1));
    s->readers0 = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(nv + 1));
    s->readers = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(nv + 1));
    s->done = ot_scratch_alloc(s->scr, (size_t)nn + 1);
    s->eager = ot_scratch_alloc(s->scr, (size_t)nn + 1);
    s->vbytes = ot_scratch_alloc(s->scr, sizeof(int64_t) * (size_t)(nv + 1));
    s->vflags = ot_scratch_alloc(s->scr, (size_t)nv + 1);
    s->sole = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(nv + 1));
    s->live = ot_scratch_alloc(s->scr, (size_t)nn + 1);
    s->bwd = ot_scratch_alloc(s->scr, (size_t)nn + 1);
    s->phase = ot_scratch_alloc(s->scr, (size_t)nn + 1);
    s->flags = ot_scratch_alloc(s->scr, (size_t)nn + 1);
    s->in_start = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(nn + 1));
    s->out_start = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(nn + 1));
    s->vprod = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(nv + 1));
    s->cons_start = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(nv + 1));
    s->vinfo = ot_scratch_alloc(s->scr, (size_t)nv + 1);
    s->vsize = ot_scratch_alloc(s->scr, sizeof(int64_t) * (size_t)(nv + 1));
    if (!s->vbytes || !s->vflags || !s->sole || !s->live || !s->bwd || !s->phase || !s->flags || !s->in_start ||
        !s->out_start || !s->vprod || !s->cons_start || !s->vinfo || !s->vsize || !ot_sched_read_graph(s))
        return ot_fail(err, OT_E_MEMORY, "schedule: out of memory for %d values", nv);
    if (!s->topo || !s->keys || !s->indeg0 || !s->indeg || !s->succ_start || !s->readers0 || !s->readers ||
        !s->done || !s->eager)
        return ot_fail(err, OT_E_MEMORY, "schedule: out of memory for %d nodes", nn);
    ot_status st = build_edges(s, err);
    if (st) return st;
    if (!edge_topo_order(s)) { /* a cycle: the graph's own sort names a node on it */
        int cycle_node = -1;
        s->n_live = ot_graph_topo_order(g, s->topo, &cycle_node);
        if (s->n_live < 0) {
            const char *nm = node_live(g, cycle_node) ? g->nodes[cycle_node].name : "?";
            return ot_fail(err, OT_E_MODEL, "schedule: the graph has a cycle through node '%s'", nm ? nm : "?");
        }
    }
    build_keys(s);
    if (!build_positions(s)) return ot_fail(err, OT_E_MEMORY, "schedule: out of memory for %d nodes", nn);
    return OT_OK;
}

/* The position of the key a node is pushed with: eager nodes go before every other
 * node of their rank. */
static int ready_key(sched *s, int id, bool dynamic) {
    /* only a backward node can be eager: others are not read at all */
    bool eager = node_eager_fast(s, id, dynamic ? s->readers : NULL);
    s->eager[id] = eager;
    return eager ? s->pos_eager[id] : s->pos_static[id];
}

/* After node id ran: each value it read has one reader less; a ready node that is
 * now the last reader of a temporary may have become eager. */
static void note_reads(sched *s, int id, ready_set *h) {
    const int *in = s->in_val + s->in_start[id];
    int n_in = s->in_start[id + 1] - s->in_start[id], nv = s->g->n_values;
    for (int k = 0; k < n_in; k++) {
        int v = in[k];
        if (v < 0 || v >= nv) continue;
        bool seen = false;
        for (int j = 0; j < k && !seen; j++) seen = in[j] == v;
        if (seen || --s->readers[v] != 1) continue;
        for (int c = s->cons_start[v]; c < s->cons_start[v + 1]; c++) {
            int r = s->cons[c];
            if (r < 0 || r >= s->nn || !s->live[r] || s->done[r] || s->indeg[r] != 0 || s->eager[r]) continue;
            int key = ready_key(s, r, true);
            if (s->eager[r]) ready_push(h, key);
            break;
        }
    }
}

/* One order. dynamic false: a node's eagerness is decided by the whole graph (its
 * inputs are read by it alone). dynamic true: it is decided when the node is ready,
 * and again each time one of its inputs loses its other last reader. */
static ot_status run_order(sched *s, bool dynamic, int *order, ot_error *err) {
    memcpy(s->indeg, s->indeg0, sizeof(int) * (size_t)(s->nn + 1));
    memcpy(s->readers, s->readers0, sizeof(int) * (size_t)(s->g->n_values + 1));
    memset(s->done, 0, sizeof(bool) * (size_t)(s->nn + 1));
    memset(s->eager, 0, sizeof(bool) * (size_t)(s->nn + 1));
    int n_words = (s->n_pos + 63) / 64 + 1;
    ready_set h = {s->ready_bits, s->ready_sum, (n_words + 63) / 64, 0};
    memset(h.bits, 0, sizeof(uint64_t) * (size_t)n_words);
    memset(h.sum, 0, sizeof(uint64_t) * (size_t)h.n_sum);
    for (int i = 0; i < s->n_live; i++)
        if (s->indeg[s->topo[i]] == 0) ready_push(&h, ready_key(s, s->topo[i], dynamic));
    int n = 0;
    for (int k; (k = ready_pop(&h)) >= 0;) {
        int id = s->pos_node[k];
        bool eager_key = k >= s->eager_lo && k < s->eager_hi;
        if (s->done[id] || (s->eager[id] && !eager_key)) continue; /* a stale entry */
        s->done[id] = true;
        order[n++] = id;
        if (dynamic) note_reads(s, id, &h);
        for (int e = s->succ_start[id]; e < s->succ_start[id + 1]; e++)
            if (--s->indeg[s->succ[e]] == 0) ready_push(&h, ready_key(s, s->succ[e], dynamic));
    }
    if (n != s->n_live) return ot_fail(err, OT_E_INTERNAL, "schedule: scheduled %d of %d live nodes", n, s->n_live);
    return OT_OK;
}

/* Judges two different orders the way schedule.h says, without any device's
 * workspace: the static order unless the dynamic one plans a strictly smaller peak,
 * and the static one when the graph cannot be planned (symbolic shapes). The static
 * order, which wins most often, is planned first; the dynamic order's run stops as
 * soon as its peak reaches the static one's (it has lost then), so the loser is
 * rarely planned to the end. Returns true for static; *winner is the chosen order's
 * device-free plan, or NULL when it could not be planned.
 *
 * limit (SIZE_MAX: none) is for a caller that needs the plan only when its peak is at
 * most limit (ot_schedule_plan_limit): the static run stops there too. When it does,
 * the dynamic order wins exactly when its run stays within limit (its peak is then
 * below the static one's, as above); else *over says the chosen order's device-free
 * peak passes limit, and *unsure that both orders' do, so that which one is chosen is
 * not known (true is returned then). Within limit, the same judgment as without. */
static bool judge_static(const ot_graph *g, const ot_plan_options *opt, const ot_plan_nodes *nodes, const int *dyn,
                         const int *stat, int n, ot_plan_scratch *scr, size_t limit, ot_plan **winner, bool *over,
                         bool *unsure) {
    ot_plan *ps = NULL, *pd = NULL;
    ot_error e = {0};
    bool exceeded = false, s_over = false;
    *winner = NULL;
    *over = *unsure = false;
    if (ot_plan_build_in(g, stat, n, NULL, opt, nodes, limit, scr, &ps, &s_over, &e)) {
        /* Static cannot be planned; it stays chosen unless the dynamic order can be
         * while static cannot, which the old rule (static when either fails) also
         * keeps static: planning the dynamic order would decide nothing. */
        return true;
    }
    bool try_dyn = s_over || ps->peak_bytes > 0;
    size_t d_limit = s_over ? limit : ps->peak_bytes - 1;
    ot_status sd = try_dyn ? ot_plan_build_in(g, dyn, n, NULL, opt, nodes, d_limit, scr, &pd, &exceeded, &e) : OT_OK;
    if (try_dyn && sd == OT_OK && !exceeded) {
        if (!scr) ot_plan_free(ps); /* the dynamic peak is below the static one */
        *winner = pd;
        return false;
    }
    *winner = ps; /* the dynamic peak reaches the static one, or it failed; NULL when static is over limit */
    *over = s_over;
    *unsure = s_over && try_dyn && sd == OT_OK && exceeded;
    return true;
}

/* Both orders' plans for dev within limit, the static one first (out[0], over[0]; the
 * dynamic one in out[1], over[1] only when the static one passes limit): for a caller
 * that needs the plan only within limit (ot_schedule_plan_limit), on a device that
 * asks workspace. Most plans such a caller asks about pass it (auto's exchanges), and
 * when both orders' plans for dev do, so does the chosen one's, whichever order the
 * judging would choose: no device-free plan is needed. */
static ot_status plan_both(const ot_graph *g, const ot_plan_device *dev, const ot_plan_options *opt,
                           ot_plan_scratch *scr, const int *stat, const int *dyn, int n, size_t limit, ot_plan *out[2],
                           bool over[2], ot_error *err) {
    ot_status st = ot_plan_build_in(g, stat, n, dev, opt, NULL, limit, scr, &out[0], &over[0], err);
    if (!st && over[0]) st = ot_plan_build_in(g, dyn, n, dev, opt, NULL, limit, scr, &out[1], &over[1], err);
    return st;
}

/* Both orders, the chosen one in *order_out; with plan_out, also its plan for dev:
 * the judging run's when dev would not change it (ot_plan_device_idle), else a new one.
 * limit (SIZE_MAX: none): with exceeded, the caller needs the plan only when its peak
 * is at most limit; when the chosen order's plan for dev passes it, *exceeded is set,
 * *plan_out is NULL and *order_out one of the two orders. Otherwise the same order and
 * plan as without a limit. */
static ot_status schedule(const ot_graph *g, const ot_plan_device *dev, const ot_plan_options *opt, ot_plan_scratch *scr,
                          size_t limit, int **order_out, int *n_out, ot_plan **plan_out, bool *exceeded, ot_error *err) {
    sched s;
    int *dyn = NULL, *stat = NULL;
    ot_plan *plan = NULL, *dev_plan[2] = {NULL, NULL}; /* plan_both's: static, dynamic */
    bool over = false, unsure = false, idle = true, x = false, dev_over[2] = {false, false}, chose_static = true;
    *order_out = NULL;
    *n_out = 0;
    ot_status st = sched_init(&s, g, scr, err);
    if (!st) {
        dyn = ot_scratch_alloc(scr, sizeof(int) * (size_t)(s.n_live + 1));
        stat = ot_scratch_alloc(scr, sizeof(int) * (size_t)(s.n_live + 1));
        if (!dyn || !stat) st = ot_fail(err, OT_E_MEMORY, "schedule: out of memory for %d nodes", s.nn);
    }
    if (!st) st = run_order(&s, true, dyn, err);
    if (!st) st = run_order(&s, false, stat, err);
    int n = s.n_live;
    if (!st && g->fuse_update && g->sum_ranks > 1 &&
        (!ot_sched_defer_updates(s.phase, dyn, n, scr) || !ot_sched_defer_updates(s.phase, stat, n, scr)))
        st = ot_fail(err, OT_E_MEMORY, "schedule: out of memory for %d nodes", s.nn);
    ot_plan_nodes nodes = {.live = s.live, .phase = s.phase, .flags = s.flags, .in_start = s.in_start,
                           .in_val = s.in_val, .out_start = s.out_start, .out_val = s.out_val, .vprod = s.vprod,
                           .cons_start = s.cons_start, .cons = s.cons,
                           .vinfo = s.vinfo, .vsize = s.vsize};
    /* both orders hold the same nodes: dev asks them the same (once) */
    if (!st && plan_out) idle = ot_plan_device_idle(g, dyn, n, dev);
    bool differ = !st && memcmp(dyn, stat, sizeof(int) * (size_t)n) != 0; /* equal orders need no judging */
    if (differ && limit < SIZE_MAX && plan_out && !idle)
        st = plan_both(g, dev, opt, scr, stat, dyn, n, limit, dev_plan, dev_over, err);
    if (!st && dev_over[0] && dev_over[1]) /* whichever is chosen passes limit */
        x = true;
    else if (!st && differ) {
        chose_static = judge_static(g, opt, &nodes, dyn, stat, n, scr, limit, &plan, &over, &unsure);
        if (unsure && plan_out && !idle) /* plan_both found one within limit: judge in full */
            chose_static = judge_static(g, opt, &nodes, dyn, stat, n, scr, SIZE_MAX, &plan, &over, &unsure);
    }
    if (differ && chose_static) {
        int *t = dyn;
        dyn = stat;
        stat = t;
    }
    ot_plan *dev_chosen = dev_plan[chose_static ? 0 : 1]; /* the chosen order's plan for dev, if made */
    bool dev_made = chose_static ? differ && limit < SIZE_MAX && plan_out && !idle : dev_over[0];
    if (!st && plan_out && !x) {
        if (plan && !idle) {
            if (!scr) ot_plan_free(plan);
            plan = NULL;
        }
        if (dev_made) { /* plan_both's, within limit or not */
            x = dev_over[chose_static ? 0 : 1];
            plan = dev_chosen;
            dev_plan[chose_static ? 0 : 1] = NULL;
        } else if (over && idle) /* its plan for dev is its device-free one, over limit */
            x = true;
        else if (!plan && idle) /* the same plan as with dev */
            st = ot_plan_build_in(g, dyn, n, NULL, opt, &nodes, limit, scr, &plan, &x, err);
        else if (!plan)
            st = ot_plan_build_in(g, dyn, n, dev, opt, NULL, limit, scr, &plan, &x, err);
    }
    if (!st && plan_out) {
        if (exceeded) *exceeded = x;
        *plan_out = x ? NULL : plan;
        if (!x) plan = NULL;
    }
    if (!st) {
        *order_out = dyn;
        *n_out = n;
        dyn = NULL;
    }
    if (!scr) ot_plan_free(plan), ot_plan_free(dev_plan[0]), ot_plan_free(dev_plan[1]);
    ot_scratch_release(scr, dyn);
    ot_scratch_release(scr, stat);
    sched_free(&s);
    return st;
}

ot_status ot_schedule_build(const ot_graph *g, int **order_out, int *n_out, ot_error *err) {
    return schedule(g, NULL, NULL, NULL, SIZE_MAX, order_out, n_out, NULL, NULL, err);
}

ot_status ot_schedule_plan(const ot_graph *g, const ot_plan_device *dev, int **order_out, int *n_out,
                           ot_plan **plan_out, ot_error *err) {
    *plan_out = NULL;
    return schedule(g, dev, NULL, NULL, SIZE_MAX, order_out, n_out, plan_out, NULL, err);
}

ot_status ot_schedule_plan_scratch(const ot_graph *g, const ot_plan_device *dev, ot_plan_scratch *scr, int **order_out,
                                   int *n_out, ot_plan **plan_out, ot_error *err) {
    *plan_out = NULL;
    ot_plan_scratch_reset(scr);
    return schedule(g, dev, NULL, scr, SIZE_MAX, order_out, n_out, plan_out, NULL, err);
}

ot_status ot_schedule_plan_limit(const ot_graph *g, const ot_plan_device *dev, const ot_plan_options *opt,
                                 ot_plan_scratch *scr, size_t limit, int **order_out, int *n_out, ot_plan **plan_out,
                                 bool *exceeded, ot_error *err) {
    *plan_out = NULL;
    *exceeded = false;
    if (scr) ot_plan_scratch_reset(scr);
    return schedule(g, dev, opt, scr, limit, order_out, n_out, plan_out, exceeded, err);
}

ot_status ot_schedule_plan_opts(const ot_graph *g, const ot_plan_device *dev, const ot_plan_options *opt,
                                ot_plan_scratch *scr, int **order_out, int *n_out, ot_plan **plan_out, ot_error *err) {
    *plan_out = NULL;
    if (scr) ot_plan_scratch_reset(scr);
    return schedule(g, dev, opt, scr, SIZE_MAX, order_out, n_out, plan_out, NULL, err);
}

ot_status ot_schedule_base_set(ot_plan_scratch *scr, const ot_graph *g, ot_error *err) {
    ot_sched_base *b = ot_plan_scratch_base(scr);
    ot_sched_base_clear(b);
    sched s;
    ot_status st = sched_init(&s, g, NULL, err); /* no scratch: the arrays are the heap's, and no base */
    int nv = g->n_values;
    b->mark = calloc((size_t)nv + 1, 1);
    b->stale = malloc(sizeof(int) * (size_t)(nv + 1));
    b->touched = malloc(sizeof(int) * (size_t)(nv + 1));
    if (!st && (!b->mark || !b->stale || !b->touched))
        st = ot_fail(err, OT_E_MEMORY, "schedule: out of memory for %d values", nv);
    if (!st) { /* the facts move to the base */
#define TAKE(f) (b->f = s.f, s.f = NULL)
        TAKE(live), TAKE(bwd), TAKE(phase), TAKE(flags), TAKE(in_start), TAKE(in_val), TAKE(out_start);
        TAKE(out_val), TAKE(vprod), TAKE(cons_start), TAKE(cons), TAKE(sole), TAKE(readers0), TAKE(vsize);
        TAKE(vbytes), TAKE(vinfo), TAKE(vflags);
#undef TAKE
        b->g = g;
        b->nn = g->n_nodes;
        b->nv = nv;
    }
    sched_free(&s);
    if (st) ot_sched_base_clear(b);
    return st;
}

void ot_schedule_base_hint(ot_plan_scratch *scr, const ot_graph *g, const int *changed, int n_changed) {
    if (!scr) return;
    ot_sched_base *b = ot_plan_scratch_base(scr);
    if (!g && b->hint_g) { /* declared, never called: that rewrite's changes are unknown */
        ot_sched_base_clear(b);
        return;
    }
    b->hint_g = b->g ? g : NULL;
    b->hint_nn = g ? g->n_nodes : 0;
    b->hint_nv = g ? g->n_values : 0;
    b->changed = changed;
    b->n_changed = n_changed;
}

void ot_schedule_base_grown(ot_plan_scratch *scr, const ot_graph *g) {
    if (!scr) return;
    ot_sched_base *b = ot_plan_scratch_base(scr);
    if (!g || b->hint_g != g) return;
    b->hint_nn = g->n_nodes;
    b->hint_nv = g->n_values;
}
