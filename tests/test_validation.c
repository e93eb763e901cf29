/* test_validation.c — validation data (`train --val-input/--val-labels`) is evaluated
 * in inference mode, as PyTorch's model.eval():
 *   - BatchNorm normalises with the running statistics: before any step the loss and
 *     accuracy on resnet and mobilenet equal PyTorch's eval-mode ones
 *     (tests/fixtures/validation/, made by make_fixtures.py there), and after training
 *     the last validation equals an independent inference pass over the saved model;
 *   - Dropout is off: tinygpt's validation loss does not depend on --seed and equals
 *     tinygpt_nodrop's and PyTorch's dropout-free reference;
 *   - validation changes nothing: losses, params and running statistics are bitwise
 *     the same with and without it;
 *   - nothing is duplicated: the validation plan reads the training arena's params,
 *     running statistics and constants in place (0 bytes in those categories) and its
 *     measured high-water mark equals its planned peak;
 *   - --memory-budget (remat auto's and the fixed policies' check) holds the training
 *     step and the validation plan together; a budget that holds only the step fails
 *     with OT_E_MEMORY (exit 9) naming both figures;
 *   - `onnxtrain eval` runs in inference mode by default, `--train-mode` as exported;
 *   - on a GPU (skipped without one) validation agrees with the CPU's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_run.h"
#include "importer/importer.h"
#include "kernels/backend_select.h"
#include "exec/executor.h"
#include "train/npy.h"
#include "train/train.h"
#include "test_files.h"
#include "kernels/kernel.h"

#define SAMPLES OT_SOURCE_DIR "/samples/"
#define FIXTURES OT_SOURCE_DIR "/tests/fixtures/validation/"
#define TMP OT_BINARY_DIR "/test_validation_tmp"
#define BIN OT_BINARY_DIR "/onnxtrain"
#define run_cli(...) cli_run(TMP "/out.txt", __VA_ARGS__)

static ot_tensor *read_npy(const char *path) { return test_npy("%s", path); }

static ot_model *load_model(const char *file) { return test_model(SAMPLES "%s", file); }

/* FILE (input, positional) + LABELS as a dataset. */
static void load_data(const char *input, const char *labels, ot_dataset *d) {
    ot_error err = {0};
    memset(d, 0, sizeof *d);
    if (ot_dataset_add(d, "", input, -1, read_npy(input), &err)) fail_msg("%s", err.msg);
    if (ot_dataset_add(d, OT_DATA_LABELS, labels, -1, read_npy(labels), &err)) fail_msg("%s", err.msg);
}

static void load_sample_data(const char *dir, ot_dataset *d) {
    char in[1024], lab[1024];
    snprintf(in, sizeof in, SAMPLES "%s/input.npy", dir);
    snprintf(lab, sizeof lab, SAMPLES "%s/labels.npy", dir);
    load_data(in, lab, d);
}

static double rel_l2(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return sqrt(num) / (den > 0 ? sqrt(den) : 1e-30);
}

/* A session on `model` with `data`, validation data `val` checked against it. */
static ot_train_session *session(ot_model *m, ot_dataset *data, ot_dataset *val, const ot_train_options *o) {
    ot_error err = {0};
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, o, data, true, &s, &err) != OT_OK) fail_msg("%s", err.msg);
    if (val && ot_train_check_data(s, val, "validation data", &err) != OT_OK) fail_msg("%s", err.msg);
    return s;
}

static ot_train_epoch_stats validate(ot_train_session *s, const ot_dataset *val) {
    ot_error err = {0};
    ot_train_epoch_stats e = {0};
    if (ot_train_validate(s, val, &e, &err) != OT_OK) fail_msg("%s", err.msg);
    return e;
}

/* ---- BatchNorm: running statistics --------------------------------------------- */

/* Before any step the running statistics are the exported ones: the loss and the
 * accuracy are PyTorch's in eval mode (and not its train-mode ref_loss). */
