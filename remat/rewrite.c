/* rewrite.c — the remat rewrite: every saved forward value that is not kept gets a
 * recompute clone of its producer chain (back to kept values, params, inputs and
 * constants), and the backward nodes that read it are rewired to the clone.
 *
 * Clones are new nodes with phase OT_PHASE_RECOMPUTE and orig_node = the node they
 * copy (the executor keys a clone's Philox stream on it, so Dropout reproduces its
 * mask), appended after every existing node; their outputs are new values named
 * "<name>.rc". Outputs no one reads are dropped where the op allows it, and a
 * BatchNormalization clone never has running-stat outputs, so only the original
 * updates state. One clone per forward node: the schedule places it just before its
 * first backward reader (plan/schedule.h) and the planner frees it after its last.
 *
 * The rewrite keeps a journal so ot_remat_undo can restore the graph: auto tries
 * many keep sets on one graph without copying it. */
#include <stdlib.h>
#include <string.h>

#include "remat/remat.h"
#include "remat/remat_internal.h"
#include "remat/auto_search.h"

void ot_remat_rewrite_free(ot_remat_rewrite *rw) {
    if (!rw) return;
    if (rw->buf) { /* the arrays are the search's */
        memset(rw, 0, sizeof *rw);
        return;
    }
    free(rw->rw_node);
    free(rw->rw_slot);
    free(rw->rw_old);
    free(rw->clone_of);
    memset(rw, 0, sizeof *rw);
}

/* Whether node id is a backward node: from the analysis for the nodes it saw (the
 * graph's own node otherwise: none is a reader here, but the guard costs nothing). */
static bool backward(const ot_graph *g, const ot_remat_analysis *a, int id) {
    return id < a->n_nodes ? a->bwd_node[id] : g->nodes[id].phase == OT_PHASE_BACKWARD;
}

static void undo_graph(ot_graph *g, ot_remat_rewrite *rw, bool journaled);

enum { CLONE_LOCAL_IO = 16, CLONE_LOCAL_NAME = 128 }; /* clone_node's buffers on the stack */

/* The clone of value v, "<name>.rc": with the blocks its last clone left in park (the
 * same name) or new ones. Returns its id, -1 when out of memory. */
static int clone_value(ot_graph *g, int v, ot_value_blocks *park) {
    /* g->values may move: copy what we need before adding. */
    ot_dtype dt = g->values[v].dtype;
    ot_shape sh = g->values[v].shape;
    if (park && park->name) {
        int nv = ot_graph_add_value_blocks(g, park, dt, &sh, OT_VK_ACTIVATION);
        if (nv >= 0) *park = (ot_value_blocks){0}; /* the graph's now */
        return nv;
    }
    size_t len = strlen(g->values[v].name);
    char vname_buf[CLONE_LOCAL_NAME];
    char *vname = len + 4 <= CLONE_LOCAL_NAME ? vname_buf : malloc(len + 4);
    if (!vname) return -1;
    memcpy(vname, g->values[v].name, len);
    memcpy(vname + len, ".rc", 4);
    int nv = ot_graph_add_value(g, vname, dt, &sh, OT_VK_ACTIVATION);
    if (vname != vname_buf) free(vname);
    return nv;
}

/* The clone node of forward node id, "<name>.recompute", reading ins and writing outs,
 * its attributes copied: with the blocks its last clone left in park or new ones.
 * Returns its id, -1 when out of memory. */
