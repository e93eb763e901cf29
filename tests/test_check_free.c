/* test_check_free.c — the NaN/Inf check without a read of the gradient (train/
 * train_check.c, issue 14): the block-visiting sum pass gives ot_grad_sum_sq's bits
 * and visits every block once; the max-|x| scan finds every non-finite value; a
 * training run that proves its GEMM gradients finite gives the bits (params, losses,
 * gradient norms) of the run that sums every gradient before the update, with the
 * sums taken by the optimizer kernels; and a gradient that overflows where the proof
 * cannot hold is still caught before any update and named as before. */
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
#include "kernels/cpu/grad_norm_sum.h"
#include "train/train_internal.h" /* hot_proven, opt_at, opt_ss: which path each gradient took */
#include "test_files.h"

#define SAMPLES OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_check_free_tmp"

/* ---- the kernels ------------------------------------------------------------- */

typedef struct visits {
    unsigned char *seen[3]; /* per gradient, per element: times visited */
    int fail_k;             /* the gradient whose first block's visit returns false (-1: none) */
} visits;

static bool count_visit(const void *user, int k, size_t lo, size_t hi) {
    const visits *v = user;
    for (size_t i = lo; i < hi; i++) v->seen[k][i]++;
    return !(k == v->fail_k && lo == 0);
}

static void test_visit_sums_bitwise(void **state) {
    (void)state;
    size_t n[3] = {300001, 4096, 77};
    float *g[3];
    uint64_t x = 99;
    for (int k = 0; k < 3; k++) {
        g[k] = malloc(n[k] * sizeof(float));
        for (size_t i = 0; i < n[k]; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            g[k][i] = ldexpf((float)(x >> 40) / (float)(1 << 24), (int)(x % 50) - 25) * ((x & 1) ? -1.0f : 1.0f);
        }
    }
    for (int threads = 1; threads <= 3; threads++) {
        for (int fail = -1; fail < 3; fail++) {
            visits v = {.fail_k = fail};
            for (int k = 0; k < 3; k++) v.seen[k] = calloc(n[k], 1);
            double ss[3];
            bool all = false;
            bool wanted[3] = {true, fail != 1, true}; /* a gradient not wanted keeps its slot */
            ss[1] = -1.0;
            assert_true(ot_grad_sum_sq_visit((const float *const *)g, n, 3, ss, wanted, threads, count_visit, &v, &all));
            assert_int_equal(all, fail < 0);
            for (int k = 0; k < 3; k++) {
                double want = wanted[k] ? ot_grad_sum_sq(g[k], n[k]) : -1.0;
                if (memcmp(&want, &ss[k], sizeof want))
                    fail_msg("threads %d: gradient %d: %.17g, want %.17g", threads, k, ss[k], want);
                for (size_t i = 0; i < n[k]; i++)
                    if (v.seen[k][i] != 1) fail_msg("threads %d: gradient %d element %zu visited %d times", threads, k, i, v.seen[k][i]);
                free(v.seen[k]);
            }
        }
    }
    for (int k = 0; k < 3; k++) free(g[k]);
}

static void test_max_abs_bits(void **state) {
    (void)state;
    enum { N = 1000 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)(i % 17) - 8.0f;
    for (size_t n = 0; n <= 70; n++) { /* every tail length around the vector width */
        float want = 0.0f;
        for (size_t i = 0; i < n; i++) want = fabsf(x[i]) > want ? fabsf(x[i]) : want;
        uint32_t b = ot_f32_max_abs_bits(x, n);
        float got;
        memcpy(&got, &b, sizeof got);
        assert_true(got == want);
    }
    const float bad[] = {NAN, INFINITY, -INFINITY, -NAN};
    for (int j = 0; j < 4; j++)
        for (int at = 0; at < N; at += 111) {
            float keep = x[at];
            x[at] = bad[j];
            assert_true(ot_f32_max_abs_bits(x, N) >= 0x7f800000u);
            assert_true(ot_f32_max_abs_bits(x, (size_t)at) < 0x7f800000u);
            x[at] = keep;
        }
    x[5] = -3.4e38f;
    assert_true(ot_f32_max_abs_bits(x, N) < 0x7f800000u);
}

/* ---- training runs ----------------------------------------------------------- */

typedef struct run {
    ot_train_result r;
    float *w;        /* every param after the run, in autodiff order */
    size_t w_bytes;
    int proven;      /* gradients proved finite in the last step */
    int from_kernel; /* of those, whose sum the optimizer kernel took, bitwise that of a pass */
    char msg[1024];  /* the error, when the run failed */
    ot_status st;
} run;

/* Set by test_norm_only_when_asked: the runs leave the norm out (the default). */
static bool g_no_norm;

/* Trains the model at path on d; clip > 0 makes the loop sum every gradient before
 * the update (the norm is needed for the clip), the path this file compares with:
 * 1e300 never clips (as a float it is Inf, so the clip factor is 1). */
