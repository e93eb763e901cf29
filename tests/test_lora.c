/* test_lora.c — LoRA (autodiff/lora.h, train/lora_session.c): which weights the
 * default rule and the globs adapt on the tinygpt sample; the adapter gradients
 * (and the base weight's, through the rewritten graph) against finite differences
 * for MatMul, a Transpose'd weight and a Gemm with transB and alpha; and a training
 * session: step 0 equals the base model, the loss falls, only the adapters train
 * (the base weights come back bitwise unchanged, no gradient or optimizer state for
 * them), and every remat policy gives bitwise the same adapters and gradients. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/lora.h"
#include "grad_check.h"
#include "kernels/kernel.h"
#include "test_files.h"
#include "train/train.h"

#define SAMPLES OT_SOURCE_DIR "/samples/"

static const char *why_of(const ot_graph *g, const char **why, const char *name) {
    int v = ot_graph_find_value(g, name);
    assert_true(v >= 0);
    return why[v];
}

static void test_rule_tinygpt(void **state) {
    (void)state;
    ot_model *m = test_model(SAMPLES "tinygpt.onnx");
    const ot_graph *g = m->graph;
    const char **why = calloc((size_t)g->n_values, sizeof *why);
    ot_error err = {0};
    ot_lora_options o = {.rank = 4};
    assert_int_equal(ot_lora_targets(g, &o, why, &err), OT_OK);
    int n = 0;
    for (int v = 0; v < g->n_values; v++) n += why[v] == NULL;
    assert_int_equal(n, 8); /* qkv, proj, mlp.0, mlp.2 of both blocks */
    assert_null(why_of(g, why, "blocks.1.mlp.2.weight"));
    assert_non_null(strstr(why_of(g, why, "head.weight"), "head"));
    assert_non_null(strstr(why_of(g, why, "tok.weight"), "Gather"));
    assert_non_null(why_of(g, why, "blocks.0.attn.qkv.bias"));
    const char *globs[] = {"head.*", "*.attn.proj.weight"};
    o.targets = globs;
    o.n_targets = 2;
    assert_int_equal(ot_lora_targets(g, &o, why, &err), OT_OK);
    n = 0;
    for (int v = 0; v < g->n_values; v++) n += why[v] == NULL;
    assert_int_equal(n, 3);
    assert_null(why_of(g, why, "head.weight"));
    const char *none[] = {"*.lm_head*"};
    o.targets = none;
    o.n_targets = 1;
    assert_int_equal(ot_lora_targets(g, &o, why, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "*.lm_head*"));
    free(why);
    ot_model_free(m);
}

/* The head is judged against the output the loss reads: y = Relu(Tanh(x·W1)·W2)
 * with h = x·W1 also an output (as a KV cache is): W2 is the head, W1 is not. */
static void test_rule_head(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 5;
    int64_t xd[2] = {3, 4}, wd[2] = {4, 4};
    int X = gc_param(g, "X", 2, xd, &rng, -1, 1, false);
    int x = gc_val(g, "x", OT_F32, 2, xd), h = gc_val(g, "h", OT_F32, 2, xd), t = gc_val(g, "t", OT_F32, 2, xd);
    int y = gc_val(g, "y", OT_F32, 2, xd), z = gc_val(g, "z", OT_F32, 2, xd);
    int W1 = gc_param(g, "W1", 2, wd, &rng, -1, 1, false), W2 = gc_param(g, "W2", 2, wd, &rng, -1, 1, false);
    gc_op(g, OT_OP_TANH, &X, 1, &x, 1);
    int i1[2] = {x, W1}, i2[2] = {t, W2};
    gc_op(g, OT_OP_MATMUL, i1, 2, &h, 1);
    gc_op(g, OT_OP_TANH, &h, 1, &t, 1);
    gc_op(g, OT_OP_MATMUL, i2, 2, &y, 1);
    gc_op(g, OT_OP_RELU, &y, 1, &z, 1);
    g->outputs = realloc(g->outputs, 2 * sizeof(int));
    g->outputs[0] = z;
    g->outputs[1] = h;
    g->n_outputs = 2;
    const char **why = calloc((size_t)g->n_values, sizeof *why);
    ot_error err = {0};
    ot_lora_options o = {.rank = 2};
    assert_int_equal(ot_lora_targets(g, &o, why, &err), OT_OK);
    assert_null(why[W1]);
    assert_non_null(why[W2]);
    assert_non_null(strstr(why[W2], "head"));
    assert_non_null(why[X]); /* read by Tanh */
    o.output = "h"; /* a loss on h: W1 is the head, W2 is adapted */
    assert_int_equal(ot_lora_targets(g, &o, why, &err), OT_OK);
    assert_non_null(why[W1]);
    assert_null(why[W2]);
    free(why);
    ot_graph_free(g);
}

