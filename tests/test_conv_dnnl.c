/* test_conv_dnnl.c — the convolutions that run on oneDNN (depthwise and dense 3x3,
 * ResNet's stem; kernels/cpu/conv_dnnl.c): Conv, ConvGradInput and ConvGradWeight
 * agree with our own kernels (ot_kernel_ctx.no_dnnl) within float32 rounding, two runs have the same
 * bits at 1 and at 2 threads, a run that keeps its primitives in a node slot has the
 * bits of one that builds them in the call, the slot is freed through the CPU
 * backend's free_node_state, and a shape outside the rule keeps nothing (our kernel
 * ran). Skipped in a build without oneDNN. */
#include "test_kernels_cpu_util.h"

#include "exec/backend.h"

typedef struct dw_case {
    int N, C, H, W, S, bias;
    int dense; /* group 1 and C output channels (ResNet's 3x3), else depthwise */
    int cin;   /* dense only: input channels when not C (ResNet's stem: 3) */
    int pad;   /* every side; 0 means 1 */
} dw_case;

static int cin_of(const dw_case *c) { return c->dense && c->cin ? c->cin : c->C; }
static int pad_of(const dw_case *c) { return c->pad ? c->pad : 1; }

static void fill(float *x, int n, unsigned seed) {
    unsigned s = seed * 2654435761u + 7u;
    for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
}

typedef struct run_in {
    ot_node n;
    ot_tensor in[3], out[1];
    int nout;
} run_in;

/* op 0 Conv, 1 ConvGradInput, 2 ConvGradWeight over the case's buffers. */
static void setup(run_in *r, const dw_case *c, int op, int k, float *x, float *w, float *b, float *dy, float *res) {
    static const ot_op ops[3] = {OT_OP_CONV, OT_OP_CONV_GRAD_INPUT, OT_OP_CONV_GRAD_WEIGHT};
    int P = pad_of(c), CI = cin_of(c), OH = (c->H + 2 * P - k) / c->S + 1, OW = (c->W + 2 * P - k) / c->S + 1;
    r->n = tk_node(ops[op], op == 0 ? 2 + c->bias : 3, 1);
    int64_t ks[2] = {k, k}, st[2] = {c->S, c->S}, pd[4] = {P, P, P, P};
    ot_node_set_attr_ints(&r->n, "kernel_shape", ks, 2);
    ot_node_set_attr_ints(&r->n, "strides", st, 2);
    ot_node_set_attr_ints(&r->n, "pads", pd, 4);
    ot_node_set_attr_int(&r->n, "group", c->dense ? 1 : c->C);
    int cig = c->dense ? CI : 1;
    ot_tensor X = tk_t(OT_F32, x, 4, c->N, CI, c->H, c->W), W = tk_t(OT_F32, w, 4, c->C, cig, k, k);
    ot_tensor Y = tk_t(OT_F32, dy, 4, c->N, c->C, OH, OW);
    if (op == 0) {
        r->in[0] = X, r->in[1] = W, r->in[2] = tk_t(OT_F32, b, 1, c->C);
        r->out[0] = tk_t(OT_F32, res, 4, c->N, c->C, OH, OW);
    } else if (op == 1) {
        r->in[0] = Y, r->in[1] = W, r->in[2] = X;
        r->out[0] = tk_t(OT_F32, res, 4, c->N, CI, c->H, c->W);
    } else {
        r->in[0] = Y, r->in[1] = X, r->in[2] = W;
        r->out[0] = tk_t(OT_F32, res, 4, c->C, cig, k, k);
    }
    r->nout = (int)ot_shape_numel(&r->out[0].shape);
}

static void run(run_in *r, int threads, bool no_dnnl, void **slot) {
    ot_kernel_ctx ctx = {.n_threads = threads, .no_dnnl = no_dnnl, .node_state = slot};
    ctx.workspace_bytes = ot_cpu_workspace_bytes(&r->n, r->in, r->out);
    ctx.workspace = ctx.workspace_bytes ? malloc(ctx.workspace_bytes) : NULL;
    ot_error e = {0};
    ot_status st = ot_cpu_run_node(&r->n, r->in, r->out, &ctx, &e);
    free(ctx.workspace);
    tk_node_free(&r->n);
    if (st) print_error("%s\n", e.msg);
    assert_int_equal(st, OT_OK);
}

