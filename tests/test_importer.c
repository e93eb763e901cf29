/* test_importer.c — the ONNX importer on good and bad input: every tensor storage
 * form × dtype, external data confined to the model's folder, opset normalisation,
 * Constant nodes, symbolic dims, unsupported-op reporting, and malformed files
 * (missing, empty, truncated, random, cycles, dangling inputs, wrong attribute
 * types). Models are built in C (fixtures/onnx_builder.h) under OT_BINARY_DIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "kernels/kernel.h"
#include "fixtures/mb_load.h"

#define TMP OT_BINARY_DIR "/test_importer_tmp"
#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

static void mkdirs(const char *p) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
    assert_int_equal(system(cmd), 0);
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* Loads the builder's model from a file named `name` under TMP. */
static ot_status load_mb(mb *b, const char *name, const ot_import_options *opt, ot_model **m, ot_error *err) {
    static const ot_import_options plain = {0};
    return mb_load(b, TMP, name, opt ? opt : &plain, m, err);
}

static void expect_fail(mb *b, const char *name, ot_status code, const char *const *needles) {
    ot_model *m = NULL;
    ot_error err = {0};
    ot_status st = load_mb(b, name, NULL, &m, &err);
    if (st != code) fail_msg("%s: expected status %d, got %d: %s", name, code, st, err.msg);
    assert_null(m);
    assert_non_null(strstr(err.msg, name)); /* every message names the file */
    for (int i = 0; needles && needles[i]; i++)
        if (!strstr(err.msg, needles[i])) fail_msg("message lacks '%s': %s", needles[i], err.msg);
}

/* x[batch,4] -> Gemm(W,B) -> Relu -> y */
static mb *mlp(void) {
    mb *b = mb_new(17);
    const int64_t xd[2] = {-1, 4};
    const char *syms[2] = {"batch", NULL};
    mb_input(b, "x", F32, 2, xd, syms);
    const int64_t wd[2] = {3, 4}, bd[1] = {3};
    float w[12], bias[3] = {0.5f, -1.0f, 2.0f};
    for (int i = 0; i < 12; i++) w[i] = (float)i * 0.25f - 1.0f;
    mb_init_f32(b, "W", 2, wd, w);
    mb_init_f32(b, "B", 1, bd, bias);
    Onnx__NodeProto *g = mb_node(b, "Gemm", "fc", "x,W,B", "h");
    mb_attr_int(b, g, "transB", 1);
    mb_node(b, "Relu", "", "h", "y");
    mb_output(b, "y", F32);
    return b;
}

static int setup(void **state) {
    (void)state;
    mkdirs(TMP);
    return 0;
}

/* ---- good models ------------------------------------------------------------------ */

static void test_mlp_loads(void **state) {
    (void)state;
    mb *b = mlp();
    ot_model *m = NULL;
    ot_error err = {0};
    assert_int_equal(load_mb(b, "mlp.onnx", NULL, &m, &err), OT_OK);
    ot_graph *g = m->graph;
    assert_int_equal(m->opset, 17);
    assert_int_equal(g->opset, 17);
    assert_int_equal(m->ir_version, 8);
    assert_string_equal(m->producer_name, "onnxtrain-test");
    assert_non_null(m->proto);
    assert_int_equal(g->n_inputs, 1);
    const ot_value *x = &g->values[g->inputs[0]];
    assert_string_equal(x->name, "x");
    assert_int_equal(x->kind, OT_VK_INPUT);
    assert_int_equal(x->shape.rank, 2);
    assert_true(x->shape.dim[0] < 0);
    assert_string_equal(g->syms[x->shape.sym[0]], "batch");
    assert_int_equal(x->shape.dim[1], 4);
    int w = ot_graph_find_value(g, "W");
    assert_true(w >= 0);
    assert_int_equal(g->values[w].kind, OT_VK_PARAM);
    assert_int_equal(g->values[w].init_index, 0);
    assert_int_equal(g->values[w].nbytes, 48);
    float w5;
    memcpy(&w5, (char *)g->values[w].data + 20, 4);
    assert_true(w5 == 5 * 0.25f - 1.0f);
    assert_int_equal(g->n_nodes, 2);
    assert_int_equal(g->nodes[0].op, OT_OP_GEMM);
    assert_string_equal(g->nodes[0].name, "fc");
    assert_int_equal(g->nodes[0].src_index, 0);
    /* defaults made explicit */
    assert_true(ot_node_attr_float(&g->nodes[0], "alpha", 0) == 1.0f);
    assert_true(ot_node_attr_float(&g->nodes[0], "beta", 0) == 1.0f);
    assert_int_equal(ot_node_attr_int(&g->nodes[0], "transA", -1), 0);
    assert_int_equal(ot_node_attr_int(&g->nodes[0], "transB", -1), 1);
    /* empty node name: synthesised from op_type and index */
    assert_string_equal(g->nodes[1].name, "Relu_1");
    assert_int_equal(g->n_outputs, 1);
    assert_true(g->values[g->outputs[0]].is_graph_output);
    assert_int_equal(g->values[g->outputs[0]].producer, 1);
    ot_model_free(m);
    mb_free(b);
}