static void test_parse(void **state) {
    (void)state;
    ot_lora_options o = {0};
    ot_error err = {0};
    assert_int_equal(ot_lora_parse("8", &o, &err), OT_OK);
    assert_int_equal(o.rank, 8);
    assert_true(ot_lora_scale(&o) == 1.0);
    assert_int_equal(ot_lora_parse("4:16", &o, &err), OT_OK);
    assert_true(ot_lora_scale(&o) == 4.0);
    assert_int_equal(ot_lora_parse("0", &o, &err), OT_E_USAGE);
    assert_int_equal(ot_lora_parse("4:", &o, &err), OT_E_USAGE);
    assert_int_equal(ot_lora_parse("4:-1", &o, &err), OT_E_USAGE);
    assert_int_equal(ot_lora_parse("x", &o, &err), OT_E_USAGE);
}

/* Gives A and B random values (B is zero after the rewrite, which would hide A's
 * gradient). */
static void randomize_adapters(ot_graph *g, const ot_lora_result *r, uint32_t *rng) {
    for (int k = 0; k < r->n; k++)
        for (int i = 0; i < 2; i++) {
            ot_value *v = &g->values[i ? r->v[k].b : r->v[k].a];
            for (size_t e = 0; e < v->nbytes / sizeof(float); e++) ((float *)v->data)[e] = 2 * gc_rand(rng) - 1;
        }
}

/* x = Tanh(X) (an activation, as adapters need), y = x·W in one of three forms, the
 * LoRA rewrite with rank 2 and alpha 3, then finite differences of every param. */
enum { FORM_MATMUL, FORM_TRANSPOSE, FORM_GEMM };

static void check_form(int form) {
    ot_graph *g = gc_graph();
    uint32_t rng = 41 + (uint32_t)form;
    int64_t K = 4, N = 5;
    int64_t x3[3] = {2, 3, K}, x2[2] = {3, K}, y3[3] = {2, 3, N}, y2[2] = {3, N};
    bool gemm = form == FORM_GEMM;
    int X = gc_param(g, "X", gemm ? 2 : 3, gemm ? x2 : x3, &rng, -1, 1, false);
    int x = gc_val(g, "x", OT_F32, gemm ? 2 : 3, gemm ? x2 : x3);
    gc_op(g, OT_OP_TANH, &X, 1, &x, 1);
    int64_t wd[2] = {form == FORM_MATMUL ? K : N, form == FORM_MATMUL ? N : K};
    int W = gc_param(g, "W", 2, wd, &rng, -1, 1, false);
    int y = gc_val(g, "Y", OT_F32, gemm ? 2 : 3, gemm ? y2 : y3);
    int w_in = W;
    if (form == FORM_TRANSPOSE) {
        int64_t td[2] = {K, N};
        w_in = gc_val(g, "Wt", OT_F32, 2, td);
        gc_op(g, OT_OP_TRANSPOSE, &W, 1, &w_in, 1);
    }
    int in[2] = {x, w_in};
    int n = gc_op(g, gemm ? OT_OP_GEMM : OT_OP_MATMUL, in, 2, &y, 1);
    if (gemm) {
        ot_node_set_attr_int(&g->nodes[n], "transB", 1);
        ot_node_set_attr_float(&g->nodes[n], "alpha", 0.5f);
    }
    ot_lora_options o = {.rank = 2, .alpha = 3};
    ot_lora_result r;
    ot_error err = {0};
    if (ot_lora_apply(g, &o, &r, &err)) fail_msg("%s", err.msg);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.v[0].in, K);
    assert_int_equal(r.v[0].out, N);
    assert_int_equal(r.v[0].transposed, form != FORM_MATMUL);
    randomize_adapters(g, &r, &rng);
    assert_int_equal(gc_check1(g, y), 0);
    ot_lora_result_free(&r);
    ot_graph_free(g);
}

