/* tensor.c — ONNX TensorProto → ot_tensor in every storage form (raw_data,
 * float_data, int32_data, int64_data, double_data, external data) for every dtype
 * onnxtrain supports, always producing little-endian contiguous data in the tensor's
 * own dtype. Also reads standalone serialized TensorProto files (backend tests'
 * input_0.pb). */
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "onnxtrain assumes a little-endian host (ONNX raw_data is little-endian)"
#endif

const char *ot_imp_onnx_dtype_name(int32_t code) {
    static const char *names[] = {"undefined", "float32", "uint8",  "int8",      "uint16",     "int16",
                                  "int32",     "int64",   "string", "bool",      "float16",    "float64",
                                  "uint32",    "uint64",  "complex64", "complex128", "bfloat16",
                                  "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4",
                                  "int4", "float4e2m1"};
    if (code >= 0 && code < (int32_t)(sizeof names / sizeof names[0])) return names[code];
    return "unknown dtype";
}

ot_status ot_imp_tensor_geometry(const Onnx__TensorProto *t, const char *tname, ot_shape *shape,
                                 uint64_t *numel, uint64_t *nbytes, ot_error *err) {
    ot_dtype dt = (ot_dtype)t->data_type;
    if (!t->has_data_type || !ot_dtype_supported(dt))
        return ot_fail(err, OT_E_UNSUPPORTED, "tensor '%s': dtype %s (%d) is not supported", tname,
                       ot_imp_onnx_dtype_name(t->data_type), (int)t->data_type);
    if (t->n_dims > OT_MAX_RANK)
        return ot_fail(err, OT_E_UNSUPPORTED, "tensor '%s': rank %zu is above the maximum of %d", tname, t->n_dims,
                       OT_MAX_RANK);
    uint64_t esize = ot_dtype_size(dt), n = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return ot_fail(err, OT_E_MODEL, "tensor '%s': negative dim %lld", tname, (long long)t->dims[i]);
        uint64_t d = (uint64_t)t->dims[i];
        /* Check before multiplying so a corrupt dim can neither overflow nor allocate. */
        if (d != 0 && n > OT_MAX_TENSOR_BYTES / esize / d) {
            n = UINT64_MAX;
            break;
        }
        n *= d;
    }
    if (n == UINT64_MAX || n * esize > OT_MAX_TENSOR_BYTES) {
        /* A zero dim later would make it empty; still refuse: such dims are corrupt. */
        return ot_fail(err, OT_E_UNSUPPORTED, "tensor '%s': size too large (over %llu bytes)", tname,
                       (unsigned long long)OT_MAX_TENSOR_BYTES);
    }
    if (shape) {
        *shape = ot_shape_make((int)t->n_dims, NULL);
        for (size_t i = 0; i < t->n_dims; i++) shape->dim[i] = t->dims[i];
    }
    *numel = n;
    *nbytes = n * esize;
    return OT_OK;
}

static ot_status count_mismatch(ot_error *err, const char *tname, const char *field, size_t have, uint64_t want) {
    return ot_fail(err, OT_E_MODEL, "tensor '%s': %s holds %zu elements but its dims need %llu", tname, field, have,
                   (unsigned long long)want);
}

/* Converts the typed repeated fields into contiguous little-endian data. */
static ot_status from_typed_fields(const Onnx__TensorProto *t, const char *tname, ot_dtype dt, uint64_t numel,
                                   uint8_t *dst, ot_error *err) {
    switch (dt) {
    case OT_F32:
        if (t->n_float_data != numel) return count_mismatch(err, tname, "float_data", t->n_float_data, numel);
        if (numel) memcpy(dst, t->float_data, numel * 4);
        return OT_OK;
    case OT_F64:
        if (t->n_double_data != numel) return count_mismatch(err, tname, "double_data", t->n_double_data, numel);
        if (numel) memcpy(dst, t->double_data, numel * 8);
        return OT_OK;
    case OT_I64:
        if (t->n_int64_data != numel) return count_mismatch(err, tname, "int64_data", t->n_int64_data, numel);
        if (numel) memcpy(dst, t->int64_data, numel * 8);
        return OT_OK;
    case OT_I32:
        if (t->n_int32_data != numel) return count_mismatch(err, tname, "int32_data", t->n_int32_data, numel);
        if (numel) memcpy(dst, t->int32_data, numel * 4);
        return OT_OK;
    case OT_I8:
    case OT_U8:
    case OT_BOOL:
    case OT_F16:
    case OT_BF16:
        /* ONNX stores these narrow types one per int32_data element (16-bit floats as
         * their bit patterns in the low half). */
        if (t->n_int32_data != numel) return count_mismatch(err, tname, "int32_data", t->n_int32_data, numel);
        for (uint64_t i = 0; i < numel; i++) {
            int32_t v = t->int32_data[i];
            if (dt == OT_F16 || dt == OT_BF16) {
                uint16_t b = (uint16_t)((uint32_t)v & 0xffffu);
                memcpy(dst + 2 * i, &b, 2);
            } else if (dt == OT_BOOL) {
                dst[i] = v != 0;
            } else {
                dst[i] = (uint8_t)((uint32_t)v & 0xffu);
            }
        }
        return OT_OK;
    default:
        return ot_fail(err, OT_E_UNSUPPORTED, "tensor '%s': dtype %s is not supported", tname, ot_dtype_name(dt));
    }
}

