/* export.c — writes a model back as ONNX: the graph, opset, names, metadata and doc
 * strings exactly as loaded, with each initializer's data replaced by the current
 * data of its IR value (trained params, updated BatchNorm statistics) or, when the IR
 * holds none, by the bytes an ot_export_source gives (an executor's arena). Inline or
 * as external data (importer.h, ot_model_save_ex). The files appear atomically
 * (ot_atomic_open per file, ot_imp_commit_with_data for a model with data files).
 * The proto is packed straight into the file through a small buffer, and each payload
 * is written from where it lies (or through a staging buffer of
 * OT_EXPORT_STAGE_BYTES), so writing holds no second copy of the weights. */
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"
#include "ir/atomic_file.h"

/* protobuf's own limit on one message. */
#define OT_MAX_PROTO_BYTES ((uint64_t)INT32_MAX)
/* Initializers this small stay in the .onnx when a source without external data is
 * written with it (onnx.external_data_helper's default threshold). */
#define OT_EXTERNAL_MIN_BYTES 1024
/* Offsets in a data file are multiples of this, so a reader may mmap each tensor. */
#define OT_EXTERNAL_ALIGN 4096

/* protobuf-c's append-only output, writing to the temporary file in chunks of
 * OT_EXPORT_CHUNK bytes; a write error is kept by the stream and reported when the
 * file is committed. */
#define OT_EXPORT_CHUNK ((size_t)1 << 20)

typedef struct exp_init {
    int v;              /* IR value, -1: the proto's own bytes */
    bool payload;       /* its bytes come from the IR or the source (not the proto) */
    const void *host;   /* where they lie in host memory; NULL: through source->read */
    uint64_t nbytes;
    bool was_external;  /* in the source model */
    int file;           /* data file, -1: inline */
    uint64_t offset;
    char off_s[24], len_s[24];
    Onnx__StringStringEntryProto kv[3];
    Onnx__StringStringEntryProto *kvp[3];
} exp_init;

typedef struct exporter {
    const char *path;
    const ot_export_source *src;
    exp_init *in;
    size_t n;
    uint8_t *tags; /* raw_data.data of inline payloads: &tags[i] stands for initializer i */
    uint8_t *stage;
    ot_status st;  /* of the first failed read from the source */
    ot_error *err;
} exporter;

/* Writes initializer i's bytes to f, from the host or through the staging buffer. */
static void write_payload(exporter *x, size_t i, FILE *f) {
    const exp_init *e = &x->in[i];
    if (x->st || !e->nbytes) return;
    if (e->host) {
        fwrite(e->host, 1, e->nbytes, f); /* a failure is reported by the commit */
        return;
    }
    for (uint64_t off = 0; off < e->nbytes;) {
        size_t m = e->nbytes - off < OT_EXPORT_STAGE_BYTES ? (size_t)(e->nbytes - off) : OT_EXPORT_STAGE_BYTES;
        if ((x->st = x->src->read(x->src->user, e->v, off, x->stage, m, x->err))) return;
        fwrite(x->stage, 1, m, f);
        off += m;
    }
}

typedef struct file_sink {
    ProtobufCBuffer base; /* first: protobuf-c hands back this pointer */
    FILE *f;
    uint8_t *buf;
    size_t len;
    uint64_t written;
    exporter *x;
} file_sink;

static void sink_flush(file_sink *f) {
    if (f->len && !ferror(f->f)) fwrite(f->buf, 1, f->len, f->f);
    f->len = 0;
}

static void sink_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
    file_sink *f = (file_sink *)b;
    f->written += len;
    if (!len || ferror(f->f)) return; /* after a failed write, nothing more is tried */
    /* protobuf-c appends a bytes field from its data pointer and never reads it
     * otherwise: a tag stands for the payload, which is fetched only now. */
    if (data >= f->x->tags && data < f->x->tags + f->x->n) {
        sink_flush(f);
        write_payload(f->x, (size_t)(data - f->x->tags), f->f);
        return;
    }
    if (f->len + len > OT_EXPORT_CHUNK) sink_flush(f);
    if (len >= OT_EXPORT_CHUNK) {
        fwrite(data, 1, len, f->f);
        return;
    }
    memcpy(f->buf + f->len, data, len);
    f->len += len;
}

/* Where initializer src's bytes come from (value v, -1: none); fills e. Initializers
 * onnxtrain did not load keep their proto bytes. */
