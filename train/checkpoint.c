/* checkpoint.c — the training checkpoint file (see checkpoint.h): encoding and
 * decoding with a checksum, atomic writes, keeping the last K in a folder, finding
 * the newest valid one, and comparing the settings a resumed run must share. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/atomic_file.h"
#include "ir/input_file.h"
#include "train/checkpoint.h"

static const char CKPT_MAGIC[8] = {'O', 'N', 'N', 'X', 'T', 'C', 'K', 'P'};
enum { CKPT_HEADER = 8 + 4 + 4 + 8 + 8 };

uint64_t ot_fnv1a64(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

void ot_checkpoint_free(ot_checkpoint *c) {
    if (!c) return;
    for (int i = 0; i < c->n_tensors; i++) {
        free(c->tensors[i].name);
        free(c->tensors[i].data);
    }
    free(c->tensors);
    memset(c, 0, sizeof *c);
}

ot_status ot_checkpoint_add(ot_checkpoint *c, const char *name, ot_ckpt_kind kind, ot_dtype dtype,
                            const ot_shape *shape, const void *data, size_t nbytes, ot_error *err) {
    if (c->n_tensors == c->cap_tensors) {
        int cap = c->cap_tensors ? 2 * c->cap_tensors : 16;
        ot_ckpt_tensor *t = realloc(c->tensors, (size_t)cap * sizeof *t);
        if (!t) return ot_fail(err, OT_E_MEMORY, "checkpoint: out of memory");
        c->tensors = t;
        c->cap_tensors = cap;
    }
    ot_ckpt_tensor *t = &c->tensors[c->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = ot_strdup(name ? name : "");
    t->data = malloc(nbytes ? nbytes : 1);
    if (!t->name || !t->data) {
        free(t->name);
        free(t->data);
        return ot_fail(err, OT_E_MEMORY, "checkpoint: out of memory copying '%s' (%zu bytes)", name, nbytes);
    }
    if (nbytes) memcpy(t->data, data, nbytes);
    t->kind = kind;
    t->dtype = dtype;
    t->shape = *shape;
    for (int k = 0; k < OT_MAX_RANK; k++)
        t->shape.sym[k] = -1;
    t->nbytes = nbytes;
    c->n_tensors++;
    return OT_OK;
}

ot_status ot_checkpoint_add_ref(ot_checkpoint *c, const char *name, ot_ckpt_kind kind, ot_dtype dtype,
                                const ot_shape *shape, size_t nbytes, ot_error *err) {
    ot_status st = ot_checkpoint_add(c, name, kind, dtype, shape, NULL, 0, err);
    if (st) return st;
    ot_ckpt_tensor *t = &c->tensors[c->n_tensors - 1];
    free(t->data);
    t->data = NULL;
    t->nbytes = nbytes;
    return OT_OK;
}

const ot_ckpt_tensor *ot_checkpoint_find_tensor(const ot_checkpoint *c, const char *name) {
    for (int i = 0; i < c->n_tensors; i++)
        if (!strcmp(c->tensors[i].name, name)) return &c->tensors[i];
    return NULL;
}

/* ---- encoding ------------------------------------------------------------------ */

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void put(wbuf *w, const void *src, size_t n) {
    if (w->oom) return;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->n + n)
            cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (!p) {
            w->oom = true;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->n, src, n);
    w->n += n;
}

static void put_u64(wbuf *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 8);
}
static void put_u32(wbuf *w, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 4);
}
static void put_i64(wbuf *w, int64_t v) { put_u64(w, (uint64_t)v); }
static void put_f64(wbuf *w, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    put_u64(w, u);
}
static void put_str(wbuf *w, const char *s) {
    size_t n = strlen(s);
    put_u32(w, (uint32_t)n);
    put(w, s, n);
}

