/* lowp_model.c — models exported in float16 or bfloat16 (`model.half()`,
 * `.to(torch.bfloat16)` before export) train as they are (issue 27 part 2), as a
 * rewrite of the session's bound copy of the graph before the loss and the backward
 * pass are built:
 *
 *  - each float16/bfloat16 param becomes a float32 master weight (same value id and
 *    name, so --freeze, --train, checkpoints and the C API see it under its own name)
 *    read through a Cast to the model's dtype, so the graph computes in the model's
 *    dtype where the backend has kernels; the optimizer and its state are float32 and
 *    the gradient arrives in float32 through the Cast's gradient;
 *  - a forward node the backend cannot run in the low dtype runs in float32 with casts
 *    (ot_autocast_legalize, the pass --precision uses for the backward pass);
 *  - a low graph output is cast up to float32, so the loss reads float32;
 *  - a bfloat16 model input fed float32 data reads it through a Cast (round to nearest
 *    even, the bits numpy users get from torch's .to(torch.bfloat16)), said once.
 *
 * The imported graph keeps its dtypes: weights that leave the session for the model
 * (ot_session_give_back, the streamed save below) are rounded back to them. */
#include <stdlib.h>
#include <string.h>

#include "train/lowp_model.h"

#include "kernels/half_float.h"
#include "train/train_internal.h"

static bool is_low(ot_dtype d) { return d == OT_F16 || d == OT_BF16; }

/* Points every reader of v (but node `except`) at c. */
static int retarget(ot_graph *g, int v, int c, int except) {
    int n = g->values[v].n_consumers;
    int *readers = malloc(sizeof(int) * (size_t)(n + 1));
    if (!readers) return -1;
    if (n > 0) memcpy(readers, g->values[v].consumers, sizeof(int) * (size_t)n); /* none: NULL consumers */
    for (int k = 0; k < n; k++) {
        int r = readers[k];
        if (r == except || g->nodes[r].removed) continue;
        for (int i = 0; i < g->nodes[r].n_inputs; i++)
            if (g->nodes[r].inputs[i] == v) ot_graph_set_input(g, r, i, c);
    }
    free(readers);
    return 0;
}

/* v (float32 now) read through a forward Cast to `to`; every other reader of v reads
 * the cast. */
static int read_through_cast(ot_graph *g, int v, ot_dtype to) {
    char nm[512];
    snprintf(nm, sizeof nm, "%.480s.%s", g->values[v].name ? g->values[v].name : "v", to == OT_BF16 ? "bf16" : "fp16");
    ot_shape s = g->values[v].shape;
    int c = ot_graph_add_value_unique(g, nm, to, &s, OT_VK_ACTIVATION);
    if (c < 0) return -1;
    int node = ot_graph_add_node(g, OT_OP_CAST, g->values[c].name, &v, 1, &c, 1, OT_PHASE_FORWARD);
    if (node < 0 || ot_node_set_attr_int(&g->nodes[node], "to", to)) return -1;
    return retarget(g, v, c, node);
}

/* A param's low data as a float32 buffer (the master weight). */
static int widen_param(ot_value *v) {
    int64_t n = ot_shape_numel(&v->shape);
    if (!v->data) { /* a plan-only session borrows no weights */
        v->nbytes = sizeof(float) * (size_t)(n > 0 ? n : 0);
        return 0;
    }
    float *w = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!w) return -1;
    const uint16_t *h = v->data;
    for (int64_t i = 0; i < n; i++) w[i] = v->dtype == OT_F16 ? ot_hf_f16_to_f32(h[i]) : ot_hf_bf16_to_f32(h[i]);
    free(v->data);
    v->data = w;
    v->nbytes = sizeof(float) * (size_t)n;
    return 0;
}

/* BatchNorm's running statistics are state, never trained (autodiff.c marks them so
 * later; here first, so they do not become master weights): held in float32 like the
 * masters, with BatchNorm's outputs that update them, and rounded back to the model's
 * dtype when written, as the masters are. */
