/* sequence.c — the one use of ONNX sequences onnxtrain reads: SplitToSequence whose
 * sequence is only read by SequenceAt at constant positions (PyTorch's dynamo exporter
 * writes it for torch.split / chunk without its optimizer, e.g. GPT-2's q, k, v).
 * onnxtrain has no sequence type, so each SequenceAt becomes the Slice of the input
 * that is its element: [start, end) along `axis`, end clamped as Slice clamps it, so a
 * scalar split size needs no known dim for the last, shorter chunk; without `split`
 * the element is one index wide and keepdims = 0 adds a Squeeze. Anything else (a
 * computed position, a negative position counted from an end only the data knows,
 * another reader of the sequence, other sequence ops) is listed as unsupported with
 * the reason. Runs while the graph is built, before the unsupported ops are
 * reported; the Slices are ordinary nodes for every later pass. */
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"

bool ot_imp_is_sequence_op(const char *op_type) {
    return !strcmp(op_type, "SplitToSequence") || !strcmp(op_type, "SequenceAt");
}

static bool is_op(const ot_node *n, const char *name) {
    return !n->removed && n->op == OT_OP_UNKNOWN && n->op_type && !strcmp(n->op_type, name) &&
           (!n->domain || !n->domain[0] || !strcmp(n->domain, "ai.onnx"));
}

/* The ints of a constant int value (an initializer or a Constant's output); -1: not
 * constant or not ints; else the count (a scalar counts 1), at most max. */
static int const_ints(const ot_graph *g, int vid, int64_t *out, int max) {
    if (vid < 0) return 0;
    const ot_value *v = &g->values[vid];
    if (!v->data || v->producer >= 0 || (v->dtype != OT_I64 && v->dtype != OT_I32)) return -1;
    size_t es = ot_dtype_size(v->dtype), cnt = v->nbytes / es;
    if (cnt > (size_t)max) return -1;
    for (size_t i = 0; i < cnt; i++) {
        if (v->dtype == OT_I64) {
            memcpy(&out[i], (const char *)v->data + 8 * i, 8);
        } else {
            int32_t x;
            memcpy(&x, (const char *)v->data + 4 * i, 4);
            out[i] = x;
        }
    }
    return (int)cnt;
}

/* [start, end) of element `pos` along the axis; false when the model does not say
 * without the data (why names the reason). */
static bool element_range(const ot_graph *g, const ot_node *split, int64_t pos, int64_t *start, int64_t *end,
                          bool *squeeze, const char **why) {
    enum { MAX_SPLITS = 4096 };
    int sv = split->n_inputs > 1 ? split->inputs[1] : -1;
    bool keep = ot_node_attr_int(split, "keepdims", 1) != 0;
    *squeeze = false;
    if (sv < 0) { /* one index per element */
        if (pos < 0) return *why = "a negative position counted from an end the data decides", false;
        *start = pos, *end = pos + 1, *squeeze = !keep;
        return true;
    }
    int64_t *sizes = malloc(sizeof(int64_t) * MAX_SPLITS);
    int n = sizes ? const_ints(g, sv, sizes, MAX_SPLITS) : -1;
    bool ok = false;
    if (n < 0) {
        *why = "split sizes computed at run time";
    } else if (g->values[sv].shape.rank == 0) { /* one size: equal chunks, the last shorter */
        if (sizes[0] <= 0) *why = "a split size that is not positive";
        else if (pos < 0) *why = "a negative position counted from an end the data decides";
        else if (__builtin_mul_overflow(pos, sizes[0], start) || __builtin_add_overflow(*start, sizes[0], end))
            *why = "a position out of range";
        else ok = true;
    } else {
        if (pos < 0) pos += n;
        if (pos < 0 || pos >= n) {
            *why = "a position out of range";
        } else {
            *start = 0;
            for (int i = 0; i < pos; i++) *start += sizes[i];
            *end = *start + sizes[pos];
            ok = true;
        }
    }
    free(sizes);
    return ok;
}

static int add_i64(ot_graph *g, const ot_node *n, const char *what, int64_t x) {
    int64_t one = 1;
    ot_shape s = ot_shape_make(1, &one);
    return ot_imp_add_const(g, n, what, OT_I64, &s, &x, sizeof x);
}

/* SequenceAt node `at` (reading `split`'s sequence at pos) becomes Slice(x, start,
 * end, axis) [-> Squeeze(axis)] writing the SequenceAt's output. */
