/* test_fuse.c — --fuse-update (ot_train_options.fuse_update, ot_graph.fuse_update):
 *   - the schedule: every optimizer node runs after its gradient's producer and after
 *     every other node that reads its param or state (the forward pass, dX = dY W, a
 *     recompute clone), on tinygpt and the MLP under several remat policies; its gradient is a transient of category
 *     gradients that dies at the update, and the planned peak is below the unfused one;
 *   - the results: train with and without it writes the same bytes (SGD with momentum and
 *     Nesterov, Adam, AdamW with weight decay and a cosine schedule), and verify
 *     --fuse-update says so (exit 0); plan and train agree on the fused peak, which the
 *     run measures;
 *   - the refusals: --clip-grad-norm and --accum K > 1 (exit 2, saying why);
 *   - over MPI ranks (a rank count for planning, ot_dist_for_plan): every param
 *     gradient's block holds the other rank's receive slot, each run of updates is
 *     deferred past the next gradient's completion, and the peak counts the slots
 *     (the bits under mpirun: tests/check_mpi_fuse.py). */
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
#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "kernels/kernel.h"
#include "plan/schedule.h"
#include "plan_check.h"
#include "test_files.h"
#include "train/dist.h"
#include "train/npy.h"
#include "train/train.h"

#define BIN OT_BINARY_DIR "/onnxtrain"
#define S OT_SOURCE_DIR "/samples/"
#define TMP OT_BINARY_DIR "/test_fuse_tmp"
#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)
#define TG "--input " S "data/tinygpt_tokens.npy --labels " S "data/tinygpt_labels.npy"

static int setup(void **state) {
    (void)state;
    mkdir(TMP, 0755);
    return 0;
}

/* A plan-only session over model (no data: the defaults bind the dims). */
static ot_train_session *plan_session(ot_model *m, const char *remat, bool fuse, int64_t batch) {
    ot_train_options o;
    ot_train_options_default(&o);
    o.plan_only = true;
    o.remat = remat;
    o.batch_size = batch;
    o.fuse_update = fuse;
    ot_optim_config_default(&o.optim, OT_OPTIM_ADAM);
    ot_error err = {0};
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, NULL, true, &s, &err)) fail_msg("%s", err.msg);
    return s;
}

/* Every optimizer node after its gradient's producer and every other reader of its
 * inputs; its gradient transient, of category gradients, last read by it. */
static void check_order(ot_train_session *s) {
    ot_graph *g = ot_train_graph(s);
    const ot_plan *p = ot_train_plan(s);
    assert_true(g->fuse_update);
    int *step_of = malloc(sizeof(int) * (size_t)g->n_nodes);
    for (int k = 0; k < g->n_nodes; k++) step_of[k] = -1;
    for (int k = 0; k < p->n_steps; k++) step_of[p->order[k]] = k;
    int n_opt = 0, last_bwd = -1, first_opt = p->n_steps;
    for (int k = 0; k < p->n_steps; k++) {
        const ot_node *nd = &g->nodes[p->order[k]];
        if (nd->phase == OT_PHASE_BACKWARD) last_bwd = k;
        if (nd->phase != OT_PHASE_OPTIMIZER) continue;
        if (k < first_opt) first_opt = k;
        n_opt++;
        for (int i = 0; i < nd->n_inputs; i++) {
            int v = nd->inputs[i];
            if (v < 0) continue;
            const ot_value *val = &g->values[v];
            if (val->producer >= 0 && !g->nodes[val->producer].removed) assert_true(step_of[val->producer] < k);
            for (int c = 0; c < val->n_consumers; c++) {
                const ot_node *r = &g->nodes[val->consumers[c]];
                if (r->removed || r->phase == OT_PHASE_OPTIMIZER) continue;
                if (step_of[r->id] >= k) fail_msg("'%s' reads '%s' at step %d, after its update '%s' at %d", r->name,
                                                  val->name, step_of[r->id], nd->name, k);
            }
        }
        const ot_plan_value *gv = &p->values[nd->inputs[1]];
        assert_false(gv->pinned);
        assert_int_equal(gv->category, OT_MEM_GRADIENTS);
        assert_int_equal(gv->last_step, k);
    }
    assert_true(n_opt > 0);
    assert_true(first_opt < last_bwd); /* fused: updates run inside the backward pass */
    free(step_of);
}

