/* cli.h — the subcommand table of the `onnxtrain` CLI. Each command lives in its own
 * cli/cmd_<name>.c and returns an exit code (an ot_status). */
#ifndef OT_CLI_H
#define OT_CLI_H

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

#endif
