/* autocast.c — the mixed-precision rewrite of the forward graph (autodiff/autocast.h):
 * one walk in topological order that decides each node's compute dtype from its op's
 * list, its inputs' (already decided) dtypes and the backend's kernels, and inserts the
 * casts that decision needs, one per value and dtype. */
#include "autodiff/autocast.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

ot_status ot_precision_parse(const char *text, ot_precision *out, ot_error *err) {
    static const struct { const char *name; ot_precision p; } names[] = {
        {"fp32", OT_PRECISION_FP32}, {"float32", OT_PRECISION_FP32}, {"bf16", OT_PRECISION_BF16},
        {"bfloat16", OT_PRECISION_BF16}, {"fp16", OT_PRECISION_FP16}, {"float16", OT_PRECISION_FP16},
    };
    for (size_t i = 0; text && i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(text, names[i].name)) {
            *out = names[i].p;
            return OT_OK;
        }
    return ot_fail(err, OT_E_USAGE, "--precision: unknown precision '%s' (use fp32, bf16 or fp16)", text ? text : "");
}

const char *ot_precision_name(ot_precision p) {
    return p == OT_PRECISION_BF16 ? "bf16" : p == OT_PRECISION_FP16 ? "fp16" : "fp32";
}

ot_dtype ot_precision_dtype(ot_precision p) {
    return p == OT_PRECISION_BF16 ? OT_BF16 : p == OT_PRECISION_FP16 ? OT_F16 : OT_F32;
}

const char *ot_autocast_class_name(ot_autocast_class c) {
    switch (c) {
    case OT_AC_LOW: return "low";
    case OT_AC_F32_LIST: return "f32 (float32 list, casts up)";
    case OT_AC_FALLBACK: return "f32 (no low-precision kernel, casts up)";
    case OT_AC_PROMOTED: return "f32 (mixed inputs, casts up)";
    case OT_AC_CAST: return "cast";
    default: return "f32";
    }
}

int ot_autocast_op_list(ot_op op) {
    switch (op) {
    case OT_OP_MATMUL: case OT_OP_GEMM: case OT_OP_CONV: case OT_OP_CONV_TRANSPOSE: case OT_OP_ATTENTION:
        return 1;
    /* autocast's float32 list: range-sensitive math, normalisations, reductions that
     * sum, losses. BatchNormalization is on neither list, as in PyTorch: it runs in
     * its input's dtype with float32 scale, bias and statistics (keeps_dtype) where
     * the backend has such a kernel, so a conv net's activations stay low. */
    case OT_OP_POW: case OT_OP_RECIPROCAL: case OT_OP_EXP: case OT_OP_LOG: case OT_OP_SOFTPLUS:
    case OT_OP_SOFTMAX: case OT_OP_LOG_SOFTMAX: case OT_OP_LAYER_NORM:
    case OT_OP_INSTANCE_NORM: case OT_OP_GROUP_NORM: case OT_OP_RMS_NORM: case OT_OP_REDUCE_MEAN:
    case OT_OP_REDUCE_SUM: case OT_OP_REDUCE_PROD: case OT_OP_REDUCE_L1: case OT_OP_REDUCE_L2:
    case OT_OP_REDUCE_LOG_SUM_EXP: case OT_OP_REDUCE_SUM_SQUARE: case OT_OP_CUMSUM:
        return -1;
    default:
        return ot_op_has(op, OT_T_LOSS) || ot_op_has(op, OT_T_OPTIMIZER) ? -1 : 0;
    }
}

typedef struct pass {
    ot_graph *g;
    ot_dtype low;
    ot_autocast_supports_fn supports;
    void *ctx;
    int *cast_low, *cast_f32; /* per original value: its cast, -1 none yet */
    int n_orig_values;
    ot_autocast_result *res;
    ot_error *err;
} pass;

/* Float inputs with their own type in ONNX (Dropout's ratio, Resize's roi and scales)
 * keep their dtype: they are parameters of the op, not data it computes on; so do
 * BatchNormalization's scale, bias and running statistics (inputs and outputs 1, 2),
 * which stay float32 as in PyTorch's mixed-dtype batch norm. */
