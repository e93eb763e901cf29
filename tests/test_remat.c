/* test_remat.c — unit tests of remat on hand-built training graphs: policy and size
 * parsing, articulation points of a residual graph, the rewrite (clone structure,
 * rewiring, schedule placement, undo, the journaled undo against the general one), the
 * schedule's kept base under rewrites, BatchNorm/Dropout clones, the policies'
 * figures on a 48-layer chain, and auto against budgets and an exhaustive search.
 * Memory is measured by the real planner (plan/planner.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "remat/remat.h"
#include "train/remat_session.h"
#include "plan/schedule.h"
#include "plan/scratch.h"
#include "plan/sched_base.h"

#define B 4
#define D 8

static ot_shape shp(int64_t a, int64_t b) {
    int64_t d[2] = {a, b};
    return ot_shape_make(2, d);
}

static int val(ot_graph *g, const char *name, ot_shape s, ot_value_kind k) {
    int v = ot_graph_add_value(g, name, OT_F32, &s, k);
    assert_true(v >= 0);
    return v;
}

static int node(ot_graph *g, ot_op op, const char *name, int a, int b, int out, ot_phase ph) {
    int in[2] = {a, b};
    int id = ot_graph_add_node(g, op, name, in, b >= 0 ? 2 : 1, &out, 1, ph);
    assert_true(id >= 0);
    return id;
}

static void add_output(ot_graph *g, int v) {
    g->outputs = realloc(g->outputs, sizeof(int) * (size_t)(g->n_outputs + 1));
    g->outputs[g->n_outputs++] = v;
    g->values[v].is_graph_output = true;
}

/* x -> [MatMul(W_i) -> m_i -> Tanh -> t_i] x n -> MseLoss(target), with the backward
 * an autodiff would emit: TanhGrad(dt_i, t_i); dW_i = MatMul(Transpose(t_{i-1}), dm_i);
 * dt_{i-1} = MatMul(dm_i, Transpose(W_i)). t_i[k] holds value ids for the caller. */
static ot_graph *chain(int n, int *t) {
    ot_graph *g = ot_graph_new("chain");
    ot_shape s = shp(B, D), w = shp(D, D), sc = ot_shape_make(0, NULL);
    char nm[64];
    int x = val(g, "x", s, OT_VK_INPUT);
    int target = val(g, "target", s, OT_VK_INPUT);
    int *W = calloc((size_t)n + 1, sizeof(int)), *h = calloc((size_t)n + 1, sizeof(int));
    h[0] = x;
    for (int i = 1; i <= n; i++) {
        snprintf(nm, sizeof nm, "W%d", i);
        W[i] = val(g, nm, w, OT_VK_PARAM);
        snprintf(nm, sizeof nm, "m%d", i);
        int m = val(g, nm, s, OT_VK_ACTIVATION);
        node(g, OT_OP_MATMUL, nm, h[i - 1], W[i], m, OT_PHASE_FORWARD);
        snprintf(nm, sizeof nm, "t%d", i);
        h[i] = val(g, nm, s, OT_VK_ACTIVATION);
        node(g, OT_OP_TANH, nm, m, -1, h[i], OT_PHASE_FORWARD);
        if (t) t[i] = h[i];
    }
    int loss = val(g, "loss", sc, OT_VK_ACTIVATION);
    node(g, OT_OP_MSE_LOSS, "loss", h[n], target, loss, OT_PHASE_LOSS);
    add_output(g, loss);
    int seed = val(g, "dloss", sc, OT_VK_GRADIENT);
    node(g, OT_OP_ONES_LIKE, "seed", loss, -1, seed, OT_PHASE_BACKWARD);
    int dt = val(g, "dt", s, OT_VK_GRADIENT);
    int in3[3] = {seed, h[n], target};
    assert_true(ot_graph_add_node(g, OT_OP_MSE_LOSS_GRAD, "dloss", in3, 3, &dt, 1, OT_PHASE_BACKWARD) >= 0);
    for (int i = n; i >= 1; i--) {
        snprintf(nm, sizeof nm, "dm%d", i);
        int dm = val(g, nm, s, OT_VK_GRADIENT);
        node(g, OT_OP_TANH_GRAD, nm, dt, h[i], dm, OT_PHASE_BACKWARD);
        snprintf(nm, sizeof nm, "hT%d", i);
        int hT = val(g, nm, shp(D, B), OT_VK_GRADIENT);
        node(g, OT_OP_TRANSPOSE, nm, h[i - 1], -1, hT, OT_PHASE_BACKWARD);
        snprintf(nm, sizeof nm, "W%d_grad", i);
        int dW = val(g, nm, w, OT_VK_GRADIENT);
        node(g, OT_OP_MATMUL, nm, hT, dm, dW, OT_PHASE_BACKWARD);
        add_output(g, dW);
        if (i > 1) {
            snprintf(nm, sizeof nm, "WT%d", i);
            int WT = val(g, nm, w, OT_VK_GRADIENT);
            node(g, OT_OP_TRANSPOSE, nm, W[i], -1, WT, OT_PHASE_BACKWARD);
            snprintf(nm, sizeof nm, "dt%d", i - 1);
            int ndt = val(g, nm, s, OT_VK_GRADIENT);
            node(g, OT_OP_MATMUL, nm, dm, WT, ndt, OT_PHASE_BACKWARD);
            dt = ndt;
        }
    }
    free(W);
    free(h);
    ot_error err = {0};
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    return g;
}

static int64_t measure(ot_graph *g) {
    ot_remat_measurement m = {0};
    ot_error err = {0};
    ot_status st = ot_remat_measure_planner(g, NULL, &m, &err);
    if (st != OT_OK) fail_msg("planner: %s", err.msg);
    return m.peak;
}

