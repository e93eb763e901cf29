/* test_host_release.c — the weights held once while running
 * (ot_exec_options.release_host_data, what `eval` and training use):
 *   - once loaded into the arena, every param and running statistic has no host copy
 *     in the graph (dtype, shape and nbytes stay), constants keep theirs;
 *   - results are bitwise those of a run that keeps the host copies: forward outputs,
 *     and for training the losses, validation losses, the last checkpoint and the
 *     tuned model's bytes (resnet: BatchNorm state and validation; tinygpt: Dropout,
 *     accumulation and clipping, with remat);
 *   - ot_executor_sync_to_graph gives the copies back (what the exporter writes);
 *   - an executor that fails while loading puts back what it had released, so the
 *     model is as it was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "importer/importer.h"
#include "kernels/backend_select.h"
#include "exec/executor.h"
#include "train/npy.h"
#include "train/train.h"
#include "test_files.h"

#define SAMPLES OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_host_release_tmp"

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    return 0;
}

static bool weight(const ot_value *v) { return v->kind == OT_VK_PARAM || v->kind == OT_VK_STATE; }

/* Copies of every initializer's host data, by value id (NULL where none). */
static void **snapshot(const ot_graph *g) {
    void **c = calloc((size_t)g->n_values, sizeof *c);
    assert_non_null(c);
    for (int v = 0; v < g->n_values; v++) {
        const ot_value *val = &g->values[v];
        if (!val->data) continue;
        c[v] = malloc(val->nbytes ? val->nbytes : 1);
        assert_non_null(c[v]);
        memcpy(c[v], val->data, val->nbytes);
    }
    return c;
}

static void snapshot_free(void **c, int n) {
    for (int v = 0; v < n; v++)
        free(c[v]);
    free(c);
}

/* Every value of g holds exactly the bytes the snapshot took. */
static void expect_snapshot(const ot_graph *g, void **c) {
    for (int v = 0; v < g->n_values; v++) {
        const ot_value *val = &g->values[v];
        if (!c[v]) continue;
        if (!val->data) fail_msg("'%s' has no data", val->name);
        assert_memory_equal(val->data, c[v], val->nbytes);
    }
}

/* resnet's forward pass on its first batch, with and without releasing. */
static void test_executor_release(void **state) {
    (void)state;
    ot_error err = {0};
    ot_tensor *x = test_npy(SAMPLES "resnet/input.npy");
    ot_backend *be = ot_backend_new_by_name("cpu", 2, &err);
    assert_non_null(be);
    ot_tensor *out[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        ot_model *m = test_model(SAMPLES "resnet.onnx");
        ot_graph *g = m->graph;
        void **before = snapshot(g);
        ot_exec_options eo = {.n_threads = 2, .release_host_data = k == 1};
        ot_executor *ex = NULL;
        if (ot_executor_new(g, be, &eo, &ex, &err)) fail_msg("%s", err.msg);
        int n_weights = 0;
        for (int v = 0; v < g->n_values; v++) {
            const ot_value *val = &g->values[v];
            if (!before[v] || ot_plan_value_bytes(ot_executor_plan(ex), v) == 0) continue;
            if (weight(val)) {
                n_weights++;
                if (k == 1)
                    assert_null(val->data);
                else
                    assert_non_null(val->data);
                assert_int_equal(val->nbytes, ot_plan_value_bytes(ot_executor_plan(ex), v));
            } else if (val->kind == OT_VK_CONSTANT) {
                assert_non_null(val->data); /* shape inference may read it again */
            }
        }
        assert_true(n_weights > 0);
        if (ot_executor_set_input(ex, g->inputs[0], x, &err) || ot_executor_run(ex, &err) ||
            ot_executor_get(ex, g->outputs[0], &out[k], &err))
            fail_msg("%s", err.msg);
        /* back for the exporter, byte for byte what was loaded (BatchNorm in training
         * mode updated nothing in place: its new statistics are separate outputs) */
        if (ot_executor_sync_to_graph(ex, &err)) fail_msg("%s", err.msg);
        expect_snapshot(g, before);
        ot_executor_free(ex);
        snapshot_free(before, g->n_values);
        ot_model_free(m);
    }
    assert_int_equal(out[0]->nbytes, out[1]->nbytes);
    assert_memory_equal(out[0]->data, out[1]->data, out[0]->nbytes);
    ot_tensor_free(out[0]);
    ot_tensor_free(out[1]);
    ot_tensor_free(x);
    ot_backend_free(be);
}

/* A load that fails part way puts back the host copies it had already freed. */
static void test_failed_load_restores(void **state) {
    (void)state;
    ot_error err = {0};
    ot_model *m = test_model(SAMPLES "resnet.onnx");
    ot_graph *g = m->graph;
    int last = -1; /* the last weight the executor loads (it loads in value order) */
    for (int v = 0; v < g->n_values; v++)
        if (weight(&g->values[v]) && g->values[v].data && g->values[v].nbytes) last = v;
    assert_true(last > 0);
    free(g->values[last].data); /* as if it had never been loaded */
    g->values[last].data = NULL;
    void **before = snapshot(g);
    ot_backend *be = ot_backend_new_by_name("cpu", 1, &err);
    ot_exec_options eo = {.release_host_data = true};
    ot_executor *ex = NULL;
    assert_int_equal(ot_executor_new(g, be, &eo, &ex, &err), OT_E_MODEL);
    assert_null(ex);
    assert_non_null(strstr(err.msg, g->values[last].name));
    int restored = 0;
    for (int v = 0; v < last; v++)
        restored += weight(&g->values[v]) && before[v];
    assert_true(restored > 0);
    expect_snapshot(g, before);
    snapshot_free(before, g->n_values);
    ot_backend_free(be);
    ot_model_free(m);
}

