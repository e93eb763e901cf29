/* test_shape_xfmr.c — shape rules of the transformer ops of issue 26
 * (importer/shape_rules_xfmr.c): RMSNormalization and RotaryEmbedding keep X's shape
 * (a symbolic batch included) and check what they can; Attention's Y and present
 * outputs in 3-D and 4-D, with and without a past; AttentionGrad like Q, K, V; and
 * each refusal naming the node: a mask that does not broadcast or covers too many
 * keys, heads that do not divide, 3-D inputs without head counts, the qk_matmul_output
 * output, Attention-24's nonpad_kv_seqlen beside a past, a scale of the wrong size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "importer/importer.h"

#define IDS(...) (int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))

static int input(ot_graph *g, const char *name, ot_dtype dt, int rank, const int64_t *dims, const char *sym0,
                 const char *sym2) {
    ot_shape s = ot_shape_make(rank, dims);
    if (sym0) s.sym[0] = ot_graph_add_sym(g, sym0);
    if (sym2) s.sym[2] = ot_graph_add_sym(g, sym2);
    return ot_graph_add_value(g, name, dt, &s, OT_VK_INPUT);
}

static int f32(ot_graph *g, const char *name, int rank, const int64_t *dims) {
    return input(g, name, OT_F32, rank, dims, NULL, NULL);
}

static int act(ot_graph *g, const char *name) {
    return ot_graph_add_value(g, name, OT_UNDEFINED, NULL, OT_VK_ACTIVATION);
}

static ot_node *node(ot_graph *g, ot_op op, const char *name, const int *in, int nin, const int *out, int nout) {
    int id = ot_graph_add_node(g, op, name, in, nin, out, nout, OT_PHASE_FORWARD);
    assert_true(id >= 0);
    return &g->nodes[id];
}

static void expect_shape(const ot_graph *g, int v, const char *want) {
    char buf[160];
    ot_shape_str(g, &g->values[v].shape, buf, sizeof buf);
    if (strcmp(buf, want)) fail_msg("value '%s': shape %s, expected %s", g->values[v].name, buf, want);
}

static void infer_ok(ot_graph *g) {
    ot_error err = {0};
    if (ot_shape_infer(g, &err)) fail_msg("shape inference failed: %s", err.msg);
}

/* Inference fails with `code` and a message holding both strings. */
static void infer_fails(ot_graph *g, ot_status code, const char *a, const char *b) {
    ot_error err = {0};
    ot_status st = ot_shape_infer(g, &err);
    if (st != code || !strstr(err.msg, a) || !strstr(err.msg, b))
        fail_msg("expected status %d with '%s' and '%s'; got %d: %s", code, a, b, st, err.msg);
    ot_graph_free(g);
}

static void test_like_input(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("x");
    int x = input(g, "x", OT_F32, 3, (int64_t[]){-1, 5, 16}, "batch", NULL);
    int sc = f32(g, "sc", 1, (int64_t[]){16}), y = act(g, "y"), r = act(g, "r");
    node(g, OT_OP_RMS_NORM, "rms", IDS(x, sc), IDS(y));
    int c = f32(g, "c", 2, (int64_t[]){8, 4}), s = f32(g, "s", 2, (int64_t[]){8, 4});
    ot_node *n = node(g, OT_OP_ROTARY_EMBEDDING, "rope", IDS(y, c, s), IDS(r));
    ot_node_set_attr_int(n, "num_heads", 2);
    infer_ok(g);
    expect_shape(g, y, "[batch,5,16]");
    expect_shape(g, r, "[batch,5,16]");
    assert_int_equal(g->values[r].dtype, OT_F32);
    ot_graph_free(g);
}

