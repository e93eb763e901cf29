/* test_exec_external.c — values bound to external memory (ot_exec_options.bind, the
 * planner's External): an "owner" executor holds the params and constants, a second
 * executor over the same graph reads them in place. Checked here on the CPU backend:
 *   - the second plan gives them no arena bytes (no param or constant category, no
 *     slab; its peak is exactly the owner's less those slabs) and its measured
 *     high-water mark still equals its planned peak;
 *   - results are bitwise the owner's, and a write through the owner is seen by the
 *     next run without any copy;
 *   - an in-place op reading a bound value does not overwrite it;
 *   - a view of a bound value aliases the bound memory (no kernel, no bytes);
 *   - bound values cannot be written through the borrower, a binding of the wrong
 *     size or of a value a node writes is refused, an out-of-range id too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "kernels/backend_select.h"
#include "exec/executor.h"
#include "plan/schedule.h"

static int val(ot_graph *g, const char *name, int r, int c, ot_value_kind kind) {
    int64_t d[2] = {r, c};
    ot_shape s = ot_shape_make(2, d);
    int v = ot_graph_add_value(g, name, OT_F32, &s, kind);
    assert_true(v >= 0);
    return v;
}

typedef struct ids {
    int x, W, b, m, y, r, f, rf;
} ids;

/* y = MatMul(x[3,4], W[4,2]) + b[3,2]; r = Relu(W) (in place when its input is
 * transient); f = Flatten(W), a view, and rf = Relu(f). Outputs y, r and rf. */
static ot_graph *build(ids *id) {
    ot_graph *g = ot_graph_new("external");
    id->x = val(g, "x", 3, 4, OT_VK_INPUT);
    id->W = val(g, "W", 4, 2, OT_VK_PARAM);
    id->b = val(g, "b", 3, 2, OT_VK_CONSTANT);
    id->m = val(g, "m", 3, 2, OT_VK_ACTIVATION);
    id->y = val(g, "y", 3, 2, OT_VK_ACTIVATION);
    id->r = val(g, "r", 4, 2, OT_VK_ACTIVATION);
    id->f = val(g, "f", 4, 2, OT_VK_ACTIVATION);
    id->rf = val(g, "rf", 4, 2, OT_VK_ACTIVATION);
    float wd[8], bd[6];
    for (int i = 0; i < 8; i++) wd[i] = 0.25f * (float)(i - 3); /* negatives: Relu would change them */
    for (int i = 0; i < 6; i++) bd[i] = 0.5f * (float)i;
    ot_value_set_data(&g->values[id->W], wd, sizeof wd);
    ot_value_set_data(&g->values[id->b], bd, sizeof bd);
    int mm[2] = {id->x, id->W}, ad[2] = {id->m, id->b};
    ot_graph_add_node(g, OT_OP_MATMUL, "matmul", mm, 2, &id->m, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_ADD, "add", ad, 2, &id->y, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_RELU, "relu", &id->W, 1, &id->r, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_FLATTEN, "flatten", &id->W, 1, &id->f, 1, OT_PHASE_FORWARD);
    ot_graph_add_node(g, OT_OP_RELU, "relu_f", &id->f, 1, &id->rf, 1, OT_PHASE_FORWARD);
    g->inputs = malloc(sizeof(int));
    g->inputs[0] = id->x;
    g->n_inputs = 1;
    g->outputs = malloc(3 * sizeof(int));
    g->outputs[0] = id->y;
    g->outputs[1] = id->r;
    g->outputs[2] = id->rf;
    g->n_outputs = 3;
    g->values[id->y].is_graph_output = g->values[id->r].is_graph_output = true;
    g->values[id->rf].is_graph_output = true;
    return g;
}

static ot_tensor *input_x(void) {
    int64_t d[2] = {3, 4};
    ot_shape s = ot_shape_make(2, d);
    ot_tensor *t = ot_tensor_new(OT_F32, &s);
    for (int i = 0; i < 12; i++) ((float *)t->data)[i] = 0.5f * (float)(i - 5);
    return t;
}

static ot_tensor *run_get(ot_executor *ex, int x, const ot_tensor *in, int out) {
    ot_error err = {0};
    ot_tensor *t = NULL;
    if (ot_executor_set_input(ex, x, in, &err) || ot_executor_run(ex, &err) || ot_executor_get(ex, out, &t, &err))
        fail_msg("%s", err.msg);
    return t;
}

