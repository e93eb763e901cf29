/* load.c — ONNX ModelProto → IR graph: unpacks the model's skeleton (skeleton.c: the
 * proto without its initializers' payloads), turns graph inputs, initializers (their
 * bytes read from the file straight into the IR, or with skip_param_data the large
 * params' not at all), Constant nodes, nodes, value_info
 * and outputs into IR values and nodes, collects every unsupported op at once, then
 * normalises, verifies and shape-infers. The unpacked proto is kept in the model for
 * the exporter, without the initializer data the IR holds. */
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"
#include "size_limits.h"

/* ---- name → value id map (open addressing; models have 10^4+ values) ---------- */

typedef struct name_map {
    const char **keys; /* point into g->values[id].name, which never moves */
    int *ids;
    size_t cap;
} name_map;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int map_init(name_map *m, size_t expected) {
    m->cap = 64;
    while (m->cap < expected * 2 + 16) m->cap *= 2;
    m->keys = ot_xcalloc(m->cap, sizeof *m->keys);
    m->ids = ot_xcalloc(m->cap, sizeof *m->ids);
    return (m->keys && m->ids) ? 0 : -1;
}

static void map_free(name_map *m) {
    free(m->keys);
    free(m->ids);
}

static int map_get(const name_map *m, const char *key) {
    for (size_t i = hash_str(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return -1;
        if (!strcmp(m->keys[i], key)) return m->ids[i];
    }
}

/* The capacity was sized from the proto's name count, so the table never fills. */
static void map_put(name_map *m, const char *key, int id) {
    size_t i = hash_str(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key)) i = (i + 1) & (m->cap - 1);
    m->keys[i] = key;
    m->ids[i] = id;
}

/* ---- helpers ------------------------------------------------------------------- */

typedef struct load_ctx {
    const char *file; /* for messages */
    const char *dir;
    ot_graph *g;
    name_map names;
    Onnx__GraphProto *gp;
    ot_imp_src *src;             /* the model's bytes */
    const ot_imp_raw_ref *refs;  /* per initializer, its raw_data left out of gp; NULL: none was */
    bool skip_param_data;        /* ot_import_options.skip_param_data */
} load_ctx;

static bool is_default_domain(const char *d) { return !d || !d[0] || !strcmp(d, "ai.onnx"); }


/* ValueInfo → dtype and shape; symbolic dims become graph symbols. Non-tensor types
 * give OT_UNDEFINED. */
static ot_status type_from_value_info(load_ctx *c, const Onnx__ValueInfoProto *vi, ot_dtype *dt, ot_shape *shape,
                                      int32_t *raw_elem, ot_error *err) {
    *dt = OT_UNDEFINED;
    *shape = ot_shape_unknown();
    *raw_elem = -1;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return OT_OK;
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (tt->has_elem_type) {
        *raw_elem = tt->elem_type;
        if (ot_dtype_supported((ot_dtype)tt->elem_type)) *dt = (ot_dtype)tt->elem_type;
    }
    if (!tt->shape) return OT_OK;
    if (tt->shape->n_dim > OT_MAX_RANK)
        return ot_fail(err, OT_E_UNSUPPORTED, "%s: value '%s' has rank %zu, above the maximum of %d", c->file,
                       vi->name, tt->shape->n_dim, OT_MAX_RANK);
    *shape = ot_shape_make((int)tt->shape->n_dim, NULL);
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        shape->dim[i] = -1;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0) {
            shape->dim[i] = d->dim_value;
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
                   d->dim_param[0]) {
            int s = ot_graph_add_sym(c->g, d->dim_param);
            if (s < 0) return ot_fail(err, OT_E_MEMORY, "out of memory");
            shape->sym[i] = s;
        }
    }
    return OT_OK;
}

static int add_named_value(load_ctx *c, const char *name, ot_dtype dt, const ot_shape *shape, ot_value_kind kind) {
    int id = ot_graph_add_value(c->g, name, dt, shape, kind);
    if (id >= 0) map_put(&c->names, c->g->values[id].name, id);
    return id;
}

static ot_status set_doc(ot_value *v, const char *doc) {
    if (!doc || !doc[0]) return OT_OK;
    free(v->doc);
    v->doc = ot_strdup(doc);
    return v->doc ? OT_OK : OT_E_MEMORY;
}

/* ---- Constant nodes → constant values ------------------------------------------ */

