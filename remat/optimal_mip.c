/* optimal_mip.c — building a mixed-integer programme column by column and row by row
 * (remat/optimal_mip.h); growable arrays, nothing solver-specific; and the choice of
 * solver (CBC, else GLPK). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "remat/optimal_mip.h"

/* Grows *p (elements of size sz) to hold at least need; false when out of memory. */
static bool grow(void **p, int *cap, int need, size_t sz) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * sz);
    if (!q) return false;
    *p = q;
    return true;
}

int ot_mip_add_col(ot_mip *m, double obj, double lo, double hi, bool is_int) {
    int n = m->n_cols + 1, c = m->cap_cols;
    int c1 = c, c2 = c, c3 = c;
    if (!grow((void **)&m->obj, &c, n, sizeof(double)) || !grow((void **)&m->col_lo, &c1, n, sizeof(double)) ||
        !grow((void **)&m->col_hi, &c2, n, sizeof(double)) || !grow((void **)&m->col_int, &c3, n, sizeof(bool)))
        return -1;
    m->cap_cols = c < c1 ? c : c1;
    m->cap_cols = m->cap_cols < c2 ? m->cap_cols : c2;
    m->cap_cols = m->cap_cols < c3 ? m->cap_cols : c3;
    m->obj[m->n_cols] = obj;
    m->col_lo[m->n_cols] = lo;
    m->col_hi[m->n_cols] = hi;
    m->col_int[m->n_cols] = is_int;
    return m->n_cols++;
}

int ot_mip_add_row(ot_mip *m, double lo, double hi) {
    int n = m->n_rows + 1, c = m->cap_rows, c1 = c;
    if (!grow((void **)&m->row_lo, &c, n, sizeof(double)) || !grow((void **)&m->row_hi, &c1, n, sizeof(double)))
        return -1;
    m->cap_rows = c < c1 ? c : c1;
    m->row_lo[m->n_rows] = lo;
    m->row_hi[m->n_rows] = hi;
    return m->n_rows++;
}

bool ot_mip_add_coef(ot_mip *m, int row, int col, double v) {
    int n = m->nnz + 1, c = m->cap_nnz, c1 = c, c2 = c;
    if (!grow((void **)&m->ri, &c, n, sizeof(int)) || !grow((void **)&m->ci, &c1, n, sizeof(int)) ||
        !grow((void **)&m->v, &c2, n, sizeof(double)))
        return false;
    m->cap_nnz = c < c1 ? c : c1;
    m->cap_nnz = m->cap_nnz < c2 ? m->cap_nnz : c2;
    m->ri[m->nnz] = row;
    m->ci[m->nnz] = col;
    m->v[m->nnz] = v;
    m->nnz++;
    return true;
}

void ot_mip_free(ot_mip *m) {
    if (!m) return;
    free(m->obj);
    free(m->col_lo);
    free(m->col_hi);
    free(m->col_int);
    free(m->row_lo);
    free(m->row_hi);
    free(m->ri);
    free(m->ci);
    free(m->v);
    memset(m, 0, sizeof *m);
}

bool ot_mip_solver_available(void) { return ot_mip_cbc_available() || ot_mip_glpk_available(); }

const char *ot_mip_solver_name(void) {
    bool c = ot_mip_cbc_available(), g = ot_mip_glpk_available();
    return c && g ? "CBC+GLPK" : c ? "CBC" : g ? "GLPK" : "none";
}

static ot_status solve_one(int which, const ot_mip *m, double limit, const double *start, double *x, ot_mip_result *r,
                           ot_error *err) {
    ot_status st = which == OT_MIP_CBC ? ot_mip_solve_cbc(m, limit, start, x, r, err)
                                       : ot_mip_solve_glpk(m, limit, start, x, r, err);
    r->solver = which;
    return st;
}