/* The settings, field by field; the same order in put_settings and get_settings. */
static void put_settings(wbuf *w, const ot_ckpt_settings *s) {
    put_i64(w, s->batch_size);
    put_i64(w, s->accum);
    put_i64(w, s->n_samples);
    put_u64(w, s->seed);
    put_u32(w, (uint32_t)s->no_shuffle | (uint32_t)s->keep_partial << 1);
    put_u32(w, (uint32_t)s->loss_kind);
    const ot_optim_config *o = &s->optim;
    put_u32(w, (uint32_t)o->kind);
    put_f64(w, o->lr);
    put_f64(w, o->momentum);
    put_u32(w, o->nesterov);
    put_f64(w, o->weight_decay);
    put_f64(w, o->beta1);
    put_f64(w, o->beta2);
    put_f64(w, o->eps);
    put_f64(w, o->clip_grad_norm);
    put_u32(w, (uint32_t)o->schedule);
    put_i64(w, o->warmup_steps);
    put_i64(w, o->total_steps);
    put_str(w, s->remat);
    put_i64(w, s->memory_budget);
}

/* The payload's fields before the tensors. */
static void put_front(wbuf *w, const ot_checkpoint *c) {
    put_u64(w, c->fingerprint);
    put_i64(w, c->step);
    put_i64(w, c->micro_batches);
    put_i64(w, c->epoch);
    put_i64(w, c->epoch_batch);
    put_settings(w, &c->set);
    put_u32(w, (uint32_t)c->n_tensors);
}

/* A tensor's fields before its bytes. */
static void put_tensor_head(wbuf *w, const ot_ckpt_tensor *t) {
    put_str(w, t->name);
    put_u32(w, (uint32_t)t->kind);
    put_u32(w, (uint32_t)t->dtype);
    put_u32(w, (uint32_t)t->shape.rank);
    for (int k = 0; k < t->shape.rank; k++)
        put_i64(w, t->shape.dim[k]);
    put_u64(w, t->nbytes);
}

ot_status ot_checkpoint_encode(const ot_checkpoint *c, uint8_t **buf, size_t *len, ot_error *err) {
    for (int i = 0; i < c->n_tensors; i++)
        if (!c->tensors[i].data && c->tensors[i].nbytes)
            return ot_fail(err, OT_E_INTERNAL, "checkpoint: tensor '%s' holds no data to encode", c->tensors[i].name);
    wbuf w = {0};
    uint8_t zero[CKPT_HEADER] = {0};
    put(&w, zero, CKPT_HEADER); /* filled in below, once the payload is known */
    put_front(&w, c);
    for (int i = 0; i < c->n_tensors; i++) {
        const ot_ckpt_tensor *t = &c->tensors[i];
        put_tensor_head(&w, t);
        put(&w, t->data, t->nbytes);
    }
    if (w.oom) {
        free(w.p);
        return ot_fail(err, OT_E_MEMORY, "checkpoint: out of memory encoding %d tensors", c->n_tensors);
    }
    size_t payload = w.n - CKPT_HEADER;
    wbuf h = {0};
    put(&h, CKPT_MAGIC, 8);
    put_u32(&h, OT_CKPT_VERSION);
    put_u32(&h, 0);
    put_u64(&h, payload);
    put_u64(&h, ot_fnv1a64(OT_FNV_OFFSET, w.p + CKPT_HEADER, payload));
    if (h.oom) {
        free(w.p);
        return ot_fail(err, OT_E_MEMORY, "checkpoint: out of memory");
    }
    memcpy(w.p, h.p, CKPT_HEADER);
    free(h.p);
    *buf = w.p;
    *len = w.n;
    return OT_OK;
}

/* ---- decoding ------------------------------------------------------------------ */

typedef struct rbuf {
    const uint8_t *p;
    size_t n, at;
    bool short_read;
} rbuf;

static bool get(rbuf *r, void *dst, size_t n) {
    if (r->short_read || n > r->n - r->at) {
        r->short_read = true;
        if (dst) memset(dst, 0, n);
        return false;
    }
    if (dst) memcpy(dst, r->p + r->at, n);
    r->at += n;
    return true;
}
static uint64_t get_u64(rbuf *r) {
    uint8_t b[8];
    if (!get(r, b, 8)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}
static uint32_t get_u32(rbuf *r) {
    uint8_t b[4];
    if (!get(r, b, 4)) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)b[i] << (8 * i);
    return v;
}
static int64_t get_i64(rbuf *r) { return (int64_t)get_u64(r); }
static double get_f64(rbuf *r) {
    uint64_t u = get_u64(r);
    double v;
    memcpy(&v, &u, 8);
    return v;
}
/* A string into a fresh buffer (NULL on a short read or no memory); *len gets its
 * length as stored, which differs from strlen when it holds a NUL byte. */