/* The typed repeated field that holds a dtype's values when raw_data is absent, and
 * how many elements it has. */
static size_t typed_count(const Onnx__TensorProto *t, ot_dtype dt, const char **field) {
    switch (dt) {
    case OT_F32: *field = "float_data"; return t->n_float_data;
    case OT_F64: *field = "double_data"; return t->n_double_data;
    case OT_I64: *field = "int64_data"; return t->n_int64_data;
    default: *field = "int32_data"; return t->n_int32_data;
    }
}

/* Checks that the storage form holds exactly the bytes the dims need, before the
 * tensor is allocated: a 70-byte model declaring dims of 2^31 floats must be refused,
 * not make us allocate 8 GB first (found by fuzz/fuzz_model). External data is sized
 * from the file without reading it. */
/* ONNX's checker: a tensor holds its values in one field only. With raw_data and
 * float_data both set, readers disagree on which wins (we read raw_data, others the
 * typed field): the values are ambiguous, so the tensor is refused. */
static ot_status check_one_storage_form(const Onnx__TensorProto *t, const char *tname, bool has_raw, uint64_t raw_len,
                                        ot_error *err) {
    const char *forms[10];
    int n = 0;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        forms[n++] = "external data";
    if (has_raw && raw_len > 0) forms[n++] = "raw_data";
    if (t->n_float_data) forms[n++] = "float_data";
    if (t->n_int32_data) forms[n++] = "int32_data";
    if (t->n_string_data) forms[n++] = "string_data";
    if (t->n_int64_data) forms[n++] = "int64_data";
    if (t->n_double_data) forms[n++] = "double_data";
    if (t->n_uint64_data) forms[n++] = "uint64_data";
    if (n <= 1) return OT_OK;
    return ot_fail(err, OT_E_MODEL,
                   "tensor '%s': holds its values in both %s and %s; ONNX allows one storage form per tensor (which "
                   "one a reader takes differs, so the values are ambiguous)",
                   tname, forms[0], forms[1]);
}

static ot_status check_source_size(const Onnx__TensorProto *t, const char *tname, const char *model_dir, ot_dtype dt,
                                   bool has_raw, uint64_t raw_len, uint64_t numel, uint64_t nbytes, ot_error *err) {
    ot_status st = check_one_storage_form(t, tname, has_raw, raw_len, err);
    if (st) return st;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        uint64_t have = 0;
        st = ot_imp_external_size(t, tname, model_dir, &have, err);
        if (st) return st;
        if (have != nbytes) {
            const char *loc = "?";
            for (size_t i = 0; i < t->n_external_data; i++)
                if (t->external_data[i]->key && !strcmp(t->external_data[i]->key, "location"))
                    loc = t->external_data[i]->value ? t->external_data[i]->value : "";
            return ot_fail(err, OT_E_MODEL,
                           "tensor '%s': external data '%s' has %llu bytes but its dims and dtype need %llu", tname,
                           loc, (unsigned long long)have, (unsigned long long)nbytes);
        }
        return OT_OK;
    }
    if (has_raw && (raw_len > 0 || numel == 0)) {
        if (raw_len != nbytes)
            return ot_fail(err, OT_E_MODEL, "tensor '%s': raw_data has %llu bytes but its dims and dtype (%s) need %llu",
                           tname, (unsigned long long)raw_len, ot_dtype_name(dt), (unsigned long long)nbytes);
        return OT_OK;
    }
    const char *field = "";
    size_t have = typed_count(t, dt, &field);
    if (have != numel) return count_mismatch(err, tname, field, have, numel);
    return OT_OK;
}

ot_status ot_tensor_from_proto(const void *tensor_proto, const char *model_dir, ot_tensor **out, ot_error *err) {
    return ot_imp_tensor_from_proto(tensor_proto, model_dir, NULL, NULL, out, err);
}

