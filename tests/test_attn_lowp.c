/* test_attn_lowp.c — Attention and AttentionGrad with bfloat16 / float16 Q, K, V
 * (issue 27, kernels/cpu/cpu_xfmr.c): each gives exactly the bits of the float32
 * fallback autocast ran before (Casts up, the float32 kernel, its outputs rounded to
 * nearest even) on random inputs: 4-D and 3-D layouts, GQA, causal, bool and float
 * masks, the absorbed dropout, a past cache with its present outputs, nonpad lengths,
 * more heads than one chunk; on 1 and 2 threads. Against the float32 kernel on the
 * unrounded inputs, within the low dtype's rounding. The op table answers for the
 * low dtypes (a low mask or mixed dtypes: no), and the kernels refuse mixed dtypes. */
#include "kernels/half_float.h"
#include "test_kernels_cpu_util.h"
#include "kernels/cpu/cpu_common.h"

static uint32_t seed = 4242u;
static float rnd(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)((int)(seed >> 9) % 2001 - 1000) / 500.0f;
}
static uint16_t to_lp(ot_dtype t, float v) { return t == OT_BF16 ? ot_hf_f32_to_bf16(v) : ot_hf_f32_to_f16(v); }
static float from_lp(ot_dtype t, uint16_t h) { return t == OT_BF16 ? ot_hf_bf16_to_f32(h) : ot_hf_f16_to_f32(h); }

typedef struct acase {
    bool three_d;
    int64_t B, hq, hkv, sq, skv, past, D, Dv;
    int mask; /* 0 none, 1 bool, 2 float: [sq, T] broadcast */
    bool causal, nonpad;
    float dropout, softcap;
} acase;

/* One operand in three forms: exact (unrounded float32), low, and low read back. */
typedef struct operand {
    int64_t n;
    float *exact, *up;
    uint16_t *low;
    int rank;
    int64_t dims[4];
} operand;

static operand make(ot_dtype t, int rank, const int64_t *dims) {
    operand o = {.rank = rank};
    o.n = 1;
    for (int i = 0; i < rank; i++) o.dims[i] = dims[i], o.n *= dims[i];
    o.exact = malloc((size_t)o.n * 4 + 4), o.up = malloc((size_t)o.n * 4 + 4), o.low = malloc((size_t)o.n * 2 + 2);
    for (int64_t i = 0; i < o.n; i++) {
        o.exact[i] = rnd();
        o.low[i] = to_lp(t, o.exact[i]);
        o.up[i] = from_lp(t, o.low[i]);
    }
    return o;
}

static void drop_op(operand *o) { free(o->exact), free(o->up), free(o->low); }

static ot_tensor tens(ot_dtype t, void *d, const operand *o) {
    ot_tensor x;
    memset(&x, 0, sizeof x);
    x.dtype = t;
    x.shape = ot_shape_make(o->rank, o->dims);
    x.data = d;
    x.nbytes = (size_t)o->n * ot_dtype_size(t);
    return x;
}

static void set_attrs(ot_node *n, const acase *k) {
    if (k->three_d) {
        ot_node_set_attr_int(n, "q_num_heads", k->hq);
        ot_node_set_attr_int(n, "kv_num_heads", k->hkv);
    }
    if (k->causal) ot_node_set_attr_int(n, "is_causal", 1);
    if (k->softcap > 0) ot_node_set_attr_float(n, "softcap", k->softcap);
    if (k->dropout > 0) ot_node_set_attr_float(n, "dropout_ratio", k->dropout);
}

/* Every element of `low` is the float32 result rounded; and within the rounding of the
 * low dtype (plus what the rounded inputs move) of `exact`, the float32 kernel's result
 * on the unrounded inputs. */
static void expect(const char *what, ot_dtype t, const uint16_t *low, const float *fb, const float *exact, int64_t n) {
    double big = 0.0, tol = t == OT_BF16 ? 0.06 : 0.01;
    for (int64_t i = 0; i < n; i++) big = fabs(exact[i]) > big ? fabs(exact[i]) : big;
    for (int64_t i = 0; i < n; i++) {
        if (low[i] != to_lp(t, fb[i]))
            fail_msg("%s %s element %lld: %04x, the fallback's %04x", what, ot_dtype_name(t), (long long)i, low[i],
                     to_lp(t, fb[i]));
        if (fabs(from_lp(t, low[i]) - exact[i]) > tol * (fabs(exact[i]) + 0.1 * big))
            fail_msg("%s %s element %lld: %.6g, float32 gives %.6g", what, ot_dtype_name(t), (long long)i,
                     from_lp(t, low[i]), exact[i]);
    }
}

static float *falloc(int64_t n) { return calloc((size_t)n + 1, 4); }
static uint16_t *halloc(int64_t n) { return calloc((size_t)n + 1, 2); }

