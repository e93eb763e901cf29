/* test_lowp_model.c — a model exported in float16 trains as it is (issue 27 part 2,
 * train/lowp_model.c): in the session its weights are float32 master params read
 * through a Cast to float16; every way the weights leave the session gives the
 * model's own dtype, the master rounded to nearest even (the give-back after
 * ot_train_run, the streamed save), while the C API's parameter access and
 * param_info speak of the float32 master; fp16 models get loss scaling by default. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api_internal.h"
#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "kernels/half_float.h"
#include "kernels/kernel.h"
#include "train/train.h"

#define TMP OT_BINARY_DIR "/test_lowp_model_tmp"
#define MODEL TMP "/fp16.onnx"
enum { N = 8, IN = 4, OUT = 3 };

static uint16_t xs[N * IN];
static int64_t ys[N];

static void fp16_init(mb *b, const char *name, int ndims, const int64_t *dims, const float *v, size_t n) {
    uint16_t *h = mb_alloc(b, n * 2);
    for (size_t i = 0; i < n; i++) h[i] = ot_hf_f32_to_f16(v[i]);
    Onnx__TensorProto *t = mb_tensor(b, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, ndims, dims);
    mb_raw(b, t, h, n * 2);
    mb_init(b, t);
}

/* y = x · W + b, all float16 */
static void write_model(void) {
    mkdir(TMP, 0777);
    mb *b = mb_new(13);
    float w[IN * OUT], bias[OUT] = {0.25f, -0.5f, 0.125f};
    for (int i = 0; i < IN * OUT; i++) w[i] = (float)((i * 5) % 7) / 7.0f - 0.4f;
    int64_t wd[2] = {IN, OUT}, bd[1] = {OUT}, xd[2] = {-1, IN};
    const char *syms[2] = {"batch", NULL};
    fp16_init(b, "W", 2, wd, w, IN * OUT);
    fp16_init(b, "b", 1, bd, bias, OUT);
    mb_input(b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, 2, xd, syms);
    mb_output(b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16);
    mb_node(b, "MatMul", "mm", "x,W", "h");
    mb_node(b, "Add", "add", "h,b", "y");
    assert_int_equal(mb_write(b, MODEL), 0);
    mb_free(b);
    for (int i = 0; i < N * IN; i++) xs[i] = ot_hf_f32_to_f16((float)((i * 3) % 11) / 11.0f - 0.5f);
    for (int i = 0; i < N; i++) ys[i] = i % OUT;
}

static ot_dataset make_data(void) {
    ot_error err = {0};
    ot_dataset d = {0};
    int64_t xd[2] = {N, IN}, yd[1] = {N};
    ot_shape sx = ot_shape_make(2, xd), sy = ot_shape_make(1, yd);
    ot_tensor *tx = ot_tensor_new(OT_F16, &sx), *ty = ot_tensor_new(OT_I64, &sy);
    memcpy(tx->data, xs, sizeof xs);
    memcpy(ty->data, ys, sizeof ys);
    assert_int_equal(ot_dataset_add(&d, "x", "x", -1, tx, &err), OT_OK);
    assert_int_equal(ot_dataset_add(&d, OT_DATA_LABELS, "labels", -1, ty, &err), OT_OK);
    return d;
}

/* The model's float16 bits of W equal the session's float32 master, rounded. */
static void assert_rounded(const uint16_t *h, const float *master, int n) {
    for (int i = 0; i < n; i++) assert_int_equal(h[i], ot_hf_f32_to_f16(master[i]));
}

