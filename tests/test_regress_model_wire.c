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
#include "test_files.h"

#define FIX OT_SOURCE_DIR "/tests/fixtures/regress/"

/* The fixture helpers of tests/helpers/test_files.h, on this folder. */
static ot_status load(const char *name, bool from_memory, ot_error *err) {
    return test_load_fixture(FIX, name, from_memory, err);
}

static void expect(const char *name, ot_status code, const char *n1, const char *n2) {
    test_expect_refused(FIX, name, code, n1, n2);
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