static void check_bn_sample(const char *name) {
    char model[256], path[1024];
    snprintf(model, sizeof model, "%s.onnx", name);
    ot_model *m = load_model(model);
    ot_dataset d;
    load_sample_data(name, &d);
    ot_train_options o;
    ot_train_options_default(&o);
    o.n_threads = 2;
    ot_train_session *s = session(m, &d, &d, &o);
    ot_train_epoch_stats e = validate(s, &d);

    snprintf(path, sizeof path, FIXTURES "%s_eval_loss.npy", name);
    ot_tensor *want = read_npy(path);
    double wl = ((const float *)want->data)[0];
    if (fabs(e.val_loss - wl) > 1e-5 * fabs(wl))
        fail_msg("%s: validation loss %.8g, PyTorch eval mode %.8g", name, e.val_loss, wl);
    snprintf(path, sizeof path, SAMPLES "%s/ref_loss.npy", name);
    ot_tensor *train_ref = read_npy(path);
    assert_true(fabs(e.val_loss - ((const float *)train_ref->data)[0]) > 1e-3); /* the fixture discriminates */

    snprintf(path, sizeof path, FIXTURES "%s_eval_logits.npy", name);
    ot_tensor *logits = read_npy(path);
    const ot_tensor *y = ot_dataset_find(&d, OT_DATA_LABELS)->t;
    int64_t n = logits->shape.dim[0], C = logits->shape.dim[1], correct = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *l = (const float *)logits->data + i * C;
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (l[c] > l[best]) best = c;
        correct += best == ((const int64_t *)y->data)[i];
    }
    assert_int_equal(e.val_samples, n);
    assert_true(fabs(e.val_accuracy - (double)correct / (double)n) < 1e-12);
    /* Labels = PyTorch's eval-mode predictions: every one is right (with batch
     * statistics only 3 of 8 would be). */
    ot_dataset d2;
    memset(&d2, 0, sizeof d2);
    ot_error err = {0};
    ot_tensor *x = read_npy(d.arrays[0].path), *pred = ot_tensor_new(OT_I64, &y->shape);
    for (int64_t i = 0; i < n; i++) {
        const float *l = (const float *)logits->data + i * C;
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (l[c] > l[best]) best = c;
        ((int64_t *)pred->data)[i] = best;
    }
    if (ot_dataset_add(&d2, "", "input.npy", -1, x, &err) || ot_dataset_add(&d2, OT_DATA_LABELS, "pred.npy", -1, pred, &err) ||
        ot_train_check_data(s, &d2, "validation data", &err))
        fail_msg("%s", err.msg);
    ot_train_epoch_stats e2 = validate(s, &d2);
    assert_true(e2.val_accuracy == 1.0);
    ot_dataset_free(&d2);
    printf("%s: validation loss %.7f (PyTorch eval %.7f), accuracy %.3f\n", name, e.val_loss, wl, e.val_accuracy);
    ot_tensor_free(want);
    ot_tensor_free(train_ref);
    ot_tensor_free(logits);
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

static void test_resnet_matches_pytorch_eval(void **state) {
    (void)state;
    check_bn_sample("resnet");
}

static void test_mobilenet_matches_pytorch_eval(void **state) {
    (void)state;
    check_bn_sample("mobilenet");
}

/* Mean cross-entropy (classes on axis 1 of [N, C] logits) of the saved model run in
 * inference mode by a plain executor: an evaluation independent of the session's
 * validation graph. */
