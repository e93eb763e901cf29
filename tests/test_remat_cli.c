/* test_remat_cli.c — `onnxtrain plan` and `onnxtrain verify` as a user runs them (the
 * built binary): outputs, --json, --dot, --timeline, --batch-size auto, and the exit
 * codes of bad policies and infeasible budgets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_run.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_remat_cli_tmp"
#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    return 0;
}

static void test_verify_ok(void **state) {
    (void)state;
    assert_int_equal(run(BIN " verify " S "tinygpt.onnx --input " S "tinygpt/input.npy --labels " S
                             "tinygpt/labels.npy --remat sqrt --seed 5 --threads 2 -v"),
                     0);
    cli_expect_in(TMP "/out.txt", "0 of 30 tensors differ");
    cli_expect_in(TMP "/out.txt", "grad:blocks.0.attn.qkv.weight");
    assert_int_equal(run(BIN " verify " S "resnet.onnx --input " S "resnet/input.npy --labels " S
                             "resnet/labels.npy --remat all --json --threads 2"),
                     0);
    cli_expect_in(TMP "/out.txt", "\"equal\": true");
    cli_expect_in(TMP "/out.txt", "\"name\": \"state:block1.bn1.running_mean\"");
}

static void test_verify_usage(void **state) {
    (void)state;
    assert_int_equal(run(BIN " verify " S "mlp.onnx --input " S "mlp/input.npy --labels " S
                             "mlp/labels.npy --remat sometimes"),
                     2);
    cli_expect_in(TMP "/out.txt", "sometimes");
    /* no --remat: auto, the default of every command (it used to be refused) */
    assert_int_equal(run(BIN " verify " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy"), 0);
    cli_expect_in(TMP "/out.txt", "--remat auto against none");
    cli_expect_in(TMP "/out.txt", "optimizer adamw");
    cli_expect_in(TMP "/out.txt", "batch 7 (train's default: min(32, samples)");
    assert_int_equal(run(BIN " verify " S "mlp.onnx --input " S "mlp/input.npy --labels " S
                             "mlp/labels.npy --remat manual:no_such_value"),
                     2);
    cli_expect_in(TMP "/out.txt", "no_such_value");
    assert_int_equal(run(BIN " verify --help"), 0);
    cli_expect_in(TMP "/out.txt", "--memory-budget");
}

static void test_plan_outputs(void **state) {
    (void)state;
    remove(TMP "/g.dot");
    remove(TMP "/t.svg");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 8 --remat sqrt --dot " TMP "/g.dot --timeline " TMP
                             "/t.svg"),
                     0);
    cli_expect_in(TMP "/out.txt", "--remat none: peak");
    cli_expect_in(TMP "/out.txt", "--remat sqrt: peak");
    cli_expect_in(TMP "/out.txt", "kept_activations");
    cli_expect_in(TMP "/out.txt", "; recomputed ");
    cli_expect_in(TMP "/out.txt", " ... (+"); /* long name lists folded with a count... */
    cli_expect_in(TMP "/out.txt", " more)");
    cli_expect_in(TMP "/g.dot", "dashed");
    cli_expect_in(TMP "/g.dot", ".recompute");
    cli_expect_in(TMP "/t.svg", "<svg");
    cli_expect_in(TMP "/t.svg", "--remat sqrt");
    /* ...in full with -v */
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 8 --remat sqrt -v"), 0);
    cli_expect_in(TMP "/out.txt", " /blocks.0/attn/Softmax_output_0");
    char *full = cli_slurp(TMP "/out.txt");
    assert_non_null(full);
    assert_null(strstr(full, " more)"));
    assert_null(strstr(full, "bytes)")); /* sizes in KiB/MiB on the terminal */
    free(full);
    assert_int_equal(run(BIN " plan " S "chain48.onnx --batch-size 16 --optimizer sgd --remat auto --memory-budget 480K --json"), 0);
    cli_expect_in(TMP "/out.txt", "\"policy\": \"auto (budget 480.0 KiB)\"");
    cli_expect_in(TMP "/out.txt", "\"segments\": [");
    cli_expect_in(TMP "/out.txt", "\"kept_activations\"");
}

