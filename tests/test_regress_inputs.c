/* test_regress_inputs.c — regression tests for issue 18, input files: a FIFO (or a
 * device, folder, socket) given as any input is refused at once instead of blocking
 * forever (the model's external data, also through a Constant's tensor and an
 * unsupported op's tensor attribute; .npy data through the library and every CLI
 * option that reads one), and damaged .npy files are refused with their documented
 * code. Every test runs under alarm(): a hang kills the test binary, so ctest fails it
 * instead of waiting; CLI runs go through `timeout 10` (exit 124 would be a hang). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli_run.h"
#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "ir/input_file.h"
#include "kernels/kernel.h"
#include "train/data.h"
#include "train/npy.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_regress_inputs_tmp"
#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)
#define expect_output(needle) cli_expect_in(TMP "/out.txt", needle)

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0777);
    alarm(120); /* the whole file; each CLI run has its own 10 s */
    return 0;
}

static void make_fifo(const char *path) {
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* ---- the open helper ----------------------------------------------------------- */

static void expect_refused(const char *path, const char *kind) {
    int fd = 7;
    uint64_t size = 1;
    ot_error err = {0};
    assert_int_equal(ot_input_open(path, NULL, &fd, &size, &err), OT_E_IO);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(err.msg, path));
    if (!strstr(err.msg, kind)) fail_msg("expected '%s' in: %s", kind, err.msg);
}

static void test_helper_refuses_special_files(void **state) {
    (void)state;
    make_fifo(TMP "/fifo");
    expect_refused(TMP "/fifo", "not a regular file (a FIFO)");
    expect_refused("/dev/null", "a character device");
    expect_refused(TMP, "a folder");
    expect_refused(TMP "/nope", "cannot open: No such file or directory");
    /* a socket cannot even be opened (ENXIO): refused all the same */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", TMP "/sock");
    unlink(sa.sun_path);
    int sk = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(sk >= 0);
    if (strlen(TMP "/sock") < sizeof sa.sun_path && bind(sk, (struct sockaddr *)&sa, sizeof sa) == 0)
        expect_refused(TMP "/sock", TMP "/sock");
    close(sk);
    /* a regular file: open, its size, and reads that block as usual */
    write_bytes(TMP "/plain", "hello", 5);
    int fd;
    uint64_t size;
    ot_error err = {0};
    assert_int_equal(ot_input_open(TMP "/plain", "named", &fd, &size, &err), OT_OK);
    assert_int_equal(size, 5);
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
    uint8_t *buf;
    size_t len;
    assert_int_equal(ot_input_read_all(TMP "/plain", NULL, 0, &buf, &len, &err), OT_OK);
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "hello", 6); /* NUL-terminated */
    free(buf);
    assert_int_equal(ot_input_read_all(TMP "/plain", "plain", 4, &buf, &len, &err), OT_E_IO);
    assert_non_null(strstr(err.msg, "over the limit of 4 bytes"));
    assert_int_equal(ot_input_read_all(TMP "/fifo", "the fifo", 0, &buf, &len, &err), OT_E_IO);
    assert_non_null(strstr(err.msg, "the fifo: not a regular file (a FIFO)"));
    assert_null(buf);
}

/* ---- external data --------------------------------------------------------------- */

/* model.onnx in TMP/ext whose tensor lives in the FIFO TMP/ext/w.bin, used as an
 * initializer (0), a Constant's value (1) or an unsupported op's tensor attribute (2). */
