/* sched_internal.h — the schedule's state (plan/schedule.c), shared with the reading
 * of the graph into its compact arrays, whole or from a kept base (plan/sched_read.c).
 * Internal to plan/. */
#ifndef OT_PLAN_SCHED_INTERNAL_H
#define OT_PLAN_SCHED_INTERNAL_H

#include <stdint.h>

#include "ir.h"
#include "plan/scratch.h"

typedef struct sched_key {
    int rank;   /* phase rank */
    int anchor; /* node id, a clone's first consumer, or -1 for an eager node */
    int sub;    /* 0 for recompute clones: run right before their anchor */
    int id;
} sched_key;

/* What both forms share: the live nodes in topological order, producer -> consumer
 * edges, static keys, and per value the number of distinct live nodes that read it. */
typedef struct sched {
    const ot_graph *g;
    ot_plan_scratch *scr; /* where the arrays come from: NULL for the heap */
    int nn, n_live;
    int *topo, *succ_start, *succ, *indeg0, *readers0;
    sched_key *keys;
    /* per value, what node_eager asks of it, read once from the graph's ot_value
     * (a large struct) instead of at every push: bytes (-1 unknown), whether it is a
     * temporary, a param's gradient, and its sole reader (-1: none or several) */
    int64_t *vbytes;
    unsigned char *vflags;
    int *sole;
    bool *live; /* per node: node_live */
    bool *bwd;  /* per node: a BACKWARD node, the only kind that can be eager */
    /* the graph's nodes and values read once per schedule into compact arrays, which
     * the passes below and both orders read instead of the large ot_node/ot_value
     * structs: per node its phase and its input and output value ids (CSR), per
     * value its producer and its consumers (CSR, in the graph's order) */
    unsigned char *phase, *flags; /* flags: ot_plan_node_flags, for the planner runs */
    int *in_start, *in_val, *out_start, *out_val;
    int *vprod, *cons_start, *cons;
    int cap_in, cap_out, cap_cons; /* in_val's, out_val's, cons' room (ids_room) */
    unsigned char *vinfo; /* ot_plan_nodes.vinfo */
    int64_t *vsize;       /* ot_plan_value_size */
    /* per run */
    int *indeg, *readers;
    bool *done, *eager;
    /* the ready set's key positions (ready_set): per node its static key's and its
     * eager key's (-1: not a backward node), per position its node; the eager keys
     * are the positions [eager_lo, eager_hi) */
    int *pos_static, *pos_eager, *pos_node;
    int n_pos, eager_lo, eager_hi;
    uint64_t *ready_bits, *ready_sum;
} sched;

enum { V_TEMPORARY = 1, V_PINNED_GRADIENT = 2 }; /* vflags bits */

/* True if node id is live, from the compact arrays (node_live). */
static inline bool live_id(const sched *s, int id) { return id >= 0 && id < s->nn && s->live[id]; }

/* Bytes of a value with a static shape, -1 otherwise. */
static inline int64_t value_bytes(const ot_value *v) {
    int64_t n = ot_shape_numel(&v->shape);
    size_t es = ot_dtype_size(v->dtype);
    if (n < 0 || es == 0 || n > INT64_MAX / (int64_t)es) return -1;
    return n * (int64_t)es;
}

/* Fills s's per-node and per-value arrays (s->g, s->scr, s->nn and the arrays of
 * sched_init set): from the scratch's base when the call was declared to it
 * (plan/sched_base.h), else read from the graph in full. False when out of memory. */
bool ot_sched_read_graph(sched *s);

/* Fused updates under MPI (ot_graph.sum_ranks > 1): every run of consecutive
 * optimizer nodes moves one run later (sched_defer.c), so each gradient's sum over
 * the ranks overlaps the backward pass until the next gradient is complete. phase per
 * node id. False when out of memory. */
bool ot_sched_defer_updates(const unsigned char *phase, int *order, int n, ot_plan_scratch *scr);

#endif
