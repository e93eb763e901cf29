/* test_device_scan.c — the training loop's device-side checks (ot_backend.scan_f32:
 * NaN scans of gradients and updated params, the gradient norm for clipping) give
 * bitwise the results of the host path. A GPU always takes the device path; here the
 * CPU backend is driven through it (ot_train_options.scan_on_device), so the loop's
 * logic is tested without a GPU. Also the overflow of an update (a huge --lr) is
 * reported with the same message either way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importer/importer.h"
#include "kernels/backend_select.h"
#include "train/train.h"
#include "test_files.h"

#define SAMPLES OT_SOURCE_DIR "/samples/"

typedef struct run_out {
    ot_train_result r;
    ot_status st;
    char msg[1024];
    float **params; /* final params, autodiff order */
    size_t *nbytes;
    int n_params;
} run_out;

static void load_data(const char *dir, ot_dataset *d) {
    ot_error err = {0};
    memset(d, 0, sizeof *d);
    if (ot_dataset_add(d, "", "input.npy", -1, test_npy(SAMPLES "%s/input.npy", dir), &err)) fail_msg("%s", err.msg);
    if (ot_dataset_add(d, OT_DATA_LABELS, "labels.npy", -1, test_npy(SAMPLES "%s/labels.npy", dir), &err))
        fail_msg("%s", err.msg);
}

static void train(const char *model, const char *dir, bool device, ot_optim_kind opt, double lr, double clip,
                  run_out *out) {
    ot_error err = {0};
    ot_model *m = test_model(SAMPLES "%s", model);
    ot_dataset d;
    load_data(dir, &d);
    ot_train_options o;
    ot_train_options_default(&o);
    o.record_grad_norm = true; /* compared below */
    o.n_threads = 2;
    o.batch_size = 0; /* the fixed batch, else all the samples (up to 32) */
    o.steps = 5;
    o.seed = 11;
    ot_optim_config_default(&o.optim, opt);
    o.optim.lr = lr;
    o.optim.clip_grad_norm = clip;
    o.scan_on_device = device;
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, &d, true, &s, &err)) fail_msg("%s: %s", model, err.msg);
    out->st = ot_train_run(s, &d, NULL, NULL, &out->r, &err);
    snprintf(out->msg, sizeof out->msg, "%s", out->st ? err.msg : "");
    const ot_autodiff_result *ad = ot_train_autodiff(s);
    out->n_params = ad->n_params;
    out->params = calloc((size_t)ad->n_params, sizeof *out->params);
    out->nbytes = calloc((size_t)ad->n_params, sizeof *out->nbytes);
    for (int i = 0; !out->st && i < ad->n_params; i++) {
        const ot_value *v = &m->graph->values[ad->params[i]];
        assert_non_null(v->data); /* ot_train_run copied the weights back */
        out->nbytes[i] = v->nbytes;
        out->params[i] = malloc(v->nbytes);
        memcpy(out->params[i], v->data, v->nbytes);
    }
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

static void run_free(run_out *o) {
    for (int i = 0; i < o->n_params; i++) free(o->params[i]);
    free(o->params);
    free(o->nbytes);
    ot_train_result_free(&o->r);
}

static void same(const char *model, const char *dir, ot_optim_kind opt, double lr, double clip) {
    run_out a = {0}, b = {0};
    train(model, dir, false, opt, lr, clip, &a);
    train(model, dir, true, opt, lr, clip, &b);
    if (a.st || b.st) fail_msg("%s: host path: %s; device path: %s", model, a.msg, b.msg);
    assert_int_equal(a.r.n_steps, b.r.n_steps);
    assert_memory_equal(a.r.loss, b.r.loss, sizeof(double) * (size_t)a.r.n_steps);
    for (int64_t k = 0; k < a.r.n_steps; k++) {
        assert_false(isnan(a.r.grad_norm[k])); /* the norm was computed on both paths */
        assert_memory_equal(&a.r.grad_norm[k], &b.r.grad_norm[k], sizeof(double));
    }
    for (int i = 0; i < a.n_params; i++) {
        assert_int_equal(a.nbytes[i], b.nbytes[i]);
        assert_memory_equal(a.params[i], b.params[i], a.nbytes[i]);
    }
    run_free(&a);
    run_free(&b);
}

static void test_same_results(void **state) {
    (void)state;
    same("mlp.onnx", "mlp", OT_OPTIM_SGD, 0.05, 0.5);            /* clipping active */
    same("resnet.onnx", "resnet", OT_OPTIM_ADAM, 0.003, 0.0);    /* BatchNorm state, Adam state scanned */
    same("tinygpt.onnx", "tinygpt", OT_OPTIM_ADAMW, 0.01, 1.0);  /* Dropout, 3-D gradients */
}

/* SGD with lr 1e30 overflows the params in the update: the same step, node, value and
 * index are named whether the param was scanned in place or on the "device". */
static void test_same_overflow_message(void **state) {
    (void)state;
    run_out a = {0}, b = {0};
    train("mlp.onnx", "mlp", false, OT_OPTIM_SGD, 1e30, 0.0, &a);
    train("mlp.onnx", "mlp", true, OT_OPTIM_SGD, 1e30, 0.0, &b);
    assert_int_equal(a.st, OT_E_NUMERICS);
    assert_int_equal(b.st, OT_E_NUMERICS);
    assert_string_equal(a.msg, b.msg);
    assert_non_null(strstr(a.msg, "non-finite"));
    run_free(&a);
    run_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_results),
        cmocka_unit_test(test_same_overflow_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
