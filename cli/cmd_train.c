/* cmd_train.c — `onnxtrain train MODEL ... -o TUNED.onnx`: trains a model on .npy
 * data and writes the tuned model (same graph, opset and metadata; new initializers
 * and running statistics) by temporary name and rename, only after a successful run. */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli/wait_policy.h"
#include "cli/args.h"
#include "cli/defaults.h"
#include "ir/atomic_file.h"
#include "ir/human_size.h"
#include "remat/remat.h"
#include "train/checkpoint.h"
#include "train/dist.h"
#include "train/progress.h"
#include "train/report.h"
#include "train/report_svg.h"
#include "train/train.h"
#include "train/outputs.h"
#include "train/train_memory.h"
#include "kernels/kernel.h"

static void train_usage(FILE *f) {
    fputs("usage: onnxtrain train MODEL.onnx --input FILE.npy|NAME=FILE.npy ... [--labels FILE.npy]\n"
          "                       [options] -o TUNED.onnx\n\n"
          "Trains the model's floating-point initializers and writes the tuned model. The model\n"
          "file is never modified; TUNED.onnx and the --report are written (temporary names,\n"
          "then rename) only when the whole run succeeds. Before any work every output is\n"
          "checked: an output naming an input of the run (the model, its external data, a data\n"
          "file, --resume; symlinks and hard links included) or another output, an empty name\n"
          "or a folder exit 2; a missing or unwritable folder exits 3.\n\n"
          "data:\n"
          "  --input FILE | NAME=FILE  .npy array for a model input, samples along axis 0. Without\n"
          "                            NAME the files go to the model's inputs in order. Repeatable.\n"
          "  --labels FILE             .npy labels: int64 class indices (cross-entropy; checked to be\n"
          "                            in range before training) or float targets shaped like the\n"
          "                            output (mse, bce, l1)\n"
          "  --val-input, --val-labels validation data, same form; loss (and accuracy for\n"
          "                            cross-entropy) over its full batches after every epoch and\n"
          "                            after the last step, in inference mode as PyTorch's\n"
          "                            model.eval(): BatchNorm uses the running statistics trained\n"
          "                            so far, Dropout is off (the result does not depend on\n"
          "                            --seed), nothing is updated. It runs on a second, forward-\n"
          "                            only plan whose memory comes on top of the training peak\n"
          "                            (--memory-budget covers both; the params are shared).\n"
          "  --batch-size N|auto       samples per micro-batch (default: the model's fixed batch,\n"
          "                            else min(32, samples)). The last partial batch of an epoch\n"
          "                            is kept, as PyTorch's DataLoader (it runs padded in the full\n"
          "                            batch's plan, its padding masked out of the loss: cross-entropy\n"
          "                            without BatchNorm; otherwise it is dropped, said). auto (with\n"
          "                            --memory-budget): the largest batch whose planned training\n"
          "                            step fits the budget (the plan's peak is the run's arena)\n"
          "                            Under mpirun -np R: the global batch; each rank takes N/R,\n"
          "                            bitwise one process with --batch-size N/R and R x --accum\n"
          "                            (docs/training.md, \"Data parallel\")\n"
          OT_ARGS_HELP_BIND
          "  --seed N                  shuffling (Fisher-Yates, splitmix64) and Dropout masks (default 0)\n"
          "  --no-shuffle              visit samples in file order\n"
          "  --drop-last               drop the last partial batch of each epoch (DataLoader's\n"
          "                            drop_last=True): every step then sees exactly N samples\n"
          OT_ARGS_HELP_LOSS
          OT_ARGS_HELP_CHUNKED
          OT_ARGS_HELP_PARAMS
          OT_ARGS_HELP_LORA OT_ARGS_HELP_PRECISION
          "  --lora-save FILE|DIR/     write the adapters alone to FILE (.npz or .onnx) or, for a name\n"
          "                            ending in '/' (or a folder), as PEFT's adapter_model.safetensors\n"
          "                            and adapter_config.json; -o is then optional (when given, the\n"
          "                            merged model is written too)\n"
          "  --lora-load DIR/          start the adapters from a PEFT folder (as --lora-save DIR/ writes);\n"
          "                            without --lora its r and lora_alpha are taken\n"
          "optimizer (updates follow torch.optim):\n"
          OT_ARGS_HELP_OPTIM
          "loop:\n"
          "  --steps N                 optimizer steps, at most 2^40 and with --accum at most 2^40\n"
          "                            micro-batches (default: from --epochs)\n"
          "  --epochs E                passes over the data (default 1, at most 2^30); ignored with\n"
          "                            --steps\n"
          "  --device DEV              cpu (default) or cuda[:N] (when built with CUDA)\n"
          OT_ARGS_HELP_TF32
          "  --threads N               CPU threads (default: OpenMP's default). The same seed, data\n"
          "                            and thread count give a bitwise identical tuned model.\n"
          OT_ARGS_HELP_WAIT
          "  --remat POLICY            none, all, sqrt, every:K, selective, manual:N1,N2, auto (default),\n"
          "                            optimal (least recompute for --memory-budget, solved as a MIP).\n"
          "                            auto: the cheapest plan within --memory-budget; without one the\n"
          "                            least peak within +5% FLOPs, never above none's\n"
          "  --remat-time-limit SEC    for --remat optimal: the MIP solver's limit (default 60); then\n"
          "                            the best plan found and its gap. Needs CBC or GLPK at build time\n"
          "  --memory-budget SIZE      peak bytes, e.g. 512M (K/M/G powers of 1024): auto and optimal\n"
          "                            plan within it, another policy is checked against it (exit 9);\n"
          "                            with --val-input it holds the training step and validation\n"
          "output:\n"
          "  -o, --output-model FILE   the tuned model (required unless --lora-save); with --lora the\n"
          "                            merged model: each adapted W becomes W + (ALPHA/RANK)*A*B, same\n"
          "                            graph and names as the input\n"
          "  --external-data           write its initializers to FILE.data (as the source stored them:\n"
          "                            one file, or a file per tensor); automatic above protobuf's 2 GB\n"
          "  --report FILE.json        loss history, learning rates, step times, validation results\n"
          "                            and the memory plan; written in full before the tuned model,\n"
          "                            renamed into place after it. Also FILE.svg beside it: the loss\n"
          "                            curve with the validation loss and the learning rate\n"
          "                            (`onnxtrain report FILE.json` draws it again)\n"
          "  --report-grad-norm        also the global gradient norm of every step (null otherwise,\n"
          "                            except with --clip-grad-norm, which computes it anyway): one\n"
          "                            more pass over the gradients, ~3% of a step of small layers\n"
          "  --log-every N             without a terminal: a log line every N steps (default ~20\n"
          "                            lines per run). On a terminal one line is updated in place.\n"
          "  --quiet                   print only errors and the final summary\n"
          "  -v, --verbose             also diagnostic lines (how idle worker threads wait, and why)\n"
          "  --check-numerics          stop at the first NaN/Inf (the default): names the step, the\n"
          "                            node and its phase (forward, loss, backward, recompute, optimizer)\n"
          "  --no-check-numerics       skip the NaN/Inf checks of the loss, gradients and updated params\n"
          "checkpoints:\n"
          "  --checkpoint-dir DIR      where checkpoints go (default: TUNED.onnx.ckpt, used when\n"
          "                            interrupted). Files DIR/ckpt-<step>.otc, written by temporary\n"
          "                            name, fsync and rename\n"
          "  --checkpoint-every N      write a checkpoint every N optimizer steps (default: only\n"
          "                            when interrupted)\n"
          "  --keep-checkpoints K      keep the newest K checkpoints (default 3)\n"
          "  --resume DIR|FILE         continue from the newest valid checkpoint in DIR (or FILE):\n"
          "                            params, optimizer state, running statistics, step and data\n"
          "                            position; the result is bitwise the same as an uninterrupted\n"
          "                            run. Give the same model, data and settings (checked: another\n"
          "                            model exits 5, other settings or a damaged file exit 8)\n"
          "  -h, --help                this text\n\n"
          "A NaN or Inf in the loss or a gradient stops training (exit 10) naming the step and the\n"
          "first node that produced it; nothing is written.\n"
          "SIGINT or SIGTERM: the current step finishes, a checkpoint is written and the command\n"
          "exits 130 (SIGINT) or 143 (SIGTERM) printing the command that resumes; a second\n"
          "signal stops at once.\n"
          "Exit codes: 0 ok, 2 usage, 3 I/O, 4 parse, 5 invalid model, 6 unsupported, 7 shape,\n"
          "8 data (wrong dtype/shape, label out of range), 9 memory, 10 NaN/Inf, 13 another rank\n"
          "failed or hangs (mpirun; ONNXTRAIN_DIST_TIMEOUT seconds, default 600), 70 internal.\n",
          f);
    if (!ot_remat_optimal_available())
        fputs("\nthis build has no MIP solver (COIN-OR CBC, Debian coinor-libcbc-dev, or GLPK, libglpk-dev): --remat optimal is unavailable\n", f);
}

