/* test_bare_cli.c — the bare form, `onnxtrain [OPTIONS] MODEL.onnx`, as a user runs it
 * (the built binary, in a scratch folder as the current folder), on every sample:
 *   - without data: exit 0, the plan, verify's verdict on synthetic data and the
 *     command that trains are printed, and nothing is written;
 *   - with data: MODEL.tuned.onnx appears in the current folder, loads, and holds
 *     other weights than the input; a second run refuses to overwrite it (exit 2);
 *   - a typo'd command is still "unknown command" (exit 2), and --help shows the form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "test_files.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_bare_cli_tmp"
#define OUT TMP "/out.txt"
/* Runs in TMP/run, a folder of its own: the bare form writes into the current folder. */
#define run(...) cli_run(OUT, "cd " TMP "/run && " __VA_ARGS__)
#define expect_output(needle) cli_expect_in(OUT, needle)

/* Every sample, and the folder that holds its data. */
static const struct {
    const char *name, *data;
} kSamples[] = {{"chain48", "chain48"}, {"mlp", "mlp"},         {"mobilenet", "mobilenet"},
                {"resnet", "resnet"},   {"tinygpt", "tinygpt"}, {"tinygpt_nodrop", "tinygpt"}};
#define N_SAMPLES (sizeof kSamples / sizeof kSamples[0])

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* A fresh, empty TMP/run. */
static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    return system("rm -rf " TMP "/run && mkdir " TMP "/run") == 0 ? 0 : -1;
}

static void test_no_data_every_sample(void **state) {
    (void)state;
    for (size_t i = 0; i < N_SAMPLES; i++) {
        const char *m = kSamples[i].name;
        assert_int_equal(setup(NULL), 0);
        int rc = run(BIN " --remat auto " S "%s.onnx", m);
        if (rc != 0) {
            char *o = cli_slurp(OUT);
            fail_msg("%s: exit %d:\n%s", m, rc, o ? o : "");
        }
        expect_output("plan of one training step");
        expect_output("--remat auto (no budget: ");
        expect_output("without remat");
        char *o = cli_slurp(OUT); /* auto is never worse than none: never "costs" */
        if (o && strstr(o, "costs")) fail_msg("%s: auto without a budget costs memory:\n%s", m, o);
        free(o);
        expect_output("recompute: ");
        expect_output("on synthetic data");
        expect_output("bitwise equal: 0 of ");
        expect_output("synthetic ");
        char cmd[512];
        snprintf(cmd, sizeof cmd, "onnxtrain --remat auto " S "%s.onnx --input ", m);
        expect_output(cmd);
        expect_output("--labels LABELS.npy");
        char tuned[512];
        snprintf(tuned, sizeof tuned, "It writes %s.tuned.onnx in the current folder", m);
        expect_output(tuned);
        snprintf(tuned, sizeof tuned, TMP "/run/%s.tuned.onnx", m);
        assert_false(exists(tuned)); /* nothing trained, nothing written */
    }
    /* the integer input is named with the range of its table */
    assert_int_equal(run(BIN " " S "tinygpt.onnx --seed 3"), 0);
    expect_output("tokens [4,16] synthetic int64 ids in [0, 64): rows of 'tok.weight'");
    expect_output("onnxtrain " S "tinygpt.onnx --seed 3 --input tokens=TOKENS.npy --labels LABELS.npy");
    expect_output("(--seed 3)");
}

/* Sum over params of how many differ between two models with the same graph. */
static int params_differing(const ot_model *a, const ot_model *b) {
    int n = 0;
    for (int v = 0; v < a->graph->n_values; v++) {
        const ot_value *x = &a->graph->values[v];
        if (x->kind != OT_VK_PARAM || !x->data) continue;
        int w = ot_graph_find_value(b->graph, x->name);
        assert_true(w >= 0);
        const ot_value *y = &b->graph->values[w];
        assert_int_equal(x->nbytes, y->nbytes);
        n += memcmp(x->data, y->data, x->nbytes) != 0;
    }
    return n;
}

