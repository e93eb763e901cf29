/* args.h — option-value parsing shared by the CLI commands: integers and reals with
 * range checks, sizes such as "512M", NAME=FILE input specs, a growable list for
 * repeated options, and the options several commands share (data, loss, params,
 * batch, seed, threads, device, bind, remat, memory budget). Every error is
 * OT_E_USAGE naming the option and the text. */
#ifndef OT_CLI_ARGS_H
#define OT_CLI_ARGS_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "autodiff/autocast.h"
#include "autodiff/autodiff.h"
#include "autodiff/lora.h"
#include "ir.h"
#include "train/optim.h"
#include "train/train.h" /* ot_loss_scale_options */

/* After getopt: exactly one positional MODEL argument must remain (argv[optind]).
 * Sets *model or fails with OT_E_USAGE naming what is missing or extra. */
ot_status ot_args_one_model(int argc, char **argv, int optind_after, const char **model, ot_error *err);

/* The numeric parsers, one per kind. Each takes the whole text (no leading blank, no
 * trailing junk) and fails with OT_E_USAGE naming the option, the text and the rule:
 * "--steps 0: must be between 1 and 1099511627776", "--lr 'x': expected a number". */

/* A decimal integer in [min, max] ("--steps 100"); beyond int64 is out of range too. */
ot_status ot_args_int(const char *opt, const char *text, int64_t min, int64_t max, int64_t *out, ot_error *err);

/* The range of a real option: min (or above it), and optionally max (or below it). */
typedef struct ot_args_real_range {
    double min;
    bool min_exclusive;
    bool has_max;
    double max;
    bool max_exclusive;
} ot_args_real_range;
/* A finite real in the range ("--lr 3e-4"). NaN, inf and overflow are refused; a
 * value that underflows is the nearest double (1e-320 is a subnormal, accepted as
 * Python's float() does), refused only when that falls outside the range. */
ot_status ot_args_real(const char *opt, const char *text, const ot_args_real_range *r, double *out, ot_error *err);
/* ot_args_real with only a minimum; min_exclusive: value must be > min, else >= min. */
ot_status ot_args_double(const char *opt, const char *text, double min, bool min_exclusive, double *out,
                         ot_error *err);
/* A byte size: "4096", "512K", "512M", "2G", "1.5GiB", "1T" (K/M/G/T and KiB/... are
 * powers of 1024; a trailing "B" is allowed); not negative, at most 9e18. */
ot_status ot_args_size(const char *opt, const char *text, int64_t *bytes, ot_error *err);
/* --memory-budget's value: ot_args_size, and 0 refused (no step fits in 0 bytes; no
 * budget is the option left out). */
ot_status ot_args_budget(const char *text, int64_t *bytes, ot_error *err);
/* a * b of two option values, refused (OT_E_USAGE naming `what` and both) when it
 * overflows or exceeds max; *out (may be NULL) receives it. */
ot_status ot_args_product(const char *what, int64_t a, int64_t b, int64_t max, int64_t *out, ot_error *err);

/* Bounds of the loop options: far beyond any real run, small enough that every
 * product the loop forms (steps x accum micro-batches, x batch samples) fits int64. */
#define OT_ARGS_MAX_STEPS (INT64_C(1) << 40)
#define OT_ARGS_MAX_ACCUM (INT64_C(1) << 20)
#define OT_ARGS_MAX_MICRO_BATCHES (INT64_C(1) << 40) /* --steps x --accum */

/* "--input NAME=FILE" or "--input FILE" (name NULL: matched to the model's data
 * inputs in order). A text whose part before '=' contains '/' is a plain FILE. */
typedef struct ot_input_spec {
    char *name; /* malloc'd, or NULL */
    char *path; /* malloc'd */
} ot_input_spec;

typedef struct ot_input_specs {
    ot_input_spec *v;
    int n, cap;
} ot_input_specs;

ot_status ot_args_add_input(ot_input_specs *l, const char *opt, const char *text, ot_error *err);
void ot_input_specs_free(ot_input_specs *l);

/* Adds every spec's file (as opt, e.g. "--input") and the labels file (as labels_opt;
 * may be NULL) to a run's inputs (train/outputs.h). */
struct ot_run_files;
ot_status ot_args_add_input_files(struct ot_run_files *f, const ot_input_specs *l, const char *opt, const char *labels,
                                  const char *labels_opt, ot_error *err);