static bool keeps_dtype(ot_op op, int slot) {
    return slot > 0 && (op == OT_OP_DROPOUT || op == OT_OP_RESIZE || op == OT_OP_UPSAMPLE || op == OT_OP_BATCH_NORM);
}
static bool keeps_out_dtype(ot_op op, int slot) { return slot > 0 && op == OT_OP_BATCH_NORM; }
/* The dtype a float input in `slot` is read in when the node computes in `to`:
 * Attention's attn_mask (slot 3) is an additive bias the kernels take in float32 (or
 * bool) in every precision, as the float32 node read it: a low copy would round it. */
static ot_dtype slot_dtype(ot_op op, int slot, ot_dtype to) {
    return op == OT_OP_ATTENTION && slot == 3 ? OT_F32 : to;
}

static bool is_f32(const ot_graph *g, int v) { return v >= 0 && g->values[v].dtype == OT_F32; }
static bool is_init(const ot_graph *g, int v) {
    return g->values[v].kind == OT_VK_PARAM || g->values[v].kind == OT_VK_CONSTANT;
}

static int cast_of(pass *p, int v, ot_dtype to);

/* W when v = Transpose(W) swaps the two dims of a float32 initializer W (nn.Linear's
 * weight as PyTorch exports it) and the backend transposes in the low dtype; else -1. */
static int transposed_weight(pass *p, int v) {
    const ot_graph *g = p->g;
    int t = g->values[v].producer, n = 0;
    if (t < 0 || g->nodes[t].op != OT_OP_TRANSPOSE || g->nodes[t].n_inputs != 1) return -1;
    int w = g->nodes[t].inputs[0];
    if (w < 0 || !is_f32(g, w) || !is_init(g, w) || g->values[w].shape.rank != 2) return -1;
    const int64_t *perm = ot_node_attr_ints(&g->nodes[t], "perm", &n);
    if (perm && !(n == 2 && perm[0] == 1 && perm[1] == 0)) return -1;
    ot_tensor in = {.dtype = p->low, .shape = g->values[w].shape}, out = {.dtype = p->low, .shape = g->values[v].shape};
    return p->supports(p->ctx, &g->nodes[t], &in, &out) ? w : -1;
}

/* The cast of value v to dtype `to` (one per value and dtype), made on first use. A
 * transposed weight is cast before its Transpose (Transpose(Cast(W))), so the MatMul
 * still reads a Transpose of a weight and its gradient rule uses that weight's low
 * copy itself (autodiff/grad_matmul.c) instead of transposing it in every step. */
static int cast_of(pass *p, int v, ot_dtype to) {
    int *slot = v < p->n_orig_values ? (to == OT_F32 ? &p->cast_f32[v] : &p->cast_low[v]) : NULL;
    if (slot && *slot >= 0) return *slot;
    ot_graph *g = p->g;
    int w = to == p->low ? transposed_weight(p, v) : -1;
    if (w >= 0) {
        int wl = cast_of(p, w, to), t = g->values[v].producer;
        if (wl < 0) return -1;
        char nm[512];
        snprintf(nm, sizeof nm, "%.480s.%s", g->values[v].name, to == OT_BF16 ? "bf16" : "fp16");
        ot_shape s = g->values[v].shape;
        int c = ot_graph_add_value_unique(g, nm, to, &s, OT_VK_ACTIVATION);
        if (c < 0) return -1;
        int node = ot_graph_add_node(g, OT_OP_TRANSPOSE, g->values[c].name, &wl, 1, &c, 1, OT_PHASE_FORWARD);
        if (node < 0 || ot_node_copy_attrs(&g->nodes[node], &g->nodes[t])) return -1;
        if (slot) *slot = c;
        return c;
    }
    char nm[512];
    snprintf(nm, sizeof nm, "%.480s.%s", g->values[v].name ? g->values[v].name : "v",
             to == OT_F32 ? "f32" : to == OT_BF16 ? "bf16" : "fp16");
    ot_shape s = g->values[v].shape;
    int c = ot_graph_add_value_unique(g, nm, to, &s, OT_VK_ACTIVATION);
    if (c < 0) return -1;
    int node = ot_graph_add_node(g, OT_OP_CAST, g->values[c].name, &v, 1, &c, 1, OT_PHASE_FORWARD);
    if (node < 0 || ot_node_set_attr_int(&g->nodes[node], "to", to)) return -1;
    p->res->n_casts++;
    if (slot) *slot = c;
    return c;
}

/* Fills in[]/out[] with node's tensors as they would be with its float inputs and
 * float32 outputs in dtype `dt`. */
