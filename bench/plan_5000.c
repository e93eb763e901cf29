/* plan_5000.c — how long remat and the planner take on a 5,000-node training graph
 * (a residual MLP: per block MatMul, Tanh, Add forward and the backward an autodiff
 * emits), for the "planning a 5,000-node training graph takes under a
 * second". Prints the time of each stage; not a test. Build and run with
 * bench/plan_5000.sh (after building the library in build/ or $BUILD). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir.h"
#include "remat/remat.h"
#include "plan/planner.h"
#include "plan/schedule.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int val(ot_graph *g, const char *name, int64_t a, int64_t b, ot_value_kind k) {
    int64_t d[2] = {a, b};
    ot_shape s = ot_shape_make(2, d);
    return ot_graph_add_value(g, name, OT_F32, &s, k);
}

static void node(ot_graph *g, ot_op op, const char *name, int a, int b, int out, ot_phase ph) {
    int in[2] = {a, b};
    ot_graph_add_node(g, op, name, in, b >= 0 ? 2 : 1, &out, 1, ph);
}

/* n blocks: h_i = h_{i-1} + tanh(h_{i-1} W_i); 3 forward and 7 backward nodes each. */
static ot_graph *residual_mlp(int n, int64_t batch, int64_t d) {
    ot_graph *g = ot_graph_new("residual_mlp");
    char nm[64];
    int *h = calloc((size_t)n + 1, sizeof(int)), *W = calloc((size_t)n + 1, sizeof(int));
    int *t = calloc((size_t)n + 1, sizeof(int));
    h[0] = val(g, "x", batch, d, OT_VK_INPUT);
    int target = val(g, "target", batch, d, OT_VK_INPUT);
    for (int i = 1; i <= n; i++) {
        snprintf(nm, sizeof nm, "W%d", i);
        W[i] = val(g, nm, d, d, OT_VK_PARAM);
        snprintf(nm, sizeof nm, "m%d", i);
        int m = val(g, nm, batch, d, OT_VK_ACTIVATION);
        node(g, OT_OP_MATMUL, nm, h[i - 1], W[i], m, OT_PHASE_FORWARD);
        snprintf(nm, sizeof nm, "t%d", i);
        t[i] = val(g, nm, batch, d, OT_VK_ACTIVATION);
        node(g, OT_OP_TANH, nm, m, -1, t[i], OT_PHASE_FORWARD);
        snprintf(nm, sizeof nm, "h%d", i);
        h[i] = val(g, nm, batch, d, OT_VK_ACTIVATION);
        node(g, OT_OP_ADD, nm, h[i - 1], t[i], h[i], OT_PHASE_FORWARD);
    }
    int loss = ot_graph_add_value(g, "loss", OT_F32, &(ot_shape){.rank = 0}, OT_VK_ACTIVATION);
    node(g, OT_OP_MSE_LOSS, "loss", h[n], target, loss, OT_PHASE_LOSS);
    int seed = ot_graph_add_value(g, "dloss", OT_F32, &(ot_shape){.rank = 0}, OT_VK_GRADIENT);
    node(g, OT_OP_ONES_LIKE, "seed", loss, -1, seed, OT_PHASE_BACKWARD);
    int dh = val(g, "dh", batch, d, OT_VK_GRADIENT);
    int in3[3] = {seed, h[n], target};
    ot_graph_add_node(g, OT_OP_MSE_LOSS_GRAD, "dloss", in3, 3, &dh, 1, OT_PHASE_BACKWARD);
    g->outputs = calloc((size_t)n + 1, sizeof(int));
    g->outputs[g->n_outputs++] = loss;
    g->values[loss].is_graph_output = true;
    for (int i = n; i >= 1; i--) {
        snprintf(nm, sizeof nm, "dm%d", i);
        int dm = val(g, nm, batch, d, OT_VK_GRADIENT);
        node(g, OT_OP_TANH_GRAD, nm, dh, t[i], dm, OT_PHASE_BACKWARD);
        snprintf(nm, sizeof nm, "hT%d", i);
        int hT = val(g, nm, d, batch, OT_VK_GRADIENT);
        node(g, OT_OP_TRANSPOSE, nm, h[i - 1], -1, hT, OT_PHASE_BACKWARD);
        snprintf(nm, sizeof nm, "W%d_grad", i);
        int dW = val(g, nm, d, d, OT_VK_GRADIENT);
        node(g, OT_OP_MATMUL, nm, hT, dm, dW, OT_PHASE_BACKWARD);
        g->outputs[g->n_outputs++] = dW;
        g->values[dW].is_graph_output = true;
        snprintf(nm, sizeof nm, "WT%d", i);
        int WT = val(g, nm, d, d, OT_VK_GRADIENT);
        node(g, OT_OP_TRANSPOSE, nm, W[i], -1, WT, OT_PHASE_BACKWARD);
        snprintf(nm, sizeof nm, "dx%d", i);
        int dx = val(g, nm, batch, d, OT_VK_GRADIENT);
        node(g, OT_OP_MATMUL, nm, dm, WT, dx, OT_PHASE_BACKWARD);
        snprintf(nm, sizeof nm, "dh%d", i - 1);
        int ndh = val(g, nm, batch, d, OT_VK_GRADIENT);
        node(g, OT_OP_ADD, nm, dh, dx, ndh, OT_PHASE_BACKWARD);
        dh = ndh;
    }
    free(h);
    free(W);
    free(t);
    return g;
}

