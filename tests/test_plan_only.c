/* test_plan_only.c — planning without the weights (ot_import_options.skip_param_data,
 * ot_remat_session_options.plan_only, what `onnxtrain plan` and `--batch-size auto`
 * use): large float params get dtype, shape and size but no data; everything that can
 * be checked without reading them still is (external files included); small float
 * initializers (Clip bounds) and integer ones are loaded; such a model plans exactly
 * as the loaded one (every sample, every policy: each figure `plan` prints, in text or
 * JSON, comes from what is compared here), and cannot be run or saved, with a message
 * that says why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "kernels/backend_select.h"
#include "train/remat_session.h"
#include "train/train.h"
#include "train/train_memory.h"
#include "exec/executor.h"
#include "kernels/kernel.h"

#define TMP OT_BINARY_DIR "/test_plan_only_tmp"
#define SAMPLES OT_SOURCE_DIR "/samples/"
#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

#define BIG 512 /* floats: 2 KiB, above OT_SKIP_PARAM_MIN_BYTES */

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    return 0;
}

static const ot_value *value(const ot_model *m, const char *name) {
    int id = ot_graph_find_value(m->graph, name);
    if (id < 0) fail_msg("no value '%s'", name);
    return &m->graph->values[id];
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* x[2,BIG] + w[BIG] → Clip(lo, hi) → + b[8] broadcast after Reshape(shape) to [2*BIG/8, 8].
 * w is raw data, or external data described by ext_kv; clip_w makes w the Clip's min. */
static void build(const char *path, const char *const *ext_kv, int ext_pairs, bool clip_w) {
    mb *b = mb_new(17);
    float w[BIG], bias[8], lo = -0.5f, hi = 0.5f;
    for (int i = 0; i < BIG; i++)
        w[i] = (float)i / BIG;
    for (int i = 0; i < 8; i++)
        bias[i] = (float)i;
    const int64_t wd[1] = {BIG}, bd[1] = {8}, sd[1] = {2}, xd[2] = {2, BIG};
    const int64_t shape[2] = {2 * BIG / 8, 8};
    Onnx__TensorProto *t = mb_tensor(b, "w", F32, 1, wd);
    if (ext_kv)
        mb_external(b, t, ext_kv, ext_pairs);
    else
        mb_raw(b, t, w, sizeof w);
    mb_init(b, t);
    mb_init_f32(b, "b", 1, bd, bias);
    mb_init_f32(b, "lo", 0, NULL, &lo);
    mb_init_f32(b, "hi", 0, NULL, &hi);
    mb_init_i64(b, "shape", 1, sd, shape);
    mb_input(b, "x", F32, 2, xd, NULL);
    mb_node(b, "Add", "add", "x,w", "y");
    mb_node(b, "Clip", "clip", clip_w ? "y,w,hi" : "y,lo,hi", "z");
    mb_node(b, "Reshape", "reshape", "z,shape", "r");
    mb_node(b, "Add", "add_b", "r,b", "out");
    mb_output(b, "out", F32);
    assert_int_equal(mb_write(b, path), 0);
    mb_free(b);
}

static ot_status load(const char *path, bool skip, ot_model **m, ot_error *err) {
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = skip};
    return ot_model_load(path, &io, m, err);
}