static ot_status constant_value(load_ctx *c, const Onnx__NodeProto *np, const char *nname, ot_error *err) {
    ot_tensor *t = NULL;
    ot_status st = OT_OK;
    if (np->n_output != 1 || !np->output[0][0] || np->n_attribute != 1) {
        return ot_fail(err, OT_E_MODEL, "%s: Constant node '%s' must have one output and exactly one value attribute",
                       c->file, nname);
    }
    const Onnx__AttributeProto *ap = np->attribute[0];
    const char *an = ap->name ? ap->name : "";
    int64_t one = 1;
    ot_shape scalar = ot_shape_make(0, NULL);
    if (!strcmp(an, "value") && ap->t) {
        st = ot_tensor_from_proto(ap->t, c->dir, &t, err);
        if (st) return ot_error_prefix(err, "%s: Constant node '%s': ", c->file, nname);
    } else if (!strcmp(an, "value_float") || !strcmp(an, "value_int")) {
        bool f = an[6] == 'f';
        t = ot_tensor_new(f ? OT_F32 : OT_I64, &scalar);
        if (!t) return ot_fail(err, OT_E_MEMORY, "out of memory");
        if (f) memcpy(t->data, &ap->f, 4);
        else memcpy(t->data, &ap->i, 8);
    } else if (!strcmp(an, "value_floats") || !strcmp(an, "value_ints")) {
        bool f = an[6] == 'f';
        one = (int64_t)(f ? ap->n_floats : ap->n_ints);
        ot_shape s1 = ot_shape_make(1, &one);
        t = ot_tensor_new(f ? OT_F32 : OT_I64, &s1);
        if (!t) return ot_fail(err, OT_E_MEMORY, "out of memory");
        if (t->nbytes) memcpy(t->data, f ? (void *)ap->floats : (void *)ap->ints, t->nbytes);
    } else {
        return ot_fail(err, OT_E_UNSUPPORTED, "%s: Constant node '%s': attribute '%s' is not supported", c->file, nname,
                       an);
    }
    const char *out = np->output[0];
    if (map_get(&c->names, out) >= 0) {
        st = ot_fail(err, OT_E_MODEL, "%s: Constant node '%s' writes '%s', which is already defined", c->file, nname,
                     out);
        goto fail;
    }
    int id = add_named_value(c, out, t->dtype, &t->shape, OT_VK_CONSTANT);
    if (id < 0 || ot_value_set_data(&c->g->values[id], t->data, t->nbytes)) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory");
        goto fail;
    }
fail:
    ot_tensor_free(t);
    return st;
}

/* ---- graph construction -------------------------------------------------------- */

/* Once an initializer's bytes live in its IR value, the proto's copy is dead weight
 * (the exporter writes every initializer from the IR), so it is freed: a large model
 * is then held once, not twice. protobuf-c unpacked with the default allocator, whose
 * free is free(). External references are kept for the exporter's size check. */
static void drop_proto_data(Onnx__TensorProto *t) {
    if (t->has_raw_data) {
        free(t->raw_data.data);
        t->raw_data.data = NULL;
        t->raw_data.len = 0;
    }
    free(t->float_data);
    t->float_data = NULL;
    t->n_float_data = 0;
    free(t->int32_data);
    t->int32_data = NULL;
    t->n_int32_data = 0;
    free(t->int64_data);
    t->int64_data = NULL;
    t->n_int64_data = 0;
    free(t->double_data);
    t->double_data = NULL;
    t->n_double_data = 0;
}

/* Puts back the raw_data the skeleton left out of an initializer that stays in the proto
 * (a dtype onnxtrain lacks): the exporter writes those from the proto. */
static ot_status restore_raw(load_ctx *c, Onnx__TensorProto *tp, const ot_imp_raw_ref *ref, ot_error *err) {
    /* malloc, as protobuf-c's default allocator, which frees it with the proto */
    uint8_t *p = malloc(ref->len ? (size_t)ref->len : 1);
    if (!p) return ot_fail(err, OT_E_MEMORY, "%s: out of memory", c->file);
    ot_status st = ot_imp_src_read(c->src, ref->offset, p, (size_t)ref->len, err);
    if (st) {
        free(p);
        return st;
    }
    tp->has_raw_data = 1;
    tp->raw_data.data = p;
    tp->raw_data.len = (size_t)ref->len;
    return OT_OK;
}

static ot_status oom(const load_ctx *c, ot_error *err) { return ot_fail(err, OT_E_MEMORY, "%s: out of memory", c->file); }

static bool is_batchnorm(const Onnx__NodeProto *np) {
    return !strcmp(np->op_type ? np->op_type : "", "BatchNormalization") && is_default_domain(np->domain);
}

