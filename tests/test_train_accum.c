/* test_train_accum.c — gradient accumulation in device memory (--accum K): the summed
 * gradients live in accumulators in the arena (ot_backend.accumulate_f32) and the loop
 * keeps no host copy of any gradient. Checked here:
 *   - K = 2 and 3 on mlp, resnet and tinygpt give bitwise the weights and losses of the
 *     host algorithm the loop used before (a reference written out below from `grad`
 *     runs: float adds into a zeroed accumulator in element order, the mean through
 *     the optimizer's grad scale, clipping on the summed gradient's norm), over two
 *     steps, so the accumulator is also empty again after a step;
 *   - the device path (scan_f32, as on a GPU, driven on the CPU) gives the same bits;
 *   - no gradient or accumulator byte is ever copied to the host (copy_out counted);
 *   - a non-finite gradient with --accum is still reported naming the node and its
 *     pass, the same on both paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures/onnx_builder.h"
#include "kernels/cpu/optim_cpu.h" /* ot_sgd_update: the SgdStep kernel's maths */
#include "train/train_internal.h"  /* the session's backend, accumulators and plan */
#include "test_files.h"

#define SAMPLES OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_train_accum_tmp"

typedef struct cfg {
    const char *model, *dir;
    int64_t B, K, steps;
    double lr, clip;
    ot_optim_kind opt;
    bool device; /* ot_train_options.scan_on_device */
} cfg;

typedef struct params {
    int n;
    char **name;
    float **w;
    size_t *nbytes;
} params;

static void params_free(params *p) {
    for (int i = 0; i < p->n; i++) free(p->name[i]), free(p->w[i]);
    free(p->name);
    free(p->w);
    free(p->nbytes);
    memset(p, 0, sizeof *p);
}

static ot_tensor *rows(const ot_tensor *t, int64_t first, int64_t n) {
    ot_shape sh = t->shape;
    sh.dim[0] = n;
    ot_tensor *r = ot_tensor_new(t->dtype, &sh);
    size_t row = t->nbytes / (size_t)t->shape.dim[0];
    memcpy(r->data, (const char *)t->data + (size_t)first * row, (size_t)n * row);
    return r;
}

/* The sample's input.npy and labels.npy, rows [first, first + n) (n 0: all). */
static void load_data(const char *dir, int64_t first, int64_t n, ot_dataset *d) {
    ot_error err = {0};
    ot_tensor *x = test_npy(SAMPLES "%s/input.npy", dir), *l = test_npy(SAMPLES "%s/labels.npy", dir);
    if (n) {
        ot_tensor *xs = rows(x, first, n), *ls = rows(l, first, n);
        ot_tensor_free(x);
        ot_tensor_free(l);
        x = xs, l = ls;
    }
    memset(d, 0, sizeof *d);
    if (ot_dataset_add(d, "", "input.npy", -1, x, &err) || ot_dataset_add(d, OT_DATA_LABELS, "labels.npy", -1, l, &err))
        fail_msg("%s", err.msg);
}

static void options(const cfg *c, ot_train_options *o) {
    ot_train_options_default(o);
    o->record_grad_norm = true; /* the norms are compared */
    o->n_threads = 1;
    o->no_shuffle = true;
    o->drop_last = true; /* the host algorithm below visits full batches only */
    o->steps = c->steps;
    o->batch_size = c->B;
    o->accum = c->K;
    o->seed = 5;
    ot_optim_config_default(&o->optim, c->opt);
    o->optim.lr = c->lr;
    o->optim.momentum = 0.0;
    o->optim.weight_decay = 0.0;
    o->optim.clip_grad_norm = c->clip;
    o->scan_on_device = c->device;
}

/* Trains c; the tuned params (autodiff order) and the result. */
static void train(const cfg *c, params *out, ot_train_result *r) {
    ot_error err = {0};
    ot_model *m = test_model(SAMPLES "%s", c->model);
    ot_dataset d;
    load_data(c->dir, 0, 0, &d);
    ot_train_options o;
    options(c, &o);
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, &d, true, &s, &err)) fail_msg("%s: %s", c->model, err.msg);
    if (ot_train_run(s, &d, NULL, NULL, r, &err)) fail_msg("%s: %s", c->model, err.msg);
    const ot_autodiff_result *ad = ot_train_autodiff(s);
    out->n = ad->n_params;
    out->name = calloc((size_t)out->n, sizeof *out->name);
    out->w = calloc((size_t)out->n, sizeof *out->w);
    out->nbytes = calloc((size_t)out->n, sizeof *out->nbytes);
    for (int i = 0; i < out->n; i++) {
        const ot_value *v = &m->graph->values[ad->params[i]];
        out->name[i] = strdup(v->name);
        out->nbytes[i] = v->nbytes;
        out->w[i] = malloc(v->nbytes);
        memcpy(out->w[i], v->data, v->nbytes);
    }
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* One `grad` run (forward + backward, no optimizer) of c's model with weights w on
 * rows [first, first + B): each gradient into g[i] (floats), the loss into *loss. */
