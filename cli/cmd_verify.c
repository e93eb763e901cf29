/* cmd_verify.c — `onnxtrain verify MODEL --input ... --labels ... [--remat POLICY]`:
 * one training step with --remat none and one with the policy, from the same
 * weights, data and seed, each a session as `train` builds it over the one import;
 * compares the loss, every gradient and every state update bitwise. Exit 0 only when
 * all are equal, 11 (OT_E_MISMATCH) otherwise. Prints a summary (the tensors that
 * differ, every one with -v or in --json) and a time line measured as `bench`
 * measures (train/measure.h: warm-up, interleaved training steps, median and IQR). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/measure_print.h"
#include "cli/defaults.h"
#include "ir/json_write.h"
#include "remat/remat.h"
#include "train/measure.h"
#include "train/train.h"
#include "kernels/kernel.h"

/* Timed rounds of the time line by default: enough for a median and quartiles, few
 * enough that verify stays a check. */
#define VERIFY_TIME_STEPS 5

static void usage(FILE *f) {
    fputs("usage: onnxtrain verify MODEL --input FILE.npy --labels FILE.npy [--remat POLICY] [options]\n\n"
          "Runs one training step (forward, loss, backward) with --remat none and one with POLICY,\n"
          "from the same weights, data and seed, and compares the loss, every parameter gradient\n"
          "and every state update (BatchNorm running statistics) bitwise. Both steps are built as\n"
          "`train` builds them, optimizer nodes included, so the peaks are a training step's; the\n"
          "optimizer applies nothing here and does not change the verdict. Then it times both as\n"
          "`onnxtrain bench` does (one warm-up step each, --time-steps interleaved training steps) and\n"
          "prints the median step time of each, with its interquartile range, and their ratio.\n"
          "With --fuse-update it also runs 3 optimizer steps under POLICY with the updates fused into\n"
          "the backward pass and 3 with them after it, and compares the params, optimizer state and\n"
          "losses bitwise (exit 11 if they differ).\n\n"
          "data:\n"
          OT_ARGS_HELP_DATA
          "  --batch-size N            samples in the step (default: the model's batch, else train's\n"
          "                            default, min(32, samples))\n"
          OT_ARGS_HELP_BIND
          OT_ARGS_HELP_LOSS
          OT_ARGS_HELP_CHUNKED
          OT_ARGS_HELP_PARAMS
          OT_ARGS_HELP_LORA OT_ARGS_HELP_PRECISION
          "optimizer (for the memory figures):\n"
          OT_ARGS_HELP_OPTIM
          "run:\n"
          "  --remat POLICY            none, all, sqrt, every:K, selective, manual:NAME,..., auto\n"
          "                            (default, as in every command) or optimal (least recompute for\n"
          "                            the budget, as a MIP)\n"
          "  --memory-budget SIZE      budget for --remat auto or optimal (e.g. 512M)\n"
          "  --remat-time-limit SEC    for --remat optimal: the MIP solver's limit (default 60); then\n"
          "                            the best plan found and its gap. Needs CBC or GLPK at build time\n"
          "  --seed N                  Philox seed of Dropout (default 0)\n"
          "  --threads N               kernel threads (default: OpenMP's)\n"
          OT_ARGS_HELP_WAIT
          "  --device DEV              cpu (default) or cuda[:N] (when built with CUDA)\n"
          OT_ARGS_HELP_TF32
          "  --time-steps N            time line: after one warm-up step each, N training steps of\n"
          "                            none and of POLICY, interleaved (default 5; 0: no timing). The\n"
          "                            median [IQR] per step and the ratio, as `onnxtrain bench`\n"
          "  -v, --verbose             list every tensor compared (default: only those that differ)\n"
          "  --json                    print the comparison as JSON (every tensor, bytes, seconds)\n"
          "Exit codes: 0 all bitwise equal, 11 a difference, others as `onnxtrain --help`.\n",
          f);
    if (!ot_remat_optimal_available())
        fputs("\nthis build has no MIP solver (COIN-OR CBC, Debian coinor-libcbc-dev, or GLPK, libglpk-dev): --remat optimal is unavailable\n", f);
}

typedef struct verify_opts {
    const char *model;
    ot_common_args args; /* remat: the policy checked against none */
    bool json, verbose;
    int64_t time_steps;     /* timed rounds of the time line; 0: no timing */
    double load0;           /* the load average when the command started */
    ot_cli_batch_pick pick; /* the batch when the user gives none (cli/defaults.h) */
} verify_opts;

/* What one step under `policy` computed, and its remat figures. */
typedef struct verify_step {
    ot_step_results r;
    ot_train_remat_summary rs;
    int64_t batch;
} verify_step;

/* One step under `policy`: a session over the model (the weights borrowed and given
 * back, so the next step starts from the same ones), its results, then freed. */