static void node_label(const Onnx__NodeProto *np, size_t i, char *buf, size_t n) {
    if (np->name && np->name[0]) snprintf(buf, n, "%s", np->name);
    else snprintf(buf, n, "%s_%zu", np->op_type ? np->op_type : "", i);
}

/* An initializer of a dtype onnxtrain lacks: listed with the unsupported ops (info
 * shows them all) and kept without data, so the exporter writes the original bytes. */
static ot_status add_unsupported_initializer(load_ctx *c, ot_model *m, Onnx__TensorProto *tp, size_t i,
                                             const ot_imp_raw_ref *ref, ot_error *err) {
    const char *tn = tp->name;
    char what[80];
    snprintf(what, sizeof what, "initializer dtype %s", ot_imp_onnx_dtype_name(tp->data_type));
    ot_status st = ot_imp_note_unsupported(m, what, tn, OT_UNSUP_INIT_DTYPE, err);
    if (st) return st;
    if (ref && ref->present && (st = restore_raw(c, tp, ref, err))) return st;
    int id = add_named_value(c, tn, OT_UNDEFINED, NULL, OT_VK_CONSTANT);
    if (id < 0) return oom(c, err);
    c->g->values[id].init_index = (int)i;
    return OT_OK;
}

/* One supported initializer: a param (floating point), BN running statistics (state)
 * or a constant. *done is false when its data must still be loaded. */
static ot_status add_param_shape_only(load_ctx *c, Onnx__TensorProto *tp, size_t i, const ot_imp_raw_ref *ref,
                                      ot_value_kind kind, bool *done, ot_error *err) {
    ot_shape shape;
    uint64_t nbytes = 0;
    *done = false;
    ot_status st = ot_imp_tensor_check(tp, c->dir, ref, &shape, &nbytes, err);
    if (st) return ot_error_prefix(err, "%s: initializer: ", c->file);
    if (nbytes <= OT_SKIP_PARAM_MIN_BYTES) return OT_OK;
    /* Planning needs the size, never the bytes: none are read or held. */
    int id = add_named_value(c, tp->name, (ot_dtype)tp->data_type, &shape, kind);
    if (id < 0 || set_doc(&c->g->values[id], tp->doc_string)) return oom(c, err);
    c->g->values[id].nbytes = (size_t)nbytes;
    c->g->values[id].init_index = (int)i;
    drop_proto_data(tp);
    *done = true;
    return OT_OK;
}

static ot_status add_initializer(load_ctx *c, ot_model *m, size_t i, char *const *bn_state, size_t n_bn_state,
                                 ot_error *err) {
    Onnx__TensorProto *tp = c->gp->initializer[i];
    const ot_imp_raw_ref *ref = c->refs ? &c->refs[i] : NULL;
    const char *tn = tp->name ? tp->name : "";
    if (!tn[0]) return ot_fail(err, OT_E_MODEL, "%s: initializer #%zu has no name", c->file, i);
    if (map_get(&c->names, tn) >= 0)
        return ot_fail(err, OT_E_MODEL, "%s: initializer '%s' is defined twice", c->file, tn);
    if (!tp->has_data_type || !ot_dtype_supported((ot_dtype)tp->data_type))
        return add_unsupported_initializer(c, m, tp, i, ref, err);
    ot_dtype dtype = (ot_dtype)tp->data_type;
    ot_value_kind kind = ot_dtype_is_float(dtype) ? OT_VK_PARAM : OT_VK_CONSTANT;
    for (size_t k = 0; k < n_bn_state; k++)
        if (!strcmp(bn_state[k], tn) && ot_dtype_is_float(dtype)) kind = OT_VK_STATE;
    if (c->skip_param_data && kind == OT_VK_PARAM) {
        bool done;
        ot_status st = add_param_shape_only(c, tp, i, ref, kind, &done, err);
        if (st || done) return st;
    }
    ot_tensor *t = NULL;
    ot_status st = ot_imp_tensor_from_proto(tp, c->dir, c->src, ref, &t, err);
    if (st) return ot_error_prefix(err, "%s: initializer: ", c->file);
    int id = add_named_value(c, tn, t->dtype, &t->shape, kind);
    if (id >= 0) {
        /* The value takes the tensor's buffer rather than a copy: weights can be GBs. */
        ot_value *v = &c->g->values[id];
        v->data = t->data;
        v->nbytes = t->nbytes;
        v->init_index = (int)i;
        t->data = NULL;
        drop_proto_data(tp);
    }
    ot_tensor_free(t);
    if (id < 0 || set_doc(&c->g->values[id], tp->doc_string)) return oom(c, err);
    return OT_OK;
}