static ot_status resolve_initializer(exporter *x, const ot_graph *g, const Onnx__TensorProto *src, int v,
                                     exp_init *e, ot_error *err) {
    const char *path = x->path;
    memset(e, 0, sizeof *e);
    e->v = v;
    e->file = -1;
    e->was_external = src->has_data_location && src->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    bool have = v >= 0 && (g->values[v].data || x->src);
    if (!have) {
        /* Only initializers of unsupported dtype keep their bytes in the proto (the
         * importer frees the rest once the IR holds them). */
        bool proto_has_data = (src->has_raw_data && src->raw_data.len) || src->n_float_data ||
                              src->n_int32_data || src->n_int64_data || src->n_double_data ||
                              src->n_uint64_data || src->n_string_data;
        if (v >= 0 && ot_imp_payload_absent(&g->values[v]))
            return ot_fail(err, OT_E_INTERNAL,
                           "%s: initializer '%s' has no data to write: the model was loaded without its weights "
                           "(for planning), or they were not copied back from the executor that holds them",
                           path, src->name);
        if (e->was_external || (!proto_has_data && ot_dtype_supported((ot_dtype)src->data_type)))
            return ot_fail(err, OT_E_INTERNAL, "%s: initializer '%s' has no data to write", path, src->name);
        e->nbytes = onnx__tensor_proto__get_packed_size(src);
        return OT_OK;
    }
    const ot_value *val = &g->values[v];
    uint64_t numel = 0, nbytes = 0;
    ot_status st = ot_imp_tensor_geometry(src, src->name ? src->name : "?", NULL, &numel, &nbytes, err);
    if (st) return st;
    if (nbytes != val->nbytes || (int32_t)val->dtype != src->data_type)
        return ot_fail(err, OT_E_INTERNAL,
                       "%s: initializer '%s' holds %zu bytes of %s, the model declares %llu bytes of %s", path,
                       src->name, val->nbytes, ot_dtype_name(val->dtype), (unsigned long long)nbytes,
                       ot_imp_onnx_dtype_name(src->data_type));
    e->payload = true;
    e->nbytes = val->nbytes;
    e->host = val->data ? val->data : x->src->host_ptr ? x->src->host_ptr(x->src->user, v) : NULL;
    if (!e->host && !x->src->read)
        return ot_fail(err, OT_E_INTERNAL, "%s: initializer '%s': the source gives no way to read it", path, src->name);
    return OT_OK;
}

/* The shallow copy t of src with the data fields set for e: raw_data (a tag, see
 * sink_append) when inline, the location, offset and length when external. */
static void export_proto(exporter *x, size_t i, const Onnx__TensorProto *src, Onnx__TensorProto *t, char **locs) {
    exp_init *e = &x->in[i];
    *t = *src;
    if (!e->payload) return;
    t->n_float_data = t->n_int32_data = t->n_int64_data = t->n_double_data = 0;
    t->n_uint64_data = t->n_string_data = 0;
    if (e->file < 0) {
        t->has_raw_data = 1;
        t->raw_data.len = e->nbytes;
        t->raw_data.data = &x->tags[i];
        t->n_external_data = 0;
        t->has_data_location = 0;
        t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
        return;
    }
    t->has_raw_data = 0;
    t->raw_data.len = 0;
    t->raw_data.data = NULL;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    snprintf(e->off_s, sizeof e->off_s, "%llu", (unsigned long long)e->offset);
    snprintf(e->len_s, sizeof e->len_s, "%llu", (unsigned long long)e->nbytes);
    const char *keys[3] = {"location", "offset", "length"};
    char *vals[3] = {locs[e->file], e->off_s, e->len_s};
    for (int k = 0; k < 3; k++) {
        onnx__string_string_entry_proto__init(&e->kv[k]);
        e->kv[k].key = (char *)keys[k];
        e->kv[k].value = vals[k];
        e->kvp[k] = &e->kv[k];
    }
    t->n_external_data = 3;
    t->external_data = e->kvp;
}

/* External data: which payloads go to data files (the source's layout, importer.h),
 * the files' locations (*locs, *n_files) and each payload's offset. */