static int clone_add_node(ot_graph *g, int id, const int *ins, const int *outs, ot_remat_parked_node *park) {
    const ot_node *orig = &g->nodes[id];
    ot_op op = orig->op;
    int n_in = orig->n_inputs, n_out = orig->n_outputs, cid;
    if (park && park->b.name) {
        int n0 = g->n_nodes;
        cid = ot_graph_add_node_blocks(g, op, &park->b, ins, n_in, outs, n_out, OT_PHASE_RECOMPUTE);
        if (g->n_nodes == n0) return -1; /* not added: the blocks stay parked */
        g->nodes[g->n_nodes - 1].attrs = park->attrs; /* copies of orig's, which do not change */
        g->nodes[g->n_nodes - 1].n_attrs = park->n_attrs;
        *park = (ot_remat_parked_node){0};
    } else {
        size_t nlen = strlen(orig->name); /* "<name>.recompute", without snprintf's parsing */
        char name_buf[CLONE_LOCAL_NAME];
        char *name = nlen + 16 <= CLONE_LOCAL_NAME ? name_buf : malloc(nlen + 16);
        if (!name) return -1;
        memcpy(name, orig->name, nlen);
        memcpy(name + nlen, ".recompute", sizeof ".recompute");
        cid = ot_graph_add_node(g, op, name, ins, n_in, outs, n_out, OT_PHASE_RECOMPUTE);
        if (name != name_buf) free(name);
        if (cid >= 0 && ot_node_copy_attrs(&g->nodes[cid], &g->nodes[id])) cid = -1;
    }
    if (cid >= 0) g->nodes[cid].orig_node = id;
    return cid;
}

/* Creates the clone of forward node `id`; clone_of maps original values to clones.
 * buf: the search's parked blocks (NULL: allocate them). */
static ot_status clone_node(ot_graph *g, const ot_remat_analysis *a, const bool *keep, const bool *needed, int id,
                            int *clone_of, ot_remat_rewrite_buf *buf, ot_error *err) {
    const ot_node *orig = &g->nodes[id];
    int n_in = orig->n_inputs, n_out = orig->n_outputs;
    /* most nodes fit the local buffers: auto clones thousands of nodes per measurement */
    int ins_buf[CLONE_LOCAL_IO], outs_buf[CLONE_LOCAL_IO];
    int *ins = n_in <= CLONE_LOCAL_IO ? ins_buf : ot_xcalloc((size_t)n_in, sizeof(int));
    int *outs = n_out <= CLONE_LOCAL_IO ? outs_buf : ot_xcalloc((size_t)n_out, sizeof(int));
    ot_status st = OT_OK;
    if (!ins || !outs) {
        st = ot_fail(err, OT_E_MEMORY, "remat: out of memory cloning node '%s'", orig->name);
        goto fail;
    }
    for (int i = 0; i < n_in; i++) {
        int u = orig->inputs[i];
        ins[i] = (u >= 0 && a->candidate[u] && !keep[u]) ? clone_of[u] : u;
        if (u >= 0 && ins[i] < 0) {
            st = ot_fail(err, OT_E_INTERNAL, "remat: input '%s' of clone of '%s' has no clone", g->values[u].name,
                         orig->name);
            goto fail;
        }
    }
    int min_out = ot_op_get(orig->op)->min_outputs;
    bool stateful = orig->op == OT_OP_BATCH_NORM;
    for (int o = 0; o < n_out; o++) {
        int v = g->nodes[id].outputs[o];
        outs[o] = -1;
        if (v < 0) continue;
        if (stateful && o > 0) continue; /* running statistics: only the original updates them */
        if (!needed[v] && o >= min_out) continue;
        int nv = clone_value(g, v, buf && buf->park_val ? &buf->park_val[v] : NULL);
        if (nv < 0) {
            st = ot_fail(err, OT_E_MEMORY, "remat: out of memory cloning node '%s'", g->nodes[id].name);
            goto fail;
        }
        outs[o] = nv;
        clone_of[v] = nv;
        if (buf && buf->val_orig) buf->val_orig[buf->n_val_orig++] = v; /* value n_values0 + k clones val_orig[k] */
    }
    if (clone_add_node(g, id, ins, outs, buf && buf->park_node ? &buf->park_node[id] : NULL) < 0)
        st = ot_fail(err, OT_E_MEMORY, "remat: out of memory cloning node '%s'", g->nodes[id].name);
fail:
    if (ins != ins_buf) free(ins);
    if (outs != outs_buf) free(outs);
    return st;
}

