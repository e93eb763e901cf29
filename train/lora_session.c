/* lora_session.c — LoRA in a training session (autodiff/lora.h does the rewrite):
 * the adapters go into the session's bound graph before the loss, A is drawn from
 * --seed (Kaiming-uniform as PEFT: U(-1/sqrt(in), 1/sqrt(in))), B starts at zero, and
 * only the adapters train (OT_LORA_TRAIN_PATTERN joins the --train patterns of the
 * one params rule, so the base weights become constants: no gradient, no optimizer
 * state). Outputs: the merged model (each adapted W replaced by W + s·A·B, computed
 * one weight at a time while the exporter streams the rest from the arena) or the
 * adapters alone (.npz or .onnx; a PEFT folder: lora_peft.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/rng.h"
#include "train/checkpoint.h"
#include "train/npz.h"
#include "train/train_internal.h"

/* The Philox step that keys the initial draws of A (node = adapter index): no
 * training step reaches it, so they never coincide with a Dropout mask's. */
#define LORA_RNG_STEP UINT64_C(0xFFFFFFFF)

static void init_a(ot_graph *g, const ot_lora_adapter *ad, int k, uint64_t seed) {
    float *a = g->values[ad->a].data;
    int64_t n = ot_shape_numel(&g->values[ad->a].shape);
    double bound = 1.0 / sqrt((double)ad->in);
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)((2.0 * (double)ot_philox_uniform(seed, LORA_RNG_STEP, (uint32_t)k, (uint64_t)i) - 1.0) * bound);
}

ot_status ot_train_lora_prepare(ot_train_session *s, ot_error *err) {
    if (s->o.lora.rank <= 0)
        return s->o.lora.n_targets ? ot_fail(err, OT_E_USAGE, "--lora-target needs --lora RANK")
               : s->o.lora_load ? ot_fail(err, OT_E_USAGE, "--lora-load needs --lora RANK (or the folder's r)")
                                : OT_OK;
    ot_lora_options lo = s->o.lora;
    lo.output = s->o.loss.output_name; /* the head is the weight next to the loss's output */
    ot_status st = ot_lora_apply(s->g, &lo, &s->lora, err);
    if (st) return st;
    for (int k = 0; k < s->lora.n; k++) init_a(s->g, &s->lora.v[k], k, s->o.seed);
    if (s->o.lora_load && (st = ot_train_lora_load_peft(s, s->o.lora_load, err))) return st;
    s->lora_train = calloc((size_t)s->o.n_train + 1, sizeof *s->lora_train);
    if (!s->lora_train) return ot_fail(err, OT_E_MEMORY, "lora: out of memory");
    for (int i = 0; i < s->o.n_train; i++) s->lora_train[i] = s->o.train[i];
    s->lora_train[s->o.n_train] = OT_LORA_TRAIN_PATTERN;
    return OT_OK;
}

uint64_t ot_train_lora_fingerprint(const ot_train_session *s, uint64_t h) {
    if (!s->lora.n) return h;
    double sc[2] = {(double)s->lora.rank, s->lora.alpha};
    h = ot_fnv1a64(h, "lora", 5);
    return ot_fnv1a64(h, sc, sizeof sc);
}

/* ---- the merged model ------------------------------------------------------------ */

typedef struct merged {
    ot_train_session *s;
    int cur;      /* base value whose merged bytes buf holds, -1: none */
    float *buf;
} merged;

static const ot_lora_adapter *adapter_of(const ot_train_session *s, int v) {
    for (int k = 0; k < s->lora.n; k++)
        if (s->lora.v[k].base == v) return &s->lora.v[k];
    return NULL;
}

