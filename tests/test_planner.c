/* test_planner.c — the schedule and the memory planner on hand-built graphs:
 * lifetimes, in-place reuse, pinned slabs, best fit and the second placement, workspaces, kept activations,
 * lazy placement of recompute clones, errors, and speed on a 5,000-node graph (views
 * are in test_planner_views.c). Every plan built here is checked exhaustively
 * (helpers/plan_check.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir.h"
#include "exec/backend.h"
#include "plan/planner.h"
#include "plan/schedule.h"
#include "plan_check.h"

/* ---- tests ------------------------------------------------------------------- */

/* x -> Relu -> a -> Neg -> b -> Exp -> c (output) */
static void test_chain_lifetimes_and_inplace(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("chain");
    int x = pc_f32(g, "x", 100, OT_VK_INPUT);
    pc_mark_input(g, x);
    int a = pc_f32(g, "a", 100, OT_VK_ACTIVATION);
    int b = pc_f32(g, "b", 100, OT_VK_ACTIVATION);
    int c = pc_f32(g, "c", 100, OT_VK_ACTIVATION);
    pc_node1(g, OT_OP_RELU, "relu", x, a, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_NEG, "neg", a, b, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_EXP, "exp", b, c, OT_PHASE_FORWARD);
    pc_mark_output(g, c);

    ot_plan *p = pc_plan_of(g, NULL, false);
    assert_true(p->values[x].pinned);
    assert_true(p->values[c].pinned);
    assert_int_equal(p->values[x].category, OT_MEM_IO);
    assert_int_equal(p->values[a].def_step, 0);
    assert_int_equal(p->values[a].last_step, 1);
    assert_int_equal(p->values[b].def_step, 1);
    assert_int_equal(p->values[b].last_step, 2);
    /* b takes over a's block in place (a dies at Neg, same size); x is pinned so a
     * cannot take x's; c is pinned so it does not take b's. */
    assert_int_equal(p->values[b].offset, p->values[a].offset);
    assert_int_equal(p->values[b].inplace_of, a);
    assert_int_equal(p->values[a].inplace_of, -1);
    assert_int_equal(p->pinned_bytes, 2 * 448); /* 400 bytes each, aligned to 64 */
    assert_int_equal(p->peak_bytes, 2 * 448 + 400);
    assert_int_equal(ot_plan_peak_bytes(p), p->peak_bytes);
    assert_int_equal(ot_plan_offset(p, a), p->values[a].offset);
    assert_int_equal(ot_plan_offset(p, 999), -1);
    /* Bytes in use: x and c pinned (800) + a; then a handed to b: still 1200. */
    assert_int_equal(p->timeline[0], 1200);
    assert_int_equal(p->timeline[1], 1200);
    assert_int_equal(p->timeline[2], 1200);
    assert_int_equal(p->at_peak[OT_MEM_IO], 800);
    assert_int_equal(p->at_peak[OT_MEM_TRANSIENT], 400);
    ot_plan_free(p);

    /* Without in-place: b needs its own block while a is still being read. */
    p = pc_plan_of(g, NULL, true);
    assert_true(p->values[b].offset != p->values[a].offset);
    assert_int_equal(p->peak_bytes, 2 * 448 + 448 + 400);
    ot_plan_free(p);
    ot_graph_free(g);
}

/* In place is refused when the input lives on, or the sizes differ, or the op has
 * neither trait. */
static void test_inplace_conditions(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("inplace");
    int x = pc_f32(g, "x", 64, OT_VK_INPUT);
    pc_mark_input(g, x);
    int a = pc_f32(g, "a", 64, OT_VK_ACTIVATION);
    int b = pc_f32(g, "b", 64, OT_VK_ACTIVATION);  /* Relu(a); a read again later */
    int c = pc_f32(g, "c", 64, OT_VK_ACTIVATION);  /* Add(a, b): a dies here -> in place */
    int d = pc_f32(g, "d", 32, OT_VK_ACTIVATION);  /* Reshape-like view of c with another size: no */
    int e = pc_f32(g, "e", 32, OT_VK_ACTIVATION);  /* Softmax(d): no INPLACE trait */
    int f = pc_f32(g, "f", 32, OT_VK_ACTIVATION);  /* Flatten(e): VIEW, same size -> an alias of e */
    int y = pc_f32(g, "y", 32, OT_VK_ACTIVATION);
    pc_node1(g, OT_OP_NEG, "n0", x, a, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_RELU, "n1", a, b, OT_PHASE_FORWARD);
    pc_node2(g, OT_OP_ADD, "n2", a, b, c, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_RESHAPE, "n3", c, d, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_SOFTMAX, "n4", d, e, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_FLATTEN, "n5", e, f, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_SIGMOID, "n6", f, y, OT_PHASE_FORWARD);
    pc_mark_output(g, y);
    ot_plan *p = pc_plan_of(g, NULL, false);
    assert_int_equal(p->values[b].inplace_of, -1);
    assert_true(p->values[b].offset != p->values[a].offset);
    assert_int_equal(p->values[c].inplace_of, a);
    assert_int_equal(p->values[d].inplace_of, -1);
    assert_int_equal(p->values[e].inplace_of, -1);
    assert_int_equal(p->values[f].inplace_of, -1);
    assert_int_equal(p->values[f].alias_of, e);
    assert_int_equal(p->values[f].offset, p->values[e].offset);
    assert_int_equal(p->values[d].alias_of, -1); /* the sizes differ: not a view */
    ot_plan_free(p);
    /* Without in-place reuse, f is a copy in a block of its own. */
    p = pc_plan_of(g, NULL, true);
    assert_int_equal(p->values[f].alias_of, -1);
    assert_true(p->values[f].offset != p->values[e].offset);
    ot_plan_free(p);
    ot_graph_free(g);
}

