/* cmd_grad.c — `onnxtrain grad MODEL ...`: one forward and backward pass from the
 * model's own weights on the first batch; prints the loss and (with --dump-grads)
 * writes every parameter's gradient as .npy plus an index.json. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli/args.h"
#include "ir/atomic_file.h"
#include "ir/json_write.h"
#include "train/npy.h"
#include "train/report.h"
#include "train/train.h"
#include "kernels/kernel.h"

static void grad_usage(FILE *f) {
    fputs("usage: onnxtrain grad MODEL.onnx --input FILE.npy|NAME=FILE.npy ... [--labels FILE.npy]\n"
          "                      [--loss KIND] [options] [--dump-grads DIR]\n\n"
          "One forward and backward pass from the model's weights on the first batch (samples\n"
          "0..B-1 of the data, in file order); prints the loss and optionally dumps the gradients.\n\n"
          "data:\n"
          "  --input FILE | NAME=FILE  .npy array for a model input, samples along axis 0. Without\n"
          "                            NAME the files go to the model's inputs in order. Repeatable.\n"
          "  --labels FILE             .npy labels: int64 class indices (cross-entropy) or float\n"
          "                            targets shaped like the output (mse, bce, l1)\n"
          "  --batch-size N            samples in the batch (default: the model's fixed batch, else\n"
          "                            every sample in the files)\n"
          OT_ARGS_HELP_BIND
          OT_ARGS_HELP_LOSS
          OT_ARGS_HELP_CHUNKED
          OT_ARGS_HELP_PARAMS
          OT_ARGS_HELP_PRECISION
          "run:\n"
          "  --seed N                  Dropout masks (default 0)\n"
          "  --threads N               CPU threads (default: OpenMP's default)\n"
          OT_ARGS_HELP_WAIT
          "  --device DEV              cpu (default) or cuda[:N] (when built with CUDA)\n"
          OT_ARGS_HELP_TF32
          "  --remat POLICY            none, all, sqrt, every:K, selective, manual:N1,N2, auto (default;\n"
          "                            the gradients are the same bits under every policy)\n"
          "  --memory-budget SIZE      for --remat auto, e.g. 512M (K/M/G are powers of 1024)\n"
          "output:\n"
          "  --dump-grads DIR          write DIR/<param>.npy per param (names made safe: characters\n"
          "                            other than letters, digits, '.', '-' and '_' become '_',\n"
          "                            clashes get _1, _2) and DIR/index.json {param name: file}\n"
          "  --json                    print the result as JSON on stdout\n"
          "  -h, --help                this text\n\n"
          "Exit codes: 0 ok, 2 usage, 3 I/O, 4 parse, 5 invalid model, 6 unsupported, 7 shape,\n"
          "8 data (wrong dtype/shape, label out of range), 10 NaN/Inf, 70 internal.\n",
          f);
}

static ot_status dump_grads(ot_train_session *s, const char *dir, ot_error *err) {
    ot_status st = OT_OK;
    const ot_autodiff_result *ad = ot_train_autodiff(s);
    const ot_graph *g = ot_train_graph(s);
    char **names = calloc((size_t)ad->n_params + 1, sizeof *names);
    char *path = NULL;
    ot_atomic_file *af = NULL;
    size_t cap = strlen(dir) + 64;
    if (!names) return ot_fail(err, OT_E_MEMORY, "out of memory");
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        st = ot_fail(err, OT_E_IO, "%s: cannot create the folder: %s", dir, strerror(errno));
        goto done;
    }
    for (int i = 0; i < ad->n_params; i++) {
        if (!(names[i] = ot_safe_file_stem(g->values[ad->params[i]].name, (const char *const *)names, i))) goto oom;
        size_t need = strlen(dir) + strlen(names[i]) + 64;
        if (need > cap) cap = need;
    }
    path = malloc(cap);
    if (!path) goto oom;
    for (int i = 0; i < ad->n_params; i++) {
        ot_tensor *t = NULL;
        if ((st = ot_train_get_grad(s, i, &t, err))) goto done;
        snprintf(path, cap, "%s/%s.npy", dir, names[i]);
        st = ot_npy_write(path, t, err);
        ot_tensor_free(t);
        if (st) goto done;
    }
    snprintf(path, cap, "%s/index.json", dir);
    if ((st = ot_atomic_open(path, &af, err))) goto done;
    FILE *f = ot_atomic_stream(af);
    fputs("{\n", f);
    for (int i = 0; i < ad->n_params; i++) {
        fputs("  ", f);
        ot_json_string(f, g->values[ad->params[i]].name);
        fputs(": ", f);
        char file[600];
        snprintf(file, sizeof file, "%.580s.npy", names[i]);
        ot_json_string(f, file);
        fputs(i + 1 < ad->n_params ? ",\n" : "\n", f);
    }
    fputs("}\n", f);
    st = ot_atomic_commit(af, err);
    goto done;
oom:
    st = ot_fail(err, OT_E_MEMORY, "out of memory");
done:
    for (int i = 0; i < ad->n_params; i++) free(names[i]);
    free(names);
    free(path);
    return st;
}

enum { O_DUMP = OT_ARG_OWN, O_JSON };

typedef struct grad_opts {
    const char *dump; /* --dump-grads DIR */
    bool json;
} grad_opts;

