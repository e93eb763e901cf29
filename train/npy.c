/* npy.c — NumPy .npy reader and writer (see npy.h for what is supported).
 *
 * The header is a Python dict literal, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * parsed here by a small strict parser: exactly the three keys, string / bool /
 * tuple-of-ints values. The data size implied by the header must equal the bytes that
 * follow it, which is checked before the tensor is allocated. */
#include "train/npy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/atomic_file.h"
#include "ir/input_file.h"

static const unsigned char NPY_MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
/* numpy itself refuses headers over 10000 bytes by default; allow more, but bounded. */
#define NPY_MAX_HEADER (1u << 20)

typedef struct npy_header {
    ot_dtype dtype;
    ot_shape shape;
    uint64_t nbytes; /* of the data that follows */
} npy_header;

/* ---- header parsing ------------------------------------------------------------ */

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool accept(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted Python string without escapes (all numpy writes); copied into buf. */
static bool parse_string(cursor *c, char *buf, size_t n) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    char q = *c->p++;
    size_t len = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || len + 1 >= n) return false;
        buf[len++] = *c->p++;
    }
    if (c->p >= c->end) return false;
    c->p++;
    buf[len] = '\0';
    return true;
}

static bool parse_word(cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return false;
    c->p += n;
    return true;
}

/* "(3, 4)", "(3,)", "()"; dims must be non-negative and fit in int64. */
static ot_status parse_shape(cursor *c, const char *name, ot_shape *s, ot_error *err) {
    int64_t dims[OT_MAX_RANK];
    int rank = 0;
    if (!accept(c, '(')) return ot_fail(err, OT_E_PARSE, "%s: malformed .npy header: 'shape' is not a tuple", name);
    for (;;) {
        if (accept(c, ')')) break;
        skip_ws(c);
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return ot_fail(err, OT_E_PARSE, "%s: malformed .npy header: bad dimension in 'shape'", name);
        uint64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > ((uint64_t)INT64_MAX - 9) / 10)
                return ot_fail(err, OT_E_DATA, "%s: .npy shape has a dimension too large to represent", name);
            v = v * 10 + (uint64_t)(*c->p++ - '0');
        }
        if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 longs, as old numpy wrote */
        if (rank == OT_MAX_RANK)
            return ot_fail(err, OT_E_UNSUPPORTED, "%s: .npy array has more than %d dimensions", name, OT_MAX_RANK);
        dims[rank++] = (int64_t)v;
        if (accept(c, ')')) break;
        if (!accept(c, ','))
            return ot_fail(err, OT_E_PARSE, "%s: malformed .npy header: expected ',' or ')' in 'shape'", name);
    }
    *s = ot_shape_make(rank, dims);
    return OT_OK;
}

static ot_status parse_descr(const char *d, const char *name, ot_dtype *out, ot_error *err) {
    static const struct {
        const char *code;
        ot_dtype dtype;
    } table[] = {{"f4", OT_F32}, {"f8", OT_F64}, {"f2", OT_F16}, {"i8", OT_I64}, {"i4", OT_I32},
                 {"u1", OT_U8},  {"i1", OT_I8},  {"b1", OT_BOOL},
                 /* bfloat16 has no numpy type: its bits as uint16, or as the 2-byte void
                  * ml_dtypes' bfloat16 arrays save as (npy.h) */
                 {"u2", OT_BF16}, {"V2", OT_BF16}};
    char order = d[0];
    const char *code = d + 1;
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return ot_fail(err, OT_E_UNSUPPORTED, "%s: unsupported .npy dtype '%s' (structured or unknown)", name, d);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(code, table[i].code) != 0) continue;
        /* Byte order matters only for multi-byte types; '=' is native = little here. */
        if (order == '>' && ot_dtype_size(table[i].dtype) > 1)
            return ot_fail(err, OT_E_UNSUPPORTED,
                           "%s: .npy dtype '%s' is big-endian; convert with a.astype(a.dtype.newbyteorder('<'))",
                           name, d);
        *out = table[i].dtype;
        return OT_OK;
    }
    return ot_fail(err, OT_E_UNSUPPORTED,
                   "%s: unsupported .npy dtype '%s' (supported: <f4 <f8 <f2 <i8 <i4 |u1 |i1 |b1, and <u2 or <V2 "
                   "read as bfloat16 bits)", name, d);
}