static void test_with_data_every_sample(void **state) {
    (void)state;
    for (size_t i = 0; i < N_SAMPLES; i++) {
        const char *m = kSamples[i].name, *d = kSamples[i].data;
        assert_int_equal(setup(NULL), 0);
        int rc = run(BIN " --remat auto " S "%s.onnx --input " S "%s/input.npy --labels " S "%s/labels.npy", m, d, d);
        if (rc != 0) {
            char *o = cli_slurp(OUT);
            fail_msg("%s: exit %d:\n%s", m, rc, o ? o : "");
        }
        char tuned[512];
        snprintf(tuned, sizeof tuned, "-o %s.tuned.onnx", m);
        expect_output(tuned);
        expect_output("remat auto (no budget: ");
        snprintf(tuned, sizeof tuned, TMP "/run/%s.tuned.onnx", m);
        assert_true(exists(tuned));
        ot_model *in = test_model(S "%s.onnx", m), *out = test_model("%s", tuned);
        assert_true(params_differing(in, out) > 0);
        ot_model_free(in);
        ot_model_free(out);
        /* never over an existing file: a second run refuses and leaves it alone */
        struct stat before, after;
        assert_int_equal(stat(tuned, &before), 0);
        rc = run(BIN " --remat auto " S "%s.onnx --input " S "%s/input.npy --labels " S "%s/labels.npy", m, d, d);
        assert_int_equal(rc, 2);
        expect_output("already exists");
        assert_int_equal(stat(tuned, &after), 0);
        assert_int_equal(before.st_size, after.st_size);
        assert_int_equal(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
        assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
    }
}

/* Options after the model, train's own options, an explicit -o, the default --remat. */
static void test_options_anywhere(void **state) {
    (void)state;
    assert_int_equal(setup(NULL), 0);
    assert_int_equal(run(BIN " " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --steps 2 "
                             "--remat sqrt -o other.onnx"),
                     0);
    expect_output("remat sqrt: peak");
    expect_output("trained 2 steps");
    assert_true(exists(TMP "/run/other.onnx"));
    assert_false(exists(TMP "/run/mlp.tuned.onnx"));
    assert_int_equal(run(BIN " " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy"), 0);
    /* --remat auto is train's default too: the bare form adds only -o */
    expect_output("train " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy -o "
                  "mlp.tuned.onnx");
    expect_output("remat auto (no budget: no remat helps here, so none's plan): peak");
    /* without data: --remat sqrt, a -o that train's checks refuse before any work */
    assert_int_equal(run(BIN " " S "mlp.onnx --remat sqrt"), 0);
    expect_output("--remat sqrt: peak");
    expect_output("with --remat sqrt on synthetic data");
    assert_int_equal(run(BIN " " S "mlp.onnx -o /nonexistent-folder/x.onnx"), 3);
    expect_output("/nonexistent-folder");
    /* a train option with a bad value is train's usage error */
    assert_int_equal(run(BIN " " S "mlp.onnx --steps zero"), 2);
    expect_output("--steps");
}

static void test_typo_and_help(void **state) {
    (void)state;
    assert_int_equal(setup(NULL), 0);
    assert_int_equal(run(BIN " trian " S "mlp.onnx"), 2);
    expect_output("unknown command 'trian' (did you mean 'train'?)");
    assert_int_equal(run(BIN " trian"), 2);
    expect_output("unknown command 'trian'");
    assert_int_equal(run(BIN " frobnicate " S "mlp.onnx"), 2);
    cli_expect_in(OUT, "unknown command 'frobnicate'\n");
    assert_int_equal(run(BIN " --remat auto"), 2);
    expect_output("missing MODEL.onnx");
    assert_int_equal(run(BIN " --remat auto nothere"), 2);
    expect_output("neither a command nor a model");
    assert_int_equal(run(BIN " --bogus " S "mlp.onnx"), 2);
    expect_output("--bogus");
    assert_int_equal(run(BIN " " S "mlp.onnx " S "mlp.onnx"), 2);
    expect_output("extra");
    /* a model file without .onnx is taken as it names an existing file */
    assert_int_equal(system("cp " S "mlp.onnx " TMP "/run/mlp.model"), 0);
    assert_int_equal(run(BIN " mlp.model"), 0);
    expect_output("It writes mlp.model.tuned.onnx");
    assert_int_equal(run(BIN " --help"), 0);
    char *o = cli_slurp(OUT);
    assert_non_null(o);
    assert_true(!strncmp(o, "usage: onnxtrain [OPTIONS] MODEL.onnx\n", 38)); /* the bare form first */
    free(o);
    expect_output("unknown command");
    assert_int_equal(run(BIN " " S "mlp.onnx --help"), 0);
    expect_output("The bare form");
    expect_output("never overwrites a file");
    assert_false(exists(TMP "/run/mlp.tuned.onnx"));
    /* the commands are unchanged */
    assert_int_equal(run(BIN " info " S "mlp.onnx"), 0);
    expect_output("ops (2 kinds)");
}

/* x float32 [batch,seq,4] -> MatMul([4,3]) -> logits [batch,seq,3]: a sequence
 * length only the data (or --bind) fixes. */
static void write_seq_model(const char *path) {
    mb *b = mb_new(17);
    int64_t wd[2] = {4, 3}, xd[3] = {-1, -1, 4};
    float w[12];
    for (int i = 0; i < 12; i++)
        w[i] = 0.1f * (float)(i % 5) - 0.2f;
    mb_init_f32(b, "w", 2, wd, w);
    const char *syms[3] = {"batch", "seq", NULL};
    mb_input(b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, xd, syms);
    mb_node(b, "MatMul", "mm", "x,w", "logits");
    mb_output(b, "logits", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    assert_int_equal(mb_write(b, path), 0);
    mb_free(b);
}

/* Without data a symbolic dim past the batch gets a small default, said so, and the
 * command names it; --bind overrides it. */
static void test_symbolic_dims(void **state) {
    (void)state;
    assert_int_equal(setup(NULL), 0);
    write_seq_model(TMP "/run/seq.onnx");
    assert_int_equal(run(BIN " seq.onnx"), 0);
    expect_output("seq = 8 (a small default without data");
    expect_output("x      [4,8,4] synthetic float32 N(0,1)");
    expect_output("labels [4,8] synthetic class labels in [0, 3)");
    expect_output("where X.npy is float32 [N,seq,4]; LABELS.npy is int64 (or int32) [N,8] class indices (as planned, with seq 8)");
    expect_output("bitwise equal: 0 of 2 tensors differ");
    assert_int_equal(run(BIN " seq.onnx --bind seq=3"), 0);
    expect_output("x      [4,3,4] synthetic");
    expect_output("where X.npy is float32 [N,3,4]");
    assert_false(exists(TMP "/run/seq.tuned.onnx"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_no_data_every_sample, setup),
        cmocka_unit_test_setup(test_with_data_every_sample, setup),
        cmocka_unit_test_setup(test_options_anywhere, setup),
        cmocka_unit_test_setup(test_typo_and_help, setup),
        cmocka_unit_test_setup(test_symbolic_dims, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