ot_status ot_imp_tensor_check(const Onnx__TensorProto *t, const char *model_dir, const ot_imp_raw_ref *raw,
                              ot_shape *shape, uint64_t *nbytes, ot_error *err) {
    /* raw_data as the skeleton recorded it, or as the proto holds it */
    bool elided = raw && raw->present;
    bool has_raw = elided || t->has_raw_data;
    uint64_t raw_len = elided ? raw->len : t->raw_data.len;
    const char *tname = (t->name && t->name[0]) ? t->name : "<unnamed>";
    uint64_t numel = 0;
    ot_status st = ot_imp_tensor_geometry(t, tname, shape, &numel, nbytes, err);
    if (st) return st;
    if (t->segment) return ot_fail(err, OT_E_UNSUPPORTED, "tensor '%s': segmented tensors are not supported", tname);
    return check_source_size(t, tname, model_dir, (ot_dtype)t->data_type, has_raw, raw_len, numel, *nbytes, err);
}

ot_status ot_imp_tensor_from_proto(const Onnx__TensorProto *t, const char *model_dir, ot_imp_src *src,
                                   const ot_imp_raw_ref *raw, ot_tensor **out, ot_error *err) {
    *out = NULL;
    bool elided = raw && raw->present;
    bool has_raw = elided || t->has_raw_data;
    uint64_t raw_len = elided ? raw->len : t->raw_data.len;
    const char *tname = (t->name && t->name[0]) ? t->name : "<unnamed>";
    ot_tensor *res = NULL;
    ot_shape shape;
    uint64_t nbytes = 0;
    ot_status st = ot_imp_tensor_check(t, model_dir, raw, &shape, &nbytes, err);
    if (st) goto fail;
    ot_dtype dt = (ot_dtype)t->data_type;
    uint64_t numel = nbytes / ot_dtype_size(dt);
    res = calloc(1, sizeof *res);
    if (!res || !(res->data = malloc(nbytes ? (size_t)nbytes : 1))) {
        st = ot_fail(err, OT_E_MEMORY, "tensor '%s': out of memory for %llu bytes", tname,
                     (unsigned long long)nbytes);
        goto fail;
    }
    res->dtype = dt;
    res->shape = shape;
    res->nbytes = (size_t)nbytes;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        st = ot_imp_external_read(t, tname, model_dir, res->data, res->nbytes, err);
        if (st) goto fail;
    } else if (has_raw && (raw_len > 0 || numel == 0)) {
        /* check_source_size has checked raw_len == nbytes */
        if (elided) {
            st = ot_imp_src_read(src, raw->offset, res->data, (size_t)nbytes, err);
            if (st) {
                ot_error_prefix(err, "tensor '%s': ", tname);
                goto fail;
            }
        } else if (nbytes) {
            memcpy(res->data, t->raw_data.data, (size_t)nbytes);
        }
        if (dt == OT_BOOL)
            for (uint64_t i = 0; i < numel; i++) ((uint8_t *)res->data)[i] = ((uint8_t *)res->data)[i] != 0;
    } else {
        st = from_typed_fields(t, tname, dt, numel, res->data, err);
        if (st) goto fail;
    }
    *out = res;
    return OT_OK;
fail:
    ot_tensor_free(res);
    return st;
}

ot_status ot_imp_too_big_for_protobuf(const char *path, ot_error *err) {
    return ot_fail(err, OT_E_PARSE,
                   "%s: larger than 2 GiB, protobuf's limit for one message: not an ONNX model (large weights belong "
                   "in external data files)",
                   path);
}

ot_status ot_imp_read_file(const char *path, uint8_t **data, size_t *size, ot_error *err) {
    *data = NULL;
    *size = 0;
    ot_imp_src src;
    ot_status st = ot_imp_src_open(&src, path, err);
    if (st) return st;
    st = ot_imp_src_read_all(&src, data, err);
    if (!st) *size = (size_t)src.size;
    ot_imp_src_close(&src);
    return st;
}

/* Folder of a path ("." when it has none), malloc'd. */
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

ot_status ot_tensor_load_pb(const char *path, ot_tensor **out, char **name, ot_error *err) {
    *out = NULL;
    if (name) *name = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    Onnx__TensorProto *t = NULL;
    char *dir = NULL;
    ot_status st = ot_imp_read_file(path, &buf, &len, err);
    if (st) return st;
    ot_imp_src src;
    ot_imp_src_memory(&src, buf, len, path);
    if ((st = ot_imp_wire_check(&src, &onnx__tensor_proto__descriptor, err))) goto fail;
    t = onnx__tensor_proto__unpack(NULL, len, buf);
    if (!t || !t->has_data_type) {
        st = ot_fail(err, OT_E_PARSE, "%s: not a serialized ONNX TensorProto", path);
        goto fail;
    }
    dir = dir_of(path);
    if (!dir) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    st = ot_tensor_from_proto(t, dir, out, err);
    if (st) {
        ot_error_prefix(err, "%s: ", path);
        goto fail;
    }
    if (name && !(*name = ot_strdup(t->name ? t->name : ""))) {
        ot_tensor_free(*out);
        *out = NULL;
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
        goto fail;
    }
fail:
    if (t) onnx__tensor_proto__free_unpacked(t, NULL);
    free(buf);
    free(dir);
    return st;
}
