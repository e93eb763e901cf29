/* test_auto_modest.c — `--remat auto` without a budget is never worse than `--remat
 * none` (issue 31): on every sample, with and without LoRA (rank 4), at a few batch
 * sizes, the training step `plan` and `train` build (optimizer included) under auto
 * peaks at most at none's peak; a plan that peaks lower recomputes at most
 * OT_REMAT_AUTO_MODEST of the step's FLOPs; one that does not is none's plan itself
 * (no clones, no_gain set). Every figure is the planner's, as the commands print it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "importer/importer.h"
#include "kernels/kernel.h"
#include "remat/remat.h"
#include "train/train.h"

#define SAMPLES OT_SOURCE_DIR "/samples/"

/* A plan-only training session as `plan` builds it (SGD; optimizer nodes planned). */
static ot_train_session *session(ot_model *m, const char *policy, int64_t batch, int lora, const char *target) {
    ot_train_options to;
    ot_train_options_default(&to);
    to.loss.kind = OT_LOSS_CROSS_ENTROPY;
    to.loss.class_axis = -1;
    to.plan_only = true;
    to.remat = policy;
    to.batch_size = batch;
    to.lora.rank = lora;
    to.lora.alpha = lora;
    const char *targets[1] = {target};
    if (lora && target) {
        to.lora.targets = targets;
        to.lora.n_targets = 1;
    }
    ot_train_session *s = NULL;
    ot_error err = {0};
    if (ot_train_session_new(m, &to, NULL, true, &s, &err)) fail_msg("%s --remat %s: %s", m->path, policy, err.msg);
    return s;
}

/* auto against none for one model, batch and LoRA rank; returns whether auto saved. */
static bool check_one(ot_model *m, int64_t batch, int lora, const char *target) {
    ot_train_session *s0 = session(m, "none", batch, lora, target), *s1 = session(m, "auto", batch, lora, target);
    size_t none = ot_plan_peak_bytes(ot_train_plan(s0)), peak = ot_plan_peak_bytes(ot_train_plan(s1));
    const ot_train_remat_summary *rs = ot_train_remat_info(s1);
    if (peak > none)
        fail_msg("%s batch %lld lora %d: auto peaks at %zu bytes, none at %zu", m->path, (long long)batch, lora, peak,
                 none);
    assert_true(rs->applied && rs->modest);
    assert_int_equal(rs->peak_none, (int64_t)none); /* the session's own figure for none */
    assert_int_equal(rs->peak, (int64_t)peak);
    const ot_remat_analysis *an = ot_train_remat_analysis(s1, NULL);
    assert_non_null(an);
    if (peak < none) {
        assert_false(rs->no_gain);
        assert_true(rs->extra_flops <= OT_REMAT_AUTO_MODEST * an->step_flops);
        assert_true(rs->modest_cap == OT_REMAT_AUTO_MODEST * an->step_flops);
    } else {
        assert_true(rs->no_gain); /* "no remat helps here": none's plan, nothing recomputed */
        assert_int_equal(rs->n_clones, 0);
        assert_true(rs->extra_flops == 0.0);
    }
    print_message("%-34s batch %3lld lora %d: none %8zu auto %8zu (%+.1f%%, +%.1f%% FLOPs)%s\n", m->path,
                  (long long)ot_train_batch_size(s1), lora, none, peak,
                  100.0 * ((double)peak - (double)none) / (double)none,
                  an->step_flops > 0 ? 100.0 * rs->extra_flops / an->step_flops : 0.0, rs->no_gain ? " no gain" : "");
    ot_train_session_free(s0);
    ot_train_session_free(s1);
    return peak < none;
}

static void test_every_sample(void **state) {
    (void)state;
    /* LoRA on the convnets: their only MatMul/Gemm weight is the head, which the default
     * targets leave out, so the head is named */
    static const struct {
        const char *name, *lora_target;
    } models[] = {{"mlp", NULL},      {"chain48", NULL}, {"resnet", "*"},
                  {"mobilenet", "*"}, {"tinygpt", NULL}, {"tinygpt_nodrop", NULL}};
    static const int64_t batches[] = {1, 4, 16};
    int n_saved = 0, n_checked = 0;
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        char path[512];
        snprintf(path, sizeof path, SAMPLES "%s.onnx", models[i].name);
        ot_model *m = NULL;
        ot_error err = {0};
        ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = true};
        if (ot_model_load(path, &io, &m, &err)) fail_msg("%s", err.msg);
        bool fixed = m->graph->values[m->graph->inputs[0]].shape.dim[0] >= 0;
        for (size_t b = 0; b < (fixed ? 1 : sizeof batches / sizeof *batches); b++)
            for (int lora = 0; lora <= 4; lora += 4) {
                n_saved += check_one(m, fixed ? 0 : batches[b], lora, models[i].lora_target);
                n_checked++;
            }
        ot_model_free(m);
    }
    assert_int_equal(n_checked, 2 * (2 + 3 * 4));
    assert_true(n_saved >= n_checked / 2); /* remat helps on most: the check is not vacuous */
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_sample)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
