/* planner.c — lifetimes, the pinned slabs, view aliases, best-fit placement of
 * transient values and workspaces, in-place reuse, and the exact peak (see planner.h
 * for the contract). One function per concern, in the order ot_plan_build_opts runs
 * them. Cost: O(nodes + values) plus, per allocation, a scan of the free list (which
 * holds only the holes between live blocks, a few dozen even on large graphs). Only
 * scan_steps reads the nodes themselves (648 bytes each, in schedule order, so a cache
 * miss apiece once the graph outgrows the cache), and the view and workspace queries
 * the few nodes they concern: what the other passes need of a node is copied per step
 * (step_flags, step_phase, and its value ids in one compact array, io), and the topological check
 * uses each value's first read instead of its consumer list. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/best_fit.h"
#include "plan/planner.h"
#include "plan/scratch.h"
#include "plan/views.h"
#include "plan/workspace.h"

/* ---- helpers ---------------------------------------------------------------- */

static const char *vname(const ot_graph *g, int v) {
    const char *s = g->values[v].name;
    return s && *s ? s : "?";
}

static const char *nname(const ot_node *nd) { return nd->name && *nd->name ? nd->name : "?"; }

/* ---- the state of one build ------------------------------------------------- */

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
    size_t limit;              /* give up once max_end passes it (ot_plan_build_bounded) */
    bool exceeded;             /* it did: the plan is incomplete */
    size_t base;               /* start of the transient region */
} build;

static ot_status oom(const build *b) {
    return ot_fail(b->err, OT_E_MEMORY, "planner: out of memory planning %d values over %d steps", b->nv, b->n);
}

static void build_free(build *b) {
    if (!b->scr) ot_plan_free(b->p);
    void *bufs[] = {b->step_of, b->used, b->released, b->is_output, b->external, b->opt_read, b->opt_first,
                    b->reach, b->first_read, b->def_of, b->last_of, b->sort_count, b->sort_tmp, b->step_flags,
                    b->step_phase, b->io, b->io_start, b->n_in, b->slab_key, b->slab_ids, b->pinned_ids, b->tin,
                    b->tout, b->al.b};
    for (size_t k = 0; k < sizeof bufs / sizeof *bufs; k++) ot_scratch_release(b->scr, bufs[k]);
}

/* Allocates the plan and the per-node / per-value tables; marks graph outputs and
 * external values. */
