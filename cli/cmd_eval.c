/* cmd_eval.c — `onnxtrain eval MODEL --input ...`: the forward pass over .npy data in
 * batches. Everything that can be wrong with the data (missing input, dtype, shape,
 * sample counts, batch size, labels) is checked before any batch runs; then it prints
 * the throughput and the planned peak memory, with --labels the loss, accuracy and
 * perplexity (train/metrics.h, validation's code path), and with --dump-outputs writes
 * every graph output concatenated over the batches.
 *
 * It runs in inference mode by default, as PyTorch's model.eval(): models meant for
 * training with onnxtrain are exported in training mode (BatchNorm training_mode=1,
 * Dropout active), and so is every tuned model `train` writes, yet evaluating one
 * should not normalise by the batch or drop activations. --train-mode runs the graph
 * as exported. */
#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "cli/args.h"
#include "importer/importer.h"
#include "ir/human_size.h"
#include "ir/json_write.h"
#include "kernels/kernel.h"
#include "train/infer.h"
#include "train/npy.h"
#include "train/progress.h" /* ot_loss_str */

static void usage(FILE *f) {
    fputs("usage: onnxtrain eval MODEL --input FILE.npy | --input NAME=FILE.npy ... [--labels FILE.npy]\n"
          "                      [options]\n\n"
          "Runs the model's forward pass over .npy data (samples along axis 0) in batches,\n"
          "in inference mode unless --train-mode is given, and prints the throughput and\n"
          "the planned peak memory. With --labels (or --loss output) it also evaluates the\n"
          "loss over the whole data, as train's validation does after every epoch: the loss\n"
          "(the mean of the batch losses weighted by their samples, as HF's Trainer reports\n"
          "eval_loss), for cross-entropy the accuracy (argmax against every label that is not\n"
          "the ignore index) and, when the labels are sequences (a token model), the\n"
          "perplexity exp(loss).\n\n"
          "  --input FILE | NAME=FILE  data of a graph input (repeat for several inputs;\n"
          "                            unnamed files go to the inputs in model order)\n"
          "  --batch-size N            samples per batch; binds the symbolic dim of axis 0\n"
          "                            of the first input (default: min(32, samples)). With\n"
          "                            a fixed batch dim, N must equal it and the sample\n"
          "                            count must be a multiple of it. Otherwise a last\n"
          "                            partial batch runs on a second plan of that size,\n"
          "                            over the same import, reading the first one's weights.\n"
          "  --labels FILE             labels of the loss: int64 (or int32) class indices for\n"
          "                            cross-entropy, float targets for mse, bce and l1, as train takes them\n"
          OT_ARGS_HELP_LOSS
          OT_ARGS_HELP_BIND
          "  --threads N               kernel threads (default: OpenMP's default)\n"
          OT_ARGS_HELP_WAIT
          "  --device DEV              cpu (default) or cuda[:N] (when built with CUDA)\n"
          OT_ARGS_HELP_TF32
          OT_ARGS_HELP_PRECISION
          "  --train-mode              run BatchNormalization and Dropout as the model says\n"
          "                            (a model exported with TrainingMode.TRAINING: batch\n"
          "                            statistics, Dropout masks drawn with --seed). Default:\n"
          "                            inference mode, as PyTorch's model.eval(): BatchNorm\n"
          "                            normalises with its running statistics, Dropout is the\n"
          "                            identity, whatever training_mode the model sets\n"
          "  --seed N                  Philox seed for Dropout with --train-mode (default 0)\n"
          "  --no-dropout              with --train-mode: Dropout in inference mode (identity)\n"
          "  --dump-outputs DIR        write each graph output as DIR/<name>.npy, the\n"
          "                            batches concatenated along axis 0\n"
          "  --json                    print the result as one JSON object\n"
          "  -h, --help                this help\n\n"
          "A model exported in PyTorch's default eval mode gives the same outputs either way.\n"
          "With --train-mode, BatchNormalization in training mode normalises with batch\n"
          "statistics, so its outputs depend on the batch size and on the other samples.\n"
          "Exit codes: 0 ok, 2 usage, 3 I/O, 4 parse, 5 invalid model, 6 unsupported,\n"
          "7 shape, 8 data, 9 memory, 70 internal.\n",
          f);
}

