/* test_executor.c — the executor end to end on hand-built graphs over a test backend
 * whose tiny kernels are written here (so the executor is tested independently of
 * kernels/cpu): one arena of exactly the planned peak, results, measured high-water
 * == planned peak, input dtype/shape errors, unsupported nodes all listed at once,
 * node failures naming node and op, RNG node ids, pinned reads and writes, views
 * that alias their input running no kernel (the test backend has none for them)
 * while in-place ops leave the shared block alone. The same graph also runs on the
 * real CPU backend and must give the same numbers; so do contiguous and strided
 * slices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "exec/executor.h"

/* ---- a test backend ---------------------------------------------------------- */

typedef struct test_be {
    ot_backend be;
    int n_allocs;
    size_t alloc_bytes;
    int rng_seen[16]; /* ctx->rng_node per node id */
    bool ws_ok;       /* MatMul got its workspace */
} test_be;

static ot_status tb_alloc(ot_backend *be, size_t bytes, void **base, ot_error *err) {
    test_be *t = (test_be *)be;
    t->n_allocs++;
    t->alloc_bytes = bytes;
    /* Exactly `bytes`, so an access past the plan is caught by ASan / valgrind. */
    *base = calloc(1, bytes ? bytes : 1);
    return *base ? OT_OK : ot_fail(err, OT_E_MEMORY, "oom");
}
static void tb_free(ot_backend *be, void *base) {
    (void)be;
    free(base);
}
static ot_status tb_copy(ot_backend *be, void *dst, const void *src, size_t n, ot_error *err) {
    (void)be;
    (void)err;
    memcpy(dst, src, n);
    return OT_OK;
}
static size_t tb_ws(ot_backend *be, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)be;
    (void)out;
    return node->op == OT_OP_MATMUL ? (size_t)in[0].shape.dim[1] * sizeof(float) : 0;
}
static bool tb_supports(ot_backend *be, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)be;
    (void)out;
    switch (node->op) {
    case OT_OP_RELU:
    case OT_OP_NEG:
    case OT_OP_EXP:
    case OT_OP_ADD:
    case OT_OP_MATMUL: return in[0].dtype == OT_F32;
    default: return false;
    }
}
static ot_status tb_run(ot_backend *be, const ot_graph *g, const ot_node *node, const ot_tensor *in, ot_tensor *out,
                        const ot_kernel_ctx *ctx, ot_error *err) {
    (void)g;
    test_be *t = (test_be *)be;
    if (node->id < 16) t->rng_seen[node->id] = ctx->rng_node;
    const float *a = in[0].data;
    float *y = out[0].data;
    int64_t n = ot_shape_numel(&out[0].shape);
    switch (node->op) {
    case OT_OP_RELU:
        for (int64_t i = 0; i < n; i++) y[i] = a[i] > 0 ? a[i] : 0;
        return OT_OK;
    case OT_OP_NEG:
        for (int64_t i = 0; i < n; i++) y[i] = -a[i];
        return OT_OK;
    case OT_OP_EXP:
        for (int64_t i = 0; i < n; i++)
            if (a[i] > 80) return ot_fail(err, OT_E_NUMERICS, "overflow at element %lld", (long long)i);
        for (int64_t i = 0; i < n; i++) y[i] = expf(a[i]);
        return OT_OK;
    case OT_OP_ADD: {
        const float *b = in[1].data;
        for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
        return OT_OK;
    }
    case OT_OP_MATMUL: { /* [m,k] x [k,n]; a row of B's column staged in the workspace */
        const float *b = in[1].data;
        int64_t m = in[0].shape.dim[0], k = in[0].shape.dim[1], nn = in[1].shape.dim[1];
        float *col = ctx->workspace;
        t->ws_ok = col && ctx->workspace_bytes >= (size_t)k * sizeof(float);
        if (!t->ws_ok) return ot_fail(err, OT_E_INTERNAL, "no workspace");
        for (int64_t j = 0; j < nn; j++) {
            for (int64_t p = 0; p < k; p++) col[p] = b[p * nn + j];
            for (int64_t i = 0; i < m; i++) {
                float s = 0;
                for (int64_t p = 0; p < k; p++) s += a[i * k + p] * col[p];
                y[i * nn + j] = s;
            }
        }
        return OT_OK;
    }
    default: return ot_fail(err, OT_E_UNSUPPORTED, "no kernel");
    }
}
static ot_status tb_sync(ot_backend *be, ot_error *err) {
    (void)be;
    (void)err;
    return OT_OK;
}