static void test_masters_and_give_back(void **state) {
    (void)state;
    write_model();
    ot_error err = {0};
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    ot_model *m = NULL;
    assert_int_equal(ot_model_load(MODEL, &io, &m, &err), OT_OK);
    ot_dataset d = make_data();
    ot_train_options to;
    ot_train_options_default(&to);
    ot_optim_config_default(&to.optim, OT_OPTIM_SGD);
    to.optim.lr = 0.3;
    to.batch_size = N;
    to.steps = 3;
    to.no_shuffle = true;
    ot_train_session *ts = NULL;
    if (ot_train_session_new(m, &to, &d, true, &ts, &err)) fail_msg("%s", err.msg);
    ot_graph *g = ot_train_graph(ts);
    int w = ot_graph_find_value(g, "W");
    assert_true(w >= 0);
    assert_int_equal(g->values[w].dtype, OT_F32); /* the master */
    assert_int_equal(g->values[w].kind, OT_VK_PARAM);
    bool cast = false; /* read through a Cast to float16 */
    for (int k = 0; k < g->values[w].n_consumers; k++) {
        const ot_node *n = &g->nodes[g->values[w].consumers[k]];
        cast |= n->op == OT_OP_CAST && g->values[n->outputs[0]].dtype == OT_F16;
    }
    assert_true(cast);
    ot_train_result r;
    if (ot_train_run(ts, &d, NULL, NULL, &r, &err)) fail_msg("%s", err.msg);
    assert_true(r.loss[2] < r.loss[0]);
    ot_tensor *master = NULL;
    assert_int_equal(ot_train_get_value(ts, w, &master, &err), OT_OK);
    assert_int_equal(master->dtype, OT_F32);
    const ot_value *home = &m->graph->values[ot_graph_find_value(m->graph, "W")];
    assert_int_equal(home->dtype, OT_F16); /* the model keeps its dtype */
    assert_int_equal(home->nbytes, IN * OUT * 2);
    assert_non_null(home->data);
    assert_rounded(home->data, master->data, IN * OUT);
    /* the streamed save rounds the same way */
    assert_int_equal(ot_train_save_model(ts, TMP "/streamed.onnx", false, &err), OT_OK);
    ot_model *back = NULL;
    assert_int_equal(ot_model_load(TMP "/streamed.onnx", &io, &back, &err), OT_OK);
    const ot_value *bw = &back->graph->values[ot_graph_find_value(back->graph, "W")];
    assert_int_equal(bw->dtype, OT_F16);
    assert_memory_equal(bw->data, home->data, IN * OUT * 2);
    ot_model_free(back);
    ot_tensor_free(master);
    ot_train_result_free(&r);
    ot_train_session_free(ts);
    ot_dataset_free(&d);
    ot_model_free(m);
}

static void test_c_api(void **state) {
    (void)state;
    write_model();
    onnxtrain_options o;
    onnxtrain_options_init(&o);
    o.optimizer = "sgd";
    o.lr = 0.3;
    onnxtrain_session *s = NULL;
    assert_int_equal(onnxtrain_session_open(MODEL, &o, &s), ONNXTRAIN_OK);
    int64_t xshape[2] = {N, IN}, yshape[1] = {N};
    onnxtrain_tensor x = {"x", ONNXTRAIN_FLOAT16, 2, xshape, xs, sizeof xs};
    onnxtrain_tensor y = {NULL, ONNXTRAIN_INT64, 1, yshape, ys, sizeof ys};
    double loss = 0, scale = 0;
    int64_t skipped = -1;
    if (onnxtrain_train_step(s, &x, 1, &y, &loss) != ONNXTRAIN_OK) fail_msg("%s", onnxtrain_last_error());
    assert_int_equal(onnxtrain_loss_scale(s, &scale, &skipped), ONNXTRAIN_OK);
    assert_true(scale > 1.0); /* fp16 model: loss scaling by default */
    onnxtrain_dtype dt;
    int rank = 0;
    int64_t shape[2];
    assert_int_equal(onnxtrain_param_info(s, "W", &dt, &rank, shape), ONNXTRAIN_OK);
    assert_int_equal(dt, ONNXTRAIN_FLOAT32); /* the master weight */
    float w[IN * OUT];
    assert_int_equal(onnxtrain_param_read(s, "W", w, sizeof w), ONNXTRAIN_OK);
    assert_int_equal(onnxtrain_save_model(s, TMP "/api.onnx", 0), ONNXTRAIN_OK);
    ot_error err = {0};
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    ot_model *back = NULL;
    assert_int_equal(ot_model_load(TMP "/api.onnx", &io, &back, &err), OT_OK);
    const ot_value *bw = &back->graph->values[ot_graph_find_value(back->graph, "W")];
    assert_int_equal(bw->dtype, OT_F16);
    assert_rounded(bw->data, w, IN * OUT);
    ot_model_free(back);
    onnxtrain_session_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_masters_and_give_back),
        cmocka_unit_test(test_c_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
