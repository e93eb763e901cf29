/* test_remat_optimal_prechain.c — the recompute chains of remat/optimal_chain.h are in
 * `--remat optimal`'s first programme (remat/optimal_prechain.c), not only learnt from
 * plans the planner rejects. On tinygpt at three quarters of the way from all's peak to
 * none's, the first solution is accepted (one round: no rejected plan to learn a chain
 * from), so every chain row of the programme comes from the walk over the graph: 509
 * rows with it, 374 without (each chain is a reader row per bytes interval it opens).
 * The answer must not change with them: proven, within the budget, the bound at the
 * plan (the zoo's bert at 272,160 bytes, where the walk matters: the first solve's
 * bound 161,984 -> 214,976, docs/remat.md). Skips, saying so, without a MIP solver. */
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
#define TMP OT_BINARY_DIR "/test_remat_optimal_prechain_tmp"
#define OUT TMP "/out.txt"
#define run(...) cli_run(OUT, __VA_ARGS__)
#define DATA S "tinygpt.onnx --input " S "tinygpt/input.npy --labels " S "tinygpt/labels.npy"
#define json_real(key, nth) cli_json_nth(OUT, key, nth)

static void test_tinygpt_chains_up_front(void **state) {
    (void)state;
    if (rc_skip_without_mip()) return;
    mkdir(TMP, 0755);
    long long budget = rc_cli_budget(OUT, BIN, DATA, 3, 4); /* 1,224,384 */
    assert_int_equal(run(BIN " plan " DATA " --remat optimal --memory-budget %lld --remat-time-limit 60 --threads 2"
                             " --json",
                         budget),
                     0);
    cli_expect_in(OUT, "\"optimal\": {\"proven\": true, \"gap\": 0,");
    assert_true(json_real("\"rounds\": ", 0) == 1.0);
    assert_true(json_real("\"rows\": ", 0) > 450.0); /* 509; 374 without the walk's chains */
    assert_true(json_real("\"planner_peak_bytes\": ", 0) <= (double)budget);
    double extra = json_real("\"extra_flops\": ", 1), bound = json_real("\"bound_flops\": ", 0);
    assert_true(extra > 0.0 && bound <= extra);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tinygpt_chains_up_front)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
