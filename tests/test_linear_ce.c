/* test_linear_ce.c — the chunked cross-entropy (issue 28): autodiff/linear_ce.c's
 * pattern matching over the heads exporters write (untied, tied through a Transpose,
 * bias by Add in either order or in a Gemm, a Reshape between head and loss, the
 * NegativeLogLikelihoodLoss(LogSoftmax) form) and its skip cases; finite differences of
 * LinearCrossEntropy's gradient rule and kernels (uneven chunks, ignore_index, W
 * transposed, bias); and the fused op against the plain head + loss it replaces: the
 * same loss and gradients within rounding at every chunk size, the same bits for the
 * same chunk size on any thread count, and an all-ignored batch's loss 0 with zero
 * gradients. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "grad_check.h"
#include "importer/importer.h"
#include "ref_eval.h"

#define B 2
#define T 3
#define D 4
#define V 7

typedef enum {
    HEAD_UNTIED,
    HEAD_TIED,
    HEAD_ADD_BIAS,
    HEAD_BIAS_ADD,
    HEAD_GEMM,
    HEAD_RESHAPE,
    HEAD_RELU,
    HEAD_CAST
} head_kind;

static int val(ot_graph *g, const char *name, ot_value_kind k, int rank, const int64_t *d) {
    ot_shape s = ot_shape_make(rank, d);
    int v = ot_graph_add_value(g, name, OT_F32, &s, k);
    assert_true(v >= 0);
    if (k == OT_VK_PARAM) { /* deterministic weights, for the runs that compare */
        int64_t n = ot_shape_numel(&s);
        float *x = malloc((size_t)n * sizeof *x);
        uint32_t rng = (uint32_t)(7 + v * 13);
        for (int64_t i = 0; i < n; i++)
            x[i] = gc_rand(&rng) * 2.0f - 1.0f;
        ot_value_set_data(&g->values[v], x, (size_t)n * sizeof *x);
        free(x);
    }
    return v;
}

static int node(ot_graph *g, ot_op op, const int *in, int n_in, int out) {
    int n = ot_graph_add_node(g, op, ot_op_name(op), in, n_in, &out, 1, OT_PHASE_FORWARD);
    assert_true(n >= 0);
    return n;
}

static void set_output(ot_graph *g, int v) {
    g->outputs = realloc(g->outputs, sizeof(int));
    g->outputs[0] = v;
    g->n_outputs = 1;
    g->values[v].is_graph_output = true; /* as the importer marks a model output */
}

