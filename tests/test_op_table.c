/* test_op_table.c — completeness of the op-indexed tables every dispatch is built
 * from: walks every op of ir/ops.def and fails, naming the ops, when one lacks a shape
 * rule (importer/shape_rules.c) or a cost (remat/cost.c), when a differentiable op
 * (OT_T_DIFF) lacks a gradient rule (autodiff/grad_table.c), when an op that is
 * not differentiable has one, when an op lacks a CPU kernel (kernels/cpu/cpu_ops.c),
 * or when the CUDA table has neither a kernel nor a CPU-only mark for it
 * (kernels/cuda/cuda_ops.def). docs/adding-an-op.md lists the entries an op needs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "importer/importer.h"
#include "ir.h"
#include "kernels/kernel.h"
#include "remat/remat.h"

typedef bool (*op_pred)(ot_op op);

/* Fails with "<what>: Op1, Op2 (see <where>)" when pred holds for any op of ops.def. */
static void fail_on_ops(op_pred pred, const char *what, const char *where) {
    char names[4096] = "";
    size_t len = 0;
    int count = 0;
    for (int op = 1; op < OT_OP_COUNT; op++) {
        if (!pred((ot_op)op)) continue;
        int w = snprintf(names + len, sizeof names - len, "%s%s", count ? ", " : "", ot_op_name((ot_op)op));
        if (w > 0 && (size_t)w < sizeof names - len) len += (size_t)w;
        count++;
    }
    if (count) fail_msg("%d op(s) %s: %s (see %s)", count, what, names, where);
}

static bool lacks_shape_rule(ot_op op) { return !ot_shape_has_rule(op); }
static bool lacks_cost(ot_op op) { return !ot_cost_has_rule(op); }
static bool diff_without_grad(ot_op op) { return ot_op_has(op, OT_T_DIFF) && !ot_grad_has_rule(op); }
static bool grad_without_diff(ot_op op) { return !ot_op_has(op, OT_T_DIFF) && ot_grad_has_rule(op); }

/* The walk covers the whole table: names from ops.def, nothing past the end. */
static void test_walk_covers_ops_def(void **state) {
    (void)state;
    assert_true(OT_OP_COUNT > 1);
    for (int op = 1; op < OT_OP_COUNT; op++) {
        const char *name = ot_op_name((ot_op)op);
        assert_non_null(name);
        assert_true(name[0] != '\0');
    }
    /* out of range is nobody's op */
    assert_false(ot_shape_has_rule(OT_OP_UNKNOWN));
    assert_false(ot_grad_has_rule(OT_OP_UNKNOWN));
    assert_false(ot_shape_has_rule(OT_OP_COUNT));
    assert_false(ot_grad_has_rule(OT_OP_COUNT));
    assert_false(ot_cost_has_rule(OT_OP_COUNT));
}

static void test_every_op_has_a_shape_rule(void **state) {
    (void)state;
    fail_on_ops(lacks_shape_rule, "without a shape rule", "the table in importer/shape_rules.c");
}

static void test_every_op_has_a_cost(void **state) {
    (void)state;
    fail_on_ops(lacks_cost, "without a cost entry", "the table in remat/cost.c");
}

static void test_differentiable_ops_have_a_gradient_rule(void **state) {
    (void)state;
    fail_on_ops(diff_without_grad, "marked OT_T_DIFF in ir/ops.def without a gradient rule",
                "the table in autodiff/grad_table.c");
}

static void test_only_differentiable_ops_have_a_gradient_rule(void **state) {
    (void)state;
    fail_on_ops(grad_without_diff, "with a gradient rule but not marked OT_T_DIFF in ir/ops.def",
                "the table in autodiff/grad_table.c");
}

/* Kernel tables: every op has a CPU kernel (kernels/cpu/cpu_ops.c), and the CUDA
 * table (kernels/cuda/cuda_ops.def) has a kernel or an explicit CPU-only mark for it.
 * The CUDA answer comes from the same .def the module builds its table from, so this
 * runs without a GPU and without the module; test_cuda checks the module agrees. */
static bool lacks_cpu_kernel(ot_op op) { return !ot_cpu_has_kernel(op); }
static bool lacks_cuda_row(ot_op op) { return ot_cuda_op_status(op) == OT_CUDA_MISSING; }

static void test_every_op_has_a_cpu_kernel(void **state) {
    (void)state;
    assert_false(ot_cpu_has_kernel(OT_OP_UNKNOWN));
    assert_false(ot_cpu_has_kernel(OT_OP_COUNT));
    fail_on_ops(lacks_cpu_kernel, "without a CPU kernel", "the table in kernels/cpu/cpu_ops.c");
}

static void test_every_op_has_a_cuda_kernel_or_cpu_only_mark(void **state) {
    (void)state;
    assert_int_equal(ot_cuda_op_status(OT_OP_UNKNOWN), OT_CUDA_MISSING);
    fail_on_ops(lacks_cuda_row, "with neither a CUDA kernel nor a CPU_ONLY mark",
                "the rows of kernels/cuda/cuda_ops.def");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_covers_ops_def),
        cmocka_unit_test(test_every_op_has_a_shape_rule),
        cmocka_unit_test(test_every_op_has_a_cost),
        cmocka_unit_test(test_differentiable_ops_have_a_gradient_rule),
        cmocka_unit_test(test_only_differentiable_ops_have_a_gradient_rule),
        cmocka_unit_test(test_every_op_has_a_cpu_kernel),
        cmocka_unit_test(test_every_op_has_a_cuda_kernel_or_cpu_only_mark),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
