/* test_session.c — the one session builder (train/session.h, train/train.h):
 *   - ot_graph_clone copies a graph exactly (same dump, same data) and independently;
 *   - one import serves any number of plans: sessions at other batch sizes and
 *     policies bind their own copies, the imported graph stays unbound, and the
 *     weights come home when a session ends;
 *   - `plan` and `train` state the same peak for the same model, batch, policy and
 *     optimizer (the built binary: plan --json against train --report; with
 *     validation data the validation plan's too), and plan's
 *     smallest feasible budget for --remat auto is one that train accepts;
 *   - --batch-size auto probes plans over the one import, and what it picks fits. */
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
#include "importer/importer.h"
#include "test_files.h"
#include "train/npy.h"
#include "train/session.h"
#include "train/train.h"
#include "train/train_memory.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_session_tmp"
#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    return 0;
}

/* The text dump of g (values, nodes, attributes, shapes, symbols). */
static char *dump(const ot_graph *g) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    ot_graph_dump_text(g, f);
    fclose(f);
    return buf;
}

static void test_clone_exact(void **state) {
    (void)state;
    const char *models[] = {"mlp.onnx", "resnet.onnx", "tinygpt.onnx", "mobilenet.onnx"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        ot_model *m = test_model(S "%s", models[i]);
        ot_graph *g = m->graph;
        ot_graph *c = ot_graph_clone(g, true), *bare = ot_graph_clone(g, false);
        assert_non_null(c);
        assert_non_null(bare);
        char *a = dump(g), *b = dump(c);
        assert_string_equal(a, b);
        assert_int_equal(c->n_values, g->n_values);
        assert_int_equal(c->n_nodes, g->n_nodes);
        assert_int_equal(c->n_syms, g->n_syms);
        assert_ptr_equal(c->fold_eval, g->fold_eval);
        int n_data = 0;
        for (int v = 0; v < g->n_values; v++) {
            const ot_value *x = &g->values[v], *y = &c->values[v];
            assert_int_equal(x->n_consumers, y->n_consumers);
            if (x->n_consumers) assert_memory_equal(x->consumers, y->consumers, (size_t)x->n_consumers * sizeof(int));
            assert_int_equal(x->nbytes, bare->values[v].nbytes);
            assert_null(bare->values[v].data);
            if (!x->data) continue;
            n_data++;
            assert_true(y->data != x->data);
            assert_memory_equal(x->data, y->data, x->nbytes);
        }
        assert_true(n_data > 0);
        free(a);
        free(b);
        ot_graph_free(c);
        ot_graph_free(bare);
        ot_model_free(m);
    }
}

/* Binding a dim on a copy leaves the original as imported. */
static void test_clone_independent(void **state) {
    (void)state;
    ot_error err = {0};
    ot_model *m = test_model(S "tinygpt.onnx");
    ot_graph *g = m->graph;
    char *before = dump(g);
    ot_graph *c = ot_graph_clone(g, true);
    assert_non_null(c);
    const ot_value *x = &c->values[c->inputs[0]];
    assert_true(x->shape.dim[0] < 0 && x->shape.sym[0] >= 0);
    if (ot_graph_bind_dim(c, c->syms[x->shape.sym[0]], 3, &err)) fail_msg("%s", err.msg);
    assert_int_equal(c->values[c->inputs[0]].shape.dim[0], 3);
    ot_node_set_attr_int(&c->nodes[0], "extra", 1);
    char *after = dump(g);
    assert_string_equal(before, after);
    free(before);
    free(after);
    ot_graph_free(c);
    ot_model_free(m);
}

static void load_data(const char *x, const char *y, ot_dataset *d) {
    ot_error err = {0};
    memset(d, 0, sizeof *d);
    if (ot_dataset_add(d, "", x, -1, test_npy("%s", x), &err)) fail_msg("%s", err.msg);
    if (ot_dataset_add(d, OT_DATA_LABELS, y, -1, test_npy("%s", y), &err)) fail_msg("%s", err.msg);
}

/* Two batch sizes and two policies from one import; it stays unbound, its weights
 * are lent to the session that runs and come back bit for bit. */
