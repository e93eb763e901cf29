/* ir.c — construction and bookkeeping of the IR graph (values, nodes, attributes,
 * symbols), the op table lookups generated from ops.def, dtypes, shapes and errors. */
#include "ir.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---------------------------------------------------------------- */

ot_status ot_fail(ot_error *err, ot_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

ot_status ot_error_prefix(ot_error *err, const char *fmt, ...) {
    if (!err) return OT_E_INTERNAL;
    char prefix[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t plen = strlen(prefix);
    if (plen >= sizeof err->msg) plen = sizeof err->msg - 1;
    memcpy(err->msg, prefix, plen);
    size_t rest = sizeof err->msg - 1 - plen, olen = strlen(old);
    if (olen > rest) olen = rest;
    memcpy(err->msg + plen, old, olen);
    err->msg[plen + olen] = 0;
    return err->code;
}

const char *ot_status_name(ot_status s) {
    switch (s) {
    case OT_OK: return "ok";
    case OT_E_USAGE: return "usage error";
    case OT_E_IO: return "I/O error";
    case OT_E_PARSE: return "parse error";
    case OT_E_MODEL: return "invalid model";
    case OT_E_UNSUPPORTED: return "unsupported";
    case OT_E_SHAPE: return "shape error";
    case OT_E_DATA: return "data error";
    case OT_E_MEMORY: return "out of memory";
    case OT_E_NUMERICS: return "numerics error";
    case OT_E_MISMATCH: return "mismatch";
    case OT_E_DEVICE: return "device error";
    case OT_E_PEER: return "distributed peer error";
    case OT_E_INTERNAL: return "internal error";
    }
    return "error";
}

void *ot_xcalloc(size_t n, size_t size) { return (n == 0 || size == 0) ? calloc(1, 1) : calloc(n, size); }

char *ot_strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Grows *arr (of elements of size elem) so index `need-1` fits. */
static int grow(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return -1;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *arr = p;
    *cap = nc;
    return 0;
}

/* ---- dtypes ---------------------------------------------------------------- */

size_t ot_dtype_size(ot_dtype t) {
    switch (t) {
    case OT_F32: case OT_I32: return 4;
    case OT_U8: case OT_I8: case OT_BOOL: return 1;
    case OT_I64: case OT_F64: return 8;
    case OT_F16: case OT_BF16: return 2;
    default: return 0;
    }
}

const char *ot_dtype_name(ot_dtype t) {
    switch (t) {
    case OT_F32: return "float32";
    case OT_U8: return "uint8";
    case OT_I8: return "int8";
    case OT_I32: return "int32";
    case OT_I64: return "int64";
    case OT_STRING: return "string";
    case OT_BOOL: return "bool";
    case OT_F16: return "float16";
    case OT_F64: return "float64";
    case OT_BF16: return "bfloat16";
    default: return "undefined";
    }
}

bool ot_dtype_is_float(ot_dtype t) { return t == OT_F32 || t == OT_F16 || t == OT_F64 || t == OT_BF16; }
bool ot_dtype_supported(ot_dtype t) { return ot_dtype_size(t) != 0; }

/* ---- shapes ---------------------------------------------------------------- */

ot_shape ot_shape_make(int rank, const int64_t *dims) {
    ot_shape s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    for (int i = 0; i < OT_MAX_RANK; i++) {
        s.dim[i] = (i < rank && dims) ? dims[i] : 0;
        s.sym[i] = -1;
    }
    return s;
}

ot_shape ot_shape_unknown(void) {
    ot_shape s = ot_shape_make(0, NULL);
    s.rank = -1;
    return s;
}

bool ot_shape_is_static(const ot_shape *s) {
    if (s->rank < 0) return false;
    for (int i = 0; i < s->rank; i++)
        if (s->dim[i] < 0) return false;
    return true;
}

int64_t ot_shape_numel(const ot_shape *s) {
    if (!ot_shape_is_static(s)) return -1;
    /* Saturates instead of overflowing: absurd shapes are refused by the importer
     * (importer/size_limits.c), but no shape may cause undefined behaviour here. */
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        if (__builtin_mul_overflow(n, s->dim[i], &n)) return INT64_MAX;
    return n;
}

int64_t ot_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first) {
    int64_t s = start, e = end, cnt;
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
        s = s < 0 ? 0 : (s > dim ? dim : s);
        e = e < 0 ? 0 : (e > dim ? dim : e);
        cnt = e > s ? (e - s + step - 1) / step : 0;
    } else {
        s = s < 0 ? 0 : (s > dim - 1 ? dim - 1 : s);
        e = e < -1 ? -1 : (e > dim - 1 ? dim - 1 : e);
        cnt = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    *first = s;
    return cnt;
}

bool ot_shape_equal(const ot_shape *a, const ot_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++) {
        if (a->dim[i] != b->dim[i]) return false;
        if (a->dim[i] < 0 && a->sym[i] != b->sym[i]) return false;
    }
    return true;
}

