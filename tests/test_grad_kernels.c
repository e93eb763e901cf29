/* test_grad_kernels.c — the backward CPU kernels on inputs large enough to run in
 * parallel: bitwise identical results for 1 and 4 threads (no float atomics, fixed
 * summation order), plus direct checks of GatherGrad's scatter-add and of
 * ReduceToLike / ExpandLike against naive loops, of ClipGrad at the bounds and of
 * MaxPoolGrad with ties and padding (both as PyTorch's backward). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grad_check.h"
#include "kernels/kernel.h"

static ot_tensor rand_tensor(int rank, const int64_t *dims, uint32_t *rng) {
    ot_tensor t = {.dtype = OT_F32, .shape = ot_shape_make(rank, dims)};
    int64_t n = ot_shape_numel(&t.shape);
    t.nbytes = (size_t)n * sizeof(float);
    t.data = malloc(t.nbytes ? t.nbytes : 1);
    for (int64_t i = 0; i < n; i++) ((float *)t.data)[i] = 2.0f * gc_rand(rng) - 1.0f;
    return t;
}

static ot_tensor out_tensor(ot_dtype dt, int rank, const int64_t *dims) {
    ot_tensor t = {.dtype = dt, .shape = ot_shape_make(rank, dims)};
    t.nbytes = (size_t)ot_shape_numel(&t.shape) * ot_dtype_size(dt);
    t.data = calloc(1, t.nbytes ? t.nbytes : 1);
    return t;
}

/* Runs node with 1 and with 4 threads; every output must match bit for bit. */
static void same_on_threads(const ot_node *node, const ot_tensor *in, ot_tensor *out) {
    ot_tensor ref[3];
    for (int t = 0; t < 2; t++) {
        size_t ws = ot_cpu_workspace_bytes(node, in, out);
        void *w = ws ? calloc(1, ws) : NULL;
        ot_kernel_ctx ctx = {.n_threads = t ? 4 : 1, .workspace = w, .workspace_bytes = ws, .seed = 5, .step = 2};
        ot_error err = {0};
        for (int i = 0; i < node->n_outputs; i++)
            if (out[i].data) memset(out[i].data, 0x7f, out[i].nbytes); /* kernels must overwrite */
        ot_status st = ot_cpu_run_node(node, in, out, &ctx, &err);
        if (st) fprintf(stderr, "%s\n", err.msg);
        assert_int_equal(st, OT_OK);
        free(w);
        for (int i = 0; i < node->n_outputs; i++) {
            if (!out[i].data) continue;
            if (t == 0) {
                ref[i] = out[i];
                ref[i].data = malloc(out[i].nbytes);
                memcpy(ref[i].data, out[i].data, out[i].nbytes);
            } else {
                assert_memory_equal(ref[i].data, out[i].data, out[i].nbytes);
                free(ref[i].data);
            }
        }
    }
}

static int add_node(ot_graph *g, ot_op op, int n_in, int n_out) {
    int ins[8] = {-1, -1, -1, -1, -1, -1, -1, -1}, outs[3] = {-1, -1, -1};
    return ot_graph_add_node(g, op, ot_op_name(op), ins, n_in, outs, n_out, OT_PHASE_BACKWARD);
}

static void test_gather_grad(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 1;
    int id = add_node(g, OT_OP_GATHER_GRAD, 3, 1);
    int64_t I = 4000, E = 33, V = 50;
    int64_t dyd[2] = {I, E}, idd[1] = {I}, xd[2] = {V, E};
    ot_tensor in[3] = {rand_tensor(2, dyd, &rng), out_tensor(OT_I64, 1, idd), out_tensor(OT_F32, 2, xd)};
    int64_t *idx = in[1].data;
    for (int64_t i = 0; i < I; i++) idx[i] = (int64_t)(gc_rand(&rng) * (float)V) - (i % 7 == 0 ? V : 0);
    ot_tensor out[1] = {out_tensor(OT_F32, 2, xd)};
    same_on_threads(&g->nodes[id], in, out);
    /* naive scatter-add in index order */
    const float *dy = in[0].data, *dx = out[0].data;
    for (int64_t v = 0; v < V; v++)
        for (int64_t e = 0; e < E; e++) {
            float s = 0.0f;
            for (int64_t i = 0; i < I; i++)
                if ((idx[i] < 0 ? idx[i] + V : idx[i]) == v) s += dy[i * E + e];
            assert_true(fabsf(s - dx[v * E + e]) <= 1e-5f * (1.0f + fabsf(s)));
        }
    for (int i = 0; i < 3; i++) free(in[i].data);
    free(out[0].data);
    ot_graph_free(g);
}

