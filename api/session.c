/* session.c — the public API's sessions (include/onnxtrain.h): errors per thread,
 * options into ot_train_options, the caller's buffers checked and wrapped without a
 * copy, the training session built for the first batch (train/train.h, the one
 * session builder), training steps (ot_train_step_once, the loop's own step) and
 * evaluation in inference mode (ot_train_validate). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "kernels/kernel.h"
#include "remat/remat.h"

/* ---- errors ------------------------------------------------------------------- */

/* Per thread, as errno: one session per thread needs no lock, and a failed open has no
 * session to hold its message. */
static _Thread_local ot_error last_err;

onnxtrain_status api_result(ot_status st, const ot_error *err) {
    if (st) {
        last_err.code = st;
        snprintf(last_err.msg, sizeof last_err.msg, "%s", err && err->msg[0] ? err->msg : "unknown error");
    }
    return (onnxtrain_status)st;
}

#define API_STR_(x) #x
#define API_STR(x) API_STR_(x)
const char *onnxtrain_version(void) {
    return API_STR(ONNXTRAIN_VERSION_MAJOR) "." API_STR(ONNXTRAIN_VERSION_MINOR) "." API_STR(ONNXTRAIN_VERSION_PATCH);
}
const char *onnxtrain_last_error(void) { return last_err.msg; }
onnxtrain_status onnxtrain_last_status(void) { return (onnxtrain_status)last_err.code; }

ot_status api_enter(onnxtrain_session *s, const char *fn, ot_error *err) {
    if (!s) return ot_fail(err, OT_E_USAGE, "%s: session is NULL", fn);
    if (atomic_flag_test_and_set(&s->busy))
        return ot_fail(err, OT_E_USAGE, "%s: the session is in use by another thread (one session, one thread at a time)", fn);
    if (s->closed) {
        atomic_flag_clear(&s->busy);
        return ot_fail(err, OT_E_USAGE, "%s: the session is closed", fn);
    }
    return OT_OK;
}

void api_leave(onnxtrain_session *s) { atomic_flag_clear(&s->busy); }

/* ---- options ------------------------------------------------------------------ */

void onnxtrain_options_init(onnxtrain_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->class_axis = -1;
    o->lr = o->momentum = o->weight_decay = o->beta1 = o->beta2 = o->eps = NAN;
    o->accum = 1;
    o->check_numerics = 1;
}

static const char *keep_str(onnxtrain_session *s, const char *str, ot_error *err) {
    if (!str) return NULL;
    char **v = realloc(s->strs, (size_t)(s->n_strs + 1) * sizeof *v);
    if (!v) return ot_fail(err, OT_E_MEMORY, "out of memory"), NULL;
    s->strs = v;
    if (!(v[s->n_strs] = ot_strdup(str))) return ot_fail(err, OT_E_MEMORY, "out of memory"), NULL;
    return v[s->n_strs++];
}

/* Copies a caller's list into s->lists (one block for every list, laid out by offset). */
static ot_status keep_list(onnxtrain_session *s, const char *what, const char *const *in, int n, const char **dst,
                           ot_error *err) {
    if (n < 0 || (n > 0 && !in)) return ot_fail(err, OT_E_USAGE, "options.%s: %d entries but no array", what, n);
    for (int i = 0; i < n; i++) {
        if (!in[i] || !in[i][0]) return ot_fail(err, OT_E_USAGE, "options.%s[%d] is NULL or empty", what, i);
        if (!(dst[i] = keep_str(s, in[i], err))) return OT_E_MEMORY;
    }
    return OT_OK;
}

#define SET_IF(field, dst) \
    if (!isnan(u.field)) dst = u.field

/* options → ot_train_options, every string copied into s; what the train layer checks
 * later (regexes, globs, the policy) is checked here when it can be, naming the field. */