/* input x [B, T, D] -> the head of `kind` -> logits [B, T, V] (the model's output). */
static ot_graph *model(head_kind kind, int *logits) {
    ot_graph *g = ot_graph_new("lce");
    int64_t xd[3] = {B, T, D}, wd[2] = {D, V}, ed[2] = {V, D}, bd[1] = {V}, ld[3] = {B, T, V}, rd[2] = {B * T, D};
    int64_t rv[2] = {B * T, V};
    ot_shape xs = ot_shape_make(3, xd);
    int x = ot_graph_add_value(g, "x", OT_F32, &xs, OT_VK_INPUT);
    g->inputs = malloc(sizeof(int));
    g->inputs[0] = x;
    g->n_inputs = 1;
    int h = val(g, "h", OT_VK_ACTIVATION, 3, xd);
    node(g, OT_OP_TANH, &x, 1, h); /* the hidden states are an activation, as in a model */
    int y = val(g, "logits", OT_VK_ACTIVATION, 3, ld), mm = -1;
    switch (kind) {
    case HEAD_UNTIED: {
        int w = val(g, "w", OT_VK_PARAM, 2, wd), in[2] = {h, w};
        node(g, OT_OP_MATMUL, in, 2, y);
        break;
    }
    case HEAD_TIED: { /* the embedding [V, D] read by a Gather and, transposed, by the head */
        int e = val(g, "wte", OT_VK_PARAM, 2, ed), wt = val(g, "wte_t", OT_VK_ACTIVATION, 2, wd);
        int64_t idv[2] = {1, 3}, two = 2;
        ot_shape is = ot_shape_make(1, &two);
        int ids = ot_graph_add_value(g, "ids", OT_I64, &is, OT_VK_CONSTANT);
        ot_value_set_data(&g->values[ids], idv, sizeof idv);
        int emb = val(g, "emb", OT_VK_ACTIVATION, 2, (int64_t[]){2, D}), gin[2] = {e, ids};
        node(g, OT_OP_GATHER, gin, 2, emb);
        int tn = node(g, OT_OP_TRANSPOSE, &e, 1, wt), in[2] = {h, wt};
        ot_node_set_attr_ints(&g->nodes[tn], "perm", (int64_t[]){1, 0}, 2);
        node(g, OT_OP_MATMUL, in, 2, y);
        break;
    }
    case HEAD_ADD_BIAS:
    case HEAD_BIAS_ADD: {
        int w = val(g, "w", OT_VK_PARAM, 2, wd), b = val(g, "b", OT_VK_PARAM, 1, bd);
        int m = val(g, "mm", OT_VK_ACTIVATION, 3, ld), in[2] = {h, w};
        node(g, OT_OP_MATMUL, in, 2, m);
        int a[2] = {kind == HEAD_ADD_BIAS ? m : b, kind == HEAD_ADD_BIAS ? b : m};
        node(g, OT_OP_ADD, a, 2, y);
        break;
    }
    case HEAD_GEMM:
    case HEAD_RESHAPE: { /* h as rows, Gemm (W [V, D], transB, bias) or MatMul, Reshape back */
        int64_t two = 2, three = 3;
        ot_shape s2 = ot_shape_make(1, &two), s3 = ot_shape_make(1, &three);
        int c2 = ot_graph_add_value(g, "rows_shape", OT_I64, &s2, OT_VK_CONSTANT);
        int c3 = ot_graph_add_value(g, "out_shape", OT_I64, &s3, OT_VK_CONSTANT);
        ot_value_set_data(&g->values[c2], rd, sizeof rd);
        ot_value_set_data(&g->values[c3], ld, sizeof ld);
        int hr = val(g, "h_rows", OT_VK_ACTIVATION, 2, rd), r[2] = {h, c2};
        node(g, OT_OP_RESHAPE, r, 2, hr);
        int yr = val(g, "y_rows", OT_VK_ACTIVATION, 2, rv);
        if (kind == HEAD_GEMM) {
            int w = val(g, "w", OT_VK_PARAM, 2, ed), b = val(g, "b", OT_VK_PARAM, 1, bd), in[3] = {hr, w, b};
            mm = node(g, OT_OP_GEMM, in, 3, yr);
            ot_node_set_attr_int(&g->nodes[mm], "transB", 1);
        } else {
            int w = val(g, "w", OT_VK_PARAM, 2, wd), in[2] = {hr, w};
            node(g, OT_OP_MATMUL, in, 2, yr);
        }
        int r2[2] = {yr, c3};
        node(g, OT_OP_RESHAPE, r2, 2, y);
        break;
    }
    case HEAD_CAST: { /* LLaMA's logits.float(): a Cast to the dtype they have */
        int w = val(g, "w", OT_VK_PARAM, 2, wd), m = val(g, "mm", OT_VK_ACTIVATION, 3, ld), in[2] = {h, w};
        node(g, OT_OP_MATMUL, in, 2, m);
        int c = node(g, OT_OP_CAST, &m, 1, y);
        ot_node_set_attr_int(&g->nodes[c], "to", 1);
        break;
    }
    case HEAD_RELU: {
        int w = val(g, "w", OT_VK_PARAM, 2, wd), m = val(g, "mm", OT_VK_ACTIVATION, 3, ld), in[2] = {h, w};
        node(g, OT_OP_MATMUL, in, 2, m);
        node(g, OT_OP_RELU, &m, 1, y);
        break;
    }
    }
    set_output(g, y);
    *logits = y;
    return g;
}

static int live(const ot_graph *g, ot_op op) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !g->nodes[i].removed && g->nodes[i].op == op;
    return n;
}

