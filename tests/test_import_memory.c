/* test_import_memory.c — the importer holds each weight once. The model's skeleton
 * (importer/skeleton.c: the ModelProto without its initializers' raw_data) must unpack
 * to exactly what protobuf-c reads from the whole bytes, with each left-out payload
 * found at its recorded place; raw_data initializers of every dtype, typed-field and
 * unsupported-dtype ones, loaded from a file or from memory, round-trip bit-exactly
 * through import → export; bytes protobuf-c would read otherwise than field by field (a
 * second graph or raw_data, padded varints, groups) fall back to unpacking the whole
 * model with the same outcome; a file cut short while loading is an I/O error; and
 * constant folding frees the intermediate results nothing reads any more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixtures/onnx_builder.h"
#include "importer/import_internal.h"
#include "kernels/kernel.h"

#define TMP OT_BINARY_DIR "/test_import_memory_tmp"

static int setup(void **state) {
    (void)state;
    return system("mkdir -p '" TMP "'");
}

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* ---- a model with initializers in every form -------------------------------------- */

typedef struct init_case {
    const char *name;
    int dtype;
    size_t esize;
} init_case;

/* Every dtype onnxtrain reads, plus uint16 (kept in the proto, not in the IR). */
static const init_case kCases[] = {
    {"f32", 1, 4}, {"u8", 2, 1},  {"i8", 3, 1},   {"u16", 4, 2},  {"i32", 6, 4},
    {"i64", 7, 8}, {"bool", 9, 1}, {"f16", 10, 2}, {"f64", 11, 8}, {"bf16", 16, 2},
};
#define N_CASES (sizeof kCases / sizeof kCases[0])
#define N_ELEMS 37 /* odd, so no payload is a multiple of anything convenient */

/* Deterministic bytes for case c; bool elements are 0 or 1, as ONNX requires. */
static void case_bytes(size_t c, uint8_t *out) {
    size_t n = N_ELEMS * kCases[c].esize;
    for (size_t i = 0; i < n; i++) out[i] = (uint8_t)(i * 37u + c * 101u + 7u);
    if (kCases[c].dtype == 9)
        for (size_t i = 0; i < n; i++) out[i] &= 1;
}

/* One raw_data initializer per case, a float_data one, an empty one, a Constant node
 * with a raw tensor, and a graph that reads one of them. */