char *ot_shape_str(const ot_graph *g, const ot_shape *s, char *buf, size_t n) {
    if (n == 0) return buf;
    buf[0] = 0;
    if (s->rank < 0) {
        snprintf(buf, n, "?");
        return buf;
    }
    size_t len = 0;
    len += (size_t)snprintf(buf + len, n - len, "[");
    for (int i = 0; i < s->rank && len < n; i++) {
        const char *sep = i ? "," : "";
        if (s->dim[i] >= 0)
            len += (size_t)snprintf(buf + len, n - len, "%s%lld", sep, (long long)s->dim[i]);
        else if (g && s->sym[i] >= 0 && s->sym[i] < g->n_syms)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", sep, g->syms[s->sym[i]]);
        else
            len += (size_t)snprintf(buf + len, n - len, "%s?", sep);
    }
    if (len < n) snprintf(buf + len, n - len, "]");
    return buf;
}

/* ---- op table -------------------------------------------------------------- */

static const ot_op_info op_table[OT_OP_COUNT] = {
    [OT_OP_UNKNOWN] = {"<unknown>", 0, -1, 0, -1, 0},
#define OT_OP(e, nm, mi, ma, mo, mxo, tr) [OT_OP_##e] = {nm, mi, ma, mo, mxo, (tr)},
#include "ops.def"
#undef OT_OP
};

const ot_op_info *ot_op_get(ot_op op) { return &op_table[(op > 0 && op < OT_OP_COUNT) ? op : 0]; }
const char *ot_op_name(ot_op op) { return ot_op_get(op)->name; }
bool ot_op_has(ot_op op, unsigned trait) { return (ot_op_get(op)->traits & trait) != 0; }

ot_op ot_op_from_name(const char *op_type, bool internal) {
    if (!op_type) return OT_OP_UNKNOWN;
    for (int i = 1; i < OT_OP_COUNT; i++) {
        bool is_internal = (op_table[i].traits & OT_T_INTERNAL) != 0;
        if (is_internal == internal && strcmp(op_table[i].name, op_type) == 0) return (ot_op)i;
    }
    return OT_OP_UNKNOWN;
}

const char *ot_value_kind_name(ot_value_kind k) {
    static const char *names[] = {"activation", "input", "param", "state", "constant", "gradient", "opt_state"};
    return (k >= 0 && k <= OT_VK_OPT_STATE) ? names[k] : "?";
}

const char *ot_phase_name(ot_phase p) {
    static const char *names[] = {"forward", "loss", "backward", "recompute", "optimizer"};
    return (p >= 0 && p <= OT_PHASE_OPTIMIZER) ? names[p] : "?";
}

/* ---- graph ----------------------------------------------------------------- */

ot_graph *ot_graph_new(const char *name) {
    ot_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->name = ot_strdup(name ? name : "");
    g->opset = 17;
    return g;
}

void ot_attr_free(ot_attr *a) {
    free(a->name);
    free(a->s);
    free(a->floats);
    free(a->ints);
    for (int i = 0; a->strings && i < a->n; i++) free(a->strings[i]);
    free(a->strings);
    if (a->t) ot_tensor_free(a->t);
    memset(a, 0, sizeof *a);
}