static void grad_run(const cfg *c, const params *w, int64_t first, float **g, double *loss) {
    ot_error err = {0};
    ot_model *m = test_model(SAMPLES "%s", c->model);
    for (int i = 0; i < w->n; i++) {
        ot_value *v = &m->graph->values[ot_graph_find_value(m->graph, w->name[i])];
        assert_int_equal(v->nbytes, w->nbytes[i]);
        memcpy(v->data, w->w[i], v->nbytes);
    }
    ot_dataset d;
    load_data(c->dir, first, c->B, &d);
    ot_train_options o;
    options(c, &o);
    o.accum = 1;
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, &d, false, &s, &err) || ot_train_grad_once(s, &d, loss, &err))
        fail_msg("%s: %s", c->model, err.msg);
    const ot_autodiff_result *ad = ot_train_autodiff(s);
    assert_int_equal(ad->n_params, w->n);
    for (int i = 0; i < w->n; i++) {
        assert_string_equal(m->graph->values[ad->params[i]].name, w->name[i]);
        ot_tensor *t = NULL;
        if (ot_train_get_grad(s, i, &t, &err)) fail_msg("%s", err.msg);
        assert_int_equal(t->nbytes, w->nbytes[i]);
        memcpy(g[i], t->data, t->nbytes);
        ot_tensor_free(t);
    }
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* The host algorithm the loop ran before the accumulators moved into the arena
 * (train_loop.c before this change), applied to `w` (the initial weights) for c's
 * steps of plain SGD; loss[t] as the result reports it. */
static void reference(const cfg *c, params *w, double *loss) {
    ot_tensor *x = test_npy(SAMPLES "%s/input.npy", c->dir);
    int64_t per_epoch = x->shape.dim[0] / c->B;
    ot_tensor_free(x);
    float **g = calloc((size_t)w->n, sizeof *g), **acc = calloc((size_t)w->n, sizeof *acc);
    for (int i = 0; i < w->n; i++) {
        g[i] = malloc(w->nbytes[i]);
        acc[i] = calloc(1, w->nbytes[i]);
    }
    for (int64_t t = 0; t < c->steps; t++) {
        double loss_sum = 0, total = 0;
        for (int64_t k = 0; k < c->K; k++) {
            double l = 0;
            grad_run(c, w, ((t * c->K + k) % per_epoch) * c->B, g, &l);
            loss_sum += l;
            for (int i = 0; i < w->n; i++) {
                size_t n = w->nbytes[i] / sizeof(float);
                if (k < c->K - 1) {
                    for (size_t j = 0; j < n; j++) acc[i][j] += g[i][j];
                    continue;
                }
                for (size_t j = 0; j < n; j++) {
                    g[i][j] += acc[i][j];
                    acc[i][j] = 0.0f;
                }
                total += ot_grad_sum_sq(g[i], n);
            }
        }
        loss[t] = loss_sum / (double)c->K;
        double scale = 1.0 / (double)c->K, norm = sqrt(total) / (double)c->K;
        if (c->clip > 0) scale = (double)((float)scale * ot_clip_scale(norm, c->clip));
        for (int i = 0; i < w->n; i++)
            ot_sgd_update(w->w[i], g[i], NULL, w->nbytes[i] / sizeof(float), c->lr, (float)scale, 0.0f, 0.0f, false, 1);
    }
    for (int i = 0; i < w->n; i++) free(g[i]), free(acc[i]);
    free(g);
    free(acc);
}

static void same_params(const char *what, const params *a, const params *b) {
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        assert_int_equal(a->nbytes[i], b->nbytes[i]);
        if (memcmp(a->w[i], b->w[i], a->nbytes[i])) fail_msg("%s: param '%s' differs", what, a->name[i]);
    }
}

/* K = 2 and 3, with and without clipping, on the three sample families: the arena's
 * accumulation is bitwise the host algorithm's. */
