/* wire_check.c — one iterative walk over a ModelProto's (or TensorProto's) wire format, before protobuf-c
 * unpacks it, refusing what protobuf-c would mishandle:
 *
 *  - messages nested deeper than OT_IMP_MAX_NESTING: protobuf-c unpacks recursively
 *    with no depth limit, so a 34 KB file of TypeProto nested 5,000 deep (or If inside
 *    If) overflows the stack. The walk keeps its own stack on the heap.
 *  - a NUL byte inside a string field (op_type, domain, names, external data keys and
 *    values, ...): protobuf-c hands strings over as C strings, cut at the first NUL, so
 *    "Relu\0x" would run as Relu and a location "w.bin\0../x" would read w.bin.
 *
 * The walk is driven by protobuf-c's own descriptors (which field is a message, which
 * a string), so it follows exactly the schema protobuf-c will unpack. Bytes fields and
 * packed arrays (weights) are skipped by their length, so a large model costs a few
 * varint reads per field. Bytes that do not decode are left for protobuf-c to refuse
 * with its own message: a message whose tags break off is abandoned there (its
 * extent is known from its parent), and the walk goes on with the parent's fields,
 * so every part protobuf-c could recurse into is checked. */
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };
enum { MAX_COUNTED_FIELDS = 32, NAME_SHOWN = 64 };

typedef struct frame {
    const ProtobufCMessageDescriptor *desc;
    uint64_t end;
    const char *field;   /* the field of the parent holding this message (NULL: the model) */
    int64_t index;       /* its position when repeated, else -1 */
    uint64_t name_at;    /* this message's "name" string, when seen so far */
    uint32_t name_len;
    bool has_name;
    uint32_t count[MAX_COUNTED_FIELDS]; /* occurrences so far per field, for indices */
} frame;

typedef struct walk {
    ot_imp_src *src;
    ot_error *err;
    ot_status st;
    frame *stack;
    int depth; /* frames in use */
} walk;

/* A varint at *pos (before end); false when it does not decode. */
static bool get_varint(walk *w, uint64_t *pos, uint64_t end, uint64_t *v) {
    const uint8_t *p;
    size_t avail;
    if ((w->st = ot_imp_src_peek(w->src, *pos, 10, &p, &avail, w->err))) return false;
    if ((uint64_t)avail > end - *pos) avail = (size_t)(end - *pos);
    uint64_t x = 0;
    for (size_t i = 0; i < 10 && i < avail; i++) {
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = x;
            *pos += i + 1;
            return true;
        }
    }
    return false;
}

/* Where the first NUL in [at, at + len) lies, or len when there is none. */
static uint64_t find_nul(walk *w, uint64_t at, uint64_t len) {
    uint64_t done = 0;
    while (done < len) {
        const uint8_t *p;
        size_t avail;
        if ((w->st = ot_imp_src_peek(w->src, at + done, (size_t)(len - done), &p, &avail, w->err))) return len;
        if (!avail) return len;
        if ((uint64_t)avail > len - done) avail = (size_t)(len - done);
        const uint8_t *z = memchr(p, 0, avail);
        if (z) return done + (uint64_t)(z - p);
        done += avail;
    }
    return len;
}