static void test_schedule_after_last_read(void **state) {
    (void)state;
    static const struct {
        const char *model, *remat;
        int64_t batch;
    } cases[] = {
        {"tinygpt.onnx", "none", 4}, {"tinygpt.onnx", "all", 4},   {"tinygpt.onnx", "selective", 4},
        {"tinygpt.onnx", "every:2", 4}, {"mlp.onnx", "none", 8}, {"mlp.onnx", "sqrt", 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = true};
        ot_model *m = NULL;
        ot_error err = {0};
        char path[512];
        snprintf(path, sizeof path, S "%s", cases[i].model);
        if (ot_model_load(path, &io, &m, &err)) fail_msg("%s", err.msg);
        ot_train_session *fused = plan_session(m, cases[i].remat, true, cases[i].batch);
        ot_train_session *plain = plan_session(m, cases[i].remat, false, cases[i].batch);
        check_order(fused);
        size_t pf = ot_plan_peak_bytes(ot_train_plan(fused)), pu = ot_plan_peak_bytes(ot_train_plan(plain));
        print_message("%s --remat %s: peak %zu fused, %zu unfused\n", cases[i].model, cases[i].remat, pf, pu);
        assert_true(pf < pu);
        assert_false(ot_train_graph(plain)->fuse_update);
        ot_train_session_free(fused);
        ot_train_session_free(plain);
        ot_model_free(m);
    }
}

/* A hand-made step where the gradient of w is complete (b1) before a later backward
 * node reads w (b2): the fused update must wait for b2, though it could free its
 * gradient at once after b1. */
static void test_update_waits_for_last_read(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("late_read");
    pc_stem st = pc_weight_stem(g, 16);
    int gw = pc_f32(g, "w_grad", 16, OT_VK_GRADIENT), late = pc_f32(g, "late", 16, OT_VK_ACTIVATION);
    int sc = pc_f32(g, "scalars", 4, OT_VK_OPT_STATE);
    int b1 = pc_node2(g, OT_OP_MUL, "b1", st.d0, st.x, gw, OT_PHASE_BACKWARD);
    int b2 = pc_node2(g, OT_OP_MUL, "b2", st.d0, st.w, late, OT_PHASE_BACKWARD);
    pc_mark_output(g, late);
    int ins[4] = {st.w, gw, -1, sc};
    int u = ot_graph_add_node(g, OT_OP_SGD_STEP, "w/SgdStep", ins, 4, NULL, 0, OT_PHASE_OPTIMIZER);
    assert_true(u >= 0);
    for (int fused = 0; fused < 2; fused++) {
        g->fuse_update = fused;
        int *order = NULL, n = 0;
        ot_error err = {0};
        if (ot_schedule_build(g, &order, &n, &err)) fail_msg("%s", err.msg);
        int at[8] = {0};
        for (int k = 0; k < n; k++) at[order[k]] = k;
        assert_true(at[u] > at[b2] && at[u] > at[b1]);
        if (!fused) assert_int_equal(at[u], n - 1);
        free(order);
        ot_plan *p = pc_plan_of(g, NULL, false);
        assert_int_equal(p->values[gw].pinned, !fused);
        ot_plan_free(p);
    }
    ot_graph_free(g);
}

/* A weight the backward pass reads again (dX = dY W of a MatMul) and, under --remat
 * all, a recompute clone reads too: its update waits for the last of those reads, not
 * only for its gradient (check_order checks every reader of every update). */
