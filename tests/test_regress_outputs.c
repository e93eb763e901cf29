/* test_regress_outputs.c — regression for issue 18's output and command-line cases,
 * run through the built binary as a user would:
 *   - an output that names an input of the run (-o, --report, --dot, --dump-outputs,
 *     --dump-grads against the model, a symlink or hard link to it, --input, --labels,
 *     --val-input, --val-labels and the model's external data file) is refused with
 *     exit 2 before any work, naming both, and the input is unchanged;
 *   - destinations are checked before training ('' and a folder: exit 2; a missing
 *     folder: exit 3) and the outputs appear only when the whole run succeeded (a
 *     report that cannot be written leaves no tuned model, a failed run leaves
 *     nothing), with no temporary file left behind;
 *   - numeric options: subnormal --lr accepted; NaN, inf, overflow, trailing junk,
 *     negatives and out-of-range values refused naming the option and the rule;
 *   - --steps x --accum beyond int64 refused at parse time, and by the loop itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "fixtures/onnx_builder.h"
#include "test_files.h"
#include "ir/atomic_file.h"
#include "train/train.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_regress_outputs_tmp"
#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)
#define expect_output(needle) cli_expect_in(TMP "/out.txt", needle)
/* the mlp sample, copied into TMP so that a failure could only hurt the copies */
#define TRAIN BIN " train " TMP "/m.onnx --input " TMP "/x.npy --labels " TMP "/y.npy --steps 2 --quiet"

static void copy_file(const char *from, const char *to) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

/* Fails unless path holds exactly the bytes of ref. */
static void expect_same_bytes(const char *path, const char *ref) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", path, ref);
    if (system(cmd) != 0) fail_msg("%s was changed (differs from %s)", path, ref);
}

static bool exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Fails if a temporary file (*.tmp-XXXXXX) is left in folder dir. */
static void expect_no_temporaries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp-")) fail_msg("temporary file %s/%s left behind", dir, e->d_name);
    closedir(d);
}

static int setup(void **state) {
    (void)state;
    assert_int_equal(system("rm -rf '" TMP "' && mkdir -p '" TMP "/sub' '" TMP "/ext' '" TMP "/dump'"), 0);
    copy_file(S "mlp.onnx", TMP "/m.onnx");
    copy_file(S "mlp/input.npy", TMP "/x.npy");
    copy_file(S "mlp/labels.npy", TMP "/y.npy");
    copy_file(S "mlp/input.npy", TMP "/vx.npy");
    copy_file(S "mlp/labels.npy", TMP "/vy.npy");
    copy_file(S "mlp/input.npy", TMP "/dump/x.npy");
    assert_int_equal(symlink(TMP "/m.onnx", TMP "/link.onnx"), 0);
    assert_int_equal(link(TMP "/m.onnx", TMP "/sub/hard.onnx"), 0);
    return 0;
}

/* Every input unchanged after a refused run. */
static void expect_inputs_intact(void) {
    expect_same_bytes(TMP "/m.onnx", S "mlp.onnx");
    expect_same_bytes(TMP "/x.npy", S "mlp/input.npy");
    expect_same_bytes(TMP "/y.npy", S "mlp/labels.npy");
    expect_same_bytes(TMP "/vx.npy", S "mlp/input.npy");
    expect_same_bytes(TMP "/vy.npy", S "mlp/labels.npy");
    expect_same_bytes(TMP "/dump/x.npy", S "mlp/input.npy");
}