static void test_attention_shapes(void **state) {
    (void)state;
    /* 4-D with a symbolic batch and sequence, GQA, a past of 3, Dv 5 */
    ot_graph *g = ot_graph_new("a4");
    int q = input(g, "q", OT_F32, 4, (int64_t[]){-1, 4, -1, 8}, "batch", "seq");
    int k = input(g, "k", OT_F32, 4, (int64_t[]){-1, 2, 6, 8}, "batch", NULL);
    int v = input(g, "v", OT_F32, 4, (int64_t[]){-1, 2, 6, 5}, "batch", NULL);
    int pk = input(g, "pk", OT_F32, 4, (int64_t[]){-1, 2, 3, 8}, "batch", NULL);
    int pv = input(g, "pv", OT_F32, 4, (int64_t[]){-1, 2, 3, 5}, "batch", NULL);
    int m = input(g, "m", OT_BOOL, 2, (int64_t[]){1, 9}, NULL, NULL);
    int y = act(g, "y"), prk = act(g, "prk"), prv = act(g, "prv");
    node(g, OT_OP_ATTENTION, "att", IDS(q, k, v, m, pk, pv), IDS(y, prk, prv));
    infer_ok(g);
    expect_shape(g, y, "[batch,4,seq,5]");
    expect_shape(g, prk, "[batch,2,9,8]");
    expect_shape(g, prv, "[batch,2,9,5]");
    int dy = act(g, "dy"), dq = act(g, "dq"), dk = act(g, "dk"), dv = act(g, "dv");
    node(g, OT_OP_IDENTITY, "id", IDS(y), IDS(dy));
    node(g, OT_OP_ATTENTION_GRAD, "attg", IDS(dy, q, k, v, m, pk, pv), IDS(dq, dk, dv));
    infer_ok(g);
    expect_shape(g, dq, "[batch,4,seq,8]");
    expect_shape(g, dk, "[batch,2,6,8]");
    expect_shape(g, dv, "[batch,2,6,5]");
    ot_graph_free(g);

    /* 3-D: q_num_heads 4, kv_num_heads 2; no past: present keeps the keys' length */
    g = ot_graph_new("a3");
    q = input(g, "q", OT_F32, 3, (int64_t[]){-1, 7, 16}, "batch", NULL);
    k = input(g, "k", OT_F32, 3, (int64_t[]){-1, 7, 8}, "batch", NULL);
    v = input(g, "v", OT_F32, 3, (int64_t[]){-1, 7, 6}, "batch", NULL);
    y = act(g, "y"), prk = act(g, "prk");
    ot_node *n = node(g, OT_OP_ATTENTION, "att", IDS(q, k, v), IDS(y, prk));
    ot_node_set_attr_int(n, "q_num_heads", 4);
    ot_node_set_attr_int(n, "kv_num_heads", 2);
    infer_ok(g);
    expect_shape(g, y, "[batch,7,12]");
    expect_shape(g, prk, "[batch,2,7,4]");
    ot_graph_free(g);
}

/* One Attention node over 4-D Q [2,4,3,8], K / V [2,2,5,8], with the given mask. */
static ot_graph *attn4(int64_t mrank, const int64_t *mdims, ot_dtype mdt, int extra_in, int n_out) {
    ot_graph *g = ot_graph_new("bad");
    int q = f32(g, "q", 4, (int64_t[]){2, 4, 3, 8}), k = f32(g, "k", 4, (int64_t[]){2, 2, 5, 8});
    int v = f32(g, "v", 4, (int64_t[]){2, 2, 5, 8});
    int m = mrank ? input(g, "m", mdt, (int)mrank, mdims, NULL, NULL) : -1;
    int pk = extra_in ? f32(g, "pk", 4, (int64_t[]){2, 2, 1, 8}) : -1,
        pv = extra_in ? f32(g, "pv", 4, (int64_t[]){2, 2, 1, 8}) : -1;
    int in[7] = {q, k, v, m, pk, pv, extra_in ? input(g, "nonpad", OT_I64, 1, (int64_t[]){2}, NULL, NULL) : -1};
    int out[4] = {act(g, "y"), -1, -1, n_out > 3 ? act(g, "qk") : -1};
    node(g, OT_OP_ATTENTION, "att", in, extra_in ? 7 : 4, out, n_out);
    return g;
}

