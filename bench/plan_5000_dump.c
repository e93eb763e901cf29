/* plan_5000_dump.c — writes every field of the plans of plan_5000.c's residual MLP
 * (scheduled by ot_schedule_build, planned without a device) to stdout: the order,
 * each value's offset, size, lifetime, category, in-place / alias / slot links, each
 * step's workspace and timeline, the peaks. Without remat and under the sqrt,
 * selective, every:4 and every:2 rewrites (recompute clones), and auto's choice at one
 * budget with the plan of its rewrite. bench/plan_5000_dump.sh
 * runs it against two builds and compares the bytes: a planner change that is meant
 * to be a pure speed-up must leave them equal. Not a test: the big graph is too slow
 * for ctest. */
#define main plan_5000_main
#include "plan_5000.c"
#undef main

static int dump(ot_graph *g) {
    int *order = NULL, n = 0;
    ot_error err = {0};
    ot_plan *p = NULL;
    if (ot_schedule_build(g, &order, &n, &err) || ot_plan_build(g, order, n, NULL, &p, &err)) {
        fprintf(stderr, "plan_5000_dump: %s\n", err.msg);
        free(order);
        return 1;
    }
    for (int s = 0; s < n; s++) printf("%d%c", order[s], s + 1 < n ? ' ' : '\n');
    for (int v = 0; v < p->n_values; v++) {
        const ot_plan_value *x = &p->values[v];
        printf("v%d %lld %zu %d %d %d %d %d %d %d %zu %d\n", v, (long long)x->offset, x->nbytes, x->def_step,
               x->last_step, (int)x->category, x->pinned, x->inplace_of, x->external, x->alias_of, x->alias_offset,
               x->slot_of);
    }
    for (int s = 0; s < n; s++) printf("s%d %lld %zu %zu\n", s, (long long)p->ws_offset[s], p->ws_bytes[s], p->timeline[s]);
    ot_plan_write_json(p, stdout);
    printf(" %d %d %zu\n", p->peak_step, p->backward_step, p->pinned_bytes);
    for (int c = 0; c < OT_MEM_COUNT; c++) printf("slab %d %zu %zu\n", c, p->slab_offset[c], p->slab_bytes[c]);
    ot_plan_free(p);
    free(order);
    return 0;
}

/* auto at a budget halfway between the sqrt plan's peak and none's: its keep set, its
 * statistics and the plan of its rewrite, so that a change to auto's search or to
 * what it measures shows here too. */
static int dump_auto(ot_graph *g, const ot_remat_analysis *an, bool *keep) {
    ot_error err = {0};
    ot_remat_policy pol = {.kind = OT_REMAT_SQRT};
    ot_remat_rewrite rw;
    ot_remat_measurement none = {0}, sq = {0};
    if (ot_remat_measure_planner(g, NULL, &none, &err) || ot_remat_policy_keep(g, an, &pol, keep, &err) ||
        ot_remat_apply(g, an, keep, &rw, &err)) {
        fprintf(stderr, "plan_5000_dump: auto: %s\n", err.msg);
        return 1;
    }
    ot_status st = ot_remat_measure_planner(g, NULL, &sq, &err);
    ot_remat_undo(g, &rw);
    int64_t budget = sq.peak + (none.peak - sq.peak) / 2;
    ot_remat_auto_stats as;
    if (st || ot_remat_auto(g, an, budget, ot_remat_measure_planner, NULL, keep, &as, &err) ||
        ot_remat_apply(g, an, keep, &rw, &err)) {
        fprintf(stderr, "plan_5000_dump: auto: %s\n", err.msg);
        return 1;
    }
    printf("auto %lld: %d measured, peak %lld, least %lld, cost %.17g\nkeep", (long long)budget, as.n_measured,
           (long long)as.peak, (long long)as.min_peak, as.cost);
    for (int v = 0; v < an->n_values; v++)
        if (keep[v]) printf(" %d", v);
    printf("\n");
    int rc = dump(g);
    ot_remat_undo(g, &rw);
    return rc;
}

int main(int argc, char **argv) {
    int blocks = argc > 1 ? atoi(argv[1]) : 556;
    ot_graph *g = residual_mlp(blocks, 32, 256);
    ot_error err = {0};
    ot_remat_analysis an;
    if (ot_remat_analyze(g, &an, &err)) {
        fprintf(stderr, "plan_5000_dump: %s\n", err.msg);
        return 1;
    }
    int rc = dump(g);
    bool *keep = calloc((size_t)an.n_values, sizeof(bool));
    const char *pols[] = {"sqrt", "selective", "every:4", "every:2"};
    for (int i = 0; i < 4 && !rc; i++) {
        ot_remat_policy pol;
        ot_remat_rewrite rw;
        if (ot_remat_policy_parse(pols[i], &pol, &err) || ot_remat_policy_keep(g, &an, &pol, keep, &err) ||
            ot_remat_apply(g, &an, keep, &rw, &err)) {
            fprintf(stderr, "plan_5000_dump: %s: %s\n", pols[i], err.msg);
            return 1;
        }
        printf("policy %s\n", pols[i]);
        rc = dump(g);
        ot_remat_undo(g, &rw);
        ot_remat_policy_free(&pol);
    }
    if (!rc) rc = dump_auto(g, &an, keep);
    free(keep);
    ot_remat_analysis_free(&an);
    ot_graph_free(g);
    return rc;
}
