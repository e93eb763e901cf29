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
#include "remat/session.h"
#include "runtime/npy.h"
#include "runtime/train.h"

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
    ot_input_specs inputs;
    const char *labels;
    const char *loss;
    const char *remat;
    int64_t budget, batch, seed, threads;
    const char *device;
    bool json;
} verify_opts;

static ot_status load_data(const verify_opts *o, ot_dataset *d, ot_error *err) {
    ot_status st = OT_OK;
    for (int i = 0; i < o->inputs.n && !st; i++) {
        ot_tensor *t = NULL;
        if ((st = ot_npy_read(o->inputs.v[i].path, &t, err))) break;
        st = ot_dataset_add(d, o->inputs.v[i].name ? o->inputs.v[i].name : "", o->inputs.v[i].path, -1, t, err);
    }
    if (!st && o->labels) {
        ot_tensor *t = NULL;
        if (!(st = ot_npy_read(o->labels, &t, err))) st = ot_dataset_add(d, OT_DATA_LABELS, o->labels, -1, t, err);
    }
    return st;
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if ((unsigned char)*s < 0x20) {
            printf("\\u%04x", *s);
            continue;
        }
        if (*s == '"' || *s == '\\') putchar('\\');
        putchar(*s);
    }
    putchar('"');
}

/* Max |a - b| over float tensors (NaN when shapes or dtypes differ); bitwise equality. */
static double max_abs_diff(const ot_tensor *a, const ot_tensor *b, bool *equal) {
    *equal = a->dtype == b->dtype && a->nbytes == b->nbytes && !memcmp(a->data, b->data, a->nbytes);
    if (a->dtype != b->dtype || a->nbytes != b->nbytes) return NAN;
    double m = 0.0;
    size_t n = a->nbytes / (ot_dtype_size(a->dtype) ? ot_dtype_size(a->dtype) : 1);
    for (size_t i = 0; i < n; i++) {
        double x, y;
        if (a->dtype == OT_F32) x = ((const float *)a->data)[i], y = ((const float *)b->data)[i];
        else if (a->dtype == OT_F64) x = ((const double *)a->data)[i], y = ((const double *)b->data)[i];
        else return *equal ? 0.0 : NAN;
        double d = fabs(x - y);
        if (d > m || d != d) m = d;
    }
    return m;
}

static ot_status run_verify(const verify_opts *o, ot_error *err) {
    ot_status st = OT_OK;
    ot_dataset data = {0};
    ot_remat_session *base = NULL, *rem = NULL;
    ot_remat_step r0 = {0}, r1 = {0};
    if ((st = load_data(o, &data, err))) goto fail;
    ot_remat_session_options so = {.seed = (uint64_t)o->seed, .n_threads = (int)o->threads, .device = o->device,
                                   .memory_budget = o->budget};
    if ((st = ot_loss_kind_parse(o->loss ? o->loss : "cross-entropy", &so.loss.kind, err))) goto fail;
    so.loss.class_axis = -1;
    so.batch_size = o->batch;
    if (so.batch_size == 0) { /* all samples, unless the model's batch is fixed */
        ot_model *m = NULL;
        ot_import_options io = {0};
        if ((st = ot_model_load(o->model, &io, &m, err))) goto fail;
        const ot_graph *g = m->graph;
        bool fixed = g->n_inputs > 0 && g->values[g->inputs[0]].shape.rank > 0 &&
                     g->values[g->inputs[0]].shape.dim[0] >= 0;
        ot_model_free(m);
        if (!fixed) so.batch_size = data.n_samples;
    }
    so.policy = "none";
    if ((st = ot_remat_session_new(o->model, &so, &base, err))) goto fail;
    so.policy = o->remat;
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
        json_str(o->model);
        printf(", \"remat\": ");
        json_str(o->remat);
        printf(", \"tensors\": [");
    } else {
        printf("%-48s %-7s %s\n", "tensor", "equal", "max |diff|");
    }
    for (int i = 0; i < r0.n; i++) {
        bool eq = false;
        double d = max_abs_diff(r0.tensors[i], r1.tensors[i], &eq);
        n_diff += !eq;
        if (o->json) {
            printf("%s{\"name\": ", i ? ", " : "");
            json_str(r0.names[i]);
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
        printf("\nloss %.9g (none) %.9g (%s); %d of %d tensors differ\n", r0.loss, r1.loss, o->remat, n_diff, r0.n);
        printf("peak memory: %zu bytes (none) -> %zu bytes (%s): %.1f%% saved; measured %zu / %zu\n", r0.planned_peak,
               r1.planned_peak, o->remat, r0.planned_peak ? 100.0 * saved / (double)r0.planned_peak : 0.0,
               r0.measured_peak, r1.measured_peak);
        printf("time: %.3f ms (none) -> %.3f ms (%s): %+.1f%%; %d recompute nodes, %.0f extra FLOPs (%.1f%% of the step)\n",
               r0.seconds * 1e3, r1.seconds * 1e3, o->remat, cost, rem->rw.n_clones, extra,
               step > 0 ? 100.0 * extra / step : 0.0);
    }
    if (n_diff) st = ot_fail(err, OT_E_MISMATCH, "%d of %d tensors differ between --remat none and --remat %s", n_diff,
                             r0.n, o->remat);
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
        {"input", required_argument, NULL, 'i'},      {"labels", required_argument, NULL, 'l'},
        {"loss", required_argument, NULL, 'L'},       {"remat", required_argument, NULL, 'r'},
        {"memory-budget", required_argument, NULL, 'm'}, {"batch-size", required_argument, NULL, 'b'},
        {"seed", required_argument, NULL, 's'},       {"threads", required_argument, NULL, 't'}, {"device", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'j'},             {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    verify_opts o = {0};
    ot_error err = {0};
    ot_status st = OT_OK;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'i': st = ot_args_add_input(&o.inputs, "--input", optarg, &err); break;
        case 'l': o.labels = optarg; break;
        case 'L': o.loss = optarg; break;
        case 'r': o.remat = optarg; break;
        case 'm': st = ot_args_size("--memory-budget", optarg, &o.budget, &err); break;
        case 'b': st = ot_args_int("--batch-size", optarg, 1, INT32_MAX, &o.batch, &err); break;
        case 's': st = ot_args_int("--seed", optarg, 0, INT64_MAX, &o.seed, &err); break;
        case 't': st = ot_args_int("--threads", optarg, 1, 1024, &o.threads, &err); break;
        case 'd': o.device = optarg; break;
        case 'j': o.json = true; break;
        case 'h':
            usage(stdout);
            ot_input_specs_free(&o.inputs);
            return 0;
        default:
            st = ot_fail(&err, OT_E_USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
            break;
        }
        if (st) break;
    }
    if (!st && optind != argc - 1)
        st = ot_fail(&err, OT_E_USAGE, optind >= argc ? "missing MODEL" : "expected one MODEL, got extra arguments");
    if (!st && o.inputs.n == 0) st = ot_fail(&err, OT_E_USAGE, "missing --input FILE.npy");
    if (!st && !o.remat) st = ot_fail(&err, OT_E_USAGE, "missing --remat POLICY (the policy to check against none)");
    if (st) {
        fprintf(stderr, "onnxtrain verify: %s\nRun 'onnxtrain verify --help' for the options.\n", err.msg);
        ot_input_specs_free(&o.inputs);
        return st;
    }
    o.model = argv[optind];
    st = run_verify(&o, &err);
    if (st) fprintf(stderr, "onnxtrain verify: %s\n", err.msg);
    ot_input_specs_free(&o.inputs);
    return st;
}