static void test_weight_read_in_backward(void **state) {
    (void)state;
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = true};
    ot_model *m = NULL;
    ot_error err = {0};
    if (ot_model_load(S "tinygpt.onnx", &io, &m, &err)) fail_msg("%s", err.msg);
    ot_train_session *s = plan_session(m, "all", true, 4);
    ot_graph *g = ot_train_graph(s);
    int n_bwd = 0, n_clone = 0;
    for (int v = 0; v < g->n_values; v++) {
        if (g->values[v].kind != OT_VK_PARAM) continue;
        for (int c = 0; c < g->values[v].n_consumers; c++) {
            const ot_node *r = &g->nodes[g->values[v].consumers[c]];
            n_bwd += !r->removed && r->phase == OT_PHASE_BACKWARD;
            n_clone += !r->removed && r->phase == OT_PHASE_RECOMPUTE;
        }
    }
    assert_true(n_bwd > 0);   /* the test means something: weights read by gradient nodes */
    assert_true(n_clone > 0); /* and by recompute clones */
    check_order(s);
    ot_train_session_free(s);
    ot_model_free(m);
}

/* train with and without --fuse-update writes the same bytes. */
static void test_bitwise_train(void **state) {
    (void)state;
    static const struct {
        const char *model, *data, *args;
    } cases[] = {
        {"mlp.onnx", "--input " S "data/mlp_x.npy --labels " S "data/mlp_labels.npy",
         "--optimizer sgd --momentum 0.9 --nesterov --weight-decay 0.01 --remat none"},
        {"tinygpt.onnx", TG, "--optimizer adam --weight-decay 0.01 --remat all --batch-size 4"},
        {"tinygpt.onnx", TG, "--optimizer sgd --momentum 0.9 --remat selective --batch-size 4 --schedule warmup "
                             "--warmup-steps 2"},
        {"resnet.onnx", "--input " S "data/resnet_x.npy --labels " S "data/resnet_labels.npy",
         "--optimizer adamw --weight-decay 0.05 --schedule cosine --warmup-steps 1 --remat sqrt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (int f = 0; f < 2; f++)
            assert_int_equal(run(BIN " train " S "%s %s %s %s --steps 3 --threads 2 --quiet -o " TMP "/t%d.onnx",
                                 cases[i].model, cases[i].data, cases[i].args, f ? "--fuse-update" : "", f),
                             0);
        assert_int_equal(run("cmp " TMP "/t0.onnx " TMP "/t1.onnx"), 0);
    }
}

/* verify --fuse-update compares N fused and unfused steps and says equal; plan and
 * train agree on the fused peak and the run measures it. */
static void test_verify_and_plan(void **state) {
    (void)state;
    assert_int_equal(run(BIN " verify " S "tinygpt.onnx " TG " --batch-size 4 --remat all --optimizer adamw "
                             "--weight-decay 0.1 --schedule cosine --fuse-update --time-steps 0 --json"),
                     0);
    cli_expect_in(TMP "/out.txt", "\"fuse_update\": {\"steps\": 3, \"equal\": true");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 4 --optimizer adam --remat all --fuse-update --json"),
                     0);
    long long plan = (long long)cli_json_nth(TMP "/out.txt", "\"peak_bytes\": ", 2);
    assert_int_equal(run(BIN " train " S "tinygpt.onnx " TG " --batch-size 4 --optimizer adam --remat all --fuse-update "
                             "--steps 1 --threads 2 --quiet -o " TMP "/t.onnx --report " TMP "/report.json"),
                     0);
    assert_int_equal(plan, (long long)cli_json_nth(TMP "/report.json", "\"planned_peak\": ", 0));
    assert_int_equal(plan, (long long)cli_json_nth(TMP "/report.json", "\"measured_peak\": ", 0));
    /* a budget only the fused step fits: auto finds a plan, and plan says the unfused has none */
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 8 --optimizer adam --remat auto --memory-budget 800K"),
                     9);
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 8 --optimizer adam --remat auto --memory-budget 800K "
                             "--fuse-update"),
                     0);
    cli_expect_in(TMP "/out.txt", "--fuse-update: without it the budget holds no plan");
}