static ot_status apply_options(onnxtrain_session *s, const onnxtrain_options *in, ot_error *err) {
    onnxtrain_options u;
    onnxtrain_options_init(&u);
    if (in) {
        if (in->struct_size < offsetof(onnxtrain_options, loss) || in->struct_size > (1u << 16))
            return ot_fail(err, OT_E_USAGE, "options.struct_size %zu: call onnxtrain_options_init first",
                           in->struct_size);
        memcpy(&u, in, in->struct_size < sizeof u ? in->struct_size : sizeof u);
    }
    ot_train_options *o = &s->o;
    ot_train_options_default(o);
    ot_status st = OT_OK;
    if (u.loss && (st = ot_loss_kind_parse(u.loss, &o->loss.kind, err))) return ot_error_prefix(err, "options.loss: ");
    o->loss.output_name = keep_str(s, u.loss_output, err);
    o->loss.class_axis = u.class_axis;
    o->loss.has_ignore_index = u.has_ignore_index != 0;
    o->loss.ignore_index = u.ignore_index;
    ot_optim_kind kind = OT_OPTIM_SGD;
    /* "adamw-hf": AdamW in HuggingFace's form, ONNX Runtime's artifacts' (train/optim.h) */
    bool hf = u.optimizer && strcmp(u.optimizer, "adamw-hf") == 0;
    if (hf) kind = OT_OPTIM_ADAMW;
    else if (u.optimizer && (st = ot_optim_kind_parse(u.optimizer, &kind, err)))
        return ot_fail(err, st, "options.optimizer: %s; or adamw-hf (AdamW in HuggingFace's form)", err->msg);
    ot_optim_config_default(&o->optim, kind);
    o->optim.eps_hf = hf;
    SET_IF(lr, o->optim.lr);
    SET_IF(momentum, o->optim.momentum);
    SET_IF(weight_decay, o->optim.weight_decay);
    SET_IF(beta1, o->optim.beta1);
    SET_IF(beta2, o->optim.beta2);
    SET_IF(eps, o->optim.eps);
    o->optim.nesterov = u.nesterov != 0;
    o->optim.clip_grad_norm = u.clip_grad_norm;
    if (u.schedule && (st = ot_schedule_kind_parse(u.schedule, &o->optim.schedule, err)))
        return ot_error_prefix(err, "options.schedule: ");
    if (u.warmup_steps < 0 || u.total_steps < 0)
        return ot_fail(err, OT_E_USAGE, "options.warmup_steps and total_steps must not be negative");
    o->optim.warmup_steps = u.warmup_steps;
    o->optim.total_steps = u.total_steps;
    o->steps = u.total_steps;
    if (o->optim.schedule == OT_SCHED_COSINE && u.total_steps == 0)
        return ot_fail(err, OT_E_USAGE, "options.schedule cosine needs options.total_steps (the run's steps)");
    if ((st = ot_optim_config_check(&o->optim, err))) return ot_error_prefix(err, "options: ");
    if (u.accum < 1 || u.accum > (INT64_C(1) << 20))
        return ot_fail(err, OT_E_USAGE, "options.accum %lld: must be between 1 and 1048576", (long long)u.accum);
    o->accum = u.accum;
    o->fuse_update = u.fuse_update != 0;
    if (u.remat && strcmp(u.remat, "none")) {
        ot_remat_policy pol;
        if ((st = ot_remat_policy_parse(u.remat, &pol, err))) return ot_error_prefix(err, "options.remat: ");
        o->remat = keep_str(s, u.remat, err);
    }
    if (u.memory_budget < 0) return ot_fail(err, OT_E_USAGE, "options.memory_budget must not be negative");
    o->memory_budget = u.memory_budget;
    if (!(u.remat_time_limit >= 0)) return ot_fail(err, OT_E_USAGE, "options.remat_time_limit must be >= 0");
    o->remat_time_limit = u.remat_time_limit;
    if (u.lora_rank < 0 || u.lora_rank > 65536 || !(u.lora_alpha >= 0) || isinf(u.lora_alpha))
        return ot_fail(err, OT_E_USAGE, "options.lora_rank must be in 0..65536 and options.lora_alpha finite and >= 0");
    o->lora.rank = u.lora_rank;
    o->lora.alpha = u.lora_alpha;
    if (u.lora_load) {
        if (!(o->lora_load = keep_str(s, u.lora_load, err))) return OT_E_MEMORY;
        if (!o->lora.rank && (st = ot_lora_peft_read_config(o->lora_load, &o->lora.rank, &o->lora.alpha, err)))
            return ot_error_prefix(err, "options.lora_load: ");
    }
    o->split_update = u.split_step != 0; /* 0 for an application built before the field */
    if (o->split_update && u.accum != 1)
        return ot_fail(err, OT_E_USAGE, "options.split_step with options.accum %lld: the two-call step sums over "
                       "calls instead (use accum 1)", (long long)u.accum);
    if (u.chunked_loss && (st = ot_chunked_loss_parse("options.chunked_loss", u.chunked_loss, &o->chunked_loss, err)))
        return st;
    if (u.chunked_loss_rows < 0 || u.chunked_loss_rows > INT32_MAX)
        return ot_fail(err, OT_E_USAGE, "options.chunked_loss_rows %lld: must be between 0 (the default) and 2^31 - 1",
                       (long long)u.chunked_loss_rows);
    o->chunked_loss_rows = u.chunked_loss_rows;
    if (u.fused_attention &&
        (st = ot_fused_attn_parse("options.fused_attention", u.fused_attention, &o->fused_attention, err)))
        return st;
    if (u.precision && (st = ot_precision_parse(u.precision, &o->precision, err)))
        return ot_error_prefix(err, "options.precision: ");
    if (u.loss_scale && strcmp(u.loss_scale, "dynamic") && strcmp(u.loss_scale, "off"))
        return ot_fail(err, OT_E_USAGE, "options.loss_scale '%s': expected \"dynamic\" or \"off\"", u.loss_scale);
    o->loss_scale = (ot_loss_scale_options){
        .mode = !u.loss_scale ? OT_LOSS_SCALE_DEFAULT : strcmp(u.loss_scale, "off") ? OT_LOSS_SCALE_DYNAMIC : OT_LOSS_SCALE_OFF,
        .init = u.loss_scale_init, .growth = u.loss_scale_growth, .backoff = u.loss_scale_backoff,
        .growth_interval = u.loss_scale_growth_interval}; /* checked with the session (train_scale.c) */
    if (u.threads < 0) return ot_fail(err, OT_E_USAGE, "options.threads %d: must be >= 0", u.threads);
    o->n_threads = u.threads;
    o->device = keep_str(s, u.device, err);
    o->seed = u.seed;
    o->tf32 = u.tf32 != 0; /* 0 for an application built before the field */
    o->no_numerics_check = !u.check_numerics;
    o->stream_save = true; /* the tuned model is written from the arena */
    int total = u.n_freeze + u.n_train + u.n_bind + u.n_lora_targets;
    if (u.n_freeze < 0 || u.n_train < 0 || u.n_bind < 0 || u.n_lora_targets < 0)
        return ot_fail(err, OT_E_USAGE, "options: a negative list length");
    if (total > 0 && !(s->lists = calloc((size_t)total, sizeof *s->lists))) return ot_fail(err, OT_E_MEMORY, "out of memory");
    const char **p = s->lists;
    if ((st = keep_list(s, "freeze", u.freeze, u.n_freeze, p, err))) return st;
    o->freeze = p, o->n_freeze = u.n_freeze, p += u.n_freeze;
    if ((st = keep_list(s, "train", u.train, u.n_train, p, err))) return st;
    o->train = p, o->n_train = u.n_train, p += u.n_train;
    if ((st = keep_list(s, "bind", u.bind, u.n_bind, p, err))) return st;
    o->bind = p, o->n_bind = u.n_bind, p += u.n_bind;
    if ((st = keep_list(s, "lora_targets", u.lora_targets, u.n_lora_targets, p, err))) return st;
    o->lora.targets = p, o->lora.n_targets = u.n_lora_targets;
    return OT_OK;
}