static ot_status plan_external(exporter *x, const Onnx__GraphProto *gp, uint64_t limit, char ***locs, int *n_files,
                               ot_error *err) {
    int n_src_ext = 0;
    bool several = false;
    const char *first = NULL;
    for (size_t i = 0; i < x->n; i++) {
        if (!x->in[i].was_external) continue;
        const Onnx__TensorProto *t = gp->initializer[i];
        const char *loc = "";
        for (size_t k = 0; k < t->n_external_data; k++)
            if (t->external_data[k]->key && !strcmp(t->external_data[k]->key, "location"))
                loc = t->external_data[k]->value ? t->external_data[k]->value : "";
        if (n_src_ext++ == 0) first = loc;
        else if (strcmp(first, loc)) several = true;
    }
    uint64_t inline_bytes = 0;
    for (size_t i = 0; i < x->n; i++) {
        exp_init *e = &x->in[i];
        if (e->payload && (e->was_external || (n_src_ext == 0 && e->nbytes >= OT_EXTERNAL_MIN_BYTES))) e->file = 0;
        else inline_bytes += e->nbytes;
    }
    /* The source stored only some externally and the rest is still too big. */
    for (size_t i = 0; inline_bytes > limit && i < x->n; i++)
        if (x->in[i].payload && x->in[i].file < 0 && x->in[i].nbytes >= OT_EXTERNAL_MIN_BYTES) x->in[i].file = 0;
    int n = 0;
    for (size_t i = 0; i < x->n; i++) n += x->in[i].file >= 0;
    int nf = several ? n : n > 0;
    *locs = ot_xcalloc((size_t)nf + 1, sizeof **locs);
    if (!*locs) return ot_fail(err, OT_E_MEMORY, "%s: out of memory", x->path);
    *n_files = nf;
    uint64_t *end = ot_xcalloc((size_t)nf + 1, sizeof *end);
    if (!end) return ot_fail(err, OT_E_MEMORY, "%s: out of memory", x->path);
    int f = 0;
    for (size_t i = 0; i < x->n; i++) {
        exp_init *e = &x->in[i];
        if (e->file < 0) continue;
        e->file = several ? f++ : 0;
        if (!(*locs)[e->file]) {
            const char *name = several ? (gp->initializer[i]->name ? gp->initializer[i]->name : "") : NULL;
            char *loc = ot_imp_data_location(x->path, name, -1);
            for (int k = 0; loc && k < e->file; k++)
                if (!strcmp(loc, (*locs)[k])) { /* two names alike once sanitised */
                    free(loc);
                    loc = ot_imp_data_location(x->path, name, (int)i);
                    break;
                }
            if (!loc) {
                free(end);
                return ot_fail(err, OT_E_MEMORY, "%s: out of memory", x->path);
            }
            (*locs)[e->file] = loc;
        }
        e->offset = (end[e->file] + OT_EXTERNAL_ALIGN - 1) / OT_EXTERNAL_ALIGN * OT_EXTERNAL_ALIGN;
        end[e->file] = e->offset + e->nbytes;
    }
    free(end);
    return OT_OK;
}

/* Writes data file f (its payloads in initializer order, zero padding between). */
static void write_data_file(exporter *x, int f, FILE *fp) {
    static const uint8_t zeros[OT_EXTERNAL_ALIGN];
    uint64_t pos = 0;
    for (size_t i = 0; i < x->n && !x->st; i++) {
        const exp_init *e = &x->in[i];
        if (e->file != f) continue;
        if (e->offset > pos) fwrite(zeros, 1, (size_t)(e->offset - pos), fp);
        write_payload(x, i, fp);
        pos = e->offset + e->nbytes;
    }
}

/* Opens, fills and commits the model and its data files. */
static ot_status write_files(exporter *x, const Onnx__ModelProto *mcopy, size_t size, char **locs, int n_files,
                             ot_error *err) {
    ot_status st = OT_OK;
    const char *slash = strrchr(x->path, '/');
    size_t dl = slash ? (size_t)(slash - x->path) + 1 : 0;
    ot_atomic_file **data = ot_xcalloc((size_t)n_files + 1, sizeof *data);
    char **paths = ot_xcalloc((size_t)n_files + 1, sizeof *paths);
    uint8_t *buf = malloc(OT_EXPORT_CHUNK);
    ot_atomic_file *model = NULL;
    if (!data || !paths || !buf) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", x->path);
        goto fail;
    }
    for (int f = 0; f < n_files; f++) {
        size_t ll = strlen(locs[f]);
        if (!(paths[f] = malloc(dl + ll + 1))) {
            st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", x->path);
            goto fail;
        }
        memcpy(paths[f], x->path, dl);
        memcpy(paths[f] + dl, locs[f], ll + 1);
    }
    for (int f = 0; f < n_files; f++) /* all checked before anything is written */
        if ((st = ot_model_data_file_check(x->path, paths[f], err))) goto fail;
    for (int f = 0; f < n_files; f++) {
        if ((st = ot_atomic_open(paths[f], &data[f], err))) goto fail;
        write_data_file(x, f, ot_atomic_stream(data[f]));
        if ((st = x->st)) goto fail;
    }
    if ((st = ot_atomic_open(x->path, &model, err))) goto fail;
    file_sink sink = {.base = {.append = sink_append}, .f = ot_atomic_stream(model), .buf = buf, .x = x};
    size_t packed = onnx__model_proto__pack_to_buffer(mcopy, &sink.base);
    sink_flush(&sink);
    if ((st = x->st)) goto fail;
    if (packed != size || sink.written != size) {
        st = ot_fail(err, OT_E_INTERNAL, "%s: protobuf packing gave an unexpected size", x->path);
        goto fail;
    }
    if (n_files) st = ot_imp_commit_with_data(model, x->path, data, paths, n_files, err);
    else st = ot_atomic_commit(model, err);
    model = NULL; /* committed or removed, with the data files */
    for (int f = 0; f < n_files; f++) data[f] = NULL;