/* plan --ranks 2 --fuse-update as a session sees it: slots, deferred updates, peak. */
static void test_ranks_slots_and_deferral(void **state) {
    (void)state;
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = true};
    ot_model *m = NULL;
    ot_error err = {0};
    if (ot_model_load(S "tinygpt.onnx", &io, &m, &err)) fail_msg("%s", err.msg);
    ot_dist *d = NULL;
    assert_int_equal(ot_dist_for_plan(2, &d, &err), OT_OK);
    ot_train_options o;
    ot_train_options_default(&o);
    o.plan_only = true;
    o.remat = "none";
    o.batch_size = 8;
    o.fuse_update = true;
    ot_optim_config_default(&o.optim, OT_OPTIM_ADAM);
    if (ot_dist_train_options(d, &o, false, &err)) fail_msg("%s", err.msg);
    assert_int_equal(o.batch_size, 4);
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, NULL, true, &s, &err)) fail_msg("%s", err.msg);
    ot_train_session *one = plan_session(m, "none", true, 4);
    ot_graph *g = ot_train_graph(s);
    const ot_plan *p = ot_train_plan(s), *p1 = ot_train_plan(one);
    assert_int_equal(g->sum_ranks, 2);
    check_order(s); /* the deferred order still puts every update after every read */
    int n_opt = 0, waited = 0;
    for (int k = 0; k < p->n_steps; k++) {
        const ot_node *nd = &g->nodes[p->order[k]];
        if (nd->phase != OT_PHASE_OPTIMIZER) continue;
        const ot_plan_value *gv = &p->values[nd->inputs[1]];
        assert_true(gv->nbytes > 0);
        assert_int_equal(gv->recv_bytes, gv->nbytes); /* one slot: the other rank's */
        assert_true(gv->recv_offset >= 0 && gv->offset >= 0); /* its own block, beside the gradient's */
        assert_true(gv->recv_offset >= gv->offset + (int64_t)gv->nbytes ||
                    gv->offset >= gv->recv_offset + (int64_t)gv->recv_bytes);
        assert_int_equal(p1->values[nd->inputs[1]].recv_bytes, 0);
        n_opt++;
        for (int j = gv->def_step + 1; j < k; j++) /* backward work between completion and update */
            if (g->nodes[p->order[j]].phase != OT_PHASE_OPTIMIZER) {
                waited++;
                break;
            }
    }
    print_message("tinygpt, 2 ranks: %d of %d updates wait past backward steps; peak %zu (one process, same "
                  "per-rank batch: %zu)\n", waited, n_opt, p->peak_bytes, p1->peak_bytes);
    assert_true(n_opt > 2 && waited >= n_opt / 2);
    assert_true(p->peak_bytes > p1->peak_bytes);
    assert_true(p->total[OT_MEM_GRADIENTS] > p1->total[OT_MEM_GRADIENTS]);
    ot_train_session_free(s);
    ot_train_session_free(one);
    ot_dist_finalize(d);
    ot_model_free(m);
}

static void test_refusals(void **state) {
    (void)state;
    assert_int_equal(run(BIN " train " S "tinygpt.onnx " TG " --batch-size 4 --clip-grad-norm 1 --fuse-update --steps 1 "
                             "-o " TMP "/t.onnx"),
                     2);
    cli_expect_in(TMP "/out.txt", "--fuse-update with --clip-grad-norm");
    assert_int_equal(run(BIN " train " S "tinygpt.onnx " TG " --batch-size 2 --accum 2 --fuse-update --steps 1 -o " TMP
                             "/t.onnx"),
                     2);
    cli_expect_in(TMP "/out.txt", "--fuse-update with --accum 2");
    assert_int_equal(run(BIN " plan " S "tinygpt.onnx --batch-size 4 --clip-grad-norm 1 --fuse-update"), 2);
}

/* y = MatMul(MatMul(x * Sqrt(w), W1), W2) with w[0] = 0: the loss is finite, w's
 * gradient is not (Sqrt's derivative at 0), and the updates of W2 and W1 (their
 * gradients are complete first) run before w's check in the fused step. */