/* grad's own options (ot_args_own_fn). */
static ot_status grad_option(void *cmd, int code, const char *arg, bool *taken, ot_error *err) {
    (void)err;
    grad_opts *o = cmd;
    *taken = true;
    switch (code) {
    case O_DUMP: o->dump = arg; break;
    case O_JSON: o->json = true; break;
    default: *taken = false;
    }
    return OT_OK;
}

int ot_cmd_grad(int argc, char **argv) {
    static const struct option opts[] = {
        OT_ARGS_OPT_INPUT, OT_ARGS_OPT_LABELS, OT_ARGS_OPT_LOSS, OT_ARGS_OPT_OUTPUT, OT_ARGS_OPT_CLASS_AXIS,
        OT_ARGS_OPT_IGNORE, OT_ARGS_OPT_CHUNKED, OT_ARGS_OPT_FREEZE, OT_ARGS_OPT_TRAIN, OT_ARGS_OPT_BATCH,
        OT_ARGS_OPT_SEED, OT_ARGS_OPT_THREADS, OT_ARGS_OPT_WAIT, OT_ARGS_OPT_DEVICE, OT_ARGS_OPT_BIND, OT_ARGS_OPT_REMAT, OT_ARGS_OPT_BUDGET,
        OT_ARGS_OPT_PRECISION,
        {"dump-grads", required_argument, 0, O_DUMP}, {"json", no_argument, 0, O_JSON},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    ot_error err = {0};
    ot_status st = OT_OK;
    ot_train_options o;
    ot_train_options_default(&o);
    ot_common_args ca;
    ot_common_args_init(&ca);
    grad_opts go = {0};
    ot_dataset data = {0};
    ot_model *m = NULL;
    ot_train_session *s = NULL;
    const char *model_path = NULL;
    bool help;
    if ((st = ot_args_parse(argc, argv, "h", opts, &ca, grad_option, &go, &help, &err))) goto done;
    if (help) {
        grad_usage(stdout);
        goto done;
    }
    if ((st = ot_args_one_model(argc, argv, optind, &model_path, &err))) goto done;
    const char *dump = go.dump;
    ot_common_args_to_train(&ca, &o);
    ot_args_notes(&ca, "grad", stderr);
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    if ((st = ot_model_load(model_path, &io, &m, &err))) goto done;
    if ((st = ot_args_check_output(m, &ca, "--dump-grads", dump, true, &err))) goto done;
    if ((st = ot_args_load_dataset(&ca.inputs, ca.labels, &data, &err))) goto done;
    if ((st = ot_train_session_new(m, &o, &data, false, &s, &err))) goto done;
    ot_train_print_constants_note(s, stderr);
    double loss = 0;
    if ((st = ot_train_grad_once(s, &data, &loss, &err))) goto done;
    if (dump && (st = dump_grads(s, dump, &err))) goto done;
    const ot_autodiff_result *ad = ot_train_autodiff(s);
    if (go.json) {
        printf("{\"loss\": %.9g, \"batch_size\": %lld, \"params\": %d, \"dump\": ", loss,
               (long long)ot_train_batch_size(s), ad->n_params);
        if (dump)
            ot_json_string(stdout, dump);
        else
            fputs("null", stdout);
        puts("}");
    } else {
        printf("loss %.9g\n", loss);
        if (dump) fprintf(stderr, "wrote %d gradients to %s/ (index.json)\n", ad->n_params, dump);
    }
done:
    if (st) {
        fprintf(stderr, "onnxtrain grad: %s\n", err.msg);
        if (st == OT_E_USAGE) fputs("Run 'onnxtrain grad --help' for the options.\n", stderr);
    }
    ot_train_session_free(s);
    ot_dataset_free(&data);
    ot_model_free(m);
    ot_common_args_free(&ca);
    return (int)st;
}