/* Params, gradients of params, optimizer state: contiguous slabs in that order. */
static void test_pinned_slabs(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("slabs");
    int x = pc_f32(g, "x", 10, OT_VK_INPUT);
    pc_mark_input(g, x);
    int w1 = pc_f32(g, "w1", 10, OT_VK_PARAM);
    int w2 = pc_f32(g, "w2", 30, OT_VK_PARAM);
    int m1 = pc_f32(g, "m1", 10, OT_VK_OPT_STATE);
    int m2 = pc_f32(g, "m2", 30, OT_VK_OPT_STATE);
    int k = pc_f32(g, "k", 10, OT_VK_CONSTANT);
    int unused_k = pc_f32(g, "unused_const", 1000, OT_VK_CONSTANT);
    int h = pc_f32(g, "h", 10, OT_VK_ACTIVATION);
    int h2 = pc_f32(g, "h2", 10, OT_VK_ACTIVATION);
    int loss = pc_f32(g, "loss", 10, OT_VK_ACTIVATION);
    int g1 = pc_f32(g, "w1_grad", 10, OT_VK_GRADIENT);
    int g2 = pc_f32(g, "w2_grad", 30, OT_VK_GRADIENT);
    int tmp = pc_f32(g, "tmp_grad", 10, OT_VK_GRADIENT); /* not a param gradient */
    pc_node2(g, OT_OP_MUL, "f0", x, w1, h, OT_PHASE_FORWARD);
    pc_node2(g, OT_OP_ADD, "f1", h, k, h2, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_NEG, "l", h2, loss, OT_PHASE_LOSS);
    pc_node2(g, OT_OP_MUL, "b0", loss, h, tmp, OT_PHASE_BACKWARD);
    pc_node2(g, OT_OP_MUL, "b1", tmp, x, g1, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_CONCAT, "b2", tmp, g2, OT_PHASE_BACKWARD);
    int s1[3] = {w1, g1, m1}, s2[3] = {w2, g2, m2};
    ot_graph_add_node(g, OT_OP_SGD_STEP, "opt1", s1, 3, NULL, 0, OT_PHASE_OPTIMIZER);
    ot_graph_add_node(g, OT_OP_SGD_STEP, "opt2", s2, 3, NULL, 0, OT_PHASE_OPTIMIZER);
    pc_mark_output(g, loss);

    ot_plan *p = pc_plan_of(g, NULL, false);
    assert_int_equal(p->values[w1].offset, 0);
    assert_int_equal(p->values[w2].offset, 64);
    assert_int_equal(p->slab_offset[OT_MEM_PARAMS], 0);
    assert_int_equal(p->slab_bytes[OT_MEM_PARAMS], 64 + 128);
    assert_int_equal(p->slab_offset[OT_MEM_GRADIENTS], 192);
    assert_int_equal(p->values[g1].offset, 192);
    assert_int_equal(p->values[g2].offset, 256);
    assert_int_equal(p->values[g1].category, OT_MEM_GRADIENTS);
    assert_true(p->values[g1].pinned);
    assert_int_equal(p->slab_offset[OT_MEM_OPT_STATE], 384);
    assert_int_equal(p->values[m1].offset, 384);
    assert_int_equal(p->values[m2].offset, 448);
    assert_int_equal(p->values[k].category, OT_MEM_CONSTANTS);
    assert_int_equal(p->values[unused_k].offset, -1); /* constants nothing reads take no space */
    assert_false(p->values[tmp].pinned);
    assert_true((size_t)p->values[tmp].offset >= p->pinned_bytes);
    /* h is read by the backward pass: a kept activation; h2 dies in the forward. */
    assert_int_equal(p->values[h].category, OT_MEM_KEPT);
    assert_int_equal(p->values[h2].category, OT_MEM_TRANSIENT);
    assert_int_equal(p->backward_step, 3);
    assert_int_equal(p->total[OT_MEM_PARAMS], 160);
    assert_int_equal(p->total[OT_MEM_GRADIENTS], 160);
    assert_int_equal(p->total[OT_MEM_OPT_STATE], 160);
    assert_int_equal(p->total[OT_MEM_KEPT], 40);
    /* Padding: the 40-byte values (x, w1, m1, k, w1_grad, loss) take 64-byte slots, the
     * 120-byte ones (w2, m2, w2_grad) 128; the peak is at least every step's bytes in
     * use plus it while a transient block is live (the bound --remat optimal uses). */
    assert_int_equal(p->pinned_padding, 6 * 24 + 3 * 8);
    size_t held = 0;
    for (int v = 0; v < p->n_values; v++)
        if (p->values[v].pinned && p->values[v].offset >= 0) held += p->values[v].nbytes;
    assert_int_equal(p->pinned_bytes - held, p->pinned_padding);
    for (int s = 0; s < p->n_steps; s++)
        if (p->timeline[s] > held) assert_true(p->peak_bytes >= p->timeline[s] + p->pinned_padding);
    ot_plan_free(p);
    ot_graph_free(g);
}

