/* lora_peft.c — LoRA adapters in PEFT's folder format (`--lora-save DIR/`,
 * `--lora-load DIR/`): adapter_model.safetensors and adapter_config.json, as
 * `PeftModel.from_pretrained` reads them (docs/training.md "Adapters for PEFT").
 *
 * Names: an adapted initializer "<module>.weight" (the names torch.onnx's exporters
 * keep for a module's parameter, e.g. transformer.h.0.attn.c_attn.weight) becomes
 * "base_model.model.<module>.lora_A.weight" and ".lora_B.weight"; a weight whose name
 * does not end in ".weight" (a constant the exporter folded, onnx::MatMul_123) has no
 * module name to give and is refused, naming it.
 * Layout: the graph's A [in, r] and B [r, out] (x·A·B) are PEFT's lora_A.weight [r, in]
 * and lora_B.weight [out, r] transposed, whichever way W is stored; fan_in_fan_out
 * says whether W is stored [in, out] (GPT-2's Conv1D) as PEFT wants it per layer.
 * safetensors: 8-byte little-endian header length, a JSON header (name -> dtype,
 * shape, data_offsets, and "__metadata__"), the raw little-endian data. Both files
 * are written through the atomic writer and appear together (finish both, then
 * commit). Reading parses only the keys it needs, with a nesting limit. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ir/atomic_file.h"
#include "ir/input_file.h"
#include "ir/json_write.h"
#include "train/train_internal.h"

#define PEFT_WEIGHTS "adapter_model.safetensors"
#define PEFT_CONFIG "adapter_config.json"
#define PEFT_PREFIX "base_model.model."
#define PEFT_MAX_CONFIG (1u << 20)
#define PEFT_MAX_HEADER (100u << 20) /* the limit safetensors itself sets */
#define JSON_MAX_DEPTH 64

bool ot_lora_peft_is_dir(const char *path) {
    struct stat st;
    size_t n = strlen(path);
    return (n && path[n - 1] == '/') || (stat(path, &st) == 0 && S_ISDIR(st.st_mode));
}

/* dir + "/" + name (trailing slashes of dir dropped), or NULL. */
static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    char *p = malloc(n + strlen(name) + 2);
    if (p) sprintf(p, "%.*s/%s", (int)n, dir, name);
    return p;
}

/* The module of W ("<module>.weight") in a fresh string (*m), or why there is none. */
static ot_status module_of(const char *w, char **m, ot_error *err) {
    size_t n = strlen(w), t = strlen(".weight");
    *m = NULL;
    if (n <= t || strcmp(w + n - t, ".weight"))
        return ot_fail(err, OT_E_UNSUPPORTED,
                       "weight '%s' has no module name for PEFT (only names ending in '.weight' map to a module): "
                       "leave it out with --lora-target, or write .npz/.onnx adapters", w);
    if (!(*m = malloc(n - t + 1))) return ot_fail(err, OT_E_MEMORY, "out of memory");
    memcpy(*m, w, n - t);
    (*m)[n - t] = 0;
    return OT_OK;
}

/* ---- writing --------------------------------------------------------------------- */

