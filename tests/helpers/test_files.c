/* test_files.c — see test_files.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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