static char *get_str(rbuf *r, size_t *len) {
    uint32_t n = get_u32(r);
    if (r->short_read || n > r->n - r->at) {
        r->short_read = true;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    memcpy(s, r->p + r->at, n);
    s[n] = 0;
    r->at += n;
    *len = n;
    return s;
}

/* Reads the settings; a flag that is neither 0 nor 1 (the writer writes nothing
 * else) or a remat name that does not fit is reported through *bad, the field's name. */
static void get_settings(rbuf *r, ot_ckpt_settings *s, const char **bad) {
    *bad = NULL;
    s->batch_size = get_i64(r);
    s->accum = get_i64(r);
    s->n_samples = get_i64(r);
    s->seed = get_u64(r);
    uint32_t flags = get_u32(r);
    if (flags > 3) *bad = "no_shuffle (flags, not 0 to 3)";
    s->no_shuffle = (flags & 1) != 0;
    s->keep_partial = (flags & 2) != 0;
    s->loss_kind = (int)get_u32(r);
    ot_optim_config *o = &s->optim;
    o->kind = (ot_optim_kind)get_u32(r);
    o->lr = get_f64(r);
    o->momentum = get_f64(r);
    uint32_t nesterov = get_u32(r);
    if (nesterov > 1 && !*bad) *bad = "nesterov (a flag, not 0 or 1)";
    o->nesterov = nesterov != 0;
    o->weight_decay = get_f64(r);
    o->beta1 = get_f64(r);
    o->beta2 = get_f64(r);
    o->eps = get_f64(r);
    o->clip_grad_norm = get_f64(r);
    o->schedule = (ot_schedule_kind)get_u32(r);
    o->warmup_steps = get_i64(r);
    o->total_steps = get_i64(r);
    size_t remat_len = 0;
    char *remat = get_str(r, &remat_len);
    if (remat && (remat_len >= sizeof s->remat || strlen(remat) != remat_len) && !*bad)
        *bad = "remat (the policy name is too long or holds a NUL byte)";
    snprintf(s->remat, sizeof s->remat, "%s", remat ? remat : "");
    free(remat);
    s->memory_budget = get_i64(r);
}

/* One tensor record: str name, u32 kind, u32 dtype, u32 rank, i64 dims, u64 nbytes,
 * the bytes. Every field is checked before anything is allocated for it. */
static ot_status get_tensor(rbuf *r, uint32_t i, const char *what, ot_checkpoint *c, ot_error *err) {
    size_t name_len = 0;
    char *name = get_str(r, &name_len);
    uint32_t kind = get_u32(r), dt = get_u32(r), rank = get_u32(r);
    ot_status st = OT_OK;
    if (!name) return ot_fail(err, OT_E_DATA, "%s: tensor %u: truncated name", what, i);
    if (!name_len || strlen(name) != name_len) {
        st = ot_fail(err, OT_E_DATA, "%s: tensor %u: name %s", what, i, name_len ? "holds a NUL byte" : "is empty");
        goto done;
    }
    if (kind > OT_CKPT_OPT_STATE || !ot_dtype_supported((ot_dtype)dt) || rank > OT_MAX_RANK) {
        st = ot_fail(err, OT_E_DATA, "%s: tensor '%s': %s %u is not valid", what, name,
                     kind > OT_CKPT_OPT_STATE ? "kind" : rank > OT_MAX_RANK ? "rank (above 8)" : "dtype",
                     kind > OT_CKPT_OPT_STATE ? kind : rank > OT_MAX_RANK ? rank : dt);
        goto done;
    }
    int64_t dims[OT_MAX_RANK] = {0};
    for (uint32_t k = 0; k < rank; k++)
        if ((dims[k] = get_i64(r)) < 0 && !r->short_read) {
            st = ot_fail(err, OT_E_DATA, "%s: tensor '%s': negative dim %lld", what, name, (long long)dims[k]);
            goto done;
        }
    ot_shape shape = ot_shape_make((int)rank, dims);
    uint64_t nbytes = get_u64(r);
    int64_t numel = ot_shape_numel(&shape);
    size_t esize = ot_dtype_size((ot_dtype)dt);
    /* numel * esize may wrap: compare by division */
    if (r->short_read || nbytes > r->n - r->at || numel < 0 || nbytes % esize || (uint64_t)numel != nbytes / esize) {
        st = ot_fail(err, OT_E_DATA, "%s: tensor '%s': inconsistent dtype, shape and size", what, name);
        goto done;
    }
    if ((st = ot_checkpoint_add(c, name, (ot_ckpt_kind)kind, (ot_dtype)dt, &shape, r->p + r->at, (size_t)nbytes, err)))
        goto done;
    r->at += (size_t)nbytes;
done:
    free(name);
    return st;
}

ot_status ot_checkpoint_decode(const uint8_t *buf, size_t len, const char *what, ot_checkpoint *out, ot_error *err) {
    ot_status st = OT_OK;
    ot_checkpoint c = {0};
    memset(out, 0, sizeof *out);
    if (len < CKPT_HEADER || memcmp(buf, CKPT_MAGIC, 8))
        return ot_fail(err, OT_E_DATA, "%s: not an onnxtrain checkpoint (%s)", what,
                       len < 8 ? "file too short" : "no ONNXTCKP magic");
    rbuf r = {.p = buf, .n = len, .at = 8};
    uint32_t version = get_u32(&r);
    uint32_t reserved = get_u32(&r);
    uint64_t payload = get_u64(&r), sum = get_u64(&r);
    if (version != OT_CKPT_VERSION)
        return ot_fail(err, OT_E_DATA, "%s: checkpoint format version %u; this onnxtrain reads version %d", what,
                       version, OT_CKPT_VERSION);
    if (reserved != 0)
        return ot_fail(err, OT_E_DATA, "%s: field 'reserved' of the header is %u, not 0: not a checkpoint this "
                       "onnxtrain wrote", what, reserved);
    if (payload != len - CKPT_HEADER)
        return ot_fail(
            err, OT_E_DATA,
            "%s: truncated or padded checkpoint: the header announces %llu payload bytes, the file holds %zu", what,
            (unsigned long long)payload, len - CKPT_HEADER);
    if (ot_fnv1a64(OT_FNV_OFFSET, buf + CKPT_HEADER, (size_t)payload) != sum)
        return ot_fail(err, OT_E_DATA,
                       "%s: corrupted checkpoint: the checksum (FNV-1a 64) of its payload does not match", what);
    c.fingerprint = get_u64(&r);
    c.step = get_i64(&r);
    c.micro_batches = get_i64(&r);
    c.epoch = get_i64(&r);
    c.epoch_batch = get_i64(&r);
    const char *bad = NULL;
    get_settings(&r, &c.set, &bad);
    if (bad && !r.short_read) {
        st = ot_fail(err, OT_E_DATA, "%s: field '%s' of the settings is not valid", what, bad);
        goto fail;
    }
    uint32_t n = get_u32(&r);
    /* a record takes at least 24 bytes (empty name, rank 0): a count the bytes cannot hold is refused here,
     * not after allocating for it */
    if (!r.short_read && n > (r.n - r.at) / 24) {
        st = ot_fail(err, OT_E_DATA, "%s: field 'tensor count' is %u, more than the %zu payload bytes left can hold",
                     what, n, r.n - r.at);
        goto fail;
    }
    for (uint32_t i = 0; i < n && !r.short_read; i++)
        if ((st = get_tensor(&r, i, what, &c, err))) goto fail;
    if (r.short_read || r.at != r.n) {
        st = ot_fail(err, OT_E_DATA, "%s: malformed checkpoint payload (%s)", what,
                     r.short_read ? "ends early" : "trailing bytes");
        goto fail;
    }
    if ((st = ot_checkpoint_validate(&c, what, err))) goto fail;
    *out = c;
    return OT_OK;
fail:
    ot_checkpoint_free(&c);
    return st;
}

/* ---- files ----------------------------------------------------------------------- */

/* One pass over the payload: hashing it (f NULL) or writing it to f. */
typedef struct ckpt_pass {
    FILE *f;
    uint64_t hash, len;
    uint8_t *stage;
} ckpt_pass;

static void emit(ckpt_pass *p, const void *data, size_t n) {
    if (p->f) fwrite(data, 1, n, p->f); /* a failure is reported by the commit */
    else p->hash = ot_fnv1a64(p->hash, data, n);
    p->len += n;
}

static ot_status emit_tensor_data(const ot_checkpoint *c, int i, ckpt_pass *p, ot_error *err) {
    const ot_ckpt_tensor *t = &c->tensors[i];
    const ot_ckpt_source *src = &c->source;
    const void *host = t->data ? t->data : src->host_ptr ? src->host_ptr(src->user, i) : NULL;
    if (host || !t->nbytes) {
        if (t->nbytes) emit(p, host, t->nbytes);
        return OT_OK;
    }
    if (!src->read) return ot_fail(err, OT_E_INTERNAL, "checkpoint: tensor '%s' has no data and no source", t->name);
    for (size_t off = 0; off < t->nbytes;) {
        size_t m = t->nbytes - off < OT_CKPT_STAGE_BYTES ? t->nbytes - off : OT_CKPT_STAGE_BYTES;
        ot_status st = src->read(src->user, i, off, p->stage, m, err);
        if (st) return st;
        emit(p, p->stage, m);
        off += m;
    }
    return OT_OK;
}

static ot_status emit_payload(const ot_checkpoint *c, ckpt_pass *p, ot_error *err) {
    wbuf w = {0};
    ot_status st = OT_OK;
    put_front(&w, c);
    for (int i = 0;; i++) {
        if (i < c->n_tensors) put_tensor_head(&w, &c->tensors[i]);
        if (w.oom) {
            st = ot_fail(err, OT_E_MEMORY, "checkpoint: out of memory");
            break;
        }
        emit(p, w.p, w.n);
        w.n = 0;
        if (i == c->n_tensors || (st = emit_tensor_data(c, i, p, err))) break;
    }
    free(w.p);
    return st;
}

ot_status ot_checkpoint_write(const ot_checkpoint *c, const char *path, ot_error *err) {
    ckpt_pass p = {.hash = OT_FNV_OFFSET};
    ot_atomic_file *af = NULL;
    ot_status st = OT_OK;
    if (!(p.stage = malloc(OT_CKPT_STAGE_BYTES))) return ot_fail(err, OT_E_MEMORY, "checkpoint %s: out of memory", path);
    if ((st = emit_payload(c, &p, err))) goto fail; /* the checksum the header needs */
    wbuf h = {0};
    put(&h, CKPT_MAGIC, 8);
    put_u32(&h, OT_CKPT_VERSION);
    put_u32(&h, 0);
    put_u64(&h, p.len);
    put_u64(&h, p.hash);
    uint8_t header[CKPT_HEADER];
    if (!h.oom) memcpy(header, h.p, CKPT_HEADER);
    free(h.p);
    if (h.oom) {
        st = ot_fail(err, OT_E_MEMORY, "checkpoint %s: out of memory", path);
        goto fail;
    }
    if ((st = ot_atomic_open(path, &af, err))) goto fail_io;
    fwrite(header, 1, CKPT_HEADER, ot_atomic_stream(af));
    ckpt_pass w = {.f = ot_atomic_stream(af), .stage = p.stage};
    if ((st = emit_payload(c, &w, err))) goto fail;
    st = ot_atomic_commit(af, err);
    af = NULL;
fail_io:
    if (st && err) ot_error_prefix(err, "checkpoint ");
fail:
    ot_atomic_abort(af);
    free(p.stage);
    return st;
}

ot_status ot_checkpoint_read(const char *path, ot_checkpoint *out, ot_error *err) {
    memset(out, 0, sizeof *out);
    uint8_t *buf = NULL;
    size_t len = 0;
    /* Regular files only, opened without waiting (ir/input_file.h): a FIFO given as
     * --resume, or named ckpt-9.otc in a resume folder, is refused, not waited on. */
    ot_status st = ot_input_read_all(path, NULL, 0, &buf, &len, err);
    if (st) return err ? ot_error_prefix(err, "checkpoint ") : st;
    st = ot_checkpoint_decode(buf, len, path, out, err);
    free(buf);
    return st;
}

/* ---- folders ------------------------------------------------------------------- */

/* Steps of the ckpt-<step>.otc files in dir, newest first (caller frees). */
static ot_status list_steps(const char *dir, int64_t **steps, int *n, ot_error *err) {
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return ot_fail(err, OT_E_IO, "checkpoint folder %s: cannot open: %s", dir, strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long long step;
        char tail[8];
        /* exactly ckpt-<digits>.otc: "%7s" would also accept .otc.tmp, so check the tail */
        if (sscanf(e->d_name, "ckpt-%lld%7s", &step, tail) != 2 || strcmp(tail, ".otc") || step < 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *s = realloc(*steps, (size_t)cap * sizeof *s);
            if (!s) {
                closedir(d);
                free(*steps);
                *steps = NULL;
                return ot_fail(err, OT_E_MEMORY, "out of memory listing %s", dir);
            }
            *steps = s;
        }
        (*steps)[(*n)++] = step;
    }
    closedir(d);
    for (int i = 1; i < *n; i++) /* insertion sort, newest first: a handful of files */
        for (int j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) {
            int64_t t = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1];
            (*steps)[j - 1] = t;
        }
    return OT_OK;
}

