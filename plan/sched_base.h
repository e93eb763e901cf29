/* sched_base.h — the schedule's compact facts of a base graph, kept in a scratch
 * (plan/scratch.h) across calls for a caller that plans many rewrites of one graph
 * (remat's auto: apply a rewrite, measure, undo). Internal to plan/.
 *
 * Why: the schedule's setup reads every node struct (648 bytes) and value struct (192)
 * of the graph into compact arrays, at every measurement: at 25,000 nodes some 27 MB
 * that do not stay in cache, a quarter of auto's time, growing faster than the graph.
 * A rewrite changes little of it: it appends clones (nodes and values after the base's)
 * and rewires some base nodes' inputs to the clones. With the base's facts kept, a
 * measurement copies them and reads fresh only the appended nodes and values, the
 * rewired nodes, and the values whose consumer lists the rewrite touched.
 *
 * The validity rule (schedule.h, ot_schedule_base_set and _hint): the base is taken
 * from the graph between rewrites; a call uses it only when its caller declared, for
 * that one call, the graph (the same pointer and counts) and every base node whose
 * inputs differ from the base; the base's nodes are otherwise unchanged, nothing is
 * removed, and appended nodes write no base value (checked). Values are touched only
 * through their consumer lists: a base value a declared node's slot read before its
 * rewiring or reads after it (the slots that differ from the base's), or that an
 * appended node reads, is read fresh. So a slot must not be set away and back within
 * one rewrite (its value's list would come back reordered, unseen): remat's rewrite
 * sets each slot once. An undo leaves such a list in
 * another order (rewired readers come back at its end), so those values stay "stale"
 * after the call: the next call reads them fresh too, and when it does not touch them
 * (the graph holds their base state again) writes them back into the base. Any
 * mismatch (a declared node whose counts changed, a stale list of another length)
 * drops the base: every later call takes the full read. */
#ifndef OT_PLAN_SCHED_BASE_H
#define OT_PLAN_SCHED_BASE_H

#include <stdint.h>

#include "ir.h"

typedef struct ot_sched_base {
    const ot_graph *g; /* NULL: no base */
    int nn, nv;        /* the base's node and value counts */
    /* per node (as the schedule's sched arrays, sched_internal.h) */
    bool *live, *bwd;
    unsigned char *phase, *flags;
    int *in_start, *in_val, *out_start, *out_val;
    /* per value */
    int *vprod, *cons_start, *cons, *sole, *readers0;
    int64_t *vsize, *vbytes;
    unsigned char *vinfo, *vflags;
    unsigned char *mark; /* per value, 0 between calls: BASE_TOUCHED / BASE_STALE (sched_read.c) */
    int *stale, n_stale;  /* the values read fresh by the last call that used the base */
    int *touched, n_touched; /* this call's (sched_read.c); both lists hold nv entries */
    /* the next call's declaration (ot_schedule_base_hint); hint_g NULL: none */
    const ot_graph *hint_g;
    int hint_nn, hint_nv, n_changed;
    const int *changed;
} ot_sched_base;

/* The scratch's base (never NULL for a scratch: an empty one until set). */
ot_sched_base *ot_plan_scratch_base(struct ot_plan_scratch *s);
/* For tests, between rewrites: true when scr has no base, or when g holds the base's
 * nodes and every base value's consumer list, in the base's order unless the value is
 * stale (then of the base's length). */
bool ot_sched_base_holds(struct ot_plan_scratch *scr, const ot_graph *g);

/* Frees the base's arrays and empties it (the scratch keeps the struct). */
void ot_sched_base_clear(ot_sched_base *b);

#endif