static void test_load_buffer_matches(void **state) {
    (void)state;
    mb *b = mlp();
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    ot_model *m = NULL;
    ot_error err = {0};
    assert_int_equal(ot_model_load_buffer(buf, len, "mem.onnx", NULL, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err), OT_OK);
    assert_int_equal(m->graph->n_nodes, 2);
    ot_model_free(m);
    mb_free(b);
}

static void test_constants_and_bn_state(void **state) {
    (void)state;
    mb *b = mb_new(15);
    const int64_t xd[4] = {2, 3, 4, 4}, cd[1] = {3};
    mb_input(b, "x", F32, 4, xd, NULL);
    float ones[3] = {1, 1, 1}, zeros[3] = {0, 0, 0};
    mb_init_f32(b, "scale", 1, cd, ones);
    mb_init_f32(b, "bias", 1, cd, zeros);
    mb_init_f32(b, "mean", 1, cd, zeros);
    mb_init_f32(b, "var", 1, cd, ones);
    Onnx__NodeProto *bn = mb_node(b, "BatchNormalization", "bn", "x,scale,bias,mean,var", "y,rm,rv");
    mb_attr_int(b, bn, "training_mode", 1);
    Onnx__NodeProto *c = mb_node(b, "Constant", "c", NULL, "k");
    Onnx__AttributeProto *a = mb_attr(b, c, "value_float", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = 2.5f;
    Onnx__NodeProto *c2 = mb_node(b, "Constant", "c2", NULL, "shape");
    Onnx__AttributeProto *a2 = mb_attr(b, c2, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    const int64_t sd[1] = {2}, sv[2] = {2, -1};
    a2->t = mb_tensor(b, "", I64, 1, sd);
    mb_raw(b, a2->t, sv, sizeof sv);
    mb_node(b, "Mul", "mul", "y,k", "z");
    mb_node(b, "Reshape", "r", "z,shape", "out");
    mb_output(b, "out", F32);
    ot_model *m = NULL;
    ot_error err = {0};
    assert_int_equal(load_mb(b, "bn.onnx", NULL, &m, &err), OT_OK);
    ot_graph *g = m->graph;
    assert_int_equal(g->values[ot_graph_find_value(g, "scale")].kind, OT_VK_PARAM);
    assert_int_equal(g->values[ot_graph_find_value(g, "mean")].kind, OT_VK_STATE);
    assert_int_equal(g->values[ot_graph_find_value(g, "var")].kind, OT_VK_STATE);
    const ot_value *k = &g->values[ot_graph_find_value(g, "k")];
    assert_int_equal(k->kind, OT_VK_CONSTANT);
    assert_int_equal(k->producer, -1);
    assert_int_equal(k->dtype, OT_F32);
    assert_int_equal(k->shape.rank, 0);
    float kv;
    memcpy(&kv, k->data, 4);
    assert_true(kv == 2.5f);
    const ot_value *s = &g->values[ot_graph_find_value(g, "shape")];
    assert_int_equal(s->kind, OT_VK_CONSTANT);
    assert_int_equal(s->nbytes, 16);
    assert_int_equal(memcmp(s->data, sv, 16), 0);
    /* no node for the Constants */
    for (int i = 0; i < g->n_nodes; i++) assert_int_not_equal(g->nodes[i].op, OT_OP_CONSTANT);
    assert_int_equal(g->n_nodes, 3);
    assert_int_equal(ot_node_attr_int(&g->nodes[0], "training_mode", -1), 1);
    ot_model_free(m);
    mb_free(b);
}

/* ---- opset normalisation ------------------------------------------------------------ */

static void test_normalize_axes_inputs(void **state) {
    (void)state;
    mb *b = mb_new(18);
    const int64_t xd[3] = {2, 1, 4}, one[1] = {1}, two[1] = {2};
    mb_input(b, "x", F32, 3, xd, NULL);
    const int64_t ax1[1] = {1}, ax2[2] = {0, 2}, sp[2] = {1, 3}, axr[1] = {-1};
    mb_init_i64(b, "ax1", 1, one, ax1);
    mb_init_i64(b, "ax2", 1, two, ax2);
    mb_init_i64(b, "axr", 1, one, axr);
    mb_init_i64(b, "sp", 1, two, sp);
    mb_node(b, "Squeeze", "sq", "x,ax1", "a");
    mb_node(b, "Unsqueeze", "usq", "a,ax1", "b");
    mb_node(b, "ReduceSum", "rs", "b,ax2", "c");
    mb_node(b, "ReduceMean", "rm", "x,axr", "d");
    Onnx__NodeProto *s = mb_node(b, "Split", "split", "x,sp", "e,f");
    mb_attr_int(b, s, "axis", 2);
    mb_output(b, "c", F32);
    mb_output(b, "d", F32);
    mb_output(b, "e", F32);
    mb_output(b, "f", F32);
    ot_model *m = NULL;
    ot_error err = {0};
    assert_int_equal(load_mb(b, "axes.onnx", NULL, &m, &err), OT_OK);
    ot_graph *g = m->graph;
    int cnt;
    const int64_t *v;
    for (int i = 0; i < 4; i++) assert_int_equal(g->nodes[i].n_inputs, 1);
    v = ot_node_attr_ints(&g->nodes[0], "axes", &cnt);
    assert_int_equal(cnt, 1);
    assert_int_equal(v[0], 1);
    v = ot_node_attr_ints(&g->nodes[2], "axes", &cnt);
    assert_int_equal(cnt, 2);
    assert_int_equal(v[1], 2);
    assert_int_equal(ot_node_attr_int(&g->nodes[2], "keepdims", -1), 1);
    v = ot_node_attr_ints(&g->nodes[3], "axes", &cnt);
    assert_int_equal(cnt, 1);
    assert_int_equal(v[0], -1);
    v = ot_node_attr_ints(&g->nodes[4], "split", &cnt);
    assert_int_equal(cnt, 2);
    assert_int_equal(v[1], 3);
    assert_int_equal(ot_node_attr_int(&g->nodes[4], "axis", -1), 2);
    /* links stay right: the axes initializers have no consumers left */
    assert_int_equal(g->values[ot_graph_find_value(g, "ax1")].n_consumers, 0);
    assert_int_equal(g->values[ot_graph_find_value(g, "sp")].n_consumers, 0);
    assert_int_equal(g->values[ot_graph_find_value(g, "x")].n_consumers, 3);
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    ot_model_free(m);
    mb_free(b);
}

static void test_normalize_nonconstant_axes(void **state) {
    (void)state;
    mb *b = mb_new(13);
    const int64_t xd[2] = {2, 1}, ad[1] = {1};
    mb_input(b, "x", F32, 2, xd, NULL);
    mb_input(b, "axes_in", I64, 1, ad, NULL);
    mb_node(b, "Squeeze", "sq_dyn", "x,axes_in", "y");
    mb_output(b, "y", F32);
    const char *needles[] = {"sq_dyn", "axes_in", NULL};
    expect_fail(b, "dynaxes.onnx", OT_E_UNSUPPORTED, needles);
    mb_free(b);
}

static void test_normalize_clip_dropout_softmax(void **state) {
    (void)state;
    /* opset 12: Clip bounds and Dropout ratio/training_mode as inputs; legacy Softmax */
    mb *b = mb_new(12);
    const int64_t xd[2] = {2, 3};
    mb_input(b, "x", F32, 2, xd, NULL);
    float lo = -1.5f, ratio = 0.25f;
    mb_init_f32(b, "lo", 0, NULL, &lo);
    mb_init_f32(b, "ratio", 0, NULL, &ratio);
    Onnx__TensorProto *tm = mb_tensor(b, "tm", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL);
    uint8_t t1 = 1;
    mb_raw(b, tm, &t1, 1);
    mb_init(b, tm);
    mb_node(b, "Clip", "clip", "x,lo,", "a");
    mb_node(b, "Dropout", "drop", "a,ratio,tm", "b,mask");
    mb_node(b, "Softmax", "sm", "b", "c");
    mb_node(b, "Clip", "clip2", "c", "d");
    mb_output(b, "d", F32);
    ot_model *m = NULL;
    ot_error err = {0};
    assert_int_equal(load_mb(b, "clip.onnx", NULL, &m, &err), OT_OK);
    ot_graph *g = m->graph;
    assert_int_equal(g->nodes[0].n_inputs, 1);
    assert_true(ot_node_attr_float(&g->nodes[0], "min", 0) == -1.5f);
    assert_true(isinf(ot_node_attr_float(&g->nodes[0], "max", 0)) && ot_node_attr_float(&g->nodes[0], "max", 0) > 0);
    assert_true(isinf(ot_node_attr_float(&g->nodes[3], "min", 0)) && ot_node_attr_float(&g->nodes[3], "min", 0) < 0);
    assert_int_equal(g->nodes[1].n_inputs, 1);
    assert_true(ot_node_attr_float(&g->nodes[1], "ratio", 0) == 0.25f);
    assert_int_equal(ot_node_attr_int(&g->nodes[1], "training_mode", -1), 1);
    assert_int_equal(g->nodes[1].n_outputs, 2);
    assert_int_equal(ot_node_attr_int(&g->nodes[2], "legacy_2d", 0), 1);
    assert_int_equal(ot_node_attr_int(&g->nodes[2], "axis", 0), 1);
    /* a float initializer read only as a Clip bound is not a trainable param */
    assert_int_equal(g->values[ot_graph_find_value(g, "lo")].kind, OT_VK_CONSTANT);
    ot_model_free(m);
    mb_free(b);

    /* opset 6 Clip attributes, opset 10 Dropout attribute, BN opset 9 with 5 outputs */
    b = mb_new(9);
    const int64_t x4[4] = {2, 3, 2, 2}, cd[1] = {3};
    mb_input(b, "x", F32, 4, x4, NULL);
    float ones[3] = {1, 1, 1};
    mb_init_f32(b, "s", 1, cd, ones);
    mb_init_f32(b, "bb", 1, cd, ones);
    mb_init_f32(b, "mu", 1, cd, ones);
    mb_init_f32(b, "va", 1, cd, ones);
    Onnx__NodeProto *c = mb_node(b, "Clip", "clip", "x", "a");
    mb_attr_float(b, c, "max", 6.0f);
    Onnx__NodeProto *d = mb_node(b, "Dropout", "drop", "a", "b");
    mb_attr_float(b, d, "ratio", 0.1f);
    mb_node(b, "BatchNormalization", "bn", "b,s,bb,mu,va", "y,rm,rv,sm,sv");
    mb_node(b, "BatchNormalization", "bn_eval", "y,s,bb,mu,va", "z");
    mb_node(b, "Softmax", "sm13", "z", "o");
    mb_output(b, "o", F32);
    assert_int_equal(load_mb(b, "old.onnx", NULL, &m, &err), OT_OK);
    g = m->graph;
    assert_true(ot_node_attr_float(&g->nodes[0], "max", 0) == 6.0f);
    assert_true(isinf(ot_node_attr_float(&g->nodes[0], "min", 0)));
    assert_true(ot_node_attr_float(&g->nodes[1], "ratio", 0) == 0.1f);
    assert_int_equal(ot_node_attr_int(&g->nodes[1], "training_mode", -1), 0);
    assert_int_equal(ot_node_attr_int(&g->nodes[2], "training_mode", -1), 1);
    assert_int_equal(g->nodes[2].n_outputs, 3);
    assert_int_equal(ot_node_attr_int(&g->nodes[3], "training_mode", -1), 0);
    ot_model_free(m);
    mb_free(b);
}

/* ---- storage forms × dtypes --------------------------------------------------------- */

typedef struct dtype_case {
    int dtype;
    size_t esize;
} dtype_case;

/* Element i of the test pattern, as the bytes onnxtrain must produce. */
static void expected_elem(int dtype, int i, uint8_t *out) {
    switch (dtype) {
    case 1: { float v = (float)i * 1.5f - 2.0f; memcpy(out, &v, 4); break; }
    case 11: { double v = (double)i * 1.25 - 3.0; memcpy(out, &v, 8); break; }
    case 7: { int64_t v = (int64_t)i * 1000000007LL - 5; memcpy(out, &v, 8); break; }
    case 6: { int32_t v = i * 70000 - 3; memcpy(out, &v, 4); break; }
    case 3: { int8_t v = (int8_t)(i * 37 - 100); memcpy(out, &v, 1); break; }
    case 2: { uint8_t v = (uint8_t)(i * 41 + 3); memcpy(out, &v, 1); break; }
    case 9: { uint8_t v = (uint8_t)(i % 3 == 0); memcpy(out, &v, 1); break; }
    case 10: case 16: { uint16_t v = (uint16_t)(0x3c00 + i * 0x101); memcpy(out, &v, 2); break; }
    }
}

static void test_storage_forms(void **state) {
    (void)state;
    const dtype_case cases[] = {{1, 4}, {10, 2}, {16, 2}, {11, 8}, {3, 1}, {2, 1}, {6, 4}, {7, 8}, {9, 1}};
    const int64_t dims[2] = {2, 3};
    const int n = 6;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/forms", TMP);
    mkdirs(dir);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int dt = cases[c].dtype;
        size_t es = cases[c].esize;
        uint8_t want[48];
        for (int i = 0; i < n; i++) expected_elem(dt, i, want + (size_t)i * es);
        for (int form = 0; form < 3; form++) { /* raw, typed field, external */
            mb *b = mb_new(17);
            Onnx__TensorProto *t = mb_tensor(b, "t", dt, 2, dims);
            if (form == 0) {
                mb_raw(b, t, want, (size_t)n * es);
            } else if (form == 1) {
                switch (dt) {
                case 1: t->float_data = mb_alloc(b, 24); memcpy(t->float_data, want, 24); t->n_float_data = 6; break;
                case 11: t->double_data = mb_alloc(b, 48); memcpy(t->double_data, want, 48); t->n_double_data = 6; break;
                case 7: t->int64_data = mb_alloc(b, 48); memcpy(t->int64_data, want, 48); t->n_int64_data = 6; break;
                default:
                    t->int32_data = mb_alloc(b, 24);
                    t->n_int32_data = 6;
                    for (int i = 0; i < n; i++) {
                        int32_t v = 0;
                        if (es == 4) memcpy(&v, want + 4 * i, 4);
                        else if (es == 2) { uint16_t h; memcpy(&h, want + 2 * i, 2); v = h; }
                        else if (dt == 3) v = (int8_t)want[i];
                        else v = want[i];
                        t->int32_data[i] = v;
                    }
                }
            } else {
                char path[600];
                snprintf(path, sizeof path, "%s/data_%d.bin", dir, dt);
                uint8_t filebuf[64 + 48];
                memset(filebuf, 0xAB, sizeof filebuf);
                memcpy(filebuf + 64, want, (size_t)n * es);
                write_bytes(path, filebuf, 64 + (size_t)n * es);
                char loc[32], len[32];
                snprintf(loc, sizeof loc, "data_%d.bin", dt);
                snprintf(len, sizeof len, "%zu", (size_t)n * es);
                const char *kv[] = {"location", loc, "offset", "64", "length", len};
                mb_external(b, t, kv, 3);
            }
            ot_tensor *out = NULL;
            ot_error err = {0};
            ot_status st = ot_tensor_from_proto(t, dir, &out, &err);
            if (st) fail_msg("dtype %d form %d: %s", dt, form, err.msg);
            assert_int_equal(out->dtype, dt);
            assert_int_equal(out->shape.rank, 2);
            assert_int_equal(out->shape.dim[1], 3);
            assert_int_equal(out->nbytes, (size_t)n * es);
            if (memcmp(out->data, want, out->nbytes)) fail_msg("dtype %d form %d: bytes differ", dt, form);
            ot_tensor_free(out);

            /* the same tensor as an initializer of a model round-trips the same bytes */
            if (form < 2) {
                mb_init(b, t);
                const int64_t od[1] = {1};
                mb_input(b, "x", dt, 1, od, NULL);
                mb_node(b, "Identity", "id", "t", "y");
                mb_output(b, "y", dt);
                size_t len;
                uint8_t *buf = mb_pack(b, &len);
                ot_model *m = NULL;
                assert_int_equal(ot_model_load_buffer(buf, len, "forms.onnx", NULL, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err), OT_OK);
                const ot_value *v = &m->graph->values[ot_graph_find_value(m->graph, "t")];
                assert_int_equal(v->kind, ot_dtype_is_float((ot_dtype)dt) ? OT_VK_PARAM : OT_VK_CONSTANT);
                assert_int_equal(v->nbytes, (size_t)n * es);
                assert_int_equal(memcmp(v->data, want, v->nbytes), 0);
                ot_model_free(m);
            }
            mb_free(b);
        }
    }
}

static void test_tensor_errors(void **state) {
    (void)state;
    mb *b = mb_new(17);
    ot_tensor *out = NULL;
    ot_error err = {0};
    const int64_t dims[2] = {2, 3};
    /* element count does not match dims */
    Onnx__TensorProto *t = mb_tensor(b, "short_w", F32, 2, dims);
    t->float_data = mb_alloc(b, 16);
    t->n_float_data = 4;
    assert_int_equal(ot_tensor_from_proto(t, NULL, &out, &err), OT_E_MODEL);
    assert_non_null(strstr(err.msg, "short_w"));
    assert_null(out);
    float raw[5] = {0};
    t = mb_tensor(b, "raw_w", F32, 2, dims);
    mb_raw(b, t, raw, sizeof raw);
    assert_int_equal(ot_tensor_from_proto(t, NULL, &out, &err), OT_E_MODEL);
    assert_non_null(strstr(err.msg, "raw_w"));
    /* no data at all */
    t = mb_tensor(b, "empty_w", F32, 2, dims);
    assert_int_equal(ot_tensor_from_proto(t, NULL, &out, &err), OT_E_MODEL);
    assert_non_null(strstr(err.msg, "empty_w"));
    /* unsupported dtypes */
    const int bad[] = {ONNX__TENSOR_PROTO__DATA_TYPE__STRING, ONNX__TENSOR_PROTO__DATA_TYPE__UINT16,
                       ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64, 0, 99};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        t = mb_tensor(b, "odd_t", bad[i], 2, dims);
        assert_int_equal(ot_tensor_from_proto(t, NULL, &out, &err), OT_E_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "odd_t"));
    }
    /* absurd sizes refused before allocating; negative dims refused */
    const int64_t huge[3] = {1LL << 20, 1LL << 20, 1LL << 20}, over[2] = {INT64_MAX, 4}, neg[2] = {2, -3};
    t = mb_tensor(b, "huge_t", F32, 3, huge);
    assert_int_equal(ot_tensor_from_proto(t, NULL, &out, &err), OT_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "huge_t"));
    t = mb_tensor(b, "over_t", F32, 2, over);
    assert_int_equal(ot_tensor_from_proto(t, NULL, &out, &err), OT_E_UNSUPPORTED);
    t = mb_tensor(b, "neg_t", F32, 2, neg);
    assert_int_equal(ot_tensor_from_proto(t, NULL, &out, &err), OT_E_MODEL);
    assert_non_null(strstr(err.msg, "neg_t"));
    assert_null(out);
    mb_free(b);
}