static ot_status build_init(build *b) {
    int nv = b->nv, n = b->n;
    ot_plan *p = b->p = ot_scratch_calloc(b->scr, 1, sizeof *p);
    if (!p) return oom(b);
    p->n_values = nv;
    p->n_steps = n;
    p->values = ot_scratch_alloc(b->scr, sizeof *p->values * (size_t)(nv + 1)); /* classify_values sets each */
    b->def_of = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(nv + 1));
    b->last_of = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(nv + 1));
    p->order = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(n + 1));
    p->ws_offset = ot_scratch_alloc(b->scr, sizeof(int64_t) * (size_t)(n + 1));
    p->ws_bytes = ot_scratch_calloc(b->scr, (size_t)n + 1, sizeof(size_t));
    p->timeline = ot_scratch_alloc(b->scr, sizeof(size_t) * (size_t)(n + 1)); /* a plan's walk sets each */
    b->step_of = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(b->g->n_nodes + 1));
    b->used = ot_scratch_calloc(b->scr, (size_t)nv + 1, sizeof(bool));
    b->released = ot_scratch_calloc(b->scr, (size_t)nv + 1, sizeof(bool));
    b->is_output = ot_scratch_calloc(b->scr, (size_t)nv + 1, sizeof(bool));
    b->external = ot_scratch_calloc(b->scr, (size_t)nv + 1, sizeof(bool));
    b->opt_read = ot_scratch_calloc(b->scr, (size_t)nv + 1, sizeof(int));
    b->opt_first = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(nv + 1));
    b->reach = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(nv + 1));
    b->slab_key = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(nv + 1));
    b->slab_ids = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(nv + 1));
    b->pinned_ids = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(nv + 1));
    b->first_read = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(nv + 1));
    b->sort_count = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(nv + 2));
    b->sort_tmp = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(nv + 2));
    b->step_flags = ot_scratch_alloc(b->scr, (size_t)n + 1);
    b->step_phase = ot_scratch_alloc(b->scr, (size_t)n + 1);
    if (!b->nodes) {
        b->io_cap = 4 * n + 16;
        b->io = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)b->io_cap);
        b->io_start = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(n + 1));
        b->n_in = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(n + 1));
        if (!b->io || !b->io_start || !b->n_in) return oom(b);
        b->io_start[0] = 0;
    }
    if (!b->first_read || !b->sort_count || !b->sort_tmp || !b->step_flags || !b->step_phase || !b->def_of ||
        !b->last_of)
        return oom(b);
    if (!p->values || !p->order || !p->ws_offset || !p->ws_bytes || !p->timeline || !b->step_of || !b->used ||
        !b->released || !b->is_output || !b->external || !b->opt_read || !b->opt_first || !b->reach ||
        !b->slab_key || !b->slab_ids || !b->pinned_ids)
        return oom(b);
    if (n > 0) memcpy(p->order, b->order, sizeof(int) * (size_t)n);
    p->peak_step = -1;
    p->backward_step = n;
    memset(b->step_of, 0xff, sizeof(int) * (size_t)b->g->n_nodes); /* -1 each */
    memset(b->def_of, 0xff, sizeof(int) * (size_t)nv); /* -1 each */
    memset(b->last_of, 0xff, sizeof(int) * (size_t)nv);
    for (int v = 0; v < nv; v++) {
        b->opt_first[v] = INT_MAX;
        b->first_read[v] = INT_MAX;
    }
    const ot_graph *g = b->g;
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] >= 0 && g->outputs[k] < nv) b->is_output[g->outputs[k]] = true;
    for (int v = 0; v < nv; v++)
        if (b->nodes ? b->nodes->vinfo[v] & OT_PLAN_V_OUTPUT : g->values[v].is_graph_output) b->is_output[v] = true;
    for (int k = 0; b->opt && k < b->opt->n_external; k++) {
        int v = b->opt->external[k];
        if (v < 0 || v >= nv)
            return ot_fail(b->err, OT_E_USAGE, "planner: external value id %d is out of range (%d values)", v, nv);
        b->external[v] = true;
    }
    return OT_OK;
}

unsigned char ot_plan_node_flags(const ot_node *nd) {
    unsigned traits = ot_op_get(nd->op)->traits; /* one lookup: the schedule asks this of every node */
    bool is_opt = traits & OT_T_OPTIMIZER;
    bool onto = nd->op == OT_OP_GATHER_GRAD && nd->n_inputs == 4 && nd->inputs[3] >= 0;
    bool inplace = (traits & (OT_T_INPLACE | OT_T_VIEW)) || onto;
    return (unsigned char)((ot_plan_view_candidate(nd) ? STEP_VIEW : 0) | (is_opt ? STEP_OPTIMIZER : 0) |
                           (inplace ? STEP_INPLACE : 0) | (nd->op == OT_OP_SUM ? STEP_SUM : 0) |
                           (onto ? STEP_ONTO_LAST : 0));
}

/* What scan_steps reads of node id: from b->nodes when given, else from the node. */
typedef struct node_facts {
    const int *in, *out;
    int n_in, n_out;
    unsigned char phase, flags;
} node_facts;