static ot_status run_step(const verify_opts *o, ot_model *m, ot_dataset *data, const char *policy, verify_step *out,
                          ot_error *err) {
    ot_train_options to;
    ot_train_options_default(&to);
    ot_common_args_to_train(&o->args, &to);
    to.remat = policy;
    to.batch_size = o->pick.batch;
    if (!strcmp(policy, "none")) to.memory_budget = 0; /* the budget is the policy's, not the reference's */
    to.whole_batch = true;       /* every sample unless --batch-size */
    to.keep_host_weights = true; /* the next step reads them from the model again */
    to.no_numerics_check = true; /* a NaN is compared like any other bits */
    to.fuse_update = false;      /* its gradients are read after the run (fuse_compare runs fused) */
    ot_train_session *s = NULL;
    ot_status st = ot_train_session_new(m, &to, data, true, &s, err);
    if (!st) st = ot_train_step_results(s, data, &out->r, err);
    if (!st) out->rs = *ot_train_remat_info(s), out->batch = ot_train_batch_size(s);
    ot_train_session_free(s);
    return st;
}

/* Optimizer steps of the --fuse-update comparison: enough for momentum and Adam's
 * moments to carry one step's update into the next, few enough for a check. */
#define VERIFY_FUSE_STEPS 3

/* --fuse-update: VERIFY_FUSE_STEPS training steps under the policy, unfused into r[0]
 * and fused into r[1] (the params and optimizer state, the losses), from the same
 * weights; the number of tensors that differ into *n_diff. */
static ot_status fuse_compare(const verify_opts *o, ot_model *m, ot_dataset *data, ot_step_results r[2], int *n_diff,
                              ot_error *err) {
    ot_status st = OT_OK;
    *n_diff = 0;
    for (int f = 0; f < 2 && !st; f++) {
        ot_train_options to;
        ot_train_options_default(&to);
        ot_common_args_to_train(&o->args, &to);
        to.batch_size = o->pick.batch;
        to.whole_batch = true;
        to.keep_host_weights = true;
        to.steps = VERIFY_FUSE_STEPS; /* a cosine schedule's T */
        to.fuse_update = f == 1;
        ot_train_session *s = NULL;
        st = ot_train_session_new(m, &to, data, true, &s, err);
        if (!st) st = ot_train_params_results(s, data, VERIFY_FUSE_STEPS, &r[f], err);
        ot_train_session_free(s);
    }
    if (!st && r[0].n != r[1].n)
        st = ot_fail(err, OT_E_INTERNAL, "verify: %d results unfused, %d fused", r[0].n, r[1].n);
    for (int i = 0; !st && i < r[0].n; i++) {
        bool eq = false;
        double d = ot_tensor_bitwise_diff(r[0].tensors[i], r[1].tensors[i], &eq);
        *n_diff += !eq;
        if (!o->json && (o->verbose || !eq)) printf("%-48s %-7s %.9g\n", r[0].names[i], eq ? "yes" : "NO", d);
    }
    if (!st && !o->json) {
        char a[32], b[32];
        ot_human_size((double)r[0].planned_peak, a, sizeof a);
        ot_human_size((double)r[1].planned_peak, b, sizeof b);
        printf("--fuse-update: %d optimizer steps under --remat %s, fused against unfused: %s, %d of %d tensors "
               "differ (the losses, %d params and optimizer state); peak %s (unfused) -> %s (fused)\n",
               VERIFY_FUSE_STEPS, o->args.remat, *n_diff ? "MISMATCH" : "bitwise equal", *n_diff, r[0].n, r[0].n - 1,
               a, b);
    }
    return st;
}

/* The JSON fields after the tensors: the verdict, the peaks, the timing. */
static void print_json_tail(const verify_opts *o, const verify_step *v0, const verify_step *v1, int n_diff,
                            const ot_measure *mr, int fuse_diff, const ot_step_results *fr) {
    const ot_step_results *r0 = &v0->r, *r1 = &v1->r;
    double saved = (double)r0->planned_peak - (double)r1->planned_peak;
    printf("], \"equal\": %s, \"n_different\": %d, \"peak_none\": %zu, \"peak_remat\": %zu, "
           "\"measured_none\": %zu, \"measured_remat\": %zu, \"saved_bytes\": %.0f, ",
           n_diff ? "false" : "true", n_diff, r0->planned_peak, r1->planned_peak, r0->measured_peak,
           r1->measured_peak, saved);
    if (mr->n) /* the medians of the interleaved warm steps (train/measure.h) */
        printf("\"seconds_none\": %.6f, \"seconds_remat\": %.6f, ", mr->r[0].wall_s.median, mr->r[1].wall_s.median);
    else
        printf("\"seconds_none\": null, \"seconds_remat\": null, ");
    printf("\"extra_flops\": %.0f, \"step_flops\": %.0f, \"recompute_nodes\": %d, \"timing\": ", v1->rs.extra_flops,
           v1->rs.step_flops, v1->rs.n_clones);
    if (mr->n) ot_cli_print_measure_json(stdout, mr);
    else fputs("null", stdout);
    (void)o;
    if (fuse_diff >= 0)
        printf(", \"fuse_update\": {\"steps\": %d, \"equal\": %s, \"n_different\": %d, \"n_compared\": %d, "
               "\"peak_unfused\": %zu, \"peak_fused\": %zu}",
               VERIFY_FUSE_STEPS, fuse_diff ? "false" : "true", fuse_diff, fr[0].n, fr[0].planned_peak,
               fr[1].planned_peak);
    printf("}\n");
}