static ot_status load_ext_fifo(int where, ot_error *err) {
    mkdir(TMP "/ext", 0777);
    make_fifo(TMP "/ext/w.bin");
    mb *b = mb_new(17);
    const int64_t d[1] = {4};
    const char *kv[] = {"location", "w.bin"};
    Onnx__TensorProto *t = mb_tensor(b, "ext_w", F32, 1, d);
    mb_external(b, t, kv, 1);
    mb_input(b, "x", F32, 1, d, NULL);
    if (where == 0) {
        mb_init(b, t);
        mb_node(b, "Add", "add", "x,ext_w", "y");
    } else if (where == 1) {
        Onnx__NodeProto *c = mb_node(b, "Constant", "c", NULL, "ext_w");
        mb_attr(b, c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t = t;
        mb_node(b, "Add", "add", "x,ext_w", "y");
    } else {
        Onnx__NodeProto *le = mb_node(b, "LabelEncoder", "enc", "x", "y");
        mb_attr(b, le, "default_tensor", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t = t;
    }
    mb_output(b, "y", F32);
    assert_int_equal(mb_write(b, TMP "/ext/model.onnx"), 0);
    mb_free(b);
    ot_model *m = NULL;
    ot_import_options opt = {.fold_eval = ot_cpu_fold_eval, .allow_unsupported = where == 2};
    ot_status st = ot_model_load(TMP "/ext/model.onnx", &opt, &m, err);
    ot_model_free(m);
    return st;
}

static void test_external_data_fifo(void **state) {
    (void)state;
    for (int where = 0; where < 3; where++) {
        ot_error err = {0};
        ot_status st = load_ext_fifo(where, &err);
        if (st != OT_E_IO) fail_msg("case %d: expected OT_E_IO, got %d: %s", where, st, err.msg);
        assert_non_null(strstr(err.msg, "ext_w"));
        assert_non_null(strstr(err.msg, "w.bin"));
        assert_non_null(strstr(err.msg, "not a regular file (a FIFO)"));
    }
    /* the same through the CLI: exit 3 at once, not a hang */
    assert_int_equal(run("timeout 10 " BIN " info " TMP "/ext/model.onnx"), 3);
    expect_output("not a regular file (a FIFO)");
}

/* ---- .npy data ------------------------------------------------------------------- */

static void test_npy_fifo_and_devices(void **state) {
    (void)state;
    ot_tensor *t = (ot_tensor *)1;
    ot_error err = {0};
    make_fifo(TMP "/x.npy");
    assert_int_equal(ot_npy_read(TMP "/x.npy", &t, &err), OT_E_IO);
    assert_null(t);
    assert_non_null(strstr(err.msg, TMP "/x.npy: not a regular file (a FIFO)"));
    assert_int_equal(ot_npy_read("/dev/zero", &t, &err), OT_E_IO);
    assert_non_null(strstr(err.msg, "a character device"));
    assert_int_equal(ot_npy_read(TMP, &t, &err), OT_E_IO);
    assert_non_null(strstr(err.msg, "a folder"));
}

/* Every CLI option that reads a .npy file, given a FIFO: exit 3 naming it. */
static void test_cli_npy_fifo(void **state) {
    (void)state;
    make_fifo(TMP "/f.npy");
    const char *x = S "mlp/input.npy", *y = S "mlp/labels.npy", *f = TMP "/f.npy";
    struct {
        const char *fmt;
        const char *a, *b;
    } cases[] = {
        {"train " S "mlp.onnx --input %s --labels %s --steps 1 -o " TMP "/o.onnx", f, y},
        {"train " S "mlp.onnx --input %s --labels %s --steps 1 -o " TMP "/o.onnx", x, f},
        {"train " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --val-input %s --val-labels %s "
         "--steps 1 -o " TMP "/o.onnx",
         f, y},
        {"train " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --val-input %s --val-labels %s "
         "--steps 1 -o " TMP "/o.onnx",
         x, f},
        {"eval " S "mlp.onnx --input %s%s", f, ""},
        {"grad " S "mlp.onnx --input %s --labels %s --batch-size 4", x, f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048];
        snprintf(args, sizeof args, cases[i].fmt, cases[i].a, cases[i].b);
        int rc = run("timeout 10 " BIN " %s", args);
        if (rc != 3) fail_msg("case %zu (%s): exit %d, expected 3%s", i, args, rc, rc == 124 ? " (hang)" : "");
        expect_output(TMP "/f.npy: not a regular file (a FIFO)");
        assert_int_equal(access(TMP "/o.onnx", F_OK), -1);
    }
}

/* ---- damaged .npy files ---------------------------------------------------------- */

/* A v1.0 .npy file: magic, version, header length `hlen` (as stored), `hdr`, then
 * `data_len` zero bytes. */
static void write_npy(const char *path, const char *hdr, unsigned hlen, size_t data_len) {
    size_t n = strlen(hdr);
    uint8_t *b = calloc(1, 10 + n + data_len + 1);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)hlen;
    b[9] = (uint8_t)(hlen >> 8);
    memcpy(b + 10, hdr, n);
    write_bytes(path, b, 10 + n + data_len);
    free(b);
}

static void expect_npy(const char *path, ot_status code, const char *needle) {
    ot_tensor *t = NULL;
    ot_error err = {0};
    ot_status st = ot_npy_read(path, &t, &err);
    if (st != code) fail_msg("%s: expected %d, got %d: %s", path, code, st, err.msg);
    assert_null(t);
    assert_non_null(strstr(err.msg, path));
    if (!strstr(err.msg, needle)) fail_msg("%s: expected '%s' in: %s", path, needle, err.msg);
}

static void test_damaged_npy(void **state) {
    (void)state;
    const char *ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";
    write_npy(TMP "/good.npy", ok, (unsigned)strlen(ok), 24);
    ot_tensor *t = NULL;
    ot_error err = {0};
    assert_int_equal(ot_npy_read(TMP "/good.npy", &t, &err), OT_OK);
    assert_int_equal(t->shape.dim[1], 3);
    ot_tensor_free(t);
    write_bytes(TMP "/prefix.npy", "\x93NUMPY\x01", 7); /* cut inside the prefix */
    expect_npy(TMP "/prefix.npy", OT_E_PARSE, "not a .npy file");
    write_npy(TMP "/cut_header.npy", "{'descr': '<f4', 'fort", 60, 0); /* cut inside the header */
    expect_npy(TMP "/cut_header.npy", OT_E_PARSE, "truncated .npy header");
    write_npy(TMP "/len_lies_long.npy", ok, 65000, 24); /* header length past the end of the file */
    expect_npy(TMP "/len_lies_long.npy", OT_E_PARSE, "truncated .npy header");
    write_npy(TMP "/len_lies_short.npy", ok, 20, 24); /* header length cuts the dict */
    expect_npy(TMP "/len_lies_short.npy", OT_E_PARSE, "malformed .npy header");
    const char *huge = "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }\n";
    write_npy(TMP "/huge.npy", huge, (unsigned)strlen(huge), 16);
    expect_npy(TMP "/huge.npy", OT_E_DATA, "too large");
    const char *wrap = "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952, 8), }\n";
    write_npy(TMP "/wrap.npy", wrap, (unsigned)strlen(wrap), 0); /* 2^61 x 8 x 8 bytes wraps to 0 */
    expect_npy(TMP "/wrap.npy", OT_E_DATA, "too large");
    const char *neg = "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }\n";
    write_npy(TMP "/neg.npy", neg, (unsigned)strlen(neg), 24);
    expect_npy(TMP "/neg.npy", OT_E_PARSE, "malformed .npy header");
    const char *fortran = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n";
    write_npy(TMP "/fortran.npy", fortran, (unsigned)strlen(fortran), 24);
    expect_npy(TMP "/fortran.npy", OT_E_UNSUPPORTED, "Fortran order");
    const char *cplx = "{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }\n";
    write_npy(TMP "/complex.npy", cplx, (unsigned)strlen(cplx), 48);
    expect_npy(TMP "/complex.npy", OT_E_UNSUPPORTED, "unsupported .npy dtype '<c8'");
    const char *obj = "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }\n";
    write_npy(TMP "/object.npy", obj, (unsigned)strlen(obj), 16);
    expect_npy(TMP "/object.npy", OT_E_UNSUPPORTED, "unsupported .npy dtype '|O'");
    write_npy(TMP "/short_data.npy", ok, (unsigned)strlen(ok), 23);
    expect_npy(TMP "/short_data.npy", OT_E_PARSE, "truncated .npy data: header says 24 bytes, file has 23");
    /* the committed fixtures (tests/fixtures/regress/make_inputs.py, also fuzz seeds) */
    const struct {
        const char *file;
        ot_status code;
        const char *needle;
    } fx[] = {
        {"npy_cut_header.npy", OT_E_PARSE, "truncated .npy header"},
        {"npy_header_len_lies.npy", OT_E_PARSE, "truncated .npy header"},
        {"npy_huge_shape.npy", OT_E_DATA, "too large"},
        {"npy_fortran.npy", OT_E_UNSUPPORTED, "Fortran order"},
        {"npy_descr_object.npy", OT_E_UNSUPPORTED, "unsupported .npy dtype '|O'"},
        {"npy_short_data.npy", OT_E_PARSE, "truncated .npy data"},
    };
    for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/tests/fixtures/regress/%s", OT_SOURCE_DIR, fx[i].file);
        expect_npy(p, fx[i].code, fx[i].needle);
    }
    /* through the CLI: the documented exit codes, and the input files untouched */
    struct stat before, after;
    assert_int_equal(stat(TMP "/short_data.npy", &before), 0);
    assert_int_equal(run("timeout 10 " BIN " eval " S "mlp.onnx --input " TMP "/short_data.npy"), 4);
    expect_output("truncated .npy data");
    assert_int_equal(run("timeout 10 " BIN " eval " S "mlp.onnx --input " TMP "/huge.npy"), 8);
    assert_int_equal(run("timeout 10 " BIN " eval " S "mlp.onnx --input " TMP "/fortran.npy"), 6);
    assert_int_equal(stat(TMP "/short_data.npy", &after), 0);
    assert_true(before.st_size == after.st_size && before.st_mtime == after.st_mtime);
}