/* Applies a keep set, measures the planned peak and undoes it. */
static int64_t peak_of(ot_graph *g, const ot_remat_analysis *a, const bool *keep, double *cost) {
    ot_remat_rewrite rw;
    ot_error err = {0};
    assert_int_equal(ot_remat_apply(g, a, keep, &rw, &err), OT_OK);
    if (cost) *cost = rw.extra_flops;
    int64_t p = measure(g);
    ot_remat_undo(g, &rw);
    return p;
}

static void test_parse(void **state) {
    (void)state;
    ot_remat_policy p;
    ot_error err = {0};
    char buf[128];
    assert_int_equal(ot_remat_policy_parse("every:4", &p, &err), OT_OK);
    assert_int_equal(p.kind, OT_REMAT_EVERY);
    assert_int_equal(p.every_k, 4);
    assert_string_equal(ot_remat_policy_str(&p, buf, sizeof buf), "every:4");
    assert_int_equal(ot_remat_policy_parse("manual:a*,b", &p, &err), OT_OK);
    assert_int_equal(p.n_globs, 2);
    assert_string_equal(p.globs[0], "a*");
    assert_string_equal(ot_remat_policy_str(&p, buf, sizeof buf), "manual:a*,b");
    ot_remat_policy_free(&p);
    assert_int_equal(ot_remat_policy_parse("every:0", &p, &err), OT_E_USAGE);
    assert_int_equal(ot_remat_policy_parse("manual:a,,b", &p, &err), OT_E_USAGE);
    assert_int_equal(ot_remat_policy_parse("sometimes", &p, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "sometimes"));
    int64_t b = 0;
    assert_int_equal(ot_parse_size("512M", &b, &err), OT_OK);
    assert_int_equal(b, 512LL << 20);
    assert_int_equal(ot_parse_size("1.5GiB", &b, &err), OT_OK);
    assert_int_equal(b, 3LL << 29);
    assert_int_equal(ot_parse_size("4096", &b, &err), OT_OK);
    assert_int_equal(b, 4096);
    assert_int_equal(ot_parse_size("12Q", &b, &err), OT_E_USAGE);
    assert_int_equal(ot_parse_size("-1", &b, &err), OT_E_USAGE);
}

/* x -> a=Relu -> b=Neg(a) -> c=Add(a,b) -> d=Relu(c) -> e=Neg(d) -> f=Add(d,e) -> loss,
 * plus s = Neg(W) (params only) read by the last Add: two residual blocks. */
static void test_articulation_residual(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("res");
    ot_shape s = shp(B, D), sc = ot_shape_make(0, NULL);
    int x = val(g, "x", s, OT_VK_INPUT), W = val(g, "W", s, OT_VK_PARAM);
    int a = val(g, "a", s, 0), b = val(g, "b", s, 0), c = val(g, "c", s, 0);
    int d = val(g, "d", s, 0), e = val(g, "e", s, 0), ws = val(g, "ws", s, 0), f = val(g, "f", s, 0);
    int f2 = val(g, "f2", s, 0), tgt = val(g, "tgt", s, OT_VK_INPUT), loss = val(g, "loss", sc, 0);
    node(g, OT_OP_RELU, "a", x, -1, a, OT_PHASE_FORWARD);
    node(g, OT_OP_NEG, "ws", W, -1, ws, OT_PHASE_FORWARD);
    node(g, OT_OP_NEG, "b", a, -1, b, OT_PHASE_FORWARD);
    node(g, OT_OP_ADD, "c", a, b, c, OT_PHASE_FORWARD);
    node(g, OT_OP_RELU, "d", c, -1, d, OT_PHASE_FORWARD);
    node(g, OT_OP_NEG, "e", d, -1, e, OT_PHASE_FORWARD);
    node(g, OT_OP_ADD, "f", d, e, f, OT_PHASE_FORWARD);
    node(g, OT_OP_ADD, "f2", f, ws, f2, OT_PHASE_FORWARD);
    node(g, OT_OP_MSE_LOSS, "loss", f2, tgt, loss, OT_PHASE_LOSS);
    int g1 = val(g, "gd", s, OT_VK_GRADIENT), g2 = val(g, "ga", s, OT_VK_GRADIENT);
    node(g, OT_OP_RELU_GRAD, "gd", f, d, g1, OT_PHASE_BACKWARD);
    node(g, OT_OP_RELU_GRAD, "ga", g1, a, g2, OT_PHASE_BACKWARD);
    add_output(g, g2);
    ot_remat_analysis an;
    ot_error err = {0};
    assert_int_equal(ot_remat_analyze(g, &an, &err), OT_OK);
    /* cuts: a, c, d, f, f2 — not b, e (skipped over), not ws (params only) */
    int expect[] = {a, c, d, f, f2};
    assert_int_equal(an.n_art, 5);
    for (int i = 0; i < 5; i++) assert_int_equal(an.art[i], expect[i]);
    assert_true(an.is_static[ws]);
    assert_false(an.is_static[b]);
    assert_true(an.saved[d] && an.saved[a] && an.saved[f]);
    assert_false(an.saved[b]);
    assert_true(an.pinned[f2]);
    assert_int_equal(an.segment[a], 0);
    assert_int_equal(an.segment[b], 1);
    assert_int_equal(an.segment[c], 1);
    assert_int_equal(an.segment[e], 3);
    ot_remat_analysis_free(&an);
    ot_graph_free(g);
}

