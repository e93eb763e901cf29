/* train_synthetic.c — seeded random data shaped like a session's inputs (see
 * train_synthetic.h). Reads the session's bound graph (train_internal.h): which graph
 * inputs are the model's, which one is the loss's labels, and the class count. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exec/rng.h"
#include "train/kv_cache.h"
#include "train/train_internal.h"
#include "train/train_synthetic.h"

/* ctr[3] of every synthetic draw: Dropout keys its draws by a node id, and no graph
 * has this many nodes, so data and masks never share a stream. */
#define SYNTH_STREAM 0xFFFFFFFFu
/* How far the range search follows an integer value through value-preserving ops. */
#define SYNTH_DEPTH 8

static void draw(uint64_t seed, uint32_t array, uint64_t i, uint32_t out[4]) {
    uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), array, SYNTH_STREAM};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    ot_philox4x32_10(ctr, key, out);
}

/* N(0, 1) by Box-Muller from two 24-bit uniforms (u1 in (0, 1], so the log is finite). */
static double normal(const uint32_t r[4]) {
    double u1 = ((double)(r[0] >> 8) + 1.0) * 0x1p-24, u2 = (double)(r[1] >> 8) * 0x1p-24;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static bool passes_values(ot_op op) {
    return op == OT_OP_CAST || op == OT_OP_RESHAPE || op == OT_OP_FLATTEN || op == OT_OP_SQUEEZE ||
           op == OT_OP_UNSQUEEZE || op == OT_OP_IDENTITY;
}

/* The smallest exclusive bound an op puts on the integers of value v (0: none found),
 * with what set it in why. */
static int64_t int_bound(const ot_graph *g, int v, int depth, char *why, size_t n) {
    int64_t best = 0;
    const ot_value *x = &g->values[v];
    for (int c = 0; c < x->n_consumers; c++) {
        const ot_node *nd = &g->nodes[x->consumers[c]];
        if (nd->removed || (nd->n_inputs < 2 && !passes_values(nd->op))) continue;
        int64_t b = 0;
        char here[256] = "";
        if (nd->op == OT_OP_GATHER && nd->inputs[1] == v && nd->inputs[0] >= 0) {
            const ot_shape *t = &g->values[nd->inputs[0]].shape;
            int64_t axis = ot_node_attr_int(nd, "axis", 0);
            if (axis < 0) axis += t->rank;
            if (axis >= 0 && axis < t->rank && t->dim[axis] > 0) {
                b = t->dim[axis];
                snprintf(here, sizeof here, "rows of '%s', the table Gather '%s' reads", g->values[nd->inputs[0]].name,
                         nd->name ? nd->name : "?");
            }
        } else if ((nd->op == OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS || nd->op == OT_OP_NLL_LOSS) && nd->inputs[1] == v &&
                   nd->inputs[0] >= 0) {
            const ot_shape *t = &g->values[nd->inputs[0]].shape;
            if (t->rank >= 2 && t->dim[1] > 0) {
                b = t->dim[1];
                snprintf(here, sizeof here, "classes of %s '%s'", ot_op_name(nd->op), nd->name ? nd->name : "?");
            }
        } else if (passes_values(nd->op) && nd->inputs[0] == v && nd->n_outputs > 0 && nd->outputs[0] >= 0 &&
                   depth > 0) {
            b = int_bound(g, nd->outputs[0], depth - 1, here, sizeof here);
        }
        if (b > 0 && (best == 0 || b < best)) {
            best = b;
            snprintf(why, n, "%s", here);
        }
    }
    return best;
}

/* Fills t (numel elements of its dtype) with uniform integers in [0, range) or, for
 * floats, N(0, 1). */
static void fill(ot_tensor *t, uint64_t seed, uint32_t array, int64_t range) {
    int64_t n = ot_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++) {
        uint32_t r[4];
        draw(seed, array, (uint64_t)i, r);
        uint64_t k = range > 0 ? ((((uint64_t)r[2] << 32) | r[3]) % (uint64_t)range) : 0;
        switch (t->dtype) {
        case OT_F32: ((float *)t->data)[i] = (float)normal(r); break;
        case OT_F64: ((double *)t->data)[i] = normal(r); break;
        case OT_I64: ((int64_t *)t->data)[i] = (int64_t)k; break;
        case OT_I32: ((int32_t *)t->data)[i] = (int32_t)k; break;
        case OT_I8: ((int8_t *)t->data)[i] = (int8_t)k; break;
        case OT_U8: ((uint8_t *)t->data)[i] = (uint8_t)k; break;
        case OT_BOOL: ((uint8_t *)t->data)[i] = (uint8_t)(k & 1); break;
        default: break;
        }
    }
}