/* Room for `need` ids in *a (and in *b and *c when given, the same length), growing
 * *cap by doubling; false when out of memory (the arrays stay valid). */
static bool grow_ids(int **a, int **b, int **c, int *cap, int need) {
    if (need <= *cap) return true;
    int n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    int **arr[3] = {a, b, c};
    for (int k = 0; k < 3; k++) {
        if (!arr[k]) continue;
        int *p = realloc(*arr[k], sizeof(int) * (size_t)n);
        if (!p) return false;
        *arr[k] = p;
    }
    *cap = n;
    return true;
}

static void free_node_blocks(ot_node_blocks *b, ot_attr *attrs, int n_attrs) {
    ot_node_blocks_free(b);
    for (int k = 0; k < n_attrs; k++) ot_attr_free(&attrs[k]);
    free(attrs);
}

void ot_remat_rewrite_buf_free(ot_remat_rewrite_buf *b) {
    for (int i = 0; b->park_node && i < b->n_park_nodes; i++)
        free_node_blocks(&b->park_node[i].b, b->park_node[i].attrs, b->park_node[i].n_attrs);
    for (int v = 0; b->park_val && v < b->n_park_vals; v++) {
        free(b->park_val[v].name);
        free(b->park_val[v].consumers);
    }
    free(b->park_node);
    free(b->park_val);
    free(b->val_orig);
    free(b->needed);
    free(b->clone_of);
    free(b->readers);
    free(b->rw_node);
    free(b->rw_slot);
    free(b->rw_old);
    memset(b, 0, sizeof *b);
}

/* The rewrite; marked: the clones ot_remat_mark_clones marks for keep, already marked
 * by the caller (n_marked of them), or NULL to mark them here. buf: where the arrays
 * come from (auto_search.h), or NULL to allocate them for rw alone. */