/* Gradients and optimizer state created in reverse order (as a backward pass does)
 * still mirror the param slab; a value every optimizer node reads (shared scalars)
 * goes last. */
static void test_slabs_mirror_params(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("mirror");
    int x = pc_f32(g, "x", 16, OT_VK_INPUT);
    pc_mark_input(g, x);
    int w[3], gr[3], m[3];
    char nm[16];
    for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "w%d", i);
        w[i] = pc_f32(g, nm, 16 * (i + 1), OT_VK_PARAM);
    }
    int scalars = pc_f32(g, "scalars", 4, OT_VK_OPT_STATE);
    for (int i = 2; i >= 0; i--) {
        snprintf(nm, sizeof nm, "g%d", i);
        gr[i] = pc_f32(g, nm, 16 * (i + 1), OT_VK_GRADIENT);
        snprintf(nm, sizeof nm, "m%d", i);
        m[i] = pc_f32(g, nm, 16 * (i + 1), OT_VK_OPT_STATE);
        snprintf(nm, sizeof nm, "b%d", i);
        ot_graph_add_node(g, OT_OP_CONCAT, nm, &x, 1, &gr[i], 1, OT_PHASE_BACKWARD);
    }
    for (int i = 2; i >= 0; i--) {
        int in[4] = {w[i], gr[i], m[i], scalars};
        snprintf(nm, sizeof nm, "sgd%d", i);
        ot_graph_add_node(g, OT_OP_SGD_STEP, nm, in, 4, NULL, 0, OT_PHASE_OPTIMIZER);
    }
    ot_plan *p = pc_plan_of(g, NULL, false);
    for (int i = 0; i < 3; i++) {
        int64_t off = p->values[w[i]].offset - (int64_t)p->slab_offset[OT_MEM_PARAMS];
        assert_int_equal(p->values[gr[i]].offset - (int64_t)p->slab_offset[OT_MEM_GRADIENTS], off);
        assert_int_equal(p->values[m[i]].offset - (int64_t)p->slab_offset[OT_MEM_OPT_STATE], off);
    }
    assert_int_equal(p->slab_bytes[OT_MEM_GRADIENTS], p->slab_bytes[OT_MEM_PARAMS]);
    assert_int_equal(p->values[scalars].offset,
                     (int64_t)(p->slab_offset[OT_MEM_OPT_STATE] + p->slab_bytes[OT_MEM_PARAMS]));
    ot_plan_free(p);
    ot_graph_free(g);
}

