/* loss_rows.c — cross-entropy over [..., C] scores (classes last, as a language model's
 * [B, T, V] logits) as [rows, C] rows. SoftmaxCrossEntropyLoss wants the classes on
 * axis 1; moving them there is a Transpose of the whole logits tensor to [B, V, T] and
 * another of its gradient back, and the kernels then read each class row with a stride
 * of T floats. Flattening to [B*T, V] is two Reshapes the planner turns into views, and
 * the loss is the same: position i = b*T + t has the same classes in the same order
 * either way, and the mean sums the positions in the same order, so every bit of the
 * loss and of the gradient is unchanged. */
#include "autodiff/loss_rows.h"

#include <stdio.h>

bool ot_loss_rows_fit(const ot_shape *s, int k) {
    if (s->rank <= 2 || k != s->rank - 1) return false;
    for (int i = 0; i < s->rank; i++)
        if (s->dim[i] < 0) return false;
    return true;
}

/* Reshape(x -> dims[0 .. n-1]) appended to g as a loss-phase node. */
static int reshape(ot_graph *g, int x, const int64_t *dims, int n, const char *what) {
    char base[512];
    int64_t nd = n;
    ot_shape cs = ot_shape_make(1, &nd), ys = ot_shape_make(n, dims);
    snprintf(base, sizeof base, "%s_%s_shape", g->values[x].name, what);
    int c = ot_graph_add_value_unique(g, base, OT_I64, &cs, OT_VK_CONSTANT);
    if (c < 0 || ot_value_set_data(&g->values[c], dims, (size_t)n * sizeof(int64_t))) return -1;
    snprintf(base, sizeof base, "%s_%s", g->values[x].name, what);
    int y = ot_graph_add_value_unique(g, base, g->values[x].dtype, &ys, OT_VK_ACTIVATION);
    if (y < 0) return -1;
    int in[2] = {x, c};
    char node[64];
    snprintf(node, sizeof node, "loss/%s", what);
    return ot_graph_add_node(g, OT_OP_RESHAPE, node, in, 2, &y, 1, OT_PHASE_LOSS) < 0 ? -1 : y;
}

int ot_loss_rows_flatten(ot_graph *g, int scores, int labels, int *scores_rows, int *labels_rows) {
    const ot_shape *s = &g->values[scores].shape;
    int64_t rows = 1, C = s->dim[s->rank - 1];
    for (int i = 0; i < s->rank - 1; i++) rows *= s->dim[i];
    int64_t sd[2] = {rows, C};
    *scores_rows = reshape(g, scores, sd, 2, "rows");
    *labels_rows = *scores_rows < 0 ? -1 : reshape(g, labels, &rows, 1, "rows");
    return *labels_rows < 0 ? -1 : 0;
}