static void print_verdict(const verify_opts *o, const verify_step *v0, const verify_step *v1, int n_diff,
                          const ot_measure *mr) {
    const ot_step_results *r0 = &v0->r, *r1 = &v1->r;
    const char *remat = o->args.remat;
    double saved = (double)r0->planned_peak - (double)r1->planned_peak;
    double extra = v1->rs.extra_flops, step = v1->rs.step_flops;
    int n_grad = 0, n_state = 0;
    for (int i = 0; i < r0->n; i++) {
        n_grad += !strncmp(r0->names[i], "grad:", 5);
        n_state += !strncmp(r0->names[i], "state:", 6);
    }
    char p0[32], p1[32], m0[32], m1[32], sv[32];
    ot_human_size((double)r0->planned_peak, p0, sizeof p0);
    ot_human_size((double)r1->planned_peak, p1, sizeof p1);
    ot_human_size((double)r0->measured_peak, m0, sizeof m0);
    ot_human_size((double)r1->measured_peak, m1, sizeof m1);
    ot_human_size(saved, sv, sizeof sv);
    printf("%s: --remat %s against none: %s, %d of %d tensors differ (the loss, %d gradients, %d state updates)\n",
           o->model, remat, n_diff ? "MISMATCH" : "bitwise equal", n_diff, r0->n, n_grad, n_state);
    printf("loss %.9g (none) %.9g (%s)\n", r0->loss, r1->loss, remat);
    printf("peak memory: %s (none) -> %s (%s): %s saved (%.1f%%); arena measured %s / %s\n", p0, p1, remat, sv,
           r0->planned_peak ? 100.0 * saved / (double)r0->planned_peak : 0.0, m0, m1);
    printf("recompute: %d nodes, %.0f extra FLOPs (%.1f%% of the step)\n", v1->rs.n_clones, extra,
           step > 0 ? 100.0 * extra / step : 0.0);
    if (mr->n) ot_cli_print_time_line(stdout, mr, 1, "");
    else printf("time: not measured (--time-steps 0)\n");
}

/* The time line's measurement: none and the policy, sessions as `train` builds them
 * (train/measure.h), on the data verify compared with. */
static ot_status measure(const verify_opts *o, ot_model *m, ot_dataset *data, ot_measure *mr, ot_error *err) {
    if (!o->time_steps) return OT_OK;
    ot_train_options to;
    ot_train_options_default(&to);
    ot_common_args_to_train(&o->args, &to);
    to.batch_size = o->pick.batch; /* the batch verify compared */
    to.whole_batch = true;
    ot_measure_config cfg[2] = {{.remat = "none"}, {.remat = o->args.remat, .memory_budget = o->args.memory_budget}};
    return ot_measure_run(m, &to, data, cfg, 2, o->time_steps, o->load0, mr, err);
}

