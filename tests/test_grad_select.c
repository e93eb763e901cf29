/* test_grad_select.c — finite-difference checks of ops batch 4's gradient rules
 * (autodiff/grad_select.c): Einsum through its backward op EinsumGrad for the forms
 * exporters emit (batched matmul, attention scores, transpose, reduction, ellipsis
 * broadcasting with a size-1 batch dim, three operands, the implicit output) and the
 * ones only the swap rule's extensions handle (a repeated label: the diagonal and the
 * trace; a label one operand alone has; the same value twice); TopK along every axis,
 * largest and smallest, its indices feeding nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "grad_check.h"

typedef struct operand {
    int rank;
    int64_t dims[4];
} operand;

/* Einsum of params shaped as given (ops[k]; same_as >= 0: operand k is operand
 * same_as again) into an output of rank yr, dims yd. */
static void check_einsum(const char *eq, const operand *ops, int n, int same_as, int yr, const int64_t *yd) {
    ot_graph *g = gc_graph();
    uint32_t rng = 11;
    int in[6];
    for (int k = 0; k < n; k++) {
        char name[8] = {'x', (char)('0' + k), 0};
        in[k] = k > 0 && k == n - 1 && same_as >= 0 ? in[same_as]
                                                    : gc_param(g, name, ops[k].rank, ops[k].dims, &rng, -1, 1, false);
    }
    int y = gc_val(g, "y", OT_F32, yr, yd);
    int node = gc_op(g, OT_OP_EINSUM, in, n, &y, 1);
    ot_node_set_attr_string(&g->nodes[node], "equation", eq);
    if (gc_check1(g, y)) fail_msg("Einsum \"%s\"", eq);
    ot_graph_free(g);
}

static void test_einsum_exporter_forms(void **state) {
    (void)state;
    check_einsum("bij,bjk->bik", (operand[]){{3, {2, 3, 4}}, {3, {2, 4, 2}}}, 2, -1, 3, (int64_t[]){2, 3, 2});
    check_einsum("bhqd,bhkd->bhqk", (operand[]){{4, {1, 2, 3, 4}}, {4, {1, 2, 2, 4}}}, 2, -1, 4,
                 (int64_t[]){1, 2, 3, 2});
    check_einsum("ij->ji", (operand[]){{2, {3, 4}}}, 1, -1, 2, (int64_t[]){4, 3});
    check_einsum("bij->b", (operand[]){{3, {2, 3, 4}}}, 1, -1, 1, (int64_t[]){2});
    check_einsum("...ij,jk->...ik", (operand[]){{3, {2, 3, 4}}, {2, {4, 2}}}, 2, -1, 3, (int64_t[]){2, 3, 2});
    check_einsum("bi,oij,bj->bo", (operand[]){{2, {2, 3}}, {3, {2, 3, 4}}, {2, {2, 4}}}, 3, -1, 2, (int64_t[]){2, 2});
    check_einsum("ij,jk", (operand[]){{2, {2, 3}}, {2, {3, 4}}}, 2, -1, 2, (int64_t[]){2, 4});
}

static void test_einsum_extended_swaps(void **state) {
    (void)state;
    /* a size-1 batch dim broadcast by "...": its gradient sums over the batch */
    check_einsum("...ij,...jk->...ik", (operand[]){{3, {1, 3, 4}}, {3, {2, 4, 2}}}, 2, -1, 3, (int64_t[]){2, 3, 2});
    check_einsum("ii->i", (operand[]){{2, {3, 3}}}, 1, -1, 1, (int64_t[]){3});
    check_einsum("ii", (operand[]){{2, {3, 3}}}, 1, -1, 0, NULL);
    check_einsum("ij,k->ik", (operand[]){{2, {2, 3}}, {1, {4}}}, 2, -1, 2, (int64_t[]){2, 4});
    check_einsum("ij,ij->i", (operand[]){{2, {2, 3}}, {2, {2, 3}}}, 2, 0, 1, (int64_t[]){2}); /* x twice */
}

/* TopK of a [3, 4, 5] param along axis, K = k; only Values feed the loss. */
static void check_top_k(int axis, int64_t k, int largest) {
    ot_graph *g = gc_graph();
    uint32_t rng = 5;
    int64_t xd[3] = {3, 4, 5};
    int x = gc_param(g, "x", 3, xd, &rng, -1, 1, false);
    float *xv = g->values[x].data;
    for (int i = 0; i < 60; i++)
        xv[i] = (float)((i * 37) % 60) / 30.0f - 1.0f; /* distinct, 1/30 apart */
    int kv = gc_const(g, "k", OT_I64, 1, (int64_t[]){1}, &k);
    int64_t yd[3] = {3, 4, 5};
    yd[(axis + 3) % 3] = k;
    int out[2] = {gc_val(g, "values", OT_F32, 3, yd), gc_val(g, "indices", OT_I64, 3, yd)};
    int node = gc_op(g, OT_OP_TOP_K, (int[]){x, kv}, 2, out, 2);
    ot_node_set_attr_int(&g->nodes[node], "axis", axis);
    ot_node_set_attr_int(&g->nodes[node], "largest", largest);
    gc_opts opt = {.step = 1e-3};
    if (gc_check(g, &out[0], 1, &opt)) fail_msg("TopK axis %d k %lld largest %d", axis, (long long)k, largest);
    ot_graph_free(g);
}

static void test_top_k(void **state) {
    (void)state;
    check_top_k(-1, 2, 1);
    check_top_k(1, 3, 0);
    check_top_k(0, 1, 1);
    check_top_k(2, 5, 0); /* every element: a permutation */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_einsum_exporter_forms),
        cmocka_unit_test(test_einsum_extended_swaps),
        cmocka_unit_test(test_top_k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