static void put_f32(FILE *f, float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    unsigned char b[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
    fwrite(b, 1, 4, f);
}

/* The safetensors header JSON (spaces-padded to a multiple of 8 bytes, as
 * safetensors' own writer does) for the adapters in order A, B per weight. */
static char *st_header(const ot_train_session *s, char **mods, size_t *len) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return NULL;
    fputs("{\"__metadata__\":{\"format\":\"pt\"}", f);
    uint64_t off = 0;
    int64_t r = s->lora.rank;
    for (int k = 0; k < s->lora.n; k++) {
        const ot_lora_adapter *ad = &s->lora.v[k];
        for (int ab = 0; ab < 2; ab++) {
            int64_t d0 = ab ? ad->out : r, d1 = ab ? r : ad->in;
            uint64_t bytes = (uint64_t)d0 * (uint64_t)d1 * 4;
            fprintf(f, ",\"" PEFT_PREFIX "%s.lora_%c.weight\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],"
                    "\"data_offsets\":[%llu,%llu]}", mods[k], ab ? 'B' : 'A', (long long)d0, (long long)d1,
                    (unsigned long long)off, (unsigned long long)(off + bytes));
            off += bytes;
        }
    }
    fputc('}', f);
    while (ftell(f) % 8) fputc(' ', f);
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static ot_status write_weights(ot_train_session *s, char **mods, FILE *f, ot_error *err) {
    size_t hl = 0;
    char *h = st_header(s, mods, &hl);
    if (!h) return ot_fail(err, OT_E_MEMORY, "out of memory");
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(h, 1, hl, f);
    free(h);
    int64_t r = s->lora.rank;
    ot_status st = OT_OK;
    for (int k = 0; !st && k < s->lora.n; k++) {
        const ot_lora_adapter *ad = &s->lora.v[k];
        ot_tensor *a = NULL, *b = NULL;
        st = ot_executor_get(s->ex, ad->a, &a, err);
        if (!st) st = ot_executor_get(s->ex, ad->b, &b, err);
        if (!st) {
            const float *A = a->data, *B = b->data;
            for (int64_t q = 0; q < r; q++) /* lora_A.weight[q][i] = A[i][q] */
                for (int64_t i = 0; i < ad->in; i++) put_f32(f, A[i * r + q]);
            for (int64_t j = 0; j < ad->out; j++) /* lora_B.weight[j][q] = B[q][j] */
                for (int64_t q = 0; q < r; q++) put_f32(f, B[q * ad->out + j]);
        }
        ot_tensor_free(a);
        ot_tensor_free(b);
    }
    return st;
}

static void write_config(const ot_train_session *s, char **mods, FILE *f) {
    bool fan_in_fan_out = s->lora.n > 0;
    for (int k = 0; k < s->lora.n; k++) fan_in_fan_out = fan_in_fan_out && !s->lora.v[k].transposed;
    fputs("{\n  \"peft_type\": \"LORA\",\n  \"task_type\": null,\n  \"base_model_name_or_path\": ", f);
    ot_json_string(f, s->m && s->m->path ? s->m->path : "");
    fprintf(f, ",\n  \"r\": %lld,\n  \"lora_alpha\": %.17g,\n  \"lora_dropout\": 0.0,\n  \"bias\": \"none\",\n"
            "  \"fan_in_fan_out\": %s,\n  \"use_rslora\": false,\n  \"init_lora_weights\": true,\n"
            "  \"inference_mode\": true,\n  \"target_modules\": [",
            (long long)s->lora.rank, s->lora.alpha > 0 ? s->lora.alpha : (double)s->lora.rank,
            fan_in_fan_out ? "true" : "false");
    for (int k = 0; k < s->lora.n; k++) {
        fputs(k ? ", " : "", f);
        ot_json_string(f, mods[k]);
    }
    fputs("]\n}\n", f);
}

static void free_mods(char **mods, int n) {
    for (int k = 0; mods && k < n; k++) free(mods[k]);
    free(mods);
}

/* Every adapted weight's module, in the session's order (*out: s->lora.n strings). */
static ot_status all_modules(const ot_train_session *s, char ***out, ot_error *err) {
    char **mods = calloc((size_t)s->lora.n + 1, sizeof *mods);
    *out = NULL;
    if (!mods) return ot_fail(err, OT_E_MEMORY, "out of memory");
    for (int k = 0; k < s->lora.n; k++) {
        ot_status st = module_of(vname(s->g, s->lora.v[k].base), &mods[k], err);
        if (st) {
            free_mods(mods, k);
            return st;
        }
    }
    *out = mods;
    return OT_OK;
}

ot_status ot_train_lora_peft_check(const ot_train_session *s, ot_error *err) {
    char **mods = NULL;
    ot_status st = all_modules(s, &mods, err);
    free_mods(mods, s->lora.n);
    return st;
}

ot_status ot_train_lora_save_peft(ot_train_session *s, const char *dir, ot_error *err) {
    char **mods = NULL;
    ot_status st = all_modules(s, &mods, err);
    if (st) return st;
    if (mkdir(dir, 0777) && errno != EEXIST) {
        free_mods(mods, s->lora.n);
        return ot_fail(err, OT_E_IO, "%s: cannot create the folder: %s", dir, strerror(errno));
    }
    char *wp = join(dir, PEFT_WEIGHTS), *cp = join(dir, PEFT_CONFIG);
    ot_atomic_file *wf = NULL, *cf = NULL;
    st = wp && cp ? OT_OK : ot_fail(err, OT_E_MEMORY, "out of memory");
    if (!st) st = ot_atomic_open(wp, &wf, err);
    if (!st) st = write_weights(s, mods, ot_atomic_stream(wf), err);
    if (!st) st = ot_atomic_open(cp, &cf, err);
    if (!st) write_config(s, mods, ot_atomic_stream(cf));
    if (!st && (st = ot_atomic_finish(wf, err))) wf = NULL;
    if (!st && (st = ot_atomic_finish(cf, err))) cf = NULL;
    if (!st) {
        st = ot_atomic_commit(wf, err);
        wf = NULL;
        ot_status st2 = ot_atomic_commit(cf, st ? NULL : err);
        cf = NULL;
        if (!st) st = st2;
    }
    ot_atomic_abort(wf);
    ot_atomic_abort(cf);
    free(wp);
    free(cp);
    free_mods(mods, s->lora.n);
    return st;
}

/* ---- a small JSON reader --------------------------------------------------------- */

typedef struct jr {
    const char *p, *end, *file, *start;
    ot_error *err;
} jr;

static ot_status jbad(jr *j, const char *what) {
    return ot_fail(j->err, OT_E_PARSE, "%s: not valid JSON at byte %lld: %s", j->file,
                   (long long)(j->p - j->start), what);
}

static void jws(jr *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static bool jeat(jr *j, char c) {
    jws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return true;
    }
    return false;
}

/* A string into a fresh buffer (escapes decoded; \u only below 0x80). */
static ot_status jstring(jr *j, char **out) {
    *out = NULL;
    if (!jeat(j, '"')) return jbad(j, "expected a string");
    const char *q = j->p; /* its extent, to size the buffer */
    while (q < j->end && *q != '"') q += *q == '\\' ? 2 : 1;
    char *s = malloc((size_t)(q - j->p) + 1), *o = s;
    if (!s) return ot_fail(j->err, OT_E_MEMORY, "out of memory");
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if (c == '\\' && j->p < j->end) {
            c = *j->p++;
            if (c == 'n') c = '\n';
            else if (c == 't') c = '\t';
            else if (c == 'r') c = '\r';
            else if (c == 'b') c = '\b';
            else if (c == 'f') c = '\f';
            else if (c == 'u') {
                unsigned v = 0;
                if (j->end - j->p < 4 || sscanf(j->p, "%4x", &v) != 1 || v == 0 || v >= 0x80) {
                    free(s);
                    return jbad(j, "a \\u escape outside ASCII");
                }
                c = (char)v;
                j->p += 4;
            }
        }
        *o++ = c;
    }
    *o = 0;
    if (!jeat(j, '"')) {
        free(s);
        return jbad(j, "an unterminated string");
    }
    *out = s;
    return OT_OK;
}