static void describe(const ot_graph *g, const ot_node *n, ot_dtype dt, ot_tensor *in, ot_tensor *out) {
    for (int i = 0; i < n->n_inputs; i++) {
        int v = n->inputs[i];
        in[i] = (ot_tensor){.dtype = v < 0 ? OT_UNDEFINED : g->values[v].dtype};
        if (v < 0) continue;
        in[i].shape = g->values[v].shape;
        if (keeps_dtype(n->op, i)) continue;
        if (in[i].dtype == OT_F32 || in[i].dtype == OT_BF16 || in[i].dtype == OT_F16)
            in[i].dtype = slot_dtype(n->op, i, dt);
    }
    for (int i = 0; i < n->n_outputs; i++) {
        int v = n->outputs[i];
        out[i] = (ot_tensor){.dtype = v < 0 ? OT_UNDEFINED : g->values[v].dtype};
        if (v < 0) continue;
        out[i].shape = g->values[v].shape;
        if (out[i].dtype == OT_F32 && !keeps_out_dtype(n->op, i)) out[i].dtype = dt;
    }
}

static bool has_low_kernel(pass *p, int node) {
    const ot_node *n = &p->g->nodes[node];
    ot_tensor *t = calloc((size_t)(n->n_inputs + n->n_outputs) + 1, sizeof *t);
    if (!t) return false;
    describe(p->g, n, p->low, t, t + n->n_inputs);
    bool ok = p->supports(p->ctx, n, t, t + n->n_inputs);
    free(t);
    return ok;
}

/* Re-reads every float input of node in dtype `to` (through casts; Attention's mask in
 * float32, slot_dtype), skipping inputs already in it. */
static int reread_inputs(pass *p, int node, ot_dtype to) {
    for (int i = 0; i < p->g->nodes[node].n_inputs; i++) {
        int v = p->g->nodes[node].inputs[i];
        ot_dtype d = v >= 0 ? p->g->values[v].dtype : OT_UNDEFINED, want = slot_dtype(p->g->nodes[node].op, i, to);
        if (d == want || (d != OT_F32 && d != p->low) || keeps_dtype(p->g->nodes[node].op, i)) continue;
        int c = cast_of(p, v, want);
        if (c < 0) return -1;
        ot_graph_set_input(p->g, node, i, c);
    }
    return 0;
}

/* The node's float32 outputs become low; a graph output keeps its id and float32
 * dtype, written by a Cast of a new low value, so the loss and the caller read
 * float32. */
static int lower_outputs(pass *p, int node) {
    ot_graph *g = p->g;
    for (int i = 0; i < g->nodes[node].n_outputs; i++) {
        int y = g->nodes[node].outputs[i];
        if (!is_f32(g, y) || keeps_out_dtype(g->nodes[node].op, i)) continue;
        bool is_out = g->values[y].is_graph_output;
        for (int k = 0; k < g->n_outputs && !is_out; k++) is_out = g->outputs[k] == y;
        if (!is_out) {
            g->values[y].dtype = p->low;
            continue;
        }
        char nm[512];
        snprintf(nm, sizeof nm, "%.480s.%s", g->values[y].name, p->low == OT_BF16 ? "bf16" : "fp16");
        ot_shape s = g->values[y].shape;
        int yl = ot_graph_add_value_unique(g, nm, p->low, &s, OT_VK_ACTIVATION);
        if (yl < 0) return -1;
        g->nodes[node].outputs[i] = yl;
        g->values[yl].producer = node;
        int c = ot_graph_add_node(g, OT_OP_CAST, g->values[y].name, &yl, 1, &y, 1, OT_PHASE_FORWARD);
        if (c < 0 || ot_node_set_attr_int(&g->nodes[c], "to", OT_F32)) return -1;
        p->res->n_casts++;
    }
    return 0;
}

