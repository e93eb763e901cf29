/* cmd_bench.c — `onnxtrain bench MODEL --remat POLICY[,POLICY...] [--memory-budget
 * SIZE[,SIZE...]]`: what each policy costs in step time and saves in memory on this
 * model, measured as train/measure.h says (sessions as `train` builds them over one
 * import, one warm-up step each, interleaved rounds, medians and spreads), with
 * --remat none as the baseline. Without --input/--labels the data is the bare form's
 * synthetic data (ot_cli_synthetic_data). A table, --json, with --svg the peaks
 * against the median step time, and with --timeline `plan --timeline`'s picture of
 * every configuration's plan with the measured high-water mark beside its planned peak
 * (remat/timeline.h). The timeline lives here rather than as a `plan` option because
 * plan runs nothing, and bench already builds, warms and steps exactly these sessions:
 * the measured marks come from the same run as the table, with no second loop. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/defaults.h"
#include "cli/measure_print.h"
#include "ir/json_write.h"
#include "kernels/kernel.h"
#include "remat/remat.h"
#include "remat/timeline.h"
#include "train/measure.h"
#include "train/outputs.h"
#include "train/train.h"

#define BENCH_DEFAULT_STEPS 10
#define BENCH_MAX_STEPS 100000
#define BENCH_MAX_CONFIGS 64

static void usage(FILE *f) {
    fputs("usage: onnxtrain bench MODEL --remat POLICY[,POLICY...] [--memory-budget SIZE[,SIZE...]] [options]\n\n"
          "Measures what each remat policy costs in step time and saves in memory on this model, against\n"
          "--remat none: one session per configuration, built as `train` builds it over one import and\n"
          "one data set; one untimed warm-up step each; then --steps rounds, each one training step of\n"
          "every configuration in turn (none, P1, P2, none, P1, P2, ...), so that other work on the\n"
          "machine falls on all of them alike. Per configuration: the planned peak, the arena's\n"
          "measured peak and the process memory the session added; the median and interquartile range\n"
          "[q1..q3] of the wall and CPU time per step; and the overhead against none, the median and\n"
          "IQR of the per-round ratios. When the 1-minute load average before the start exceeds the\n"
          "CPUs our threads leave free (by half a CPU), the machine is busy and it says that the times\n"
          "are unreliable. docs/remat.md (Measuring the cost) describes the method and the JSON.\n\n"
          "configurations:\n"
          "  --remat P1,P2,...         policies to measure: all, sqrt, every:K, selective,\n"
          "                            manual:NAME,..., auto, optimal (none is always the baseline)\n"
          "  --memory-budget S1,S2,... budgets (e.g. 64M,128M) for auto and optimal: one configuration\n"
          "                            per budget for each; the other policies take none\n"
          "  --steps N                 timed rounds (default 10, at most 100000)\n"
          "data (default: synthetic, as the bare form makes it, `onnxtrain MODEL.onnx --help`):\n" OT_ARGS_HELP_DATA
          "  --batch-size N            samples per step (default: train's; synthetic: the model's\n"
          "                            batch, else 4)\n" OT_ARGS_HELP_BIND OT_ARGS_HELP_LOSS OT_ARGS_HELP_CHUNKED OT_ARGS_HELP_PARAMS
              OT_ARGS_HELP_LORA OT_ARGS_HELP_PRECISION "optimizer:\n" OT_ARGS_HELP_OPTIM "run:\n"
          "  --remat-time-limit SEC    for optimal: the MIP solver's limit (default 60)\n"
          "  --seed N                  Philox seed of Dropout and of the synthetic data (default 0)\n"
          "  --threads N               kernel threads (default: OpenMP's)\n" OT_ARGS_HELP_WAIT
          "  --device DEV              cpu (default) or cuda[:N] (when built with CUDA)\n"
          OT_ARGS_HELP_TF32
          "  --json                    print the measurement as JSON (bytes and seconds)\n"
          "  --svg FILE                draw planned and measured peak against the median step time\n"
          "  --timeline FILE.svg       draw bytes in use along the schedule for every configuration's\n"
          "                            plan (as `plan --timeline`) with the measured arena high-water\n"
          "                            mark (hollow diamond) at the step that first reached it, beside\n"
          "                            the planned peak (dashed) and its step (dot)\n"
          "Exit codes: 0 measured, others as `onnxtrain --help`.\n",
          f);
}

typedef struct bench_opts {
    const char *model, *svg, *timeline;
    ot_common_args args;
    const char *budgets; /* --memory-budget's text */
    int64_t steps;
    bool json;
    char *policies[BENCH_MAX_CONFIGS]; /* malloc'd, split from --remat */
    int n_policies;
    int64_t budget[BENCH_MAX_CONFIGS];
    int n_budgets;
} bench_opts;