static void tb_init(test_be *t) {
    memset(t, 0, sizeof *t);
    t->be = (ot_backend){.name = "test", .arena_alloc = tb_alloc, .arena_free = tb_free, .copy_in = tb_copy,
                         .copy_out = tb_copy, .run_node = tb_run, .workspace_bytes = tb_ws,
                         .supports = tb_supports, .synchronize = tb_sync};
    for (int i = 0; i < 16; i++) t->rng_seen[i] = -99;
}

/* ---- graphs -------------------------------------------------------------------- */

static int val(ot_graph *g, const char *name, int r, int c, ot_value_kind kind) {
    int64_t d[2] = {r, c};
    ot_shape s = ot_shape_make(2, d);
    int v = ot_graph_add_value(g, name, OT_F32, &s, kind);
    assert_true(v >= 0);
    return v;
}

/* x[3,4] -> Relu -> a -> MatMul(a, W[4,2]) -> m -> Neg -> n -> Add(n, b) -> y ;
 * Exp(y) -> e. Outputs y and e. */
static ot_graph *build(void) {
    ot_graph *g = ot_graph_new("exec");
    int x = val(g, "x", 3, 4, OT_VK_INPUT);
    int W = val(g, "W", 4, 2, OT_VK_PARAM);
    int b = val(g, "b", 3, 2, OT_VK_CONSTANT);
    int a = val(g, "a", 3, 4, OT_VK_ACTIVATION);
    int m = val(g, "m", 3, 2, OT_VK_ACTIVATION);
    int n = val(g, "n", 3, 2, OT_VK_ACTIVATION);
    int y = val(g, "y", 3, 2, OT_VK_ACTIVATION);
    int e = val(g, "e", 3, 2, OT_VK_ACTIVATION);
    float wd[8], bd[6];
    for (int i = 0; i < 8; i++) wd[i] = 0.25f * (float)(i - 3);
    for (int i = 0; i < 6; i++) bd[i] = 0.5f * (float)i;
    ot_value_set_data(&g->values[W], wd, sizeof wd);
    ot_value_set_data(&g->values[b], bd, sizeof bd);
    ot_graph_add_node(g, OT_OP_RELU, "relu", &x, 1, &a, 1, OT_PHASE_FORWARD);
    int mm[2] = {a, W};
    ot_graph_add_node(g, OT_OP_MATMUL, "matmul", mm, 2, &m, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_NEG, "neg", &m, 1, &n, 1, OT_PHASE_FORWARD);
    int ad[2] = {n, b};
    ot_graph_add_node(g, OT_OP_ADD, "add", ad, 2, &y, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_EXP, "exp", &y, 1, &e, 1, OT_PHASE_FORWARD);
    g->inputs = malloc(sizeof(int));
    g->inputs[0] = x;
    g->n_inputs = 1;
    g->outputs = malloc(2 * sizeof(int));
    g->outputs[0] = y;
    g->outputs[1] = e;
    g->n_outputs = 2;
    g->values[y].is_graph_output = g->values[e].is_graph_output = true;
    return g;
}

static ot_tensor *input_x(float scale) {
    int64_t d[2] = {3, 4};
    ot_shape s = ot_shape_make(2, d);
    ot_tensor *t = ot_tensor_new(OT_F32, &s);
    float *p = t->data;
    for (int i = 0; i < 12; i++) p[i] = scale * (float)(i - 5);
    return t;
}

