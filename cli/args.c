/* args.c — option-value parsing shared by the CLI commands (see args.h). */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/args.h"
#include "cli/defaults.h"
#include "cli/wait_policy.h"
#include "train/npy.h"
#include "train/outputs.h"
#include "train/train.h"

/* The option values are checked by three parsers, one per kind (integer, real, size),
 * all with the same rules: the whole text is the number (no leading blanks, no
 * trailing junk), a value the type cannot hold is "out of range" rather than clamped,
 * and a value outside the option's range names the option and the range. */

/* Shared start: a value is present and does not begin with a blank (strtoll and
 * strtod would skip it, and "--steps ' 5'" is more likely a quoting slip). */
static ot_status value_present(const char *opt, const char *text, ot_error *err) {
    if (!text || !*text) return ot_fail(err, OT_E_USAGE, "%s: missing value", opt);
    if (isspace((unsigned char)text[0])) return ot_fail(err, OT_E_USAGE, "%s '%s': starts with a blank", opt, text);
    return OT_OK;
}

ot_status ot_args_int(const char *opt, const char *text, int64_t min, int64_t max, int64_t *out, ot_error *err) {
    ot_status st = value_present(opt, text, err);
    if (st) return st;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text) return ot_fail(err, OT_E_USAGE, "%s '%s': expected an integer", opt, text);
    if (*end) return ot_fail(err, OT_E_USAGE, "%s '%s': expected an integer, found '%s' after it", opt, text, end);
    /* beyond int64 on a side the option leaves open: the type is the only limit */
    if (errno == ERANGE && ((v > 0 && max == INT64_MAX) || (v < 0 && min == INT64_MIN)))
        return ot_fail(err, OT_E_USAGE, "%s %s: does not fit a 64-bit integer", opt, text);
    if (errno == ERANGE || v < min || v > max) {
        if (max == INT64_MAX)
            return ot_fail(err, OT_E_USAGE, "%s %s: must be at least %lld", opt, text, (long long)min);
        return ot_fail(err, OT_E_USAGE, "%s %s: must be between %lld and %lld", opt, text, (long long)min,
                       (long long)max);
    }
    *out = v;
    return OT_OK;
}

/* The text of a real's range, e.g. "> 0", ">= 0 and < 1". */
static void range_text(const ot_args_real_range *r, char *buf, size_t n) {
    int k = snprintf(buf, n, "%s %g", r->min_exclusive ? ">" : ">=", r->min);
    if (r->has_max && k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, " and %s %g", r->max_exclusive ? "<" : "<=", r->max);
}

ot_status ot_args_real(const char *opt, const char *text, const ot_args_real_range *r, double *out, ot_error *err) {
    ot_status st = value_present(opt, text, err);
    if (st) return st;
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text) return ot_fail(err, OT_E_USAGE, "%s '%s': expected a number", opt, text);
    if (*end) return ot_fail(err, OT_E_USAGE, "%s '%s': expected a number, found '%s' after it", opt, text, end);
    if (isnan(v)) return ot_fail(err, OT_E_USAGE, "%s '%s': must be a number, not NaN", opt, text);
    if (isinf(v) && errno != ERANGE) return ot_fail(err, OT_E_USAGE, "%s '%s': must be finite", opt, text);
    if (isinf(v)) return ot_fail(err, OT_E_USAGE, "%s '%s': too large for a double (above %g)", opt, text, DBL_MAX);
    /* ERANGE on a tiny value is underflow: strtod returned the nearest double (a
     * subnormal such as 1e-320, or 0), which is a valid value, as Python's float()
     * and so torch take it. Only the range decides. */
    char rt[80];
    range_text(r, rt, sizeof rt);
    bool low = r->min_exclusive ? !(v > r->min) : !(v >= r->min);
    bool high = r->has_max && (r->max_exclusive ? !(v < r->max) : !(v <= r->max));
    if (low || high) {
        if (v == 0 && errno == ERANGE)
            return ot_fail(err, OT_E_USAGE, "%s %s: rounds to 0 as a double; must be %s", opt, text, rt);
        return ot_fail(err, OT_E_USAGE, "%s %s: must be %s", opt, text, rt);
    }
    *out = v;
    return OT_OK;
}