static double inference_loss(const char *path, const ot_tensor *x, const ot_tensor *y) {
    ot_error err = {0};
    ot_model *m = NULL;
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    if (ot_model_load(path, &io, &m, &err) != OT_OK) fail_msg("%s", err.msg);
    ot_graph *g = m->graph;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == OT_OP_BATCH_NORM || g->nodes[i].op == OT_OP_DROPOUT)
            assert_int_equal(ot_node_set_attr_int(&g->nodes[i], "training_mode", 0), 0);
    ot_backend *be = ot_backend_new_by_name("cpu", 2, &err);
    assert_non_null(be);
    ot_executor *ex = NULL;
    if (ot_executor_new(g, be, NULL, &ex, &err) != OT_OK) fail_msg("%s", err.msg);
    ot_tensor *logits = NULL;
    if (ot_executor_set_input(ex, g->inputs[0], x, &err) || ot_executor_run(ex, &err) ||
        ot_executor_get(ex, g->outputs[0], &logits, &err))
        fail_msg("%s", err.msg);
    int64_t n = logits->shape.dim[0], C = logits->shape.dim[1];
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *l = (const float *)logits->data + i * C;
        double mx = l[0], se = 0;
        for (int64_t c = 1; c < C; c++) mx = l[c] > mx ? l[c] : mx;
        for (int64_t c = 0; c < C; c++) se += exp(l[c] - mx);
        sum += mx + log(se) - l[((const int64_t *)y->data)[i]];
    }
    ot_tensor_free(logits);
    ot_executor_free(ex);
    ot_backend_free(be);
    ot_model_free(m);
    return sum / (double)n;
}

/* After training, the last validation uses the params and running statistics the
 * training reached: it equals inference with the tuned model that train writes. */
static void test_after_training_equals_tuned_model(void **state) {
    (void)state;
    ot_error err = {0};
    ot_model *m = load_model("resnet.onnx");
    ot_dataset d;
    load_sample_data("resnet", &d);
    ot_train_options o;
    ot_train_options_default(&o);
    o.n_threads = 2;
    o.epochs = 3;
    o.validation = true; /* planned with the session, reading the training arena in place */
    ot_optim_config_default(&o.optim, OT_OPTIM_ADAM);
    o.optim.lr = 0.01;
    ot_train_session *s = session(m, &d, &d, &o);
    ot_train_result r;
    if (ot_train_run(s, &d, &d, NULL, &r, &err) != OT_OK) fail_msg("%s", err.msg);
    assert_int_equal(r.n_epochs, 3);
    assert_true(r.val_planned_peak > 0);
    assert_int_equal(r.val_measured_peak, r.val_planned_peak); /* the planner is exact here too */
    const char *path = TMP "/resnet_tuned.onnx";
    if (ot_model_save(m, path, &err) != OT_OK) fail_msg("%s", err.msg);
    double want = inference_loss(path, d.arrays[0].t, d.arrays[1].t), got = r.epochs[2].val_loss;
    printf("resnet after 3 Adam steps: validation loss %.7f, inference with the tuned model %.7f (first %.7f)\n", got,
           want, r.epochs[0].val_loss);
    if (fabs(got - want) > 1e-6 * fabs(want)) fail_msg("validation %.9g, tuned model in inference mode %.9g", got, want);
    assert_true(fabs(r.epochs[0].val_loss - got) > 1e-4); /* training moved it */
    remove(path);
    ot_train_result_free(&r);
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* ---- Dropout: off ------------------------------------------------------------------ */

/* tinygpt (Dropout 0.1): the same loss with any seed, equal to tinygpt_nodrop's (the
 * same weights, ratio 0) bit for bit and to PyTorch's dropout-free ref_loss; two
 * passes in a row agree (validation leaves no trace). */
static void test_tinygpt_dropout_off(void **state) {
    (void)state;
    const char *models[3] = {"tinygpt.onnx", "tinygpt.onnx", "tinygpt_nodrop.onnx"};
    const uint64_t seeds[3] = {1, 987654321, 1};
    double loss[3];
    for (int k = 0; k < 3; k++) {
        ot_model *m = load_model(models[k]);
        ot_dataset d;
        load_sample_data("tinygpt", &d);
        ot_train_options o;
        ot_train_options_default(&o);
        o.n_threads = 2;
        o.seed = seeds[k];
        ot_train_session *s = session(m, &d, &d, &o);
        ot_train_epoch_stats a = validate(s, &d), b = validate(s, &d);
        assert_memory_equal(&a.val_loss, &b.val_loss, sizeof a.val_loss);
        assert_memory_equal(&a.val_accuracy, &b.val_accuracy, sizeof a.val_accuracy);
        loss[k] = a.val_loss;
        ot_train_session_free(s);
        ot_dataset_free(&d);
        ot_model_free(m);
    }
    printf("tinygpt validation loss: seed 1 %.9g, seed 987654321 %.9g, tinygpt_nodrop %.9g\n", loss[0], loss[1], loss[2]);
    assert_memory_equal(&loss[0], &loss[1], sizeof loss[0]);
    assert_memory_equal(&loss[0], &loss[2], sizeof loss[0]);
    ot_tensor *ref = read_npy(SAMPLES "tinygpt/ref_loss.npy");
    double want = ((const float *)ref->data)[0];
    if (fabs(loss[0] - want) > 1e-5 * want) fail_msg("validation loss %.8g, PyTorch without dropout %.8g", loss[0], want);
    ot_tensor_free(ref);
}

/* ---- validation changes nothing ----------------------------------------------------- */

/* Trains with and without validation data; returns the losses and copies of every
 * param and state value after the run (all in one buffer). */
static void train_run(const char *model, const char *dir, bool with_val, double *losses, int64_t n_steps,
                      char **weights, size_t *wbytes) {
    ot_error err = {0};
    ot_model *m = load_model(model);
    ot_dataset d;
    load_sample_data(dir, &d);
    ot_train_options o;
    ot_train_options_default(&o);
    o.n_threads = 2;
    o.seed = 42;
    o.epochs = 3;
    o.batch_size = strcmp(dir, "resnet") ? 2 : 8;
    o.validation = with_val;
    ot_optim_config_default(&o.optim, OT_OPTIM_ADAMW);
    ot_train_session *s = session(m, &d, with_val ? &d : NULL, &o);
    ot_train_result r;
    if (ot_train_run(s, &d, with_val ? &d : NULL, NULL, &r, &err) != OT_OK) fail_msg("%s", err.msg);
    assert_int_equal(r.n_steps, n_steps);
    memcpy(losses, r.loss, (size_t)n_steps * sizeof *losses);
    assert_true(with_val ? !isnan(r.epochs[0].val_loss) : isnan(r.epochs[0].val_loss));
    const ot_graph *g = m->graph; /* the run gave the trained weights back to the model */
    size_t total = 0;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind == OT_VK_PARAM || g->values[v].kind == OT_VK_STATE) total += g->values[v].nbytes;
    char *buf = malloc(total + 1), *p = buf;
    assert_non_null(buf);
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind == OT_VK_PARAM || g->values[v].kind == OT_VK_STATE) {
            memcpy(p, g->values[v].data, g->values[v].nbytes);
            p += g->values[v].nbytes;
        }
    *weights = buf;
    *wbytes = total;
    ot_train_result_free(&r);
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