/* The expected y = -(relu(x) @ W) + b, computed naively here. */
static void expected_y(const float *x, const float *W, const float *b, float *y) {
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            double s = 0;
            for (int p = 0; p < 4; p++) s += (double)(x[i * 4 + p] > 0 ? x[i * 4 + p] : 0) * W[p * 2 + j];
            y[i * 2 + j] = (float)(-s + b[i * 2 + j]);
        }
}

static void test_run_end_to_end(void **state) {
    (void)state;
    test_be tb;
    tb_init(&tb);
    ot_graph *g = build();
    ot_executor *ex = NULL;
    ot_error err = {0};
    ot_exec_options opt = {.seed = 7};
    if (ot_executor_new(g, &tb.be, &opt, &ex, &err)) fail_msg("%s", err.msg);
    const ot_plan *p = ot_executor_plan(ex);
    assert_int_equal(tb.n_allocs, 1);
    assert_int_equal(tb.alloc_bytes, ot_plan_peak_bytes(p));
    ot_tensor *x = input_x(0.5f);
    if (ot_executor_set_input_by_name(ex, "x", x, &err)) fail_msg("%s", err.msg);
    if (ot_executor_run(ex, &err)) fail_msg("%s", err.msg);
    assert_true(tb.ws_ok);
    assert_int_equal(tb.n_allocs, 1); /* nothing else allocated for tensors */
    assert_int_equal(ot_executor_high_water(ex), ot_plan_peak_bytes(p));

    int y = ot_graph_find_value(g, "y"), e = ot_graph_find_value(g, "e");
    ot_tensor *ty = NULL, *te = NULL;
    assert_int_equal(ot_executor_get(ex, y, &ty, &err), OT_OK);
    assert_int_equal(ot_executor_get(ex, e, &te, &err), OT_OK);
    float want[6];
    expected_y(x->data, g->values[ot_graph_find_value(g, "W")].data, g->values[ot_graph_find_value(g, "b")].data,
               want);
    for (int i = 0; i < 6; i++) {
        assert_float_equal(((float *)ty->data)[i], want[i], 1e-5);
        assert_float_equal(((float *)te->data)[i], expf(want[i]), 1e-4);
    }
    /* A transient value cannot be read back; an unknown id neither. */
    ot_tensor *tt = NULL;
    assert_int_equal(ot_executor_get(ex, ot_graph_find_value(g, "m"), &tt, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "'m'"));
    assert_int_equal(ot_executor_get(ex, 999, &tt, &err), OT_E_USAGE);

    /* Writing a param changes the next run; running twice gives the same answer. */
    int W = ot_graph_find_value(g, "W");
    float w2[8] = {0};
    assert_int_equal(ot_executor_write(ex, W, w2, sizeof w2, &err), OT_OK);
    assert_int_equal(ot_executor_write(ex, W, w2, 4, &err), OT_E_DATA);
    assert_int_equal(ot_executor_run(ex, &err), OT_OK);
    ot_tensor_free(ty);
    assert_int_equal(ot_executor_get(ex, y, &ty, &err), OT_OK);
    for (int i = 0; i < 6; i++) assert_float_equal(((float *)ty->data)[i], 0.5f * (float)i, 0);
    /* Params go back into the graph for the exporter. */
    assert_int_equal(ot_executor_sync_to_graph(ex, &err), OT_OK);
    assert_memory_equal(g->values[W].data, w2, sizeof w2);
    assert_int_equal(ot_executor_high_water(ex), ot_plan_peak_bytes(p));
    size_t slab = 0;
    assert_ptr_equal(ot_executor_slab(ex, OT_MEM_PARAMS, &slab), ot_executor_value_ptr(ex, W));
    assert_int_equal(slab, 64);

    ot_tensor_free(x);
    ot_tensor_free(ty);
    ot_tensor_free(te);
    ot_executor_free(ex);
    ot_graph_free(g);
}

