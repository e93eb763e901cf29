/* plan_check.c — see plan_check.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "plan_check.h"
#include "plan/schedule.h"

int pc_f32(ot_graph *g, const char *name, int64_t n, ot_value_kind kind) {
    ot_shape s = ot_shape_make(1, &n);
    int v = ot_graph_add_value(g, name, OT_F32, &s, kind);
    assert_true(v >= 0);
    if (kind == OT_VK_PARAM || kind == OT_VK_CONSTANT || kind == OT_VK_STATE) {
        float *d = calloc((size_t)n + 1, sizeof(float));
        assert_int_equal(ot_value_set_data(&g->values[v], d, (size_t)n * sizeof(float)), 0);
        free(d);
    }
    return v;
}

int pc_node1(ot_graph *g, ot_op op, const char *name, int in, int out, ot_phase ph) {
    int id = ot_graph_add_node(g, op, name, &in, 1, &out, 1, ph);
    assert_true(id >= 0);
    return id;
}

int pc_node2(ot_graph *g, ot_op op, const char *name, int a, int b, int out, ot_phase ph) {
    int ins[2] = {a, b};
    int id = ot_graph_add_node(g, op, name, ins, 2, &out, 1, ph);
    assert_true(id >= 0);
    return id;
}

void pc_mark_output(ot_graph *g, int v) {
    g->outputs = realloc(g->outputs, sizeof(int) * (size_t)(g->n_outputs + 1));
    g->outputs[g->n_outputs++] = v;
    g->values[v].is_graph_output = true;
}

void pc_mark_input(ot_graph *g, int v) {
    g->inputs = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1));
    g->inputs[g->n_inputs++] = v;
}

/* The exhaustive invariant check of a plan (O(blocks^2); graphs here are small,
 * the 5,000-node one has ~10k blocks). */
typedef struct blk {
    int64_t off;
    size_t n;
    int first, last; /* live steps, inclusive; pinned: whole run */
    int value;       /* -1 for a workspace */
    int inplace_of;
} blk;

/* A view: inside its base's memory, alive only while the base's block is, and no
 * block of its own. */
static void check_alias(const ot_plan *p, int v) {
    const ot_plan_value *pv = &p->values[v], *pr = &p->values[pv->alias_of];
    assert_true(pv->alias_of != v && pr->alias_of < 0); /* chains point at the first base */
    assert_false(pv->pinned);
    assert_true(pv->nbytes > 0 && pv->alias_offset + pv->nbytes <= pr->nbytes);
    assert_int_equal(pv->alias_offset % OT_PLAN_ALIGN, 0);
    if (pr->external) assert_int_equal(pv->offset, -1);
    else assert_int_equal(pv->offset, pr->offset + (int64_t)pv->alias_offset);
    if (!pr->pinned) assert_true(pr->def_step <= pv->def_step && pv->last_step <= pr->last_step);
}

/* A gradient's first contribution written into the gradient's pinned slot: the
 * Sum that defines the gradient is its only reader, at its last step, and reads it
 * as input 0 (so it adds the rest in place); the slot is nobody else's meanwhile
 * because the gradient is defined only there. No block, no bytes of its own. */
static void check_slot(const ot_graph *g, const ot_plan *p, int v) {
    const ot_plan_value *pv = &p->values[v], *ps = &p->values[pv->slot_of];
    assert_true(ps->pinned && ps->category == OT_MEM_GRADIENTS && ps->slot_of < 0 && pv->alias_of < 0);
    assert_false(pv->pinned);
    assert_int_equal(pv->offset, ps->offset);
    assert_int_equal(pv->nbytes, ps->nbytes);
    assert_true(pv->def_step >= 0 && pv->def_step < ps->def_step && pv->last_step == ps->def_step);
    const ot_value *val = &g->values[v];
    assert_int_equal(val->n_consumers, 1);
    const ot_node *sum = &g->nodes[val->consumers[0]];
    assert_int_equal(sum->op, OT_OP_SUM);
    assert_int_equal(sum->inputs[0], v);
    assert_int_equal(sum->outputs[0], pv->slot_of);
}

/* timeline[s] is the bytes of the blocks live at s (an in-place pair once, aliases
 * never) plus the step's workspace. */
static void check_timeline(const ot_plan *p) {
    for (int s = 0; s < p->n_steps; s++) {
        size_t sum = p->ws_offset[s] >= 0 ? p->ws_bytes[s] : 0;
        for (int v = 0; v < p->n_values; v++) {
            const ot_plan_value *pv = &p->values[v];
            if (pv->offset < 0 || pv->alias_of >= 0 || pv->slot_of >= 0) continue;
            if (pv->pinned || (pv->def_step <= s && s <= pv->last_step)) sum += pv->nbytes;
            if (!pv->pinned && pv->inplace_of >= 0 && pv->def_step == s) sum -= p->values[pv->inplace_of].nbytes;
        }
        assert_int_equal(p->timeline[s], sum);
    }
}

