/* fold_linear.c — MatMul(X, Transpose(W)) as Gemm(X, W, transB = 1) on the training
 * graph. PyTorch exports nn.Linear as a Transpose of the [out, in] weight followed by a
 * MatMul, so every step copies every weight into its transpose (GPT-2 small: 124 M
 * floats, the tied head included) before the GEMM reads it; OpenBLAS reads W through
 * the transB flag just as well. The gradient rules already use W itself for dX and dW
 * (autodiff/grad_matmul.c), so after autodiff the Transpose feeds only the forward
 * MatMul. The GEMM is the same call with B read transposed: OpenBLAS packs the same
 * panels and runs the same kernel on the same shapes, so every bit is unchanged. The
 * rows of X (a view of [..., K] as [rows, K]) and of the result are Reshapes, which
 * the planner aliases. Under --precision bf16/fp16 the same applies to the weight's low
 * copy, Transpose(Cast(W)) (autocast.c): the low GEMM takes the transposed operand as
 * strides, where the Transpose of a [50257, 768] bfloat16 head cost more than the GEMM;
 * those results are the low GEMM's own (no float32 bits change). */
#include "autodiff/fold_linear.h"

#include <stdio.h>

/* W when node t is a Transpose swapping the two dims of a 2-D float W; else -1. Under
 * --precision bf16/fp16 W is the weight's low copy (autocast.c casts before the
 * Transpose), and the low GEMM reads it transposed through oneDNN's strides
 * (gemm_lowp.c) just as well: no [N, K] copy per step. */
static int weight_of(const ot_graph *g, const ot_node *t) {
    if (t->removed || t->op != OT_OP_TRANSPOSE || t->n_inputs < 1 || t->inputs[0] < 0) return -1;
    int w = t->inputs[0], n = 0;
    ot_dtype d = g->values[w].dtype;
    if (g->values[w].shape.rank != 2 || (d != OT_F32 && d != OT_BF16 && d != OT_F16)) return -1;
    const int64_t *perm = ot_node_attr_ints(t, "perm", &n);
    if (perm && !(n == 2 && perm[0] == 1 && perm[1] == 0)) return -1;
    return w;
}

/* True when MatMul node m reads T in slot 1 only and an X of W's dtype and rank >= 2
 * with every dim known in slot 0. */
static bool foldable(const ot_graph *g, const ot_node *m, int T, int w) {
    if (m->removed || m->op != OT_OP_MATMUL || m->n_inputs != 2 || m->inputs[1] != T || m->inputs[0] == T) return false;
    const ot_shape *xs = &g->values[m->inputs[0]].shape;
    if (xs->rank < 2 || g->values[m->inputs[0]].dtype != g->values[w].dtype) return false;
    for (int i = 0; i < xs->rank; i++)
        if (xs->dim[i] < 0) return false;
    return true;
}

/* A Reshape of x to dims appended in phase ph; its output value, or -1. */
static int reshape(ot_graph *g, int x, const int64_t *dims, int n, const char *base, ot_phase ph) {
    char name[600];
    int64_t nd = n;
    ot_shape cs = ot_shape_make(1, &nd), ys = ot_shape_make(n, dims);
    snprintf(name, sizeof name, "%s_shape", base);
    int c = ot_graph_add_value_unique(g, name, OT_I64, &cs, OT_VK_CONSTANT);
    if (c < 0 || ot_value_set_data(&g->values[c], dims, (size_t)n * sizeof(int64_t))) return -1;
    int y = ot_graph_add_value_unique(g, base, g->values[x].dtype, &ys, OT_VK_ACTIVATION);
    int in[2] = {x, c};
    if (y < 0 || ot_graph_add_node(g, OT_OP_RESHAPE, base, in, 2, &y, 1, ph) < 0) return -1;
    return y;
}

/* Replaces MatMul node m (reading X and Transpose(W)) by Gemm(X rows, W, transB). */
static int fold_one(ot_graph *g, int m, int w) {
    ot_node *mn = &g->nodes[m];
    int x = mn->inputs[0], y = mn->outputs[0];
    ot_phase ph = mn->phase;
    char base[512];
    snprintf(base, sizeof base, "%s/gemm", mn->name);
    ot_shape xs = g->values[x].shape, ys = g->values[y].shape;
    int64_t rows = 1, K = xs.dim[xs.rank - 1], N = g->values[w].shape.dim[0];
    for (int i = 0; i < xs.rank - 1; i++) rows *= xs.dim[i];
    ot_graph_remove_node(g, m); /* y gets the new producer */
    int xr = x, yr = y;
    if (xs.rank > 2) {
        int64_t xd[2] = {rows, K}, yd[2] = {rows, N};
        char xb[512];
        snprintf(xb, sizeof xb, "%s_rows", g->values[x].name);
        if ((xr = reshape(g, x, xd, 2, xb, ph)) < 0) return -1;
        ot_shape yrs = ot_shape_make(2, yd);
        if ((yr = ot_graph_add_value_unique(g, base, g->values[y].dtype, &yrs, OT_VK_ACTIVATION)) < 0) return -1;
    }
    int in[2] = {xr, w};
    int gn = ot_graph_add_node(g, OT_OP_GEMM, base, in, 2, &yr, 1, ph);
    if (gn < 0 || ot_node_set_attr_int(&g->nodes[gn], "transB", 1)) return -1;
    if (xs.rank > 2) {
        int64_t c = ys.rank;
        ot_shape cs = ot_shape_make(1, &c);
        char cb[600];
        snprintf(cb, sizeof cb, "%s_shape", base);
        int cv = ot_graph_add_value_unique(g, cb, OT_I64, &cs, OT_VK_CONSTANT);
        if (cv < 0 || ot_value_set_data(&g->values[cv], ys.dim, (size_t)ys.rank * sizeof(int64_t))) return -1;
        int rin[2] = {yr, cv};
        snprintf(cb, sizeof cb, "%s/unrows", base);
        if (ot_graph_add_node(g, OT_OP_RESHAPE, cb, rin, 2, &y, 1, ph) < 0) return -1;
    }
    return 0;
}

int ot_fold_linear_transposes(ot_graph *g) {
    int folded = 0, n_nodes = g->n_nodes;
    for (int t = 0; t < n_nodes; t++) {
        int w = weight_of(g, &g->nodes[t]);
        if (w < 0) continue;
        int T = g->nodes[t].outputs[0];
        const ot_value *tv = &g->values[T];
        if (tv->is_graph_output || tv->n_consumers == 0) continue;
        bool all = true;
        for (int i = 0; i < tv->n_consumers && all; i++) all = foldable(g, &g->nodes[tv->consumers[i]], T, w);
        if (!all) continue;
        while (g->values[T].n_consumers > 0)
            if (fold_one(g, g->values[T].consumers[0], w)) return -1;
        ot_graph_remove_node(g, t);
        folded++;
    }
    return folded;
}