static ot_status jnumber(jr *j, double *v) {
    jws(j);
    char *e = NULL;
    *v = strtod(j->p, &e);
    if (e == j->p || e > j->end || !isfinite(*v)) return jbad(j, "expected a number");
    j->p = e;
    return OT_OK;
}

static ot_status jskip(jr *j, int depth) {
    if (depth > JSON_MAX_DEPTH) return jbad(j, "nested too deeply");
    jws(j);
    if (j->p >= j->end) return jbad(j, "unexpected end");
    char c = *j->p;
    if (c == '"') {
        char *s = NULL;
        ot_status st = jstring(j, &s);
        free(s);
        return st;
    }
    if (c == '{' || c == '[') {
        j->p++;
        char close = c == '{' ? '}' : ']';
        if (jeat(j, close)) return OT_OK;
        do {
            ot_status st;
            if (c == '{') {
                char *k = NULL;
                if ((st = jstring(j, &k))) return st;
                free(k);
                if (!jeat(j, ':')) return jbad(j, "expected ':'");
            }
            if ((st = jskip(j, depth + 1))) return st;
        } while (jeat(j, ','));
        return jeat(j, close) ? OT_OK : jbad(j, "expected ',' or a closing bracket");
    }
    for (const char *lit[] = {"true", "false", "null"}, **l = lit; l < lit + 3; l++)
        if ((size_t)(j->end - j->p) >= strlen(*l) && !strncmp(j->p, *l, strlen(*l))) {
            j->p += strlen(*l);
            return OT_OK;
        }
    double v;
    return jnumber(j, &v);
}

/* [a, b, ...] of at most max non-negative integers. */
static ot_status jints(jr *j, int64_t *v, int max, int *n) {
    *n = 0;
    if (!jeat(j, '[')) return jbad(j, "expected an array");
    if (jeat(j, ']')) return OT_OK;
    do {
        double d;
        ot_status st = jnumber(j, &d);
        if (st) return st;
        if (*n >= max || d < 0 || d != floor(d) || d > 9.0e15) return jbad(j, "expected a short array of integers >= 0");
        v[(*n)++] = (int64_t)d;
    } while (jeat(j, ','));
    return jeat(j, ']') ? OT_OK : jbad(j, "expected ']'");
}