static int batchnorm_state_f32(ot_graph *g) {
    for (int id = 0; id < g->n_nodes; id++) {
        const ot_node *n = &g->nodes[id];
        if (n->removed || n->op != OT_OP_BATCH_NORM) continue;
        for (int i = 3; i < 5 && i < n->n_inputs; i++) {
            ot_value *v = n->inputs[i] >= 0 ? &g->values[n->inputs[i]] : NULL;
            if (!v || (v->kind != OT_VK_PARAM && v->kind != OT_VK_STATE) || !is_low(v->dtype)) continue;
            v->kind = OT_VK_STATE;
            if (widen_param(v)) return -1;
            v->dtype = OT_F32;
        }
        for (int j = 1; j < 3 && j < n->n_outputs; j++)
            if (n->outputs[j] >= 0 && is_low(g->values[n->outputs[j]].dtype)) g->values[n->outputs[j]].dtype = OT_F32;
    }
    return 0;
}

/* A low graph output keeps its id, now float32, written by a Cast of a new low value. */
static int widen_output(ot_graph *g, int y) {
    ot_dtype low = g->values[y].dtype;
    int p = g->values[y].producer;
    if (p < 0) return 0;
    char nm[512];
    snprintf(nm, sizeof nm, "%.480s.%s", g->values[y].name, low == OT_BF16 ? "bf16" : "fp16");
    ot_shape s = g->values[y].shape;
    int yl = ot_graph_add_value_unique(g, nm, low, &s, OT_VK_ACTIVATION);
    if (yl < 0) return -1;
    for (int i = 0; i < g->nodes[p].n_outputs; i++)
        if (g->nodes[p].outputs[i] == y) g->nodes[p].outputs[i] = yl;
    g->values[yl].producer = p;
    if (retarget(g, y, yl, -1)) return -1; /* other readers inside the model read the low value */
    g->values[y].dtype = OT_F32;
    int c = ot_graph_add_node(g, OT_OP_CAST, g->values[y].name, &yl, 1, &y, 1, OT_PHASE_FORWARD);
    return c < 0 || ot_node_set_attr_int(&g->nodes[c], "to", OT_F32) ? -1 : 0;
}

/* The data array that feeds graph input v, NULL when none. */
static const ot_data_array *array_of(const ot_dataset *d, int v) {
    for (int i = 0; d && i < d->n_arrays; i++)
        if (d->arrays[i].value_id == v) return &d->arrays[i];
    return NULL;
}

ot_dtype ot_lowp_model_dtype(const ot_graph *g) {
    for (int v = 0; v < g->n_values; v++)
        if ((g->values[v].kind == OT_VK_PARAM || g->values[v].kind == OT_VK_STATE) && is_low(g->values[v].dtype))
            return g->values[v].dtype;
    return OT_F32;
}

int ot_lowp_legalize_infer(ot_graph *g, ot_autocast_supports_fn supports, void *ctx) {
    ot_dtype low = ot_lowp_model_dtype(g);
    if (low == OT_F32) return 0;
    int a = ot_autocast_legalize(g, low, 0, OT_PHASE_FORWARD, supports, ctx);
    int b = a < 0 ? -1 : ot_autocast_legalize(g, low, 0, OT_PHASE_LOSS, supports, ctx);
    return a < 0 || b < 0 ? -1 : a + b;
}

