/* test_torch_index_model.c — a model exported by PyTorch 1.13 (TorchScript, training
 * mode, no constant folding, opset 14) that uses Pad (reflect, edge, and the Pad
 * before a count_include_pad AveragePool, pads computed from shapes), Trilu, CumSum
 * and Tile, run as a user runs it: `onnxtrain grad` must reproduce PyTorch's
 * cross-entropy gradients within float32 rounding, and `verify --remat all` must find
 * the rematerialized step bitwise equal. Fixture: tests/fixtures/index/model/
 * (make_model.py there). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_run.h"
#include "train/npy.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define FIX OT_SOURCE_DIR "/tests/fixtures/index/model/"
#define TMP OT_BINARY_DIR "/test_torch_index_model_tmp"
#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)

static void test_grad_matches_torch(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    assert_int_equal(run(BIN " grad " FIX "model.onnx --input " FIX "x.npy --labels " FIX "labels.npy --dump-grads " TMP
                             "/grads"),
                     0);
    const char *params[5] = {"w", "conv.weight", "conv.bias", "fc.weight", "fc.bias"};
    double worst = 0.0;
    for (int k = 0; k < 5; k++) {
        char got_path[512], want_path[512];
        snprintf(got_path, sizeof got_path, TMP "/grads/%s.npy", params[k]);
        snprintf(want_path, sizeof want_path, FIX "grad_%s.npy", params[k]);
        ot_tensor *got = NULL, *want = NULL;
        ot_error err = {0};
        if (ot_npy_read(got_path, &got, &err) || ot_npy_read(want_path, &want, &err)) fail_msg("%s", err.msg);
        assert_true(ot_shape_equal(&got->shape, &want->shape));
        const float *a = got->data, *b = want->data;
        for (int64_t i = 0; i < ot_shape_numel(&got->shape); i++) {
            double d = fabs((double)a[i] - b[i]);
            worst = fmax(worst, d);
            if (d > 1e-6 + 1e-5 * fabs(b[i])) fail_msg("%s[%lld]: %.9g, PyTorch %.9g", params[k], (long long)i, a[i], b[i]);
        }
        ot_tensor_free(got);
        ot_tensor_free(want);
    }
    printf("  max |dW - PyTorch| over the 5 params: %.3g\n", worst);
}

static void test_verify_remat(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    assert_int_equal(run(BIN " verify " FIX "model.onnx --input " FIX "x.npy --labels " FIX "labels.npy --remat all"), 0);
    cli_expect_in(TMP "/out.txt", "0 of 6 tensors differ");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_matches_torch),
        cmocka_unit_test(test_verify_remat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