/* A list of strings (repeated --freeze / --train / --bind). Items are not copied:
 * they point into argv. */
typedef struct ot_str_list {
    const char **v;
    int n, cap;
} ot_str_list;

ot_status ot_str_list_add(ot_str_list *l, const char *s, ot_error *err);
void ot_str_list_free(ot_str_list *l);

/* ---- the shared options ----
 * A command lists the OT_ARGS_OPT_* entries it takes in its getopt_long table (its
 * own option codes start at OT_ARG_OWN) and hands every code it does not take itself
 * to ot_args_common (ot_args_parse is that loop).
 * Values are range-checked as they are read; --loss is parsed at once. */
enum {
    OT_ARG_INPUT = 256,
    OT_ARG_LABELS,
    OT_ARG_LOSS,
    OT_ARG_BATCH,
    OT_ARG_SEED,
    OT_ARG_THREADS,
    OT_ARG_DEVICE,
    OT_ARG_TF32,
    OT_ARG_BIND,
    OT_ARG_REMAT,
    OT_ARG_BUDGET,
    OT_ARG_OUTPUT,
    OT_ARG_CLASS_AXIS,
    OT_ARG_IGNORE,
    OT_ARG_FREEZE,
    OT_ARG_TRAIN,
    OT_ARG_OPTIMIZER,
    OT_ARG_LR,
    OT_ARG_MOMENTUM,
    OT_ARG_NESTEROV,
    OT_ARG_WD,
    OT_ARG_BETA1,
    OT_ARG_BETA2,
    OT_ARG_EPS,
    OT_ARG_CLIP,
    OT_ARG_SCHED,
    OT_ARG_WARMUP,
    OT_ARG_ACCUM,
    OT_ARG_LORA,
    OT_ARG_LORA_TARGET,
    OT_ARG_REMAT_TIME,
    OT_ARG_WAIT,
    OT_ARG_CHUNKED_LOSS,
    OT_ARG_CHUNKED_ROWS,
    OT_ARG_FUSED_ATTN,
    OT_ARG_PRECISION,
    OT_ARG_FUSE,
    OT_ARG_LOSS_SCALE,
    OT_ARG_LS_INIT,
    OT_ARG_LS_GROWTH,
    OT_ARG_LS_BACKOFF,
    OT_ARG_LS_INTERVAL,
    OT_ARG_OUTPUT_OLD, /* --output: the old name of --loss-output (cli/args.c says which option is meant) */
    OT_ARG_OWN /* first code free for a command's own options */
};
#define OT_ARGS_OPT_INPUT {"input", required_argument, NULL, OT_ARG_INPUT}
#define OT_ARGS_OPT_LABELS {"labels", required_argument, NULL, OT_ARG_LABELS}
#define OT_ARGS_OPT_LOSS {"loss", required_argument, NULL, OT_ARG_LOSS}
#define OT_ARGS_OPT_BATCH {"batch-size", required_argument, NULL, OT_ARG_BATCH}
#define OT_ARGS_OPT_SEED {"seed", required_argument, NULL, OT_ARG_SEED}
#define OT_ARGS_OPT_THREADS {"threads", required_argument, NULL, OT_ARG_THREADS}
/* applied before main by cli/wait_policy.c; the parsers only check the value */
#define OT_ARGS_OPT_WAIT {"wait-policy", required_argument, NULL, OT_ARG_WAIT}
#define OT_ARGS_OPT_DEVICE {"device", required_argument, NULL, OT_ARG_DEVICE}, {"tf32", no_argument, NULL, OT_ARG_TF32}
#define OT_ARGS_OPT_BIND {"bind", required_argument, NULL, OT_ARG_BIND}
#define OT_ARGS_OPT_REMAT {"remat", required_argument, NULL, OT_ARG_REMAT}
#define OT_ARGS_OPT_BUDGET {"memory-budget", required_argument, NULL, OT_ARG_BUDGET}
#define OT_ARGS_OPT_REMAT_TIME {"remat-time-limit", required_argument, NULL, OT_ARG_REMAT_TIME}
#define OT_ARGS_OPT_OUTPUT {"loss-output", required_argument, NULL, OT_ARG_OUTPUT}, {"output", required_argument, NULL, OT_ARG_OUTPUT_OLD}
#define OT_ARGS_OPT_CHUNKED                                                                                          \
    {"chunked-loss", required_argument, NULL, OT_ARG_CHUNKED_LOSS},                                                  \
        {"chunked-loss-rows", required_argument, NULL, OT_ARG_CHUNKED_ROWS},                                        \
        {"fused-attention", required_argument, NULL, OT_ARG_FUSED_ATTN}
