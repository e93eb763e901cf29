/* test_remat_models.c — remat end to end on the exported samples: for every sample
 * and every policy, one step with the policy is bitwise equal to one step without
 * (loss, every gradient, BatchNorm running statistics; Dropout in tinygpt, BN in
 * training mode in resnet and mobilenet), and the executor's measured high-water
 * mark equals the planned peak. Also the figures: chain48 under sqrt,
 * tinygpt under selective, and auto over a sweep of budgets on real graphs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/remat_session.h"
#include "train/npy.h"
#include "train/train.h"

static char *sample_path(const char *rel) {
    static char buf[4][1024];
    static int k = 0;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/samples/%s", OT_SOURCE_DIR, rel);
    return buf[k];
}

static void load_data(const char *dir, ot_dataset *d) {
    char p[512];
    ot_tensor *t = NULL;
    ot_error err = {0};
    snprintf(p, sizeof p, "%s/input.npy", dir);
    if (ot_npy_read(sample_path(p), &t, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ot_dataset_add(d, "", p, -1, t, &err), OT_OK);
    snprintf(p, sizeof p, "%s/labels.npy", dir);
    if (ot_npy_read(sample_path(p), &t, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ot_dataset_add(d, OT_DATA_LABELS, p, -1, t, &err), OT_OK);
}

static ot_remat_session *session(const char *model, const char *policy, int64_t budget, int64_t batch) {
    ot_remat_session_options o = {.seed = 7, .n_threads = 2, .policy = policy, .memory_budget = budget};
    o.loss.kind = OT_LOSS_CROSS_ENTROPY;
    o.loss.class_axis = -1;
    o.batch_size = batch;
    ot_remat_session *s = NULL;
    ot_error err = {0};
    if (ot_remat_session_new(sample_path(model), &o, &s, &err)) fail_msg("%s --remat %s: %s", model, policy, err.msg);
    return s;
}

typedef struct sample {
    const char *model, *dir;
    int64_t batch; /* 0: fixed by the model */
} sample;

static const sample samples[] = {
    {"mlp.onnx", "mlp", 7},           {"chain48.onnx", "chain48", 7}, {"resnet.onnx", "resnet", 0},
    {"mobilenet.onnx", "mobilenet", 0}, {"tinygpt.onnx", "tinygpt", 7}, {"tinygpt_nodrop.onnx", "tinygpt", 7},
};

static const char *policies[] = {"all", "sqrt", "every:2", "every:3", "selective", "auto", "manual:*"};

static void check_equal(const ot_remat_step *a, const ot_remat_step *b, const char *what) {
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        assert_string_equal(a->names[i], b->names[i]);
        assert_int_equal(a->tensors[i]->nbytes, b->tensors[i]->nbytes);
        if (memcmp(a->tensors[i]->data, b->tensors[i]->data, a->tensors[i]->nbytes))
            fail_msg("%s: %s differs from --remat none", what, a->names[i]);
    }
}

/* Every policy on every sample: bitwise equal to none, high-water == planned peak. */
static void test_verify_all_samples(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        ot_dataset data = {0};
        load_data(samples[i].dir, &data);
        ot_remat_session *base = session(samples[i].model, "none", 0, samples[i].batch);
        ot_remat_step r0;
        ot_error err = {0};
        if (ot_remat_session_step(base, &data, &r0, &err)) fail_msg("%s: %s", samples[i].model, err.msg);
        assert_int_equal(r0.measured_peak, r0.planned_peak);
        assert_true(r0.n >= 2);
        int64_t none_peak = (int64_t)r0.planned_peak;
        for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
            /* auto under a budget halfway between none and the saving `all` finds */
            int64_t budget = 0;
            if (!strcmp(policies[p], "auto")) {
                ot_remat_session *all = session(samples[i].model, "all", 0, samples[i].batch);
                ot_plan *pl = NULL;
                assert_int_equal(ot_remat_session_plan(all, &pl, &err), OT_OK);
                budget = ((int64_t)ot_plan_peak_bytes(pl) + none_peak) / 2;
                ot_plan_free(pl);
                ot_remat_session_free(all);
            }
            ot_remat_session *s = session(samples[i].model, policies[p], budget, samples[i].batch);
            ot_remat_step r1;
            if (ot_remat_session_step(s, &data, &r1, &err)) fail_msg("%s %s: %s", samples[i].model, policies[p], err.msg);
            char what[128];
            snprintf(what, sizeof what, "%s --remat %s", samples[i].model, policies[p]);
            check_equal(&r0, &r1, what);
            assert_int_equal(r1.measured_peak, r1.planned_peak);
            if (budget) assert_true((int64_t)r1.planned_peak <= budget);
            if (!strcmp(policies[p], "manual:*")) assert_int_equal(s->rw.n_clones, 0); /* keeps everything */
            print_message("%-20s %-10s peak %8zu -> %8zu, %3d clones, +%.1f%% FLOPs\n", samples[i].model, policies[p],
                          r0.planned_peak, r1.planned_peak, s->rw.n_clones,
                          100.0 * s->rw.extra_flops / s->an.step_flops);
            ot_remat_step_free(&r1);
            ot_remat_session_free(s);
        }
        ot_remat_step_free(&r0);
        ot_remat_session_free(base);
        ot_dataset_free(&data);
    }
}