static void train_run(const char *path, ot_dataset *d, ot_loss_kind loss, ot_optim_kind opt, double clip, int steps,
                      run *out) {
    ot_error err = {0};
    ot_model *m = NULL;
    memset(out, 0, sizeof *out);
    if (ot_model_load(path, NULL, &m, &err)) fail_msg("%s: %s", path, err.msg);
    ot_train_options o;
    ot_train_options_default(&o);
    o.n_threads = 2;
    o.no_shuffle = true;
    o.steps = steps;
    o.batch_size = 4;
    o.loss.kind = loss;
    const char *freeze[1] = {"^C$"};
    if (loss == OT_LOSS_OUTPUT) o.freeze = freeze, o.n_freeze = 1;
    ot_optim_config_default(&o.optim, opt);
    o.optim.lr = 0.01;
    o.optim.clip_grad_norm = clip;
    o.record_grad_norm = !g_no_norm; /* the norm compared below (--report-grad-norm) */
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, d, true, &s, &err)) fail_msg("%s: %s", path, err.msg);
    out->st = ot_train_run(s, d, NULL, NULL, &out->r, &err);
    snprintf(out->msg, sizeof out->msg, "%s", err.msg);
    const ot_autodiff_result *ad = ot_train_autodiff(s);
    for (int i = 0; s->hot_proven && i < ad->n_params; i++) {
        if (!s->hot_proven[i]) continue;
        out->proven++;
        double want = ot_grad_sum_sq(ot_executor_value_ptr(s->ex, ad->grads[i]), s->grad_off[i + 1] - s->grad_off[i]);
        if (s->opt_at[i] >= 0 && !memcmp(&want, &s->opt_ss[s->opt_at[i]], sizeof want)) out->from_kernel++;
    }
    for (int i = 0; i < ad->n_params; i++) out->w_bytes += s->g->values[ad->params[i]].nbytes;
    out->w = malloc(out->w_bytes + 1);
    size_t at = 0;
    for (int i = 0; i < ad->n_params; i++) {
        const ot_value *v = &s->g->values[ad->params[i]];
        const void *p = ot_executor_value_ptr(s->ex, ad->params[i]);
        memcpy((char *)out->w + at, p ? p : v->data, v->nbytes);
        at += v->nbytes;
    }
    ot_train_session_free(s);
    ot_model_free(m);
}

static void run_free(run *r) {
    ot_train_result_free(&r->r);
    free(r->w);
}

static void same_bits(const run *a, const run *b) {
    assert_int_equal(a->r.n_steps, b->r.n_steps);
    assert_memory_equal(a->r.loss, b->r.loss, sizeof(double) * (size_t)a->r.n_steps);
    assert_memory_equal(a->r.grad_norm, b->r.grad_norm, sizeof(double) * (size_t)a->r.n_steps);
    for (int64_t t = 0; t < a->r.n_steps; t++) assert_false(isnan(a->r.grad_norm[t]));
    assert_int_equal(a->w_bytes, b->w_bytes);
    assert_memory_equal(a->w, b->w, a->w_bytes);
}

static void load_mlp(ot_dataset *d) {
    ot_error err = {0};
    memset(d, 0, sizeof *d);
    if (ot_dataset_add(d, "", "input.npy", -1, test_npy(SAMPLES "mlp/input.npy"), &err) ||
        ot_dataset_add(d, OT_DATA_LABELS, "labels.npy", -1, test_npy(SAMPLES "mlp/labels.npy"), &err))
        fail_msg("%s", err.msg);
}

/* mlp (Gemm layers) with SGD and Adam: the proved run's bits are the summing run's,
 * and every proved gradient's sum came from its optimizer kernel. */
static void test_mlp_same_bits(void **state) {
    (void)state;
    ot_optim_kind opts[2] = {OT_OPTIM_SGD, OT_OPTIM_ADAM};
    for (int k = 0; k < 2; k++) {
        ot_dataset d;
        load_mlp(&d);
        run a, b;
        train_run(SAMPLES "mlp.onnx", &d, OT_LOSS_CROSS_ENTROPY, opts[k], 0.0, 3, &a);
        train_run(SAMPLES "mlp.onnx", &d, OT_LOSS_CROSS_ENTROPY, opts[k], 1e300, 3, &b);
        assert_int_equal(a.st, OT_OK);
        assert_int_equal(b.st, OT_OK);
        assert_true(a.proven > 0);
        assert_int_equal(a.from_kernel, a.proven);
        assert_int_equal(b.proven, 0); /* clipping needs the norm first: nothing proved */
        same_bits(&a, &b);
        run_free(&a), run_free(&b);
        ot_dataset_free(&d);
    }
}

/* y = sum(C * (x W)) with C frozen: dW = x^T (C 1) grows with x and C while the
 * loss stays finite (W is tiny), so x and C choose the path. */
