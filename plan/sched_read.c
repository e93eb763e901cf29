/* sched_read.c — the schedule's reading of the graph into compact arrays (its
 * sched, plan/sched_internal.h): in one pass over the node and value structs, or,
 * for a call declared to the scratch's base (plan/sched_base.h: why, and the rule
 * that keeps it valid), the base's arrays copied and only what the rewrite changed
 * read from the graph. */
#include <stdlib.h>
#include <string.h>

#include "plan/planner.h"
#include "plan/sched_base.h"
#include "plan/sched_internal.h"

/* How many nodes or values ahead read_nodes and read_values prefetch the separately
 * allocated id arrays: on a graph larger than the cache, waiting for each in turn was
 * most of a schedule's time. */
#define READ_AHEAD 16

/* Makes room for `need` ints in *arr (holding `used` of *cap), doubling; false when
 * out of memory (*arr is then released). The check inline (it is asked per node and
 * per value and almost always holds), the growth out of line. */
/* memcpy and memcmp over n bytes that may be 0: a node without inputs or a value
 * without readers holds a NULL array there, and the C library's functions take no
 * NULL even for 0 bytes (UBSan reports it) */
static inline void copy_n(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}
static inline bool same_n(const void *a, const void *b, size_t n) { return n == 0 || memcmp(a, b, n) == 0; }

static bool ids_grow(sched *s, int **arr, int *cap, int used, int need);
static inline bool ids_room(sched *s, int **arr, int *cap, int used, int need) {
    return need <= *cap || ids_grow(s, arr, cap, used, need);
}

static bool ids_grow(sched *s, int **arr, int *cap, int used, int need) {
    int cap2 = *cap;
    while (cap2 < need) cap2 = cap2 < (1 << 29) ? 2 * cap2 : need;
    int *n = ot_scratch_realloc(s->scr, *arr, sizeof(int) * (size_t)used, sizeof(int) * (size_t)(cap2 + 1));
    if (!n) {
        ot_scratch_release(s->scr, *arr);
        *arr = NULL;
        return false;
    }
    *arr = n;
    *cap = cap2;
    return true;
}

/* Per node: live, phase, backward, and its input and output ids (CSR). One pass over
 * the node structs (648 bytes each: a 25,000-node graph's do not stay in cache, and a
 * counting pass first read each of them twice): the id arrays start at a size that
 * holds most graphs (three inputs and two outputs per node) and double when not.
 * Nodes [first, nn), their ids from n_in / n_out on (0, 0 for a whole read; the base's
 * totals after a copy of its nodes, read_from_base). False when out of memory. */
static bool read_nodes(sched *s, int first, int n_in, int n_out) {
    const ot_graph *g = s->g;
    for (int id = first; id < s->nn; id++) {
        const ot_node *nd = &g->nodes[id];
        if (id + READ_AHEAD < s->nn) { /* each id array is its own allocation: a miss apiece, overlapped */
            __builtin_prefetch(nd[READ_AHEAD].inputs);
            __builtin_prefetch(nd[READ_AHEAD].outputs);
        }
        s->live[id] = !nd->removed;
        s->phase[id] = (unsigned char)nd->phase;
        s->flags[id] = ot_plan_node_flags(nd);
        /* a fused update (ot_graph.fuse_update) frees its gradient: it may be eager too */
        s->bwd[id] = nd->phase == OT_PHASE_BACKWARD || (g->fuse_update && nd->phase == OT_PHASE_OPTIMIZER);
        s->in_start[id] = n_in;
        s->out_start[id] = n_out;
        if (!ids_room(s, &s->in_val, &s->cap_in, n_in, n_in + nd->n_inputs) ||
            !ids_room(s, &s->out_val, &s->cap_out, n_out, n_out + nd->n_outputs))
            return false;
        for (int k = 0; k < nd->n_inputs; k++) s->in_val[n_in++] = nd->inputs[k]; /* a few each: no memcpy */
        for (int k = 0; k < nd->n_outputs; k++) s->out_val[n_out++] = nd->outputs[k];
    }
    s->in_start[s->nn] = n_in;
    s->out_start[s->nn] = n_out;
    return true;
}