void ot_mip_result_set_bound(ot_mip_result *r, bool closed, double bound) {
    r->status = closed ? OT_MIP_OPTIMAL : OT_MIP_FEASIBLE;
    r->bound = closed ? r->obj : bound;
    if (!(r->bound <= r->obj)) r->bound = r->obj;
    if (r->bound < 0.0) r->bound = 0.0;
    double den = fabs(r->obj) > 1e-12 ? fabs(r->obj) : 1e-12;
    r->gap = closed ? 0.0 : (r->obj - r->bound) / den;
}

static bool settled(const ot_mip_result *r) { return r->status == OT_MIP_OPTIMAL || r->status == OT_MIP_INFEASIBLE; }

/* r (with x) and the second solver's r2 (with x2) as one result: the cheaper
 * solution, the higher bound (both bound the same programme). */
static void merge(const ot_mip *m, ot_mip_result *r, double *x, const ot_mip_result *r2, const double *x2) {
    bool have = r->status == OT_MIP_FEASIBLE, have2 = r2->status == OT_MIP_FEASIBLE || r2->status == OT_MIP_OPTIMAL;
    double bound = have && r->bound > r2->bound ? r->bound : r2->bound, seconds = r->seconds + r2->seconds;
    if (have2 ? !have || r2->status == OT_MIP_OPTIMAL || r2->obj <= r->obj : !have) {
        if (have2) memcpy(x, x2, (size_t)m->n_cols * sizeof(double));
        *r = *r2;
    }
    if (r->status == OT_MIP_FEASIBLE) {
        r->bound = bound < r->obj ? bound : r->obj;
        double den = fabs(r->obj) > 1e-12 ? fabs(r->obj) : 1e-12;
        r->gap = (r->obj - r->bound) / den;
        if (r->gap <= 1e-9) r->status = OT_MIP_OPTIMAL, r->gap = 0.0, r->bound = r->obj; /* the bounds met */
    }
    r->seconds = seconds;
}

ot_status ot_mip_solve_from(const ot_mip *m, double time_limit_s, const double *start, int *prefer, double *x,
                            ot_mip_result *r, ot_error *err) {
    bool c = ot_mip_cbc_available(), g = ot_mip_glpk_available();
    if (c != g) return solve_one(c ? OT_MIP_CBC : OT_MIP_GLPK, m, time_limit_s, start, x, r, err);
    if (!c) {
        *r = (ot_mip_result){.status = OT_MIP_NO_SOLUTION};
        return ot_fail(err, OT_E_UNSUPPORTED,
                       "--remat optimal: this onnxtrain was built without a MIP solver; install COIN-OR CBC (Debian "
                       "coinor-libcbc-dev) or GLPK (libglpk-dev) and rebuild, or use --remat auto");
    }
    int first = *prefer == OT_MIP_CBC ? OT_MIP_CBC : OT_MIP_GLPK;
    double slice = *prefer >= 0 ? time_limit_s / 2.0 : time_limit_s / 4.0 < 1.0 ? time_limit_s / 4.0 : 1.0;
    ot_status st = solve_one(first, m, slice, start, x, r, err);
    if (st || settled(r)) {
        if (!st) *prefer = first;
        return st;
    }
    double *x2 = malloc(((size_t)m->n_cols + 1) * sizeof(double));
    if (!x2) return ot_fail(err, OT_E_MEMORY, "remat optimal: out of memory for %d columns", m->n_cols);
    ot_mip_result r2;
    double left = time_limit_s - r->seconds;
    st = solve_one(1 - first, m, left > 0.05 ? left : 0.05, r->status == OT_MIP_FEASIBLE ? x : start, x2, &r2, err);
    if (!st) {
        if (settled(&r2)) *prefer = 1 - first;
        merge(m, r, x, &r2, x2);
    }
    free(x2);
    return st;
}

ot_status ot_mip_solve(const ot_mip *m, double time_limit_s, const double *start, double *x, ot_mip_result *r,
                       ot_error *err) {
    int prefer = -1;
    return ot_mip_solve_from(m, time_limit_s, start, &prefer, x, r, err);
}
