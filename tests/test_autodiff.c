/* test_autodiff.c — the autodiff driver and the loss builders: summed gradients of
 * values with several consumers, frozen / trained params (regexes), integer inputs
 * without gradients, patterns matching nothing, params that miss the loss, ops
 * without a rule, determinism, gradients of requested inputs, and the
 * cross-entropy / mse / output losses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad_check.h"
#include "ref_eval.h"

/* x feeds Mul(x, x), Exp(x) and Add(x, w): three contributions summed by one Sum. */
static ot_graph *fan_out(int *x_out, int *w_out, int *y_out) {
    ot_graph *g = gc_graph();
    uint32_t rng = 101;
    int64_t d[2] = {2, 3};
    int x = gc_param(g, "x", 2, d, &rng, -1, 1, false);
    int w = gc_param(g, "w", 2, d, &rng, -1, 1, false);
    int a = gc_val(g, "a", OT_F32, 2, d), b = gc_val(g, "b", OT_F32, 2, d), c = gc_val(g, "c", OT_F32, 2, d);
    int in[2] = {x, x};
    gc_op(g, OT_OP_MUL, in, 2, &a, 1);
    gc_op(g, OT_OP_EXP, &x, 1, &b, 1);
    int in2[2] = {x, w};
    gc_op(g, OT_OP_ADD, in2, 2, &c, 1);
    int s = gc_val(g, "s", OT_F32, 2, d);
    int sin[3] = {a, b, c};
    gc_op(g, OT_OP_SUM, sin, 3, &s, 1);
    *x_out = x;
    *w_out = w;
    *y_out = s;
    return g;
}

static void test_fan_out_sum(void **state) {
    (void)state;
    int x, w, y;
    ot_graph *g = fan_out(&x, &w, &y);
    assert_int_equal(gc_check1(g, y), 0);
    /* x's gradient is one Sum over its four contributions (Mul reads x twice) */
    int sums = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ot_node *n = &g->nodes[i];
        if (n->phase == OT_PHASE_BACKWARD && n->op == OT_OP_SUM) {
            sums++;
            assert_int_equal(n->n_inputs, 4);
            assert_string_equal(g->values[n->outputs[0]].name, "x_grad");
        }
    }
    assert_int_equal(sums, 1);
    ot_graph_free(g);
}

static void build_text(char **buf, size_t *len) {
    int x, w, y;
    ot_graph *g = fan_out(&x, &w, &y);
    uint32_t rng = 1;
    int loss = gc_loss(g, &y, 1, &rng);
    ot_autodiff_options o = {.loss_value = loss};
    ot_autodiff_result r;
    ot_error err = {0};
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_OK);
    FILE *f = open_memstream(buf, len);
    ot_graph_dump_text(g, f);
    fclose(f);
    ot_autodiff_result_free(&r);
    ot_graph_free(g);
}

static void test_deterministic(void **state) {
    (void)state;
    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    build_text(&a, &la);
    build_text(&b, &lb);
    assert_true(la > 0);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);
}

/* loss = sum(R * Relu(Gemm(x, w1) + b1)) ; w0 unused ; an int64 initializer ; */
static ot_graph *mlp(int *loss, int *ids) {
    ot_graph *g = gc_graph();
    uint32_t rng = 103;
    int64_t xd[2] = {2, 3}, wd[2] = {3, 4}, bd[1] = {4}, hd[2] = {2, 4};
    int x = gc_param(g, "input", 2, xd, &rng, -1, 1, false);
    g->values[x].kind = OT_VK_INPUT;
    int w1 = gc_param(g, "layer1.weight", 2, wd, &rng, -1, 1, false);
    int b1 = gc_param(g, "layer1.bias", 1, bd, &rng, -1, 1, false);
    int w0 = gc_param(g, "unused.weight", 1, bd, &rng, -1, 1, false);
    int64_t one = 1, ival = 2;
    int iv = ot_graph_add_value(g, "count", OT_I64, &(ot_shape){.rank = 1, .dim = {1}, .sym = {-1}}, OT_VK_PARAM);
    ot_value_set_data(&g->values[iv], &ival, sizeof ival);
    (void)one;
    int h = gc_val(g, "h", OT_F32, 2, hd), y = gc_val(g, "y", OT_F32, 2, hd);
    int in[3] = {x, w1, b1};
    gc_op(g, OT_OP_GEMM, in, 3, &h, 1);
    gc_op(g, OT_OP_RELU, &h, 1, &y, 1);
    uint32_t r2 = 5;
    *loss = gc_loss(g, &y, 1, &r2);
    ids[0] = x;
    ids[1] = w1;
    ids[2] = b1;
    ids[3] = w0;
    ids[4] = iv;
    return g;
}