static void test_plan_budgets(void **state) {
    (void)state;
    assert_int_equal(run(BIN " plan " S "chain48.onnx --batch-size 64 --remat auto --memory-budget 100K"), 9);
    cli_expect_in(TMP "/out.txt", "smallest planned peak is");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size auto --remat auto"), 2);
    cli_expect_in(TMP "/out.txt", "--memory-budget");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size auto --memory-budget 4M --remat auto"), 0);
    cli_expect_in(TMP "/out.txt", "(auto)");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 8 --remat every:0"), 2);
    /* a symbolic batch without data or --batch-size: the bare form's small default, said */
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx"), 0);
    cli_expect_in(TMP "/out.txt", "batch 4 (a small default: the model's batch is symbolic; --batch-size N");
    cli_expect_in(TMP "/out.txt", "optimizer adamw: its state and update are planned");
    cli_expect_in(TMP "/out.txt", "--remat auto (no budget: the least peak within +5% FLOPs)");
    /* (SGD: the figures below are its plans) the wording follows the sign: selective keeps mlp's peak (before the
     * planner's second placement it raised it by a best-fit hole), auto finds nothing lower within its cap (no remat
     * helps, none's plan), and saves on chain48 */
    assert_int_equal(run(BIN " plan " S "mlp.onnx --batch-size 16 --optimizer sgd --remat selective"), 0);
    cli_expect_in(TMP "/out.txt", "\nthe same peak for 0.2% more FLOPs");
    assert_int_equal(run(BIN " plan " S "mlp.onnx --batch-size 16 --optimizer sgd"), 0);
    cli_expect_in(TMP "/out.txt", "--remat auto (no budget: no remat helps here, so none's plan): peak 233.6 KiB");
    cli_expect_in(TMP "/out.txt", "\nno remat helps here: no plan within +5% FLOPs peaks below --remat none's");
    assert_int_equal(run(BIN " plan " S "chain48.onnx --batch-size 16 --optimizer sgd"), 0);
    cli_expect_in(TMP "/out.txt", "\nsaves 14.0 KiB (2.8%) for 5.0% more FLOPs");
    assert_int_equal(run(BIN " plan --help"), 0);
    cli_expect_in(TMP "/out.txt", "--timeline");
}

/* `plan --json` gives, for each plan (none, then the policy's), the bytes by category
 * at the peak (issue 16 item 4): the planner's figures, the same that the text
 * prints on its "at the peak:" lines, and together no more than the peak. */
static void human(double b, char *buf, size_t n) {
    if (b >= 1 << 30) snprintf(buf, n, "%.2f GiB", b / (1 << 30));
    else if (b >= 1 << 20) snprintf(buf, n, "%.2f MiB", b / (1 << 20));
    else if (b >= 1 << 10) snprintf(buf, n, "%.1f KiB", b / (1 << 10));
    else snprintf(buf, n, "%.0f B", b);
}

static void test_plan_json_at_peak(void **state) {
    (void)state;
    static const char *cats[] = {"params", "gradients", "optimizer_state", "state", "constants",
                                 "inputs_outputs", "kept_activations", "transient", "workspace"};
    const char *args = " plan " S "tinygpt.onnx --batch-size 8 --remat all --threads 2";
    assert_int_equal(run(BIN "%s --json", args), 0);
    char *js = cli_slurp(TMP "/out.txt");
    assert_non_null(js);
    assert_int_equal(run(BIN "%s", args), 0);
    char *txt = cli_slurp(TMP "/out.txt");
    assert_non_null(txt);
    const char *j = js, *t = txt;
    for (int plan = 0; plan < 2; plan++) {
        j = strstr(j, "\"policy\": ");
        assert_non_null(j);
        unsigned long long peak = 0, sum = 0;
        assert_int_equal(sscanf(strstr(j, "\"peak_bytes\": "), "\"peak_bytes\": %llu", &peak), 1);
        j = strstr(j, "\"at_peak\": {");
        t = strstr(t, "  at the peak:");
        assert_non_null(j);
        assert_non_null(t);
        const char *line_end = strchr(t, '\n');
        for (int c = 0; c < 9; c++) {
            char key[40], want[80];
            snprintf(key, sizeof key, "\"%s\": ", cats[c]);
            const char *at = strstr(j, key);
            assert_non_null(at);
            unsigned long long v = 0;
            assert_int_equal(sscanf(at + strlen(key), "%llu", &v), 1);
            sum += v;
            char hb[32];
            human((double)v, hb, sizeof hb);
            snprintf(want, sizeof want, " %s %s", cats[c], hb);
            const char *in_text = strstr(t, want);
            if (!in_text || in_text > line_end) fail_msg("plan %d: text lacks '%s' (json %llu)", plan, want, v);
        }
        assert_true(sum > 0 && sum <= peak);
        j = strchr(j, '}');
        t = line_end;
    }
    free(js);
    free(txt);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_ok),
        cmocka_unit_test(test_verify_usage),
        cmocka_unit_test(test_plan_outputs),
        cmocka_unit_test(test_plan_budgets),
        cmocka_unit_test(test_plan_json_at_peak),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