/* ---- sessions ----------------------------------------------------------------- */

static ot_status open_common(const char *path, const void *bytes, size_t nbytes, const char *dir,
                             const onnxtrain_options *o, onnxtrain_session **out, ot_error *err) {
    if (!out) return ot_fail(err, OT_E_USAGE, "onnxtrain_session_open: out is NULL");
    *out = NULL;
    onnxtrain_session *s = calloc(1, sizeof *s);
    if (!s) return ot_fail(err, OT_E_MEMORY, "out of memory");
    atomic_flag_clear(&s->busy);
    ot_status st = apply_options(s, o, err);
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    if (!st && path) st = ot_model_load(path, &io, &s->m, err);
    if (!st && !path) st = ot_model_load_buffer(bytes, nbytes, "model bytes", dir, &io, &s->m, err);
    if (st) {
        onnxtrain_session_free(s);
        return st;
    }
    *out = s;
    return OT_OK;
}

onnxtrain_status onnxtrain_session_open(const char *model_path, const onnxtrain_options *o, onnxtrain_session **out) {
    ot_error err = {0};
    ot_status st = model_path ? open_common(model_path, NULL, 0, NULL, o, out, &err)
                              : ot_fail(&err, OT_E_USAGE, "onnxtrain_session_open: model_path is NULL");
    return api_result(st, &err);
}