/* ---- reading --------------------------------------------------------------------- */

ot_status ot_lora_peft_read_config(const char *dir, int64_t *rank, double *alpha, ot_error *err) {
    char *path = join(dir, PEFT_CONFIG);
    if (!path) return ot_fail(err, OT_E_MEMORY, "out of memory");
    uint8_t *buf = NULL;
    size_t len = 0;
    ot_status st = ot_input_read_all(path, path, PEFT_MAX_CONFIG, &buf, &len, err);
    jr j = {(const char *)buf, (const char *)buf + len, path, (const char *)buf, err};
    double r = -1, a = -1;
    char *type = NULL;
    if (!st && !jeat(&j, '{')) st = jbad(&j, "expected an object");
    if (!st && !jeat(&j, '}')) do {
            char *k = NULL;
            if ((st = jstring(&j, &k))) break;
            if (!jeat(&j, ':')) st = jbad(&j, "expected ':'");
            else if (!strcmp(k, "r")) st = jnumber(&j, &r);
            else if (!strcmp(k, "lora_alpha")) st = jnumber(&j, &a);
            else if (!strcmp(k, "peft_type") && !type) st = jstring(&j, &type);
            else st = jskip(&j, 1);
            free(k);
        } while (!st && jeat(&j, ','));
    if (!st && !jeat(&j, '}')) st = jbad(&j, "expected ',' or '}'");
    if (!st && (!type || strcmp(type, "LORA")))
        st = ot_fail(err, OT_E_UNSUPPORTED, "%s: peft_type is '%s', not 'LORA'", path, type ? type : "(missing)");
    if (!st && (r < 1 || r > 65536 || r != floor(r)))
        st = ot_fail(err, OT_E_DATA, "%s: \"r\" must be an integer between 1 and 65536", path);
    if (!st && !(a > 0)) st = ot_fail(err, OT_E_DATA, "%s: \"lora_alpha\" must be a number > 0", path);
    if (!st) *rank = (int64_t)r, *alpha = a;
    free(type);
    free(buf);
    free(path);
    return st;
}

/* One tensor of the header: the adapter it fills (index into the session's list,
 * ab 0: A, 1: B), checked against the expected shape. */
static ot_status st_entry(ot_train_session *s, jr *j, const char *key, char **mods, const uint8_t *data,
                          uint64_t n_data, bool *seen) {
    int64_t shape[4], off[3];
    int ns = 0, no = 0;
    char *dtype = NULL;
    ot_status st = jeat(j, '{') ? OT_OK : jbad(j, "expected an object");
    if (!st && !jeat(j, '}')) do {
            char *k = NULL;
            if ((st = jstring(j, &k))) break;
            if (!jeat(j, ':')) st = jbad(j, "expected ':'");
            else if (!strcmp(k, "dtype") && !dtype) st = jstring(j, &dtype);
            else if (!strcmp(k, "shape")) st = jints(j, shape, 4, &ns);
            else if (!strcmp(k, "data_offsets")) st = jints(j, off, 3, &no);
            else st = jskip(j, 2);
            free(k);
        } while (!st && jeat(j, ','));
    if (!st && !jeat(j, '}')) st = jbad(j, "expected ',' or '}'");
    int found = -1, ab = 0;
    size_t pl = strlen(PEFT_PREFIX);
    for (int k = 0; !st && found < 0 && k < s->lora.n; k++)
        for (ab = 0; ab < 2; ab++) {
            size_t ml = strlen(mods[k]);
            if (!strncmp(key, PEFT_PREFIX, pl) && !strncmp(key + pl, mods[k], ml) &&
                !strcmp(key + pl + ml, ab ? ".lora_B.weight" : ".lora_A.weight")) {
                found = k;
                break;
            }
        }
    if (!st && found < 0)
        st = ot_fail(j->err, OT_E_DATA, "%s: tensor '%s' is no adapter of this run (a weight --lora does not "
                     "adapt, or another model): pick the same weights with --lora-target", j->file, key);
    const ot_lora_adapter *ad = found >= 0 ? &s->lora.v[found] : NULL;
    int64_t r = s->lora.rank, d0 = ab ? (ad ? ad->out : 0) : r, d1 = ab ? r : (ad ? ad->in : 0);
    if (!st && (!dtype || strcmp(dtype, "F32")))
        st = ot_fail(j->err, OT_E_DATA, "%s: '%s' is %s, expected F32", j->file, key, dtype ? dtype : "(no dtype)");
    if (!st && (ns != 2 || shape[0] != d0 || shape[1] != d1))
        st = ot_fail(j->err, OT_E_DATA, "%s: '%s' has %d dims [%lld, %lld%s], expected [%lld, %lld] (r %lld)", j->file,
                     key, ns, ns > 0 ? (long long)shape[0] : 0LL, ns > 1 ? (long long)shape[1] : 0LL,
                     ns > 2 ? ", ..." : "", (long long)d0, (long long)d1, (long long)r);
    if (!st && (no != 2 || off[1] < off[0] || (uint64_t)off[1] > n_data || (uint64_t)(off[1] - off[0]) != (uint64_t)(d0 * d1 * 4)))
        st = ot_fail(j->err, OT_E_DATA, "%s: '%s' has data_offsets outside the file or of the wrong size", j->file, key);
    if (!st && seen[2 * found + ab]) st = ot_fail(j->err, OT_E_DATA, "%s: '%s' given twice", j->file, key);
    if (!st) {
        seen[2 * found + ab] = true;
        const uint8_t *p = data + off[0];
        float *dst = s->g->values[ab ? ad->b : ad->a].data;
        for (int64_t x = 0; x < d0; x++)
            for (int64_t y = 0; y < d1; y++, p += 4) {
                uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                memcpy(&dst[y * d0 + x], &u, 4); /* the graph holds the transpose */
            }
    }
    free(dtype);
    return st;
}