void ot_graph_free(ot_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_values; i++) {
        ot_value *v = &g->values[i];
        free(v->name);
        free(v->consumers);
        free(v->data);
        free(v->doc);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        ot_node *n = &g->nodes[i];
        ot_node_blocks_free(&(ot_node_blocks){n->op_type, n->domain, n->name, n->inputs, n->outputs});
        for (int a = 0; a < n->n_attrs; a++) ot_attr_free(&n->attrs[a]);
        free(n->attrs);
    }
    for (int i = 0; i < g->n_syms; i++) free(g->syms[i]);
    free(g->syms);
    free(g->sym_values);
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->name);
    free(g);
}

/* grow() zeroes the whole new capacity, so every page of a doubled array is
 * resident even where no entry will ever be. */
static void shrink(void **arr, int *cap, int n, size_t elem) {
    if (n <= 0 || n >= *cap) return;
    void *p = realloc(*arr, (size_t)n * elem);
    if (!p) return; /* the larger block stays: still valid */
    *arr = p;
    *cap = n;
}

void ot_graph_shrink(ot_graph *g) {
    if (!g) return;
    shrink((void **)&g->nodes, &g->cap_nodes, g->n_nodes, sizeof(ot_node));
    shrink((void **)&g->values, &g->cap_values, g->n_values, sizeof(ot_value));
}

int ot_graph_add_value(ot_graph *g, const char *name, ot_dtype dtype, const ot_shape *shape,
                       ot_value_kind kind) {
    ot_value_blocks b = {.name = ot_strdup(name ? name : "")};
    int id = b.name ? ot_graph_add_value_blocks(g, &b, dtype, shape, kind) : -1;
    if (id < 0) free(b.name);
    return id;
}

int ot_graph_add_value_blocks(ot_graph *g, const ot_value_blocks *b, ot_dtype dtype, const ot_shape *shape,
                              ot_value_kind kind) {
    /* copied first: shape may point into g->values, which grow can move */
    ot_shape s = shape ? *shape : ot_shape_unknown();
    if (grow((void **)&g->values, &g->cap_values, g->n_values + 1, sizeof(ot_value))) return -1;
    ot_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->id = g->n_values;
    v->name = b->name;
    v->consumers = b->consumers;
    v->cap_consumers = b->consumers ? b->cap_consumers : 0;
    v->dtype = dtype;
    v->shape = s;
    v->kind = kind;
    v->producer = -1;
    v->init_index = -1;
    return g->n_values++;
}

int ot_graph_find_value(const ot_graph *g, const char *name) {
    for (int i = 0; i < g->n_values; i++)
        if (strcmp(g->values[i].name, name) == 0) return i;
    return -1;
}

int ot_graph_add_value_unique(ot_graph *g, const char *base, ot_dtype dtype, const ot_shape *shape,
                              ot_value_kind kind) {
    char name[512];
    snprintf(name, sizeof name, "%s", base);
    for (int k = 1; ot_graph_find_value(g, name) >= 0; k++) snprintf(name, sizeof name, "%s_%d", base, k);
    return ot_graph_add_value(g, name, dtype, shape, kind);
}

static int add_consumer(ot_value *v, int node_id) {
    if (grow((void **)&v->consumers, &v->cap_consumers, v->n_consumers + 1, sizeof(int))) return -1;
    v->consumers[v->n_consumers++] = node_id;
    return 0;
}

static void drop_consumer(ot_value *v, int node_id) {
    for (int i = 0; i < v->n_consumers; i++)
        if (v->consumers[i] == node_id) {
            memmove(&v->consumers[i], &v->consumers[i + 1], (size_t)(v->n_consumers - i - 1) * sizeof(int));
            v->n_consumers--;
            return;
        }
}

void ot_node_blocks_free(ot_node_blocks *b) {
    free(b->op_type);
    free(b->domain);
    free(b->name);
    free(b->inputs);
    free(b->outputs);
}