static void test_validation_changes_nothing(void **state) {
    (void)state;
    /* resnet: BatchNorm state, 1 step per epoch; tinygpt: Dropout, 4 steps per epoch
     * (7 samples in batches of 2: the last batch of 1 runs padded) */
    const char *cases[2][2] = {{"resnet.onnx", "resnet"}, {"tinygpt.onnx", "tinygpt"}};
    const int64_t steps[2] = {3, 12};
    for (int k = 0; k < 2; k++) {
        double a[16], b[16];
        char *wa, *wb;
        size_t na, nb;
        train_run(cases[k][0], cases[k][1], false, a, steps[k], &wa, &na);
        train_run(cases[k][0], cases[k][1], true, b, steps[k], &wb, &nb);
        if (memcmp(a, b, (size_t)steps[k] * sizeof a[0])) fail_msg("%s: validation changed the training losses", cases[k][0]);
        assert_int_equal(na, nb);
        if (memcmp(wa, wb, na)) fail_msg("%s: validation changed the trained params or running statistics", cases[k][0]);
        free(wa);
        free(wb);
    }
}

/* The last partial validation batch counts: 7 tinygpt samples in batches of 2 (the last
 * of 1 padded, its padding's labels ignored) give the loss and accuracy of one batch
 * of 7, over all 7 samples. */