static void test_params_freeze_train(void **state) {
    (void)state;
    int loss, id[5];
    ot_error err = {0};
    ot_autodiff_result r;
    /* all float params: w1, b1, w0 (unused: ZerosLike gradient); int64 "count" never */
    ot_graph *g = mlp(&loss, id);
    ot_autodiff_options o = {.loss_value = loss};
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_OK);
    assert_int_equal(r.n_params, 3);
    assert_int_equal(r.params[0], id[1]);
    assert_int_equal(r.params[1], id[2]);
    assert_int_equal(r.params[2], id[3]);
    assert_int_equal(g->nodes[g->values[r.grads[2]].producer].op, OT_OP_ZEROS_LIKE);
    assert_int_equal(g->values[id[4]].kind, OT_VK_CONSTANT);
    for (int i = 0; i < r.n_params; i++) {
        assert_int_equal(g->values[r.grads[i]].kind, OT_VK_GRADIENT);
        assert_true(g->values[r.grads[i]].is_graph_output);
    }
    assert_string_equal(g->values[r.grads[0]].name, "layer1.weight_grad");
    ot_autodiff_result_free(&r);
    ot_graph_free(g);

    /* --freeze '*.bias' (a glob, the default syntax): the bias gets no gradient and is
     * no longer a param */
    g = mlp(&loss, id);
    const char *fr[1] = {"*.bias"};
    o = (ot_autodiff_options){.loss_value = loss, .freeze = fr, .n_freeze = 1};
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_OK);
    assert_null(r.legacy_pattern);
    assert_int_equal(r.n_params, 2);
    for (int i = 0; i < r.n_params; i++) assert_int_not_equal(r.params[i], id[2]);
    assert_int_equal(g->values[id[2]].kind, OT_VK_CONSTANT);
    int n_backward = 0;
    for (int i = 0; i < g->n_nodes; i++) n_backward += g->nodes[i].phase == OT_PHASE_BACKWARD;
    assert_true(n_backward > 0);
    ot_autodiff_result_free(&r);
    ot_graph_free(g);

    /* --train 're:^layer1\.' keeps only layer1 */
    g = mlp(&loss, id);
    const char *tr[1] = {"re:^layer1\\."};
    o = (ot_autodiff_options){.loss_value = loss, .train = tr, .n_train = 1};
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_OK);
    assert_int_equal(r.n_params, 2);
    assert_null(r.legacy_pattern);
    ot_autodiff_result_free(&r);
    ot_graph_free(g);

    /* an old script's regex without the prefix ('bias$' matches no name as a glob) is
     * still read as one, and the result names it for a note */
    g = mlp(&loss, id);
    const char *old[1] = {"bias$"};
    o = (ot_autodiff_options){.loss_value = loss, .freeze = old, .n_freeze = 1};
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_OK);
    assert_int_equal(r.n_params, 2);
    assert_int_equal(g->values[id[2]].kind, OT_VK_CONSTANT);
    assert_non_null(r.legacy_pattern);
    assert_string_equal(r.legacy_pattern, "bias$");
    assert_string_equal(r.legacy_option, "--freeze");
    ot_autodiff_result_free(&r);
    ot_graph_free(g);
}