/* Per value: producer, consumers (CSR), the caches node_eager_fast reads (bytes,
 * temporary / param gradient flags as temporary() and pinned_gradient() decide them,
 * sole reader) and the number of distinct live readers. One pass, as read_nodes: a
 * consumer list holds one entry per input slot that reads the value, so the slots
 * read_nodes counted bound them all (the array grows should a list say otherwise).
 * read_consumers reads what value v's consumer list decides (the list from *n_cons on,
 * the param gradient flag, sole reader, readers): all a rewrite can change of a value
 * it did not append (read_graph); read_value also what its struct alone decides. False
 * when out of memory. */
static bool read_consumers(sched *s, int v, int *n_cons) {
    const ot_value *val = &s->g->values[v];
    const int *cs = val->consumers;
    int nc = val->n_consumers;
    s->cons_start[v] = *n_cons;
    if (!ids_room(s, &s->cons, &s->cap_cons, *n_cons, *n_cons + nc)) return false;
    for (int c = 0; c < nc; c++) s->cons[(*n_cons)++] = cs[c]; /* a few each: no memcpy */
    int n_opt = 0, n_other = 0; /* pinned_gradient() (schedule.c): read by updates (only, when fused) */
    for (int c = 0; c < nc && val->kind == OT_VK_GRADIENT; c++) {
        if (!live_id(s, cs[c])) continue;
        if (s->phase[cs[c]] == OT_PHASE_OPTIMIZER) n_opt++;
        else n_other++;
    }
    bool pinned = val->is_graph_output || (n_opt > 0 && (!s->g->fuse_update || n_other == 0));
    s->vflags[v] = (unsigned char)((s->vflags[v] & V_TEMPORARY) | (pinned ? V_PINNED_GRADIENT : 0));
    int sole = nc > 0 ? cs[0] : -1, n = 0;
    for (int c = 1; c < nc && sole >= 0; c++)
        if (cs[c] != sole) sole = -1;
    s->sole[v] = sole;
    for (int c = 0; c < nc; c++) {
        bool dup = false;
        for (int j = 0; j < c && !dup; j++) dup = cs[j] == cs[c];
        n += !dup && live_id(s, cs[c]);
    }
    s->readers0[v] = n;
    return true;
}

static bool read_value(sched *s, int v, int *n_cons) {
    const ot_value *val = &s->g->values[v];
    s->vprod[v] = val->producer;
    s->vsize[v] = ot_plan_value_size(val);
    s->vbytes[v] = s->vsize[v] >= 0 ? s->vsize[v] : value_bytes(val); /* the same bytes when sized */
    s->vinfo[v] = (unsigned char)(((unsigned)val->kind & OT_PLAN_V_KIND) | (val->is_graph_output ? OT_PLAN_V_OUTPUT : 0) |
                                  (val->data ? OT_PLAN_V_DATA : 0));
    bool temp = !val->is_graph_output && live_id(s, val->producer) &&
                (val->kind == OT_VK_ACTIVATION || val->kind == OT_VK_GRADIENT);
    s->vflags[v] = temp ? V_TEMPORARY : 0;
    return read_consumers(s, v, n_cons);
}

/* Values [first, nv), their consumers from n_cons on (as read_nodes). */
static bool read_values(sched *s, int first, int n_cons) {
    int nv = s->g->n_values;
    for (int v = first; v < nv; v++) {
        if (v + READ_AHEAD < nv) __builtin_prefetch(s->g->values[v + READ_AHEAD].consumers); /* as in read_nodes */
        if (!read_value(s, v, &n_cons)) return false;
    }
    s->cons_start[nv] = n_cons;
    s->readers0[nv] = 0; /* copied with the rest */
    return true;
}

/* ---- the base (plan/sched_base.h): its facts copied, the rest read fresh ---- */

enum { BASE_TOUCHED = 1, BASE_STALE = 2 }; /* ot_sched_base.mark bits */

/* The scratch's base when this call was declared to it (sched_base.h's rule: the same
 * graph and counts); the declaration serves this one call. NULL: read it all. A call
 * that is not declared, or not as declared, may follow a rewrite the base did not
 * see (whose undo reorders consumer lists): the base is dropped. */
static ot_sched_base *base_for(const sched *s) {
    if (!s->scr) return NULL;
    ot_sched_base *b = ot_plan_scratch_base(s->scr);
    if (!b->g) return NULL;
    bool ok = b->g == s->g && b->hint_g == s->g && s->nn == b->hint_nn && s->g->n_values == b->hint_nv &&
              s->nn >= b->nn && s->g->n_values >= b->nv;
    b->hint_g = NULL;
    if (!ok) ot_sched_base_clear(b);
    return ok ? b : NULL;
}