/* The loss builder's cross-entropy, then the rewrite with o. */
static ot_graph *fused(head_kind kind, const ot_linear_ce_options *o, ot_linear_ce_result *r, int *loss) {
    int y;
    ot_graph *g = model(kind, &y);
    ot_loss_options lo = {
        .kind = OT_LOSS_CROSS_ENTROPY, .class_axis = -1, .has_ignore_index = true, .ignore_index = -100};
    ot_error err = {0};
    assert_int_equal(ot_loss_build(g, &lo, loss, &err), OT_OK);
    assert_int_equal(ot_linear_ce_rewrite(g, *loss, y, o, r, &err), OT_OK);
    return g;
}

static void expect_fused(head_kind kind, bool trans_w, bool bias) {
    ot_linear_ce_options o = {.mode = OT_CHUNKED_LOSS_ON, .chunk_rows = 4};
    ot_linear_ce_result r;
    int loss;
    ot_graph *g = fused(kind, &o, &r, &loss);
    assert_true(r.applied);
    assert_int_equal(live(g, OT_OP_LINEAR_CROSS_ENTROPY), 1);
    assert_int_equal(live(g, OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS) + live(g, OT_OP_MATMUL) + live(g, OT_OP_GEMM) +
                         live(g, OT_OP_TRANSPOSE) + live(g, OT_OP_ADD) + live(g, OT_OP_CAST),
                     0);
    assert_int_equal(r.trans_w, trans_w);
    assert_int_equal(r.has_bias, bias);
    assert_int_equal(r.rows, B * T);
    assert_int_equal(r.vocab, V);
    assert_int_equal(r.chunk_rows, 4);
    assert_int_equal(r.logits_bytes, B * T * V * sizeof(float));
    assert_int_equal(g->n_outputs, 0); /* the logits are no model output any more */
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].is_graph_output) fail_msg("'%s' is still a graph output", g->values[v].name);
    const ot_node *n = &g->nodes[g->values[loss].producer];
    assert_int_equal(n->op, OT_OP_LINEAR_CROSS_ENTROPY);
    assert_int_equal(ot_node_attr_int(n, "ignore_index", 0), -100);
    assert_int_equal(n->n_inputs, bias ? 4 : 3);
    ot_error err = {0};
    assert_int_equal(ot_shape_infer(g, &err), OT_OK);
    ot_graph_free(g);
}

static void test_patterns(void **state) {
    (void)state;
    expect_fused(HEAD_UNTIED, false, false);
    expect_fused(HEAD_TIED, true, false);
    expect_fused(HEAD_ADD_BIAS, false, true);
    expect_fused(HEAD_BIAS_ADD, false, true);
    expect_fused(HEAD_GEMM, true, true);
    expect_fused(HEAD_RESHAPE, false, false);
    expect_fused(HEAD_CAST, false, false);
}

static void expect_skipped(head_kind kind, const ot_linear_ce_options *o, const char *why, bool extra_reader) {
    int y, loss;
    ot_graph *g = model(kind, &y);
    if (extra_reader) { /* another node reads the logits */
        int64_t ld[3] = {B, T, V};
        int s = val(g, "probs", OT_VK_ACTIVATION, 3, ld);
        node(g, OT_OP_SOFTMAX, &y, 1, s);
    }
    ot_loss_options lo = {.kind = OT_LOSS_CROSS_ENTROPY, .class_axis = -1};
    ot_error err = {0};
    ot_linear_ce_result r;
    assert_int_equal(ot_loss_build(g, &lo, &loss, &err), OT_OK);
    int nodes = 0;
    for (int i = 0; i < g->n_nodes; i++)
        nodes += !g->nodes[i].removed;
    assert_int_equal(ot_linear_ce_rewrite(g, loss, y, o, &r, &err), OT_OK);
    assert_false(r.applied);
    if (!strstr(r.why, why)) fail_msg("why '%s' lacks '%s'", r.why, why);
    int after = 0;
    for (int i = 0; i < g->n_nodes; i++)
        after += !g->nodes[i].removed;
    assert_int_equal(after, nodes); /* untouched */
    assert_int_equal(g->n_outputs, 1);
    ot_graph_free(g);
}

