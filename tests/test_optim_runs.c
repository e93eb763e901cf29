/* test_optim_runs.c — a run of SgdStep (or AdamStep) nodes updated in one pass (kernel_ctx.h
 * run_len, the executor's runs of optimizer nodes): the same bits as each node on its
 * own at 1 and 2 threads, the run cut where a node's hyper-parameters differ, and
 * the update check counting every node of the run and seeing a non-finite one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "kernels/cpu/optim_cpu.h"
#include "train/optim.h"

enum { NP = 4 };
/* sizes that split unevenly over 2 threads, one of them below a thread's share */
static const int64_t sizes[NP] = {70001, 131072, 5, 90000};

typedef struct fixture {
    ot_graph *g;
    ot_optim_graph og;
    float *p[NP], *gr[NP], *buf[NP], *buf2[NP];
    double scalars[OT_OPT_N_SCALARS];
    ot_tensor in[NP][5];
    const ot_node *nodes[NP];
    const ot_tensor *ins[NP];
} fixture;

static void fixture_new(fixture *f, ot_optim_kind kind, double momentum) {
    memset(f, 0, sizeof *f);
    f->g = ot_graph_new("runs");
    int params[NP], grads[NP];
    for (int k = 0; k < NP; k++) {
        ot_shape s = ot_shape_make(1, &sizes[k]);
        char name[32];
        snprintf(name, sizeof name, "w%d", k);
        params[k] = ot_graph_add_value(f->g, name, OT_F32, &s, OT_VK_PARAM);
        snprintf(name, sizeof name, "w%d_grad", k);
        grads[k] = ot_graph_add_value(f->g, name, OT_F32, &s, OT_VK_GRADIENT);
    }
    ot_optim_config c;
    ot_optim_config_default(&c, kind);
    c.momentum = momentum;
    c.weight_decay = 0.01;
    ot_error err = {0};
    assert_int_equal(ot_optim_build(f->g, &c, params, grads, NP, &f->og, &err), OT_OK);
    f->scalars[OT_OPT_LR] = 0.05;
    f->scalars[OT_OPT_GRAD_SCALE] = 0.5;
    f->scalars[OT_OPT_STEP] = 1;
    f->scalars[OT_OPT_APPLY] = 1;
    for (int k = 0; k < NP; k++) {
        size_t n = (size_t)sizes[k];
        f->p[k] = malloc(n * sizeof(float));
        f->gr[k] = malloc(n * sizeof(float));
        f->buf[k] = calloc(n, sizeof(float));
        f->buf2[k] = calloc(n, sizeof(float));
        for (size_t i = 0; i < n; i++) {
            f->p[k][i] = sinf((float)(i + 7 * k));
            f->gr[k][i] = cosf((float)i * 0.37f + (float)k);
        }
        const ot_node *nd = &f->g->nodes[f->og.step_nodes[k]];
        f->nodes[k] = nd;
        for (int j = 0; j < nd->n_inputs; j++) {
            int v = nd->inputs[j];
            ot_tensor *t = &f->in[k][j];
            if (v < 0) continue;
            t->dtype = f->g->values[v].dtype;
            t->shape = f->g->values[v].shape;
            bool last = j == nd->n_inputs - 1;
            t->data = last ? (void *)f->scalars : j == 0 ? f->p[k] : j == 1 ? f->gr[k] : j == 2 ? f->buf[k] : f->buf2[k];
            t->nbytes = last ? sizeof f->scalars : n * sizeof(float);
        }
        f->ins[k] = f->in[k];
    }
}

static void fixture_free(fixture *f) {
    for (int k = 0; k < NP; k++) free(f->p[k]), free(f->gr[k]), free(f->buf[k]), free(f->buf2[k]);
    ot_optim_graph_free(&f->og);
    ot_graph_free(f->g);
}

/* Two steps of the nodes [0, NP): each on its own (runs false) or as runs from the
 * first node not yet updated; returns the run lengths the kernel reported. */