/* ---- the batcher ------------------------------------------------------------------ */

/* A step read from a crafted checkpoint once reached the batcher as -1 and indexed
 * before its permutation; it now refuses any k outside the run. */
static void test_batcher_refuses_negative_k(void **state) {
    (void)state;
    ot_batcher b;
    ot_error err = {0};
    assert_int_equal(ot_batcher_init(&b, 10, 4, true, false, 7, &err), OT_OK);
    int64_t e = 5;
    assert_null(ot_batcher_batch(&b, -1, &e, NULL));
    assert_null(ot_batcher_batch(&b, INT64_MIN, &e, NULL));
    assert_int_equal(e, 5);
    int64_t n = 0;
    const int64_t *idx = ot_batcher_batch(&b, INT64_MAX, &e, &n); /* huge but valid: an epoch far away */
    assert_non_null(idx);
    assert_true(n >= 1 && n <= 4);
    for (int i = 0; i < n; i++)
        assert_true(idx[i] >= 0 && idx[i] < 10);
    ot_batcher_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_helper_refuses_special_files),
        cmocka_unit_test(test_external_data_fifo),
        cmocka_unit_test(test_npy_fifo_and_devices),
        cmocka_unit_test(test_cli_npy_fifo),
        cmocka_unit_test(test_damaged_npy),
        cmocka_unit_test(test_batcher_refuses_negative_k),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
