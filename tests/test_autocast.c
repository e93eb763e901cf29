/* test_autocast.c — `--precision` (autodiff/autocast.h, train/session.c): which nodes of
 * the samples run low and where the casts go, with a stand-in for the low-precision
 * kernels that are not written yet (every op but the float32 list has one) and with
 * the CPU's real op table (a node on the low list is low exactly when the CPU has its
 * bf16 kernel); a value is cast at most once per dtype, the graph outputs and the
 * master weights stay float32, param gradients arrive in float32; the planned kept
 * and transient bytes shrink in bf16 and fp16; the option's errors; the steps that
 * run today (the CPU's kernels) give bitwise the same gradients under every policy; and
 * the fused Attention and its gradient run in bf16 with no float32 copies of Q, K, V. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autocast.h"
#include "grad_check.h"
#include "kernels/kernel.h"
#include "test_files.h"
#include "train/train.h"

#define S OT_SOURCE_DIR "/samples/"

/* The stand-in: a low kernel for every op asked about, as lpkern's MatMul/Gemm/Conv
 * and the element kernels will be; counts the questions. */
static bool fake_supports(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)node, (void)in, (void)out;
    (*(int *)ctx)++;
    return true;
}

/* A stand-in with low kernels for the GEMMs only (and the casts and data movement):
 * the backward pass's element ops then need float32 with casts. */
static bool gemm_only(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)ctx;
    if (node->op == OT_OP_MATMUL || node->op == OT_OP_GEMM || node->op == OT_OP_CAST ||
        ot_op_has(node->op, OT_T_VIEW) || ot_op_has(node->op, OT_T_LAYOUT))
        return true;
    for (int i = 0; i < node->n_inputs; i++)
        if (in[i].dtype == OT_BF16 || in[i].dtype == OT_F16) return false;
    for (int i = 0; i < node->n_outputs; i++)
        if (out[i].dtype == OT_BF16 || out[i].dtype == OT_F16) return false;
    return true;
}

static bool cpu_supports(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)ctx;
    return ot_cpu_supports(node, in, out);
}

static ot_graph *bound_copy(const ot_model *m, int64_t batch) {
    ot_graph *g = ot_graph_clone(m->graph, false);
    assert_non_null(g);
    for (int k = 0; k < g->n_syms; k++) g->sym_values[k] = batch;
    return g;
}

/* No value is read by two Casts to the same dtype; every Cast the pass added reads
 * a float32 or low value and writes the other. */
static void check_casts_unique(const ot_graph *g, const ot_autocast_result *r) {
    for (int i = 0; i < g->n_nodes; i++) {
        const ot_node *a = &g->nodes[i];
        if (a->removed || a->op != OT_OP_CAST || r->cls[i] != OT_AC_CAST) continue;
        ot_dtype to = g->values[a->outputs[0]].dtype, from = g->values[a->inputs[0]].dtype;
        assert_true((to == r->low && from == OT_F32) || (to == OT_F32 && from == r->low));
        assert_int_equal(ot_node_attr_int(a, "to", -1), to);
        for (int k = i + 1; k < g->n_nodes; k++) {
            const ot_node *b = &g->nodes[k];
            if (!b->removed && b->op == OT_OP_CAST && r->cls[k] == OT_AC_CAST && b->inputs[0] == a->inputs[0])
                assert_int_not_equal(g->values[b->outputs[0]].dtype, to);
        }
    }
}

/* mlp: x → MatMul/Gemm → Relu → ... → logits. With low kernels everywhere the
 * whole chain is low: x and each weight cast once, logits cast back to float32. */