static void base_touch(ot_sched_base *b, int v) {
    if (v < 0 || v >= b->nv || (b->mark[v] & BASE_TOUCHED)) return;
    b->mark[v] |= BASE_TOUCHED;
    b->touched[b->n_touched++] = v;
}

/* The base's nodes copied, the declared ones' inputs (and view flag) read, the
 * appended ones read. 1: done; 0: out of memory; -1: the graph is not the base
 * with those changes (a declared node's counts differ, an appended node writes a
 * base value): nothing of the base may serve. */
static int nodes_from_base(sched *s, ot_sched_base *b) {
    int bn = b->nn, n_in = b->in_start[bn], n_out = b->out_start[bn];
    for (int i = 0; i < b->n_changed; i++) {
        int id = b->changed[i];
        if (id < 0 || id >= bn) continue; /* appended: read below */
        const ot_node *nd = &s->g->nodes[id];
        if (nd->removed == b->live[id] || nd->n_inputs != b->in_start[id + 1] - b->in_start[id] ||
            nd->n_outputs != b->out_start[id + 1] - b->out_start[id])
            return -1;
    }
    if (!ids_room(s, &s->in_val, &s->cap_in, 0, n_in) || !ids_room(s, &s->out_val, &s->cap_out, 0, n_out)) return 0;
    copy_n(s->live, b->live, (size_t)bn);
    copy_n(s->bwd, b->bwd, (size_t)bn);
    copy_n(s->phase, b->phase, (size_t)bn);
    copy_n(s->flags, b->flags, (size_t)bn);
    copy_n(s->in_start, b->in_start, sizeof(int) * (size_t)bn);
    copy_n(s->out_start, b->out_start, sizeof(int) * (size_t)bn);
    copy_n(s->in_val, b->in_val, sizeof(int) * (size_t)n_in);
    copy_n(s->out_val, b->out_val, sizeof(int) * (size_t)n_out);
    for (int i = 0; i < b->n_changed; i++) {
        int id = b->changed[i];
        if (id < 0 || id >= bn) continue;
        const ot_node *nd = &s->g->nodes[id];
        copy_n(s->in_val + b->in_start[id], nd->inputs, sizeof(int) * (size_t)nd->n_inputs);
        s->flags[id] = ot_plan_node_flags(nd); /* reads inputs[0] */
    }
    if (!read_nodes(s, bn, n_in, n_out)) return 0;
    for (int k = s->out_start[bn]; k < s->out_start[s->nn]; k++)
        if (s->out_val[k] >= 0 && s->out_val[k] < b->nv) return -1;
    return 1;
}

/* The base values whose consumer lists this call may see changed: those a declared
 * node's rewired slot (one that differs from the base's) read before and after, and
 * those appended nodes read. */
static void touch_values(const sched *s, ot_sched_base *b) {
    b->n_touched = 0;
    for (int i = 0; i < b->n_changed; i++) {
        int id = b->changed[i];
        if (id < 0 || id >= b->nn) continue;
        for (int k = b->in_start[id]; k < b->in_start[id + 1]; k++) {
            if (b->in_val[k] == s->in_val[k]) continue; /* not rewired: no list changed */
            base_touch(b, b->in_val[k]);
            base_touch(b, s->in_val[k]);
        }
    }
    for (int k = s->in_start[b->nn]; k < s->in_start[s->nn]; k++) base_touch(b, s->in_val[k]);
    for (int i = 0; i < b->n_stale; i++) b->mark[b->stale[i]] |= BASE_STALE;
}

/* The base's values copied in runs between the marked ones, which are read fresh; a
 * stale value this call does not touch holds its base state again and is written
 * back. 1, 0 as nodes_from_base; -1: a stale list changed length (the base is
 * dropped after this call, which has read right). */
