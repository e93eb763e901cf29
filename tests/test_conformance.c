/* test_conformance.c — every exported sample (samples/NAME.onnx) against PyTorch's own
 * forward outputs (samples/NAME/output_b<N>.npy, written by samples/export_samples.py):
 * load, bind the batch dim to N, plan, run on the CPU backend, and require
 *   - every compared output within 1e-5 relative L2 error of PyTorch's,
 *   - the measured arena high-water mark == the planned peak,
 *   - the same bits with in-place reuse switched off (kernels are alias-safe).
 * Dropout: the references were computed with dropout off (meta.json
 * "reference_dropout": 0, see samples/README.md), so Dropout nodes run in inference
 * mode (identity) here; `NAME_nodrop.onnx` (ratio 0) is compared with NAME/'s
 * fixtures as the README says. Failures are collected and reported per sample and
 * batch size; nothing is skipped silently. */
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
#include <sys/wait.h>
#include <unistd.h>

#include "autodiff/autodiff.h"
#include "importer/importer.h"
#include "ref_eval.h"
#include "exec/executor.h"
#include "train/npy.h"
#include "kernels/kernel.h"

#define REL_TOL 1e-5

typedef struct report {
    char text[16384];
    size_t len;
    int failures, compared;
} report;

static void note(report *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->text + r->len, sizeof r->text - r->len, fmt, ap);
    va_end(ap);
    if (n > 0) r->len += (size_t)n < sizeof r->text - r->len ? (size_t)n : sizeof r->text - r->len - 1;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* The string value of "key" in a flat JSON object (meta.json), or "" if absent. */
static void json_string(const char *json, const char *key, char *out, size_t n) {
    out[0] = 0;
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = json ? strstr(json, pat) : NULL;
    if (!p) return;
    p = strchr(p + strlen(pat), ':');
    if (!p) return;
    p = strchr(p, '"');
    if (!p) return;
    const char *e = strchr(p + 1, '"');
    if (!e || (size_t)(e - p) > n) return;
    memcpy(out, p + 1, (size_t)(e - p - 1));
    out[e - p - 1] = 0;
}

static double json_number(const char *json, const char *key, double dflt) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = json ? strstr(json, pat) : NULL;
    if (!p || !(p = strchr(p + strlen(pat), ':'))) return dflt;
    return strtod(p + 1, NULL);
}

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Relative L2 error in double precision; shapes must agree. */
static double rel_l2(const ot_tensor *got, const ot_tensor *want) {
    const float *a = got->data, *b = want->data;
    int64_t n = ot_shape_numel(&want->shape);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    if (isnan(num)) return INFINITY;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Loads the model bound to batch n, runs it on rows [0, n) of the inputs, returns the
 * compared output. Everything that goes wrong is reported as a string. */
static ot_status run_once(const char *model, const char *fixdir, const char *out_name, int64_t n, bool no_inplace,
                          ot_tensor **result, size_t *peak, size_t *high_water, ot_error *err) {
    ot_status st;
    ot_model *m = NULL;
    ot_backend *be = NULL;
    ot_executor *ex = NULL;
    ot_tensor *data = NULL;
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    *result = NULL;
    if ((st = ot_model_load(model, &io, &m, err))) goto fail;
    ot_graph *g = m->graph;
    if (g->n_inputs < 1) {
        st = ot_fail(err, OT_E_MODEL, "no graph inputs");
        goto fail;
    }
    /* Bind the batch: axis 0 of the first input. */
    const ot_value *v0 = &g->values[g->inputs[0]];
    if (v0->shape.rank >= 1 && v0->shape.dim[0] < 0 && v0->shape.sym[0] >= 0) {
        if ((st = ot_graph_bind_dim(g, g->syms[v0->shape.sym[0]], n, err))) goto fail;
    } else if (v0->shape.rank < 1 || v0->shape.dim[0] != n) {
        st = ot_fail(err, OT_E_SHAPE, "fixture batch %lld but the model's batch dim is fixed or unknown", (long long)n);
        goto fail;
    }
    /* References were computed with dropout off: Dropout runs in inference mode. */
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].removed && g->nodes[i].op == OT_OP_DROPOUT)
            ot_node_set_attr_int(&g->nodes[i], "training_mode", 0);
    if ((st = ot_graph_require_static(g, err))) goto fail;
    if (!(be = ot_backend_cpu_new(2, err))) {
        st = err->code;
        goto fail;
    }
    ot_exec_options eo = {.n_threads = 2, .no_inplace = no_inplace};
    if ((st = ot_executor_new(g, be, &eo, &ex, err))) goto fail;
    for (int k = 0; k < g->n_inputs; k++) {
        const char *iname = g->values[g->inputs[k]].name;
        char path[1200];
        snprintf(path, sizeof path, "%s/input_%s.npy", fixdir, iname);
        if (access(path, R_OK) != 0) {
            if (g->n_inputs > 1) {
                st = ot_fail(err, OT_E_IO, "no fixture %s for input '%s'", path, iname);
                goto fail;
            }
            snprintf(path, sizeof path, "%s/input.npy", fixdir);
        }
        if ((st = ot_npy_read(path, &data, err))) goto fail;
        if (data->shape.rank < 1 || data->shape.dim[0] < n) {
            st = ot_fail(err, OT_E_DATA, "%s holds fewer than %lld samples", path, (long long)n);
            goto fail;
        }
        ot_tensor view = *data;
        view.shape.dim[0] = n;
        view.nbytes = data->nbytes / (size_t)data->shape.dim[0] * (size_t)n;
        if ((st = ot_executor_set_input(ex, g->inputs[k], &view, err))) goto fail;
        ot_tensor_free(data);
        data = NULL;
    }
    if ((st = ot_executor_run(ex, err))) goto fail;
    int ov = out_name[0] ? ot_graph_find_value(g, out_name) : -1;
    if (ov < 0) ov = g->outputs[0];
    if ((st = ot_executor_get(ex, ov, result, err))) goto fail;
    *peak = ot_plan_peak_bytes(ot_executor_plan(ex));
    *high_water = ot_executor_high_water(ex);