static void test_output_names_an_input(void **state) {
    (void)state;
    static const struct {
        const char *args, *needle;
    } cases[] = {
        {"-o " TMP "/m.onnx", "is the same file as the model"},
        {"-o " TMP "/link.onnx", "is the same file as the model"}, /* a symlink to it */
        {"-o " TMP "/sub/hard.onnx", "is the same file as the model"}, /* a hard link */
        {"-o " TMP "/sub/../m.onnx", "is the same file as the model"},
        {"-o " TMP "/x.npy", "is the same file as --input"},
        {"-o " TMP "/y.npy", "is the same file as --labels"},
        {"--val-input " TMP "/vx.npy --val-labels " TMP "/vy.npy -o " TMP "/vx.npy", "is the same file as --val-input"},
        {"--val-input " TMP "/vx.npy --val-labels " TMP "/vy.npy -o " TMP "/vy.npy", "is the same file as --val-labels"},
        {"-o " TMP "/new.onnx --report " TMP "/m.onnx", "--report '" TMP "/m.onnx' is the same file as the model"},
        {"-o " TMP "/new.onnx --resume " TMP "/y.npy --report " TMP "/y.npy", "is the same file as --labels"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = run(TRAIN " %s", cases[i].args);
        if (rc != 2) fail_msg("train %s: exit %d, expected 2", cases[i].args, rc);
        expect_output(cases[i].needle);
        expect_output("refusing to overwrite an input");
        expect_inputs_intact();
        assert_false(exists(TMP "/new.onnx"));
    }
    assert_int_equal(run(TRAIN " -o " TMP "/new.onnx --report " TMP "/new.onnx"), 2);
    expect_output("-o '" TMP "/new.onnx' and --report '" TMP "/new.onnx' name the same file");
    assert_false(exists(TMP "/new.onnx"));
    /* the other commands that write */
    assert_int_equal(run(BIN " plan " TMP "/m.onnx --input " TMP "/x.npy --labels " TMP "/y.npy --dot " TMP "/link.onnx"), 2);
    expect_output("--dot '" TMP "/link.onnx' is the same file as the model");
    assert_int_equal(run(BIN " plan " TMP "/m.onnx --input " TMP "/x.npy --labels " TMP "/y.npy --timeline " TMP "/y.npy"), 2);
    expect_output("--timeline '" TMP "/y.npy' is the same file as --labels");
    assert_int_equal(run(BIN " eval " TMP "/m.onnx --input " TMP "/dump/x.npy --dump-outputs " TMP "/dump"), 2);
    expect_output("--dump-outputs '" TMP "/dump' holds --input '" TMP "/dump/x.npy'");
    assert_int_equal(run(BIN " grad " TMP "/m.onnx --input " TMP "/dump/x.npy --labels " TMP "/y.npy --dump-grads " TMP "/dump"), 2);
    expect_output("--dump-grads '" TMP "/dump' holds --input");
    assert_int_equal(run(BIN " eval " TMP "/m.onnx --input " TMP "/x.npy --dump-outputs " TMP "/x.npy"), 2);
    expect_output("exists and is not a folder");
    expect_inputs_intact();
    /* a model in the same folder as a dump is no clash: nothing named *.onnx is written */
    assert_int_equal(run(BIN " eval " TMP "/m.onnx --input " TMP "/dump/x.npy --dump-outputs " TMP), 0);
    expect_inputs_intact();
}

/* A model whose weight W lives in ext/w.bin: -o (and --report) naming that file. */
static void test_output_names_external_data(void **state) {
    (void)state;
    mb *b = mb_new(17);
    const int64_t dx[2] = {4, 3}, dw[2] = {3, 2};
    float w[6] = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f};
    FILE *f = fopen(TMP "/ext/w.bin", "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(w, sizeof w, 1, f), 1);
    fclose(f);
    copy_file(TMP "/ext/w.bin", TMP "/w_ref.bin");
    Onnx__TensorProto *t = mb_tensor(b, "W", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, dw);
    const char *kv[] = {"location", "w.bin", "length", "24"};
    mb_external(b, t, kv, 2);
    mb_init(b, t);
    mb_input(b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, dx, NULL);
    mb_node(b, "MatMul", "mm", "x,W", "y");
    mb_output(b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    assert_int_equal(mb_write(b, TMP "/ext/m.onnx"), 0);
    mb_free(b);
    ot_shape sx = {.rank = 2, .dim = {4, 3}}, sy = {.rank = 1, .dim = {4}};
    ot_tensor *x = ot_tensor_new(OT_F32, &sx), *y = ot_tensor_new(OT_I64, &sy);
    for (int i = 0; i < 12; i++) ((float *)x->data)[i] = (float)i / 12.0f;
    for (int i = 0; i < 4; i++) ((int64_t *)y->data)[i] = i % 2;
    ot_error err = {0};
    assert_int_equal(ot_npy_write(TMP "/ext/x.npy", x, &err), OT_OK);
    assert_int_equal(ot_npy_write(TMP "/ext/y.npy", y, &err), OT_OK);
    ot_tensor_free(x);
    ot_tensor_free(y);
#define EXT BIN " train " TMP "/ext/m.onnx --input " TMP "/ext/x.npy --labels " TMP "/ext/y.npy --steps 1 --quiet"
    assert_int_equal(run(EXT " -o " TMP "/ext/w.bin"), 2);
    expect_output("-o '" TMP "/ext/w.bin' is the same file as the model's external data '" TMP "/ext/w.bin'");
    assert_int_equal(run(EXT " -o " TMP "/ext/t.onnx --report " TMP "/ext/w.bin"), 2);
    expect_output("the model's external data");
    expect_same_bytes(TMP "/ext/w.bin", TMP "/w_ref.bin");
    assert_false(exists(TMP "/ext/t.onnx"));
    /* the run itself is fine elsewhere */
    assert_int_equal(run(EXT " -o " TMP "/ext/t.onnx"), 0);
    expect_same_bytes(TMP "/ext/w.bin", TMP "/w_ref.bin");
}

static void test_destinations_checked_first(void **state) {
    (void)state;
    assert_int_equal(run(TRAIN " -o ''"), 2);
    expect_output("-o '': empty file name");
    assert_int_equal(run(TRAIN " -o " TMP "/sub"), 2);
    expect_output("-o '" TMP "/sub' is a folder; give a file name");
    assert_int_equal(run(TRAIN " -o " TMP "/newdir/"), 2);
    expect_output("-o '" TMP "/newdir/' ends with '/'; give a file name");
    assert_int_equal(run(TRAIN " -o " TMP "/nodir/t.onnx"), 3);
    expect_output("-o '" TMP "/nodir/t.onnx': folder '" TMP "/nodir': No such file or directory");
    assert_int_equal(run(TRAIN " -o " TMP "/t.onnx --report ''"), 2);
    expect_output("--report '': empty file name");
    assert_int_equal(run(TRAIN " -o " TMP "/t.onnx --report " TMP "/sub"), 2);
    assert_int_equal(run(TRAIN " -o " TMP "/t.onnx --checkpoint-dir " TMP "/x.npy"), 2);
    expect_output("--checkpoint-dir '" TMP "/x.npy' exists and is not a folder");
    /* the case: a report into a missing folder used to leave -o written */
    assert_int_equal(run(TRAIN " -o " TMP "/t.onnx --report " TMP "/nodir/r.json"), 3);
    expect_output("--report '" TMP "/nodir/r.json'");
    /* none of these trained: the refusals come before the first step */
    cli_expect_in(TMP "/out.txt", "onnxtrain train:");
    char *out = cli_slurp(TMP "/out.txt");
    assert_null(strstr(out, "completed steps"));
    free(out);
    assert_false(exists(TMP "/t.onnx"));
    assert_false(exists(TMP "/t.onnx.ckpt"));
    if (geteuid() != 0) { /* root writes anywhere */
        assert_int_equal(system("mkdir -p '" TMP "/ro' && chmod 555 '" TMP "/ro'"), 0);
        assert_int_equal(run(TRAIN " -o " TMP "/ro/t.onnx"), 3);
        expect_output("cannot write into the folder");
    }
    expect_no_temporaries(TMP);
    expect_inputs_intact();
}

/* Outputs appear only when the whole run succeeded, and together. */
static void test_outputs_only_after_success(void **state) {
    (void)state;
    /* the report cannot be written (a full disk): no tuned model either */
    assert_int_equal(run(TRAIN " -o " TMP "/t.onnx --report /dev/full"), 3);
    expect_output("report /dev/full: write error: No space left on device");
    expect_output("stopped after 2 completed steps; " TMP "/t.onnx was not written (nor the report)");
    assert_false(exists(TMP "/t.onnx"));
    /* a run that fails (NaN: exit 10) writes neither */
    assert_int_equal(run(BIN " train " TMP "/m.onnx --input " TMP "/x.npy --labels " TMP "/y.npy --steps 3 --quiet "
                         "--optimizer sgd --lr 1e38 -o " TMP "/t.onnx --report " TMP "/r.json"), 10);
    expect_output("was not written (nor the report)");
    assert_false(exists(TMP "/t.onnx"));
    assert_false(exists(TMP "/r.json"));
    /* success: both, and nothing else */
    assert_int_equal(run(TRAIN " -o " TMP "/t.onnx --report " TMP "/r.json"), 0);
    assert_true(exists(TMP "/t.onnx"));
    char *rep = cli_slurp(TMP "/r.json");
    assert_non_null(rep);
    assert_non_null(strstr(rep, "\"loss\""));
    free(rep);
    /* an existing output is replaced (it is no input) */
    assert_int_equal(run(TRAIN " -o " TMP "/t.onnx --report " TMP "/r.json"), 0);
    /* /dev/null as the report is written in place, never renamed over */
    assert_int_equal(run(TRAIN " -o " TMP "/t.onnx --report /dev/null"), 0);
    struct stat st;
    assert_int_equal(stat("/dev/null", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    expect_no_temporaries(TMP);
    expect_inputs_intact();
}

static void test_numeric_options(void **state) {
    (void)state;
    static const struct {
        const char *args, *needle;
    } bad[] = {
        {"--lr nan", "--lr 'nan': must be a number, not NaN"},
        {"--lr inf", "--lr 'inf': must be finite"},
        {"--lr -inf", "--lr '-inf': must be finite"},
        {"--lr 1e999", "--lr '1e999': too large for a double"},
        {"--lr 1e-400", "--lr 1e-400: rounds to 0 as a double; must be > 0"},
        {"--lr 0", "--lr 0: must be > 0"},
        {"--lr -0.1", "--lr -0.1: must be > 0"},
        {"--lr 0.1x", "--lr '0.1x': expected a number, found 'x' after it"},
        {"--lr ' 0.1'", "--lr ' 0.1': starts with a blank"},
        {"--lr ''", "--lr: missing value"},
        {"--momentum -1", "--momentum -1: must be >= 0"},
        {"--optimizer adam --beta1 1", "--beta1 1: must be >= 0 and < 1"},
        {"--optimizer adam --beta2 -0.5", "--beta2 -0.5: must be >= 0 and < 1"},
        {"--optimizer adam --eps 0", "--eps 0: must be > 0"},
        {"--clip-grad-norm nan", "--clip-grad-norm 'nan': must be a number, not NaN"},
        {"--weight-decay 1e400", "--weight-decay '1e400': too large for a double"},
        {"--steps 0", "--steps 0: must be between 1 and 1099511627776"},
        {"--steps 99999999999999999999", "--steps 99999999999999999999: must be between 1 and 1099511627776"},
        {"--steps 5x", "--steps '5x': expected an integer, found 'x' after it"},
        {"--steps 1.5", "--steps '1.5': expected an integer, found '.5' after it"},
        {"--steps abc", "--steps 'abc': expected an integer"},
        {"--steps -3", "--steps -3: must be between 1"},
        {"--epochs 0", "--epochs 0: must be between 1 and 1073741824"},
        {"--accum 2000000", "--accum 2000000: must be between 1 and 1048576"},
        {"--batch-size 4294967296", "--batch-size 4294967296: must be between 1 and 2147483647"},
        {"--seed -1", "--seed -1: must be at least 0"},
        {"--seed 99999999999999999999", "--seed 99999999999999999999: does not fit a 64-bit integer"},
        {"--seed -99999999999999999999", "--seed -99999999999999999999: must be at least 0"},
        {"--ignore-index 99999999999999999999", "--ignore-index 99999999999999999999: does not fit a 64-bit integer"},
        {"--threads 0", "--threads 0: must be between 1 and 1024"},
        {"--memory-budget -5M", "--memory-budget '-5M': a size cannot be negative"},
        {"--memory-budget nanM", "--memory-budget 'nanM': expected a size"},
        {"--memory-budget 1e30", "--memory-budget '1e30': too large"},
        {"--memory-budget 5Q", "--memory-budget '5Q': unknown unit 'Q'"},
        {"--warmup-steps -1", "--warmup-steps -1: must be between 0 and 1099511627776"},
        {"--keep-checkpoints 0", "--keep-checkpoints 0: must be between 1 and 1048576"},
        {"--log-every 0", "--log-every 0: must be between 1"},
        /* products of option values: the micro-batch count must fit */
        {"--steps 1099511627776 --accum 1048576", "--steps x --accum micro-batches (1099511627776 x 1048576) is too large"},
        {"--steps 1099511627776 --accum 2", "--steps x --accum micro-batches (1099511627776 x 2) is too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = run(BIN " train " TMP "/m.onnx --input " TMP "/x.npy --labels " TMP "/y.npy --quiet %s -o " TMP
                         "/n.onnx", bad[i].args);
        if (rc != 2) fail_msg("train %s: exit %d, expected 2", bad[i].args, rc);
        expect_output(bad[i].needle);
        assert_false(exists(TMP "/n.onnx"));
    }
    /* 1e-320 is finite (a subnormal double): taken, as torch takes any lr >= 0 */
    assert_int_equal(run(TRAIN " --lr 1e-320 -o " TMP "/n.onnx"), 0);
    assert_int_equal(run(TRAIN " --lr 4.9e-324 --optimizer adam --beta1 0 --beta2 0.999999 -o " TMP "/n.onnx"), 0);
    /* the largest values that are allowed are parsed as such */
    assert_int_equal(run(TRAIN " --warmup-steps 1099511627776 --log-every 99999999999 -o " TMP "/n.onnx"), 0);
    unlink(TMP "/n.onnx");
}

/* The loop's own check: a caller of the library that sets steps x accum past int64
 * gets OT_E_USAGE, not signed overflow (UBSan) in the micro-batch numbering. */
static void test_loop_refuses_overflowing_counts(void **state) {
    (void)state;
    ot_error err = {0};
    ot_model *m = test_model(S "mlp.onnx");
    ot_dataset d = {0};
    ot_tensor *x = test_npy(S "mlp/input.npy"), *y = test_npy(S "mlp/labels.npy");
    assert_int_equal(ot_dataset_add(&d, "", "input.npy", -1, x, &err), OT_OK);
    assert_int_equal(ot_dataset_add(&d, OT_DATA_LABELS, "labels.npy", -1, y, &err), OT_OK);
    ot_train_options o;
    ot_train_options_default(&o);
    o.n_threads = 1;
    o.steps = INT64_MAX / 2;
    o.accum = 4;
    o.batch_size = 4;
    ot_train_session *s = NULL;
    assert_int_equal(ot_train_session_new(m, &o, &d, true, &s, &err), OT_OK);
    ot_train_result r;
    assert_int_equal(ot_train_run(s, &d, NULL, NULL, &r, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "do not fit a 64-bit count"));
    ot_train_result_free(&r);
    ot_train_session_free(s);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* ot_atomic_finish: the file is written and synced but not in place until the commit;
 * an abort after it leaves the old destination and no temporary file. */
static void test_atomic_finish_then_commit_or_abort(void **state) {
    (void)state;
    ot_error err = {0};
    const char *dst = TMP "/fin/out.txt";
    assert_int_equal(system("mkdir -p '" TMP "/fin' && printf old > '" TMP "/fin/out.txt'"), 0);
    ot_atomic_file *af = NULL;
    assert_int_equal(ot_atomic_open(dst, &af, &err), OT_OK);
    fputs("new", ot_atomic_stream(af));
    assert_int_equal(ot_atomic_finish(af, &err), OT_OK);
    char *b = cli_slurp(dst);
    assert_string_equal(b, "old");
    free(b);
    ot_atomic_abort(af);
    b = cli_slurp(dst);
    assert_string_equal(b, "old");
    free(b);
    expect_no_temporaries(TMP "/fin");
    assert_int_equal(ot_atomic_open(dst, &af, &err), OT_OK);
    fputs("new", ot_atomic_stream(af));
    assert_int_equal(ot_atomic_finish(af, &err), OT_OK);
    assert_int_equal(ot_atomic_finish(af, &err), OT_OK); /* twice is once */
    assert_int_equal(ot_atomic_commit(af, &err), OT_OK);
    b = cli_slurp(dst);
    assert_string_equal(b, "new");
    free(b);
    expect_no_temporaries(TMP "/fin");
    /* a write error is reported by finish, which frees the file */
    assert_int_equal(ot_atomic_open("/dev/full", &af, &err), OT_OK);
    fputs("x", ot_atomic_stream(af));
    assert_int_equal(ot_atomic_finish(af, &err), OT_E_IO);
    assert_non_null(strstr(err.msg, "/dev/full: write error: No space left on device"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_output_names_an_input),
        cmocka_unit_test(test_output_names_external_data),
        cmocka_unit_test(test_destinations_checked_first),
        cmocka_unit_test(test_outputs_only_after_success),
        cmocka_unit_test(test_numeric_options),
        cmocka_unit_test(test_loop_refuses_overflowing_counts),
        cmocka_unit_test(test_atomic_finish_then_commit_or_abort),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