void pc_check_plan(const ot_graph *g, const ot_plan *p) {
    int cap = p->n_values + p->n_steps + 1, nb = 0;
    blk *b = calloc((size_t)cap, sizeof *b);
    size_t max_end = 0;
    for (int v = 0; v < p->n_values; v++) {
        const ot_plan_value *pv = &p->values[v];
        if (pv->alias_of >= 0) {
            check_alias(p, v);
            continue;
        }
        if (pv->slot_of >= 0) {
            check_slot(g, p, v);
            continue;
        }
        if (pv->offset < 0) continue;
        assert_int_equal(pv->offset % OT_PLAN_ALIGN, 0);
        assert_int_equal(pv->nbytes, (size_t)ot_shape_numel(&g->values[v].shape) * ot_dtype_size(g->values[v].dtype));
        if (pv->pinned) assert_true((size_t)pv->offset + pv->nbytes <= p->pinned_bytes);
        else assert_true((size_t)pv->offset >= p->pinned_bytes);
        if (pv->nbytes == 0) continue;
        if (!pv->pinned) assert_true(pv->def_step >= 0 && pv->last_step >= pv->def_step);
        b[nb++] = (blk){pv->offset, pv->nbytes, pv->pinned ? -1 : pv->def_step,
                        pv->pinned ? p->n_steps : pv->last_step, v, pv->inplace_of};
        if ((size_t)pv->offset + pv->nbytes > max_end) max_end = (size_t)pv->offset + pv->nbytes;
    }
    for (int s = 0; s < p->n_steps; s++) {
        if (p->ws_offset[s] < 0) continue;
        assert_true(p->ws_bytes[s] > 0);
        b[nb++] = (blk){p->ws_offset[s], p->ws_bytes[s], s, s, -1, -1};
        if ((size_t)p->ws_offset[s] + p->ws_bytes[s] > max_end) max_end = (size_t)p->ws_offset[s] + p->ws_bytes[s];
    }
    assert_int_equal(p->peak_bytes, max_end);
    for (int i = 0; i < nb; i++)
        for (int j = i + 1; j < nb; j++) {
            const blk *x = &b[i], *y = &b[j];
            bool time = x->first <= y->last && y->first <= x->last;
            bool space = x->off < y->off + (int64_t)y->n && y->off < x->off + (int64_t)x->n;
            if (!time || !space) continue;
            /* An in-place pair shares the block at the handover step only. */
            bool handover = (y->inplace_of == x->value && y->first == x->last) ||
                            (x->inplace_of == y->value && x->first == y->last);
            if (!handover)
                fail_msg("values %d and %d overlap: [%lld,+%zu) steps %d..%d vs [%lld,+%zu) steps %d..%d", x->value,
                         y->value, (long long)x->off, x->n, x->first, x->last, (long long)y->off, y->n, y->first,
                         y->last);
        }
    /* The timeline never exceeds the arena. */
    for (int s = 0; s < p->n_steps; s++) assert_true(p->timeline[s] <= p->peak_bytes);
    check_timeline(p);
    free(b);
}

ot_plan *pc_plan_of(const ot_graph *g, ot_backend *be, bool no_inplace) {
    int *order = NULL, n = 0;
    ot_error err = {0};
    assert_int_equal(ot_schedule_build(g, &order, &n, &err), OT_OK);
    ot_plan *p = NULL;
    ot_plan_options o = {.no_inplace = no_inplace};
    ot_plan_device dev = ot_backend_plan_device(be);
    ot_status st = ot_plan_build_opts(g, order, n, &dev, &o, &p, &err);
    if (st) fail_msg("plan failed: %s", err.msg);
    free(order);
    pc_check_plan(g, p);
    return p;
}

pc_stem pc_weight_stem(ot_graph *g, int64_t n) {
    pc_stem s;
    s.x = pc_f32(g, "x", n, OT_VK_INPUT);
    pc_mark_input(g, s.x);
    s.w = pc_f32(g, "w", n, OT_VK_PARAM);
    s.a = pc_f32(g, "a", n, OT_VK_ACTIVATION);
    s.l = pc_f32(g, "l", n, OT_VK_ACTIVATION);
    s.d0 = pc_f32(g, "d0", n, OT_VK_GRADIENT);
    pc_node2(g, OT_OP_MUL, "f0", s.x, s.w, s.a, OT_PHASE_FORWARD);
    pc_node1(g, OT_OP_NEG, "loss", s.a, s.l, OT_PHASE_LOSS);
    pc_mark_output(g, s.l);
    pc_node1(g, OT_OP_ONES_LIKE, "b0", s.l, s.d0, OT_PHASE_BACKWARD);
    return s;
}