static bool takes_budget(const char *policy) { return !strcmp(policy, "auto") || !strcmp(policy, "optimal"); }

/* Splits --remat's list at commas. A piece that is no policy on its own continues a
 * manual:NAME,... list before it ("manual:a,b,sqrt" is manual:a,b and sqrt). */
static ot_status split_policies(bench_opts *o, const char *text, ot_error *err) {
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *piece = strndup(p, len);
        if (!piece) return ot_fail(err, OT_E_MEMORY, "out of memory");
        ot_remat_policy pol;
        ot_error perr = {0};
        bool alone = !ot_remat_policy_parse(piece, &pol, &perr);
        if (alone) ot_remat_policy_free(&pol);
        char *prev = o->n_policies ? o->policies[o->n_policies - 1] : NULL;
        if (!alone && prev && !strncmp(prev, "manual:", 7) && len) {
            size_t n = strlen(prev) + len + 2;
            char *joined = malloc(n);
            if (!joined) return free(piece), ot_fail(err, OT_E_MEMORY, "out of memory");
            snprintf(joined, n, "%s,%s", prev, piece);
            free(prev);
            free(piece);
            o->policies[o->n_policies - 1] = joined;
        } else if (!alone) {
            ot_status st = ot_fail(err, OT_E_USAGE, "--remat '%s': %s", text, perr.msg);
            free(piece);
            return st;
        } else if (!strcmp(piece, "none")) {
            free(piece); /* the baseline is always measured */
        } else if (o->n_policies == BENCH_MAX_CONFIGS) {
            free(piece);
            return ot_fail(err, OT_E_USAGE, "--remat '%s': at most %d policies", text, BENCH_MAX_CONFIGS);
        } else {
            o->policies[o->n_policies++] = piece;
        }
        p += len + (e != NULL);
    }
    return OT_OK;
}

static ot_status split_budgets(bench_opts *o, ot_error *err) {
    char *copy = strdup(o->budgets), *save = NULL;
    if (!copy) return ot_fail(err, OT_E_MEMORY, "out of memory");
    ot_status st = OT_OK;
    for (char *t = strtok_r(copy, ",", &save); t && !st; t = strtok_r(NULL, ",", &save)) {
        if (o->n_budgets == BENCH_MAX_CONFIGS)
            st = ot_fail(err, OT_E_USAGE, "--memory-budget: at most %d sizes", BENCH_MAX_CONFIGS);
        else
            st = ot_args_budget(t, &o->budget[o->n_budgets++], err);
    }
    if (!st && o->n_budgets == 0) st = ot_fail(err, OT_E_USAGE, "--memory-budget '%s': no size given", o->budgets);
    free(copy);
    return st;
}

/* none, then each policy (auto and optimal once per budget, or once without). */
static ot_status configs(const bench_opts *o, ot_measure_config *c, int *n, ot_error *err) {
    bool any_budget = false;
    *n = 0;
    c[(*n)++] = (ot_measure_config){.remat = "none"};
    for (int i = 0; i < o->n_policies; i++) {
        bool tb = takes_budget(o->policies[i]) && o->n_budgets;
        any_budget |= tb;
        for (int k = 0; k < (tb ? o->n_budgets : 1); k++) {
            if (*n == BENCH_MAX_CONFIGS)
                return ot_fail(err, OT_E_USAGE, "more than %d configurations", BENCH_MAX_CONFIGS);
            c[(*n)++] = (ot_measure_config){.remat = o->policies[i], .memory_budget = tb ? o->budget[k] : 0};
        }
    }
    if (o->n_budgets && !any_budget)
        return ot_fail(err, OT_E_USAGE, "--memory-budget applies to auto and optimal: add one of them to --remat");
    return OT_OK;
}

/* --svg and --timeline against the model, its external data, the data files and each
 * other, before any work. */
