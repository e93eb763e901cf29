/* test_json_write.c — the one JSON string escaper (ir/json_write.c) that --json,
 * the training report and grad's index.json all write names through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/json_write.h"

/* What ot_json_string writes for s, as a malloc'd string. */
static char *escaped(const char *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    ot_json_string(f, s);
    fclose(f);
    return buf;
}

static void check(const char *in, const char *want) {
    char *got = escaped(in);
    assert_string_equal(got, want);
    free(got);
}

static void test_plain_and_quoted(void **state) {
    (void)state;
    check("fc1.weight", "\"fc1.weight\"");
    check("", "\"\"");
    check(NULL, "\"\""); /* an absent name is an empty string, not a crash */
    check("a\"b\\c", "\"a\\\"b\\\\c\"");
    check("/enc/layer.0/Gemm_output_0", "\"/enc/layer.0/Gemm_output_0\""); /* '/' is not escaped */
}

/* Control characters as \u00XX (one form for all of them, newline included); bytes of
 * UTF-8 pass through unchanged; DEL (0x7f) is not a control character for JSON. */
static void test_control_and_utf8(void **state) {
    (void)state;
    check("a\nb", "\"a\\u000ab\"");
    check("\t\r\x01\x1f", "\"\\u0009\\u000d\\u0001\\u001f\"");
    check("\x7f", "\"\x7f\"");
    check("gr\xc3\xb6\xc3\x9f"
          "e \xe2\x82\xac",
          "\"gr\xc3\xb6\xc3\x9f"
          "e \xe2\x82\xac\"");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_and_quoted),
        cmocka_unit_test(test_control_and_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
