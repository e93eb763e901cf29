/* test_tied_embedding.c — a tied embedding's gradient without a second [V, D] buffer
 * (issue 28): on a tiny language model whose head reads the token embedding through a
 * Transpose, autodiff lets the embedding's GatherGrad accumulate onto the head's
 * contribution (its base input, in place) instead of summing a separate scatter.
 *   - the gradients are bitwise those of the graph without the rewrite
 *     (ot_train_options.separate_scatter), as is the loss;
 *   - the rewritten graph has the GatherGrad with a base and no Sum of a scatter;
 *   - the planned peak drops, with and without --fuse-update, and with the fused
 *     update by at least half a [V, D] float32 buffer (26,752 of its 38,400 bytes since
 *     the planner's second placement, which packs the separate scatter's plan tighter:
 *     before, best fit's holes made the drop a whole buffer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fixtures/onnx_builder.h"
#include "importer/importer.h"
#include "kernels/kernel.h"
#include "train/data.h"
#include "train/train.h"

#define TMP OT_BINARY_DIR "/test_tied_embedding_tmp"
enum { B = 2, T = 4, V = 300, D = 32 }; /* the [V, D] buffers dominate the peak */

/* tokens [B, T] -> Gather(wte) -> MatMul(W1) -> Tanh -> MatMul(Transpose(wte)) -> logits */
static void write_model(void) {
    mkdir(TMP, 0755);
    mb *b = mb_new(17);
    const int64_t td[2] = {B, T}, ed[2] = {V, D}, wd[2] = {D, D};
    static float wte[V * D], w1[D * D];
    for (int i = 0; i < V * D; i++) wte[i] = 0.05f * (float)((i * 37) % 23) - 0.55f;
    for (int i = 0; i < D * D; i++) w1[i] = 0.1f * (float)((i * 11) % 7) - 0.3f;
    mb_input(b, "tokens", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, td, NULL);
    mb_init_f32(b, "wte", 2, ed, wte);
    mb_init_f32(b, "W1", 2, wd, w1);
    mb_node(b, "Gather", "embed", "wte,tokens", "e");
    mb_node(b, "MatMul", "fc", "e,W1", "h");
    mb_node(b, "Tanh", "act", "h", "a");
    Onnx__NodeProto *tr = mb_node(b, "Transpose", "tie", "wte", "wte_t");
    mb_attr_ints(b, tr, "perm", (const int64_t[]){1, 0}, 2);
    mb_node(b, "MatMul", "head", "a,wte_t", "logits");
    mb_output(b, "logits", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    assert_int_equal(mb_write(b, TMP "/tied.onnx"), 0);
    mb_free(b);
}

/* Tokens with repeats (several positions scatter into one row) and labels. */
static void make_data(ot_dataset *d) {
    memset(d, 0, sizeof *d);
    ot_error err = {0};
    ot_shape s = ot_shape_make(2, (int64_t[]){B, T});
    ot_tensor *tok = ot_tensor_new(OT_I64, &s), *lab = ot_tensor_new(OT_I64, &s);
    int64_t *t = tok->data, *l = lab->data;
    for (int i = 0; i < B * T; i++) {
        t[i] = (i * 7) % 3 + (i % 5 == 0 ? 200 : 0);
        l[i] = (i * 29 + 3) % V;
    }
    if (ot_dataset_add(d, "tokens", "tokens", -1, tok, &err) || ot_dataset_add(d, OT_DATA_LABELS, "labels", -1, lab, &err))
        fail_msg("%s", err.msg);
}

static ot_model *load(void) {
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    ot_model *m = NULL;
    ot_error err = {0};
    if (ot_model_load(TMP "/tied.onnx", &io, &m, &err)) fail_msg("%s", err.msg);
    return m;
}

static int count_onto_base(const ot_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ot_node *nd = &g->nodes[i];
        if (!nd->removed && nd->op == OT_OP_GATHER_GRAD && nd->n_inputs == 4 && nd->inputs[3] >= 0) n++;
    }
    return n;
}

/* The gradients (and loss) of one forward + backward, with and without the rewrite. */
static void test_bitwise_gradients(void **state) {
    (void)state;
    write_model();
    ot_dataset d;
    make_data(&d);
    ot_tensor *grads[2][4] = {{0}};
    double loss[2] = {0, 0};
    int n_params = 0;
    for (int sep = 0; sep < 2; sep++) {
        ot_train_options o;
        ot_train_options_default(&o);
        o.n_threads = 2;
        o.separate_scatter = sep;
        ot_error err = {0};
        ot_train_session *s = NULL;
        ot_model *m = load(); /* a session that runs takes the weights over */
        if (ot_train_session_new(m, &o, &d, false, &s, &err)) fail_msg("%s", err.msg);
        assert_int_equal(count_onto_base(ot_train_graph(s)), sep ? 0 : 1);
        if (ot_train_grad_once(s, &d, &loss[sep], &err)) fail_msg("%s", err.msg);
        const ot_autodiff_result *ad = ot_train_autodiff(s);
        n_params = ad->n_params;
        assert_int_equal(n_params, 2);
        for (int i = 0; i < n_params; i++) assert_int_equal(ot_train_get_grad(s, i, &grads[sep][i], &err), OT_OK);
        ot_train_session_free(s);
        ot_model_free(m);
    }
    assert_memory_equal(&loss[0], &loss[1], sizeof loss[0]);
    for (int i = 0; i < n_params; i++) {
        assert_int_equal(grads[0][i]->nbytes, grads[1][i]->nbytes);
        assert_memory_equal(grads[0][i]->data, grads[1][i]->data, grads[0][i]->nbytes);
        ot_tensor_free(grads[0][i]);
        ot_tensor_free(grads[1][i]);
    }
    ot_dataset_free(&d);
}

static int64_t planned_peak(ot_model *m, bool fuse, bool sep) {
    ot_train_options o;
    ot_train_options_default(&o);
    o.plan_only = true;
    o.remat = "none";
    o.batch_size = B;
    o.fuse_update = fuse;
    o.separate_scatter = sep;
    ot_optim_config_default(&o.optim, OT_OPTIM_SGD);
    ot_error err = {0};
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, NULL, true, &s, &err)) fail_msg("%s", err.msg);
    ot_train_memory_summary ms;
    ot_train_memory_info(s, &ms);
    ot_train_session_free(s);
    return ms.train_peak;
}

/* The planned peak drops: the scatter no longer needs a [V, D] block of its own. */
static void test_peak_drops(void **state) {
    (void)state;
    write_model();
    ot_model *m = load();
    for (int fuse = 0; fuse < 2; fuse++) {
        int64_t with = planned_peak(m, fuse, false), without = planned_peak(m, fuse, true);
        printf("fuse %d: peak %lld with GatherGrad onto its base, %lld with a separate scatter\n", fuse,
               (long long)with, (long long)without);
        assert_true(with < without);
        if (fuse) assert_true(without - with >= (int64_t)V * D * (int64_t)sizeof(float) / 2);
    }
    ot_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitwise_gradients),
        cmocka_unit_test(test_peak_drops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