/* Initializers: params (floating point), BN running statistics (state), constants. */
static ot_status add_initializers(load_ctx *c, ot_model *m, ot_error *err) {
    Onnx__GraphProto *gp = c->gp;
    size_t n_bn_state = 0;
    for (size_t i = 0; i < gp->n_node; i++)
        if (is_batchnorm(gp->node[i])) n_bn_state += 2;
    char **bn_state = ot_xcalloc(n_bn_state, sizeof(char *)); /* names read as BN running mean / var */
    if (!bn_state) return oom(c, err);
    n_bn_state = 0;
    for (size_t i = 0; i < gp->n_node; i++)
        if (is_batchnorm(gp->node[i]))
            for (size_t k = 3; k < 5 && k < gp->node[i]->n_input; k++) bn_state[n_bn_state++] = gp->node[i]->input[k];
    ot_status st = OT_OK;
    for (size_t i = 0; i < gp->n_initializer && !st; i++) st = add_initializer(c, m, i, bn_state, n_bn_state, err);
    free(bn_state);
    return st;
}

/* A graph input that an initializer of the same name gives a default: ONNX requires
 * the initializer to match the input's declared type. [7,7,7] declared over a [4,3]
 * initializer was trained as [4,3]. Read from the proto, so no symbol is added. */
static ot_status check_shadowed_input(load_ctx *c, const ot_value *init, const Onnx__ValueInfoProto *vi,
                                      ot_error *err) {
    const Onnx__TypeProto *tp = vi->type;
    if (init->dtype == OT_UNDEFINED) return OT_OK; /* an unsupported dtype, listed already */
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return OT_OK;
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    bool same = !tt->has_elem_type || tt->elem_type == (int32_t)init->dtype;
    /* declared dims as text, symbolic ones by name; a symbolic dim matches anything */
    char decl[200] = "[";
    if (tt->shape) {
        same = same && tt->shape->n_dim == (size_t)init->shape.rank;
        for (size_t d = 0; d < tt->shape->n_dim; d++) {
            const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
            bool known = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            if (known && same && (int)d < init->shape.rank) same = dim->dim_value == init->shape.dim[d];
            size_t used = strlen(decl);
            if (known) snprintf(decl + used, sizeof decl - used, "%s%lld", d ? "," : "", (long long)dim->dim_value);
            else snprintf(decl + used, sizeof decl - used, "%s%s", d ? "," : "", dim->dim_param ? dim->dim_param : "?");
        }
    }
    if (same) return OT_OK;
    size_t used = strlen(decl);
    snprintf(decl + used, sizeof decl - used, "%s", tt->shape ? "]" : "?]");
    char b[160];
    return ot_fail(err, OT_E_MODEL,
                   "%s: graph input '%s' is declared %s %s, but the initializer of the same name is %s %s; ONNX "
                   "requires an initializer to match the input it provides a default for",
                   c->file, init->name, tt->has_elem_type ? ot_imp_onnx_dtype_name(tt->elem_type) : "(any dtype)",
                   tt->shape ? decl : "(any shape)", ot_dtype_name(init->dtype),
                   ot_shape_str(c->g, &init->shape, b, sizeof b));
}

/* Graph inputs fed by data (inputs that are also initializers are initializers). */
static ot_status add_inputs(load_ctx *c, ot_model *m, ot_error *err) {
    Onnx__GraphProto *gp = c->gp;
    ot_graph *g = c->g;
    g->inputs = ot_xcalloc(gp->n_input, sizeof(int));
    if (!g->inputs) return oom(c, err);
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *vn = vi->name ? vi->name : "";
        if (map_get(&c->names, vn) >= 0) {
            int id = map_get(&c->names, vn);
            if (g->values[id].init_index >= 0) {
                ot_status st = check_shadowed_input(c, &g->values[id], vi, err);
                if (st) return st;
                continue;
            }
            return ot_fail(err, OT_E_MODEL, "%s: graph input '%s' is listed twice", c->file, vn);
        }
        ot_dtype dt;
        ot_shape shape;
        int32_t raw;
        ot_status st = type_from_value_info(c, vi, &dt, &shape, &raw, err);
        if (st) return st;
        if (dt == OT_UNDEFINED) {
            char what[80];
            if (raw >= 0) snprintf(what, sizeof what, "input dtype %s", ot_imp_onnx_dtype_name(raw));
            else snprintf(what, sizeof what, "input type (not a tensor)");
            if ((st = ot_imp_note_unsupported(m, what, vn, OT_UNSUP_INPUT_DTYPE, err))) return st;
        }
        int id = add_named_value(c, vn, dt, &shape, OT_VK_INPUT);
        if (id < 0 || set_doc(&g->values[id], vi->doc_string)) return oom(c, err);
        g->inputs[g->n_inputs++] = id;
    }
    return OT_OK;
}

