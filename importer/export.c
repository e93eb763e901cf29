/* export.c — writes a model back as ONNX: the graph, opset, names, metadata and doc
 * strings exactly as loaded, with each initializer's data replaced by the current
 * data of its IR value (trained params, updated BatchNorm statistics). Externally
 * stored initializers are written inline. The file appears atomically (ot_atomic_open:
 * a temporary name in the same folder, fsync, rename). The proto is packed straight
 * into the file through a small buffer, not into one buffer of the model's size: the
 * weights are then held once (in the IR) while they are written, not twice. */
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"
#include "ir/atomic_file.h"

/* protobuf's own limit on one message. */
#define OT_MAX_PROTO_BYTES ((uint64_t)INT32_MAX)

/* protobuf-c's append-only output, writing to the temporary file in chunks of
 * OT_EXPORT_CHUNK bytes; a write error is kept by the stream and reported when the
 * file is committed. */
#define OT_EXPORT_CHUNK ((size_t)1 << 20)

typedef struct file_sink {
    ProtobufCBuffer base; /* first: protobuf-c hands back this pointer */
    FILE *f;
    uint8_t *buf;
    size_t len;
    uint64_t written;
} file_sink;

static void sink_flush(file_sink *f) {
    if (f->len && !ferror(f->f)) fwrite(f->buf, 1, f->len, f->f);
    f->len = 0;
}

static void sink_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
    file_sink *f = (file_sink *)b;
    f->written += len;
    if (!len || ferror(f->f)) return; /* after a failed write, nothing more is tried */
    if (f->len + len > OT_EXPORT_CHUNK) sink_flush(f);
    if (len >= OT_EXPORT_CHUNK) { /* a weight's payload: written from where it lies */
        fwrite(data, 1, len, f->f);
        return;
    }
    memcpy(f->buf + f->len, data, len);
    f->len += len;
}

/* The shallow copy t of initializer src, pointing at the current data of IR value v
 * (-1: none); adds its payload bytes to *total (and to *external when the source
 * stored it externally). Initializers onnxtrain did not load keep their proto bytes. */
static ot_status export_initializer(const char *path, const ot_graph *g, const Onnx__TensorProto *src, int v,
                                    Onnx__TensorProto *t, uint64_t *total, uint64_t *external, ot_error *err) {
    *t = *src;
    bool is_ext = src->has_data_location && src->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (v < 0 || !g->values[v].data) {
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
        if (is_ext || (!proto_has_data && ot_dtype_supported((ot_dtype)src->data_type)))
            return ot_fail(err, OT_E_INTERNAL, "%s: initializer '%s' has no data to write", path, src->name);
        *total += onnx__tensor_proto__get_packed_size(src);
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
    t->has_raw_data = 1;
    t->raw_data.len = val->nbytes;
    t->raw_data.data = val->data;
    t->n_float_data = 0;
    t->n_int32_data = 0;
    t->n_int64_data = 0;
    t->n_double_data = 0;
    t->n_uint64_data = 0;
    t->n_string_data = 0;
    t->n_external_data = 0;
    t->has_data_location = 0;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
    *total += val->nbytes;
    if (is_ext) *external += val->nbytes;
    return OT_OK;
}

ot_status ot_model_save(const ot_model *m, const char *path, ot_error *err) {
    const Onnx__ModelProto *mp = m ? m->proto : NULL;
    if (!mp || !mp->graph || !m->graph)
        return ot_fail(err, OT_E_INTERNAL, "%s: model has no loaded ONNX proto to export", path);
    const Onnx__GraphProto *gp = mp->graph;
    const ot_graph *g = m->graph;
    ot_status st = OT_OK;
    int *by_init = NULL;
    Onnx__TensorProto *tcopies = NULL;
    Onnx__TensorProto **tptrs = NULL;
    uint8_t *buf = NULL;
    ot_atomic_file *af = NULL;

    by_init = ot_xcalloc(gp->n_initializer, sizeof(int));
    tcopies = ot_xcalloc(gp->n_initializer, sizeof *tcopies);
    tptrs = ot_xcalloc(gp->n_initializer, sizeof *tptrs);
    if (!by_init || !tcopies || !tptrs) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    for (size_t i = 0; i < gp->n_initializer; i++) by_init[i] = -1;
    for (int v = 0; v < g->n_values; v++) {
        int ii = g->values[v].init_index;
        if (ii >= 0 && (size_t)ii < gp->n_initializer) by_init[ii] = v;
    }

    /* Shallow copies of the model, graph and initializers with only the data fields
     * changed: the kept proto is never modified, and nothing else is re-encoded. */
    uint64_t total = 0, external = 0;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        tptrs[i] = &tcopies[i];
        st = export_initializer(path, g, gp->initializer[i], by_init[i], &tcopies[i], &total, &external, err);
        if (st) goto fail;
    }
    if (total > OT_MAX_PROTO_BYTES) {
        st = ot_fail(err, OT_E_UNSUPPORTED,
                     "%s: the initializers take %llu bytes (%llu of them stored externally in the source), above "
                     "protobuf's 2 GB limit; writing external data is not supported",
                     path, (unsigned long long)total, (unsigned long long)external);
        goto fail;
    }
    Onnx__GraphProto gcopy = *gp;
    gcopy.initializer = tptrs;
    Onnx__ModelProto mcopy = *mp;
    mcopy.graph = &gcopy;
    size_t size = onnx__model_proto__get_packed_size(&mcopy);
    if (size > OT_MAX_PROTO_BYTES) {
        st = ot_fail(err, OT_E_UNSUPPORTED, "%s: the model would take %zu bytes, above protobuf's 2 GB limit", path, size);
        goto fail;
    }
    buf = malloc(OT_EXPORT_CHUNK);
    if (!buf) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
        goto fail;
    }

    if ((st = ot_atomic_open(path, &af, err))) goto fail;
    file_sink sink = {.base = {.append = sink_append}, .f = ot_atomic_stream(af), .buf = buf};
    size_t packed = onnx__model_proto__pack_to_buffer(&mcopy, &sink.base);
    sink_flush(&sink);
    if (packed != size || sink.written != size) {
        st = ot_fail(err, OT_E_INTERNAL, "%s: protobuf packing gave an unexpected size", path);
        goto fail;
    }
    st = ot_atomic_commit(af, err);
    af = NULL; /* committed or removed */
fail:
    ot_atomic_abort(af);
    free(buf);
    free(by_init);
    free(tcopies);
    free(tptrs);
    return st;
}