static void test_pattern_errors(void **state) {
    (void)state;
    int loss, id[5];
    ot_error err = {0};
    ot_autodiff_result r;
    ot_graph *g = mlp(&loss, id);
    const char *fr[2] = {"weight", "^nothing_like_this$"};
    ot_autodiff_options o = {.loss_value = loss, .freeze = fr, .n_freeze = 2};
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "^nothing_like_this$"));
    ot_graph_free(g);

    g = mlp(&loss, id);
    const char *bad[1] = {"(unclosed"};
    o = (ot_autodiff_options){.loss_value = loss, .train = bad, .n_train = 1};
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "(unclosed"));
    ot_graph_free(g);

    /* a loss that is not a scalar */
    g = mlp(&loss, id);
    o = (ot_autodiff_options){.loss_value = id[1]};
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_E_USAGE);
    ot_graph_free(g);
}

/* The input x (requested through wrt) and an integer index input. */
static void test_wrt_and_integer_inputs(void **state) {
    (void)state;
    int loss, id[5];
    ot_error err = {0};
    ot_autodiff_result r;
    ot_graph *g = mlp(&loss, id);
    int wrt[1] = {id[0]};
    ot_autodiff_options o = {.loss_value = loss, .wrt = wrt, .n_wrt = 1};
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_OK);
    assert_int_equal(r.n_wrt, 1);
    ot_shape xs = g->values[id[0]].shape;
    assert_true(ot_shape_equal(&g->values[r.wrt_grads[0]].shape, &xs));
    ot_ref_env *e = ot_ref_new(g);
    assert_int_equal(ot_ref_run(e, false, &err), OT_OK);
    assert_non_null(ot_ref_f32(e, r.wrt_grads[0]));
    ot_ref_free(e);
    ot_autodiff_result_free(&r);
    ot_graph_free(g);

    /* Gather's int64 indices get no gradient node */
    g = gc_graph();
    uint32_t rng = 7;
    int64_t xd[2] = {4, 2}, two = 2, yd[2] = {2, 2};
    int64_t idx[2] = {3, 0};
    int x = gc_param(g, "emb", 2, xd, &rng, -1, 1, false);
    int i = gc_const(g, "idx", OT_I64, 1, &two, idx);
    g->values[i].kind = OT_VK_INPUT;
    int y = gc_val(g, "y", OT_F32, 2, yd);
    int in[2] = {x, i};
    gc_op(g, OT_OP_GATHER, in, 2, &y, 1);
    int wi[1] = {i};
    rng = 3;
    o = (ot_autodiff_options){.loss_value = gc_loss(g, &y, 1, &rng), .wrt = wi, .n_wrt = 1};
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_E_USAGE); /* not a float value */
    for (int k = 0; k < g->n_nodes; k++) assert_int_not_equal(g->nodes[k].phase, OT_PHASE_BACKWARD);
    o.n_wrt = 0;
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_OK);
    for (int k = 0; k < g->n_nodes; k++) {
        const ot_node *n = &g->nodes[k];
        if (n->phase != OT_PHASE_BACKWARD) continue;
        for (int j = 0; j < n->n_outputs; j++)
            if (n->outputs[j] >= 0) assert_true(ot_dtype_is_float(g->values[n->outputs[j]].dtype));
    }
    ot_autodiff_result_free(&r);
    ot_graph_free(g);
}

static void test_no_rule(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 9;
    int64_t one = 1, four = 4;
    int s = gc_param(g, "start", 0, &one, &rng, 0, 1, false);
    float lim = 4.0f, dl = 1.0f;
    int l = gc_const(g, "limit", OT_F32, 0, NULL, &lim), d = gc_const(g, "delta", OT_F32, 0, NULL, &dl);
    int y = gc_val(g, "y", OT_F32, 1, &four);
    int in[3] = {s, l, d};
    gc_op(g, OT_OP_RANGE, in, 3, &y, 1);
    /* start is a scalar (and Range's bound): constant by default, so --train it to put
     * Range, which has no rule, between a param and the loss. */
    static const char *const train[] = {"start"};
    ot_autodiff_options o = {.loss_value = gc_loss(g, &y, 1, &rng), .train = train, .n_train = 1};
    ot_autodiff_result r;
    ot_error err = {0};
    int nn = g->n_nodes, nv = g->n_values, no = g->n_outputs;
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "Range"));
    /* the failed build left the graph as it was (the seed and the loss's rules were rolled back) */
    assert_int_equal(g->n_nodes, nn);
    assert_int_equal(g->n_values, nv);
    assert_int_equal(g->n_outputs, no);
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    ot_graph_free(g);
}