/* buf = W + s·(A·B) (transposed into W's layout), sums in double, one rounding. */
static ot_status merge_one(merged *mg, const ot_lora_adapter *ad, ot_error *err) {
    ot_train_session *s = mg->s;
    size_t nb = s->g->values[ad->base].nbytes;
    ot_tensor *a = NULL, *b = NULL;
    free(mg->buf);
    mg->cur = -1;
    if (!(mg->buf = malloc(nb ? nb : 1))) return ot_fail(err, OT_E_MEMORY, "lora: out of memory merging");
    ot_status st = ot_train_arena_read(s, ad->base, 0, mg->buf, nb, err);
    if (!st) st = ot_executor_get(s->ex, ad->a, &a, err);
    if (!st) st = ot_executor_get(s->ex, ad->b, &b, err);
    if (!st) {
        const float *A = a->data, *B = b->data;
        int64_t r = s->lora.rank;
        for (int64_t i = 0; i < ad->in; i++)
            for (int64_t j = 0; j < ad->out; j++) {
                double acc = 0;
                for (int64_t k = 0; k < r; k++) acc += (double)A[i * r + k] * (double)B[k * ad->out + j];
                float *w = &mg->buf[ad->transposed ? j * ad->in + i : i * ad->out + j];
                *w = (float)((double)*w + s->lora.scale * acc);
            }
        mg->cur = ad->base;
    }
    ot_tensor_free(a);
    ot_tensor_free(b);
    return st;
}

static const void *merged_host_ptr(void *user, int v) {
    merged *mg = user;
    return adapter_of(mg->s, v) ? NULL : ot_train_arena_host_ptr(mg->s, v);
}

static ot_status merged_read(void *user, int v, uint64_t offset, void *dst, size_t n, ot_error *err) {
    merged *mg = user;
    const ot_lora_adapter *ad = adapter_of(mg->s, v);
    if (!ad) return ot_train_arena_read(mg->s, v, offset, dst, n, err);
    ot_status st = mg->cur == v ? OT_OK : merge_one(mg, ad, err);
    if (st) return st;
    if (offset + n > mg->s->g->values[v].nbytes)
        return ot_fail(err, OT_E_INTERNAL, "lora: read past the end of '%s'", vname(mg->s->g, v));
    memcpy(dst, (const char *)mg->buf + offset, n);
    return OT_OK;
}

ot_status ot_train_lora_save_merged(ot_train_session *s, const char *path, bool external_data, ot_error *err) {
    merged mg = {.s = s, .cur = -1};
    ot_export_source src = {.host_ptr = merged_host_ptr, .read = merged_read, .user = &mg};
    ot_export_options eo = {.external_data = external_data, .source = &src};
    /* The exporter takes a value's own data before the source's: set the base
     * weights' host copies (kept, or given back after a run) aside while writing. */
    void **kept = ot_xcalloc((size_t)s->lora.n + 1, sizeof *kept);
    if (!kept) return ot_fail(err, OT_E_MEMORY, "out of memory");
    ot_graph *g = s->m->graph;
    for (int k = 0; k < s->lora.n; k++) {
        kept[k] = g->values[s->lora.v[k].base].data;
        g->values[s->lora.v[k].base].data = NULL;
    }
    ot_status st = ot_model_save_ex(s->m, path, &eo, err);
    for (int k = 0; k < s->lora.n; k++) g->values[s->lora.v[k].base].data = kept[k];
    free(kept);
    free(mg.buf);
    return st;
}

/* ---- the adapters alone ---------------------------------------------------------- */

/* A new [d1, d0] tensor with t's transpose (t is [d0, d1] float32), t freed. */
static ot_tensor *transposed(ot_tensor *t) {
    int64_t d0 = t->shape.dim[0], d1 = t->shape.dim[1], dims[2] = {d1, d0};
    ot_shape s = ot_shape_make(2, dims);
    ot_tensor *u = ot_tensor_new(OT_F32, &s);
    if (u)
        for (int64_t i = 0; i < d0; i++)
            for (int64_t j = 0; j < d1; j++) ((float *)u->data)[j * d0 + i] = ((const float *)t->data)[i * d1 + j];
    ot_tensor_free(t);
    return u;
}

/* The pair as written: A·B in W's own layout, so that every weight merges as
 * W + s·A·B. For W stored [out, in] that is (B^T, A^T) of the graph's adapters. */