static void test_mlp_fake(void **state) {
    (void)state;
    ot_model *m = test_model(S "mlp.onnx");
    ot_graph *g = bound_copy(m, 4);
    int out = g->outputs[0], n_params = 0, asked = 0;
    for (int v = 0; v < g->n_values; v++) n_params += g->values[v].kind == OT_VK_PARAM;
    ot_error err = {0};
    ot_autocast_result r;
    if (ot_autocast_apply(g, OT_BF16, fake_supports, &asked, &r, &err)) fail_msg("%s", err.msg);
    assert_true(asked > 0);
    int heavy = 0;
    for (int i = 0; i < r.n_nodes; i++) {
        const ot_node *n = &g->nodes[i];
        if (n->removed) continue;
        if (ot_autocast_op_list(n->op) > 0) {
            heavy++;
            assert_int_equal(r.cls[i], OT_AC_LOW);
            assert_int_equal(g->values[n->outputs[0]].dtype, OT_BF16);
        }
    }
    assert_true(heavy >= 2);
    assert_int_equal(r.n_fallback + r.n_promoted + r.n_f32_list, 0);
    /* casts: the input, every weight and bias, and logits back up */
    assert_int_equal(r.n_casts, 1 + n_params + 1);
    assert_int_equal(g->values[out].dtype, OT_F32);
    assert_int_equal(g->nodes[g->values[out].producer].op, OT_OP_CAST);
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind == OT_VK_PARAM || g->values[v].kind == OT_VK_INPUT) assert_int_equal(g->values[v].dtype, OT_F32);
    check_casts_unique(g, &r);
    ot_autocast_result_free(&r);
    ot_graph_free(g);
    ot_model_free(m);
}

/* tinygpt: norms and softmax on the float32 list read their low inputs through casts
 * up; the residual Add mixes a float32 stream with a low branch: float32 (promoted). */
static void test_tinygpt_fake(void **state) {
    (void)state;
    ot_model *m = test_model(S "tinygpt.onnx");
    ot_graph *g = bound_copy(m, 2);
    int asked = 0;
    ot_error err = {0};
    ot_autocast_result r;
    if (ot_autocast_apply(g, OT_F16, fake_supports, &asked, &r, &err)) fail_msg("%s", err.msg);
    int softmax = 0, matmul = 0, transposes = 0;
    for (int i = 0; i < r.n_nodes; i++) {
        const ot_node *n = &g->nodes[i];
        if (n->removed) continue;
        if (n->op == OT_OP_MATMUL || n->op == OT_OP_GEMM) {
            matmul++;
            assert_int_equal(r.cls[i], OT_AC_LOW);
            for (int k = 0; k < n->n_inputs; k++) assert_int_equal(g->values[n->inputs[k]].dtype, OT_F16);
        }
        if (n->op == OT_OP_TRANSPOSE) { /* a weight's float32 Transpose its MatMul no longer reads is gone */
            const ot_value *y = &g->values[n->outputs[0]];
            if (!y->n_consumers) fail_msg("Transpose '%s' is read by nothing", n->name);
            transposes += g->values[n->inputs[0]].dtype == OT_F16;
        }
        if (n->op == OT_OP_SOFTMAX || n->op == OT_OP_LAYER_NORM) {
            softmax += n->op == OT_OP_SOFTMAX;
            for (int k = 0; k < n->n_inputs; k++)
                if (n->inputs[k] >= 0) assert_int_not_equal(g->values[n->inputs[k]].dtype, OT_F16);
            assert_int_equal(g->values[n->outputs[0]].dtype, OT_F32);
        }
    }
    assert_true(matmul >= 8 && softmax >= 2 && transposes >= 1);
    assert_true(r.n_f32_list >= 2 && r.n_promoted >= 2);
    check_casts_unique(g, &r);
    ot_autocast_result_free(&r);
    ot_graph_free(g);
    ot_model_free(m);
}