static void test_tensor_load_pb(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t dims[1] = {3};
    Onnx__TensorProto *t = mb_tensor(b, "input_0", I64, 1, dims);
    const int64_t vals[3] = {7, -8, 9};
    mb_raw(b, t, vals, sizeof vals);
    size_t len = onnx__tensor_proto__get_packed_size(t);
    uint8_t *buf = mb_alloc(b, len);
    onnx__tensor_proto__pack(t, buf);
    char path[512];
    snprintf(path, sizeof path, "%s/input_0.pb", TMP);
    write_bytes(path, buf, len);
    ot_tensor *out = NULL;
    char *name = NULL;
    ot_error err = {0};
    assert_int_equal(ot_tensor_load_pb(path, &out, &name, &err), OT_OK);
    assert_string_equal(name, "input_0");
    assert_int_equal(out->dtype, OT_I64);
    assert_int_equal(memcmp(out->data, vals, sizeof vals), 0);
    ot_tensor_free(out);
    free(name);
    snprintf(path, sizeof path, "%s/garbage.pb", TMP);
    write_bytes(path, "\xff\xff\xff\xff\xff", 5);
    assert_int_equal(ot_tensor_load_pb(path, &out, NULL, &err), OT_E_PARSE);
    assert_non_null(strstr(err.msg, "garbage.pb"));
    mb_free(b);
}