static ot_status read_weights(ot_train_session *s, const char *path, const uint8_t *buf, size_t len, char **mods,
                              bool *seen, ot_error *err) {
    uint64_t hl = 0;
    for (int i = 0; len >= 8 && i < 8; i++) hl |= (uint64_t)buf[i] << (8 * i);
    if (len < 8 || hl > PEFT_MAX_HEADER || hl > len - 8)
        return ot_fail(err, OT_E_PARSE, "%s: not a safetensors file (its header length %llu does not fit its %zu bytes)",
                       path, (unsigned long long)hl, len);
    jr j = {(const char *)buf + 8, (const char *)buf + 8 + hl, path, (const char *)buf + 8, err};
    ot_status st = jeat(&j, '{') ? OT_OK : jbad(&j, "expected an object");
    if (!st && !jeat(&j, '}')) do {
            char *k = NULL;
            if ((st = jstring(&j, &k))) break;
            if (!jeat(&j, ':')) st = jbad(&j, "expected ':'");
            else if (!strcmp(k, "__metadata__")) st = jskip(&j, 1);
            else st = st_entry(s, &j, k, mods, buf + 8 + hl, len - 8 - hl, seen);
            free(k);
        } while (!st && jeat(&j, ','));
    if (!st && !jeat(&j, '}')) st = jbad(&j, "expected ',' or '}'");
    for (int k = 0; !st && k < 2 * s->lora.n; k++)
        if (!seen[k])
            st = ot_fail(err, OT_E_DATA, "%s: no " PEFT_PREFIX "%s.lora_%c.weight for the adapted weight '%s' (the "
                         "folder was written for other weights: pick them with --lora-target)", path, mods[k / 2],
                         k % 2 ? 'B' : 'A', vname(s->g, s->lora.v[k / 2].base));
    return st;
}

ot_status ot_train_lora_load_peft(ot_train_session *s, const char *dir, ot_error *err) {
    int64_t rank = 0;
    double alpha = 0;
    ot_status st = ot_lora_peft_read_config(dir, &rank, &alpha, err);
    double my_alpha = s->lora.alpha > 0 ? s->lora.alpha : (double)s->lora.rank;
    if (!st && (rank != s->lora.rank || alpha != my_alpha))
        return ot_fail(err, OT_E_USAGE, "--lora-load %s: the adapters have rank %lld and alpha %g, --lora asks for "
                       "%lld:%g: leave --lora out to take the folder's", dir, (long long)rank, alpha,
                       (long long)s->lora.rank, my_alpha);
    if (st) return st;
    char **mods = NULL;
    if ((st = all_modules(s, &mods, err))) return st;
    char *path = join(dir, PEFT_WEIGHTS);
    bool *seen = calloc((size_t)2 * s->lora.n + 1, sizeof *seen);
    uint8_t *buf = NULL;
    size_t len = 0;
    st = path && seen ? OT_OK : ot_fail(err, OT_E_MEMORY, "out of memory");
    if (!st) st = ot_input_read_all(path, path, 0, &buf, &len, err);
    if (!st) st = read_weights(s, path, buf, len, mods, seen, err);
    free(buf);
    free(seen);
    free(path);
    free_mods(mods, s->lora.n);
    return st;
}