static void test_attention_refusals(void **state) {
    (void)state;
    infer_fails(attn4(2, (int64_t[]){3, 6}, OT_BOOL, 0, 1), OT_E_SHAPE, "'att'", "covers 6 keys but there are 5");
    infer_fails(attn4(3, (int64_t[]){3, 3, 5}, OT_F32, 0, 1), OT_E_SHAPE, "'att'", "must be 1 or 4");
    infer_fails(attn4(2, (int64_t[]){3, 5}, OT_I64, 0, 1), OT_E_UNSUPPORTED, "'att'", "bool or float32");
    infer_fails(attn4(0, NULL, OT_F32, 1, 1), OT_E_MODEL, "'att'", "nonpad_kv_seqlen cannot be combined");
    infer_fails(attn4(0, NULL, OT_F32, 0, 4), OT_E_UNSUPPORTED, "'att'", "qk_matmul_output");

    ot_graph *g = ot_graph_new("heads");
    int q = f32(g, "q", 4, (int64_t[]){2, 3, 3, 8}), k = f32(g, "k", 4, (int64_t[]){2, 2, 5, 8});
    int y = act(g, "y");
    node(g, OT_OP_ATTENTION, "att", IDS(q, k, k), IDS(y));
    infer_fails(g, OT_E_SHAPE, "'att'", "3 query heads are not a multiple of 2");

    g = ot_graph_new("3d");
    q = f32(g, "q", 3, (int64_t[]){2, 3, 8});
    y = act(g, "y");
    node(g, OT_OP_ATTENTION, "att", IDS(q, q, q), IDS(y));
    infer_fails(g, OT_E_MODEL, "'att'", "q_num_heads");

    g = ot_graph_new("hd");
    q = f32(g, "q", 4, (int64_t[]){2, 2, 3, 8}), k = f32(g, "k", 4, (int64_t[]){2, 2, 5, 4});
    y = act(g, "y");
    node(g, OT_OP_ATTENTION, "att", IDS(q, k, k), IDS(y));
    infer_fails(g, OT_E_SHAPE, "'att'", "head size 8 differs from K's 4");
}

static void test_norm_rope_refusals(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("rms");
    int x = f32(g, "x", 2, (int64_t[]){2, 6}), sc = f32(g, "sc", 1, (int64_t[]){4}), y = act(g, "y");
    node(g, OT_OP_RMS_NORM, "rms", IDS(x, sc), IDS(y));
    infer_fails(g, OT_E_SHAPE, "'rms'", "has 4 elements");

    g = ot_graph_new("rms_axis");
    x = f32(g, "x", 2, (int64_t[]){2, 6}), sc = f32(g, "sc", 1, (int64_t[]){6}), y = act(g, "y");
    ot_node_set_attr_int(node(g, OT_OP_RMS_NORM, "rms", IDS(x, sc), IDS(y)), "axis", 2);
    infer_fails(g, OT_E_MODEL, "'rms'", "axis");

    g = ot_graph_new("rope");
    x = f32(g, "x", 2, (int64_t[]){2, 6});
    int c = f32(g, "c", 2, (int64_t[]){4, 3});
    y = act(g, "y");
    node(g, OT_OP_ROTARY_EMBEDDING, "rope", IDS(x, c, c), IDS(y));
    infer_fails(g, OT_E_SHAPE, "'rope'", "rank 2");

    g = ot_graph_new("rope3");
    x = f32(g, "x", 3, (int64_t[]){2, 4, 6}), c = f32(g, "c", 2, (int64_t[]){4, 3});
    y = act(g, "y");
    node(g, OT_OP_ROTARY_EMBEDDING, "rope", IDS(x, c, c), IDS(y));
    infer_fails(g, OT_E_MODEL, "'rope'", "num_heads");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_like_input),
        cmocka_unit_test(test_attention_shapes),
        cmocka_unit_test(test_attention_refusals),
        cmocka_unit_test(test_norm_rope_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
