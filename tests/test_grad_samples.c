/* test_grad_samples.c — one training step's gradients of every exported sample that
 * has PyTorch gradients (samples/NAME/grads/index.json) against them, built from the
 * library's parts directly (importer, ot_loss_build cross-entropy, ot_autodiff_build,
 * executor) rather than through train/train.c, so a fault in a gradient rule, a
 * backward kernel or the planner is caught whatever the training loop does:
 *   - the loss within 1e-5 relative of ref_loss.npy,
 *   - every parameter gradient within 1e-4 relative L2 of PyTorch's, with the
 *     executor (in-place reuse on and off) and with the test-only reference
 *     evaluator (tests/helpers/ref_eval: no planner, no arena),
 *   - the BatchNorm running statistics after the step (state_updates) within 1e-5
 *     relative L2 of samples/NAME/state/ (PyTorch's unbiased running_var).
 * tinygpt is compared through tinygpt_nodrop.onnx (samples/README.md). The relative
 * error's denominator is floored at 1e-3 x the sample's largest gradient norm: a
 * BatchNorm scale feeding a conv + training-mode BatchNorm (mobilenet's bn.weight,
 * block1.bn2.weight) has a gradient that is zero in exact arithmetic, so both
 * PyTorch's and ours are float32 rounding noise (~1e-8 absolute). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autodiff/autodiff.h"
#include "importer/importer.h"
#include "ref_eval.h"
#include "exec/executor.h"
#include "train/npy.h"
#include "test_files.h"
#include "kernels/kernel.h"

#define SAMPLES OT_SOURCE_DIR "/samples/"
#define LOSS_TOL 1e-5
#define GRAD_TOL 1e-4
#define STATE_TOL 1e-5

typedef enum run_mode { RUN_EXEC = 0, RUN_EXEC_NO_INPLACE, RUN_REF_EVAL, RUN_MODES } run_mode;
static const char *const mode_name[RUN_MODES] = {"executor", "executor no_inplace", "ref_eval"};

/* The file a fixture index (grads/index.json, state/index.json) gives for a key;
 * false when the index or the key is absent. */
static bool fixture_file(const char *dir, const char *index, const char *key, char *out, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, SAMPLES "%s/%s", dir, index);
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    static char buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    char pat[600];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    char *p = strstr(buf, pat);
    if (!p) return false;
    p = strchr(p + strlen(pat), '"');
    char *e = p ? strchr(p + 1, '"') : NULL;
    if (!p || !e || (size_t)(e - p) >= n) return false;
    memcpy(out, p + 1, (size_t)(e - p - 1));
    out[e - p - 1] = 0;
    return true;
}

static int index_entries(const char *dir, const char *index) {
    char path[1024];
    snprintf(path, sizeof path, SAMPLES "%s/%s", dir, index);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int entries = 0, ch, prev = 0;
    while ((ch = fgetc(f)) != EOF) {
        if (prev == '"' && ch == ':') entries++;
        prev = ch;
    }
    fclose(f);
    return entries;
}

static ot_tensor *read_npy(const char *dir, const char *file) { return test_npy(SAMPLES "%s/%s", dir, file); }

static double l2(const float *a, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * a[i];
    return sqrt(s);
}

static double l2_diff(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return isnan(s) ? INFINITY : sqrt(s);
}

/* The host copy of a value after a run, from the executor or the reference evaluator. */
typedef struct runner {
    ot_executor *ex;
    ot_ref_env *ref;
    const ot_graph *g;
} runner;

static const float *value_f32(runner *r, int v, ot_tensor **hold) {
    *hold = NULL;
    if (r->ref) return ot_ref_f32(r->ref, v);
    ot_error err = {0};
    if (ot_executor_get(r->ex, v, hold, &err) != OT_OK) fail_msg("%s", err.msg);
    return (*hold)->data;
}

/* One step of sample (model, dir) in the given mode; returns the number of failures
 * and prints one line per failing comparison. */