/* Runs one case and direction; returns whether oneDNN kept a state (it ran). */
static bool check(const dw_case *c, int op, int k) {
    int P = pad_of(c), CI = cin_of(c), OH = (c->H + 2 * P - k) / c->S + 1, OW = (c->W + 2 * P - k) / c->S + 1;
    int nx = c->N * CI * c->H * c->W, ny = c->N * c->C * OH * OW, nw = c->C * (c->dense ? CI : 1) * k * k;
    int big = nx > ny ? nx : ny;
    big = big > nw ? big : nw;
    float *x = malloc(sizeof(float) * (size_t)nx), *w = malloc(sizeof(float) * (size_t)nw);
    float *b = malloc(sizeof(float) * (size_t)c->C), *dy = malloc(sizeof(float) * (size_t)ny);
    float *ref = calloc((size_t)big, sizeof(float)), *got = calloc((size_t)big, sizeof(float));
    float *again = calloc((size_t)big, sizeof(float)), *fresh = calloc((size_t)big, sizeof(float));
    fill(x, nx, 1), fill(w, nw, 2), fill(b, c->C, 3), fill(dy, ny, 4);
    ot_error e = {0};
    ot_backend *be = ot_backend_cpu_new(2, &e);
    assert_non_null(be);
    assert_non_null(be->free_node_state);
    bool kept = false;
    for (int threads = 1; threads <= 2; threads++) {
        run_in r;
        void *slot = NULL;
        setup(&r, c, op, k, x, w, b, dy, ref);
        run(&r, threads, true, NULL);
        setup(&r, c, op, k, x, w, b, dy, got);
        run(&r, threads, false, &slot);
        kept = slot != NULL;
        setup(&r, c, op, k, x, w, b, dy, again);
        run(&r, threads, false, &slot); /* the kept primitives */
        setup(&r, c, op, k, x, w, b, dy, fresh);
        run(&r, threads, false, NULL); /* built in the call */
        assert_memory_equal(got, again, sizeof(float) * (size_t)r.nout);
        assert_memory_equal(got, fresh, sizeof(float) * (size_t)r.nout);
        /* Each output sums at most N*OH*OW products of values below 0.5 in magnitude. */
        double tol = 4e-7 * (op == 2 ? c->N * OH * OW : k * k * (c->dense ? CI : 1)) + 1e-6;
        for (int i = 0; i < r.nout; i++)
            if (fabs((double)got[i] - ref[i]) > tol)
                fail_msg("op %d threads %d [%d]: oneDNN %.9g, ours %.9g", op, threads, i, got[i], ref[i]);
        if (slot) be->free_node_state(be, slot);
    }
    ot_backend_free(be);
    free(x), free(w), free(b), free(dy), free(ref), free(got), free(again), free(fresh);
    return kept;
}

static const dw_case CASES[] = {
    {2, 16, 8, 8, 1, 1, 0, 0, 0},  /* stride 1, bias */
    {3, 24, 16, 15, 2, 0, 0, 0, 0}, /* stride 2 (8x8 outputs), no bias */
    {2, 20, 9, 7, 1, 0, 0, 0, 0},  /* channels and planes off oneDNN's blocks */
    {2, 64, 8, 8, 1, 1, 1, 0, 0},  /* dense 3x3, 64 channels */
};

static void test_3x3_on_dnnl(void **state) {
    (void)state;
#ifndef OT_HAVE_DNNL
    print_message("skipped: built without oneDNN (libdnnl-dev, OT_WITH_DNNL)\n");
    skip();
#endif
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        for (int op = 0; op < 3; op++) assert_true(check(&CASES[i], op, 3));
    /* ResNet's stem (7x7 stride 2, 3 -> 64 channels): Conv and ConvGradWeight; its dX stays ours */
    dw_case stem = {2, 64, 16, 16, 2, 1, 1, 3, 3};
    for (int op = 0; op < 3; op++) assert_true(check(&stem, op, 7) == (op != 1));
}

/* Outside the rule our kernels run and nothing is kept: a 5x5 depthwise conv, and
 * dense 3x3 ones at 32 channels and on a 2x2 plane. */
static void test_outside_rule_keeps_nothing(void **state) {
    (void)state;
    dw_case dw5 = {2, 16, 9, 9, 1, 1, 0, 0, 0}, narrow = {2, 32, 8, 8, 1, 0, 1, 0, 0}, small = {2, 64, 2, 2, 1, 0, 1, 0, 0};
    for (int op = 0; op < 3; op++) {
        assert_false(check(&dw5, op, 5));
        assert_false(check(&narrow, op, 3));
        assert_false(check(&small, op, 3));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_3x3_on_dnnl),
        cmocka_unit_test(test_outside_rule_keeps_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
