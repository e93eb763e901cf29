/* test_npy.c — .npy reader and writer: round trips of every dtype and header version,
 * files written by numpy (tests/fixtures/npy/, made by make_fixtures.py) read with the
 * right values and rewritten byte for byte, and every malformed file refused with a
 * message that names the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/npy.h"

#define FIX OT_SOURCE_DIR "/tests/fixtures/npy/"
#define TMP OT_BINARY_DIR "/test_npy_tmp"

static char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    *n = fread(buf, 1, (size_t)len, f);
    fclose(f);
    return buf;
}

static void write_all(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    return 0;
}

/* No temporary file may survive a write, successful or not. */
static void assert_no_tmp_files(void) {
    DIR *d = opendir(TMP);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) assert_null(strstr(e->d_name, ".tmp-"));
    closedir(d);
}

/* Fills t with a pattern that differs per element and dtype, not all zeros. */
static void fill_pattern(ot_tensor *t) {
    unsigned char *b = t->data;
    size_t esz = ot_dtype_size(t->dtype);
    for (size_t i = 0; i < t->nbytes; i++) b[i] = (unsigned char)(i * 37 + 11);
    if (t->dtype == OT_BOOL)
        for (size_t i = 0; i < t->nbytes; i++) b[i] = (unsigned char)(i % 3 == 0);
    if (t->dtype == OT_F32)
        for (size_t i = 0; i < t->nbytes / esz; i++) ((float *)t->data)[i] = (float)i * 0.25f - 1.5f;
    if (t->dtype == OT_F64)
        for (size_t i = 0; i < t->nbytes / esz; i++) ((double *)t->data)[i] = (double)i / 3.0 - 7.0;
}

static void test_round_trip_all_dtypes_and_versions(void **state) {
    (void)state;
    const ot_dtype dtypes[] = {OT_F32, OT_F64, OT_F16, OT_I64, OT_I32, OT_U8, OT_I8, OT_BOOL};
    const int64_t shapes[][4] = {{0}, {5}, {2, 3, 4}, {3, 2, 0}};
    const int ranks[] = {0, 1, 3, 3};
    char path[512];
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
        for (size_t s = 0; s < sizeof ranks / sizeof ranks[0]; s++)
            for (int version = 1; version <= 3; version++) {
                ot_shape shape = ot_shape_make(ranks[s], shapes[s]);
                ot_tensor *t = ot_tensor_new(dtypes[d], &shape), *back = NULL;
                assert_non_null(t);
                fill_pattern(t);
                snprintf(path, sizeof path, TMP "/rt_%s_%zu_v%d.npy", ot_dtype_name(dtypes[d]), s, version);
                ot_error err = {0};
                assert_int_equal(ot_npy_write_version(path, t, version, &err), OT_OK);
                size_t n = 0;
                char *raw = read_all(path, &n);
                assert_non_null(raw);
                assert_int_equal((unsigned char)raw[6], version);
                size_t data_off = n - t->nbytes;
                assert_int_equal(data_off % 64, 0); /* numpy's alignment */
                assert_int_equal(raw[data_off - 1], '\n');
                assert_int_equal(ot_npy_read(path, &back, &err), OT_OK);
                assert_int_equal(back->dtype, t->dtype);
                assert_true(ot_shape_equal(&back->shape, &t->shape));
                assert_int_equal(back->nbytes, t->nbytes);
                assert_memory_equal(back->data, t->data, t->nbytes ? t->nbytes : 1);
                ot_tensor_free(back);
                /* Same bytes through the in-memory reader. */
                assert_int_equal(ot_npy_read_buffer(raw, n, path, &back, &err), OT_OK);
                assert_memory_equal(back->data, t->data, t->nbytes ? t->nbytes : 1);
                ot_tensor_free(back);
                free(raw);
                ot_tensor_free(t);
            }
    assert_no_tmp_files();
}