/* GatherGrad onto a base gives Sum(base, GatherGrad) bit for bit: untouched rows are
 * base + 0 (a -0 becomes +0, as the Sum made it), repeated indices sum first in index
 * order; out of place, in place (out == base) and on 1 and 4 threads. */
static void test_gather_grad_onto_base(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 11;
    int plain = add_node(g, OT_OP_GATHER_GRAD, 3, 1), onto = add_node(g, OT_OP_GATHER_GRAD, 4, 1);
    int sum = add_node(g, OT_OP_SUM, 2, 1);
    g->nodes[onto].inputs[3] = 0; /* present: the kernels read in[3] when the slot is used */
    int64_t I = 3000, E = 300, V = 200; /* E > 256: two column chunks; V > 64: several row blocks */
    int64_t dyd[2] = {I, E}, idd[1] = {I}, xd[2] = {V, E};
    ot_tensor dy = rand_tensor(2, dyd, &rng), idx = out_tensor(OT_I64, 1, idd), data = out_tensor(OT_F32, 2, xd);
    ot_tensor base = rand_tensor(2, xd, &rng);
    float *b = base.data, *d = dy.data;
    int64_t *ix = idx.data;
    for (int64_t i = 0; i < I; i++) ix[i] = (int64_t)(gc_rand(&rng) * (float)(V - 3)) - (i % 5 == 0 ? V : 0);
    for (int64_t e = 0; e < V * E; e += 7) b[e] = -0.0f; /* in touched and untouched rows */
    for (int64_t e = 0; e < I * E; e += 11) d[e] = -0.0f;
    ot_tensor scat[1] = {out_tensor(OT_F32, 2, xd)}, ref[1] = {out_tensor(OT_F32, 2, xd)};
    ot_tensor pin[3] = {dy, idx, data};
    same_on_threads(&g->nodes[plain], pin, scat);
    ot_tensor sin[2] = {base, scat[0]};
    same_on_threads(&g->nodes[sum], sin, ref);
    ot_tensor oin[4] = {dy, idx, data, base}, got[1] = {out_tensor(OT_F32, 2, xd)};
    same_on_threads(&g->nodes[onto], oin, got);
    assert_memory_equal(ref[0].data, got[0].data, got[0].nbytes);
    /* in place: the output is base's buffer */
    size_t ws = ot_cpu_workspace_bytes(&g->nodes[onto], oin, got);
    assert_true(ws >= 3 * (size_t)I * sizeof(int64_t));
    void *w = malloc(ws);
    ot_kernel_ctx ctx = {.n_threads = 4, .workspace = w, .workspace_bytes = ws};
    ot_error err = {0};
    ot_tensor inplace[1] = {base};
    assert_int_equal(ot_cpu_run_node(&g->nodes[onto], oin, inplace, &ctx, &err), OT_OK);
    assert_memory_equal(ref[0].data, base.data, base.nbytes);
    free(w);
    free(dy.data), free(idx.data), free(data.data), free(base.data);
    free(scat[0].data), free(ref[0].data), free(got[0].data);
    ot_graph_free(g);
}