/* The CPU's own table: a low-list node is low exactly when the CPU has the kernel. */
static void test_cpu_table(void **state) {
    (void)state;
    ot_model *m = test_model(S "tinygpt.onnx");
    ot_graph *g = bound_copy(m, 2);
    ot_graph *ref = bound_copy(m, 2);
    ot_error err = {0};
    ot_autocast_result r;
    if (ot_autocast_apply(g, OT_BF16, cpu_supports, NULL, &r, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < ref->n_nodes; i++) {
        ot_node *n = &ref->nodes[i];
        if (n->removed || ot_autocast_op_list(n->op) <= 0 || r.cls[i] == OT_AC_F32) continue;
        bool all_f32_in = true; /* the first low-list nodes read float32 values only */
        for (int k = 0; k < n->n_inputs; k++)
            all_f32_in &= n->inputs[k] < 0 || g->values[g->nodes[i].inputs[k]].dtype != OT_F16;
        ot_tensor in[8] = {{0}}, out[4] = {{0}};
        for (int k = 0; k < n->n_inputs && k < 8; k++)
            if (n->inputs[k] >= 0) in[k] = (ot_tensor){.dtype = OT_BF16, .shape = ref->values[n->inputs[k]].shape};
        for (int k = 0; k < n->n_outputs && k < 4; k++)
            if (n->outputs[k] >= 0) out[k] = (ot_tensor){.dtype = OT_BF16, .shape = ref->values[n->outputs[k]].shape};
        if (all_f32_in) assert_int_equal(r.cls[i] == OT_AC_LOW, ot_cpu_supports(n, in, out));
    }
    print_message("tinygpt bf16 on the CPU's table: %d low, %d low-list fallbacks, %d casts\n", r.n_low,
                  r.n_low_list_fallback, r.n_casts);
    ot_autocast_result_free(&r);
    ot_graph_free(g);
    ot_graph_free(ref);
    ot_model_free(m);
}

typedef struct planned {
    int64_t kept, transient, peak;
    bool grads_f32;
} planned;

static planned plan(ot_model *m, ot_precision p, const char *remat, int64_t batch) {
    ot_error err = {0};
    ot_train_options o;
    ot_train_options_default(&o);
    o.plan_only = true;
    o.batch_size = batch;
    o.remat = remat;
    o.precision = p;
    /* fp16's loss scaling adds a scalar Mul to the seed, which moves the peak a step:
     * off, so that bf16 and fp16 plan the same graph */
    o.loss_scale.mode = OT_LOSS_SCALE_OFF;
    int asked = 0;
    o.precision_supports = fake_supports;
    o.precision_ctx = &asked;
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, NULL, true, &s, &err)) fail_msg("%s", err.msg);
    const ot_plan *pl = ot_train_plan(s);
    planned r = {.kept = (int64_t)ot_plan_bytes_at_peak(pl, OT_MEM_KEPT),
                 .transient = (int64_t)ot_plan_bytes_at_peak(pl, OT_MEM_TRANSIENT),
                 .peak = (int64_t)ot_plan_peak_bytes(pl),
                 .grads_f32 = true};
    const ot_autodiff_result *ad = ot_train_autodiff(s);
    const ot_graph *g = ot_train_graph(s);
    for (int k = 0; k < ad->n_params; k++) r.grads_f32 &= g->values[ad->grads[k]].dtype == OT_F32;
    /* the by-dtype split adds up to the category */
    size_t by[OT_PLAN_DTYPES], sum = 0;
    ot_plan_bytes_by_dtype(pl, g, OT_MEM_KEPT, true, by);
    for (int d = 0; d < OT_PLAN_DTYPES; d++) sum += by[d];
    assert_int_equal(sum, (size_t)r.kept);
    /* without remat, most of what is kept is low: over every kept block (at the peak step,
     * the first step that reaches the top, few may be live once the planner's second
     * placement has packed the plan) */
    ot_plan_bytes_by_dtype(pl, g, OT_MEM_KEPT, false, by);
    if (p != OT_PRECISION_FP32 && !strcmp(remat, "none")) assert_true(by[ot_precision_dtype(p)] > by[OT_F32]);
    ot_train_session_free(s);
    return r;
}

