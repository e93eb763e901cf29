/* optimal_rows.c — the memory rows of `--remat optimal`'s programme (remat/optimal.c's
 * header says what they state): per root, the bytes a recomputed value frees from its
 * last forward read to its first backward read, brought back earlier where a clone
 * (or a chain of clones, remat/optimal_chain.h) reads it; the bytes a value kept for
 * clones holds until its last clone reader; and the running sums over those terms. */
#include <math.h>
#include <stdlib.h>

#include "remat/optimal_model.h"

typedef ot_opt_model model;
#define NEVER OT_OPT_NEVER

ot_status ot_opt_oom(ot_error *err) { return ot_fail(err, OT_E_MEMORY, "remat optimal: out of memory"); }

bool ot_opt_add_term(model *md, int col, int start, int end, double coef) {
    if (col < 0 || start >= end) return true;
    if (md->n_terms == md->cap_terms) {
        int nc = md->cap_terms ? 2 * md->cap_terms : 256;
        ot_opt_term *t = realloc(md->terms, (size_t)nc * sizeof(ot_opt_term));
        if (!t) return false;
        md->terms = t;
        md->cap_terms = nc;
    }
    md->terms[md->n_terms++] = (ot_opt_term){col, start, end, coef};
    return true;
}

typedef struct reader {
    int step, rcol; /* a reader's clone: at step when r is 1 */
    int chain;      /* or, not -1: chain entry `chain` (optimal_chain.h), from step */
} reader;

static int reader_cmp(const void *x, const void *y) {
    const reader *a = x, *b = y;
    return (a->step > b->step) - (a->step < b->step);
}

/* w >= z + (every literal of reader i) - 1, over the literals' count L:
 * w - z - sum(positive) + sum(negative) >= -(positive ones). */
static bool reader_row(model *md, const reader *rd, int w, int zcol) {
    ot_mip *mp = &md->mip;
    const ot_opt_chains *ch = &md->chains;
    int lo = rd->chain < 0 ? 0 : ch->start[rd->chain], hi = rd->chain < 0 ? 0 : ch->start[rd->chain + 1];
    int pos = rd->chain < 0;
    for (int l = lo; l < hi; l++) pos += !ch->lits[l].neg;
    int row = ot_mip_add_row(mp, -(double)pos, HUGE_VAL);
    if (row < 0 || !ot_mip_add_coef(mp, row, w, 1.0) || !ot_mip_add_coef(mp, row, zcol, -1.0)) return false;
    if (rd->chain < 0) return ot_mip_add_coef(mp, row, rd->rcol, -1.0);
    for (int l = lo; l < hi; l++)
        if (!ot_mip_add_coef(mp, row, ch->lits[l].col, ch->lits[l].neg ? 1.0 : -1.0)) return false;
    return true;
}

/* A recomputed root comes back before its first backward read when a clone reads it:
 * from the clone's place, or from a chain's step (optimal_chain.h). Readers sorted by
 * place P_1 <= P_2 ...; over [P_j, P_j+1) the bytes are back when z (freed) and any of
 * the first j readers is cloned: w_j >= z + r_i - 1 for i <= j (a chain: all of its
 * literals for r_i). Few readers per value, so few rows. */
static ot_status early_clone_terms(model *md, int root, int zcol, int start, int end, double b, ot_error *err) {
    const ot_graph *g = md->g;
    const ot_remat_analysis *a = md->a;
    int n = 0, room = 0;
    for (int v = 0; v < a->n_values; v++)
        if (a->candidate[v] && md->root[v] == root) room += g->values[v].n_consumers;
    for (int i = 0; i < md->chains.n; i++) room += md->chains.root[i] == root;
    reader *rd = malloc((size_t)(room + 1) * sizeof(reader));
    if (!rd) return ot_opt_oom(err);
    for (int v = 0; v < a->n_values; v++) {
        if (!a->candidate[v] || md->root[v] != root) continue;
        for (int c = 0; c < g->values[v].n_consumers; c++) {
            int cid = g->values[v].consumers[c];
            if (cid >= a->n_nodes || md->rcol[cid] < 0 || md->place[cid] >= end) continue;
            rd[n++] = (reader){md->place[cid] > start ? md->place[cid] : start, md->rcol[cid], -1};
        }
    }
    for (int i = 0; i < md->chains.n; i++) {
        int s = md->chains.step[i];
        if (md->chains.root[i] == root && s < end) rd[n++] = (reader){s > start ? s : start, -1, i};
    }
    qsort(rd, (size_t)n, sizeof(reader), reader_cmp);
    ot_mip *mp = &md->mip;
    ot_status st = OT_OK;
    for (int j = 0; j < n && !st; j++) {
        int until = j + 1 < n ? rd[j + 1].step : end;
        if (until <= rd[j].step) continue;
        int w = ot_mip_add_col(mp, 0.0, 0.0, 1.0, false);
        if (w < 0 || !ot_opt_add_term(md, w, rd[j].step, until, b)) st = ot_opt_oom(err);
        for (int i = 0; i <= j && !st; i++)
            if (!reader_row(md, &rd[i], w, zcol)) st = ot_opt_oom(err);
    }
    free(rd);
    return st;
}