static ot_status check_outputs(const bench_opts *o, const ot_model *m, ot_error *err) {
    ot_run_files f = {0};
    ot_status st = ot_run_files_model(&f, m, err);
    if (!st) st = ot_args_add_input_files(&f, &o->args.inputs, "--input", o->args.labels, "--labels", err);
    if (!st) st = ot_run_files_output(&f, "--svg", o->svg, OT_OUTPUT_FILE, err);
    if (!st) st = ot_run_files_output(&f, "--timeline", o->timeline, OT_OUTPUT_FILE, err);
    if (!st) st = ot_run_files_check(&f, err);
    ot_run_files_free(&f);
    return st;
}

/* A configuration's name in the pictures: "sqrt", "auto @ 64.00 MiB". */
static void config_label(const ot_measure_result *r, char *buf, size_t n) {
    if (r->cfg.memory_budget > 0) {
        char b[32];
        ot_human_size((double)r->cfg.memory_budget, b, sizeof b);
        snprintf(buf, n, "%s @ %s", r->cfg.remat, b);
    } else {
        snprintf(buf, n, "%s", r->cfg.remat);
    }
}

/* The SVG: planned and measured peak of each configuration against its median step. */
static ot_status write_svg(const bench_opts *o, const ot_measure *mr, ot_error *err) {
    ot_timeline_point *pts = calloc((size_t)mr->n, sizeof *pts);
    if (!pts) return ot_fail(err, OT_E_MEMORY, "out of memory");
    char(*labels)[96] = calloc((size_t)mr->n, sizeof *labels);
    if (!labels) return free(pts), ot_fail(err, OT_E_MEMORY, "out of memory");
    for (int c = 0; c < mr->n; c++) {
        const ot_measure_result *r = &mr->r[c];
        config_label(r, labels[c], sizeof labels[c]);
        pts[c] = (ot_timeline_point){.label = labels[c],
                                     .seconds = r->wall_s.median,
                                     .q1 = r->wall_s.q1,
                                     .q3 = r->wall_s.q3,
                                     .planned = (double)r->planned_peak,
                                     .measured = (double)r->measured_peak};
    }
    ot_status st = ot_timeline_tradeoff_svg(o->svg, o->model, pts, mr->n, mr->busy, err);
    free(labels);
    free(pts);
    return st;
}

/* --timeline: each configuration's planned timeline with its measured high-water mark. */
static ot_status write_timeline(const bench_opts *o, const ot_measure *mr, ot_error *err) {
    ot_timeline_curve *cv = calloc((size_t)mr->n, sizeof *cv);
    char(*labels)[96] = calloc((size_t)mr->n, sizeof *labels);
    if (!cv || !labels) return free(cv), free(labels), ot_fail(err, OT_E_MEMORY, "out of memory");
    for (int c = 0; c < mr->n; c++) {
        const ot_measure_result *r = &mr->r[c];
        config_label(r, labels[c], sizeof labels[c]);
        cv[c] = (ot_timeline_curve){.label = labels[c],
                                    .timeline = r->timeline,
                                    .n_steps = r->n_sched,
                                    .peak_step = r->planned_peak_step,
                                    .backward_step = r->backward_step,
                                    .peak_bytes = r->planned_peak,
                                    .measured = true,
                                    .measured_peak = r->measured_peak,
                                    .measured_step = r->measured_peak_step};
    }
    const char *base = strrchr(o->model, '/');
    char title[512];
    snprintf(title, sizeof title, "%s, batch %lld: bytes in use along the schedule (measured: warm-up + %lld steps)",
             base ? base + 1 : o->model, (long long)mr->batch, (long long)mr->steps);
    ot_status st = ot_timeline_curves_svg(o->timeline, cv, mr->n, title, err);
    if (st) ot_error_prefix(err, "--");
    free(labels);
    free(cv);
    return st;
}

