/* test_regress_big_initializer.c — regression for a bug found by fuzz/fuzz_model: a
 * 78-byte model whose initializer declares 2^31 floats but holds 4 bytes made the
 * importer allocate 8 GB before noticing the sizes disagree. Each storage form (raw_data,
 * float_data, external data) must now be refused before the tensor is allocated; so
 * must a model "file" that is endless (/dev/zero) or over protobuf's 2 GiB limit. The
 * test caps allocations (ASan's max_allocation_size_mb, or RLIMIT_AS without ASan) so
 * the old behaviour fails it with OT_E_MEMORY instead of passing by luck. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "kernels/kernel.h"

#if defined(__SANITIZE_ADDRESS__)
#define OT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OT_TEST_ASAN 1
#endif
#endif

#define FIX OT_SOURCE_DIR "/tests/fixtures/regress/"
#define TMP OT_BINARY_DIR "/test_regress_big_initializer_tmp"

#ifdef OT_TEST_ASAN
/* Under ASan a malloc of more than 1 GB returns NULL instead of succeeding lazily. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "max_allocation_size_mb=1024:allocator_may_return_null=1"; }
static void cap_begin(struct rlimit *saved) { (void)saved; }
static void cap_end(const struct rlimit *saved) { (void)saved; }
#else
/* Without ASan: the address space may grow by at most 1 GB while loading. */
static void cap_begin(struct rlimit *saved) {
    assert_int_equal(getrlimit(RLIMIT_AS, saved), 0);
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld", &pages), 1);
    fclose(f);
    struct rlimit lim = *saved;
    rlim_t want = (rlim_t)pages * 4096u + ((rlim_t)1 << 30);
    if (lim.rlim_max == RLIM_INFINITY || want < lim.rlim_max) lim.rlim_cur = want;
    assert_int_equal(setrlimit(RLIMIT_AS, &lim), 0);
}
static void cap_end(const struct rlimit *saved) { assert_int_equal(setrlimit(RLIMIT_AS, saved), 0); }
#endif

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *buf = malloc(4096);
    assert_non_null(buf);
    *n = fread(buf, 1, 4096, f);
    fclose(f);
    return buf;
}

/* Loads from the file and from its bytes; both must fail with OT_E_MODEL naming the
 * tensor and the field, under the allocation cap. */
static void expect_refused(const char *name, const char *field) {
    char path[512];
    snprintf(path, sizeof path, "%s%s", FIX, name);
    size_t n = 0;
    uint8_t *bytes = read_all(path, &n);
    assert_true(n > 0 && n < 200); /* the whole point: a tiny file */
    for (int from_file = 0; from_file < 2; from_file++) {
        ot_model *m = NULL;
        ot_error err = {0};
        struct rlimit saved;
        cap_begin(&saved);
        ot_status st = from_file ? ot_model_load(path, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err)
                                 : ot_model_load_buffer(bytes, n, name, NULL, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err);
        cap_end(&saved);
        if (st != OT_E_MODEL) fail_msg("%s: expected OT_E_MODEL, got %d: %s", name, st, err.msg);
        assert_null(m);
        assert_non_null(strstr(err.msg, "'W'"));
        assert_non_null(strstr(err.msg, field));
        assert_true(strstr(err.msg, "2147483648") || strstr(err.msg, "8589934592"));
    }
    free(bytes);
}

static void test_raw_data(void **state) {
    (void)state;
    expect_refused("big_initializer_raw.onnx", "raw_data has 4 bytes");
}

static void test_float_data(void **state) {
    (void)state;
    expect_refused("big_initializer_typed.onnx", "float_data holds 1 elements");
}

/* External data: 16 bytes on disk for dims claiming 8 GB. */
static void test_external(void **state) {
    (void)state;
    assert_int_equal(system("mkdir -p '" TMP "'"), 0);
    FILE *f = fopen(TMP "/w.bin", "wb");
    assert_non_null(f);
    const float w[4] = {1, 2, 3, 4};
    assert_int_equal(fwrite(w, 1, sizeof w, f), sizeof w);
    fclose(f);
    mb *b = mb_new(17);
    const int64_t one[1] = {1}, big[1] = {(int64_t)1 << 31};
    Onnx__TensorProto *t = mb_tensor(b, "W", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, big);
    const char *kv[] = {"location", "w.bin"};
    mb_external(b, t, kv, 1);
    mb_init(b, t);
    mb_input(b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, one, NULL);
    mb_node(b, "Add", "add", "x,W", "y");
    mb_output(b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    assert_int_equal(mb_write(b, TMP "/model.onnx"), 0);
    mb_free(b);
    ot_model *m = NULL;
    ot_error err = {0};
    struct rlimit saved;
    cap_begin(&saved);
    ot_status st = ot_model_load(TMP "/model.onnx", &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err);
    cap_end(&saved);
    if (st != OT_E_MODEL) fail_msg("expected OT_E_MODEL, got %d: %s", st, err.msg);
    assert_null(m);
    assert_non_null(strstr(err.msg, "w.bin"));
    assert_non_null(strstr(err.msg, "has 16 bytes"));
}

/* A model path naming a device or a huge file: /dev/zero was read until memory ran out
 * (now: not a regular file, as the .npy reader says); a sparse 3 GiB file was read
 * whole, though protobuf's 2 GiB message limit means no ONNX file is that large (now
 * refused before reading anything). */
static void test_endless_and_oversized_files(void **state) {
    (void)state;
    ot_model *m = NULL;
    ot_error err = {0};
    struct rlimit saved;
    cap_begin(&saved);
    ot_status st = ot_model_load("/dev/zero", &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err);
    cap_end(&saved);
    if (st != OT_E_IO) fail_msg("/dev/zero: expected OT_E_IO, got %d: %s", st, err.msg);
    assert_non_null(strstr(err.msg, "/dev/zero"));
    assert_non_null(strstr(err.msg, "not a regular file"));

    assert_int_equal(system("mkdir -p '" TMP "'"), 0);
    FILE *f = fopen(TMP "/sparse.onnx", "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), (off_t)3 << 30), 0); /* no disk used */
    fclose(f);
    cap_begin(&saved);
    st = ot_model_load(TMP "/sparse.onnx", &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err);
    cap_end(&saved);
    unlink(TMP "/sparse.onnx");
    if (st != OT_E_PARSE) fail_msg("sparse 3 GiB file: expected OT_E_PARSE, got %d: %s", st, err.msg);
    assert_non_null(strstr(err.msg, "sparse.onnx"));
    assert_null(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw_data),
        cmocka_unit_test(test_float_data),
        cmocka_unit_test(test_external),
        cmocka_unit_test(test_endless_and_oversized_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