/* Memory terms per root (a value and its views): z (freed) for roots the backward
 * pass reads, y (kept longer for clones) for the others. */
ot_status ot_opt_memory_terms(model *md, ot_error *err) {
    const ot_graph *g = md->g;
    const ot_remat_analysis *a = md->a;
    ot_mip *mp = &md->mip;
    int nv = a->n_values;
    int *lf = malloc((size_t)nv * sizeof(int)), *fb = malloc((size_t)nv * sizeof(int));
    int *until = malloc((size_t)nv * sizeof(int)), *gcol = malloc((size_t)nv * sizeof(int));
    bool *pinned = calloc((size_t)nv, sizeof(bool)), *saved = calloc((size_t)nv, sizeof(bool));
    ot_status st = ot_opt_prechains(md, err); /* once: the chains every plan has, before their rows */
    if (st || !lf || !fb || !until || !gcol || !pinned || !saved) {
        if (!st) st = ot_opt_oom(err);
        goto done;
    }
    for (int r = 0; r < nv; r++) lf[r] = -1, fb[r] = NEVER, until[r] = -1, gcol[r] = -1;
    for (int v = 0; v < nv; v++) {
        if (!a->candidate[v]) continue;
        int r = md->root[v];
        if (md->last_fwd[v] > lf[r]) lf[r] = md->last_fwd[v];
        pinned[r] |= a->pinned[v];
        if (a->saved[v]) {
            saved[r] = true;
            if (md->first_bwd[v] < fb[r]) fb[r] = md->first_bwd[v];
        } else if (md->col[v] >= 0) {
            /* kept for clones: alive up to the latest clone among its readers */
            for (int c = 0; c < g->values[v].n_consumers; c++) {
                int cid = g->values[v].consumers[c];
                if (cid < a->n_nodes && md->rcol[cid] >= 0 && md->place[cid] != NEVER && md->place[cid] > until[r])
                    until[r] = md->place[cid];
            }
        }
    }
    for (int r = 0; r < nv; r++) {
        if (!a->candidate[r] || md->root[r] != r || pinned[r]) continue;
        double b = (double)ot_remat_value_bytes(g, r) / md->unit;
        if (b <= 0.0) continue;
        if (saved[r] && lf[r] + 1 < fb[r]) {
            if ((gcol[r] = ot_mip_add_col(mp, 0.0, 0.0, 1.0, false)) < 0 ||
                !ot_opt_add_term(md, gcol[r], lf[r] + 1, fb[r], -b) ||
                (st = early_clone_terms(md, r, gcol[r], lf[r] + 1, fb[r], b, err))) {
                if (!st) st = ot_opt_oom(err);
                goto done;
            }
        } else if (!saved[r] && until[r] > lf[r]) {
            if ((gcol[r] = ot_mip_add_col(mp, 0.0, 0.0, 1.0, false)) < 0 ||
                !ot_opt_add_term(md, gcol[r], lf[r] + 1, until[r] + 1, b)) {
                st = ot_opt_oom(err);
                goto done;
            }
        }
    }
    /* Link each root's column to its members' choices. */
    for (int v = 0; v < nv && !st; v++) {
        int r = md->root[v], zc = a->candidate[v] ? gcol[r] : -1;
        if (zc < 0 || md->col[v] < 0) continue;
        int row;
        if (saved[r] && a->saved[v]) { /* z_r <= x_v */
            row = ot_mip_add_row(mp, -HUGE_VAL, 0.0);
            if (row < 0 || !ot_mip_add_coef(mp, row, zc, 1.0) || !ot_mip_add_coef(mp, row, md->col[v], -1.0))
                st = ot_opt_oom(err);
        } else if (saved[r]) { /* z_r <= 1 - k_v: a view kept for clones holds the base */
            row = ot_mip_add_row(mp, -HUGE_VAL, 1.0);
            if (row < 0 || !ot_mip_add_coef(mp, row, zc, 1.0) || !ot_mip_add_coef(mp, row, md->col[v], 1.0))
                st = ot_opt_oom(err);
        } else { /* y_r >= k_v */
            row = ot_mip_add_row(mp, 0.0, HUGE_VAL);
            if (row < 0 || !ot_mip_add_coef(mp, row, zc, 1.0) || !ot_mip_add_coef(mp, row, md->col[v], -1.0))
                st = ot_opt_oom(err);
        }
    }
done:
    free(lf), free(fb), free(until), free(gcol), free(pinned), free(saved);
    return st;
}