/* Constant nodes become constant values, not nodes. */
static ot_status add_constants(load_ctx *c, ot_error *err) {
    for (size_t i = 0; i < c->gp->n_node; i++) {
        const Onnx__NodeProto *np = c->gp->node[i];
        if (strcmp(np->op_type ? np->op_type : "", "Constant") || !is_default_domain(np->domain)) continue;
        char synth[300];
        snprintf(synth, sizeof synth, "Constant_%zu", i);
        ot_status st = constant_value(c, np, (np->name && np->name[0]) ? np->name : synth, err);
        if (st) return st;
    }
    return OT_OK;
}

static bool is_constant_node(const Onnx__NodeProto *np) {
    return !strcmp(np->op_type ? np->op_type : "", "Constant") && is_default_domain(np->domain);
}

/* Every node's outputs first, so inputs can refer to values produced later in the
 * list (a cycle, or an unsorted graph) and verify can say which. */
static ot_status add_node_outputs(load_ctx *c, ot_error *err) {
    for (size_t i = 0; i < c->gp->n_node; i++) {
        const Onnx__NodeProto *np = c->gp->node[i];
        if (is_constant_node(np)) continue;
        char nname[300];
        node_label(np, i, nname, sizeof nname);
        for (size_t k = 0; k < np->n_output; k++) {
            const char *on = np->output[k];
            if (!on[0]) continue;
            int prev = map_get(&c->names, on);
            if (prev >= 0) {
                const ot_value *pv = &c->g->values[prev];
                return ot_fail(err, OT_E_MODEL, "%s: node '%s' (%s) writes '%s', which is already %s", c->file,
                               nname, np->op_type ? np->op_type : "", on,
                               pv->kind == OT_VK_INPUT        ? "a graph input"
                               : pv->init_index >= 0          ? "an initializer"
                               : pv->kind == OT_VK_CONSTANT ? "a Constant's output"
                                                              : "written by another node");
            }
            if (add_named_value(c, on, OT_UNDEFINED, NULL, OT_VK_ACTIVATION) < 0) return oom(c, err);
        }
    }
    return OT_OK;
}

/* NodeProto.metadata_props (field 9 since ONNX 1.16) is newer than the schema the
 * build compiles (libonnx-dev 1.12): protobuf-c keeps it among the unknown fields, each
 * one a StringStringEntryProto behind its varint length (protobuf-c keeps the prefix). */
enum { NODE_METADATA_PROPS_FIELD = 9 };

static Onnx__StringStringEntryProto *unknown_entry(const ProtobufCMessageUnknownField *u) {
    if (u->tag != NODE_METADATA_PROPS_FIELD || u->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) return NULL;
    uint64_t len = 0;
    size_t k = 0;
    for (unsigned shift = 0; k < u->len && k < 10; shift += 7) {
        uint8_t b = u->data[k++];
        len |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) break;
    }
    if (len != u->len - k) return NULL; /* malformed: the record is lost, as if absent */
    return onnx__string_string_entry_proto__unpack(NULL, (size_t)len, u->data + k);
}

/* The dynamo exporter's record of the traced call (ot_trace): its FX node's text,
 * "%out : [...] = call_function[target=...](args = (%x, %p_model_fc_weight, ...))",
 * names parameters as %p_ placeholders (%b_ buffers, %c_ lifted constants). Only the
 * arguments are read: the call's own name comes before " = ". */
static ot_trace node_trace(const Onnx__NodeProto *np) {
    ot_trace t = OT_TRACE_NONE;
    for (unsigned k = 0; k < np->base.n_unknown_fields && t == OT_TRACE_NONE; k++) {
        Onnx__StringStringEntryProto *p = unknown_entry(&np->base.unknown_fields[k]);
        if (!p) continue;
        if (p->key && p->value && strcmp(p->key, "pkg.torch.onnx.fx_node") == 0) {
            const char *args = strstr(p->value, " = ");
            t = strstr(args ? args : p->value, "%p_") ? OT_TRACE_PARAM : OT_TRACE_NO_PARAM;
            if (t == OT_TRACE_PARAM && strstr(p->value, "aten.group_norm")) t = OT_TRACE_GROUP_NORM;
        }
        onnx__string_string_entry_proto__free_unpacked(p, NULL);
    }
    return t;
}