static void test_reduce_expand_like(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 2;
    int r = add_node(g, OT_OP_REDUCE_TO_LIKE, 2, 1), e = add_node(g, OT_OP_EXPAND_LIKE, 2, 1);
    int64_t yd[4] = {6, 40, 5, 30}, ld[3] = {40, 1, 30};
    ot_tensor in[2] = {rand_tensor(4, yd, &rng), out_tensor(OT_F32, 3, ld)};
    ot_tensor out[1] = {out_tensor(OT_F32, 3, ld)};
    same_on_threads(&g->nodes[r], in, out);
    const float *dy = in[0].data, *dx = out[0].data;
    for (int64_t b = 0; b < 40; b++)
        for (int64_t d = 0; d < 30; d++) {
            double s = 0.0;
            for (int64_t a = 0; a < 6; a++)
                for (int64_t c = 0; c < 5; c++) s += dy[((a * 40 + b) * 5 + c) * 30 + d];
            assert_true(fabs(s - dx[b * 30 + d]) <= 1e-5 * (1.0 + fabs(s)));
        }
    /* ExpandLike(small, big) copies each small element to its broadcast positions */
    ot_tensor ein[2] = {out[0], in[0]};
    ot_tensor eout[1] = {out_tensor(OT_F32, 4, yd)};
    same_on_threads(&g->nodes[e], ein, eout);
    const float *big = eout[0].data;
    for (int64_t i = 0; i < 6 * 40 * 5 * 30; i++) {
        int64_t d = i % 30, b = (i / 150) % 40;
        assert_true(big[i] == dx[b * 30 + d]);
    }
    free(in[0].data);
    free(in[1].data);
    free(out[0].data);
    free(eout[0].data);
    ot_graph_free(g);
}

static void test_threads_conv_norm_pool(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    uint32_t rng = 3;
    int64_t xd[4] = {4, 6, 20, 20}, wd[4] = {8, 3, 3, 3}, yd[4] = {4, 8, 10, 10}, cd[1] = {6};
    int64_t k[2] = {3, 3}, s[2] = {2, 2}, p[4] = {1, 1, 1, 1};
    ot_tensor x = rand_tensor(4, xd, &rng), w = rand_tensor(4, wd, &rng), dy = rand_tensor(4, yd, &rng);
    int gi = add_node(g, OT_OP_CONV_GRAD_INPUT, 3, 1), gw = add_node(g, OT_OP_CONV_GRAD_WEIGHT, 3, 1);
    for (int n = gi; n <= gw; n++) {
        ot_node_set_attr_ints(&g->nodes[n], "kernel_shape", k, 2);
        ot_node_set_attr_ints(&g->nodes[n], "strides", s, 2);
        ot_node_set_attr_ints(&g->nodes[n], "pads", p, 4);
        ot_node_set_attr_int(&g->nodes[n], "group", 2);
    }
    ot_tensor o1[1] = {out_tensor(OT_F32, 4, xd)};
    same_on_threads(&g->nodes[gi], (ot_tensor[]){dy, w, x}, o1);
    ot_tensor o2[1] = {out_tensor(OT_F32, 4, wd)};
    same_on_threads(&g->nodes[gw], (ot_tensor[]){dy, x, w}, o2);
    /* pools (dY 4x6x10x10 from X 4x6x20x20, 3x3 stride 2 pad 1) */
    ot_tensor pdy = rand_tensor(4, (int64_t[]){4, 6, 10, 10}, &rng);
    for (int op = 0; op < 2; op++) {
        int n = add_node(g, op ? OT_OP_AVERAGE_POOL_GRAD : OT_OP_MAX_POOL_GRAD, 2, 1);
        ot_node_set_attr_ints(&g->nodes[n], "kernel_shape", k, 2);
        ot_node_set_attr_ints(&g->nodes[n], "strides", s, 2);
        ot_node_set_attr_ints(&g->nodes[n], "pads", p, 4);
        same_on_threads(&g->nodes[n], (ot_tensor[]){pdy, x}, o1);
    }
    /* BatchNormGrad (training) and LayerNormGrad over the last two axes */
    ot_tensor sc = rand_tensor(1, cd, &rng), dx = rand_tensor(4, xd, &rng);
    int bn = add_node(g, OT_OP_BATCH_NORM_GRAD, 3, 3);
    ot_node_set_attr_int(&g->nodes[bn], "training_mode", 1);
    ot_tensor bo[3] = {out_tensor(OT_F32, 4, xd), out_tensor(OT_F32, 1, cd), out_tensor(OT_F32, 1, cd)};
    same_on_threads(&g->nodes[bn], (ot_tensor[]){dx, x, sc}, bo);
    int ln = add_node(g, OT_OP_LAYER_NORM_GRAD, 3, 3);
    ot_node_set_attr_int(&g->nodes[ln], "axis", 2);
    ot_tensor lsc = rand_tensor(2, (int64_t[]){20, 20}, &rng);
    ot_tensor lo[3] = {out_tensor(OT_F32, 4, xd), out_tensor(OT_F32, 2, (int64_t[]){20, 20}),
                       out_tensor(OT_F32, 2, (int64_t[]){20, 20})};
    same_on_threads(&g->nodes[ln], (ot_tensor[]){dx, x, lsc}, lo);
    /* SoftmaxGrad on axis 1, DropoutGrad, SoftmaxCrossEntropyLossGrad on [4, 6, 400] */
    int sm = add_node(g, OT_OP_SOFTMAX_GRAD, 2, 1);
    ot_node_set_attr_int(&g->nodes[sm], "axis", 1);
    same_on_threads(&g->nodes[sm], (ot_tensor[]){dx, x}, o1);
    int dr = add_node(g, OT_OP_DROPOUT_GRAD, 2, 1);
    ot_node_set_attr_float(&g->nodes[dr], "ratio", 0.3f);
    ot_node_set_attr_int(&g->nodes[dr], "rng_node", 7);
    same_on_threads(&g->nodes[dr], (ot_tensor[]){dx, x}, o1);
    int ce = add_node(g, OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD, 3, 1);
    ot_tensor lab = out_tensor(OT_I64, 3, (int64_t[]){4, 20, 20}), one = rand_tensor(0, NULL, &rng);
    for (int i = 0; i < 1600; i++) ((int64_t *)lab.data)[i] = i % 6;
    same_on_threads(&g->nodes[ce], (ot_tensor[]){one, x, lab}, o1);
    void *all[] = {x.data, w.data, dy.data, o1[0].data, o2[0].data, pdy.data, sc.data, dx.data,
                   bo[0].data, bo[1].data, bo[2].data, lsc.data, lo[0].data, lo[1].data, lo[2].data,
                   lab.data, one.data};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    ot_graph_free(g);
}