int ot_graph_add_node(ot_graph *g, ot_op op, const char *name, const int *inputs, int n_inputs,
                      const int *outputs, int n_outputs, ot_phase phase) {
    /* malloc, not calloc, for the id arrays: ot_graph_add_node_blocks sets every entry,
     * and glibc's calloc skips its per-thread cache */
    ot_node_blocks b = {.op_type = ot_strdup(op == OT_OP_UNKNOWN ? "" : ot_op_name(op)),
                        .domain = ot_strdup(ot_op_has(op, OT_T_INTERNAL) ? "ai.onnxtrain" : ""),
                        .name = ot_strdup(name ? name : ""),
                        .inputs = malloc(sizeof(int) * (size_t)(n_inputs > 0 ? n_inputs : 1)),
                        .outputs = malloc(sizeof(int) * (size_t)(n_outputs > 0 ? n_outputs : 1))};
    int id = -1, n0 = g->n_nodes;
    if (b.op_type && b.domain && b.name && b.inputs && b.outputs)
        id = ot_graph_add_node_blocks(g, op, &b, inputs, n_inputs, outputs, n_outputs, phase);
    if (id < 0 && g->n_nodes == n0) ot_node_blocks_free(&b); /* not added: the blocks are still ours */
    return id;
}

int ot_graph_add_node_blocks(ot_graph *g, ot_op op, const ot_node_blocks *b, const int *inputs, int n_inputs,
                             const int *outputs, int n_outputs, ot_phase phase) {
    if (grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(ot_node))) return -1;
    int id = g->n_nodes;
    ot_node *n = &g->nodes[id];
    memset(n, 0, sizeof *n);
    n->id = id;
    n->op = op;
    n->op_type = b->op_type;
    n->domain = b->domain;
    n->name = b->name;
    n->inputs = b->inputs;
    n->outputs = b->outputs;
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    n->phase = phase;
    n->orig_node = -1;
    n->src_index = -1;
    g->n_nodes++;
    if (n_inputs > 0) memcpy(n->inputs, inputs, sizeof(int) * (size_t)n_inputs);
    if (n_outputs > 0) memcpy(n->outputs, outputs, sizeof(int) * (size_t)n_outputs);
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] >= 0 && add_consumer(&g->values[inputs[i]], id)) return -1;
    for (int i = 0; i < n_outputs; i++)
        if (outputs[i] >= 0) g->values[outputs[i]].producer = id;
    return id;
}

void ot_graph_remove_node(ot_graph *g, int node_id) {
    ot_node *n = &g->nodes[node_id];
    if (n->removed) return;
    n->removed = true;
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] >= 0) drop_consumer(&g->values[n->inputs[i]], node_id);
    for (int i = 0; i < n->n_outputs; i++)
        if (n->outputs[i] >= 0 && g->values[n->outputs[i]].producer == node_id)
            g->values[n->outputs[i]].producer = -1;
}

void ot_graph_set_input(ot_graph *g, int node_id, int slot, int new_value) {
    ot_node *n = &g->nodes[node_id];
    if (n->inputs[slot] >= 0) drop_consumer(&g->values[n->inputs[slot]], node_id);
    n->inputs[slot] = new_value;
    if (new_value >= 0) add_consumer(&g->values[new_value], node_id);
}

int ot_graph_relink(ot_graph *g) {
    for (int i = 0; i < g->n_values; i++) {
        g->values[i].n_consumers = 0;
        g->values[i].producer = -1;
    }
    for (int id = 0; id < g->n_nodes; id++) {
        ot_node *n = &g->nodes[id];
        if (n->removed) continue;
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] >= 0 && add_consumer(&g->values[n->inputs[i]], id)) return -1;
        for (int i = 0; i < n->n_outputs; i++)
            if (n->outputs[i] >= 0) g->values[n->outputs[i]].producer = id;
    }
    return 0;
}

int ot_graph_find_sym(const ot_graph *g, const char *name) {
    for (int i = 0; i < g->n_syms; i++)
        if (strcmp(g->syms[i], name) == 0) return i;
    return -1;
}

int ot_graph_add_sym(ot_graph *g, const char *name) {
    int s = ot_graph_find_sym(g, name);
    if (s >= 0) return s;
    char **ns = realloc(g->syms, (size_t)(g->n_syms + 1) * sizeof *ns);
    if (!ns) return -1;
    g->syms = ns;
    int64_t *nv = realloc(g->sym_values, (size_t)(g->n_syms + 1) * sizeof *nv);
    if (!nv) return -1;
    g->sym_values = nv;
    g->syms[g->n_syms] = ot_strdup(name);
    if (!g->syms[g->n_syms]) return -1;
    g->sym_values[g->n_syms] = -1;
    return g->n_syms++;
}