ot_status ot_train_lowp_model(ot_train_session *s, const ot_dataset *data, ot_autocast_supports_fn supports,
                              void *ctx, ot_error *err) {
    ot_graph *g = s->g;
    s->lowp = OT_F32;
    for (int v = 0; v < g->n_values; v++) {
        const ot_value *x = &g->values[v];
        if (x->kind != OT_VK_PARAM || !is_low(x->dtype)) continue;
        if (s->lowp != OT_F32 && s->lowp != x->dtype)
            return ot_fail(err, OT_E_UNSUPPORTED,
                           "model params are both float16 ('%s' and others) and bfloat16: a model in one low dtype "
                           "trains as it is; export it in one", x->name);
        s->lowp = x->dtype;
    }
    if (s->lowp == OT_F32) return OT_OK;
    const char *dt = s->lowp == OT_BF16 ? "bf16" : "fp16";
    if (s->o.precision != OT_PRECISION_FP32 && ot_precision_dtype(s->o.precision) != s->lowp)
        return ot_fail(err, OT_E_USAGE,
                       "--precision %s: the model is exported in %s and trains in its own dtype (float32 master "
                       "weights); drop --precision, or export the model in float32",
                       ot_precision_name(s->o.precision), ot_dtype_name(s->lowp));
    if (batchnorm_state_f32(g)) goto oom;
    int n_values = g->n_values, n_params = 0;
    for (int v = 0; v < n_values; v++) {
        ot_value *x = &g->values[v];
        if (x->kind != OT_VK_PARAM || x->dtype != s->lowp) continue;
        if (widen_param(x)) goto oom;
        ot_dtype low = x->dtype;
        x->dtype = OT_F32;
        if (read_through_cast(g, v, low)) goto oom;
        n_params++;
    }
    for (int i = 0; i < s->n_model_inputs && i < g->n_inputs; i++) {
        int v = g->inputs[i];
        const ot_data_array *a = array_of(data, v);
        if (!a || g->values[v].dtype != OT_BF16 || a->t->dtype != OT_F32) continue;
        g->values[v].dtype = OT_F32;
        if (read_through_cast(g, v, OT_BF16)) goto oom;
        snprintf(s->lowp_note, sizeof s->lowp_note,
                 "note: %s: float32 data for bfloat16 input '%s': rounded to bfloat16 (nearest even) as it is read",
                 a->path, g->values[v].name);
    }
    for (int k = 0; k < g->n_outputs; k++)
        if (is_low(g->values[g->outputs[k]].dtype) && widen_output(g, g->outputs[k])) goto oom;
    int n_f32 = ot_autocast_legalize(g, s->lowp, 0, OT_PHASE_FORWARD, supports, ctx);
    if (n_f32 < 0) goto oom;
    size_t len = strlen(s->lowp_note);
    snprintf(s->lowp_note + len, sizeof s->lowp_note - len,
             "%s%s model: %d params trained as float32 master weights, written back in %s; %d nodes run in float32 "
             "here (no %s kernel)", len ? "\n" : "", dt, n_params, dt, n_f32, dt);
    return OT_OK;
oom:
    return ot_fail(err, OT_E_MEMORY, "out of memory preparing the %s model's float32 master weights", dt);
}

/* The model's dtype for value v when the session holds it as a float32 master. */
ot_dtype ot_train_lowp_dtype(const ot_train_session *s, int v) {
    const ot_graph *m = s->m->graph;
    if (s->lowp == OT_F32 || v < 0 || v >= m->n_values || v >= s->g->n_values) return OT_F32;
    ot_dtype d = m->values[v].dtype;
    return is_low(d) && s->g->values[v].dtype == OT_F32 ? d : OT_F32;
}

void ot_lowp_narrow(ot_dtype to, const float *src, void *dst, size_t n) {
    uint16_t *h = dst;
    for (size_t i = 0; i < n; i++) h[i] = to == OT_F16 ? ot_hf_f32_to_f16(src[i]) : ot_hf_f32_to_bf16(src[i]);
}

/* The streamed save's read of a master weight: bytes [offset, offset + n) of the
 * model's low tensor, rounded from the float32 master in the arena. */
ot_status ot_train_lowp_read(ot_train_session *s, int v, uint64_t offset, void *dst, size_t n, ot_error *err) {
    ot_dtype to = ot_train_lowp_dtype(s, v);
    if (offset % 2 || n % 2)
        return ot_fail(err, OT_E_INTERNAL, "'%s': an odd byte range of a 2-byte tensor", vname(s->g, v));
    size_t count = n / 2;
    float *buf = malloc(sizeof(float) * (count ? count : 1));
    if (!buf) return ot_fail(err, OT_E_MEMORY, "out of memory writing '%s'", vname(s->g, v));
    ot_status st = ot_train_arena_read(s, v, offset * 2, buf, count * sizeof(float), err);
    if (!st) ot_lowp_narrow(to, buf, dst, count);
    free(buf);
    return st;
}
