/* schedule.c — Kahn's sort with a min-heap on (phase rank, anchor, recompute-first,
 * id); see schedule.h for the rule, why recompute clones are placed lazily and why
 * nodes that free more than they allocate run eagerly. */
#include <stdint.h>
#include <stdlib.h>

#include "plan/schedule.h"

typedef struct sched_key {
    int rank;   /* phase rank */
    int anchor; /* node id, or a clone's first consumer */
    int sub;    /* 0 for recompute clones: run right before their anchor */
    int id;
} sched_key;

static int phase_rank(ot_phase p) {
    switch (p) {
    case OT_PHASE_FORWARD: return 0;
    case OT_PHASE_LOSS: return 1;
    case OT_PHASE_BACKWARD:
    case OT_PHASE_RECOMPUTE: return 2;
    case OT_PHASE_OPTIMIZER: return 3;
    }
    return 2;
}

static int key_cmp(const sched_key *a, const sched_key *b) {
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->anchor != b->anchor) return a->anchor < b->anchor ? -1 : 1;
    if (a->sub != b->sub) return a->sub < b->sub ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* Binary min-heap of node ids ordered by keys[id]. */
typedef struct heap {
    int *a;
    int n;
    const sched_key *keys;
} heap;

static bool heap_less(const heap *h, int i, int j) { return key_cmp(&h->keys[h->a[i]], &h->keys[h->a[j]]) < 0; }

static void heap_push(heap *h, int id) {
    int i = h->n++;
    h->a[i] = id;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!heap_less(h, i, p)) break;
        int t = h->a[i];
        h->a[i] = h->a[p];
        h->a[p] = t;
        i = p;
    }
}

static int heap_pop(heap *h) {
    int top = h->a[0];
    h->a[0] = h->a[--h->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && heap_less(h, l, m)) m = l;
        if (r < h->n && heap_less(h, r, m)) m = r;
        if (m == i) break;
        int t = h->a[i];
        h->a[i] = h->a[m];
        h->a[m] = t;
        i = m;
    }
    return top;
}

static bool node_live(const ot_graph *g, int id) { return id >= 0 && id < g->n_nodes && !g->nodes[id].removed; }

/* Bytes of a value with a static shape, -1 otherwise. */
static int64_t value_bytes(const ot_value *v) {
    int64_t n = ot_shape_numel(&v->shape);
    size_t es = ot_dtype_size(v->dtype);
    if (n < 0 || es == 0 || n > INT64_MAX / (int64_t)es) return -1;
    return n * (int64_t)es;
}

/* True if node id is the only reader of v (every consumer slot is id) and v is a
 * temporary that dies there: produced by a live node, not a graph output. */
static bool dies_at(const ot_graph *g, const ot_value *v, int id) {
    if (v->is_graph_output || !node_live(g, v->producer)) return false;
    if (v->kind != OT_VK_ACTIVATION && v->kind != OT_VK_GRADIENT) return false;
    for (int c = 0; c < v->n_consumers; c++)
        if (v->consumers[c] != id) return false;
    return v->n_consumers > 0;
}

/* A backward node is eager when running it frees at least as much as it allocates:
 * the inputs that die at it are as large as its outputs (static shapes), or, with
 * symbolic shapes, its one output has the shape and element size of such an input.
 * Typical cases: the Transpose that turns a weight gradient from the exporter's
 * layout into the real one, a Reshape/ReduceToLike of a gradient, the Sum of
 * gradient contributions. Delaying such a node until its id comes up (the default
 * order) keeps its input alive for nothing, so it runs as soon as it is ready. */
static bool node_eager(const ot_graph *g, const ot_node *nd) {
    if (nd->phase != OT_PHASE_BACKWARD) return false;
    int64_t freed = 0, alloc = 0;
    bool sizes_known = true, shape_match = false;
    int n_out = 0;
    const ot_value *out = NULL;
    for (int k = 0; k < nd->n_outputs; k++) {
        if (nd->outputs[k] < 0 || nd->outputs[k] >= g->n_values) continue;
        out = &g->values[nd->outputs[k]];
        n_out++;
        int64_t b = value_bytes(out);
        if (b < 0) sizes_known = false;
        else alloc += b;
    }
    for (int k = 0; k < nd->n_inputs; k++) {
        int vid = nd->inputs[k];
        if (vid < 0 || vid >= g->n_values) continue;
        const ot_value *v = &g->values[vid];
        if (!dies_at(g, v, nd->id)) continue;
        int64_t b = value_bytes(v);
        if (b < 0) sizes_known = false;
        else freed += b;
        if (n_out == 1 && ot_shape_equal(&v->shape, &out->shape) && ot_dtype_size(v->dtype) == ot_dtype_size(out->dtype))
            shape_match = true;
    }
    if (sizes_known) return freed > 0 && freed >= alloc;
    return shape_match;
}

