/* test_regress_hardlink.c — external data through a hard link: realpath() sees the
 * link's own name inside the model's folder, so a hard link to a file outside it (as an
 * unpacked archive can carry) was read. Files with more than one link are now refused;
 * the same bytes as a plain file still load. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "kernels/kernel.h"

#define TMP OT_BINARY_DIR "/test_regress_hardlink_tmp"
#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

static void write_floats(const char *path) {
    const float w[4] = {1, 2, 3, 4};
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(w, 1, sizeof w, f), sizeof w);
    fclose(f);
}

/* model.onnx in TMP/model reading its 4 floats from `loc`. */
static ot_status load_with(const char *loc, ot_error *err) {
    mb *b = mb_new(17);
    const int64_t d[1] = {4};
    Onnx__TensorProto *t = mb_tensor(b, "W", F32, 1, d);
    const char *kv[] = {"location", loc};
    mb_external(b, t, kv, 1);
    mb_init(b, t);
    mb_input(b, "x", F32, 1, d, NULL);
    mb_node(b, "Add", "add", "x,W", "y");
    mb_output(b, "y", F32);
    assert_int_equal(mb_write(b, TMP "/model/model.onnx"), 0);
    mb_free(b);
    ot_model *m = NULL;
    ot_status st = ot_model_load(TMP "/model/model.onnx", &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, err);
    assert_true((st == OT_OK) == (m != NULL));
    ot_model_free(m);
    return st;
}

static void test_hard_link_refused(void **state) {
    (void)state;
    assert_int_equal(system("rm -rf '" TMP "' && mkdir -p '" TMP "/model'"), 0);
    write_floats(TMP "/secret.bin");
    assert_int_equal(link(TMP "/secret.bin", TMP "/model/linked.bin"), 0);
    write_floats(TMP "/model/plain.bin");

    ot_error err = {0};
    ot_status st = load_with("linked.bin", &err);
    if (st != OT_E_MODEL) fail_msg("expected OT_E_MODEL, got %d: %s", st, err.msg);
    assert_non_null(strstr(err.msg, "'W'"));
    assert_non_null(strstr(err.msg, "linked.bin"));
    assert_non_null(strstr(err.msg, "hard link"));

    assert_int_equal(load_with("plain.bin", &err), OT_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hard_link_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