/* Best fit picks the smallest hole that fits, not the first. */
static void test_best_fit(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("bestfit");
    int x = pc_f32(g, "x", 16, OT_VK_INPUT);
    pc_mark_input(g, x);
    int A = pc_f32(g, "A", 1024, OT_VK_ACTIVATION); /* 4096 B */
    int B = pc_f32(g, "B", 256, OT_VK_ACTIVATION);  /* 1024 B */
    int C = pc_f32(g, "C", 512, OT_VK_ACTIVATION);  /* 2048 B */
    int D = pc_f32(g, "D", 16, OT_VK_ACTIVATION);   /* 64 B */
    int T = pc_f32(g, "T", 16, OT_VK_ACTIVATION);
    int E = pc_f32(g, "E", 512, OT_VK_ACTIVATION);
    int y = pc_f32(g, "y", 16, OT_VK_ACTIVATION);
    pc_node1(g, OT_OP_RELU, "n0", x, A, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_RELU, "n1", x, B, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_RELU, "n2", x, C, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_RELU, "n3", x, D, OT_PHASE_FORWARD);
    pc_node2(g, OT_OP_SUM, "n4", A, C, T, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_TANH, "n5", D, E, OT_PHASE_FORWARD);
    int ins[3] = {B, E, T};
    ot_graph_add_node(g, OT_OP_SUM, "n6", ins, 3, &y, 1, OT_PHASE_FORWARD);
    pc_mark_output(g, y);
    ot_plan *p = pc_plan_of(g, NULL, false);
    size_t base = p->pinned_bytes;
    assert_int_equal(p->values[A].offset, (int64_t)base);
    assert_int_equal(p->values[B].offset, (int64_t)base + 4096);
    assert_int_equal(p->values[C].offset, (int64_t)base + 5120);
    assert_int_equal(p->values[D].offset, (int64_t)base + 7168);
    assert_int_equal(p->values[T].offset, (int64_t)base + 7232);
    /* Holes after n4: A's 4096 at base and C's 2048 at base+5120. E (2048) fits both;
     * best fit takes C's exactly; first fit would have taken A's. */
    assert_int_equal(p->values[E].offset, p->values[C].offset);
    assert_int_equal(p->peak_bytes, base + 7232 + 64);
    assert_int_equal(p->peak_step, 4);
    ot_plan_free(p);
    ot_graph_free(g);
}

/* Best fit leaves a hole that the second placement closes: A (1024 B) dies under B
 * (64 B), so best fit puts C (2048 B) above B and ends at 3,200 bytes, 1,024 above
 * the most ever in use (B, S and C: 2,176); greedy by size puts C at the bottom, A
 * under it (they are never live together) and B and S above. The plan is the refit's
 * (checked whole by pc_check_plan), and a bounded build agrees with it at every limit,
 * including one that best fit's peak passes but the plan's does not. */
static void test_refit_closes_hole(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("refit");
    int x = pc_f32(g, "x", 16, OT_VK_INPUT);
    pc_mark_input(g, x);
    int A = pc_f32(g, "A", 256, OT_VK_ACTIVATION); /* 1024 B */
    int B = pc_f32(g, "B", 16, OT_VK_ACTIVATION);  /* 64 B */
    int S = pc_f32(g, "S", 16, OT_VK_ACTIVATION);  /* 64 B */
    int C = pc_f32(g, "C", 512, OT_VK_ACTIVATION); /* 2048 B */
    int y = pc_f32(g, "y", 16, OT_VK_ACTIVATION);
    int order[5];
    order[0] = pc_node1(g, OT_OP_RELU, "n0", x, A, OT_PHASE_FORWARD);
    order[1] = pc_node1(g, OT_OP_RELU, "n1", x, B, OT_PHASE_FORWARD);
    order[2] = pc_node2(g, OT_OP_SUM, "n2", A, B, S, OT_PHASE_FORWARD);
    order[3] = pc_node1(g, OT_OP_RELU, "n3", S, C, OT_PHASE_FORWARD);
    order[4] = pc_node2(g, OT_OP_SUM, "n4", B, C, y, OT_PHASE_FORWARD);
    pc_mark_output(g, y);
    ot_plan *p = NULL, *q = NULL;
    ot_error err = {0};
    bool exceeded = false;
    assert_int_equal(ot_plan_build(g, order, 5, NULL, &p, &err), OT_OK);
    pc_check_plan(g, p);
    size_t base = p->pinned_bytes, top = 0;
    for (int s = 0; s < 5; s++) top = p->timeline[s] > top ? p->timeline[s] : top;
    assert_int_equal(top, 128 + 2176); /* x and y, pinned, and B, S, C */
    assert_int_equal(p->peak_bytes, base + 2176); /* no hole: bytes in use + padding */
    assert_int_equal(p->peak_bytes, top + p->pinned_padding);
    assert_int_equal(p->values[C].offset, (int64_t)base);
    assert_int_equal(p->values[A].offset, (int64_t)base);
    assert_int_equal(p->values[B].offset, (int64_t)base + 2048);
    assert_int_equal(p->values[S].offset, (int64_t)base + 2112);
    /* S reaches the top first, at step 2 (C, below it, does not raise it at step 3): the
     * peak step is where the executor first measures the peak, before the most in use */
    assert_int_equal(p->peak_step, 2);
    assert_int_equal(p->at_peak[OT_MEM_TRANSIENT], 1024 + 64 + 64);
    /* bounded: best fit alone (base + 3200) passes these limits, the plan does not */
    size_t limits[] = {p->peak_bytes, base + 3199, SIZE_MAX};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ot_plan_build_bounded(g, order, 5, NULL, limits[k], &q, &exceeded, &err), OT_OK);
        assert_false(exceeded);
        assert_non_null(q);
        assert_int_equal(q->peak_bytes, p->peak_bytes);
        for (int v = 0; v < p->n_values; v++) assert_int_equal(q->values[v].offset, p->values[v].offset);
        ot_plan_free(q);
    }
    assert_int_equal(ot_plan_build_bounded(g, order, 5, NULL, p->peak_bytes - 1, &q, &exceeded, &err), OT_OK);
    assert_true(exceeded);
    assert_null(q);
    ot_plan_free(p);
    ot_graph_free(g);
}