static void test_plan_shrinks(void **state) {
    (void)state;
    /* the mlp at a batch where activations outweigh the weights' low copies (at
     * batch 8 its 100 KiB of weights dominate, and their copies cost more than the
     * activations save) */
    const char *models[] = {S "tinygpt.onnx", S "mlp.onnx"};
    const int64_t batch[] = {8, 256};
    for (int i = 0; i < 2; i++) {
        ot_model *m = test_model("%s", models[i]);
        planned f = plan(m, OT_PRECISION_FP32, "none", batch[i]);
        planned b = plan(m, OT_PRECISION_BF16, "none", batch[i]);
        planned h = plan(m, OT_PRECISION_FP16, "none", batch[i]);
        print_message("%s: kept+transient fp32 %lld, bf16 %lld (%.3fx); peak %lld -> %lld\n", models[i],
                      (long long)(f.kept + f.transient), (long long)(b.kept + b.transient),
                      (double)(b.kept + b.transient) / (double)(f.kept + f.transient), (long long)f.peak,
                      (long long)b.peak);
        assert_true(b.kept + b.transient < f.kept + f.transient);
        /* fp16 shrinks too; not to bf16's bytes at the peak: the CPU's fp16 GEMM converts
         * its operands in a planned workspace and bf16's does not, so the peaks fall at
         * different steps, with different values live */
        assert_true(h.kept + h.transient < f.kept + f.transient);
        assert_true(b.grads_f32 && h.grads_f32);
        /* remat plans in the real sizes too */
        planned bs = plan(m, OT_PRECISION_BF16, "selective", batch[i]);
        planned ba = plan(m, OT_PRECISION_BF16, "all", batch[i]);
        assert_true(bs.peak <= b.peak && ba.peak <= b.peak);
        ot_model_free(m);
    }
}

/* Kernels for the GEMMs only: every node of the training step, backward included, is
 * one the stand-in runs (the gradient rules' element ops and sums over low values
 * are wrapped in casts), the GEMMs still low. */
static void test_backward_legal(void **state) {
    (void)state;
    ot_model *m = test_model(S "tinygpt.onnx");
    ot_error err = {0};
    ot_train_options o;
    ot_train_options_default(&o);
    o.plan_only = true;
    o.batch_size = 2;
    o.remat = "selective";
    o.precision = OT_PRECISION_BF16;
    o.precision_supports = gemm_only;
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, NULL, true, &s, &err)) fail_msg("%s", err.msg);
    const ot_graph *g = ot_train_graph(s);
    int low_gemms = 0, wrapped = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ot_node *n = &g->nodes[i];
        if (n->removed) continue;
        ot_tensor in[16] = {{0}}, out[8] = {{0}};
        for (int k = 0; k < n->n_inputs && k < 16; k++)
            if (n->inputs[k] >= 0) in[k] = (ot_tensor){.dtype = g->values[n->inputs[k]].dtype, .shape = g->values[n->inputs[k]].shape};
        for (int k = 0; k < n->n_outputs && k < 8; k++)
            if (n->outputs[k] >= 0) out[k] = (ot_tensor){.dtype = g->values[n->outputs[k]].dtype, .shape = g->values[n->outputs[k]].shape};
        if (!gemm_only(NULL, n, in, out)) fail_msg("node '%s' (%s, %s) has low values the stand-in cannot run", n->name, n->op_type, ot_phase_name(n->phase));
        low_gemms += (n->op == OT_OP_MATMUL || n->op == OT_OP_GEMM) && in[0].dtype == OT_BF16;
        if (n->phase == OT_PHASE_BACKWARD && n->op == OT_OP_CAST) {
            const char *a = g->values[n->inputs[0]].name, *b = g->values[n->outputs[0]].name;
            size_t la = strlen(a), lb = strlen(b);
            wrapped += (la > 4 && !strcmp(a + la - 4, ".f32")) || (lb > 4 && !strcmp(b + lb - 4, ".f32"));
        }
    }
    print_message("tinygpt bf16, GEMM kernels only: %d low GEMMs, %d casts around backward nodes\n", low_gemms, wrapped);
    assert_true(low_gemms > 8);
    ot_train_session_free(s);
    ot_model_free(m);
}

/* y = x·W1 + x·W2: x's low copy feeds two GEMMs, so its gradient is a sum of two low
 * contributions, which the stand-in cannot add in bf16: the sum is wrapped in casts
 * (float32 inside), and every node is then one the stand-in runs. */