static void test_partial_batch_validated(void **state) {
    (void)state;
    ot_train_epoch_stats e[2];
    for (int k = 0; k < 2; k++) {
        ot_model *m = load_model("tinygpt_nodrop.onnx");
        ot_dataset d;
        load_sample_data("tinygpt", &d);
        ot_train_options o;
        ot_train_options_default(&o);
        o.n_threads = 1;
        o.batch_size = k == 0 ? 2 : 7;
        ot_train_session *s = session(m, &d, &d, &o);
        e[k] = validate(s, &d);
        ot_train_session_free(s);
        ot_dataset_free(&d);
        ot_model_free(m);
    }
    assert_int_equal(e[0].val_samples, 7);
    assert_int_equal(e[1].val_samples, 7);
    if (fabs(e[0].val_loss - e[1].val_loss) > 1e-6 * fabs(e[1].val_loss))
        fail_msg("validation loss %.9g in batches of 2, %.9g in one batch of 7", e[0].val_loss, e[1].val_loss);
    assert_true(fabs(e[0].val_accuracy - e[1].val_accuracy) < 1e-12);
}

/* ---- memory: nothing duplicated, the budget holds both plans ------------------------ */

/* The validation plan has no params, gradients, optimizer state, running statistics
 * or constants of its own: it reads the training arena's (every param and statistic
 * is external there), and only one batch's inputs, activations, workspace and outputs
 * take its arena, whose measured high-water mark is its planned peak. */
static void test_params_not_duplicated(void **state) {
    (void)state;
    const char *cases[3] = {"resnet", "mobilenet", "tinygpt"};
    for (int k = 0; k < 3; k++) {
        char model[64];
        snprintf(model, sizeof model, "%s.onnx", cases[k]);
        ot_error err = {0};
        ot_model *m = load_model(model);
        ot_dataset d;
        load_sample_data(cases[k], &d);
        ot_train_options o;
        ot_train_options_default(&o);
        o.n_threads = 2;
        o.steps = 2;
        o.validation = true;
        ot_train_session *s = session(m, &d, &d, &o);
        const ot_plan *vp = ot_train_validation_plan(s), *tp = ot_train_plan(s);
        assert_non_null(vp); /* made with the session */
        const ot_mem_category none[5] = {OT_MEM_PARAMS, OT_MEM_GRADIENTS, OT_MEM_OPT_STATE, OT_MEM_STATE, OT_MEM_CONSTANTS};
        for (int c = 0; c < 5; c++) {
            assert_int_equal(vp->total[none[c]], 0);
            assert_int_equal(vp->at_peak[none[c]], 0);
            assert_int_equal(vp->slab_bytes[none[c]], 0);
        }
        const ot_autodiff_result *ad = ot_train_autodiff(s);
        for (int i = 0; i < ad->n_params; i++) assert_true(vp->values[ad->params[i]].external);
        for (int i = 0; i < ad->n_state; i++) assert_true(vp->values[ad->state_values[i]].external);
        assert_true(vp->external_bytes >= tp->total[OT_MEM_PARAMS] + tp->total[OT_MEM_STATE]);
        assert_int_equal(vp->pinned_bytes, vp->slab_bytes[OT_MEM_IO]); /* the batch and the loss/output only */
        ot_train_memory_summary ms;
        ot_train_memory_info(s, &ms);
        assert_int_equal(ms.val_peak, ot_plan_peak_bytes(vp));
        ot_train_result r;
        if (ot_train_run(s, &d, &d, NULL, &r, &err) != OT_OK) fail_msg("%s: %s", cases[k], err.msg);
        assert_int_equal(r.val_planned_peak, ot_plan_peak_bytes(vp));
        assert_int_equal(r.val_measured_peak, r.val_planned_peak);
        assert_int_equal(r.measured_peak, r.planned_peak);
        printf("%s: validation arena %zu bytes; reads %zu bytes of the training arena in place (params %zu, state %zu)\n",
               cases[k], r.val_planned_peak, vp->external_bytes, tp->total[OT_MEM_PARAMS], tp->total[OT_MEM_STATE]);
        ot_train_result_free(&r);
        ot_train_session_free(s);
        ot_dataset_free(&d);
        ot_model_free(m);
    }
}