static int check_one(const char *model, const char *dir, run_mode mode) {
    ot_error err = {0};
    char path[1024];
    snprintf(path, sizeof path, SAMPLES "%s", model);
    ot_model *m = NULL;
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    if (ot_model_load(path, &io, &m, &err) != OT_OK) fail_msg("%s: %s", model, err.msg);
    ot_graph *g = m->graph;
    ot_tensor *x = read_npy(dir, "input.npy"), *labels = read_npy(dir, "labels.npy");
    int64_t B = x->shape.dim[0];
    assert_int_equal(g->n_inputs, 1);
    const ot_value *in0 = &g->values[g->inputs[0]];
    if (in0->shape.rank >= 1 && in0->shape.dim[0] < 0 && in0->shape.sym[0] >= 0) {
        if (ot_graph_bind_dim(g, g->syms[in0->shape.sym[0]], B, &err) != OT_OK) fail_msg("%s: %s", model, err.msg);
    } else if (in0->shape.dim[0] != B) {
        fail_msg("%s: fixture batch %lld, model batch %lld", model, (long long)B, (long long)in0->shape.dim[0]);
    }
    int x_value = g->inputs[0];

    ot_loss_options lo = {.kind = OT_LOSS_CROSS_ENTROPY, .class_axis = -1};
    int loss = -1;
    if (ot_loss_build(g, &lo, &loss, &err) != OT_OK) fail_msg("%s: %s", model, err.msg);
    int label_value = g->inputs[g->n_inputs - 1];
    ot_autodiff_options ao = {.loss_value = loss};
    ot_autodiff_result ad = {0};
    if (ot_autodiff_build(g, &ao, &ad, &err) != OT_OK) fail_msg("%s: %s", model, err.msg);
    g->values[loss].is_graph_output = true;
    if (ot_graph_require_static(g, &err) != OT_OK) fail_msg("%s: %s", model, err.msg);

    runner r = {.g = g};
    ot_backend *be = NULL;
    if (mode == RUN_REF_EVAL) {
        r.ref = ot_ref_new(g);
        assert_non_null(r.ref);
        if (ot_ref_feed(r.ref, x_value, x->data, x->nbytes, &err) || ot_ref_feed(r.ref, label_value, labels->data,
                                                                                  labels->nbytes, &err) ||
            ot_ref_run(r.ref, false, &err))
            fail_msg("%s (%s): %s", model, mode_name[mode], err.msg);
    } else {
        if (!(be = ot_backend_cpu_new(2, &err))) fail_msg("%s", err.msg);
        ot_exec_options eo = {.n_threads = 2, .no_inplace = mode == RUN_EXEC_NO_INPLACE};
        if (ot_executor_new(g, be, &eo, &r.ex, &err) || ot_executor_set_input(r.ex, x_value, x, &err) ||
            ot_executor_set_input(r.ex, label_value, labels, &err) || ot_executor_run(r.ex, &err))
            fail_msg("%s (%s): %s", model, mode_name[mode], err.msg);
    }

    int failures = 0;
    ot_tensor *hold = NULL;
    double got_loss = value_f32(&r, loss, &hold)[0];
    ot_tensor_free(hold);
    ot_tensor *ref_loss = read_npy(dir, "ref_loss.npy");
    double want_loss = ((float *)ref_loss->data)[0];
    ot_tensor_free(ref_loss);
    if (!(fabs(got_loss - want_loss) <= LOSS_TOL * fabs(want_loss))) {
        print_error("%s (%s): loss %.9g, PyTorch %.9g\n", model, mode_name[mode], got_loss, want_loss);
        failures++;
    }

    /* gradients: every trained param has a PyTorch gradient and vice versa */
    int entries = index_entries(dir, "grads/index.json");
    if (entries != ad.n_params) {
        print_error("%s: PyTorch has %d params, onnxtrain trains %d\n", model, entries, ad.n_params);
        failures++;
    }
    ot_tensor **want = calloc((size_t)ad.n_params + 1, sizeof *want);
    double max_norm = 0;
    for (int i = 0; i < ad.n_params; i++) {
        const char *name = g->values[ad.params[i]].name;
        char file[700];
        if (!fixture_file(dir, "grads/index.json", name, file, sizeof file))
            fail_msg("%s: param '%s' is trained but has no PyTorch gradient", model, name);
        want[i] = read_npy(dir, file);
        max_norm = fmax(max_norm, l2(want[i]->data, ot_shape_numel(&want[i]->shape)));
    }
    for (int i = 0; i < ad.n_params; i++) {
        const char *name = g->values[ad.params[i]].name;
        int64_t n = ot_shape_numel(&want[i]->shape);
        if (ot_shape_numel(&g->values[ad.grads[i]].shape) != n) {
            print_error("%s: gradient of '%s' has the wrong size\n", model, name);
            failures++;
            continue;
        }
        const float *got = value_f32(&r, ad.grads[i], &hold);
        double e = l2_diff(got, want[i]->data, n) / fmax(l2(want[i]->data, n), 1e-3 * max_norm);
        ot_tensor_free(hold);
        if (!(e <= GRAD_TOL)) {
            print_error("%s (%s): gradient of '%s' differs from PyTorch's: relative L2 %.3g (limit %g)\n", model,
                        mode_name[mode], name, e, GRAD_TOL);
            failures++;
        }
    }
    for (int i = 0; i < ad.n_params; i++) ot_tensor_free(want[i]);
    free(want);

    /* BatchNorm running statistics after the step */
    int n_state = 0;
    for (int i = 0; i < ad.n_state; i++) {
        const char *name = g->values[ad.state_values[i]].name;
        char file[700];
        if (!fixture_file(dir, "state/index.json", name, file, sizeof file)) {
            if (index_entries(dir, "state/index.json") >= 0) {
                print_error("%s: state '%s' has no PyTorch fixture\n", model, name);
                failures++;
            }
            continue;
        }
        ot_tensor *ws = read_npy(dir, file);
        int64_t n = ot_shape_numel(&ws->shape);
        const float *got = value_f32(&r, ad.state_updates[i], &hold);
        double e = l2_diff(got, ws->data, n) / fmax(l2(ws->data, n), 1e-30);
        ot_tensor_free(hold);
        ot_tensor_free(ws);
        n_state++;
        if (!(e <= STATE_TOL)) {
            print_error("%s (%s): running statistic '%s' after one step differs from PyTorch's: relative L2 %.3g\n",
                        model, mode_name[mode], name, e);
            failures++;
        }
    }
    int want_state = index_entries(dir, "state/index.json");
    if (want_state >= 0 && want_state != n_state) {
        print_error("%s: PyTorch has %d running statistics, onnxtrain updates %d\n", model, want_state, n_state);
        failures++;
    }

    ot_ref_free(r.ref);
    ot_executor_free(r.ex);
    ot_backend_free(be);
    ot_autodiff_result_free(&ad);
    ot_tensor_free(x);
    ot_tensor_free(labels);
    ot_model_free(m);
    return failures;
}