/* Parses the dict in text[0..len) into h (nbytes from dtype and shape). */
static ot_status parse_dict(const char *text, size_t len, const char *name, npy_header *h, ot_error *err) {
    cursor c = {text, text + len};
    bool have_descr = false, have_order = false, have_shape = false;
    char key[32], descr[32];
    ot_status st;
    if (!accept(&c, '{')) return ot_fail(err, OT_E_PARSE, "%s: malformed .npy header: not a dict", name);
    for (;;) {
        if (accept(&c, '}')) break;
        if (!parse_string(&c, key, sizeof key) || !accept(&c, ':'))
            return ot_fail(err, OT_E_PARSE, "%s: malformed .npy header: expected 'key': value", name);
        if (strcmp(key, "descr") == 0 && !have_descr) {
            if (!parse_string(&c, descr, sizeof descr) || descr[0] == '\0')
                return ot_fail(err, OT_E_UNSUPPORTED, "%s: unsupported .npy dtype (not a simple type string)", name);
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if (parse_word(&c, "True"))
                return ot_fail(err, OT_E_UNSUPPORTED,
                               "%s: .npy array is in Fortran order; save it with np.save(f, np.ascontiguousarray(a))",
                               name);
            if (!parse_word(&c, "False"))
                return ot_fail(err, OT_E_PARSE, "%s: malformed .npy header: 'fortran_order' is not True/False", name);
            have_order = true;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if ((st = parse_shape(&c, name, &h->shape, err)) != OT_OK) return st;
            have_shape = true;
        } else {
            return ot_fail(err, OT_E_PARSE, "%s: malformed .npy header: unexpected or repeated key '%s'", name, key);
        }
        if (accept(&c, '}')) break;
        if (!accept(&c, ','))
            return ot_fail(err, OT_E_PARSE, "%s: malformed .npy header: expected ',' or '}'", name);
    }
    skip_ws(&c);
    if (c.p != c.end)
        return ot_fail(err, OT_E_PARSE, "%s: malformed .npy header: text after the dict", name);
    if (!have_descr || !have_order || !have_shape)
        return ot_fail(err, OT_E_PARSE, "%s: malformed .npy header: missing key '%s'", name,
                       !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    if ((st = parse_descr(descr, name, &h->dtype, err)) != OT_OK) return st;
    /* Element count with overflow checks, then the byte limit, before any allocation. */
    uint64_t bytes = ot_dtype_size(h->dtype);
    for (int i = 0; i < h->shape.rank; i++) {
        uint64_t d = (uint64_t)h->shape.dim[i];
        if (d != 0 && bytes > OT_NPY_MAX_BYTES / d)
            return ot_fail(err, OT_E_DATA, "%s: .npy shape is too large (over %llu bytes of data)", name,
                           (unsigned long long)OT_NPY_MAX_BYTES);
        bytes *= d;
    }
    if (bytes > OT_NPY_MAX_BYTES)
        return ot_fail(err, OT_E_DATA, "%s: .npy shape is too large (over %llu bytes of data)", name,
                       (unsigned long long)OT_NPY_MAX_BYTES);
    h->nbytes = bytes;
    return OT_OK;
}

/* Reads the fixed prefix (magic, version, header length): pre holds `npre` bytes (at
 * least 12 unless the file is shorter). Sets *hdr_off (start of the dict) and *hdr_len. */
static ot_status parse_prefix(const unsigned char *pre, size_t npre, const char *name, size_t *hdr_off,
                              size_t *hdr_len, ot_error *err) {
    if (npre < 10 || memcmp(pre, NPY_MAGIC, 6) != 0)
        return ot_fail(err, OT_E_PARSE, "%s: not a .npy file (bad magic; expected \\x93NUMPY)", name);
    unsigned major = pre[6];
    if (major == 1) {
        *hdr_off = 10;
        *hdr_len = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (major == 2 || major == 3) {
        if (npre < 12) return ot_fail(err, OT_E_PARSE, "%s: truncated .npy header", name);
        *hdr_off = 12;
        *hdr_len = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    } else {
        return ot_fail(err, OT_E_UNSUPPORTED, "%s: unsupported .npy format version %u.%u (1.0, 2.0, 3.0 are)", name,
                       major, (unsigned)pre[7]);
    }
    if (*hdr_len > NPY_MAX_HEADER)
        return ot_fail(err, OT_E_PARSE, "%s: .npy header length %zu is implausibly large", name, *hdr_len);
    return OT_OK;
}

/* Checks the data size against the bytes present and allocates the tensor. */
static ot_status make_tensor(const npy_header *h, uint64_t avail, const char *name, ot_tensor **out, ot_error *err) {
    if (avail < h->nbytes)
        return ot_fail(err, OT_E_PARSE, "%s: truncated .npy data: header says %llu bytes, file has %llu", name,
                       (unsigned long long)h->nbytes, (unsigned long long)avail);
    if (avail > h->nbytes)
        return ot_fail(err, OT_E_PARSE, "%s: %llu bytes of trailing garbage after the .npy data", name,
                       (unsigned long long)(avail - h->nbytes));
    *out = ot_tensor_new(h->dtype, &h->shape);
    if (!*out)
        return ot_fail(err, OT_E_MEMORY, "%s: out of memory for %llu bytes of .npy data", name,
                       (unsigned long long)h->nbytes);
    return OT_OK;
}

/* numpy writes bools as 0/1; anything else would break kernels that test == 1. */
static void normalise_bools(ot_tensor *t) {
    if (t->dtype != OT_BOOL) return;
    unsigned char *b = t->data;
    for (size_t i = 0; i < t->nbytes; i++) b[i] = b[i] != 0;
}

ot_status ot_npy_read_buffer(const void *data, size_t n, const char *name, ot_tensor **out, ot_error *err) {
    const unsigned char *bytes = data;
    size_t off, len;
    npy_header h;
    ot_status st;
    *out = NULL;
    if (!name) name = "<buffer>";
    if ((st = parse_prefix(bytes, n, name, &off, &len, err)) != OT_OK) return st;
    if (len > n - off) return ot_fail(err, OT_E_PARSE, "%s: truncated .npy header", name);
    if ((st = parse_dict((const char *)bytes + off, len, name, &h, err)) != OT_OK) return st;
    if ((st = make_tensor(&h, n - off - len, name, out, err)) != OT_OK) return st;
    if (h.nbytes) memcpy((*out)->data, bytes + off + len, h.nbytes);
    normalise_bools(*out);
    return OT_OK;
}

ot_status ot_npy_read(const char *path, ot_tensor **out, ot_error *err) {
    unsigned char pre[12];
    char *text = NULL;
    size_t off, len;
    npy_header h;
    uint64_t size;
    int fd;
    *out = NULL;
    /* Regular files only, opened without waiting (ir/input_file.h): a FIFO given as
     * --input would otherwise block forever, /dev/zero never end. */
    ot_status st = ot_input_open(path, NULL, &fd, &size, err);
    if (st) return st;
    size_t npre = size < sizeof pre ? (size_t)size : sizeof pre;
    if (!ot_input_pread(fd, 0, pre, npre)) {
        st = ot_fail(err, OT_E_IO, "%s: read error in the .npy header", path);
        goto fail;
    }
    if ((st = parse_prefix(pre, npre, path, &off, &len, err)) != OT_OK) goto fail;
    if (size < off + len) {
        st = ot_fail(err, OT_E_PARSE, "%s: truncated .npy header", path);
        goto fail;
    }
    text = malloc(len ? len : 1);
    if (!text) {
        st = ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    if (!ot_input_pread(fd, off, text, len)) {
        st = ot_fail(err, OT_E_IO, "%s: read error in the .npy header", path);
        goto fail;
    }
    if ((st = parse_dict(text, len, path, &h, err)) != OT_OK) goto fail;
    if ((st = make_tensor(&h, size - off - len, path, out, err)) != OT_OK) goto fail;
    if (h.nbytes && !ot_input_pread(fd, off + len, (*out)->data, (size_t)h.nbytes)) {
        st = ot_fail(err, OT_E_IO, "%s: read error in the .npy data (file changed while reading?)", path);
        goto fail;
    }
    normalise_bools(*out);
    free(text);
    close(fd);
    return OT_OK;
fail:
    ot_tensor_free(*out);
    *out = NULL;
    free(text);
    close(fd);
    return st;
}

/* ---- writing --------------------------------------------------------------------- */

static const char *descr_of(ot_dtype t) {
    switch (t) {
    case OT_F32: return "<f4";
    case OT_F64: return "<f8";
    case OT_F16: return "<f2";
    case OT_BF16: return "<u2"; /* its bits (npy.h) */
    case OT_I64: return "<i8";
    case OT_I32: return "<i4";
    case OT_U8: return "|u1";
    case OT_I8: return "|i1";
    case OT_BOOL: return "|b1";
    default: return NULL;
    }
}

ot_status ot_npy_header(const ot_tensor *t, int major, const char *path, unsigned char *head, size_t *len,
                        ot_error *err) {
    char dict[64 + OT_MAX_RANK * 24];
    const char *descr = descr_of(t->dtype);
    if (!descr)
        return ot_fail(err, OT_E_UNSUPPORTED, "%s: cannot write dtype %s to .npy", path, ot_dtype_name(t->dtype));
    if (major < 0 || major > 3) return ot_fail(err, OT_E_USAGE, "%s: .npy format version %d does not exist", path, major);
    if (t->shape.rank < 0 || t->shape.rank > OT_MAX_RANK || ot_shape_numel(&t->shape) < 0 ||
        (uint64_t)ot_shape_numel(&t->shape) * ot_dtype_size(t->dtype) != t->nbytes)
        return ot_fail(err, OT_E_INTERNAL, "%s: tensor shape does not match its %zu bytes", path, t->nbytes);

    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < t->shape.rank; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld%s", (long long)t->shape.dim[i],
                      t->shape.rank == 1 || i + 1 < t->shape.rank ? ", " : "");
    if (t->shape.rank == 1) n -= 1; /* "(3,)" as Python writes it */
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    if (major == 0) major = 1; /* our headers are short: 1.0 always fits */
    size_t prefix = major == 1 ? 10 : 12;
    /* Pad with spaces + '\n' so the data starts on a 64-byte boundary, exactly as
     * numpy's _wrap_header does (a full 64 spaces when already aligned), so our files
     * are byte-identical to np.save's. */
    size_t total = prefix + (size_t)n + 1 + (64 - (prefix + (size_t)n + 1) % 64);
    size_t hlen = total - prefix;
    memcpy(head, NPY_MAGIC, 6);
    head[6] = (unsigned char)major;
    head[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++) head[8 + i] = (unsigned char)(hlen >> (8 * i));
    memcpy(head + prefix, dict, (size_t)n);
    memset(head + prefix + n, ' ', hlen - (size_t)n - 1);
    head[total - 1] = '\n';
    *len = total;
    return OT_OK;
}

ot_status ot_npy_write_version(const char *path, const ot_tensor *t, int major, ot_error *err) {
    unsigned char head[OT_NPY_HEADER_MAX];
    size_t total = 0;
    ot_status st = ot_npy_header(t, major, path, head, &total, err);
    if (st) return st;
    ot_atomic_file *af;
    if ((st = ot_atomic_open(path, &af, err))) return st;
    FILE *f = ot_atomic_stream(af);
    fwrite(head, 1, total, f); /* a failed write is reported by the commit */
    if (t->nbytes) fwrite(t->data, 1, t->nbytes, f);
    return ot_atomic_commit(af, err);
}

ot_status ot_npy_write(const char *path, const ot_tensor *t, ot_error *err) {
    return ot_npy_write_version(path, t, 0, err);
}