ot_status ot_checkpoint_save_dir(const ot_checkpoint *c, const char *dir, int keep, char *path_out, size_t cap,
                                 ot_error *err) {
    if (keep <= 0) keep = OT_CKPT_DEFAULT_KEEP;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return ot_fail(err, OT_E_IO, "--checkpoint-dir %s: cannot create the folder: %s", dir, strerror(errno));
    char path[4096];
    snprintf(path, sizeof path, "%s/ckpt-%lld.otc", dir, (long long)c->step);
    ot_status st = ot_checkpoint_write(c, path, err);
    if (st) return st;
    if (path_out && cap) snprintf(path_out, cap, "%s", path);
    int64_t *steps = NULL;
    int n = 0;
    if ((st = list_steps(dir, &steps, &n, err))) return st;
    for (int i = keep; i < n; i++) {
        snprintf(path, sizeof path, "%s/ckpt-%lld.otc", dir, (long long)steps[i]);
        (void)unlink(path); /* best effort: an old checkpoint left behind harms nothing */
    }
    free(steps);
    if (n > keep) (void)ot_atomic_sync_folder(path, NULL); /* best effort, as the removals */
    return OT_OK;
}

ot_status ot_checkpoint_load_latest(const char *dir_or_file, ot_checkpoint *out, char *path_out, size_t cap,
                                    ot_error *skipped, ot_error *err) {
    struct stat sb;
    memset(out, 0, sizeof *out);
    if (stat(dir_or_file, &sb) != 0) return ot_fail(err, OT_E_IO, "--resume %s: no such file or folder", dir_or_file);
    if (!S_ISDIR(sb.st_mode)) {
        if (path_out && cap) snprintf(path_out, cap, "%s", dir_or_file);
        return ot_checkpoint_read(dir_or_file, out, err);
    }
    int64_t *steps = NULL;
    int n = 0;
    ot_status st = list_steps(dir_or_file, &steps, &n, err);
    if (st) return st;
    if (n == 0) {
        free(steps);
        return ot_fail(err, OT_E_IO, "--resume %s: the folder holds no checkpoint (ckpt-<step>.otc)", dir_or_file);
    }
    ot_error first = {0};
    for (int i = 0; i < n; i++) {
        char path[4096];
        ot_error e = {0};
        snprintf(path, sizeof path, "%s/ckpt-%lld.otc", dir_or_file, (long long)steps[i]);
        st = ot_checkpoint_read(path, out, &e);
        if (!st) {
            if (path_out && cap) snprintf(path_out, cap, "%s", path);
            if (skipped) *skipped = first;
            free(steps);
            return OT_OK;
        }
        if (!first.code) first = e;
    }
    free(steps);
    return ot_fail(err, first.code, "--resume %s: no readable checkpoint; the newest: %s", dir_or_file, first.msg);
}