static ot_graph *model_with_output(int rank, const int64_t *dims, bool sym_batch) {
    ot_graph *g = gc_graph();
    ot_shape s = ot_shape_make(rank, dims);
    if (sym_batch) {
        s.dim[0] = -1;
        s.sym[0] = ot_graph_add_sym(g, "batch");
    }
    int x = ot_graph_add_value(g, "x", OT_F32, &s, OT_VK_INPUT);
    int y = ot_graph_add_value(g, "logits", OT_F32, &s, OT_VK_ACTIVATION);
    ot_graph_add_node(g, OT_OP_RELU, "relu", &x, 1, &y, 1, OT_PHASE_FORWARD);
    g->inputs = malloc(sizeof(int));
    g->inputs[0] = x;
    g->n_inputs = 1;
    g->outputs = malloc(sizeof(int));
    g->outputs[0] = y;
    g->n_outputs = 1;
    g->values[y].is_graph_output = true;
    return g;
}

static void test_loss_builders(void **state) {
    (void)state;
    ot_error err = {0};
    int loss = -1;
    /* [batch, 5] logits: SoftmaxCrossEntropyLoss directly, labels [batch] int64 */
    int64_t d2[2] = {8, 5};
    ot_graph *g = model_with_output(2, d2, true);
    ot_loss_options lo = {.kind = OT_LOSS_CROSS_ENTROPY, .class_axis = -1, .has_ignore_index = true, .ignore_index = -100};
    assert_int_equal(ot_loss_build(g, &lo, &loss, &err), OT_OK);
    const ot_node *n = &g->nodes[g->values[loss].producer];
    assert_int_equal(n->op, OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS);
    assert_int_equal(n->phase, OT_PHASE_LOSS);
    assert_int_equal(ot_node_attr_int(n, "ignore_index", 0), -100);
    const ot_value *lab = &g->values[n->inputs[1]];
    assert_string_equal(lab->name, "labels");
    assert_int_equal(lab->dtype, OT_I64);
    assert_int_equal(lab->shape.rank, 1);
    assert_int_equal(lab->shape.sym[0], ot_graph_find_sym(g, "batch"));
    assert_int_equal(g->inputs[g->n_inputs - 1], n->inputs[1]);
    assert_int_equal(g->values[loss].shape.rank, 0);
    ot_graph_free(g);

    /* [2, 7, 5] (classes last, every dim known): rows [14, 5] and labels [14], two
     * Reshapes of the output and of the [2, 7] labels input (autodiff/loss_rows.c) */
    int64_t d3[3] = {2, 7, 5};
    g = model_with_output(3, d3, false);
    assert_int_equal(ot_loss_build(g, &lo, &loss, &err), OT_OK);
    n = &g->nodes[g->values[loss].producer];
    const ot_value *sc = &g->values[n->inputs[0]], *sl = &g->values[n->inputs[1]];
    assert_int_equal(g->nodes[sc->producer].op, OT_OP_RESHAPE);
    assert_int_equal(sc->shape.rank, 2);
    assert_int_equal(sc->shape.dim[0], 14);
    assert_int_equal(sc->shape.dim[1], 5);
    assert_int_equal(g->nodes[sl->producer].op, OT_OP_RESHAPE);
    assert_int_equal(sl->shape.rank, 1);
    assert_int_equal(sl->shape.dim[0], 14);
    const ot_value *lab3 = &g->values[g->inputs[g->n_inputs - 1]];
    assert_string_equal(lab3->name, "labels");
    assert_int_equal(lab3->shape.rank, 2);
    assert_int_equal(lab3->shape.dim[1], 7);
    /* and the result differentiates */
    ot_autodiff_options ao = {.loss_value = loss, .wrt = &g->inputs[0], .n_wrt = 1};
    ot_autodiff_result r;
    assert_int_equal(ot_autodiff_build(g, &ao, &r, &err), OT_OK);
    ot_autodiff_result_free(&r);
    ot_graph_free(g);

    /* [batch, 7, 5] with a symbolic batch: transposed to [batch, 5, 7], labels [batch, 7] */
    g = model_with_output(3, d3, true);
    assert_int_equal(ot_loss_build(g, &lo, &loss, &err), OT_OK);
    n = &g->nodes[g->values[loss].producer];
    sc = &g->values[n->inputs[0]];
    assert_int_equal(g->nodes[sc->producer].op, OT_OP_TRANSPOSE);
    assert_int_equal(sc->shape.dim[1], 5);
    assert_int_equal(sc->shape.dim[2], 7);
    assert_int_equal(g->values[n->inputs[1]].shape.dim[1], 7);
    ot_graph_free(g);

    /* mse: targets shaped like the output */
    g = model_with_output(2, d2, true);
    lo = (ot_loss_options){.kind = OT_LOSS_MSE, .output_name = "logits"};
    assert_int_equal(ot_loss_build(g, &lo, &loss, &err), OT_OK);
    n = &g->nodes[g->values[loss].producer];
    assert_int_equal(n->op, OT_OP_MSE_LOSS);
    assert_string_equal(g->values[n->inputs[1]].name, "targets");
    assert_true(ot_shape_equal(&g->values[n->inputs[1]].shape, &g->values[n->inputs[0]].shape));
    ot_graph_free(g);

    /* output: must be a scalar; unknown output names are usage errors */
    g = model_with_output(2, d2, false);
    lo = (ot_loss_options){.kind = OT_LOSS_OUTPUT};
    assert_int_equal(ot_loss_build(g, &lo, &loss, &err), OT_E_MODEL);
    assert_non_null(strstr(err.msg, "logits"));
    lo.output_name = "nope";
    assert_int_equal(ot_loss_build(g, &lo, &loss, &err), OT_E_USAGE);
    ot_graph_free(g);
    int64_t one[1] = {1};
    g = model_with_output(1, one, false);
    lo = (ot_loss_options){.kind = OT_LOSS_OUTPUT};
    assert_int_equal(ot_loss_build(g, &lo, &loss, &err), OT_OK);
    assert_int_equal(loss, g->outputs[0]);
    ot_graph_free(g);

    ot_loss_kind k;
    assert_int_equal(ot_loss_kind_parse("mse", &k, &err), OT_OK);
    assert_int_equal(k, OT_LOSS_MSE);
    assert_int_equal(ot_loss_kind_parse("hinge", &k, &err), OT_E_USAGE);
}