onnxtrain_status onnxtrain_session_open_bytes(const void *bytes, size_t nbytes, const char *dir,
                                              const onnxtrain_options *o, onnxtrain_session **out) {
    ot_error err = {0};
    ot_status st = bytes && nbytes ? open_common(NULL, bytes, nbytes, dir, o, out, &err)
                                   : ot_fail(&err, OT_E_USAGE, "onnxtrain_session_open_bytes: bytes is NULL or empty");
    return api_result(st, &err);
}

void onnxtrain_session_close(onnxtrain_session *s) {
    if (!s || atomic_flag_test_and_set(&s->busy)) return; /* busy: the other thread's call finishes first */
    ot_train_session_free(s->ts);
    ot_model_free(s->m);
    ot_checkpoint_free(&s->resume);
    free(s->sig);
    for (int i = 0; i < s->n_strs; i++) free(s->strs[i]);
    free(s->strs);
    free(s->lists);
    s->ts = NULL, s->m = NULL, s->sig = NULL, s->strs = NULL, s->lists = NULL;
    s->n_sig = s->n_strs = 0;
    s->has_resume = false;
    s->closed = true;
    atomic_flag_clear(&s->busy);
}

void onnxtrain_session_free(onnxtrain_session *s) {
    if (!s) return;
    onnxtrain_session_close(s);
    free(s);
}

/* ---- batches ------------------------------------------------------------------ */