/* Decides one node; returns its class or -1 when out of memory. */
static int decide(pass *p, int node) {
    ot_graph *g = p->g;
    const ot_node *n = &g->nodes[node];
    if (n->op == OT_OP_CAST || n->op == OT_OP_CAST_LIKE) return OT_AC_F32; /* its dtype is its attribute */
    int list = ot_autocast_op_list(n->op);
    bool any_low = false, any_f32_act = false, any_float = false;
    for (int i = 0; i < n->n_inputs; i++) {
        int v = n->inputs[i];
        if (v < 0 || keeps_dtype(n->op, i)) continue;
        ot_dtype d = g->values[v].dtype;
        any_low |= d == p->low;
        any_float |= d == p->low || d == OT_F32;
        any_f32_act |= d == OT_F32 && !is_init(g, v);
    }
    if (list > 0 && any_float) {
        if (has_low_kernel(p, node)) return reread_inputs(p, node, p->low) || lower_outputs(p, node) ? -1 : OT_AC_LOW;
        if (!any_low) return OT_AC_FALLBACK;
        return reread_inputs(p, node, OT_F32) ? -1 : OT_AC_FALLBACK;
    }
    if (!any_low) return OT_AC_F32;
    if (list < 0) return reread_inputs(p, node, OT_F32) ? -1 : OT_AC_F32_LIST;
    if (!any_f32_act && has_low_kernel(p, node))
        return reread_inputs(p, node, p->low) || lower_outputs(p, node) ? -1 : OT_AC_LOW;
    return reread_inputs(p, node, OT_F32) ? -1 : any_f32_act ? OT_AC_PROMOTED : OT_AC_FALLBACK;
}

/* Forward nodes in an order where every producer comes before its readers (the node
 * list is not one after rewrites that append nodes, such as LoRA's). */
static int *topo_order(const ot_graph *g, int *count) {
    int *order = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    int *pending = calloc((size_t)g->n_nodes + 1, sizeof(int));
    if (!order || !pending) goto fail;
    int head = 0, tail = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ot_node *n = &g->nodes[i];
        if (n->removed || n->phase != OT_PHASE_FORWARD) continue;
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            int pr = v >= 0 ? g->values[v].producer : -1;
            if (pr >= 0 && !g->nodes[pr].removed && g->nodes[pr].phase == OT_PHASE_FORWARD) pending[i]++;
        }
        if (!pending[i]) order[tail++] = i;
    }
    while (head < tail) {
        const ot_node *n = &g->nodes[order[head++]];
        for (int k = 0; k < n->n_outputs; k++) {
            int v = n->outputs[k];
            if (v < 0) continue;
            for (int c = 0; c < g->values[v].n_consumers; c++) {
                int r = g->values[v].consumers[c];
                if (!g->nodes[r].removed && g->nodes[r].phase == OT_PHASE_FORWARD && --pending[r] == 0)
                    order[tail++] = r;
            }
        }
    }
    free(pending);
    *count = tail;
    return order;
fail:
    free(order);
    free(pending);
    return NULL;
}

/* A weight's float32 Transpose whose readers all read its low copy now
 * (Transpose(Cast(W)), cast_of) is read by nothing: removed, or every step would
 * still transpose every float32 weight (GPT-2 small: 49 of them, the tied head's
 * [50257, 768] included) for no reader. */
static void drop_orphaned_transposes(ot_graph *g, int n_orig_nodes) {
    for (int i = 0; i < n_orig_nodes; i++) {
        const ot_node *n = &g->nodes[i];
        if (n->removed || n->op != OT_OP_TRANSPOSE || n->phase != OT_PHASE_FORWARD || n->n_outputs != 1) continue;
        int w = n->n_inputs == 1 ? n->inputs[0] : -1, y = n->outputs[0];
        if (w < 0 || y < 0 || !is_init(g, w) || g->values[y].n_consumers > 0 || g->values[y].is_graph_output) continue;
        bool is_out = false;
        for (int k = 0; k < g->n_outputs && !is_out; k++) is_out = g->outputs[k] == y;
        if (!is_out) ot_graph_remove_node(g, i);
    }
}