static void check_case(const acase *k, ot_dtype t, int threads) {
    int64_t T = k->past + k->skv, r = k->three_d ? 3 : 4;
    int64_t qd4[4] = {k->B, k->hq, k->sq, k->D}, kd4[4] = {k->B, k->hkv, k->skv, k->D};
    int64_t vd4[4] = {k->B, k->hkv, k->skv, k->Dv}, yd4[4] = {k->B, k->hq, k->sq, k->Dv};
    int64_t qd3[3] = {k->B, k->sq, k->hq * k->D}, kd3[3] = {k->B, k->skv, k->hkv * k->D};
    int64_t vd3[3] = {k->B, k->skv, k->hkv * k->Dv}, yd3[3] = {k->B, k->sq, k->hq * k->Dv};
    int64_t pkd[4] = {k->B, k->hkv, k->past, k->D}, pvd[4] = {k->B, k->hkv, k->past, k->Dv};
    int64_t prk[4] = {k->B, k->hkv, T, k->D}, prv[4] = {k->B, k->hkv, T, k->Dv}, md[2] = {k->sq, T}, nb = k->B;
    operand q = make(t, (int)r, r == 4 ? qd4 : qd3), kk = make(t, (int)r, r == 4 ? kd4 : kd3);
    operand v = make(t, (int)r, r == 4 ? vd4 : vd3), dy = make(t, (int)r, r == 4 ? yd4 : yd3);
    operand pk = make(t, 4, pkd), pv = make(t, 4, pvd), m = make(t, 2, md), prk_o = make(t, 4, prk);
    operand prv_o = make(t, 4, prv), np = make(t, 1, &nb);
    int64_t lens[8];
    uint8_t mb[4096];
    for (int64_t i = 0; i < k->B; i++) lens[i] = T - (i % 2);
    for (int64_t i = 0; i < m.n; i++) mb[i] = (uint8_t)(i % T == 0 || (i % 3) != 1);
    int n_in = k->nonpad ? 7 : k->past ? 6 : k->mask ? 4 : 3, n_out = k->past ? 3 : 1;
    /* the three runs: float32 on the rounded inputs (the fallback), the low kernel,
     * float32 on the exact inputs */
    float *yfb = falloc(dy.n), *yex = falloc(dy.n), *pres[2][2];
    uint16_t *ylow = halloc(dy.n), *plow[2] = {halloc(prk_o.n), halloc(prv_o.n)};
    for (int i = 0; i < 2; i++) pres[i][0] = falloc(prk_o.n), pres[i][1] = falloc(prv_o.n);
    operand *src[3] = {&q, &kk, &v};
    for (int run = 0; run < 3; run++) {
        ot_dtype dt = run == 1 ? t : OT_F32;
        ot_tensor in[7], out[3];
        for (int i = 0; i < 3; i++) in[i] = tens(dt, run == 0 ? src[i]->up : run == 1 ? (void *)src[i]->low : src[i]->exact, src[i]);
        in[3] = k->mask == 1 ? tens(OT_BOOL, mb, &m) : k->mask == 2 ? tens(OT_F32, m.exact, &m) : tk_absent();
        in[4] = k->past ? tens(dt, run == 0 ? pk.up : run == 1 ? (void *)pk.low : pk.exact, &pk) : tk_absent();
        in[5] = k->past ? tens(dt, run == 0 ? pv.up : run == 1 ? (void *)pv.low : pv.exact, &pv) : tk_absent();
        in[6] = k->nonpad ? tens(OT_I64, lens, &np) : tk_absent();
        out[0] = tens(dt, run == 0 ? yfb : run == 1 ? (void *)ylow : yex, &dy);
        out[1] = tens(dt, run == 1 ? (void *)plow[0] : pres[run / 2][0], &prk_o);
        out[2] = tens(dt, run == 1 ? (void *)plow[1] : pres[run / 2][1], &prv_o);
        ot_node n = tk_node(OT_OP_ATTENTION, n_in, n_out);
        set_attrs(&n, k);
        if (run == 1) assert_true(ot_cpu_supports(&n, in, out));
        ot_error e = {0};
        if (tk_run_ex(&n, in, out, threads, 9, 3, 77, &e)) fail_msg("Attention run %d: %s", run, e.msg);
        tk_node_free(&n);
    }
    expect("Y", t, ylow, yfb, yex, dy.n);
    for (int p = 0; p < 2 && k->past; p++)
        expect(p ? "present_value" : "present_key", t, plow[p], pres[0][p], pres[1][p], p ? prv_o.n : prk_o.n);
    /* AttentionGrad: dQ, dK, dV the same way */
    float *gfb[3] = {falloc(q.n), falloc(kk.n), falloc(v.n)}, *gex[3] = {falloc(q.n), falloc(kk.n), falloc(v.n)};
    uint16_t *glow[3] = {halloc(q.n), halloc(kk.n), halloc(v.n)};
    for (int run = 0; run < 3; run++) {
        ot_dtype dt = run == 1 ? t : OT_F32;
        ot_tensor in[8], out[3];
        in[0] = tens(dt, run == 0 ? dy.up : run == 1 ? (void *)dy.low : dy.exact, &dy);
        for (int i = 0; i < 3; i++)
            in[i + 1] = tens(dt, run == 0 ? src[i]->up : run == 1 ? (void *)src[i]->low : src[i]->exact, src[i]);
        in[4] = k->mask == 1 ? tens(OT_BOOL, mb, &m) : k->mask == 2 ? tens(OT_F32, m.exact, &m) : tk_absent();
        in[5] = k->past ? tens(dt, run == 0 ? pk.up : run == 1 ? (void *)pk.low : pk.exact, &pk) : tk_absent();
        in[6] = k->past ? tens(dt, run == 0 ? pv.up : run == 1 ? (void *)pv.low : pv.exact, &pv) : tk_absent();
        in[7] = k->nonpad ? tens(OT_I64, lens, &np) : tk_absent();
        for (int i = 0; i < 3; i++)
            out[i] = tens(dt, run == 0 ? gfb[i] : run == 1 ? (void *)glow[i] : gex[i], src[i]);
        ot_node n = tk_node(OT_OP_ATTENTION_GRAD, n_in + 1, 3);
        set_attrs(&n, k);
        if (run == 1) assert_true(ot_cpu_supports(&n, in, out));
        ot_error e = {0};
        if (tk_run_ex(&n, in, out, threads, 9, 3, 77, &e)) fail_msg("AttentionGrad run %d: %s", run, e.msg);
        tk_node_free(&n);
    }
    const char *gname[3] = {"dQ", "dK", "dV"};
    for (int i = 0; i < 3; i++) expect(gname[i], t, glow[i], gfb[i], gex[i], src[i]->n);
    for (int i = 0; i < 3; i++) free(gfb[i]), free(gex[i]), free(glow[i]);
    free(yfb), free(yex), free(ylow), free(plow[0]), free(plow[1]);
    for (int i = 0; i < 2; i++) free(pres[i][0]), free(pres[i][1]);
    operand *all[10] = {&q, &kk, &v, &dy, &pk, &pv, &m, &prk_o, &prv_o, &np};
    for (int i = 0; i < 10; i++) drop_op(all[i]);
}

