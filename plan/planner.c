/* planner.c — lifetimes, the pinned slabs, view aliases and the entry points (see
 * planner.h for the contract); the placement of transient values and workspaces, in
 * place reuse and the exact peak are plan/plan_walk.c's. One function per concern, in
 * the order ot_plan_build_opts runs them. Cost: O(nodes + values) plus, per allocation, a scan of the free list (which
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

#include "plan/plan_build.h" /* the build's state, shared with plan/plan_walk.c */
#include "plan/planner.h"
#include "plan/scratch.h"
#include "plan/views.h"

/* ---- helpers ---------------------------------------------------------------- */

static const char *vname(const ot_graph *g, int v) {
    const char *s = g->values[v].name;
    return s && *s ? s : "?";
}

static const char *nname(const ot_node *nd) { return nd->name && *nd->name ? nd->name : "?"; }


static void build_free(build *b) {
    if (!b->scr) ot_plan_free(b->p);
    void *bufs[] = {b->step_of, b->used, b->released, b->is_output, b->external, b->opt_read, b->opt_first,
                    b->reach, b->first_read, b->def_of, b->last_of, b->sort_count, b->sort_tmp, b->step_flags,
                    b->step_phase, b->io, b->io_start, b->n_in, b->slab_key, b->slab_ids, b->pinned_ids, b->tin,
                    b->tout, b->al.b, b->span, b->blk_of, b->recv_blk_of, b->ws_blk, b->live_at};
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
    b->blk_of = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(nv + 1)); /* set when a block is placed */
    b->recv_blk_of = ot_scratch_alloc(b->scr, sizeof(int) * (size_t)(nv + 1));
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
    if (!b->first_read || !b->blk_of || !b->recv_blk_of || !b->sort_count || !b->sort_tmp || !b->step_flags || !b->step_phase || !b->def_of ||
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

ot_status ot_plan_build(const ot_graph *g, const int *order, int n, const ot_plan_device *dev, ot_plan **out,
                        ot_error *err) {
    return ot_plan_build_opts(g, order, n, dev, NULL, out, err);
}

/* The build behind every entry point: the passes in order, stopping the walk once the
 * peak passes limit (then *out stays NULL and *exceeded is set). */
static ot_status plan_run(const ot_graph *g, const int *order, int n, const ot_plan_device *dev,
                          const ot_plan_options *opt, const ot_plan_nodes *nodes, size_t limit, ot_plan_scratch *scr,
                          bool *exceeded, ot_plan **out, ot_error *err) {
    /* refit_max_blocks: 0 the default, negative none (plan/refit.h) */
    int refit_max = !opt || opt->refit_max_blocks == 0 ? OT_REFIT_MAX_BLOCKS
                    : opt->refit_max_blocks < 0        ? 0
                                                       : opt->refit_max_blocks;
    build b = {.g = g, .order = order, .n = n, .nv = g->n_values, .dev = dev, .opt = opt, .nodes = nodes, .scr = scr,
               .err = err, .max_io = 1, .limit = limit, .al = {.scr = scr}, .refit_max = refit_max};
    *out = NULL;
    ot_status st = build_init(&b);
    if (!st) st = scan_steps(&b);
    if (!st) st = classify_values(&b);
    if (!st) {
        plan_views(&b);
        mark_kept(&b);
        place_pinned(&b);
        b.exceeded = b.max_end > limit;
        if (!b.exceeded) st = ot_plan_walk(&b);
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
                           const ot_plan_options *opt, const ot_plan_nodes *nodes, size_t limit, ot_plan_scratch *scr,
                           ot_plan **out, bool *exceeded, ot_error *err) {
    return plan_run(g, order, n, dev, opt, nodes, limit, scr, exceeded, out, err);
}