/* Appends the first n source bytes at `at` to buf as printable text. */
static void append_text(walk *w, char *buf, size_t cap, uint64_t at, uint64_t n) {
    size_t used = strlen(buf);
    char tmp[NAME_SHOWN + 1] = {0};
    if (n > NAME_SHOWN) n = NAME_SHOWN;
    const uint8_t *p;
    size_t avail;
    if (ot_imp_src_peek(w->src, at, (size_t)n, &p, &avail, NULL) || avail < n) return;
    for (uint64_t i = 0; i < n; i++) tmp[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '?';
    snprintf(buf + used, cap - used, "%s", tmp);
}

static void append_frame(walk *w, char *buf, size_t cap, const frame *f) {
    size_t used = strlen(buf);
    if (!f->field) return;
    if (f->index >= 0) snprintf(buf + used, cap - used, "%s%s[%lld]", used ? "." : "", f->field, (long long)f->index);
    else snprintf(buf + used, cap - used, "%s%s", used ? "." : "", f->field);
    if (f->has_name && f->name_len) {
        used = strlen(buf);
        snprintf(buf + used, cap - used, "('");
        append_text(w, buf, cap, f->name_at, f->name_len);
        used = strlen(buf);
        snprintf(buf + used, cap - used, "%s')", f->name_len > NAME_SHOWN ? "..." : "");
    }
}

/* The path of the innermost message, e.g. "graph.node[3]('r1').attribute[0]"; a deep
 * path shows its first and last few steps. */
static void path_of(walk *w, char *buf, size_t cap) {
    buf[0] = 0;
    enum { HEAD = 5, TAIL = 3 };
    for (int i = 1; i < w->depth; i++) {
        if (w->depth - 1 > HEAD + TAIL && i == HEAD + 1) {
            size_t used = strlen(buf);
            snprintf(buf + used, cap - used, ".[%d more]", w->depth - 1 - HEAD - TAIL);
            i = w->depth - TAIL - 1;
            continue;
        }
        append_frame(w, buf, cap, &w->stack[i]);
    }
    if (!buf[0]) snprintf(buf, cap, "top level");
}

/* A string field at [at, at + len) of the top frame: a NUL in it is refused. */
static bool check_string(walk *w, const ProtobufCFieldDescriptor *fd, uint64_t at, uint64_t len) {
    frame *top = &w->stack[w->depth - 1];
    uint64_t nul = find_nul(w, at, len);
    if (w->st) return false;
    if (!strcmp(fd->name, "name") && len <= UINT32_MAX) {
        top->name_at = at;
        top->name_len = (uint32_t)(nul < len ? nul : len);
        top->has_name = true;
    }
    if (nul == len) return true;
    char path[512], text[NAME_SHOWN * 2] = {0};
    path_of(w, path, sizeof path);
    append_text(w, text, sizeof text, at, nul);
    w->st = ot_fail(w->err, OT_E_MODEL,
                    "%s: %s (%s): string field '%s' has a NUL byte after \"%s\" (byte %llu of %llu); protobuf-c "
                    "would cut it there and read a different string: a corrupt or crafted model",
                    w->src->name, path, top->desc->name, fd->name, text, (unsigned long long)nul,
                    (unsigned long long)len);
    return false;
}

static bool push(walk *w, const ProtobufCFieldDescriptor *fd, uint64_t end) {
    frame *top = &w->stack[w->depth - 1];
    size_t fi = (size_t)(fd - top->desc->fields);
    int64_t index = -1;
    if (fd->label == PROTOBUF_C_LABEL_REPEATED)
        index = fi < MAX_COUNTED_FIELDS ? (int64_t)top->count[fi] : 0;
    if (fi < MAX_COUNTED_FIELDS) top->count[fi]++;
    if (w->depth == OT_IMP_MAX_NESTING) {
        char path[512];
        path_of(w, path, sizeof path);
        w->st = ot_fail(w->err, OT_E_PARSE,
                        "%s: protobuf messages nested more than %d deep (%s inside %s, at %s); onnxtrain reads at "
                        "most %d levels (a corrupt or crafted model)",
                        w->src->name, OT_IMP_MAX_NESTING, ((const ProtobufCMessageDescriptor *)fd->descriptor)->name,
                        top->desc->name, path, OT_IMP_MAX_NESTING);
        return false;
    }
    frame *f = &w->stack[w->depth++];
    memset(f, 0, sizeof *f);
    f->desc = fd->descriptor;
    f->end = end;
    f->field = fd->name;
    f->index = index;
    return true;
}

/* One field of the top frame, at *pos; false when the frame's bytes do not decode
 * (protobuf-c refuses them) or when the walk failed (w->st). */
static bool step(walk *w, uint64_t *pos) {
    frame *top = &w->stack[w->depth - 1];
    uint64_t tag, len = 0;
    if (!get_varint(w, pos, top->end, &tag)) return false;
    unsigned wt = (unsigned)(tag & 7);
    uint64_t num = tag >> 3;
    const ProtobufCFieldDescriptor *fd =
        num && num <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(top->desc, (unsigned)num) : NULL;
    switch (wt) {
    case WT_VARINT: return get_varint(w, pos, top->end, &len);
    case WT_FIXED64: len = 8; break;
    case WT_FIXED32: len = 4; break;
    case WT_LEN:
        if (!get_varint(w, pos, top->end, &len)) return false;
        if (len > top->end - *pos) return false;
        /* the walk goes on inside the message, at *pos */
        if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) return push(w, fd, *pos + len);
        if (fd && fd->type == PROTOBUF_C_TYPE_STRING && !check_string(w, fd, *pos, len)) return false;
        break;
    default: return false; /* groups, and wire types that do not exist */
    }
    if (len > top->end - *pos) return false;
    *pos += len;
    return true;
}

ot_status ot_imp_wire_check(ot_imp_src *src, const ProtobufCMessageDescriptor *root, ot_error *err) {
    walk w = {.src = src, .err = err};
    w.stack = malloc(OT_IMP_MAX_NESTING * sizeof *w.stack);
    if (!w.stack) return ot_fail(err, OT_E_MEMORY, "%s: out of memory", src->name);
    memset(&w.stack[0], 0, sizeof w.stack[0]);
    w.stack[0].desc = root;
    w.stack[0].end = src->size;
    w.stack[0].index = -1;
    w.depth = 1;
    uint64_t pos = 0;
    while (w.depth > 0 && !w.st) {
        frame *top = &w.stack[w.depth - 1];
        if (pos >= top->end) {
            pos = top->end;
            w.depth--;
            continue;
        }
        int before = w.depth;
        if (step(&w, &pos) || w.st) continue;
        /* Bytes that do not decode: protobuf-c refuses this message; skip the rest. */
        pos = w.stack[before - 1].end;
        w.depth = before - 1;
    }
    free(w.stack);
    return w.st;
}
