/* cli.h — the subcommand table of the `onnxtrain` CLI. Each command lives in its own
 * cli/cmd_<name>.c and returns an exit code (an ot_status). */
#ifndef OT_CLI_H
#define OT_CLI_H

#include "cli/args.h"

typedef struct ot_cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
} ot_cli_command;

extern const ot_cli_command ot_cli_commands[];

int ot_cmd_info(int argc, char **argv);
int ot_cmd_eval(int argc, char **argv);
int ot_cmd_grad(int argc, char **argv);
int ot_cmd_train(int argc, char **argv);
int ot_cmd_plan(int argc, char **argv);
int ot_cmd_verify(int argc, char **argv);
int ot_cmd_report(int argc, char **argv);
int ot_cmd_bench(int argc, char **argv);

/* `info --precision P` (cli/info_precision.c): which nodes the mixed-precision rewrite
 * runs low on the CPU and which fall back to float32, as text or as a JSON member. */
ot_status ot_info_print_precision(FILE *f, const ot_graph *g, ot_precision p, bool json, ot_error *err);

/* The bare form's synthetic data (cli/cmd_bare.c), also `bench`'s without data: one
 * batch shaped by a plan-only session of the model at the batch and binds that every
 * command picks without data (cli/defaults.h: --batch-size, else the model's batch,
 * else 4; other symbolic dims --bind, else 8; *pick says which, the caller frees it
 * with ot_cli_batch_pick_free); seeded by --seed (train/train_synthetic.h). *batch
 * receives the batch. */
struct ot_model;
struct ot_dataset;
struct ot_cli_batch_pick;
ot_status ot_cli_synthetic_data(const ot_common_args *ca, struct ot_model *m, struct ot_dataset *d, int64_t *batch,
                                struct ot_cli_batch_pick *pick, ot_error *err);

/* `train`'s command line (argv[0] "train") read and checked as `train` reads it, with
 * nothing loaded, for the bare form (cli/cmd_bare.c): *ca gets the shared options
 * (the caller frees it with ot_common_args_free, also on failure), *model the model,
 * *out the -o file or NULL, *help whether --help was given. With -o, train's checks
 * before any work run too (the output's folder, validation data, the remat policy).
 * getopt permutes argv: pass a copy. */
ot_status ot_cmd_train_parse(int argc, char **argv, ot_common_args *ca, const char **model, const char **out,
                             bool *help, ot_error *err);

/* `onnxtrain [OPTIONS] MODEL.onnx` (cli/cmd_bare.c): argv[0] is the program. With
 * data it is `train` with -o MODEL.tuned.onnx in the current folder and --remat auto
 * by default; without, the plan, a verify on synthetic data and the command that
 * trains. */
int ot_cmd_bare(int argc, char **argv);
/* Whether the first argument after the program, not a command name, starts the bare
 * form: it is an option (options may come before the model), ends in ".onnx", or
 * names an existing file. Anything else is an unknown command. */
bool ot_cli_is_bare(const char *arg);

#endif