/* ---- settings -------------------------------------------------------------------- */

ot_status ot_checkpoint_check_settings(const ot_ckpt_settings *run, const ot_ckpt_settings *ck, const char *path,
                                       ot_error *err) {
    char diff[900] = "";
    size_t at = 0;
#define DIFF(cond, ...)                                                                                                \
    do {                                                                                                               \
        if ((cond) && at < sizeof diff) {                                                                              \
            at += (size_t)snprintf(diff + at, sizeof diff - at, at ? "; " : "");                                       \
            if (at < sizeof diff) at += (size_t)snprintf(diff + at, sizeof diff - at, __VA_ARGS__);                    \
        }                                                                                                              \
    } while (0)
    const ot_optim_config *a = &run->optim, *b = &ck->optim;
    DIFF(run->batch_size != ck->batch_size, "--batch-size %lld (checkpoint: %lld)", (long long)run->batch_size,
         (long long)ck->batch_size);
    DIFF(run->accum != ck->accum, "--accum %lld (checkpoint: %lld)", (long long)run->accum, (long long)ck->accum);
    DIFF(run->n_samples != ck->n_samples, "%lld training samples (checkpoint: %lld)", (long long)run->n_samples,
         (long long)ck->n_samples);
    DIFF(run->seed != ck->seed, "--seed %llu (checkpoint: %llu)", (unsigned long long)run->seed,
         (unsigned long long)ck->seed);
    DIFF(run->no_shuffle != ck->no_shuffle, "shuffling %s (checkpoint: %s)", run->no_shuffle ? "off" : "on",
         ck->no_shuffle ? "off" : "on");
    DIFF(run->keep_partial != ck->keep_partial, "the last partial batch %s (checkpoint: %s)",
         run->keep_partial ? "kept" : "dropped (--drop-last)", ck->keep_partial ? "kept" : "dropped: add --drop-last");
    DIFF(run->loss_kind != ck->loss_kind, "a different --loss");
    DIFF(a->kind != b->kind, "--optimizer %s (checkpoint: %s)", ot_optim_kind_name(a->kind),
         ot_optim_kind_name(b->kind));
    DIFF(a->lr != b->lr, "--lr %g (checkpoint: %g)", a->lr, b->lr);
    DIFF(a->momentum != b->momentum, "--momentum %g (checkpoint: %g)", a->momentum, b->momentum);
    DIFF(a->nesterov != b->nesterov, "--nesterov %s (checkpoint: %s)", a->nesterov ? "on" : "off",
         b->nesterov ? "on" : "off");
    DIFF(a->weight_decay != b->weight_decay, "--weight-decay %g (checkpoint: %g)", a->weight_decay, b->weight_decay);
    DIFF(a->beta1 != b->beta1 || a->beta2 != b->beta2, "betas %g,%g (checkpoint: %g,%g)", a->beta1, a->beta2, b->beta1,
         b->beta2);
    DIFF(a->eps != b->eps, "--eps %g (checkpoint: %g)", a->eps, b->eps);
    DIFF(a->clip_grad_norm != b->clip_grad_norm, "--clip-grad-norm %g (checkpoint: %g)", a->clip_grad_norm,
         b->clip_grad_norm);
    DIFF(a->schedule != b->schedule, "--schedule %s (checkpoint: %s)", ot_schedule_kind_name(a->schedule),
         ot_schedule_kind_name(b->schedule));
    DIFF(a->warmup_steps != b->warmup_steps, "--warmup-steps %lld (checkpoint: %lld)", (long long)a->warmup_steps,
         (long long)b->warmup_steps);
    DIFF(a->schedule == OT_SCHED_COSINE && a->total_steps != b->total_steps,
         "cosine schedule over %lld steps (checkpoint: %lld)", (long long)a->total_steps, (long long)b->total_steps);
#undef DIFF
    if (!at) return OT_OK;
    return ot_fail(err, OT_E_DATA,
                   "%s: written with different training settings, so resuming would not continue the same run: %s. "
                   "Resume with the original settings or start a new run without --resume",
                   path, diff);
}