static node_facts facts_of(const build *b, int id) {
    const ot_plan_nodes *t = b->nodes;
    if (t)
        return (node_facts){.in = t->in_val + t->in_start[id], .n_in = t->in_start[id + 1] - t->in_start[id],
                            .out = t->out_val + t->out_start[id], .n_out = t->out_start[id + 1] - t->out_start[id],
                            .phase = t->phase[id], .flags = t->flags[id]};
    const ot_node *nd = &b->g->nodes[id];
    return (node_facts){.in = nd->inputs, .n_in = nd->n_inputs, .out = nd->outputs, .n_out = nd->n_outputs,
                        .phase = (unsigned char)nd->phase, .flags = ot_plan_node_flags(nd)};
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

/* Appends a node's inputs and outputs to b->io as step s. */
static ot_status copy_io(build *b, int s, const node_facts *nd) {
    int at = b->io_start[s], need = at + nd->n_in + nd->n_out;
    if (need > b->io_cap) {
        int cap = 2 * need;
        int *io = ot_scratch_realloc(b->scr, b->io, sizeof(int) * (size_t)b->io_cap, sizeof(int) * (size_t)cap);
        if (!io) return oom(b);
        b->io = io;
        b->io_cap = cap;
    }
    if (nd->n_in > 0) memcpy(b->io + at, nd->in, sizeof(int) * (size_t)nd->n_in);
    if (nd->n_out > 0) memcpy(b->io + at + nd->n_in, nd->out, sizeof(int) * (size_t)nd->n_out);
    b->n_in[s] = nd->n_in;
    b->io_start[s + 1] = need;
    return OT_OK;
}

/* Pass 1: the step of every node, the definition and last read of every value, the
 * optimizer reads; the compact copy of every step's ids. */
static ot_status scan_steps(build *b) {
    const ot_graph *g = b->g;
    ot_plan *p = b->p;
    for (int s = 0; s < b->n; s++) {
        int id = b->order[s];
        bool removed = id >= 0 && id < g->n_nodes && (b->nodes ? !b->nodes->live[id] : g->nodes[id].removed);
        if (id < 0 || id >= g->n_nodes || removed || b->step_of[id] >= 0)
            return ot_fail(b->err, OT_E_INTERNAL, "planner: schedule step %d names node %d, which is removed, out of range or repeated", s, id);
        b->step_of[id] = s;
        node_facts nd = facts_of(b, id);
        if (nd.n_in > b->max_io) b->max_io = nd.n_in;
        if (nd.n_out > b->max_io) b->max_io = nd.n_out;
        if ((nd.phase == OT_PHASE_BACKWARD || nd.phase == OT_PHASE_RECOMPUTE) && p->backward_step == b->n)
            p->backward_step = s;
        bool is_opt = nd.flags & STEP_OPTIMIZER;
        b->step_flags[s] = nd.flags;
        b->n_views += (nd.flags & STEP_VIEW) != 0;
        b->step_phase[s] = nd.phase;
        ot_status st = b->nodes ? OT_OK : copy_io(b, s, &nd);
        if (st) return st;
        for (int k = 0; k < nd.n_out; k++) {
            int v = nd.out[k];
            if (v < 0) continue;
            if (v >= b->nv)
                return ot_fail(b->err, OT_E_MODEL, "planner: node '%s' writes value id %d, out of range", nname(&g->nodes[id]), v);
            b->used[v] = true;
            b->def_of[v] = s;
            b->last_of[v] = s;
        }
        for (int k = 0; k < nd.n_in; k++) {
            int v = nd.in[k];
            if (v < 0) continue;
            if (v >= b->nv)
                return ot_fail(b->err, OT_E_MODEL, "planner: node '%s' reads value id %d, out of range", nname(&g->nodes[id]), v);
            b->used[v] = true;
            b->last_of[v] = s;
            if (b->first_read[v] == INT_MAX) b->first_read[v] = s;
            if (is_opt) {
                b->opt_read[v]++;
                if (b->opt_first[v] == INT_MAX) b->opt_first[v] = s;
            }
        }
    }
    return OT_OK;
}

/* Pinned or transient, and the category of a pinned value, from its kind. */
static void classify_kind(build *b, int v, ot_value_kind kind) {
    ot_plan_value *pv = &b->p->values[v];
    switch (kind) {
    case OT_VK_PARAM: pv->category = OT_MEM_PARAMS; pv->pinned = true; break;
    case OT_VK_STATE: pv->category = OT_MEM_STATE; pv->pinned = true; break;
    case OT_VK_OPT_STATE: pv->category = OT_MEM_OPT_STATE; pv->pinned = true; break;
    case OT_VK_CONSTANT: pv->category = OT_MEM_CONSTANTS; pv->pinned = true; break;
    case OT_VK_INPUT: pv->category = OT_MEM_IO; pv->pinned = true; break;
    case OT_VK_GRADIENT:
        if (b->opt_read[v] || b->is_output[v]) { /* a param's gradient */
            pv->category = OT_MEM_GRADIENTS;
            /* fused updates: a block from its producer to its update, still counted as
             * a gradient (ot_graph.fuse_update) */
            pv->pinned = b->is_output[v] || !b->g->fuse_update;
        }
        break;
    case OT_VK_ACTIVATION:
        if (b->is_output[v]) {
            pv->category = OT_MEM_IO;
            pv->pinned = true;
        }
        break;
    }
}

/* A value's byte size; fails on a dynamic shape, an unstorable dtype or a size past
 * 2^40 bytes. */
int64_t ot_plan_value_size(const ot_value *val) {
    int64_t ne = ot_shape_numel(&val->shape); /* -1 exactly when the shape is not static */
    size_t es = ot_dtype_size(val->dtype);
    if (es == 0 || ne < 0 || (uint64_t)ne > ((uint64_t)1 << 40) / es) return -1;
    return ne * (int64_t)es;
}

static ot_status value_size(build *b, int v) {
    const ot_value *val = &b->g->values[v];
    int64_t nb = b->nodes ? b->nodes->vsize[v] : ot_plan_value_size(val);
    if (nb >= 0) {
        b->p->values[v].nbytes = (size_t)nb;
        return OT_OK;
    }
    if (!ot_shape_is_static(&val->shape)) {
        char buf[160];
        ot_shape_str(b->g, &val->shape, buf, sizeof buf);
        return ot_fail(b->err, OT_E_SHAPE, "planner: value '%s' has shape %s, which is not static; bind its symbolic dims (e.g. --batch-size N or --bind NAME=V)", vname(b->g, v), buf);
    }
    size_t es = ot_dtype_size(val->dtype);
    if (es == 0)
        return ot_fail(b->err, OT_E_UNSUPPORTED, "planner: value '%s' has dtype %s, which onnxtrain cannot store", vname(b->g, v), ot_dtype_name(val->dtype));
    int64_t ne = ot_shape_numel(&val->shape);
    if (ne < 0 || (uint64_t)ne > ((uint64_t)1 << 40) / es)
        return ot_fail(b->err, OT_E_MEMORY, "planner: value '%s' is too large (%lld elements)", vname(b->g, v), (long long)ne);
    b->p->values[v].nbytes = (size_t)ne * es;
    return OT_OK;
}

/* Value v (produced by node prod) is a kept activation when a forward node writes it
 * and the backward pass reads it, or an alias of it (mark_kept). */
static void mark_kept_value(build *b, int v, int prod) {
    ot_plan *p = b->p;
    ot_plan_value *pv = &p->values[v];
    if (pv->pinned || pv->alias_of >= 0 || prod < 0 || prod >= b->g->n_nodes || b->step_of[prod] < 0) return;
    ot_phase ph = (ot_phase)b->step_phase[b->step_of[prod]];
    if ((ph == OT_PHASE_FORWARD || ph == OT_PHASE_LOSS) && pv->def_step < p->backward_step &&
        pv->last_step >= p->backward_step)
        pv->category = OT_MEM_KEPT;
}

/* Classifies every value (pinned slabs or transient), sizes it and checks that the
 * schedule writes each transient before any read. */
static ot_status classify_values(build *b) {
    const ot_graph *g = b->g;
    ot_status st;
    const ot_plan_nodes *t = b->nodes;
    for (int v = 0; v < b->nv; v++) {
        const ot_value *val = &g->values[v];
        ot_plan_value *pv = &b->p->values[v];
        *pv = (ot_plan_value){.offset = -1, .recv_offset = -1, .def_step = b->def_of[v], .last_step = b->last_of[v], .inplace_of = -1,
                              .alias_of = -1, .slot_of = -1, .category = OT_MEM_TRANSIENT};
        ot_value_kind kind = t ? (ot_value_kind)(t->vinfo[v] & OT_PLAN_V_KIND) : val->kind;
        bool keep_always = kind == OT_VK_PARAM || kind == OT_VK_STATE || kind == OT_VK_OPT_STATE ||
                           kind == OT_VK_INPUT || b->is_output[v];
        if (!b->used[v] && !keep_always) continue;
        int prod = t ? t->vprod[v] : val->producer;
        bool produced = prod >= 0 && prod < g->n_nodes && b->step_of[prod] >= 0;
        classify_kind(b, v, kind);
        if (b->external[v]) {
            /* Pinned so that no block is reused for it or taken over in place: the
             * memory belongs to someone else, who expects it intact. */
            if (produced)
                return ot_fail(b->err, OT_E_USAGE, "planner: value '%s' is bound to external memory, but node '%s' writes it", vname(g, v), nname(&g->nodes[prod]));
            pv->pinned = true;
            pv->external = true;
        }
        if (!produced && !pv->pinned) {
            if (!(t ? t->vinfo[v] & OT_PLAN_V_DATA : val->data != NULL))
                return ot_fail(b->err, OT_E_MODEL, "planner: value '%s' is read but no scheduled node writes it and it is not an input, initializer or constant", vname(g, v));
            pv->category = OT_MEM_CONSTANTS; /* a folded constant that kept its activation kind */
            pv->pinned = true;
        }
        if ((st = value_size(b, v))) return st;
        if (pv->category == OT_MEM_GRADIENTS && !pv->pinned && g->sum_ranks > 1) /* see Receive slots */
            pv->recv_bytes = pv->nbytes * (size_t)(g->sum_ranks - 1);
        if (pv->pinned && !pv->external && pv->category <= OT_MEM_IO) /* final: later passes leave pinned values be */
            b->pinned_ids[b->n_pinned++] = v;
        if (pv->external) {
            if (b->used[v]) b->p->external_bytes += pv->nbytes;
            continue; /* no block, no category: the arena does not hold it */
        }
        if (pv->pinned) pv->def_step = produced ? b->step_of[prod] : -1;
        else if (pv->def_step >= 0 && pv->last_step < pv->def_step) pv->last_step = pv->def_step;
        if (b->n_views == 0) mark_kept_value(b, v, prod); /* its lifetime is final: no alias extends it */
        /* A transient read before it is written means the schedule is not topological;
         * the consumer list (a pointer chase per value) is walked only to name the reader. */
        if (pv->pinned || !produced || !b->used[v] || b->first_read[v] >= pv->def_step) continue;
        for (int c = 0; c < val->n_consumers; c++) {
            int cn = val->consumers[c];
            if (cn >= 0 && cn < g->n_nodes && b->step_of[cn] >= 0 && b->step_of[cn] < pv->def_step)
                return ot_fail(b->err, OT_E_INTERNAL, "planner: node '%s' reads '%s' before node '%s' writes it: the schedule is not topological", nname(&g->nodes[cn]), vname(g, v), nname(&g->nodes[prod]));
        }
    }
    return OT_OK;
}

/* ---- views ------------------------------------------------------------------ */

/* The value that owns v's memory: v itself, or the base it is a view of. */
static int root_of(const ot_plan *p, int v) { return p->values[v].alias_of >= 0 ? p->values[v].alias_of : v; }

/* Whether view node nd (output o of input i, at byte offset delta within i)
 * may share its base's memory. See planner.h (Views) for the rules. */
static bool may_alias(const build *b, const ot_node *nd, int i, int o, size_t delta) {
    const ot_plan *p = b->p;
    const ot_plan_value *po = &p->values[o], *pi = &p->values[i];
    int r = root_of(p, i);
    const ot_plan_value *pr = &p->values[r];
    if (po->pinned || po->nbytes == 0 || pi->nbytes == 0 || !b->used[i]) return false;
    if ((pi->alias_offset + delta) % OT_PLAN_ALIGN) return false;
    /* An optimizer node may write what it reads: no alias it reads, and none read
     * after an optimizer step that reads the base. */
    if (b->opt_read[o] || b->opt_first[r] <= b->reach[o]) return false;
    /* A transient base lives until its last alias is read: a slice, smaller than
     * its base, must not extend that (a copy would be cheaper). */
    if (!pr->pinned && nd->op == OT_OP_SLICE && b->reach[o] > pr->last_step) return false;
    return true;
}

/* Decides the aliases in schedule order (a view of a view aliases the first base)
 * and extends each base's last_step to its aliases' last reads. */
static void plan_views(build *b) {
    ot_plan *p = b->p;
    const ot_graph *g = b->g;
    if (b->n_views == 0) return; /* reach is read for the views' inputs and outputs alone */
    for (int s = 0; s < b->n; s++) {
        if (!(b->step_flags[s] & STEP_VIEW)) continue;
        step_io io = io_of(b, s);
        b->reach[io.in[0]] = p->values[io.in[0]].last_step;
        b->reach[io.out[0]] = p->values[io.out[0]].last_step;
    }
    for (int s = b->n - 1; s >= 0; s--) {
        if (!(b->step_flags[s] & STEP_VIEW)) continue;
        step_io io = io_of(b, s);
        int i = io.in[0], o = io.out[0];
        if (b->reach[o] > b->reach[i]) b->reach[i] = b->reach[o];
    }
    if (b->opt && b->opt->no_inplace) return;
    for (int s = 0; s < b->n; s++) {
        if (!(b->step_flags[s] & STEP_VIEW)) continue;
        const ot_node *nd = &g->nodes[b->order[s]];
        size_t delta = 0;
        if (!ot_plan_view_offset(g, nd, &delta)) continue;
        int i = nd->inputs[0], o = nd->outputs[0];
        if (!may_alias(b, nd, i, o, delta)) continue;
        int r = root_of(p, i);
        ot_plan_value *po = &p->values[o], *pr = &p->values[r];
        po->alias_of = r;
        po->alias_offset = p->values[i].alias_offset + delta;
        if (po->last_step > pr->last_step) pr->last_step = po->last_step;
    }
}

/* Forward values the backward pass reads (directly or through an alias) are the
 * kept activations; an alias takes its base's category. */
static void mark_kept(build *b) {
    ot_plan *p = b->p;
    const ot_graph *g = b->g;
    for (int v = 0; v < b->nv && b->n_views > 0; v++) /* without views classify_values did it */
        mark_kept_value(b, v, b->nodes ? b->nodes->vprod[v] : g->values[v].producer);
    for (int s = 0; s < b->n && b->n_views > 0; s++) { /* an alias is a view step's output 0 (plan_views) */
        if (!(b->step_flags[s] & STEP_VIEW)) continue;
        ot_plan_value *po = &p->values[io_of(b, s).out[0]];
        if (po->alias_of >= 0) po->category = p->values[po->alias_of].category;
    }
}

/* ---- the pinned region ------------------------------------------------------ */

/* Bytes of category c becoming live or free: live[c] and their sum move together. */
static void live_add(build *b, int c, size_t n) { b->live[c] += n, b->live_sum += n; }
static void live_sub(build *b, int c, size_t n) { b->live[c] -= n, b->live_sum -= n; }

/* Slab order. Params by value id; a gradient or optimizer state that exactly one
 * optimizer node reads next to a param sorts by that param's position, so the
 * gradient and state slabs are laid out like the param slab (one loop, one
 * offset). Everything else follows by value id. */
static void slab_keys(build *b) {
    const ot_plan *p = b->p;
    int n_params = 0;
    for (int k = 0; k < b->n_pinned; k++) { /* sort_by_key reads the keys of pinned values alone */
        int v = b->pinned_ids[k];
        b->slab_key[v] = p->values[v].category == OT_MEM_PARAMS ? n_params++ : INT_MAX;
    }
    b->n_params = n_params;
    for (int s = 0; s < b->n; s++) {
        if (!(b->step_flags[s] & STEP_OPTIMIZER)) continue;
        step_io io = io_of(b, s);
        if (io.n_in < 2 || io.in[0] < 0) continue;
        int par = io.in[0];
        if (!p->values[par].pinned || p->values[par].external || p->values[par].category != OT_MEM_PARAMS) continue;
        for (int k = 1; k < io.n_in; k++) {
            int v = io.in[k];
            if (v >= 0 && b->opt_read[v] == 1 && v != par) b->slab_key[v] = b->slab_key[par];
        }
    }
}

/* Sorts ids (in value-id order) by (slab key, id): a stable counting sort over the
 * keys 0..n_params-1 and INT_MAX (last), linear where an insertion sort would be
 * quadratic when autodiff emits the gradients in reverse param order. */
static void sort_by_key(build *b, int *ids, int n) {
    int nk = b->n_params + 1, *cnt = b->sort_count, *tmp = b->sort_tmp;
    memset(cnt, 0, sizeof(int) * (size_t)(nk + 1));
    for (int i = 0; i < n; i++) {
        int k = b->slab_key[ids[i]];
        cnt[(k == INT_MAX ? nk - 1 : k) + 1]++;
    }
    for (int k = 0; k < nk; k++) cnt[k + 1] += cnt[k];
    for (int i = 0; i < n; i++) {
        int k = b->slab_key[ids[i]];
        tmp[cnt[k == INT_MAX ? nk - 1 : k]++] = ids[i];
    }
    memcpy(ids, tmp, sizeof(int) * (size_t)n);
}

/* Pinned region: one slab per category, each value 64-byte aligned. */
static void place_pinned(build *b) {
    ot_plan *p = b->p;
    size_t cursor = 0, held = 0;
    slab_keys(b);
    /* One pass over the pinned values buckets them by category, each in value-id order
     * (a counting sort: a pass over every value per category would miss the cache
     * once per value and category on big graphs). */
    int start[OT_MEM_IO + 2] = {0};
    for (int k = 0; k < b->n_pinned; k++) start[p->values[b->pinned_ids[k]].category + 1]++;
    for (int c = OT_MEM_PARAMS; c <= OT_MEM_IO; c++) start[c + 1] += start[c];
    int fill[OT_MEM_IO + 1];
    memcpy(fill, start, sizeof fill);
    for (int k = 0; k < b->n_pinned; k++) {
        int v = b->pinned_ids[k];
        b->slab_ids[fill[p->values[v].category]++] = v;
    }
    for (int c = OT_MEM_PARAMS; c <= OT_MEM_IO; c++) {
        p->slab_offset[c] = cursor;
        int n_slab = start[c + 1] - start[c], *ids = b->slab_ids + start[c];
        if (c == OT_MEM_GRADIENTS || c == OT_MEM_OPT_STATE) sort_by_key(b, ids, n_slab);
        for (int i = 0; i < n_slab; i++) {
            ot_plan_value *pv = &p->values[ids[i]];
            pv->offset = (int64_t)cursor;
            if (pv->nbytes && cursor + pv->nbytes > b->max_end) b->max_end = cursor + pv->nbytes;
            cursor += ot_plan_aligned(pv->nbytes);
            held += pv->nbytes;
            live_add(b, c, pv->nbytes);
            p->total[c] += pv->nbytes;
        }
        p->slab_bytes[c] = cursor - p->slab_offset[c];
    }
    p->pinned_bytes = cursor;
    p->pinned_padding = cursor - held;
    memcpy(p->at_peak, b->live, sizeof b->live);
    b->base = cursor;
}

/* ---- the transient walk ----------------------------------------------------- */

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
static void place_outputs(build *b, int s, const step_io *io) {
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
            size_t nb = blk ? po->recv_bytes : po->nbytes;
            if (nb == 0 || (!blk && (try_slot(b, s, o) || (k == 0 && try_inplace(b, s, io, o))))) continue;
            size_t off = ot_fit_alloc(&b->al, ot_plan_aligned(nb));
            *(blk ? &po->recv_offset : &po->offset) = (int64_t)(b->base + off);
            if (b->base + off + nb > b->max_end) b->max_end = b->base + off + nb;
            live_add(b, po->category, nb);
            p->total[po->category] += nb;
        }
    }
}

