/* auto_search.h — the state and moves of auto's search (remat/auto.c), shared with its
 * second phase (remat/auto_polish.c); not part of the API. */
#ifndef OT_REMAT_AUTO_SEARCH_H
#define OT_REMAT_AUTO_SEARCH_H

#include <stdint.h>

#include "remat/remat.h"
/* The arrays of auto's rewrites, reused from one measurement to the next (each rewrite
 * is undone before the next is applied). Why: allocated per rewrite, the first of
 * them, a large block, came right after the undo had freed the clones' thousands of
 * small blocks, and glibc merges all those (malloc_consolidate) before it serves a
 * large block; the next clones then came from the merged chunks, the slow path:
 * about a tenth of auto's time at 5,000 nodes. Capacities in entries; freed by
 * ot_remat_rewrite_buf_free.
 *
 * The clones' own blocks are kept too: the undo parks each clone's (its node's
 * strings and id arrays, its attributes, its values' names and consumer lists) under
 * the forward node or value it copies, and the next clone of that node takes them
 * back: the same name, the same sizes. Allocating and freeing some six small blocks
 * per clone, thousands per measurement, took a tenth of auto's time at 5,007 nodes and
 * a fifth at 25,023 (the allocator's lists spread over a heap that outgrew the cache). */
typedef struct ot_remat_parked_node {
    ot_node_blocks b; /* b.name NULL: nothing parked */
    ot_attr *attrs;
    int n_attrs;
} ot_remat_parked_node;
typedef struct ot_remat_rewrite_buf {
    bool *needed;            /* a->n_values */
    int *clone_of;           /* a->n_values */
    int *readers;            /* cap_readers */
    int *rw_node, *rw_slot, *rw_old; /* cap_slots */
    int cap_readers, cap_slots;
    ot_remat_parked_node *park_node; /* per forward node id (n_park_nodes) */
    ot_value_blocks *park_val;       /* per value id (n_park_vals); name NULL: nothing parked */
    int n_park_nodes, n_park_vals;
    int *val_orig, n_val_orig;       /* the values the rewrite cloned, in the order of their clones */
} ot_remat_rewrite_buf;
void ot_remat_rewrite_buf_free(ot_remat_rewrite_buf *b);

/* The measurements made, by what the rewrite read of the keep set (remat/auto_measure.c):
 * a graph measured once is answered from here, the same peak, steps at the top and FLOPs. */
typedef struct ot_remat_memo_slot {
    uint64_t hash; /* 0: empty */
    int key;       /* its key: keys[key * n_words ..] */
    int64_t peak, n_top;
    double cost;
    bool above; /* measured under a limit it passed: the peak is only known to be at least peak */
} ot_remat_memo_slot;
typedef struct ot_remat_memo {
    int n_values, n_words; /* keys packed, 64 values a word */
    ot_remat_memo_slot *slot;
    int cap, n;            /* slots (a power of two), entries */
    uint64_t *keys;        /* n packed keys */
    int key_cap;
    uint64_t *probe;       /* the last key looked up, packed, and its hash */
    uint64_t probe_hash;
    bool full;             /* past OT_REMAT_MEMO_MAX_BYTES: no more entries */
} ot_remat_memo;
/* Most bytes of packed keys one memo holds (some 5,000 keys of 100,000 values). */
#define OT_REMAT_MEMO_MAX_BYTES ((size_t)64 << 20)
void ot_remat_memo_init(ot_remat_memo *mm, int n_values);
void ot_remat_memo_free(ot_remat_memo *mm);
/* True, with what was measured, when key (n_values flags: what a measurement depends on,
 * remat/auto_measure.c, memo_key) was measured before; either way key is remembered for
 * ot_remat_memo_put. */
bool ot_remat_memo_find(ot_remat_memo *mm, const bool *key, ot_remat_memo_slot *found);
/* Records the measurement of the key of the last ot_remat_memo_find, replacing what it
 * had (a bound: above); silently not, when the memo is full or out of memory: that key
 * is measured again. above: the measurement passed its limit, peak is a lower bound. */
void ot_remat_memo_put(ot_remat_memo *mm, int64_t peak, int64_t n_top, double cost, bool above);