fail:
    ot_tensor_free(data);
    ot_executor_free(ex);
    ot_backend_free(be);
    ot_model_free(m);
    return st;
}

static void check_sample(const char *model, report *r) {
    char name[256], fixdir[1024], meta_path[1100], out_name[128];
    const char *slash = strrchr(model, '/');
    snprintf(name, sizeof name, "%s", slash ? slash + 1 : model);
    name[strlen(name) - 5] = 0; /* ".onnx" */
    snprintf(fixdir, sizeof fixdir, "%s/samples/%s", OT_SOURCE_DIR, name);
    if (!is_dir(fixdir)) {
        /* NAME_nodrop shares NAME's fixtures (samples/README.md). */
        char *suf = strstr(name, "_nodrop");
        if (suf && !suf[7]) snprintf(fixdir, sizeof fixdir, "%s/samples/%.*s", OT_SOURCE_DIR, (int)(suf - name), name);
        if (!is_dir(fixdir)) {
            note(r, "  %-16s no fixture folder: not compared\n", name);
            return;
        }
    }
    snprintf(meta_path, sizeof meta_path, "%s/meta.json", fixdir);
    char *meta = slurp(meta_path);
    json_string(meta, "output", out_name, sizeof out_name);
    double ref_dropout = json_number(meta, "reference_dropout", 0.0);
    free(meta);
    if (ref_dropout != 0.0) {
        r->failures++;
        note(r, "  %-16s FAIL: references computed with dropout %g; only dropout-off references are comparable\n", name,
             ref_dropout);
        return;
    }
    char pat[1100];
    snprintf(pat, sizeof pat, "%s/output_b*.npy", fixdir);
    glob_t gl;
    if (glob(pat, 0, NULL, &gl) != 0 || gl.gl_pathc == 0) {
        r->failures++;
        note(r, "  %-16s FAIL: no output_b<N>.npy fixture in %s\n", name, fixdir);
        return;
    }
    for (size_t i = 0; i < gl.gl_pathc; i++) {
        const char *f = strrchr(gl.gl_pathv[i], '/') + 1;
        long long n = strtoll(f + strlen("output_b"), NULL, 10);
        ot_error err = {0};
        ot_tensor *want = NULL, *got = NULL, *got2 = NULL;
        size_t peak = 0, hw = 0, peak2 = 0, hw2 = 0;
        ot_status st = ot_npy_read(gl.gl_pathv[i], &want, &err);
        if (!st) st = run_once(model, fixdir, out_name, n, false, &got, &peak, &hw, &err);
        if (st) {
            r->failures++;
            note(r, "  %-16s b=%-3lld FAIL: %s\n", name, n, err.msg);
        } else if (!ot_shape_equal(&got->shape, &want->shape) || got->dtype != OT_F32 || want->dtype != OT_F32) {
            char a[96], b[96];
            r->failures++;
            note(r, "  %-16s b=%-3lld FAIL: output %s %s, PyTorch %s %s\n", name, n, ot_dtype_name(got->dtype),
                 ot_shape_str(NULL, &got->shape, a, sizeof a), ot_dtype_name(want->dtype),
                 ot_shape_str(NULL, &want->shape, b, sizeof b));
        } else {
            double e = rel_l2(got, want);
            st = run_once(model, fixdir, out_name, n, true, &got2, &peak2, &hw2, &err);
            bool same_bits = !st && got2->nbytes == got->nbytes && !memcmp(got2->data, got->data, got->nbytes);
            bool ok = e <= REL_TOL && hw == peak && hw2 == peak2 && same_bits;
            r->compared++;
            if (!ok) r->failures++;
            note(r, "  %-16s b=%-3lld %s rel L2 %.2e (tol %.0e), peak %zu, high-water %zu, no-inplace peak %zu%s%s\n", name,
                 n, ok ? "ok  " : "FAIL", e, REL_TOL, peak, hw, peak2,
                 same_bits ? "" : ", in-place and no-in-place runs differ",
                 st ? err.msg : "");
        }
        ot_tensor_free(want);
        ot_tensor_free(got);
        ot_tensor_free(got2);
    }
    globfree(&gl);
}