/* ---- external data confinement --------------------------------------------------- */

static ot_status load_ext(const char *const *kv, int pairs, const char *dir, ot_error *err) {
    mb *b = mb_new(17);
    const int64_t d[1] = {4};
    Onnx__TensorProto *t = mb_tensor(b, "ext_w", F32, 1, d);
    mb_external(b, t, kv, pairs);
    mb_init(b, t);
    mb_input(b, "x", F32, 1, d, NULL);
    mb_node(b, "Add", "add", "x,ext_w", "y");
    mb_output(b, "y", F32);
    char path[600];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    assert_int_equal(mb_write(b, path), 0);
    ot_model *m = NULL;
    ot_status st = ot_model_load(path, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, err);
    if (st == OT_OK) {
        const ot_value *v = &m->graph->values[ot_graph_find_value(m->graph, "ext_w")];
        float w[4];
        memcpy(w, v->data, 16);
        assert_true(w[0] == 1.0f && w[3] == 4.0f);
        ot_model_free(m);
    }
    /* the same model from memory without a folder: refused */
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    ot_error e2 = {0};
    ot_status st2 = ot_model_load_buffer(buf, len, "mem.onnx", NULL, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &e2);
    assert_true(st2 == OT_E_UNSUPPORTED || (st != OT_OK && st2 == st));
    assert_non_null(strstr(e2.msg, "ext_w"));
    mb_free(b);
    return st;
}