static ot_status file_pair(ot_train_session *s, const ot_lora_adapter *ad, ot_tensor **a, ot_tensor **b,
                           ot_error *err) {
    ot_tensor *ga = NULL, *gb = NULL;
    ot_status st = ot_executor_get(s->ex, ad->a, &ga, err);
    if (!st) st = ot_executor_get(s->ex, ad->b, &gb, err);
    if (st || !ad->transposed) {
        *a = ga;
        *b = gb;
        return st;
    }
    *a = transposed(gb);
    *b = transposed(ga);
    return *a && *b ? OT_OK : ot_fail(err, OT_E_MEMORY, "out of memory");
}

static bool ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

ot_status ot_train_save_adapters(ot_train_session *s, const char *path, ot_error *err) {
    if (!s->ex) return ot_fail(err, OT_E_INTERNAL, "the session was built to plan only: it holds no adapters");
    if (!s->lora.n) return ot_fail(err, OT_E_USAGE, "--lora-save needs --lora RANK");
    if (ot_lora_peft_is_dir(path)) return ot_train_lora_save_peft(s, path, err);
    bool npz = ends_with(path, ".npz");
    if (!npz && !ends_with(path, ".onnx"))
        return ot_fail(err, OT_E_USAGE, "--lora-save %s: the name must end in .npz or .onnx, or in '/' for a PEFT folder", path);
    int n = 2 * s->lora.n;
    ot_tensor **t = ot_xcalloc((size_t)n + 2, sizeof *t);
    const char **names = ot_xcalloc((size_t)n + 2, sizeof *names);
    const char **meta = ot_xcalloc((size_t)2 * (s->lora.n + 4), sizeof *meta);
    char rank_s[32], alpha_s[40], scale_s[40];
    ot_status st = t && names && meta ? OT_OK : ot_fail(err, OT_E_MEMORY, "out of memory");
    for (int k = 0; !st && k < s->lora.n; k++) {
        const ot_lora_adapter *ad = &s->lora.v[k];
        names[2 * k] = vname(s->g, ad->a);
        names[2 * k + 1] = vname(s->g, ad->b);
        st = file_pair(s, ad, &t[2 * k], &t[2 * k + 1], err);
        meta[2 * (k + 4)] = vname(s->g, ad->base);
        meta[2 * (k + 4) + 1] = ad->transposed ? "stored [out, in]: W += scale * A @ B" : "stored [in, out]: W += scale * A @ B";
    }
    if (!st && npz) {
        /* the settings travel as 0-d arrays next to the adapters */
        int64_t one = 0;
        ot_shape sc = ot_shape_make(0, &one);
        if (!(t[n] = ot_tensor_new(OT_I64, &sc)) || !(t[n + 1] = ot_tensor_new(OT_F64, &sc)))
            st = ot_fail(err, OT_E_MEMORY, "out of memory");
        else {
            *(int64_t *)t[n]->data = s->lora.rank;
            *(double *)t[n + 1]->data = s->lora.alpha;
            names[n] = "lora_rank";
            names[n + 1] = "lora_alpha";
            st = ot_npz_write(path, names, (const ot_tensor *const *)t, n + 2, err);
        }
    } else if (!st) {
        snprintf(rank_s, sizeof rank_s, "%lld", (long long)s->lora.rank);
        snprintf(alpha_s, sizeof alpha_s, "%.17g", s->lora.alpha);
        snprintf(scale_s, sizeof scale_s, "%.17g", s->lora.scale);
        const char *head[8] = {"lora_rank", rank_s, "lora_alpha", alpha_s, "lora_scale", scale_s, "lora_layout",
                               "A·B has the shape of its base weight W: W' = W + scale * A @ B"};
        memcpy(meta, head, sizeof head);
        st = ot_export_tensors(path, "lora_adapters", names, (const ot_tensor *const *)t, n, meta, s->lora.n + 4, err);
    }
    for (int i = 0; t && i < n + 2; i++) ot_tensor_free(t[i]);
    free(t);
    free(names);
    free(meta);
    return st;
}
