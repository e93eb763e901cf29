/* test_regress_model_checks.c — regression for models that loaded and trained
 * silently wrong, or hit undefined behaviour, before issue 18: a tensor with both
 * raw_data and float_data, opset_import missing / -5 / 2^62 / only ai.onnx.ml, an op
 * older than the declared opset allows, attribute type 999, axes of 2^62, negative
 * pads and pool pads as large as the kernel, a graph input shadowed by an initializer
 * of another shape, Conv dilations and pads of 2^62, Split sizes and Slice steps that
 * overflow int64 (UBSan), and the exit-6 message cut at 1 KB mid name. Each is refused
 * with a documented status and a message naming the file and node or tensor.
 * Fixtures come from tests/fixtures/regress/make_bad_models.py. */
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

static void test_storage_forms(void **state) {
    (void)state;
    expect("model_raw_and_float.onnx", OT_E_MODEL, "tensor 'W'", "both raw_data and float_data");
}

static void test_opsets(void **state) {
    (void)state;
    expect("model_opset_missing.onnx", OT_E_MODEL, "declares no opset_import", "IR version 8");
    expect("model_opset_negative.onnx", OT_E_MODEL, "declares opset -5", NULL);
    expect("model_opset_huge.onnx", OT_E_MODEL, "declares opset 4611686018427387904", NULL);
    expect("model_opset_ml_only.onnx", OT_E_MODEL, "only for 'ai.onnx.ml'", "node 'relu1' (Relu)");
    expect("model_opset_too_old.onnx", OT_E_MODEL, "node 'ln1' (LayerNormalization)",
           "exists from opset 17 on, but the model declares opset 16");
}

static void test_attributes(void **state) {
    (void)state;
    expect("model_attr_type_999.onnx", OT_E_MODEL, "attribute 'foo' has type 999", "node 'relu1'");
    expect("model_axis_huge_flatten.onnx", OT_E_MODEL, "node 'flat1' (Flatten)", "axis 4611686018427387904");
    expect("model_axis_huge_unsqueeze.onnx", OT_E_MODEL, "node 'unsq1' (Unsqueeze)", "axis 4611686018427387904");
    expect("model_axis_huge_softmax.onnx", OT_E_MODEL, "node 'sm1' (Softmax)", "axis -4611686018427387904");
    expect("model_pads_negative_conv.onnx", OT_E_MODEL, "node 'conv1' (Conv)", "pads[0] = -1 is negative");
    expect("model_pads_negative_maxpool.onnx", OT_E_MODEL, "node 'maxpool1' (MaxPool)", "pads[1] = -2 is negative");
    expect("model_pads_avgpool_ge_kernel.onnx", OT_E_MODEL, "node 'averagepool1' (AveragePool)",
           "pads[0] = 2 is not smaller than the kernel");
}

static void test_shadowed_input(void **state) {
    (void)state;
    expect("model_shadow_input.onnx", OT_E_MODEL, "graph input 'x' is declared float32 [7,7,7]",
           "initializer of the same name is float32 [4,3]");
}

/* Under UBSan (.ci/sanitize) the old rules overflowed int64 here. */
static void test_overflowing_attributes(void **state) {
    (void)state;
    expect("model_conv_dilation_huge.onnx", OT_E_MODEL, "node 'conv1' (Conv)", "overflow int64");
    expect("model_conv_pads_huge.onnx", OT_E_MODEL, "node 'conv1' (Conv)", "overflow int64");
    expect("model_split_overflow.onnx", OT_E_MODEL, "node 'split1' (Split)", "add up past int64");
    expect("model_slice_step_max.onnx", OT_E_MODEL, "node 'slice1' (Slice)", "step 9223372036854775807");
    expect("model_slice_step_min.onnx", OT_E_MODEL, "node 'slice1' (Slice)", "step -9223372036854775808");
}

/* 120 unsupported nodes: the message fits ot_error whole, names every op type with
 * its count and says how many nodes it could not name; it used to stop mid name. */
static void test_unsupported_message_not_cut(void **state) {
    (void)state;
    ot_error err = {0};
    assert_int_equal(load("model_many_unsupported.onnx", false, &err), OT_E_UNSUPPORTED);
    size_t len = strlen(err.msg);
    if (len >= sizeof err.msg - 1) fail_msg("message fills the buffer (cut?): %s", err.msg);
    for (int i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof want, "my.ops:CustomOp%d (30 nodes)", i);
        if (!strstr(err.msg, want)) fail_msg("message lacks '%s': %s", want, err.msg);
    }
    assert_non_null(strstr(err.msg, "'a_rather_long_node_name_number_000'"));
    const char *tail = " more: run 'onnxtrain info ";
    assert_non_null(strstr(err.msg, tail));
    assert_non_null(strstr(err.msg, "model_many_unsupported.onnx' for the full list"));
    /* the last node name shown is whole */
    const char *more = strstr(err.msg, " ... and ");
    assert_non_null(more);
    assert_int_equal(more[-1], '\'');
    /* info's list (allow_unsupported) still names every node */
    ot_import_options opt = {.fold_eval = ot_cpu_fold_eval, .allow_unsupported = true};
    ot_model *m = NULL;
    assert_int_equal(ot_model_load(FIX "model_many_unsupported.onnx", &opt, &m, &err), OT_OK);
    char *all = ot_model_unsupported_str(m);
    assert_non_null(all);
    assert_non_null(strstr(all, "'a_rather_long_node_name_number_119'"));
    free(all);
    ot_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_storage_forms),
        cmocka_unit_test(test_opsets),
        cmocka_unit_test(test_attributes),
        cmocka_unit_test(test_shadowed_input),
        cmocka_unit_test(test_overflowing_attributes),
        cmocka_unit_test(test_unsupported_message_not_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
