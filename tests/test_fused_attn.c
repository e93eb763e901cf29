/* test_fused_attn.c — attention that keeps no probabilities (issue 27/28):
 * autodiff/fused_attn.c's pattern matching over the forms exporters write (GPT-2:
 * K^T by a Transpose of [B,S,H,D], Div, Cast, Where(causal, s, finfo.min) then Add of
 * a padding mask; BERT: Div, Add(mask, s); a Mul scale and no mask; nanoGPT's
 * masked_fill(causal == 0, -inf) as Where(cond, -inf, s); the dynamo exporter's Mul
 * by a rank-0 initializer, Add of Where(causal, 0, finfo.min) and Dropout's ratio as a
 * rank-0 initializer, all three read as params by the importer) and its skip cases;
 * and the fused graph against the plain one it replaces, with attention Dropout: the
 * same loss and gradients within rounding, which holds only when the fused op draws
 * the Dropout's own mask; the same bits on 1 and 2 threads. */
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
#include "ref_eval.h"

#define B 2
#define H 2
#define S 5
#define D 3

typedef enum { M_GPT2, M_BERT, M_MUL, M_FILL, M_DYNAMO, SKIP_TWICE, SKIP_MASK_READ, SKIP_FILL, SKIP_MASK_FIRST } kind;

static int op1(ot_graph *g, ot_op op, const int *in, int n_in, int out) { return gc_op(g, op, in, n_in, &out, 1); }

static int act(ot_graph *g, const char *name, ot_dtype dt, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    int64_t d[4] = {d0, d1, d2, d3};
    return gc_val(g, name, dt, 4, d);
}

static int scalar(ot_graph *g, const char *name, float x) { return gc_const(g, name, OT_F32, 0, NULL, &x); }

/* A rank-0 float initializer as the importer reads it: a param (the param rule makes
 * it a constant later). */
static int scalar_init(ot_graph *g, const char *name, float x) {
    int v = scalar(g, name, x);
    g->values[v].kind = OT_VK_PARAM;
    return v;
}

