/* test_exec_runs.c — the executor's runs of optimizer nodes (exec/executor.c,
 * kernel_ctx.h run_len) on the CPU backend: a graph whose backward pass writes three
 * gradients and whose optimizer appends three SgdStep nodes runs them as one run
 * (every node reported to the update check once), and gives the params the bits of
 * the same schedule run step by step (ot_executor_run_steps runs no runs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/executor.h"
#include "ir.h"
#include "train/optim.h"

enum { NW = 3 };
static const int64_t sizes[NW] = {150001, 7, 65536};

/* x -> Neg -> w_k's gradient (backward) for each param, then the optimizer. */
static ot_graph *build(int *params) {
    ot_graph *g = ot_graph_new("runs");
    int grads[NW];
    for (int k = 0; k < NW; k++) {
        ot_shape s = ot_shape_make(1, &sizes[k]);
        char name[32];
        snprintf(name, sizeof name, "w%d", k);
        params[k] = ot_graph_add_value(g, name, OT_F32, &s, OT_VK_PARAM);
        size_t n = (size_t)sizes[k];
        float *w = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) w[i] = sinf((float)i + (float)k);
        g->values[params[k]].data = w;
        g->values[params[k]].nbytes = n * sizeof(float);
        snprintf(name, sizeof name, "x%d", k);
        int x = ot_graph_add_value(g, name, OT_F32, &s, OT_VK_INPUT);
        snprintf(name, sizeof name, "w%d_grad", k);
        grads[k] = ot_graph_add_value(g, name, OT_F32, &s, OT_VK_GRADIENT);
        ot_graph_add_node(g, OT_OP_NEG, name, &x, 1, &grads[k], 1, OT_PHASE_BACKWARD);
    }
    ot_optim_config c;
    ot_optim_config_default(&c, OT_OPTIM_SGD);
    c.momentum = 0.9;
    ot_optim_graph og = {0};
    ot_error err = {0};
    if (ot_optim_build(g, &c, params, grads, NW, &og, &err)) fail_msg("%s", err.msg);
    double sc[OT_OPT_N_SCALARS] = {[OT_OPT_LR] = 0.1, [OT_OPT_GRAD_SCALE] = 1.0, [OT_OPT_STEP] = 1, [OT_OPT_APPLY] = 1};
    ot_value *v = &g->values[og.scalars];
    v->data = malloc(sizeof sc);
    memcpy(v->data, sc, sizeof sc);
    v->nbytes = sizeof sc;
    ot_optim_graph_free(&og);
    return g;
}

/* Two steps of the graph on 2 threads, with runs (ot_executor_run) or step by step;
 * the params after them in w[k]. */
static void two_steps(bool runs, float **w, int *checked) {
    int params[NW];
    ot_graph *g = build(params);
    ot_error err = {0};
    ot_backend *be = ot_backend_cpu_new(2, &err);
    assert_non_null(be);
    ot_executor *ex = NULL;
    ot_exec_options opt = {.n_threads = 2};
    if (ot_executor_new(g, be, &opt, &ex, &err)) fail_msg("%s", err.msg);
    for (int k = 0; k < NW; k++) {
        size_t n = (size_t)sizes[k];
        ot_tensor *x = ot_tensor_new(OT_F32, &g->values[params[k]].shape);
        for (size_t i = 0; i < n; i++) ((float *)x->data)[i] = cosf((float)i * 0.3f) * (float)(k + 1);
        char name[32];
        snprintf(name, sizeof name, "x%d", k);
        if (ot_executor_set_input_by_name(ex, name, x, &err)) fail_msg("%s", err.msg);
        ot_tensor_free(x);
    }
    int n_steps = ot_executor_plan(ex)->n_steps;
    for (int s = 0; s < 2; s++) {
        ot_status st = runs ? ot_executor_run(ex, &err) : ot_executor_run_steps(ex, 0, n_steps, &err);
        if (st) fail_msg("%s", err.msg);
    }
    *checked = ot_executor_update_check(ex)->checked;
    for (int k = 0; k < NW; k++) {
        ot_tensor *t = NULL;
        if (ot_executor_get(ex, params[k], &t, &err)) fail_msg("%s", err.msg);
        w[k] = malloc((size_t)sizes[k] * sizeof(float));
        memcpy(w[k], t->data, (size_t)sizes[k] * sizeof(float));
        ot_tensor_free(t);
    }
    ot_executor_free(ex);
    ot_backend_free(be);
    ot_graph_free(g);
}

static void test_runs_same_bits(void **state) {
    (void)state;
    float *a[NW], *b[NW];
    int ca = 0, cb = 0;
    two_steps(true, a, &ca);
    two_steps(false, b, &cb);
    assert_int_equal(ca, NW); /* the run's first kernel reported all three nodes of the last run */
    for (int k = 0; k < NW; k++) {
        assert_memory_equal(a[k], b[k], (size_t)sizes[k] * sizeof(float));
        free(a[k]), free(b[k]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_runs_same_bits)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