static ot_tensor *read_fixture(const char *name, ot_dtype dtype, int rank, const int64_t *dims) {
    char path[512];
    snprintf(path, sizeof path, FIX "%s", name);
    ot_tensor *t = NULL;
    ot_error err = {0};
    ot_status st = ot_npy_read(path, &t, &err);
    if (st != OT_OK) fail_msg("%s", err.msg);
    assert_int_equal(t->dtype, dtype);
    assert_int_equal(t->shape.rank, rank);
    for (int i = 0; i < rank; i++) assert_int_equal(t->shape.dim[i], dims[i]);
    return t;
}

/* Values follow the formulas in make_fixtures.py (i = flat index). */
static void test_numpy_files(void **state) {
    (void)state;
    ot_tensor *t = read_fixture("f32_2x3x4.npy", OT_F32, 3, (int64_t[]){2, 3, 4});
    for (int i = 0; i < 24; i++) assert_true(((float *)t->data)[i] == (float)i * 0.5f - 3.0f);
    ot_tensor_free(t);
    t = read_fixture("f64_scalar.npy", OT_F64, 0, NULL);
    assert_int_equal(t->nbytes, 8);
    assert_true(((double *)t->data)[0] == 3.25);
    ot_tensor_free(t);
    t = read_fixture("i64_5.npy", OT_I64, 1, (int64_t[]){5});
    for (int64_t i = 0; i < 5; i++) assert_int_equal(((int64_t *)t->data)[i], i * 1000000007 - 2);
    ot_tensor_free(t);
    t = read_fixture("i32_2x2.npy", OT_I32, 2, (int64_t[]){2, 2});
    for (int i = 0; i < 4; i++) assert_int_equal(((int32_t *)t->data)[i], -i * 7);
    ot_tensor_free(t);
    t = read_fixture("u8_6.npy", OT_U8, 1, (int64_t[]){6});
    for (int i = 0; i < 6; i++) assert_int_equal(((uint8_t *)t->data)[i], i * 50);
    ot_tensor_free(t);
    t = read_fixture("i8_4.npy", OT_I8, 1, (int64_t[]){4});
    for (int i = 0; i < 4; i++) assert_int_equal(((int8_t *)t->data)[i], i * 40 - 100);
    ot_tensor_free(t);
    t = read_fixture("bool_3.npy", OT_BOOL, 1, (int64_t[]){3});
    assert_int_equal(((uint8_t *)t->data)[0], 1);
    assert_int_equal(((uint8_t *)t->data)[1], 0);
    assert_int_equal(((uint8_t *)t->data)[2], 1);
    ot_tensor_free(t);
    t = read_fixture("f16_3.npy", OT_F16, 1, (int64_t[]){3});
    const uint16_t half[3] = {0x3c00, 0xc000, 0x3800}; /* IEEE binary16 of 1, -2, 0.5 */
    assert_memory_equal(t->data, half, sizeof half);
    ot_tensor_free(t);
    t = read_fixture("f32_empty_0x3.npy", OT_F32, 2, (int64_t[]){0, 3});
    assert_int_equal(t->nbytes, 0);
    ot_tensor_free(t);
    const char *versioned[] = {"f32_v2.npy", "f32_v3.npy"};
    for (int v = 0; v < 2; v++) {
        t = read_fixture(versioned[v], OT_F32, 2, (int64_t[]){3, 2});
        for (int i = 0; i < 6; i++) assert_true(((float *)t->data)[i] == (float)i * 0.5f - 3.0f);
        ot_tensor_free(t);
    }
}

/* Writing what we read from a numpy file gives numpy's bytes back. */
static void test_rewrite_is_byte_identical(void **state) {
    (void)state;
    const char *names[] = {"f32_2x3x4.npy", "f64_scalar.npy", "i64_5.npy", "i32_2x2.npy", "u8_6.npy",
                           "i8_4.npy",      "bool_3.npy",     "f16_3.npy", "f32_empty_0x3.npy"};
    char src[512], dst[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(src, sizeof src, FIX "%s", names[i]);
        snprintf(dst, sizeof dst, TMP "/copy_%s", names[i]);
        ot_tensor *t = NULL;
        ot_error err = {0};
        assert_int_equal(ot_npy_read(src, &t, &err), OT_OK);
        assert_int_equal(ot_npy_write(dst, t, &err), OT_OK);
        size_t na = 0, nb = 0;
        char *a = read_all(src, &na), *b = read_all(dst, &nb);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na);
        free(a);
        free(b);
        ot_tensor_free(t);
    }
}