/* One NodeProto as an IR node; ins / outs are scratch arrays of max arity. */
static ot_status add_node(load_ctx *c, ot_model *m, size_t i, int *ins, int *outs, ot_error *err) {
    const Onnx__NodeProto *np = c->gp->node[i];
    const char *op_type = np->op_type ? np->op_type : "";
    bool dflt = is_default_domain(np->domain);
    char nname[300];
    node_label(np, i, nname, sizeof nname);
    for (size_t k = 0; k < np->n_input; k++) {
        const char *in = np->input[k];
        ins[k] = in[0] ? map_get(&c->names, in) : -1;
        if (in[0] && ins[k] < 0)
            return ot_fail(err, OT_E_MODEL,
                           "%s: node '%s' (%s) reads '%s', which no node produces and is neither a graph input nor "
                           "an initializer",
                           c->file, nname, op_type, in);
    }
    for (size_t k = 0; k < np->n_output; k++) outs[k] = np->output[k][0] ? map_get(&c->names, np->output[k]) : -1;
    ot_op op = dflt ? ot_op_from_name(op_type, false) : OT_OP_UNKNOWN;
    int nid = ot_graph_add_node(c->g, op, nname, ins, (int)np->n_input, outs, (int)np->n_output, OT_PHASE_FORWARD);
    if (nid < 0) return oom(c, err);
    ot_node *n = &c->g->nodes[nid];
    n->src_index = (int)i;
    n->trace = node_trace(np);
    free(n->op_type);
    free(n->domain);
    n->op_type = ot_strdup(op_type);
    n->domain = ot_strdup(dflt ? "" : np->domain);
    if (!n->op_type || !n->domain) return oom(c, err);
    bool nested = false;
    for (size_t a = 0; a < np->n_attribute; a++) {
        ot_status st = ot_imp_convert_attr(c->file, c->dir, &c->g->nodes[nid], np->attribute[a], &nested, err);
        if (st) return st;
    }
    /* sequences: rewritten (or listed with the reason) once every node is built */
    if (op == OT_OP_UNKNOWN && dflt && !nested && ot_imp_is_sequence_op(op_type)) return OT_OK;
    if (op == OT_OP_UNKNOWN || nested) {
        char full[300];
        if (dflt) snprintf(full, sizeof full, "%s", op_type);
        else snprintf(full, sizeof full, "%s:%s", np->domain, op_type);
        return ot_imp_note_unsupported(m, full, nname, op == OT_OP_UNKNOWN ? OT_UNSUP_OP : OT_UNSUP_NESTED_GRAPH,
                                       err);
    }
    return OT_OK;
}

static ot_status add_nodes(load_ctx *c, ot_model *m, ot_error *err) {
    size_t max_io = 0;
    for (size_t i = 0; i < c->gp->n_node; i++) {
        if (c->gp->node[i]->n_input > max_io) max_io = c->gp->node[i]->n_input;
        if (c->gp->node[i]->n_output > max_io) max_io = c->gp->node[i]->n_output;
    }
    int *ins = ot_xcalloc(max_io, sizeof(int)), *outs = ot_xcalloc(max_io, sizeof(int));
    ot_status st = ins && outs ? OT_OK : oom(c, err);
    for (size_t i = 0; i < c->gp->n_node && !st; i++)
        if (!is_constant_node(c->gp->node[i])) st = add_node(c, m, i, ins, outs, err);
    free(ins);
    free(outs);
    return st;
}

/* value_info: dtype and shape of intermediate values where the exporter gave them. */
static ot_status apply_value_info(load_ctx *c, ot_error *err) {
    for (size_t i = 0; i < c->gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = c->gp->value_info[i];
        int id = vi->name ? map_get(&c->names, vi->name) : -1;
        if (id < 0 || c->g->values[id].kind != OT_VK_ACTIVATION) continue;
        ot_dtype dt;
        ot_shape shape;
        int32_t raw;
        ot_status st = type_from_value_info(c, vi, &dt, &shape, &raw, err);
        if (st) return st;
        c->g->values[id].dtype = dt;
        c->g->values[id].shape = shape;
    }
    return OT_OK;
}

