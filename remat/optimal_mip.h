/* optimal_mip.h — a mixed-integer programme as remat/optimal.c builds it (columns with
 * bounds, objective and integrality, rows with bounds, coefficients as triplets), and
 * the one call that hands it to a solver: COIN-OR CBC (remat/optimal_cbc.c) when the
 * build has it, else GLPK (remat/optimal_glpk.c). The model knows no solver; the
 * solvers know no graph. Not part of the API. */
#ifndef OT_REMAT_OPTIMAL_MIP_H
#define OT_REMAT_OPTIMAL_MIP_H

#include "ir.h"

typedef struct ot_mip {
    int n_cols, n_rows, nnz;
    int cap_cols, cap_rows, cap_nnz;
    double *obj, *col_lo, *col_hi; /* per column; -HUGE_VAL / HUGE_VAL: no bound */
    bool *col_int;
    double *row_lo, *row_hi;       /* per row */
    int *ri, *ci;                  /* coefficient k: row ri[k], column ci[k], value v[k] */
    double *v;
} ot_mip;

/* Each returns the new index, or -1 when out of memory. */
int ot_mip_add_col(ot_mip *m, double obj, double lo, double hi, bool is_int);
int ot_mip_add_row(ot_mip *m, double lo, double hi);
/* false when out of memory */
bool ot_mip_add_coef(ot_mip *m, int row, int col, double v);
void ot_mip_free(ot_mip *m);

typedef enum ot_mip_status {
    OT_MIP_OPTIMAL = 0,  /* solved, gap closed */
    OT_MIP_FEASIBLE,     /* a solution, gap open (time limit) */
    OT_MIP_INFEASIBLE,   /* proven: no solution */
    OT_MIP_NO_SOLUTION,  /* none found within the time limit */
} ot_mip_status;

typedef struct ot_mip_result {
    ot_mip_status status;
    double obj;     /* objective of the solution (minimised) */
    double bound;   /* best proven lower bound */
    double gap;     /* (obj - bound) / max(|obj|, tiny); 0 when optimal */
    double seconds;
    int solver;     /* OT_MIP_CBC or OT_MIP_GLPK: the one whose result this is */
} ot_mip_result;

/* Fills in a solver's finished result r (r->obj set): closed (proven) or feasible, the
 * bound clamped to [0, obj] (every objective coefficient is >= 0; a bound that is NaN
 * or above obj counts as obj), and the gap. Both solvers report through it. */
void ot_mip_result_set_bound(ot_mip_result *r, bool closed, double bound);

/* True when a solver was built in (CBC or GLPK found at configure time). */
bool ot_mip_solver_available(void);
/* The solvers ot_mip_solve uses: "CBC+GLPK", "CBC", "GLPK" or "none". */
const char *ot_mip_solver_name(void);
/* Minimises m within time_limit_s (wall clock); x[n_cols] gets the solution when there
 * is one. start (NULL: none) proposes values for the integer columns: when the
 * programme with them fixed is feasible, that point is the search's first incumbent
 * (the rest of it solved as an LP). With both solvers built in, one runs first for a
 * slice of the limit and, when it has not closed the gap, the other gets the rest,
 * from the first one's incumbent, and the better bound of the two counts: neither
 * dominates on remat's programmes (chain48's 48 interchangeable layers: CBC closes
 * the gap at the root in 0.1 s, GLPK not in 20 s; tinygpt: GLPK 0.3-0.6 s a solve,
 * CBC 1.4-4.6 s). *prefer (in and out; -1: no history) is the solver that closed the
 * last solve of a sequence of similar programmes (OT_MIP_CBC, OT_MIP_GLPK): it goes
 * first, with half the limit; without history GLPK goes first for up to 1 s. A build
 * with neither solver is OT_E_UNSUPPORTED. */
enum { OT_MIP_CBC = 0, OT_MIP_GLPK = 1 };
ot_status ot_mip_solve_from(const ot_mip *m, double time_limit_s, const double *start, int *prefer, double *x,
                            ot_mip_result *r, ot_error *err);
/* ot_mip_solve_from without history. */
ot_status ot_mip_solve(const ot_mip *m, double time_limit_s, const double *start, double *x, ot_mip_result *r,
                       ot_error *err);

/* The two solvers, each callable on its own (the tests hold them to one another);
 * a solver the build lacks is OT_E_UNSUPPORTED. */
bool ot_mip_cbc_available(void);
bool ot_mip_glpk_available(void);
ot_status ot_mip_solve_cbc(const ot_mip *m, double time_limit_s, const double *start, double *x, ot_mip_result *r,
                           ot_error *err);
ot_status ot_mip_solve_glpk(const ot_mip *m, double time_limit_s, const double *start, double *x, ot_mip_result *r,
                            ot_error *err);

#endif