ot_status ot_schedule_build(const ot_graph *g, int **order_out, int *n_out, ot_error *err) {
    ot_status st = OT_OK;
    int nn = g->n_nodes;
    int *topo = NULL, *indeg = NULL, *succ_start = NULL, *succ = NULL, *fill = NULL, *order = NULL, *heap_mem = NULL;
    sched_key *keys = NULL;
    *order_out = NULL;
    *n_out = 0;

    topo = malloc(sizeof(int) * (size_t)(nn + 1));
    keys = malloc(sizeof(sched_key) * (size_t)(nn + 1));
    indeg = calloc((size_t)nn + 1, sizeof(int));
    succ_start = calloc((size_t)nn + 2, sizeof(int));
    fill = calloc((size_t)nn + 1, sizeof(int));
    order = malloc(sizeof(int) * (size_t)(nn + 1));
    heap_mem = malloc(sizeof(int) * (size_t)(nn + 1));
    if (!topo || !keys || !indeg || !succ_start || !fill || !order || !heap_mem) {
        st = ot_fail(err, OT_E_MEMORY, "schedule: out of memory for %d nodes", nn);
        goto fail;
    }

    int cycle_node = -1;
    int n_live = ot_graph_topo_order(g, topo, &cycle_node);
    if (n_live < 0) {
        const char *nm = node_live(g, cycle_node) ? g->nodes[cycle_node].name : "?";
        st = ot_fail(err, OT_E_MODEL, "schedule: the graph has a cycle through node '%s'", nm ? nm : "?");
        goto fail;
    }

    /* Edges producer -> consumer, one per input slot (CSR). */
    int n_edges = 0;
    for (int id = 0; id < nn; id++) {
        const ot_node *nd = &g->nodes[id];
        if (nd->removed) continue;
        for (int k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            if (v < 0 || v >= g->n_values) continue;
            int p = g->values[v].producer;
            if (!node_live(g, p)) continue;
            succ_start[p + 1]++;
            indeg[id]++;
            n_edges++;
        }
    }
    for (int i = 0; i < nn; i++) succ_start[i + 1] += succ_start[i];
    succ = malloc(sizeof(int) * (size_t)(n_edges + 1));
    if (!succ) {
        st = ot_fail(err, OT_E_MEMORY, "schedule: out of memory for %d edges", n_edges);
        goto fail;
    }
    for (int id = 0; id < nn; id++) {
        const ot_node *nd = &g->nodes[id];
        if (nd->removed) continue;
        for (int k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            if (v < 0 || v >= g->n_values) continue;
            int p = g->values[v].producer;
            if (!node_live(g, p)) continue;
            succ[succ_start[p] + fill[p]++] = id;
        }
    }

    /* Keys, in reverse topological order so a clone sees its consumers' final keys. */
    for (int i = n_live - 1; i >= 0; i--) {
        int id = topo[i];
        const ot_node *nd = &g->nodes[id];
        sched_key k = {phase_rank(nd->phase), id, 1, id};
        if (nd->phase == OT_PHASE_RECOMPUTE) {
            k.sub = 0;
            bool any = false;
            for (int e = succ_start[id]; e < succ_start[id + 1]; e++) {
                const sched_key *c = &keys[succ[e]];
                sched_key cand = {c->rank, c->anchor, 0, id};
                if (!any || key_cmp(&cand, &k) < 0) k = cand;
                any = true;
            }
        }
        keys[id] = k;
    }
    /* Eager nodes go before every other node of their rank once ready; set after the
     * loop above so a clone feeding one still anchors on the consumer's id and stays
     * lazy. */
    for (int i = 0; i < n_live; i++)
        if (node_eager(g, &g->nodes[topo[i]])) keys[topo[i]].anchor = -1;

    heap h = {heap_mem, 0, keys};
    for (int i = 0; i < n_live; i++)
        if (indeg[topo[i]] == 0) heap_push(&h, topo[i]);
    int n = 0;
    while (h.n > 0) {
        int id = heap_pop(&h);
        order[n++] = id;
        for (int e = succ_start[id]; e < succ_start[id + 1]; e++)
            if (--indeg[succ[e]] == 0) heap_push(&h, succ[e]);
    }
    if (n != n_live) {
        st = ot_fail(err, OT_E_INTERNAL, "schedule: scheduled %d of %d live nodes", n, n_live);
        goto fail;
    }
    *order_out = order;
    *n_out = n;
    order = NULL;
fail:
    free(topo);
    free(keys);
    free(indeg);
    free(succ_start);
    free(succ);
    free(fill);
    free(order);
    free(heap_mem);
    return st;
}