static void test_skip_param_data(void **state) {
    (void)state;
    const char *path = TMP "/raw.onnx";
    build(path, NULL, 0, false);
    ot_error err = {0};
    ot_model *full = NULL, *skip = NULL;
    if (load(path, false, &full, &err)) fail_msg("%s", err.msg);
    if (load(path, true, &skip, &err)) fail_msg("%s", err.msg);

    const ot_value *w = value(skip, "w");
    assert_int_equal(w->kind, OT_VK_PARAM);
    assert_null(w->data);
    assert_int_equal(w->nbytes, BIG * 4);
    assert_int_equal(w->dtype, OT_F32);
    assert_true(ot_shape_equal(&w->shape, &value(full, "w")->shape));
    assert_non_null(value(full, "w")->data);
    /* small float initializers and integer ones are loaded */
    assert_non_null(value(skip, "b")->data);
    assert_non_null(value(skip, "shape")->data);
    /* the Clip bounds were read into attributes, as with the weights loaded */
    const ot_node *clip = NULL;
    for (int i = 0; i < skip->graph->n_nodes; i++)
        if (skip->graph->nodes[i].op == OT_OP_CLIP) clip = &skip->graph->nodes[i];
    assert_non_null(clip);
    assert_true(ot_node_attr_float(clip, "min", 0) == -0.5f && ot_node_attr_float(clip, "max", 0) == 0.5f);
    /* shape inference through the Reshape reads the integer constant */
    const ot_value *o1 = value(full, "out"), *o2 = value(skip, "out");
    assert_true(o2->shape.rank == 2 && o2->shape.dim[0] == 2 * BIG / 8 && o2->shape.dim[1] == 8);
    assert_true(ot_shape_equal(&o1->shape, &o2->shape));

    /* cannot be saved or run: said plainly, not a crash */
    assert_int_equal(ot_model_save(skip, TMP "/never.onnx", &err), OT_E_INTERNAL);
    assert_non_null(strstr(err.msg, "'w'"));
    assert_non_null(strstr(err.msg, "without its weights"));
    struct stat sb;
    assert_int_not_equal(stat(TMP "/never.onnx", &sb), 0);
    ot_backend *be = ot_backend_new_by_name("cpu", 1, &err);
    assert_non_null(be);
    ot_executor *ex = NULL;
    assert_int_equal(ot_executor_new(skip->graph, be, NULL, &ex, &err), OT_E_MODEL);
    assert_null(ex);
    assert_non_null(strstr(err.msg, "'w' has no data"));
    ot_backend_free(be);
    ot_model_free(full);
    ot_model_free(skip);
}

/* Loads path both ways: the same status, and on failure the same message. */
static ot_status load_both(const char *path) {
    ot_error e1 = {0}, e2 = {0};
    ot_model *m1 = NULL, *m2 = NULL;
    ot_status s1 = load(path, false, &m1, &e1), s2 = load(path, true, &m2, &e2);
    assert_int_equal(s1, s2);
    if (s1) assert_string_equal(e1.msg, e2.msg);
    if (!s1) assert_null(value(m2, "w")->data);
    ot_model_free(m1);
    ot_model_free(m2);
    return s1;
}

static void test_skip_still_checks(void **state) {
    (void)state;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ext", TMP);
    mkdir(dir, 0755);
    float w[BIG + 1] = {0};
    char p[700], model[700];
    snprintf(p, sizeof p, "%s/w.bin", dir);
    write_file(p, w, sizeof w); /* one float more than w needs */
    snprintf(model, sizeof model, "%s/model.onnx", dir);

    const char *ok[] = {"location", "w.bin", "offset", "4"};
    build(model, ok, 2, false);
    assert_int_equal(load_both(model), OT_OK);
    /* the file's size is checked, though it is not read */
    const char *long_[] = {"location", "w.bin"};
    build(model, long_, 1, false);
    assert_int_equal(load_both(model), OT_E_MODEL);
    const char *past[] = {"location", "w.bin", "offset", "8", "length", "2048"};
    build(model, past, 3, false);
    assert_int_equal(load_both(model), OT_E_MODEL);
    const char *escape[] = {"location", "../raw.onnx"};
    build(model, escape, 1, false);
    assert_int_equal(load_both(model), OT_E_MODEL);
    const char *missing[] = {"location", "nope.bin"};
    build(model, missing, 1, false);
    assert_int_equal(load_both(model), OT_E_IO);
    /* a large float param read as a Clip bound: the same verdict either way */
    build(model, ok, 2, true);
    assert_int_equal(load_both(model), OT_E_MODEL);
    /* raw data of the wrong length */
    mb *b = mb_new(17);
    const int64_t wd[1] = {BIG}, xd[1] = {BIG};
    Onnx__TensorProto *t = mb_tensor(b, "w", F32, 1, wd);
    mb_raw(b, t, w, (BIG - 1) * 4);
    mb_init(b, t);
    mb_input(b, "x", F32, 1, xd, NULL);
    mb_node(b, "Add", "add", "x,w", "y");
    mb_output(b, "y", F32);
    assert_int_equal(mb_write(b, model), 0);
    mb_free(b);
    assert_int_equal(load_both(model), OT_E_MODEL);
}