static ot_status check_tensor(const onnxtrain_tensor *t, const char *arg, ot_tensor *out, ot_error *err) {
    ot_dtype dt = (ot_dtype)t->dtype;
    if (!ot_dtype_supported(dt) || dt == OT_STRING)
        return ot_fail(err, OT_E_USAGE, "%s: dtype %d is not an onnxtrain_dtype", arg, (int)t->dtype);
    if (t->rank < 1 || t->rank > OT_MAX_RANK)
        return ot_fail(err, OT_E_USAGE, "%s: rank %d: data needs samples along axis 0 (rank 1..%d)", arg, t->rank,
                       OT_MAX_RANK);
    if (!t->shape) return ot_fail(err, OT_E_USAGE, "%s: shape is NULL", arg);
    size_t n = ot_dtype_size(dt);
    for (int k = 0; k < t->rank; k++) {
        if (t->shape[k] < (k == 0) || (t->shape[k] > 0 && n > SIZE_MAX / (size_t)t->shape[k]))
            return ot_fail(err, OT_E_USAGE, "%s: shape[%d] = %lld is out of range", arg, k, (long long)t->shape[k]);
        n *= (size_t)t->shape[k];
    }
    if (t->nbytes < n)
        return ot_fail(err, OT_E_USAGE, "%s: buffer of %zu bytes, the shape needs %zu", arg, t->nbytes, n);
    if (!t->data && n) return ot_fail(err, OT_E_USAGE, "%s: data is NULL", arg);
    *out = (ot_tensor){.dtype = dt, .shape = ot_shape_make(t->rank, t->shape), .data = (void *)t->data, .nbytes = n};
    return OT_OK;
}

void api_batch_free(api_batch *b) {
    for (int i = 0; i < b->d.n_arrays; i++)
        if (b->borrowed && b->borrowed[i] && b->d.arrays[i].t && b->d.arrays[i].t->data == b->borrowed[i])
            b->d.arrays[i].t->data = NULL; /* the caller's: never freed */
    ot_dataset_free(&b->d);
    free(b->borrowed);
    memset(b, 0, sizeof *b);
}

ot_status api_batch_make(const onnxtrain_tensor *inputs, int n_inputs, const onnxtrain_tensor *labels, api_batch *b,
                         ot_error *err) {
    memset(b, 0, sizeof *b);
    if (n_inputs < 1 || !inputs)
        return ot_fail(err, OT_E_USAGE, "inputs: %s", !inputs ? "NULL" : "n_inputs must be at least 1");
    int n = n_inputs + (labels != NULL);
    /* the arrays are laid out here, not by ot_dataset_add, which frees a tensor it refuses */
    b->borrowed = calloc((size_t)n, sizeof *b->borrowed);
    b->d.arrays = calloc((size_t)n, sizeof *b->d.arrays);
    if (!b->borrowed || !b->d.arrays) return ot_fail(err, OT_E_MEMORY, "out of memory");
    for (int i = 0; i < n; i++) {
        const onnxtrain_tensor *t = i < n_inputs ? &inputs[i] : labels;
        char arg[320];
        if (i < n_inputs) snprintf(arg, sizeof arg, "inputs[%d] ('%s')", i, t->name ? t->name : "");
        else snprintf(arg, sizeof arg, "labels");
        ot_tensor v;
        ot_status st = check_tensor(t, arg, &v, err);
        if (st) return st;
        if (i > 0 && v.shape.dim[0] != b->d.n_samples)
            return ot_fail(err, OT_E_DATA, "%s: %lld samples (axis 0), but %s has %lld", arg, (long long)v.shape.dim[0],
                           b->d.arrays[0].path, (long long)b->d.n_samples);
        ot_data_array *a = &b->d.arrays[i];
        a->value_id = -1;
        a->name = ot_strdup(i < n_inputs ? (t->name ? t->name : "") : OT_DATA_LABELS);
        a->path = ot_strdup(arg);
        b->d.n_arrays = i + 1;
        if (!a->name || !a->path) return ot_fail(err, OT_E_MEMORY, "out of memory");
        if (i == n_inputs && v.dtype == OT_I32) { /* widened here: see api_batch */
            if (!(a->t = ot_tensor_new(OT_I64, &v.shape))) return ot_fail(err, OT_E_MEMORY, "out of memory");
            int64_t m = ot_shape_numel(&v.shape);
            for (int64_t k = 0; k < m; k++) ((int64_t *)a->t->data)[k] = ((const int32_t *)v.data)[k];
        } else {
            if (!(a->t = malloc(sizeof *a->t))) return ot_fail(err, OT_E_MEMORY, "out of memory");
            *a->t = v;
            b->borrowed[i] = v.data;
        }
        b->d.n_samples = v.shape.dim[0];
    }
    return OT_OK;
}