int ot_value_set_data(ot_value *v, const void *data, size_t nbytes) {
    void *p = malloc(nbytes ? nbytes : 1);
    if (!p) return -1;
    if (nbytes) memcpy(p, data, nbytes);
    free(v->data);
    v->data = p;
    v->nbytes = nbytes;
    return 0;
}

/* ---- tensors ---------------------------------------------------------------- */

void ot_tensor_free(ot_tensor *t) {
    if (!t) return;
    free(t->data);
    free(t);
}

ot_tensor *ot_tensor_new(ot_dtype dtype, const ot_shape *shape) {
    ot_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->dtype = dtype;
    t->shape = *shape;
    int64_t n = ot_shape_numel(shape);
    if (n < 0) n = 0;
    t->nbytes = (size_t)n * ot_dtype_size(dtype);
    t->data = calloc(1, t->nbytes ? t->nbytes : 1);
    if (!t->data) {
        free(t);
        return NULL;
    }
    return t;
}

/* ---- attributes --------------------------------------------------------------- */

/* Every attribute change goes through here or ot_node_remove_attr: both drop the
 * node's resolved typed params (ir/op_params.h), so nothing reads stale values. */
static ot_attr *attr_slot(ot_node *n, const char *name) {
    n->params.kind = OT_PARAMS_UNRESOLVED;
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) {
            char *keep = n->attrs[i].name;
            n->attrs[i].name = NULL;
            ot_attr_free(&n->attrs[i]);
            n->attrs[i].name = keep;
            return &n->attrs[i];
        }
    ot_attr *na = realloc(n->attrs, (size_t)(n->n_attrs + 1) * sizeof *na);
    if (!na) return NULL;
    n->attrs = na;
    ot_attr *a = &n->attrs[n->n_attrs];
    memset(a, 0, sizeof *a);
    a->name = ot_strdup(name);
    if (!a->name) return NULL;
    n->n_attrs++;
    return a;
}

int ot_node_set_attr_int(ot_node *n, const char *name, int64_t v) {
    ot_attr *a = attr_slot(n, name);
    if (!a) return -1;
    a->type = OT_ATTR_INT;
    a->i = v;
    return 0;
}

int ot_node_set_attr_float(ot_node *n, const char *name, float v) {
    ot_attr *a = attr_slot(n, name);
    if (!a) return -1;
    a->type = OT_ATTR_FLOAT;
    a->f = v;
    return 0;
}

int ot_node_set_attr_string(ot_node *n, const char *name, const char *v) {
    ot_attr *a = attr_slot(n, name);
    if (!a) return -1;
    a->type = OT_ATTR_STRING;
    a->s = ot_strdup(v);
    return a->s ? 0 : -1;
}

int ot_node_set_attr_strings(ot_node *n, const char *name, const char *const *v, int count) {
    ot_attr *a = attr_slot(n, name);
    if (!a) return -1;
    a->type = OT_ATTR_STRINGS;
    a->strings = ot_xcalloc((size_t)(count ? count : 1), sizeof(char *));
    if (!a->strings) return -1;
    a->n = count;
    for (int k = 0; k < count; k++)
        if (!(a->strings[k] = ot_strdup(v[k]))) return -1;
    return 0;
}

int ot_node_set_attr_ints(ot_node *n, const char *name, const int64_t *v, int count) {
    ot_attr *a = attr_slot(n, name);
    if (!a) return -1;
    a->type = OT_ATTR_INTS;
    a->n = count;
    a->ints = ot_xcalloc((size_t)count, sizeof(int64_t));
    if (!a->ints) return -1;
    if (count) memcpy(a->ints, v, (size_t)count * sizeof(int64_t));
    return 0;
}

int ot_node_set_attr_floats(ot_node *n, const char *name, const float *v, int count) {
    ot_attr *a = attr_slot(n, name);
    if (!a) return -1;
    a->type = OT_ATTR_FLOATS;
    a->n = count;
    a->floats = ot_xcalloc((size_t)count, sizeof(float));
    if (!a->floats) return -1;
    if (count) memcpy(a->floats, v, (size_t)count * sizeof(float));
    return 0;
}