typedef struct cli_obs {
    ot_progress prog;
    ot_wait_watch wait; /* spinning workers on a machine that got busy: say so once */
} cli_obs;

static void on_step(void *user, const ot_train_step_info *si) {
    cli_obs *o = user;
    o->prog.loss_scale = si->loss_scale;
    o->prog.skipped = si->skipped_total;
    ot_progress_step(&o->prog, si->step, si->epoch, si->n_epochs, si->loss, si->lr, si->samples_per_s);
    double slower = ot_wait_watch_step(&o->wait, ot_now_seconds());
    if (slower > 0 && !o->prog.quiet)
        ot_progress_message(&o->prog, "steps now take %.1fx as long as at their fastest; the idle worker threads "
                            "spin, which is slow when other work shares these CPUs: --wait-policy passive "
                            "makes them sleep", slower);
}

static void on_warning(void *user, const char *msg) {
    cli_obs *o = user;
    if (o->prog.f) ot_progress_message(&o->prog, "warning: %s", msg);
    else fprintf(stderr, "warning: %s\n", msg); /* --quiet still says what it carried on past */
}

static void on_epoch(void *user, const ot_train_epoch_stats *e) {
    cli_obs *o = user;
    ot_wait_watch_pause(&o->wait); /* validation ran since the last step */
    if (o->prog.quiet || isnan(e->val_loss)) return;
    char ls[32], acc[48] = "", ppl[48] = "";
    if (!isnan(e->val_accuracy)) snprintf(acc, sizeof acc, ", accuracy %.2f%%", 100.0 * e->val_accuracy);
    if (!isnan(e->val_perplexity)) snprintf(ppl, sizeof ppl, ", perplexity %.2f", e->val_perplexity);
    ot_progress_message(&o->prog, "epoch %lld (step %lld): val loss %s%s%s over %lld samples", (long long)e->epoch + 1,
                        (long long)e->step, ot_loss_str(e->val_loss, ls, sizeof ls), acc, ppl, (long long)e->val_samples);
}


/* Set by the SIGINT/SIGTERM handler, read by the training loop between steps. A
 * signal handler can reach nothing else, hence this one file-scope variable. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

/* The command line that resumes this run: the same arguments, --resume DIR. */
static void print_resume_command(FILE *f, int argc, char **argv, const char *dir, int ranks) {
    fputs("resume with: ", f);
    if (ranks > 1) fprintf(f, "mpirun -np %d ", ranks); /* any rank count that the batch allows (docs/training.md) */
    fputs("onnxtrain", f);
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--resume") && i + 1 < argc) {
            i++;
            continue;
        }
        if (!strncmp(argv[i], "--resume=", 9)) continue;
        bool plain = argv[i][0] != 0;
        for (const char *c = argv[i]; *c; c++)
            plain &= strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%", *c) != NULL;
        if (plain) fprintf(f, " %s", argv[i]);
        else {
            fputs(" '", f);
            for (const char *c = argv[i]; *c; c++) *c == '\'' ? fputs("'\\''", f) : fputc(*c, f);
            fputc('\'', f);
        }
    }
    fprintf(f, " --resume %s\n", dir);
}