static int cmp_int(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* Index of the interval that starts at step s (s is one of the bounds). */
static int interval_of(const model *md, int s) {
    int lo = 0, hi = md->n_bounds - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (md->bounds[mid] < s) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The running sums: one interval per run of steps where no term starts or ends. */
ot_status ot_opt_budget_rows(model *md, ot_error *err) {
    int ns = md->m0.n_steps, nb = 0;
    md->bounds = malloc(((size_t)2 * md->n_terms + 2) * sizeof(int));
    if (!md->bounds) return ot_opt_oom(err);
    md->bounds[nb++] = 0;
    for (int i = 0; i < md->n_terms; i++) {
        md->bounds[nb++] = md->terms[i].start;
        if (md->terms[i].end < ns) md->bounds[nb++] = md->terms[i].end;
    }
    qsort(md->bounds, (size_t)nb, sizeof(int), cmp_int);
    int u = 0;
    for (int i = 0; i < nb; i++)
        if (!u || md->bounds[i] != md->bounds[u - 1]) md->bounds[u++] = md->bounds[i];
    md->n_bounds = u; /* interval i: steps [bounds[i], bounds[i+1] or ns) */
    md->s_col = malloc((size_t)u * sizeof(int));
    md->t0max = calloc((size_t)u, sizeof(double));
    int *row = malloc((size_t)u * sizeof(int));
    if (!md->s_col || !md->t0max || !row) {
        free(row);
        return ot_opt_oom(err);
    }
    ot_mip *mp = &md->mip;
    ot_status st = OT_OK;
    for (int i = 0; i < u && !st; i++) {
        int end = i + 1 < u ? md->bounds[i + 1] : ns;
        for (int s = md->bounds[i]; s < end; s++)
            if ((double)md->m0.timeline[s] / md->unit > md->t0max[i]) md->t0max[i] = (double)md->m0.timeline[s] / md->unit;
        /* S_i - S_{i-1} - (terms starting) + (terms ending) = 0; its bound is set per round */
        md->s_col[i] = ot_mip_add_col(mp, 0.0, -HUGE_VAL, HUGE_VAL, false);
        row[i] = ot_mip_add_row(mp, 0.0, 0.0);
        if (md->s_col[i] < 0 || row[i] < 0 || !ot_mip_add_coef(mp, row[i], md->s_col[i], 1.0) ||
            (i > 0 && !ot_mip_add_coef(mp, row[i], md->s_col[i - 1], -1.0)))
            st = ot_opt_oom(err);
    }
    for (int t = 0; t < md->n_terms && !st; t++) {
        const ot_opt_term *tm = &md->terms[t];
        if (!ot_mip_add_coef(mp, row[interval_of(md, tm->start)], tm->col, -tm->coef)) st = ot_opt_oom(err);
        if (!st && tm->end < ns && !ot_mip_add_coef(mp, row[interval_of(md, tm->end)], tm->col, tm->coef))
            st = ot_opt_oom(err);
    }
    free(row);
    return st;
}