static ot_status rewrite_at(ot_graph *g, int at, int split, int64_t start, int64_t end, bool squeeze, ot_error *err) {
    int64_t axis = ot_node_attr_int(&g->nodes[split], "axis", 0);
    int x = g->nodes[split].inputs[0];
    int sv = add_i64(g, &g->nodes[at], "start", start), ev = add_i64(g, &g->nodes[at], "end", end),
        av = add_i64(g, &g->nodes[at], "axis", axis);
    if (sv < 0 || ev < 0 || av < 0) return ot_fail(err, OT_E_MEMORY, "out of memory");
    int y = g->nodes[at].outputs[0], sliced = y;
    if (squeeze) {
        const ot_value *yv = &g->values[y];
        char base[300];
        snprintf(base, sizeof base, "%s.unsqueezed", yv->name ? yv->name : "sequence_at");
        ot_shape unknown = ot_shape_unknown();
        sliced = ot_graph_add_value_unique(g, base, OT_UNDEFINED, &unknown, OT_VK_ACTIVATION);
        if (sliced < 0) return ot_fail(err, OT_E_MEMORY, "out of memory");
        char name[300];
        snprintf(name, sizeof name, "%s.squeeze", g->nodes[at].name ? g->nodes[at].name : "sequence_at");
        ot_graph_remove_node(g, at); /* the Slice below takes its place, writing `sliced` */
        int q = ot_graph_add_node(g, OT_OP_SQUEEZE, name, &sliced, 1, &y, 1, OT_PHASE_FORWARD);
        if (q < 0 || ot_node_set_attr_ints(&g->nodes[q], "axes", &axis, 1))
            return ot_fail(err, OT_E_MEMORY, "out of memory");
    } else {
        ot_graph_remove_node(g, at);
    }
    int ins[4] = {x, sv, ev, av};
    char name[300];
    snprintf(name, sizeof name, "%s", g->nodes[at].name ? g->nodes[at].name : "sequence_at");
    if (ot_graph_add_node(g, OT_OP_SLICE, name, ins, 4, &sliced, 1, OT_PHASE_FORWARD) < 0)
        return ot_fail(err, OT_E_MEMORY, "out of memory");
    return OT_OK;
}

/* Rewrites SequenceAt node `at` when it can; *why says why not. */
static ot_status try_rewrite(ot_graph *g, int at, const char **why, ot_error *err) {
    const ot_node *n = &g->nodes[at];
    int seq = n->n_inputs > 0 ? n->inputs[0] : -1, split = seq >= 0 ? g->values[seq].producer : -1;
    *why = NULL;
    if (split < 0 || !is_op(&g->nodes[split], "SplitToSequence"))
        return *why = "a sequence not made by SplitToSequence", OT_OK;
    if (g->values[seq].is_graph_output) return *why = "a sequence that is a graph output", OT_OK;
    int64_t pos;
    if (n->n_inputs < 2 || const_ints(g, n->inputs[1], &pos, 1) != 1) return *why = "a position computed at run time", OT_OK;
    int64_t start, end;
    bool squeeze;
    if (!element_range(g, &g->nodes[split], pos, &start, &end, &squeeze, why)) return OT_OK;
    return rewrite_at(g, at, split, start, end, squeeze, err);
}

static ot_status refuse(ot_model *m, const ot_node *n, const char *why, ot_error *err) {
    char what[200];
    snprintf(what, sizeof what, "%s (%s)", n->op_type, why);
    return ot_imp_note_unsupported(m, what, n->name ? n->name : "?", OT_UNSUP_OP, err);
}

ot_status ot_imp_rewrite_sequences(ot_graph *g, ot_model *m, ot_error *err) {
    int n0 = g->n_nodes;
    for (int id = 0; id < n0; id++) {
        if (!is_op(&g->nodes[id], "SequenceAt")) continue;
        const char *why;
        ot_status st = try_rewrite(g, id, &why, err);
        if (!st && why) st = refuse(m, &g->nodes[id], why, err);
        if (st) return st;
    }
    for (int id = 0; id < n0; id++) {
        if (!is_op(&g->nodes[id], "SplitToSequence")) continue;
        const ot_node *n = &g->nodes[id];
        const ot_value *seq = n->n_outputs > 0 && n->outputs[0] >= 0 ? &g->values[n->outputs[0]] : NULL;
        if (seq && (seq->n_consumers > 0 || seq->is_graph_output)) {
            /* read by something other than a rewritten SequenceAt (which is refused
             * on its own when it is one) */
            bool only_at = !seq->is_graph_output;
            for (int c = 0; c < seq->n_consumers && only_at; c++)
                only_at = is_op(&g->nodes[seq->consumers[c]], "SequenceAt");
            ot_status st = refuse(m, n, only_at ? "read by a SequenceAt listed here" : "read other than by SequenceAt",
                                  err);
            if (st) return st;
            continue;
        }
        ot_graph_remove_node(g, id);
    }
    return OT_OK;
}