enum { O_VAL_INPUT = OT_ARG_OWN, O_VAL_LABELS, O_STEPS, O_EPOCHS, O_REPORT, O_LOG_EVERY, O_QUIET, O_NO_SHUFFLE,
       O_NO_CHECK, O_CHECK, O_CKPT_DIR, O_CKPT_EVERY, O_CKPT_KEEP, O_RESUME, O_EXTERNAL, O_LORA_SAVE, O_LORA_LOAD,
       O_REPORT_NORM, O_DROP_LAST };

/* Everything one `onnxtrain train` holds, from the command line to the result. */
typedef struct train_cli {
    ot_train_options o;
    ot_common_args ca;
    ot_input_specs val_inputs;
    const char *model_path, *val_labels, *out_path, *report, *ckpt_dir, *resume, *lora_save, *lora_load;
    bool quiet, verbose, help, external_data, batch_auto;
    bool model_written, report_written; /* what write_outputs put in place */
    int64_t log_every;
    char *default_ckpt_dir;
    char *report_svg; /* the loss curve beside --report */
    ot_checkpoint ck;
    char ck_path[4096];
    ot_dataset data, val;
    ot_model *m;
    ot_train_session *s;
    ot_train_result res;
    struct sigaction old_int, old_term; /* restored when the command ends */
    bool handlers;
    ot_dist *dist; /* under mpirun: this rank of a data-parallel run (train/dist.h); else NULL */
} train_cli;

/* The command's own options (the session's are ot_args_common's). */
static ot_status own_option(train_cli *t, int c, const char *arg, ot_error *err) {
    int64_t v;
    ot_status st = OT_OK;
    switch (c) {
    case O_VAL_INPUT: return ot_args_add_input(&t->val_inputs, "--val-input", arg, err);
    case O_VAL_LABELS: t->val_labels = arg; return OT_OK;
    case O_STEPS: return ot_args_int("--steps", arg, 1, OT_ARGS_MAX_STEPS, &t->o.steps, err);
    case O_EPOCHS: return ot_args_int("--epochs", arg, 1, 1 << 30, &t->o.epochs, err);
    case O_REPORT: t->report = arg; return OT_OK;
    case O_REPORT_NORM: t->o.record_grad_norm = true; return OT_OK;
    case O_LOG_EVERY: return ot_args_int("--log-every", arg, 1, INT64_MAX / 4, &t->log_every, err);
    case O_QUIET: t->quiet = true; return OT_OK;
    case 'v': t->verbose = true; return OT_OK;
    case O_NO_SHUFFLE: t->o.no_shuffle = true; return OT_OK;
    case O_DROP_LAST: t->o.drop_last = true; return OT_OK;
    case O_NO_CHECK: t->o.no_numerics_check = true; return OT_OK;
    case O_CHECK: t->o.no_numerics_check = false; return OT_OK;
    case O_CKPT_DIR: t->ckpt_dir = arg; return OT_OK;
    case O_CKPT_EVERY: return ot_args_int("--checkpoint-every", arg, 1, INT64_MAX / 4, &t->o.checkpoint_every, err);
    case O_CKPT_KEEP:
        if (!(st = ot_args_int("--keep-checkpoints", arg, 1, 1 << 20, &v, err))) t->o.keep_checkpoints = (int)v;
        return st;
    case O_RESUME: t->resume = arg; return OT_OK;
    case O_EXTERNAL: t->external_data = true; return OT_OK;
    case O_LORA_SAVE: t->lora_save = arg; return OT_OK;
    case O_LORA_LOAD: t->lora_load = t->o.lora_load = arg; return OT_OK;
    case 'o': t->out_path = arg; return OT_OK;
    default: return ot_fail(err, OT_E_INTERNAL, "option code %d has no case", c);
    }
}

/* ot_args_parse's hook: --batch-size auto is train's, and so is every code of its own
 * (the session's codes are below OT_ARG_OWN); the rest goes to ot_args_common. */
static ot_status train_option(void *cmd, int c, const char *arg, bool *taken, ot_error *err) {
    train_cli *t = cmd;
    if (c == OT_ARG_BATCH && !strcmp(arg, "auto")) {
        t->batch_auto = true;
        *taken = true;
        return OT_OK;
    }
    *taken = c == 'o' || c == 'v' || c >= OT_ARG_OWN;
    return *taken ? own_option(t, c, arg, err) : OT_OK;
}