/* A plan that best fit and the second placement's two orders cannot fit within a
 * target, but the search (plan/refit.h, ot_fit_search) can. Five blocks, from steps
 * 0-4 (one per step, each read by the step that ends it): 256 B live at 0-3, 320 B at
 * 1-2, 64 B at 2-4, 128 B at 3-4, 384 B at 4 (read by nobody). At most 640 B are
 * live at one step; best fit ends at 1,024, greedy by size and by breadth at 768.
 * With a target of base + 640 the search places the 384-byte block first, then the
 * 256-byte one, and ends at 640; a target the floor passes, or none, leaves the plan
 * as it was, and a bounded build gives the same plan at any limit it meets. */
static ot_graph *aim_graph(int *order, int *n_order) {
    static const int first[5] = {0, 1, 2, 3, 4}, last[5] = {3, 2, 4, 4, 4}, bytes[5] = {256, 320, 64, 128, 384};
    ot_graph *g = ot_graph_new("aim");
    int x = pc_f32(g, "x", 16, OT_VK_INPUT);
    pc_mark_input(g, x);
    int v[5];
    char name[16];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "v%d", i);
        v[i] = pc_f32(g, name, bytes[i] / 4, OT_VK_ACTIVATION);
    }
    for (int s = 0; s < 5; s++) { /* step s makes v[s] and reads the values that end at s (else x) */
        int in[5], n_in = 0;
        for (int i = 0; i < 5; i++)
            if (last[i] == s && first[i] < s) in[n_in++] = v[i];
        if (n_in == 0) in[n_in++] = x;
        snprintf(name, sizeof name, "n%d", s);
        order[s] = ot_graph_add_node(g, OT_OP_SUM, name, in, n_in, &v[s], 1, OT_PHASE_FORWARD);
        assert_true(order[s] >= 0);
    }
    int y = pc_f32(g, "y", 16, OT_VK_ACTIVATION);
    order[5] = pc_node1(g, OT_OP_RELU, "n5", x, y, OT_PHASE_FORWARD);
    pc_mark_output(g, y);
    *n_order = 6;
    return g;
}

static void test_fit_target_search(void **state) {
    (void)state;
    int order[6], n;
    ot_graph *g = aim_graph(order, &n);
    ot_error err = {0};
    ot_plan *p0 = NULL, *p = NULL, *q = NULL;
    ot_plan_options o = {.no_inplace = true};
    assert_int_equal(ot_plan_build_opts(g, order, n, NULL, &o, &p0, &err), OT_OK);
    pc_check_plan(g, p0);
    size_t base = p0->pinned_bytes;
    assert_int_equal(p0->peak_bytes, base + 768); /* the lower of the two orders */
    /* a target in reach: the search's placement, at the floor */
    size_t targets[] = {base + 640, base + 700, base + 767};
    for (int k = 0; k < 3; k++) {
        o.fit_target_bytes = targets[k];
        assert_int_equal(ot_plan_build_opts(g, order, n, NULL, &o, &p, &err), OT_OK);
        pc_check_plan(g, p);
        assert_int_equal(p->peak_bytes, base + 640);
        for (int s = 0; s < n; s++) assert_int_equal(p->timeline[s], p0->timeline[s]); /* only offsets move */
        /* the same plan from a bounded build at any limit it meets, none below */
        size_t limits[] = {p->peak_bytes, base + 767, SIZE_MAX};
        for (int j = 0; j < 3; j++) {
            bool exceeded = true;
            assert_int_equal(ot_plan_build_in(g, order, n, NULL, &o, NULL, limits[j], NULL, &q, &exceeded, &err),
                             OT_OK);
            assert_false(exceeded);
            assert_int_equal(q->peak_bytes, p->peak_bytes);
            for (int v = 0; v < p->n_values; v++) assert_int_equal(q->values[v].offset, p->values[v].offset);
            ot_plan_free(q);
        }
        bool exceeded = false;
        assert_int_equal(ot_plan_build_in(g, order, n, NULL, &o, NULL, p->peak_bytes - 1, NULL, &q, &exceeded, &err),
                         OT_OK);
        assert_true(exceeded);
        assert_null(q);
        ot_plan_free(p);
    }
    /* no target in reach (below the floor, or met already): the plan without one */
    size_t none[] = {base + 639, base + 768};
    for (int k = 0; k < 2; k++) {
        o.fit_target_bytes = none[k];
        assert_int_equal(ot_plan_build_opts(g, order, n, NULL, &o, &p, &err), OT_OK);
        assert_int_equal(p->peak_bytes, p0->peak_bytes);
        for (int v = 0; v < p->n_values; v++) assert_int_equal(p->values[v].offset, p0->values[v].offset);
        ot_plan_free(p);
    }
    ot_plan_free(p0);
    ot_graph_free(g);
}