static void test_matches_host_algorithm(void **state) {
    (void)state;
    const cfg cases[] = {
        {"mlp.onnx", "mlp", 2, 3, 2, 0.1, 0.0, OT_OPTIM_SGD, false},
        {"mlp.onnx", "mlp", 2, 2, 2, 0.1, 0.05, OT_OPTIM_SGD, false}, /* clipping active */
        {"resnet.onnx", "resnet", 8, 3, 2, 0.05, 0.0, OT_OPTIM_SGD, false},
        {"resnet.onnx", "resnet", 8, 2, 2, 0.05, 0.5, OT_OPTIM_SGD, false},
        {"tinygpt_nodrop.onnx", "tinygpt", 2, 3, 2, 0.1, 1.0, OT_OPTIM_SGD, false},
        {"tinygpt_nodrop.onnx", "tinygpt", 2, 2, 2, 0.1, 0.0, OT_OPTIM_SGD, true}, /* the device path */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const cfg *c = &cases[k];
        char what[128];
        snprintf(what, sizeof what, "%s --accum %lld%s%s", c->model, (long long)c->K, c->clip > 0 ? " clipped" : "",
                 c->device ? " (device path)" : "");
        params got = {0}, want = {0};
        ot_train_result r;
        train(c, &got, &r);
        /* the initial weights, under the same names */
        ot_model *m = test_model(SAMPLES "%s", c->model);
        want.n = got.n;
        want.name = calloc((size_t)got.n, sizeof *want.name);
        want.w = calloc((size_t)got.n, sizeof *want.w);
        want.nbytes = calloc((size_t)got.n, sizeof *want.nbytes);
        for (int i = 0; i < got.n; i++) {
            const ot_value *v = &m->graph->values[ot_graph_find_value(m->graph, got.name[i])];
            want.name[i] = strdup(got.name[i]);
            want.nbytes[i] = v->nbytes;
            want.w[i] = malloc(v->nbytes);
            memcpy(want.w[i], v->data, v->nbytes);
        }
        ot_model_free(m);
        double loss[4];
        reference(c, &want, loss);
        assert_int_equal(r.n_steps, c->steps);
        for (int64_t t = 0; t < c->steps; t++)
            if (memcmp(&loss[t], &r.loss[t], sizeof(double)))
                fail_msg("%s: step %lld loss %.17g, host algorithm %.17g", what, (long long)t + 1, r.loss[t], loss[t]);
        same_params(what, &got, &want);
        ot_train_result_free(&r);
        params_free(&got);
        params_free(&want);
    }
}

/* The device path (what a GPU runs: scan_f32 and accumulate_f32 through the backend)
 * against the CPU's in-place reads, with Dropout, Adam, BatchNorm state, clipping.
 * With K = 1 the in-place norm is the sums taken right after each gradient's producer
 * (train_loop.c's after-step hook), the device path's those of the final gradients:
 * the same bits say no later node wrote a gradient. */
static void test_device_path_same(void **state) {
    (void)state;
    const cfg cases[] = {
        {"mlp.onnx", "mlp", 2, 3, 3, 0.01, 0.5, OT_OPTIM_ADAM, false},
        {"resnet.onnx", "resnet", 8, 2, 2, 0.003, 0.0, OT_OPTIM_ADAMW, false},
        {"tinygpt.onnx", "tinygpt", 2, 3, 2, 0.01, 1.0, OT_OPTIM_ADAMW, false},
        {"mlp.onnx", "mlp", 2, 1, 3, 0.01, 0.5, OT_OPTIM_ADAM, false},
        {"resnet.onnx", "resnet", 8, 1, 2, 0.003, 0.0, OT_OPTIM_ADAMW, false},
        {"tinygpt.onnx", "tinygpt", 2, 1, 3, 0.01, 1.0, OT_OPTIM_ADAMW, false},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cfg host = cases[k], dev = cases[k];
        dev.device = true;
        params a = {0}, b = {0};
        ot_train_result ra, rb;
        train(&host, &a, &ra);
        train(&dev, &b, &rb);
        assert_int_equal(ra.n_steps, rb.n_steps);
        assert_memory_equal(ra.loss, rb.loss, sizeof(double) * (size_t)ra.n_steps);
        assert_memory_equal(ra.grad_norm, rb.grad_norm, sizeof(double) * (size_t)ra.n_steps);
        for (int64_t t = 0; t < ra.n_steps; t++) assert_false(isnan(ra.grad_norm[t]));
        same_params(host.model, &a, &b);
        params_free(&a);
        params_free(&b);
        ot_train_result_free(&ra);
        ot_train_result_free(&rb);
    }
}

/* ---- no host copy of a gradient ------------------------------------------------- */

/* The arena ranges that hold gradients and accumulators, and what copy_out read of
 * them; the backend's copy_out is wrapped (the test's one backend, one session). */