static void expect_ext_fail(const char *const *kv, int pairs, const char *dir, ot_status code, const char *needle) {
    ot_error err = {0};
    ot_status st = load_ext(kv, pairs, dir, &err);
    if (st != code) fail_msg("expected %d, got %d: %s", code, st, err.msg);
    assert_non_null(strstr(err.msg, "ext_w"));
    assert_non_null(strstr(err.msg, "model.onnx"));
    if (needle && !strstr(err.msg, needle)) fail_msg("message lacks '%s': %s", needle, err.msg);
}

static void test_external_data(void **state) {
    (void)state;
    char dir[512], sub[600], outside[600], link[700];
    snprintf(dir, sizeof dir, "%s/ext/model", TMP);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(outside, sizeof outside, "%s/ext/secret.bin", TMP);
    mkdirs(sub);
    float w[5] = {9, 1, 2, 3, 4};
    char p[700];
    snprintf(p, sizeof p, "%s/w.bin", dir);
    write_bytes(p, w, sizeof w);
    snprintf(p, sizeof p, "%s/sub/w.bin", dir);
    write_bytes(p, w + 1, 16);
    write_bytes(outside, w + 1, 16);
    snprintf(link, sizeof link, "%s/escape.bin", dir);
    unlink(link);
    assert_int_equal(symlink(outside, link), 0);

    ot_error err = {0};
    const char *ok1[] = {"location", "w.bin", "offset", "4", "length", "16", "checksum", "abc"};
    assert_int_equal(load_ext(ok1, 4, dir, &err), OT_OK);
    const char *ok2[] = {"location", "sub/w.bin"};
    assert_int_equal(load_ext(ok2, 1, dir, &err), OT_OK);

    const char *abs_[] = {"location", outside};
    expect_ext_fail(abs_, 1, dir, OT_E_MODEL, "absolute");
    const char *dots[] = {"location", "../secret.bin"};
    expect_ext_fail(dots, 1, dir, OT_E_MODEL, "..");
    const char *dots2[] = {"location", "a/../../b"};
    expect_ext_fail(dots2, 1, dir, OT_E_MODEL, "a/../../b");
    const char *sym[] = {"location", "escape.bin"};
    expect_ext_fail(sym, 1, dir, OT_E_MODEL, "outside");
    const char *past[] = {"location", "w.bin", "offset", "8", "length", "16"};
    expect_ext_fail(past, 3, dir, OT_E_MODEL, "past the end");
    const char *past2[] = {"location", "w.bin", "offset", "100"};
    expect_ext_fail(past2, 2, dir, OT_E_MODEL, "past the end");
    const char *negoff[] = {"location", "w.bin", "offset", "-4"};
    expect_ext_fail(negoff, 2, dir, OT_E_MODEL, "negative");
    const char *neglen[] = {"location", "w.bin", "length", "-16"};
    expect_ext_fail(neglen, 2, dir, OT_E_MODEL, "negative");
    const char *nonnum[] = {"location", "w.bin", "offset", "4x"};
    expect_ext_fail(nonnum, 2, dir, OT_E_MODEL, "not a number");
    const char *unknown[] = {"location", "w.bin", "compression", "zstd"};
    expect_ext_fail(unknown, 2, dir, OT_E_MODEL, "compression");
    const char *wronglen[] = {"location", "w.bin"}; /* 20 bytes for a 16-byte tensor */
    expect_ext_fail(wronglen, 1, dir, OT_E_MODEL, "w.bin");
    const char *missing[] = {"location", "nope.bin"};
    expect_ext_fail(missing, 1, dir, OT_E_IO, "nope.bin");
    const char *noloc[] = {"offset", "0"};
    expect_ext_fail(noloc, 1, dir, OT_E_MODEL, "location");
}

