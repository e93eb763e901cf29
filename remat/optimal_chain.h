/* optimal_chain.h — lazily found recompute chains for remat/optimal.c's memory rows.
 *
 * The programme places the clone of a forward node c at place[c]: before the first
 * backward read of one of its saved outputs, or before the clone of a consumer of an
 * unsaved output. Through a saved output the model cuts the chain, because whether
 * that output is recomputed is a choice. The rewrite does not cut it: when c's saved
 * output v is recomputed too and the clone of v's consumer runs earlier, the clone of
 * c runs there (mobilenet at 731,328 bytes: block1's five recomputed values come back
 * at step 36, where block1/act's clone serves the pointwise ConvGradInput, not at
 * their own first backward reads 38-42; the model missed 196,608 bytes there).
 *
 * A chain is a path c = c_0 -> c_1 -> ... -> c_k through the values v_i (output of
 * c_{i-1}, read by c_i) that ends at a saved output w of c_k. Its literals: v_i not
 * kept (x_v for a saved v_i, 1 - k_v otherwise) and w recomputed (x_w). When they all
 * hold, the rewrite's closure clones every c_i (w recomputed clones c_k; an input not
 * kept clones its producer), each before the next, all before w's first backward
 * reader at step fb(w). So a recomputed value u that c reads is back (u.rc, the one
 * clone of u's producer, live to u's own backward readers) from fb(w): for every plan,
 * not just the one that showed the chain. optimal.c adds the chain as one more
 * reader of u, at step fb(w), to the rows that bring u back before its first backward
 * read. Not part of the API. */
#ifndef OT_REMAT_OPTIMAL_CHAIN_H
#define OT_REMAT_OPTIMAL_CHAIN_H

#include "remat/remat.h"

typedef struct ot_opt_lit {
    int col;  /* a binary column of the programme */
    bool neg; /* the literal is 1 - col */
} ot_opt_lit;

/* Entry i: the root value (optimal.c's views share a root) is back from step[i]
 * when all of lits[start[i] .. start[i + 1]) hold. */
typedef struct ot_opt_chains {
    int n, cap;
    int *root, *step, *start; /* start has n + 1 entries */
    int n_lits, cap_lits;
    ot_opt_lit *lits;
} ot_opt_chains;

/* What the search reads of optimal.c's model (arrays per value or per node id). */
typedef struct ot_opt_chain_view {
    const ot_graph *g;
    const ot_remat_analysis *a;
    const int *first_bwd, *last_fwd; /* per value, none schedule steps; NEVER: no backward read */
    const int *root;                 /* per value: the base whose bytes it shares */
    const int *col;                  /* per value: its x or k column, -1 */
    const int *place;                /* per node id: where the model places its clone */
    int never;                       /* optimal.c's NEVER */
} ot_opt_chain_view;

/* Adds to ch every chain the plan keep shows that brings a recomputed saved value
 * back before the model's place of its reader's clone, unless ch has it already.
 * *added gets how many were new. */
ot_status ot_opt_chains_find(const ot_opt_chain_view *vw, const bool *keep, ot_opt_chains *ch, int *added,
                             ot_error *err);
void ot_opt_chains_free(ot_opt_chains *ch);
/* Adds the chain (root back from step when lits[0 .. n) hold) unless ch has it; false
 * when out of memory. */
bool ot_opt_chains_push(ot_opt_chains *ch, int root, int step, const ot_opt_lit *lits, int n);

#endif