static ot_status apply(ot_graph *g, const ot_remat_analysis *a, const bool *keep, const bool *marked, int n_marked,
                       ot_remat_rewrite_buf *buf, ot_remat_rewrite *rw, ot_error *err) {
    ot_status st = OT_OK;
    bool *own = NULL, *needed = NULL;
    const bool *cloned = marked;
    int *stack = NULL, *readers = NULL, cap_slots = 0, cap_readers = 0;
    memset(rw, 0, sizeof *rw);
    if (g->n_values != a->n_values || g->n_nodes != a->n_nodes)
        return ot_fail(err, OT_E_INTERNAL, "remat: graph '%s' changed since it was analysed", g->name);
    rw->n_nodes0 = g->n_nodes;
    rw->n_values0 = g->n_values;
    if (!marked) {
        cloned = own = ot_xcalloc((size_t)a->n_nodes, sizeof(bool));
        stack = ot_xcalloc(ot_remat_stack_room(g, a), sizeof(int));
    }
    if (buf && !buf->needed) { /* a search's first rewrite: its arrays, for every rewrite after it */
        buf->needed = ot_xcalloc((size_t)a->n_values, sizeof(bool));
        buf->clone_of = ot_xcalloc((size_t)a->n_values, sizeof(int));
        buf->park_node = ot_xcalloc((size_t)a->n_nodes, sizeof *buf->park_node);
        buf->park_val = ot_xcalloc((size_t)a->n_values, sizeof *buf->park_val);
        buf->val_orig = ot_xcalloc((size_t)a->n_values, sizeof(int));
        buf->n_park_nodes = a->n_nodes;
        buf->n_park_vals = a->n_values;
        if (!buf->needed || !buf->clone_of || !buf->park_node || !buf->park_val || !buf->val_orig)
            ot_remat_rewrite_buf_free(buf);
    }
    if (buf) buf->n_val_orig = 0;
    if (buf) { /* every entry of both is set below */
        needed = buf->needed;
        rw->clone_of = buf->clone_of;
        readers = buf->readers;
        rw->rw_node = buf->rw_node;
        rw->rw_slot = buf->rw_slot;
        rw->rw_old = buf->rw_old;
        cap_readers = buf->cap_readers;
        cap_slots = buf->cap_slots;
        rw->buf = buf;
    } else {
        needed = ot_xcalloc((size_t)a->n_values, sizeof(bool));
        rw->clone_of = ot_xcalloc((size_t)a->n_values, sizeof(int));
    }
    if (!cloned || (!marked && !stack) || !needed || !rw->clone_of) {
        st = ot_fail(err, OT_E_MEMORY, "remat: out of memory rewriting '%s'", g->name);
        goto fail;
    }
    for (int v = 0; v < a->n_values; v++) rw->clone_of[v] = -1;
    rw->n_clones = marked ? n_marked : ot_remat_mark_clones(g, a, keep, own, stack);

    /* A value is needed as a clone output when the backward or another clone reads it. */
    for (int v = 0; v < a->n_values; v++) needed[v] = a->saved[v] && !keep[v];
    for (int id = 0; id < a->n_nodes; id++) {
        if (!cloned[id]) continue;
        const ot_node *n = &g->nodes[id];
        for (int i = 0; i < n->n_inputs; i++) {
            int u = n->inputs[i];
            if (u >= 0 && a->candidate[u] && !keep[u]) needed[u] = true;
        }
    }

    /* Forward order is topological, so a clone's inputs are cloned before it. */
    for (int p = 0; p < a->n_fwd; p++) {
        int id = a->fwd[p];
        if (!cloned[id]) continue;
        st = clone_node(g, a, keep, needed, id, rw->clone_of, buf, err);
        if (st != OT_OK) goto fail;
        rw->extra_flops += a->node_flops[id];
    }

    /* Rewire the backward readers; collect them first since rewiring edits the lists.
     * The journal grows as it fills: counting the slots first read every recomputed
     * value's struct and list once more, misses on a big graph. */
    for (int v = 0; v < a->n_values && st == OT_OK; v++) {
        if (!a->saved[v] || keep[v]) continue;
        const ot_value *val = &g->values[v];
        int nr = 0;
        if (!grow_ids(&readers, NULL, NULL, &cap_readers, val->n_consumers)) goto oom;
        for (int c = 0; c < val->n_consumers; c++)
            if (backward(g, a, val->consumers[c])) readers[nr++] = val->consumers[c];
        for (int r = 0; r < nr; r++) {
            ot_node *n = &g->nodes[readers[r]];
            for (int i = 0; i < n->n_inputs; i++) {
                if (n->inputs[i] != v) continue;
                if (!grow_ids(&rw->rw_node, &rw->rw_slot, &rw->rw_old, &cap_slots, rw->n_rewired + 1)) goto oom;
                rw->rw_node[rw->n_rewired] = n->id;
                rw->rw_slot[rw->n_rewired] = i;
                rw->rw_old[rw->n_rewired] = v;
                rw->n_rewired++;
                ot_graph_set_input(g, n->id, i, rw->clone_of[v]);
            }
        }
    }
    if (!marked) { /* what plan reports; auto's measurements read the FLOPs alone */
        memset(needed, 0, (size_t)a->n_values * sizeof(bool)); /* scratch now */
        rw->kept_bytes = ot_remat_kept_bytes_marked(g, a, keep, cloned, needed);
    }
    goto fail; /* done: the cleanup below */
oom:
    st = ot_fail(err, OT_E_MEMORY, "remat: out of memory rewiring '%s'", g->name);
fail:
    free(own);
    free(stack);
    if (buf) { /* what grew stays the search's */
        buf->readers = readers;
        buf->rw_node = rw->rw_node;
        buf->rw_slot = rw->rw_slot;
        buf->rw_old = rw->rw_old;
        buf->cap_readers = cap_readers;
        buf->cap_slots = cap_slots;
    } else {
        free(needed);
        free(readers);
    }
    if (st != OT_OK) { /* a part of the rewrite: undone the general way */
        undo_graph(g, rw, false);
        ot_remat_rewrite_free(rw);
    }
    return st;
}