ot_status ot_autocast_apply(ot_graph *g, ot_dtype low, ot_autocast_supports_fn supports, void *ctx,
                            ot_autocast_result *res, ot_error *err) {
    memset(res, 0, sizeof *res);
    res->low = low;
    if (low == OT_F32) return OT_OK;
    if (low != OT_BF16 && low != OT_F16) return ot_fail(err, OT_E_INTERNAL, "autocast: low dtype %d", (int)low);
    pass p = {.g = g, .low = low, .supports = supports, .ctx = ctx, .n_orig_values = g->n_values, .res = res, .err = err};
    int n_order = 0, n_orig_nodes = g->n_nodes;
    int *order = topo_order(g, &n_order);
    p.cast_low = malloc(sizeof(int) * (size_t)(g->n_values + 1));
    p.cast_f32 = malloc(sizeof(int) * (size_t)(g->n_values + 1));
    unsigned char *cls = calloc((size_t)n_orig_nodes + 1, 1);
    ot_status st = OT_OK;
    if (!order || !p.cast_low || !p.cast_f32 || !cls) goto oom;
    for (int v = 0; v < g->n_values; v++) p.cast_low[v] = p.cast_f32[v] = -1;
    for (int i = 0; i < n_order; i++) {
        int c = decide(&p, order[i]);
        if (c < 0) goto oom;
        cls[order[i]] = (unsigned char)c;
        res->n_low += c == OT_AC_LOW;
        res->n_f32_list += c == OT_AC_F32_LIST;
        res->n_fallback += c == OT_AC_FALLBACK;
        res->n_promoted += c == OT_AC_PROMOTED;
        res->n_low_list_fallback += c == OT_AC_FALLBACK && ot_autocast_op_list(g->nodes[order[i]].op) > 0;
    }
    drop_orphaned_transposes(g, n_orig_nodes);
    res->n_nodes = g->n_nodes;
    res->cls = calloc((size_t)g->n_nodes + 1, 1);
    if (!res->cls) goto oom;
    memcpy(res->cls, cls, (size_t)n_orig_nodes);
    for (int i = n_orig_nodes; i < g->n_nodes; i++) res->cls[i] = OT_AC_CAST;
    goto done;
oom:
    st = ot_fail(err, OT_E_MEMORY, "--precision: out of memory rewriting the graph");
done:
    free(order);
    free(p.cast_low);
    free(p.cast_f32);
    free(cls);
    return st;
}

void ot_autocast_result_free(ot_autocast_result *r) {
    if (!r) return;
    free(r->cls);
    memset(r, 0, sizeof *r);
}

/* Makes cast node c again (a recompute clone) for its backward readers; 1 when it did, 0 when nothing
 * reads it there, -1 when out of memory. */
static int recast(ot_graph *g, int c) {
    int src = g->nodes[c].inputs[0], y = g->nodes[c].outputs[0], copy = -1;
    for (int k = 0; k < g->values[y].n_consumers; k++) {
        int r = g->values[y].consumers[k];
        if (g->nodes[r].removed || g->nodes[r].phase != OT_PHASE_BACKWARD) continue;
        if (copy < 0) {
            char nm[512];
            snprintf(nm, sizeof nm, "%.480s" OT_AUTOCAST_AGAIN, g->values[y].name);
            ot_shape s = g->values[y].shape;
            copy = ot_graph_add_value_unique(g, nm, g->values[y].dtype, &s, OT_VK_ACTIVATION);
            if (copy < 0) return -1;
            /* a recompute clone: the schedule places it just before its first reader */
            int node = ot_graph_add_node(g, OT_OP_CAST, nm, &src, 1, &copy, 1, OT_PHASE_RECOMPUTE);
            if (node < 0 || ot_node_set_attr_int(&g->nodes[node], "to", g->values[y].dtype)) return -1;
            g->nodes[node].orig_node = c;
        }
        for (int i = 0; i < g->nodes[r].n_inputs; i++)
            if (g->nodes[r].inputs[i] == y) {
                ot_graph_set_input(g, r, i, copy);
                k = -1; /* the consumer list changed: start over */
                break;
            }
    }
    return copy >= 0;
}

int ot_autocast_recast_backward(ot_graph *g, const ot_autocast_result *r) {
    int n = 0, n_nodes = r->n_nodes < g->n_nodes ? r->n_nodes : g->n_nodes;
    for (int c = 0; r->cls && c < n_nodes; c++) {
        const ot_node *n0 = &g->nodes[c];
        if (r->cls[c] != OT_AC_CAST || n0->removed || n0->op != OT_OP_CAST) continue;
        int src = n0->inputs[0], y = n0->outputs[0];
        /* a graph output (the logits the loss reads) is held for the whole step anyway */
        bool is_out = g->values[y].is_graph_output;
        for (int k = 0; k < g->n_outputs && !is_out; k++) is_out = g->outputs[k] == y;
        if (is_out) continue;
        bool exact_up = g->values[src].dtype == r->low && g->values[n0->outputs[0]].dtype == OT_F32;
        if (!exact_up && !is_init(g, src)) continue;
        int k = recast(g, c);
        if (k < 0) return -1;
        n += k;
    }
    return n;
}