/* Runs one backward node once on the CPU (1 thread). */
static void run1(const ot_node *node, const ot_tensor *in, ot_tensor *out) {
    size_t ws = ot_cpu_workspace_bytes(node, in, out);
    void *w = ws ? calloc(1, ws) : NULL;
    ot_kernel_ctx ctx = {.n_threads = 1, .workspace = w, .workspace_bytes = ws};
    ot_error err = {0};
    ot_status st = ot_cpu_run_node(node, in, out, &ctx, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, OT_OK);
    free(w);
}

/* ClipGrad at the bounds follows PyTorch's ReLU6 / Hardtanh backward (what exported
 * CNNs' Clip comes from): the gradient passes only where min < x < max, so x == min
 * and x == max give 0; an absent bound never blocks (Clip(0, inf) == Relu's rule). */
static void test_clip_grad_bounds(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    int64_t d[1] = {7};
    float xs[7] = {-1.0f, 0.0f, 1e-7f, 3.0f, 6.0f - 1e-6f, 6.0f, 7.0f};
    float dys[7] = {1, 2, 3, 4, 5, 6, 7};
    float want_06[7] = {0, 0, 3, 4, 5, 0, 0}, want_0inf[7] = {0, 0, 3, 4, 5, 6, 7};
    ot_tensor dy = {.dtype = OT_F32, .shape = ot_shape_make(1, d), .data = dys, .nbytes = sizeof dys};
    ot_tensor x = {.dtype = OT_F32, .shape = ot_shape_make(1, d), .data = xs, .nbytes = sizeof xs};
    ot_tensor out[1] = {out_tensor(OT_F32, 1, d)};
    int n = add_node(g, OT_OP_CLIP_GRAD, 2, 1);
    ot_node_set_attr_float(&g->nodes[n], "min", 0.0f);
    ot_node_set_attr_float(&g->nodes[n], "max", 6.0f);
    run1(&g->nodes[n], (ot_tensor[]){dy, x}, out);
    assert_memory_equal(out[0].data, want_06, sizeof want_06);
    int n2 = add_node(g, OT_OP_CLIP_GRAD, 2, 1); /* max absent: +inf */
    ot_node_set_attr_float(&g->nodes[n2], "min", 0.0f);
    run1(&g->nodes[n2], (ot_tensor[]){dy, x}, out);
    assert_memory_equal(out[0].data, want_0inf, sizeof want_0inf);
    free(out[0].data);
    ot_graph_free(g);
}