static int64_t plan_peak(ot_graph *g, double *secs) {
    double t0 = now_s();
    ot_remat_measurement m = {0};
    ot_error err = {0};
    if (ot_remat_measure_planner(g, NULL, &m, &err)) {
        fprintf(stderr, "plan_5000: %s\n", err.msg);
        exit(1);
    }
    *secs = now_s() - t0;
    return m.peak;
}

int main(int argc, char **argv) {
    int blocks = argc > 1 ? atoi(argv[1]) : 556; /* 9 nodes per block: 5,006 nodes */
    /* "auto [BUDGET]" after it runs only analyse, none and auto (at BUDGET, by default
     * the full run's: halfway between the least peak and none's), for profiling auto
     * alone */
    bool only_auto = argc > 2 && strcmp(argv[2], "auto") == 0;
    int64_t given_budget = only_auto && argc > 3 ? atoll(argv[3]) : 0;
    ot_graph *g = residual_mlp(blocks, 32, 256);
    int live = 0;
    for (int i = 0; i < g->n_nodes; i++) live += !g->nodes[i].removed;
    ot_error err = {0};
    double t0 = now_s(), t_plan = 0.0;
    ot_remat_analysis an;
    if (ot_remat_analyze(g, &an, &err)) {
        fprintf(stderr, "plan_5000: %s\n", err.msg);
        return 1;
    }
    double t_an = now_s() - t0;
    int64_t peak_none = plan_peak(g, &t_plan);
    printf("training graph: %d nodes (%d forward), %d articulation points\n", live, an.n_fwd, an.n_art);
    printf("analyse (order, saved values, articulation points, FLOPs): %.3f s\n", t_an);
    printf("schedule + plan, --remat none: %.3f s (peak %lld bytes)\n", t_plan, (long long)peak_none);
    bool *keep = calloc((size_t)an.n_values, sizeof(bool));
    const char *pols[] = {"sqrt", "selective", "every:4"};
    for (int i = 0; i < (only_auto ? 0 : 3); i++) {
        ot_remat_policy p;
        ot_remat_policy_parse(pols[i], &p, &err);
        t0 = now_s();
        ot_remat_policy_keep(g, &an, &p, keep, &err);
        ot_remat_rewrite rw;
        if (ot_remat_apply(g, &an, keep, &rw, &err)) {
            fprintf(stderr, "plan_5000: %s\n", err.msg);
            return 1;
        }
        double t_rw = now_s() - t0;
        int64_t pk = plan_peak(g, &t_plan);
        printf("--remat %-9s: keep set + rewrite %.3f s (%d clones), schedule + plan %.3f s (peak %lld bytes)\n",
               pols[i], t_rw, rw.n_clones, t_plan, (long long)pk);
        ot_remat_undo(g, &rw);
        ot_remat_policy_free(&p);
    }
    ot_remat_auto_stats st;
    int64_t least = 0;
    t0 = now_s();
    if (!given_budget && ot_remat_least_memory(g, &an, ot_remat_measure_planner, NULL, keep, &least, &err)) {
        fprintf(stderr, "plan_5000: %s\n", err.msg);
        return 1;
    }
    if (!given_budget)
        printf("--remat all (least peak search): %.3f s, peak %lld bytes\n", now_s() - t0, (long long)least);
    int64_t budget = given_budget ? given_budget : least + (peak_none - least) / 2;
    t0 = now_s();
    clock_t c0 = clock(); /* CPU time as well: wall time is noisy on a shared machine */
    ot_status s = ot_remat_auto(g, &an, budget, ot_remat_measure_planner, NULL, keep, &st, &err);
    double cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    printf("--remat auto --memory-budget %lld: %.3f s (%.3f s CPU), %d planner runs (%.4f s each), %s peak %lld, "
           "recompute %.1f%% of the step\n",
           (long long)budget, now_s() - t0, cpu, st.n_measured, (now_s() - t0) / (st.n_measured ? st.n_measured : 1),
           s ? err.msg : "ok,", (long long)st.peak, 100.0 * st.cost / an.step_flops);
    if (!only_auto && ot_remat_optimal_available()) { /* the MIP at this size, within 20 s */
        ot_remat_optimal_stats os;
        t0 = now_s();
        s = ot_remat_optimal(g, &an, budget, 20.0, ot_remat_measure_planner, NULL, keep, &os, &err);
        printf("--remat optimal --memory-budget %lld: %.3f s, %d binaries, %d rounds, gap %.3g%%, %s peak %lld "
               "(model %lld), recompute %.1f%% of the step\n",
               (long long)budget, now_s() - t0, os.n_binaries, os.rounds, 100.0 * os.gap, s ? err.msg : "ok,",
               (long long)os.planner_peak, (long long)os.model_peak, 100.0 * os.cost / an.step_flops);
    }
    free(keep);
    ot_remat_analysis_free(&an);
    ot_graph_free(g);
    return 0;
}