static void test_samples_match_pytorch(void **state) {
    (void)state;
    static report r; /* large: keep it off the stack */
    memset(&r, 0, sizeof r);
    char pat[1024];
    snprintf(pat, sizeof pat, "%s/samples/*.onnx", OT_SOURCE_DIR);
    glob_t gl;
    if (glob(pat, 0, NULL, &gl) != 0 || gl.gl_pathc == 0) fail_msg("no samples matching %s: run samples/export_samples.py", pat);
    for (size_t i = 0; i < gl.gl_pathc; i++) check_sample(gl.gl_pathv[i], &r);
    globfree(&gl);
    /* cmocka's print_message truncates long text: print the table directly. */
    printf("conformance against PyTorch (%d comparisons):\n", r.compared);
    fputs(r.text, stdout);
    fflush(stdout);
    if (r.failures) fail_msg("%d conformance failure(s):\n%s", r.failures, r.text);
    assert_true(r.compared > 0);
}

/* ---- training graphs: the planned executor vs the unplanned reference ------------- */

/* A training step (forward + cross-entropy + backward) of every sample through the
 * executor — arena, best fit, in place, kept activations — must give bitwise the loss
 * and gradients of tests/helpers/ref_eval (one malloc per value, no reuse), with
 * Dropout ON for tinygpt (both follow the rng_node contract), and high-water == peak. */
