/* test_api.c — the public C API (include/onnxtrain.h) on samples/mlp.onnx with
 * synthetic data: steps with --accum bitwise those of the training loop
 * (ot_train_run, what `onnxtrain train` runs), bad input refused with a status and a
 * message naming the argument and the caller's buffers untouched, params by name,
 * eval, the plan, verify, checkpoints (resume gives the same steps bitwise), the
 * tuned model, a closed session and a session busy in another thread; options.tf32
 * reaches the backend (the CPU ignores it: the same bits). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "api/api_internal.h"
#include "kernels/kernel.h"
#include "train/train_internal.h"

#define MLP OT_SOURCE_DIR "/samples/mlp.onnx"
#define N 32   /* samples */
#define B 4    /* micro-batch */
#define K 2    /* micro-batches per step */
#define STEPS 3

static float xs[N * 64];
static int64_t ys[N];

static void make_data(void) {
    uint32_t r = 12345;
    for (int i = 0; i < N * 64; i++) {
        r = r * 1664525u + 1013904223u;
        xs[i] = (float)((r >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int i = 0; i < N; i++) ys[i] = (i * 7) % 10;
}

static int64_t xshape[2] = {B * K, 64}, yshape[1] = {B * K};

/* The batch of step `step`: samples step*K*B .. in file order. */
static void batch_of(int step, onnxtrain_tensor *x, onnxtrain_tensor *y) {
    int first = (step * K * B) % N;
    *x = (onnxtrain_tensor){"x", ONNXTRAIN_FLOAT32, 2, xshape, xs + first * 64, sizeof(float) * B * K * 64};
    *y = (onnxtrain_tensor){NULL, ONNXTRAIN_INT64, 1, yshape, ys + first, sizeof(int64_t) * B * K};
}

static void api_options(onnxtrain_options *o) {
    onnxtrain_options_init(o);
    o->optimizer = "adam";
    o->lr = 0.01;
    o->accum = K;
    o->seed = 7;
}

static onnxtrain_session *open_mlp(const onnxtrain_options *o) {
    onnxtrain_session *s = NULL;
    onnxtrain_status st = onnxtrain_session_open(MLP, o, &s);
    if (st) fprintf(stderr, "open: %s\n", onnxtrain_last_error());
    assert_int_equal(st, ONNXTRAIN_OK);
    return s;
}

static void expect_error(onnxtrain_status got, onnxtrain_status want, const char *needle) {
    if (got != want || !strstr(onnxtrain_last_error(), needle))
        fprintf(stderr, "status %d (want %d): %s (want '%s')\n", got, want, onnxtrain_last_error(), needle);
    assert_int_equal(got, want);
    assert_int_equal(onnxtrain_last_status(), want);
    assert_non_null(strstr(onnxtrain_last_error(), needle));
}

/* API steps with --accum against ot_train_run on the same data in file order. */
static void test_steps_match_loop(void **state) {
    (void)state;
    double api_loss[STEPS];
    onnxtrain_options o;
    api_options(&o);
    onnxtrain_session *s = open_mlp(&o);
    for (int i = 0; i < STEPS; i++) {
        onnxtrain_tensor x, y;
        batch_of(i, &x, &y);
        assert_int_equal(onnxtrain_train_step(s, &x, 1, &y, &api_loss[i]), ONNXTRAIN_OK);
    }
    assert_int_equal(onnxtrain_step_count(s), STEPS);
    float w_api[10 * 128];
    assert_int_equal(onnxtrain_param_read(s, "fc3.weight", w_api, sizeof w_api), ONNXTRAIN_OK);

    /* the loop: the model's data, ot_train_run with the same settings */
    ot_error err = {0};
    ot_model *m = NULL;
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    assert_int_equal(ot_model_load(MLP, &io, &m, &err), OT_OK);
    ot_dataset d = {0};
    int64_t xd[2] = {N, 64}, yd[1] = {N};
    ot_tensor *tx, *ty;
    ot_shape sx = ot_shape_make(2, xd), sy = ot_shape_make(1, yd);
    tx = ot_tensor_new(OT_F32, &sx);
    ty = ot_tensor_new(OT_I64, &sy);
    memcpy(tx->data, xs, sizeof xs);
    memcpy(ty->data, ys, sizeof ys);
    assert_int_equal(ot_dataset_add(&d, "x", "x", -1, tx, &err), OT_OK);
    assert_int_equal(ot_dataset_add(&d, OT_DATA_LABELS, "labels", -1, ty, &err), OT_OK);
    ot_train_options to;
    ot_train_options_default(&to);
    ot_optim_config_default(&to.optim, OT_OPTIM_ADAM);
    to.optim.lr = 0.01;
    to.accum = K;
    to.batch_size = B;
    to.steps = STEPS;
    to.seed = 7;
    to.no_shuffle = true;
    ot_train_session *ts = NULL;
    ot_train_result r;
    assert_int_equal(ot_train_session_new(m, &to, &d, true, &ts, &err), OT_OK);
    assert_int_equal(ot_train_run(ts, &d, NULL, NULL, &r, &err), OT_OK);
    for (int i = 0; i < STEPS; i++) assert_memory_equal(&r.loss[i], &api_loss[i], sizeof(double));
    int v = ot_graph_find_value(m->graph, "fc3.weight");
    assert_true(v >= 0);
    assert_memory_equal(m->graph->values[v].data, w_api, sizeof w_api);
    ot_train_result_free(&r);
    ot_train_session_free(ts);
    ot_dataset_free(&d);
    ot_model_free(m);
    onnxtrain_session_free(s);
}

static void test_open_errors(void **state) {
    (void)state;
    onnxtrain_session *s = (onnxtrain_session *)&s;
    onnxtrain_options o;
    onnxtrain_options_init(&o);
    expect_error(onnxtrain_session_open(NULL, &o, &s), ONNXTRAIN_E_USAGE, "model_path is NULL");
    expect_error(onnxtrain_session_open(OT_SOURCE_DIR "/no/such.onnx", &o, &s), ONNXTRAIN_E_IO, "such.onnx");
    assert_null(s);
    o.loss = "hinge";
    expect_error(onnxtrain_session_open(MLP, &o, &s), ONNXTRAIN_E_USAGE, "options.loss");
    onnxtrain_options_init(&o);
    o.optimizer = "lion";
    expect_error(onnxtrain_session_open(MLP, &o, &s), ONNXTRAIN_E_USAGE, "options.optimizer");
    onnxtrain_options_init(&o);
    o.accum = 0;
    expect_error(onnxtrain_session_open(MLP, &o, &s), ONNXTRAIN_E_USAGE, "options.accum");
    onnxtrain_options_init(&o);
    o.remat = "sometimes";
    expect_error(onnxtrain_session_open(MLP, &o, &s), ONNXTRAIN_E_USAGE, "options.remat");
    onnxtrain_options_init(&o);
    o.schedule = "cosine";
    expect_error(onnxtrain_session_open(MLP, &o, &s), ONNXTRAIN_E_USAGE, "total_steps");
    onnxtrain_options_init(&o);
    o.struct_size = 0;
    expect_error(onnxtrain_session_open(MLP, &o, &s), ONNXTRAIN_E_USAGE, "struct_size");
    onnxtrain_options_init(&o);
    o.lr = -1;
    expect_error(onnxtrain_session_open(MLP, &o, &s), ONNXTRAIN_E_USAGE, "options");
    /* an older application's smaller struct: the rest are defaults */
    onnxtrain_options_init(&o);
    o.struct_size = offsetof(onnxtrain_options, optimizer);
    o.optimizer = "not read";
    assert_int_equal(onnxtrain_session_open(MLP, &o, &s), ONNXTRAIN_OK);
    onnxtrain_session_free(s);
    /* from bytes */
    FILE *f = fopen(MLP, "rb");
    assert_non_null(f);
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_int_equal(onnxtrain_session_open_bytes(buf, n, NULL, NULL, &s), ONNXTRAIN_OK);
    onnxtrain_session_free(s);
    expect_error(onnxtrain_session_open_bytes(NULL, 0, NULL, NULL, &s), ONNXTRAIN_E_USAGE, "bytes");
    expect_error(onnxtrain_session_open_bytes(buf, 7, NULL, NULL, &s), ONNXTRAIN_E_PARSE, "");
}

/* Every bad batch is refused naming the argument; nothing the caller passed changes. */
static void test_bad_input(void **state) {
    (void)state;
    onnxtrain_options o;
    api_options(&o);
    onnxtrain_session *s = open_mlp(&o);
    float xs0[N * 64];
    int64_t ys0[N];
    memcpy(xs0, xs, sizeof xs);
    memcpy(ys0, ys, sizeof ys);
    onnxtrain_tensor x, y, bad;
    batch_of(0, &x, &y);
    double loss = 123;
    expect_error(onnxtrain_train_step(s, NULL, 1, &y, &loss), ONNXTRAIN_E_USAGE, "inputs: NULL");
    expect_error(onnxtrain_train_step(s, &x, 0, &y, &loss), ONNXTRAIN_E_USAGE, "n_inputs");
    bad = x, bad.dtype = (onnxtrain_dtype)99;
    expect_error(onnxtrain_train_step(s, &bad, 1, &y, &loss), ONNXTRAIN_E_USAGE, "inputs[0] ('x'): dtype 99");
    bad = x, bad.nbytes = 16;
    expect_error(onnxtrain_train_step(s, &bad, 1, &y, &loss), ONNXTRAIN_E_USAGE, "inputs[0] ('x'): buffer of 16 bytes");
    bad = x, bad.data = NULL;
    expect_error(onnxtrain_train_step(s, &bad, 1, &y, &loss), ONNXTRAIN_E_USAGE, "inputs[0] ('x'): data is NULL");
    bad = x, bad.shape = NULL;
    expect_error(onnxtrain_train_step(s, &bad, 1, &y, &loss), ONNXTRAIN_E_USAGE, "shape is NULL");
    bad = x, bad.rank = 0;
    expect_error(onnxtrain_train_step(s, &bad, 1, &y, &loss), ONNXTRAIN_E_USAGE, "rank 0");
    bad = x, bad.name = "y";
    expect_error(onnxtrain_train_step(s, &bad, 1, &y, &loss), ONNXTRAIN_E_USAGE, "'y'");
    bad = x, bad.dtype = ONNXTRAIN_FLOAT64, bad.nbytes *= 2;
    expect_error(onnxtrain_train_step(s, &bad, 1, &y, &loss), ONNXTRAIN_E_DATA, "inputs[0] ('x'): float64");
    int64_t wide[2] = {B * K, 32};
    bad = x, bad.shape = wide;
    expect_error(onnxtrain_train_step(s, &bad, 1, &y, &loss), ONNXTRAIN_E_DATA, "inputs[0] ('x')");
    int64_t odd[2] = {B * K - 1, 64}, oddy[1] = {B * K - 1};
    onnxtrain_tensor xo = x, yo = y;
    xo.shape = odd, yo.shape = oddy;
    expect_error(onnxtrain_train_step(s, &xo, 1, &yo, &loss), ONNXTRAIN_E_DATA, "options.accum");
    yo = y, yo.shape = oddy;
    expect_error(onnxtrain_train_step(s, &x, 1, &yo, &loss), ONNXTRAIN_E_DATA, "labels");
    expect_error(onnxtrain_train_step(s, &x, 1, NULL, &loss), ONNXTRAIN_E_USAGE, "labels is NULL, but the loss");
    int64_t bad_labels[B * K];
    memcpy(bad_labels, ys, sizeof bad_labels);
    bad_labels[3] = 10;
    bad = y, bad.data = bad_labels;
    expect_error(onnxtrain_train_step(s, &x, 1, &bad, &loss), ONNXTRAIN_E_DATA, "labels");
    assert_true(loss == 123); /* outputs untouched on failure */
    assert_int_equal(onnxtrain_step_count(s), 0);
    /* a good step, then a batch of another size is refused (the plan is fixed) */
    assert_int_equal(onnxtrain_train_step(s, &x, 1, &y, &loss), ONNXTRAIN_OK);
    int64_t big[2] = {2 * B * K, 64}, bigy[1] = {2 * B * K};
    onnxtrain_tensor xb = x, yb = y;
    xb.shape = big, xb.nbytes *= 2, yb.shape = bigy, yb.nbytes *= 2;
    expect_error(onnxtrain_train_step(s, &xb, 1, &yb, &loss), ONNXTRAIN_E_DATA, "accum x batch");
    bad = y, bad.data = bad_labels;
    expect_error(onnxtrain_train_step(s, &x, 1, &bad, &loss), ONNXTRAIN_E_DATA, "labels");
    assert_int_equal(onnxtrain_step_count(s), 1);
    /* int32 labels are accepted (widened in a copy) */
    int32_t y32[B * K];
    for (int i = 0; i < B * K; i++) y32[i] = (int32_t)ys[i];
    bad = y, bad.dtype = ONNXTRAIN_INT32, bad.data = y32, bad.nbytes = sizeof y32;
    assert_int_equal(onnxtrain_train_step(s, &x, 1, &bad, &loss), ONNXTRAIN_OK);
    assert_memory_equal(xs, xs0, sizeof xs);
    assert_memory_equal(ys, ys0, sizeof ys);
    onnxtrain_session_free(s);
}

static void test_params_eval_plan(void **state) {
    (void)state;
    onnxtrain_options o;
    api_options(&o);
    onnxtrain_session *s = open_mlp(&o);
    /* before the session is built: the model's own params */
    assert_int_equal(onnxtrain_param_count(s), 6);
    assert_string_equal(onnxtrain_param_name(s, 0), "fc1.weight");
    assert_null(onnxtrain_param_name(s, 6));
    onnxtrain_dtype dt;
    int rank;
    int64_t shape[ONNXTRAIN_MAX_RANK];
    assert_int_equal(onnxtrain_param_info(s, "fc3.weight", &dt, &rank, shape), ONNXTRAIN_OK);
    assert_int_equal(dt, ONNXTRAIN_FLOAT32);
    assert_int_equal(rank, 2);
    assert_int_equal(shape[0], 10);
    expect_error(onnxtrain_param_info(s, "fc9.weight", &dt, &rank, shape), ONNXTRAIN_E_USAGE, "'fc9.weight'");
    float b[10], b2[10], zero[10] = {0};
    expect_error(onnxtrain_param_read(s, "fc3.bias", b, 8), ONNXTRAIN_E_USAGE, "dst_bytes 8");
    expect_error(onnxtrain_param_write(s, "fc3.bias", zero, 12), ONNXTRAIN_E_USAGE, "nbytes 12");
    assert_int_equal(onnxtrain_param_write(s, "fc3.bias", zero, sizeof zero), ONNXTRAIN_OK);
    onnxtrain_plan_report r;
    onnxtrain_plan_report_init(&r);
    expect_error(onnxtrain_plan(s, &r), ONNXTRAIN_E_USAGE, "onnxtrain_prepare");
    onnxtrain_tensor x, y;
    batch_of(0, &x, &y);
    assert_int_equal(onnxtrain_prepare(s, &x, 1, &y), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_plan(s, &r), ONNXTRAIN_OK);
    assert_int_equal(r.batch_size, B);
    assert_int_equal(r.accum, K);
    assert_int_equal(r.n_params, 6);
    assert_int_equal(r.param_elements, 128 * 64 + 128 + 128 * 128 + 128 + 10 * 128 + 10);
    assert_true(r.peak_bytes > 0 && r.at_peak[0] >= (uint64_t)r.param_elements * 4);
    assert_string_equal(onnxtrain_memory_category_name(0), "params");
    assert_null(onnxtrain_memory_category_name(ONNXTRAIN_MEM_CATEGORIES));
    /* after: the executor's; the bias written before the build is there */
    assert_int_equal(onnxtrain_param_read(s, "fc3.bias", b, sizeof b), ONNXTRAIN_OK);
    assert_memory_equal(b, zero, sizeof b);
    double l0, acc, l1;
    int64_t eshape[2] = {N, 64}, eyshape[1] = {N};
    onnxtrain_tensor ex = {"x", ONNXTRAIN_FLOAT32, 2, eshape, xs, sizeof xs};
    onnxtrain_tensor ey = {NULL, ONNXTRAIN_INT64, 1, eyshape, ys, sizeof ys};
    assert_int_equal(onnxtrain_eval(s, &ex, 1, &ey, &l0, &acc), ONNXTRAIN_OK);
    assert_true(isfinite(l0) && acc >= 0 && acc <= 1);
    assert_int_equal(onnxtrain_eval(s, &ex, 1, &ey, &l1, NULL), ONNXTRAIN_OK);
    assert_memory_equal(&l0, &l1, sizeof l0); /* eval changes nothing */
    assert_int_equal(onnxtrain_train_step(s, &x, 1, &y, NULL), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_param_read(s, "fc3.bias", b2, sizeof b2), ONNXTRAIN_OK);
    assert_memory_not_equal(b2, zero, sizeof b2); /* trained */
    int one = 0;
    expect_error(onnxtrain_verify(s, &x, 1, &y, &one), ONNXTRAIN_E_USAGE, "before");
    onnxtrain_session_free(s);
}

static void test_verify(void **state) {
    (void)state;
    onnxtrain_options o;
    api_options(&o);
    o.remat = "sqrt";
    onnxtrain_session *s = open_mlp(&o);
    onnxtrain_tensor x, y;
    batch_of(0, &x, &y);
    int n_diff = -1;
    assert_int_equal(onnxtrain_verify(s, &x, 1, &y, &n_diff), ONNXTRAIN_OK);
    assert_int_equal(n_diff, 0);
    /* the weights are still there: a step after verify is the step without it */
    double l;
    assert_int_equal(onnxtrain_train_step(s, &x, 1, &y, &l), ONNXTRAIN_OK);
    onnxtrain_session_free(s);
}

/* Two steps, a checkpoint, two more; a new session resumed from the checkpoint gives
 * the last two bitwise. */
static void test_checkpoint_resume(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/test_api_tmp", OT_BINARY_DIR);
    mkdir(path, 0755);
    strcat(path, "/ck.otc");
    onnxtrain_options o;
    api_options(&o);
    onnxtrain_session *s = open_mlp(&o);
    double l[4], r[2];
    onnxtrain_tensor x, y;
    expect_error(onnxtrain_checkpoint_save(s, path), ONNXTRAIN_E_USAGE, "not built");
    for (int i = 0; i < 4; i++) {
        batch_of(i, &x, &y);
        assert_int_equal(onnxtrain_train_step(s, &x, 1, &y, &l[i]), ONNXTRAIN_OK);
        if (i == 1) assert_int_equal(onnxtrain_checkpoint_save(s, path), ONNXTRAIN_OK);
    }
    float w[128], w2[128];
    assert_int_equal(onnxtrain_param_read(s, "fc2.bias", w, sizeof w), ONNXTRAIN_OK);
    onnxtrain_session_free(s);
    s = open_mlp(&o);
    assert_int_equal(onnxtrain_checkpoint_load(s, path), ONNXTRAIN_OK); /* before the build */
    for (int i = 2; i < 4; i++) {
        batch_of(i, &x, &y);
        assert_int_equal(onnxtrain_train_step(s, &x, 1, &y, &r[i - 2]), ONNXTRAIN_OK);
    }
    assert_int_equal(onnxtrain_step_count(s), 4);
    assert_memory_equal(r, &l[2], sizeof r);
    assert_int_equal(onnxtrain_param_read(s, "fc2.bias", w2, sizeof w2), ONNXTRAIN_OK);
    assert_memory_equal(w, w2, sizeof w);
    /* after the build too; another optimizer is refused naming the setting */
    assert_int_equal(onnxtrain_checkpoint_load(s, path), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_step_count(s), 2);
    onnxtrain_session_free(s);
    o.optimizer = "sgd";
    o.lr = NAN;
    s = open_mlp(&o);
    batch_of(0, &x, &y);
    assert_int_equal(onnxtrain_prepare(s, &x, 1, &y), ONNXTRAIN_OK);
    expect_error(onnxtrain_checkpoint_load(s, path), ONNXTRAIN_E_DATA, "ck.otc");
    expect_error(onnxtrain_checkpoint_load(s, OT_BINARY_DIR "/test_api_tmp/none.otc"), ONNXTRAIN_E_IO, "none.otc");
    /* the tuned model */
    char out[512];
    snprintf(out, sizeof out, "%s/test_api_tmp/tuned.onnx", OT_BINARY_DIR);
    assert_int_equal(onnxtrain_save_model(s, out, 0), ONNXTRAIN_OK);
    onnxtrain_session *t = NULL;
    assert_int_equal(onnxtrain_session_open(out, NULL, &t), ONNXTRAIN_OK);
    onnxtrain_session_free(t);
    snprintf(out, sizeof out, "%s/test_api_tmp/tuned_ext.onnx", OT_BINARY_DIR);
    assert_int_equal(onnxtrain_save_model(s, out, 1), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_session_open(out, NULL, &t), ONNXTRAIN_OK);
    onnxtrain_session_free(t);
    expect_error(onnxtrain_save_model(s, NULL, 0), ONNXTRAIN_E_USAGE, "path");
    onnxtrain_session_free(s);
}

/* LoRA through the options: only the adapters train, the tuned model is merged. */
static void test_lora(void **state) {
    (void)state;
    onnxtrain_options o;
    api_options(&o);
    o.lora_rank = 4;
    o.lora_alpha = 8;
    onnxtrain_session *s = open_mlp(&o);
    onnxtrain_tensor x, y;
    batch_of(0, &x, &y);
    static float w0[128 * 128], w1[128 * 128]; /* fc2: the default rule adapts hidden layers, not the head */
    assert_int_equal(onnxtrain_param_read(s, "fc2.weight", w0, sizeof w0), ONNXTRAIN_OK);
    double l0, l1;
    assert_int_equal(onnxtrain_train_step(s, &x, 1, &y, &l0), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_train_step(s, &x, 1, &y, &l1), ONNXTRAIN_OK);
    assert_true(l1 != l0);
    int n = onnxtrain_param_count(s), n_lora = 0;
    for (int i = 0; i < n; i++) n_lora += strstr(onnxtrain_param_name(s, i), ".lora_") != NULL;
    assert_int_equal(n_lora, n); /* only adapters train */
    assert_true(n > 0);
    float w_frozen[128 * 128];
    assert_int_equal(onnxtrain_param_read(s, "fc2.weight", w_frozen, sizeof w_frozen), ONNXTRAIN_OK);
    assert_memory_equal(w_frozen, w0, sizeof w0); /* the base weight is read, and not trained */
    expect_error(onnxtrain_param_write(s, "fc2.weight", w_frozen, sizeof w_frozen), ONNXTRAIN_E_USAGE,
                 "no param or running statistic named 'fc2.weight'");
    char out[512], dir[512];
    /* the adapters as a PEFT folder; a session started from it computes the loss s
     * computes next, bitwise (the loss is the forward pass before the update) */
    snprintf(dir, sizeof dir, "%s/test_api_tmp/lora_peft/", OT_BINARY_DIR);
    assert_int_equal(onnxtrain_save_adapters(s, dir), ONNXTRAIN_OK);
    double l2, l2_loaded;
    assert_int_equal(onnxtrain_train_step(s, &x, 1, &y, &l2), ONNXTRAIN_OK);
    onnxtrain_options lo;
    api_options(&lo);
    lo.lora_load = dir; /* rank and alpha from the folder */
    onnxtrain_session *u = open_mlp(&lo);
    assert_int_equal(onnxtrain_train_step(u, &x, 1, &y, &l2_loaded), ONNXTRAIN_OK);
    assert_true(l2_loaded == l2);
    onnxtrain_session_free(u);
    snprintf(out, sizeof out, "%s/test_api_tmp/lora_merged.onnx", OT_BINARY_DIR);
    assert_int_equal(onnxtrain_save_model(s, out, 0), ONNXTRAIN_OK);
    onnxtrain_session_free(s);
    onnxtrain_session *t = NULL;
    assert_int_equal(onnxtrain_session_open(out, NULL, &t), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_param_read(t, "fc2.weight", w1, sizeof w1), ONNXTRAIN_OK);
    assert_memory_not_equal(w0, w1, sizeof w0); /* the adapters merged into W */
    onnxtrain_session_free(t);
    o.lora_rank = -1;
    expect_error(onnxtrain_session_open(MLP, &o, &t), ONNXTRAIN_E_USAGE, "options.lora_rank");
}

static void test_closed_and_busy(void **state) {
    (void)state;
    onnxtrain_options o;
    api_options(&o);
    onnxtrain_session *s = open_mlp(&o);
    onnxtrain_tensor x, y;
    batch_of(0, &x, &y);
    atomic_flag_test_and_set(&s->busy); /* as while another thread's call runs */
    expect_error(onnxtrain_train_step(s, &x, 1, &y, NULL), ONNXTRAIN_E_USAGE, "another thread");
    atomic_flag_clear(&s->busy);
    onnxtrain_session_close(s);
    expect_error(onnxtrain_train_step(s, &x, 1, &y, NULL), ONNXTRAIN_E_USAGE, "closed");
    expect_error(onnxtrain_param_read(s, "fc3.bias", NULL, 0), ONNXTRAIN_E_USAGE, "closed");
    assert_int_equal(onnxtrain_param_count(s), -1);
    onnxtrain_session_close(s); /* twice: nothing */
    onnxtrain_session_free(s);
    onnxtrain_session_free(NULL);
    expect_error(onnxtrain_train_step(NULL, &x, 1, &y, NULL), ONNXTRAIN_E_USAGE, "session is NULL");
    assert_string_equal(onnxtrain_version(), "0.1.0");
}

/* options.tf32 is --tf32: it reaches the session's backend (a GPU's GEMMs read it);
 * the CPU has no TF32, so its steps are bitwise those without. */
static void test_tf32(void **state) {
    (void)state;
    double loss[2][STEPS];
    float w[2][10 * 128];
    for (int t = 0; t < 2; t++) {
        onnxtrain_options o;
        api_options(&o);
        o.tf32 = t;
        onnxtrain_session *s = open_mlp(&o);
        assert_int_equal(s->o.tf32, t == 1);
        for (int i = 0; i < STEPS; i++) {
            onnxtrain_tensor x, y;
            batch_of(i, &x, &y);
            assert_int_equal(onnxtrain_train_step(s, &x, 1, &y, &loss[t][i]), ONNXTRAIN_OK);
        }
        assert_non_null(s->ts);
        assert_int_equal(s->ts->be->tf32, t == 1);
        assert_int_equal(onnxtrain_param_read(s, "fc3.weight", w[t], sizeof w[t]), ONNXTRAIN_OK);
        onnxtrain_session_free(s);
    }
    assert_memory_equal(loss[0], loss[1], sizeof loss[0]);
    assert_memory_equal(w[0], w[1], sizeof w[0]);
}

int main(void) {
    make_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steps_match_loop), cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_bad_input),        cmocka_unit_test(test_params_eval_plan),
        cmocka_unit_test(test_verify),           cmocka_unit_test(test_checkpoint_resume),
        cmocka_unit_test(test_lora),             cmocka_unit_test(test_closed_and_busy),
        cmocka_unit_test(test_tf32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