/* ---- every sample plans the same without its weights ---------------------------- */

static char *plan_json(const ot_plan *p) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    ot_plan_write_json(p, f);
    fclose(f);
    return buf;
}

static char *graph_dot(const ot_graph *g) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    ot_graph_dump_dot(g, f);
    fclose(f);
    return buf;
}

static void same_bools(const bool *a, const bool *b, int n, const char *what, const char *label) {
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) fail_msg("%s: %s differs at value %d", label, what, i);
}

/* Both sessions of `model` under `policy`, with and without the weights. */
static void compare_policy(const char *model, int64_t batch, const char *policy, int64_t budget) {
    char label[400];
    snprintf(label, sizeof label, "%s --remat %s (budget %lld)", model, policy, (long long)budget);
    ot_remat_session_options o = {.batch_size = batch, .policy = policy, .memory_budget = budget, .n_threads = 1};
    o.loss.class_axis = -1;
    ot_remat_session *s[2] = {NULL, NULL};
    ot_plan *p[2] = {NULL, NULL};
    ot_error e[2] = {{0}, {0}};
    ot_status st[2];
    for (int k = 0; k < 2; k++) {
        o.plan_only = k == 1;
        st[k] = ot_remat_session_new(model, &o, &s[k], &e[k]);
        if (!st[k]) st[k] = ot_remat_session_plan(s[k], &p[k], &e[k]);
    }
    if (st[0] != st[1])
        fail_msg("%s: status %d with the weights, %d without (%s / %s)", label, st[0], st[1], e[0].msg, e[1].msg);
    if (st[0]) {
        assert_string_equal(e[0].msg, e[1].msg);
        for (int k = 0; k < 2; k++) ot_remat_session_free(s[k]);
        return;
    }
    const ot_remat_session *a = s[0], *b = s[1];
    assert_false(a->plan_only);
    assert_true(b->plan_only);
    /* what plan prints */
    assert_int_equal(a->batch, b->batch);
    assert_int_equal(a->g->n_nodes, b->g->n_nodes);
    assert_int_equal(a->g->n_values, b->g->n_values);
    assert_int_equal(a->an.n_fwd, b->an.n_fwd);
    assert_int_equal(a->an.n_art, b->an.n_art);
    assert_int_equal(a->an.n_values, b->an.n_values);
    assert_true(a->an.step_flops == b->an.step_flops);
    assert_true(a->rw.extra_flops == b->rw.extra_flops);
    assert_int_equal(a->rw.n_clones, b->rw.n_clones);
    assert_int_equal(a->rw.kept_bytes, b->rw.kept_bytes);
    char pa[256], pb[256];
    assert_string_equal(ot_remat_policy_str(&a->policy, pa, sizeof pa), ot_remat_policy_str(&b->policy, pb, sizeof pb));
    same_bools(a->keep, b->keep, a->an.n_values, "the keep set", label);
    same_bools(a->an.saved, b->an.saved, a->an.n_values, "the saved set", label);
    for (int v = 0; v < a->an.n_values; v++)
        assert_int_equal(a->an.segment[v], b->an.segment[v]);
    assert_int_equal(ot_plan_peak_bytes(p[0]), ot_plan_peak_bytes(p[1]));
    for (int c = 0; c < OT_MEM_COUNT; c++)
        assert_int_equal(ot_plan_bytes_at_peak(p[0], (ot_mem_category)c),
                         ot_plan_bytes_at_peak(p[1], (ot_mem_category)c));
    char *ja = plan_json(p[0]), *jb = plan_json(p[1]);
    if (strcmp(ja, jb)) fail_msg("%s: the plans' JSON differ", label);
    char *da = graph_dot(a->g), *db = graph_dot(b->g);
    if (strcmp(da, db)) fail_msg("%s: the training graphs differ (--dot)", label);
    free(ja);
    free(jb);
    free(da);
    free(db);
    /* the weights were not loaded: every float param over the threshold has no data
     * in the model (the sessions' bound copies never hold weights: they only plan) */
    int skipped = 0;
    for (int v = 0; v < b->model->graph->n_values; v++) {
        const ot_value *va = &a->model->graph->values[v], *vb = &b->model->graph->values[v];
        assert_int_equal(va->nbytes, vb->nbytes);
        if (vb->kind == OT_VK_PARAM && vb->init_index >= 0 && vb->nbytes > OT_SKIP_PARAM_MIN_BYTES) {
            assert_null(vb->data);
            assert_non_null(va->data);
            skipped++;
        }
    }
    assert_true(skipped > 0);
    /* a plan-only session refuses to run */
    ot_dataset d = {0};
    ot_remat_step r;
    ot_error err = {0};
    assert_int_equal(ot_remat_session_step(s[1], &d, &r, &err), OT_E_INTERNAL);
    assert_non_null(strstr(err.msg, "plan only"));
    for (int k = 0; k < 2; k++) {
        ot_plan_free(p[k]);
        ot_remat_session_free(s[k]);
    }
}