static void check_training(const char *name, int64_t batch, report *r) {
    char model[1100], path[1200];
    const char *fix = strncmp(name, "tinygpt", 7) ? name : "tinygpt";
    snprintf(model, sizeof model, "%s/samples/%s.onnx", OT_SOURCE_DIR, name);
    ot_error err = {0};
    ot_model *m = NULL;
    ot_backend *be = NULL;
    ot_executor *ex = NULL;
    ot_ref_env *re = NULL;
    ot_tensor *x = NULL, *y = NULL, *t = NULL;
    ot_autodiff_result ar = {0};
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    ot_status st = ot_model_load(model, &io, &m, &err);
    if (st) goto done;
    ot_graph *g = m->graph;
    const ot_value *v0 = &g->values[g->inputs[0]];
    if (v0->shape.dim[0] < 0 && (st = ot_graph_bind_dim(g, g->syms[v0->shape.sym[0]], batch, &err))) goto done;
    ot_loss_options lo = {.kind = OT_LOSS_CROSS_ENTROPY, .class_axis = -1};
    int loss = -1;
    if ((st = ot_loss_build(g, &lo, &loss, &err))) goto done;
    g->values[loss].is_graph_output = true;
    ot_autodiff_options ao = {.loss_value = loss};
    if ((st = ot_autodiff_build(g, &ao, &ar, &err))) goto done;
    if (!(be = ot_backend_cpu_new(2, &err))) {
        st = err.code;
        goto done;
    }
    ot_exec_options eo = {.n_threads = 2, .seed = 1234, .step = 3};
    if ((st = ot_executor_new(g, be, &eo, &ex, &err))) goto done;
    snprintf(path, sizeof path, "%s/samples/%s/input.npy", OT_SOURCE_DIR, fix);
    if ((st = ot_npy_read(path, &x, &err))) goto done;
    snprintf(path, sizeof path, "%s/samples/%s/labels.npy", OT_SOURCE_DIR, fix);
    if ((st = ot_npy_read(path, &y, &err))) goto done;
    x->nbytes = x->nbytes / (size_t)x->shape.dim[0] * (size_t)batch;
    x->shape.dim[0] = batch;
    y->nbytes = y->nbytes / (size_t)y->shape.dim[0] * (size_t)batch;
    y->shape.dim[0] = batch;
    int lab = ot_graph_find_value(g, "labels");
    if ((st = ot_executor_set_input(ex, g->inputs[0], x, &err)) || (st = ot_executor_set_input(ex, lab, y, &err)) ||
        (st = ot_executor_run(ex, &err)))
        goto done;
    re = ot_ref_new(g);
    re->seed = 1234;
    re->step = 3;
    if ((st = ot_ref_feed(re, g->inputs[0], x->data, x->nbytes, &err)) || (st = ot_ref_feed(re, lab, y->data, y->nbytes, &err)) ||
        (st = ot_ref_run(re, false, &err)))
        goto done;
    const ot_plan *p = ot_executor_plan(ex);
    int differ = 0;
    for (int i = -1; i < ar.n_params; i++) {
        int v = i < 0 ? loss : ar.grads[i];
        if ((st = ot_executor_get(ex, v, &t, &err))) goto done;
        const float *ref = ot_ref_f32(re, v);
        if (!ref || memcmp(ref, t->data, t->nbytes)) differ++;
        ot_tensor_free(t);
        t = NULL;
    }
    size_t hw = ot_executor_high_water(ex);
    bool ok = !differ && hw == ot_plan_peak_bytes(p) && p->total[OT_MEM_KEPT] > 0 && p->total[OT_MEM_GRADIENTS] > 0;
    r->compared++;
    if (!ok) r->failures++;
    note(r, "  %-16s b=%-3lld %s training step: %d of %d loss/grad tensors differ from ref_eval, peak %zu, high-water %zu, kept %zu\n",
         name, (long long)batch, ok ? "ok  " : "FAIL", differ, ar.n_params + 1, ot_plan_peak_bytes(p), hw,
         p->total[OT_MEM_KEPT]);
done:
    if (st) {
        r->failures++;
        note(r, "  %-16s b=%-3lld FAIL training step: %s\n", name, (long long)batch, err.msg);
    }
    ot_tensor_free(t);
    ot_tensor_free(x);
    ot_tensor_free(y);
    ot_ref_free(re);
    ot_executor_free(ex);
    ot_backend_free(be);
    ot_autodiff_result_free(&ar);
    ot_model_free(m);
}

static void test_training_graphs_match_reference(void **state) {
    (void)state;
    static report r;
    memset(&r, 0, sizeof r);
    check_training("mlp", 7, &r);
    check_training("chain48", 4, &r);
    check_training("resnet", 8, &r);
    check_training("mobilenet", 8, &r);
    check_training("tinygpt", 4, &r); /* Dropout 0.1 in training mode */
    printf("training step, executor vs reference evaluator:\n");
    fputs(r.text, stdout);
    fflush(stdout);
    if (r.failures) fail_msg("%d training-step failure(s):\n%s", r.failures, r.text);
}

/* ---- `onnxtrain eval` on the samples ------------------------------------------- */