/* ---- malformed files and graphs ---------------------------------------------------- */

static void test_missing_and_empty(void **state) {
    (void)state;
    ot_model *m = NULL;
    ot_error err = {0};
    const char *missing = TMP "/does_not_exist.onnx";
    assert_int_equal(ot_model_load(missing, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err), OT_E_IO);
    assert_null(m);
    assert_non_null(strstr(err.msg, missing));
    char path[512];
    snprintf(path, sizeof path, "%s/empty.onnx", TMP);
    write_bytes(path, "", 0);
    assert_int_equal(ot_model_load(path, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err), OT_E_PARSE);
    assert_non_null(strstr(err.msg, path));
}

static void test_truncated_and_random(void **state) {
    (void)state;
    mb *b = mlp();
    float big[256];
    for (int i = 0; i < 256; i++) big[i] = (float)i;
    const int64_t bd[1] = {256};
    mb_init_f32(b, "unused_big", 1, bd, big);
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    char path[512];
    snprintf(path, sizeof path, "%s/truncated.onnx", TMP);
    ot_model *m = NULL;
    ot_error err = {0};
    /* cut at several points: inside the header, an initializer's raw_data, the nodes */
    const size_t cuts[] = {len / 2, len - 3, 7};
    for (size_t i = 0; i < 3; i++) {
        write_bytes(path, buf, cuts[i]);
        ot_status st = ot_model_load(path, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err);
        if (st != OT_E_PARSE) fail_msg("cut at %zu of %zu: status %d: %s", cuts[i], len, st, err.msg);
        assert_non_null(strstr(err.msg, "not an ONNX model"));
        assert_non_null(strstr(err.msg, "truncated.onnx"));
    }
    uint32_t x = 12345;
    snprintf(path, sizeof path, "%s/random.onnx", TMP);
    for (int trial = 0; trial < 20; trial++) {
        uint8_t rnd[4096];
        for (size_t i = 0; i < sizeof rnd; i++) {
            x = x * 1664525u + 1013904223u;
            rnd[i] = (uint8_t)(x >> 24);
        }
        write_bytes(path, rnd, sizeof rnd);
        ot_status st = ot_model_load(path, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err);
        if (st != OT_E_PARSE) fail_msg("random trial %d: status %d: %s", trial, st, err.msg);
        assert_non_null(strstr(err.msg, "random.onnx"));
    }
    mb_free(b);
}

