/* test_schedule.c — the schedule's eager rule: a backward node that frees at least
 * what it allocates (here the Transpose of a weight gradient in the exporter's
 * layout) runs as soon as it is ready instead of at its id, so its input does not
 * stay alive across the rest of the backward pass; in its dynamic form, a node
 * becomes eager once the other readers of its input have run (the GEMM of a weight
 * gradient after the one of dX), and the planner judges the two forms (issue 16).
 * ot_schedule_plan returns the same order and plan as ot_schedule_build followed by
 * ot_plan_build, and a bounded planner run stops exactly when its peak passes the
 * limit; ot_schedule_plan_limit gives ot_schedule_plan's order and plan, or exceeded,
 * at every limit, through each case of plan_both (plan/schedule.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "ir.h"
#include "plan/planner.h"
#include "plan/schedule.h"
#include "plan_check.h"

/* ids: 0 f0 = x*w, 1 loss, 2 b0 seed, 3 b1 gt = d0*x (weight gradient, transposed
 * layout), 4..6 b2..b4 a chain of large activation gradients, 7 b5 gw = Transpose(gt),
 * 8 the optimizer step. The id order runs b5 after the chain; the eager rule runs it
 * right after b1. */
static void test_transposed_gradient_dies_at_once(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("eager");
    const pc_stem st = pc_weight_stem(g, 64);
    const int x = st.x, w = st.w, d0 = st.d0;
    int gt = pc_f32(g, "gt", 64, OT_VK_GRADIENT);
    int d1 = pc_f32(g, "d1", 4096, OT_VK_GRADIENT);
    int d2 = pc_f32(g, "d2", 4096, OT_VK_GRADIENT);
    int d3 = pc_f32(g, "d3", 4096, OT_VK_GRADIENT);
    int gw = pc_f32(g, "gw", 64, OT_VK_GRADIENT);
    pc_node2(g, OT_OP_MUL, "b1", d0, x, gt, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_EXPAND, "b2", d0, d1, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_TANH, "b3", d1, d2, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_TANH, "b4", d2, d3, OT_PHASE_BACKWARD);
    pc_mark_output(g, d3);
    int tr = pc_node1(g, OT_OP_TRANSPOSE, "b5", gt, gw, OT_PHASE_BACKWARD);
    int so[2] = {w, gw};
    ot_graph_add_node(g, OT_OP_SGD_STEP, "opt", so, 2, NULL, 0, OT_PHASE_OPTIMIZER);
    assert_int_equal(tr, 7);

    int *order = NULL, n = 0;
    ot_error err = {0};
    assert_int_equal(ot_schedule_build(g, &order, &n, &err), OT_OK);
    assert_int_equal(n, 9);
    int want[9] = {0, 1, 2, 3, 7, 4, 5, 6, 8};
    for (int i = 0; i < 9; i++) assert_int_equal(order[i], want[i]);
    free(order);

    /* gt dies at the step right after its producer, before the 16 KiB chain runs. */
    ot_plan *p = pc_plan_of(g, NULL, false);
    assert_int_equal(p->values[gt].def_step, 3);
    assert_int_equal(p->values[gt].last_step, 4);
    assert_true(p->values[gw].def_step < p->values[d1].def_step);
    ot_plan_free(p);
    ot_graph_free(g);
}

/* Not eager: the input lives on (read twice), or the output is larger; such nodes
 * keep the id order. Here b1 = Expand(d0) grows d0 and d0 is also read by b2, so the
 * order is the id order. */
