/* test_regress_absurd_dims.c — regression for declared or inferred shapes too large to
 * multiply out: a graph input of [2^40, 2^40] floats loaded fine and then overflowed
 * int64 (undefined behaviour, caught by UBSan) when `onnxtrain plan` counted its
 * elements. Such values are now refused by the importer, by shape inference (a node
 * whose output would be absurd is named) and when a symbolic dim is bound; a rank
 * above OT_MAX_RANK is refused too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "kernels/kernel.h"

#define FIX OT_SOURCE_DIR "/tests/fixtures/regress/"
#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

static ot_status load_fixture(const char *name, bool shape_inference, ot_error *err) {
    char path[512];
    snprintf(path, sizeof path, "%s%s", FIX, name);
    ot_import_options opt = {.fold_eval = ot_cpu_fold_eval};
    opt.no_shape_inference = !shape_inference;
    ot_model *m = NULL;
    ot_status st = ot_model_load(path, &opt, &m, err);
    assert_true((st == OT_OK) == (m != NULL));
    ot_model_free(m);
    return st;
}

static void test_declared_input(void **state) {
    (void)state;
    for (int si = 0; si < 2; si++) {
        ot_error err = {0};
        ot_status st = load_fixture("big_input.onnx", si, &err);
        if (st != OT_E_UNSUPPORTED) fail_msg("expected OT_E_UNSUPPORTED, got %d: %s", st, err.msg);
        assert_non_null(strstr(err.msg, "big_input.onnx"));
        assert_non_null(strstr(err.msg, "value 'x'"));
        assert_non_null(strstr(err.msg, "[1099511627776,1099511627776]"));
    }
}

static void test_inferred_output(void **state) {
    (void)state;
    ot_error err = {0};
    ot_status st = load_fixture("big_expand.onnx", true, &err);
    if (st != OT_E_SHAPE) fail_msg("expected OT_E_SHAPE, got %d: %s", st, err.msg);
    assert_non_null(strstr(err.msg, "Expand"));
    assert_non_null(strstr(err.msg, "output 'y'"));
    /* without shape inference nothing derives the shape: the model loads */
    assert_int_equal(load_fixture("big_expand.onnx", false, &err), OT_OK);
}

/* Found by fuzz_model in CI: a Reshape whose constant target shape multiplies out
 * past int64 (15 * INT64_MAX) overflowed in the Reshape rule. Now a shape error. */
static void test_reshape_target_overflow(void **state) {
    (void)state;
    ot_error err = {0};
    /* the fuzzed file also holds a mangled op name: load as `info` does */
    ot_import_options opt = {.fold_eval = ot_cpu_fold_eval, .allow_unsupported = true};
    ot_model *m = NULL;
    ot_status st = ot_model_load(FIX "reshape_count_overflow.onnx", &opt, &m, &err);
    ot_model_free(m);
    if (st != OT_E_SHAPE) fail_msg("expected OT_E_SHAPE, got %d: %s", st, err.msg);
    assert_non_null(strstr(err.msg, "Reshape"));
    assert_non_null(strstr(err.msg, "overflows"));
}

/* x: [batch, 2^30] floats. batch = 4 is 16 GB (allowed: a plan may still refuse it);
 * batch = 2^20 is 4 PB: refused when bound, naming the value. */