ot_status ot_remat_apply(ot_graph *g, const ot_remat_analysis *a, const bool *keep, ot_remat_rewrite *rw,
                         ot_error *err) {
    return apply(g, a, keep, NULL, 0, NULL, rw, err);
}

ot_status ot_remat_apply_marked(ot_graph *g, const ot_remat_analysis *a, const bool *keep, const bool *cloned,
                                int n_clones, ot_remat_rewrite_buf *buf, ot_remat_rewrite *rw, ot_error *err) {
    return apply(g, a, keep, cloned, n_clones, buf, rw, err);
}

/* How far ahead the undo prefetches what removing a clone reads: each input's value
 * (2 * UNDO_AHEAD nodes ahead) and then its consumer list (UNDO_AHEAD ahead), a cache
 * miss apiece on a big graph otherwise, taken one after the other. */
#define UNDO_AHEAD 8

static void undo_prefetch(const ot_graph *g, const ot_remat_rewrite *rw, int id) {
    for (int d = 1; d <= 2; d++) {
        int ahead = id - d * UNDO_AHEAD;
        if (ahead < rw->n_nodes0) return;
        const ot_node *n = &g->nodes[ahead];
        for (int i = 0; i < n->n_inputs; i++) {
            if (n->inputs[i] < 0) continue;
            const ot_value *v = &g->values[n->inputs[i]];
            if (d == 2) __builtin_prefetch(&v->consumers);
            else __builtin_prefetch(v->consumers);
        }
    }
}

/* The undo's reads ahead of the clone it removes: the blocks free() will touch and,
 * journaled, the value structs whose counts go down (each a cache miss on a big
 * graph otherwise, taken one after the other). */
static void undo_prefetch_blocks(const ot_graph *g, const ot_remat_rewrite *rw, int id, bool journaled) {
    int ahead = id - UNDO_AHEAD;
    if (ahead < rw->n_nodes0) return;
    const ot_node *n = &g->nodes[ahead];
    if (!journaled || !rw->buf) { /* freed: parked blocks are not read */
        __builtin_prefetch(n->op_type);
        __builtin_prefetch(n->domain);
        __builtin_prefetch(n->name);
        __builtin_prefetch(n->outputs);
    }
    __builtin_prefetch(n->inputs);
    if (id - 2 * UNDO_AHEAD >= rw->n_nodes0) __builtin_prefetch(&g->nodes[id - 2 * UNDO_AHEAD]);
    for (int i = 0; journaled && i < n->n_inputs; i++)
        if (n->inputs[i] >= 0 && n->inputs[i] < rw->n_values0) __builtin_prefetch(&g->values[n->inputs[i]].n_consumers, 1);
}

/* The journaled undo restores the consumer lists without the general removal's
 * searches (ot_graph_remove_node, ot_graph_set_input: a scan of each list and of the
 * clone's own lists, a cache miss apiece on a big graph). What a completed rewrite
 * did is known: the originals a clone reads are never rewired (they are kept values
 * or not candidates, while the rewired ones are recomputed), so each clone's entries
 * are the tail of those lists, and dropping them is a count; the rewired readers go
 * back to the end of their value's list in reverse order, as ot_graph_set_input
 * appends them; the clones' own values are freed anyway. The lists end exactly as
 * the general removal leaves them. */
static void unwire_journaled(ot_graph *g, const ot_remat_rewrite *rw) {
    for (int i = rw->n_rewired - 1; i >= 0; i--) {
        ot_value *v = &g->values[rw->rw_old[i]];
        if (v->n_consumers >= v->cap_consumers) {
            /* no room (the rewiring only shortened the list, so never expected): the
             * general way, which also drops the reader from the clone value's list */
            ot_graph_set_input(g, rw->rw_node[i], rw->rw_slot[i], rw->rw_old[i]);
            continue;
        }
        g->nodes[rw->rw_node[i]].inputs[rw->rw_slot[i]] = rw->rw_old[i];
        v->consumers[v->n_consumers++] = rw->rw_node[i];
    }
}