static void test_skips(void **state) {
    (void)state;
    ot_linear_ce_options on = {.mode = OT_CHUNKED_LOSS_ON, .chunk_rows = 2};
    expect_skipped(HEAD_UNTIED, &on, "read by 1 nodes besides the loss", true);
    expect_skipped(HEAD_RELU, &on, "not a MatMul/Gemm head", false);
    ot_linear_ce_options off = {.mode = OT_CHUNKED_LOSS_OFF};
    expect_skipped(HEAD_UNTIED, &off, "off", false);
    ot_linear_ce_options keep = {.mode = OT_CHUNKED_LOSS_ON, .keep_logits = "validation"};
    expect_skipped(HEAD_UNTIED, &keep, "validation reads the logits", false);
    /* auto: one chunk would hold every row, so there is nothing to save */
    ot_linear_ce_options au = {.mode = OT_CHUNKED_LOSS_AUTO, .chunk_rows = 64};
    expect_skipped(HEAD_UNTIED, &au, "nothing to save", false);
    ot_linear_ce_options au_small = {.mode = OT_CHUNKED_LOSS_AUTO, .chunk_rows = 2};
    ot_linear_ce_result r;
    int loss;
    ot_graph *g = fused(HEAD_UNTIED, &au_small, &r, &loss);
    assert_true(r.applied);
    ot_graph_free(g);
    ot_chunked_loss_mode m;
    ot_error err = {0};
    assert_int_equal(ot_chunked_loss_parse("--chunked-loss", "sometimes", &m, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "--chunked-loss 'sometimes'"));
}