static int two_steps(fixture *f, int threads, bool runs, int *done_first, ot_update_check *u) {
    ot_error err = {0};
    int n_calls = 0;
    for (int step = 0; step < 2; step++) {
        *u = (ot_update_check){0};
        for (int k = 0; k < NP;) {
            int done = 1;
            ot_kernel_ctx ctx = {.n_threads = threads, .update_check = u};
            if (runs) {
                ctx.run_len = NP - k;
                ctx.run_nodes = &f->nodes[k];
                ctx.run_in = &f->ins[k];
                ctx.run_done = &done;
            }
            const ot_node *nd = f->nodes[k];
            ot_status st = nd->op == OT_OP_SGD_STEP ? ot_cpu_sgd_step(nd, f->in[k], NULL, &ctx, &err)
                                                    : ot_cpu_adam_step(nd, f->in[k], NULL, &ctx, &err);
            if (st) fail_msg("%s", err.msg);
            if (step == 0 && n_calls == 0) *done_first = done;
            n_calls += step == 0;
            k += done;
        }
    }
    return n_calls;
}

static void assert_same(const fixture *a, const fixture *b) {
    for (int k = 0; k < NP; k++) {
        assert_memory_equal(a->p[k], b->p[k], (size_t)sizes[k] * sizeof(float));
        assert_memory_equal(a->buf[k], b->buf[k], (size_t)sizes[k] * sizeof(float));
        assert_memory_equal(a->buf2[k], b->buf2[k], (size_t)sizes[k] * sizeof(float));
    }
}

static void run_bitwise(ot_optim_kind kind) {
    for (int threads = 1; threads <= 2; threads++) {
        fixture one, run;
        fixture_new(&one, kind, kind == OT_OPTIM_SGD ? 0.9 : 0.0);
        fixture_new(&run, kind, kind == OT_OPTIM_SGD ? 0.9 : 0.0);
        ot_update_check u1, u2;
        int d1 = 0, d2 = 0;
        assert_int_equal(two_steps(&one, threads, false, &d1, &u1), NP);
        assert_int_equal(two_steps(&run, threads, true, &d2, &u2), 1); /* one call updated all four */
        assert_int_equal(d2, NP);
        assert_int_equal(u2.checked, NP);
        assert_false(u2.nonfinite);
        assert_same(&one, &run);
        fixture_free(&one);
        fixture_free(&run);
    }
}

static void test_run_bitwise_sgd(void **state) {
    (void)state;
    run_bitwise(OT_OPTIM_SGD);
}

static void test_run_bitwise_adamw(void **state) {
    (void)state;
    run_bitwise(OT_OPTIM_ADAMW);
}

static void test_run_cut_at_other_hyperparams(void **state) {
    (void)state;
    fixture one, run;
    fixture_new(&one, OT_OPTIM_SGD, 0.9);
    fixture_new(&run, OT_OPTIM_SGD, 0.9);
    for (int k = 0; k < 2; k++) { /* node 2 of both: another momentum, so its own pass */
        fixture *f = k ? &run : &one;
        ot_node *nd = &f->g->nodes[f->og.step_nodes[2]];
        assert_int_equal(ot_node_set_attr_float(nd, "momentum", 0.5f), 0);
    }
    ot_update_check u1, u2;
    int d1 = 0, d2 = 0;
    assert_int_equal(two_steps(&one, 2, false, &d1, &u1), NP);
    assert_int_equal(two_steps(&run, 2, true, &d2, &u2), 3); /* [0, 1], [2], [3] */
    assert_int_equal(d2, 2);
    assert_int_equal(u2.checked, NP);
    assert_same(&one, &run);
    fixture_free(&one);
    fixture_free(&run);
}

static void test_run_sees_nonfinite(void **state) {
    (void)state;
    fixture f;
    fixture_new(&f, OT_OPTIM_SGD, 0.0);
    f.gr[3][89999] = INFINITY; /* the last element of the last param */
    ot_update_check u;
    int d = 0;
    assert_int_equal(two_steps(&f, 2, true, &d, &u), 1);
    assert_int_equal(u.checked, NP);
    assert_true(u.nonfinite);
    fixture_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_bitwise_sgd),
        cmocka_unit_test(test_run_bitwise_adamw),
        cmocka_unit_test(test_run_cut_at_other_hyperparams),
        cmocka_unit_test(test_run_sees_nonfinite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