static void test_rewrite_chain(void **state) {
    (void)state;
    int t[7];
    ot_graph *g = chain(6, t);
    int nn0 = g->n_nodes, nv0 = g->n_values;
    ot_remat_analysis an;
    ot_error err = {0};
    assert_int_equal(ot_remat_analyze(g, &an, &err), OT_OK);
    assert_int_equal(an.n_fwd, 12);
    for (int i = 1; i <= 6; i++) assert_true(an.saved[t[i]]);
    assert_true(an.pinned[t[6]]);
    bool *keep = calloc((size_t)an.n_values, sizeof(bool));
    keep[t[3]] = keep[t[6]] = true; /* recompute t1, t2 from x and t4, t5 from t3 */
    ot_remat_rewrite rw;
    assert_int_equal(ot_remat_apply(g, &an, keep, &rw, &err), OT_OK);
    assert_int_equal(rw.n_clones, 8); /* MatMul+Tanh of layers 1, 2, 4, 5 */
    assert_int_equal(g->n_nodes, nn0 + 8);
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    for (int id = nn0; id < g->n_nodes; id++) {
        const ot_node *c = &g->nodes[id];
        assert_int_equal(c->phase, OT_PHASE_RECOMPUTE);
        assert_true(c->orig_node >= 0 && c->orig_node < nn0);
        assert_int_equal(c->op, g->nodes[c->orig_node].op);
        assert_non_null(strstr(c->name, ".recompute"));
    }
    /* Every backward reader of t1, t2, t4, t5 now reads the clone; t3 stays. */
    int recomputed[4] = {t[1], t[2], t[4], t[5]};
    for (int k = 0; k < 4; k++) {
        int v = recomputed[k], c = rw.clone_of[v];
        assert_true(c >= nv0);
        assert_int_equal(g->values[c].producer >= nn0, 1);
        assert_int_equal(g->nodes[g->values[c].producer].orig_node, g->values[v].producer);
        for (int i = 0; i < g->values[v].n_consumers; i++)
            assert_int_not_equal(g->nodes[g->values[v].consumers[i]].phase, OT_PHASE_BACKWARD);
        assert_true(g->values[c].n_consumers >= 2); /* TanhGrad and the Transpose for dW */
    }
    assert_int_equal(rw.clone_of[t[3]], -1);
    /* Clone of layer 4's MatMul reads the kept t3; layer 1's reads the input x. */
    int m4c = g->values[rw.clone_of[t[4]]].producer;
    int mm4 = g->nodes[m4c].inputs[0];
    assert_int_equal(g->nodes[g->values[mm4].producer].inputs[0], t[3]);
    /* Schedule: clones after the whole forward, each right before its first reader. */
    int *order = NULL, n = 0;
    assert_int_equal(ot_schedule_build(g, &order, &n, &err), OT_OK);
    int *pos = calloc((size_t)g->n_nodes, sizeof(int));
    for (int i = 0; i < n; i++) pos[order[i]] = i;
    for (int id = nn0; id < g->n_nodes; id++) {
        for (int f = 0; f < an.n_fwd; f++) assert_true(pos[id] > pos[an.fwd[f]]);
        int first = g->n_nodes;
        const ot_node *c = &g->nodes[id];
        int first_pos = n;
        for (int k = 0; k < g->values[c->outputs[0]].n_consumers; k++) {
            int r = g->values[c->outputs[0]].consumers[k];
            if (pos[r] < first_pos) first_pos = pos[r], first = r;
        }
        assert_true(first < g->n_nodes);
        assert_true(pos[id] < first_pos);
    }
    /* Layers 4-5 are recomputed after layer 6's backward has started, before layer 5's. */
    int tg6 = -1, tg5 = -1;
    for (int id = 0; id < nn0; id++) {
        if (!strcmp(g->nodes[id].name, "dm6")) tg6 = id;
        if (!strcmp(g->nodes[id].name, "dm5")) tg5 = id;
    }
    int c5 = g->values[rw.clone_of[t[5]]].producer;
    assert_true(pos[c5] > pos[tg6] && pos[c5] < pos[tg5]);
    free(order);
    free(pos);
    /* A rewritten graph is not analysed again (its clones would be taken for forward nodes). */
    ot_remat_analysis an2;
    assert_int_equal(ot_remat_analyze(g, &an2, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "already rewritten"));
    /* Lazy recompute lowers the planned peak here. */
    int64_t with = measure(g);
    ot_remat_undo(g, &rw);
    assert_int_equal(g->n_nodes, nn0);
    assert_int_equal(g->n_values, nv0);
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    for (int i = 1; i <= 6; i++) {
        int nb = 0;
        for (int k = 0; k < g->values[t[i]].n_consumers; k++)
            nb += g->nodes[g->values[t[i]].consumers[k]].phase == OT_PHASE_BACKWARD;
        assert_true(nb >= 1);
    }
    int64_t without = measure(g);
    assert_true(with < without);
    free(keep);
    ot_remat_analysis_free(&an);
    ot_graph_free(g);
}

/* The undo of a completed rewrite restores consumer lists by count (remat/rewrite.c,
 * unwire_journaled); the general undo removes every clone and rewiring one by one.
 * Both must leave every list in the same order, cycle after cycle (the order
 * drifts: rewired readers come back at the end, and the schedule reads the order). */
static void general_undo(ot_graph *g, ot_remat_rewrite *rw) {
    for (int i = rw->n_rewired - 1; i >= 0; i--) ot_graph_set_input(g, rw->rw_node[i], rw->rw_slot[i], rw->rw_old[i]);
    for (int id = g->n_nodes - 1; id >= rw->n_nodes0; id--) ot_graph_remove_node(g, id);
    free(rw->clone_of); /* without it, ot_remat_undo takes the general way: the lists are done */
    rw->clone_of = NULL;
    rw->n_rewired = 0;
    ot_remat_undo(g, rw);
}