ot_status ot_args_double(const char *opt, const char *text, double min, bool min_exclusive, double *out,
                         ot_error *err) {
    ot_args_real_range r = {.min = min, .min_exclusive = min_exclusive};
    return ot_args_real(opt, text, &r, out, err);
}

ot_status ot_args_size(const char *opt, const char *text, int64_t *bytes, ot_error *err) {
    ot_status st = value_present(opt, text, err);
    if (st) return st;
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || isnan(v))
        return ot_fail(err, OT_E_USAGE, "%s '%s': expected a size such as 4096, 512M or 1.5G", opt, text);
    if (v < 0) return ot_fail(err, OT_E_USAGE, "%s '%s': a size cannot be negative", opt, text);
    double mult = 1;
    const char *u = end;
    switch (toupper((unsigned char)*u)) {
    case 'K': mult = 1024.0; u++; break;
    case 'M': mult = 1024.0 * 1024; u++; break;
    case 'G': mult = 1024.0 * 1024 * 1024; u++; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; u++; break;
    default: break;
    }
    if (mult > 1 && (*u == 'i' || *u == 'I')) u++;
    if (*u == 'B' || *u == 'b') u++;
    if (*u) return ot_fail(err, OT_E_USAGE, "%s '%s': unknown unit '%s' (use K, M, G or T)", opt, text, end);
    double b = v * mult;
    if (!(b <= 9.0e18)) return ot_fail(err, OT_E_USAGE, "%s '%s': too large (the most is 8E, 9e18 bytes)", opt, text);
    *bytes = (int64_t)b;
    return OT_OK;
}

ot_status ot_args_product(const char *what, int64_t a, int64_t b, int64_t max, int64_t *out, ot_error *err) {
    int64_t p;
    if (__builtin_mul_overflow(a, b, &p) || p > max)
        return ot_fail(err, OT_E_USAGE, "%s (%lld x %lld) is too large: the most is %lld", what, (long long)a,
                       (long long)b, (long long)max);
    if (out) *out = p;
    return OT_OK;
}

ot_status ot_args_add_input(ot_input_specs *l, const char *opt, const char *text, ot_error *err) {
    if (!text || !*text) return ot_fail(err, OT_E_USAGE, "%s: missing FILE or NAME=FILE", opt);
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 4;
        ot_input_spec *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return ot_fail(err, OT_E_MEMORY, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    ot_input_spec s = {0};
    const char *eq = strchr(text, '=');
    if (eq && eq != text && !memchr(text, '/', (size_t)(eq - text))) {
        s.name = strndup(text, (size_t)(eq - text));
        s.path = strdup(eq + 1);
        if (s.path && !*s.path) {
            free(s.name);
            free(s.path);
            return ot_fail(err, OT_E_USAGE, "%s '%s': missing FILE after '='", opt, text);
        }
    } else {
        s.path = strdup(text);
    }
    if (!s.path || (eq && eq != text && !s.name && !memchr(text, '/', (size_t)(eq - text)))) {
        free(s.name);
        free(s.path);
        return ot_fail(err, OT_E_MEMORY, "out of memory");
    }
    l->v[l->n++] = s;
    return OT_OK;
}

void ot_input_specs_free(ot_input_specs *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].path);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

ot_status ot_args_add_input_files(ot_run_files *f, const ot_input_specs *l, const char *opt, const char *labels,
                                  const char *labels_opt, ot_error *err) {
    ot_status st = OT_OK;
    for (int i = 0; i < l->n && !st; i++) st = ot_run_files_input(f, opt, l->v[i].path, err);
    if (!st) st = ot_run_files_input(f, labels_opt, labels, err);
    return st;
}

