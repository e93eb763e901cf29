/* cmd_bare.c — the bare form, `onnxtrain [OPTIONS] MODEL.onnx`: `onnxtrain train` for
 * the user who names a model and nothing else.
 *
 * With data (--input or --labels) it is `train` itself, read by train's own parser,
 * with one default of its own: -o MODEL.tuned.onnx in the current folder (refused
 * when that file exists: the bare form never writes over a file it was not told to);
 * --remat defaults to auto as in every command (cli/defaults.h).
 * Without data it does what can be done honestly without data: one import, a
 * plan-only session to learn the inputs' bound shapes, seeded synthetic data shaped
 * like them (train/train_synthetic.h), one step with --remat none and one with the
 * policy (the sessions `verify` builds), compared bitwise; then it prints the plan,
 * the verdict and the command that trains. Exit 0, or 11 when a tensor differs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/defaults.h"
#include "cli/measure_print.h"
#include "ir/human_size.h"
#include "kernels/kernel.h"
#include "train/measure.h"
#include "train/outputs.h"
#include "train/train.h"
#include "train/train_synthetic.h"

/* Timed rounds of the time line without --time-steps (as verify's). */
#define BARE_TIME_STEPS 5

static void bare_usage(FILE *f) {
    fputs("usage: onnxtrain [OPTIONS] MODEL.onnx\n\n"
          "The bare form: `onnxtrain train` with defaults, for when you name a model and nothing else.\n\n"
          "Without data (no --input, no --labels) nothing is trained and nothing is written. It plans\n"
          "one training step under the policy (--remat, default auto), runs one step with --remat none\n"
          "and one with the policy on synthetic inputs and compares the loss, every gradient and every\n"
          "state update bitwise (as `onnxtrain verify`), then prints the command that trains. The\n"
          "synthetic data is seeded (--seed): floats N(0,1); integer ids in [0, rows) of the table a\n"
          "Gather reads with them, else in [0, 2); cross-entropy labels in [0, classes). The batch is\n"
          "the model's, else --batch-size, else 4; other symbolic dims --bind, else 8, but a KV cache\n"
          "(past_key_values.*) is empty, its attention_mask ones and position_ids 0..T-1, as HF's\n"
          "defaults, and a dim the graph derives (past + sequence) is inferred. Then it times\n"
          "training steps of both as `onnxtrain bench` does (one warm-up step each, then\n"
          "--time-steps N interleaved steps, default 5, 0 for none) and prints the median step time\n"
          "[IQR] of each and their ratio. Exit 0, or 11 when the two steps differ.\n\n"
          "With data it trains: it is `onnxtrain train MODEL.onnx OPTIONS` with\n"
          "  -o                        default MODEL.tuned.onnx in the current folder (the model's file\n"
          "                            name with .onnx replaced). If that file exists nothing runs\n"
          "                            (exit 2): the bare form never overwrites a file; give -o FILE.\n"
          "--remat defaults to auto, as in every command (docs/training.md, Defaults).\n"
          "Every option of `onnxtrain train --help` applies, before or after the model.\n\n"
          "Which words start the bare form: when the first argument is not a command (info, eval, grad,\n"
          "train, plan, verify, bench), it is the bare form if it is an option or the model: a word ending in\n"
          ".onnx or naming an existing file. Anything else is an unknown command (exit 2), so a typo\n"
          "such as `onnxtrain trian m.onnx` still fails. A model file named like a command: ./train.\n",
          f);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool ot_cli_is_bare(const char *arg) { return arg[0] == '-' || ends_with(arg, ".onnx") || is_file(arg); }

/* Everything one bare command holds. */
typedef struct bare {
    int argc; /* the user's arguments, the program name excluded */
    char **argv;
    ot_common_args ca;
    const char *model, *out;
    bool help;
    char default_out[4096]; /* MODEL.tuned.onnx, when -o is not given */
    int64_t time_steps;     /* --time-steps (without data): rounds of the time line, 0 none */
    bool time_steps_given;
    double load0; /* the load average when the command started */
} bare;

/* "train", the user's arguments, then extra: a new array (the strings are shared). */
static char **train_argv(const bare *b, const char *const *extra, int n_extra, int *n) {
    char **v = calloc((size_t)(b->argc + n_extra + 2), sizeof *v);
    if (!v) return NULL;
    v[0] = (char *)"train";
    for (int i = 0; i < b->argc; i++)
        v[1 + i] = b->argv[i];
    for (int i = 0; i < n_extra; i++)
        v[1 + b->argc + i] = (char *)extra[i];
    *n = 1 + b->argc + n_extra;
    return v;
}

/* The model's file name, folder dropped, with ".onnx" (or nothing) replaced by
 * ".tuned.onnx": in the current folder, where the user is. */
static ot_status default_output(const char *model, char *buf, size_t n, ot_error *err) {
    const char *base = strrchr(model, '/');
    base = base ? base + 1 : model;
    size_t len = strlen(base);
    if (ends_with(base, ".onnx")) len -= 5;
    if (len == 0)
        return ot_fail(err, OT_E_USAGE, "'%s': no file name to name the tuned model after; give -o FILE", model);
    if ((size_t)snprintf(buf, n, "%.*s.tuned.onnx", (int)len, base) >= n)
        return ot_fail(err, OT_E_USAGE, "'%s': file name too long; give -o FILE", model);
    return OT_OK;
}

/* One word of a command line, quoted for a POSIX shell when it needs it. */
static void print_word(FILE *f, const char *w) {
    bool plain = *w != 0;
    for (const char *c = w; *c; c++)
        plain &= strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%", *c) != NULL;
    if (plain) {
        fprintf(f, " %s", w);
        return;
    }
    fputs(" '", f);
    for (const char *c = w; *c; c++)
        *c == '\'' ? fputs("'\\''", f) : fputc(*c, f);
    fputc('\'', f);
}

/* Reads the arguments as train does (a copy: getopt permutes), with -o added when
 * given (so train's checks of the output run); fills b. */
static ot_status parse(bare *b, const char *out, ot_error *err) {
    const char *extra[2] = {"-o", out};
    int n = 0;
    char **v = train_argv(b, extra, out ? 2 : 0, &n);
    if (!v) return ot_fail(err, OT_E_MEMORY, "out of memory");
    ot_common_args_free(&b->ca);
    ot_status st = ot_cmd_train_parse(n, v, &b->ca, &b->model, &b->out, &b->help, err);
    free(v);
    return st;
}

/* With data: `train` with the bare form's defaults, said on one line first. */
static int train_with_data(bare *b) {
    const char *extra[2];
    int n_extra = 0, n = 0;
    if (!b->out) {
        struct stat st;
        if (lstat(b->default_out, &st) == 0) { /* a dangling link too: rename would replace it */
            fprintf(stderr,
                    "onnxtrain: %s already exists; the bare form never overwrites a file: give -o FILE (or remove "
                    "it)\n",
                    b->default_out);
            return OT_E_USAGE;
        }
        extra[n_extra++] = "-o", extra[n_extra++] = b->default_out;
    }
    char **v = train_argv(b, extra, n_extra, &n);
    if (!v) {
        fputs("onnxtrain: out of memory\n", stderr);
        return OT_E_MEMORY;
    }
    fputs("onnxtrain: as: onnxtrain", stderr);
    for (int i = 0; i < n; i++)
        print_word(stderr, v[i]);
    fputc('\n', stderr);
    int rc = ot_cmd_train(n, v);
    free(v);
    return rc;
}

/* ---- without data: plan, verify on synthetic data, the command that trains ---- */

/* What one step computed, and what its session planned. */
typedef struct bare_step {
    ot_step_results r;
    ot_train_remat_summary rs;
    size_t at_peak[OT_MEM_COUNT];
    ot_train_memory_summary ms;
} bare_step;

/* The session options of a step as `verify` sets them: every sample of the data in
 * one step, the weights left in the model for the next step, NaNs compared as bits.
 * The budget is the policy's only: the plain step is checked, not fitted. */
static void step_options(const ot_common_args *ca, const char *policy, int64_t batch, ot_train_options *to) {
    ot_train_options_default(to);
    ot_common_args_to_train(ca, to);
    to->remat = policy;
    to->batch_size = batch;
    if (!strcmp(policy, "none")) to->memory_budget = 0;
    to->whole_batch = true;
    to->keep_host_weights = true;
    to->no_numerics_check = true;
}

static ot_status run_step(const bare *b, ot_model *m, ot_dataset *d, int64_t batch, const char *policy, bare_step *out,
                          ot_error *err) {
    ot_train_options to;
    step_options(&b->ca, policy, batch, &to);
    to.fuse_update = false; /* the gradients are read after the step: a fused one is freed at its update */
    ot_train_session *s = NULL;
    ot_status st = ot_train_session_new(m, &to, d, true, &s, err);
    if (!st) st = ot_train_step_results(s, d, &out->r, err);
    if (!st && b->ca.fuse_update) { /* the figures are the fused step's, planned as train runs it */
        ot_train_session_free(s);
        s = NULL;
        to.fuse_update = to.plan_only = true;
        st = ot_train_session_new(m, &to, d, true, &s, err);
        if (!st) out->r.planned_peak = ot_plan_peak_bytes(ot_train_plan(s));
    }
    if (!st) {
        out->rs = *ot_train_remat_info(s);
        for (int c = 0; c < OT_MEM_COUNT; c++)
            out->at_peak[c] = ot_plan_bytes_at_peak(ot_train_plan(s), (ot_mem_category)c);
        ot_train_memory_info(s, &out->ms);
    }
    ot_train_session_free(s);
    return st;
}

/* The synthetic data (cli.h): shaped by a plan-only session (no data, --remat none)
 * at the batch and binds the commands pick without data (cli/defaults.h). */
ot_status ot_cli_synthetic_data(const ot_common_args *ca, ot_model *m, ot_dataset *d, int64_t *batch,
                                ot_cli_batch_pick *pick, ot_error *err) {
    ot_status st = ot_cli_pick_batch(m->graph, ca, -1, pick, err);
    if (st) return st;
    ot_train_options to;
    step_options(ca, "none", pick->batch, &to);
    to.plan_only = true;
    to.bind = pick->binds;
    to.n_bind = pick->n_binds;
    ot_train_session *s = NULL;
    st = ot_train_session_new(m, &to, NULL, true, &s, err);
    if (!st) {
        *batch = ot_train_batch_size(s);
        st = ot_train_synthetic_data(s, ca->seed, *batch, d, err);
    }
    ot_train_session_free(s);
    return st;
}

/* "[N,16]": an array's shape with the sample axis as N; an axis the model leaves
 * symbolic (model: its import's shape, or NULL) and no --bind fixes is named, as the
 * data may give it any size. */
static void sample_shape(const bare *b, const ot_graph *g, const ot_shape *model, const ot_tensor *t, char *buf,
                         size_t n) {
    size_t l = (size_t)snprintf(buf, n, "[N");
    for (int k = 1; k < t->shape.rank && l < n; k++) {
        int sym = model && k < model->rank && model->dim[k] < 0 ? model->sym[k] : -1;
        if (sym >= 0 && !ot_cli_bound_by_user(&b->ca, g->syms[sym]))
            l += (size_t)snprintf(buf + l, n - l, ",%s", g->syms[sym]);
        else
            l += (size_t)snprintf(buf + l, n - l, ",%lld", (long long)t->shape.dim[k]);
    }
    if (l < n) snprintf(buf + l, n - l, "]");
}

static void print_plan(const bare *b, const char *policy, int64_t batch, const ot_cli_batch_pick *pick,
                       const bare_step *v0, const bare_step *v1) {
    char pk0[32], pk1[32], change[64], label[160];
    ot_human_size((double)v0->r.planned_peak, pk0, sizeof pk0);
    ot_human_size((double)v1->r.planned_peak, pk1, sizeof pk1);
    ot_cli_peak_change((int64_t)v0->r.planned_peak, (int64_t)v1->r.planned_peak, change, sizeof change);
    printf("plan of one training step, batch %lld%s, %s%s:\n", (long long)batch, ot_cli_batch_note(pick),
           ot_optim_kind_name(ot_args_optim_kind(&b->ca)), b->ca.fuse_update ? ", updates fused (--fuse-update)" : "");
    if (*pick->dims)
        printf("  %s = %d (a small default without data; --bind NAME=SIZE for another)\n", pick->dims,
               OT_CLI_DIM_NO_DATA);
    ot_cli_remat_label(policy, v1->ms.budget, &v1->rs, label, sizeof label);
    if (v1->rs.no_gain)
        printf("  --remat %s: peak %s, as without remat\n", label, pk1);
    else
        printf("  --remat %s: peak %s instead of %s without remat: %s\n", label, pk1, pk0, change);
    printf("  at the peak:");
    bool first = true;
    for (int c = 0; c < OT_MEM_COUNT; c++) {
        if (!v1->at_peak[c]) continue;
        char hb[32];
        ot_human_size((double)v1->at_peak[c], hb, sizeof hb);
        printf("%s %s %s", first ? "" : ",", ot_mem_category_name((ot_mem_category)c), hb);
        first = false;
    }
    const ot_train_remat_summary *rs = &v1->rs;
    printf("\n  recompute: %d nodes, +%.1f%% FLOPs per step\n", rs->n_clones,
           rs->step_flops > 0 ? 100.0 * rs->extra_flops / rs->step_flops : 0.0);
}

/* The verdict; returns how many tensors differ. */
static int print_verify(const bare *b, const char *policy, const ot_dataset *d, const bare_step *v0,
                        const bare_step *v1) {
    printf("\nverify: one step with --remat none and one with --remat %s on synthetic data (--seed %llu):\n", policy,
           (unsigned long long)b->ca.seed);
    int w = 6; /* "labels" */
    for (int i = 0; i < d->n_arrays; i++)
        if (strcmp(d->arrays[i].name, OT_DATA_LABELS) && (int)strlen(d->arrays[i].name) > w)
            w = (int)strlen(d->arrays[i].name);
    for (int i = 0; i < d->n_arrays; i++) {
        const ot_data_array *a = &d->arrays[i];
        char sh[128];
        ot_shape_str(NULL, &a->t->shape, sh, sizeof sh);
        printf("  %-*s %s %s\n", w, strcmp(a->name, OT_DATA_LABELS) ? a->name : "labels", sh, a->path);
    }
    int n_diff = 0, n = v0->r.n < v1->r.n ? v0->r.n : v1->r.n;
    for (int i = 0; i < n; i++) {
        bool eq = false;
        double diff = ot_tensor_bitwise_diff(v0->r.tensors[i], v1->r.tensors[i], &eq);
        if (!eq && n_diff++ < 10) printf("  DIFFERENT %s: max |diff| %.9g\n", v0->r.names[i], diff);
    }
    n_diff += v0->r.n != v1->r.n;
    int n_grad = 0, n_state = 0;
    for (int i = 0; i < v0->r.n; i++) {
        n_grad += !strncmp(v0->r.names[i], "grad:", 5);
        n_state += !strncmp(v0->r.names[i], "state:", 6);
    }
    printf("  loss %.9g (none) and %.9g (%s); %s: %d of %d tensors differ (the loss, %d gradients, %d state "
           "updates)\n",
           v0->r.loss, v1->r.loss, policy, n_diff ? "MISMATCH" : "bitwise equal", n_diff, v0->r.n, n_grad, n_state);
    return n_diff;
}

/* A placeholder file name for input `name`: its letters and digits, upper case. */
static void placeholder(const char *name, char *buf, size_t n) {
    size_t l = 0;
    for (const char *c = name; *c && l + 5 < n; c++)
        buf[l++] = (char)((*c >= 'a' && *c <= 'z')                                 ? *c - 32
                          : ((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')) ? *c
                                                                                   : '_');
    snprintf(buf + l, n - l, "%s.npy", l ? "" : "INPUT");
}

/* Epochs in the suggested command: with the default optimizer every sample that can
 * learn loses at least half its loss in 5 (docs/training.md, Defaults). */
#define BARE_EPOCHS 5

/* An array the session made for a KV-cache input (train/kv_cache.h), not data. */
static bool is_kv_default(const ot_data_array *a) { return !strncmp(a->path, "default: ", 9); }

static void print_command(const bare *b, const ot_graph *g, const char *dims, const ot_dataset *d) {
    printf("\nto train, give it data (.npy files, samples along axis 0):\n  onnxtrain");
    for (int i = 0; i < b->argc; i++)
        print_word(stdout, b->argv[i]);
    int n_kv = 0;
    for (int i = 0; i < d->n_arrays; i++) {
        const ot_data_array *a = &d->arrays[i];
        char ph[300], spec[600];
        bool labels = !strcmp(a->name, OT_DATA_LABELS);
        if (is_kv_default(a)) { /* optional: the session defaults them as it did here */
            n_kv++;
            continue;
        }
        placeholder(labels ? "labels" : a->name, ph, sizeof ph);
        snprintf(spec, sizeof spec, "%s%s%s", labels ? "" : a->name, labels ? "" : "=", ph);
        printf(" %s", labels ? "--labels" : "--input");
        print_word(stdout, spec);
    }
    /* one epoch of a small data set is a few steps: suggest enough to learn from
     * (docs/training.md, Defaults), unless the length is already given */
    bool length = false;
    for (int i = 0; i < b->argc; i++)
        length |= !strncmp(b->argv[i], "--epochs", 8) || !strncmp(b->argv[i], "--steps", 7);
    if (!length) printf(" --epochs %d", BARE_EPOCHS);
    printf("\n  where");
    for (int i = 0, n = 0; i < d->n_arrays; i++) {
        const ot_data_array *a = &d->arrays[i];
        char ph[300], sh[128];
        bool labels = !strcmp(a->name, OT_DATA_LABELS);
        if (is_kv_default(a)) continue;
        placeholder(labels ? "labels" : a->name, ph, sizeof ph);
        int v = labels ? -1 : ot_graph_find_value(g, a->name);
        sample_shape(b, g, v >= 0 ? &g->values[v].shape : NULL, a->t, sh, sizeof sh);
        printf("%s %s is %s%s %s", n++ ? ";" : "", ph, ot_dtype_name(a->t->dtype),
               a->t->dtype == OT_I64 ? " (or int32)" : "", sh);
        if (labels && b->ca.loss.kind == OT_LOSS_CROSS_ENTROPY) printf(" class indices");
        if (labels && *dims) printf(" (as planned, with %s %d)", dims, OT_CLI_DIM_NO_DATA);
    }
    if (n_kv)
        printf(".\n  The model's %d KV-cache inputs are optional: without data they take HF's defaults, as above "
               "(--input NAME=FILE.npy gives them, e.g. a prefix)", n_kv);
    if (b->out) {
        printf(".\n  It writes %s.\n", b->out);
    } else {
        printf(".\n  It writes %s in the current folder (-o FILE for another name)", b->default_out);
        if (access(b->default_out, F_OK) == 0)
            printf("; %s exists, so it would refuse until you give -o or remove it", b->default_out);
        printf(".\n");
    }
    if (!length && !b->ca.optim_named && isnan(b->ca.lr))
        printf("  %d epochs with the default optimizer, AdamW at lr 3e-3 (docs/training.md, Defaults); a loss that\n"
               "  barely falls is said at the end.\n", BARE_EPOCHS);
    printf("  Every option of `onnxtrain train --help` applies.\n");
}

/* The tuned model the printed command would write passes train's output checks
 * (train/outputs.h) now, so the command does not fail later for a reason known today. */
static ot_status check_printed_output(const bare *b, const ot_model *m, ot_error *err) {
    ot_run_files f = {0};
    ot_status st = ot_run_files_model(&f, m, err);
    if (!st) st = ot_run_files_output(&f, "-o", b->out ? b->out : b->default_out, OT_OUTPUT_FILE, err);
    if (!st) st = ot_run_files_check(&f, err);
    ot_run_files_free(&f);
    return st;
}

static ot_status dry_run(const bare *b, const char *policy, ot_error *err) {
    ot_model *m = NULL;
    ot_dataset d = {0};
    bare_step v0 = {0}, v1 = {0};
    int64_t batch = 0;
    ot_cli_batch_pick pick = {0};
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    ot_status st = ot_model_load(b->model, &io, &m, err); /* once, for every session below */
    if (!st) st = check_printed_output(b, m, err);
    if (!st) st = ot_cli_synthetic_data(&b->ca, m, &d, &batch, &pick, err);
    if (!st) st = run_step(b, m, &d, batch, "none", &v0, err);
    if (!st) st = run_step(b, m, &d, batch, policy, &v1, err);
    ot_measure mr = {0};
    if (!st && b->time_steps) {
        ot_train_options to;
        step_options(&b->ca, "none", batch, &to);
        ot_measure_config cfg[2] = {{.remat = "none"}, {.remat = policy, .memory_budget = b->ca.memory_budget}};
        st = ot_measure_run(m, &to, &d, cfg, 2, b->time_steps, b->load0, &mr, err);
    }
    if (!st) {
        printf("%s: no --input or --labels, so nothing is trained or written. Without data:\n\n", b->model);
        print_plan(b, policy, batch, &pick, &v0, &v1);
        int n_diff = print_verify(b, policy, &d, &v0, &v1);
        if (mr.n) ot_cli_print_time_line(stdout, &mr, 1, "  ");
        print_command(b, m->graph, pick.dims, &d);
        if (n_diff)
            st = ot_fail(err, OT_E_MISMATCH, "%d tensors differ between --remat none and --remat %s", n_diff, policy);
    }
    ot_measure_free(&mr);
    ot_step_results_free(&v0.r);
    ot_step_results_free(&v1.r);
    ot_cli_batch_pick_free(&pick);
    ot_dataset_free(&d);
    ot_model_free(m);
    return st;
}

/* Takes --time-steps N (or =N), the bare form's own option, out of the user's
 * arguments (b->argv, a copy) before train's parser reads them. */
static ot_status take_time_steps(bare *b, ot_error *err) {
    int k = 0;
    ot_status st = OT_OK;
    for (int i = 0; i < b->argc && !st; i++) {
        const char *a = b->argv[i], *val = NULL;
        if (!strcmp(a, "--")) { /* the rest are not options */
            while (i < b->argc)
                b->argv[k++] = b->argv[i++];
            break;
        }
        if (!strcmp(a, "--time-steps")) {
            if (i + 1 == b->argc) return ot_fail(err, OT_E_USAGE, "--time-steps needs a value (N steps; 0: no timing)");
            val = b->argv[++i];
        } else if (!strncmp(a, "--time-steps=", 13)) {
            val = a + 13;
        } else {
            b->argv[k++] = b->argv[i];
            continue;
        }
        st = ot_args_int("--time-steps", val, 0, 100000, &b->time_steps, err);
        b->time_steps_given = true;
    }
    b->argc = k;
    return st;
}

int ot_cmd_bare(int argc, char **argv) {
    bare b;
    memset(&b, 0, sizeof b);
    b.load0 = ot_measure_loadavg(); /* before this process loads the machine */
    b.time_steps = BARE_TIME_STEPS;
    b.argc = argc - 1;
    b.argv = calloc((size_t)argc, sizeof *b.argv);
    if (!b.argv) {
        fputs("onnxtrain: out of memory\n", stderr);
        return OT_E_MEMORY;
    }
    memcpy(b.argv, argv + 1, (size_t)(argc - 1) * sizeof *b.argv);
    ot_common_args_init(&b.ca);
    ot_error err = {0};
    ot_status st = take_time_steps(&b, &err);
    if (!st) st = parse(&b, NULL, &err);
    if (!st && b.help) {
        bare_usage(stdout);
        ot_common_args_free(&b.ca);
        free(b.argv);
        return 0;
    }
    if (!st && !ends_with(b.model, ".onnx") && !is_file(b.model))
        st = ot_fail(&err, OT_E_USAGE, "'%s' is neither a command nor a model (a MODEL.onnx or an existing file)",
                     b.model);
    if (!st && !b.out) st = default_output(b.model, b.default_out, sizeof b.default_out, &err);
    bool data = !st && (b.ca.inputs.n > 0 || b.ca.labels);
    if (data && b.time_steps_given)
        st = ot_fail(&err, OT_E_USAGE,
                     "--time-steps times the check without data; with data it trains (train's "
                     "--report has every step's time)");
    /* without data, train's checks of the output the printed command would write */
    if (!st && !data && !b.out) {
        st = parse(&b, b.default_out, &err);
        b.out = NULL; /* the printed command gives -o only when the user did */
    }
    if (st) {
        fprintf(stderr,
                "onnxtrain: %s\nRun 'onnxtrain MODEL.onnx --help' for the bare form, 'onnxtrain --help' "
                "for the commands.\n",
                err.msg);
        ot_common_args_free(&b.ca);
        free(b.argv);
        return st;
    }
    int rc;
    if (data) {
        rc = train_with_data(&b);
    } else {
        rc = (int)dry_run(&b, b.ca.remat ? b.ca.remat : OT_CLI_REMAT_DEFAULT, &err);
        if (rc) fprintf(stderr, "onnxtrain: %s\n", err.msg);
    }
    ot_common_args_free(&b.ca);
    free(b.argv);
    return rc;
}