static void test_bad_inputs(void **state) {
    (void)state;
    test_be tb;
    tb_init(&tb);
    ot_graph *g = build();
    ot_executor *ex = NULL;
    ot_error err = {0};
    assert_int_equal(ot_executor_new(g, &tb.be, NULL, &ex, &err), OT_OK);
    /* Not set: refused before running anything. */
    assert_int_equal(ot_executor_run(ex, &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "'x'"));
    assert_int_equal(tb.rng_seen[0], -99);

    int64_t d[2] = {3, 5};
    ot_shape s = ot_shape_make(2, d);
    ot_tensor *bad = ot_tensor_new(OT_F32, &s);
    assert_int_equal(ot_executor_set_input_by_name(ex, "x", bad, &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "'x'"));
    assert_non_null(strstr(err.msg, "[3,4]"));
    assert_non_null(strstr(err.msg, "[3,5]"));
    ot_tensor_free(bad);
    d[1] = 4;
    s = ot_shape_make(2, d);
    bad = ot_tensor_new(OT_I64, &s);
    assert_int_equal(ot_executor_set_input_by_name(ex, "x", bad, &err), OT_E_DATA);
    assert_non_null(strstr(err.msg, "int64"));
    assert_non_null(strstr(err.msg, "float32"));
    ot_tensor_free(bad);
    assert_int_equal(ot_executor_set_input_by_name(ex, "nope", bad = input_x(1), &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "nope"));
    /* W is a param, not an input. */
    assert_int_equal(ot_executor_set_input_by_name(ex, "W", bad, &err), OT_E_USAGE);
    ot_tensor_free(bad);

    /* A kernel failure names the node and the op. */
    ot_tensor *x = input_x(-100.0f); /* y[0] = 250: Exp overflows */
    assert_int_equal(ot_executor_set_input_by_name(ex, "x", x, &err), OT_OK);
    assert_int_equal(ot_executor_run(ex, &err), OT_E_NUMERICS);
    assert_non_null(strstr(err.msg, "'exp'"));
    assert_non_null(strstr(err.msg, "Exp"));
    assert_non_null(strstr(err.msg, "overflow"));
    ot_tensor_free(x);
    ot_executor_free(ex);
    ot_graph_free(g);
}

/* Every unsupported node in one message, before any allocation. */
static void test_unsupported_listed(void **state) {
    (void)state;
    test_be tb;
    tb_init(&tb);
    ot_graph *g = build();
    int a = ot_graph_find_value(g, "a"), y = ot_graph_find_value(g, "y");
    g->nodes[0].op = OT_OP_TANH; /* relu -> tanh: unsupported by the test backend */
    g->nodes[4].op = OT_OP_SIGMOID;
    (void)a;
    (void)y;
    ot_executor *ex = NULL;
    ot_error err = {0};
    assert_int_equal(ot_executor_new(g, &tb.be, NULL, &ex, &err), OT_E_UNSUPPORTED);
    assert_null(ex);
    assert_non_null(strstr(err.msg, "2 nodes"));
    assert_non_null(strstr(err.msg, "'relu'"));
    assert_non_null(strstr(err.msg, "'exp'"));
    assert_int_equal(tb.n_allocs, 0);
    ot_graph_free(g);
}

/* ctx->rng_node: own id, orig_node for clones, the "rng_node" attribute first. */
static void test_rng_node(void **state) {
    (void)state;
    test_be tb;
    tb_init(&tb);
    ot_graph *g = build();
    g->nodes[2].orig_node = 0;                          /* neg: pretend clone of node 0 */
    ot_node_set_attr_int(&g->nodes[3], "rng_node", 1); /* add: keyed like node 1 */
    ot_executor *ex = NULL;
    ot_error err = {0};
    assert_int_equal(ot_executor_new(g, &tb.be, NULL, &ex, &err), OT_OK);
    ot_tensor *x = input_x(0.1f);
    assert_int_equal(ot_executor_set_input(ex, ot_graph_find_value(g, "x"), x, &err), OT_OK);
    assert_int_equal(ot_executor_run(ex, &err), OT_OK);
    assert_int_equal(tb.rng_seen[0], 0);
    assert_int_equal(tb.rng_seen[1], 1);
    assert_int_equal(tb.rng_seen[2], 0);
    assert_int_equal(tb.rng_seen[3], 1);
    assert_int_equal(tb.rng_seen[4], 4);
    ot_tensor_free(x);
    ot_executor_free(ex);
    ot_graph_free(g);
}