static void assert_same_lists(const ot_graph *a, const ot_graph *b) {
    assert_int_equal(a->n_nodes, b->n_nodes);
    assert_int_equal(a->n_values, b->n_values);
    for (int v = 0; v < a->n_values; v++) {
        assert_int_equal(a->values[v].n_consumers, b->values[v].n_consumers);
        assert_int_equal(a->values[v].producer, b->values[v].producer);
        for (int c = 0; c < a->values[v].n_consumers; c++)
            assert_int_equal(a->values[v].consumers[c], b->values[v].consumers[c]);
    }
    for (int id = 0; id < a->n_nodes; id++)
        for (int i = 0; i < a->nodes[id].n_inputs; i++) assert_int_equal(a->nodes[id].inputs[i], b->nodes[id].inputs[i]);
}

static void test_undo_lists(void **state) {
    (void)state;
    int t[9];
    ot_graph *g1 = chain(8, t), *g2 = chain(8, NULL);
    ot_remat_analysis a1, a2;
    ot_error err = {0};
    assert_int_equal(ot_remat_analyze(g1, &a1, &err), OT_OK);
    assert_int_equal(ot_remat_analyze(g2, &a2, &err), OT_OK);
    bool *keep = calloc((size_t)a1.n_values, sizeof(bool));
    /* keep sets in turn: none, t3, t2 and t5, none again, t4 (a value recomputed in
     * some cycles and kept in others) */
    const int sets[5][2] = {{0, 0}, {3, 0}, {2, 5}, {0, 0}, {4, 0}};
    for (int cyc = 0; cyc < 5; cyc++) {
        memset(keep, 0, (size_t)a1.n_values * sizeof(bool));
        keep[t[8]] = true;
        for (int k = 0; k < 2; k++)
            if (sets[cyc][k]) keep[t[sets[cyc][k]]] = true;
        ot_remat_rewrite r1, r2;
        assert_int_equal(ot_remat_apply(g1, &a1, keep, &r1, &err), OT_OK);
        assert_int_equal(ot_remat_apply(g2, &a2, keep, &r2, &err), OT_OK);
        assert_true(r1.n_rewired > 0);
        assert_same_lists(g1, g2);
        int64_t p1 = measure(g1), p2 = measure(g2);
        assert_int_equal(p1, p2);
        ot_remat_undo(g1, &r1);
        general_undo(g2, &r2);
        assert_same_lists(g1, g2);
        assert_int_equal(ot_graph_verify(g1, &err), OT_OK);
    }
    free(keep);
    ot_remat_analysis_free(&a1);
    ot_remat_analysis_free(&a2);
    ot_graph_free(g1);
    ot_graph_free(g2);
}

/* The schedule's base (plan/sched_base.h): a scratch with the graph's facts kept,
 * each rewrite declared with its journal, must give the order and plan of a plain
 * schedule of the same graph, over keep sets that recompute a value in one cycle and
 * keep it in the next (the undo leaves consumer lists in another order: the stale
 * values), with an optimizer node appended on top in some (ot_schedule_base_grown), an
 * undeclared call (which drops the base) and a base set again. */
static void test_schedule_base(void **state) {
    (void)state;
    int t[13];
    ot_graph *g = chain(12, t);
    ot_remat_analysis an;
    ot_error err = {0};
    assert_int_equal(ot_remat_analyze(g, &an, &err), OT_OK);
    bool *keep = calloc((size_t)an.n_values, sizeof(bool));
    ot_plan_scratch *scr = ot_plan_scratch_new();
    assert_non_null(scr);
    assert_int_equal(ot_schedule_base_set(scr, g, &err), OT_OK);
    ot_plan_device dev = {0};
    const unsigned sets[] = {0x000, 0x008, 0x124, 0x008, 0x000, 0x0a4, 0x155, 0x0aa, 0x008, 0x7ff, 0x010};
    for (int cyc = 0; cyc < (int)(sizeof sets / sizeof sets[0]); cyc++) {
        memset(keep, 0, (size_t)an.n_values * sizeof(bool));
        keep[t[12]] = true;
        for (int i = 1; i < 12; i++) keep[t[i]] = (sets[cyc] >> (i - 1)) & 1;
        ot_remat_rewrite rw;
        assert_int_equal(ot_remat_apply(g, &an, keep, &rw, &err), OT_OK);
        int *o1 = NULL, *o2 = NULL, n1 = 0, n2 = 0;
        ot_plan *p1 = NULL, *p2 = NULL;
        if (cyc != 4) ot_schedule_base_hint(scr, g, rw.rw_node, rw.n_rewired); /* 4: undeclared */
        /* odd cycles: an optimizer step on top, as the session's measure appends it */
        ot_remat_rewrite tail = {.n_nodes0 = g->n_nodes, .n_values0 = g->n_values};
        if (cyc % 2) {
            int w = ot_graph_find_value(g, "W3"), dw = ot_graph_find_value(g, "W3_grad");
            int st = val(g, "W3.momentum", shp(D, D), OT_VK_OPT_STATE), in[3] = {w, dw, st};
            assert_true(ot_graph_add_node(g, OT_OP_SGD_STEP, "W3/step", in, 3, NULL, 0, OT_PHASE_OPTIMIZER) >= 0);
            ot_schedule_base_grown(scr, g);
        }
        assert_int_equal(ot_schedule_plan(g, &dev, &o1, &n1, &p1, &err), OT_OK);
        assert_int_equal(ot_schedule_plan_scratch(g, &dev, scr, &o2, &n2, &p2, &err), OT_OK);
        ot_schedule_base_hint(scr, NULL, NULL, 0);
        assert_true((ot_plan_scratch_base(scr)->g != NULL) == (cyc != 4 && cyc != 5)); /* it served the call */
        assert_int_equal(n1, n2);
        assert_memory_equal(o1, o2, sizeof(int) * (size_t)n1);
        assert_int_equal(p1->peak_bytes, p2->peak_bytes);
        assert_int_equal(p1->n_values, p2->n_values);
        for (int v = 0; v < p1->n_values; v++) assert_int_equal(p1->values[v].offset, p2->values[v].offset);
        assert_memory_equal(p1->timeline, p2->timeline, sizeof(size_t) * (size_t)p1->n_steps);
        free(o1);
        ot_plan_free(p1);
        if (cyc % 2) ot_remat_undo(g, &tail); /* the general way, as the session's */
        ot_remat_undo(g, &rw);
        assert_true(ot_sched_base_holds(scr, g));
        if (cyc == 5) assert_int_equal(ot_schedule_base_set(scr, g, &err), OT_OK); /* again, after cycle 4 dropped it */
    }
    ot_plan_scratch_free(scr);
    free(keep);
    ot_remat_analysis_free(&an);
    ot_graph_free(g);
}