static mb *all_forms(void) {
    mb *b = mb_new(17);
    const int64_t d[1] = {N_ELEMS}, zero[1] = {0}, three[1] = {3};
    uint8_t buf[N_ELEMS * 8];
    for (size_t c = 0; c < N_CASES; c++) {
        case_bytes(c, buf);
        Onnx__TensorProto *t = mb_tensor(b, kCases[c].name, kCases[c].dtype, 1, d);
        mb_raw(b, t, buf, N_ELEMS * kCases[c].esize);
        mb_init(b, t);
    }
    Onnx__TensorProto *t = mb_tensor(b, "typed", 1, 1, three);
    t->float_data = mb_alloc(b, 12);
    t->n_float_data = 3;
    t->float_data[0] = 1.5f;
    t->float_data[1] = -2.0f;
    t->float_data[2] = 0.25f;
    mb_init(b, t);
    t = mb_tensor(b, "empty", 1, 1, zero);
    mb_raw(b, t, "", 0);
    mb_init(b, t);
    Onnx__NodeProto *cn = mb_node(b, "Constant", "k", NULL, "kc");
    Onnx__AttributeProto *a = mb_attr(b, cn, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    const float kv[3] = {3, 4, 5};
    a->t = mb_tensor(b, "", 1, 1, three);
    mb_raw(b, a->t, kv, sizeof kv);
    mb_input(b, "x", 1, 1, d, NULL);
    mb_node(b, "Add", "add", "x,f32", "y");
    mb_node(b, "Add", "add2", "typed,kc", "z");
    mb_output(b, "y", 1);
    mb_output(b, "z", 1);
    return b;
}

static size_t case_index(const char *name) {
    for (size_t c = 0; c < N_CASES; c++)
        if (!strcmp(kCases[c].name, name)) return c;
    return N_CASES;
}

/* ---- the skeleton ----------------------------------------------------------------- */

/* The skeleton unpacks to the whole model minus raw_data, and putting each payload
 * back from its recorded place packs to the original bytes exactly. */
static void test_skeleton_is_the_model_without_payloads(void **state) {
    (void)state;
    mb *b = all_forms();
    size_t len;
    uint8_t *bytes = mb_pack(b, &len);
    ot_imp_src src;
    ot_imp_src_memory(&src, bytes, len, "forms.onnx");
    uint8_t *skel = NULL;
    size_t skel_len = 0, n_refs = 0;
    ot_imp_raw_ref *refs = NULL;
    ot_error err = {0};
    assert_int_equal(ot_imp_skeleton(&src, &skel, &skel_len, &refs, &n_refs, &err), OT_OK);
    assert_non_null(skel);
    assert_int_equal(n_refs, b->graph->n_initializer);
    size_t payload = 0;
    for (size_t i = 0; i < b->graph->n_initializer; i++) payload += b->graph->initializer[i]->raw_data.len;
    assert_true(skel_len + payload < len);

    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, skel_len, skel);
    assert_non_null(mp);
    assert_int_equal(mp->graph->n_initializer, n_refs);
    for (size_t i = 0; i < n_refs; i++) {
        const Onnx__TensorProto *want = b->graph->initializer[i];
        Onnx__TensorProto *got = mp->graph->initializer[i];
        assert_string_equal(got->name, want->name);
        assert_false(got->has_raw_data);
        assert_int_equal(refs[i].present, want->has_raw_data);
        if (!refs[i].present) continue;
        assert_int_equal(refs[i].len, want->raw_data.len);
        if (want->raw_data.len) assert_memory_equal(bytes + refs[i].offset, want->raw_data.data, want->raw_data.len);
        got->has_raw_data = 1;
        got->raw_data.len = (size_t)refs[i].len;
        got->raw_data.data = malloc(refs[i].len ? (size_t)refs[i].len : 1);
        memcpy(got->raw_data.data, bytes + refs[i].offset, (size_t)refs[i].len);
    }
    /* the Constant node's tensor is not an initializer: kept in the skeleton */
    assert_true(mp->graph->node[0]->attribute[0]->t->has_raw_data);
    size_t back_len = onnx__model_proto__get_packed_size(mp);
    assert_int_equal(back_len, len);
    uint8_t *back = malloc(back_len);
    onnx__model_proto__pack(mp, back);
    assert_memory_equal(back, bytes, len);
    free(back);
    onnx__model_proto__free_unpacked(mp, NULL);
    free(skel);
    free(refs);
    mb_free(b);
}

/* Loaded from a file and from memory, every initializer holds its bytes; the export
 * writes them back bit-exactly (uint16 from the proto, the others from the IR). */