#define OT_ARGS_OPT_PRECISION {"precision", required_argument, NULL, OT_ARG_PRECISION}
#define OT_ARGS_OPT_CLASS_AXIS {"class-axis", required_argument, NULL, OT_ARG_CLASS_AXIS}
#define OT_ARGS_OPT_IGNORE {"ignore-index", required_argument, NULL, OT_ARG_IGNORE}
#define OT_ARGS_OPT_FREEZE {"freeze", required_argument, NULL, OT_ARG_FREEZE}
#define OT_ARGS_OPT_TRAIN {"train", required_argument, NULL, OT_ARG_TRAIN}
/* The optimizer (train; plan and verify, for the memory figures), as a list of entries. */
#define OT_ARGS_OPTS_OPTIM                                                                                           \
    {"optimizer", required_argument, NULL, OT_ARG_OPTIMIZER}, {"lr", required_argument, NULL, OT_ARG_LR},           \
        {"momentum", required_argument, NULL, OT_ARG_MOMENTUM}, {"nesterov", no_argument, NULL, OT_ARG_NESTEROV},  \
        {"weight-decay", required_argument, NULL, OT_ARG_WD}, {"beta1", required_argument, NULL, OT_ARG_BETA1},    \
        {"beta2", required_argument, NULL, OT_ARG_BETA2}, {"eps", required_argument, NULL, OT_ARG_EPS},            \
        {"clip-grad-norm", required_argument, NULL, OT_ARG_CLIP}, {"schedule", required_argument, NULL, OT_ARG_SCHED}, \
        {"warmup-steps", required_argument, NULL, OT_ARG_WARMUP}, {"accum", required_argument, NULL, OT_ARG_ACCUM}, \
        {"fuse-update", no_argument, NULL, OT_ARG_FUSE}, {"loss-scale", required_argument, NULL, OT_ARG_LOSS_SCALE}, \
        {"loss-scale-init", required_argument, NULL, OT_ARG_LS_INIT},                                               \
        {"loss-scale-growth", required_argument, NULL, OT_ARG_LS_GROWTH},                                           \
        {"loss-scale-backoff", required_argument, NULL, OT_ARG_LS_BACKOFF},                                         \
        {"loss-scale-growth-interval", required_argument, NULL, OT_ARG_LS_INTERVAL}
/* Every option the session builder takes (train/train.h): data, loss, params, batch,
 * seed, threads, device, bind, remat, budget and the optimizer. */
#define OT_ARGS_OPTS_SESSION                                                                                         \
    OT_ARGS_OPT_INPUT, OT_ARGS_OPT_LABELS, OT_ARGS_OPT_LOSS, OT_ARGS_OPT_OUTPUT, OT_ARGS_OPT_CLASS_AXIS,            \
        OT_ARGS_OPT_IGNORE, OT_ARGS_OPT_CHUNKED, OT_ARGS_OPT_FREEZE, OT_ARGS_OPT_TRAIN, OT_ARGS_OPT_BATCH,          \
        OT_ARGS_OPT_SEED, OT_ARGS_OPT_THREADS, OT_ARGS_OPT_WAIT, OT_ARGS_OPT_DEVICE, OT_ARGS_OPT_BIND, OT_ARGS_OPT_REMAT,             \
        OT_ARGS_OPT_BUDGET, OT_ARGS_OPT_REMAT_TIME, OT_ARGS_OPTS_OPTIM, {"lora", required_argument, NULL, OT_ARG_LORA}, \
        {"lora-target", required_argument, NULL, OT_ARG_LORA_TARGET}, OT_ARGS_OPT_PRECISION

/* Help text of the shared options, one block per group, for the commands' --help. */
#define OT_ARGS_HELP_WAIT                                                                                            \
    "  --wait-policy P           how idle worker threads wait between parallel regions: spin\n"                   \
    "                            (fast on an idle machine), passive (sleep: for a shared or busy\n"               \
    "                            one), auto (default: spin if the CPUs were idle for 100 ms before\n"            \
    "                            the start, else passive). OMP_WAIT_POLICY or GOMP_SPINCOUNT in the\n"            \
    "                            environment override it. Results are the same either way.\n"