static void test_samples_plan_alike(void **state) {
    (void)state;
    DIR *dir = opendir(SAMPLES);
    assert_non_null(dir);
    struct dirent *de;
    int n_models = 0;
    while ((de = readdir(dir))) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".onnx")) continue;
        char model[1024];
        snprintf(model, sizeof model, SAMPLES "%s", de->d_name);
        /* the model's own batch when fixed, else 4 */
        ot_model *m = NULL;
        ot_error err = {0};
        ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = true};
        if (ot_model_load(model, &io, &m, &err)) fail_msg("%s", err.msg);
        const ot_value *x = &m->graph->values[m->graph->inputs[0]];
        int64_t batch = x->shape.dim[0] >= 0 ? 0 : 4;
        ot_model_free(m);
        const char *policies[] = {"none", "all", "sqrt", "every:2", "selective", "auto"};
        for (size_t i = 0; i < sizeof policies / sizeof *policies; i++)
            compare_policy(model, batch, policies[i], 0);
        /* auto's search under a budget between the least and the plain peak, and one
         * too small for any plan */
        ot_remat_session_options o = {.batch_size = batch, .policy = "none", .plan_only = true};
        o.loss.class_axis = -1;
        ot_remat_session *s = NULL;
        ot_plan *p = NULL;
        if (ot_remat_session_new(model, &o, &s, &err) || ot_remat_session_plan(s, &p, &err)) fail_msg("%s", err.msg);
        int64_t peak = (int64_t)ot_plan_peak_bytes(p);
        ot_plan_free(p);
        ot_remat_session_free(s);
        compare_policy(model, batch, "auto", peak * 9 / 10);
        compare_policy(model, batch, "auto", 1024);
        n_models++;
    }
    closedir(dir);
    assert_true(n_models >= 5);
}

/* --batch-size auto probes without the weights and finds what it found with them:
 * the result follows from the plans compared above; here it runs end to end, every
 * probe a plan-only training session over one import loaded without its weights. */
static void test_find_batch(void **state) {
    (void)state;
    ot_remat_session_options o = {.policy = "sqrt"};
    o.loss.class_axis = -1;
    int64_t batch = 0;
    ot_error err = {0};
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = true};
    ot_model *m = NULL;
    if (ot_model_load(SAMPLES "tinygpt.onnx", &io, &m, &err)) fail_msg("%s", err.msg);
    ot_train_options to;
    ot_train_options_default(&to);
    to.remat = "sqrt";
    if (ot_train_find_batch(m, &to, false, 4 << 20, 64, &batch, &err)) fail_msg("%s", err.msg);
    ot_model_free(m);
    assert_true(batch >= 1 && batch <= 64);
    o.batch_size = batch;
    ot_remat_session *s = NULL;
    ot_plan *p = NULL;
    o.plan_only = true;
    if (ot_remat_session_new(SAMPLES "tinygpt.onnx", &o, &s, &err) || ot_remat_session_plan(s, &p, &err))
        fail_msg("%s", err.msg);
    assert_true(ot_plan_peak_bytes(p) <= 4 << 20);
    ot_plan_free(p);
    ot_remat_session_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skip_param_data),
        cmocka_unit_test(test_skip_still_checks),
        cmocka_unit_test(test_samples_plan_alike),
        cmocka_unit_test(test_find_batch),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