/* Expects path to be refused with `code` and a message naming the file and `word`. */
static void expect_refused(const char *path, ot_status code, const char *word) {
    static ot_tensor sentinel;
    ot_tensor *t = &sentinel; /* the reader must reset it to NULL on failure */
    ot_error err = {0};
    ot_status st = ot_npy_read(path, &t, &err);
    if (st != code || !strstr(err.msg, path) || !strstr(err.msg, word))
        fail_msg("%s: got status %d, message \"%s\"; wanted %d mentioning \"%s\"", path, st, err.msg, code, word);
    assert_null(t);
}

static void test_numpy_files_refused(void **state) {
    (void)state;
    expect_refused(FIX "bad_fortran.npy", OT_E_UNSUPPORTED, "Fortran");
    expect_refused(FIX "bad_bigendian.npy", OT_E_UNSUPPORTED, "big-endian");
    expect_refused(FIX "bad_complex.npy", OT_E_UNSUPPORTED, "'<c8'");
    expect_refused(FIX "bad_uint32.npy", OT_E_UNSUPPORTED, "'<u4'");
    expect_refused(TMP "/does_not_exist.npy", OT_E_IO, "cannot open");
}

/* Builds a version 1.0 file from a header dict and `ndata` data bytes. */
static size_t make_v1(char *buf, const char *dict, size_t ndata) {
    size_t hlen = strlen(dict);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, hlen);
    memset(buf + 10 + hlen, 0x42, ndata);
    return 10 + hlen + ndata;
}

static void test_malformed_files_refused(void **state) {
    (void)state;
    static const struct {
        const char *dict;
        size_t ndata;
        ot_status code;
        const char *word;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", 8, OT_OK, ""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", 7, OT_E_PARSE, "truncated"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", 9, OT_E_PARSE, "trailing garbage"},
        {"['descr', '<f4']\n", 8, OT_E_PARSE, "not a dict"},
        {"{'descr': '<f4', 'shape': (2,), }\n", 8, OT_E_PARSE, "missing key 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n", 8, OT_E_PARSE, "'x'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,)}", 8, OT_E_PARSE, "repeated"},
        {"{'descr': '<f4', 'fortran_order': Nope, 'shape': (2,), }", 8, OT_E_PARSE, "fortran_order"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", 8, OT_E_PARSE, "dimension"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", 8, OT_E_PARSE, "not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,) } xyz", 8, OT_E_PARSE, "after the dict"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", 8, OT_E_PARSE, "expected"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, OT_E_UNSUPPORTED, "dtype"},
        {"{'descr': 'O', 'fortran_order': False, 'shape': (2,), }", 8, OT_E_UNSUPPORTED, "'O'"},
        /* 2^32 * 2^32 elements: the count overflows 64 bits; refused before allocating */
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 8, OT_E_DATA,
         "too large"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999, ), }", 8, OT_E_DATA,
         "too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }", 8, OT_E_DATA, "too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4, OT_E_UNSUPPORTED,
         "dimensions"},
    };
    char buf[512], path[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = make_v1(buf, cases[i].dict, cases[i].ndata);
        snprintf(path, sizeof path, TMP "/malformed_%zu.npy", i);
        write_all(path, buf, n);
        if (cases[i].code == OT_OK) { /* the control case: the builder itself is sound */
            ot_tensor *t = NULL;
            ot_error err = {0};
            assert_int_equal(ot_npy_read(path, &t, &err), OT_OK);
            assert_int_equal(t->nbytes, 8);
            ot_tensor_free(t);
            continue;
        }
        expect_refused(path, cases[i].code, cases[i].word);
        /* The in-memory reader says the same, naming the buffer. */
        ot_tensor *t = NULL;
        ot_error err = {0};
        assert_int_equal(ot_npy_read_buffer(buf, n, "buf.npy", &t, &err), cases[i].code);
        assert_non_null(strstr(err.msg, "buf.npy"));
        assert_null(t);
    }

    /* Prefix-level failures: magic, version, header length. */
    size_t n = make_v1(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", 4);
    buf[1] = 'X';
    snprintf(path, sizeof path, TMP "/bad_magic.npy");
    write_all(path, buf, n);
    expect_refused(path, OT_E_PARSE, "bad magic");
    buf[1] = 'N';
    buf[6] = 9;
    snprintf(path, sizeof path, TMP "/bad_version.npy");
    write_all(path, buf, n);
    expect_refused(path, OT_E_UNSUPPORTED, "version 9");
    buf[6] = 1;
    buf[8] = (char)0xff; /* header length past the end of the file */
    snprintf(path, sizeof path, TMP "/bad_hlen.npy");
    write_all(path, buf, n);
    expect_refused(path, OT_E_PARSE, "truncated .npy header");
    snprintf(path, sizeof path, TMP "/short.npy");
    write_all(path, buf, 5);
    expect_refused(path, OT_E_PARSE, "bad magic");
    write_all(path, "", 0);
    expect_refused(path, OT_E_PARSE, "bad magic");
}