static ot_status parse_args(train_cli *t, int argc, char **argv, ot_error *err) {
    static const struct option opts[] = {
        OT_ARGS_OPTS_SESSION,
        {"val-input", required_argument, 0, O_VAL_INPUT}, {"val-labels", required_argument, 0, O_VAL_LABELS},
        {"steps", required_argument, 0, O_STEPS}, {"epochs", required_argument, 0, O_EPOCHS},
        {"report", required_argument, 0, O_REPORT}, {"report-grad-norm", no_argument, 0, O_REPORT_NORM},
        {"log-every", required_argument, 0, O_LOG_EVERY},
        {"quiet", no_argument, 0, O_QUIET}, {"verbose", no_argument, 0, 'v'}, {"no-shuffle", no_argument, 0, O_NO_SHUFFLE},
        {"drop-last", no_argument, 0, O_DROP_LAST},
        {"no-check-numerics", no_argument, 0, O_NO_CHECK}, {"output-model", required_argument, 0, 'o'},
        {"check-numerics", no_argument, 0, O_CHECK}, {"checkpoint-dir", required_argument, 0, O_CKPT_DIR},
        {"checkpoint-every", required_argument, 0, O_CKPT_EVERY}, {"keep-checkpoints", required_argument, 0, O_CKPT_KEEP},
        {"resume", required_argument, 0, O_RESUME}, {"external-data", no_argument, 0, O_EXTERNAL},
        {"lora-save", required_argument, 0, O_LORA_SAVE},
        {"lora-load", required_argument, 0, O_LORA_LOAD},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    ot_status st = ot_args_parse(argc, argv, "hvo:", opts, &t->ca, train_option, t, &t->help, err);
    if (st || t->help) return st;
    ot_common_args_to_train(&t->ca, &t->o);
    t->o.lora_load = t->lora_load;
    if (t->lora_load && t->o.lora.rank == 0) { /* the folder's r and lora_alpha */
        st = ot_lora_peft_read_config(t->lora_load, &t->o.lora.rank, &t->o.lora.alpha, err);
        if (st) {
            if (err) ot_error_prefix(err, "--lora-load ");
            return st;
        }
    }
    return ot_args_one_model(argc, argv, optind, &t->model_path, err);
}

/* What can be refused before any work: no output, half the validation data, a bad
 * remat policy. (The output paths themselves are checked by check_files.) */
static ot_status check_args(const train_cli *t, ot_error *err) {
    if (!t->out_path && !t->lora_save && t->ca.output_old) /* --output was meant as -o */
        return ot_fail(err, OT_E_USAGE, "missing -o TUNED.onnx (where to write the trained model); --output %s names "
                       "the model output the loss reads (now --loss-output): for the tuned model file write -o %s",
                       t->ca.loss.output_name, t->ca.loss.output_name);
    if (!t->out_path && !t->lora_save)
        return ot_fail(err, OT_E_USAGE, "missing -o TUNED.onnx (where to write the trained model)");
    if (t->lora_save && t->o.lora.rank == 0) return ot_fail(err, OT_E_USAGE, "--lora-save needs --lora RANK");
    size_t ls = t->lora_save ? strlen(t->lora_save) : 0;
    if (ls && !(ls > 4 && !strcmp(t->lora_save + ls - 4, ".npz")) && !(ls > 5 && !strcmp(t->lora_save + ls - 5, ".onnx")) &&
        !ot_lora_peft_is_dir(t->lora_save))
        return ot_fail(err, OT_E_USAGE, "--lora-save %s: the name must end in .npz or .onnx, or in '/' for a PEFT folder",
                       t->lora_save);
    if (t->batch_auto && !t->o.memory_budget)
        return ot_fail(err, OT_E_USAGE, "--batch-size auto needs --memory-budget SIZE");
    if (t->o.record_grad_norm && !t->report)
        return ot_fail(err, OT_E_USAGE, "--report-grad-norm records the norms in the report: give --report FILE.json too");
    ot_status st = OT_OK;
    /* the loop numbers micro-batches as step * accum + k: refuse what would overflow */
    if (t->o.steps > 0 &&
        (st = ot_args_product("--steps x --accum micro-batches", t->o.steps, t->o.accum, OT_ARGS_MAX_MICRO_BATCHES, NULL, err)))
        return st;
    if ((t->val_inputs.n > 0) != (t->val_labels != NULL) && t->o.loss.kind != OT_LOSS_OUTPUT)
        return ot_fail(err, OT_E_USAGE, "validation needs both --val-input and --val-labels");
    if (t->o.remat) { /* reject a bad policy before any work */
        ot_remat_policy pol = {0};
        if ((st = ot_remat_policy_parse(t->o.remat, &pol, err))) return st;
        ot_remat_policy_free(&pol);
    }
    return OT_OK;
}

/* The checkpoint folder (default: next to the output, where an interrupted run
 * goes) and the checkpoint to resume from. */
static ot_status choose_checkpoint_dir(train_cli *t, ot_error *err) {
    if (!t->ckpt_dir) {
        const char *out = t->out_path ? t->out_path : t->lora_save;
        size_t len = strlen(out), n = len + 8;
        while (len > 1 && out[len - 1] == '/') len--; /* a PEFT folder DIR/: DIR.ckpt */
        if (!(t->default_ckpt_dir = malloc(n))) return ot_fail(err, OT_E_MEMORY, "out of memory");
        snprintf(t->default_ckpt_dir, n, "%.*s.ckpt", (int)len, out);
    }
    t->o.checkpoint_dir = t->ckpt_dir ? t->ckpt_dir : t->default_ckpt_dir;
    return OT_OK;
}

static ot_status setup_checkpoints(train_cli *t, ot_error *err) {
    if (!t->ckpt_dir) t->ckpt_dir = t->default_ckpt_dir;
    t->o.stop = &stop_signal;
    if (!t->resume) return OT_OK;
    ot_error skipped = {0};
    ot_status st = ot_checkpoint_load_latest(t->resume, &t->ck, t->ck_path, sizeof t->ck_path, &skipped, err);
    if (st) return st;
    if (skipped.code) fprintf(stderr, "onnxtrain train: note: skipped a newer checkpoint: %s\n", skipped.msg);
    t->o.resume = &t->ck;
    t->o.resume_path = t->ck_path;
    return OT_OK;
}

static int64_t param_elems(ot_train_session *s) {
    const ot_autodiff_result *ad = ot_train_autodiff(s);
    int64_t elems = 0;
    for (int i = 0; i < ad->n_params; i++) elems += ot_shape_numel(&ot_train_graph(s)->values[ad->params[i]].shape);
    return elems;
}

/* The memory lines: budget and remat. */
static void print_budget(const train_cli *t) {
    ot_train_memory_summary ms;
    ot_train_memory_info(t->s, &ms);
    if (ms.budget > 0) {
        int64_t used = ms.train_peak + (ms.val_in_budget ? ms.val_peak : 0);
        char b[OT_HUMAN_SIZE_LEN], tp[OT_HUMAN_SIZE_LEN], vp[OT_HUMAN_SIZE_LEN], u[OT_HUMAN_SIZE_LEN];
        fprintf(stderr, "memory budget %s (%s) holds the training step %s", ot_human_size((double)ms.budget, b, sizeof b),
                ms.budget_from_device ? "GPU free memory less a margin" : "--memory-budget",
                ot_human_size((double)ms.train_peak, tp, sizeof tp));
        if (ms.val_in_budget) fprintf(stderr, " + validation %s", ot_human_size((double)ms.val_peak, vp, sizeof vp));
        fprintf(stderr, " = %s planned\n", ot_human_size((double)used, u, sizeof u));
    }
    const ot_train_remat_summary *rs = ot_train_remat_info(t->s);
    char label[160], change[64];
    char pk[OT_HUMAN_SIZE_LEN], pk0[OT_HUMAN_SIZE_LEN], kp[OT_HUMAN_SIZE_LEN], kp0[OT_HUMAN_SIZE_LEN];
    ot_cli_remat_label(t->o.remat, ms.budget, rs, label, sizeof label);
    ot_cli_peak_change(rs->peak_none, rs->peak, change, sizeof change);
    if (rs->applied && rs->no_gain)
        fprintf(stderr, "remat %s: peak %s, as without remat\n", label, ot_human_size((double)rs->peak, pk, sizeof pk));
    else if (rs->applied && rs->peak_none > 0)
        fprintf(stderr,
                "remat %s: peak %s instead of %s without remat, %s; kept activations %s instead of %s; recomputes "
                "%d nodes, +%.1f%% FLOPs per step\n",
                label, ot_human_size((double)rs->peak, pk, sizeof pk),
                ot_human_size((double)rs->peak_none, pk0, sizeof pk0), change,
                ot_human_size((double)rs->kept, kp, sizeof kp), ot_human_size((double)rs->kept_none, kp0, sizeof kp0),
                rs->n_clones, rs->step_flops > 0 ? 100.0 * rs->extra_flops / rs->step_flops : 0.0);
}

/* The last partial batch of an epoch: kept (padded in the plan) or dropped, and why. */
static void print_partial_batch(const train_cli *t) {
    const char *why = NULL;
    int64_t n = t->data.n_samples, B = ot_train_batch_size(t->s), kept = ot_train_partial_batch(t->s, n, &why);
    const char *s = n / B == 1 ? "" : "es";
    if (kept > 0)
        fprintf(stderr, "each epoch of %lld samples: %lld batch%s of %lld, then a partial batch of %lld (run padded to "
                "%lld in the same plan: same peak; --drop-last drops it)\n", (long long)n, (long long)(n / B), s,
                (long long)B, (long long)kept, (long long)B);
    else if (why)
        fprintf(stderr, "each epoch of %lld samples: %lld batch%s of %lld; the last %lld samples of its order are dropped "
                "(%s)\n", (long long)n, (long long)(n / B), s, (long long)B, (long long)(n % B), why);
}

/* What is about to run and the memory it was planned to take. */
static void print_setup(const train_cli *t, int64_t total) {
    const ot_plan *plan = ot_train_plan(t->s);
    const ot_autodiff_result *ad = ot_train_autodiff(t->s);
    int n = ot_dist_size(t->dist);
    if (n > 1) /* t->o holds the one-process equivalent (ot_dist_train_options) */
        fprintf(stderr, "data parallel over %d ranks: global batch %lld, per rank %lld x %lld micro-batches per step "
                "(bitwise one process with --batch-size %lld --accum %lld)\n", n,
                (long long)(ot_train_batch_size(t->s) * n), (long long)ot_train_batch_size(t->s),
                (long long)t->o.accum / n, (long long)ot_train_batch_size(t->s), (long long)t->o.accum);
    fprintf(stderr, "training %d params (%lld values) with %s lr %g, batch %lld x %lld micro-batches, %lld steps\n",
            ad->n_params, (long long)param_elems(t->s), ot_optim_kind_name(t->o.optim.kind), t->o.optim.lr,
            (long long)ot_train_batch_size(t->s), (long long)t->o.accum, (long long)total);
    const char *wait = getenv(OT_WAIT_APPLIED_ENV);
    if (wait && t->verbose) fprintf(stderr, "idle worker threads: %s\n", wait); /* a diagnosis: -v */
    const ot_linear_ce_result *lce = ot_train_chunked_loss(t->s);
    if (lce->applied) fprintf(stderr, "chunked cross-entropy: %s\n", lce->why);
    else if (t->o.chunked_loss == OT_CHUNKED_LOSS_ON || (t->o.chunked_loss && t->verbose)) /* asked for, or -v */
        fprintf(stderr, "chunked cross-entropy not used: %s\n", lce->why);
    const ot_fused_attn_result *fa = ot_train_fused_attention(t->s);
    if (fa->n_fused || (t->o.fused_attention && (t->verbose || t->o.fused_attention == OT_FUSED_ATTN_ON)))
        fprintf(stderr, "fused attention: %s%s%s\n", fa->why, fa->n_skipped && *fa->first_skip ? "; left alone: " : "",
                fa->n_skipped ? fa->first_skip : "");
    char h[5][OT_HUMAN_SIZE_LEN];
    fprintf(stderr,
            "planned peak memory%s: %s (params %s, gradients %s, optimizer state %s, activations and workspace %s)\n",
            n > 1 ? " per rank" : "", ot_human_size((double)ot_plan_peak_bytes(plan), h[0], sizeof h[0]),
            ot_human_size((double)plan->slab_bytes[OT_MEM_PARAMS], h[1], sizeof h[1]),
            ot_human_size((double)plan->slab_bytes[OT_MEM_GRADIENTS], h[2], sizeof h[2]),
            ot_human_size((double)plan->slab_bytes[OT_MEM_OPT_STATE], h[3], sizeof h[3]),
            ot_human_size((double)(ot_plan_peak_bytes(plan) - plan->pinned_bytes), h[4], sizeof h[4]));
    const ot_plan *vp = ot_train_validation_plan(t->s);
    if (vp)
        fprintf(stderr,
                "validation plan (forward only, inference mode): %s more (activations and workspace %s, "
                "inputs and outputs %s; reads the training arena's params and statistics, %s, in place)\n",
                ot_human_size((double)ot_plan_peak_bytes(vp), h[0], sizeof h[0]),
                ot_human_size((double)(ot_plan_peak_bytes(vp) - vp->pinned_bytes), h[1], sizeof h[1]),
                ot_human_size((double)vp->pinned_bytes, h[2], sizeof h[2]),
                ot_human_size((double)vp->external_bytes, h[3], sizeof h[3]));
    print_budget(t);
    print_partial_batch(t);
    if (t->resume) fprintf(stderr, "resuming from %s at step %lld\n", t->ck_path, (long long)t->ck.step);
}

/* Every output against every input (the model's external data files included) and
 * each destination on its own, before the data is read or anything is written. */
static ot_status check_files(const train_cli *t, ot_error *err) {
    ot_run_files f = {0};
    ot_status st = ot_run_files_model(&f, t->m, err);
    if (!st) st = ot_args_add_input_files(&f, &t->ca.inputs, "--input", t->ca.labels, "--labels", err);
    if (!st) st = ot_args_add_input_files(&f, &t->val_inputs, "--val-input", t->val_labels, "--val-labels", err);
    if (!st) st = ot_run_files_input(&f, "--resume", t->resume, err);
    if (!st) st = ot_run_files_output(&f, "-o", t->out_path, OT_OUTPUT_FILE, err);
    if (!st) st = ot_run_files_output(&f, "--lora-save", t->lora_save,
                                      t->lora_save && ot_lora_peft_is_dir(t->lora_save) ? OT_OUTPUT_FOLDER : OT_OUTPUT_FILE, err);
    if (!st) st = ot_run_files_output(&f, "--report", t->report, OT_OUTPUT_FILE, err);
    if (!st) st = ot_run_files_output(&f, "--report's picture", t->report_svg, OT_OUTPUT_FILE, err);
    if (!st) st = ot_run_files_output(&f, t->ckpt_dir ? "--checkpoint-dir" : "the checkpoint folder", t->o.checkpoint_dir,
                                      OT_OUTPUT_FOLDER, err);
    if (!st) st = ot_run_files_check(&f, err);
    /* -o's data file (the exporter checks again when it writes, for every file) */
    if (!st && t->out_path && t->external_data) st = ot_model_data_file_check(t->out_path, NULL, err);
    ot_run_files_free(&f);
    return st;
}

/* --batch-size auto: the largest batch whose planned step fits --memory-budget, each
 * probe a plan-only session over the same import (train/train_memory.h). */
static ot_status auto_batch(train_cli *t, ot_error *err) {
    int64_t b = 0, n = ot_dist_size(t->dist); /* under mpirun: the per-rank batch (t->o is per rank) */
    int64_t max = n > 1 && t->data.n_samples >= n ? t->data.n_samples / n : t->data.n_samples;
    ot_status st = ot_train_find_batch(t->m, &t->o, true, t->o.memory_budget, max, &b, err);
    if (st) return st;
    t->o.batch_size = b;
    char hb[OT_HUMAN_SIZE_LEN];
    ot_human_size((double)t->o.memory_budget, hb, sizeof hb);
    if (!t->quiet && n > 1)
        fprintf(stderr, "--batch-size auto: %lld per rank (global batch %lld over %lld ranks), the largest whose "
                "planned step fits --memory-budget %s per rank\n", (long long)b, (long long)(b * n), (long long)n, hb);
    else if (!t->quiet)
        fprintf(stderr, "--batch-size auto: %lld, the largest batch whose planned step fits --memory-budget %s\n",
                (long long)b, hb);
    return OT_OK;
}

/* Loads the model and the data and builds the session (memory advice on OT_E_MEMORY). */
static ot_status build(train_cli *t, ot_error *err) {
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    if (t->report && !(t->report_svg = ot_report_svg_path(t->report))) return ot_fail(err, OT_E_MEMORY, "out of memory");
    ot_status st = ot_model_load(t->model_path, &io, &t->m, err);
    if (!st) st = choose_checkpoint_dir(t, err);
    if (!st) st = check_files(t, err);
    if (!st) st = ot_args_load_dataset(&t->ca.inputs, t->ca.labels, &t->data, err);
    if (!st && t->val_inputs.n) st = ot_args_load_dataset(&t->val_inputs, t->val_labels, &t->val, err);
    /* the steps of an epoch-counted run are epochs x batches (<= samples): keep it in int64 */
    if (!st && t->o.steps == 0 && t->o.epochs > 0)
        st = ot_args_product("--epochs x samples", t->o.epochs, t->data.n_samples, INT64_MAX, NULL, err);
    if (!st) st = setup_checkpoints(t, err);
    if (!st && t->batch_auto) st = auto_batch(t, err);
    if (st) return st;
    t->o.validation = t->val_inputs.n > 0; /* planned with the session, inside the memory budget */
    t->o.stream_save = true;                 /* write_outputs() writes the tuned model from the arena */
    if ((st = ot_train_session_new(t->m, &t->o, &t->data, true, &t->s, err))) {
        if (st == OT_E_MEMORY) ot_train_memory_advice(t->m, &t->o, t->data.n_samples, err);
        return st;
    }
    if (t->lora_save && ot_lora_peft_is_dir(t->lora_save) && (st = ot_train_lora_peft_check(t->s, err))) {
        if (err) ot_error_prefix(err, "--lora-save ");
        return st; /* before any step: a weight PEFT cannot name */
    }
    if (t->val_inputs.n) {
        if ((st = ot_train_check_data(t->s, &t->val, "validation data", err))) return st;
        if ((st = ot_train_validation_prepare(t->s, err))) return st;
    }
    return OT_OK;
}

/* Under mpirun: this rank's part of the run (train/dist.h). The options become the
 * one-process equivalent; ranks other than 0 print nothing but errors. */
static ot_status start_dist(train_cli *t, ot_error *err) {
    ot_status st = ot_dist_init(&stop_signal, &t->dist, err);
    if (!st) st = ot_dist_train_options(t->dist, &t->o, t->batch_auto, err);
    if (!st && ot_dist_rank(t->dist) != 0) t->quiet = true;
    return st;
}

/* Trains with SIGINT/SIGTERM asking for a checkpoint and a stop between steps. */
static ot_status run(train_cli *t, int64_t total, ot_error *err) {
    cli_obs ob;
    ot_progress_init(&ob.prog, stderr, isatty(fileno(stderr)) != 0, t->quiet, total, t->log_every);
    ot_wait_watch_init(&ob.wait);
    ot_train_observer obs = {.on_step = on_step, .on_epoch = on_epoch, .on_warning = on_warning, .user = &ob};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND; /* a second signal takes the default action: stop now */
    stop_signal = 0;
    sigaction(SIGINT, &sa, &t->old_int);
    sigaction(SIGTERM, &sa, &t->old_term);
    t->handlers = true; /* until the command ends: the tuned model is written under them too */
    ot_status st = ot_train_run(t->s, &t->data, t->val_inputs.n ? &t->val : NULL, &obs, &t->res, err);
    ot_progress_finish(&ob.prog);
    return st;
}

/* The loss curve beside the report (train/report_svg.h). */
static ot_status write_curve(train_cli *t, ot_error *err) {
    const ot_train_result *r = &t->res;
    int64_t *vs = calloc((size_t)r->n_epochs + 1, sizeof *vs);
    double *vl = calloc((size_t)r->n_epochs + 1, sizeof *vl);
    ot_status st = vs && vl ? OT_OK : ot_fail(err, OT_E_MEMORY, "out of memory");
    ot_report_curves c = {.title = (char *)t->model_path, .loss = r->loss, .lr = r->lr, .n_steps = r->n_steps,
                          .val_step = vs, .val_loss = vl};
    for (int64_t i = 0; !st && i < r->n_epochs; i++)
        if (!isnan(r->epochs[i].val_loss)) {
            vs[c.n_val] = r->epochs[i].step;
            vl[c.n_val++] = r->epochs[i].val_loss;
        }
    if (!st && (st = ot_report_svg_write(t->report_svg, &c, err))) ot_error_prefix(err, "the report's picture ");
    free(vs);
    free(vl);
    return st;
}

/* The report and the tuned model, which appear together only now that the run has
 * succeeded: the report is written in full and synced under its temporary name (a
 * full disk stops here, before the model), then the model is saved (temporary name
 * and rename), then the report is renamed into place. Only that rename (or the folder
 * sync after it) can fail with the model already written; the message then says so. */
static ot_status write_outputs(train_cli *t, ot_error *err) {
    ot_atomic_file *rep = NULL;
    ot_status st = OT_OK;
    if (t->report) {
        const ot_loss_options *l = &t->o.loss;
        ot_report_info info = {.model = t->model_path, .output = t->out_path ? t->out_path : t->lora_save,
                               .loss = ot_loss_kind_name(l->kind),
                               .remat = t->o.remat, .n_params = ot_train_autodiff(t->s)->n_params,
                               .n_param_elems = param_elems(t->s), .n_threads = t->o.n_threads, .seed = t->o.seed};
        if (!(st = ot_atomic_open(t->report, &rep, err))) {
            ot_report_write_json(ot_atomic_stream(rep), &info, ot_train_optim(t->s), &t->res, ot_train_plan(t->s));
            st = ot_atomic_finish(rep, err); /* frees rep on failure */
        }
        if (st) {
            if (err) ot_error_prefix(err, "report ");
            return st;
        }
    }
    if (t->lora_save && (st = ot_train_save_adapters(t->s, t->lora_save, err))) {
        ot_atomic_abort(rep);
        if (err) ot_error_prefix(err, "--lora-save ");
        return st;
    }
    if (t->out_path && (st = ot_train_save_model(t->s, t->out_path, t->external_data, err))) {
        ot_atomic_abort(rep);
        return st;
    }
    t->model_written = true;
    if (!rep) return OT_OK;
    /* A failed sync of the folder comes after the rename: the report is then in place,
     * as a new file (a rename always brings the temporary file's inode). */
    struct stat before, after;
    bool had = stat(t->report, &before) == 0;
    st = ot_atomic_commit(rep, err);
    t->report_written = !st || (stat(t->report, &after) == 0 &&
                                (!had || after.st_ino != before.st_ino || after.st_dev != before.st_dev));
    if (st && err) ot_error_prefix(err, "report ");
    if (!st) st = write_curve(t, err);
    return st;
}

/* Part of the summary: the process's resident bytes during the steps beside the plan's
 * arenas (train/rss.h). What RSS holds besides the arenas' touched pages: the binary
 * and libraries (the file-backed part), heap, thread stacks, BLAS/OpenMP buffers. */
static void print_rss(const train_cli *t) {
    const ot_train_result *r = &t->res;
    char a[32], b[32], c[32];
    if (r->rss_steps_peak <= 0) {
        fputs("peak RSS during the steps: not measured (needs Linux's /proc/self/clear_refs)\n", stderr);
        return;
    }
    size_t plan = r->planned_peak + r->val_planned_peak;
    ot_human_size((double)r->rss_steps_peak, a, sizeof a);
    ot_human_size((double)r->rss_file, c, sizeof c);
    if (t->o.device && strncmp(t->o.device, "cuda", 4) == 0) { /* the arenas are device memory */
        fprintf(stderr, "peak RSS during the steps: %s of host memory (the planned arena is on %s; binary and "
                "libraries %s)\n", a, t->o.device, c);
        return;
    }
    char d[32];
    int64_t more = r->rss_steps_peak - (int64_t)plan; /* below the plan: arena pages never written */
    ot_human_size((double)plan, b, sizeof b);
    ot_human_size((double)(more < 0 ? -more : more), d, sizeof d);
    fprintf(stderr, "peak RSS during the steps: %s = the planned %s %c %s (%.3fx; binary and libraries %s, the rest "
            "heap, thread stacks, BLAS/OpenMP buffers and data)\n", a, b, more < 0 ? '-' : '+', d,
            (double)r->rss_steps_peak / (double)plan, c);
}

/* The outputs and the last line. */
static ot_status finish(train_cli *t, ot_error *err) {
    if (ot_dist_rank(t->dist) != 0) return OT_OK; /* rank 0 writes the one tuned model and report */
    ot_status st = write_outputs(t, err);
    if (st) return st;
    const ot_train_result *res = &t->res;
    char l0[32], l1[32];
    fprintf(stderr, "trained %lld step%s in %.2f s: loss %s -> %s; wrote %s\n", (long long)res->n_steps,
            res->n_steps == 1 ? "" : "s", res->total_seconds, ot_loss_str(res->loss[res->first_step], l0, sizeof l0),
            ot_loss_str(res->loss[res->n_steps - 1], l1, sizeof l1), t->out_path ? t->out_path : t->lora_save);
    if (t->out_path && t->lora_save) fprintf(stderr, "wrote the adapters to %s\n", t->lora_save);
    if (res->loss_scaling) /* part of the summary: how often fp16 overflowed */
        fprintf(stderr, "loss scaling: %lld step%s skipped for Inf/NaN gradients (fp16 overflow), scale now %g\n",
                (long long)res->skipped_steps, res->skipped_steps == 1 ? "" : "s", res->loss_scale);
    if (t->report) fprintf(stderr, "wrote the report %s and its loss curve %s\n", t->report, t->report_svg);
    print_rss(t);
    double first, last;
    if (ot_train_loss_flat(res, &first, &last)) /* part of the summary: a run that did not train says so */
        fprintf(stderr, "the loss %s: mean %.4f over the first fifth of the steps, %.4f over the last (%+.1f%%); try a "
                "larger --lr (this run: %g) or more %s (this run: %lld)\n", last > first ? "rose" : "barely fell", first,
                last, 100.0 * (last - first) / first, ot_train_optim(t->s)->lr, t->o.steps ? "--steps" : "--epochs",
                (long long)(t->o.steps ? t->o.steps : t->o.epochs > 0 ? t->o.epochs : 1));
    if (ot_dist_size(t->dist) > 1) /* part of the final summary, also with --quiet */
        fprintf(stderr, "data parallel: rank 0 of %d spent %.3f s of %.3f s in collectives (%.1f%%: the gradient sum, "
                "losses and running statistics, waiting for the slowest rank included)\n", ot_dist_size(t->dist),
                ot_dist_comm_seconds(t->dist), res->total_seconds,
                res->total_seconds > 0 ? 100.0 * ot_dist_comm_seconds(t->dist) / res->total_seconds : 0.0);
    return OT_OK;
}

static void train_cli_free(train_cli *t) {
    if (t->handlers) {
        sigaction(SIGINT, &t->old_int, NULL);
        sigaction(SIGTERM, &t->old_term, NULL);
    }
    ot_train_result_free(&t->res);
    ot_train_session_free(t->s);
    ot_checkpoint_free(&t->ck);
    free(t->default_ckpt_dir);
    free(t->report_svg);
    ot_dataset_free(&t->data);
    ot_dataset_free(&t->val);
    ot_model_free(t->m);
    ot_common_args_free(&t->ca);
    ot_input_specs_free(&t->val_inputs);
}

int ot_cmd_train(int argc, char **argv) {
    ot_error err = {0};
    train_cli t;
    memset(&t, 0, sizeof t);
    ot_train_options_default(&t.o);
    ot_common_args_init(&t.ca);
    ot_status st = parse_args(&t, argc, argv, &err);
    if (!st && t.help) {
        train_usage(stdout);
        train_cli_free(&t);
        return 0;
    }
    if (!st && !t.quiet) ot_args_notes(&t.ca, "train", stderr);
    if (!st) st = check_args(&t, &err);
    if (!st) st = start_dist(&t, &err);
    if (!st) st = build(&t, &err);
    int64_t total = st ? 0 : ot_train_total_steps(t.s, &t.data);
    if (!st && !t.quiet) {
        print_setup(&t, total);
        ot_train_print_constants_note(t.s, stderr);
    }
    if (!st) st = run(&t, total, &err);
    if (!st && t.res.interrupted && ot_dist_rank(t.dist) != 0) st = OT_E_PEER; /* rank 0 says it */
    if (!st && t.res.interrupted) {
        int sig = (int)stop_signal;
        fprintf(stderr, "onnxtrain train: interrupted by %s after step %lld of %lld; wrote checkpoint %s (%s was not written)\n",
                sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal", (long long)t.res.n_steps,
                (long long)total, t.res.last_checkpoint, t.out_path ? t.out_path : t.lora_save);
        print_resume_command(stderr, argc, argv, t.ckpt_dir, ot_dist_size(t.dist));
        ot_dist_abort(t.dist, 128 + sig); /* the other ranks stop too */
        train_cli_free(&t);
        return 128 + sig; /* the shell's convention: 130 SIGINT, 143 SIGTERM */
    }
    if (!st) st = finish(&t, &err);
    if (st && st != OT_E_PEER && ot_dist_size(t.dist) > 1) ot_error_prefix(&err, "rank %d: ", ot_dist_rank(t.dist));
    if (st && (err.code || st != OT_E_PEER)) {
        fprintf(stderr, "onnxtrain train: %s\n", err.msg);
        if (st == OT_E_USAGE) fputs("Run 'onnxtrain train --help' for the options.\n", stderr);
        if (t.model_written)
            fprintf(stderr, "after %lld completed steps: the tuned model %s was written; the report %s was %s\n",
                    (long long)t.res.n_steps, t.out_path ? t.out_path : t.lora_save, t.report,
                    t.report_written ? "renamed into place but its folder could not be synced" : "not written");
        else if (t.res.n_steps > 0 && st != OT_E_USAGE)
            fprintf(stderr, "stopped after %lld completed steps; %s was not written%s\n", (long long)t.res.n_steps,
                    t.out_path ? t.out_path : t.lora_save ? t.lora_save : "the model", t.report ? " (nor the report)" : "");
    }
    if (st) ot_dist_abort(t.dist, (int)st); /* ends every rank: none waits for this one */
    ot_dist_finalize(t.dist);
    t.dist = NULL;
    train_cli_free(&t);
    return (int)st;
}

ot_status ot_cmd_train_parse(int argc, char **argv, ot_common_args *ca, const char **model, const char **out,
                             bool *help, ot_error *err) {
    train_cli t;
    memset(&t, 0, sizeof t);
    ot_train_options_default(&t.o);
    ot_common_args_init(&t.ca);
    ot_status st = parse_args(&t, argc, argv, err);
    if (!st && !t.help && t.out_path) st = check_args(&t, err);
    *model = t.model_path;
    *out = t.out_path;
    *help = t.help;
    *ca = t.ca; /* handed over: the caller frees it */
    ot_common_args_init(&t.ca);
    train_cli_free(&t);
    return st;
}