/* ---- building the session ----------------------------------------------------- */

ot_status api_train_options(const onnxtrain_session *s, const api_batch *b, ot_train_options *o, ot_error *err) {
    *o = s->o;
    int64_t n = b->d.n_samples, K = s->o.accum;
    if (n % K)
        return ot_fail(err, OT_E_DATA, "%s: %lld samples, not a multiple of options.accum %lld (a step is accum "
                       "micro-batches of equal size)", b->d.arrays[0].path, (long long)n, (long long)K);
    o->batch_size = n / K;
    return OT_OK;
}

/* Whether b's arrays have the dtypes and shapes of the batch the session was built for. */
static ot_status match_sig(const onnxtrain_session *s, const api_batch *b, bool exact_count, ot_error *err) {
    if (b->d.n_arrays != s->n_sig)
        return ot_fail(err, OT_E_DATA, "%d arrays (inputs and labels), the session was built for %d", b->d.n_arrays,
                       s->n_sig);
    for (int i = 0; i < s->n_sig; i++) {
        const ot_data_array *a = &b->d.arrays[i];
        const api_sig *g = &s->sig[i];
        /* names are checked by ot_train_check_data, which maps them: "" and the input's
         * own name feed the same input */
        bool same = a->t->dtype == g->dtype && a->t->shape.rank == g->shape.rank;
        for (int k = exact_count ? 0 : 1; same && k < g->shape.rank; k++) same = a->t->shape.dim[k] == g->shape.dim[k];
        if (!same) {
            char want[160], got[160];
            ot_shape_str(NULL, &g->shape, want, sizeof want);
            ot_shape_str(NULL, &a->t->shape, got, sizeof got);
            return ot_fail(err, OT_E_DATA, "%s: %s %s, the session was built for %s %s%s", a->path,
                           ot_dtype_name(a->t->dtype), got, ot_dtype_name(g->dtype), want,
                           exact_count ? " (a step takes exactly accum x batch samples)" : "");
        }
    }
    return OT_OK;
}

static ot_status keep_sig(onnxtrain_session *s, const api_batch *b, ot_error *err) {
    if (!(s->sig = calloc((size_t)b->d.n_arrays, sizeof *s->sig))) return ot_fail(err, OT_E_MEMORY, "out of memory");
    s->n_sig = b->d.n_arrays;
    for (int i = 0; i < s->n_sig; i++) {
        s->sig[i] = (api_sig){.dtype = b->d.arrays[i].t->dtype, .shape = b->d.arrays[i].t->shape};
    }
    return OT_OK;
}

ot_status api_build(onnxtrain_session *s, api_batch *b, bool exact_count, const char *fn, ot_error *err) {
    ot_status st;
    /* said in the API's words before the session builder says it in the CLI's */
    bool has_labels = ot_dataset_find(&b->d, OT_DATA_LABELS) != NULL, wants = s->o.loss.kind != OT_LOSS_OUTPUT;
    if (has_labels != wants)
        return ot_fail(err, OT_E_USAGE, "%s: labels %s", fn,
                       wants ? "is NULL, but the loss (options.loss) needs them: class indices for cross-entropy, "
                               "targets for mse"
                             : "given, but options.loss \"output\" reads the model's own loss output and takes none");
    if (s->ts) {
        if ((st = match_sig(s, b, exact_count, err))) return ot_error_prefix(err, "%s: ", fn);
        /* names, dtypes, per-sample shapes and label range against the built graph */
        if ((st = ot_train_check_data(s->ts, &b->d, "batch", err))) return ot_error_prefix(err, "%s: ", fn);
        return OT_OK;
    }
    ot_train_options o;
    if ((st = api_train_options(s, b, &o, err))) return ot_error_prefix(err, "%s: ", fn);
    if ((st = ot_train_session_new(s->m, &o, &b->d, true, &s->ts, err))) return ot_error_prefix(err, "%s: ", fn);
    if ((st = keep_sig(s, b, err))) goto fail;
    if (s->has_resume) {
        if ((st = ot_train_checkpoint_restore(s->ts, &b->d, &s->resume, s->resume_path, err))) goto fail;
        s->step = s->resume.step;
        ot_checkpoint_free(&s->resume);
        s->has_resume = false;
    }
    return OT_OK;
fail:
    /* back to unbuilt: the weights go home to the import */
    ot_train_session_free(s->ts);
    s->ts = NULL;
    free(s->sig);
    s->sig = NULL;
    s->n_sig = 0;
    return ot_error_prefix(err, "%s: ", fn);
}

