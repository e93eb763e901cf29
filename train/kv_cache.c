/* kv_cache.c — cache inputs of decoders exported with a KV cache, their defaults, and
 * the symbols a graph derives from others (see kv_cache.h). */
#include <stdio.h>
#include <string.h>

#include "importer/importer.h"
#include "train/kv_cache.h"

static const char *vname(const ot_graph *g, int v) { return g->values[v].name ? g->values[v].name : "?"; }

static bool prefix(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* A symbol naming a past length: past_sequence_length, past_seq_len, past_key_len... */
static bool past_sym(const ot_graph *g, int sym) { return sym >= 0 && sym < g->n_syms && strstr(g->syms[sym], "past"); }

static bool past_by_name(const char *n) {
    return prefix(n, "past_key_values.") || prefix(n, "past.") || prefix(n, "past_key") || prefix(n, "past_value");
}

int ot_kv_past_axis(const ot_graph *g, int v) {
    const ot_shape *s = &g->values[v].shape;
    /* by symbol, bound or not: a bound dim keeps its symbol (importer/shape.c) */
    for (int a = 1; a < s->rank; a++)
        if (past_sym(g, s->sym[a])) return a;
    if (s->rank == 4 && s->sym[2] >= 0 && past_by_name(vname(g, v))) return 2;
    return -1;
}

static bool is_past(const ot_graph *g, int v) {
    const ot_value *x = &g->values[v];
    if (x->dtype != OT_F32 && x->dtype != OT_F64 && x->dtype != OT_F16 && x->dtype != OT_BF16) return false;
    return past_by_name(vname(g, v)) || ot_kv_past_axis(g, v) >= 0;
}

ot_kv_role ot_kv_role_of(const ot_graph *g, int n_model_inputs, int v) {
    if (is_past(g, v)) return OT_KV_PAST;
    const char *n = vname(g, v);
    bool mask = !strcmp(n, "attention_mask"), pos = !strcmp(n, "position_ids");
    if (!mask && !pos) return OT_KV_NONE;
    for (int k = 0; k < n_model_inputs; k++)
        if (is_past(g, g->inputs[k])) return mask ? OT_KV_MASK : OT_KV_POSITIONS;
    return OT_KV_NONE;
}

static bool on_axis0(const ot_graph *g, int n_model_inputs, int sym) {
    for (int k = 0; k < n_model_inputs; k++) {
        const ot_shape *s = &g->values[g->inputs[k]].shape;
        if (s->rank > 0 && s->dim[0] < 0 && s->sym[0] == sym) return true;
    }
    return false;
}

static bool on_inputs(const ot_graph *g, int n_model_inputs, int sym) {
    for (int k = 0; k < n_model_inputs; k++) {
        const ot_shape *s = &g->values[g->inputs[k]].shape;
        for (int a = 0; a < s->rank; a++)
            if (s->dim[a] < 0 && s->sym[a] == sym) return true;
    }
    return false;
}

static bool is_model_input(const ot_graph *g, int n_model_inputs, int v) {
    for (int k = 0; k < n_model_inputs; k++)
        if (g->inputs[k] == v) return true;
    return false;
}

/* A value other than a model input whose dim named sym has a number: the graph
 * computed it. -1 when none. */
static int64_t inferred(const ot_graph *g, int n_model_inputs, int sym) {
    for (int v = 0; v < g->n_values; v++) {
        const ot_shape *s = &g->values[v].shape;
        if (is_model_input(g, n_model_inputs, v)) continue;
        for (int a = 0; a < s->rank; a++)
            if (s->sym[a] == sym && s->dim[a] >= 0) return s->dim[a];
    }
    return -1;
}

/* Whether sym is derived: with every other symbol of the inputs bound (axis-0 ones
 * to 1, the others to distinct sizes), some value declaring sym gets a number. The
 * trial runs on a copy; a trial that fails to infer says no. */
static bool derived_by_trial(const ot_graph *g, int n_model_inputs, int sym) {
    ot_graph *c = ot_graph_clone(g, false);
    if (!c) return false;
    for (int v = 0; v < g->n_values; v++) /* shape folding reads constants, never weights */
        if (g->values[v].data && g->values[v].kind == OT_VK_CONSTANT &&
            ot_value_set_data(&c->values[v], g->values[v].data, g->values[v].nbytes))
            goto no;
    int64_t size = 3;
    for (int s = 0; s < g->n_syms; s++) {
        if (s == sym || g->sym_values[s] >= 0 || !on_inputs(g, n_model_inputs, s)) continue;
        if (ot_graph_bind_dim(c, g->syms[s], on_axis0(g, n_model_inputs, s) ? 1 : size, NULL)) goto no;
        size += 2;
    }
    bool yes = inferred(c, n_model_inputs, sym) >= 0;
    ot_graph_free(c);
    return yes;
no:
    ot_graph_free(c);
    return false;
}

ot_status ot_kv_derived_syms(const ot_graph *g, int n_model_inputs, bool *derived, ot_error *err) {
    (void)err;
    for (int s = 0; s < g->n_syms; s++) {
        derived[s] = false;
        /* the batch is never derived; a model with one symbol has nothing to derive from */
        if (g->sym_values[s] >= 0 || !on_inputs(g, n_model_inputs, s) || on_axis0(g, n_model_inputs, s)) continue;
        derived[s] = derived_by_trial(g, n_model_inputs, s);
    }
    return OT_OK;
}

ot_status ot_kv_bind_derived(ot_graph *g, int n_model_inputs, const bool *derived, ot_error *err) {
    for (int s = 0; s < g->n_syms; s++) {
        if (!derived[s] || g->sym_values[s] >= 0) continue;
        int64_t n = inferred(g, n_model_inputs, s);
        ot_status st;
        if (n >= 0 && (st = ot_graph_bind_dim(g, g->syms[s], n, err))) return st;
    }
    return OT_OK;
}

/* The past length of the bound graph: the past axis of its first past input. */
static int64_t past_len(const ot_graph *g, int n_model_inputs) {
    for (int k = 0; k < n_model_inputs; k++) {
        int v = g->inputs[k];
        if (!is_past(g, v)) continue;
        int a = ot_kv_past_axis(g, v);
        const ot_shape *s = &g->values[v].shape;
        if (a < 0 && s->rank == 4) a = 2;
        return a >= 0 && a < s->rank ? s->dim[a] : -1;
    }
    return -1;
}

/* The sequence length of the bound graph: axis 1 of input_ids, else of the first other
 * integer input of rank 2 that has no cache role; -1 when none is bound. */
static int64_t seq_len(const ot_graph *g, int n_model_inputs) {
    int64_t first = -1;
    for (int k = 0; k < n_model_inputs; k++) {
        const ot_value *x = &g->values[g->inputs[k]];
        if (x->shape.rank != 2 || ot_dtype_is_float(x->dtype) || ot_kv_role_of(g, n_model_inputs, g->inputs[k]))
            continue;
        if (x->name && !strcmp(x->name, "input_ids")) return x->shape.dim[1];
        if (first < 0) first = x->shape.dim[1];
    }
    return first;
}

ot_status ot_kv_bind_mask(ot_graph *g, int n_model_inputs, const ot_dataset *d, ot_error *err) {
    for (int k = 0; k < n_model_inputs; k++) {
        int v = g->inputs[k];
        const ot_shape *s = &g->values[v].shape;
        if (ot_kv_role_of(g, n_model_inputs, v) != OT_KV_MASK || s->rank != 2 || s->dim[1] >= 0 || s->sym[1] < 0)
            continue;
        bool have = false;
        for (int i = 0; d && i < d->n_arrays; i++) have |= d->arrays[i].value_id == v;
        int64_t P = past_len(g, n_model_inputs), T = seq_len(g, n_model_inputs);
        if (have || T < 0) continue; /* data binds it; without a sequence length the error names the mask */
        ot_status st = ot_graph_bind_dim(g, g->syms[s->sym[1]], (P > 0 ? P : 0) + T, err);
        if (st) return st;
    }
    return OT_OK;
}

static void put_int(ot_tensor *t, int64_t i, int64_t x) {
    switch (t->dtype) {
    case OT_I64: ((int64_t *)t->data)[i] = x; break;
    case OT_I32: ((int32_t *)t->data)[i] = (int32_t)x; break;
    case OT_F32: ((float *)t->data)[i] = (float)x; break;
    case OT_F64: ((double *)t->data)[i] = (double)x; break;
    case OT_BOOL:
    case OT_U8: ((uint8_t *)t->data)[i] = (uint8_t)x; break;
    case OT_I8: ((int8_t *)t->data)[i] = (int8_t)x; break;
    default: break;
    }
}

ot_tensor *ot_kv_default(const ot_graph *g, int n_model_inputs, int v, int64_t n_samples, char *how, size_t n_how,
                         ot_error *err) {
    const ot_value *x = &g->values[v];
    ot_kv_role role = ot_kv_role_of(g, n_model_inputs, v);
    ot_shape sh = x->shape;
    if (role == OT_KV_NONE || sh.rank < 1 || !ot_shape_is_static(&sh)) {
        ot_fail(err, OT_E_USAGE, "input '%s' has no default: give --input %s=FILE.npy", vname(g, v), vname(g, v));
        return NULL;
    }
    sh.dim[0] = n_samples;
    sh.sym[0] = -1;
    int64_t P = past_len(g, n_model_inputs), per = sh.rank > 1 ? ot_shape_numel(&sh) / (n_samples ? n_samples : 1) : 1;
    if (role == OT_KV_PAST && P != 0) {
        ot_fail(err, OT_E_USAGE,
                "no data for cache input '%s' while the past has length %lld (another cache input or --bind sets "
                "it): give every past as data (--input %s=FILE.npy), or none for an empty past",
                vname(g, v), (long long)P, vname(g, v));
        return NULL;
    }
    if (role == OT_KV_POSITIONS && sh.rank != 2) {
        ot_fail(err, OT_E_USAGE, "input 'position_ids' is %dD, not [batch, sequence]: give --input position_ids=FILE.npy",
                sh.rank);
        return NULL;
    }
    ot_tensor *t = ot_tensor_new(x->dtype, &sh);
    if (!t) {
        ot_fail(err, OT_E_MEMORY, "out of memory for the default of '%s'", vname(g, v));
        return NULL;
    }
    int64_t n = ot_shape_numel(&sh);
    if (role == OT_KV_PAST)
        snprintf(how, n_how, "default: an empty past");
    else if (role == OT_KV_MASK) {
        for (int64_t i = 0; i < n; i++) put_int(t, i, 1);
        snprintf(how, n_how, "default: a mask of ones");
    } else {
        for (int64_t i = 0; i < n; i++) put_int(t, i, (P > 0 ? P : 0) + i % per);
        snprintf(how, n_how, "default: positions %lld..%lld", (long long)(P > 0 ? P : 0),
                 (long long)((P > 0 ? P : 0) + per - 1));
    }
    return t;
}

ot_status ot_kv_add_defaults(const ot_graph *g, int n_model_inputs, ot_dataset *d, char *note, size_t n_note,
                             ot_error *err) {
    char past[256] = "", other[256] = "";
    int n_past = 0;
    if (note && n_note) *note = 0;
    for (int k = 0; k < n_model_inputs; k++) {
        int v = g->inputs[k];
        ot_kv_role role = ot_kv_role_of(g, n_model_inputs, v);
        if (role == OT_KV_NONE) continue;
        bool have = false;
        for (int i = 0; i < d->n_arrays; i++) have |= d->arrays[i].value_id == v;
        if (have) continue;
        char how[96];
        ot_tensor *t = ot_kv_default(g, n_model_inputs, v, d->n_samples, how, sizeof how, err);
        if (!t) return err ? err->code : OT_E_USAGE;
        ot_status st = ot_dataset_add(d, vname(g, v), how, v, t, err);
        if (st) return st;
        if (role == OT_KV_PAST) {
            if (n_past++ == 0) snprintf(past, sizeof past, "%s", vname(g, v));
        } else {
            size_t l = strlen(other);
            snprintf(other + l, sizeof other - l, ", %s %s", vname(g, v),
                     role == OT_KV_MASK ? "of ones over past + sequence" : how + strlen("default: positions "));
        }
    }
    if (note && n_note && (n_past || *other))
        snprintf(note, n_note,
                 "note: KV-cache inputs without data take HF's defaults: %s%s%s%s%s (--input NAME=FILE.npy to give them)",
                 n_past ? "an empty past (" : "", n_past ? past : "", n_past > 1 ? " and the other cache inputs" : "",
                 n_past ? ")" : "", n_past ? other : other + 2);
    return OT_OK;
}