typedef struct watch {
    ot_status (*copy_out)(ot_backend *be, void *dst, const void *src, size_t n, ot_error *err);
    const char *lo[256], *hi[256];
    int n;
    size_t bytes_read, calls;
} watch;
static watch W;

static ot_status counting_copy_out(ot_backend *be, void *dst, const void *src, size_t n, ot_error *err) {
    const char *a = src, *b = a + n;
    W.calls++;
    for (int i = 0; i < W.n; i++)
        if (a < W.hi[i] && b > W.lo[i]) W.bytes_read += n;
    return W.copy_out(be, dst, src, n, err);
}

static void test_no_host_gradient_copy(void **state) {
    (void)state;
    ot_error err = {0};
    for (int device = 0; device < 2; device++) {
        cfg c = {"tinygpt.onnx", "tinygpt", 2, 3, 2, 0.01, 1.0, OT_OPTIM_ADAM, device == 1};
        ot_model *m = test_model(SAMPLES "%s", c.model);
        ot_dataset d;
        load_data(c.dir, 0, 0, &d);
        ot_train_options o;
        options(&c, &o);
        ot_train_session *s = NULL;
        if (ot_train_session_new(m, &o, &d, true, &s, &err)) fail_msg("%s", err.msg);
        const ot_plan *p = ot_train_plan(s);
        memset(&W, 0, sizeof W);
        assert_non_null(s->accum_ids);
        assert_true(2 * s->ad.n_params <= 256);
        for (int i = 0; i < s->ad.n_params; i++) {
            int v[2] = {s->ad.grads[i], s->accum_ids[i]};
            for (int k = 0; k < 2; k++) {
                /* both pinned in the arena: the accumulator with the optimizer state */
                assert_true(p->values[v[k]].pinned);
                assert_int_equal(p->values[v[k]].category, k ? OT_MEM_OPT_STATE : OT_MEM_GRADIENTS);
                W.lo[W.n] = ot_executor_value_ptr(s->ex, v[k]);
                W.hi[W.n] = W.lo[W.n] + p->values[v[k]].nbytes;
                W.n++;
            }
        }
        W.copy_out = s->be->copy_out;
        s->be->copy_out = counting_copy_out;
        ot_train_result r;
        if (ot_train_run(s, &d, NULL, NULL, &r, &err)) fail_msg("%s", err.msg);
        assert_true(W.calls > 0); /* the loss, the running statistics, the weights at the end */
        assert_int_equal(W.bytes_read, 0);
        assert_null(s->scan_buf); /* float32 only: nothing went through the scan buffer */
        for (int i = 0; i < s->ad.n_params; i++) { /* empty again after the last step */
            const float *acc = ot_executor_value_ptr(s->ex, s->accum_ids[i]);
            for (size_t j = 0; j < p->values[s->accum_ids[i]].nbytes / sizeof(float); j++)
                if (acc[j] != 0.0f) fail_msg("accumulator %d is not zero after the run", i);
        }
        s->be->copy_out = W.copy_out;
        ot_train_result_free(&r);
        ot_train_session_free(s);
        ot_dataset_free(&d);
        ot_model_free(m);
    }
    /* without --accum no accumulator is planned */
    cfg c = {"mlp.onnx", "mlp", 2, 1, 1, 0.01, 0.0, OT_OPTIM_SGD, false};
    ot_model *m = test_model(SAMPLES "%s", c.model);
    ot_dataset d;
    load_data(c.dir, 0, 0, &d);
    ot_train_options o;
    options(&c, &o);
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, &d, true, &s, &err)) fail_msg("%s", err.msg);
    assert_null(s->accum_ids);
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* ---- numerics under accumulation ------------------------------------------------- */

/* x [batch,4] -> MatMul W (identity) -> h -> sqrt(h - h): 0 forward, -Inf in the
 * gradient of the Sqrt (dY / (2Y)); or -> Log: NaN forward on negative inputs. */