typedef struct ot_remat_search {
    ot_graph *g;
    const ot_remat_analysis *a;
    ot_remat_measure_fn measure;
    void *user;
    int64_t budget;
    /* What every measurement's plan aims at (ot_remat_measurement.fit_target): the
     * budget the plan will run under, 0 for none. search_init sets it to budget (when
     * positive); auto's second search, under a budget below the first plan's peak, keeps
     * the real one, so that the plan it accepts is the plan that runs. */
    int64_t fit_target;
    /* Recompute FLOPs a plan may cost (auto without a budget: remat/auto_modest.c);
     * HUGE_VAL otherwise. A dearer plan is not planned: its measurement is a peak of
     * INT64_MAX, and it is never the best nor the least-peak plan. */
    double cost_cap;
    ot_remat_auto_stats *stats;
    bool *best;      /* cheapest feasible keep set so far */
    double best_cost;
    int64_t best_peak;
    bool have_best;
    bool *min_keep;  /* keep set with the smallest peak */
    struct ot_plan_scratch *scratch; /* the measurements' reused memory (ot_remat_measurement.scratch) */
    /* What ot_remat_mark_clones walks, copied once per search (forward nodes' inputs
     * never change under the rewrite): per value its producer; per node id its inputs
     * that are candidates (walk_in[walk_start[id] .. walk_start[id + 1])); and the
     * walk's marks and stack. ot_remat_search_cost reads these arrays instead of the
     * nodes, a cache miss each on a big graph, at every price the searches ask. */
    int *walk_prod, *walk_start, *walk_in, *walk_stack;
    bool *walk_cloned;
    ot_remat_rewrite_buf rw_buf; /* the measurements' rewrites' arrays */
    /* The measurements so far: own_memo's, or one that searches of the same graph share
     * (ot_remat_auto's: a measurement does not depend on the budget). */
    ot_remat_memo *memo, own_memo;
    bool *memo_key; /* a->n_values: what the memo is keyed by (auto_measure.c, memo_key) */
} ot_remat_search;

/* Sets up a search of g under budget (-1: none fits; the least-peak searches), cost_cap
 * HUGE_VAL; free with ot_remat_search_free. stats is zeroed and filled by the search. */
ot_status ot_remat_search_init(ot_remat_search *s, ot_graph *g, const ot_remat_analysis *a, int64_t budget,
                               ot_remat_measure_fn measure, void *user, ot_remat_auto_stats *stats, ot_error *err);
void ot_remat_search_free(ot_remat_search *s);
/* Measures the segment plans: every:K on a ladder of K, and tapered segmentations. */
ot_status ot_remat_try_segment_ladder(ot_remat_search *s, bool *keep, ot_error *err);

/* A value (or index) and its sort key; ot_remat_ranked_desc sorts by key, highest
 * first, then by v. */
typedef struct ot_remat_ranked {
    int v;
    double key;
} ot_remat_ranked;
int ot_remat_ranked_desc(const void *x, const void *y);

/* keep = none minus the first k values of order; with chains, the candidates the
 * backward pass does not read are not kept either. */
void ot_remat_prefix_keep(const ot_remat_search *s, const ot_remat_ranked *order, int k, bool chains, bool *keep);
/* FLOPs of recomputing saved value v: its producer and, back through its inputs, every
 * candidate the backward pass does not read. stamp/stack: a->n_nodes + 1 of scratch,
 * stamp[node] == tag marks a visited node. */
double ot_remat_closure_flops(const ot_graph *g, const ot_remat_analysis *a, int v, int *stamp, int tag, int *stack);

/* ot_remat_keep_cost(s->g, s->a, keep, NULL), the same value to the bit (the same
 * clones, summed in node id order), from the search's copy of the graph. The clones
 * stay marked in s->walk_cloned (their count in *n_clones when not NULL). */
double ot_remat_search_cost(ot_remat_search *s, const bool *keep, int *n_clones);

/* ot_remat_apply with the clones already marked (cloned[node id], n_clones of them:
 * what ot_remat_mark_clones marks for keep), for auto's measurements (rewrite.c): the
 * same rewrite, but rw->kept_bytes is left 0 (the search reads the FLOPs alone, and
 * counting the bytes read the clones' nodes and values once more), and rw's arrays
 * are buf's (rw->borrowed), valid until buf's next rewrite. */
ot_status ot_remat_apply_marked(ot_graph *g, const ot_remat_analysis *a, const bool *keep, const bool *cloned,
                                int n_clones, ot_remat_rewrite_buf *buf, ot_remat_rewrite *rw, ot_error *err);

/* Measures one keep set (planner run); records it as best when it fits and is cheaper.
 * _measure gives the whole measurement (peak and steps at the top). _try without
 * peak_out and _fits are for callers that need only whether it fits (and the best it
 * records): once a plan fits, their planner runs stop as soon as the peak must pass the
 * budget (ot_remat_measurement.limit). */
ot_status ot_remat_search_measure(ot_remat_search *s, const bool *keep, ot_remat_measurement *m_out,
                                  double *cost_out, ot_error *err);