static void test_growing_node_keeps_id_order(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("lazy");
    int x = pc_f32(g, "x", 64, OT_VK_INPUT);
    pc_mark_input(g, x);
    int l = pc_f32(g, "l", 64, OT_VK_ACTIVATION);
    int d0 = pc_f32(g, "d0", 64, OT_VK_GRADIENT);
    int big = pc_f32(g, "big", 4096, OT_VK_GRADIENT);
    int e = pc_f32(g, "e", 64, OT_VK_GRADIENT);
    int f = pc_f32(g, "f", 64, OT_VK_GRADIENT);
    int h = pc_f32(g, "h", 8192, OT_VK_GRADIENT);
    pc_node1(g, OT_OP_NEG, "loss", x, l, OT_PHASE_LOSS);
    pc_mark_output(g, l);
    pc_node1(g, OT_OP_ONES_LIKE, "b0", l, d0, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_EXPAND, "b1", d0, big, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_NEG, "b2", d0, e, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_NEG, "b3", e, f, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_EXPAND, "b4", big, h, OT_PHASE_BACKWARD);
    pc_mark_output(g, f);
    pc_mark_output(g, h);
    int *order = NULL, n = 0;
    ot_error err = {0};
    assert_int_equal(ot_schedule_build(g, &order, &n, &err), OT_OK);
    assert_int_equal(n, 6);
    /* b3 (e dies there, same size) is eager but only ready after b2; b4 grows big
     * (4096 -> 8192) and is not moved ahead of b2. */
    int want[6] = {0, 1, 2, 3, 4, 5};
    for (int i = 0; i < 6; i++) assert_int_equal(order[i], want[i]);
    free(order);
    ot_graph_free(g);
}

/* The dynamic form: d0 (dY) is read by b1 (a reduction of it, which frees nothing)
 * and by b5 (dW = d0 * x, a param's gradient, pinned: it allocates nothing). b5 is
 * not eager while b1 has not run; once it has, b5 is d0's last reader and runs at
 * once instead of after the chain b2..b4, so d0 dies before b2 grows the chain
 * again and b2's output reuses d0's block. The planner prefers this order: its peak
 * is below the id order's. */
static void test_last_reader_runs_once_the_others_did(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("dynamic");
    const pc_stem st = pc_weight_stem(g, 1024);
    const int x = st.x, w = st.w, d0 = st.d0;
    int e = pc_f32(g, "e", 256, OT_VK_GRADIENT);
    int e2 = pc_f32(g, "e2", 1024, OT_VK_GRADIENT);
    int e3 = pc_f32(g, "e3", 1024, OT_VK_GRADIENT);
    int e4 = pc_f32(g, "e4", 1024, OT_VK_GRADIENT);
    int gw = pc_f32(g, "gw", 1024, OT_VK_GRADIENT);
    pc_node1(g, OT_OP_REDUCE_SUM, "b1", d0, e, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_EXPAND, "b2", e, e2, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_TANH, "b3", e2, e3, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_TANH, "b4", e3, e4, OT_PHASE_BACKWARD);
    pc_mark_output(g, e4);
    int b5 = pc_node2(g, OT_OP_MUL, "b5", d0, x, gw, OT_PHASE_BACKWARD);
    int so[2] = {w, gw};
    ot_graph_add_node(g, OT_OP_SGD_STEP, "opt", so, 2, NULL, 0, OT_PHASE_OPTIMIZER);
    assert_int_equal(b5, 7);

    int *order = NULL, n = 0;
    ot_error err = {0};
    assert_int_equal(ot_schedule_build(g, &order, &n, &err), OT_OK);
    assert_int_equal(n, 9);
    int want[9] = {0, 1, 2, 3, 7, 4, 5, 6, 8};
    for (int i = 0; i < 9; i++) assert_int_equal(order[i], want[i]);
    free(order);

    ot_plan *p = pc_plan_of(g, NULL, false);
    assert_int_equal(p->values[d0].last_step, 4);
    assert_int_equal(p->values[e2].offset, p->values[d0].offset); /* d0's block, reused */
    int id_order[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    ot_plan *q = NULL;
    assert_int_equal(ot_plan_build(g, id_order, 9, NULL, &q, &err), OT_OK);
    pc_check_plan(g, q);
    assert_int_equal(q->values[d0].last_step, 7);
    assert_true(p->peak_bytes < q->peak_bytes);
    ot_plan_free(p);
    ot_plan_free(q);
    ot_graph_free(g);
}

/* Field by field (a plan's structs may carry padding): the same plan. */
static void assert_same_plan(const ot_plan *a, const ot_plan *b) {
    assert_int_equal(a->n_values, b->n_values);
    assert_int_equal(a->n_steps, b->n_steps);
    for (int v = 0; v < a->n_values; v++) {
        const ot_plan_value *x = &a->values[v], *y = &b->values[v];
        assert_int_equal(x->offset, y->offset);
        assert_int_equal(x->nbytes, y->nbytes);
        assert_int_equal(x->def_step, y->def_step);
        assert_int_equal(x->last_step, y->last_step);
        assert_int_equal(x->category, y->category);
        assert_int_equal(x->pinned, y->pinned);
        assert_int_equal(x->inplace_of, y->inplace_of);
        assert_int_equal(x->alias_of, y->alias_of);
        assert_int_equal(x->slot_of, y->slot_of);
    }
    for (int s = 0; s < a->n_steps; s++) {
        assert_int_equal(a->order[s], b->order[s]);
        assert_int_equal(a->ws_offset[s], b->ws_offset[s]);
        assert_int_equal(a->ws_bytes[s], b->ws_bytes[s]);
        assert_int_equal(a->timeline[s], b->timeline[s]);
    }
    assert_int_equal(a->peak_bytes, b->peak_bytes);
    assert_int_equal(a->peak_step, b->peak_step);
    assert_int_equal(a->pinned_bytes, b->pinned_bytes);
    for (int c = 0; c < OT_MEM_COUNT; c++) {
        assert_int_equal(a->at_peak[c], b->at_peak[c]);
        assert_int_equal(a->total[c], b->total[c]);
    }
}

/* A device that asks 256 bytes of scratch for every ReduceSum. */
static size_t reduce_scratch(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)ctx, (void)in, (void)out;
    return node->op == OT_OP_REDUCE_SUM ? 256 : 0;
}

