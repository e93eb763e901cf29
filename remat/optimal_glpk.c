/* optimal_glpk.c — solves remat/optimal_mip.h's programme with GLPK (Debian
 * libglpk-dev), branch and cut with presolve, within a time limit; records the best
 * bound as the search goes so that a solve cut short still reports its gap. The
 * fallback of ot_mip_solve when the build has no CBC (remat/optimal_cbc.c). Built
 * empty of GLPK when CMake did not find it (OT_HAVE_GLPK unset): then
 * ot_mip_solve_glpk refuses, naming the package. */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "remat/optimal_mip.h"

#ifdef OT_HAVE_GLPK
#include <glpk.h>

bool ot_mip_glpk_available(void) { return true; }

/* What the branch-and-cut callback saw: the best bound of the open nodes; and the
 * incumbent it is to offer (heur, 1-based, NULL: none). */
typedef struct progress {
    double bound;
    bool have_bound;
    double *heur;
} progress;

static void on_tree(glp_tree *tree, void *info) {
    progress *p = info;
    int r = glp_ios_reason(tree);
    if (r == GLP_IHEUR && p->heur) {
        glp_ios_heur_sol(tree, p->heur);
        free(p->heur);
        p->heur = NULL;
        return;
    }
    if (r != GLP_ISELECT && r != GLP_IBINGO && r != GLP_IBRANCH) return;
    int best = glp_ios_best_node(tree);
    if (!best) return;
    double b = glp_ios_node_bound(tree, best);
    if (!p->have_bound || b > p->bound) p->bound = b; /* the bound only rises */
    p->have_bound = true;
}