/* Parks clone n's blocks in the search's buffer (auto_search.h) for the next clone of
 * the same node; false when there is none to park them in (no search, not a clone of
 * a node the search knows, or a slot already taken): the undo frees them then. */
static bool park_clone(const ot_remat_rewrite *rw, const ot_node *n) {
    ot_remat_rewrite_buf *buf = rw->buf;
    int o = n->orig_node;
    if (!buf || !buf->park_node || n->phase != OT_PHASE_RECOMPUTE || o < 0 || o >= rw->n_nodes0 ||
        o >= buf->n_park_nodes || buf->park_node[o].b.name)
        return false;
    buf->park_node[o] = (ot_remat_parked_node){{n->op_type, n->domain, n->name, n->inputs, n->outputs}, n->attrs,
                                               n->n_attrs};
    return true;
}

/* Parks clone value v's name and consumer list, as park_clone does a node's. */
static bool park_value(const ot_remat_rewrite *rw, const ot_value *val, int v) {
    ot_remat_rewrite_buf *buf = rw->buf;
    int k = v - rw->n_values0, ov = buf && buf->park_val && k < buf->n_val_orig ? buf->val_orig[k] : -1;
    if (ov < 0 || ov >= buf->n_park_vals || buf->park_val[ov].name) return false;
    buf->park_val[ov] = (ot_value_blocks){val->name, val->consumers, val->cap_consumers};
    return true;
}

/* Removes the clones and restores the lists; journaled: a completed rewrite's own
 * journal (unwire_journaled), else the general way. rw's arrays stay. */
static void undo_graph(ot_graph *g, ot_remat_rewrite *rw, bool journaled) {
    if (rw->n_nodes0 == 0 && rw->n_values0 == 0) return; /* nothing was applied */
    if (journaled) unwire_journaled(g, rw);
    else
        for (int i = rw->n_rewired - 1; i >= 0; i--)
            ot_graph_set_input(g, rw->rw_node[i], rw->rw_slot[i], rw->rw_old[i]);
    for (int id = g->n_nodes - 1; id >= rw->n_nodes0; id--) {
        ot_node *n = &g->nodes[id];
        undo_prefetch_blocks(g, rw, id, journaled);
        if (journaled) {
            for (int i = 0; i < n->n_inputs; i++)
                if (n->inputs[i] >= 0 && n->inputs[i] < rw->n_values0) g->values[n->inputs[i]].n_consumers--;
        } else {
            undo_prefetch(g, rw, id);
            ot_graph_remove_node(g, id);
        }
        if (journaled && park_clone(rw, n)) continue;
        free_node_blocks(&(ot_node_blocks){n->op_type, n->domain, n->name, n->inputs, n->outputs}, n->attrs,
                         n->n_attrs);
    }
    for (int v = g->n_values - 1; v >= rw->n_values0; v--) {
        ot_value *val = &g->values[v];
        if (v - UNDO_AHEAD >= rw->n_values0 && (!journaled || !rw->buf)) { /* freed, not parked */
            __builtin_prefetch(val[-UNDO_AHEAD].name);
            __builtin_prefetch(val[-UNDO_AHEAD].consumers);
        }
        if (!journaled || !park_value(rw, val, v)) {
            free(val->name);
            free(val->consumers);
        }
        free(val->data);
        free(val->doc);
    }
    g->n_nodes = rw->n_nodes0;
    g->n_values = rw->n_values0;
}

void ot_remat_undo(ot_graph *g, ot_remat_rewrite *rw) {
    /* clone_of: a completed rewrite (apply), whose edits undo_journaled knows; any
     * other tail (the session's optimizer nodes) is removed the general way */
    undo_graph(g, rw, rw->clone_of != NULL);
    ot_remat_rewrite_free(rw);
}