/* The dynamic-form graph of the test above (the two orders differ, so the planner
 * judged them): with no device, and with one that asks workspace (the judging plan,
 * made without it, must not be reused then), ot_schedule_plan gives the order and
 * the plan that ot_schedule_build and ot_plan_build give. */
static void test_schedule_plan_is_schedule_then_plan(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("dynamic");
    const pc_stem st = pc_weight_stem(g, 1024);
    int e = pc_f32(g, "e", 256, OT_VK_GRADIENT);
    int e2 = pc_f32(g, "e2", 1024, OT_VK_GRADIENT);
    int e3 = pc_f32(g, "e3", 1024, OT_VK_GRADIENT);
    int gw = pc_f32(g, "gw", 1024, OT_VK_GRADIENT);
    pc_node1(g, OT_OP_REDUCE_SUM, "b1", st.d0, e, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_EXPAND, "b2", e, e2, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_TANH, "b3", e2, e3, OT_PHASE_BACKWARD);
    pc_mark_output(g, e3);
    pc_node2(g, OT_OP_MUL, "b5", st.d0, st.x, gw, OT_PHASE_BACKWARD);
    int so[2] = {st.w, gw};
    ot_graph_add_node(g, OT_OP_SGD_STEP, "opt", so, 2, NULL, 0, OT_PHASE_OPTIMIZER);
    ot_plan_device none = {0}, scratch = {.workspace_bytes = reduce_scratch};
    const ot_plan_device *devs[3] = {NULL, &none, &scratch};
    for (int d = 0; d < 3; d++) {
        int *order = NULL, *order2 = NULL, n = 0, n2 = 0;
        ot_plan *p = NULL, *q = NULL;
        ot_error err = {0};
        assert_int_equal(ot_schedule_plan(g, devs[d], &order, &n, &p, &err), OT_OK);
        assert_int_equal(ot_schedule_build(g, &order2, &n2, &err), OT_OK);
        assert_int_equal(n, n2);
        for (int i = 0; i < n; i++) assert_int_equal(order[i], order2[i]);
        assert_int_equal(ot_plan_build(g, order2, n2, devs[d], &q, &err), OT_OK);
        assert_same_plan(p, q);
        pc_check_plan(g, p);
        assert_int_equal(ot_plan_device_idle(g, order, n, devs[d]), d < 2);
        if (d == 2) assert_int_equal(p->ws_bytes[3], 256); /* b1, at step 3 */
        ot_plan_free(p);
        ot_plan_free(q);
        free(order);
        free(order2);
    }
    ot_graph_free(g);
}

/* A bounded run completes with the same plan when its limit is the peak, and stops
 * (no plan, no error) when the limit is one byte less. */