/* The workspace of the node at step s, if the device asks for one: a block alive only
 * during the step. Returns its size; *off is region-relative. */
static size_t place_workspace(build *b, int s, size_t *off) {
    ot_plan *p = b->p;
    p->ws_offset[s] = -1;
    /* the device reads the node itself */
    size_t ws = b->dev ? ot_plan_node_workspace(b->dev, b->g, &b->g->nodes[b->order[s]], b->tin, b->tout) : 0;
    if (ws == 0) return 0;
    *off = ot_fit_alloc(&b->al, ot_plan_aligned(ws));
    p->ws_offset[s] = (int64_t)(b->base + *off);
    p->ws_bytes[s] = ws;
    if (b->base + *off + ws > b->max_end) b->max_end = b->base + *off + ws;
    live_add(b, OT_MEM_WORKSPACE, ws);
    p->total[OT_MEM_WORKSPACE] += ws;
    return ws;
}

/* After step s: the workspace, and the blocks whose last reader (of the value or of
 * any alias of it) this was, go back to the free list. */
static int release_step(build *b, int s, const step_io *io, size_t ws, size_t ws_off) {
    ot_plan *p = b->p;
    if (ws > 0) {
        if (ot_fit_free(&b->al, ws_off, ot_plan_aligned(ws))) return -1;
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
            if (pv->recv_bytes && ot_fit_free(&b->al, (size_t)pv->recv_offset - b->base, ot_plan_aligned(pv->recv_bytes)))
                return -1;
            live_sub(b, pv->category, pv->recv_bytes);
            if (pv->nbytes == 0) continue;
            if (ot_fit_free(&b->al, (size_t)pv->offset - b->base, ot_plan_aligned(pv->nbytes))) return -1;
            live_sub(b, pv->category, pv->nbytes);
        }
    }
    return 0;
}