typedef struct eval_opts {
    const char *model;
    ot_common_args args; /* inputs, batch_size (0: default), bind, n_threads, device, seed */
    bool train_mode;     /* run BatchNorm / Dropout with the model's training_mode */
    bool no_dropout;
    const char *dump_dir;
    bool json;
    bool with_loss; /* --labels or --loss given: evaluate the loss */
} eval_opts;

/* One graph output gathered over the batches. */
typedef struct eval_output {
    int value;
    char *file;
    unsigned char *buf;
    size_t nbytes, cap;
    int64_t rows;       /* along axis 0 */
    ot_tensor last;     /* dtype/shape of the last batch (data unused) */
    bool concat;        /* axis 0 is the batch axis */
} eval_output;

static const char *safe_char_name(char *dst, size_t n, const char *src) {
    size_t k = 0;
    for (const char *p = src && *src ? src : "output"; *p && k + 1 < n; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '-' || c == '_';
        dst[k++] = ok ? c : '_';
    }
    dst[k] = 0;
    if (dst[0] == '.') dst[0] = '_'; /* no hidden files, no "..". */
    return dst;
}

static ot_status append_output(eval_output *out, const ot_tensor *t, ot_error *err) {
    if (out->nbytes + t->nbytes > out->cap) {
        size_t cap = out->cap ? out->cap : 4096;
        while (cap < out->nbytes + t->nbytes) cap *= 2;
        unsigned char *nb = realloc(out->buf, cap);
        if (!nb) return ot_fail(err, OT_E_MEMORY, "out of memory gathering outputs");
        out->buf = nb;
        out->cap = cap;
    }
    if (!out->concat) out->nbytes = 0; /* not batched: keep the last value only */
    memcpy(out->buf + out->nbytes, t->data, t->nbytes);
    out->nbytes += t->nbytes;
    out->rows += t->shape.rank > 0 ? t->shape.dim[0] : 1;
    out->last = *t;
    out->last.data = NULL;
    return OT_OK;
}

/* Runs samples [start, start+n) and appends the outputs. */
static ot_status run_batch(ot_infer_session *s, const ot_dataset *d, int64_t start, int64_t n, eval_output *outs,
                           int n_out, bool gather, ot_error *err) {
    ot_status st = ot_infer_run(s, d, start, n, err);
    for (int k = 0; !st && k < n_out && gather; k++) {
        ot_tensor *t = NULL;
        if ((st = ot_infer_get_output(s, k, &t, err))) return st;
        st = append_output(&outs[k], t, err);
        ot_tensor_free(t);
    }
    return st;
}

static ot_status write_outputs(const eval_opts *o, const ot_graph *g, eval_output *outs, int n_out, ot_error *err) {
    if (mkdir(o->dump_dir, 0777) != 0 && errno != EEXIST)
        return ot_fail(err, OT_E_IO, "--dump-outputs: cannot create '%s': %s", o->dump_dir, strerror(errno));
    for (int k = 0; k < n_out; k++) {
        char safe[200];
        safe_char_name(safe, sizeof safe, g->values[outs[k].value].name);
        /* Unique names: two outputs may differ only in characters made safe. */
        char base[220];
        snprintf(base, sizeof base, "%s", safe);
        for (int dup = 1;; dup++) {
            bool clash = false;
            for (int j = 0; j < k; j++)
                if (outs[j].file && !strcmp(strrchr(outs[j].file, '/') + 1, base)) clash = true;
            if (!clash) break;
            snprintf(base, sizeof base, "%s_%d", safe, dup);
        }
        size_t len = strlen(o->dump_dir) + strlen(base) + 8;
        outs[k].file = malloc(len);
        if (!outs[k].file) return ot_fail(err, OT_E_MEMORY, "out of memory");
        snprintf(outs[k].file, len, "%s/%s.npy", o->dump_dir, base);
        ot_tensor t = outs[k].last;
        if (outs[k].concat) t.shape.dim[0] = outs[k].rows;
        t.data = outs[k].buf;
        t.nbytes = outs[k].nbytes;
        ot_status st = ot_npy_write(outs[k].file, &t, err);
        if (st) return st;
    }
    return OT_OK;
}