static void test_one_import_many_plans(void **state) {
    (void)state;
    ot_error err = {0};
    ot_model *m = test_model(S "tinygpt.onnx");
    ot_graph *g = m->graph;
    char *before = dump(g);
    int wq = ot_graph_find_value(g, "blocks.0.attn.qkv.weight");
    assert_true(wq >= 0 && g->values[wq].data);
    void *w0 = malloc(g->values[wq].nbytes);
    memcpy(w0, g->values[wq].data, g->values[wq].nbytes);
    ot_dataset d;
    load_data(S "data/tinygpt_tokens.npy", S "data/tinygpt_labels.npy", &d);
    ot_train_options o;
    ot_train_options_default(&o);
    o.n_threads = 2;
    o.plan_only = true;
    int64_t peaks[2];
    ot_train_session *s[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        o.batch_size = 2 + 2 * k;
        o.remat = k ? "sqrt" : "none";
        if (ot_train_session_new(m, &o, NULL, true, &s[k], &err)) fail_msg("%s", err.msg);
        assert_int_equal(ot_train_batch_size(s[k]), o.batch_size);
        peaks[k] = (int64_t)ot_plan_peak_bytes(ot_train_plan(s[k]));
    }
    assert_true(peaks[1] > peaks[0]); /* batch 4 needs more than 2, even with sqrt */
    /* one that runs, while the others exist */
    o.plan_only = false;
    o.batch_size = 4;
    o.steps = 1;
    o.keep_host_weights = true; /* else the executor keeps the only copy until a run ends */
    ot_train_session *r = NULL;
    if (ot_train_session_new(m, &o, &d, true, &r, &err)) fail_msg("%s", err.msg);
    assert_null(g->values[wq].data); /* lent */
    ot_train_session_free(r); /* the copies it kept go home */
    for (int k = 0; k < 2; k++) ot_train_session_free(s[k]);
    char *after = dump(g);
    assert_string_equal(before, after);
    assert_non_null(g->values[wq].data);
    assert_memory_equal(g->values[wq].data, w0, g->values[wq].nbytes);
    free(before);
    free(after);
    free(w0);
    ot_dataset_free(&d);
    ot_model_free(m);
}

/* plan --json's policy plan against train's planned and measured peak, same model,
 * batch, policy and optimizer. */
static void test_plan_equals_train(void **state) {
    (void)state;
    static const struct {
        const char *model, *data, *batch, *args;
    } cases[] = {
        {"mlp.onnx", "--input " S "mlp/input.npy --labels " S "mlp/labels.npy", "4",
         "--optimizer adam --remat none"},
        {"mlp.onnx", "--input " S "mlp/input.npy --labels " S "mlp/labels.npy", "4",
         "--optimizer adamw --remat sqrt"},
        {"resnet.onnx", "--input " S "resnet/input.npy --labels " S "resnet/labels.npy", "8",
         "--optimizer sgd --momentum 0.9 --remat all"},
        {"tinygpt.onnx", "--input " S "data/tinygpt_tokens.npy --labels " S "data/tinygpt_labels.npy", "4",
         "--remat selective"},
        {"tinygpt.onnx", "--input " S "data/tinygpt_tokens.npy --labels " S "data/tinygpt_labels.npy", "4",
         "--optimizer adam --remat every:2 --freeze 'blocks\\.0\\..*'"},
        {"tinygpt.onnx", "--input " S "data/tinygpt_tokens.npy --labels " S "data/tinygpt_labels.npy", "2",
         "--optimizer adamw --accum 3 --remat sqrt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_int_equal(run(BIN " plan " S "%s --batch-size %s %s --json", cases[i].model, cases[i].batch,
                             cases[i].args),
                         0);
        /* plans[1].peak_bytes: after plans[0]'s own and its plan object's */
        long long plan = (long long)cli_json_nth(TMP "/out.txt", "\"peak_bytes\": ", 2);
        assert_int_equal(run(BIN " train " S "%s %s --batch-size %s %s --steps 1 --threads 2 --quiet -o " TMP
                                 "/tuned.onnx --report " TMP "/report.json",
                             cases[i].model, cases[i].data, cases[i].batch, cases[i].args),
                         0);
        long long planned = (long long)cli_json_nth(TMP "/report.json", "\"planned_peak\": ", 0);
        long long measured = (long long)cli_json_nth(TMP "/report.json", "\"measured_peak\": ", 0);
        print_message("%s %s: plan %lld, train planned %lld, measured %lld\n", cases[i].model, cases[i].args, plan,
                      planned, measured);
        assert_int_equal(plan, planned);
        assert_int_equal(plan, measured);
    }
}

