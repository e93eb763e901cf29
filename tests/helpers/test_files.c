/* test_files.c — see test_files.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "test_files.h"
#include "kernels/kernel.h"

ot_tensor *test_npy(const char *fmt, ...) {
    char path[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    ot_tensor *t = NULL;
    ot_error err = {0};
    if (ot_npy_read(path, &t, &err) != OT_OK) fail_msg("%s", err.msg);
    return t;
}

ot_model *test_model(const char *fmt, ...) {
    char path[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    ot_model *m = NULL;
    ot_error err = {0};
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    if (ot_model_load(path, &io, &m, &err) != OT_OK) fail_msg("%s", err.msg);
    return m;
}

ot_status test_load_fixture(const char *dir, const char *name, bool from_memory, ot_error *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s%s", dir, name);
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
        st = ot_model_load_buffer(buf, (size_t)n, name, dir, &opt, &m, err);
        free(buf);
    }
    assert_true((st == OT_OK) == (m != NULL));
    ot_model_free(m);
    return st;
}

void test_expect_refused(const char *dir, const char *name, ot_status code, const char *n1, const char *n2) {
    for (int mem = 0; mem < 2; mem++) {
        ot_error err = {0};
        ot_status st = test_load_fixture(dir, name, mem, &err);
        if (st != code) fail_msg("%s: expected status %d, got %d: %s", name, code, st, err.msg);
        if (!strstr(err.msg, name)) fail_msg("%s: message does not name the file: %s", name, err.msg);
        if (n1 && !strstr(err.msg, n1)) fail_msg("%s: message lacks '%s': %s", name, n1, err.msg);
        if (n2 && !strstr(err.msg, n2)) fail_msg("%s: message lacks '%s': %s", name, n2, err.msg);
    }
}