/* A symbolic dim that was never bound: OT_E_SHAPE before anything is allocated. */
static void test_unbound_shape(void **state) {
    (void)state;
    test_be tb;
    tb_init(&tb);
    ot_graph *g = build();
    int sym = ot_graph_add_sym(g, "batch");
    int x = ot_graph_find_value(g, "x");
    g->values[x].shape.dim[0] = -1;
    g->values[x].shape.sym[0] = sym;
    ot_executor *ex = NULL;
    ot_error err = {0};
    assert_int_equal(ot_executor_new(g, &tb.be, NULL, &ex, &err), OT_E_SHAPE);
    assert_non_null(strstr(err.msg, "'x'"));
    assert_int_equal(tb.n_allocs, 0);
    ot_graph_free(g);
}

/* The phase-end hook: called after the last step of each phase (recompute counting
 * as backward) and after the last step, never per node; it can stop the run. */
typedef struct hook_log {
    ot_exec_boundary b[8];
    int n;
    int stop_at;
} hook_log;

static ot_status record_hook(void *user, ot_executor *ex, const ot_exec_boundary *b, ot_error *err) {
    hook_log *h = user;
    assert_non_null(ex);
    h->b[h->n++] = *b;
    if (b->step == h->stop_at) return ot_fail(err, OT_E_NUMERICS, "hook stopped at step %d", b->step);
    return OT_OK;
}

static void test_hook_and_copy(void **state) {
    (void)state;
    test_be tb;
    tb_init(&tb);
    ot_graph *g = build();
    /* relu, matmul: forward; neg: loss; add: backward; exp: a recompute clone */
    g->nodes[2].phase = OT_PHASE_LOSS;
    g->nodes[3].phase = OT_PHASE_BACKWARD;
    g->nodes[4].phase = OT_PHASE_RECOMPUTE;
    hook_log h = {.stop_at = 2};
    ot_exec_options opt = {.at_phase_end = record_hook, .hook_user = &h};
    ot_executor *ex = NULL;
    ot_error err = {0};
    assert_int_equal(ot_executor_new(g, &tb.be, &opt, &ex, &err), OT_OK);
    ot_tensor *x = input_x(0.5f);
    assert_int_equal(ot_executor_set_input(ex, ot_graph_find_value(g, "x"), x, &err), OT_OK);
    assert_int_equal(ot_executor_run(ex, &err), OT_E_NUMERICS);
    assert_non_null(strstr(err.msg, "hook stopped at step 2"));
    assert_int_equal(h.n, 2);
    assert_int_equal(h.b[0].step, 1);
    assert_int_equal(h.b[0].ended, OT_PHASE_FORWARD);
    assert_int_equal(h.b[0].next, OT_PHASE_LOSS);
    assert_false(h.b[0].end);
    assert_int_equal(h.b[1].ended, OT_PHASE_LOSS);
    assert_int_equal(h.b[1].next, OT_PHASE_BACKWARD);
    h.stop_at = -1;
    h.n = 0;
    assert_int_equal(ot_executor_run(ex, &err), OT_OK);
    assert_int_equal(h.n, 3); /* no boundary between the backward node and the recompute clone */
    assert_int_equal(h.b[2].step, 4);
    assert_int_equal(h.b[2].ended, OT_PHASE_BACKWARD);
    assert_int_equal(h.b[2].next, OT_PHASE_BACKWARD);
    assert_true(h.b[2].end);
    /* step by step: the same results, no hook; a range outside the schedule refused */
    int y = ot_graph_find_value(g, "y"), e = ot_graph_find_value(g, "e"), m = ot_graph_find_value(g, "m");
    float want_e[6], got_e[6];
    memcpy(want_e, ot_executor_value_ptr(ex, e), sizeof want_e);
    memset(ot_executor_value_ptr(ex, e), 0, sizeof got_e);
    h.n = 0;
    for (int k = 0; k < 5; k++) assert_int_equal(ot_executor_run_steps(ex, k, 1, &err), OT_OK);
    memcpy(got_e, ot_executor_value_ptr(ex, e), sizeof got_e);
    assert_memory_equal(want_e, got_e, sizeof want_e);
    assert_int_equal(h.n, 0);
    assert_int_equal(ot_executor_run_steps(ex, 0, 5, &err), OT_OK);
    assert_int_equal(ot_executor_run_steps(ex, 4, 2, &err), OT_E_USAGE);
    assert_int_equal(ot_executor_run_steps(ex, -1, 1, &err), OT_E_USAGE);
    assert_int_equal(h.n, 0);
    /* copy_value: pinned to pinned of the same size (y -> e), refused for transients. */
    assert_int_equal(ot_executor_copy_value(ex, e, y, &err), OT_OK);
    assert_memory_equal(ot_executor_value_ptr(ex, e), ot_executor_value_ptr(ex, y), 6 * sizeof(float));
    assert_int_equal(ot_executor_copy_value(ex, e, m, &err), OT_E_USAGE);
    assert_int_equal(ot_executor_copy_value(ex, e, ot_graph_find_value(g, "x"), &err), OT_E_DATA);
    ot_tensor_free(x);
    ot_executor_free(ex);
    ot_graph_free(g);
}