static void test_backward_sum_wrapped(void **state) {
    (void)state;
    uint32_t rng = 7;
    ot_graph *g = gc_graph();
    const int64_t xd[2] = {4, 8}, wd[2] = {8, 8};
    int x = gc_param(g, "x", 2, xd, &rng, -1, 1, false), w1 = gc_param(g, "w1", 2, wd, &rng, -1, 1, false),
        w2 = gc_param(g, "w2", 2, wd, &rng, -1, 1, false);
    int y1 = gc_val(g, "y1", OT_F32, 2, xd), y2 = gc_val(g, "y2", OT_F32, 2, xd), y = gc_val(g, "y", OT_F32, 2, xd);
    int a[2] = {x, w1}, b[2] = {x, w2}, c[2] = {y1, y2};
    gc_op(g, OT_OP_MATMUL, a, 2, &y1, 1);
    gc_op(g, OT_OP_MATMUL, b, 2, &y2, 1);
    gc_op(g, OT_OP_ADD, c, 2, &y, 1);
    ot_error err = {0};
    ot_autocast_result r;
    if (ot_autocast_apply(g, OT_BF16, gemm_only, NULL, &r, &err)) fail_msg("%s", err.msg);
    assert_int_equal(r.n_low, 2);
    int loss = gc_loss(g, &y, 1, &rng);
    ot_autodiff_options ao = {.loss_value = loss};
    ot_autodiff_result ad;
    if (ot_autodiff_build(g, &ao, &ad, &err)) fail_msg("%s", err.msg);
    int n = ot_autocast_legalize_backward(g, OT_BF16, 0, gemm_only, NULL);
    assert_true(n >= 1);
    for (int i = 0; i < g->n_nodes; i++) {
        const ot_node *nd = &g->nodes[i];
        if (nd->removed) continue;
        ot_tensor in[8] = {{0}}, out[4] = {{0}};
        for (int k = 0; k < nd->n_inputs && k < 8; k++)
            if (nd->inputs[k] >= 0) in[k] = (ot_tensor){.dtype = g->values[nd->inputs[k]].dtype};
        for (int k = 0; k < nd->n_outputs && k < 4; k++)
            if (nd->outputs[k] >= 0) out[k] = (ot_tensor){.dtype = g->values[nd->outputs[k]].dtype};
        if (!gemm_only(NULL, nd, in, out)) fail_msg("node '%s' (%s) left with low values", nd->name, nd->op_type);
    }
    for (int k = 0; k < ad.n_params; k++) assert_int_equal(g->values[ad.grads[k]].dtype, OT_F32);
    ot_autodiff_result_free(&ad);
    ot_autocast_result_free(&r);
    ot_graph_free(g);
}

static void test_parse(void **state) {
    (void)state;
    ot_precision p;
    ot_error err = {0};
    assert_int_equal(ot_precision_parse("bf16", &p, &err), OT_OK);
    assert_int_equal(p, OT_PRECISION_BF16);
    assert_int_equal(ot_precision_parse("FP16", &p, &err), OT_OK);
    assert_int_equal(ot_precision_dtype(p), OT_F16);
    assert_int_equal(ot_precision_parse("float32", &p, &err), OT_OK);
    assert_int_equal(ot_precision_parse("int8", &p, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "--precision"));
    assert_non_null(strstr(err.msg, "int8"));
}

/* --fused-attention under bf16 on the CPU's table: every Attention and AttentionGrad
 * runs low (Q, K, V, dY and their outputs bf16, the mask float32 or bool), so no
 * float32 copy of Q, K or V is made in the forward pass or again in the backward. */