static void write_model(const char *path, bool log) {
    mb *b = mb_new(17);
    int64_t xd[2] = {-1, 4}, wd[2] = {4, 4};
    const char *syms[2] = {"batch", NULL};
    mb_input(b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd, syms);
    float w[16] = {0};
    for (int i = 0; i < 4; i++) w[i * 5] = 1.0f;
    mb_init_f32(b, "W", 2, wd, w);
    mb_node(b, "MatMul", "matmul", "x,W", "h");
    if (log) {
        mb_node(b, "Log", "log_node", "h", "y");
    } else {
        mb_node(b, "Sub", "sub_node", "h,h", "z");
        mb_node(b, "Sqrt", "sqrt_node", "z", "y");
    }
    mb_output(b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    assert_int_equal(mb_write(b, path), 0);
    mb_free(b);
}

/* Trains `path` (mse on 8 samples of x = -1 - i, targets 1) with --accum 2; the status
 * and message. */
static ot_status train_numerics(const char *path, bool device, double lr, char *msg, size_t cap) {
    ot_error err = {0};
    ot_model *m = test_model("%s", path);
    int64_t dims[2] = {8, 4};
    ot_shape sh = ot_shape_make(2, dims);
    ot_tensor *x = ot_tensor_new(OT_F32, &sh), *t = ot_tensor_new(OT_F32, &sh);
    for (int i = 0; i < 32; i++) {
        ((float *)x->data)[i] = -1.0f - (float)i;
        ((float *)t->data)[i] = 1.0f;
    }
    ot_dataset d;
    memset(&d, 0, sizeof d);
    if (ot_dataset_add(&d, "", "nx.npy", -1, x, &err) || ot_dataset_add(&d, OT_DATA_LABELS, "nt.npy", -1, t, &err))
        fail_msg("%s", err.msg);
    ot_train_options o;
    ot_train_options_default(&o);
    o.loss.kind = OT_LOSS_MSE;
    o.batch_size = 4;
    o.accum = 2;
    o.steps = 2;
    o.optim.lr = lr;
    o.scan_on_device = device;
    ot_train_session *s = NULL;
    ot_status st = ot_train_session_new(m, &o, &d, true, &s, &err);
    ot_train_result r = {0};
    if (!st) st = ot_train_run(s, &d, NULL, NULL, &r, &err);
    snprintf(msg, cap, "%s", st ? err.msg : "");
    ot_train_result_free(&r);
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
    return st;
}

static void test_nan_named_with_accum(void **state) {
    (void)state;
    write_model(TMP "/sqrt.onnx", false);
    write_model(TMP "/log.onnx", true);
    char a[1024], b[1024];
    for (int device = 0; device < 2; device++) {
        char *msg = device ? b : a;
        assert_int_equal(train_numerics(TMP "/sqrt.onnx", device, 0.01, msg, sizeof a), OT_E_NUMERICS);
        if (!strstr(msg, "training step 1: node 'sqrt_node/grad") || !strstr(msg, "backward pass"))
            fail_msg("sqrt: %s", msg);
    }
    assert_string_equal(a, b);
    for (int device = 0; device < 2; device++) {
        char *msg = device ? b : a;
        assert_int_equal(train_numerics(TMP "/log.onnx", device, 0.01, msg, sizeof a), OT_E_NUMERICS);
        if (!strstr(msg, "training step 1: node 'log_node' (Log, forward pass")) fail_msg("log: %s", msg);
    }
    assert_string_equal(a, b);
}

/* An update that overflows (every gradient finite): named after the optimizer phase,
 * at the step whose last micro-batch applies it. */
static void test_update_overflow_with_accum(void **state) {
    (void)state;
    char a[1024], b[1024];
    for (int device = 0; device < 2; device++) {
        cfg c = {"mlp.onnx", "mlp", 2, 2, 3, 1e39, 0.0, OT_OPTIM_SGD, device == 1};
        ot_error err = {0};
        ot_model *m = test_model(SAMPLES "%s", c.model);
        ot_dataset d;
        load_data(c.dir, 0, 0, &d);
        ot_train_options o;
        options(&c, &o);
        ot_train_session *s = NULL;
        if (ot_train_session_new(m, &o, &d, true, &s, &err)) fail_msg("%s", err.msg);
        ot_train_result r = {0};
        assert_int_equal(ot_train_run(s, &d, NULL, NULL, &r, &err), OT_E_NUMERICS);
        snprintf(device ? b : a, sizeof a, "%s", err.msg);
        if (!strstr(err.msg, "training step 1: node 'fc1.weight/SgdStep' (SgdStep, optimizer pass") ||
            !strstr(err.msg, "param 'fc1.weight'"))
            fail_msg("%s", err.msg);
        ot_train_result_free(&r);
        ot_train_session_free(s);
        ot_dataset_free(&d);
        ot_model_free(m);
    }
    assert_string_equal(a, b);
}

static int setup(void **state) {
    (void)state;
    return system("mkdir -p " TMP) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_host_algorithm),
        cmocka_unit_test(test_device_path_same),
        cmocka_unit_test(test_no_host_gradient_copy),
        cmocka_unit_test(test_nan_named_with_accum),
        cmocka_unit_test(test_update_overflow_with_accum),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