static ot_status run_bench(bench_opts *o, double load0, ot_error *err) {
    ot_status st = OT_OK;
    ot_dataset data = {0};
    ot_model *m = NULL;
    ot_measure mr = {0};
    ot_measure_config cfg[BENCH_MAX_CONFIGS];
    int n = 0;
    const ot_common_args *a = &o->args;
    int64_t batch = a->batch_size;
    bool synthetic = a->inputs.n == 0 && !a->labels;
    ot_cli_batch_pick pick = {0};
    const char *dims = "";
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    if ((st = configs(o, cfg, &n, err))) goto fail;
    if ((st = ot_model_load(o->model, &io, &m, err))) goto fail;
    if ((st = check_outputs(o, m, err))) goto fail;
    if (synthetic)
        st = ot_cli_synthetic_data(a, m, &data, &batch, &pick, err), dims = pick.dims;
    else
        st = ot_args_load_dataset(&a->inputs, a->labels, &data, err);
    if (st) goto fail;
    ot_train_options to;
    ot_train_options_default(&to);
    ot_common_args_to_train(a, &to);
    to.batch_size = batch;
    if ((st = ot_measure_run(m, &to, &data, cfg, n, o->steps, load0, &mr, err))) goto fail;
    if (o->json) {
        printf("{\"model\": ");
        ot_json_string(stdout, o->model);
        printf(", \"data\": \"%s\", \"device\": ", synthetic ? "synthetic" : "files");
        ot_json_string(stdout, a->device ? a->device : "cpu");
        printf(", \"optimizer\": \"%s\", \"measurement\": ", ot_optim_kind_name(ot_args_optim_kind(a)));
        ot_cli_print_measure_json(stdout, &mr);
        printf("}\n");
    } else {
        printf("bench %s: batch %lld, %s data%s%s, optimizer %s, device %s\n\n", o->model, (long long)mr.batch,
               synthetic ? "synthetic" : "the given", *dims ? ", " : "", *dims ? dims : "",
               ot_optim_kind_name(ot_args_optim_kind(a)), a->device ? a->device : "cpu");
        if (*dims) printf("(%s bound to %d: a small default without data; --bind NAME=SIZE for another)\n\n", dims, OT_CLI_DIM_NO_DATA);
        ot_cli_print_measure_table(stdout, &mr);
    }
    if (o->svg && (st = write_svg(o, &mr, err))) goto fail;
    if (o->timeline && (st = write_timeline(o, &mr, err))) goto fail;
fail:
    ot_cli_batch_pick_free(&pick);
    ot_measure_free(&mr);
    ot_dataset_free(&data);
    ot_model_free(m);
    return st;
}

enum { O_JSON = OT_ARG_OWN, O_STEPS, O_SVG, O_TIMELINE };

/* bench's own options (ot_args_own_fn). */
static ot_status bench_option(void *cmd, int code, const char *arg, bool *taken, ot_error *err) {
    bench_opts *o = cmd;
    *taken = true;
    switch (code) {
    case OT_ARG_BUDGET: /* a list here; the last --memory-budget counts, as elsewhere */
        o->budgets = arg;
        o->n_budgets = 0;
        return split_budgets(o, err);
    case O_JSON: o->json = true; return OT_OK;
    case O_STEPS: return ot_args_int("--steps", arg, 1, BENCH_MAX_STEPS, &o->steps, err);
    case O_SVG: o->svg = arg; return OT_OK;
    case O_TIMELINE: o->timeline = arg; return OT_OK;
    default: *taken = false; return OT_OK;
    }
}

int ot_cmd_bench(int argc, char **argv) {
    static const struct option longopts[] = {
        OT_ARGS_OPTS_SESSION,
        {"json", no_argument, NULL, O_JSON},
        {"steps", required_argument, NULL, O_STEPS},
        {"svg", required_argument, NULL, O_SVG},
        {"timeline", required_argument, NULL, O_TIMELINE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    double load0 = ot_measure_loadavg(); /* before this process loads the machine */
    bench_opts o = {.steps = BENCH_DEFAULT_STEPS};
    ot_common_args_init(&o.args);
    ot_error err = {0};
    bool help;
    ot_status st = ot_args_parse(argc, argv, "h", longopts, &o.args, bench_option, &o, &help, &err);
    if (!st && !help) st = ot_args_one_model(argc, argv, optind, &o.model, &err);
    if (!st && help) {
        usage(stdout);
        ot_common_args_free(&o.args);
        return 0;
    }
    if (!st && !o.args.remat)
        st = ot_fail(&err, OT_E_USAGE, "missing --remat POLICY[,POLICY...] (the policies to measure against none)");
    if (!st) st = split_policies(&o, o.args.remat, &err);
    if (!st && o.n_policies == 0 && !o.n_budgets)
        st = ot_fail(&err, OT_E_USAGE, "--remat '%s': nothing to measure against none", o.args.remat);
    if (!st) st = run_bench(&o, load0, &err);
    if (st)
        fprintf(stderr, "onnxtrain bench: %s\n%s", err.msg,
                st == OT_E_USAGE ? "Run 'onnxtrain bench --help' for the options.\n" : "");
    for (int i = 0; i < o.n_policies; i++)
        free(o.policies[i]);
    ot_common_args_free(&o.args);
    return st;
}