ot_status ot_args_check_output(const ot_model *m, const ot_common_args *a, const char *opt, const char *path,
                               bool folder_of_files, ot_error *err) {
    if (!path) return OT_OK;
    ot_run_files f = {0};
    ot_status st = ot_run_files_model(&f, m, err);
    if (!st) st = ot_args_add_input_files(&f, &a->inputs, "--input", a->labels, "--labels", err);
    if (!st) st = ot_run_files_output(&f, opt, path, folder_of_files ? OT_OUTPUT_FOLDER_OF_FILES : OT_OUTPUT_FILE, err);
    if (!st) st = ot_run_files_check(&f, err);
    ot_run_files_free(&f);
    return st;
}

ot_status ot_str_list_add(ot_str_list *l, const char *s, ot_error *err) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 4;
        const char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return ot_fail(err, OT_E_MEMORY, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return OT_OK;
}

void ot_str_list_free(ot_str_list *l) {
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* How a data array is named in messages. */
static const char *array_desc(const char *name, char *buf, size_t n) {
    if (!strcmp(name, OT_DATA_LABELS)) snprintf(buf, n, "--labels");
    else if (*name) snprintf(buf, n, "input '%s'", name);
    else snprintf(buf, n, "--input");
    return buf;
}

ot_status ot_args_load_dataset(const ot_input_specs *inputs, const char *labels, ot_dataset *d, ot_error *err) {
    ot_status st;
    for (int i = 0; i <= inputs->n; i++) {
        const char *path = i < inputs->n ? inputs->v[i].path : labels;
        if (!path) continue;
        const char *name = i < inputs->n ? (inputs->v[i].name ? inputs->v[i].name : "") : OT_DATA_LABELS;
        ot_tensor *t = NULL;
        if ((st = ot_npy_read(path, &t, err))) return st;
        if (d->n_arrays > 0 && t->shape.rank >= 1 && t->shape.dim[0] != d->n_samples) {
            char a[300], b[300];
            st = ot_fail(err, OT_E_DATA, "sample counts differ: %s (%s) has %lld samples, %s (%s) has %lld",
                         array_desc(d->arrays[0].name, a, sizeof a), d->arrays[0].path, (long long)d->n_samples,
                         array_desc(name, b, sizeof b), path, (long long)t->shape.dim[0]);
            ot_tensor_free(t);
            return st;
        }
        if ((st = ot_dataset_add(d, name, path, -1, t, err))) return st;
    }
    return OT_OK;
}

/* --lora-target GLOB,...: once, split at commas. */
static ot_status lora_targets(ot_common_args *a, const char *arg, ot_error *err) {
    if (a->lora_text) return ot_fail(err, OT_E_USAGE, "--lora-target given twice: list the globs once, comma-separated");
    if (!(a->lora_text = ot_strdup(arg))) return ot_fail(err, OT_E_MEMORY, "out of memory");
    for (char *p = a->lora_text, *next; p; p = next) {
        if ((next = strchr(p, ','))) *next++ = 0;
        if (!*p) return ot_fail(err, OT_E_USAGE, "--lora-target '%s': an empty glob", arg);
        ot_status st = ot_str_list_add(&a->lora_target, p, err);
        if (st) return st;
    }
    return OT_OK;
}

static bool sgd_implied(const struct ot_common_args *a);

/* --output NAME, the old spelling of --loss-output: a file name (".onnx", a folder)
 * was meant for -o, and is refused saying so; a plain name still names the model
 * output the loss reads (ot_args_notes says it is now --loss-output). */
static ot_status old_output(ot_common_args *a, const char *arg, ot_error *err) {
    size_t n = arg ? strlen(arg) : 0;
    if (n == 0) return ot_fail(err, OT_E_USAGE, "--output: missing value");
    if (strchr(arg, '/') || (n > 5 && !strcasecmp(arg + n - 5, ".onnx")))
        return ot_fail(err, OT_E_USAGE, "--output %s: the tuned model file is -o %s (--output-model); --output was the "
                       "model output the loss reads, now --loss-output NAME", arg, arg);
    a->loss.output_name = arg;
    a->output_old = true;
    return OT_OK;
}

void ot_args_notes(const ot_common_args *a, const char *cmd, FILE *f) {
    if (sgd_implied(a))
        fprintf(f, "onnxtrain %s: note: --%s without --optimizer: SGD (lr 0.01 unless --lr), whose option it is; the "
                "default optimizer is AdamW\n", cmd, isnan(a->momentum) ? "nesterov" : "momentum");
    if (a->output_old)
        fprintf(f, "onnxtrain %s: note: --output %s read as --loss-output %s (the model output the loss reads; "
                "--output is its old name); train's -o FILE names the tuned model file\n", cmd, a->loss.output_name,
                a->loss.output_name);
}

ot_status ot_args_common(ot_common_args *a, int code, const char *arg, bool *handled, ot_error *err) {
    static const ot_args_real_range beta_range = {.min = 0, .has_max = true, .max = 1, .max_exclusive = true};
    int64_t v;
    ot_status st = OT_OK;
    *handled = true;
    switch (code) {
    case OT_ARG_INPUT: return ot_args_add_input(&a->inputs, "--input", arg, err);
    case OT_ARG_LABELS: a->labels = arg; return OT_OK;
    case OT_ARG_LOSS: return ot_loss_kind_parse(arg, &a->loss.kind, err);
    case OT_ARG_OUTPUT: a->loss.output_name = arg; return OT_OK;
    case OT_ARG_OUTPUT_OLD: return old_output(a, arg, err);
    case OT_ARG_CLASS_AXIS:
        if (!(st = ot_args_int("--class-axis", arg, -OT_MAX_RANK, OT_MAX_RANK - 1, &v, err)))
            a->loss.class_axis = (int)v;
        return st;
    case OT_ARG_IGNORE:
        if (arg && !strcmp(arg, "none")) { /* every label must be a class */
            a->loss.has_ignore_index = false;
            return OT_OK;
        }
        if (!(st = ot_args_int("--ignore-index", arg, INT64_MIN, INT64_MAX, &v, err))) {
            a->loss.has_ignore_index = true;
            a->loss.ignore_index = v;
        }
        return st;
    case OT_ARG_FREEZE: return ot_str_list_add(&a->freeze, arg, err);
    case OT_ARG_TRAIN: return ot_str_list_add(&a->train, arg, err);
    case OT_ARG_BATCH: return ot_args_int("--batch-size", arg, 1, INT32_MAX, &a->batch_size, err);
    case OT_ARG_SEED:
        if (!(st = ot_args_int("--seed", arg, 0, INT64_MAX, &v, err))) a->seed = (uint64_t)v;
        return st;
    case OT_ARG_THREADS:
        if (!(st = ot_args_int("--threads", arg, 1, 1024, &v, err))) a->n_threads = (int)v;
        return st;
    case OT_ARG_WAIT: {
        ot_wait_policy p;
        if (!ot_wait_policy_parse(arg, &p))
            return ot_fail(err, OT_E_USAGE, "--wait-policy '%s': expected auto, spin or passive", arg);
        return OT_OK; /* already applied before main: cli/wait_policy.c */
    }
    case OT_ARG_DEVICE: a->device = arg; return OT_OK;
    case OT_ARG_TF32: a->tf32 = true; return OT_OK;
    case OT_ARG_BIND: return ot_str_list_add(&a->bind, arg, err);
    case OT_ARG_REMAT: a->remat = arg; return OT_OK;
    case OT_ARG_BUDGET: return ot_args_budget(arg, &a->memory_budget, err);
    case OT_ARG_CHUNKED_LOSS: return ot_chunked_loss_parse("--chunked-loss", arg, &a->chunked_loss, err);
    case OT_ARG_CHUNKED_ROWS: return ot_args_int("--chunked-loss-rows", arg, 1, INT32_MAX, &a->chunked_rows, err);
    case OT_ARG_FUSED_ATTN: return ot_fused_attn_parse("--fused-attention", arg, &a->fused_attention, err);
    case OT_ARG_REMAT_TIME: return ot_args_double("--remat-time-limit", arg, 0, true, &a->remat_time_limit, err);
    case OT_ARG_OPTIMIZER: a->optim_named = true; return ot_optim_kind_parse(arg, &a->optim, err);
    case OT_ARG_LR: return ot_args_double("--lr", arg, 0, true, &a->lr, err);
    case OT_ARG_MOMENTUM: return ot_args_double("--momentum", arg, 0, false, &a->momentum, err);
    case OT_ARG_NESTEROV: a->nesterov = true; return OT_OK;
    case OT_ARG_WD: return ot_args_double("--weight-decay", arg, 0, false, &a->weight_decay, err);
    case OT_ARG_BETA1: return ot_args_real("--beta1", arg, &beta_range, &a->beta1, err);
    case OT_ARG_BETA2: return ot_args_real("--beta2", arg, &beta_range, &a->beta2, err);
    case OT_ARG_EPS: return ot_args_double("--eps", arg, 0, true, &a->eps, err);
    case OT_ARG_CLIP: return ot_args_double("--clip-grad-norm", arg, 0, true, &a->clip, err);
    case OT_ARG_SCHED: return ot_schedule_kind_parse(arg, &a->schedule, err);
    case OT_ARG_WARMUP: return ot_args_int("--warmup-steps", arg, 0, OT_ARGS_MAX_STEPS, &a->warmup, err);
    case OT_ARG_ACCUM: return ot_args_int("--accum", arg, 1, OT_ARGS_MAX_ACCUM, &a->accum, err);
    case OT_ARG_FUSE: a->fuse_update = true; return OT_OK;
    case OT_ARG_LOSS_SCALE:
        if (strcmp(arg, "dynamic") == 0) a->loss_scale.mode = OT_LOSS_SCALE_DYNAMIC;
        else if (strcmp(arg, "off") == 0) a->loss_scale.mode = OT_LOSS_SCALE_OFF;
        else return ot_fail(err, OT_E_USAGE, "--loss-scale '%s': expected dynamic or off", arg);
        return OT_OK;
    case OT_ARG_LS_INIT: return ot_args_double("--loss-scale-init", arg, 0, true, &a->loss_scale.init, err);
    case OT_ARG_LS_GROWTH: return ot_args_double("--loss-scale-growth", arg, 1, false, &a->loss_scale.growth, err);
    case OT_ARG_LS_BACKOFF: return ot_args_double("--loss-scale-backoff", arg, 0, true, &a->loss_scale.backoff, err);
    case OT_ARG_LS_INTERVAL:
        return ot_args_int("--loss-scale-growth-interval", arg, 1, INT32_MAX, &a->loss_scale.growth_interval, err);
    case OT_ARG_LORA: return ot_lora_parse(arg, &a->lora, err);
    case OT_ARG_LORA_TARGET: return lora_targets(a, arg, err);
    case OT_ARG_PRECISION: return ot_precision_parse(arg, &a->precision, err);
    default: *handled = false; return OT_OK;
    }
}

void ot_common_args_init(ot_common_args *a) {
    memset(a, 0, sizeof *a);
    a->loss.kind = OT_LOSS_CROSS_ENTROPY;
    a->loss.class_axis = -1;
    a->loss.has_ignore_index = true; /* as torch.nn.CrossEntropyLoss: labels of -100 count nothing */
    a->loss.ignore_index = OT_DEFAULT_IGNORE_INDEX;
    a->optim = OT_OPTIM_DEFAULT_KIND;
    a->lr = a->momentum = a->weight_decay = a->beta1 = a->beta2 = a->eps = NAN;
    a->schedule = OT_SCHED_CONSTANT;
}

void ot_common_args_free(ot_common_args *a) {
    ot_input_specs_free(&a->inputs);
    ot_str_list_free(&a->freeze);
    ot_str_list_free(&a->train);
    ot_str_list_free(&a->bind);
    ot_str_list_free(&a->lora_target);
    free(a->lora_text);
}

/* --momentum or --nesterov without --optimizer: SGD's options, so SGD with its
 * defaults, as the scripts meant that gave them when SGD was the default. */
static bool sgd_implied(const ot_common_args *a) { return !a->optim_named && (!isnan(a->momentum) || a->nesterov); }

ot_optim_kind ot_args_optim_kind(const ot_common_args *a) { return sgd_implied(a) ? OT_OPTIM_SGD : a->optim; }

void ot_common_args_to_train(const ot_common_args *a, ot_train_options *o) {
    o->loss = a->loss;
    o->freeze = a->freeze.v;
    o->n_freeze = a->freeze.n;
    o->train = a->train.v;
    o->n_train = a->train.n;
    o->lora = a->lora;
    o->lora.targets = a->lora_target.v;
    o->lora.n_targets = a->lora_target.n;
    o->precision = a->precision;
    o->batch_size = a->batch_size;
    o->seed = a->seed;
    o->n_threads = a->n_threads;
    o->device = a->device;
    o->tf32 = a->tf32;
    o->remat = a->remat ? a->remat : OT_CLI_REMAT_DEFAULT; /* the same in every command */
    o->memory_budget = a->memory_budget;
    o->remat_time_limit = a->remat_time_limit;
    o->chunked_loss = a->chunked_loss;
    o->chunked_loss_rows = a->chunked_rows;
    o->fused_attention = a->fused_attention;
    o->bind = a->bind.v;
    o->n_bind = a->bind.n;
    ot_optim_config_default(&o->optim, ot_args_optim_kind(a));
    if (!a->optim_named && !sgd_implied(a)) o->optim.lr = OT_OPTIM_DEFAULT_LR; /* the default recipe (train/optim.h) */
    if (!isnan(a->lr)) o->optim.lr = a->lr;
    if (!isnan(a->momentum)) o->optim.momentum = a->momentum;
    if (!isnan(a->weight_decay)) o->optim.weight_decay = a->weight_decay;
    if (!isnan(a->beta1)) o->optim.beta1 = a->beta1;
    if (!isnan(a->beta2)) o->optim.beta2 = a->beta2;
    if (!isnan(a->eps)) o->optim.eps = a->eps;
    o->optim.nesterov = a->nesterov;
    o->optim.clip_grad_norm = a->clip;
    o->optim.schedule = a->schedule;
    o->optim.warmup_steps = a->warmup;
    if (a->accum) o->accum = a->accum;
    o->fuse_update = a->fuse_update;
    o->loss_scale = a->loss_scale;
}

ot_status ot_args_budget(const char *text, int64_t *bytes, ot_error *err) {
    ot_status st = ot_args_size("--memory-budget", text, bytes, err);
    if (!st && *bytes == 0)
        st = ot_fail(err, OT_E_USAGE, "--memory-budget '%s': a budget of 0 bytes holds no step; give the peak to fit "
                     "(e.g. 512M), or leave the option out for no budget", text);
    return st;
}

ot_status ot_args_one_model(int argc, char **argv, int optind_after, const char **model, ot_error *err) {
    if (optind_after >= argc) return ot_fail(err, OT_E_USAGE, "missing MODEL.onnx");
    if (optind_after != argc - 1)
        return ot_fail(err, OT_E_USAGE, "expected one MODEL.onnx, got extra '%s'", argv[optind_after + 1]);
    *model = argv[optind_after];
    return OT_OK;
}

ot_status ot_args_parse(int argc, char **argv, const char *shortopts, const struct option *longopts,
                        ot_common_args *args, ot_args_own_fn own, void *cmd, bool *help, ot_error *err) {
    *help = false;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (c == 'h') {
            *help = true;
            return OT_OK;
        }
        bool taken = false;
        ot_status st = own(cmd, c, optarg, &taken, err);
        if (!st && !taken) st = ot_args_common(args, c, optarg, &taken, err);
        if (st) return st;
        if (!taken) return ot_fail(err, OT_E_USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
    }
    return OT_OK;
}