static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Every samples/NAME/grads/index.json: NAME_nodrop.onnx when it exists (its
 * fixtures are NAME's), else NAME.onnx. */
static void test_samples_grads_match_pytorch(void **state) {
    (void)state;
    glob_t gl;
    if (glob(SAMPLES "*/grads/index.json", 0, NULL, &gl) != 0 || gl.gl_pathc == 0)
        fail_msg("no samples/NAME/grads/index.json found: run samples/export_samples.py");
    int failures = 0, checked = 0;
    for (size_t k = 0; k < gl.gl_pathc; k++) {
        /* .../samples/NAME/grads/index.json -> NAME */
        char name[256], p[1024], model[300];
        const char *end = gl.gl_pathv[k] + strlen(gl.gl_pathv[k]) - strlen("/grads/index.json");
        const char *start = end;
        while (start > gl.gl_pathv[k] && start[-1] != '/') start--;
        snprintf(name, sizeof name, "%.*s", (int)(end - start), start);
        snprintf(model, sizeof model, "%s_nodrop.onnx", name);
        snprintf(p, sizeof p, SAMPLES "%s", model);
        if (!is_file(p)) snprintf(model, sizeof model, "%s.onnx", name);
        for (int mode = 0; mode < RUN_MODES; mode++) {
            int f = check_one(model, name, (run_mode)mode);
            printf("  %-22s %-20s %s\n", model, mode_name[mode], f ? "FAIL" : "ok");
            failures += f;
        }
        checked++;
    }
    globfree(&gl);
    if (checked == 0) fail_msg("no samples/NAME/grads/index.json found");
    if (failures) fail_msg("%d comparisons with PyTorch failed", failures);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples_grads_match_pytorch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