static void test_cycle(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t d[1] = {4};
    mb_input(b, "x", F32, 1, d, NULL);
    mb_node(b, "Add", "loop_a", "x,c", "a");
    mb_node(b, "Relu", "loop_b", "a", "c");
    mb_output(b, "c", F32);
    const char *needles[] = {"cycle", "loop_", NULL};
    expect_fail(b, "cycle.onnx", OT_E_MODEL, needles);
    mb_free(b);
}

static void test_dangling_input(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t d[1] = {4};
    mb_input(b, "x", F32, 1, d, NULL);
    mb_node(b, "Add", "adder", "x,ghost", "y");
    mb_output(b, "y", F32);
    const char *needles[] = {"adder", "ghost", NULL};
    expect_fail(b, "dangling.onnx", OT_E_MODEL, needles);
    mb_free(b);

    b = mb_new(17);
    mb_input(b, "x", F32, 1, d, NULL);
    mb_node(b, "Relu", "r", "x", "y");
    mb_output(b, "nowhere", F32);
    const char *needles2[] = {"nowhere", NULL};
    expect_fail(b, "noout.onnx", OT_E_MODEL, needles2);
    mb_free(b);

    /* two nodes writing one value */
    b = mb_new(17);
    mb_input(b, "x", F32, 1, d, NULL);
    mb_node(b, "Relu", "first", "x", "y");
    mb_node(b, "Neg", "second", "x", "y");
    mb_output(b, "y", F32);
    const char *needles3[] = {"second", "'y'", NULL};
    expect_fail(b, "twice.onnx", OT_E_MODEL, needles3);
    mb_free(b);
}

static void test_wrong_attr_type(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t d[2] = {2, 3};
    mb_input(b, "x", F32, 2, d, NULL);
    Onnx__NodeProto *t = mb_node(b, "Transpose", "tr", "x", "y");
    mb_attr_float(b, t, "perm", 1.0f);
    mb_output(b, "y", F32);
    const char *needles[] = {"tr", "perm", "ints", NULL};
    expect_fail(b, "badattr.onnx", OT_E_MODEL, needles);
    mb_free(b);
}