static void test_bounded_run_stops_past_the_limit(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("bounded");
    const pc_stem st = pc_weight_stem(g, 1024);
    int e = pc_f32(g, "e", 4096, OT_VK_GRADIENT);
    int f = pc_f32(g, "f", 1024, OT_VK_GRADIENT);
    pc_node1(g, OT_OP_EXPAND, "b1", st.d0, e, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_REDUCE_SUM, "b2", e, f, OT_PHASE_BACKWARD);
    pc_mark_output(g, f);
    int *order = NULL, n = 0;
    ot_error err = {0};
    assert_int_equal(ot_schedule_build(g, &order, &n, &err), OT_OK);
    ot_plan *p = NULL, *q = NULL;
    assert_int_equal(ot_plan_build(g, order, n, NULL, &p, &err), OT_OK);
    bool exceeded = true;
    assert_int_equal(ot_plan_build_bounded(g, order, n, NULL, p->peak_bytes, &q, &exceeded, &err), OT_OK);
    assert_false(exceeded);
    assert_non_null(q);
    assert_same_plan(p, q);
    ot_plan_free(q);
    q = NULL;
    assert_int_equal(ot_plan_build_bounded(g, order, n, NULL, p->peak_bytes - 1, &q, &exceeded, &err), OT_OK);
    assert_true(exceeded);
    assert_null(q);
    /* below the pinned region: stops before the walk */
    assert_int_equal(ot_plan_build_bounded(g, order, n, NULL, p->pinned_bytes / 2, &q, &exceeded, &err), OT_OK);
    assert_true(exceeded);
    assert_null(q);
    ot_plan_free(p);
    free(order);
    ot_graph_free(g);
}

/* A device that asks 256 bytes for every ReduceSum and mul_ws bytes for every Mul. */
static size_t mul_ws;
static size_t reduce_and_mul_scratch(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    return node->op == OT_OP_MUL ? mul_ws : reduce_scratch(ctx, node, in, out);
}

/* ot_schedule_plan_limit against ot_schedule_plan on g for dev at every limit from the
 * pinned bytes to twice the peak (every 8 bytes, every byte within 16 of the peak):
 * the unbounded order and plan when the limit is at least its peak, else exceeded
 * and no plan. */
static void sweep_limits(ot_graph *g, const ot_plan_device *dev, int *n_within, int *n_over) {
    int *order = NULL, n = 0;
    ot_plan *p = NULL;
    ot_error err = {0};
    assert_int_equal(ot_schedule_plan(g, dev, &order, &n, &p, &err), OT_OK);
    size_t peak = p->peak_bytes;
    for (size_t limit = p->pinned_bytes; limit <= 2 * peak; limit += limit + 16 >= peak && limit <= peak + 16 ? 1 : 8) {
        int *o2 = NULL, n2 = 0;
        ot_plan *q = NULL;
        bool exceeded = limit >= peak;
        assert_int_equal(ot_schedule_plan_limit(g, dev, NULL, NULL, limit, &o2, &n2, &q, &exceeded, &err), OT_OK);
        assert_int_equal(exceeded, limit < peak);
        assert_int_equal(n2, n);
        if (exceeded) {
            assert_null(q);
            (*n_over)++;
        } else {
            assert_memory_equal(o2, order, sizeof(int) * (size_t)n);
            assert_same_plan(p, q);
            (*n_within)++;
        }
        ot_plan_free(q);
        free(o2);
    }
    ot_plan_free(p);
    free(order);
}

/* The peak of g's plan for dev in the given order, and in ot_schedule_plan's. */
static size_t peak_in(ot_graph *g, const int *order, int n, const ot_plan_device *dev) {
    ot_plan *p = NULL;
    ot_error err = {0};
    assert_int_equal(ot_plan_build(g, order, n, dev, &p, &err), OT_OK);
    size_t peak = p->peak_bytes;
    ot_plan_free(p);
    return peak;
}
static size_t peak_chosen(ot_graph *g, const ot_plan_device *dev) {
    int *order = NULL, n = 0;
    ot_plan *p = NULL;
    ot_error err = {0};
    assert_int_equal(ot_schedule_plan(g, dev, &order, &n, &p, &err), OT_OK);
    size_t peak = p->peak_bytes;
    ot_plan_free(p);
    free(order);
    return peak;
}

/* The dynamic-form graph; with own_gradient, b5 writes a gradient of d0's size that
 * lives to the end (a graph output) instead of the pinned parameter gradient, and the
 * chain b2, b3 is four times as large: its step is then the peak of both orders,
 * which hold d0 or that gradient there (the same bytes), while b5's own step is
 * higher in the static order (after the chain, whose output lives on) than in the
 * dynamic one. */