static void test_fd_matmul(void **state) { (void)state; check_form(FORM_MATMUL); }
static void test_fd_transpose(void **state) { (void)state; check_form(FORM_TRANSPOSE); }
static void test_fd_gemm(void **state) { (void)state; check_form(FORM_GEMM); }

/* ---- sessions on tinygpt ---------------------------------------------------------- */

static void load_data(ot_dataset *d) {
    ot_error err = {0};
    memset(d, 0, sizeof *d);
    ot_tensor *x = test_npy(SAMPLES "data/tinygpt_tokens.npy"), *y = test_npy(SAMPLES "data/tinygpt_labels.npy");
    if (ot_dataset_add(d, "", "tokens.npy", -1, x, &err) || ot_dataset_add(d, OT_DATA_LABELS, "labels.npy", -1, y, &err))
        fail_msg("%s", err.msg);
}

static void lora_options(ot_train_options *o, const char *remat, int64_t steps) {
    ot_train_options_default(o);
    o->n_threads = 2;
    o->batch_size = 8;
    o->steps = steps;
    o->seed = 7;
    ot_optim_config_default(&o->optim, OT_OPTIM_ADAM);
    o->optim.lr = 1e-2;
    o->lora.rank = 4;
    o->lora.alpha = 8;
    o->remat = remat;
    o->keep_host_weights = true; /* the test compares the base weights afterwards */
}

/* Step 0 equals the base model; the loss falls; only adapters train; the base
 * weights are unchanged bitwise. */