static ot_status add_outputs(load_ctx *c, ot_error *err) {
    Onnx__GraphProto *gp = c->gp;
    ot_graph *g = c->g;
    g->outputs = ot_xcalloc(gp->n_output, sizeof(int));
    if (!g->outputs) return oom(c, err);
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        const char *vn = vi->name ? vi->name : "";
        int id = map_get(&c->names, vn);
        if (id < 0) return ot_fail(err, OT_E_MODEL, "%s: graph output '%s' is produced by no node", c->file, vn);
        ot_value *v = &g->values[id];
        if (v->kind == OT_VK_ACTIVATION) {
            ot_dtype dt;
            ot_shape shape;
            int32_t raw;
            ot_status st = type_from_value_info(c, vi, &dt, &shape, &raw, err);
            if (st) return st;
            if (v->dtype == OT_UNDEFINED) v->dtype = dt;
            if (v->shape.rank < 0) v->shape = shape;
            if (set_doc(v, vi->doc_string)) return oom(c, err);
        }
        v->is_graph_output = true;
        g->outputs[g->n_outputs++] = id;
    }
    return OT_OK;
}

/* The GraphProto as IR, in this order: initializers, inputs, Constant nodes as
 * values, every node's outputs, the nodes, value_info, outputs. */
static ot_status build_graph(load_ctx *c, ot_model *m, ot_error *err) {
    Onnx__GraphProto *gp = c->gp;
    size_t n_names = gp->n_initializer + gp->n_input + gp->n_output;
    for (size_t i = 0; i < gp->n_node; i++) n_names += gp->node[i]->n_output;
    if (map_init(&c->names, n_names)) return oom(c, err);
    ot_status st = add_initializers(c, m, err);
    if (!st) st = add_inputs(c, m, err);
    if (!st) st = add_constants(c, err);
    if (!st) st = add_node_outputs(c, err);
    if (!st) st = add_nodes(c, m, err);
    if (!st) st = apply_value_info(c, err);
    if (!st) st = add_outputs(c, err);
    if (!st) st = ot_imp_rewrite_sequences(c->g, m, err);
    return st;
}

/* ---- entry points ------------------------------------------------------------- */

void ot_model_free(ot_model *m) {
    if (!m) return;
    free(m->path);
    free(m->dir);
    if (m->proto) onnx__model_proto__free_unpacked(m->proto, NULL);
    ot_graph_free(m->graph);
    free(m->producer_name);
    free(m->producer_version);
    for (int i = 0; i < m->n_unsupported; i++) {
        free(m->unsupported[i].op_type);
        for (int k = 0; k < m->unsupported[i].n_nodes; k++) free(m->unsupported[i].nodes[k]);
        free(m->unsupported[i].nodes);
    }
    free(m->unsupported);
    free(m);
}

/* Unpacks the model in src: its skeleton when the scan allows (*refs then says where
 * each initializer's raw_data lies), else all of its bytes (*refs NULL). */
static ot_status unpack_model(ot_imp_src *src, Onnx__ModelProto **out, ot_imp_raw_ref **refs, ot_error *err) {
    *out = NULL;
    *refs = NULL;
    uint8_t *skel = NULL, *whole = NULL;
    size_t skel_len = 0, n_refs = 0;
    /* before any unpacking: protobuf-c recurses without a limit and cuts strings at NULs */
    ot_status st = ot_imp_wire_check(src, &onnx__model_proto__descriptor, err);
    if (st) return st;
    st = ot_imp_skeleton(src, &skel, &skel_len, refs, &n_refs, err);
    if (st) return st;
    if (skel) {
        Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, skel_len, skel);
        free(skel);
        if (mp && (mp->graph ? mp->graph->n_initializer == n_refs : n_refs == 0)) {
            *out = mp;
            return OT_OK;
        }
        /* Not expected; protobuf-c then judges the whole bytes, so the outcome is its own. */
        if (mp) onnx__model_proto__free_unpacked(mp, NULL);
        free(*refs);
        *refs = NULL;
    }
    const uint8_t *bytes = src->mem;
    if (src->fd >= 0) {
        if ((st = ot_imp_src_read_all(src, &whole, err))) return st;
        bytes = whole;
    }
    *out = onnx__model_proto__unpack(NULL, (size_t)src->size, bytes);
    free(whole);
    return OT_OK;
}