/* With validation data both plan the forward-only validation plan too, alike. */
static void test_plan_equals_train_validation(void **state) {
    (void)state;
#define RESNET_DATA "--input " S "resnet/input.npy --labels " S "resnet/labels.npy"
#define RESNET_VAL "--val-input " S "resnet/input.npy --val-labels " S "resnet/labels.npy"
    assert_int_equal(run(BIN " plan " S "resnet.onnx " RESNET_VAL " --optimizer adam --remat sqrt --json"), 0);
    long long plan = (long long)cli_json_nth(TMP "/out.txt", "\"peak_bytes\": ", 2);
    long long plan_val = (long long)cli_json_nth(TMP "/out.txt", "\"validation_peak_bytes\": ", 1);
    assert_int_equal(run(BIN " train " S "resnet.onnx " RESNET_DATA " " RESNET_VAL " --optimizer adam --remat sqrt "
                             "--steps 1 --quiet -o " TMP "/tuned.onnx --report " TMP "/report.json"),
                     0);
    assert_int_equal(plan, (long long)cli_json_nth(TMP "/report.json", "\"planned_peak\": ", 0));
    assert_int_equal(plan_val, (long long)cli_json_nth(TMP "/report.json", "\"val_planned_peak\": ", 0));
    assert_true(plan_val > 0);
}

/* An infeasible budget makes plan state the smallest peak; train accepts exactly
 * that budget with --remat auto, and refuses a byte less. */
