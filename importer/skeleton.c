/* skeleton.c — a serialized ModelProto without its weights, so a model is unpacked
 * without holding its weights twice.
 *
 * protobuf-c copies every bytes field it unpacks: unpacking a model read into memory
 * holds the weights twice (the file's bytes and each initializer's raw_data), and the
 * importer's IR is a third copy. Instead the model's bytes are scanned at the wire
 * level, three messages deep (ModelProto.graph = 7, GraphProto.initializer = 5,
 * TensorProto.raw_data = 9), and a skeleton is written: the same bytes with the main
 * graph's initializer payloads left out and the lengths of the messages around them
 * adjusted. Where each payload lies in the source is recorded, one entry per
 * initializer in order, which is the order protobuf-c unpacks them in. The importer
 * reads each payload straight into the IR value that keeps it.
 *
 * Every other field is copied byte for byte. Whatever protobuf-c would read otherwise
 * than "last one wins per field" (a second graph field, which it merges, or a second
 * raw_data), a group, a varint written longer than needed, or a length past the end
 * makes the scan give up; the caller then unpacks the whole model as before, so the
 * unpacked model and every error message are exactly what protobuf-c alone gives. */
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };
enum { LEVEL_MODEL, LEVEL_GRAPH, LEVEL_TENSOR };

#define FIELD_MODEL_GRAPH 7u
#define FIELD_GRAPH_INITIALIZER 5u
#define FIELD_TENSOR_RAW_DATA 9u

typedef struct obuf {
    uint8_t *p;
    size_t len, cap;
} obuf;

typedef struct scan {
    ot_imp_src *src;
    ot_error *err;
    ot_status st; /* an I/O or memory failure: loading fails */
    bool give_up; /* unusual bytes: unpack the whole model instead */
    ot_imp_raw_ref *refs;
    size_t n_refs, cap_refs;
    obuf tensor; /* scratch for one initializer's skeleton */
} scan;

static bool ok(const scan *c) { return !c->st && !c->give_up; }

static bool give_up(scan *c) {
    c->give_up = true;
    return false;
}

static uint8_t *obuf_grow(scan *c, obuf *o, size_t n) {
    if (o->cap - o->len < n) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap - o->len < n) {
            if (cap > SIZE_MAX / 2) {
                c->st = ot_fail(c->err, OT_E_MEMORY, "%s: out of memory", c->src->name);
                return NULL;
            }
            cap *= 2;
        }
        uint8_t *p = realloc(o->p, cap);
        if (!p) {
            c->st = ot_fail(c->err, OT_E_MEMORY, "%s: out of memory", c->src->name);
            return NULL;
        }
        o->p = p;
        o->cap = cap;
    }
    uint8_t *at = o->p + o->len;
    o->len += n;
    return at;
}

static bool put_varint(scan *c, obuf *o, uint64_t v) {
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) b[n] |= 0x80;
        n++;
    } while (v);
    uint8_t *at = obuf_grow(c, o, n);
    if (at) memcpy(at, b, n);
    return at != NULL;
}

static bool put_bytes(scan *c, obuf *o, const obuf *from) {
    uint8_t *at = obuf_grow(c, o, from->len);
    if (at && from->len) memcpy(at, from->p, from->len);
    return at != NULL;
}

/* Appends source bytes [from, to) to o. */
static bool copy_span(scan *c, obuf *o, uint64_t from, uint64_t to) {
    size_t n = (size_t)(to - from);
    uint8_t *at = obuf_grow(c, o, n);
    if (!at) return false;
    const uint8_t *p;
    size_t avail;
    if ((c->st = ot_imp_src_peek(c->src, from, n, &p, &avail, c->err))) return false;
    if (avail >= n)
        memcpy(at, p, n);
    else if ((c->st = ot_imp_src_read(c->src, from, at, n, c->err)))
        return false;
    return true;
}

/* A varint at *pos (before end), written in as few bytes as its value needs. */
static bool get_varint(scan *c, uint64_t *pos, uint64_t end, uint64_t *v) {
    const uint8_t *p;
    size_t avail;
    if ((c->st = ot_imp_src_peek(c->src, *pos, 10, &p, &avail, c->err))) return false;
    if ((uint64_t)avail > end - *pos) avail = (size_t)(end - *pos);
    uint64_t x = 0;
    for (size_t i = 0; i < 10 && i < avail; i++) {
        if (i == 9 && p[i] > 1) break; /* more than 64 bits */
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            if (i > 0 && p[i] == 0) break; /* padded: protobuf-c may read it otherwise */
            *v = x;
            *pos += i + 1;
            return true;
        }
    }
    return give_up(c);
}

