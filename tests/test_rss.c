/* test_rss.c — the process's resident-memory readings (train/rss.h) and `train`'s
 * "peak RSS during the steps": the reset of the high-water mark takes effect, and the
 * figure in the report and the summary is there and sane beside the planned arena
 * (no bound on how much more than the plan it is: that depends on the machine). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "train/rss.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_rss_tmp"
#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)
#define expect_output(needle) cli_expect_in(TMP "/out.txt", needle)

#define MIB (1024 * 1024)

static bool can_reset(void) { return access("/proc/self/clear_refs", W_OK) == 0; }

/* 64 MiB touched raise VmRSS and VmHWM; freed and reset, the mark falls back. */
static void test_reset_peak(void **state) {
    (void)state;
    ot_rss a, b, c;
    if (!ot_rss_read(&a)) skip();
    assert_true(a.rss > 0 && a.hwm >= a.rss);
    assert_true(a.file > 0 && a.anon > 0 && a.file + a.anon <= a.rss + 4 * MIB);
    if (!can_reset()) skip();
    /* mapped directly, not malloc'd: a sanitizer's allocator keeps freed blocks resident */
    size_t n = 64 * MIB;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 1, n);
    assert_true(ot_rss_read(&b));
    assert_true(b.rss >= a.rss + 60 * MIB);
    assert_true(b.hwm >= b.rss);
    volatile char sink = p[n / 2];
    (void)sink;
    assert_int_equal(munmap(p, n), 0); /* returned to the system at once */
    assert_true(ot_rss_reset_peak());
    assert_true(ot_rss_read(&c));
    assert_true(c.hwm < b.hwm - 32 * MIB); /* the 64 MiB no longer count */
    assert_true(c.hwm >= c.rss);
}

static long long number_after(const char *text, const char *key) {
    const char *p = strstr(text, key);
    if (!p) fail_msg("no %s in:\n%s", key, text);
    return strtoll(p + strlen(key), NULL, 10);
}

/* `train --report`: memory.rss {steps_peak, before_steps, file_at_end, anon_at_end},
 * and the summary line beside the planned peak. */
static void test_train_reports_rss(void **state) {
    (void)state;
    mkdir(TMP, 0777);
    assert_int_equal(run(BIN " train " S "tinygpt.onnx --input " S "data/tinygpt_tokens.npy --labels " S
                         "data/tinygpt_labels.npy --batch-size 4 --steps 2 --threads 2 --remat all --report " TMP
                         "/report.json -o " TMP "/tuned.onnx"),
                     0);
    char *r = cli_slurp(TMP "/report.json");
    assert_non_null(r);
    if (!can_reset()) { /* said so, never the lifetime peak under the steps' name */
        assert_non_null(strstr(r, "\"rss\": null"));
        expect_output("peak RSS during the steps: not measured");
        free(r);
        return;
    }
    long long planned = number_after(r, "\"planned_peak\": ");
    long long peak = number_after(r, "\"steps_peak\": ");
    long long before = number_after(r, "\"before_steps\": ");
    long long file = number_after(r, "\"file_at_end\": ");
    long long anon = number_after(r, "\"anon_at_end\": ");
    print_message("planned %lld, RSS during the steps %lld (before %lld; at the end file %lld, anon %lld)\n", planned,
                  peak, before, file, anon);
    assert_true(planned > 0);
    assert_true(peak >= planned);      /* every byte of the plan is written at its peak */
    assert_true(peak >= before && before > 0);
    assert_true(file > 0 && anon > 0);
    assert_true(file + anon <= peak); /* resident at the end is at most the mark */
    assert_true(peak < 16LL * 1024 * MIB);
    free(r);
    expect_output("peak RSS during the steps: ");
    expect_output("the planned ");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reset_peak),
        cmocka_unit_test(test_train_reports_rss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
