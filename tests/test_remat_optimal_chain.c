/* test_remat_optimal_chain.c — the recompute chains of remat/optimal_chain.h in
 * `--remat optimal`: on mobilenet at the least planned peak (`--remat all`'s), where
 * the clones of block1 run together before the pointwise ConvGradInput (a chain through
 * recomputed saved values) and not each before its own first backward reader as the
 * model placed them, `plan` proves its plan optimal (gap 0: before the chains the
 * planner rejected the model's plans for 196,608 bytes the model did not count, and
 * the gap stayed at 45%), the plan fits, costs no more than auto's, and `verify` finds
 * it bitwise equal to --remat none (on a machine too slow to finish the proof within
 * the limit: a certified gap under 2%). Skips, saying so, when the build has no MIP solver. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_run.h"
#include "remat/remat.h"
#include "remat_check.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_remat_optimal_chain_tmp"
#define OUT TMP "/out.txt"
#define run(...) cli_run(OUT, __VA_ARGS__)
#define DATA S "mobilenet.onnx --input " S "mobilenet/input.npy --labels " S "mobilenet/labels.npy"
/* wall clock: the proof takes 89 exact rounds (~15 s on a quiet 2-core machine), and
 * exact rounds past the 24th run only while under half the limit; at 60 s a ctest -j2
 * run beside another loaded process once stopped them after 86 rounds, so the margin
 * is wide (the limit costs nothing when the proof comes sooner) */
#define LIMIT "--remat-time-limit 150 --threads 2"

/* The n-th (0-based) "key": NUMBER in the last output. */
#define json_real(key, nth) cli_json_nth(OUT, key, nth)

static void test_mobilenet_least_peak(void **state) {
    (void)state;
    if (rc_skip_without_mip()) return;
    mkdir(TMP, 0755);
    assert_int_equal(run(BIN " plan " DATA " --remat all --json"), 0);
    long long budget = (long long)json_real("\"peak_bytes\": ", 2); /* all's own plan: the third figure */
    assert_true(budget > 0);
    assert_int_equal(run(BIN " plan " DATA " --remat optimal --memory-budget %lld " LIMIT " --json", budget), 0);
    /* proven (gap 0), or, where the machine is too slow for the 89 rounds within the
     * limit (the sanitizer build under load got 80), a certified gap under 2%: the
     * issue's bar for graphs this size. Before the bound was made honest (issue 28), an
     * unproven run printed gap 0 and passed on the string alone. */
    char *text = cli_slurp(OUT);
    assert_non_null(text);
    bool proven = strstr(text, "\"optimal\": {\"proven\": true, \"gap\": 0,") != NULL;
    free(text);
    double gap = json_real("\"gap\": ", 0), bound = json_real("\"bound_flops\": ", 0);
    if (!proven) printf("not proven within the limit: certified gap %g\n", gap);
    assert_true(proven || (gap >= 0.0 && gap < 0.02));
    assert_true(json_real("\"planner_peak_bytes\": ", 0) <= (double)budget);
    double extra = json_real("\"extra_flops\": ", 1), auto_extra = json_real("\"auto_extra_flops\": ", 0);
    assert_true(extra > 0.0);
    assert_true(auto_extra < 0.0 || extra <= auto_extra);
    assert_true(bound <= extra); /* a lower bound never above the plan it bounds */
    assert_int_equal(run(BIN " verify " DATA " --remat optimal --memory-budget %lld " LIMIT " --json", budget), 0);
    cli_expect_in(OUT, "\"equal\": true");
    cli_expect_in(OUT, "\"n_different\": 0");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_mobilenet_least_peak)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