/* The same graph on the real CPU backend, when its kernels are there. */
static void test_cpu_backend(void **state) {
    (void)state;
    ot_error err = {0};
    ot_backend *be = ot_backend_cpu_new(2, &err);
    assert_non_null(be);
    assert_string_equal(be->name, "cpu");
    ot_graph *g = build();
    ot_executor *ex = NULL;
    ot_status st = ot_executor_new(g, be, NULL, &ex, &err);
    if (st) fail_msg("cpu backend: %s", err.msg);
    ot_tensor *x = input_x(0.5f);
    assert_int_equal(ot_executor_set_input_by_name(ex, "x", x, &err), OT_OK);
    if (ot_executor_run(ex, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ot_executor_high_water(ex), ot_plan_peak_bytes(ot_executor_plan(ex)));
    ot_tensor *ty = NULL;
    assert_int_equal(ot_executor_get(ex, ot_graph_find_value(g, "y"), &ty, &err), OT_OK);
    float want[6];
    expected_y(x->data, g->values[ot_graph_find_value(g, "W")].data, g->values[ot_graph_find_value(g, "b")].data,
               want);
    for (int i = 0; i < 6; i++) assert_float_equal(((float *)ty->data)[i], want[i], 1e-5);
    ot_tensor_free(ty);
    ot_tensor_free(x);
    ot_executor_free(ex);
    ot_graph_free(g);
    ot_backend_free(be);
}

/* ---- views ------------------------------------------------------------------- */

static int i64_const(ot_graph *g, const char *name, const int64_t *vals, int n) {
    int64_t d = n;
    ot_shape s = ot_shape_make(1, &d);
    int v = ot_graph_add_value(g, name, OT_I64, &s, OT_VK_CONSTANT);
    assert_true(v >= 0);
    ot_value_set_data(&g->values[v], vals, sizeof(int64_t) * (size_t)n);
    return v;
}

static void set_io(ot_graph *g, int x, const int *outs, int n) {
    g->inputs = malloc(sizeof(int));
    g->inputs[0] = x;
    g->n_inputs = 1;
    g->outputs = malloc(sizeof(int) * (size_t)n);
    for (int k = 0; k < n; k++) {
        g->outputs[k] = outs[k];
        g->values[outs[k]].is_graph_output = true;
    }
    g->n_outputs = n;
}

/* x[3,4] -> Relu -> a -> Reshape[12] -> v -> Exp -> r -> Reshape[3,4] -> r2;
 * y = Add(r2, a). Exp must not write over a (Add reads it later). */
static ot_graph *build_views(void) {
    ot_graph *g = ot_graph_new("views");
    int x = val(g, "x", 3, 4, OT_VK_INPUT), a = val(g, "a", 3, 4, OT_VK_ACTIVATION);
    int64_t d12 = 12;
    ot_shape s12 = ot_shape_make(1, &d12);
    int v = ot_graph_add_value(g, "v", OT_F32, &s12, OT_VK_ACTIVATION);
    int r = ot_graph_add_value(g, "r", OT_F32, &s12, OT_VK_ACTIVATION);
    int r2 = val(g, "r2", 3, 4, OT_VK_ACTIVATION), y = val(g, "y", 3, 4, OT_VK_ACTIVATION);
    int shp12 = i64_const(g, "shape12", (int64_t[]){12}, 1), shp34 = i64_const(g, "shape34", (int64_t[]){3, 4}, 2);
    ot_graph_add_node(g, OT_OP_RELU, "relu", &x, 1, &a, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_RESHAPE, "flat", (int[]){a, shp12}, 2, &v, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_EXP, "exp", &v, 1, &r, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_RESHAPE, "unflat", (int[]){r, shp34}, 2, &r2, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_ADD, "add", (int[]){r2, a}, 2, &y, 1, OT_PHASE_FORWARD);
    set_io(g, x, &y, 1);
    return g;
}

static void test_views_run_no_kernel(void **state) {
    (void)state;
    test_be tb;
    tb_init(&tb);
    ot_graph *g = build_views();
    int a = ot_graph_find_value(g, "a"), v = ot_graph_find_value(g, "v"), r = ot_graph_find_value(g, "r");
    int r2 = ot_graph_find_value(g, "r2"), y = ot_graph_find_value(g, "y");
    ot_executor *ex = NULL;
    ot_error err = {0};
    /* The test backend has no Reshape kernel: as aliases the views need none. */
    if (ot_executor_new(g, &tb.be, NULL, &ex, &err)) fail_msg("%s", err.msg);
    const ot_plan *p = ot_executor_plan(ex);
    assert_int_equal(p->values[v].alias_of, a);
    assert_int_equal(p->values[r2].alias_of, r);
    assert_true(p->values[r].offset != p->values[a].offset);
    assert_ptr_equal(ot_executor_value_ptr(ex, v), ot_executor_value_ptr(ex, a));
    assert_ptr_equal(ot_executor_value_ptr(ex, r2), ot_executor_value_ptr(ex, r));
    assert_int_equal(tb.alloc_bytes, ot_plan_peak_bytes(p));
    ot_tensor *x = input_x(0.5f), *ty = NULL;
    if (ot_executor_set_input_by_name(ex, "x", x, &err) || ot_executor_run(ex, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ot_executor_high_water(ex), ot_plan_peak_bytes(p));
    assert_int_equal(ot_executor_get(ex, y, &ty, &err), OT_OK);
    for (int i = 0; i < 12; i++) {
        float xi = ((float *)x->data)[i], ai = xi > 0 ? xi : 0;
        assert_true(((float *)ty->data)[i] == expf(ai) + ai); /* bitwise: the same float ops */
    }
    /* A view of a transient is transient: not readable after the run. */
    ot_tensor *tv = NULL;
    assert_int_equal(ot_executor_get(ex, v, &tv, &err), OT_E_USAGE);
    ot_executor_free(ex);
    /* Without reuse the views are copies, and copies need the kernel. */
    ot_exec_options no = {.no_inplace = true};
    assert_int_equal(ot_executor_new(g, &tb.be, &no, &ex, &err), OT_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "2 nodes"));
    assert_non_null(strstr(err.msg, "'flat'"));
    ot_tensor_free(ty);
    ot_tensor_free(x);
    ot_graph_free(g);
}

/* On the CPU backend: a contiguous Slice aliases, a strided one is computed, a view
 * that is a graph output is a copy; every result is exact. */
static void test_slices_on_cpu(void **state) {
    (void)state;
    ot_error err = {0};
    ot_backend *be = ot_backend_cpu_new(2, &err);
    assert_non_null(be);
    ot_graph *g = ot_graph_new("slices");
    int x = val(g, "x", 4, 16, OT_VK_INPUT), a = val(g, "a", 4, 16, OT_VK_ACTIVATION);
    int rows = val(g, "rows", 2, 16, OT_VK_ACTIVATION), str = val(g, "strided", 4, 8, OT_VK_ACTIVATION);
    int o1 = val(g, "o1", 2, 16, OT_VK_ACTIVATION), o2 = val(g, "o2", 4, 8, OT_VK_ACTIVATION);
    int f = val(g, "flat", 4, 16, OT_VK_ACTIVATION);
    int s1 = i64_const(g, "s1", (int64_t[]){1}, 1), e3 = i64_const(g, "e3", (int64_t[]){3}, 1);
    int ax0 = i64_const(g, "ax0", (int64_t[]){0}, 1), s0 = i64_const(g, "s0", (int64_t[]){0}, 1);
    int e16 = i64_const(g, "e16", (int64_t[]){16}, 1), ax1 = i64_const(g, "ax1", (int64_t[]){1}, 1);
    int two = i64_const(g, "two", (int64_t[]){2}, 1);
    ot_graph_add_node(g, OT_OP_RELU, "relu", &x, 1, &a, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_SLICE, "rows", (int[]){a, s1, e3, ax0}, 4, &rows, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_SLICE, "strided", (int[]){a, s0, e16, ax1, two}, 5, &str, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_NEG, "neg1", &rows, 1, &o1, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_NEG, "neg2", &str, 1, &o2, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_FLATTEN, "flatten", &a, 1, &f, 1, OT_PHASE_FORWARD);
    set_io(g, x, (int[]){o1, o2, f}, 3);
    ot_executor *ex = NULL;
    if (ot_executor_new(g, be, NULL, &ex, &err)) fail_msg("%s", err.msg);
    const ot_plan *p = ot_executor_plan(ex);
    assert_int_equal(p->values[rows].alias_of, a);
    assert_ptr_equal(ot_executor_value_ptr(ex, rows), (char *)ot_executor_value_ptr(ex, a) + 64);
    assert_int_equal(p->values[str].alias_of, -1);
    assert_int_equal(p->values[f].alias_of, -1);
    int64_t d[2] = {4, 16};
    ot_shape sx = ot_shape_make(2, d);
    ot_tensor *tx = ot_tensor_new(OT_F32, &sx), *t1 = NULL, *t2 = NULL, *tf = NULL;
    float *xs = tx->data, ar[64];
    for (int i = 0; i < 64; i++) {
        xs[i] = 0.25f * (float)(i % 9 - 4);
        ar[i] = xs[i] > 0 ? xs[i] : 0;
    }
    if (ot_executor_set_input(ex, x, tx, &err) || ot_executor_run(ex, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ot_executor_high_water(ex), ot_plan_peak_bytes(p));
    assert_int_equal(ot_executor_get(ex, o1, &t1, &err), OT_OK);
    assert_int_equal(ot_executor_get(ex, o2, &t2, &err), OT_OK);
    assert_int_equal(ot_executor_get(ex, f, &tf, &err), OT_OK);
    for (int i = 0; i < 32; i++) assert_true(((float *)t1->data)[i] == -ar[16 + i]);
    for (int i = 0; i < 32; i++) assert_true(((float *)t2->data)[i] == -ar[(i / 8) * 16 + (i % 8) * 2]);
    assert_memory_equal(tf->data, ar, sizeof ar);
    ot_tensor_free(tx);
    ot_tensor_free(t1);
    ot_tensor_free(t2);
    ot_tensor_free(tf);
    ot_executor_free(ex);
    ot_graph_free(g);
    ot_backend_free(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_end_to_end), cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_unsupported_listed), cmocka_unit_test(test_rng_node),
        cmocka_unit_test(test_unbound_shape), cmocka_unit_test(test_hook_and_copy),
        cmocka_unit_test(test_cpu_backend), cmocka_unit_test(test_views_run_no_kernel),
        cmocka_unit_test(test_slices_on_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