static void test_write_errors(void **state) {
    (void)state;
    int64_t d = 3;
    ot_shape s = ot_shape_make(1, &d);
    ot_tensor *t = ot_tensor_new(OT_F32, &s);
    ot_error err = {0};
    const char *path = TMP "/no_such_dir/x.npy";
    assert_int_equal(ot_npy_write(path, t, &err), OT_E_IO);
    assert_non_null(strstr(err.msg, path));
    t->dtype = OT_STRING; /* no .npy descr for strings */
    assert_int_equal(ot_npy_write(TMP "/str.npy", t, &err), OT_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, TMP "/str.npy"));
    t->dtype = OT_F32;
    ot_tensor_free(t);
    assert_no_tmp_files();
}

/* bfloat16 by the convention of npy.h: written as its bits (<u2), read back from <u2
 * and from <V2 (ml_dtypes' bfloat16) as bfloat16 with the same bits. */
static void test_bf16_convention(void **state) {
    (void)state;
    int64_t d = 3;
    ot_shape s = ot_shape_make(1, &d);
    ot_tensor *t = ot_tensor_new(OT_BF16, &s), *back = NULL;
    const uint16_t bits[3] = {0x3f80, 0xc040, 0x7f80}; /* 1, -3, inf */
    memcpy(t->data, bits, sizeof bits);
    ot_error err = {0};
    assert_int_equal(ot_npy_write(TMP "/bf16.npy", t, &err), OT_OK);
    size_t n = 0;
    char *raw = read_all(TMP "/bf16.npy", &n);
    assert_non_null(raw);
    assert_true(n > 10);
    raw[n] = '\0'; /* read_all leaves room for it */
    char *descr = strstr(raw + 10, "'<u2'"); /* past the magic and the version's zero byte */
    assert_non_null(descr);
    for (int pass = 0; pass < 2; pass++) {
        assert_int_equal(ot_npy_read_buffer(raw, n, "bf16.npy", &back, &err), OT_OK);
        assert_int_equal(back->dtype, OT_BF16);
        assert_memory_equal(back->data, bits, sizeof bits);
        ot_tensor_free(back);
        back = NULL;
        descr[2] = 'V'; /* the same file as ml_dtypes writes it */
    }
    descr[1] = '>'; /* big-endian bits are refused */
    assert_int_equal(ot_npy_read_buffer(raw, n, "bf16.npy", &back, &err), OT_E_UNSUPPORTED);
    free(raw);
    ot_tensor_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_all_dtypes_and_versions),
        cmocka_unit_test(test_numpy_files),
        cmocka_unit_test(test_rewrite_is_byte_identical),
        cmocka_unit_test(test_numpy_files_refused),
        cmocka_unit_test(test_malformed_files_refused),
        cmocka_unit_test(test_write_errors),
        cmocka_unit_test(test_bf16_convention),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