static ot_status run_verify(verify_opts *o, ot_error *err) {
    ot_status st = OT_OK;
    ot_dataset data = {0};
    ot_model *m = NULL;
    verify_step v0 = {0}, v1 = {0};
    ot_step_results fr[2] = {{0}, {0}}; /* --fuse-update: unfused, fused */
    ot_measure mr = {0};
    const ot_common_args *a = &o->args;
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    if ((st = ot_model_load(o->model, &io, &m, err))) goto fail; /* once, for both steps */
    if ((st = ot_args_load_dataset(&a->inputs, a->labels, &data, err))) goto fail;
    if ((st = ot_cli_pick_batch(m->graph, a, data.n_samples, &o->pick, err))) goto fail;
    if ((st = run_step(o, m, &data, "none", &v0, err))) goto fail;
    if ((st = run_step(o, m, &data, a->remat, &v1, err))) goto fail;
    if (v0.r.n != v1.r.n) {
        st = ot_fail(err, OT_E_INTERNAL, "verify: %d results without remat, %d with", v0.r.n, v1.r.n);
        goto fail;
    }
    int fuse_diff = 0;
    if (a->fuse_update && !o->json) printf("--fuse-update: the gradients below are unfused (a fused gradient is "
                                           "freed at its update); fused and unfused params are compared after them\n");
    if (a->fuse_update && (st = fuse_compare(o, m, &data, fr, &fuse_diff, err))) goto fail;
    if ((st = measure(o, m, &data, &mr, err))) goto fail;
    int n_diff = 0;
    if (o->json) {
        printf("{\"model\": ");
        ot_json_string(stdout, o->model);
        printf(", \"remat\": ");
        ot_json_string(stdout, a->remat);
        printf(", \"tensors\": [");
    } else { /* what it assumed */
        printf("batch %lld%s, optimizer %s (for the memory figures), --remat %s against none\n",
               (long long)v0.batch, ot_cli_batch_note(&o->pick), ot_optim_kind_name(ot_args_optim_kind(a)), a->remat);
        if (o->verbose) printf("%-48s %-7s %s\n", "tensor", "equal", "max |diff|");
    }
    for (int i = 0; i < v0.r.n; i++) {
        bool eq = false;
        double d = ot_tensor_bitwise_diff(v0.r.tensors[i], v1.r.tensors[i], &eq);
        n_diff += !eq;
        if (o->json) {
            printf("%s{\"name\": ", i ? ", " : "");
            ot_json_string(stdout, v0.r.names[i]);
            printf(", \"equal\": %s, \"max_abs_diff\": %.9g}", eq ? "true" : "false", d != d ? -1.0 : d);
        } else if (o->verbose || !eq) { /* the differing ones always; all of them with -v */
            printf("%-48s %-7s %.9g\n", v0.r.names[i], eq ? "yes" : "NO", d);
        }
    }
    if (o->json) print_json_tail(o, &v0, &v1, n_diff, &mr, a->fuse_update ? fuse_diff : -1, fr);
    else print_verdict(o, &v0, &v1, n_diff, &mr);
    if (!n_diff && fuse_diff)
        st = ot_fail(err, OT_E_MISMATCH, "%d of %d tensors differ between --fuse-update and the update after the "
                     "backward pass (--remat %s)", fuse_diff, fr[0].n, a->remat);
    if (n_diff)
        st = ot_fail(err, OT_E_MISMATCH, "%d of %d tensors differ between --remat none and --remat %s", n_diff, v0.r.n,
                     a->remat);
fail:
    ot_measure_free(&mr);
    ot_step_results_free(&v0.r);
    ot_step_results_free(&v1.r);
    ot_step_results_free(&fr[0]);
    ot_step_results_free(&fr[1]);
    ot_dataset_free(&data);
    ot_cli_batch_pick_free(&o->pick);
    ot_model_free(m);
    return st;
}

enum { O_JSON = OT_ARG_OWN, O_TIME_STEPS };

/* verify's own options (ot_args_own_fn). */
static ot_status verify_option(void *cmd, int code, const char *arg, bool *taken, ot_error *err) {
    verify_opts *o = cmd;
    *taken = true;
    switch (code) {
    case O_JSON: o->json = true; return OT_OK;
    case 'v': o->verbose = true; return OT_OK;
    case O_TIME_STEPS: return ot_args_int("--time-steps", arg, 0, 100000, &o->time_steps, err);
    default: *taken = false; return OT_OK;
    }
}

int ot_cmd_verify(int argc, char **argv) {
    static const struct option longopts[] = {
        OT_ARGS_OPTS_SESSION,
        {"json", no_argument, NULL, O_JSON},
        {"time-steps", required_argument, NULL, O_TIME_STEPS},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    verify_opts o = {.time_steps = VERIFY_TIME_STEPS, .load0 = ot_measure_loadavg()}; /* the load before our work */
    ot_common_args_init(&o.args);
    ot_error err = {0};
    bool help;
    ot_status st = ot_args_parse(argc, argv, "hv", longopts, &o.args, verify_option, &o, &help, &err);
    if (!st && !help) st = ot_args_one_model(argc, argv, optind, &o.model, &err);
    if (!st && help) {
        usage(stdout);
        ot_common_args_free(&o.args);
        return 0;
    }
    if (!st && o.args.inputs.n == 0) st = ot_fail(&err, OT_E_USAGE, "missing --input FILE.npy");
    if (!o.args.remat) o.args.remat = OT_CLI_REMAT_DEFAULT;
    if (st) {
        fprintf(stderr, "onnxtrain verify: %s\nRun 'onnxtrain verify --help' for the options.\n", err.msg);
        ot_common_args_free(&o.args);
        return st;
    }
    st = run_verify(&o, &err);
    if (st) fprintf(stderr, "onnxtrain verify: %s\n", err.msg);
    ot_common_args_free(&o.args);
    return st;
}