static void test_roundtrip_every_dtype(void **state) {
    (void)state;
    mb *b = all_forms();
    const char *src = TMP "/forms.onnx", *dst = TMP "/forms_out.onnx", *dst2 = TMP "/forms_out2.onnx";
    assert_int_equal(mb_write(b, src), 0);
    size_t len;
    uint8_t *bytes = mb_pack(b, &len);
    ot_import_options opt = {.fold_eval = ot_cpu_fold_eval, .allow_unsupported = true}; /* the uint16 initializer */
    ot_error err = {0};
    for (int from_file = 0; from_file < 2; from_file++) {
        ot_model *m = NULL;
        ot_status st = from_file ? ot_model_load(src, &opt, &m, &err)
                                 : ot_model_load_buffer(bytes, len, "forms.onnx", TMP, &opt, &m, &err);
        if (st) fail_msg("%s", err.msg);
        uint8_t want[N_ELEMS * 8];
        for (size_t c = 0; c < N_CASES; c++) {
            int id = ot_graph_find_value(m->graph, kCases[c].name);
            assert_true(id >= 0);
            const ot_value *v = &m->graph->values[id];
            if (kCases[c].dtype == 4) { /* not an onnxtrain dtype: no IR data */
                assert_null(v->data);
                continue;
            }
            case_bytes(c, want);
            assert_int_equal(v->nbytes, N_ELEMS * kCases[c].esize);
            if (memcmp(v->data, want, v->nbytes)) fail_msg("%s (file %d): bytes differ", kCases[c].name, from_file);
        }
        const ot_value *typed = &m->graph->values[ot_graph_find_value(m->graph, "typed")];
        const float tw[3] = {1.5f, -2.0f, 0.25f};
        assert_memory_equal(typed->data, tw, 12);
        assert_int_equal(m->graph->values[ot_graph_find_value(m->graph, "empty")].nbytes, 0);

        assert_int_equal(ot_model_save(m, dst, &err), OT_OK);
        ot_model_free(m);
        size_t olen;
        uint8_t *out = read_all(dst, &olen);
        Onnx__ModelProto *p = onnx__model_proto__unpack(NULL, olen, out);
        assert_non_null(p);
        assert_int_equal(p->graph->n_initializer, b->graph->n_initializer);
        for (size_t i = 0; i < p->graph->n_initializer; i++) {
            const Onnx__TensorProto *t = p->graph->initializer[i];
            size_t c = case_index(t->name);
            if (c == N_CASES) continue;
            case_bytes(c, want);
            assert_true(t->has_raw_data);
            assert_int_equal(t->raw_data.len, N_ELEMS * kCases[c].esize);
            if (memcmp(t->raw_data.data, want, t->raw_data.len))
                fail_msg("%s (file %d): exported bytes differ", t->name, from_file);
        }
        onnx__model_proto__free_unpacked(p, NULL);

        /* the export loads back and exports to the same bytes */
        assert_int_equal(ot_model_load(dst, &opt, &m, &err), OT_OK);
        assert_int_equal(ot_model_save(m, dst2, &err), OT_OK);
        ot_model_free(m);
        size_t olen2;
        uint8_t *out2 = read_all(dst2, &olen2);
        assert_int_equal(olen, olen2);
        assert_memory_equal(out, out2, olen);
        free(out);
        free(out2);
    }
    mb_free(b);
}

/* Non-0/1 bool bytes are normalised whichever path read them. */
static void test_bool_normalised(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t d[1] = {4};
    const uint8_t raw[4] = {0, 2, 1, 255}, want[4] = {0, 1, 1, 1};
    Onnx__TensorProto *t = mb_tensor(b, "m", 9, 1, d);
    mb_raw(b, t, raw, 4);
    mb_init(b, t);
    mb_node(b, "Identity", "id", "m", "y");
    mb_output(b, "y", 9);
    size_t len;
    uint8_t *bytes = mb_pack(b, &len);
    ot_model *m = NULL;
    ot_error err = {0};
    if (ot_model_load_buffer(bytes, len, "bool.onnx", NULL, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err)) fail_msg("%s", err.msg);
    assert_memory_equal(m->graph->values[ot_graph_find_value(m->graph, "m")].data, want, 4);
    ot_model_free(m);
    mb_free(b);
}

/* ---- bytes the scan leaves to protobuf-c ------------------------------------------ */

/* Gives msg one more length-delimited field, number `field`, packed after its known
 * fields: protobuf-c writes unknown fields as they are (the data after the tag). */
static void unknown_field(mb *b, ProtobufCMessage *msg, uint32_t field, const void *data, size_t n) {
    ProtobufCMessageUnknownField *u = mb_alloc(b, sizeof *u);
    u->tag = field;
    u->wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
    u->data = mb_alloc(b, n + 10);
    size_t k = 0;
    for (size_t v = n;; v >>= 7) {
        u->data[k++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80) break;
    }
    memcpy(u->data + k, data, n);
    u->len = k + n;
    msg->unknown_fields = u;
    msg->n_unknown_fields = 1;
}

static bool skeleton_gives_up(const uint8_t *bytes, size_t len) {
    ot_imp_src src;
    ot_imp_src_memory(&src, bytes, len, "t.onnx");
    uint8_t *skel = NULL;
    size_t skel_len = 0, n_refs = 0;
    ot_imp_raw_ref *refs = NULL;
    ot_error err = {0};
    assert_int_equal(ot_imp_skeleton(&src, &skel, &skel_len, &refs, &n_refs, &err), OT_OK);
    bool gave_up = skel == NULL;
    free(skel);
    free(refs);
    return gave_up;
}