/* A tinygpt session (batch 7, the CLI's default for its 7 samples) with `remat`,
 * `budget` and validation or not. Returns its status; *train_peak and *val_peak when
 * it was built, err->msg otherwise. */
static ot_status budget_session_opt(const char *remat, int64_t budget, bool with_val, ot_optim_kind opt,
                                    int64_t *train_peak, int64_t *val_peak, ot_error *err) {
    ot_model *m = load_model("tinygpt.onnx");
    ot_dataset d;
    load_sample_data("tinygpt", &d);
    ot_train_options o;
    ot_train_options_default(&o);
    o.n_threads = 2;
    o.remat = remat;
    o.memory_budget = budget;
    o.validation = with_val;
    ot_optim_config_default(&o.optim, opt);
    ot_train_session *s = NULL;
    ot_status st = ot_train_session_new(m, &o, &d, true, &s, err);
    if (!st) {
        ot_train_memory_summary ms;
        ot_train_memory_info(s, &ms);
        assert_int_equal(ms.train_peak, ot_plan_peak_bytes(ot_train_plan(s)));
        const ot_train_remat_summary *rs = ot_train_remat_info(s);
        if (rs->applied) assert_int_equal(rs->peak, ms.train_peak); /* remat measured exactly what runs */
        assert_int_equal(ms.budget, budget);
        assert_true(ms.val_in_budget == (with_val && budget > 0));
        *train_peak = ms.train_peak;
        *val_peak = ms.val_peak;
    }
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
    return st;
}

static ot_status budget_session(const char *remat, int64_t budget, bool with_val, int64_t *train_peak,
                                int64_t *val_peak, ot_error *err) {
    return budget_session_opt(remat, budget, with_val, OT_OPTIM_SGD, train_peak, val_peak, err);
}