/* The largest count of distinct non-negative values an integer dtype holds. */
static int64_t dtype_span(ot_dtype d) {
    return d == OT_I8 ? 128 : d == OT_U8 ? 256 : d == OT_I32 ? INT32_MAX : d == OT_BOOL ? 2 : INT64_MAX;
}

/* One array for graph input v: [n_samples, its per-sample dims], its range and how
 * it was chosen in the array's path. */
static ot_status add_array(ot_train_session *s, int v, bool labels, uint64_t seed, int64_t n_samples, ot_dataset *out,
                           ot_error *err) {
    const ot_graph *g = s->g;
    const ot_value *x = &g->values[v];
    ot_dtype d = x->dtype;
    if (!labels && ot_kv_role_of(g, s->n_model_inputs, v) != OT_KV_NONE) { /* HF's defaults, as without data */
        char kv_how[96];
        ot_tensor *t = ot_kv_default(g, s->n_model_inputs, v, n_samples, kv_how, sizeof kv_how, err);
        if (!t) return err ? err->code : OT_E_USAGE;
        return ot_dataset_add(out, x->name, kv_how, -1, t, err);
    }
    bool is_int = d == OT_I64 || d == OT_I32 || d == OT_I8 || d == OT_U8 || d == OT_BOOL;
    if (!is_int && d != OT_F32 && d != OT_F64)
        return ot_fail(err, OT_E_UNSUPPORTED,
                       "input '%s' is %s: no synthetic data of that dtype; pass --input %s=FILE.npy", x->name,
                       ot_dtype_name(d), x->name);
    ot_shape sh = x->shape;
    if (sh.rank < 1 || !ot_shape_is_static(&sh))
        return ot_fail(err, OT_E_SHAPE, "input '%s': its shape is not bound; give --bind NAME=SIZE for its dims",
                       x->name);
    sh.dim[0] = n_samples;
    sh.sym[0] = -1;
    char how[512], why[256] = "";
    int64_t range = 0;
    if (!is_int) {
        snprintf(how, sizeof how, "synthetic %s N(0,1)", ot_dtype_name(d));
    } else if (labels && s->o.loss.kind == OT_LOSS_CROSS_ENTROPY && s->n_classes > 0) {
        range = s->n_classes;
        snprintf(how, sizeof how, "synthetic class labels in [0, %lld): the classes of output '%s'", (long long)range,
                 vname(g, s->out_value));
    } else if ((range = int_bound(g, v, SYNTH_DEPTH, why, sizeof why)) > 0) {
        if (range > dtype_span(d)) range = dtype_span(d);
        snprintf(how, sizeof how, "synthetic %s ids in [0, %lld): %s", ot_dtype_name(d), (long long)range, why);
    } else {
        range = 2;
        snprintf(how, sizeof how, "synthetic %s in [0, 2): no Gather or loss bounds it", ot_dtype_name(d));
    }
    ot_tensor *t = ot_tensor_new(d, &sh);
    if (!t) return ot_fail(err, OT_E_MEMORY, "out of memory for synthetic data for '%s'", x->name);
    fill(t, seed, (uint32_t)out->n_arrays, range);
    return ot_dataset_add(out, labels ? OT_DATA_LABELS : x->name, how, -1, t, err);
}

ot_status ot_train_synthetic_data(ot_train_session *s, uint64_t seed, int64_t n_samples, ot_dataset *out,
                                  ot_error *err) {
    if (n_samples < 1) return ot_fail(err, OT_E_USAGE, "synthetic data needs at least one sample");
    ot_status st;
    for (int k = 0; k < s->n_model_inputs; k++)
        if ((st = add_array(s, s->g->inputs[k], false, seed, n_samples, out, err))) goto fail;
    if (s->label_value >= 0 && (st = add_array(s, s->label_value, true, seed, n_samples, out, err))) goto fail;
    return OT_OK;
fail:
    ot_dataset_free(out);
    return st;
}
