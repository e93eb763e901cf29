/* test_wait_policy.c — `--wait-policy` (cli/wait_policy.c) as a user runs it: the built
 * binary with OMP_WAIT_POLICY and GOMP_SPINCOUNT taken out of its environment (ctest
 * sets OMP_WAIT_POLICY=PASSIVE for every test, which would decide for it):
 *   - spin and passive are applied and named in train's summary, and give the same
 *     tuned model byte for byte (how idle threads wait changes no result);
 *   - auto names what it measured;
 *   - the environment's own choice wins and is named;
 *   - a value that is not a policy is a usage error (exit 2) naming the option;
 *   - the step watcher that suggests passive once when spinning steps slow down. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/wait_policy.h"
#include "cli_run.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_wait_policy_tmp"
#define OUT TMP "/out.txt"
#define run(...) cli_run(OUT, __VA_ARGS__)
/* train on the mlp sample for 3 steps; the environment without a policy of its own */
#define TRAIN(env, opts, out)                                                                                        \
    "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u " OT_WAIT_APPLIED_ENV " " env " " BIN " train " S                  \
    "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --batch-size 4 --steps 3 --threads 2 " opts   \
    " -o " out

static int setup(void **state) {
    (void)state;
    return system("rm -rf " TMP " && mkdir -p " TMP) == 0 ? 0 : -1;
}

static void expect_exit(int rc, int want) {
    if (rc != want) {
        char *o = cli_slurp(OUT);
        fail_msg("exit %d, expected %d:\n%s", rc, want, o ? o : "");
    }
}

static bool same_file(const char *a, const char *b) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", a, b);
    return system(cmd) == 0;
}

/* The watcher: quiet without spinning; a lone slow step (a checkpoint) moves no median;
 * a window of steps 3x the fastest window's is reported once, with its ratio. */
static void test_watch(void **state) {
    (void)state;
    ot_wait_watch w;
    setenv(OT_WAIT_APPLIED_ENV, "passive (--wait-policy passive)", 1);
    ot_wait_watch_init(&w);
    double t = 0;
    for (int i = 0; i < 100; i++) assert_true(ot_wait_watch_step(&w, t += (i < 50 ? 0.001 : 0.01)) == 0);
    setenv(OT_WAIT_APPLIED_ENV, "spin (auto: 0.00 of 2 CPUs busy before the start, 2 threads)", 1);
    ot_wait_watch_init(&w);
    t = 0;
    for (int i = 0; i < 41; i++) assert_true(ot_wait_watch_step(&w, t += (i == 25 ? 1.0 : 0.001)) == 0);
    ot_wait_watch_pause(&w); /* validation: the gap is no step */
    assert_true(ot_wait_watch_step(&w, t += 5.0) == 0);
    double said = 0;
    int times = 0;
    for (int i = 0; i < 40; i++) {
        double r = ot_wait_watch_step(&w, t += 0.003);
        if (r > 0) said = r, times++;
    }
    assert_int_equal(times, 1);
    assert_true(said > 2.9 && said < 3.1);
    unsetenv(OT_WAIT_APPLIED_ENV);
}

static void test_spin_and_passive_same_model(void **state) {
    (void)state;
    expect_exit(run(TRAIN("", "-v --wait-policy spin", TMP "/spin.onnx")), 0);
    cli_expect_in(OUT, "idle worker threads: spin (--wait-policy spin)");
    expect_exit(run(TRAIN("", "--verbose --wait-policy=passive", TMP "/passive.onnx")), 0);
    cli_expect_in(OUT, "idle worker threads: passive (--wait-policy passive)");
    assert_true(same_file(TMP "/spin.onnx", TMP "/passive.onnx"));
}

static void test_auto_names_its_measure(void **state) {
    (void)state;
    expect_exit(run(TRAIN("", "-v", TMP "/auto.onnx")), 0);
    cli_expect_in(OUT, "CPUs busy before the start, 2 threads)");
    /* a diagnosis: only with -v */
    expect_exit(run(TRAIN("", "", TMP "/auto.onnx")), 0);
    char *out = cli_slurp(OUT);
    assert_non_null(out);
    assert_null(strstr(out, "idle worker threads"));
    free(out);
    assert_true(same_file(TMP "/auto.onnx", TMP "/passive.onnx"));
}

static void test_environment_wins(void **state) {
    (void)state;
    expect_exit(run(TRAIN("OMP_WAIT_POLICY=ACTIVE", "-v --wait-policy passive", TMP "/env.onnx")), 0);
    cli_expect_in(OUT, "idle worker threads: as the environment's OMP_WAIT_POLICY / GOMP_SPINCOUNT say");
}

static void test_bad_value(void **state) {
    (void)state;
    expect_exit(run(TRAIN("", "--wait-policy sleepy", TMP "/bad.onnx")), 2);
    cli_expect_in(OUT, "--wait-policy 'sleepy': expected auto, spin or passive");
    struct stat st;
    assert_int_not_equal(stat(TMP "/bad.onnx", &st), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_spin_and_passive_same_model),
        cmocka_unit_test(test_auto_names_its_measure),
        cmocka_unit_test(test_environment_wins),
        cmocka_unit_test(test_bad_value),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