static void test_budget_covers_validation(void **state) {
    (void)state;
    ot_error err = {0};
    int64_t p_none, p_all, v, t, v2, unused;
    if (budget_session("none", 0, true, &p_none, &v, &err)) fail_msg("%s", err.msg);
    if (budget_session("all", 0, false, &p_all, &unused, &err)) fail_msg("%s", err.msg);
    assert_true(v > 0 && p_all + v < p_none); /* room for the cases below */

    /* b1 holds the plain step alone, not with validation: auto must recompute more */
    int64_t b1 = p_none + v / 2;
    if (budget_session("auto", b1, false, &t, &unused, &err)) fail_msg("%s", err.msg);
    assert_int_equal(t, p_none);
    if (budget_session("auto", b1, true, &t, &v2, &err)) fail_msg("%s", err.msg);
    assert_int_equal(v2, v);
    assert_true(t + v <= b1);
    assert_true(t < p_none);
    printf("tinygpt --remat auto --memory-budget %lld: training step %lld bytes alone, %lld + validation %lld with it\n",
           (long long)b1, (long long)p_none, (long long)t, (long long)v);

    /* with Adam's two state values per param, still exact */
    int64_t p_adam;
    if (budget_session_opt("none", 0, true, OT_OPTIM_ADAM, &p_adam, &v2, &err)) fail_msg("%s", err.msg);
    if (budget_session_opt("auto", p_adam + v / 2, true, OT_OPTIM_ADAM, &t, &v2, &err)) fail_msg("%s", err.msg);
    assert_true(t + v <= p_adam + v / 2);

    /* b2 holds the least-memory step, but not with validation */
    int64_t b2 = p_all + v / 2;
    if (budget_session("auto", b2, false, &t, &unused, &err)) fail_msg("%s", err.msg);
    assert_true(t <= b2);
    assert_int_equal(budget_session("auto", b2, true, &t, &unused, &err), OT_E_MEMORY);
    char want[64];
    snprintf(want, sizeof want, "the validation plan needs %lld bytes", (long long)v);
    if (!strstr(err.msg, want) || !strstr(err.msg, "cannot hold a training step and validation"))
        fail_msg("unexpected message: %s", err.msg);
    snprintf(want, sizeof want, "%lld bytes", (long long)(p_all + v));
    if (!strstr(err.msg, want)) fail_msg("the message does not state the least total %s: %s", want, err.msg);

    /* a budget below the validation plan itself */
    assert_int_equal(budget_session("auto", v / 2, true, &t, &unused, &err), OT_E_MEMORY);
    if (!strstr(err.msg, "cannot even hold the validation plan")) fail_msg("unexpected message: %s", err.msg);

    /* a fixed policy's check counts validation too */
    if (budget_session("none", b1, false, &t, &unused, &err)) fail_msg("%s", err.msg);
    assert_int_equal(budget_session("none", b1, true, &t, &unused, &err), OT_E_MEMORY);
    snprintf(want, sizeof want, "and validation %lld bytes", (long long)v);
    if (!strstr(err.msg, want)) fail_msg("unexpected message: %s", err.msg);

    /* the CLI: the summary says what the budget held; exit 9 when it cannot */
    const char *data = "--input '" SAMPLES "tinygpt/input.npy' --labels '" SAMPLES "tinygpt/labels.npy' --val-input '" SAMPLES
                       "tinygpt/input.npy' --val-labels '" SAMPLES "tinygpt/labels.npy'";
    int rc = run_cli("'%s' train '%stinygpt.onnx' %s --steps 1 --threads 2 --remat auto --memory-budget %lld -o '%s/tuned.onnx'",
                     BIN, SAMPLES, data, (long long)b1, TMP);
    if (rc) fail_msg("train exited %d", rc);
    cli_expect_in(TMP "/out.txt", "(--memory-budget) holds the training step");
    cli_expect_in(TMP "/out.txt", "+ validation");
    rc = run_cli("'%s' train '%stinygpt.onnx' %s --steps 1 --threads 2 --remat auto --memory-budget %lld -o '%s/tuned.onnx'",
                 BIN, SAMPLES, data, (long long)b2, TMP);
    assert_int_equal(rc, 9);
    cli_expect_in(TMP "/out.txt", "cannot hold a training step and validation");
    remove(TMP "/tuned.onnx");
}

/* ---- the CUDA backend ---------------------------------------------------------------- */