static void test_smallest_budget_accepted(void **state) {
    (void)state;
    static const struct {
        const char *model, *data, *args;
    } cases[] = {
        {"mlp.onnx", "--input " S "mlp/input.npy --labels " S "mlp/labels.npy", "--batch-size 4"},
        {"mlp.onnx", "--input " S "mlp/input.npy --labels " S "mlp/labels.npy", "--batch-size 4 --optimizer adam"},
        {"tinygpt.onnx", "--input " S "data/tinygpt_tokens.npy --labels " S "data/tinygpt_labels.npy",
         "--batch-size 4 --optimizer sgd --momentum 0.9"},
        {"mlp.onnx", "--input " S "mlp/input.npy --labels " S "mlp/labels.npy", "--batch-size 2 --accum 3 --optimizer adam"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_int_equal(run(BIN " plan " S "%s %s --remat auto --memory-budget 1K", cases[i].model, cases[i].args), 9);
        long long least = (long long)cli_json_nth(TMP "/out.txt", "the smallest planned peak is ", 0);
        assert_true(least > 1024);
        assert_int_equal(run(BIN " plan " S "%s %s --remat auto --memory-budget %lld", cases[i].model, cases[i].args,
                             least),
                         0);
        assert_int_equal(run(BIN " train " S "%s %s %s --remat auto --memory-budget %lld --steps 1 --quiet -o " TMP
                                 "/tuned.onnx",
                             cases[i].model, cases[i].data, cases[i].args, least),
                         0);
        assert_int_equal(run(BIN " train " S "%s %s %s --remat auto --memory-budget %lld --steps 1 --quiet -o " TMP
                                 "/tuned.onnx",
                             cases[i].model, cases[i].data, cases[i].args, least - 1),
                         9);
    }
}

/* --batch-size auto over one import: the batch it picks fits, the next does not,
 * and the model is as imported afterwards. */
static void test_find_batch_one_import(void **state) {
    (void)state;
    ot_error err = {0};
    ot_model *m = test_model(S "tinygpt.onnx");
    char *before = dump(m->graph);
    ot_train_options o;
    ot_train_options_default(&o);
    o.remat = "sqrt";
    ot_optim_config_default(&o.optim, OT_OPTIM_ADAM);
    int64_t budget = 2 << 20, b = 0;
    if (ot_train_find_batch(m, &o, true, budget, 64, &b, &err)) fail_msg("%s", err.msg);
    assert_true(b >= 1 && b < 64);
    int64_t peak[2];
    for (int k = 0; k < 2; k++) {
        ot_train_options po = o;
        po.plan_only = true;
        po.batch_size = b + k;
        ot_train_session *s = NULL;
        if (ot_train_session_new(m, &po, NULL, true, &s, &err)) fail_msg("%s", err.msg);
        peak[k] = (int64_t)ot_plan_peak_bytes(ot_train_plan(s));
        ot_train_session_free(s);
    }
    print_message("tinygpt sqrt adam within %lld bytes: batch %lld (peak %lld; %lld at %lld)\n", (long long)budget,
                  (long long)b, (long long)peak[0], (long long)peak[1], (long long)(b + 1));
    assert_true(peak[0] <= budget && peak[1] > budget);
    char *after = dump(m->graph);
    assert_string_equal(before, after);
    free(before);
    free(after);
    ot_model_free(m);
}

/* Every command takes the session's options: --bind, --freeze and the optimizer on
 * plan and verify, data on plan; their --help lists them. */
static void test_options_everywhere(void **state) {
    (void)state;
    const char *cmds[] = {"plan", "verify", "train"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(run(BIN " %s --help", cmds[i]), 0);
        cli_expect_in(TMP "/out.txt", "--bind");
        cli_expect_in(TMP "/out.txt", "--freeze");
        cli_expect_in(TMP "/out.txt", "--optimizer");
        cli_expect_in(TMP "/out.txt", "--accum");
        cli_expect_in(TMP "/out.txt", "--input");
    }
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(run(BIN " %s --help", i ? "grad" : "eval"), 0);
        cli_expect_in(TMP "/out.txt", "--bind");
    }
    /* freezing the first block lowers plan's peak (fewer gradients and moments) */
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 4 --remat none --optimizer adam --json"), 0);
    long long all = (long long)cli_json_nth(TMP "/out.txt", "\"peak_bytes\": ", 0);
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 4 --remat none --optimizer adam --freeze "
                             "'blocks\\.0\\..*' --json"),
                     0);
    long long frozen = (long long)cli_json_nth(TMP "/out.txt", "\"peak_bytes\": ", 0);
    assert_true(frozen < all);
    /* the data gives plan its batch: min(32, samples) as train */
    assert_int_equal(run(BIN " plan " S "mlp.onnx --input " S "mlp/input.npy --labels " S "mlp/labels.npy --remat none"),
                     0);
    cli_expect_in(TMP "/out.txt", "batch 7");
    assert_int_equal(run(BIN " verify " S "tinygpt.onnx --input " S "data/tinygpt_tokens.npy --labels " S
                             "data/tinygpt_labels.npy --batch-size 4 --remat sqrt --freeze 'blocks\\.0\\..*' "
                             "--optimizer adam --threads 2"),
                     0);
    cli_expect_in(TMP "/out.txt", "0 of ");
    assert_int_equal(run(BIN " verify " S "tinygpt.onnx --input " S "data/tinygpt_tokens.npy --labels " S
                             "data/tinygpt_labels.npy --batch-size 4 --remat sqrt --bind nosuchdim=3"),
                     7);
    cli_expect_in(TMP "/out.txt", "nosuchdim");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clone_exact),
        cmocka_unit_test(test_clone_independent),
        cmocka_unit_test(test_one_import_many_plans),
        cmocka_unit_test(test_plan_equals_train),
        cmocka_unit_test(test_plan_equals_train_validation),
        cmocka_unit_test(test_smallest_budget_accepted),
        cmocka_unit_test(test_find_batch_one_import),
        cmocka_unit_test(test_options_everywhere),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