/* A fake backend that asks 1000 bytes of workspace for MatMul only. */
static size_t fake_ws(ot_backend *be, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)be;
    assert_true(in[0].shape.rank >= 0 && out[0].dtype == OT_F32); /* descriptors are filled */
    return node->op == OT_OP_MATMUL ? 1000 : 0;
}

static void test_workspace(void **state) {
    (void)state;
    ot_backend be = {.name = "fake", .workspace_bytes = fake_ws};
    ot_graph *g = ot_graph_new("ws");
    int x = pc_f32(g, "x", 16, OT_VK_INPUT);
    pc_mark_input(g, x);
    int w = pc_f32(g, "w", 16, OT_VK_PARAM);
    int a = pc_f32(g, "a", 16, OT_VK_ACTIVATION);
    int b = pc_f32(g, "b", 16, OT_VK_ACTIVATION);
    int y = pc_f32(g, "y", 16, OT_VK_ACTIVATION);
    pc_node1(g, OT_OP_RELU, "r", x, a, OT_PHASE_FORWARD);
    pc_node2(g, OT_OP_MATMUL, "mm", a, w, b, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_NEG, "n", b, y, OT_PHASE_FORWARD);
    pc_mark_output(g, y);
    ot_plan *p = pc_plan_of(g, &be, false);
    assert_int_equal(p->ws_offset[0], -1);
    assert_int_equal(p->ws_bytes[1], 1000);
    assert_true(p->ws_offset[1] >= 0);
    assert_int_equal(p->ws_offset[2], -1);
    /* Step 1: a (64) + b (64) + workspace (1000) live in the transient region. */
    assert_int_equal(p->peak_step, 1);
    assert_int_equal(p->at_peak[OT_MEM_WORKSPACE], 1000);
    assert_int_equal(p->total[OT_MEM_WORKSPACE], 1000);
    assert_int_equal(p->peak_bytes, p->pinned_bytes + 128 + 1000);
    assert_int_equal(p->timeline[1], 64 * 3 + 128 + 1000);
    ot_plan_free(p);
    ot_graph_free(g);
}

static void test_dynamic_shape_error(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("dyn");
    int sym = ot_graph_add_sym(g, "batch");
    ot_shape s = ot_shape_make(2, (int64_t[]){-1, 4});
    s.sym[0] = sym;
    int x = ot_graph_add_value(g, "x", OT_F32, &s, OT_VK_INPUT);
    pc_mark_input(g, x);
    int y = ot_graph_add_value(g, "hidden_y", OT_F32, &s, OT_VK_ACTIVATION);
    pc_node1(g, OT_OP_RELU, "r", x, y, OT_PHASE_FORWARD);
    pc_mark_output(g, y);
    int *order = NULL, n = 0;
    ot_error err = {0};
    assert_int_equal(ot_schedule_build(g, &order, &n, &err), OT_OK);
    ot_plan *p = NULL;
    assert_int_equal(ot_plan_build(g, order, n, NULL, &p, &err), OT_E_SHAPE);
    assert_null(p);
    assert_non_null(strstr(err.msg, "'x'"));
    assert_non_null(strstr(err.msg, "batch"));
    free(order);
    ot_graph_free(g);
}