static void load_data(const char *dir, ot_dataset *d) {
    ot_error err = {0};
    memset(d, 0, sizeof *d);
    char p[1024];
    snprintf(p, sizeof p, SAMPLES "%s/input.npy", dir);
    if (ot_dataset_add(d, "", "input.npy", -1, test_npy("%s", p), &err)) fail_msg("%s", err.msg);
    snprintf(p, sizeof p, SAMPLES "%s/labels.npy", dir);
    if (ot_dataset_add(d, OT_DATA_LABELS, "labels.npy", -1, test_npy("%s", p), &err)) fail_msg("%s", err.msg);
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(*len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, *len, f), *len);
    fclose(f);
    return buf;
}

typedef struct run_out {
    ot_train_result r;
    char *model, *ckpt;
    size_t model_len, ckpt_len;
} run_out;

/* Trains a sample with or without keeping the host copies; saves the tuned model. */
static void train_one(const char *model, const char *dir, bool keep, int64_t batch, const char *remat, run_out *out) {
    ot_error err = {0};
    ot_model *m = test_model(SAMPLES "%s", model);
    ot_dataset d;
    load_data(dir, &d);
    ot_train_options o;
    ot_train_options_default(&o);
    o.n_threads = 2;
    o.batch_size = batch;
    o.steps = 4;
    o.accum = 2;
    o.seed = 77;
    ot_optim_config_default(&o.optim, OT_OPTIM_ADAMW);
    o.optim.clip_grad_norm = 1.0;
    o.remat = remat;
    o.validation = true;
    o.keep_host_weights = keep;
    char ckdir[600];
    snprintf(ckdir, sizeof ckdir, TMP "/%s_%s_ckpt", dir, keep ? "keep" : "release");
    o.checkpoint_dir = ckdir;
    o.checkpoint_every = 3;
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, &d, true, &s, &err)) fail_msg("%s: %s", model, err.msg);
    int n_weights = 0;
    /* the session's bound copy of the graph borrows the weights while it runs: the
     * model holds none, the copy only the host copies kept */
    const ot_graph *tg = ot_train_graph(s);
    for (int v = 0; v < m->graph->n_values; v++) {
        const ot_value *val = &tg->values[v];
        if (!weight(&m->graph->values[v]) || val->init_index < 0) continue;
        n_weights++;
        assert_null(m->graph->values[v].data);
        if (keep)
            assert_non_null(val->data);
        else if (val->data)
            fail_msg("%s: '%s' still has its host copy", model, val->name);
    }
    assert_true(n_weights > 0);
    if (ot_train_run(s, &d, &d, NULL, &out->r, &err)) fail_msg("%s: %s", model, err.msg);
    for (int v = 0; v < m->graph->n_values; v++)
        if (weight(&m->graph->values[v]) && m->graph->values[v].init_index >= 0)
            assert_non_null(m->graph->values[v].data);
    char path[700];
    snprintf(path, sizeof path, TMP "/%s_%s.onnx", dir, keep ? "keep" : "release");
    if (ot_model_save(m, path, &err)) fail_msg("%s", err.msg);
    out->model = read_all(path, &out->model_len);
    out->ckpt = read_all(out->r.last_checkpoint, &out->ckpt_len);
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

static void same_training(const char *model, const char *dir, int64_t batch, const char *remat) {
    run_out a = {0}, b = {0};
    train_one(model, dir, true, batch, remat, &a);
    train_one(model, dir, false, batch, remat, &b);
    assert_int_equal(a.r.n_steps, b.r.n_steps);
    assert_memory_equal(a.r.loss, b.r.loss, sizeof(double) * (size_t)a.r.n_steps);
    assert_memory_equal(a.r.grad_norm, b.r.grad_norm, sizeof(double) * (size_t)a.r.n_steps);
    assert_int_equal(a.r.n_epochs, b.r.n_epochs);
    assert_true(a.r.n_epochs > 0);
    for (int64_t e = 0; e < a.r.n_epochs; e++)
        assert_memory_equal(&a.r.epochs[e].val_loss, &b.r.epochs[e].val_loss, sizeof(double));
    assert_int_equal(a.ckpt_len, b.ckpt_len);
    assert_memory_equal(a.ckpt, b.ckpt, a.ckpt_len);
    assert_int_equal(a.model_len, b.model_len);
    if (memcmp(a.model, b.model, a.model_len)) fail_msg("%s: the tuned models differ", model);
    /* and training changed the weights: the comparison is not of two untouched copies */
    size_t olen = 0;
    char path[600];
    snprintf(path, sizeof path, SAMPLES "%s", model);
    char *orig = read_all(path, &olen);
    assert_true(olen != a.model_len || memcmp(orig, a.model, olen));
    free(orig);
    for (int k = 0; k < 2; k++) {
        run_out *r = k ? &b : &a;
        ot_train_result_free(&r->r);
        free(r->model);
        free(r->ckpt);
    }
}

static void test_train_resnet(void **state) {
    (void)state;
    same_training("resnet.onnx", "resnet", 8, NULL);
}

static void test_train_tinygpt(void **state) {
    (void)state;
    same_training("tinygpt.onnx", "tinygpt", 4, "sqrt");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_executor_release),
        cmocka_unit_test(test_failed_load_restores),
        cmocka_unit_test(test_train_resnet),
        cmocka_unit_test(test_train_tinygpt),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