static void test_unsupported_ops(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t d[1] = {4};
    mb_input(b, "x", F32, 1, d, NULL);
    mb_node(b, "NonZero", "nz_0", "x", "a");
    mb_node(b, "Loop", "loop_1", "x", "b");
    mb_node(b, "Relu", "ok", "x", "c");
    mb_node(b, "NonZero", "nz_3", "c", "e");
    mb_output(b, "a", I64);
    mb_output(b, "b", F32);
    mb_output(b, "e", I64);
    ot_model *m = NULL;
    ot_error err = {0};
    assert_int_equal(load_mb(b, "unsup.onnx", NULL, &m, &err), OT_E_UNSUPPORTED);
    assert_null(m);
    assert_string_equal(err.msg, TMP "/unsup.onnx: 2 unsupported ops: NonZero (nodes 'nz_0', 'nz_3'), Loop (node 'loop_1')");
    ot_import_options opt = {.fold_eval = ot_cpu_fold_eval, .allow_unsupported = true};
    assert_int_equal(load_mb(b, "unsup.onnx", &opt, &m, &err), OT_OK);
    assert_int_equal(m->n_unsupported, 2);
    assert_string_equal(m->unsupported[0].op_type, "NonZero");
    assert_int_equal(m->unsupported[0].n_nodes, 2);
    assert_string_equal(m->unsupported[0].nodes[1], "nz_3");
    assert_int_equal(m->graph->nodes[0].op, OT_OP_UNKNOWN);
    assert_string_equal(m->graph->nodes[0].op_type, "NonZero");
    ot_model_free(m);
    mb_free(b);

    /* other domains, nested graph attributes, unsupported input dtypes */
    b = mb_new(17);
    mb_opset(b, "com.microsoft", 1);
    mb_input(b, "x", F32, 1, d, NULL);
    mb_input(b, "s", ONNX__TENSOR_PROTO__DATA_TYPE__STRING, 1, d, NULL);
    Onnx__NodeProto *f = mb_node(b, "FusedGemm", "fg", "x", "a");
    f->domain = mb_str(b, "com.microsoft");
    Onnx__NodeProto *r = mb_node(b, "Relu", "relu_g", "a", "y");
    Onnx__AttributeProto *ga = mb_attr(b, r, "body", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    ga->g = mb_alloc(b, sizeof *ga->g);
    onnx__graph_proto__init(ga->g);
    mb_output(b, "y", F32);
    assert_int_equal(load_mb(b, "unsup2.onnx", NULL, &m, &err), OT_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "com.microsoft:FusedGemm (node 'fg')"));
    assert_non_null(strstr(err.msg, "relu_g"));
    assert_non_null(strstr(err.msg, "nested graphs are not supported"));
    assert_non_null(strstr(err.msg, "string (input 's')"));
    mb_free(b);

    /* a string initializer and an int16 tensor attribute, both used only by an
     * unsupported op: listed, and with allow_unsupported the model still loads */
    b = mb_new(17);
    mb_input(b, "x", F32, 1, d, NULL);
    Onnx__TensorProto *st = mb_tensor(b, "names", ONNX__TENSOR_PROTO__DATA_TYPE__STRING, 1, d);
    mb_init(b, st);
    Onnx__NodeProto *le = mb_node(b, "LabelEncoder", "enc", "x,names", "y");
    Onnx__AttributeProto *ta = mb_attr(b, le, "default_tensor", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    const int64_t one[1] = {1};
    ta->t = mb_tensor(b, "dflt", ONNX__TENSOR_PROTO__DATA_TYPE__INT16, 1, one);
    ta->t->int32_data = mb_alloc(b, 4);
    ta->t->n_int32_data = 1;
    mb_output(b, "y", F32);
    assert_int_equal(load_mb(b, "unsup3.onnx", NULL, &m, &err), OT_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "1 unsupported op and 1 value of unsupported type"));
    assert_non_null(strstr(err.msg, "initializer dtype string (initializer 'names')"));
    assert_non_null(strstr(err.msg, "LabelEncoder (node 'enc')"));
    assert_int_equal(load_mb(b, "unsup3.onnx", &opt, &m, &err), OT_OK);
    assert_int_equal(m->n_unsupported, 2);
    assert_int_equal(m->unsupported[0].reason, OT_UNSUP_INIT_DTYPE);
    assert_int_equal(m->graph->values[ot_graph_find_value(m->graph, "names")].init_index, 0);
    assert_null(m->graph->values[ot_graph_find_value(m->graph, "names")].data);
    ot_model_free(m);
    mb_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_loads),
        cmocka_unit_test(test_load_buffer_matches),
        cmocka_unit_test(test_constants_and_bn_state),
        cmocka_unit_test(test_normalize_axes_inputs),
        cmocka_unit_test(test_normalize_nonconstant_axes),
        cmocka_unit_test(test_normalize_clip_dropout_softmax),
        cmocka_unit_test(test_storage_forms),
        cmocka_unit_test(test_tensor_errors),
        cmocka_unit_test(test_tensor_load_pb),
        cmocka_unit_test(test_external_data),
        cmocka_unit_test(test_missing_and_empty),
        cmocka_unit_test(test_truncated_and_random),
        cmocka_unit_test(test_cycle),
        cmocka_unit_test(test_dangling_input),
        cmocka_unit_test(test_wrong_attr_type),
        cmocka_unit_test(test_unsupported_ops),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