int ot_node_set_attr_tensor(ot_node *n, const char *name, ot_tensor *t) {
    ot_attr *a = attr_slot(n, name);
    if (!a) return -1;
    a->type = OT_ATTR_TENSOR;
    a->t = t;
    return 0;
}

static ot_tensor *tensor_copy(const ot_tensor *t) {
    ot_tensor *c = ot_tensor_new(t->dtype, &t->shape);
    if (c && t->nbytes) memcpy(c->data, t->data, t->nbytes);
    return c;
}

int ot_node_copy_attrs(ot_node *dst, const ot_node *src) {
    for (int i = 0; i < src->n_attrs; i++) {
        const ot_attr *a = &src->attrs[i];
        int rc = 0;
        switch (a->type) {
        case OT_ATTR_INT: rc = ot_node_set_attr_int(dst, a->name, a->i); break;
        case OT_ATTR_FLOAT: rc = ot_node_set_attr_float(dst, a->name, a->f); break;
        case OT_ATTR_STRING: rc = ot_node_set_attr_string(dst, a->name, a->s); break;
        case OT_ATTR_INTS: rc = ot_node_set_attr_ints(dst, a->name, a->ints, a->n); break;
        case OT_ATTR_FLOATS: rc = ot_node_set_attr_floats(dst, a->name, a->floats, a->n); break;
        case OT_ATTR_TENSOR: {
            ot_tensor *t = a->t ? tensor_copy(a->t) : NULL;
            rc = (a->t && !t) ? -1 : ot_node_set_attr_tensor(dst, a->name, t);
            break;
        }
        case OT_ATTR_STRINGS: {
            ot_attr *d = attr_slot(dst, a->name);
            if (!d) return -1;
            d->type = OT_ATTR_STRINGS;
            d->strings = ot_xcalloc((size_t)a->n, sizeof(char *));
            if (!d->strings) return -1;
            d->n = a->n;
            for (int k = 0; k < a->n; k++) d->strings[k] = ot_strdup(a->strings[k]);
            break;
        }
        default: {
            ot_attr *d = attr_slot(dst, a->name);
            if (!d) return -1;
            d->type = a->type;
        }
        }
        if (rc) return -1;
    }
    return 0;
}

const ot_attr *ot_node_attr(const ot_node *n, const char *name) {
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t ot_node_attr_int(const ot_node *n, const char *name, int64_t dflt) {
    const ot_attr *a = ot_node_attr(n, name);
    return (a && a->type == OT_ATTR_INT) ? a->i : dflt;
}

float ot_node_attr_float(const ot_node *n, const char *name, float dflt) {
    const ot_attr *a = ot_node_attr(n, name);
    return (a && a->type == OT_ATTR_FLOAT) ? a->f : dflt;
}

const char *ot_node_attr_string(const ot_node *n, const char *name, const char *dflt) {
    const ot_attr *a = ot_node_attr(n, name);
    return (a && a->type == OT_ATTR_STRING) ? a->s : dflt;
}

const int64_t *ot_node_attr_ints(const ot_node *n, const char *name, int *count) {
    const ot_attr *a = ot_node_attr(n, name);
    if (!a || a->type != OT_ATTR_INTS) {
        if (count) *count = 0;
        return NULL;
    }
    if (count) *count = a->n;
    return a->ints ? a->ints : (const int64_t *)"";
}

void ot_node_remove_attr(ot_node *n, const char *name) {
    n->params.kind = OT_PARAMS_UNRESOLVED;
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) {
            ot_attr_free(&n->attrs[i]);
            memmove(&n->attrs[i], &n->attrs[i + 1], (size_t)(n->n_attrs - i - 1) * sizeof(ot_attr));
            n->n_attrs--;
            return;
        }
}

/* ---- cloning ---------------------------------------------------------------- */

/* Duplicates n ints (NULL stays NULL). *ok turns false when allocation fails. */
static int *ints_dup(const int *src, int n, bool *ok) {
    if (!src) return NULL;
    int *d = ot_xcalloc((size_t)n, sizeof *d);
    if (!d) {
        *ok = false;
        return NULL;
    }
    if (n > 0) memcpy(d, src, (size_t)n * sizeof *d);
    return d;
}

/* One value, field by field: a field added to ot_value is copied here or stays zero
 * in the clone. Strings and the consumer list are copied; data only with with_data. */