/* JSON has no NaN: null. */
static void json_num(double x) {
    if (isfinite(x)) printf("%.9g", x);
    else printf("null");
}

static void print_result(const eval_opts *o, ot_infer_session *s, int64_t count, double sec, const eval_output *outs,
                         int n_out) {
    const ot_plan *p = ot_infer_plan(s);
    size_t hw = ot_infer_high_water(s);
    int64_t bs = ot_infer_batch_size(s), rest = ot_infer_last_batch(s), n_batches = ot_infer_full_batches(s) + (rest ? 1 : 0);
    bool gather = o->dump_dir != NULL;
    double rate = sec > 0 ? (double)count / sec : 0;
    ot_metrics_result mr;
    bool have = ot_infer_metrics(s, &mr);
    if (o->json) {
        printf("{\"model\": ");
        ot_json_string(stdout, o->model); /* a path may hold quotes or backslashes */
        printf(", \"mode\": \"%s\", \"samples\": %lld, \"batch_size\": %lld, \"batches\": %lld, \"last_batch\": %lld, "
               "\"seconds\": %.6f, \"samples_per_sec\": %.2f, \"peak_bytes\": %zu, \"high_water_bytes\": %zu, \"memory\": ",
               o->train_mode ? "train" : "inference", (long long)count, (long long)bs, (long long)n_batches,
               (long long)(rest ? rest : bs), sec, rate, ot_plan_peak_bytes(p), hw);
        ot_plan_write_json(p, stdout);
        if (have) {
            printf(", \"loss\": ");
            json_num(mr.loss);
            printf(", \"accuracy\": ");
            json_num(mr.accuracy);
            printf(", \"perplexity\": ");
            json_num(mr.perplexity);
            printf(", \"labels_counted\": %lld", (long long)mr.counted);
        }
        printf(", \"outputs\": [");
        for (int k = 0; k < n_out && gather; k++) {
            if (k) printf(", ");
            ot_json_string(stdout, outs[k].file);
        }
        printf("]}\n");
        return;
    }
    char pk[32], mw[32];
    ot_human_size((double)ot_plan_peak_bytes(p), pk, sizeof pk);
    ot_human_size((double)hw, mw, sizeof mw);
    printf("%s: %lld samples in %lld batch%s of %lld", o->model, (long long)count, (long long)n_batches,
           n_batches == 1 ? "" : "es", (long long)bs);
    if (rest) printf(" (last: %lld)", (long long)rest);
    printf(", %.2f ms, %.1f samples/s, %s mode\n", sec * 1e3, rate, o->train_mode ? "train" : "inference");
    printf("planned peak %s, measured high-water %s\n", pk, mw);
    if (have) {
        char ls[32];
        printf("loss %s over %lld samples", ot_loss_str(mr.loss, ls, sizeof ls), (long long)mr.samples);
        if (!isnan(mr.accuracy))
            printf(", accuracy %.2f%% (%lld labels)", 100.0 * mr.accuracy, (long long)mr.counted);
        if (!isnan(mr.perplexity)) printf(", perplexity %.2f", mr.perplexity);
        putchar('\n');
    }
    for (int k = 0; k < n_out && gather; k++) printf("wrote %s\n", outs[k].file);
}