#define OT_ARGS_HELP_DATA                                                                                            \
    "  --input FILE | NAME=FILE  .npy array for a model input, samples along axis 0. Without\n"                     \
    "                            NAME the files go to the model's inputs in order. Repeatable.\n"                   \
    "  --labels FILE             .npy labels: int64 class indices (cross-entropy; checked to be\n"                  \
    "                            in range) or float targets (mse)\n"
#define OT_ARGS_HELP_TF32                                                                                            \
    "  --tf32                    on a GPU, float32 GEMMs on TF32 tensor cores (10-bit products:\n"                 \
    "                            faster, about 1e-3 from float32; off by default). The CPU has no\n"              \
    "                            TF32 and ignores it\n"
#define OT_ARGS_HELP_BIND                                                                                            \
    "  --bind NAME=SIZE[,...]    bind other symbolic dims (e.g. seq=16; those of axis >= 1 are\n"                   \
    "                            otherwise taken from the data). Repeatable.\n"
#define OT_ARGS_HELP_LOSS                                                                                            \
    "loss:\n"                                                                                                        \
    "  --loss KIND               cross-entropy (default), mse, bce (BCE-with-logits), l1 (mean absolute\n"       \
    "                            error), or output (a scalar model output)\n"                                     \
    "  --loss-output NAME        model output that feeds the loss (default: the first; was --output)\n"            \
    "  --class-axis N            cross-entropy: axis of the classes (default -1, the last)\n"                       \
    "  --ignore-index N|none     cross-entropy: label value that contributes nothing (default -100,\n"              \
    "                            as torch.nn.CrossEntropyLoss and HF's padded labels); none: every\n"            \
    "                            label must be a class\n"
/* --chunked-loss (autodiff/linear_ce.c, docs/memory.md) */
#define OT_ARGS_HELP_CHUNKED                                                                                         \
    "  --chunked-loss MODE       cross-entropy over a MatMul/Gemm head without the full logits:\n"                \
    "                            off (default), on, or auto (on when a chunk is smaller than the\n"              \
    "                            logits). Loss and gradients are computed a chunk of rows at a time;\n"        \
    "                            the head's weight gradient is summed over the chunks in order\n"              \
    "  --chunked-loss-rows N     rows of logits per chunk (default: the most that fit 16 MiB, and\n"          \
    "                            under --memory-budget the largest power of two below that whose\n"          \
    "                            step fits); part of the plan: the same N gives the same bits\n"                 \
    "  --fused-attention MODE    MatMul/Softmax/[Dropout]/MatMul attention as one Attention op whose\n"         \
    "                            backward recomputes the probabilities from Q and K: off (default),\n"        \
    "                            on, or auto (where the keys outnumber the head size). An attention\n"        \
    "                            Dropout is drawn in the fused op with the Dropout's own bits (CPU)\n"
#define OT_ARGS_HELP_PARAMS                                                                                          \
    "params:\n"                                                                                                      \
    "  --freeze PATTERN          do not train params whose name matches. Repeatable.\n"                            \
    "  --train PATTERN           train only params whose name matches. Repeatable.\n"                               \
    "                            PATTERN is a glob over the whole name ('*.bias'), or re:REGEX, a\n"             \
    "                            POSIX extended regex searched in the name ('re:^layer[12]\\.').\n"              \
    "                            A pattern that matches no param is an error (exit 2).\n"
#define OT_ARGS_HELP_LORA                                                                                            \
    "LoRA (docs/training.md, LoRA):\n"                                                                               \
    "  --lora RANK[:ALPHA]       train low-rank adapters W + (ALPHA/RANK)*A*B instead of the weights\n"            \
    "                            (ALPHA defaults to RANK); the base weights are frozen: no gradient,\n"           \
    "                            no optimizer state. A is drawn from --seed, B starts at zero.\n"                 \
    "  --lora-target PATTERN,... weights to adapt (globs, or re:REGEX as --freeze; default: every 2-D\n"                \
    "                            float32 weight read only by MatMul/Gemm, except the head, whose\n"             \
    "                            output reaches the loss through no other MatMul/Gemm;\n"                      \
    "                            `onnxtrain info MODEL --lora R` lists them)\n"