static void test_bound_values_read_in_place(void **state) {
    (void)state;
    ot_error err = {0};
    ids id;
    ot_graph *g = build(&id);
    ot_backend *be = ot_backend_new_by_name("cpu", 1, &err);
    assert_non_null(be);
    ot_executor *owner = NULL, *ex = NULL;
    if (ot_executor_new(g, be, NULL, &owner, &err)) fail_msg("%s", err.msg);
    const ot_plan *op = ot_executor_plan(owner);
    ot_exec_binding b[2] = {
        {.value_id = id.W, .data = ot_executor_value_ptr(owner, id.W), .nbytes = ot_plan_value_bytes(op, id.W)},
        {.value_id = id.b, .data = ot_executor_value_ptr(owner, id.b), .nbytes = ot_plan_value_bytes(op, id.b)},
    };
    ot_exec_options eo = {.bind = b, .n_bind = 2};
    if (ot_executor_new(g, be, &eo, &ex, &err)) fail_msg("%s", err.msg);
    const ot_plan *p = ot_executor_plan(ex);

    /* no arena bytes for them: the peak is the owner's less the two slabs */
    assert_true(p->values[id.W].external && p->values[id.b].external);
    assert_int_equal(ot_plan_offset(p, id.W), -1);
    assert_int_equal(p->total[OT_MEM_PARAMS] + p->total[OT_MEM_CONSTANTS], 0);
    assert_int_equal(p->at_peak[OT_MEM_PARAMS] + p->at_peak[OT_MEM_CONSTANTS], 0);
    assert_int_equal(p->slab_bytes[OT_MEM_PARAMS] + p->slab_bytes[OT_MEM_CONSTANTS], 0);
    assert_int_equal(p->external_bytes, 8 * 4 + 6 * 4);
    assert_int_equal(ot_plan_peak_bytes(p) + op->slab_bytes[OT_MEM_PARAMS] + op->slab_bytes[OT_MEM_CONSTANTS],
                     ot_plan_peak_bytes(op));
    assert_ptr_equal(ot_executor_value_ptr(ex, id.W), ot_executor_value_ptr(owner, id.W));
    /* the view of W is W's bytes in both: the owner's param slab, the bound memory */
    assert_int_equal(op->values[id.f].alias_of, id.W);
    assert_int_equal(p->values[id.f].alias_of, id.W);
    assert_int_equal(ot_plan_offset(p, id.f), -1);
    assert_ptr_equal(ot_executor_value_ptr(ex, id.f), ot_executor_value_ptr(owner, id.W));
    assert_ptr_equal(ot_executor_value_ptr(owner, id.f), ot_executor_value_ptr(owner, id.W));

    ot_tensor *x = input_x();
    ot_tensor *w0 = NULL, *w1 = NULL;
    if (ot_executor_get(owner, id.W, &w0, &err)) fail_msg("%s", err.msg);
    ot_tensor *ya = run_get(owner, id.x, x, id.y), *yb = run_get(ex, id.x, x, id.y);
    assert_memory_equal(ya->data, yb->data, ya->nbytes);
    assert_int_equal(ot_executor_high_water(ex), ot_plan_peak_bytes(p));
    /* Relu read W but did not take over its memory */
    if (ot_executor_get(owner, id.W, &w1, &err)) fail_msg("%s", err.msg);
    assert_memory_equal(w0->data, w1->data, w0->nbytes);
    ot_tensor *r = NULL;
    if (ot_executor_get(ex, id.r, &r, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < 8; i++) assert_true(((float *)r->data)[i] == (((float *)w0->data)[i] > 0 ? ((float *)w0->data)[i] : 0));
    ot_tensor *rf = NULL; /* Relu through the view: the same numbers */
    if (ot_executor_get(ex, id.rf, &rf, &err)) fail_msg("%s", err.msg);
    assert_memory_equal(rf->data, r->data, r->nbytes);
    ot_tensor_free(rf);

    /* a write through the owner is what the next run reads */
    float w2[8];
    for (int i = 0; i < 8; i++) w2[i] = 1.0f + (float)i;
    if (ot_executor_write(owner, id.W, w2, sizeof w2, &err)) fail_msg("%s", err.msg);
    ot_tensor *ya2 = run_get(owner, id.x, x, id.y), *yb2 = run_get(ex, id.x, x, id.y);
    assert_memory_equal(ya2->data, yb2->data, ya2->nbytes);
    assert_memory_not_equal(ya->data, yb2->data, ya->nbytes);

    /* the borrower only reads */
    assert_int_equal(ot_executor_write(ex, id.W, w2, sizeof w2, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "external"));

    ot_tensor_free(x);
    ot_tensor_free(w0);
    ot_tensor_free(w1);
    ot_tensor_free(r);
    ot_tensor_free(ya);
    ot_tensor_free(yb);
    ot_tensor_free(ya2);
    ot_tensor_free(yb2);
    ot_executor_free(ex);
    ot_executor_free(owner);
    ot_backend_free(be);
    ot_graph_free(g);
}

static void test_bad_bindings(void **state) {
    (void)state;
    ot_error err = {0};
    ids id;
    ot_graph *g = build(&id);
    ot_backend *be = ot_backend_new_by_name("cpu", 1, &err);
    assert_non_null(be);
    float mem[16] = {0};
    ot_executor *ex = NULL;

    ot_exec_binding small = {.value_id = id.W, .data = mem, .nbytes = 4};
    ot_exec_options eo = {.bind = &small, .n_bind = 1};
    assert_int_equal(ot_executor_new(g, be, &eo, &ex, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "'W'"));
    assert_null(ex);

    ot_exec_binding written = {.value_id = id.m, .data = mem, .nbytes = 6 * 4};
    eo.bind = &written;
    assert_int_equal(ot_executor_new(g, be, &eo, &ex, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "'m'"));
    assert_non_null(strstr(err.msg, "'matmul' writes it"));

    ot_exec_binding twice[2] = {{.value_id = id.W, .data = mem, .nbytes = 32}, {.value_id = id.W, .data = mem, .nbytes = 32}};
    eo.bind = twice;
    eo.n_bind = 2;
    assert_int_equal(ot_executor_new(g, be, &eo, &ex, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "twice"));

    int *order = NULL, n = 0, bad = 99;
    ot_plan *p = NULL;
    if (ot_schedule_build(g, &order, &n, &err)) fail_msg("%s", err.msg);
    ot_plan_options po = {.external = &bad, .n_external = 1};
    assert_int_equal(ot_plan_build_opts(g, order, n, NULL, &po, &p, &err), OT_E_USAGE);
    assert_null(p);
    free(order);
    ot_backend_free(be);
    ot_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound_values_read_in_place),
        cmocka_unit_test(test_bad_bindings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