/* x -> BatchNorm(train) -> y -> Dropout -> d -> Relu -> r -> loss; nothing kept:
 * the BN clone must have no running-stat outputs and Dropout's clone no mask. */
static void test_bn_dropout_clone(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("bn");
    ot_shape s = shp(B, D), c1 = ot_shape_make(1, (int64_t[]){D}), sc = ot_shape_make(0, NULL);
    int x = val(g, "x", s, OT_VK_INPUT), tgt = val(g, "tgt", s, OT_VK_INPUT);
    int scale = val(g, "scale", c1, OT_VK_PARAM), bias = val(g, "bias", c1, OT_VK_PARAM);
    int mean = val(g, "mean", c1, OT_VK_STATE), var = val(g, "var", c1, OT_VK_STATE);
    int y = val(g, "y", s, 0), nm = val(g, "new_mean", c1, 0), nv = val(g, "new_var", c1, 0);
    int d = val(g, "d", s, 0), mask = val(g, "mask", s, 0), r = val(g, "r", s, 0);
    g->values[mask].dtype = OT_BOOL;
    int loss = val(g, "loss", sc, 0);
    int bn_in[5] = {x, scale, bias, mean, var}, bn_out[3] = {y, nm, nv};
    int bn = ot_graph_add_node(g, OT_OP_BATCH_NORM, "bn", bn_in, 5, bn_out, 3, OT_PHASE_FORWARD);
    ot_node_set_attr_int(&g->nodes[bn], "training_mode", 1);
    int dr_out[2] = {d, mask};
    int dr = ot_graph_add_node(g, OT_OP_DROPOUT, "drop", &y, 1, dr_out, 2, OT_PHASE_FORWARD);
    ot_node_set_attr_float(&g->nodes[dr], "ratio", 0.5f);
    node(g, OT_OP_RELU, "relu", d, -1, r, OT_PHASE_FORWARD);
    node(g, OT_OP_MSE_LOSS, "loss", r, tgt, loss, OT_PHASE_LOSS);
    add_output(g, nm);
    add_output(g, nv);
    int dr_ = val(g, "dr", s, OT_VK_GRADIENT), dd = val(g, "dd", s, OT_VK_GRADIENT);
    int dy = val(g, "dy", s, OT_VK_GRADIENT);
    node(g, OT_OP_ONES_LIKE, "seed", r, -1, dr_, OT_PHASE_BACKWARD); /* stands in for the loss grad */
    node(g, OT_OP_RELU_GRAD, "relu_grad", dr_, r, dd, OT_PHASE_BACKWARD);
    int dg = node(g, OT_OP_DROPOUT_GRAD, "drop_grad", dd, y, dy, OT_PHASE_BACKWARD);
    ot_node_set_attr_int(&g->nodes[dg], "rng_node", dr);
    int gx = val(g, "dx", s, OT_VK_GRADIENT), gs = val(g, "dscale", c1, OT_VK_GRADIENT),
        gb = val(g, "dbias", c1, OT_VK_GRADIENT);
    int bg_in[3] = {dy, x, scale}, bg_out[3] = {gx, gs, gb};
    assert_true(ot_graph_add_node(g, OT_OP_BATCH_NORM_GRAD, "bn_grad", bg_in, 3, bg_out, 3, OT_PHASE_BACKWARD) >= 0);
    add_output(g, gs);
    add_output(g, gb);
    ot_error err = {0};
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    ot_remat_analysis an;
    assert_int_equal(ot_remat_analyze(g, &an, &err), OT_OK);
    assert_true(an.saved[r] && an.saved[y]);
    assert_true(an.pinned[r]); /* the loss reads it */
    assert_true(an.pinned[nm]); /* a graph output */
    bool *keep = calloc((size_t)an.n_values, sizeof(bool)); /* keep nothing at all */
    ot_remat_rewrite rw;
    int nn0 = g->n_nodes;
    assert_int_equal(ot_remat_apply(g, &an, keep, &rw, &err), OT_OK);
    assert_int_equal(rw.n_clones, 3);
    assert_int_equal(ot_graph_verify(g, &err), OT_OK);
    int bn_c = -1, dr_c = -1;
    for (int id = nn0; id < g->n_nodes; id++) {
        if (g->nodes[id].orig_node == bn) bn_c = id;
        if (g->nodes[id].orig_node == dr) dr_c = id;
    }
    assert_true(bn_c >= 0 && dr_c >= 0);
    assert_int_equal(g->nodes[bn_c].n_outputs, 3);
    assert_true(g->nodes[bn_c].outputs[0] >= 0);
    assert_int_equal(g->nodes[bn_c].outputs[1], -1);
    assert_int_equal(g->nodes[bn_c].outputs[2], -1);
    assert_int_equal(ot_node_attr_int(&g->nodes[bn_c], "training_mode", 0), 1);
    assert_int_equal(g->nodes[dr_c].outputs[1], -1); /* the mask is regenerated, not stored */
    assert_true(ot_node_attr_float(&g->nodes[dr_c], "ratio", 0.f) == 0.5f);
    assert_int_equal(g->values[nm].producer, bn); /* only the original writes the stats */
    /* DropoutGrad reads the clone of y, made by the BN clone. */
    assert_int_equal(g->nodes[dg].inputs[1], g->nodes[bn_c].outputs[0]);
    (void)measure(g);
    ot_remat_undo(g, &rw);
    assert_int_equal(g->nodes[dg].inputs[1], y);
    free(keep);
    ot_remat_analysis_free(&an);
    ot_graph_free(g);
}