/* Q, K, V params -> the attention block of kind k -> Y [B,H,S,D]. */
static ot_graph *model(kind k, int *y) {
    ot_graph *g = gc_graph();
    uint32_t rng = 17 + (uint32_t)k;
    int64_t qd[4] = {B, H, S, D}, kd_bshd[4] = {B, S, H, D};
    int q = gc_param(g, "q", 4, qd, &rng, -1, 1, false);
    bool gpt2 = k == M_GPT2 || k == SKIP_TWICE || k == SKIP_MASK_READ || k == SKIP_FILL;
    int kk = gc_param(g, "k", 4, gpt2 ? kd_bshd : qd, &rng, -1, 1, false);
    int v = gc_param(g, "v", 4, qd, &rng, -1, 1, false);
    int kt = act(g, "kt", OT_F32, B, H, D, S);
    int tn = op1(g, OT_OP_TRANSPOSE, &kk, 1, kt);
    int64_t perm_gpt2[4] = {0, 2, 3, 1}, perm_swap[4] = {0, 1, 3, 2};
    ot_node_set_attr_ints(&g->nodes[tn], "perm", gpt2 ? perm_gpt2 : perm_swap, 4);
    int s = act(g, "scores", OT_F32, B, H, S, S);
    int in2[2] = {q, kt};
    op1(g, OT_OP_MATMUL, in2, 2, s);
    int sc = act(g, "scaled", OT_F32, B, H, S, S);
    if (k == M_DYNAMO) {
        int mi[2] = {s, scalar_init(g, "val_60", 1.0f / sqrtf((float)D))};
        op1(g, OT_OP_MUL, mi, 2, sc);
    } else if (k == M_MUL || k == M_FILL) {
        int mi[2] = {scalar(g, "half", 0.5f), s};
        op1(g, OT_OP_MUL, mi, 2, sc);
    } else {
        int di[2] = {s, scalar(g, "sqrt_d", sqrtf((float)D))};
        op1(g, OT_OP_DIV, di, 2, sc);
    }
    int x = sc;
    if (gpt2) { /* .to(dtype), Where(causal, s, finfo.min), + padding mask */
        int c = act(g, "cast", OT_F32, B, H, S, S);
        ot_node_set_attr_int(&g->nodes[op1(g, OT_OP_CAST, &x, 1, c)], "to", OT_F32);
        uint8_t causal[S * S];
        for (int i = 0; i < S * S; i++)
            causal[i] = i % S <= i / S;
        int64_t cd[4] = {1, 1, S, S};
        int w = act(g, "where", OT_F32, B, H, S, S);
        int wi[3] = {gc_const(g, "causal", OT_BOOL, 4, cd, causal), c,
                     scalar(g, "fill", k == SKIP_FILL ? -1.0f : -3.4028234663852886e38f)};
        op1(g, OT_OP_WHERE, wi, 3, w);
        x = w;
    }
    if (k == M_DYNAMO) { /* scores + Where(causal, 0, finfo.min), both scalars initializers */
        uint8_t causal[S * S];
        for (int i = 0; i < S * S; i++)
            causal[i] = i % S <= i / S;
        int64_t cd[4] = {1, 1, S, S};
        int w = act(g, "where", OT_F32, 1, 1, S, S), a = act(g, "masked", OT_F32, B, H, S, S);
        int wi[3] = {gc_const(g, "causal", OT_BOOL, 4, cd, causal), scalar_init(g, "zeros", 0.0f),
                     scalar_init(g, "val_27", -3.4028234663852886e38f)};
        op1(g, OT_OP_WHERE, wi, 3, w);
        int ai[2] = {x, w};
        op1(g, OT_OP_ADD, ai, 2, a);
        x = a;
    } else if (k == M_FILL) { /* masked_fill: cond marks the hidden scores */
        uint8_t hidden[S * S];
        for (int i = 0; i < S * S; i++)
            hidden[i] = i % S > i / S;
        int64_t cd[2] = {S, S};
        int w = act(g, "filled", OT_F32, B, H, S, S);
        int wi[3] = {gc_const(g, "hidden", OT_BOOL, 2, cd, hidden), scalar(g, "ninf", -INFINITY), x};
        op1(g, OT_OP_WHERE, wi, 3, w);
        x = w;
    } else if (k != M_MUL) { /* padding: batch 1's last key masked */
        float pad[B * S] = {0};
        pad[B * S - 1] = -3.4028234663852886e38f;
        int64_t pd[4] = {B, 1, 1, S};
        int a = act(g, "masked", OT_F32, B, H, S, S), m = gc_const(g, "pad", OT_F32, 4, pd, pad);
        int ai[2] = {k == M_BERT ? m : x, k == M_BERT ? x : m};
        op1(g, OT_OP_ADD, ai, 2, a);
        x = a;
    }
    if (k == SKIP_MASK_FIRST) { /* a mask before the scale: not the pattern */
        int sw = act(g, "rescaled", OT_F32, B, H, S, S), si[2] = {x, scalar(g, "two", 2.0f)};
        op1(g, OT_OP_MUL, si, 2, sw);
        x = sw;
    }
    int p = act(g, "probs", OT_F32, B, H, S, S);
    ot_node_set_attr_int(&g->nodes[op1(g, OT_OP_SOFTMAX, &x, 1, p)], "axis", -1);
    if (k == SKIP_TWICE) g->values[p].is_graph_output = true;
    int pd = p;
    if (k != M_MUL) { /* training-mode Dropout with opset-12 inputs */
        uint8_t yes = 1;
        int ratio = k == M_DYNAMO ? scalar_init(g, "ratio", 0.3f) : scalar(g, "ratio", 0.3f);
        int di[3] = {p, ratio, gc_const(g, "training", OT_BOOL, 0, NULL, &yes)};
        int outs[2] = {act(g, "dropped", OT_F32, B, H, S, S), act(g, "dmask", OT_BOOL, B, H, S, S)};
        gc_op(g, OT_OP_DROPOUT, di, 3, outs, 2);
        if (k == SKIP_MASK_READ) g->values[outs[1]].is_graph_output = true;
        pd = outs[0];
    }
    *y = act(g, "y", OT_F32, B, H, S, D);
    int pv[2] = {pd, v};
    op1(g, OT_OP_MATMUL, pv, 2, *y);
    return g;
}

static int live(const ot_graph *g, ot_op op) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !g->nodes[i].removed && g->nodes[i].op == op;
    return n;
}

static void test_patterns(void **state) {
    (void)state;
    const kind fused[] = {M_GPT2, M_BERT, M_MUL, M_FILL, M_DYNAMO};
    for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++) {
        int y;
        ot_graph *g = model(fused[i], &y);
        ot_fused_attn_result r;
        ot_error err = {0};
        assert_int_equal(ot_fused_attn_rewrite(g, OT_FUSED_ATTN_ON, &r, &err), OT_OK);
        if (r.n_fused != 1) fail_msg("kind %d: %s / %s", fused[i], r.why, r.first_skip);
        assert_int_equal(r.n_dropout, fused[i] == M_MUL ? 0 : 1);
        assert_int_equal(live(g, OT_OP_ATTENTION), 1);
        assert_int_equal(live(g, OT_OP_SOFTMAX) + live(g, OT_OP_DROPOUT) + live(g, OT_OP_MATMUL), 0);
        assert_int_equal(r.prob_bytes, (size_t)(B * H * S * S) * sizeof(float));
        assert_int_equal(g->values[y].producer >= 0 && g->nodes[g->values[y].producer].op == OT_OP_ATTENTION, 1);
        assert_int_equal(ot_graph_verify(g, &err), OT_OK);
        /* the scale the fused node holds as an attribute trains no more: a constant,
         * so --train naming it matches no parameter */
        for (int v = 0; v < g->n_values; v++)
            if (g->values[v].shape.rank == 0 && g->values[v].n_consumers == 0)
                assert_int_not_equal(g->values[v].kind, OT_VK_PARAM);
        ot_graph_free(g);
    }
    /* off leaves the graph alone; auto fuses here (5 keys > head size 3) */
    int y;
    ot_graph *g = model(M_GPT2, &y);
    ot_fused_attn_result r;
    ot_error err = {0};
    assert_int_equal(ot_fused_attn_rewrite(g, OT_FUSED_ATTN_OFF, &r, &err), OT_OK);
    assert_int_equal(r.n_fused, 0);
    assert_int_equal(live(g, OT_OP_SOFTMAX), 1);
    assert_int_equal(ot_fused_attn_rewrite(g, OT_FUSED_ATTN_AUTO, &r, &err), OT_OK);
    assert_int_equal(r.n_fused, 1);
    ot_graph_free(g);
}