/* Phases in order; a recompute clone waits until just before its first reader. */
static void test_schedule_phases_and_recompute(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("sched");
    int x = pc_f32(g, "x", 8, OT_VK_INPUT);
    pc_mark_input(g, x);
    int w = pc_f32(g, "w", 8, OT_VK_PARAM);
    int gw = pc_f32(g, "gw", 8, OT_VK_GRADIENT);
    int v[10];
    char nm[8];
    for (int i = 0; i < 10; i++) {
        snprintf(nm, sizeof nm, "v%d", i);
        v[i] = pc_f32(g, nm, 8, OT_VK_ACTIVATION);
    }
    /* ids: 0 opt (optimizer, created first), 1 f0, 2 f1, 3 r0 (clone of f0), 4 r1
     * (clone chain), 5 b0, 6 b1 (reads r1), 7 loss */
    int so[2] = {w, gw};
    ot_graph_add_node(g, OT_OP_SGD_STEP, "opt", so, 2, NULL, 0, OT_PHASE_OPTIMIZER);
    pc_node2(g, OT_OP_MUL, "f0", x, w, v[0], OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_TANH, "f1", v[0], v[1], OT_PHASE_FORWARD);
    int r0 = pc_node2(g, OT_OP_MUL, "r0", x, w, v[2], OT_PHASE_RECOMPUTE);
    int r1 = pc_node1(g, OT_OP_TANH, "r1", v[2], v[3], OT_PHASE_RECOMPUTE);
    g->nodes[r0].orig_node = 1;
    g->nodes[r1].orig_node = 2;
    pc_node1(g, OT_OP_ONES_LIKE, "b0", v[4], v[5], OT_PHASE_BACKWARD);
    pc_node2(g, OT_OP_TANH_GRAD, "b1", v[5], v[3], gw, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_NEG, "loss", v[1], v[4], OT_PHASE_LOSS);
    pc_mark_output(g, v[4]);
    int *order = NULL, n = 0;
    ot_error err = {0};
    assert_int_equal(ot_schedule_build(g, &order, &n, &err), OT_OK);
    assert_int_equal(n, 8);
    int want[8] = {1, 2, 7, 5, 3, 4, 6, 0};
    for (int i = 0; i < 8; i++) assert_int_equal(order[i], want[i]);
    free(order);
    ot_plan *p = pc_plan_of(g, NULL, false);
    assert_int_equal(p->backward_step, 3);
    /* v[0] and v[1] die in the forward pass: nothing is kept across the boundary. */
    assert_int_equal(p->total[OT_MEM_KEPT], 0);
    ot_plan_free(p);

    /* A cycle is reported, naming a node. */
    ot_graph_set_input(g, 1, 0, v[1]);
    assert_int_equal(ot_schedule_build(g, &order, &n, &err), OT_E_MODEL);
    assert_non_null(strstr(err.msg, "cycle"));
    ot_graph_free(g);
}

/* Several outputs, an output never read, zero-size values, a value read twice. */
static void test_odd_values(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("odd");
    int x = pc_f32(g, "x", 40, OT_VK_INPUT);
    pc_mark_input(g, x);
    int y = pc_f32(g, "y", 40, OT_VK_ACTIVATION);
    int mask = ot_graph_add_value(g, "mask", OT_BOOL, &g->values[x].shape, OT_VK_ACTIVATION);
    int z = pc_f32(g, "z", 0, OT_VK_ACTIVATION);
    int sq = pc_f32(g, "sq", 40, OT_VK_ACTIVATION);
    int outv = pc_f32(g, "out", 40, OT_VK_ACTIVATION);
    int dout[2] = {y, mask};
    ot_graph_add_node(g, OT_OP_DROPOUT, "drop", &x, 1, dout, 2, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_RELU, "empty", x, z, OT_PHASE_FORWARD);
    pc_node2(g, OT_OP_MUL, "square", y, y, sq, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_NEG, "neg", sq, outv, OT_PHASE_FORWARD);
    pc_mark_output(g, outv);
    ot_plan *p = pc_plan_of(g, NULL, false);
    assert_int_equal(p->values[mask].nbytes, 40);
    assert_int_equal(p->values[mask].last_step, p->values[mask].def_step);
    assert_int_equal(p->values[z].nbytes, 0);
    assert_true(p->values[z].offset >= 0);
    assert_int_equal(p->values[sq].inplace_of, y); /* y read twice by Mul, dies there */
    ot_plan_free(p);
    ot_graph_free(g);
}

/* A 5,000-node training-like graph (a chain of 2,500 forward nodes, each output read
 * again by a backward node) plans in well under a second. */