static double forward_flops(const ot_graph *g, const ot_remat_analysis *a) {
    double f = 0.0;
    for (int i = 0; i < a->n_fwd; i++) f += a->node_flops[a->fwd[i]];
    (void)g;
    return f;
}

/* 48 layers: sqrt keeps <= 1/4 of none's activation bytes for <= 1 extra forward;
 * every policy lowers or keeps the planned peak; `all` has the least. */
static void test_policies_chain48(void **state) {
    (void)state;
    ot_graph *g = chain(48, NULL);
    ot_remat_analysis an;
    ot_error err = {0};
    assert_int_equal(ot_remat_analyze(g, &an, &err), OT_OK);
    assert_int_equal(an.n_art, 96);
    bool *keep = calloc((size_t)an.n_values, sizeof(bool));
    ot_remat_policy none = {.kind = OT_REMAT_NONE}, sq = {.kind = OT_REMAT_SQRT}, sel = {.kind = OT_REMAT_SELECTIVE};
    assert_int_equal(ot_remat_policy_keep(g, &an, &none, keep, &err), OT_OK);
    int64_t kb_none = ot_remat_kept_bytes(g, &an, keep);
    int64_t pk_none = peak_of(g, &an, keep, NULL);
    assert_true(ot_remat_keep_cost(g, &an, keep, NULL) == 0.0);
    assert_int_equal(ot_remat_policy_keep(g, &an, &sq, keep, &err), OT_OK);
    int64_t kb_sqrt = ot_remat_kept_bytes(g, &an, keep);
    double cost_sqrt = 0.0;
    int64_t pk_sqrt = peak_of(g, &an, keep, &cost_sqrt);
    double fwd = forward_flops(g, &an);
    print_message("chain48: kept bytes none %lld sqrt %lld (%.1f%%), extra %.2f forwards, peak %lld -> %lld\n",
                  (long long)kb_none, (long long)kb_sqrt, 100.0 * (double)kb_sqrt / (double)kb_none, cost_sqrt / fwd,
                  (long long)pk_none, (long long)pk_sqrt);
    assert_true(kb_sqrt * 4 <= kb_none);
    assert_true(cost_sqrt <= fwd);
    assert_true(pk_sqrt < pk_none);
    /* selective: keep MatMul outputs, recompute the Tanh outputs */
    assert_int_equal(ot_remat_policy_keep(g, &an, &sel, keep, &err), OT_OK);
    double cost_sel = ot_remat_keep_cost(g, &an, keep, NULL);
    assert_true(cost_sel > 0.0 && cost_sel < 0.2 * fwd);
    /* all: least memory of the segment plans */
    int64_t pk_all = 0;
    assert_int_equal(ot_remat_least_memory(g, &an, ot_remat_measure_planner, NULL, keep, &pk_all, &err), OT_OK);
    assert_int_equal(peak_of(g, &an, keep, NULL), pk_all);
    assert_true(pk_all <= pk_sqrt);
    /* every:K on a chain: K = 2 keeps every layer's output again */
    ot_remat_policy e2 = {.kind = OT_REMAT_EVERY, .every_k = 2};
    assert_int_equal(ot_remat_policy_keep(g, &an, &e2, keep, &err), OT_OK);
    assert_true(ot_remat_keep_cost(g, &an, keep, NULL) < 0.6 * fwd);
    /* manual: exactly the named values */
    ot_remat_policy man;
    assert_int_equal(ot_remat_policy_parse("manual:t1?,t4", &man, &err), OT_OK);
    assert_int_equal(ot_remat_policy_keep(g, &an, &man, keep, &err), OT_OK);
    int n_kept = 0;
    for (int v = 0; v < an.n_values; v++) n_kept += keep[v];
    assert_int_equal(n_kept, 11); /* t10..t19, t4 */
    ot_remat_policy_free(&man);
    assert_int_equal(ot_remat_policy_parse("manual:nosuch*", &man, &err), OT_OK);
    assert_int_equal(ot_remat_policy_keep(g, &an, &man, keep, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "nosuch*"));
    ot_remat_policy_free(&man);
    free(keep);
    ot_remat_analysis_free(&an);
    ot_graph_free(g);
}

/* auto meets every budget from the `all` peak to the `none` peak, is never costlier
 * than a looser budget's plan by much, and refuses a budget below the least peak. */