static void test_bound_dim(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t dims[2] = {-1, (int64_t)1 << 30};
    const char *syms[2] = {"batch", NULL};
    mb_input(b, "x", F32, 2, dims, syms);
    mb_node(b, "Relu", "relu", "x", "y");
    mb_output(b, "y", F32);
    size_t len = 0;
    uint8_t *buf = mb_pack(b, &len);
    ot_model *m = NULL;
    ot_error err = {0};
    assert_int_equal(ot_model_load_buffer(buf, len, "bind.onnx", NULL, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err), OT_OK);
    mb_free(b);
    ot_status st = ot_graph_bind_dim(m->graph, "batch", (int64_t)1 << 20, &err);
    if (st == OT_OK) fail_msg("binding batch to 2^20 was accepted");
    assert_non_null(strstr(err.msg, "'x'"));
    assert_int_equal(ot_graph_require_static(m->graph, &err) != OT_OK, 1);
    ot_model_free(m);

    /* a sane size binds */
    b = mb_new(17);
    mb_input(b, "x", F32, 2, dims, syms);
    mb_node(b, "Relu", "relu", "x", "y");
    mb_output(b, "y", F32);
    buf = mb_pack(b, &len);
    assert_int_equal(ot_model_load_buffer(buf, len, "bind.onnx", NULL, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err), OT_OK);
    mb_free(b);
    assert_int_equal(ot_graph_bind_dim(m->graph, "batch", 4, &err), OT_OK);
    assert_int_equal(ot_graph_require_static(m->graph, &err), OT_OK);
    ot_model_free(m);
}

/* Rank above OT_MAX_RANK in a declared shape: refused, not written past dim[8]. */
static void test_rank_above_max(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t dims[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    mb_input(b, "x", F32, 9, dims, NULL);
    mb_node(b, "Relu", "relu", "x", "y");
    mb_output(b, "y", F32);
    size_t len = 0;
    uint8_t *buf = mb_pack(b, &len);
    ot_model *m = NULL;
    ot_error err = {0};
    ot_status st = ot_model_load_buffer(buf, len, "rank9.onnx", NULL, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err);
    mb_free(b);
    if (st != OT_E_UNSUPPORTED) fail_msg("expected OT_E_UNSUPPORTED, got %d: %s", st, err.msg);
    assert_null(m);
    assert_non_null(strstr(err.msg, "'x' has rank 9"));
}

/* Issue 26: a Tile whose repeats overflow int64 with the input's dim (4 x 2^62 wraps
 * to 0) got the output shape [?, 0] and `eval` wrote a zero-width output with exit 0.
 * Shape inference now refuses the product, naming the node; a sane Tile still loads. */
static ot_status load_tile(int64_t repeat, ot_error *err) {
    mb *b = mb_new(17);
    const int64_t dims[2] = {-1, 4}, rd[1] = {2}, reps[2] = {1, repeat};
    const char *syms[2] = {"batch", NULL};
    mb_input(b, "x", F32, 2, dims, syms);
    mb_init_i64(b, "repeats", 1, rd, reps);
    mb_node(b, "Tile", "tile_huge", "x,repeats", "y");
    mb_output(b, "y", F32);
    size_t len = 0;
    uint8_t *buf = mb_pack(b, &len);
    ot_model *m = NULL;
    ot_status st = ot_model_load_buffer(buf, len, "tile.onnx", NULL, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, err);
    mb_free(b);
    if (st == OT_OK) {
        const ot_value *y = &m->graph->values[m->graph->outputs[0]];
        assert_int_equal(y->shape.rank, 2);
        assert_int_equal(y->shape.dim[1], 4 * repeat);
    }
    ot_model_free(m);
    return st;
}

static void test_tile_repeats_overflow(void **state) {
    (void)state;
    ot_error err = {0};
    ot_status st = load_tile((int64_t)1 << 62, &err);
    if (st != OT_E_SHAPE) fail_msg("expected OT_E_SHAPE, got %d: %s", st, err.msg);
    assert_non_null(strstr(err.msg, "tile_huge"));
    assert_non_null(strstr(err.msg, "overflows"));
    assert_int_equal(load_tile(3, &err), OT_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_declared_input),
        cmocka_unit_test(test_inferred_output),
        cmocka_unit_test(test_reshape_target_overflow),
        cmocka_unit_test(test_bound_dim),
        cmocka_unit_test(test_rank_above_max),
        cmocka_unit_test(test_tile_repeats_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
