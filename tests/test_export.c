/* test_export.c — the exporter: import → change weights → export → import gives the
 * same graph (nodes, op types, names, attributes) and bitwise the new initializer
 * bytes; metadata, doc strings and opset survive; typed-field and external
 * initializers are written inline; a failed save leaves the old file and no
 * temporary behind; every sample in samples/ (*.onnx) round-trips bitwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "kernels/kernel.h"

#define TMP OT_BINARY_DIR "/test_export_tmp"
#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

static int setup(void **state) {
    (void)state;
    return system("mkdir -p '" TMP "/ext'");
}

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

/* Same live nodes in the same order with the same op types, names and attributes. */
static void assert_same_graph(const ot_graph *a, const ot_graph *b) {
    assert_int_equal(a->n_nodes, b->n_nodes);
    assert_int_equal(a->n_values, b->n_values);
    assert_int_equal(a->n_inputs, b->n_inputs);
    assert_int_equal(a->n_outputs, b->n_outputs);
    assert_int_equal(a->opset, b->opset);
    for (int i = 0; i < a->n_nodes; i++) {
        const ot_node *x = &a->nodes[i], *y = &b->nodes[i];
        assert_string_equal(x->op_type, y->op_type);
        assert_string_equal(x->name, y->name);
        assert_string_equal(x->domain, y->domain);
        assert_int_equal(x->n_inputs, y->n_inputs);
        assert_int_equal(x->n_outputs, y->n_outputs);
        assert_int_equal(x->n_attrs, y->n_attrs);
        for (int k = 0; k < x->n_attrs; k++) {
            const ot_attr *p = &x->attrs[k], *q = ot_node_attr(y, p->name);
            assert_non_null(q);
            assert_int_equal(p->type, q->type);
            assert_int_equal(p->i, q->i);
            assert_memory_equal(&p->f, &q->f, sizeof p->f);
            assert_int_equal(p->n, q->n);
            if (p->type == OT_ATTR_INTS && p->n) assert_memory_equal(p->ints, q->ints, (size_t)p->n * 8);
            if (p->type == OT_ATTR_FLOATS && p->n) assert_memory_equal(p->floats, q->floats, (size_t)p->n * 4);
            if (p->type == OT_ATTR_STRING) assert_string_equal(p->s, q->s);
            if (p->type == OT_ATTR_TENSOR) {
                assert_int_equal(p->t->nbytes, q->t->nbytes);
                if (p->t->nbytes) assert_memory_equal(p->t->data, q->t->data, p->t->nbytes);
            }
        }
    }
    for (int v = 0; v < a->n_values; v++) {
        const ot_value *x = &a->values[v], *y = &b->values[v];
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->kind, y->kind);
        assert_int_equal(x->dtype, y->dtype);
        assert_int_equal(x->init_index, y->init_index);
        assert_int_equal(x->nbytes, y->nbytes);
        if (x->nbytes) assert_memory_equal(x->data, y->data, x->nbytes);
    }
}

/* Conv/BN-like model with every initializer flavour: raw f32, float_data f32, f16
 * raw, BN state, int64 constant, a Constant node, metadata and doc strings. */