/* A second raw_data in a tensor replaces the first; a second graph is merged in. */
static void test_repeated_fields_fall_back(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t d[1] = {2};
    const float first[2] = {1, 2}, second[2] = {7, 8};
    Onnx__TensorProto *w = mb_init_f32(b, "w", 1, d, first);
    unknown_field(b, &w->base, 9, second, sizeof second); /* packed as a second raw_data */
    mb_input(b, "x", 1, 1, d, NULL);
    mb_node(b, "Add", "add", "x,w", "y");
    mb_output(b, "y", 1);
    size_t len;
    uint8_t *bytes = mb_pack(b, &len);
    assert_true(skeleton_gives_up(bytes, len));
    ot_model *m = NULL;
    ot_error err = {0};
    if (ot_model_load_buffer(bytes, len, "dup_raw.onnx", NULL, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err)) fail_msg("%s", err.msg);
    assert_memory_equal(m->graph->values[ot_graph_find_value(m->graph, "w")].data, second, 8);
    ot_model_free(m);

    /* a second graph field holding one more initializer */
    w->base.n_unknown_fields = 0;
    mb *extra = mb_new(17);
    const float v[2] = {5, 6};
    mb_init_f32(extra, "w2", 1, d, v);
    size_t glen = onnx__graph_proto__get_packed_size(extra->graph);
    uint8_t *g = malloc(glen);
    onnx__graph_proto__pack(extra->graph, g);
    unknown_field(b, &b->model->base, 7, g, glen);
    free(g);
    bytes = mb_pack(b, &len);
    assert_true(skeleton_gives_up(bytes, len));
    const char *path = TMP "/two_graphs.onnx";
    write_bytes(path, bytes, len);
    Onnx__ModelProto *ref = onnx__model_proto__unpack(NULL, len, bytes);
    assert_non_null(ref);
    assert_int_equal(ot_model_load(path, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err), OT_OK);
    assert_int_equal(m->graph->n_values, ref->graph->n_initializer + 2); /* + x, y */
    int w2 = ot_graph_find_value(m->graph, "w2");
    assert_true(w2 >= 0);
    assert_memory_equal(m->graph->values[w2].data, v, 8);
    assert_memory_equal(m->graph->values[ot_graph_find_value(m->graph, "w")].data, first, 8);
    onnx__model_proto__free_unpacked(ref, NULL);
    ot_model_free(m);
    mb_free(extra);
    mb_free(b);
}

/* Padded varints and groups: the outcome is whatever protobuf-c makes of the bytes. */
static void test_odd_encodings_fall_back(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t d[1] = {2};
    const float w[2] = {1, 2};
    mb_init_f32(b, "w", 1, d, w);
    mb_input(b, "x", 1, 1, d, NULL);
    mb_node(b, "Add", "add", "x,w", "y");
    mb_output(b, "y", 1);
    size_t len;
    uint8_t *model = mb_pack(b, &len);
    /* prefixes: ir_version's tag padded to two bytes; a group (field 100) start and end */
    static const uint8_t padded_tag[] = {0x88, 0x00, 0x08};
    static const uint8_t group[] = {0xa3, 0x06, 0xa4, 0x06};
    const struct {
        const uint8_t *p;
        size_t n;
    } prefixes[] = {{padded_tag, sizeof padded_tag}, {group, sizeof group}};
    for (size_t k = 0; k < 2; k++) {
        size_t n = prefixes[k].n + len;
        uint8_t *bytes = malloc(n);
        memcpy(bytes, prefixes[k].p, prefixes[k].n);
        memcpy(bytes + prefixes[k].n, model, len);
        assert_true(skeleton_gives_up(bytes, n));
        Onnx__ModelProto *ref = onnx__model_proto__unpack(NULL, n, bytes);
        ot_model *m = NULL;
        ot_error err = {0};
        ot_status st = ot_model_load_buffer(bytes, n, "odd.onnx", NULL, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err);
        if (ref) {
            if (st) fail_msg("prefix %zu: protobuf-c reads it, the importer says: %s", k, err.msg);
            assert_memory_equal(m->graph->values[ot_graph_find_value(m->graph, "w")].data, w, 8);
            onnx__model_proto__free_unpacked(ref, NULL);
        } else {
            assert_int_equal(st, OT_E_PARSE);
        }
        ot_model_free(m);
        free(bytes);
    }
    mb_free(b);
}