static int values_from_base(sched *s, ot_sched_base *b) {
    int bv = b->nv, n_cons = 0, ret = 1;
    copy_n(s->vprod, b->vprod, sizeof(int) * (size_t)bv);
    copy_n(s->vsize, b->vsize, sizeof(int64_t) * (size_t)bv);
    copy_n(s->vbytes, b->vbytes, sizeof(int64_t) * (size_t)bv);
    copy_n(s->vinfo, b->vinfo, (size_t)bv);
    copy_n(s->vflags, b->vflags, (size_t)bv);
    copy_n(s->sole, b->sole, sizeof(int) * (size_t)bv);
    copy_n(s->readers0, b->readers0, sizeof(int) * (size_t)bv);
    for (int v = 0; v < bv;) {
        int w = v;
        while (w < bv && !b->mark[w]) w++;
        int from = b->cons_start[v], len = b->cons_start[w] - from, delta = n_cons - from;
        if (!ids_room(s, &s->cons, &s->cap_cons, n_cons, n_cons + len)) return 0;
        copy_n(s->cons + n_cons, b->cons + from, sizeof(int) * (size_t)len);
        n_cons += len;
        for (int u = v; u < w; u++) s->cons_start[u] = b->cons_start[u] + delta;
        if (w == bv) break;
        if (!read_consumers(s, w, &n_cons)) return 0; /* the rest is the base's */
        if (b->mark[w] == BASE_STALE) { /* untouched now: the graph holds its base state */
            int at = b->cons_start[w], nc = n_cons - s->cons_start[w];
            if (nc != b->cons_start[w + 1] - at) ret = -1;
            else copy_n(b->cons + at, s->cons + s->cons_start[w], sizeof(int) * (size_t)nc);
            b->sole[w] = s->sole[w];
            b->readers0[w] = s->readers0[w];
            b->vflags[w] = s->vflags[w];
        }
        v = w + 1;
    }
    return read_values(s, bv, n_cons) ? ret : 0;
}

/* The compact arrays of s->g: from the base when the call was declared to one, else
 * read in full. False when out of memory. */
bool ot_sched_read_graph(sched *s) {
    ot_sched_base *b = base_for(s);
    s->cap_in = 3 * s->nn + 16;
    s->cap_out = 2 * s->nn + 16;
    s->in_val = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(s->cap_in + 1));
    s->out_val = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(s->cap_out + 1));
    if (!s->in_val || !s->out_val) return false;
    int r = b ? nodes_from_base(s, b) : -1;
    if (r == 0) return false;
    if (r < 0) { /* no base, or not the base's graph: drop it */
        if (b) ot_sched_base_clear(b);
        if (!read_nodes(s, 0, 0, 0)) return false;
        b = NULL;
    }
    s->cap_cons = s->in_start[s->nn] + 16;
    s->cons = ot_scratch_alloc(s->scr, sizeof(int) * (size_t)(s->cap_cons + 1));
    if (!s->cons) return false;
    if (!b) return read_values(s, 0, 0);
    touch_values(s, b);
    r = values_from_base(s, b);
    for (int i = 0; i < b->n_stale; i++) b->mark[b->stale[i]] = 0;
    for (int i = 0; i < b->n_touched; i++) b->mark[b->touched[i]] = 0;
    int *t = b->stale; /* what this call touched comes back from the undo in another order */
    b->stale = b->touched;
    b->n_stale = b->n_touched;
    b->touched = t;
    if (r < 0) ot_sched_base_clear(b);
    return r != 0;
}

bool ot_sched_base_holds(ot_plan_scratch *scr, const ot_graph *g) {
    const ot_sched_base *b = ot_plan_scratch_base(scr);
    if (!b->g) return true;
    if (b->g != g || g->n_nodes != b->nn || g->n_values != b->nv) return false;
    for (int id = 0; id < b->nn; id++) {
        const ot_node *nd = &g->nodes[id];
        if (nd->removed == b->live[id] || nd->n_inputs != b->in_start[id + 1] - b->in_start[id] ||
            !same_n(nd->inputs, b->in_val + b->in_start[id], sizeof(int) * (size_t)nd->n_inputs))
            return false;
    }
    for (int i = 0; i < b->n_stale; i++) b->mark[b->stale[i]] = BASE_STALE;
    bool ok = true;
    for (int v = 0; v < b->nv && ok; v++) {
        const ot_value *val = &g->values[v];
        int at = b->cons_start[v], nc = b->cons_start[v + 1] - at;
        ok = val->n_consumers == nc &&
             (b->mark[v] || same_n(val->consumers, b->cons + at, sizeof(int) * (size_t)nc));
    }
    for (int i = 0; i < b->n_stale; i++) b->mark[b->stale[i]] = 0;
    return ok;
}