static ot_status run_eval(const eval_opts *o, ot_error *err) {
    ot_status st = OT_OK;
    ot_model *m = NULL;
    ot_dataset data = {0};
    ot_infer_session *s = NULL;
    eval_output *outs = NULL;
    int n_out = 0;
    const ot_common_args *a = &o->args;
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    if ((st = ot_model_load(o->model, &io, &m, err))) goto fail; /* once: the last batch plans over it too */
    if ((st = ot_args_check_output(m, a, "--dump-outputs", o->dump_dir, true, err))) goto fail;
    if ((st = ot_args_load_dataset(&a->inputs, a->labels, &data, err))) goto fail;
    ot_infer_options eo = {.bind = a->bind.v, .n_bind = a->bind.n, .batch_size = a->batch_size, .seed = a->seed,
                           .n_threads = a->n_threads, .device = a->device, .tf32 = a->tf32, .train_mode = o->train_mode,
                           .no_dropout = o->no_dropout, .loss = o->with_loss ? &a->loss : NULL,
                           .precision = a->precision};
    if ((st = ot_infer_session_new(m, &eo, &data, &s, err))) goto fail;
    const ot_graph *g = ot_infer_graph(s);
    int64_t bs = ot_infer_batch_size(s), n_full = ot_infer_full_batches(s), rest = ot_infer_last_batch(s);
    n_out = g->n_outputs;
    outs = calloc((size_t)n_out + 1, sizeof *outs);
    if (!outs) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory");
        goto fail;
    }
    for (int k = 0; k < n_out; k++) {
        const ot_value *ov = &g->values[g->outputs[k]];
        outs[k].value = g->outputs[k];
        outs[k].concat = ov->shape.rank >= 1 && ov->shape.dim[0] == bs;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool gather = o->dump_dir != NULL;
    for (int64_t b = 0; b < n_full; b++)
        if ((st = run_batch(s, &data, b * bs, bs, outs, n_out, gather, err))) goto fail;
    if (rest && (st = run_batch(s, &data, n_full * bs, rest, outs, n_out, gather, err))) goto fail;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (gather && (st = write_outputs(o, g, outs, n_out, err))) goto fail;
    print_result(o, s, data.n_samples, sec, outs, n_out);
fail:
    ot_infer_session_free(s);
    for (int k = 0; outs && k < n_out; k++) {
        free(outs[k].buf);
        free(outs[k].file);
    }
    free(outs);
    ot_dataset_free(&data);
    ot_model_free(m);
    return st;
}

/* eval's own options (ot_args_own_fn); --labels and --loss are noted, then read by
 * ot_args_common. */
static ot_status eval_option(void *cmd, int code, const char *arg, bool *taken, ot_error *err) {
    (void)err;
    eval_opts *o = cmd;
    *taken = true;
    switch (code) {
    case 'D': o->no_dropout = true; break;
    case 'T': o->train_mode = true; break;
    case 'o': o->dump_dir = arg; break;
    case 'j': o->json = true; break;
    default:
        if (code == OT_ARG_LABELS || code == OT_ARG_LOSS) o->with_loss = true;
        *taken = false;
    }
    return OT_OK;
}

int ot_cmd_eval(int argc, char **argv) {
    static const struct option longopts[] = {
        OT_ARGS_OPT_INPUT, OT_ARGS_OPT_LABELS, OT_ARGS_OPT_LOSS, OT_ARGS_OPT_OUTPUT, OT_ARGS_OPT_CLASS_AXIS,
        OT_ARGS_OPT_IGNORE, OT_ARGS_OPT_BATCH, OT_ARGS_OPT_BIND, OT_ARGS_OPT_THREADS, OT_ARGS_OPT_WAIT, OT_ARGS_OPT_DEVICE,
        OT_ARGS_OPT_SEED,  OT_ARGS_OPT_PRECISION, {"no-dropout", no_argument, NULL, 'D'}, {"train-mode", no_argument, NULL, 'T'},
        {"dump-outputs", required_argument, NULL, 'o'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    eval_opts o = {0};
    ot_common_args_init(&o.args);
    ot_error err = {0};
    bool help;
    ot_status st = ot_args_parse(argc, argv, "h", longopts, &o.args, eval_option, &o, &help, &err);
    if (!st && !help) st = ot_args_one_model(argc, argv, optind, &o.model, &err);
    if (!st && help) {
        usage(stdout);
        ot_common_args_free(&o.args);
        return 0;
    }
    if (!st && o.args.inputs.n == 0) st = ot_fail(&err, OT_E_USAGE, "missing --input FILE.npy");
    if (!st) {
        st = run_eval(&o, &err);
    } else {
        fprintf(stderr, "onnxtrain eval: %s\nRun 'onnxtrain eval --help' for the options.\n", err.msg);
        ot_common_args_free(&o.args);
        return st;
    }
    if (st) fprintf(stderr, "onnxtrain eval: %s\n", err.msg);
    ot_common_args_free(&o.args);
    return st;
}