static ot_graph *two_orders_graph(bool own_gradient) {
    ot_graph *g = ot_graph_new("dynamic");
    const pc_stem st = pc_weight_stem(g, 1024);
    int64_t chain = own_gradient ? 4096 : 1024;
    int e = pc_f32(g, "e", 256, OT_VK_GRADIENT);
    int e2 = pc_f32(g, "e2", chain, OT_VK_GRADIENT);
    int e3 = pc_f32(g, "e3", chain, OT_VK_GRADIENT);
    int gw = pc_f32(g, "gw", 1024, OT_VK_GRADIENT);
    int gx = own_gradient ? pc_f32(g, "gx", 1024, OT_VK_GRADIENT) : gw;
    pc_node1(g, OT_OP_REDUCE_SUM, "b1", st.d0, e, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_EXPAND, "b2", e, e2, OT_PHASE_BACKWARD);
    pc_node1(g, OT_OP_TANH, "b3", e2, e3, OT_PHASE_BACKWARD);
    if (!own_gradient) pc_mark_output(g, e3);
    pc_node2(g, OT_OP_MUL, "b5", st.d0, st.x, gx, OT_PHASE_BACKWARD);
    if (own_gradient) { /* b6 reads gx and the chain's output: gx lives until the chain is done */
        int y = pc_f32(g, "y", chain, OT_VK_GRADIENT);
        pc_node2(g, OT_OP_ADD, "b6", gx, e3, y, OT_PHASE_BACKWARD);
        pc_mark_output(g, y);
    }
    int so[2] = {st.w, gw};
    ot_graph_add_node(g, OT_OP_SGD_STEP, "opt", so, 2, NULL, 0, OT_PHASE_OPTIMIZER);
    return g;
}

/* ot_schedule_plan_limit at every limit (sweep_limits) on graphs whose two orders
 * differ, so that the limits pass through each case of plan/schedule.c's plan_both:
 * the dynamic-form graph, whose dynamic order wins the judging (made without a
 * device), with no device, one that asks nothing, one that asks workspace, and one
 * whose workspace for the Mul puts the dynamic order's plan for it above the static
 * one's (the static order within a limit the chosen one passes); and the graph in
 * which b5 writes a gradient of its own, where both orders peak the same without a
 * device and the static one is chosen, while the Mul's workspace puts the static
 * order's plan for the device above the dynamic one's (the static order, chosen,
 * passes a limit the other meets). */
static void test_limited_schedule_every_limit(void **state) {
    (void)state;
    ot_plan_device none = {0}, scratch = {.workspace_bytes = reduce_scratch},
                   mul = {.workspace_bytes = reduce_and_mul_scratch};
    int id_order[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8}, eager_b5[9] = {0, 1, 2, 3, 6, 4, 5, 7, 8};
    int n_within = 0, n_over = 0;

    ot_graph *g = two_orders_graph(false);
    mul_ws = 16384;
    assert_true(peak_chosen(g, NULL) < peak_in(g, id_order, 8, NULL)); /* dynamic chosen */
    assert_true(peak_in(g, id_order, 8, &mul) < peak_chosen(g, &mul));
    const ot_plan_device *devs[4] = {NULL, &none, &scratch, &mul};
    for (int d = 0; d < 4; d++) sweep_limits(g, devs[d], &n_within, &n_over);
    ot_graph_free(g);

    g = two_orders_graph(true);
    mul_ws = 16384;
    assert_int_equal(peak_in(g, eager_b5, 9, NULL), peak_in(g, id_order, 9, NULL)); /* a tie: static */
    assert_true(peak_in(g, eager_b5, 9, &mul) < peak_chosen(g, &mul));
    assert_int_equal(peak_chosen(g, &mul), peak_in(g, id_order, 9, &mul));
    sweep_limits(g, &mul, &n_within, &n_over);
    sweep_limits(g, &scratch, &n_within, &n_over);
    ot_graph_free(g);
    assert_true(n_within > 0 && n_over > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transposed_gradient_dies_at_once),
        cmocka_unit_test(test_growing_node_keeps_id_order),
        cmocka_unit_test(test_last_reader_runs_once_the_others_did),
        cmocka_unit_test(test_schedule_plan_is_schedule_then_plan),
        cmocka_unit_test(test_bounded_run_stops_past_the_limit),
        cmocka_unit_test(test_limited_schedule_every_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