/* Finite differences of LinearCrossEntropy: H, W (and bias) get gradients. */
static void check_fd(bool trans_w, bool bias, int64_t chunk) {
    ot_graph *g = gc_graph();
    uint32_t rng = 5;
    int64_t hd[2] = {5, D}, wd[2] = {trans_w ? V : D, trans_w ? D : V}, bd[1] = {V}, nd[1] = {5};
    int64_t labels[5] = {0, 6, -100, 3, 2};
    int h = gc_param(g, "H", 2, hd, &rng, -1, 1, false);
    int w = gc_param(g, "W", 2, wd, &rng, -1, 1, false);
    int l = gc_const(g, "labels", OT_I64, 1, nd, labels);
    int in[4] = {h, w, l, bias ? gc_param(g, "b", 1, bd, &rng, -1, 1, false) : -1};
    int y = gc_val(g, "loss", OT_F32, 0, NULL);
    int n = gc_op(g, OT_OP_LINEAR_CROSS_ENTROPY, in, bias ? 4 : 3, &y, 1);
    ot_node_set_attr_int(&g->nodes[n], "chunk_rows", chunk);
    ot_node_set_attr_int(&g->nodes[n], "trans_w", trans_w);
    ot_node_set_attr_int(&g->nodes[n], "ignore_index", -100);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_finite_differences(void **state) {
    (void)state;
    check_fd(false, false, 2);
    check_fd(true, false, 3);
    check_fd(false, true, 1);
    check_fd(true, true, 5);
}

/* Loss and gradients of the training graph (loss builder, optional rewrite, autodiff)
 * on fixed data; grads[k] gets a copy of param k's gradient. */
static double run(head_kind kind, ot_chunked_loss_mode mode, int64_t chunk, const int64_t *labels, int threads,
                  float **grads, int64_t *sizes, int *n_grads) {
    int y, loss;
    ot_graph *g = model(kind, &y);
    ot_loss_options lo = {
        .kind = OT_LOSS_CROSS_ENTROPY, .class_axis = -1, .has_ignore_index = true, .ignore_index = -100};
    ot_error err = {0};
    assert_int_equal(ot_loss_build(g, &lo, &loss, &err), OT_OK);
    ot_linear_ce_options o = {.mode = mode, .chunk_rows = chunk};
    ot_linear_ce_result r;
    assert_int_equal(ot_linear_ce_rewrite(g, loss, y, &o, &r, &err), OT_OK);
    assert_int_equal(r.applied, mode != OT_CHUNKED_LOSS_OFF);
    ot_autodiff_options ao = {.loss_value = loss};
    ot_autodiff_result ad;
    assert_int_equal(ot_autodiff_build(g, &ao, &ad, &err), OT_OK);
    ot_ref_env *e = ot_ref_new(g);
    e->n_threads = threads;
    float x[B * T * D];
    uint32_t rng = 3;
    for (int i = 0; i < B * T * D; i++)
        x[i] = gc_rand(&rng) * 4.0f - 2.0f;
    assert_int_equal(ot_ref_feed(e, g->inputs[0], x, sizeof x, &err), OT_OK);
    assert_int_equal(ot_ref_feed(e, g->inputs[1], labels, B * T * sizeof(int64_t), &err), OT_OK);
    if (ot_ref_run(e, false, &err)) fail_msg("%s", err.msg);
    double lv = ot_ref_f32(e, loss)[0];
    *n_grads = ad.n_params;
    for (int k = 0; k < ad.n_params; k++) {
        sizes[k] = ot_shape_numel(&g->values[ad.grads[k]].shape);
        size_t nb = (size_t)sizes[k] * sizeof(float);
        grads[k] = malloc(nb);
        memcpy(grads[k], ot_ref_f32(e, ad.grads[k]), nb);
    }
    ot_ref_free(e);
    ot_autodiff_result_free(&ad);
    ot_graph_free(g);
    return lv;
}

static void compare_kind(head_kind kind) {
    int64_t labels[B * T] = {1, 6, -100, 0, 3, 5};
    float *ref[4], *a[4], *b[4], *c[4];
    int n0, n1, n2, n3;
    int64_t sz[4];
    double l0 = run(kind, OT_CHUNKED_LOSS_OFF, 0, labels, 1, ref, sz, &n0);
    double l1 = run(kind, OT_CHUNKED_LOSS_ON, 4, labels, 1, a, sz, &n1);
    double l2 = run(kind, OT_CHUNKED_LOSS_ON, 4, labels, 2, b, sz, &n2);
    double l3 = run(kind, OT_CHUNKED_LOSS_ON, 1, labels, 2, c, sz, &n3);
    assert_int_equal(n0, n1);
    assert_int_equal(n0, n3);
    assert_true(fabs(l0 - l1) <= 1e-6 * fabs(l0));
    assert_true(fabs(l0 - l3) <= 1e-6 * fabs(l0));
    assert_true(l1 == l2);
    for (int k = 0; k < n0; k++) {
        int64_t n = sz[k];
        assert_memory_equal(a[k], b[k], (size_t)n * sizeof(float)); /* same chunk: same bits on 1 or 2 threads */
        for (int64_t i = 0; i < n; i++) {
            double tol = 1e-6 + 1e-5 * fabs(ref[k][i]);
            if (fabs(ref[k][i] - a[k][i]) > tol || fabs(ref[k][i] - c[k][i]) > tol)
                fail_msg("head %d grad %d[%lld]: plain %.9g, chunk 4 %.9g, chunk 1 %.9g", kind, k, (long long)i,
                         ref[k][i], a[k][i], c[k][i]);
        }
        free(ref[k]), free(a[k]), free(b[k]), free(c[k]);
    }
}

static void test_against_plain(void **state) {
    (void)state;
    compare_kind(HEAD_UNTIED);
    compare_kind(HEAD_ADD_BIAS);
}

/* Every label the ignore index: loss 0 and zero gradients, as the plain loss. */
static void test_all_ignored(void **state) {
    (void)state;
    int64_t labels[B * T] = {-100, -100, -100, -100, -100, -100};
    float *g0[4], *g1[4];
    int n0, n1;
    int64_t sz[4];
    double l0 = run(HEAD_UNTIED, OT_CHUNKED_LOSS_OFF, 0, labels, 1, g0, sz, &n0);
    double l1 = run(HEAD_UNTIED, OT_CHUNKED_LOSS_ON, 4, labels, 1, g1, sz, &n1);
    assert_true(l0 == 0.0 && l1 == 0.0);
    for (int k = 0; k < n1; k++) {
        for (int64_t i = 0; i < sz[k]; i++)
            assert_true(g1[k][i] == 0.0f && g0[k][i] == 0.0f);
        free(g0[k]), free(g1[k]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patterns),           cmocka_unit_test(test_skips),
        cmocka_unit_test(test_finite_differences), cmocka_unit_test(test_against_plain),
        cmocka_unit_test(test_all_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