static void test_session(void **state) {
    (void)state;
    ot_error err = {0};
    ot_model *m = test_model(SAMPLES "tinygpt.onnx");
    ot_dataset d;
    load_data(&d);
    int w = ot_graph_find_value(m->graph, "blocks.0.mlp.0.weight");
    size_t wb = m->graph->values[w].nbytes;
    void *w0 = malloc(wb);
    memcpy(w0, m->graph->values[w].data, wb);

    ot_train_options o;
    lora_options(&o, NULL, 1);
    o.lora.rank = 0;
    ot_train_session *s = NULL;
    ot_train_result base;
    if (ot_train_session_new(m, &o, &d, true, &s, &err) || ot_train_run(s, &d, NULL, NULL, &base, &err))
        fail_msg("%s", err.msg);
    size_t peak_base = base.planned_peak;
    ot_train_session_free(s);
    ot_model_free(m); /* the plain step trained every weight of m: start again */
    m = test_model(SAMPLES "tinygpt.onnx");

    lora_options(&o, NULL, 20);
    ot_train_result r;
    if (ot_train_session_new(m, &o, &d, true, &s, &err) || ot_train_run(s, &d, NULL, NULL, &r, &err))
        fail_msg("%s", err.msg);
    const ot_autodiff_result *ad = ot_train_autodiff(s);
    assert_int_equal(ad->n_params, 16);
    for (int i = 0; i < ad->n_params; i++)
        assert_non_null(strstr(ot_train_graph(s)->values[ad->params[i]].name, ".lora_"));
    if (r.loss[0] != base.loss[0]) fail_msg("step 0: %.9g with LoRA, %.9g without", r.loss[0], base.loss[0]);
    assert_true(r.loss[19] < r.loss[0] - 0.1);
    assert_true(r.planned_peak < peak_base);
    assert_int_equal(r.measured_peak, r.planned_peak);
    ot_train_options po = o; /* `plan` and --batch-size auto plan what the run allocates */
    po.plan_only = true;
    ot_train_session *ps = NULL;
    if (ot_train_session_new(m, &po, &d, true, &ps, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ot_plan_peak_bytes(ot_train_plan(ps)), r.planned_peak);
    ot_train_session_free(ps);
    const ot_plan *p = ot_train_plan(s);
    /* the params slab holds the adapters only (4 x (in + out) floats each), their
     * gradients as much, Adam's moments twice that (plus its step scalars) */
    size_t adapters = 0;
    for (int i = 0; i < ad->n_params; i++) adapters += ot_train_graph(s)->values[ad->params[i]].nbytes;
    assert_int_equal(adapters, 2 * 4 * (96 + 32 + 32 + 32 + 128 + 32 + 32 + 128) * sizeof(float));
    assert_int_equal(p->slab_bytes[OT_MEM_PARAMS], adapters);
    assert_int_equal(p->slab_bytes[OT_MEM_GRADIENTS], adapters);
    assert_in_range(p->slab_bytes[OT_MEM_OPT_STATE], 2 * adapters, 2 * adapters + 256);
    assert_non_null(m->graph->values[w].data);
    assert_memory_equal(m->graph->values[w].data, w0, wb);

    ot_train_result_free(&r);
    ot_train_result_free(&base);
    ot_train_session_free(s);
    free(w0);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* The merged model computes what the adapted graph computes (tinygpt without
 * Dropout: a run's masks depend on its step). */
static void test_merged(void **state) {
    (void)state;
    ot_error err = {0};
    ot_model *m = test_model(SAMPLES "tinygpt_nodrop.onnx");
    ot_dataset d;
    load_data(&d);
    ot_train_options o;
    lora_options(&o, NULL, 10);
    ot_train_session *s = NULL, *sm = NULL;
    ot_train_result r;
    ot_step_results with = {0}, merged = {0};
    if (ot_train_session_new(m, &o, &d, true, &s, &err) || ot_train_run(s, &d, NULL, NULL, &r, &err) ||
        ot_train_step_results(s, &d, &with, &err) ||
        ot_train_save_model(s, OT_BINARY_DIR "/lora_merged.onnx", false, &err))
        fail_msg("%s", err.msg);
    ot_model *mm = test_model(OT_BINARY_DIR "/lora_merged.onnx");
    o.lora.rank = 0;
    if (ot_train_session_new(mm, &o, &d, true, &sm, &err) || ot_train_step_results(sm, &d, &merged, &err))
        fail_msg("%s", err.msg);
    if (fabs(merged.loss - with.loss) > 1e-5 * fabs(with.loss) || fabs(with.loss - r.loss[0]) < 1e-3)
        fail_msg("merged model's loss %.9g, the adapted graph's %.9g (%.9g at step 0)", merged.loss, with.loss,
                 r.loss[0]);
    ot_step_results_free(&with);
    ot_step_results_free(&merged);
    ot_train_result_free(&r);
    ot_train_session_free(sm);
    ot_train_session_free(s);
    ot_model_free(mm);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* Three steps then one step's gradients (non-zero B by then) under each policy:
 * bitwise equal to --remat none. */
static void test_remat_bitwise(void **state) {
    (void)state;
    static const char *policies[] = {"none", "all", "sqrt", "selective", "every:2", "auto"};
    ot_error err = {0};
    ot_model *m = test_model(SAMPLES "tinygpt.onnx");
    ot_dataset d;
    load_data(&d);
    ot_step_results ref = {0};
    for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++) {
        ot_train_options o;
        lora_options(&o, policies[k], 3);
        o.stream_save = true;
        ot_train_session *s = NULL;
        ot_train_result r;
        ot_step_results sr;
        if (ot_train_session_new(m, &o, &d, true, &s, &err) || ot_train_run(s, &d, NULL, NULL, &r, &err) ||
            ot_train_step_results(s, &d, &sr, &err))
            fail_msg("%s: %s", policies[k], err.msg);
        if (k == 0) {
            ref = sr;
            bool any = false;
            for (int i = 0; i < ref.n; i++)
                for (size_t e = 0; e < ref.tensors[i]->nbytes / 4; e++) any |= ((float *)ref.tensors[i]->data)[e] != 0;
            assert_true(any);
        } else {
            assert_int_equal(sr.n, ref.n);
            for (int i = 0; i < ref.n; i++) {
                assert_int_equal(sr.tensors[i]->nbytes, ref.tensors[i]->nbytes);
                if (memcmp(sr.tensors[i]->data, ref.tensors[i]->data, ref.tensors[i]->nbytes))
                    fail_msg("--remat %s: %s differs from --remat none", policies[k], sr.names[i]);
            }
            ot_step_results_free(&sr);
        }
        ot_train_result_free(&r);
        ot_train_session_free(s);
    }
    ot_step_results_free(&ref);
    ot_dataset_free(&d);
    ot_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),         cmocka_unit_test(test_rule_head),         cmocka_unit_test(test_rule_tinygpt), cmocka_unit_test(test_fd_matmul),
        cmocka_unit_test(test_fd_transpose),  cmocka_unit_test(test_fd_gemm),      cmocka_unit_test(test_session),
        cmocka_unit_test(test_merged),        cmocka_unit_test(test_remat_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
