/* remat_check.c — see remat_check.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_run.h"
#include "remat/remat.h"
#include "remat_check.h"

ot_remat_session *rc_session_open(const char *path) {
    ot_remat_session_options o = {.seed = 7, .n_threads = 2, .policy = "none", .plan_only = true, .batch_size = 8};
    o.loss.kind = OT_LOSS_CROSS_ENTROPY;
    o.loss.class_axis = -1;
    ot_error err = {0};
    ot_remat_session *s = NULL;
    if (ot_remat_session_new(path, &o, &s, &err)) fail_msg("%s: %s", path, err.msg);
    return s;
}

void rc_search_open(rc_search *r, const char *path) {
    ot_error err = {0};
    r->s = rc_session_open(path);
    r->keep = calloc((size_t)r->s->an.n_values + 1, sizeof(bool));
    assert_non_null(r->keep);
    ot_remat_measurement m0 = {0};
    assert_int_equal(ot_remat_measure_planner(r->s->g, r->s->be, &m0, &err), OT_OK);
    r->plain = m0.peak;
    r->least = 0;
    assert_int_equal(
        ot_remat_least_memory(r->s->g, &r->s->an, ot_remat_measure_planner, r->s->be, r->keep, &r->least, &err), OT_OK);
}

void rc_search_close(rc_search *r) {
    free(r->keep);
    ot_remat_session_free(r->s);
}

double rc_clone_flops(const ot_graph *g, const ot_remat_analysis *an, int *n_clones) {
    double f = 0.0;
    int count = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ot_node *n = &g->nodes[i];
        if (n->removed || n->phase != OT_PHASE_RECOMPUTE || n->orig_node < 0 || n->orig_node >= an->n_nodes) continue;
        f += an->node_flops[n->orig_node];
        count++;
    }
    if (n_clones) *n_clones = count;
    return f;
}

bool rc_skip_without_mip(void) {
    if (ot_remat_optimal_available()) return false;
    printf("skipped: this build has no MIP solver (CBC or GLPK), --remat optimal is unavailable\n");
    return true;
}

long long rc_cli_budget(const char *out_path, const char *binary, const char *plan_args, int num, int den) {
    assert_int_equal(cli_run(out_path, "%s plan %s --remat all --json", binary, plan_args), 0);
    /* the figures in order: none's plan, then the policy's own (none, then all) */
    double none = cli_json_nth(out_path, "\"peak_bytes\": ", 0), least = cli_json_nth(out_path, "\"peak_bytes\": ", 2);
    assert_true(none > least && least > 0.0);
    return (long long)least + ((long long)none - (long long)least) * num / den;
}