static const acase CASES[] = {
    /* 3-D  B  hq hkv sq skv past D  Dv mask causal nonpad dropout softcap */
    {false, 2, 2, 2, 5, 5, 0, 8, 8, 0, false, false, 0, 0},      /* plain 4-D */
    {true, 2, 4, 2, 6, 6, 0, 8, 4, 0, true, false, 0, 0},        /* 3-D, GQA, causal */
    {false, 2, 2, 1, 4, 7, 0, 4, 4, 1, false, false, 0, 0},      /* bool mask, MQA */
    {false, 2, 3, 3, 4, 6, 0, 8, 8, 2, true, false, 0.3f, 0},    /* float mask, causal, dropout */
    {false, 2, 2, 2, 3, 3, 4, 4, 4, 0, true, false, 0, 2.0f},    /* past cache, presents, softcap */
    {false, 2, 2, 1, 3, 6, 0, 4, 4, 2, true, true, 0, 0},        /* nonpad lengths */
    {false, 2, 12, 12, 5, 5, 0, 8, 8, 0, true, false, 0.2f, 0},  /* 24 heads: two chunks, dropout */
    {true, 1, 4, 4, 33, 33, 0, 16, 16, 0, true, false, 0.1f, 0}, /* longer rows, 3-D */
};

static void test_bf16(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) check_case(&CASES[i], OT_BF16, 2);
}

static void test_fp16(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) check_case(&CASES[i], OT_F16, 2);
}

static void test_one_thread(void **state) {
    (void)state;
    check_case(&CASES[3], OT_BF16, 1);
    check_case(&CASES[6], OT_F16, 1);
}

/* The op table: low Q, K, V, Y yes; a low mask, mixed dtypes, a float32 output: no;
 * and a run with mixed dtypes fails with a message instead of reading garbage. */
static void test_supports(void **state) {
    (void)state;
    uint16_t buf[64] = {0};
    float fbuf[64] = {0};
    ot_node n = tk_node(OT_OP_ATTENTION, 4, 1);
    ot_tensor in[4] = {tk_t(OT_BF16, buf, 4, 1, 1, 2, 4), tk_t(OT_BF16, buf, 4, 1, 1, 2, 4),
                       tk_t(OT_BF16, buf, 4, 1, 1, 2, 4), tk_t(OT_F32, fbuf, 2, 2, 2)};
    ot_tensor out[1] = {tk_t(OT_BF16, buf + 32, 4, 1, 1, 2, 4)};
    assert_true(ot_cpu_supports(&n, in, out));
    in[3].dtype = OT_BF16;
    assert_false(ot_cpu_supports(&n, in, out));
    in[3].dtype = OT_F32;
    out[0].dtype = OT_F32;
    assert_false(ot_cpu_supports(&n, in, out));
    out[0].dtype = OT_BF16;
    in[1].dtype = OT_F16;
    assert_false(ot_cpu_supports(&n, in, out));
    ot_error e = {0};
    assert_int_not_equal(tk_run_ex(&n, in, out, 1, 0, 0, 0, &e), OT_OK);
    assert_non_null(strstr(e.msg, "Q's dtype"));
    tk_node_free(&n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_fp16),
        cmocka_unit_test(test_one_thread),
        cmocka_unit_test(test_supports),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