/* Validation before and after two steps on `device`; *after is NAN without training. */
static void val_on(const char *device, const char *model, const char *dir, uint64_t seed, double *before, double *after) {
    ot_error err = {0};
    ot_model *m = load_model(model);
    ot_dataset d;
    load_sample_data(dir, &d);
    ot_train_options o;
    ot_train_options_default(&o);
    o.n_threads = 2;
    o.device = device;
    o.seed = seed;
    o.steps = 2;
    o.batch_size = strcmp(dir, "resnet") ? 7 : 8;
    ot_train_session *s = session(m, &d, &d, &o);
    *before = validate(s, &d).val_loss;
    ot_train_result r;
    if (ot_train_run(s, &d, &d, NULL, &r, &err) != OT_OK) fail_msg("%s: %s", device, err.msg);
    *after = r.epochs[r.n_epochs - 1].val_loss;
    ot_train_result_free(&r);
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* The same validation on the GPU, through the same executor API: equal to the CPU's
 * within 1e-4 relative, before and after training; Dropout off there too. */
static void test_cuda_matches_cpu(void **state) {
    (void)state;
    char reason[512];
    if (!ot_cuda_available(reason, sizeof reason)) {
        printf("no CUDA GPU found (%s): skipping\n", reason);
        skip();
    }
    const char *cases[2][2] = {{"resnet.onnx", "resnet"}, {"tinygpt.onnx", "tinygpt"}};
    for (int k = 0; k < 2; k++) {
        double cb, ca, gb, ga, gb2, ga2;
        val_on("cpu", cases[k][0], cases[k][1], 3, &cb, &ca);
        val_on("cuda", cases[k][0], cases[k][1], 3, &gb, &ga);
        printf("%s validation loss before/after 2 steps: cpu %.7f / %.7f, cuda %.7f / %.7f\n", cases[k][0], cb, ca, gb, ga);
        if (fabs(gb - cb) > 1e-4 * fabs(cb) || fabs(ga - ca) > 1e-4 * fabs(ca))
            fail_msg("%s: cuda validation differs from the cpu's", cases[k][0]);
        val_on("cuda", cases[k][0], cases[k][1], 77, &gb2, &ga2);
        assert_memory_equal(&gb, &gb2, sizeof gb); /* before training: no seed dependence */
    }
}

/* ---- the CLI ----------------------------------------------------------------------- */

/* `onnxtrain eval`: inference mode by default (PyTorch's eval-mode logits), the model's
 * own training mode with --train-mode (PyTorch's train-mode fixture); help says so. */
static void test_eval_cli_modes(void **state) {
    (void)state;
    const char *modes[2] = {"", "--train-mode"};
    const char *want[2] = {FIXTURES "resnet_eval_logits.npy", SAMPLES "resnet/output_b8.npy"};
    for (int k = 0; k < 2; k++) {
        int rc = run_cli("'%s' eval '%sresnet.onnx' --input '%sresnet/input.npy' %s --dump-outputs '%s/dump%d'", BIN,
                         SAMPLES, SAMPLES, modes[k], TMP, k);
        if (rc) fail_msg("eval exited %d", rc);
        cli_expect_in(TMP "/out.txt", k ? "train mode" : "inference mode");
        char path[1024];
        snprintf(path, sizeof path, "%s/dump%d/logits.npy", TMP, k);
        ot_tensor *got = read_npy(path), *ref = read_npy(want[k]);
        assert_int_equal(got->nbytes, ref->nbytes);
        double e = rel_l2(got->data, ref->data, ot_shape_numel(&ref->shape));
        if (e > 1e-5) fail_msg("eval %s: logits differ from %s: relative L2 %.3g", modes[k], want[k], e);
        ot_tensor_free(got);
        ot_tensor_free(ref);
    }
    assert_int_equal(run_cli("'%s' eval --help", BIN), 0);
    cli_expect_in(TMP "/out.txt", "--train-mode");
    cli_expect_in(TMP "/out.txt", "model.eval()");
}

/* `onnxtrain train` with validation data prints the validation plan's memory and the
 * validation results; its help says validation runs in inference mode. */
static void test_train_cli_validation(void **state) {
    (void)state;
    int rc = run_cli("'%s' train '%sresnet.onnx' --input '%sresnet/input.npy' --labels '%sresnet/labels.npy' "
                     "--val-input '%sresnet/input.npy' --val-labels '%sresnet/labels.npy' --epochs 2 --threads 2 "
                     "-o '%s/tuned.onnx'",
                     BIN, SAMPLES, SAMPLES, SAMPLES, SAMPLES, SAMPLES, TMP);
    if (rc) fail_msg("train exited %d", rc);
    cli_expect_in(TMP "/out.txt", "validation plan (forward only, inference mode)");
    cli_expect_in(TMP "/out.txt", "epoch 2 (step 2): val loss");
    assert_int_equal(run_cli("'%s' train --help", BIN), 0);
    cli_expect_in(TMP "/out.txt", "inference mode");
    remove(TMP "/tuned.onnx");
}

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0777);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet_matches_pytorch_eval), cmocka_unit_test(test_mobilenet_matches_pytorch_eval),
        cmocka_unit_test(test_after_training_equals_tuned_model), cmocka_unit_test(test_tinygpt_dropout_off),
        cmocka_unit_test(test_validation_changes_nothing),   cmocka_unit_test(test_params_not_duplicated),
        cmocka_unit_test(test_partial_batch_validated),
        cmocka_unit_test(test_budget_covers_validation),     cmocka_unit_test(test_eval_cli_modes),
        cmocka_unit_test(test_train_cli_validation), cmocka_unit_test(test_cuda_matches_cpu),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
