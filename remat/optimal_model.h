/* optimal_model.h — the programme remat/optimal.c builds for `--remat optimal`, shared
 * with the file that writes its memory rows (remat/optimal_rows.c: the freed and
 * brought-back bytes of each value as terms over steps, and the running sums that
 * bound them). What the columns and rows mean: optimal.c's header. Not part of the
 * API. */
#ifndef OT_REMAT_OPTIMAL_MODEL_H
#define OT_REMAT_OPTIMAL_MODEL_H

#include "remat/optimal_chain.h"
#include "remat/optimal_mip.h"
#include "remat/remat.h"

#define OT_OPT_NEVER 0x7fffffff /* a step that never comes */

/* A memory term: coef x (column value) over schedule steps [start, end). */
typedef struct ot_opt_term {
    int col, start, end;
    double coef; /* model units; negative: bytes freed */
} ot_opt_term;

typedef struct ot_opt_model {
    const ot_graph *g;
    const ot_remat_analysis *a;
    ot_remat_measurement m0; /* the none plan: schedule and timeline */
    int *step_of;            /* per node id: step in m0, -1 when absent */
    int *first_bwd, *last_fwd, *root; /* per value */
    int *reach;              /* per node id: earliest backward step a clone of it serves */
    int *place;              /* per node id: the step its clone would run before (see value_windows) */
    int *col;                /* per value: x (saved) or k (kept for clones) column, -1 */
    int *rcol;               /* per node id: r column, -1 */
    ot_opt_term *terms;
    int n_terms, cap_terms;
    int *bounds, n_bounds;   /* interval starts, ascending; the last is n_steps */
    int *s_col;              /* per interval: S column */
    double *t0max;           /* per interval: the none plan's most bytes in use (units) */
    double unit;             /* bytes per model unit */
    double pad;              /* bytes off every row's budget: the none plan's pinned padding (0 after
                                the fallback; see the file header) */
    ot_mip mip;
    int floor_row;           /* the objective >= the exact rounds' bound so far (optimal.c's
                                set_floor); free (-inf) when no bound is known */
    double grain;            /* every objective coefficient is a multiple of it (their gcd when
                                all are whole numbers, else 0): so is every plan's cost */
    /* The none plan as the planner placed it (NULL when the measure is not the
     * planner's own): where best fit must leave a hole (remat/optimal_hole.c). */
    struct ot_plan *p0;
    int64_t fit_target; /* the budget: what every solution's plan aims at (ot_remat_measurement) */
    /* Kept when the programme is rebuilt (model_rebuild): the chains found so far
     * (optimal_chain.h) and the no-good cuts, as rows over x/k columns, which a
     * rebuild numbers the same (choice_columns adds them first). */
    ot_opt_chains chains;
    ot_mip cuts;
    bool walked; /* the chains of the graph's paths are in chains (optimal_prechain.c) */
} ot_opt_model;

/* The error every allocation failure of the programme returns. */
ot_status ot_opt_oom(ot_error *err);
/* The memory terms per root (a value and its views) and the rows that tie them to the
 * choices; needs the columns of optimal.c's choice_columns. */
ot_status ot_opt_memory_terms(ot_opt_model *md, ot_error *err);
/* Appends the term coef x col over steps [start, end) (nothing when empty); false when
 * out of memory. */
bool ot_opt_add_term(ot_opt_model *md, int col, int start, int end, double coef);
/* The holes best fit must leave below the arena's top in every plan (optimal_hole.c):
 * their bytes as terms, each on a column fixed at 1 or, where a clone could run before
 * the hole is made, a column that is 1 unless one of those clones runs. */
ot_status ot_opt_hole_terms(ot_opt_model *md, ot_error *err);
/* Per interval, the bytes (relax[n_bounds]) by which the memory rows at budget must
 * widen to admit the plan whose integer columns are start: the least total, by an LP
 * (optimal_relax.c). *outside: a row that is no memory row excludes it. */
ot_status ot_opt_seed_relax(const ot_opt_model *md, int64_t budget, const double *start, double *relax,
                            bool *outside, ot_error *err);
/* Once per model: every chain a path of the graph makes (optimal_prechain.c), into
 * md->chains before the memory rows are made; needs choice_columns' columns. */
ot_status ot_opt_prechains(ot_opt_model *md, ot_error *err);
/* The integer columns of the point of a keep set (remat/optimal_point.c): its x/k
 * choices, and r at the rewrite's closure where r is integer; other columns untouched. */
ot_status ot_opt_keep_point(const ot_opt_model *md, const bool *keep, double *x, ot_error *err);
/* The running sums over the terms: one interval per run of steps where none starts or
 * ends; their bounds are set per round. */
ot_status ot_opt_budget_rows(ot_opt_model *md, ot_error *err);

#endif
