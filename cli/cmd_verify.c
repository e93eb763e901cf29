/* cmd_verify.c — `onnxtrain verify MODEL --input ... --labels ... --remat POLICY`:
 * one training step with --remat none and one with the policy, from the same
 * weights, data and seed; compares the loss, every gradient and every state update
 * bitwise. Exit 0 only when all are equal, 11 (OT_E_MISMATCH) otherwise. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "ir/json_write.h"
#include "train/remat_session.h"
#include "train/train.h"
#include "kernels/kernel.h"

static void usage(FILE *f) {
    fputs("usage: onnxtrain verify MODEL --input FILE.npy --labels FILE.npy --remat POLICY [options]\n\n"
          "Runs one training step (forward, loss, backward) with --remat none and one with POLICY,\n"
          "from the same weights, data and seed, and compares the loss, every parameter gradient\n"
          "and every state update (BatchNorm running statistics) bitwise.\n\n"
          "options:\n"
          "  --input [NAME=]FILE.npy   data for a model input (samples along axis 0); repeat per input\n"
          "  --labels FILE.npy         labels / targets of the loss\n"
          "  --loss KIND               cross-entropy (default), mse or output\n"
          "  --remat POLICY            none, all, sqrt, every:K, selective, manual:NAME,... or auto\n"
          "  --memory-budget SIZE      budget for --remat auto (e.g. 512M)\n"
          "  --batch-size N            samples in the step (default: the model's batch, else all)\n"
          "  --seed N                  Philox seed of Dropout (default 0)\n"
          "  --threads N               kernel threads (default: OpenMP's)\n"
          "  --device DEV              cpu (default) or cuda[:N] (when built with CUDA)\n"
          "  --json                    print the comparison as JSON\n"
          "Exit codes: 0 all bitwise equal, 11 a difference, others as `onnxtrain --help`.\n",
          f);
}

typedef struct verify_opts {
    const char *model;
    ot_common_args args; /* remat: the policy checked against none */
    bool json;
} verify_opts;

