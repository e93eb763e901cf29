/* test_regress_model_wire.c — regression for damage protobuf-c mishandles (issue 18):
 * messages nested thousands deep (TypeProto sequence/optional/map chains, If and Loop
 * bodies inside each other) crashed the recursive unpacker with a stack overflow and
 * no message; a NUL byte inside a string (op_type "Relu\0x", a tensor name, an
 * external location) was cut there by protobuf-c's C strings, so the model ran as
 * something else. Both are now refused by a wire-level walk before unpacking
 * (importer/wire_check.c), from a file and from memory. Fixtures come from
 * tests/fixtures/regress/make_bad_models.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importer/importer.h"
#include "kernels/kernel.h"

#define FIX OT_SOURCE_DIR "/tests/fixtures/regress/"

/* Loads fixture `name` from its file, or from its bytes in memory; the status. */
static ot_status load(const char *name, bool from_memory, ot_error *err) {
    char path[512];
    snprintf(path, sizeof path, "%s%s", FIX, name);
    ot_import_options opt = {.fold_eval = ot_cpu_fold_eval};
    ot_model *m = NULL;
    ot_status st;
    if (!from_memory) {
        st = ot_model_load(path, &opt, &m, err);
    } else {
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        char *buf = malloc((size_t)n);
        assert_non_null(buf);
        assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
        fclose(f);
        st = ot_model_load_buffer(buf, (size_t)n, name, FIX, &opt, &m, err);
        free(buf);
    }
    assert_true((st == OT_OK) == (m != NULL));
    ot_model_free(m);
    return st;
}

static void expect(const char *name, ot_status code, const char *n1, const char *n2) {
    for (int mem = 0; mem < 2; mem++) {
        ot_error err = {0};
        ot_status st = load(name, mem, &err);
        if (st != code) fail_msg("%s: expected status %d, got %d: %s", name, code, st, err.msg);
        if (!strstr(err.msg, name)) fail_msg("%s: message does not name the file: %s", name, err.msg);
        if (n1 && !strstr(err.msg, n1)) fail_msg("%s: message lacks '%s': %s", name, n1, err.msg);
        if (n2 && !strstr(err.msg, n2)) fail_msg("%s: message lacks '%s': %s", name, n2, err.msg);
    }
}

static void test_deep_types(void **state) {
    (void)state;
    expect("model_deep_sequence.onnx", OT_E_PARSE, "nested more than 100 deep", "onnx.TypeProto");
    expect("model_deep_optional_map.onnx", OT_E_PARSE, "nested more than 100 deep", "input[0]('x').type");
}

static void test_deep_control_flow(void **state) {
    (void)state;
    expect("model_deep_if.onnx", OT_E_PARSE, "nested more than 100 deep", "attribute[0]('then_branch').g");
    expect("model_deep_loop.onnx", OT_E_PARSE, "nested more than 100 deep", "('body')");
}

/* The limit is where it says: 85 levels pass the walk (the model stops later, at its
 * input type onnxtrain does not support), 105 do not. */
static void test_limit_boundary(void **state) {
    (void)state;
    ot_error err = {0};
    ot_status st = load("model_nesting_40.onnx", false, &err);
    if (st != OT_E_UNSUPPORTED) fail_msg("expected OT_E_UNSUPPORTED, got %d: %s", st, err.msg);
    assert_null(strstr(err.msg, "nested"));
    expect("model_nesting_50.onnx", OT_E_PARSE, "nested more than 100 deep", NULL);
}

static void test_nul_in_strings(void **state) {
    (void)state;
    expect("model_nul_op_type.onnx", OT_E_MODEL, "node[0]('relu1')", "'op_type' has a NUL byte after \"Relu\"");
    expect("model_nul_name.onnx", OT_E_MODEL, "initializer[0]('W')", "'name' has a NUL byte");
    expect("model_nul_location.onnx", OT_E_MODEL, "external_data[0]", "NUL byte after \"w.bin\"");
}

/* A standalone TensorProto file (backend tests' input_0.pb) goes through the same walk. */
static void test_nul_in_tensor_file(void **state) {
    (void)state;
    /* dims [1], float32, float_data [1.0], name "a\0b" */
    static const unsigned char pb[] = {0x08, 0x01, 0x10, 0x01, 0x22, 0x04, 0x00, 0x00, 0x80,
                                       0x3f, 0x42, 0x03, 0x61, 0x00, 0x62};
    const char *path = OT_BINARY_DIR "/regress_model_wire_nul.pb";
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(pb, 1, sizeof pb, f), sizeof pb);
    fclose(f);
    ot_tensor *t = NULL;
    char *name = NULL;
    ot_error err = {0};
    ot_status st = ot_tensor_load_pb(path, &t, &name, &err);
    if (st != OT_E_MODEL) fail_msg("expected OT_E_MODEL, got %d: %s", st, err.msg);
    assert_null(t);
    assert_non_null(strstr(err.msg, "regress_model_wire_nul.pb"));
    assert_non_null(strstr(err.msg, "'name' has a NUL byte after \"a\""));
    /* the same bytes without the NUL load */
    static const unsigned char ok[] = {0x08, 0x01, 0x10, 0x01, 0x22, 0x04, 0x00, 0x00, 0x80,
                                       0x3f, 0x42, 0x03, 0x61, 0x5f, 0x62};
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(ok, 1, sizeof ok, f), sizeof ok);
    fclose(f);
    st = ot_tensor_load_pb(path, &t, &name, &err);
    if (st) fail_msg("%s", err.msg);
    assert_string_equal(name, "a_b");
    free(name);
    ot_tensor_free(t);
    remove(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deep_types),
        cmocka_unit_test(test_deep_control_flow),
        cmocka_unit_test(test_limit_boundary),
        cmocka_unit_test(test_nul_in_strings),
        cmocka_unit_test(test_nul_in_tensor_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