fail:
    for (int f = 0; data && f < n_files; f++) ot_atomic_abort(data[f]);
    ot_atomic_abort(model);
    for (int f = 0; paths && f < n_files; f++) free(paths[f]);
    free(paths);
    free(data);
    free(buf);
    return st;
}

ot_status ot_model_save(const ot_model *m, const char *path, ot_error *err) {
    return ot_model_save_ex(m, path, NULL, err);
}

ot_status ot_model_save_ex(const ot_model *m, const char *path, const ot_export_options *opt, ot_error *err) {
    const Onnx__ModelProto *mp = m ? m->proto : NULL;
    if (!mp || !mp->graph || !m->graph)
        return ot_fail(err, OT_E_INTERNAL, "%s: model has no loaded ONNX proto to export", path);
    const Onnx__GraphProto *gp = mp->graph;
    const ot_graph *g = m->graph;
    ot_status st = OT_OK;
    exporter x = {.path = path, .src = opt ? opt->source : NULL, .n = gp->n_initializer, .err = err};
    int *by_init = ot_xcalloc(x.n + 1, sizeof(int));
    Onnx__TensorProto *tcopies = ot_xcalloc(x.n + 1, sizeof *tcopies);
    Onnx__TensorProto **tptrs = ot_xcalloc(x.n + 1, sizeof *tptrs);
    x.in = ot_xcalloc(x.n + 1, sizeof *x.in);
    x.tags = ot_xcalloc(x.n + 1, 1);
    char **locs = NULL;
    int n_files = 0;
    if (!by_init || !tcopies || !tptrs || !x.in || !x.tags) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    for (size_t i = 0; i < x.n; i++) by_init[i] = -1;
    for (int v = 0; v < g->n_values; v++) {
        int ii = g->values[v].init_index;
        if (ii >= 0 && (size_t)ii < x.n) by_init[ii] = v;
    }
    uint64_t total = 0;
    bool staged = false;
    for (size_t i = 0; i < x.n; i++) {
        if ((st = resolve_initializer(&x, g, gp->initializer[i], by_init[i], &x.in[i], err))) goto fail;
        total += x.in[i].nbytes;
        staged = staged || (x.in[i].payload && !x.in[i].host);
    }
    if ((opt && opt->external_data) || total > OT_MAX_PROTO_BYTES)
        if ((st = plan_external(&x, gp, OT_MAX_PROTO_BYTES, &locs, &n_files, err))) goto fail;
    /* Shallow copies of the model, graph and initializers with only the data fields
     * changed: the kept proto is never modified, and nothing else is re-encoded. */
    for (size_t i = 0; i < x.n; i++) {
        tptrs[i] = &tcopies[i];
        export_proto(&x, i, gp->initializer[i], &tcopies[i], locs);
    }
    Onnx__GraphProto gcopy = *gp;
    gcopy.initializer = tptrs;
    Onnx__ModelProto mcopy = *mp;
    mcopy.graph = &gcopy;
    size_t size = onnx__model_proto__get_packed_size(&mcopy);
    if (size > OT_MAX_PROTO_BYTES) {
        st = ot_fail(err, OT_E_UNSUPPORTED,
                     "%s: the model would take %zu bytes without its external data, above protobuf's 2 GB limit "
                     "(the graph itself, or initializers onnxtrain cannot write externally)", path, size);
        goto fail;
    }
    if (staged && !(x.stage = malloc(OT_EXPORT_STAGE_BYTES))) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    st = write_files(&x, &mcopy, size, locs, n_files, err);
fail:
    for (int f = 0; locs && f < n_files; f++) free(locs[f]);
    free(locs);
    free(x.stage);
    free(x.tags);
    free(x.in);
    free(by_init);
    free(tcopies);
    free(tptrs);
    return st;
}