static ot_status run_verify(const verify_opts *o, ot_error *err) {
    ot_status st = OT_OK;
    ot_dataset data = {0};
    ot_remat_session *base = NULL, *rem = NULL;
    ot_remat_step r0 = {0}, r1 = {0};
    const ot_common_args *a = &o->args;
    if ((st = ot_args_load_dataset(&a->inputs, a->labels, &data, err))) goto fail;
    ot_remat_session_options so = {.seed = a->seed, .n_threads = a->n_threads, .device = a->device,
                                   .memory_budget = a->memory_budget};
    so.loss = a->loss;
    so.batch_size = a->batch_size;
    if (so.batch_size == 0) { /* all samples, unless the model's batch is fixed */
        ot_model *m = NULL;
        ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
        if ((st = ot_model_load(o->model, &io, &m, err))) goto fail;
        const ot_graph *g = m->graph;
        bool fixed = g->n_inputs > 0 && g->values[g->inputs[0]].shape.rank > 0 &&
                     g->values[g->inputs[0]].shape.dim[0] >= 0;
        ot_model_free(m);
        if (!fixed) so.batch_size = data.n_samples;
    }
    so.policy = "none";
    if ((st = ot_remat_session_new(o->model, &so, &base, err))) goto fail;
    so.policy = a->remat;
    if ((st = ot_remat_session_new(o->model, &so, &rem, err))) goto fail;
    if ((st = ot_remat_session_step(base, &data, &r0, err))) goto fail;
    if ((st = ot_remat_session_step(rem, &data, &r1, err))) goto fail;
    if (r0.n != r1.n) {
        st = ot_fail(err, OT_E_INTERNAL, "verify: %d results without remat, %d with", r0.n, r1.n);
        goto fail;
    }
    int n_diff = 0;
    if (o->json) {
        printf("{\"model\": ");
        ot_json_string(stdout, o->model);
        printf(", \"remat\": ");
        ot_json_string(stdout, a->remat);
        printf(", \"tensors\": [");
    } else {
        printf("%-48s %-7s %s\n", "tensor", "equal", "max |diff|");
    }
    for (int i = 0; i < r0.n; i++) {
        bool eq = false;
        double d = ot_remat_tensor_diff(r0.tensors[i], r1.tensors[i], &eq);
        n_diff += !eq;
        if (o->json) {
            printf("%s{\"name\": ", i ? ", " : "");
            ot_json_string(stdout, r0.names[i]);
            printf(", \"equal\": %s, \"max_abs_diff\": %.9g}", eq ? "true" : "false", d != d ? -1.0 : d);
        } else {
            printf("%-48s %-7s %.9g\n", r0.names[i], eq ? "yes" : "NO", d);
        }
    }
    double saved = (double)r0.planned_peak - (double)r1.planned_peak;
    double cost = r0.seconds > 0 ? 100.0 * (r1.seconds - r0.seconds) / r0.seconds : 0.0;
    double extra = rem->rw.extra_flops, step = rem->an.step_flops;
    if (o->json) {
        printf("], \"equal\": %s, \"n_different\": %d, \"peak_none\": %zu, \"peak_remat\": %zu, "
               "\"measured_none\": %zu, \"measured_remat\": %zu, \"saved_bytes\": %.0f, \"seconds_none\": %.6f, "
               "\"seconds_remat\": %.6f, \"extra_flops\": %.0f, \"step_flops\": %.0f, \"recompute_nodes\": %d}\n",
               n_diff ? "false" : "true", n_diff, r0.planned_peak, r1.planned_peak, r0.measured_peak, r1.measured_peak,
               saved, r0.seconds, r1.seconds, extra, step, rem->rw.n_clones);
    } else {
        printf("\nloss %.9g (none) %.9g (%s); %d of %d tensors differ\n", r0.loss, r1.loss, a->remat, n_diff, r0.n);
        printf("peak memory: %zu bytes (none) -> %zu bytes (%s): %.1f%% saved; measured %zu / %zu\n", r0.planned_peak,
               r1.planned_peak, a->remat, r0.planned_peak ? 100.0 * saved / (double)r0.planned_peak : 0.0,
               r0.measured_peak, r1.measured_peak);
        printf("time: %.3f ms (none) -> %.3f ms (%s): %+.1f%%; %d recompute nodes, %.0f extra FLOPs (%.1f%% of the step)\n",
               r0.seconds * 1e3, r1.seconds * 1e3, a->remat, cost, rem->rw.n_clones, extra,
               step > 0 ? 100.0 * extra / step : 0.0);
    }
    if (n_diff) st = ot_fail(err, OT_E_MISMATCH, "%d of %d tensors differ between --remat none and --remat %s", n_diff,
                             r0.n, a->remat);
fail:
    ot_remat_step_free(&r0);
    ot_remat_step_free(&r1);
    ot_remat_session_free(base);
    ot_remat_session_free(rem);
    ot_dataset_free(&data);
    return st;
}

int ot_cmd_verify(int argc, char **argv) {
    static const struct option longopts[] = {
        OT_ARGS_OPT_INPUT, OT_ARGS_OPT_LABELS,  OT_ARGS_OPT_LOSS,   OT_ARGS_OPT_REMAT,
        OT_ARGS_OPT_BUDGET, OT_ARGS_OPT_BATCH, OT_ARGS_OPT_SEED,   OT_ARGS_OPT_THREADS,
        OT_ARGS_OPT_DEVICE, {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    verify_opts o = {0};
    ot_common_args_init(&o.args);
    ot_error err = {0};
    ot_status st = OT_OK;
    int c;
    bool common;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if ((st = ot_args_common(&o.args, c, optarg, &common, &err))) break;
        if (common) continue;
        switch (c) {
        case 'j': o.json = true; break;
        case 'h':
            usage(stdout);
            ot_common_args_free(&o.args);
            return 0;
        default:
            st = ot_fail(&err, OT_E_USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
            break;
        }
        if (st) break;
    }
    if (!st) st = ot_args_one_model(argc, argv, optind, &o.model, &err);
    if (!st && o.args.inputs.n == 0) st = ot_fail(&err, OT_E_USAGE, "missing --input FILE.npy");
    if (!st && !o.args.remat) st = ot_fail(&err, OT_E_USAGE, "missing --remat POLICY (the policy to check against none)");
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