static int bound_type(double lo, double hi) {
    bool l = lo > -HUGE_VAL, h = hi < HUGE_VAL;
    if (l && h) return lo == hi ? GLP_FX : GLP_DB;
    return l ? GLP_LO : h ? GLP_UP : GLP_FR;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The point with the integer columns at start and the rest solved as an LP, 1-based
 * for glp_ios_heur_sol; NULL when that is infeasible (or out of memory). */
static double *fixed_point(glp_prob *lp, const ot_mip *m, const double *start, int tm_lim) {
    glp_prob *fx = glp_create_prob();
    glp_copy_prob(fx, lp, GLP_OFF);
    for (int j = 0; j < m->n_cols; j++)
        if (m->col_int[j]) glp_set_col_bnds(fx, j + 1, GLP_FX, round(start[j]), round(start[j]));
    glp_smcp sp;
    glp_init_smcp(&sp);
    sp.msg_lev = GLP_MSG_OFF;
    sp.presolve = GLP_ON;
    sp.tm_lim = tm_lim;
    double *pt = NULL;
    if (glp_simplex(fx, &sp) == 0 && glp_get_status(fx) == GLP_OPT && (pt = malloc(((size_t)m->n_cols + 1) * sizeof(double))))
        for (int j = 0; j < m->n_cols; j++) pt[j + 1] = m->col_int[j] ? round(start[j]) : glp_get_col_prim(fx, j + 1);
    glp_delete_prob(fx);
    return pt;
}

ot_status ot_mip_solve_glpk(const ot_mip *m, double time_limit_s, const double *start, double *x, ot_mip_result *r,
                            ot_error *err) {
    double t0 = now_s();
    *r = (ot_mip_result){.status = OT_MIP_NO_SOLUTION};
    int *ia = malloc(((size_t)m->nnz + 1) * sizeof(int)), *ja = malloc(((size_t)m->nnz + 1) * sizeof(int));
    double *ar = malloc(((size_t)m->nnz + 1) * sizeof(double));
    if (!ia || !ja || !ar) {
        free(ia), free(ja), free(ar);
        return ot_fail(err, OT_E_MEMORY, "remat optimal: out of memory for %d coefficients", m->nnz);
    }
    glp_term_out(GLP_OFF); /* GLPK prints to stdout otherwise */
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    if (m->n_rows) glp_add_rows(lp, m->n_rows);
    if (m->n_cols) glp_add_cols(lp, m->n_cols);
    for (int i = 0; i < m->n_rows; i++)
        glp_set_row_bnds(lp, i + 1, bound_type(m->row_lo[i], m->row_hi[i]), m->row_lo[i], m->row_hi[i]);
    for (int j = 0; j < m->n_cols; j++) {
        glp_set_col_bnds(lp, j + 1, bound_type(m->col_lo[j], m->col_hi[j]), m->col_lo[j], m->col_hi[j]);
        glp_set_obj_coef(lp, j + 1, m->obj[j]);
        if (m->col_int[j]) glp_set_col_kind(lp, j + 1, GLP_IV);
    }
    for (int k = 0; k < m->nnz; k++) ia[k + 1] = m->ri[k] + 1, ja[k + 1] = m->ci[k] + 1, ar[k + 1] = m->v[k];
    glp_load_matrix(lp, m->nnz, ia, ja, ar);
    free(ia), free(ja), free(ar);
    glp_scale_prob(lp, GLP_SF_AUTO);

    progress pr = {0};
    double lim = time_limit_s * 1000.0; /* ms, for every GLPK call below */
    int tm_lim = lim < 1.0 ? 1 : lim > 2.0e9 ? 2000000000 : (int)lim;
    if (start) pr.heur = fixed_point(lp, m, start, tm_lim);
    glp_iocp parm;
    glp_init_iocp(&parm);
    /* an incumbent is given in the original columns: then no MIP presolve, and the
     * LP relaxation solved first as glp_intopt then requires */
    parm.presolve = pr.heur ? GLP_OFF : GLP_ON;
    if (pr.heur) {
        glp_smcp sp;
        glp_init_smcp(&sp);
        sp.msg_lev = GLP_MSG_OFF;
        sp.tm_lim = tm_lim;
        if (glp_simplex(lp, &sp) != 0 || glp_get_status(lp) != GLP_OPT) {
            free(pr.heur);
            pr.heur = NULL;
            parm.presolve = GLP_ON;
        }
    }
    parm.msg_lev = GLP_MSG_OFF;
    /* Measured on the samples' programmes: cuts, pseudocost branching and the
     * feasibility pump close the gap in a tenth of the nodes of the defaults. */
    parm.mir_cuts = parm.gmi_cuts = parm.cov_cuts = parm.clq_cuts = GLP_ON;
    parm.br_tech = GLP_BR_PCH;
    parm.bt_tech = GLP_BT_BPH;
    parm.fp_heur = GLP_ON;
    parm.cb_func = on_tree;
    parm.cb_info = &pr;
    double spent = (now_s() - t0) * 1000.0; /* what is left for branch and cut */
    parm.tm_lim = lim - spent < 1.0 ? 1 : lim - spent > 2.0e9 ? 2000000000 : (int)(lim - spent);
    int rc = glp_intopt(lp, &parm);
    int ms = glp_mip_status(lp);
    free(pr.heur);
    ot_status st = OT_OK;
    if (rc != 0 && rc != GLP_ETMLIM && rc != GLP_ENOPFS && rc != GLP_ENODFS && rc != GLP_EMIPGAP) {
        st = ot_fail(err, OT_E_INTERNAL, "remat optimal: GLPK glp_intopt failed (code %d) on %d columns, %d rows",
                     rc, m->n_cols, m->n_rows);
    } else if (rc == GLP_ENOPFS || ms == GLP_NOFEAS) {
        r->status = OT_MIP_INFEASIBLE;
    } else if (ms == GLP_OPT || ms == GLP_FEAS) {
        r->obj = glp_mip_obj_val(lp);
        for (int j = 0; j < m->n_cols; j++) x[j] = glp_mip_col_val(lp, j + 1);
        bool closed = ms == GLP_OPT && rc == 0;
        ot_mip_result_set_bound(r, closed, pr.have_bound ? pr.bound : 0.0);
    }
    glp_delete_prob(lp);
    r->seconds = now_s() - t0;
    return st;
}

#else

bool ot_mip_glpk_available(void) { return false; }

ot_status ot_mip_solve_glpk(const ot_mip *m, double time_limit_s, const double *start, double *x, ot_mip_result *r,
                            ot_error *err) {
    (void)m, (void)time_limit_s, (void)start, (void)x;
    *r = (ot_mip_result){.status = OT_MIP_NO_SOLUTION};
    return ot_fail(err, OT_E_UNSUPPORTED,
                   "--remat optimal: this onnxtrain was built without GLPK (Debian libglpk-dev)");
}

#endif