static void test_auto_sweep(void **state) {
    (void)state;
    ot_graph *g = chain(24, NULL);
    ot_remat_analysis an;
    ot_error err = {0};
    assert_int_equal(ot_remat_analyze(g, &an, &err), OT_OK);
    bool *keep = calloc((size_t)an.n_values, sizeof(bool));
    ot_remat_policy none = {.kind = OT_REMAT_NONE};
    assert_int_equal(ot_remat_policy_keep(g, &an, &none, keep, &err), OT_OK);
    int64_t hi = peak_of(g, &an, keep, NULL), lo = 0;
    assert_int_equal(ot_remat_least_memory(g, &an, ot_remat_measure_planner, NULL, keep, &lo, &err), OT_OK);
    assert_true(lo < hi);
    int nn0 = g->n_nodes;
    for (int i = 0; i <= 10; i++) {
        int64_t budget = lo + (hi - lo) * i / 10;
        ot_remat_auto_stats st;
        assert_int_equal(ot_remat_auto(g, &an, budget, ot_remat_measure_planner, NULL, keep, &st, &err), OT_OK);
        assert_int_equal(g->n_nodes, nn0);
        double cost = 0.0;
        int64_t pk = peak_of(g, &an, keep, &cost);
        assert_int_equal(pk, st.peak);
        assert_true(pk <= budget);
        assert_true(fabs(cost - st.cost) < 1e-6);
        if (i == 10) assert_true(cost == 0.0);
    }
    ot_remat_auto_stats st;
    assert_int_equal(ot_remat_auto(g, &an, lo - 1, ot_remat_measure_planner, NULL, keep, &st, &err), OT_E_MEMORY);
    char want[64];
    snprintf(want, sizeof want, "%lld bytes", (long long)lo);
    assert_non_null(strstr(err.msg, want));
    free(keep);
    ot_remat_analysis_free(&an);
    ot_graph_free(g);
}

/* Measures every subset of vars (the others kept as pinned says) and checks auto
 * against the optimum at 9 budgets across the feasible range: it fits and costs at
 * most (1 + tolerance) times the optimum. */
static void check_vs_exhaustive(ot_graph *g, const ot_remat_analysis *an, const int *vars, int nvars,
                                double tolerance) {
    ot_error err = {0};
    int n_sets = 1 << nvars;
    int64_t *peaks = calloc((size_t)n_sets, sizeof(int64_t));
    double *costs = calloc((size_t)n_sets, sizeof(double));
    bool *keep = calloc((size_t)an->n_values, sizeof(bool));
    int64_t lo = INT64_MAX, hi = 0;
    for (int m = 0; m < n_sets; m++) {
        for (int v = 0; v < an->n_values; v++) keep[v] = an->pinned[v];
        for (int k = 0; k < nvars; k++) keep[vars[k]] = (m >> k) & 1;
        peaks[m] = peak_of(g, an, keep, &costs[m]);
        if (peaks[m] < lo) lo = peaks[m];
        if (peaks[m] > hi) hi = peaks[m];
    }
    for (int i = 0; i <= 8; i++) {
        int64_t budget = lo + (hi - lo) * i / 8;
        double opt = INFINITY;
        for (int m = 0; m < n_sets; m++)
            if (peaks[m] <= budget && costs[m] < opt) opt = costs[m];
        ot_remat_auto_stats st;
        assert_int_equal(ot_remat_auto(g, an, budget, ot_remat_measure_planner, NULL, keep, &st, &err), OT_OK);
        print_message("budget %lld: optimum %.0f auto %.0f (%d planner runs)\n", (long long)budget, opt, st.cost,
                      st.n_measured);
        assert_true(st.peak <= budget);
        assert_true(st.cost <= opt * (1.0 + tolerance) + 1e-9);
    }
    free(peaks);
    free(costs);
    free(keep);
}

/* On a 30-node chain, auto's recompute cost is within 10% of the optimum over every
 * subset of the saved values, for budgets across the feasible range. */
static void test_auto_vs_exhaustive(void **state) {
    (void)state;
    ot_graph *g = chain(15, NULL);
    ot_remat_analysis an;
    ot_error err = {0};
    assert_int_equal(ot_remat_analyze(g, &an, &err), OT_OK);
    assert_int_equal(an.n_fwd, 30);
    int vars[64], nvars = 0;
    for (int v = 0; v < an.n_values; v++)
        if (an.saved[v] && !an.pinned[v]) vars[nvars++] = v;
    assert_int_equal(nvars, 14);
    check_vs_exhaustive(g, &an, vars, nvars, 0.10);
    ot_remat_analysis_free(&an);
    ot_graph_free(g);
}

/* The same over every candidate, the Tanh inputs no backward node reads included (kept
 * only for the clones that read them; auto's second phase, remat/auto_polish.c, decides
 * those too): on a 16-node chain, auto is within 5% of the optimum over every subset of
 * the candidates (without that phase: 3,200 FLOPs against 2,688 at the least peak). */
static void test_auto_vs_exhaustive_all_candidates(void **state) {
    (void)state;
    ot_graph *g = chain(8, NULL);
    ot_remat_analysis an;
    ot_error err = {0};
    assert_int_equal(ot_remat_analyze(g, &an, &err), OT_OK);
    int vars[64], nvars = 0, n_unread = 0;
    for (int v = 0; v < an.n_values; v++)
        if (an.candidate[v] && !an.pinned[v]) vars[nvars++] = v, n_unread += !an.saved[v];
    assert_true(nvars <= 16);
    assert_true(n_unread > 0);
    check_vs_exhaustive(g, &an, vars, nvars, 0.05);
    ot_remat_analysis_free(&an);
    ot_graph_free(g);
}

/* verify's comparison (exit 11 when any result differs): bitwise equality, the
 * reported max |diff|, and the cases a float diff cannot describe. */
