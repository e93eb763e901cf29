/* cli_run.c — running the onnxtrain binary from tests (see cli_run.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli_run.h"

int cli_run(const char *out_path, const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd - 64, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof cmd - 64) fail_msg("command too long: %.200s...", cmd);
    snprintf(cmd + n, sizeof cmd - (size_t)n, " >%s 2>&1", out_path);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

char *cli_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    fclose(f);
    return b;
}

void cli_expect_in(const char *path, const char *needle) {
    char *o = cli_slurp(path);
    assert_non_null(o);
    if (!strstr(o, needle)) fail_msg("expected '%s' in %s:\n%s", needle, path, o);
    free(o);
}

double cli_json_nth(const char *path, const char *key, int nth) {
    char *text = cli_slurp(path);
    assert_non_null(text);
    const char *p = text;
    for (int i = 0; i <= nth && p; i++) {
        p = strstr(p, key);
        if (p && i < nth) p += strlen(key);
    }
    if (!p) fail_msg("no %d-th '%s' in %s:\n%s", nth, key, path, text);
    double v = strtod(p + strlen(key), NULL);
    free(text);
    return v;
}