/* Symbolic batch: shapes of gradients keep the symbol; Flatten's gradient reshapes
 * with a constant holding -1 for it. */
static void test_symbolic_batch(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    int b = ot_graph_add_sym(g, "batch");
    ot_shape xs = {.rank = 3, .dim = {-1, 3, 4}, .sym = {b, -1, -1}}, fs = {.rank = 2, .dim = {-1, 12}, .sym = {b, -1}};
    ot_shape ys = {.rank = 2, .dim = {-1, 5}, .sym = {b, -1}};
    int x = ot_graph_add_value(g, "x", OT_F32, &xs, OT_VK_INPUT);
    uint32_t rng = 5;
    int64_t wd[2] = {12, 5};
    int w = gc_param(g, "w", 2, wd, &rng, -1, 1, false);
    int f = ot_graph_add_value(g, "f", OT_F32, &fs, OT_VK_ACTIVATION);
    int y = ot_graph_add_value(g, "y", OT_F32, &ys, OT_VK_ACTIVATION);
    gc_op(g, OT_OP_FLATTEN, &x, 1, &f, 1);
    int in[2] = {f, w};
    gc_op(g, OT_OP_MATMUL, in, 2, &y, 1);
    g->outputs = malloc(sizeof(int));
    g->outputs[0] = y;
    g->n_outputs = 1;
    g->values[y].is_graph_output = true;
    ot_loss_options lo = {.kind = OT_LOSS_CROSS_ENTROPY, .class_axis = -1};
    int loss;
    ot_error err = {0};
    assert_int_equal(ot_loss_build(g, &lo, &loss, &err), OT_OK);
    ot_autodiff_options o = {.loss_value = loss, .wrt = &x, .n_wrt = 1};
    ot_autodiff_result r;
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_OK);
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    const ot_value *xg = &g->values[r.wrt_grads[0]];
    assert_true(ot_shape_equal(&xg->shape, &xs));
    const ot_node *rs = &g->nodes[xg->producer];
    assert_int_equal(rs->op, OT_OP_RESHAPE);
    const int64_t *shape = g->values[rs->inputs[1]].data;
    assert_int_equal(shape[0], -1);
    assert_int_equal(shape[1], 3);
    assert_int_equal(shape[2], 4);
    ot_autodiff_result_free(&r);
    ot_graph_free(g);
}