static void test_verify_compare(void **state) {
    (void)state;
    ot_shape s = {.rank = 1, .dim = {4}};
    ot_tensor *a = ot_tensor_new(OT_F32, &s), *b = ot_tensor_new(OT_F32, &s);
    float va[4] = {1.0f, -2.5f, NAN, 0.0f};
    memcpy(a->data, va, sizeof va);
    memcpy(b->data, va, sizeof va);
    bool eq = false;
    assert_true(ot_remat_tensor_diff(a, b, &eq) == 0.0); /* the same NaN bits count as equal */
    assert_true(eq);
    ((float *)b->data)[1] = nextafterf(-2.5f, 0.0f); /* one ulp */
    double d = ot_remat_tensor_diff(a, b, &eq);
    assert_false(eq);
    assert_true(d > 0.0 && d < 1e-6);
    ((float *)b->data)[1] = -2.5f;
    ((float *)b->data)[3] = -0.0f; /* equal as numbers, not as bits */
    d = ot_remat_tensor_diff(a, b, &eq);
    assert_false(eq);
    assert_true(d == 0.0);
    ((float *)b->data)[3] = 0.0f;
    ((float *)b->data)[2] = 1.0f; /* NaN on one side only */
    d = ot_remat_tensor_diff(a, b, &eq);
    assert_false(eq);
    assert_true(isnan(d));
    ot_tensor *c = ot_tensor_new(OT_F64, &s); /* another dtype */
    d = ot_remat_tensor_diff(a, c, &eq);
    assert_false(eq);
    assert_true(isnan(d));
    ot_tensor *i0 = ot_tensor_new(OT_I64, &s), *i1 = ot_tensor_new(OT_I64, &s);
    assert_true(ot_remat_tensor_diff(i0, i1, &eq) == 0.0 && eq);
    ((int64_t *)i1->data)[0] = 7;
    assert_true(isnan(ot_remat_tensor_diff(i0, i1, &eq)) && !eq);
    ot_tensor_free(a);
    ot_tensor_free(b);
    ot_tensor_free(c);
    ot_tensor_free(i0);
    ot_tensor_free(i1);
}

/* The cost of one node of each cost class, figures worked out by hand from the
 * formulas (x [4,8], w [8,16], y [4,16]: 64 output elements). */
static void test_node_flops_by_class(void **state) {
    (void)state;
    ot_graph *g = ot_graph_new("costs");
    int x = val(g, "x", shp(4, 8), OT_VK_INPUT), w = val(g, "w", shp(8, 16), OT_VK_PARAM);
    int b = val(g, "b", shp(1, 16), OT_VK_PARAM), y = val(g, "y", shp(4, 16), OT_VK_ACTIVATION);
    int r = val(g, "r", shp(4, 1), OT_VK_ACTIVATION), o = val(g, "o", shp(4, 16), OT_VK_ACTIVATION);
    struct {
        ot_op op;
        int a, b, out;
        double flops;
    } cases[] = {
        {OT_OP_MATMUL, x, w, y, 2.0 * 64 * 8},      /* 2 * out * K */
        {OT_OP_EXP, y, -1, o, 4.0 * 64},            /* transcendental */
        {OT_OP_RELU, y, -1, o, 64},                 /* pointwise */
        {OT_OP_ADD, y, b, o, 64},                   /* pointwise, broadcast */
        {OT_OP_DROPOUT, y, -1, o, 64},              /* one per element */
        {OT_OP_DROPOUT_GRAD, y, y, o, 3.0 * 64},    /* Philox per element */
        {OT_OP_RESHAPE, y, -1, o, 0},               /* view: free */
        {OT_OP_TRANSPOSE, x, -1, o, 64},            /* larger of in and out */
        {OT_OP_REDUCE_SUM, y, -1, r, 64},           /* larger of in and out */
        {OT_OP_SOFTMAX, y, -1, o, 5.0 * 64},        /* normalisation */
        {OT_OP_LAYER_NORM_GRAD, y, x, o, 8.0 * 32}, /* over input 1 */
        {OT_OP_MSE_LOSS_GRAD, r, y, o, 5.0 * 64},   /* over input 1 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int id = node(g, cases[i].op, ot_op_name(cases[i].op), cases[i].a, cases[i].b, cases[i].out, OT_PHASE_FORWARD);
        double f = ot_remat_node_flops(g, &g->nodes[id]);
        if (f != cases[i].flops) fail_msg("%s: %g FLOPs, expected %g", ot_op_name(cases[i].op), f, cases[i].flops);
    }
    /* Gemm with bias: 2 * out * K + out; K from A's rows when transA */
    int gin[3] = {x, w, b};
    int gid = ot_graph_add_node(g, OT_OP_GEMM, "gemm", gin, 3, &y, 1, OT_PHASE_FORWARD);
    assert_true(gid >= 0);
    assert_true(ot_remat_node_flops(g, &g->nodes[gid]) == 2.0 * 64 * 8 + 64);
    assert_int_equal(ot_node_set_attr_int(&g->nodes[gid], "transA", 1), 0);
    assert_true(ot_remat_node_flops(g, &g->nodes[gid]) == 2.0 * 64 * 4 + 64);
    /* an optimizer step has no outputs: one per element of the param */
    int sin[2] = {w, w};
    int sid = ot_graph_add_node(g, OT_OP_SGD_STEP, "sgd", sin, 2, NULL, 0, OT_PHASE_OPTIMIZER);
    assert_true(sid >= 0);
    assert_true(ot_remat_node_flops(g, &g->nodes[sid]) == 128.0);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_node_flops_by_class),
        cmocka_unit_test(test_articulation_residual),
        cmocka_unit_test(test_rewrite_chain),
        cmocka_unit_test(test_undo_lists),
        cmocka_unit_test(test_schedule_base),
        cmocka_unit_test(test_bn_dropout_clone),
        cmocka_unit_test(test_policies_chain48),
        cmocka_unit_test(test_auto_sweep),
        cmocka_unit_test(test_auto_vs_exhaustive),
        cmocka_unit_test(test_auto_vs_exhaustive_all_candidates),
        cmocka_unit_test(test_verify_compare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