static mb *rich_model(void) {
    mb *b = mb_new(17);
    mb_opset(b, "com.example", 3);
    b->model->doc_string = mb_str(b, "model doc");
    b->model->metadata_props = mb_alloc(b, 2 * sizeof(void *));
    Onnx__StringStringEntryProto *kv = mb_alloc(b, sizeof *kv);
    onnx__string_string_entry_proto__init(kv);
    kv->key = mb_str(b, "author");
    kv->value = mb_str(b, "tests");
    b->model->metadata_props[0] = kv;
    b->model->n_metadata_props = 1;
    const int64_t xd[2] = {-1, 3}, wd[2] = {3, 3}, cd[1] = {3}, sd[1] = {2};
    const char *syms[2] = {"n", NULL};
    mb_input(b, "x", F32, 2, xd, syms);
    float w[9];
    for (int i = 0; i < 9; i++) w[i] = (float)i / 7.0f;
    Onnx__TensorProto *wt = mb_init_f32(b, "w", 2, wd, w);
    wt->doc_string = mb_str(b, "weight doc");
    Onnx__TensorProto *bt = mb_tensor(b, "b", F32, 1, cd);
    bt->float_data = mb_alloc(b, 12);
    bt->n_float_data = 3;
    bt->float_data[0] = 0.1f;
    bt->float_data[1] = 0.2f;
    bt->float_data[2] = 0.3f;
    mb_init(b, bt);
    float ones[3] = {1, 1, 1}, zeros[3] = {0, 0, 0};
    mb_init_f32(b, "mean", 1, cd, zeros);
    mb_init_f32(b, "var", 1, cd, ones);
    Onnx__TensorProto *h = mb_tensor(b, "half", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, 1, cd);
    const uint16_t hv[3] = {0x3c00, 0x4000, 0xbc00};
    mb_raw(b, h, hv, sizeof hv);
    mb_init(b, h);
    const int64_t shp[2] = {-1, 3};
    mb_init_i64(b, "shape", 1, sd, shp);
    Onnx__NodeProto *g = mb_node(b, "Gemm", "fc", "x,w,b", "h");
    mb_attr_int(b, g, "transB", 1);
    g->doc_string = mb_str(b, "node doc");
    mb_node(b, "Unsqueeze", "", "h,ax", "h4");
    Onnx__NodeProto *c = mb_node(b, "Constant", "axes_const", NULL, "ax");
    Onnx__AttributeProto *a = mb_attr(b, c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    const int64_t one[1] = {2}, axv[2] = {2, 3};
    a->t = mb_tensor(b, "", I64, 1, one);
    mb_raw(b, a->t, axv, sizeof axv);
    Onnx__NodeProto *bn = mb_node(b, "BatchNormalization", "bn", "h4,w_scale,b_shift,mean,var", "y4,rm,rv");
    mb_attr_int(b, bn, "training_mode", 1);
    mb_attr_float(b, bn, "epsilon", 1e-3f);
    mb_init_f32(b, "w_scale", 1, cd, ones);
    mb_init_f32(b, "b_shift", 1, cd, zeros);
    mb_node(b, "Reshape", "flat", "y4,shape", "y");
    mb_output(b, "y", F32);
    mb_output(b, "half_out", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16);
    mb_node(b, "Identity", "hid", "half", "half_out");
    return b;
}

static void test_roundtrip(void **state) {
    (void)state;
    mb *b = rich_model();
    const char *src = TMP "/rich.onnx", *dst = TMP "/rich_out.onnx";
    assert_int_equal(mb_write(b, src), 0);
    ot_model *m = NULL, *m2 = NULL;
    ot_error err = {0};
    ot_status st = ot_model_load(src, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err);
    if (st) fail_msg("%s", err.msg);
    ot_graph *g = m->graph;
    /* "train": change every param and the BN state in place */
    for (int v = 0; v < g->n_values; v++) {
        ot_value *val = &g->values[v];
        if (val->kind != OT_VK_PARAM && val->kind != OT_VK_STATE) continue;
        uint8_t *p = val->data;
        for (size_t i = 0; i < val->nbytes; i++) p[i] = (uint8_t)(p[i] ^ (0x5a + i));
    }
    st = ot_model_save(m, dst, &err);
    if (st) fail_msg("%s", err.msg);
    st = ot_model_load(dst, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m2, &err);
    if (st) fail_msg("%s", err.msg);
    assert_same_graph(m->graph, m2->graph);
    assert_int_equal(m2->ir_version, 8);
    assert_string_equal(m2->producer_name, "onnxtrain-test");

    /* everything but initializer data is what the source had */
    size_t la, lb;
    uint8_t *ba = read_all(src, &la), *bb = read_all(dst, &lb);
    Onnx__ModelProto *pa = onnx__model_proto__unpack(NULL, la, ba), *pb = onnx__model_proto__unpack(NULL, lb, bb);
    assert_non_null(pa);
    assert_non_null(pb);
    assert_int_equal(pb->n_opset_import, 2);
    assert_string_equal(pb->opset_import[1]->domain, "com.example");
    assert_string_equal(pb->doc_string, "model doc");
    assert_int_equal(pb->n_metadata_props, 1);
    assert_string_equal(pb->metadata_props[0]->value, "tests");
    assert_int_equal(pb->graph->n_node, pa->graph->n_node);
    assert_string_equal(pb->graph->node[0]->doc_string, "node doc");
    assert_string_equal(pb->graph->node[2]->op_type, "Constant");
    assert_string_equal(pb->graph->initializer[0]->doc_string, "weight doc");
    /* the float_data initializer is now raw_data in its own dtype */
    const Onnx__TensorProto *tb = pb->graph->initializer[1];
    assert_string_equal(tb->name, "b");
    assert_int_equal(tb->n_float_data, 0);
    assert_true(tb->has_raw_data);
    assert_int_equal(tb->raw_data.len, 12);
    assert_int_equal(pb->graph->initializer[4]->raw_data.len, 6); /* float16 stays 2 bytes */
    /* graph parts other than initializers pack to the same bytes */
    for (size_t i = 0; i < pa->graph->n_node; i++) {
        size_t sa = onnx__node_proto__get_packed_size(pa->graph->node[i]);
        size_t sb = onnx__node_proto__get_packed_size(pb->graph->node[i]);
        assert_int_equal(sa, sb);
        uint8_t *xa = malloc(sa), *xb = malloc(sb);
        onnx__node_proto__pack(pa->graph->node[i], xa);
        onnx__node_proto__pack(pb->graph->node[i], xb);
        assert_memory_equal(xa, xb, sa);
        free(xa);
        free(xb);
    }
    onnx__model_proto__free_unpacked(pa, NULL);
    onnx__model_proto__free_unpacked(pb, NULL);
    free(ba);
    free(bb);

    /* an unchanged model re-exports to the same bytes as its own first export */
    const char *dst2 = TMP "/rich_out2.onnx";
    assert_int_equal(ot_model_save(m2, dst2, &err), OT_OK);
    uint8_t *c1 = read_all(dst, &la), *c2 = read_all(dst2, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(c1, c2, la);
    free(c1);
    free(c2);
    ot_model_free(m);
    ot_model_free(m2);
    mb_free(b);
}

static void test_external_inlined(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t d[1] = {4};
    float w[4] = {1, 2, 3, 4};
    FILE *f = fopen(TMP "/ext/w.bin", "wb");
    assert_non_null(f);
    fwrite(w, 4, 4, f);
    fclose(f);
    Onnx__TensorProto *t = mb_tensor(b, "w", F32, 1, d);
    const char *kv[] = {"location", "w.bin", "length", "16"};
    mb_external(b, t, kv, 2);
    mb_init(b, t);
    mb_input(b, "x", F32, 1, d, NULL);
    mb_node(b, "Add", "add", "x,w", "y");
    mb_output(b, "y", F32);
    assert_int_equal(mb_write(b, TMP "/ext/m.onnx"), 0);
    ot_model *m = NULL, *m2 = NULL;
    ot_error err = {0};
    assert_int_equal(ot_model_load(TMP "/ext/m.onnx", &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err), OT_OK);
    /* written to another folder that has no w.bin: must not refer to it */
    assert_int_equal(ot_model_save(m, TMP "/inlined.onnx", &err), OT_OK);
    assert_int_equal(ot_model_load(TMP "/inlined.onnx", &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m2, &err), OT_OK);
    assert_same_graph(m->graph, m2->graph);
    const Onnx__ModelProto *p = m2->proto;
    assert_int_equal(p->graph->initializer[0]->n_external_data, 0);
    assert_false(p->graph->initializer[0]->has_data_location &&
                 p->graph->initializer[0]->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL);
    ot_model_free(m);
    ot_model_free(m2);
    mb_free(b);
}

/* An initializer of a dtype onnxtrain lacks (string) is kept as it was. */
static void test_unsupported_initializer_kept(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t d[1] = {2};
    Onnx__TensorProto *t = mb_tensor(b, "names", ONNX__TENSOR_PROTO__DATA_TYPE__STRING, 1, d);
    t->string_data = mb_alloc(b, 2 * sizeof(ProtobufCBinaryData));
    t->string_data[0].data = (uint8_t *)mb_str(b, "cat");
    t->string_data[0].len = 3;
    t->string_data[1].data = (uint8_t *)mb_str(b, "dog");
    t->string_data[1].len = 3;
    t->n_string_data = 2;
    mb_init(b, t);
    float w[2] = {1, 2};
    mb_init_f32(b, "w", 1, d, w);
    mb_input(b, "x", F32, 1, d, NULL);
    mb_node(b, "LabelEncoder", "enc", "x,names", "y");
    mb_node(b, "Add", "add", "y,w", "z");
    mb_output(b, "z", F32);
    assert_int_equal(mb_write(b, TMP "/strinit.onnx"), 0);
    ot_import_options opt = {.fold_eval = ot_cpu_fold_eval, .allow_unsupported = true};
    ot_model *m = NULL;
    ot_error err = {0};
    assert_int_equal(ot_model_load(TMP "/strinit.onnx", &opt, &m, &err), OT_OK);
    assert_int_equal(ot_model_save(m, TMP "/strinit_out.onnx", &err), OT_OK);
    size_t len;
    uint8_t *buf = read_all(TMP "/strinit_out.onnx", &len);
    Onnx__ModelProto *p = onnx__model_proto__unpack(NULL, len, buf);
    assert_non_null(p);
    assert_int_equal(p->graph->initializer[0]->n_string_data, 2);
    assert_memory_equal(p->graph->initializer[0]->string_data[1].data, "dog", 3);
    assert_int_equal(p->graph->initializer[1]->raw_data.len, 8);
    assert_memory_equal(p->graph->initializer[1]->raw_data.data, w, 8);
    onnx__model_proto__free_unpacked(p, NULL);
    free(buf);
    ot_model_free(m);
    mb_free(b);
}

static int count_tmp_files(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix)) && strstr(e->d_name, ".tmp-")) n++;
    closedir(d);
    return n;
}