ot_status ot_remat_search_try(ot_remat_search *s, const bool *keep, int64_t *peak_out, double *cost_out,
                              ot_error *err);
ot_status ot_remat_search_fits(ot_remat_search *s, const bool *keep, bool *fits, ot_error *err);
/* _measure, fit_only: the caller reads the peak only against the budget (see above). */
ot_status ot_remat_search_measure_fit(ot_remat_search *s, const bool *keep, bool fit_only, ot_remat_measurement *m_out,
                                      double *cost_out, ot_error *err);
/* Local search from keep over vars: flip one, or shift a kept one to its neighbour. */
ot_status ot_remat_search_flips(ot_remat_search *s, bool *keep, const int *vars, int n_vars, int max_evals,
                                ot_error *err);
/* Exchange search from the best plan (keep one, recompute one); with frontier, also
 * each exchange that keeps the dropped value's unread inputs. */
ot_status ot_remat_search_swaps(ot_remat_search *s, bool *keep, const int *vars, int n, int max_evals, bool frontier,
                                ot_error *err);
/* The search's variables, in forward order: the saved values that are not pinned, and
 * with unread_too also the candidates no backward node reads (kept only for clones).
 * vars: a->n_values room. Returns how many. */
int ot_remat_search_vars(const ot_graph *g, const ot_remat_analysis *a, bool unread_too, int *vars);
/* Planner runs one local search may spend over n_vars variables. */
int ot_remat_eval_cap(int n_vars);
/* True when recomputing saved value w under keep clones node p. stamp/stack: scratch
 * of a->n_nodes + 1, stamp[node] == tag marks a visited node. */
bool ot_remat_chain_reaches(const ot_graph *g, const ot_remat_analysis *a, const bool *keep, int w, int p, int *stamp,
                            int tag, int *stack);

/* Unclone rounds from the best plan (remat/auto_unclone.c): keep every recomputed
 * value of vars (n of them) whose chain clones one node, then recompute kept values
 * until the peak fits; the four costliest clones, or with cheap_too every clone that
 * costs FLOPs (each group of values once per round). Again while a round wins. */
ot_status ot_remat_unclone_search(ot_remat_search *s, bool *keep, const int *vars, int n, bool cheap_too,
                                  ot_error *err);

/* Exchange-and-shift rounds from the best plan (remat/auto_shift.c): the cheapest
 * exchanges over vars (n of them) that keep no more bytes, each that does not fit
 * then repaired by moving one kept value to a recomputed neighbour in vars; flips
 * after each win. Again while a round wins. */
ot_status ot_remat_shift_search(ot_remat_search *s, bool *keep, const int *vars, int n, ot_error *err);

/* The nodes the best plan clones that cost FLOPs, costliest first, into top (node id
 * and FLOPs; a->n_nodes + 1 room). cloned (a->n_nodes) and stack
 * (ot_remat_stack_room) are scratch. Returns how many. */
int ot_remat_costly_clones(const ot_remat_search *s, bool *cloned, int *stack, ot_remat_ranked *top);

/* Most inputs ot_remat_frontier_keep keeps. */
#define OT_REMAT_FRONTIER_MAX 8
/* Keeps (sets keep[]) the inputs of v's producer that are candidates the backward pass
 * does not read and are not kept yet; writes them to undo (OT_REMAT_FRONTIER_MAX room)
 * and returns how many. */
int ot_remat_frontier_keep(const ot_graph *g, const ot_remat_analysis *a, bool *keep, int v, int *undo);

/* Exchanges (ot_remat_search_swaps) are tried on graphs with at most this many search
 * variables: their count grows as its square (a 5,000-node graph has ~1,700, and skips them). */
#define OT_REMAT_SWAP_MAX_VARS 200

/* The second phase (and auto's second search, remat/auto.c) runs on graphs of at most
 * this many candidates (its exchanges grow as the square: a 5,000-node graph has ~3,300
 * and skips it). */
#define OT_REMAT_POLISH_MAX_VARS 400

/* auto's second phase (remat/auto_polish.c): from the best plan, the moves above and
 * add-and-repair moves over every candidate, saved or not. vars: a->n_values room. */
ot_status ot_remat_auto_polish(ot_remat_search *s, bool *keep, int *vars, ot_error *err);
/* Add-and-fill (remat/auto_polish.c, auto's last stage): the add moves of the polish,
 * each repaired by one bulk repair whose drops go by FLOPs per byte, the smaller first
 * at the same price. vars: a->n_values room. */
ot_status ot_remat_fill_search(ot_remat_search *s, bool *keep, int *vars, ot_error *err);

#endif
