/* test_human_size.c — the one byte formatter of every terminal line (ir/human_size.h):
 * units of 1024, one decimal below a MiB and two from there, signs kept; and counts in
 * units of 1000 with three significant digits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "ir/human_size.h"

static void test_units(void **state) {
    (void)state;
    char b[OT_HUMAN_SIZE_LEN];
    assert_string_equal(ot_human_size(0, b, sizeof b), "0 B");
    assert_string_equal(ot_human_size(1023, b, sizeof b), "1023 B");
    assert_string_equal(ot_human_size(1024, b, sizeof b), "1.0 KiB");
    assert_string_equal(ot_human_size(3584, b, sizeof b), "3.5 KiB");
    assert_string_equal(ot_human_size(2168512, b, sizeof b), "2.07 MiB");
    assert_string_equal(ot_human_size(1.25 * 1073741824.0, b, sizeof b), "1.25 GiB");
    assert_string_equal(ot_human_size(-141312, b, sizeof b), "-138.0 KiB");
    assert_string_equal(ot_human_size(-9e18, b, sizeof b),
                        "-8381903171.54 GiB"); /* the largest size an option takes fits */
}

static void test_counts(void **state) {
    (void)state;
    char b[OT_HUMAN_SIZE_LEN];
    assert_string_equal(ot_human_count(0, b, sizeof b), "0");
    assert_string_equal(ot_human_count(950, b, sizeof b), "950");
    assert_string_equal(ot_human_count(999.7, b, sizeof b), "1.00 k");
    assert_string_equal(ot_human_count(1458176, b, sizeof b), "1.46 M");
    assert_string_equal(ot_human_count(38306305, b, sizeof b), "38.3 M");
    assert_string_equal(ot_human_count(523e6, b, sizeof b), "523 M");
    assert_string_equal(ot_human_count(2.1e9, b, sizeof b), "2.10 G");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_units), cmocka_unit_test(test_counts)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