static void test_fused_attention_low(void **state) {
    (void)state;
    ot_model *m = test_model(S "tinygpt.onnx");
    ot_error err = {0};
    ot_train_options o;
    ot_train_options_default(&o);
    o.plan_only = true;
    o.batch_size = 4;
    o.precision = OT_PRECISION_BF16;
    o.fused_attention = OT_FUSED_ATTN_ON;
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, NULL, true, &s, &err)) fail_msg("%s", err.msg);
    const ot_graph *g = ot_train_graph(s);
    int n_fwd = 0, n_bwd = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ot_node *n = &g->nodes[i];
        if (n->removed || (n->op != OT_OP_ATTENTION && n->op != OT_OP_ATTENTION_GRAD)) continue;
        int o0 = n->op == OT_OP_ATTENTION_GRAD;
        n_fwd += !o0, n_bwd += o0;
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0) continue;
            ot_dtype d = g->values[v].dtype;
            if (k == o0 + 3) assert_true(d == OT_F32 || d == OT_BOOL);
            else if (k < o0 + 3) {
                if (d != OT_BF16) fail_msg("%s input %d (%s) is %s", n->name, k, g->values[v].name, ot_dtype_name(d));
                int p = g->values[v].producer;
                assert_false(p >= 0 && g->nodes[p].op == OT_OP_CAST && g->values[g->nodes[p].inputs[0]].dtype == OT_F32);
            }
        }
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0) assert_int_equal(g->values[n->outputs[k]].dtype, OT_BF16);
    }
    assert_int_equal(n_fwd, 2);
    assert_int_equal(n_bwd, 2);
    assert_int_equal(ot_train_autocast(s)->n_low_list_fallback, 0);
    ot_train_session_free(s);
    ot_model_free(m);
}

/* What runs today (the CPU's kernels): one step's gradients in bf16 are bitwise the
 * same under --remat none and all, and a float32 graph's input is never changed. */
static void test_grads_bitwise(void **state) {
    (void)state;
    ot_model *m = test_model(S "tinygpt.onnx");
    ot_dataset d;
    ot_error err = {0};
    memset(&d, 0, sizeof d);
    if (ot_dataset_add(&d, "", "tokens", -1, test_npy(S "data/tinygpt_tokens.npy"), &err)) fail_msg("%s", err.msg);
    if (ot_dataset_add(&d, OT_DATA_LABELS, "labels", -1, test_npy(S "data/tinygpt_labels.npy"), &err))
        fail_msg("%s", err.msg);
    const char *pol[2] = {"none", "all"};
    double loss[2];
    float *g0 = NULL;
    size_t n0 = 0;
    for (int k = 0; k < 2; k++) {
        ot_train_options o;
        ot_train_options_default(&o);
        o.batch_size = 4;
        o.n_threads = 2;
        o.remat = pol[k];
        o.precision = OT_PRECISION_BF16;
        o.keep_host_weights = true;
        ot_train_session *s = NULL;
        if (ot_train_session_new(m, &o, &d, false, &s, &err)) fail_msg("%s", err.msg);
        ot_step_results r;
        if (ot_train_step_results(s, &d, &r, &err)) fail_msg("%s", err.msg);
        loss[k] = r.loss;
        size_t n = 0;
        for (int i = 0; i < r.n; i++) n += r.tensors[i]->nbytes;
        float *buf = malloc(n + 1);
        size_t off = 0;
        for (int i = 0; i < r.n; i++) {
            memcpy((char *)buf + off, r.tensors[i]->data, r.tensors[i]->nbytes);
            off += r.tensors[i]->nbytes;
        }
        if (k == 0) g0 = buf, n0 = n;
        else {
            assert_int_equal(n, n0);
            assert_memory_equal(buf, g0, n);
            free(buf);
        }
        ot_step_results_free(&r);
        ot_train_session_free(s);
    }
    assert_memory_equal(&loss[0], &loss[1], sizeof loss[0]);
    free(g0);
    ot_dataset_free(&d);
    ot_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_fake),     cmocka_unit_test(test_tinygpt_fake), cmocka_unit_test(test_cpu_table),
        cmocka_unit_test(test_plan_shrinks), cmocka_unit_test(test_parse), cmocka_unit_test(test_backward_legal),
        cmocka_unit_test(test_backward_sum_wrapped),        cmocka_unit_test(test_grads_bitwise),
        cmocka_unit_test(test_fused_attention_low),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