static void write_scaled(const char *path, float c, float w) {
    mb *b = mb_new(17);
    int64_t xd[2] = {-1, 4}, wd[2] = {4, 3}, cd[1] = {1};
    const char *syms[2] = {"batch", NULL};
    mb_input(b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd, syms);
    float wv[12];
    for (int i = 0; i < 12; i++) wv[i] = w * (float)(i + 1);
    mb_init_f32(b, "W", 2, wd, wv);
    mb_init_f32(b, "C", 1, cd, &c);
    mb_node(b, "MatMul", "matmul", "x,W", "h");
    mb_node(b, "Mul", "scale", "h,C", "z");
    Onnx__NodeProto *r = mb_node(b, "ReduceSum", "sum", "z", "y");
    mb_attr_int(b, r, "keepdims", 0);
    mb_output(b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    assert_int_equal(mb_write(b, path), 0);
    mb_free(b);
}

static void scaled_data(ot_dataset *d, float x) {
    ot_error err = {0};
    int64_t dims[2] = {4, 4};
    ot_shape sh = ot_shape_make(2, dims);
    ot_tensor *t = ot_tensor_new(OT_F32, &sh);
    for (int i = 0; i < 16; i++) ((float *)t->data)[i] = x * (float)(1 + i % 3);
    memset(d, 0, sizeof *d);
    if (ot_dataset_add(d, "", "x.npy", -1, t, &err)) fail_msg("%s", err.msg);
}

/* Without --report-grad-norm and clipping no norm is taken: the history is NaN, the
 * check still proves or sums every gradient, and the params are the same bits. */
static void test_norm_only_when_asked(void **state) {
    (void)state;
    ot_dataset d;
    load_mlp(&d);
    run a, b;
    train_run(SAMPLES "mlp.onnx", &d, OT_LOSS_CROSS_ENTROPY, OT_OPTIM_SGD, 0.0, 3, &a);
    g_no_norm = true;
    train_run(SAMPLES "mlp.onnx", &d, OT_LOSS_CROSS_ENTROPY, OT_OPTIM_SGD, 0.0, 3, &b);
    g_no_norm = false;
    assert_int_equal(a.st, OT_OK);
    assert_int_equal(b.st, OT_OK);
    assert_true(b.proven > 0);
    assert_int_equal(b.from_kernel, 0); /* no kernel was asked for a sum */
    for (int64_t t = 0; t < b.r.n_steps; t++) assert_true(isnan(b.r.grad_norm[t]));
    assert_memory_equal(a.r.loss, b.r.loss, sizeof(double) * (size_t)a.r.n_steps);
    assert_int_equal(a.w_bytes, b.w_bytes);
    assert_memory_equal(a.w, b.w, a.w_bytes);
    run_free(&a), run_free(&b);
    ot_dataset_free(&d);
}

/* Three regimes of one MatMul gradient: proved (small inputs), not provable but
 * finite (summed before the update, the same bits), and overflowing (caught at the
 * boundary before any update, with the message of the summing run). */
static void test_gemm_paths(void **state) {
    (void)state;
    (void)system("mkdir -p " TMP);
    struct { float x, c; bool proved, ok; } cases[] = {
        {1.0f, 1.0f, true, true},       /* |dW| ~ 10: proved */
        {1e10f, 2e27f, false, true},    /* bound 4 x 3e10 x 2e27 > FLT_MAX / 4, |dW| 1.6e38: finite */
        {1e10f, 1e30f, false, false},   /* |dW| ~ 1e40: Inf */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char path[512];
        snprintf(path, sizeof path, TMP "/scaled%zu.onnx", k);
        write_scaled(path, cases[k].c, 1e-30f);
        ot_dataset d;
        scaled_data(&d, cases[k].x);
        run a, b;
        train_run(path, &d, OT_LOSS_OUTPUT, OT_OPTIM_SGD, 0.0, 1, &a);
        train_run(path, &d, OT_LOSS_OUTPUT, OT_OPTIM_SGD, 1e300, 1, &b);
        assert_int_equal(a.proven, cases[k].proved ? 1 : 0);
        assert_int_equal(a.from_kernel, a.proven);
        if (a.st != b.st) fail_msg("case %zu: %d (%s) vs %d (%s)", k, a.st, a.msg, b.st, b.msg);
        if (cases[k].ok) {
            assert_int_equal(a.st, OT_OK);
            same_bits(&a, &b);
        } else {
            assert_int_equal(a.st, OT_E_NUMERICS);
            assert_string_equal(a.msg, b.msg);
            assert_non_null(strstr(a.msg, "step 1"));
            assert_non_null(strstr(a.msg, "first to produce"));
            assert_non_null(strstr(a.msg, "backward pass"));
            assert_int_equal(a.r.n_steps, 0);
            assert_int_equal(a.w_bytes, b.w_bytes);
            assert_memory_equal(a.w, b.w, a.w_bytes); /* no update ran: the params as loaded */
        }
        run_free(&a), run_free(&b);
        ot_dataset_free(&d);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_visit_sums_bitwise),
        cmocka_unit_test(test_max_abs_bits),
        cmocka_unit_test(test_mlp_same_bits),
        cmocka_unit_test(test_norm_only_when_asked),
        cmocka_unit_test(test_gemm_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