/* MaxPoolGrad with ties and padding follows PyTorch's max_pool2d backward: the
 * first maximum in window order takes the whole gradient, padding never wins (even
 * over negative inputs), and a value that is the max of several windows sums them. */
static void test_max_pool_grad_ties_pads(void **state) {
    (void)state;
    ot_graph *g = gc_graph();
    /* 2x2 windows, stride 1, no pad, on a 3x3 checkerboard of ties: PyTorch's
     * grad is [[1,0,1],[0,2,0],[0,0,0]] */
    int64_t xd[4] = {1, 1, 3, 3}, yd[4] = {1, 1, 2, 2};
    float xs[9] = {2, 1, 2, 1, 2, 1, 2, 1, 2}, ones[4] = {1, 1, 1, 1};
    float want[9] = {1, 0, 1, 0, 2, 0, 0, 0, 0};
    ot_tensor x = {.dtype = OT_F32, .shape = ot_shape_make(4, xd), .data = xs, .nbytes = sizeof xs};
    ot_tensor dy = {.dtype = OT_F32, .shape = ot_shape_make(4, yd), .data = ones, .nbytes = sizeof ones};
    ot_tensor out[1] = {out_tensor(OT_F32, 4, xd)};
    int n = add_node(g, OT_OP_MAX_POOL_GRAD, 2, 1);
    int64_t k[2] = {2, 2}, s1[2] = {1, 1}, p0[4] = {0, 0, 0, 0};
    ot_node_set_attr_ints(&g->nodes[n], "kernel_shape", k, 2);
    ot_node_set_attr_ints(&g->nodes[n], "strides", s1, 2);
    ot_node_set_attr_ints(&g->nodes[n], "pads", p0, 4);
    run1(&g->nodes[n], (ot_tensor[]){dy, x}, out);
    assert_memory_equal(out[0].data, want, sizeof want);
    free(out[0].data);
    /* 3x3 windows, stride 1, pad 1 over an all-negative 2x2 plane: every window
     * holds -1 (the first element), so it takes all 4 (PyTorch: [[4,0],[0,0]]) */
    int64_t xd2[4] = {1, 1, 2, 2};
    float xs2[4] = {-1, -2, -3, -4}, want2[4] = {4, 0, 0, 0};
    ot_tensor x2 = {.dtype = OT_F32, .shape = ot_shape_make(4, xd2), .data = xs2, .nbytes = sizeof xs2};
    ot_tensor dy2 = {.dtype = OT_F32, .shape = ot_shape_make(4, xd2), .data = ones, .nbytes = sizeof ones};
    ot_tensor out2[1] = {out_tensor(OT_F32, 4, xd2)};
    int n2 = add_node(g, OT_OP_MAX_POOL_GRAD, 2, 1);
    int64_t k3[2] = {3, 3}, p1[4] = {1, 1, 1, 1};
    ot_node_set_attr_ints(&g->nodes[n2], "kernel_shape", k3, 2);
    ot_node_set_attr_ints(&g->nodes[n2], "strides", s1, 2);
    ot_node_set_attr_ints(&g->nodes[n2], "pads", p1, 4);
    run1(&g->nodes[n2], (ot_tensor[]){dy2, x2}, out2);
    assert_memory_equal(out2[0].data, want2, sizeof want2);
    free(out2[0].data);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gather_grad),
        cmocka_unit_test(test_gather_grad_onto_base),
        cmocka_unit_test(test_reduce_expand_like),
        cmocka_unit_test(test_threads_conv_norm_pool),
        cmocka_unit_test(test_clip_grad_bounds),
        cmocka_unit_test(test_max_pool_grad_ties_pads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