static bool node_supported(const ot_graph *g, int node, ot_dtype as, ot_autocast_supports_fn supports, void *ctx) {
    const ot_node *n = &g->nodes[node];
    ot_tensor *t = calloc((size_t)(n->n_inputs + n->n_outputs) + 1, sizeof *t);
    if (!t) return false;
    ot_tensor *in = t, *out = t + n->n_inputs;
    for (int i = 0; i < n->n_inputs + n->n_outputs; i++) {
        int v = i < n->n_inputs ? n->inputs[i] : n->outputs[i - n->n_inputs];
        if (v < 0) continue;
        t[i] = (ot_tensor){.dtype = g->values[v].dtype, .shape = g->values[v].shape};
        if (as != OT_UNDEFINED && (t[i].dtype == OT_BF16 || t[i].dtype == OT_F16)) t[i].dtype = as;
    }
    bool ok = supports(ctx, n, in, out);
    free(t);
    return ok;
}

/* A backward Cast of v to `to`, writing a new value; -1 when out of memory. */
static int phase_cast(ot_graph *g, int v, ot_dtype to, const char *suffix, ot_phase phase) {
    char nm[512];
    snprintf(nm, sizeof nm, "%.480s%s", g->values[v].name, suffix);
    ot_shape s = g->values[v].shape;
    int c = ot_graph_add_value_unique(g, nm, to, &s, phase == OT_PHASE_BACKWARD ? OT_VK_GRADIENT : OT_VK_ACTIVATION);
    if (c < 0) return -1;
    int node = ot_graph_add_node(g, OT_OP_CAST, g->values[c].name, &v, 1, &c, 1, phase);
    return node < 0 || ot_node_set_attr_int(&g->nodes[node], "to", to) ? -1 : c;
}

static int wrap_f32(ot_graph *g, int node, ot_dtype low) {
    ot_phase phase = g->nodes[node].phase;
    for (int i = 0; i < g->nodes[node].n_inputs; i++) {
        int v = g->nodes[node].inputs[i];
        if (v < 0 || g->values[v].dtype != low) continue;
        int c = phase_cast(g, v, OT_F32, ".f32", phase);
        if (c < 0) return -1;
        ot_graph_set_input(g, node, i, c);
    }
    for (int i = 0; i < g->nodes[node].n_outputs; i++) {
        int y = g->nodes[node].outputs[i];
        if (y < 0 || g->values[y].dtype != low) continue;
        char nm[512];
        snprintf(nm, sizeof nm, "%.480s.f32", g->values[y].name);
        ot_shape s = g->values[y].shape;
        /* a state written in place (BatchNorm's running statistics) stays the state,
         * written by the cast; the float32 result is a plain activation */
        ot_value_kind kind = g->values[y].kind == OT_VK_STATE ? OT_VK_ACTIVATION : g->values[y].kind;
        int y32 = ot_graph_add_value_unique(g, nm, OT_F32, &s, kind);
        if (y32 < 0) return -1;
        g->nodes[node].outputs[i] = y32; /* y keeps its id and readers, written by the cast */
        g->values[y32].producer = node;
        int c = ot_graph_add_node(g, OT_OP_CAST, g->values[y].name, &y32, 1, &y, 1, phase);
        if (c < 0 || ot_node_set_attr_int(&g->nodes[c], "to", low)) return -1;
    }
    return 0;
}

int ot_autocast_legalize_backward(ot_graph *g, ot_dtype low, int first_node, ot_autocast_supports_fn supports,
                                  void *ctx) {
    return ot_autocast_legalize(g, low, first_node, OT_PHASE_BACKWARD, supports, ctx);
}

int ot_autocast_legalize(ot_graph *g, ot_dtype low, int first_node, ot_phase phase, ot_autocast_supports_fn supports,
                         void *ctx) {
    if (low != OT_BF16 && low != OT_F16) return 0;
    int n = 0, n_nodes = g->n_nodes;
    for (int i = first_node < 0 ? 0 : first_node; i < n_nodes; i++) {
        const ot_node *nd = &g->nodes[i];
        if (nd->removed || nd->phase != phase || nd->op == OT_OP_CAST) continue;
        bool has_low = false;
        for (int k = 0; k < nd->n_inputs + nd->n_outputs && !has_low; k++) {
            int v = k < nd->n_inputs ? nd->inputs[k] : nd->outputs[k - nd->n_inputs];
            has_low = v >= 0 && g->values[v].dtype == low;
        }
        if (!has_low || node_supported(g, i, OT_UNDEFINED, supports, ctx) ||
            !node_supported(g, i, OT_F32, supports, ctx))
            continue;
        if (wrap_f32(g, i, low)) return -1;
        n++;
    }
    return n;
}