static void test_failed_save_keeps_old(void **state) {
    (void)state;
    mb *b = rich_model();
    assert_int_equal(mb_write(b, TMP "/keep_src.onnx"), 0);
    ot_model *m = NULL;
    ot_error err = {0};
    assert_int_equal(ot_model_load(TMP "/keep_src.onnx", &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err), OT_OK);
    const char *out = TMP "/keep.onnx";
    FILE *f = fopen(out, "wb");
    fputs("old contents", f);
    fclose(f);
    /* an IR value that no longer matches its initializer: refused before writing */
    ot_value *w = &m->graph->values[ot_graph_find_value(m->graph, "w")];
    size_t keep = w->nbytes;
    w->nbytes = 4;
    assert_int_equal(ot_model_save(m, out, &err), OT_E_INTERNAL);
    assert_non_null(strstr(err.msg, "'w'"));
    w->nbytes = keep;
    size_t len;
    uint8_t *c = read_all(out, &len);
    assert_int_equal(len, 12);
    assert_memory_equal(c, "old contents", 12);
    free(c);
    assert_int_equal(count_tmp_files(TMP, "keep.onnx"), 0);
    /* a folder that does not exist: I/O error naming the path */
    assert_int_equal(ot_model_save(m, TMP "/no/such/dir/x.onnx", &err), OT_E_IO);
    assert_non_null(strstr(err.msg, "no/such/dir/x.onnx"));
    /* the target is a folder: rename fails, the temporary is removed */
    assert_int_equal(system("mkdir -p '" TMP "/adir.onnx/sub'"), 0);
    assert_int_equal(ot_model_save(m, TMP "/adir.onnx", &err), OT_E_IO);
    assert_int_equal(count_tmp_files(TMP, "adir.onnx"), 0);
    ot_model_free(m);
    mb_free(b);
}