#define OT_ARGS_HELP_PRECISION                                                                                       \
    "  --precision P             fp32 (default), bf16 or fp16: mixed precision as PyTorch's autocast\n"            \
    "                            (docs/training.md, Mixed precision): MatMul/Gemm/Conv/Attention in P\n"          \
    "                            where the device has such a kernel, norms, softmax, losses and the\n"        \
    "                            optimizer in float32, master weights float32; `onnxtrain info\n"            \
    "                            MODEL --precision P` lists what runs in which. A model exported\n"      \
    "                            in fp16/bf16 trains in its own dtype without it (float32 masters)\n"
#define OT_ARGS_HELP_OPTIM                                                                                           \
    "  --optimizer NAME          sgd, adam, adamw. Default: adamw at lr 3e-3 (torch's other AdamW\n"              \
    "                            defaults; docs/training.md, Defaults)\n"                                          \
    "  --lr X                    learning rate > 0 (default 3e-3 without --optimizer; with it\n"                 \
    "                            PyTorch's: 0.01 for sgd, 0.001 for adam/adamw)\n"                                \
    "  --momentum X              sgd momentum (default 0; dampening is always 0). Without\n"                        \
    "                            --optimizer, it and --nesterov select sgd (lr 0.01)\n"                           \
    "  --nesterov                sgd Nesterov momentum (needs --momentum > 0)\n"                                    \
    "  --weight-decay X          sgd/adam: L2 added to the gradient; adamw: decoupled\n"                            \
    "                            (default 0; adamw 0.01)\n"                                                         \
    "  --beta1 X, --beta2 X      adam/adamw, each in [0, 1) (default 0.9, 0.999)\n"                                 \
    "  --eps X                   adam/adamw (default 1e-8)\n"                                                       \
    "  --clip-grad-norm X        clip the global L2 gradient norm to X (default: off), as\n"                        \
    "                            torch.nn.utils.clip_grad_norm_\n"                                                  \
    "  --schedule NAME           constant (default); warmup: lr*(s+1)/W for the first W steps;\n"                  \
    "                            cosine: warm-up, then lr*(1+cos(pi*(s-W)/(T-W)))/2 to step T\n"                    \
    "  --warmup-steps W          warm-up steps (default 0)\n"                                                       \
    "  --accum K                 micro-batches per optimizer step (gradient accumulation, in\n"                    \
    "                            accumulators in the arena; the step uses their mean; default 1,\n"                \
    "                            at most 2^20)\n"                                                                \
    "  --fuse-update             run each parameter's update as soon as its gradient is complete\n"             \
    "                            and free the gradient there: the same bits, a lower peak; each\n"              \
    "                            gradient is checked just before its own update (a NaN stops the\n"             \
    "                            step with earlier params updated, nothing written). Under\n"                 \
    "                            mpirun each gradient's sum over the ranks overlaps the backward\n"           \
    "                            pass (CPU). Not with --clip-grad-norm, --accum K > 1 or fp16\n"              \
    "                            loss scaling\n"                                                                \
    "  --loss-scale MODE         dynamic or off: fp16 loss scaling as torch.amp.GradScaler (default\n"         \
    "                            dynamic with --precision fp16, off otherwise): the loss's gradient\n"        \
    "                            times a scale S, divided out before the update; a step whose\n"             \
    "                            gradients overflow (Inf/NaN) is skipped and S halved\n"                      \
    "  --loss-scale-init X       first S (default 65536 = 2^16)\n"                                             \
    "  --loss-scale-growth X     S times X after --loss-scale-growth-interval clean steps (default 2)\n"      \
    "  --loss-scale-backoff X    S times X after an overflow, 0 < X < 1 (default 0.5)\n"                      \
    "  --loss-scale-growth-interval N  clean steps in a row before S grows (default 2000)\n"

