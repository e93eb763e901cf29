/* test_grad_xfmr.c — finite-difference checks of the gradient rules of the transformer
 * ops of issue 26 (autodiff/grad_xfmr.c) through the CPU kernels (cpu_xfmr.c):
 * RMSNormalization (X and scale; last axis, an inner axis, a one-element scale),
 * RotaryEmbedding (3-D with position ids, 4-D without, interleaved, a partial rotary
 * dim) and Attention (4-D, 3-D with GQA, causal, bool and float masks, softcap, a
 * scale, a past key/value cache, Attention-24's nonpad_kv_seqlen). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <cmocka.h>

#include "grad_check.h"

static void check_rms(int64_t axis, bool scalar_scale) {
    ot_graph *g = gc_graph();
    uint32_t rng = 17 + (uint32_t)axis * 3 + scalar_scale;
    int64_t xd[3] = {2, 3, 4}, one = 1;
    int a = (int)(axis < 0 ? axis + 3 : axis);
    int x = gc_param(g, "X", 3, xd, &rng, -1, 1, false);
    int sc = scalar_scale ? gc_param(g, "scale", 1, &one, &rng, 0.5f, 1.5f, false)
                          : gc_param(g, "scale", 3 - a, xd + a, &rng, 0.5f, 1.5f, false);
    int in[2] = {x, sc};
    int y = gc_val(g, "Y", OT_F32, 3, xd);
    int n = gc_op(g, OT_OP_RMS_NORM, in, 2, &y, 1);
    ot_node_set_attr_int(&g->nodes[n], "axis", axis);
    ot_node_set_attr_float(&g->nodes[n], "epsilon", 1e-3f);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_rms_norm(void **state) {
    (void)state;
    check_rms(-1, false);
    check_rms(1, false);
    check_rms(-1, true);
}

/* cos / sin of angles pos * theta_k, as HF builds its caches. */
static void rope_caches(float *c, float *s, int64_t rows, int64_t half) {
    for (int64_t p = 0; p < rows; p++)
        for (int64_t k = 0; k < half; k++) {
            double ang = (double)p * pow(100.0, -(double)k / (double)half) + 0.3 * (double)k;
            c[p * half + k] = (float)cos(ang);
            s[p * half + k] = (float)sin(ang);
        }
}