/* Every sample model imports, verifies and round-trips through the exporter bitwise. */
static void test_samples_roundtrip(void **state) {
    (void)state;
    glob_t gl;
    if (glob(OT_SOURCE_DIR "/samples/*.onnx", 0, NULL, &gl) != 0) {
        print_message("no samples/*.onnx yet: nothing to round-trip\n");
        skip();
    }
    for (size_t i = 0; i < gl.gl_pathc; i++) {
        const char *path = gl.gl_pathv[i];
        ot_model *m = NULL, *m2 = NULL;
        ot_error err = {0};
        ot_status st = ot_model_load(path, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err);
        if (st) fail_msg("%s", err.msg);
        assert_int_equal(ot_graph_verify(m->graph, &err), OT_OK);
        const char *base = strrchr(path, '/') + 1;
        char out[1024];
        snprintf(out, sizeof out, "%s/sample_%s", TMP, base);
        st = ot_model_save(m, out, &err);
        if (st) fail_msg("%s", err.msg);
        st = ot_model_load(out, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m2, &err);
        if (st) fail_msg("%s", err.msg);
        assert_same_graph(m->graph, m2->graph);
        print_message("%s: %d nodes, round-trip ok\n", base, m->graph->n_nodes);
        ot_model_free(m);
        ot_model_free(m2);
        unlink(out);
    }
    globfree(&gl);
}

/* `test_export --export SRC DST`: load and save one model, for tests/check_export.py
 * (onnx.checker on the exporter's output) without a separate tool. */
static int export_one(const char *src, const char *dst) {
    ot_model *m = NULL;
    ot_error err = {0};
    ot_status st = ot_model_load(src, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err);
    if (!st) st = ot_model_save(m, dst, &err);
    if (st) fprintf(stderr, "test_export: %s\n", err.msg);
    ot_model_free(m);
    return st;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--export")) return export_one(argv[2], argv[3]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_external_inlined),
        cmocka_unit_test(test_failed_save_keeps_old),
        cmocka_unit_test(test_unsupported_initializer_kept),
        cmocka_unit_test(test_samples_roundtrip),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