/* Pass 2: simulates the schedule, placing every transient block by best fit, and
 * records the timeline and the live bytes per category when the peak is reached. */
static ot_status walk(build *b) {
    ot_plan *p = b->p;
    b->tin = ot_scratch_calloc(b->scr, (size_t)b->max_io, sizeof *b->tin);
    b->tout = ot_scratch_calloc(b->scr, (size_t)b->max_io, sizeof *b->tout);
    if (!b->tin || !b->tout) return oom(b);
    for (int s = 0; s < b->n; s++) {
        step_io io = io_of(b, s);
        size_t end_before = b->max_end, ws_off = 0;
        place_outputs(b, s, &io);
        size_t ws = place_workspace(b, s, &ws_off);
        p->timeline[s] = b->live_sum; /* the sum over the categories */
        if (b->max_end > end_before) {
            p->peak_step = s;
            memcpy(p->at_peak, b->live, sizeof b->live);
        }
        if (release_step(b, s, &io, ws, ws_off)) return oom(b);
        if (b->max_end > b->limit) { /* max_end only grows: the peak will pass limit too */
            b->exceeded = true;
            return OT_OK;
        }
    }
    p->peak_bytes = b->max_end;
    return OT_OK;
}

ot_status ot_plan_build(const ot_graph *g, const int *order, int n, const ot_plan_device *dev, ot_plan **out,
                        ot_error *err) {
    return ot_plan_build_opts(g, order, n, dev, NULL, out, err);
}