/* Set up by ot_common_args_init: no inputs, every default. */
typedef struct ot_common_args {
    ot_input_specs inputs;  /* --input, repeatable */
    const char *labels;     /* --labels FILE, or NULL */
    ot_loss_options loss;   /* --loss, --loss-output, --class-axis, --ignore-index (default -100) */
    ot_str_list freeze;     /* --freeze PATTERN, repeatable (ir/name_pattern.h) */
    ot_str_list train;      /* --train PATTERN, repeatable */
    int64_t batch_size;     /* --batch-size, 1..INT32_MAX; 0: the command's default */
    uint64_t seed;          /* --seed */
    int n_threads;          /* --threads, 1..1024; 0: OpenMP's default */
    const char *device;     /* --device, or NULL (cpu) */
    bool tf32;              /* --tf32: float32 GEMMs on a GPU's TF32 tensor cores */
    ot_str_list bind;       /* --bind, repeatable */
    const char *remat;      /* --remat POLICY, or NULL (ot_common_args_to_train: OT_CLI_REMAT_DEFAULT) */
    int64_t memory_budget;  /* --memory-budget bytes; 0: none */
    double remat_time_limit; /* --remat-time-limit seconds for --remat optimal; 0: the default */
    ot_chunked_loss_mode chunked_loss; /* --chunked-loss; OFF by default */
    int64_t chunked_rows;   /* --chunked-loss-rows; 0: the default */
    ot_fused_attn_mode fused_attention; /* --fused-attention; OFF by default */
    /* the optimizer: the kind's defaults, then the values the user set (NaN: not set) */
    ot_optim_kind optim;    /* OT_OPTIM_DEFAULT_KIND unless --optimizer (optim_named); ot_args_optim_kind */
    bool optim_named;
    double lr, momentum, weight_decay, beta1, beta2, eps, clip;
    bool nesterov;
    ot_schedule_kind schedule;
    int64_t warmup;
    int64_t accum;          /* --accum, 1..OT_ARGS_MAX_ACCUM; 0: not given (1) */
    bool fuse_update;       /* --fuse-update (ot_train_options.fuse_update) */
    ot_lora_options lora;   /* --lora RANK[:ALPHA]; rank 0: none */
    char *lora_text;        /* --lora-target's text, split at commas (owned) */
    bool output_old;        /* the loss output came as --output (its old name) */
    ot_str_list lora_target; /* the globs, pointing into lora_text */
    ot_precision precision;  /* --precision; fp32 when not given */
    ot_loss_scale_options loss_scale; /* --loss-scale*; zero: the defaults */
} ot_common_args;

/* Reads option `code` with value `arg` into a when it is one of the shared options
 * (*handled true); otherwise leaves a alone and sets *handled false. */
ot_status ot_args_common(ot_common_args *a, int code, const char *arg, bool *handled, ot_error *err);

/* A command's own options for ot_args_parse: reads option `code` (value arg) into the
 * command's options `cmd` and sets *taken, or leaves *taken false to hand the code on
 * to ot_args_common (a code may also be noted and handed on, as eval's --labels). */
typedef ot_status (*ot_args_own_fn)(void *cmd, int code, const char *arg, bool *taken, ot_error *err);

/* The option loop of the commands over one model: getopt_long over argv, each code to
 * `own` first, then to ot_args_common; any other code is OT_E_USAGE "unknown or
 * incomplete option". -h stops the loop with *help true (the command prints its usage
 * and exits 0). The operands start at optind after it (ot_args_one_model). */
ot_status ot_args_parse(int argc, char **argv, const char *shortopts, const struct option *longopts,
                        ot_common_args *args, ot_args_own_fn own, void *cmd, bool *help, ot_error *err);
void ot_common_args_init(ot_common_args *a);
/* Notes on what was read (an old option name and what it became), to f, as
 * "onnxtrain CMD: note: ...". */
void ot_args_notes(const ot_common_args *a, const char *cmd, FILE *f);
void ot_common_args_free(ot_common_args *a);

/* Checks one output of a command (opt, path; NULL: none) against the model, its
 * external data and the shared options' data files (ot_run_files_check), before any
 * work. folder_of_files: a folder the command fills with files named after values. */
struct ot_model;
ot_status ot_args_check_output(const struct ot_model *m, const ot_common_args *a, const char *opt, const char *path,
                               bool folder_of_files, ot_error *err);

struct ot_train_options;
/* Copies the shared settings into training options (the lists point into a), the
 * optimizer included. */
void ot_common_args_to_train(const ot_common_args *a, struct ot_train_options *o);
/* The optimizer the options name: --optimizer, else SGD when --momentum or --nesterov
 * was given (its options), else OT_OPTIM_DEFAULT_KIND. */
ot_optim_kind ot_args_optim_kind(const ot_common_args *a);

/* Reads every input spec and the labels file (may be NULL) as .npy into d: inputs
 * named as given ("" for positional ones), labels as OT_DATA_LABELS (train/train.h).
 * Errors name the file. */
struct ot_dataset;
ot_status ot_args_load_dataset(const ot_input_specs *inputs, const char *labels, struct ot_dataset *d,
                               ot_error *err);

#endif