static void write_sqrt_model(bool deep) {
    mb *b = mb_new(17);
    const int64_t xd[2] = {4, 4}, wd[1] = {4}, w1d[2] = {4, 3}, w2d[2] = {3, 3};
    const float w[4] = {0.0f, 1.0f, 1.0f, 1.0f};
    float w1[12], w2[9], x[16];
    for (int i = 0; i < 12; i++) w1[i] = 0.1f * (float)(i % 5) - 0.2f;
    for (int i = 0; i < 9; i++) w2[i] = 0.15f * (float)(i % 4) - 0.2f;
    for (int i = 0; i < 16; i++) x[i] = 0.25f + 0.05f * (float)i;
    mb_input(b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd, NULL);
    mb_init_f32(b, "w", 1, wd, w);
    mb_init_f32(b, "W1", 2, w1d, w1);
    if (deep) mb_init_f32(b, "W2", 2, w2d, w2);
    mb_node(b, "Sqrt", "sqrt", "w", "s");
    mb_node(b, "Mul", "mul", "x,s", "h");
    if (deep) { /* W2's update runs before w's check */
        mb_node(b, "MatMul", "fc", "h,W1", "h1");
        mb_node(b, "MatMul", "head", "h1,W2", "logits");
    } else { /* h [4,4] straight into W1 (frozen by the caller: then w's update is the only one) */
        mb_node(b, "MatMul", "head", "h,W1", "logits");
    }
    mb_output(b, "logits", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    assert_int_equal(mb_write(b, TMP "/sqrt.onnx"), 0);
    mb_free(b);
    ot_error err = {0};
    ot_shape xs = ot_shape_make(2, xd), ls = ot_shape_make(1, (int64_t[]){4});
    ot_tensor *xt = ot_tensor_new(OT_F32, &xs), *lt = ot_tensor_new(OT_I64, &ls);
    memcpy(xt->data, x, sizeof x);
    const int64_t lab[4] = {0, 1, 2, 0};
    memcpy(lt->data, lab, sizeof lab);
    if (ot_npy_write(TMP "/sqrt_x.npy", xt, &err) || ot_npy_write(TMP "/sqrt_y.npy", lt, &err)) fail_msg("%s", err.msg);
    ot_tensor_free(xt);
    ot_tensor_free(lt);
}

/* A non-finite gradient in a fused step: exit 10, the message says how many params were
 * already updated and writes nothing; unfused, or fused before any update ran, the
 * diagnosis names the node. */
static void test_nonfinite_gradient(void **state) {
    (void)state;
    write_sqrt_model(true);
    remove(TMP "/sqrt_tuned.onnx");
    const char *args = " --input " TMP "/sqrt_x.npy --labels " TMP "/sqrt_y.npy --optimizer sgd --steps 1 -o " TMP
                       "/sqrt_tuned.onnx";
    assert_int_equal(run(BIN " train " TMP "/sqrt.onnx%s --fuse-update", args), 10);
    cli_expect_in(TMP "/out.txt", "the gradient of 'w' is not finite");
    cli_expect_in(TMP "/out.txt", " of 3 params were already updated"); /* 0 updated gives the diagnosis instead */
    FILE *f = fopen(TMP "/sqrt_tuned.onnx", "rb");
    assert_null(f); /* nothing written */
    assert_int_equal(run(BIN " train " TMP "/sqrt.onnx%s", args), 10);
    cli_expect_in(TMP "/out.txt", "is the first to produce a non-finite value");
    /* fused, but no update ran before the bad gradient's check: the usual diagnosis. W1
     * frozen: a trained W1's update would run as soon as its gradient is complete, which
     * is before w's (plan/schedule.h: a gradient only its update reads costs nothing) */
    write_sqrt_model(false);
    assert_int_equal(run(BIN " train " TMP "/sqrt.onnx%s --fuse-update --freeze W1", args), 10);
    cli_expect_in(TMP "/out.txt", "is the first to produce a non-finite value");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_update_waits_for_last_read),
        cmocka_unit_test(test_schedule_after_last_read),
        cmocka_unit_test(test_weight_read_in_backward),
        cmocka_unit_test(test_bitwise_train),
        cmocka_unit_test(test_verify_and_plan),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_ranks_slots_and_deferral),
        cmocka_unit_test(test_nonfinite_gradient),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