static ot_status load_impl(ot_imp_src *src, const char *name, const char *dir, const ot_import_options *opt,
                           ot_model **out, ot_error *err) {
    static const ot_import_options defaults = {0};
    if (!opt) opt = &defaults;
    *out = NULL;
    const char *file = name ? name : "<memory>";
    load_ctx c = {0};
    ot_imp_raw_ref *refs = NULL;
    ot_status st = OT_OK;
    ot_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = ot_strdup(file)) || (dir && !(m->dir = ot_strdup(dir)))) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", file);
        goto fail;
    }
    if (src->size == 0) {
        st = ot_fail(err, OT_E_PARSE, "%s: empty file, not an ONNX model", file);
        goto fail;
    }
    Onnx__ModelProto *mp = NULL;
    if ((st = unpack_model(src, &mp, &refs, err))) goto fail;
    m->proto = mp;
    /* Random bytes occasionally decode as some protobuf: a model has a graph. */
    if (!mp || !mp->graph) {
        st = ot_fail(err, OT_E_PARSE, "%s: not an ONNX model (%s)", file,
                     mp ? "no graph in the protobuf" : "protobuf does not decode");
        goto fail;
    }
    m->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    if (!(m->producer_name = ot_strdup(mp->producer_name ? mp->producer_name : "")) ||
        !(m->producer_version = ot_strdup(mp->producer_version ? mp->producer_version : ""))) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", file);
        goto fail;
    }
    if ((st = ot_imp_model_opset(mp, file, &m->opset, err))) goto fail;

    c.file = file;
    c.dir = dir;
    c.gp = mp->graph;
    c.src = src;
    c.refs = refs;
    c.skip_param_data = opt->skip_param_data;
    c.g = m->graph = ot_graph_new(mp->graph->name);
    if (c.g) c.g->fold_eval = opt->fold_eval;
    if (!c.g) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", file);
        goto fail;
    }
    c.g->opset = m->opset;
    st = build_graph(&c, m, err);
    if (st) goto fail;
    /* the IR holds every payload it was asked to load now */
    free(refs);
    refs = NULL;
    c.refs = NULL;

    if (m->n_unsupported && !opt->allow_unsupported) {
        /* err->msg is a fixed buffer (ot_error lives on the stack everywhere): the list is
         * shaped to fit it rather than cut mid-name */
        size_t used = strlen(file) + 2, cap = sizeof err->msg - 1;
        char *list = ot_imp_unsupported_summary(m, file, used < cap ? cap - used : 0);
        st = ot_fail(err, OT_E_UNSUPPORTED, "%s: %s", file, list && list[0] ? list : "unsupported ops");
        free(list);
        goto fail;
    }
    for (int id = 0; id < c.g->n_nodes; id++) {
        if (c.g->nodes[id].op == OT_OP_UNKNOWN) continue;
        st = ot_imp_check_attrs(c.g, &c.g->nodes[id], err);
        if (st) {
            ot_error_prefix(err, "%s: ", file);
            goto fail;
        }
    }
    st = ot_imp_normalize(c.g, err);
    if (st) {
        ot_error_prefix(err, "%s: ", file);
        goto fail;
    }
    /* PyTorch updates BatchNorm's running variance with the unbiased batch variance,
     * while the ONNX spec uses the population variance. PyTorch's exporter does not
     * record which, so models it produced are marked and trained as PyTorch would. */
    if (m->producer_name && strcmp(m->producer_name, "pytorch") == 0)
        for (int id = 0; id < c.g->n_nodes; id++)
            if (c.g->nodes[id].op == OT_OP_BATCH_NORM &&
                ot_node_set_attr_int(&c.g->nodes[id], "unbiased_running_var", 1)) {
                st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", file);
                goto fail;
            }
    st = ot_graph_verify(c.g, err);
    if (st) {
        ot_error_prefix(err, "%s: ", file);
        goto fail;
    }
    /* ot_shape_infer checks sizes itself; without it, declared dims are checked here. */
    st = opt->no_shape_inference ? ot_imp_check_value_sizes(c.g, err) : ot_shape_infer(c.g, err);
    if (!st) st = ot_imp_normalize_late(c.g, err);
    if (!st && !opt->no_shape_inference) st = ot_imp_fuse_dropout(c.g, err);
    if (st) {
        ot_error_prefix(err, "%s: ", file);
        goto fail;
    }
    map_free(&c.names);
    *out = m;
    return OT_OK;
fail:
    free(refs);
    map_free(&c.names);
    ot_model_free(m);
    return st;
}

ot_status ot_model_load_buffer(const void *data, size_t size, const char *name, const char *dir,
                               const ot_import_options *opt, ot_model **out, ot_error *err) {
    ot_imp_src src;
    ot_imp_src_memory(&src, data, size, name ? name : "<memory>");
    return load_impl(&src, name, dir, opt, out, err);
}

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return ot_strdup(".");
    if (slash == path) return ot_strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = 0;
    }
    return d;
}

ot_status ot_model_load(const char *path, const ot_import_options *opt, ot_model **out, ot_error *err) {
    *out = NULL;
    ot_imp_src src;
    ot_status st = ot_imp_src_open(&src, path, err);
    if (st) return st;
    char *dir = dir_of(path);
    if (!dir) st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
    else st = load_impl(&src, path, dir, opt, out, err);
    ot_imp_src_close(&src);
    free(dir);
    return st;
}