/* Runs the CLI; returns its exit code and what it printed on stderr. */
static int run_cli(const char *args, char *errout, size_t n) {
    char cmd[10240], errfile[1024];
    snprintf(errfile, sizeof errfile, "%s/test_conformance_eval.err", OT_BINARY_DIR);
    snprintf(cmd, sizeof cmd, "'%s/onnxtrain' eval %s > /dev/null 2> '%s'", OT_BINARY_DIR, args, errfile);
    int rc = system(cmd);
    char *e = slurp(errfile);
    snprintf(errout, n, "%s", e ? e : "");
    free(e);
    remove(errfile);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void write_npy(const char *path, ot_dtype dt, int rank, const int64_t *dims) {
    ot_shape s = ot_shape_make(rank, dims);
    ot_tensor *t = ot_tensor_new(dt, &s);
    ot_error err = {0};
    if (ot_npy_write(path, t, &err)) fail_msg("%s", err.msg);
    ot_tensor_free(t);
}

/* Batches of 3 over 7 samples (3 + 3 + a partial batch of 1 on a second plan), dumped
 * and concatenated, equal PyTorch's logits of all 7 (mlp rows are independent). */
static void test_eval_cli_batches(void **state) {
    (void)state;
    char exe[1024], args[4096], errout[4096], dir[1024], path[1100];
    snprintf(exe, sizeof exe, "%s/onnxtrain", OT_BINARY_DIR);
    if (access(exe, X_OK) != 0) fail_msg("%s not built", exe);
    snprintf(dir, sizeof dir, "%s/test_conformance_dump", OT_BINARY_DIR);
    snprintf(args, sizeof args, "'%s/samples/mlp.onnx' --input '%s/samples/mlp/input.npy' --batch-size 3 --threads 2 --dump-outputs '%s'",
             OT_SOURCE_DIR, OT_SOURCE_DIR, dir);
    int rc = run_cli(args, errout, sizeof errout);
    if (rc != 0) fail_msg("eval exited %d: %s", rc, errout);
    snprintf(path, sizeof path, "%s/logits.npy", dir);
    ot_tensor *got = NULL, *want = NULL;
    ot_error err = {0};
    if (ot_npy_read(path, &got, &err)) fail_msg("%s", err.msg);
    snprintf(path, sizeof path, "%s/samples/mlp/output_b7.npy", OT_SOURCE_DIR);
    if (ot_npy_read(path, &want, &err)) fail_msg("%s", err.msg);
    assert_true(ot_shape_equal(&got->shape, &want->shape));
    assert_true(rel_l2(got, want) <= REL_TOL);
    ot_tensor_free(got);
    ot_tensor_free(want);
}

/* Bad data is refused before any work with the input named and the documented code. */
static void test_eval_cli_errors(void **state) {
    (void)state;
    char args[4096], errout[4096], f64[1024], narrow[1024], ok[1024], model[1024];
    snprintf(model, sizeof model, "%s/samples/mlp.onnx", OT_SOURCE_DIR);
    snprintf(f64, sizeof f64, "%s/test_conformance_f64.npy", OT_BINARY_DIR);
    snprintf(narrow, sizeof narrow, "%s/test_conformance_narrow.npy", OT_BINARY_DIR);
    snprintf(ok, sizeof ok, "%s/test_conformance_ok.npy", OT_BINARY_DIR);
    write_npy(f64, OT_F64, 2, (int64_t[]){5, 64});
    write_npy(narrow, OT_F32, 2, (int64_t[]){5, 63});
    write_npy(ok, OT_F32, 2, (int64_t[]){5, 64});

    snprintf(args, sizeof args, "'%s' --input '%s'", model, f64);
    assert_int_equal(run_cli(args, errout, sizeof errout), OT_E_DATA);
    assert_non_null(strstr(errout, "input 'x'"));
    assert_non_null(strstr(errout, "float64"));

    snprintf(args, sizeof args, "'%s' --input '%s'", model, narrow);
    assert_int_equal(run_cli(args, errout, sizeof errout), OT_E_DATA);
    assert_non_null(strstr(errout, "input 'x'"));
    assert_non_null(strstr(errout, "[5,63]"));

    snprintf(args, sizeof args, "'%s' --input nope='%s'", model, ok);
    assert_int_equal(run_cli(args, errout, sizeof errout), OT_E_USAGE);
    assert_non_null(strstr(errout, "'nope'"));

    /* resnet has a fixed batch of 8: 5 samples of the wrong shape, then --batch-size 4. */
    snprintf(args, sizeof args, "'%s/samples/resnet.onnx' --input '%s'", OT_SOURCE_DIR, ok);
    assert_int_equal(run_cli(args, errout, sizeof errout), OT_E_DATA);
    assert_non_null(strstr(errout, "input 'x'"));
    snprintf(args, sizeof args, "'%s/samples/resnet.onnx' --input '%s/samples/resnet/input.npy' --batch-size 4",
             OT_SOURCE_DIR, OT_SOURCE_DIR);
    assert_int_equal(run_cli(args, errout, sizeof errout), OT_E_USAGE);
    assert_non_null(strstr(errout, "fixed batch of 8"));

    snprintf(args, sizeof args, "'%s' --input '%s' --bind nosuchdim=3", model, ok);
    assert_int_equal(run_cli(args, errout, sizeof errout), OT_E_SHAPE);
    assert_non_null(strstr(errout, "nosuchdim"));

    snprintf(args, sizeof args, "'%s'", model);
    assert_int_equal(run_cli(args, errout, sizeof errout), OT_E_USAGE);
    remove(f64);
    remove(narrow);
    remove(ok);
}

/* Two named inputs (built with /usr/bin/python3's onnx, as the samples are): sample
 * counts must agree; a partial last batch feeds both inputs. */
static void test_eval_cli_two_inputs(void **state) {
    (void)state;
    char model[1024], cmd[4096], a[1024], b[1024], b4[1024], dir[1024], args[8192], errout[4096], path[1100];
    snprintf(model, sizeof model, "%s/test_conformance_add2.onnx", OT_BINARY_DIR);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import onnx; from onnx import helper as h, TensorProto as T; "
             "i=[h.make_tensor_value_info(n, T.FLOAT, ['n', 3]) for n in ('a', 'b')]; "
             "o=[h.make_tensor_value_info('y', T.FLOAT, ['n', 3])]; "
             "g=h.make_graph([h.make_node('Add', ['a', 'b'], ['y'])], 'add2', i, o); "
             "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 17)]), '%s')\"",
             model);
    if (system(cmd) != 0) fail_msg("could not build %s with /usr/bin/python3 (onnx)", model);
    snprintf(a, sizeof a, "%s/test_conformance_a.npy", OT_BINARY_DIR);
    snprintf(b, sizeof b, "%s/test_conformance_b.npy", OT_BINARY_DIR);
    snprintf(b4, sizeof b4, "%s/test_conformance_b4.npy", OT_BINARY_DIR);
    snprintf(dir, sizeof dir, "%s/test_conformance_dump2", OT_BINARY_DIR);
    int64_t d5[2] = {5, 3}, d4[2] = {4, 3};
    ot_shape s5 = ot_shape_make(2, d5);
    ot_tensor *ta = ot_tensor_new(OT_F32, &s5), *tb = ot_tensor_new(OT_F32, &s5);
    for (int i = 0; i < 15; i++) {
        ((float *)ta->data)[i] = (float)i;
        ((float *)tb->data)[i] = 100.0f * (float)i;
    }
    ot_error err = {0};
    assert_int_equal(ot_npy_write(a, ta, &err), OT_OK);
    assert_int_equal(ot_npy_write(b, tb, &err), OT_OK);
    write_npy(b4, OT_F32, 2, d4);

    snprintf(args, sizeof args, "'%s' --input b='%s' --input a='%s' --batch-size 2 --dump-outputs '%s'", model, b, a, dir);
    int rc = run_cli(args, errout, sizeof errout);
    if (rc) fail_msg("eval exited %d: %s", rc, errout);
    snprintf(path, sizeof path, "%s/y.npy", dir);
    ot_tensor *y = NULL;
    assert_int_equal(ot_npy_read(path, &y, &err), OT_OK);
    assert_int_equal(y->shape.dim[0], 5);
    for (int i = 0; i < 15; i++) assert_float_equal(((float *)y->data)[i], 101.0f * (float)i, 0);

    snprintf(args, sizeof args, "'%s' --input a='%s' --input b='%s'", model, a, b4);
    assert_int_equal(run_cli(args, errout, sizeof errout), OT_E_DATA);
    assert_non_null(strstr(errout, "sample counts differ"));
    assert_non_null(strstr(errout, "'b'"));
    snprintf(args, sizeof args, "'%s' --input a='%s'", model, a);
    assert_int_equal(run_cli(args, errout, sizeof errout), OT_E_USAGE);
    assert_non_null(strstr(errout, "no data for input 'b'"));
    ot_tensor_free(ta);
    ot_tensor_free(tb);
    ot_tensor_free(y);
    remove(a);
    remove(b);
    remove(b4);
    remove(model);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_samples_match_pytorch),
                                       cmocka_unit_test(test_training_graphs_match_reference),
                                       cmocka_unit_test(test_eval_cli_batches),
                                       cmocka_unit_test(test_eval_cli_errors),
                                       cmocka_unit_test(test_eval_cli_two_inputs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