static void test_skips(void **state) {
    (void)state;
    const struct {
        kind k;
        const char *why;
    } cases[] = {
        {SKIP_TWICE, "more than one node"},
        {SKIP_MASK_READ, "mask is read"},
        {SKIP_FILL, "fill is not a constant"},
        {SKIP_MASK_FIRST, "not MatMul"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int y;
        ot_graph *g = model(cases[i].k, &y);
        ot_fused_attn_result r;
        ot_error err = {0};
        assert_int_equal(ot_fused_attn_rewrite(g, OT_FUSED_ATTN_ON, &r, &err), OT_OK);
        assert_int_equal(r.n_fused, 0);
        assert_int_equal(r.n_skipped, 1);
        if (!strstr(r.first_skip, cases[i].why)) fail_msg("case %zu: '%s' lacks '%s'", i, r.first_skip, cases[i].why);
        assert_int_equal(live(g, OT_OP_SOFTMAX), 1);
        ot_graph_free(g);
    }
    ot_fused_attn_mode m;
    ot_error err = {0};
    assert_int_equal(ot_fused_attn_parse("--fused-attention", "maybe", &m, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "--fused-attention 'maybe'"));
}

/* Loss and gradients of Q, K, V (autodiff, ref_eval at seed 5, step 2). */
static double run(kind k, ot_fused_attn_mode mode, int threads, float grads[3][B * H * S * D]) {
    int y;
    ot_graph *g = model(k, &y);
    ot_fused_attn_result r;
    ot_error err = {0};
    assert_int_equal(ot_fused_attn_rewrite(g, mode, &r, &err), OT_OK);
    assert_int_equal(r.n_fused, mode == OT_FUSED_ATTN_OFF ? 0 : 1);
    uint32_t rng = 99;
    int loss = gc_loss(g, &y, 1, &rng);
    ot_autodiff_options ao = {.loss_value = loss};
    ot_autodiff_result ad;
    assert_int_equal(ot_autodiff_build(g, &ao, &ad, &err), OT_OK);
    assert_int_equal(ad.n_params, 3);
    ot_ref_env *e = ot_ref_new(g);
    e->n_threads = threads;
    e->seed = 5;
    e->step = 2;
    if (ot_ref_run(e, false, &err)) fail_msg("%s", err.msg);
    double lv = ot_ref_f32(e, loss)[0];
    for (int p = 0; p < 3; p++)
        memcpy(grads[p], ot_ref_f32(e, ad.grads[p]), sizeof grads[p]);
    ot_ref_free(e);
    ot_autodiff_result_free(&ad);
    ot_graph_free(g);
    return lv;
}

static void compare(kind k) {
    static float plain[3][B * H * S * D], f1[3][B * H * S * D], f2[3][B * H * S * D];
    double l0 = run(k, OT_FUSED_ATTN_OFF, 1, plain), l1 = run(k, OT_FUSED_ATTN_ON, 1, f1);
    double l2 = run(k, OT_FUSED_ATTN_ON, 2, f2);
    if (fabs(l0 - l1) > 1e-5 * fmax(1.0, fabs(l0))) fail_msg("kind %d: loss plain %.9g fused %.9g", k, l0, l1);
    assert_memory_equal(f1, f2, sizeof f1); /* the same bits on any thread count */
    assert_true(l1 == l2);
    for (int p = 0; p < 3; p++) {
        float mx = 0.0f;
        for (int i = 0; i < B * H * S * D; i++)
            mx = fmaxf(mx, fabsf(plain[p][i]));
        for (int i = 0; i < B * H * S * D; i++)
            if (fabsf(plain[p][i] - f1[p][i]) > 1e-5f * fmaxf(mx, 1e-3f))
                fail_msg("kind %d grad %d[%d]: plain %.9g fused %.9g", k, p, i, plain[p][i], f1[p][i]);
    }
}

static void test_against_plain(void **state) {
    (void)state;
    compare(M_GPT2); /* with Dropout: the fused op's mask must be the Dropout's */
    compare(M_BERT);
    compare(M_MUL);
    compare(M_FILL);
    compare(M_DYNAMO); /* its Dropout's ratio a rank-0 initializer too */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patterns),
        cmocka_unit_test(test_skips),
        cmocka_unit_test(test_against_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