static void check_rope(bool three_d, bool pos, bool interleaved, int64_t rot) {
    ot_graph *g = gc_graph();
    uint32_t rng = 29 + three_d * 2 + pos * 4 + interleaved * 8;
    int64_t B = 2, S = 3, H = 2, D = 6, half = (rot ? rot : D) / 2, rows = pos ? 7 : B * S;
    int64_t xd4[4] = {B, H, S, D}, xd3[3] = {B, S, H * D};
    int x = three_d ? gc_param(g, "X", 3, xd3, &rng, -1, 1, false) : gc_param(g, "X", 4, xd4, &rng, -1, 1, false);
    float c[64], s[64];
    rope_caches(c, s, rows, half);
    int64_t cd2[2] = {rows, half}, cd3[3] = {B, S, half}, pd[2] = {B, S};
    int64_t ids[6] = {0, 2, 4, 6, 1, 3};
    int in[4] = {x, pos ? gc_const(g, "cos", OT_F32, 2, cd2, c) : gc_const(g, "cos", OT_F32, 3, cd3, c),
                 pos ? gc_const(g, "sin", OT_F32, 2, cd2, s) : gc_const(g, "sin", OT_F32, 3, cd3, s),
                 pos ? gc_const(g, "pos", OT_I64, 2, pd, ids) : -1};
    int y = three_d ? gc_val(g, "Y", OT_F32, 3, xd3) : gc_val(g, "Y", OT_F32, 4, xd4);
    int n = gc_op(g, OT_OP_ROTARY_EMBEDDING, in, pos ? 4 : 3, &y, 1);
    if (three_d) ot_node_set_attr_int(&g->nodes[n], "num_heads", H);
    if (interleaved) ot_node_set_attr_int(&g->nodes[n], "interleaved", 1);
    if (rot) ot_node_set_attr_int(&g->nodes[n], "rotary_embedding_dim", rot);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_rotary_embedding(void **state) {
    (void)state;
    check_rope(true, true, false, 0);
    check_rope(false, false, false, 0);
    check_rope(false, true, true, 0);
    check_rope(true, false, true, 4);
    check_rope(false, true, false, 2);
}

typedef struct attn_case {
    bool three_d;
    int64_t hq, hkv, sq, skv, past;
    int mask; /* 0 none, 1 bool, 2 float */
    bool causal;
    float softcap, scale;
    bool nonpad; /* Attention-24's nonpad_kv_seqlen: {skv - 1, skv} */
    float dropout; /* --fused-attention's absorbed Dropout (attribute dropout_ratio) */
} attn_case;

static void check_attention(const attn_case *k) {
    ot_graph *g = gc_graph();
    uint32_t rng = 41 + (uint32_t)(k->hq * 7 + k->skv * 3 + k->mask + k->past);
    int64_t B = 2, D = 4, Dv = 3, T = k->past + k->skv;
    int64_t qd4[4] = {B, k->hq, k->sq, D}, kd4[4] = {B, k->hkv, k->skv, D}, vd4[4] = {B, k->hkv, k->skv, Dv};
    int64_t qd3[3] = {B, k->sq, k->hq * D}, kd3[3] = {B, k->skv, k->hkv * D}, vd3[3] = {B, k->skv, k->hkv * Dv};
    int64_t yd4[4] = {B, k->hq, k->sq, Dv}, yd3[3] = {B, k->sq, k->hq * Dv};
    int r = k->three_d ? 3 : 4;
    int q = gc_param(g, "Q", r, k->three_d ? qd3 : qd4, &rng, -1, 1, false);
    int kk = gc_param(g, "K", r, k->three_d ? kd3 : kd4, &rng, -1, 1, false);
    int v = gc_param(g, "V", r, k->three_d ? vd3 : vd4, &rng, -1, 1, false);
    int in[7] = {q, kk, v, -1, -1, -1, -1}, n_in = 3;
    if (k->mask) {
        /* [sq, T] broadcast over batch and heads; bool: row 0 keeps one key only */
        int64_t md[2] = {k->sq, T};
        uint8_t mb[64];
        float mf[64];
        for (int64_t i = 0; i < k->sq * T; i++) {
            mb[i] = (uint8_t)(i % T == 0 || (i / T > 0 && (i % 3) != 1));
            mf[i] = (float)((i * 7) % 5) * 0.25f - 0.5f;
        }
        in[3] = k->mask == 1 ? gc_const(g, "mask", OT_BOOL, 2, md, mb) : gc_const(g, "mask", OT_F32, 2, md, mf);
        n_in = 4;
    }
    if (k->past) {
        int64_t pkd[4] = {B, k->hkv, k->past, D}, pvd[4] = {B, k->hkv, k->past, Dv};
        float pk[256], pv[256];
        for (int i = 0; i < 256; i++)
            pk[i] = gc_rand(&rng) - 0.5f, pv[i] = gc_rand(&rng) - 0.5f;
        in[4] = gc_const(g, "past_key", OT_F32, 4, pkd, pk);
        in[5] = gc_const(g, "past_value", OT_F32, 4, pvd, pv);
        n_in = 6;
    }
    if (k->nonpad) {
        int64_t nb = B, lens[2] = {k->skv - 1, k->skv};
        in[6] = gc_const(g, "nonpad", OT_I64, 1, &nb, lens);
        n_in = 7;
    }
    int y = gc_val(g, "Y", OT_F32, r, k->three_d ? yd3 : yd4);
    int n = gc_op(g, OT_OP_ATTENTION, in, n_in, &y, 1);
    if (k->three_d) {
        ot_node_set_attr_int(&g->nodes[n], "q_num_heads", k->hq);
        ot_node_set_attr_int(&g->nodes[n], "kv_num_heads", k->hkv);
    }
    if (k->causal) ot_node_set_attr_int(&g->nodes[n], "is_causal", 1);
    if (k->softcap > 0) ot_node_set_attr_float(&g->nodes[n], "softcap", k->softcap);
    if (k->scale > 0) ot_node_set_attr_float(&g->nodes[n], "scale", k->scale);
    if (k->dropout > 0) { /* keyed by another node's id, as the rewrite keys it by the Dropout's */
        ot_node_set_attr_float(&g->nodes[n], "dropout_ratio", k->dropout);
        ot_node_set_attr_int(&g->nodes[n], "rng_node", 77);
    }
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}

static void test_attention(void **state) {
    (void)state;
    const attn_case cases[] = {
        {false, 2, 2, 3, 4, 0, 0, false, 0, 0, false, 0},    /* plain 4-D */
        {true, 4, 2, 3, 3, 0, 0, true, 0, 0, false, 0},      /* 3-D, GQA, causal */
        {false, 2, 1, 3, 4, 0, 1, false, 0, 0.7f, false, 0}, /* bool mask, scale, MQA */
        {false, 2, 2, 2, 3, 0, 2, true, 1.5f, 0, false, 0},  /* float mask, causal, softcap */
        {false, 2, 2, 2, 2, 3, 0, true, 0, 0, false, 0},     /* past cache, causal offset */
        {true, 2, 2, 2, 3, 2, 1, false, 0, 0, false, 0},     /* 3-D, past, bool mask over past + new */
        {false, 2, 1, 2, 4, 0, 2, true, 0, 0, true, 0},      /* nonpad_kv_seqlen, causal from its end */
        {false, 2, 2, 3, 5, 0, 2, false, 0, 0.6f, false, 0.4f}, /* absorbed dropout, float mask */
        {false, 4, 2, 3, 4, 0, 0, true, 0, 0, false, 0.5f},     /* absorbed dropout, GQA, causal */
        {false, 12, 12, 2, 3, 0, 0, false, 0, 0, false, 0.3f},  /* 24 heads: more than one chunk of 16 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_attention(&cases[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rms_norm),
        cmocka_unit_test(test_rotary_embedding),
        cmocka_unit_test(test_attention),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