/* Different seeds give different Dropout masks: the check above is not vacuous. */
static void test_dropout_seed_matters(void **state) {
    (void)state;
    ot_dataset data = {0};
    load_data("tinygpt", &data);
    ot_remat_session *a = session("tinygpt.onnx", "all", 0, 7);
    ot_remat_session *b = session("tinygpt.onnx", "all", 0, 7);
    b->seed = 8;
    ot_remat_step ra, rb;
    ot_error err = {0};
    assert_int_equal(ot_remat_session_step(a, &data, &ra, &err), OT_OK);
    assert_int_equal(ot_remat_session_step(b, &data, &rb, &err), OT_OK);
    assert_true(ra.loss != rb.loss);
    int n_dropout_clones = 0;
    for (int id = 0; id < a->g->n_nodes; id++)
        n_dropout_clones += a->g->nodes[id].phase == OT_PHASE_RECOMPUTE && a->g->nodes[id].op == OT_OP_DROPOUT;
    assert_true(n_dropout_clones > 0);
    ot_remat_step_free(&ra);
    ot_remat_step_free(&rb);
    ot_remat_session_free(a);
    ot_remat_session_free(b);
    ot_dataset_free(&data);
}

static double forward_flops(const ot_remat_analysis *an) {
    double f = 0.0;
    for (int i = 0; i < an->n_fwd; i++) f += an->node_flops[an->fwd[i]];
    return f;
}

static int64_t kept_bytes(ot_remat_session *s, const char *policy) {
    ot_remat_policy p;
    ot_error err = {0};
    assert_int_equal(ot_remat_policy_parse(policy, &p, &err), OT_OK);
    bool *keep = calloc((size_t)s->an.n_values, sizeof(bool));
    assert_int_equal(ot_remat_policy_keep(s->g, &s->an, &p, keep, &err), OT_OK);
    int64_t b = ot_remat_kept_bytes(s->g, &s->an, keep);
    free(keep);
    ot_remat_policy_free(&p);
    return b;
}

/* chain48 (48 x Gemm+Tanh): sqrt keeps <= 1/4 of none's activation bytes for at most
 * one extra forward pass. */
static void test_chain48_sqrt(void **state) {
    (void)state;
    ot_remat_session *none = session("chain48.onnx", "none", 0, 64);
    ot_remat_session *sq = session("chain48.onnx", "sqrt", 0, 64);
    int64_t kn = kept_bytes(none, "none"), ks = kept_bytes(none, "sqrt");
    double fwd = forward_flops(&sq->an);
    ot_plan *p0 = NULL, *p1 = NULL;
    ot_error err = {0};
    assert_int_equal(ot_remat_session_plan(none, &p0, &err), OT_OK);
    assert_int_equal(ot_remat_session_plan(sq, &p1, &err), OT_OK);
    print_message("chain48 b64: kept activations none %lld, sqrt %lld (%.1f%%); extra %.3f forward passes; "
                  "planner kept-at-peak %zu -> %zu, peak %zu -> %zu\n",
                  (long long)kn, (long long)ks, 100.0 * (double)ks / (double)kn, sq->rw.extra_flops / fwd,
                  ot_plan_bytes_at_peak(p0, OT_MEM_KEPT), ot_plan_bytes_at_peak(p1, OT_MEM_KEPT),
                  ot_plan_peak_bytes(p0), ot_plan_peak_bytes(p1));
    assert_true(ks * 4 <= kn);
    assert_true(sq->rw.extra_flops <= fwd);
    assert_true(ot_plan_peak_bytes(p1) < ot_plan_peak_bytes(p0));
    ot_plan_free(p0);
    ot_plan_free(p1);
    ot_remat_session_free(none);
    ot_remat_session_free(sq);
}