/* ---- steps -------------------------------------------------------------------- */

onnxtrain_status onnxtrain_prepare(onnxtrain_session *s, const onnxtrain_tensor *inputs, int n_inputs,
                                   const onnxtrain_tensor *labels) {
    ot_error err = {0};
    api_batch b = {0};
    ot_status st = api_enter(s, "onnxtrain_prepare", &err);
    if (st) return api_result(st, &err);
    if (!(st = api_batch_make(inputs, n_inputs, labels, &b, &err))) st = api_build(s, &b, true, "onnxtrain_prepare", &err);
    else ot_error_prefix(&err, "onnxtrain_prepare: ");
    api_batch_free(&b);
    api_leave(s);
    return api_result(st, &err);
}

onnxtrain_status onnxtrain_train_step(onnxtrain_session *s, const onnxtrain_tensor *inputs, int n_inputs,
                                      const onnxtrain_tensor *labels, double *loss) {
    ot_error err = {0};
    api_batch b = {0};
    const char *fn = "onnxtrain_train_step";
    ot_status st = api_enter(s, fn, &err);
    if (st) return api_result(st, &err);
    if (s->ts && s->o.split_update)
        st = ot_fail(&err, OT_E_USAGE, "%s: the session takes its steps in two calls (onnxtrain_backward came "
                     "first): use onnxtrain_optimizer_step", fn);
    if (!st && (st = api_batch_make(inputs, n_inputs, labels, &b, &err))) ot_error_prefix(&err, "%s: ", fn);
    if (!st) st = api_build(s, &b, true, fn, &err);
    double l = NAN;
    if (!st && !(st = ot_train_step_once(s->ts, &b.d, s->step, &l, &err))) {
        s->step++;
        if (loss) *loss = l;
    }
    api_batch_free(&b);
    api_leave(s);
    return api_result(st, &err);
}

int64_t onnxtrain_step_count(const onnxtrain_session *s) { return s && !s->closed ? s->step : 0; }

onnxtrain_status onnxtrain_eval(onnxtrain_session *s, const onnxtrain_tensor *inputs, int n_inputs,
                                const onnxtrain_tensor *labels, double *loss, double *accuracy) {
    ot_error err = {0};
    api_batch b = {0};
    const char *fn = "onnxtrain_eval";
    ot_status st = api_enter(s, fn, &err);
    if (st) return api_result(st, &err);
    if (!loss) st = ot_fail(&err, OT_E_USAGE, "%s: loss is NULL", fn);
    if (!st && (st = api_batch_make(inputs, n_inputs, labels, &b, &err))) ot_error_prefix(&err, "%s: ", fn);
    if (!st) st = api_build(s, &b, false, fn, &err);
    ot_train_epoch_stats e = {0};
    if (!st && (st = ot_train_validate(s->ts, &b.d, &e, &err))) ot_error_prefix(&err, "%s: ", fn);
    if (!st) {
        *loss = e.val_loss;
        if (accuracy) *accuracy = e.val_accuracy;
    }
    api_batch_free(&b);
    api_leave(s);
    return api_result(st, &err);
}