static void test_plan_5000_nodes_fast(void **state) {
    (void)state;
    const int L = 2500;
    ot_graph *g = ot_graph_new("big");
    int x = pc_f32(g, "x", 256, OT_VK_INPUT);
    pc_mark_input(g, x);
    int *h = malloc(sizeof(int) * (size_t)(L + 1));
    h[0] = x;
    char nm[32];
    for (int i = 1; i <= L; i++) {
        snprintf(nm, sizeof nm, "h%d", i);
        h[i] = pc_f32(g, nm, 256 + (i % 7) * 16, OT_VK_ACTIVATION);
        pc_node1(g, i % 2 ? OT_OP_TANH : OT_OP_SOFTMAX, nm, h[i - 1], h[i], OT_PHASE_FORWARD);
    }
    int gcur = h[L];
    for (int i = L; i >= 1; i--) {
        snprintf(nm, sizeof nm, "g%d", i);
        int gn = pc_f32(g, nm, 256 + ((i - 1) % 7) * 16, OT_VK_GRADIENT);
        pc_node2(g, OT_OP_TANH_GRAD, nm, gcur, h[i - 1], gn, OT_PHASE_BACKWARD);
        gcur = gn;
    }
    pc_mark_output(g, gcur);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int *order = NULL, n = 0;
    ot_error err = {0};
    assert_int_equal(ot_schedule_build(g, &order, &n, &err), OT_OK);
    assert_int_equal(n, 2 * L);
    ot_plan *p = NULL;
    assert_int_equal(ot_plan_build(g, order, n, NULL, &p, &err), OT_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    print_message("schedule + plan of %d nodes: %.1f ms, peak %zu bytes\n", n, sec * 1e3, p->peak_bytes);
    assert_true(sec < 0.5);
    pc_check_plan(g, p);
    /* Every forward value but the last is read by the backward pass: kept. */
    assert_true(p->total[OT_MEM_KEPT] > 0);
    assert_true(p->at_peak[OT_MEM_KEPT] == p->total[OT_MEM_KEPT] || p->at_peak[OT_MEM_KEPT] > 0);
    free(order);
    ot_plan_free(p);
    free(h);
    ot_graph_free(g);
}

/* A tied weight: its gradient is Sum(c1, c2) with c1 made at the start of the
 * backward pass and c2 at its end. c1 is written into the gradient's pinned slot and
 * costs no transient block while the 16 KiB chain runs; with no_inplace it takes a
 * block of its own, 256 bytes more at the peak. */
static void test_gradient_slot(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("tied");
    const pc_stem st = pc_weight_stem(g, 64);
    const int x = st.x, w = st.w, d0 = st.d0;
    int c1 = pc_f32(g, "c1", 64, OT_VK_GRADIENT);
    int d1 = pc_f32(g, "d1", 4096, OT_VK_GRADIENT);
    int d2 = pc_f32(g, "d2", 64, OT_VK_GRADIENT);
    int c2 = pc_f32(g, "c2", 64, OT_VK_GRADIENT);
    int gw = pc_f32(g, "gw", 64, OT_VK_GRADIENT);
    pc_node2(g, OT_OP_MUL, "b1", d0, x, c1, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_EXPAND, "b2", d0, d1, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_REDUCE_SUM, "b3", d1, d2, OT_PHASE_BACKWARD); /* the planner reads no attributes */
    pc_node2(g, OT_OP_MUL, "b4", d2, x, c2, OT_PHASE_BACKWARD);
    pc_node2(g, OT_OP_SUM, "sum", c1, c2, gw, OT_PHASE_BACKWARD);
    int so[2] = {w, gw};
    ot_graph_add_node(g, OT_OP_SGD_STEP, "opt", so, 2, NULL, 0, OT_PHASE_OPTIMIZER);
    ot_plan *p = pc_plan_of(g, NULL, false);
    assert_int_equal(p->values[c1].slot_of, gw);
    assert_int_equal(p->values[c1].offset, p->values[gw].offset);
    assert_int_equal(p->values[c2].slot_of, -1);
    assert_true(p->values[c2].offset >= (int64_t)p->pinned_bytes);
    ot_plan *q = pc_plan_of(g, NULL, true);
    assert_int_equal(q->values[c1].slot_of, -1);
    assert_int_equal(q->peak_bytes, p->peak_bytes + 256);
    ot_plan_free(p);
    ot_plan_free(q);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_lifetimes_and_inplace),
        cmocka_unit_test(test_inplace_conditions),
        cmocka_unit_test(test_pinned_slabs),
        cmocka_unit_test(test_slabs_mirror_params),
        cmocka_unit_test(test_best_fit),
        cmocka_unit_test(test_refit_closes_hole),
        cmocka_unit_test(test_fit_target_search),
        cmocka_unit_test(test_workspace),
        cmocka_unit_test(test_dynamic_shape_error),
        cmocka_unit_test(test_schedule_phases_and_recompute),
        cmocka_unit_test(test_odd_values),
        cmocka_unit_test(test_plan_5000_nodes_fast),
        cmocka_unit_test(test_gradient_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
