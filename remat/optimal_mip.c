/* optimal_mip.c — building a mixed-integer programme column by column and row by row
 * (remat/optimal_mip.h); growable arrays, nothing solver-specific; and the choice of
 * solver (CBC, else GLPK). */
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
    return ot_mip_cbc_available() ? "CBC" : ot_mip_glpk_available() ? "GLPK" : "none";
}

ot_status ot_mip_solve(const ot_mip *m, double time_limit_s, const double *start, double *x, ot_mip_result *r,
                       ot_error *err) {
    if (ot_mip_cbc_available()) return ot_mip_solve_cbc(m, time_limit_s, start, x, r, err);
    if (ot_mip_glpk_available()) return ot_mip_solve_glpk(m, time_limit_s, start, x, r, err);
    *r = (ot_mip_result){.status = OT_MIP_NO_SOLUTION};
    return ot_fail(err, OT_E_UNSUPPORTED,
                   "--remat optimal: this onnxtrain was built without a MIP solver; install COIN-OR CBC (Debian "
                   "coinor-libcbc-dev) or GLPK (libglpk-dev) and rebuild, or use --remat auto");
}