/* tinygpt: selective cuts kept activation bytes by >= 40% for <= 10% extra FLOPs. */
static void test_tinygpt_selective(void **state) {
    (void)state;
    ot_remat_session *s = session("tinygpt.onnx", "none", 0, 8);
    int64_t kn = kept_bytes(s, "none"), ks = kept_bytes(s, "selective");
    ot_remat_policy p = {.kind = OT_REMAT_SELECTIVE};
    ot_error err = {0};
    bool *keep = calloc((size_t)s->an.n_values, sizeof(bool));
    assert_int_equal(ot_remat_policy_keep(s->g, &s->an, &p, keep, &err), OT_OK);
    double extra = ot_remat_keep_cost(s->g, &s->an, keep, NULL);
    double cut = 1.0 - (double)ks / (double)kn, share = extra / s->an.step_flops;
    print_message("tinygpt b8 selective: kept activations %lld -> %lld (cut %.1f%%), extra FLOPs %.2f%% of the step\n",
                  (long long)kn, (long long)ks, 100.0 * cut, 100.0 * share);
    assert_true(cut >= 0.40);
    assert_true(share <= 0.10);
    free(keep);
    ot_remat_session_free(s);
}

/* auto meets every budget from the `all` peak to the `none` peak on real graphs. */
static void test_auto_sweep_models(void **state) {
    (void)state;
    const char *models[] = {"tinygpt.onnx", "resnet.onnx"};
    for (int m = 0; m < 2; m++) {
        int64_t batch = m == 0 ? 8 : 0;
        ot_remat_session *s = session(models[m], "none", 0, batch);
        ot_error err = {0};
        bool *keep = calloc((size_t)s->an.n_values, sizeof(bool));
        ot_remat_measurement hi = {0};
        assert_int_equal(ot_remat_measure_planner(s->g, s->be, &hi, &err), OT_OK);
        int64_t lo = 0;
        assert_int_equal(ot_remat_least_memory(s->g, &s->an, ot_remat_measure_planner, s->be, keep, &lo, &err), OT_OK);
        assert_true(lo < hi.peak);
        double prev_cost = -1.0;
        for (int i = 0; i <= 6; i++) {
            int64_t budget = lo + (hi.peak - lo) * i / 6;
            ot_remat_auto_stats st;
            if (ot_remat_auto(s->g, &s->an, budget, ot_remat_measure_planner, s->be, keep, &st, &err))
                fail_msg("%s budget %lld: %s", models[m], (long long)budget, err.msg);
            assert_true(st.peak <= budget);
            print_message("%s: budget %lld -> peak %lld, recompute %.2f%% of the step, %d planner runs\n", models[m],
                          (long long)budget, (long long)st.peak, 100.0 * st.cost / s->an.step_flops, st.n_measured);
            if (i == 6) assert_true(st.cost == 0.0);
            prev_cost = st.cost;
        }
        (void)prev_cost;
        ot_remat_auto_stats st;
        assert_int_equal(ot_remat_auto(s->g, &s->an, lo - 1, ot_remat_measure_planner, s->be, keep, &st, &err),
                         OT_E_MEMORY);
        free(keep);
        ot_remat_session_free(s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_all_samples), cmocka_unit_test(test_dropout_seed_matters),
        cmocka_unit_test(test_chain48_sqrt),       cmocka_unit_test(test_tinygpt_selective),
        cmocka_unit_test(test_auto_sweep_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