static int value_copy(ot_value *dst, const ot_value *src, bool with_data) {
    bool ok = true;
    dst->id = src->id;
    dst->name = ot_strdup(src->name);
    ok &= !src->name || dst->name;
    dst->dtype = src->dtype;
    dst->shape = src->shape;
    dst->kind = src->kind;
    dst->is_graph_output = src->is_graph_output;
    dst->producer = src->producer;
    dst->consumers = ints_dup(src->consumers, src->n_consumers, &ok);
    dst->n_consumers = dst->cap_consumers = dst->consumers ? src->n_consumers : 0;
    dst->nbytes = src->nbytes;
    if (with_data && src->data) {
        dst->data = malloc(src->nbytes ? src->nbytes : 1);
        if (dst->data && src->nbytes) memcpy(dst->data, src->data, src->nbytes);
        ok &= dst->data != NULL;
    }
    dst->init_index = src->init_index;
    dst->doc = ot_strdup(src->doc);
    ok &= !src->doc || dst->doc;
    return ok ? 0 : -1;
}

/* One node, field by field (see value_copy). */
static int node_copy(ot_node *dst, const ot_node *src) {
    bool ok = true;
    dst->id = src->id;
    dst->op = src->op;
    dst->op_type = ot_strdup(src->op_type);
    dst->domain = ot_strdup(src->domain);
    dst->name = ot_strdup(src->name);
    ok &= (!src->op_type || dst->op_type) && (!src->domain || dst->domain) && (!src->name || dst->name);
    dst->inputs = ints_dup(src->inputs, src->n_inputs, &ok);
    dst->n_inputs = src->n_inputs;
    dst->outputs = ints_dup(src->outputs, src->n_outputs, &ok);
    dst->n_outputs = src->n_outputs;
    ok &= ot_node_copy_attrs(dst, src) == 0;
    dst->phase = src->phase;
    dst->orig_node = src->orig_node;
    dst->src_index = src->src_index;
    dst->removed = src->removed;
    dst->trace = src->trace;
    /* typed params point into the node's own attributes: the copy's are resolved
     * again from its own (ot_graph_resolve_params), never shared */
    dst->params.kind = OT_PARAMS_UNRESOLVED;
    return ok ? 0 : -1;
}

ot_graph *ot_graph_clone(const ot_graph *g, bool with_data) {
    ot_graph *c = ot_graph_new(g->name);
    if (!c) return NULL;
    bool ok = c->name != NULL;
    c->values = ot_xcalloc((size_t)g->n_values, sizeof *c->values);
    c->nodes = ot_xcalloc((size_t)g->n_nodes, sizeof *c->nodes);
    c->syms = ot_xcalloc((size_t)g->n_syms, sizeof *c->syms);
    c->sym_values = ot_xcalloc((size_t)g->n_syms, sizeof *c->sym_values);
    if (!ok || !c->values || !c->nodes || !c->syms || !c->sym_values) goto fail;
    c->cap_values = g->n_values;
    c->cap_nodes = g->n_nodes;
    /* counts grow as entries are copied, so a failure part way frees what exists */
    for (int i = 0; i < g->n_values; i++, c->n_values++)
        if (value_copy(&c->values[i], &g->values[i], with_data)) {
            c->n_values++;
            goto fail;
        }
    for (int i = 0; i < g->n_nodes; i++, c->n_nodes++)
        if (node_copy(&c->nodes[i], &g->nodes[i])) {
            c->n_nodes++;
            goto fail;
        }
    for (int i = 0; i < g->n_syms; i++, c->n_syms++) {
        c->sym_values[i] = g->sym_values[i];
        if (!(c->syms[i] = ot_strdup(g->syms[i]))) goto fail;
    }
    c->inputs = ints_dup(g->inputs, g->n_inputs, &ok);
    c->n_inputs = g->n_inputs;
    c->outputs = ints_dup(g->outputs, g->n_outputs, &ok);
    c->n_outputs = g->n_outputs;
    c->opset = g->opset;
    c->fuse_update = g->fuse_update;
    c->sum_ranks = g->sum_ranks;
    c->fold_eval = g->fold_eval;
    if (ok) return c;
fail:
    ot_graph_free(c);
    return NULL;
}
