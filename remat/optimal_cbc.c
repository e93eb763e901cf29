/* optimal_cbc.c — solves remat/optimal_mip.h's programme with COIN-OR CBC (Debian
 * coinor-libcbc-dev, through its C interface), within a wall-clock time limit. Its
 * root cuts and preprocessing close the gap of programmes GLPK's branch and bound
 * leaves open (chain48's 48 interchangeable layers: GLPK 2.7% after 20 s, CBC proven
 * at the root in 0.1 s; docs/remat.md); ot_mip_solve runs it after GLPK's first slice
 * or first of all when it closed the last solve (remat/optimal_mip.c). Built empty of
 * CBC when CMake did not find it (OT_HAVE_CBC unset): then ot_mip_solve_cbc refuses
 * and ot_mip_solve uses GLPK alone. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "remat/optimal_mip.h"

#ifdef OT_HAVE_CBC
#include <coin/Cbc_C_Interface.h>

bool ot_mip_cbc_available(void) { return true; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CBC's infinity is DBL_MAX, not HUGE_VAL. */
static double finite_bound(double b) { return b >= HUGE_VAL ? DBL_MAX : b <= -HUGE_VAL ? -DBL_MAX : b; }

/* The coefficient triplets as CBC's column-major arrays (start[n_cols + 1]). */
static bool column_major(const ot_mip *m, int **start, int **index, double **value) {
    *start = calloc((size_t)m->n_cols + 2, sizeof(int));
    *index = malloc(((size_t)m->nnz + 1) * sizeof(int));
    *value = malloc(((size_t)m->nnz + 1) * sizeof(double));
    int *fill = calloc((size_t)m->n_cols + 1, sizeof(int));
    if (!*start || !*index || !*value || !fill) {
        free(fill);
        return false;
    }
    for (int k = 0; k < m->nnz; k++) (*start)[m->ci[k] + 1]++;
    for (int j = 0; j < m->n_cols; j++) (*start)[j + 1] += (*start)[j];
    for (int k = 0; k < m->nnz; k++) {
        int j = m->ci[k], at = (*start)[j] + fill[j]++;
        (*index)[at] = m->ri[k];
        (*value)[at] = m->v[k];
    }
    free(fill);
    return true;
}

/* Loads m into a new CBC model; NULL when out of memory. */
static Cbc_Model *load(const ot_mip *m) {
    int *start = NULL, *index = NULL;
    double *value = NULL;
    double *clo = malloc(((size_t)m->n_cols + 1) * sizeof(double)), *chi = malloc(((size_t)m->n_cols + 1) * sizeof(double));
    double *rlo = malloc(((size_t)m->n_rows + 1) * sizeof(double)), *rhi = malloc(((size_t)m->n_rows + 1) * sizeof(double));
    Cbc_Model *cm = NULL;
    if (clo && chi && rlo && rhi && column_major(m, &start, &index, &value) && (cm = Cbc_newModel())) {
        for (int j = 0; j < m->n_cols; j++) clo[j] = finite_bound(m->col_lo[j]), chi[j] = finite_bound(m->col_hi[j]);
        for (int i = 0; i < m->n_rows; i++) rlo[i] = finite_bound(m->row_lo[i]), rhi[i] = finite_bound(m->row_hi[i]);
        Cbc_loadProblem(cm, m->n_cols, m->n_rows, start, index, value, clo, chi, m->obj, rlo, rhi);
        for (int j = 0; j < m->n_cols; j++)
            if (m->col_int[j]) Cbc_setInteger(cm, j);
    }
    free(start), free(index), free(value), free(clo), free(chi), free(rlo), free(rhi);
    return cm;
}

/* The integer columns of start as CBC's MIP start: it completes the continuous ones
 * with an LP and, when that point is feasible, takes it as the first incumbent. */
static bool set_start(Cbc_Model *cm, const ot_mip *m, const double *start) {
    int *idx = malloc(((size_t)m->n_cols + 1) * sizeof(int)), n = 0;
    double *val = malloc(((size_t)m->n_cols + 1) * sizeof(double));
    bool ok = idx && val;
    for (int j = 0; ok && j < m->n_cols; j++)
        if (m->col_int[j]) idx[n] = j, val[n++] = round(start[j]);
    if (ok) Cbc_setMIPStartI(cm, n, idx, val);
    free(idx), free(val);
    return ok;
}

ot_status ot_mip_solve_cbc(const ot_mip *m, double time_limit_s, const double *start, double *x, ot_mip_result *r,
                           ot_error *err) {
    double t0 = now_s();
    *r = (ot_mip_result){.status = OT_MIP_NO_SOLUTION};
    Cbc_Model *cm = load(m);
    if (!cm || (start && !set_start(cm, m, start))) {
        if (cm) Cbc_deleteModel(cm);
        return ot_fail(err, OT_E_MEMORY, "remat optimal: out of memory for %d columns, %d coefficients", m->n_cols,
                       m->nnz);
    }
    char secs[32];
    snprintf(secs, sizeof secs, "%.3f", time_limit_s > 0.01 ? time_limit_s : 0.01);
    Cbc_setLogLevel(cm, 0); /* CBC prints to stdout otherwise, where plan --json goes */
    Cbc_setParameter(cm, "timeMode", "elapsed"); /* the limit is wall-clock, as GLPK's */
    Cbc_setParameter(cm, "seconds", secs);
    Cbc_setParameter(cm, "threads", "0"); /* one thread: the same search on every run */
    int rc = Cbc_solve(cm);
    const double *best = Cbc_bestSolution(cm);
    ot_status st = OT_OK;
    if (rc != 0 && rc != 1) { /* 2: abandoned (numerics), 5: interrupted */
        st = ot_fail(err, OT_E_INTERNAL, "remat optimal: CBC stopped with status %d on %d columns, %d rows", rc,
                     m->n_cols, m->n_rows);
    } else if (Cbc_isProvenInfeasible(cm) && !best) {
        r->status = OT_MIP_INFEASIBLE;
    } else if (best) {
        for (int j = 0; j < m->n_cols; j++) x[j] = best[j];
        r->obj = Cbc_getObjValue(cm);
        bool closed = Cbc_isProvenOptimal(cm) && rc == 0;
        ot_mip_result_set_bound(r, closed, closed ? r->obj : Cbc_getBestPossibleObjValue(cm));
    }
    Cbc_deleteModel(cm);
    r->seconds = now_s() - t0;
    return st;
}

#else

bool ot_mip_cbc_available(void) { return false; }

ot_status ot_mip_solve_cbc(const ot_mip *m, double time_limit_s, const double *start, double *x, ot_mip_result *r,
                           ot_error *err) {
    (void)m, (void)time_limit_s, (void)start, (void)x;
    *r = (ot_mip_result){.status = OT_MIP_NO_SOLUTION};
    return ot_fail(err, OT_E_UNSUPPORTED,
                   "--remat optimal: this onnxtrain was built without COIN-OR CBC (Debian coinor-libcbc-dev)");
}

#endif