/* Moves *pos past the value of a field of wire type wt (its tag already read). */
static bool skip_value(scan *c, uint64_t *pos, uint64_t end, unsigned wt) {
    uint64_t len = 0;
    switch (wt) {
    case WT_VARINT: return get_varint(c, pos, end, &len);
    case WT_FIXED64: len = 8; break;
    case WT_FIXED32: len = 4; break;
    case WT_LEN:
        if (!get_varint(c, pos, end, &len)) return false;
        break;
    default: return give_up(c); /* groups, and wire types that do not exist */
    }
    if (len > end - *pos) return give_up(c);
    *pos += len;
    return true;
}

static bool scan_message(scan *c, int level, uint64_t pos, uint64_t end, obuf *out);

/* An embedded message at [body, body + len) whose skeleton is built in sub and written
 * to out after its tag (source bytes [tag_at, tag_end)) with its new length. */
static bool nested(scan *c, int level, uint64_t tag_at, uint64_t tag_end, uint64_t body, uint64_t len, obuf *sub,
                   obuf *out) {
    sub->len = 0;
    return scan_message(c, level, body, body + len, sub) && copy_span(c, out, tag_at, tag_end) &&
           put_varint(c, out, sub->len) && put_bytes(c, out, sub);
}

static bool scan_message(scan *c, int level, uint64_t pos, uint64_t end, obuf *out) {
    bool seen_graph = false;
    ot_imp_raw_ref *ref = level == LEVEL_TENSOR ? &c->refs[c->n_refs - 1] : NULL;
    while (pos < end) {
        uint64_t field_at = pos, tag;
        if (!get_varint(c, &pos, end, &tag)) return false;
        uint64_t field = tag >> 3;
        unsigned wt = (unsigned)(tag & 7);
        if (field == 0 || field > 0x1fffffffu) return give_up(c);
        bool structural = wt == WT_LEN && ((level == LEVEL_MODEL && field == FIELD_MODEL_GRAPH) ||
                                           (level == LEVEL_GRAPH && field == FIELD_GRAPH_INITIALIZER) ||
                                           (level == LEVEL_TENSOR && field == FIELD_TENSOR_RAW_DATA));
        if (!structural) {
            if (!skip_value(c, &pos, end, wt) || !copy_span(c, out, field_at, pos)) return false;
            continue;
        }
        uint64_t tag_end = pos, len;
        if (!get_varint(c, &pos, end, &len)) return false;
        if (len > end - pos) return give_up(c);
        if (level == LEVEL_MODEL) {
            /* A second graph field is merged into the first by protobuf-c. */
            if (seen_graph) return give_up(c);
            seen_graph = true;
            obuf graph = {0};
            bool good = nested(c, LEVEL_GRAPH, field_at, tag_end, pos, len, &graph, out);
            free(graph.p);
            if (!good) return false;
        } else if (level == LEVEL_GRAPH) {
            if (c->n_refs == c->cap_refs) {
                size_t cap = c->cap_refs ? c->cap_refs * 2 : 64;
                ot_imp_raw_ref *r = realloc(c->refs, cap * sizeof *r);
                if (!r) {
                    c->st = ot_fail(c->err, OT_E_MEMORY, "%s: out of memory", c->src->name);
                    return false;
                }
                c->refs = r;
                c->cap_refs = cap;
            }
            c->refs[c->n_refs++] = (ot_imp_raw_ref){0};
            if (!nested(c, LEVEL_TENSOR, field_at, tag_end, pos, len, &c->tensor, out)) return false;
        } else {
            /* A second raw_data replaces the first in protobuf-c. */
            if (ref->present) return give_up(c);
            ref->present = true;
            ref->offset = pos;
            ref->len = len;
        }
        pos += len;
    }
    return ok(c);
}

ot_status ot_imp_skeleton(ot_imp_src *src, uint8_t **skel, size_t *skel_len, ot_imp_raw_ref **refs, size_t *n_refs,
                          ot_error *err) {
    *skel = NULL;
    *skel_len = 0;
    *refs = NULL;
    *n_refs = 0;
    scan c = {.src = src, .err = err};
    obuf out = {0};
    if (!scan_message(&c, LEVEL_MODEL, 0, src->size, &out) || !ok(&c)) {
        free(out.p);
        free(c.refs);
        free(c.tensor.p);
        return c.st; /* OT_OK when it only gave up */
    }
    free(c.tensor.p);
    /* protobuf-c reads an empty buffer as an empty message; give it a valid pointer. */
    if (!out.p && !(out.p = malloc(1))) {
        free(c.refs);
        return ot_fail(err, OT_E_MEMORY, "%s: out of memory", src->name);
    }
    *skel = out.p;
    *skel_len = out.len;
    *refs = c.refs;
    *n_refs = c.n_refs;
    return OT_OK;
}