/* ---- the file source -------------------------------------------------------------- */

static void test_file_cut_short_while_loading(void **state) {
    (void)state;
    const char *path = TMP "/shrinks.bin";
    uint8_t data[4096];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)i;
    write_bytes(path, data, sizeof data);
    ot_imp_src src;
    ot_error err = {0};
    assert_int_equal(ot_imp_src_open(&src, path, &err), OT_OK);
    uint8_t got[16];
    assert_int_equal(ot_imp_src_read(&src, 4000, got, 16, &err), OT_OK);
    assert_memory_equal(got, data + 4000, 16);
    assert_int_equal(truncate(path, 100), 0);
    assert_int_equal(ot_imp_src_read(&src, 4000, got, 16, &err), OT_E_IO);
    assert_non_null(strstr(err.msg, "shorter"));
    assert_non_null(strstr(err.msg, "shrinks.bin"));
    /* past the size it was opened with: refused before reading */
    assert_int_equal(ot_imp_src_read(&src, 4090, got, 16, &err), OT_E_INTERNAL);
    ot_imp_src_close(&src);
    assert_int_equal(ot_imp_src_open(&src, TMP, &err), OT_E_IO); /* a folder */
    assert_non_null(strstr(err.msg, "not a regular file"));
}

/* ---- constant folding ------------------------------------------------------------- */

/* Folding Mul(c, c) leaves the Constant's value unread: its data goes. An initializer
 * whose readers were all folded keeps its data, which the exporter writes. */
static void test_folding_frees_dead_constants(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t xd[2] = {2, 4}, two[1] = {2};
    const int64_t cv[2] = {4, 2}, one[2] = {1, 1};
    mb_input(b, "x", 1, 2, xd, NULL);
    Onnx__NodeProto *cn = mb_node(b, "Constant", "c", NULL, "c");
    Onnx__AttributeProto *a = mb_attr(b, cn, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = mb_tensor(b, "", 7, 1, two);
    mb_raw(b, a->t, cv, sizeof cv);
    mb_init_i64(b, "k", 1, two, one);
    mb_node(b, "Mul", "sq", "c,k", "shape");
    mb_node(b, "Reshape", "r", "x,shape", "y");
    mb_output(b, "y", 1);
    size_t len;
    uint8_t *bytes = mb_pack(b, &len);
    ot_model *m = NULL;
    ot_error err = {0};
    assert_int_equal(ot_model_load_buffer(bytes, len, "fold.onnx", NULL, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err), OT_OK);
    const ot_graph *g = m->graph;
    const ot_value *c = &g->values[ot_graph_find_value(g, "c")];
    const ot_value *k = &g->values[ot_graph_find_value(g, "k")];
    const ot_value *shape = &g->values[ot_graph_find_value(g, "shape")];
    assert_int_equal(c->n_consumers, 0);
    assert_null(c->data);
    assert_non_null(k->data);
    assert_int_equal(shape->kind, OT_VK_CONSTANT);
    assert_int_equal(shape->nbytes, 16);
    assert_memory_equal(shape->data, cv, 16);
    const char *dst = TMP "/fold_out.onnx";
    assert_int_equal(ot_model_save(m, dst, &err), OT_OK);
    ot_model_free(m);
    assert_int_equal(ot_model_load(dst, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err), OT_OK);
    assert_memory_equal(m->graph->values[ot_graph_find_value(m->graph, "k")].data, one, 16);
    ot_model_free(m);
    mb_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skeleton_is_the_model_without_payloads),
        cmocka_unit_test(test_roundtrip_every_dtype),
        cmocka_unit_test(test_bool_normalised),
        cmocka_unit_test(test_repeated_fields_fall_back),
        cmocka_unit_test(test_odd_encodings_fall_back),
        cmocka_unit_test(test_file_cut_short_while_loading),
        cmocka_unit_test(test_folding_frees_dead_constants),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