/* The build behind every entry point: the passes in order, stopping the walk once the
 * peak passes limit (then *out stays NULL and *exceeded is set). */
static ot_status plan_run(const ot_graph *g, const int *order, int n, const ot_plan_device *dev,
                          const ot_plan_options *opt, const ot_plan_nodes *nodes, size_t limit, ot_plan_scratch *scr,
                          bool *exceeded, ot_plan **out, ot_error *err) {
    build b = {.g = g, .order = order, .n = n, .nv = g->n_values, .dev = dev, .opt = opt, .nodes = nodes, .scr = scr,
               .err = err, .max_io = 1, .limit = limit, .al = {.scr = scr}};
    *out = NULL;
    ot_status st = build_init(&b);
    if (!st) st = scan_steps(&b);
    if (!st) st = classify_values(&b);
    if (!st) {
        plan_views(&b);
        mark_kept(&b);
        place_pinned(&b);
        b.exceeded = b.max_end > limit;
        if (!b.exceeded) st = walk(&b);
    }
    if (exceeded) *exceeded = b.exceeded;
    if (!st && !b.exceeded) {
        *out = b.p;
        b.p = NULL;
    }
    build_free(&b);
    return st;
}

ot_status ot_plan_build_opts(const ot_graph *g, const int *order, int n, const ot_plan_device *dev,
                             const ot_plan_options *opt, ot_plan **out, ot_error *err) {
    return plan_run(g, order, n, dev, opt, NULL, SIZE_MAX, NULL, NULL, out, err);
}

ot_status ot_plan_build_bounded(const ot_graph *g, const int *order, int n, const ot_plan_device *dev, size_t limit,
                                ot_plan **out, bool *exceeded, ot_error *err) {
    return plan_run(g, order, n, dev, NULL, NULL, limit, NULL, exceeded, out, err);
}

ot_status ot_plan_build_nodes(const ot_graph *g, const int *order, int n, const ot_plan_nodes *nodes, size_t limit,
                              ot_plan **out, bool *exceeded, ot_error *err) {
    return plan_run(g, order, n, NULL, NULL, nodes, limit, NULL, exceeded, out, err);
}

ot_status ot_plan_build_in(const ot_graph *g, const int *order, int n, const ot_plan_device *dev,
                           const ot_plan_nodes *nodes, size_t limit, ot_plan_scratch *scr, ot_plan **out, bool *exceeded,
                           ot_error *err) {
    return plan_run(g, order, n, dev, NULL, nodes, limit, scr, exceeded, out, err);
}