/* Cross-entropy built by ot_loss_build, labels fed, evaluated end to end: the
 * gradient of W against central differences of the float loss. */
static void test_cross_entropy_end_to_end(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 21;
    int64_t xd[2] = {4, 3}, wd[2] = {3, 5}, yd[2] = {4, 5};
    int x = gc_param(g, "x", 2, xd, &rng, -1, 1, false);
    g->values[x].kind = OT_VK_INPUT;
    int w = gc_param(g, "w", 2, wd, &rng, -1, 1, false);
    int y = gc_val(g, "y", OT_F32, 2, yd);
    int in[2] = {x, w};
    gc_op(g, OT_OP_MATMUL, in, 2, &y, 1);
    g->outputs = malloc(sizeof(int));
    g->outputs[0] = y;
    g->n_outputs = 1;
    ot_loss_options lo = {.kind = OT_LOSS_CROSS_ENTROPY, .class_axis = -1};
    int loss;
    ot_error err = {0};
    assert_int_equal(ot_loss_build(g, &lo, &loss, &err), OT_OK);
    int labels = g->inputs[g->n_inputs - 1];
    ot_autodiff_options o = {.loss_value = loss};
    ot_autodiff_result r;
    assert_int_equal(ot_autodiff_build(g, &o, &r, &err), OT_OK);
    assert_int_equal(r.n_params, 1);
    ot_ref_env *e = ot_ref_new(g);
    int64_t lab[4] = {4, 0, 2, 2};
    assert_int_equal(ot_ref_feed(e, labels, lab, sizeof lab, &err), OT_OK);
    assert_int_equal(ot_ref_run(e, false, &err), OT_OK);
    float an[15];
    memcpy(an, ot_ref_f32(e, r.grads[0]), sizeof an);
    float *wv = g->values[w].data;
    for (int i = 0; i < 15; i++) {
        float keep = wv[i];
        wv[i] = keep + 1e-2f;
        assert_int_equal(ot_ref_run(e, true, &err), OT_OK);
        double lp = ot_ref_f32(e, loss)[0];
        wv[i] = keep - 1e-2f;
        assert_int_equal(ot_ref_run(e, true, &err), OT_OK);
        double lm = ot_ref_f32(e, loss)[0];
        wv[i] = keep;
        double num = (lp - lm) / 2e-2;
        assert_true(fabs(num - an[i]) <= 3e-3 + 1e-2 * fabs(num));
    }
    ot_ref_free(e);
    ot_autodiff_result_free(&r);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fan_out_sum),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_params_freeze_train),
        cmocka_unit_test(test_pattern_errors),
        cmocka_unit_test(test_wrt_and_integer_inputs),
        cmocka_unit_test(test_no_rule),
        cmocka_unit_test(test_loss_builders),
        cmocka_unit_test(test_symbolic_batch),
        cmocka_unit_test(test_cross_entropy_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
